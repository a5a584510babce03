//! Attention without a fused kernel, as Megatron-LM ran it before FlashAttention: `CoreAttention`
//! in `megatron/model/transformer.py` at v2.5 (2021) computes every head's scores `Q K^T` as a
//! batched GEMM (`torch.baddbmm`) into an `s x s` matrix in memory, runs the fused
//! scale-mask-softmax kernel over it, drops out probabilities (`--attention-dropout`, 0.1 by
//! default in `arguments.py`), and multiplies by V in a second batched GEMM (`torch.bmm`).
//! FlashAttention came to Megatron-LM in December 2022 (d693034), behind `--use-flash-attn`.
//!
//! The whole square is computed and the causal mask applied by the softmax, so the GEMMs do
//! twice a causal fused kernel's FLOPs, at the depth of a head (64 to 128) where GEMMs are slow;
//! and the matrix's element-wise passes are bound by memory. Their share falls as `a s / h^2`
//! (heads, sequence, width): large for the 1-4B models of the 2020-2021 tables, small past 100B.

use super::op_table::{OpKind, OpTable, Phase};
use crate::cost::kernels::{GemmRole, GemmShape, grouped_gemm_time};
use crate::hardware::PrecisionClass;
use crate::run::Run;
use crate::units::Bytes;

/// Bytes per score element the forward's element-wise kernels move: the softmax reads the scores
/// and writes the probabilities (2 + 2).
pub const FORWARD_SOFTMAX_BYTES: f64 = 4.0;
/// Bytes per score element of the forward's dropout: it reads the probabilities and writes its
/// output and a one-byte mask (2 + 2 + 1).
pub const FORWARD_DROPOUT_BYTES: f64 = 5.0;
/// Bytes per score element of the backward's softmax: it reads the saved probabilities and their
/// gradient and writes the scores' gradient (2 + 2 + 2).
pub const BACKWARD_SOFTMAX_BYTES: f64 = 6.0;
/// Bytes per score element of the backward's dropout: the gradient and the mask read, the
/// gradient written (2 + 1 + 2).
pub const BACKWARD_DROPOUT_BYTES: f64 = 5.0;
/// Bytes of one 16-bit operand element.
const OPERAND_BYTES: f64 = 2.0;

/// Pushes one layer's unfused attention, forward and backward, for one micro-batch on one GPU:
/// its heads (split by TP) over its queries (split by CP) against every key. The batched GEMMs
/// (one problem per sequence and head) are priced as grouped GEMMs of one shape
/// (`kernels::grouped_gemm_time`: the forward's at the grouped forward's measured rate, the
/// backward's at the input gradient's; none reduces into a weight), in 16 bits whatever the
/// recipe: FP8 recipes cast only the linear layers.
pub(super) fn push(run: &Run, table: &mut OpTable) {
    let model = run.model();
    let gpu = run.cluster().gpu();
    let seq = run.training().seq_len() as f64;
    let heads = model.num_attention_heads().max(1) as f64;
    let qk = model.qk_head_dim() as f64;
    let v = model.attention_output_width() as f64 / heads;
    let groups = run.training().micro_batch() as f64 * heads / run.plan().tp() as f64;
    let queries = seq / run.plan().cp() as f64;
    let scores = groups * queries * seq;
    let gemm = |m: f64, n: f64, k: f64, phase: Phase| {
        let shape = GemmShape { m, n, k };
        let bytes = (m * k + k * n + m * n) * OPERAND_BYTES * groups;
        let role = match phase {
            Phase::Forward => GemmRole::Forward,
            Phase::Backward => GemmRole::DataGradient,
        };
        let class = PrecisionClass::Bits16;
        let time = grouped_gemm_time(gpu, class, shape, groups, role, OPERAND_BYTES);
        (phase, (shape.flops() * groups, Bytes::new(bytes), time))
    };
    let (forward, backward) = (Phase::Forward, Phase::Backward);
    let rows = [
        // Forward: the scores, and the context from the probabilities and the values.
        ("attention-scores", gemm(queries, seq, qk, forward)),
        ("attention-context", gemm(queries, v, seq, forward)),
        // Backward: the probabilities' gradient (dO V^T) and the values' (P^T dO), then the
        // queries' (dS K) and the keys' (dS^T Q).
        ("attention-context", gemm(queries, seq, v, backward)),
        ("attention-context", gemm(seq, v, queries, backward)),
        ("attention-scores", gemm(queries, qk, seq, backward)),
        ("attention-scores", gemm(seq, qk, queries, backward)),
    ];
    for (name, (phase, (flops, bytes, time))) in rows {
        table.push(name, phase, OpKind::Gemm, flops, bytes, time);
    }
    let dropout = model.dropout();
    let forward = FORWARD_SOFTMAX_BYTES + if dropout { FORWARD_DROPOUT_BYTES } else { 0.0 };
    let backward = BACKWARD_SOFTMAX_BYTES + if dropout { BACKWARD_DROPOUT_BYTES } else { 0.0 };
    table.push_memory(gpu, "attention-softmax", Phase::Forward, Bytes::new(scores * forward));
    table.push_memory(gpu, "attention-softmax", Phase::Backward, Bytes::new(scores * backward));
}

/// Bytes per token one layer stores of its score matrix for the backward on one GPU: the
/// softmax's probabilities, and with dropout its mask and output (Korthikanti et al. 2022's
/// `5 a s^2 b` for the layer, split by TP over heads).
pub fn stored_score_bytes_per_token(run: &Run) -> f64 {
    let model = run.model();
    let per_score = if model.dropout() { 5.0 } else { 2.0 };
    let heads = model.num_attention_heads() as f64 / run.plan().tp() as f64;
    heads * run.training().seq_len() as f64 * per_score
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::op_table::Rows;
    use crate::plan::PlanSpec;
    use crate::run::test_spec;
    use std::sync::Arc;

    #[test]
    fn unfused_attention_does_the_whole_square_and_streams_the_score_matrix() {
        // GPT 1.7B of Narayanan et al. 2021 (24 heads of 96, seq 2048), micro-batch 16 on A100.
        let mut spec = test_spec("megatron-gpt-1.7b", 32, 2048, 512, 16, PlanSpec::default());
        spec.cluster.gpu = crate::presets::gpu("a100-80gb").unwrap();
        let stack = Arc::new(crate::presets::stack("megatron-lm-2020-2022").unwrap());
        let run = Run::from_spec_with_stack(&spec, stack).unwrap();
        let mut table = OpTable::with_capacity(Rows::Keep, 8);
        push(&run, &mut table);
        let scores = 16.0 * 24.0 * 2048.0 * 2048.0;
        // Two GEMMs forward and four backward, each 2 x scores x 96 FLOPs: the full square.
        assert_eq!(table.flops(Phase::Forward).value(), 2.0 * 2.0 * scores * 96.0);
        assert_eq!(table.flops(Phase::Backward).value(), 4.0 * 2.0 * scores * 96.0);
        // GPT keeps dropout: 9 bytes a score forward, 11 backward, at the GPU's streaming rate.
        let memory = |phase| table.time(phase, OpKind::Memory);
        let gpu = run.cluster().gpu();
        let rate = gpu.memory_bandwidth() * gpu.efficiency().memory;
        assert!((memory(Phase::Forward).value() - scores * 9.0 / rate.value()).abs() < 1e-12);
        assert!((memory(Phase::Backward).value() - scores * 11.0 / rate.value()).abs() < 1e-12);
        // Korthikanti et al. 2022: 5 a s^2 b bytes a layer, 5 a s per token.
        assert_eq!(stored_score_bytes_per_token(&run), 5.0 * 24.0 * 2048.0);
    }
}

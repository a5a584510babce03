//! The per-layer operation table: every GEMM, attention kernel, streaming kernel and in-layer
//! collective of one micro-batch on one GPU, forward and backward, with its FLOPs, bytes and time.
//!
//! Every time in a report is a sum over rows of these tables, so a number can always be traced to
//! the operation that produced it. Shapes are per GPU: TP splits heads and the FFN width, CP splits
//! the sequence, and sequence parallelism splits the element-wise work outside the GEMMs.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::dispatch::{Dispatch, deduplicated_time};
use crate::cost::kernels::{
    EAGER_ACTIVATION_BANDWIDTH, EAGER_NORM_BACKWARD_BANDWIDTH, EAGER_NORM_FORWARD_BANDWIDTH,
    GemmRole, GemmShape, attention_backward_time, attention_forward_time, eager_memory_time,
    grouped_gemm_time, launch_floor, recipe_gemm_speed,
};
use crate::cost::pytorch_ring::{self, RingShape};
use crate::hardware::PrecisionClass;
use crate::model::{MlpKind, RopeScaling};
use crate::plan::{CpComm, ExpertDispatch, Precision, RecomputeModule};
use crate::run::Run;
use crate::stack::CpKvExchange;
use crate::units::{Bytes, Flops, Seconds};

pub use crate::cost::op_table::{Op, OpKind, OpTable, OpTotals, Phase, PhaseTimes, Rerun, Rows};

/// Rows a transformer layer's table is given room for (it has a few dozen), and the embedding's,
/// head's or MTP projection's (a few).
pub(super) const LAYER_ROWS: usize = 48;
const END_ROWS: usize = 8;

// The eager element-wise work of a model feature that a stack does not fuse (`Stack::eager_ops`)
// is priced by the bytes its PyTorch kernels read and write, counted from the code below, at the
// GPU preset's streaming rate (`kernels::memory_time`: on Hopper 0.80 of HBM, where a measured
// device-to-device copy reaches 0.89, `measurements/h100-sxm-kernels.json`). Its tensors are
// hundreds of MB per micro-batch, so each kernel streams; their launches are not priced.

/// Bytes the eager YaRN rotation (Megatron-Core `_apply_rotary_pos_emb_bshd`,
/// `models/common/embeddings/rope_utils.py@core_v0.15.0..core_v0.18.0`) reads and writes per bf16
/// element of the rotated queries and keys, forward: `t * cos` (2 passes over the tensor),
/// `_rotate_half`'s negation of one half and concatenation (1 + 2), `* sin` (2), the sum (3)
/// and the final concatenation with the empty pass-through part (2), 12 passes of 2 bytes.
/// A fused rotary kernel reads and writes each element once.
pub const EAGER_YARN_ROPE_FORWARD_BYTES: f64 = 24.0;
/// The same rotation's backward, as autograd runs it: the gradients of the two products (2 + 2),
/// the negation (1), the concatenation of the halves' gradients (2), their sum (3), and the two
/// slices of the input (`t[..., :rot_dim]` and the empty `t[..., rot_dim:]`), each writing a
/// zeroed input-sized gradient (3 and 1), summed (3): 17 passes of 2 bytes.
pub const EAGER_YARN_ROPE_BACKWARD_BYTES: f64 = 34.0;
/// Bytes the eager rotation of Hugging Face transformers' Llama-family models
/// (`models/llama/modeling_llama.py`: `apply_rotary_pos_emb` with `rotate_half`, the whole head
/// dimension rotated) reads and writes per bf16 element of the rotated queries and keys,
/// forward: `q * cos` (2 passes), `rotate_half`'s negation of one half and concatenation
/// (1 + 2), `* sin` (2) and the sum (3), 10 passes of 2 bytes. The YaRN rotation above does the
/// same plus a concatenation with its pass-through part.
pub const EAGER_HF_ROPE_FORWARD_BYTES: f64 = 20.0;
/// The same rotation's backward, as autograd runs it: the gradients of the two products (2 + 2),
/// the negation (1), the two half slices of the input (`x[..., :d/2]` and `x[..., d/2:]`), each
/// writing a zeroed input-sized gradient and copying its half in (2 and 2), and the three
/// gradients of the input summed (3 + 3): 15 passes of 2 bytes.
pub const EAGER_HF_ROPE_BACKWARD_BYTES: f64 = 30.0;
/// Bytes per element of the experts' output Megatron-Core's `TEGroupedMLP._apply_bias`
/// (`transformer/moe/experts.py@core_v0.15.0..core_v0.18.0`) reads and writes in its forward, a
/// Python loop over the local experts of `t + b * p` (`b` the expert's output bias, `p` each
/// row's routing probability), then `torch.cat` and `.to(bf16)`, with probabilities of `p`
/// bytes: `b * p` writes `p`, the sum reads 2 + `p` and writes `p`, the concatenation reads and
/// writes `p`, and with fp32 probabilities the cast reads 4 and writes 2. bf16: 12; fp32: 28.
pub fn expert_bias_forward_bytes(probs: f64) -> f64 {
    let cast = if probs > 2.0 { probs + 2.0 } else { 0.0 };
    5.0 * probs + 2.0 + cast
}
/// The same loop's backward, as autograd runs it: the cast's gradient back to fp32 (6, fp32
/// only), the sum's gradient cast to the experts' bf16 output (6, fp32 only), the product's two
/// gradients (each `grad x other` read and written, then summed over rows for the bias and over
/// the width for the probability: 6 `p`), and the concatenation of the per-expert input
/// gradients that `torch.split` needs (4). bf16: 16; fp32: 40.
pub fn expert_bias_backward_bytes(probs: f64) -> f64 {
    let casts = if probs > 2.0 { 12.0 } else { 0.0 };
    6.0 * probs + 4.0 + casts
}
/// Bytes per bf16 element of the fc1 output (both halves of the gated MLP) that the eager clamp
/// of Megatron-Core's `weighted_bias_quick_geglu_impl` (`fusions/fused_bias_geglu.py@core_v0.15.0
/// ..core_v0.18.0`) reads and writes before its fused activation, forward: each half clamped
/// out of place (read and write) and the halves concatenated again (read and write), 4 passes.
pub const EAGER_GLU_CLAMP_FORWARD_BYTES: f64 = 8.0;
/// The clamp's backward: each clamp's gradient reads the gradient and its saved input and
/// writes (3 passes), and the halves' gradients are concatenated for the chunked input (2).
pub const EAGER_GLU_CLAMP_BACKWARD_BYTES: f64 = 10.0;
/// Bytes of one routing probability as Megatron-Core's experts see it: fp32 behind a flex
/// (DeepEP or HybridEP) dispatcher, which casts them (`token_dispatcher.py@core_v0.16.0`: "only
/// supports float32 probs", `.float()`), else the router's output in the activations' bf16 (the
/// router computes in the input's dtype unless `moe_router_dtype` is set,
/// `transformer/moe/router.py@core_v0.16.0`, and Megatron-Bridge's gpt-oss provider and bridge
/// set none at v0.2.0..v0.6.0).
fn routing_probability_bytes(dispatch: ExpertDispatch) -> f64 {
    match dispatch {
        ExpertDispatch::Deduplicated => 4.0,
        ExpertDispatch::AllToAll => Precision::ACTIVATION_BYTES,
    }
}

/// Per-GPU sizes shared by the tables of one run.
pub(super) struct Ctx<'a> {
    pub(super) run: &'a Run,
    /// Tokens per micro-batch on this GPU (micro batch x sequence / cp).
    pub(super) tokens: f64,
    pub(super) tp: f64,
    /// Divisor of the element-wise work outside GEMMs (tp with sequence parallelism, else 1).
    pub(super) sp: f64,
    class: PrecisionClass,
    precision: Precision,
    /// Whether the GPU's FP8 GEMMs take any operand layout (no transposed FP8 copies).
    fp8_any_layout: bool,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(run: &'a Run) -> Self {
        let plan = run.plan();
        let training = run.training();
        let precision = training.precision();
        Ctx {
            run,
            tokens: run.tokens_per_microbatch(),
            tp: plan.tp() as f64,
            sp: plan.sequence_split() as f64,
            class: precision.gemm_class(),
            precision,
            fp8_any_layout: run
                .cluster()
                .gpu()
                .generation()
                .is_some_and(|generation| generation.fp8_gemm_any_layout()),
        }
    }

    /// Whether attention runs in MXFP8: the stack's recipe turns FP8 attention on
    /// ([`crate::stack::Stack::fp8_attention`]) and this layer runs the MXFP8 recipe (not a BF16
    /// layer of it). Under another FP8 recipe the kernel's speed was not measured, so attention is
    /// priced as BF16.
    pub(super) fn mxfp8_attention(&self) -> bool {
        self.run.stack().fp8_attention() && self.precision == Precision::Mxfp8
    }

    pub(super) fn gemm(&self, table: &mut OpTable, name: &'static str, n: f64, k: f64) {
        self.grouped_gemm(table, name, self.tokens, 1.0, n, k);
    }

    /// `groups` GEMMs of `rows / groups` rows each against their own `k x n` weights, run as one
    /// grouped kernel (routed experts; `groups = 1` is a plain GEMM).
    fn grouped_gemm(
        &self,
        table: &mut OpTable,
        name: &'static str,
        rows: f64,
        groups: f64,
        n: f64,
        k: f64,
    ) {
        let gpu = self.run.cluster().gpu();
        let input_bytes = self.precision.saved_gemm_input_bytes();
        let m = rows / groups;
        let forward = GemmShape { m, n, k };
        // Backward: the input gradient (m x k from m x n and n x k) and the weight gradient
        // (k x n, reducing over the tokens).
        let data_grad = GemmShape { m, n: k, k: n };
        let weight_grad = GemmShape { m: k, n, k: m };
        let bytes = |s: GemmShape| {
            Bytes::new(((s.m * s.k + s.k * s.n) * input_bytes + s.m * s.n * 2.0) * groups)
        };
        let speed = recipe_gemm_speed(gpu, self.precision);
        // Routed experts run as one GEMM launch each: the group lasts at least its launches,
        // which bind when each expert's GEMM is shorter than one (`kernels::launch_floor`).
        let floor = if groups > 1.0 {
            launch_floor(self.run.stack().expert_launches(), groups)
        } else {
            Seconds::ZERO
        };
        let time = |s: GemmShape, role| {
            (grouped_gemm_time(gpu, self.class, s, groups, role, input_bytes) / speed).max(floor)
        };
        let rows = [
            (Phase::Forward, OpKind::Gemm, forward, GemmRole::Forward),
            (Phase::Backward, OpKind::Gemm, data_grad, GemmRole::DataGradient),
            (Phase::Backward, OpKind::WeightGradient, weight_grad, GemmRole::WeightGradient),
        ];
        for (phase, kind, shape, role) in rows {
            table.push(name, phase, kind, shape.flops() * groups, bytes(shape), time(shape, role));
        }
    }

    /// A memory-bound kernel moving `bytes_per_token` per token forward and twice that backward.
    /// Norms and activations of a stack that runs them as eager PyTorch code move at the
    /// measured eager rates instead of the fused kernels'.
    pub(super) fn streaming(&self, table: &mut OpTable, name: &'static str, bytes_per_token: f64) {
        let gpu = self.run.cluster().gpu();
        let forward = Bytes::new(bytes_per_token * self.tokens);
        let backward = forward * 2.0;
        let eager = match name {
            _ if !self.run.stack().eager_elementwise() => None,
            "input-norm" | "mlp-norm" | "final-norm" => {
                Some((EAGER_NORM_FORWARD_BANDWIDTH, EAGER_NORM_BACKWARD_BANDWIDTH))
            }
            "activation" => Some((EAGER_ACTIVATION_BANDWIDTH, EAGER_ACTIVATION_BANDWIDTH)),
            _ => None,
        };
        match eager {
            Some((forward_fraction, backward_fraction)) => {
                let time = |bytes, fraction| eager_memory_time(gpu, bytes, fraction);
                let kind = OpKind::Memory;
                table.push(
                    name,
                    Phase::Forward,
                    kind,
                    Flops::ZERO,
                    forward,
                    time(forward, forward_fraction),
                );
                table.push(
                    name,
                    Phase::Backward,
                    kind,
                    Flops::ZERO,
                    backward,
                    time(backward, backward_fraction),
                );
            }
            None => {
                table.push_memory(gpu, name, Phase::Forward, forward);
                table.push_memory(gpu, name, Phase::Backward, backward);
            }
        }
    }

    /// Tensor-parallel collectives around one block: forward and backward each move one
    /// activation-sized buffer (an all-reduce, or an all-gather plus a reduce-scatter with SP).
    pub(super) fn tp_block_comm(&self, table: &mut OpTable, name: &'static str) {
        let plan = self.run.plan();
        if plan.tp() == 1 {
            return;
        }
        let links = self.run.cluster().interconnect();
        let group = Group { size: plan.tp(), stride: 1 };
        let bytes = Bytes::new(
            self.tokens * self.run.model().hidden_size() as f64 * Precision::ACTIVATION_BYTES,
        );
        let time = if plan.sequence_parallel() {
            collective_time(links, Collective::AllGather, group, bytes)
                + collective_time(links, Collective::ReduceScatter, group, bytes)
        } else {
            collective_time(links, Collective::AllReduce, group, bytes)
        };
        table.push(name, Phase::Forward, OpKind::TpComm, Flops::ZERO, bytes, time);
        table.push(name, Phase::Backward, OpKind::TpComm, Flops::ZERO, bytes, time);
    }

    /// Quantizing the GEMM operands of a low-precision recipe: `forward` elements per token of
    /// forward GEMM inputs and `backward` of backward output gradients (nothing in BF16).
    pub(super) fn quantize(&self, table: &mut OpTable, forward: f64, backward: f64) {
        let cast = self.precision.cast_bytes_per_element(self.fp8_any_layout);
        if cast > 0.0 {
            let gpu = self.run.cluster().gpu();
            let forward = Bytes::new(cast * forward * self.tokens);
            let backward = Bytes::new(cast * backward * self.tokens);
            table.push_memory(gpu, "quantize", Phase::Forward, forward);
            table.push_memory(gpu, "quantize", Phase::Backward, backward);
        }
    }
}

/// The operations of one transformer layer for one micro-batch: with a dense MLP, or with the
/// model's mixture of experts when `dense_mlp` is false.
pub fn transformer_layer(run: &Run, dense_mlp: bool, rows: Rows) -> OpTable {
    let ctx = Ctx::new(run);
    let model = run.model();
    let h = model.hidden_size() as f64;
    let mut table = OpTable::with_capacity(rows, LAYER_ROWS);
    let act = Precision::ACTIVATION_BYTES;
    attention_block(&ctx, &mut table, true);
    let mlp_width = mlp_block(&ctx, &mut table, dense_mlp);
    if model.dropout() {
        // Two dropouts per layer: read, write, and a one-byte mask each.
        ctx.streaming(&mut table, "dropout", 2.0 * (2.0 * act + 1.0) * h / ctx.sp);
    }
    let tp = ctx.tp;
    ctx.quantize(
        &mut table,
        2.0 * h + (model.attention_output_width() + mlp_width) as f64 / tp,
        2.0 * h
            + (model.query_width() + 2 * model.kv_width() + model.up_width(mlp_width)) as f64 / tp,
    );
    table
}

/// The quantizations of MXFP8 attention: Transformer Engine's `DotProductAttention` casts the
/// queries, keys and values before the forward, and the output and its gradient before the
/// backward, each in the recipe's MXFP8 layout.
fn mxfp8_attention_casts(ctx: &Ctx, table: &mut OpTable) {
    let model = ctx.run.model();
    let kv_width = attended_kv_width(ctx.run);
    let gpu = ctx.run.cluster().gpu();
    let cast = ctx.precision.cast_bytes_per_element(ctx.fp8_any_layout);
    let per_token = |width: u64| cast * width as f64 / ctx.tp * ctx.tokens;
    let forward = Bytes::new(per_token(model.query_width() + 2 * kv_width));
    let backward = Bytes::new(2.0 * per_token(model.attention_output_width()));
    table.push_memory(gpu, "attention-quantize", Phase::Forward, forward);
    table.push_memory(gpu, "attention-quantize", Phase::Backward, backward);
}

/// Width of the keys (or values) the attention kernel reads, stores for its backward and context
/// parallelism exchanges: the model's, or the query heads' where the stack's model code repeats
/// grouped-query key/value heads before the kernel (torchtitan's `repeat_kv`).
pub(super) fn attended_kv_width(run: &Run) -> u64 {
    let model = run.model();
    if run.stack().repeats_kv_heads() && model.mla().is_none() {
        model.num_attention_heads() * model.head_dim()
    } else {
        model.kv_width()
    }
}

/// The attention block of a layer: its TP collectives, pre-norm (unless it reads another
/// block's, `pre_norm` false), projections, rotary embedding, the attention kernel, the output
/// projection and the residual add.
pub(super) fn attention_block(ctx: &Ctx, table: &mut OpTable, pre_norm: bool) {
    let model = ctx.run.model();
    let h = model.hidden_size() as f64;
    let (tp, sp) = (ctx.tp, ctx.sp);
    let act = Precision::ACTIVATION_BYTES;
    ctx.tp_block_comm(table, "tp-attention");
    if pre_norm {
        table.enter(Some(RecomputeModule::Layernorm));
        ctx.streaming(table, "input-norm", 2.0 * h * act / sp);
        table.enter(None);
    }
    let gemms = model.attention_gemms();
    let (projection, inputs) = gemms.split_last().expect("attention has an output projection");
    for gemm in inputs {
        // Latent attention's up projections read the compressed query and key/value, not the
        // layer input.
        let up_projection = model.mla().is_some() && !gemm.reads_layer_input;
        table.enter(up_projection.then_some(RecomputeModule::MlaUpProj));
        let split = if gemm.split_by_tp { tp } else { 1.0 };
        ctx.gemm(table, gemm.name, gemm.output as f64 / split, gemm.input as f64);
    }
    table.enter(None);
    if let Some(mla) = model.mla() {
        // Norms of the compressed query and key/value (replicated across TP ranks).
        let latent = (mla.q_lora_rank + mla.kv_lora_rank) as f64;
        ctx.streaming(table, "latent-norm", 2.0 * latent * act);
    }
    if model.position_embedding() == crate::model::PositionEmbedding::Rope {
        // Megatron-LM's MLA up-projection checkpoint reruns the rotary embedding too.
        table.enter(model.mla().map(|_| RecomputeModule::MlaUpProj));
        let width = (model.query_width() + model.kv_width()) as f64 / tp;
        let eager = ctx.run.stack().eager_ops();
        let eager_bytes = if model.rope_scaling() == Some(RopeScaling::Yarn) && eager.yarn_rope {
            Some((EAGER_YARN_ROPE_FORWARD_BYTES, EAGER_YARN_ROPE_BACKWARD_BYTES))
        } else if eager.rope {
            Some((EAGER_HF_ROPE_FORWARD_BYTES, EAGER_HF_ROPE_BACKWARD_BYTES))
        } else {
            None
        };
        match eager_bytes {
            Some((forward_bytes, backward_bytes)) => {
                let gpu = ctx.run.cluster().gpu();
                let elements = width * ctx.tokens;
                let forward = Bytes::new(forward_bytes * elements);
                let backward = Bytes::new(backward_bytes * elements);
                table.push_memory(gpu, "rope", Phase::Forward, forward);
                table.push_memory(gpu, "rope", Phase::Backward, backward);
            }
            None => ctx.streaming(table, "rope", 2.0 * width * act),
        }
    }
    table.enter(Some(RecomputeModule::CoreAttn));
    let repeated = attended_kv_width(ctx.run);
    if repeated > model.kv_width() {
        // The copy of the key/value heads up to the query heads (read the heads, write the
        // copies), and in the backward the sum of the copies' gradients back onto the heads.
        let gpu = ctx.run.cluster().gpu();
        let bytes = Bytes::new(2.0 * (repeated + model.kv_width()) as f64 * act / tp * ctx.tokens);
        table.push_memory(gpu, "repeat-kv", Phase::Forward, bytes);
        table.push_memory(gpu, "repeat-kv", Phase::Backward, bytes);
    }
    attention(ctx, table);
    table.enter(None);
    if model.attention_output_gate() {
        // The sigmoid gate times the attention output: both read, the product written.
        let width = model.attention_output_width() as f64;
        ctx.streaming(table, "output-gate", 3.0 * width * act / tp);
    }
    ctx.gemm(table, projection.name, h, projection.input as f64 / tp);
    ctx.streaming(table, "residual", 3.0 * h * act / sp);
}

/// The MLP block of a layer (the model's experts when `dense_mlp` is false): pre-norm, the
/// experts or the dense MLP with its TP collectives, and the residual add. Returns the width of
/// the dense MLP it ran (the shared experts' for an MoE block, 0 without).
pub(super) fn mlp_block(ctx: &Ctx, table: &mut OpTable, dense_mlp: bool) -> u64 {
    let model = ctx.run.model();
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    table.enter(Some(RecomputeModule::Layernorm));
    ctx.streaming(table, "mlp-norm", 2.0 * h * act / ctx.sp);
    let (mlp_width, mlp_module) = match (dense_mlp, model.moe()) {
        (false, Some(moe)) => {
            table.enter(Some(RecomputeModule::Moe));
            experts(ctx, table);
            (moe.shared_ffn_hidden_size, RecomputeModule::SharedExperts)
        }
        _ => (model.ffn_hidden_size(), RecomputeModule::Mlp),
    };
    if mlp_width > 0 {
        table.enter(Some(mlp_module));
        ctx.tp_block_comm(table, "tp-mlp");
        dense_mlp_ops(ctx, table, "fc1", "fc2", mlp_width);
    }
    table.enter(None);
    ctx.streaming(table, "residual", 3.0 * h * act / ctx.sp);
    mlp_width
}

/// A dense (or shared-expert) MLP of intermediate width `ffn`, split across TP ranks.
fn dense_mlp_ops(ctx: &Ctx, table: &mut OpTable, up: &'static str, down: &'static str, ffn: u64) {
    let model = ctx.run.model();
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    ctx.gemm(table, up, model.up_width(ffn) as f64 / ctx.tp, h);
    ctx.streaming(table, "activation", activation_bytes(model, ffn) * act / ctx.tp);
    ctx.gemm(table, down, h, ffn as f64 / ctx.tp);
}

/// Elements an MLP's activation function reads and writes per token for width `ffn`.
fn activation_bytes(model: &crate::model::Model, ffn: u64) -> f64 {
    match model.mlp() {
        MlpKind::Gated => 3.0 * ffn as f64,
        MlpKind::Plain => 2.0 * ffn as f64,
    }
}

/// Routed tokens (token-expert pairs) one GPU's experts compute per micro-batch, on the
/// busiest rank: each of the `tokens / sp` tokens a rank holds is sent to `top_k` experts, the
/// expert-parallel all-to-all balances them over the group, and an expert-tensor-parallel group
/// gathers its members' tokens.
pub fn routed_rows(run: &Run) -> f64 {
    let model = run.model();
    let plan = run.plan();
    let top_k = model.moe().map_or(0, |moe| moe.top_k) as f64;
    run.tokens_per_microbatch() / plan.sequence_split() as f64
        * top_k
        * plan.etp() as f64
        * plan.expert_load_factor()
}

/// Router, token dispatch, the routed experts as grouped GEMMs, and the combine.
fn experts(ctx: &Ctx, table: &mut OpTable) {
    let run = ctx.run;
    let model = run.model();
    let plan = run.plan();
    let gpu = run.cluster().gpu();
    let Some(moe) = model.moe() else { return };
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let local_tokens = ctx.tokens / ctx.sp;
    // Router: a small GEMM to the expert logits, then softmax / top-k in fp32.
    let router = Ctx { tokens: local_tokens, ..Ctx::new(run) };
    router.gemm(table, "router", moe.num_experts as f64, h);
    ctx.streaming(table, "router-topk", 3.0 * 4.0 * moe.num_experts as f64 / ctx.sp);

    // A LatentMoE layer projects its tokens down before the dispatch and back up after the
    // combine: the experts, the all-to-alls and the permutes move the latent width.
    let width = model.expert_width() as f64;
    if moe.latent_size > 0 {
        router.gemm(table, "latent-down", width, h);
        router.gemm(table, "latent-up", h, width);
    }
    let rows = routed_rows(run);
    let local_experts = (moe.num_experts / plan.ep()) as f64;
    let etp = plan.etp() as f64;
    let ffn = moe.expert_ffn_hidden_size as f64 / etp;
    // Permute before the dispatch and unpermute after the combine: one read and one write of
    // each routed row.
    let permute = Bytes::new(2.0 * rows * width * act);
    table.push_memory(gpu, "permute", Phase::Forward, permute * 2.0);
    table.push_memory(gpu, "permute", Phase::Backward, permute * 2.0);
    expert_parallel_comm(ctx, table, rows);
    let up = model.up_width(moe.expert_ffn_hidden_size) as f64 / etp;
    ctx.grouped_gemm(table, "expert-fc1", rows, local_experts, up, width);
    let activation =
        Bytes::new(activation_bytes(model, moe.expert_ffn_hidden_size) / etp * act * rows);
    let eager = run.stack().eager_ops();
    table.enter(Some(RecomputeModule::MoeAct));
    if model.glu_clamp() && eager.glu_clamp {
        let elements = up * rows;
        let forward = Bytes::new(EAGER_GLU_CLAMP_FORWARD_BYTES * elements);
        let backward = Bytes::new(EAGER_GLU_CLAMP_BACKWARD_BYTES * elements);
        table.push_memory(gpu, "expert-clamp", Phase::Forward, forward);
        table.push_memory(gpu, "expert-clamp", Phase::Backward, backward);
    }
    table.push_memory(gpu, "expert-activation", Phase::Forward, activation);
    table.push_memory(gpu, "expert-activation", Phase::Backward, activation * 2.0);
    table.enter(Some(RecomputeModule::Moe));
    ctx.grouped_gemm(table, "expert-fc2", rows, local_experts, width, ffn);
    if model.linear_bias() && eager.expert_bias {
        let probs = routing_probability_bytes(plan.expert_dispatch());
        let elements = rows * width;
        let forward = Bytes::new(expert_bias_forward_bytes(probs) * elements);
        let backward = Bytes::new(expert_bias_backward_bytes(probs) * elements);
        table.push_memory(gpu, "expert-bias", Phase::Forward, forward);
        table.push_memory(gpu, "expert-bias", Phase::Backward, backward);
    }
    let cast = ctx.precision.cast_bytes_per_element(ctx.fp8_any_layout);
    if cast > 0.0 {
        let forward = Bytes::new(cast * (width + ffn) * rows);
        let backward = Bytes::new(cast * (width + up) * rows);
        // Two tensors a phase, each split per expert: quantized one expert at a time where the
        // recipe has no fused split quantization (`quantizes_per_expert`).
        let floor = if ctx.precision.quantizes_per_expert() {
            launch_floor(run.stack().expert_launches(), 2.0 * local_experts)
        } else {
            Seconds::ZERO
        };
        table.push_memory_at_least(gpu, "expert-quantize", Phase::Forward, forward, floor);
        table.push_memory_at_least(gpu, "expert-quantize", Phase::Backward, backward, floor);
    }
}

/// Dispatch and combine all-to-alls over the expert-parallel group (forward, and again for the
/// gradients in the backward), plus the expert-tensor-parallel all-gather / reduce-scatter of
/// the routed tokens.
fn expert_parallel_comm(ctx: &Ctx, table: &mut OpTable, rows: f64) {
    let run = ctx.run;
    let plan = run.plan();
    let links = run.cluster().interconnect();
    let h = run.model().expert_width() as f64;
    let etp = plan.etp();
    // Each rank sends (and receives) its routed rows before the ETP gather.
    let sent = Bytes::new(rows / etp as f64 * h * Precision::ACTIVATION_BYTES);
    if plan.ep() > 1 {
        // Experts are laid out etp-fastest (MoE Parallel Folding): EP peers sit etp ranks apart.
        let group = Group { size: plan.ep(), stride: etp };
        let a2a = match (plan.expert_dispatch(), run.model().moe()) {
            (ExpertDispatch::Deduplicated, Some(moe)) => {
                let dispatch = Dispatch {
                    experts: moe.num_experts,
                    top_k: moe.top_k,
                    tokens: rows / etp as f64 / moe.top_k as f64,
                    token_bytes: h * Precision::ACTIVATION_BYTES,
                };
                deduplicated_time(links, group, dispatch)
            }
            _ => collective_time(links, Collective::AllToAll, group, sent),
        };
        for phase in [Phase::Forward, Phase::Backward] {
            table.push("ep-dispatch", phase, OpKind::EpComm, Flops::ZERO, sent, a2a);
            table.push("ep-combine", phase, OpKind::EpComm, Flops::ZERO, sent, a2a);
        }
    }
    if etp > 1 {
        let group = Group { size: etp, stride: 1 };
        let gathered = Bytes::new(rows * h * Precision::ACTIVATION_BYTES);
        let time = collective_time(links, Collective::AllGather, group, gathered)
            + collective_time(links, Collective::ReduceScatter, group, gathered);
        table.push("etp-comm", Phase::Forward, OpKind::TpComm, Flops::ZERO, gathered, time);
        table.push("etp-comm", Phase::Backward, OpKind::TpComm, Flops::ZERO, gathered, time);
    }
}

/// The extra work of a multi-token-prediction module beyond its transformer layer and head:
/// two input norms and the `2h -> h` projection of the concatenated embedding and hidden state.
pub fn mtp_projection(run: &Run, rows: Rows) -> OpTable {
    let ctx = Ctx::new(run);
    let h = run.model().hidden_size() as f64;
    let mut table = OpTable::with_capacity(rows, END_ROWS);
    ctx.streaming(&mut table, "mtp-norms", 4.0 * h * Precision::ACTIVATION_BYTES / ctx.sp);
    ctx.gemm(&mut table, "mtp-projection", h / ctx.tp, 2.0 * h);
    table
}

/// The attention of one layer (a fused kernel, or the unfused one of a stack that has none), and
/// the context-parallel exchange that feeds it.
fn attention(ctx: &Ctx, table: &mut OpTable) {
    let run = ctx.run;
    let model = run.model();
    let plan = run.plan();
    let gpu = run.cluster().gpu();
    let seq = run.training().seq_len() as f64;
    let micro_batch = run.training().micro_batch() as f64;
    // Causal attention over the whole sequence, split evenly across TP heads and CP ranks (CP
    // balances the causal triangle by giving each rank a head and a tail chunk). Ulysses ranks
    // attend over the whole sequence with a share of the heads; ring ranks over their chunk, and
    // Mesh-Attention ranks too (they compute their tile a block at a time).
    let reach = model.layer_attention_flops_by_reach(run.training().seq_len());
    let share = seq * micro_batch / (ctx.tp * plan.cp() as f64);
    let (full, windowed) = (Flops::new(reach.full * share), Flops::new(reach.windowed * share));
    let flops = full + windowed;
    let kernel_seq = seq * plan.cp_a2a() as f64 / plan.cp() as f64;
    // A sliding-window layer's forward kernel reaches only `window` keys from each query block,
    // so it runs at the rate of a sequence that long: NVIDIA's cuDNN benchmark of gpt-oss's
    // attention (64 heads of 64, a 1024 window, 2 x 8192 tokens on GB200) ran its forward within
    // 1.5 % of meshplan's curve at 1024 tokens. Its backward, parallel over the key blocks of the
    // whole sequence, ran at 0.70 of the full-length rate: one point, so the backward keeps the
    // sequence's rate (`measurements/README.md`).
    let window_seq = kernel_seq.min(reach.window as f64);
    let head_dim = model.qk_head_dim() as f64;
    if run.stack().unfused_attention(gpu.generation()) {
        crate::cost::unfused_attention::push(run, table);
        if plan.cp() > 1 {
            context_parallel_exchange(ctx, table);
        }
        return;
    }
    let (forward_speed, backward_speed) = run.stack().attention_speed(gpu.generation());
    // MXFP8 attention (a recipe's FP8 dot-product attention) at the GPU's measured speed against
    // BF16 for this head dimension and length; sliding windows keep BF16's speed (NVIDIA's one
    // windowed MXFP8 measurement, gpt-oss on GB200 and GB300, ran a backward that grew with the
    // whole sequence: `measurements/README.md`).
    let measured = ctx
        .mxfp8_attention()
        .then(|| gpu.mxfp8_attention_speed(model.qk_head_dim(), kernel_seq))
        .flatten();
    if measured.is_some() {
        mxfp8_attention_casts(ctx, table);
    }
    let (fp8_forward, fp8_backward) = measured.unwrap_or((1.0, 1.0));
    let forward =
        attention_forward_time(gpu, full, kernel_seq, head_dim, forward_speed * fp8_forward)
            + attention_forward_time(gpu, windowed, window_seq, head_dim, forward_speed);
    let backward =
        attention_backward_time(gpu, full, kernel_seq, head_dim, backward_speed * fp8_backward)
            + attention_backward_time(gpu, windowed, kernel_seq, head_dim, backward_speed);
    table.push("attention", Phase::Forward, OpKind::Attention, flops, Bytes::ZERO, forward);
    table.push("attention", Phase::Backward, OpKind::Attention, flops * 2.0, Bytes::ZERO, backward);
    if plan.cp() > 1 {
        context_parallel_exchange(ctx, table);
    }
}

/// The context-parallel exchange of one layer. Ring: `cp - 1` steps, each passing this rank's
/// keys and values to the next rank (the backward passes them again with their gradients),
/// overlapped with the attention blocks. Ulysses: all-to-alls of Q, K, V before attention and of
/// the output after it (their gradients in the backward), blocking the layer. Hierarchical: the
/// all-to-all inside the NVLink domain, then a ring of the remaining ranks over the gathered
/// sequence chunk with the domain's share of the heads. Mesh-Attention: gathers over the rows and
/// columns of a grid of the cp ranks, overlapped like the ring's steps (`mesh_attention.rs`).
fn context_parallel_exchange(ctx: &Ctx, table: &mut OpTable) {
    let run = ctx.run;
    let model = run.model();
    let plan = run.plan();
    if plan.cp_comm() == CpComm::Mesh {
        crate::cost::mesh_attention::push_exchange(run, table);
        return;
    }
    let links = run.cluster().interconnect();
    let act = Precision::ACTIVATION_BYTES;
    let (a2a, ring) = (plan.cp_a2a(), plan.cp_ring());
    let width = |w: u64| Bytes::new(ctx.tokens * w as f64 / ctx.tp * act);
    if a2a > 1 {
        let group = Group { size: a2a, stride: plan.tp() };
        let time = |bytes: Bytes| collective_time(links, Collective::AllToAll, group, bytes);
        let forward = [
            width(model.query_width() + 2 * model.kv_width()),
            width(model.attention_output_width()),
        ];
        let bytes: Bytes = forward.iter().copied().sum();
        let seconds: Seconds = forward.iter().map(|&b| time(b)).sum();
        for phase in [Phase::Forward, Phase::Backward] {
            table.push("cp-all-to-all", phase, OpKind::CpAllToAll, Flops::ZERO, bytes, seconds);
        }
    }
    if ring > 1 {
        // After the all-to-all a ring rank holds a2a times the tokens with 1 / a2a of the heads:
        // its key/value shard has the same size as without the all-to-all.
        // The ring's steps run in lock-step: one that spans NVLink domains paces every step at
        // a send/receive over the NICs.
        let kv_width = attended_kv_width(ctx.run);
        let kv_bytes = width(2 * kv_width);
        let group = Group { size: ring, stride: plan.tp() * a2a };
        if ctx.run.stack().cp_kv_exchange() == CpKvExchange::AllGather {
            let (tokens, tp) = (ctx.tokens, ctx.tp);
            let shape = RingShape { tokens, tp, kv_width, kv_bytes, group, ring };
            pytorch_ring::push(ctx.run, table, shape);
            return;
        }
        let step = collective_time(links, Collective::SendRecv, group, kv_bytes);
        let steps = (ring - 1) as f64;
        table.push(
            "cp-ring",
            Phase::Forward,
            OpKind::CpComm,
            Flops::ZERO,
            kv_bytes * steps,
            step * steps,
        );
        table.push(
            "cp-ring",
            Phase::Backward,
            OpKind::CpComm,
            Flops::ZERO,
            kv_bytes * (2.0 * steps),
            step * (2.0 * steps),
        );
    }
}

/// The input embedding on the first stage: a lookup, and its TP reduction.
pub fn embedding(run: &Run, rows: Rows) -> OpTable {
    let ctx = Ctx::new(run);
    let h = run.model().hidden_size() as f64;
    let mut table = OpTable::with_capacity(rows, END_ROWS);
    ctx.streaming(&mut table, "embedding", 2.0 * h * Precision::ACTIVATION_BYTES / ctx.sp);
    if run.plan().tp() > 1 {
        let links = run.cluster().interconnect();
        let group = Group { size: run.plan().tp(), stride: 1 };
        let bytes = Bytes::new(ctx.tokens * h * Precision::ACTIVATION_BYTES);
        let kind = if run.plan().sequence_parallel() {
            Collective::ReduceScatter
        } else {
            Collective::AllReduce
        };
        let time = collective_time(links, kind, group, bytes);
        table.push("tp-embedding", Phase::Forward, OpKind::TpComm, Flops::ZERO, bytes, time);
    }
    table
}

/// The final norm, logit GEMM and cross-entropy loss on the last stage.
pub fn head(run: &Run, rows: Rows) -> OpTable {
    let ctx = Ctx::new(run);
    let model = run.model();
    let gpu = run.cluster().gpu();
    let h = model.hidden_size() as f64;
    let mut table = OpTable::with_capacity(rows, END_ROWS);
    ctx.tp_block_comm(&mut table, "tp-head");
    ctx.streaming(&mut table, "final-norm", 2.0 * h * Precision::ACTIVATION_BYTES / ctx.sp);
    // The logit layer stays in 16-bit under every recipe.
    let vocab = padded_vocab(run) / ctx.tp;
    let logit_ctx =
        Ctx { class: PrecisionClass::Bits16, precision: Precision::Bf16, ..Ctx::new(run) };
    logit_ctx.gemm(&mut table, "logits", vocab, h);
    // Vocab-parallel cross-entropy in fp32: max, exp-sum and loss passes forward (~12 bytes per
    // logit), softmax gradient backward (~8 bytes).
    let forward = Bytes::new(12.0 * vocab * ctx.tokens);
    let backward = Bytes::new(8.0 * vocab * ctx.tokens);
    table.push_memory(gpu, "cross-entropy", Phase::Forward, forward);
    table.push_memory(gpu, "cross-entropy", Phase::Backward, backward);
    table
}

/// Vocabulary padded as Megatron-LM pads it: to a multiple of 128 x tp.
pub fn padded_vocab(run: &Run) -> f64 {
    let multiple = 128 * run.plan().tp();
    run.model().vocab_size().div_ceil(multiple) as f64 * multiple as f64
}

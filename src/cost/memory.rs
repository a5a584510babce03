//! Memory per pipeline stage: model states by their real dtypes and sharding, activations by
//! Korthikanti et al. 2022 (adapted to fused attention, GQA and gated MLPs), the micro-batches each
//! stage holds under 1F1B or interleaved 1F1B, logits, transient buffers and a fragmentation
//! allowance.
//!
//! Model states per parameter (Megatron-LM mixed precision): 2 bytes of 16-bit weights, 4 bytes of
//! FP32 gradient accumulation buffer, and 12 bytes of optimizer state (FP32 master copy and two
//! Adam moments). The distributed optimizer / ZeRO-1 shards the 12 bytes over the data-parallel
//! (x context-parallel) group, ZeRO-2 also the gradients, ZeRO-3 / FSDP everything, which gives
//! Megatron's `6 + 12/dp` and the ZeRO paper's `2 + 2 + 12/Nd` shapes.

use crate::cost::layer::padded_vocab;
use crate::estimate::{MemoryBreakdown, StageMemory};
use crate::model::{MlpKind, PositionEmbedding};
use crate::plan::{Precision, RecomputeKind, Sharding};
use crate::run::Run;
use crate::units::Bytes;

/// Bytes per parameter of the 16-bit weights.
const WEIGHT_BYTES: f64 = 2.0;
/// Bytes per parameter of the FP32 gradient (main-grad) buffer.
const GRADIENT_BYTES: f64 = 4.0;
/// Bytes per parameter of FP32 master weights plus Adam's two moments.
const OPTIMIZER_BYTES: f64 = 12.0;
/// CUDA, cuBLAS and NCCL workspaces that every rank holds (about 1 GiB in PyTorch jobs).
const RUNTIME_WORKSPACE_GIB: f64 = 1.0;
/// Allocator fragmentation allowance: the PyTorch caching allocator typically reserves 5-10% more
/// than it has allocated in training; 5% of the allocated total is added.
const FRAGMENTATION: f64 = 0.05;

/// Parameters held by one GPU of pipeline stage `stage` before data-parallel sharding.
pub fn stage_params(run: &Run, stage: u64) -> f64 {
    segment_params(run, run.stage_layers(stage) as f64, stage == 0, stage + 1 == run.plan().pp())
}

/// Parameters one GPU holds for `layers` layers, plus the embedding (`first`) and the output
/// layer and final norm (`last`), before data-parallel sharding.
pub fn segment_params(run: &Run, layers: f64, first: bool, last: bool) -> f64 {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let h = model.hidden_size() as f64;
    // Matrices and their biases split across TP; norms are replicated.
    let norms = layer_norm_params(run);
    let per_layer = (model.params_per_layer() as f64 - norms) / tp + norms;
    let mut params = layers * per_layer;
    let vocab_rows = padded_vocab(run) / tp * h;
    if first {
        params += vocab_rows;
        if model.position_embedding() == PositionEmbedding::Learned {
            params += (model.max_position_embeddings() * model.hidden_size()) as f64;
        }
    }
    if last {
        // The last stage holds the output layer; with tied embeddings and pp > 1 it keeps its own
        // copy of the embedding (Megatron-LM synchronises the two copies' gradients).
        if !model.tied_embeddings() || plan.pp() > 1 {
            params += vocab_rows;
        }
        params += model.final_norm_params() as f64;
    }
    params
}

/// Parameters of the two norms of one layer (replicated across TP ranks).
fn layer_norm_params(run: &Run) -> f64 {
    let model = run.model();
    (model.params_per_layer() - model.matmul_params_per_layer()) as f64
        - if model.linear_bias() {
            (model.query_width()
                + 2 * model.kv_width()
                + model.mlp_up_width()
                + 2 * model.hidden_size()) as f64
        } else {
            0.0
        }
}

/// Activation bytes one layer stores for one micro-batch on one GPU, without recomputation.
///
/// Korthikanti et al. 2022 count `34 s b h` (+`5 a s^2 b` for the unfused score matrix) for a GPT
/// layer without tensor parallelism. With a fused (Flash) attention kernel the score terms vanish.
/// Per token and layer this stores: the two norm inputs and the inputs of the QKV and FC1 GEMMs
/// (`h` each, split by TP only under sequence parallelism), Q, K and V, the attention output (the
/// projection's input), the FC1 output and the activation output (split by TP), and one-byte
/// dropout masks. Low-precision recipes store GEMM inputs quantized.
pub fn layer_activation_bytes(run: &Run) -> f64 {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let norms = 2.0 * h * act / sp;
    let gemm_inputs = gemm_input_bytes_per_token(run);
    let attention = (model.query_width() + 2 * model.kv_width()) as f64 * act / tp;
    let mlp = model.mlp_up_width() as f64 * act / tp;
    let masks = if model.dropout() { 2.0 * h / sp } else { 0.0 };
    run.tokens_per_microbatch() * (norms + gemm_inputs + attention + mlp + masks)
}

/// Bytes per token of one layer's saved GEMM inputs: the QKV and FC1 inputs (split by TP only
/// under sequence parallelism), the projection and FC2 inputs (split by TP), in the recipe's
/// saved precision.
fn gemm_input_bytes_per_token(run: &Run) -> f64 {
    let model = run.model();
    let plan = run.plan();
    let h = model.hidden_size() as f64;
    let gemm_in = run.training().precision().saved_gemm_input_bytes();
    2.0 * h * gemm_in / plan.sequence_split() as f64
        + (model.query_width() as f64 + ffn_input(run)) * gemm_in / plan.tp() as f64
}

fn ffn_input(run: &Run) -> f64 {
    let model = run.model();
    match model.mlp() {
        MlpKind::Gated | MlpKind::Plain => model.ffn_hidden_size() as f64,
    }
}

/// Micro-batches (in units of a full stage's layers) whose activations stage `stage` holds at
/// its peak: `min(pp - stage, m)` under 1F1B, and for interleaved 1F1B the warm-up chunks of
/// Megatron-LM's schedule, `(pp - stage - 1) x 2 + (vp - 1) x pp + 1` chunks of `1/vp` stage.
pub fn in_flight_microbatches(run: &Run, stage: u64) -> f64 {
    let plan = run.plan();
    let (pp, vp, m) = (plan.pp(), plan.vp(), plan.num_microbatches());
    if vp == 1 {
        return (pp - stage).min(m) as f64;
    }
    let chunks = ((pp - stage - 1) * 2 + (vp - 1) * pp + 1).min(m * vp);
    chunks as f64 / vp as f64
}

/// Memory of every pipeline stage.
pub fn stage_memory(run: &Run) -> Vec<StageMemory> {
    (0..run.plan().pp())
        .map(|stage| StageMemory { stage, breakdown: breakdown(run, stage) })
        .collect()
}

/// Bytes of one layer's input (the residual stream), what full recompute keeps per layer.
pub fn layer_input_bytes(run: &Run) -> f64 {
    run.tokens_per_microbatch() * run.model().hidden_size() as f64 * Precision::ACTIVATION_BYTES
        / run.plan().sequence_split() as f64
}

/// Bytes of the GEMM inputs one layer keeps for its weight gradients: what a split (zero-bubble)
/// backward still holds after the input-gradient pass.
pub fn layer_weight_gradient_input_bytes(run: &Run) -> f64 {
    run.tokens_per_microbatch() * gemm_input_bytes_per_token(run)
}

/// Activation bytes one micro-batch leaves stored in a segment of `layers` layers (of which
/// `recomputed` recompute under full recompute), plus the embedding output on the first stage.
pub fn stored_activation_bytes(run: &Run, layers: f64, recomputed: f64, first: bool) -> f64 {
    let per_layer = layer_activation_bytes(run);
    let layer_input = layer_input_bytes(run);
    let stored = match run.plan().recompute() {
        RecomputeKind::None | RecomputeKind::Selective => layers * per_layer,
        RecomputeKind::Full => {
            let recomputed = recomputed.min(layers);
            recomputed * layer_input + (layers - recomputed) * per_layer
        }
    };
    stored + if first { layer_input } else { 0.0 }
}

/// Activations rebuilt at once during a full-recompute backward: one layer's.
pub fn recompute_working_bytes(run: &Run) -> f64 {
    if run.plan().recompute() == RecomputeKind::Full { layer_activation_bytes(run) } else { 0.0 }
}

/// BF16 logits plus the FP32 softmax of one micro-batch, vocab-parallel across TP.
pub fn logits_bytes(run: &Run) -> f64 {
    run.tokens_per_microbatch() * padded_vocab(run) / run.plan().tp() as f64 * (2.0 + 4.0)
}

/// Model states, workspaces and FSDP buffers of a rank holding `params` parameters in `layers`
/// layers: everything but activations and logits, before fragmentation.
pub fn model_state_memory(run: &Run, params: f64, layers: f64) -> MemoryBreakdown {
    let plan = run.plan();
    let shard = (plan.shard_group() * plan.cp()) as f64;
    let (weight_shard, gradient_shard, optimizer_shard) = match plan.sharding() {
        Sharding::None => (1.0, 1.0, 1.0),
        Sharding::Optimizer => (1.0, 1.0, shard),
        Sharding::OptimizerAndGradients => (1.0, shard, shard),
        Sharding::Full => (shard, shard, shard),
    };
    let mut buffers = RUNTIME_WORKSPACE_GIB * (1u64 << 30) as f64;
    if plan.sharding() == Sharding::Full {
        if plan.reshard_after_forward() {
            // Gathered 16-bit parameters of the layer being computed and the one being
            // prefetched, and the unsharded FP32 gradients of one layer before its reduce-scatter.
            let layer = params / layers.max(1.0);
            buffers += 2.0 * layer * WEIGHT_BYTES + layer * GRADIENT_BYTES;
        } else {
            // The whole stage stays gathered, and its gradients accumulate unsharded.
            buffers += params * (WEIGHT_BYTES + GRADIENT_BYTES);
        }
    }
    MemoryBreakdown {
        weights: Bytes::new(params * WEIGHT_BYTES / weight_shard),
        gradients: Bytes::new(params * GRADIENT_BYTES / gradient_shard),
        optimizer_states: Bytes::new(params * OPTIMIZER_BYTES / optimizer_shard),
        buffers: Bytes::new(buffers),
        ..MemoryBreakdown::default()
    }
}

/// Adds the fragmentation allowance to a breakdown.
pub fn with_fragmentation(mut memory: MemoryBreakdown) -> MemoryBreakdown {
    memory.fragmentation = Bytes::ZERO;
    memory.fragmentation = memory.total() * FRAGMENTATION;
    memory
}

fn breakdown(run: &Run, stage: u64) -> MemoryBreakdown {
    let plan = run.plan();
    let layers = run.stage_layers(stage) as f64;
    let recomputed = plan.recompute_num_layers() as f64;
    let in_flight = in_flight_microbatches(run, stage);
    let stored = stored_activation_bytes(run, layers, recomputed, stage == 0);
    let mut memory = model_state_memory(run, stage_params(run, stage), layers);
    memory.activations = Bytes::new(in_flight * stored + recompute_working_bytes(run));
    if stage + 1 == plan.pp() {
        memory.logits = Bytes::new(logits_bytes(run));
    }
    with_fragmentation(memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::ClusterSpec;
    use crate::plan::{PlanSpec, TrainingSpec};
    use crate::{RunSpec, presets};

    fn run(plan: PlanSpec, gpus: i64) -> Run {
        Run::from_spec(&RunSpec {
            model: presets::model("llama3.1-70b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: gpus },
            training: TrainingSpec {
                seq_len: 8192,
                global_batch: 128,
                micro_batch: Some(1),
                precision: None,
            },
            plan,
        })
        .unwrap()
    }

    #[test]
    fn sharded_stage_params_add_up_to_the_model() {
        let unsplit = run(PlanSpec { pp: Some(4), ..PlanSpec::default() }, 64);
        let total = unsplit.model().total_params() as f64;
        let sum: f64 = (0..4).map(|stage| stage_params(&unsplit, stage)).sum();
        assert_eq!(sum, total);
        // With TP, everything but the replicated norms splits eight ways.
        let split = run(PlanSpec { tp: Some(8), pp: Some(4), ..PlanSpec::default() }, 64);
        let model = split.model();
        let replicated = layer_norm_params(&split) * model.num_layers() as f64
            + model.final_norm_params() as f64;
        let per_rank: f64 = (0..4).map(|stage| stage_params(&split, stage)).sum();
        // Megatron pads the vocabulary to a multiple of 128 x tp for the embedding and the output.
        let padding =
            (padded_vocab(&split) - model.vocab_size() as f64) * model.hidden_size() as f64 * 2.0;
        assert!((per_rank * 8.0 - 7.0 * replicated - total - padding).abs() < 1.0);
    }

    #[test]
    fn one_f_one_b_holds_pp_minus_stage_microbatches() {
        let run = run(PlanSpec { tp: Some(8), pp: Some(4), ..PlanSpec::default() }, 64);
        let counts: Vec<f64> = (0..4).map(|s| in_flight_microbatches(&run, s)).collect();
        assert_eq!(counts, [4.0, 3.0, 2.0, 1.0]);
    }

    #[test]
    fn interleaving_adds_the_korthikanti_factor_on_the_first_stage() {
        let run =
            run(PlanSpec { tp: Some(8), pp: Some(4), vp: Some(5), ..PlanSpec::default() }, 64);
        // Stage 0 holds pp (1 + (pp - 1) / (pp vp)) micro-batches' worth of a stage.
        let expected = 4.0 * (1.0 + 3.0 / 20.0);
        assert!((in_flight_microbatches(&run, 0) - expected).abs() < 1e-12);
    }

    #[test]
    fn sequence_parallel_activations_match_korthikanti_34_over_t() {
        // GPT-style layer: plain MLP with ffn = 4h, MHA, dropout, bf16: 34 s b h / t bytes.
        let mut model = presets::model("llama3.1-70b").unwrap();
        model.mlp = crate::model::MlpKind::Plain;
        model.ffn_hidden_size = 4 * model.hidden_size;
        model.num_kv_heads = Some(model.num_attention_heads);
        model.dropout = true;
        let run = Run::from_spec(&RunSpec {
            model,
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 8 },
            training: TrainingSpec {
                seq_len: 2048,
                global_batch: 8,
                micro_batch: Some(1),
                precision: None,
            },
            plan: PlanSpec { tp: Some(8), ..PlanSpec::default() },
        })
        .unwrap();
        let sbh = 2048.0 * 8192.0;
        assert!((layer_activation_bytes(&run) - 34.0 * sbh / 8.0).abs() < 1e-6);
    }

    #[test]
    fn the_distributed_optimizer_matches_megatrons_6_plus_12_over_dp() {
        let run = run(PlanSpec { tp: Some(8), pp: Some(4), ..PlanSpec::default() }, 64);
        let memory = breakdown(&run, 1);
        let params = stage_params(&run, 1);
        let states = memory.weights + memory.gradients + memory.optimizer_states;
        assert!((states.value() / params - (6.0 + 12.0 / 2.0)).abs() < 1e-9);
    }
}

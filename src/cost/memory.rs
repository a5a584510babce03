//! Memory per pipeline stage: model states by their real dtypes and sharding, activations by
//! Korthikanti et al. 2022 (adapted to fused attention, GQA and gated MLPs), the micro-batches each
//! stage holds under 1F1B or interleaved 1F1B, logits, transient buffers, and the runtime's share
//! (`runtime_memory.rs`: CUDA context, NCCL buffers, GEMM workspaces, the allocator's cache).
//!
//! Model states per parameter (Megatron-LM mixed precision): 2 bytes of 16-bit weights, 4 bytes of
//! FP32 gradient accumulation buffer, and 12 bytes of optimizer state (FP32 master copy and two
//! Adam moments). The distributed optimizer / ZeRO-1 shards the 12 bytes over the data-parallel
//! (x context-parallel) group, ZeRO-2 also the gradients, ZeRO-3 / FSDP everything, which gives
//! Megatron's `6 + 12/dp` and the ZeRO paper's `2 + 2 + 12/Nd` shapes.

use crate::cost::breakdown::{MemoryBreakdown, StageMemory};
use crate::cost::layer::padded_vocab;
use crate::cost::runtime_memory::{self, Communicators};
use crate::cost::work::{Segment, stage_segment, stage_segments};
use crate::model::PositionEmbedding;
use crate::plan::{Precision, RecomputeKind, RecomputeModule, RecomputeModules, Sharding};
use crate::run::Run;
use crate::units::Bytes;

/// Bytes per parameter of the 16-bit weights.
pub const WEIGHT_BYTES_PER_PARAM: f64 = 2.0;
/// Bytes per parameter of the FP32 gradient (main-grad) buffer.
const GRADIENT_BYTES_PER_PARAM: f64 = 4.0;
/// Bytes per parameter of a 16-bit gradient buffer: Megatron-Core's `ParamAndGradBuffer` holds
/// gradients in the parameters' dtype unless `grad_reduce_in_fp32`.
const LOW_PRECISION_GRADIENT_BYTES_PER_PARAM: f64 = 2.0;
/// Bytes per parameter of the FP32 master weights (Adam's two moments come from the plan).
const MASTER_WEIGHT_BYTES_PER_PARAM: f64 = 4.0;

/// Parameters one GPU holds, by the group that synchronizes their gradients: dense parameters
/// over the data-parallel (x context-parallel) ranks, routed-expert parameters over the
/// expert-data-parallel ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Params {
    /// Parameters replicated across data-parallel ranks: attention, dense MLPs, shared experts,
    /// routers, norms and embeddings.
    pub dense: f64,
    /// Routed-expert parameters.
    pub expert: f64,
}

impl Params {
    /// All parameters.
    pub fn total(&self) -> f64 {
        self.dense + self.expert
    }
}

impl std::ops::Add for Params {
    type Output = Params;
    fn add(self, other: Params) -> Params {
        Params { dense: self.dense + other.dense, expert: self.expert + other.expert }
    }
}

impl std::iter::Sum for Params {
    fn sum<I: Iterator<Item = Params>>(iter: I) -> Params {
        iter.fold(Params::default(), |a, b| a + b)
    }
}

/// Parameters held by one GPU of pipeline stage `stage` before data-parallel sharding.
pub fn stage_params(run: &Run, stage: u64) -> Params {
    segment_params(run, &stage_segment(run, stage))
}

/// Attention parameters of one layer on one GPU: TP splits the projections it parallelizes
/// (MLA's down-projections are replicated), biases follow their matrices.
fn attention_params_per_rank(run: &Run) -> f64 {
    let model = run.model();
    let tp = run.plan().tp() as f64;
    let matrices: f64 = model
        .attention_gemms()
        .iter()
        .map(|g| (g.input * g.output) as f64 / if g.split_by_tp { tp } else { 1.0 })
        .sum();
    let biases = if model.linear_bias() {
        (model.query_width() + 2 * model.kv_width()) as f64 / tp + model.hidden_size() as f64
    } else {
        0.0
    };
    matrices + biases
}

/// Parameters of one dense layer on one GPU, given its attention's (`attention_params_per_rank`).
fn dense_layer_params(run: &Run, attention: f64) -> f64 {
    let model = run.model();
    let tp = run.plan().tp() as f64;
    let ffn = model.ffn_hidden_size();
    let biases = if model.linear_bias() {
        model.up_width(ffn) as f64 / tp + model.hidden_size() as f64
    } else {
        0.0
    };
    attention + model.mlp_matmul_params(ffn) as f64 / tp + biases + model.layer_norm_params() as f64
}

/// Parameters of one MoE layer on one GPU: the replicated router, attention and shared experts
/// split by TP, and `experts / ep` routed experts split by ETP.
fn moe_layer_params(run: &Run, attention: f64) -> Params {
    let model = run.model();
    let plan = run.plan();
    let Some(moe) = model.moe() else {
        return Params { dense: dense_layer_params(run, attention), expert: 0.0 };
    };
    let tp = plan.tp() as f64;
    let dense = attention
        + (model.hidden_size() * moe.num_experts) as f64
        + model.mlp_matmul_params(moe.shared_ffn_hidden_size) as f64 / tp
        + model.layer_norm_params() as f64;
    let local_experts = (moe.num_experts / plan.ep()) as f64;
    Params { dense, expert: local_experts * model.expert_params() as f64 / plan.etp() as f64 }
}

/// The per-layer parameter counts of a run on one GPU that every segment's count is built from:
/// computed once for a run whose segments are counted many times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerParams {
    dense_layer: f64,
    moe_layer: Params,
    vocab_rows: f64,
}

impl LayerParams {
    /// The per-layer counts of a run.
    pub fn new(run: &Run) -> LayerParams {
        let tp = run.plan().tp() as f64;
        let h = run.model().hidden_size() as f64;
        let attention = attention_params_per_rank(run);
        LayerParams {
            dense_layer: dense_layer_params(run, attention),
            moe_layer: moe_layer_params(run, attention),
            vocab_rows: padded_vocab(run) / tp * h,
        }
    }
}

/// Parameters one GPU holds for a segment's layers, plus the embedding (`first`) and the output
/// layer, final norm and multi-token-prediction modules (`last`), before data-parallel sharding.
pub fn segment_params(run: &Run, segment: &Segment) -> Params {
    segment_params_with(run, &LayerParams::new(run), segment)
}

/// [`segment_params`] from the run's per-layer counts already computed.
pub fn segment_params_with(run: &Run, layer: &LayerParams, segment: &Segment) -> Params {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let h = model.hidden_size() as f64;
    let moe = layer.moe_layer;
    let (moe_layers, dense_layers) = if model.moe().is_some() {
        (segment.layers - segment.dense_layers, segment.dense_layers)
    } else {
        (0.0, segment.layers)
    };
    let mut params = Params {
        dense: dense_layers * layer.dense_layer + moe_layers * moe.dense,
        expert: moe_layers * moe.expert,
    };
    let vocab_rows = layer.vocab_rows;
    if segment.first {
        params.dense += vocab_rows;
        if model.position_embedding() == PositionEmbedding::Learned {
            params.dense += (model.max_position_embeddings() * model.hidden_size()) as f64;
        }
    }
    if segment.last {
        // The last stage holds the output layer; with tied embeddings and pp > 1 it keeps its own
        // copy of the embedding (Megatron-LM synchronises the two copies' gradients).
        if !model.tied_embeddings() || plan.pp() > 1 {
            params.dense += vocab_rows;
        }
        params.dense += model.final_norm_params() as f64;
        let mtp = model.mtp_layers() as f64;
        if mtp > 0.0 {
            let block = if model.moe().is_some() {
                moe
            } else {
                Params { dense: layer.dense_layer, expert: 0.0 }
            };
            let extra = 2.0 * h * h / tp + 3.0 * model.final_norm_params() as f64;
            params.dense += mtp * (block.dense + extra);
            params.expert += mtp * block.expert;
        }
    }
    params
}

/// Activation bytes one layer stores for one micro-batch on one GPU, without recomputation:
/// a dense layer, or an MoE layer when `dense_mlp` is false.
///
/// Korthikanti et al. 2022 count `34 s b h` (+`5 a s^2 b` for the unfused score matrix) for a GPT
/// layer without tensor parallelism. With a fused (Flash) attention kernel the score terms vanish.
/// Per token and layer this stores: the two norm inputs and the inputs of the QKV and FC1 GEMMs
/// (`h` each, split by TP only under sequence parallelism), Q, K and V, the attention output (the
/// projection's input), the FC1 output and the activation output (split by TP), and one-byte
/// dropout masks. Low-precision recipes store GEMM inputs quantized. An MoE layer stores, per
/// routed row, the expert FC1 input, its output and the FC2 input, and per token the router's
/// FP32 probabilities; its shared experts store what a dense MLP of their width stores.
pub fn layer_activation_bytes(run: &Run, dense_mlp: bool) -> Bytes {
    layer_activation_bytes_with(run, dense_mlp, run.plan().recompute_modules())
}

/// [`layer_activation_bytes`] with selective recompute of `modules` (none: everything stored).
fn layer_activation_bytes_with(run: &Run, dense_mlp: bool, modules: RecomputeModules) -> Bytes {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let gemm_in = run.training().precision().saved_gemm_input_bytes();
    let tokens = run.tokens_per_microbatch();
    // Element widths per token times bytes per element: bytes per token.
    let norms = 2.0 * h * act / sp;
    let attention = attention_activation_width(run) * act / tp
        + model.attention_output_width() as f64 * gemm_in / tp
        + h * gemm_in / sp;
    let masks = if model.dropout() { 2.0 * h / sp } else { 0.0 };
    let mlp_width = dense_mlp_width(run, dense_mlp);
    let mlp = if mlp_width > 0 {
        h * gemm_in / sp
            + (model.up_width(mlp_width) as f64 * act + mlp_width as f64 * gemm_in) / tp
    } else {
        0.0
    };
    let routed = match (dense_mlp, model.moe()) {
        (false, Some(_)) if modules.contains(RecomputeModule::Moe) => Bytes::ZERO,
        (false, Some(moe)) => {
            let etp = plan.etp() as f64;
            let ffn = moe.expert_ffn_hidden_size;
            // A rerun activation function frees its output, the FC2 input.
            let activation_output =
                if modules.contains(RecomputeModule::MoeAct) { 0.0 } else { ffn as f64 * gemm_in };
            let per_row =
                h * gemm_in + (model.up_width(ffn) as f64 * act + activation_output) / etp;
            Bytes::new(
                crate::cost::layer::routed_rows(run) * per_row
                    + tokens / sp * (moe.num_experts as f64 * 4.0 + h * gemm_in),
            )
        }
        _ => Bytes::ZERO,
    };
    let freed = selective_freed_width(run, dense_mlp, modules, mlp_width, gemm_in);
    Bytes::new((norms + attention + mlp + masks - freed).max(0.0)) * tokens + routed
}

/// Bytes per token of one layer's activations that selective recompute of the plan's modules
/// frees (each module keeps only its input, which another tensor already holds): the norm
/// outputs (the QKV and FC1 inputs), the dense MLP's or the shared experts' FC1 output and FC2
/// input, and latent attention's full-width queries, keys and values. The attention core frees
/// nothing under a fused kernel, which stores no score matrix; the MoE modules' bytes are
/// removed from the routed rows by the caller.
fn selective_freed_width(
    run: &Run,
    dense_mlp: bool,
    modules: RecomputeModules,
    mlp_width: u64,
    gemm_in: f64,
) -> f64 {
    let model = run.model();
    let plan = run.plan();
    if modules.is_empty() {
        return 0.0;
    }
    let tp = plan.tp() as f64;
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let mut freed = 0.0;
    if modules.contains(RecomputeModule::Layernorm) {
        let mlp_input = if mlp_width > 0 { h * gemm_in / sp } else { 0.0 };
        freed += h * gemm_in / sp + mlp_input;
    }
    let mlp_module = if dense_mlp { RecomputeModule::Mlp } else { RecomputeModule::SharedExperts };
    if mlp_width > 0 && modules.contains(mlp_module) {
        freed += (model.up_width(mlp_width) as f64 * act + mlp_width as f64 * gemm_in) / tp;
    }
    if model.mla().is_some() && modules.contains(RecomputeModule::MlaUpProj) {
        freed += (model.query_width() + 2 * model.kv_width()) as f64 * act / tp;
    }
    freed
}

/// Width of a layer's dense MLP: the model's FFN, or an MoE layer's shared experts (0 without).
fn dense_mlp_width(run: &Run, dense_mlp: bool) -> u64 {
    let model = run.model();
    match (dense_mlp, model.moe()) {
        (false, Some(moe)) => moe.shared_ffn_hidden_size,
        _ => model.ffn_hidden_size(),
    }
}

/// Activation bytes one layer stores for one micro-batch on one GPU under per-op selective
/// checkpointing (torchtitan's `op` policy): its input, every other matmul output (half of all
/// of them, counted by width), and the attention output; norms, activations and the other
/// matmuls are rerun in the backward.
pub fn op_checkpoint_layer_bytes(run: &Run, dense_mlp: bool) -> Bytes {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    // The output projection (the last attention GEMM) returns to the `h`-wide residual stream.
    let gemms = model.attention_gemms();
    let (_, inputs) = gemms.split_last().expect("attention has an output projection");
    let attention_outputs = h / sp
        + inputs
            .iter()
            .map(|gemm| gemm.output as f64 / if gemm.split_by_tp { tp } else { 1.0 })
            .sum::<f64>();
    let mlp_width = dense_mlp_width(run, dense_mlp);
    let mlp_outputs =
        if mlp_width > 0 { model.up_width(mlp_width) as f64 / tp + h / sp } else { 0.0 };
    let tokens = run.tokens_per_microbatch();
    let routed_outputs = match (dense_mlp, model.moe()) {
        (false, Some(moe)) => {
            let per_row = model.up_width(moe.expert_ffn_hidden_size) as f64 / plan.etp() as f64 + h;
            crate::cost::layer::routed_rows(run) * per_row + tokens / sp * moe.num_experts as f64
        }
        _ => 0.0,
    };
    let per_token = h / sp + model.query_width() as f64 / tp;
    let elements =
        tokens * (per_token + 0.5 * (attention_outputs + mlp_outputs)) + 0.5 * routed_outputs;
    Bytes::new(act * elements)
}

/// Widths per token of what the attention block stores for its backward: Q, K and V (and with
/// latent attention the compressed query and key/value, replicated across TP ranks, counted here
/// at their TP-split share).
fn attention_activation_width(run: &Run) -> f64 {
    let model = run.model();
    let tp = run.plan().tp() as f64;
    let latent = model.mla().map_or(0.0, |mla| (mla.q_lora_rank + mla.kv_lora_rank) as f64 * tp);
    (model.query_width() + 2 * model.kv_width()) as f64 + latent
}

/// Bytes per token of one layer's saved GEMM inputs that a split backward keeps for the weight
/// gradients (the QKV and FC1 inputs split by TP only under sequence parallelism, the projection
/// and FC2 inputs split by TP), in the recipe's saved precision. MoE layers keep their routed
/// rows' inputs instead of the dense MLP's.
fn gemm_input_bytes_per_token(run: &Run) -> Bytes {
    let model = run.model();
    let plan = run.plan();
    let h = model.hidden_size() as f64;
    let gemm_in = run.training().precision().saved_gemm_input_bytes();
    let attention = h * gemm_in / plan.sequence_split() as f64
        + model.attention_output_width() as f64 * gemm_in / plan.tp() as f64;
    let mlp = match model.moe() {
        None => {
            h * gemm_in / plan.sequence_split() as f64
                + model.ffn_hidden_size() as f64 * gemm_in / plan.tp() as f64
        }
        Some(moe) => {
            let rows_per_token = crate::cost::layer::routed_rows(run) / run.tokens_per_microbatch();
            rows_per_token * (h + moe.expert_ffn_hidden_size as f64 / plan.etp() as f64) * gemm_in
        }
    };
    Bytes::new(attention + mlp)
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
    let activations = ActivationBytes::new(run);
    stage_segments(run)
        .iter()
        .zip(0..)
        .map(|(segment, stage)| {
            let states = model_state_memory(run, segment_params(run, segment), segment.layers);
            let stored = activations.stored(segment);
            StageMemory { stage, breakdown: stage_peak(run, stage, states, stored, &activations) }
        })
        .collect()
}

/// The peak memory of pipeline stage `stage`: its model states, the activations `stored` per
/// micro-batch times the micro-batches it holds at once, the working bytes of a recomputing
/// backward and, on the last stage, the logits; with the fragmentation allowance.
pub fn stage_peak(
    run: &Run,
    stage: u64,
    states: MemoryBreakdown,
    stored: Bytes,
    activations: &ActivationBytes,
) -> MemoryBreakdown {
    let mut memory = states;
    memory.activations =
        stored * in_flight_microbatches(run, stage) + activations.recompute_working;
    if stage + 1 == run.plan().pp() {
        memory.logits = activations.logits * (1.0 + run.model().mtp_layers() as f64);
    }
    with_fragmentation(memory)
}

/// Bytes of one layer's input (the residual stream), what full recompute keeps per layer.
pub fn layer_input_bytes(run: &Run) -> Bytes {
    Bytes::new(
        run.tokens_per_microbatch()
            * run.model().hidden_size() as f64
            * Precision::ACTIVATION_BYTES
            / run.plan().sequence_split() as f64,
    )
}

/// Bytes of the GEMM inputs one layer keeps for its weight gradients: what a split (zero-bubble)
/// backward still holds after the input-gradient pass.
pub fn layer_weight_gradient_input_bytes(run: &Run) -> Bytes {
    gemm_input_bytes_per_token(run) * run.tokens_per_microbatch()
}

/// What one micro-batch's layers store, keep and rebuild on one GPU: the per-layer byte counts
/// of a run, computed once and shared by every segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationBytes {
    /// The plan's recomputation.
    recompute: RecomputeKind,
    /// Whether the model has MoE layers (its dense-MLP layers are then counted apart).
    moe: bool,
    /// A dense-MLP layer's activations without recomputation.
    dense_layer: Bytes,
    /// An MoE layer's activations without recomputation (the dense layer's for dense models).
    moe_layer: Bytes,
    /// A dense-MLP layer's under per-op checkpointing (zero unless the plan uses it).
    op_dense_layer: Bytes,
    /// An MoE layer's under per-op checkpointing (zero unless the plan uses it).
    op_moe_layer: Bytes,
    /// One layer's input (the residual stream), what full recompute keeps per layer.
    pub layer_input: Bytes,
    /// The GEMM inputs one layer keeps for its weight gradients after a split backward.
    pub weight_gradient_inputs_per_layer: Bytes,
    /// Share of each pipeline rank's layers whose stored activations go to host memory.
    offload_share: f64,
    /// Activations alive at once during the backward beyond the stored ones: a layer rebuilt by
    /// recompute, and with offloading the layer brought back from host memory.
    pub recompute_working: Bytes,
    /// BF16 logits plus the FP32 softmax of one micro-batch, vocab-parallel across TP.
    pub logits: Bytes,
}

impl ActivationBytes {
    /// The per-layer byte counts of a run.
    pub fn new(run: &Run) -> ActivationBytes {
        let recompute = run.plan().recompute();
        let moe = run.model().moe().is_some();
        let dense_layer = layer_activation_bytes(run, true);
        let moe_layer = if moe { layer_activation_bytes(run, false) } else { dense_layer };
        let (op_dense_layer, op_moe_layer) = if recompute == RecomputeKind::Op {
            let dense = op_checkpoint_layer_bytes(run, true);
            (dense, if moe { op_checkpoint_layer_bytes(run, false) } else { dense })
        } else {
            (Bytes::ZERO, Bytes::ZERO)
        };
        // Selective recompute rebuilds one layer's rerun modules at a time.
        let selective_rebuilt = |dense: bool, layer: Bytes| {
            if recompute == RecomputeKind::Selective {
                (layer_activation_bytes_with(run, dense, RecomputeModules::NONE) - layer)
                    .max(Bytes::ZERO)
            } else {
                Bytes::ZERO
            }
        };
        let rebuilt = |layer: Bytes, op_layer: Bytes, dense: bool| match recompute {
            RecomputeKind::Full => layer,
            RecomputeKind::Op => (layer - op_layer).max(Bytes::ZERO),
            RecomputeKind::Selective => selective_rebuilt(dense, layer),
            RecomputeKind::None => Bytes::ZERO,
        };
        let dense_rebuilt = rebuilt(dense_layer, op_dense_layer, true);
        let mut recompute_working = if moe {
            dense_rebuilt.max(rebuilt(moe_layer, op_moe_layer, false))
        } else {
            dense_rebuilt
        };
        let plan = run.plan();
        let layers_per_rank = run.model().num_layers() as f64 / plan.pp() as f64;
        let offload_share =
            (plan.offload_activation_layers() as f64 / layers_per_rank.max(1.0)).min(1.0);
        if offload_share > 0.0 {
            // The next layer's activations are copied back while this one's backward runs.
            recompute_working += dense_layer.max(moe_layer);
        }
        ActivationBytes {
            recompute,
            moe,
            dense_layer,
            moe_layer,
            op_dense_layer,
            op_moe_layer,
            offload_share,
            layer_input: layer_input_bytes(run),
            weight_gradient_inputs_per_layer: layer_weight_gradient_input_bytes(run),
            recompute_working,
            logits: logits_bytes(run),
        }
    }

    /// Activation bytes one micro-batch leaves stored in a segment (the recomputed share of its
    /// layers keeping only their inputs under full recompute), plus the embedding output on the
    /// first stage.
    pub fn stored(&self, segment: &Segment) -> Bytes {
        let in_layers = self.stored_in_layers(segment);
        let kept = in_layers - in_layers * self.offload_share;
        kept + if segment.first { self.layer_input } else { Bytes::ZERO }
    }

    /// Activation bytes of one micro-batch that offloading moves to host memory in a segment
    /// (and back for the backward).
    pub fn offloaded(&self, segment: &Segment) -> Bytes {
        self.stored_in_layers(segment) * self.offload_share
    }

    /// What one micro-batch's transformer layers of a segment store.
    fn stored_in_layers(&self, segment: &Segment) -> Bytes {
        let layers = segment.layers;
        let per_layer = if self.moe {
            let dense = segment.dense_layers.min(layers);
            (self.dense_layer * dense + self.moe_layer * (layers - dense)) / layers.max(1.0)
        } else {
            self.dense_layer
        };
        match self.recompute {
            RecomputeKind::None | RecomputeKind::Selective => per_layer * layers,
            RecomputeKind::Op => {
                let dense = if self.moe { segment.dense_layers.min(layers) } else { layers };
                self.op_dense_layer * dense + self.op_moe_layer * (layers - dense)
            }
            RecomputeKind::Full => {
                let recomputed = segment.recomputed_layers.min(layers);
                self.layer_input * recomputed + per_layer * (layers - recomputed)
            }
        }
    }
}

/// Activation bytes one micro-batch leaves stored in a segment ([`ActivationBytes::stored`]).
pub fn stored_activation_bytes(run: &Run, segment: &Segment) -> Bytes {
    ActivationBytes::new(run).stored(segment)
}

/// Activations rebuilt at once during a recomputing backward: one layer's under full recompute,
/// the part of one layer's that per-op checkpointing did not store.
pub fn recompute_working_bytes(run: &Run) -> Bytes {
    ActivationBytes::new(run).recompute_working
}

/// BF16 logits plus the FP32 softmax of one micro-batch, vocab-parallel across TP.
pub fn logits_bytes(run: &Run) -> Bytes {
    Bytes::new(
        run.tokens_per_microbatch() * padded_vocab(run) / run.plan().tp() as f64 * (2.0 + 4.0),
    )
}

/// The data-parallel shard counts of a rank's dense and expert parameters under the plan's
/// sharding of (weights, gradients, optimizer states).
pub fn shard_counts(run: &Run) -> [(f64, f64); 3] {
    let plan = run.plan();
    let dense = (plan.shard_group() * plan.cp()) as f64;
    // Expert parameters are sharded over the expert-data-parallel ranks inside the shard group.
    let expert = (plan.edp() as f64 * plan.shard_group() as f64 / plan.dp() as f64).max(1.0);
    let none = (1.0, 1.0);
    let both = (dense, expert);
    match plan.sharding() {
        Sharding::None => [none, none, none],
        Sharding::Optimizer => [none, none, both],
        Sharding::OptimizerAndGradients => [none, both, both],
        Sharding::Full => [both, both, both],
    }
}

/// Optimizer state per parameter: the FP32 master weight and Adam's two moments at the plan's
/// precision (12 bytes with FP32 moments, 8 with BF16 ones).
pub fn optimizer_bytes_per_param(run: &Run) -> f64 {
    MASTER_WEIGHT_BYTES_PER_PARAM + 2.0 * run.plan().adam_moments().bytes()
}

/// Bytes per parameter of the gradient buffer: FP32 unless the plan reduces gradients in 16 bits.
pub fn gradient_bytes_per_param(run: &Run) -> f64 {
    if run.plan().grad_reduce_in_fp32() {
        GRADIENT_BYTES_PER_PARAM
    } else {
        LOW_PRECISION_GRADIENT_BYTES_PER_PARAM
    }
}

/// The NCCL communicators a rank uses: a ring for each of its TP, CP and data-parallel groups
/// (and the expert-data-parallel one where it differs) of more than one rank, and point-to-point
/// peers for pipeline sends (two neighbours) and the expert all-to-all (every other EP rank).
pub fn communicators(run: &Run) -> Communicators {
    let plan = run.plan();
    let dense_dp = plan.dp() * plan.cp();
    let mut rings = [plan.tp(), plan.cp(), dense_dp].iter().filter(|&&n| n > 1).count() as u64;
    if run.model().moe().is_some() && plan.edp() > 1 && plan.edp() != dense_dp {
        rings += 1;
    }
    let pipeline = if plan.pp() > 1 { 2 } else { 0 };
    let experts = if run.model().moe().is_some() { plan.ep() - 1 } else { 0 };
    Communicators { rings, p2p_peers: pipeline + experts }
}

/// Model states, runtime terms and FSDP buffers of a rank holding `params` parameters in `layers`
/// layers: everything but activations and logits, before the allocator's cache.
pub fn model_state_memory(run: &Run, params: Params, layers: f64) -> MemoryBreakdown {
    let plan = run.plan();
    let [weight_shard, gradient_shard, optimizer_shard] = shard_counts(run);
    let sharded = |(dense, expert): (f64, f64)| params.dense / dense + params.expert / expert;
    let total = params.total();
    let gradient_bytes = gradient_bytes_per_param(run);
    let mut buffers = Bytes::ZERO;
    if plan.sharding() == Sharding::Full {
        if plan.reshard_after_forward() {
            // Gathered 16-bit parameters of the layer being computed and the one being
            // prefetched, and the unsharded gradients of one layer before its reduce-scatter.
            let layer = total / layers.max(1.0);
            buffers += Bytes::new(2.0 * layer * WEIGHT_BYTES_PER_PARAM + layer * gradient_bytes);
        } else {
            // The whole stage stays gathered, and its gradients accumulate unsharded.
            buffers += Bytes::new(total * (WEIGHT_BYTES_PER_PARAM + gradient_bytes));
        }
    }
    MemoryBreakdown {
        weights: Bytes::new(sharded(weight_shard) * WEIGHT_BYTES_PER_PARAM),
        gradients: Bytes::new(sharded(gradient_shard) * gradient_bytes),
        optimizer_states: Bytes::new(sharded(optimizer_shard) * optimizer_bytes_per_param(run)),
        buffers,
        workspaces: runtime_memory::gemm_workspaces(),
        cuda_context: runtime_memory::cuda_context(),
        nccl_buffers: runtime_memory::nccl_buffers(communicators(run)),
        ..MemoryBreakdown::default()
    }
}

/// The largest model-state memory (weights, gradients, optimizer states, buffers and the runtime's
/// share, as [`MemoryBreakdown::fit_need`] counts them) of any stage: a lower bound of what must
/// fit whatever the micro-batch, recomputation or schedule.
pub fn model_states_peak(run: &Run) -> Bytes {
    stage_segments(run)
        .iter()
        .map(|segment| {
            let states = model_state_memory(run, segment_params(run, segment), segment.layers);
            with_fragmentation(states).fit_need()
        })
        .fold(Bytes::ZERO, Bytes::max)
}

/// Adds the caching allocator's reserved-over-allocated overhead to a breakdown.
pub fn with_fragmentation(mut memory: MemoryBreakdown) -> MemoryBreakdown {
    memory.fragmentation = runtime_memory::allocator_cache(memory.allocated());
    memory
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanSpec;
    use crate::presets;
    use crate::run::test_run;

    fn run(plan: PlanSpec, gpus: i64) -> Run {
        test_run(presets::model("llama3.1-70b").unwrap(), gpus, 8192, 128, 1, plan)
    }

    #[test]
    fn bf16_adam_moments_keep_eight_bytes_of_optimizer_state_per_parameter() {
        // Mixed-precision Adam: FP32 master weight and moments, 12 bytes per parameter
        // (Rajbhandari et al. 2020, ZeRO, section 3.1: K = 12); BF16 moments make it 4 + 2 + 2.
        let with = |moments| {
            let plan = PlanSpec { pp: Some(4), adam_moments: Some(moments), ..PlanSpec::default() };
            let run = run(plan, 64);
            let segment = stage_segments(&run)[0];
            let params = segment_params(&run, &segment);
            let states = model_state_memory(&run, params, segment.layers).optimizer_states;
            (optimizer_bytes_per_param(&run), states.value(), params.total())
        };
        let (fp32, fp32_states, params) = with(crate::plan::AdamMoments::Fp32);
        let (bf16, bf16_states, _) = with(crate::plan::AdamMoments::Bf16);
        assert_eq!((fp32, bf16), (12.0, 8.0));
        // ZeRO-1 over dp 16: the states of a stage's parameters, sharded 16 ways.
        assert!((fp32_states - params * 12.0 / 16.0).abs() < 1.0);
        assert!((bf16_states / fp32_states - 8.0 / 12.0).abs() < 1e-12);
    }

    #[test]
    fn per_op_checkpointing_stores_its_inputs_half_the_matmul_outputs_and_attention() {
        let llama8b = |recompute| {
            let plan = PlanSpec { recompute: Some(recompute), ..PlanSpec::default() };
            test_run(presets::model("llama3.1-8b").unwrap(), 8, 8192, 16, 2, plan)
        };
        let run = llama8b(RecomputeKind::Op);
        // Per token: the layer input and attention output (4096 each) and half of the QKV (6144),
        // projection (4096), gate/up (28672) and down (4096) outputs, in bf16.
        let per_token = (4096.0 + 4096.0 + 0.5 * (6144.0 + 4096.0 + 28672.0 + 4096.0)) * 2.0;
        assert_eq!(op_checkpoint_layer_bytes(&run, true), Bytes::new(per_token * 16384.0));
        // Between full recompute and storing everything, for the stage and the rebuilt layer.
        let segment = stage_segments(&run)[0];
        let stored = |recompute| {
            let run = llama8b(recompute);
            stored_activation_bytes(&run, &stage_segments(&run)[0])
        };
        let op = stored_activation_bytes(&run, &segment);
        assert!(stored(RecomputeKind::Full) < op && op < stored(RecomputeKind::Selective));
        let rebuilt = recompute_working_bytes(&run);
        assert!(
            rebuilt > Bytes::ZERO
                && rebuilt < recompute_working_bytes(&llama8b(RecomputeKind::Full))
        );
    }

    #[test]
    fn sharded_stage_params_add_up_to_the_model() {
        let unsplit = run(PlanSpec { pp: Some(4), ..PlanSpec::default() }, 64);
        let total = unsplit.model().total_params() as f64;
        let sum: f64 = (0..4).map(|stage| stage_params(&unsplit, stage).total()).sum();
        assert_eq!(sum, total);
        // With TP, everything but the replicated norms splits eight ways.
        let split = run(PlanSpec { tp: Some(8), pp: Some(4), ..PlanSpec::default() }, 64);
        let model = split.model();
        let replicated = model.layer_norm_params() as f64 * model.num_layers() as f64
            + model.final_norm_params() as f64;
        let per_rank: f64 = (0..4).map(|stage| stage_params(&split, stage).total()).sum();
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
        let run = test_run(model, 8, 2048, 8, 1, PlanSpec { tp: Some(8), ..PlanSpec::default() });
        let sbh = 2048.0 * 8192.0;
        assert!((layer_activation_bytes(&run, true).value() - 34.0 * sbh / 8.0).abs() < 1e-6);
    }

    #[test]
    fn the_distributed_optimizer_matches_megatrons_6_plus_12_over_dp() {
        let run = run(PlanSpec { tp: Some(8), pp: Some(4), ..PlanSpec::default() }, 64);
        let memory = stage_memory(&run)[1].breakdown;
        let params = stage_params(&run, 1).total();
        let states = memory.weights + memory.gradients + memory.optimizer_states;
        assert!((states.value() / params - (6.0 + 12.0 / 2.0)).abs() < 1e-9);
    }
}

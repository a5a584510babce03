//! Memory per pipeline stage: model states by their real dtypes and sharding, activations
//! (`activations.rs`: Korthikanti et al. 2022 adapted to fused attention, GQA, gated MLPs and
//! hybrid layers), the micro-batches each
//! stage holds under 1F1B or interleaved 1F1B, logits, transient buffers, and the runtime's share
//! (`runtime_memory.rs`: CUDA context, NCCL buffers, GEMM workspaces, the allocator's cache).
//!
//! Model states per parameter (Megatron-LM mixed precision): 2 bytes of 16-bit weights, 4 bytes of
//! FP32 gradient accumulation buffer, and 12 bytes of optimizer state (FP32 master copy and two
//! Adam moments). The distributed optimizer / ZeRO-1 shards the 12 bytes over the data-parallel
//! (x context-parallel) group, ZeRO-2 also the gradients, ZeRO-3 / FSDP everything, which gives
//! Megatron's `6 + 12/dp` and the ZeRO paper's `2 + 2 + 12/Nd` shapes.

pub use crate::cost::activations::{
    ActivationBytes, layer_activation_bytes, layer_input_bytes, layer_weight_gradient_input_bytes,
    logits_bytes, op_checkpoint_layer_bytes, recompute_working_bytes, stored_activation_bytes,
};
use crate::cost::breakdown::{MemoryBreakdown, StageMemory};
use crate::cost::layer::padded_vocab;
use crate::cost::repacking::{peak_of, repacked_token_peaks};
use crate::cost::runtime_memory::{self, Communicators};
use crate::cost::work::{Segment, stage_segment, stage_segments};
use crate::model::{PARALLEL_HYBRID_PARTS, PositionEmbedding, SUBLAYER_KINDS, Sublayer};
use crate::plan::Sharding;
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
        + model.layer_norm_params() as f64
        + model.latent_projection_params() as f64;
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
    /// A hybrid model's layers by kind (zero for other models).
    sublayers: [Params; SUBLAYER_KINDS],
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
            sublayers: match run.model().hybrid() {
                Some(_) => Sublayer::ALL.map(|kind| sublayer_params(run, kind, attention)),
                None => [Params::default(); SUBLAYER_KINDS],
            },
        }
    }
}

/// Parameters of one hybrid layer of `kind` on one GPU, its one pre-norm included: the
/// transformer layer's blocks without the other block and its norm, or the Mamba-2 mixer with
/// its heads split by TP.
fn sublayer_params(run: &Run, kind: Sublayer, attention: f64) -> Params {
    let model = run.model();
    let tp = run.plan().tp() as f64;
    let norm = model.norm_params() as f64;
    let without_norms = model.layer_norm_params() as f64;
    match kind {
        // A token mixer's parameters besides its pre-norm, its heads (Mamba-1: its channels)
        // split by TP.
        Sublayer::Mamba
        | Sublayer::GatedDeltaNet
        | Sublayer::LightningAttention
        | Sublayer::Mamba1 => Params {
            dense: norm + (model.sublayer_params(kind) - model.norm_params()) as f64 / tp,
            expert: 0.0,
        },
        Sublayer::Attention => Params { dense: attention + norm, expert: 0.0 },
        Sublayer::Mlp => {
            Params { dense: dense_layer_params(run, 0.0) - without_norms + norm, expert: 0.0 }
        }
        Sublayer::Moe => {
            let moe = moe_layer_params(run, 0.0);
            Params { dense: moe.dense - without_norms + norm, expert: moe.expert }
        }
        // Falcon-H1: the Mamba-2 mixer, the attention block and the MLP, the mixers sharing
        // one pre-norm.
        Sublayer::ParallelHybrid => {
            let dense = PARALLEL_HYBRID_PARTS
                .iter()
                .map(|&part| sublayer_params(run, part, attention).dense)
                .sum::<f64>();
            Params { dense: dense - norm, expert: 0.0 }
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
        (segment.all.layers - segment.all.dense, segment.all.dense)
    } else {
        (0.0, segment.all.layers)
    };
    // A hybrid model's layers are all counted by kind below.
    let (moe_layers, dense_layers) =
        if model.hybrid().is_some() { (0.0, 0.0) } else { (moe_layers, dense_layers) };
    let mut params = Params {
        dense: dense_layers * layer.dense_layer + moe_layers * moe.dense,
        expert: moe_layers * moe.expert,
    };
    if model.hybrid().is_some() {
        for (count, kind) in segment.all.sublayers.iter().zip(&layer.sublayers) {
            params.dense += f64::from(*count) * kind.dense;
            params.expert += f64::from(*count) * kind.expert;
        }
    }
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
        let mtp = model.mtp_weight_sets() as f64;
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
            let states = model_state_memory(run, segment_params(run, segment), segment.all.layers);
            let stored = activations.stored(segment);
            let tokens = TokenPeaks::of(run, run.plan().balance_window(), stage);
            let breakdown = stage_peak(run, stage, tokens, states, stored, &activations);
            StageMemory { stage, breakdown }
        })
        .collect()
}

/// Host memory one GPU's offloaded activations take at the plan's peak (zero without offload),
/// without the op tables a priced run builds ([`stage_memory`]'s way): see
/// [`host_offload_peak`].
pub fn host_offload_need(run: &Run) -> Bytes {
    if run.plan().offload_activation_layers() == 0 {
        return Bytes::ZERO;
    }
    let table = repacked_token_peaks(run, run.plan().balance_window());
    let peaks = table.as_ref().and_then(|t| t.get()).map(Vec::as_slice);
    host_offload_peak(run, &ActivationBytes::new(run), stage_segments(run), peaks)
}

/// Host memory one GPU's offloaded activations take at the plan's peak: each stage's offloaded
/// activations per micro-batch (of `segments`, the stages in order) times
/// the micro-batches it holds at once, at the token peaks of `peaks`
/// ([`TokenPeaks::from_table`]), as [`stage_allocated`] counts the activations it keeps.
pub fn host_offload_peak(
    run: &Run,
    activations: &ActivationBytes,
    segments: impl IntoIterator<Item = Segment>,
    peaks: Option<&[f64]>,
) -> Bytes {
    segments
        .into_iter()
        .zip(0..)
        .map(|(segment, stage)| {
            let tokens = TokenPeaks::from_table(run, peaks, stage);
            activations.offloaded(&segment) * (in_flight_microbatches(run, stage) * tokens.held)
        })
        .fold(Bytes::ZERO, Bytes::max)
}

/// The tokens of the micro-batches a stage holds at once, and of the largest one, over as many
/// full micro-batches (`mbs x seq_len` tokens each): 1 unless documents are re-packed, whose
/// micro-batches carry unequal tokens (`crate::cost::repacking::repacked_token_peak`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenPeaks {
    /// The most tokens that as many consecutive micro-batches as the stage holds carried.
    pub held: f64,
    /// The most tokens one micro-batch carried.
    pub largest: f64,
}

impl TokenPeaks {
    /// Micro-batches of `mbs x seq_len` tokens each.
    pub const FULL: TokenPeaks = TokenPeaks { held: 1.0, largest: 1.0 };

    /// The peaks of pipeline stage `stage` with the documents re-packed over `window` global
    /// batches (the plan's own window, or another a search tries).
    pub fn of(run: &Run, window: u64, stage: u64) -> TokenPeaks {
        let table = repacked_token_peaks(run, window);
        TokenPeaks::from_table(run, table.as_ref().and_then(|t| t.get()).map(Vec::as_slice), stage)
    }

    /// The peaks of pipeline stage `stage` read from a table of
    /// `crate::cost::repacking::repacked_token_peaks` (`None`: no re-packing, full micro-batches).
    pub fn from_table(run: &Run, table: Option<&[f64]>, stage: u64) -> TokenPeaks {
        match table {
            Some(table) => {
                let held = in_flight_microbatches(run, stage).ceil() as u64;
                TokenPeaks { held: peak_of(table, held), largest: peak_of(table, 1) }
            }
            None => TokenPeaks::FULL,
        }
    }
}

/// The peak memory of pipeline stage `stage` whose micro-batches carry `tokens` (their peaks over
/// full ones): its model states, the activations `stored` per micro-batch times the micro-batches
/// it holds at once (at the held peak), the working bytes of a recomputing backward and, on the
/// last stage, the logits (at the largest one's); with the fragmentation allowance, which
/// [`with_fragmentation`] adds to [`stage_allocated`]'s breakdown.
pub fn stage_peak(
    run: &Run,
    stage: u64,
    tokens: TokenPeaks,
    states: MemoryBreakdown,
    stored: Bytes,
    activations: &ActivationBytes,
) -> MemoryBreakdown {
    with_fragmentation(stage_allocated(run, stage, tokens, states, stored, activations))
}

/// [`stage_peak`]'s breakdown before the allocator's cache is worked out: all a fit check needs
/// (`MemoryBreakdown::fit_need` leaves the cache out).
pub fn stage_allocated(
    run: &Run,
    stage: u64,
    tokens: TokenPeaks,
    states: MemoryBreakdown,
    stored: Bytes,
    activations: &ActivationBytes,
) -> MemoryBreakdown {
    let held = in_flight_microbatches(run, stage);
    let mut memory = states;
    memory.activations =
        stored * (held * tokens.held) + activations.recompute_working * tokens.largest;
    if stage + 1 == run.plan().pp() {
        memory.logits =
            activations.logits * ((1.0 + run.model().mtp_layers() as f64) * tokens.largest);
    }
    memory
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
            let states = model_state_memory(run, segment_params(run, segment), segment.all.layers);
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
    use crate::plan::{PlanSpec, RecomputeKind};
    use crate::presets;
    use crate::run::test_run;

    fn run(plan: PlanSpec, gpus: i64) -> Run {
        test_run(presets::model("llama3.1-70b").unwrap(), gpus, 8192, 128, 1, plan)
    }

    #[test]
    fn torchtitans_loss_on_an_fp32_copy_holds_twice_the_logit_bytes_of_megatrons() {
        // Llama 3.1 8B, 2 x 8192 tokens a micro-batch, vocab 128256 (padded to 128256 at tp 1).
        let spec = crate::run::test_spec("llama3.1-8b", 8, 8192, 16, 2, PlanSpec::default());
        let megatron = Run::from_spec(&spec).unwrap();
        let stack = std::sync::Arc::new(presets::stack("torchtitan-2024-12").unwrap());
        let torchtitan = Run::from_spec_with_stack(&spec, stack).unwrap();
        let logits = 2.0 * 8192.0 * 128256.0;
        // Megatron-Core: bf16 logits and the fp32 softmax, 6 bytes a logit.
        assert_eq!(logits_bytes(&megatron).value(), logits * 6.0);
        // torchtitan 9dec370, `cross_entropy(pred.flatten(0, 1).float(), ...)`: at the loss's
        // backward the saved fp32 log-probabilities, their gradient and the input's, 12 bytes.
        assert_eq!(logits_bytes(&torchtitan).value(), logits * 12.0);
        let peak = |run: &Run| stage_memory(run).last().map(|s| s.breakdown.logits);
        assert_eq!(peak(&torchtitan).unwrap(), logits_bytes(&torchtitan));
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
            let states = model_state_memory(&run, params, segment.all.layers).optimizer_states;
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
    fn a_falcon_h1_models_stages_hold_its_parameters() {
        let falcon = crate::presets::model("falcon-h1-0.5b").unwrap();
        let plan = PlanSpec { pp: Some(4), ..PlanSpec::default() };
        let run = crate::run::test_run(falcon, 8, 4096, 8, 1, plan);
        let model = run.model();
        let sum: f64 = (0..4).map(|stage| stage_params(&run, stage).total()).sum();
        let padding =
            (padded_vocab(&run) - model.vocab_size() as f64) * model.hidden_size() as f64 * 2.0;
        assert_eq!(sum, model.total_params() as f64 + padding);
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

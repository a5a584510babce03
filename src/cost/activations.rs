//! Activation memory of one micro-batch: what each layer (a transformer layer, or a hybrid
//! model's Mamba-2, attention, MLP or expert layer) stores for its backward under each
//! recompute policy, what a recomputing backward rebuilds at once, and what offloading moves.

use crate::cost::layer::padded_vocab;
use crate::cost::mesh_attention::gathered_bytes;
use crate::cost::unfused_attention::stored_score_bytes_per_token;
use crate::cost::work::Segment;
use crate::model::{NormKind, PARALLEL_HYBRID_PARTS, SUBLAYER_KINDS, Sublayer};
use crate::plan::{Precision, RecomputeKind, RecomputeModule, RecomputeModules};
use crate::run::Run;
use crate::units::Bytes;

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
    // Without a fused kernel the softmax's probabilities (and dropout's mask and output) stay.
    let scores = if run.stack().unfused_attention(run.cluster().gpu().generation()) {
        stored_score_bytes_per_token(run)
    } else {
        0.0
    };
    let mlp_width = dense_mlp_width(run, dense_mlp);
    let mlp = if mlp_width > 0 {
        h * gemm_in / sp + mlp_inner_width(run, mlp_width, gemm_in)
    } else {
        0.0
    };
    let routed = if dense_mlp { Bytes::ZERO } else { routed_activation_bytes(run, modules) };
    let freed = selective_freed_width(run, dense_mlp, modules, mlp_width, gemm_in);
    let eager = eager_elementwise_extra_width(run, mlp_width);
    Bytes::new((norms + attention + scores + mlp + masks + eager - freed).max(0.0)) * tokens
        + routed
}

/// Bytes per token an eager PyTorch layer (`Stack::eager_elementwise`: Hugging Face's
/// `LlamaRMSNorm` and `LlamaMLP`, torchtitan's `RMSNorm` and `FeedForward`) stores beyond a
/// fused one, as autograd saves them: each RMSNorm keeps the fp32 copy of its input (`pow` and the
/// product with `rsqrt` save it) and the normalized bf16 tensor (the weight's product saves it)
/// instead of its bf16 input, 4 more bytes per element; a gated MLP keeps the SiLU output (the
/// product with the up projection saves both factors), which a fused SwiGLU recomputes.
fn eager_elementwise_extra_width(run: &Run, mlp_width: u64) -> f64 {
    if !run.stack().eager_elementwise() {
        return 0.0;
    }
    let model = run.model();
    let sp = run.plan().sequence_split() as f64;
    let tp = run.plan().tp() as f64;
    // The fp32 copy (4) and the normalized tensor (2) in place of the bf16 input (2); PyTorch's
    // LayerNorm is one native kernel that keeps its input as a fused norm does.
    let per_norm = if model.norm() == NormKind::Rmsnorm { 4.0 } else { 0.0 };
    let norms = 2.0 * per_norm * model.hidden_size() as f64 / sp;
    let gated = model.up_width(mlp_width) > mlp_width;
    let silu = if gated { mlp_width as f64 * Precision::ACTIVATION_BYTES / tp } else { 0.0 };
    norms + silu
}

/// What an MoE block's routed experts store for one micro-batch on one GPU: per routed row the
/// expert FC1 input, its output and the FC2 input, and per token the router's FP32
/// probabilities and the dispatched input (nothing when the `moe` module is recomputed).
fn routed_activation_bytes(run: &Run, modules: RecomputeModules) -> Bytes {
    let model = run.model();
    let plan = run.plan();
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let gemm_in = run.training().precision().saved_gemm_input_bytes();
    let tokens = run.tokens_per_microbatch();
    match model.moe() {
        Some(_) if modules.contains(RecomputeModule::Moe) => Bytes::ZERO,
        Some(moe) => {
            let etp = plan.etp() as f64;
            let ffn = moe.expert_ffn_hidden_size;
            // A rerun activation function frees its output, the FC2 input.
            let activation_output =
                if modules.contains(RecomputeModule::MoeAct) { 0.0 } else { ffn as f64 * gemm_in };
            let width = model.expert_width() as f64;
            let per_row =
                width * gemm_in + (model.up_width(ffn) as f64 * act + activation_output) / etp;
            Bytes::new(
                crate::cost::layer::routed_rows(run) * per_row
                    + tokens / sp * (moe.num_experts as f64 * 4.0 + h * gemm_in),
            )
        }
        None => Bytes::ZERO,
    }
}

/// Activation bytes one hybrid layer of `kind` stores for one micro-batch on one GPU, with
/// selective recompute of `modules`: the transformer layer's blocks counted apart (one pre-norm
/// each), and for a Mamba-2 layer its norm and in-projection inputs, the projected z, x, B, C
/// and dt, the scan output, the gated norm's input and the output projection's input.
fn sublayer_activation_bytes(run: &Run, kind: Sublayer, modules: RecomputeModules) -> Bytes {
    let model = run.model();
    let plan = run.plan();
    let tp = plan.tp() as f64;
    let sp = plan.sequence_split() as f64;
    let h = model.hidden_size() as f64;
    let act = Precision::ACTIVATION_BYTES;
    let gemm_in = run.training().precision().saved_gemm_input_bytes();
    let tokens = run.tokens_per_microbatch();
    let norm = h * act / sp;
    let masks = if model.dropout() { h / sp } else { 0.0 };
    // The norm's output is the first GEMM's input; rerunning the norm frees it.
    let norm_output =
        if modules.contains(RecomputeModule::Layernorm) { 0.0 } else { h * gemm_in / sp };
    let mlp = |width: u64, module: RecomputeModule| {
        if width == 0 || modules.contains(module) {
            0.0
        } else {
            mlp_inner_width(run, width, gemm_in)
        }
    };
    let per_token = match kind {
        Sublayer::Attention => {
            norm + norm_output
                + attention_activation_width(run) * act / tp
                + model.attention_output_width() as f64 * gemm_in / tp
                + masks
        }
        Sublayer::Mlp => {
            norm + norm_output + mlp(model.ffn_hidden_size(), RecomputeModule::Mlp) + masks
        }
        Sublayer::Moe => {
            let shared = model.moe().map_or(0, |moe| moe.shared_ffn_hidden_size);
            let shared_input = if shared > 0 { norm_output } else { 0.0 };
            let per_token =
                norm + shared_input + mlp(shared, RecomputeModule::SharedExperts) + masks;
            return Bytes::new(per_token * tokens) + routed_activation_bytes(run, modules);
        }
        // Gated DeltaNet keeps its projections' outputs (q, k, v, z, beta, the decay), the
        // convolution's output (flash-linear-attention's kernels read it in the backward), the
        // kernel's output, the gated norm's input and the output projection's input.
        Sublayer::GatedDeltaNet => match model.hybrid_linear_attention() {
            Some(l) => {
                norm + norm_output
                    + (l.in_projection() + l.conv_channels() + 2 * l.value_width()) as f64 * act
                        / tp
                    + l.value_width() as f64 * gemm_in / tp
            }
            None => 0.0,
        },
        // Lightning attention keeps its projections' outputs (q, k, v before and after their SiLU,
        // and the gate's), the kernel's output (the norm's input), the norm's output (the gate
        // multiplies it) and the output projection's input.
        Sublayer::LightningAttention => match model.hybrid_lightning_attention() {
            Some(l) => {
                norm + norm_output
                    + (l.in_projection() + 3 * l.width() + 2 * l.width()) as f64 * act / tp
                    + l.width() as f64 * gemm_in / tp
            }
            None => 0.0,
        },
        // Mamba-1 (Jamba's mixer, run as separate kernels) keeps `in_proj`'s output (x for the
        // convolution, z for the scan's gate), the convolution's output (`x_proj`'s and the
        // scan's input), `x_proj`'s output (and the norms' outputs over dt, B and C when they
        // run; replicated across TP ranks), `dt_proj`'s output (the scan's step sizes), the
        // scan's output (`out_proj`'s input) and the scan's FP32 pair per channel and state at
        // each 2,048-token chunk's end (mamba_ssm's saved `x`).
        Sublayer::Mamba1 => match model.hybrid_mamba1() {
            Some(m) => {
                let x_proj = m.x_projection() as f64 * if m.dt_bc_norms { 2.0 } else { 1.0 };
                let chunk_states = (m.inner * m.state_size) as f64 * 8.0 / 2048.0 / tp;
                norm + norm_output
                    + (m.in_projection() + 2 * m.inner) as f64 * act / tp
                    + x_proj * act
                    + m.inner as f64 * gemm_in / tp
                    + chunk_states
            }
            None => 0.0,
        },
        // Falcon-H1: the Mamba-2 mixer's, the attention block's and the MLP's, but the mixers'
        // one pre-norm keeps its input and output once.
        Sublayer::ParallelHybrid => {
            let parts: f64 = PARALLEL_HYBRID_PARTS
                .iter()
                .map(|&part| sublayer_activation_bytes(run, part, modules).value())
                .sum();
            return Bytes::new((parts - (norm + norm_output) * tokens).max(0.0));
        }
        Sublayer::Mamba => match model.hybrid_mamba() {
            Some(m) => {
                // The convolution's output and the scan's chunk states are rebuilt inside the
                // scan's backward (mamba_ssm `MambaSplitConv1dScanCombinedFn`); the scan output
                // and the gated norm's input are kept.
                norm + norm_output
                    + (m.in_projection() + 2 * m.inner()) as f64 * act / tp
                    + m.inner() as f64 * gemm_in / tp
            }
            None => 0.0,
        },
    };
    Bytes::new(per_token.max(0.0) * tokens)
}

/// Bytes per token of one layer's activations that selective recompute of the plan's modules
/// frees (each module keeps only its input, which another tensor already holds): the norm
/// outputs (the QKV and FC1 inputs), the dense MLP's or the shared experts' FC1 output and FC2
/// input, and latent attention's full-width queries, keys and values. The attention core frees
/// nothing under a fused kernel, which stores no score matrix (an unfused one frees its stored
/// probabilities, mask and dropout output); the MoE modules' bytes are
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
    if modules.contains(RecomputeModule::CoreAttn)
        && run.stack().unfused_attention(run.cluster().gpu().generation())
    {
        // Megatron-LM's selective recompute (Korthikanti et al. 2022) reruns the attention core
        // for exactly this: its score matrix.
        freed += stored_score_bytes_per_token(run);
    }
    if modules.contains(RecomputeModule::Layernorm) {
        let mlp_input = if mlp_width > 0 { h * gemm_in / sp } else { 0.0 };
        freed += h * gemm_in / sp + mlp_input;
    }
    let mlp_module = if dense_mlp { RecomputeModule::Mlp } else { RecomputeModule::SharedExperts };
    if mlp_width > 0 && modules.contains(mlp_module) {
        freed += mlp_inner_width(run, mlp_width, gemm_in);
    }
    if model.mla().is_some() && modules.contains(RecomputeModule::MlaUpProj) {
        freed += (model.query_width() + 2 * model.kv_width()) as f64 * act / tp;
    }
    freed
}

/// Bytes per token a dense MLP of intermediate width `width` keeps inside itself on one GPU (split
/// by TP): its FC1 output, and its FC2 input in the recipe's saved precision; what recomputing
/// the MLP frees.
fn mlp_inner_width(run: &Run, width: u64, gemm_in: f64) -> f64 {
    let act = Precision::ACTIVATION_BYTES;
    let tp = run.plan().tp() as f64;
    (run.model().up_width(width) as f64 * act + width as f64 * gemm_in) / tp
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

/// Widths per token of what the attention block stores for its backward: Q, K and V (K and V as
/// the kernel reads them, repeated to the query heads where the stack does so; and with
/// latent attention the compressed query and key/value, replicated across TP ranks, counted here
/// at their TP-split share).
fn attention_activation_width(run: &Run) -> f64 {
    let model = run.model();
    let tp = run.plan().tp() as f64;
    let latent = model.mla().map_or(0.0, |mla| (mla.q_lora_rank + mla.kv_lora_rank) as f64 * tp);
    // An output gate keeps the gate's input for the backward.
    let gate = if model.attention_output_gate() { model.query_width() } else { 0 };
    let keys_values = crate::cost::layer::attended_kv_width(run);
    (model.query_width() + gate + 2 * keys_values) as f64 + latent
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
            let width = model.expert_width() as f64;
            rows_per_token
                * (width + moe.expert_ffn_hidden_size as f64 / plan.etp() as f64)
                * gemm_in
        }
    };
    Bytes::new(attention + mlp)
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
#[derive(Debug, Clone, PartialEq)]
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
    /// recompute, with offloading the layer brought back from host memory, and with
    /// Mesh-Attention the chunks a layer's attention gathers.
    pub recompute_working: Bytes,
    /// BF16 logits plus the FP32 softmax of one micro-batch, vocab-parallel across TP.
    pub logits: Bytes,
    /// A hybrid model's layers by kind, with the plan's selective recompute (`None` for other
    /// models).
    sublayers: Option<[Bytes; SUBLAYER_KINDS]>,
    /// The same counts for the layers the plan keeps in BF16 under a low-precision recipe, whose
    /// GEMM inputs are stored in BF16 ([`crate::plan::Plan::bf16_layers`]; `None` when it keeps
    /// none).
    bf16: Option<Box<ActivationBytes>>,
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
        let sublayers = run.model().hybrid().map(|_| {
            Sublayer::ALL.map(|kind| sublayer_activation_bytes(run, kind, plan.recompute_modules()))
        });
        if let Some(stored) = sublayers {
            // One hybrid layer is rebuilt at a time: the largest kind.
            let all = Sublayer::ALL
                .map(|kind| sublayer_activation_bytes(run, kind, RecomputeModules::NONE));
            recompute_working = match recompute {
                RecomputeKind::Full => all.into_iter().fold(Bytes::ZERO, Bytes::max),
                RecomputeKind::Selective => all
                    .iter()
                    .zip(stored)
                    .map(|(&all, stored)| (all - stored).max(Bytes::ZERO))
                    .fold(Bytes::ZERO, Bytes::max),
                RecomputeKind::None | RecomputeKind::Op => Bytes::ZERO,
            };
        }
        // Mesh-Attention's gathered chunks and partial gradients live through a layer's backward.
        recompute_working += gathered_bytes(run);
        let layers_per_rank = run.model().num_layers() as f64 / plan.pp() as f64;
        let offload_share =
            (plan.offload_activation_layers() as f64 / layers_per_rank.max(1.0)).min(1.0);
        if offload_share > 0.0 {
            // The next layer's activations are copied back while this one's backward runs.
            recompute_working += match sublayers {
                Some(stored) => stored.into_iter().fold(Bytes::ZERO, Bytes::max),
                None => dense_layer.max(moe_layer),
            };
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
            sublayers,
            bf16: (plan.bf16_layers() != (0, 0))
                .then(|| Box::new(ActivationBytes::new(&run.in_bf16()))),
        }
    }

    /// Activation bytes one micro-batch leaves stored in a segment (the recomputed share of its
    /// layers keeping only their inputs under full recompute), plus the embedding output on the
    /// first stage.
    pub fn stored(&self, segment: &Segment) -> Bytes {
        let (in_layers, offloaded) = self.layers_kept_and_offloaded(segment);
        let kept = in_layers - offloaded;
        kept + if segment.first { self.layer_input } else { Bytes::ZERO }
    }

    /// Activation bytes of one micro-batch that offloading moves to host memory in a segment
    /// (and back for the backward).
    pub fn offloaded(&self, segment: &Segment) -> Bytes {
        self.layers_kept_and_offloaded(segment).1
    }

    /// What one micro-batch's transformer layers of a segment store, and the part of it the
    /// offloaded layers move to host memory; layers kept in BF16 store their GEMM inputs in BF16.
    /// Under full recompute the offloaded layers are among those that keep their activations (a
    /// recomputed layer keeps only its input, which stays): a share of the segment's layers up to
    /// all that are not recomputed, so recompute and offload split the layers between them, as
    /// MEMO splits a layer's tokens.
    fn layers_kept_and_offloaded(&self, segment: &Segment) -> (Bytes, Bytes) {
        match &self.bf16 {
            Some(bf16) if segment.bf16.layers > 0.0 => {
                let (rest, kept) = segment.split_bf16();
                let (rest_stored, rest_offloaded) = self.own_kept_and_offloaded(&rest);
                let (kept_stored, kept_offloaded) = bf16.own_kept_and_offloaded(&kept);
                (rest_stored + kept_stored, rest_offloaded + kept_offloaded)
            }
            _ => self.own_kept_and_offloaded(segment),
        }
    }

    /// [`Self::layers_kept_and_offloaded`] for a segment of this precision's layers only.
    fn own_kept_and_offloaded(&self, segment: &Segment) -> (Bytes, Bytes) {
        let in_layers = self.stored_in_layers(segment);
        if self.offload_share <= 0.0 {
            return (in_layers, Bytes::ZERO);
        }
        if self.recompute != RecomputeKind::Full {
            return (in_layers, in_layers * self.offload_share);
        }
        let layers = segment.all.layers;
        let full = layers - segment.recomputed_layers.min(layers);
        (in_layers, self.unrecomputed_layer(segment) * (self.offload_share * layers).min(full))
    }

    /// What one layer of a segment stores without recompute, on average over its layers (a
    /// hybrid segment's kinds, an MoE segment's dense and MoE layers).
    fn unrecomputed_layer(&self, segment: &Segment) -> Bytes {
        let layers = segment.all.layers;
        if let Some(kinds) = &self.sublayers {
            return self.sublayer_bytes(segment, kinds) / layers.max(1.0);
        }
        if self.moe {
            let dense = segment.all.dense.min(layers);
            (self.dense_layer * dense + self.moe_layer * (layers - dense)) / layers.max(1.0)
        } else {
            self.dense_layer
        }
    }

    /// What a hybrid segment's layers store without recompute, kind by kind.
    fn sublayer_bytes(&self, segment: &Segment, kinds: &[Bytes]) -> Bytes {
        segment.all.sublayers.iter().zip(kinds).map(|(&n, &bytes)| bytes * f64::from(n)).sum()
    }

    /// What one micro-batch's transformer layers of a segment store.
    fn stored_in_layers(&self, segment: &Segment) -> Bytes {
        let layers = segment.all.layers;
        match (&self.sublayers, self.recompute) {
            (_, RecomputeKind::Full) => {
                let recomputed = segment.recomputed_layers.min(layers);
                self.layer_input * recomputed
                    + self.unrecomputed_layer(segment) * (layers - recomputed)
            }
            (Some(kinds), _) => self.sublayer_bytes(segment, kinds),
            (None, RecomputeKind::None | RecomputeKind::Selective) => {
                self.unrecomputed_layer(segment) * layers
            }
            (None, RecomputeKind::Op) => {
                let dense = if self.moe { segment.all.dense.min(layers) } else { layers };
                self.op_dense_layer * dense + self.op_moe_layer * (layers - dense)
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

/// The logits of one micro-batch at the loss's peak, vocab-parallel across TP, at the bytes per
/// logit of the stack's loss (`memory.loss_logits`): 6 for Megatron-Core's (bf16 logits and the
/// fp32 softmax), 12 for PyTorch's cross entropy on an fp32 copy.
pub fn logits_bytes(run: &Run) -> Bytes {
    let per_logit = run.stack().loss_logits().bytes_per_logit();
    Bytes::new(run.tokens_per_microbatch() * padded_vocab(run) / run.plan().tp() as f64 * per_logit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PARALLEL_HYBRID_PARTS;
    use crate::plan::PlanSpec;

    #[test]
    fn a_falcon_h1_layer_stores_its_shared_pre_norm_once() {
        let falcon = crate::presets::model("falcon-h1-0.5b").unwrap();
        let run = crate::run::test_run(falcon, 8, 4096, 8, 1, PlanSpec::default());
        let bytes = |kind| sublayer_activation_bytes(&run, kind, RecomputeModules::NONE).value();
        let parts: f64 = PARALLEL_HYBRID_PARTS.iter().map(|&kind| bytes(kind)).sum();
        // The norm's bf16 input and its bf16 output (the projections' input), 1024 wide, for
        // 4096 tokens: stored once for both mixers.
        assert_eq!(parts - bytes(Sublayer::ParallelHybrid), 2.0 * 1024.0 * 2.0 * 4096.0);
        assert!(bytes(Sublayer::ParallelHybrid) > bytes(Sublayer::Mamba) + bytes(Sublayer::Mlp));
    }

    #[test]
    fn an_eager_layer_keeps_its_norms_fp32_copies_and_the_silu_output() {
        let deepspeed = crate::presets::stack("deepspeed").unwrap();
        let llama = |stack: crate::stack::Stack| {
            let plan = PlanSpec { stack: Some(stack.id().to_owned()), ..PlanSpec::default() };
            let spec = crate::run::test_spec("llama2-7b", 8, 4096, 8, 1, plan);
            Run::from_spec_with_stack(&spec, std::sync::Arc::new(stack)).unwrap()
        };
        let eager = layer_activation_bytes(&llama(deepspeed.clone()), true).value();
        let fused = layer_activation_bytes(&llama(deepspeed.compiled()), true).value();
        // Two norms of width 4096 at 4 more bytes an element, the SiLU output of width 11008 in
        // bf16, for 4096 tokens.
        assert_eq!(eager - fused, (2.0 * 4.0 * 4096.0 + 2.0 * 11008.0) * 4096.0);
    }
}

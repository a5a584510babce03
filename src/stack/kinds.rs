//! The choices a software stack file makes, as enums.

use serde::{Deserialize, Serialize};

use crate::hardware::Generation;
use crate::plan::RecomputeKind;

/// The family of training software a stack belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum StackFamily {
    /// Unknown or unlisted software.
    Generic,
    /// Megatron-LM before Megatron-Core.
    MegatronLm,
    /// Megatron-LM with Megatron-Core.
    MegatronCore,
    /// NVIDIA NeMo and Megatron-Bridge.
    Nemo,
    /// NeMo AutoModel (PyTorch FSDP2).
    NemoAutomodel,
    /// PyTorch torchtitan.
    Torchtitan,
    /// Microsoft DeepSpeed.
    Deepspeed,
    /// Megatron-DeepSpeed (Megatron-LM model code on DeepSpeed).
    MegatronDeepspeed,
    /// MosaicML llm-foundry / Composer.
    LlmFoundry,
}

/// An attention kernel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKernel {
    /// cuDNN fused attention (through Transformer Engine or PyTorch).
    CudnnFused,
    /// Transformer Engine's DotProductAttention choosing at run time (cuDNN fused attention on
    /// Hopper and Blackwell with recent Transformer Engine).
    TeAuto,
    /// FlashAttention-3 (Hopper).
    #[serde(rename = "flash-attn-3")]
    FlashAttn3,
    /// FlashAttention-2.
    #[serde(rename = "flash-attn-2")]
    FlashAttn2,
    /// `torch.nn.functional.scaled_dot_product_attention` choosing its backend: its flash
    /// backend (FlashAttention-2) ranks first for causal bf16 attention.
    SdpaAuto,
    /// No fused kernel: the scores as a batched GEMM into an `s x s` matrix in memory, a
    /// softmax kernel over it, dropout, and a second batched GEMM with the values (Megatron-LM
    /// before FlashAttention; `crate::cost::unfused_attention`).
    Unfused,
}

/// Measured speed of PyTorch's FlashAttention-2 relative to cuDNN fused attention on H100 SXM
/// (causal, head dim 128, 1k-32k keys; `measurements/h100-sxm-kernels.json`): median of the six
/// forward ratios (0.545 to 0.603).
pub const FLASH_ATTN_2_HOPPER_FORWARD: f64 = 0.564;
/// The same for the backward (0.580 to 0.632).
pub const FLASH_ATTN_2_HOPPER_BACKWARD: f64 = 0.610;

impl AttentionKernel {
    /// Speed of this kernel relative to the GPU preset's attention curve, forward and backward.
    ///
    /// The Hopper and Blackwell presets' curves are cuDNN fused attention (measured on Hopper);
    /// the Ampere and Volta curves are FlashAttention-2's own (FlashAttention-2 paper), which
    /// every fused kernel there matches. FlashAttention-2 has no Hopper-specific path (no TMA or
    /// warp-group MMA), so on Hopper it runs at the measured fraction of cuDNN; Blackwell is not
    /// measured and takes Hopper's fraction, for the same reason. FlashAttention-3 is taken at
    /// cuDNN's speed on Hopper (both use the Hopper asynchronous paths; FlashAttention-3 paper,
    /// Shah et al. 2024, Fig. 5-6 compares them within a few percent).
    pub fn relative_speed(self, generation: Option<Generation>) -> (f64, f64) {
        let modern = matches!(generation, Some(Generation::Hopper | Generation::Blackwell));
        match self {
            AttentionKernel::FlashAttn2 | AttentionKernel::SdpaAuto if modern => {
                (FLASH_ATTN_2_HOPPER_FORWARD, FLASH_ATTN_2_HOPPER_BACKWARD)
            }
            _ => (1.0, 1.0),
        }
    }

    /// The name used in files.
    pub fn name(self) -> &'static str {
        match self {
            AttentionKernel::CudnnFused => "cudnn-fused",
            AttentionKernel::TeAuto => "te-auto",
            AttentionKernel::FlashAttn3 => "flash-attn-3",
            AttentionKernel::FlashAttn2 => "flash-attn-2",
            AttentionKernel::SdpaAuto => "sdpa-auto",
            AttentionKernel::Unfused => "unfused",
        }
    }
}

/// Which torchtitan job configuration a stack's torchtitan reads (`[export] torchtitan_config`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum TorchtitanConfig {
    /// torchtitan v0.2's `[training]` and `[parallelism]` dataclasses
    /// (`torchtitan/config/job_config.py@v0.2.2`), which meshplan's exporter writes.
    #[default]
    #[serde(rename = "v0.2")]
    V0_2,
    /// torchtitan before its `config/` package: the degrees under `[training]` and
    /// `[experimental]`, a pipeline's micro-batch count and split points
    /// (`torchtitan/config_manager.py` in 2024); meshplan does not write it.
    #[serde(rename = "legacy")]
    Legacy,
}

/// How a stack lays the routed experts over the ranks of a pipeline stage.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertLayout {
    /// MoE Parallel Folding (Megatron-Core 0.10 and later; the default of a stack that does not
    /// say): the experts' own tensor-parallel size `etp` is free of the attention's `tp`, and
    /// `etp x ep` divides the `tp x cp x dp` ranks of a stage.
    #[default]
    Folded,
    /// Megatron-Core before 0.10: expert parallelism runs inside data parallelism (`ep` divides
    /// `dp`) and every expert is split over the attention's tensor-parallel ranks (`etp = tp`);
    /// there is no `--expert-tensor-parallel-size`.
    WithinDataParallel,
}

/// The library a stack's linear layers call.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GemmPath {
    /// NVIDIA Transformer Engine modules (fused norms, casts and bias with the GEMMs).
    TransformerEngine,
    /// Plain `torch.nn.Linear` / `F.linear` (cuBLAS).
    Cublas,
}

/// How a stack runs the routed experts' GEMMs of an MoE layer (`[gemm] grouped_moe`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GroupedMoe {
    /// Transformer Engine's `GroupedLinear`: one cuBLAS GEMM launched per local expert, spread
    /// over Transformer Engine's compute streams (`multi_stream_cublas_gemm`,
    /// `transformer_engine/common/gemm/cublaslt_gemm.cu@v2.12`; its CUTLASS grouped kernel is
    /// Hopper-only and opt-in, `NVTE_USE_CUTLASS_GROUPED_GEMM`).
    TeGrouped,
    /// One grouped kernel for all local experts (CUTLASS grouped GEMM).
    CutlassGrouped,
    /// A loop over the local experts' own linear layers.
    Sequential,
    /// No routed experts.
    None,
}

impl GroupedMoe {
    /// Whether the host launches a GEMM per local expert (so a layer of many small experts
    /// waits on its launches).
    pub fn launches_per_expert(self) -> bool {
        matches!(self, GroupedMoe::TeGrouped | GroupedMoe::Sequential)
    }
}

/// How the host issues the routed experts' GEMMs of one MoE layer, as a run of the stack does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertLaunches {
    /// One kernel for all local experts (a grouped kernel, or Transformer Engine's fused
    /// grouped MLP): no launch per expert.
    OneKernel,
    /// One GEMM launch per local expert, issued eagerly by the host.
    PerExpertEager,
    /// One GEMM launch per local expert, replayed from a CUDA graph of the whole iteration.
    PerExpertGraphed,
}

/// The data type of the data-parallel gradient reduction.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GradReduce {
    /// bf16.
    Bf16,
    /// fp32.
    Fp32,
}

/// What a stack captures in CUDA graphs by default.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GraphScope {
    /// Nothing: every kernel is launched eagerly.
    None,
    /// Parts of each layer, chosen per recipe.
    PerRecipe,
    /// The whole training iteration.
    FullIteration,
}

/// The activation recompute a stack's published runs use when they do not say.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RecomputeDefault {
    /// No recompute.
    None,
    /// The attention core (Megatron's selective recompute).
    Selective,
    /// Whole layers.
    Full,
    /// Per-op selective activation checkpointing (torchtitan `op`).
    Op,
    /// The least recompute that fits memory (none, then selective, then full): what a tuned,
    /// published benchmark would use.
    LeastThatFits,
}

impl RecomputeDefault {
    /// The one recompute kind this default names; `None` for [`RecomputeDefault::LeastThatFits`],
    /// which depends on the run's memory.
    pub fn kind(self) -> Option<RecomputeKind> {
        match self {
            RecomputeDefault::None => Some(RecomputeKind::None),
            RecomputeDefault::Selective => Some(RecomputeKind::Selective),
            RecomputeDefault::Full => Some(RecomputeKind::Full),
            RecomputeDefault::Op => Some(RecomputeKind::Op),
            RecomputeDefault::LeastThatFits => None,
        }
    }
}

/// The data-parallel sharding a stack's published runs use when they do not say.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ShardingDefault {
    /// Plain data parallelism.
    None,
    /// Optimizer states sharded (Megatron's distributed optimizer, ZeRO-1).
    DistributedOptimizer,
    /// ZeRO-2.
    Zero2,
    /// ZeRO-3.
    Zero3,
    /// PyTorch FSDP full sharding.
    FsdpFull,
}

impl ShardingDefault {
    /// The ZeRO stage it amounts to.
    pub fn zero_stage(self) -> i64 {
        match self {
            ShardingDefault::None => 0,
            ShardingDefault::DistributedOptimizer => 1,
            ShardingDefault::Zero2 => 2,
            ShardingDefault::Zero3 | ShardingDefault::FsdpFull => 3,
        }
    }
}

/// How a performance recipe captures CUDA graphs (Megatron-Bridge `cuda_graph_impl`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CudaGraphImpl {
    /// No graphs (`cuda_graph_impl = "none"`, the provider default).
    None,
    /// Megatron-Core's own graphs (`"local"`) of the scopes listed.
    Local,
    /// Transformer Engine per-module graphs (`"transformer_engine"`) of the scopes listed.
    TransformerEngine,
    /// The whole iteration (`cuda_graph_impl = "full_iteration"`, Megatron-Bridge 0.5.0 on).
    FullIteration,
    /// Graphs on with the release's default scope (`enable_cuda_graph = True`, 25.09).
    Enabled,
}

/// A part of the model a recipe captures in CUDA graphs (Megatron-Bridge `cuda_graph_scope`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphModule {
    /// Attention.
    Attn,
    /// The dense MLP.
    Mlp,
    /// Mamba mixers.
    Mamba,
    /// The MoE router.
    MoeRouter,
    /// The MoE dispatch preprocessing.
    MoePreprocess,
    /// The whole iteration.
    FullIteration,
}

/// The backend of Megatron-Core's `flex` token dispatcher.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FlexBackend {
    /// DeepEP.
    Deepep,
    /// HybridEP.
    Hybridep,
}

impl CudaGraphImpl {
    /// The words used in assumptions.
    pub fn name(self) -> &'static str {
        match self {
            CudaGraphImpl::None => "none",
            CudaGraphImpl::Local => "local",
            CudaGraphImpl::TransformerEngine => "transformer-engine",
            CudaGraphImpl::FullIteration => "full-iteration",
            CudaGraphImpl::Enabled => "enabled",
        }
    }
}

impl FlexBackend {
    /// The name used in files.
    pub fn name(self) -> &'static str {
        match self {
            FlexBackend::Deepep => "deepep",
            FlexBackend::Hybridep => "hybridep",
        }
    }
}

/// How a stack's ring attention passes the keys and values of the context-parallel ranks.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CpKvExchange {
    /// One send/receive per step, each overlapping the attention of the chunk before it
    /// (Transformer Engine's and Megatron-Core's point-to-point ring); the backward passes the
    /// keys and values with their gradients the same way.
    #[default]
    Ring,
    /// One all-gather of every rank's keys and values, which only the first, local chunk's
    /// attention hides (PyTorch's ring attention with the `allgather` rotate method); the
    /// backward gathers them again and passes the fp32 key and value gradients around the ring,
    /// each step overlapping a chunk's attention.
    AllGather,
}

/// How a stack's loss holds the logits of a micro-batch at its peak, the backward of the loss.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LossLogits {
    /// Megatron-Core's vocab-parallel cross entropy (and Transformer Engine's fused one): the
    /// bf16 logits and one fp32 buffer of the softmax, its gradient computed in place. 6 bytes
    /// per logit.
    #[default]
    VocabParallel,
    /// PyTorch's `cross_entropy` on an fp32 copy of the logits (`logits.float()`), eager: the
    /// loss's backward holds the fp32 log-probabilities `log_softmax` saved, the fp32 gradient
    /// `nll_loss` passes back to them and `log_softmax`'s fp32 input gradient at once (the bf16
    /// logits freed before backward). 12 bytes per logit.
    Fp32Copy,
}

impl LossLogits {
    /// Bytes per logit (one token's score of one vocabulary entry) at the loss's peak.
    pub fn bytes_per_logit(self) -> f64 {
        match self {
            LossLogits::VocabParallel => 2.0 + 4.0,
            LossLogits::Fp32Copy => 3.0 * 4.0,
        }
    }
}

/// How a run that states only a per-rank batch (torchtitan's `training.batch_size`) splits it
/// into pipeline micro-batches.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineMicrobatches {
    /// One sequence per micro-batch (Megatron-LM's examples).
    #[default]
    OneSequence,
    /// As many micro-batches as pipeline ranks, the local batch split evenly among them
    /// (torchtitan: `--experimental.pipeline_parallel_microbatches` defaults to the pipeline
    /// degree).
    PipelineDegree,
}

//! One `[[recipe]]` entry of a stack file as written: the runs a published performance recipe
//! covers and the settings it uses. Unknown keys are rejected; [`super::recipe::check_recipes`]
//! turns the entries into validated [`super::Recipe`]s.

use serde::{Deserialize, Serialize};

use super::kinds::{CudaGraphImpl, CudaGraphModule, FlexBackend};
use crate::plan::{ExpertDispatch, Precision, RecomputeKind, RecomputeModule};

/// One `[[recipe]]` entry: which runs it applies to, what it sets, and where that was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecipeSpec {
    /// The models it is for, as NeMo and the calibration file spell them (`LLAMA3_70B`); matched
    /// case-insensitively with punctuation, spaces and parenthesised qualifiers ignored, so
    /// `LLAMA31_405B` also matches `LLAMA3.1_405B` and `Llama 3.1 405B`.
    pub models: Vec<String>,
    /// The GPU preset ids it is for (`h100-sxm`, `b200`, `gb200`, `gb300`).
    pub gpus: Vec<String>,
    /// The precisions it is for; absent: every precision.
    #[serde(default)]
    pub precisions: Option<Vec<Precision>>,
    /// The GPU counts it is for; absent: every count.
    #[serde(default)]
    pub num_gpus: Option<Vec<i64>>,
    /// CUDA graphs (`cuda_graph_impl`).
    #[serde(default)]
    pub cuda_graphs: Option<CudaGraphImpl>,
    /// What the graphs capture (`cuda_graph_scope`), with `local` or `transformer-engine` graphs.
    #[serde(default)]
    pub cuda_graph_scope: Option<Vec<CudaGraphModule>>,
    /// Activation recompute granularity.
    #[serde(default)]
    pub recompute: Option<RecomputeKind>,
    /// With selective recompute: the modules rerun in the backward.
    #[serde(default)]
    pub recompute_modules: Option<Vec<RecomputeModule>>,
    /// With full recompute (block method): layers per pipeline stage that recompute.
    #[serde(default)]
    pub recompute_num_layers: Option<i64>,
    /// Layers whose activations are offloaded to host memory (`cpu_offloading_num_layers`).
    #[serde(default)]
    pub offload_activation_layers: Option<i64>,
    /// Megatron-FSDP instead of the distributed optimizer (`use_megatron_fsdp`).
    #[serde(default)]
    pub fsdp: Option<bool>,
    /// NCCL user buffers (`nccl_ub`).
    #[serde(default)]
    pub nccl_user_buffers: Option<bool>,
    /// How tokens reach their experts: `all-to-all` (`alltoall` dispatcher) or `deduplicated`
    /// (`flex` dispatcher).
    #[serde(default)]
    pub expert_dispatch: Option<ExpertDispatch>,
    /// The backend of the `flex` dispatcher; needs `expert_dispatch = "deduplicated"`.
    #[serde(default)]
    pub flex_backend: Option<FlexBackend>,
    /// Expert-parallel all-to-all overlapped with computation (`moe_a2a_overlap`).
    #[serde(default)]
    pub expert_comm_overlap: Option<bool>,
    /// Transformer layers at the end of the model kept in BF16 under the low-precision recipe
    /// (`mixed_precision.first_last_layers_bf16` with `num_layers_at_end_in_bf16`); the layers at
    /// the start are not set by any recipe read so far.
    #[serde(default)]
    pub bf16_layers_at_end: Option<i64>,
    /// Tensor-parallel communication overlapped with the GEMMs (`comm_overlap.tp_comm_overlap`),
    /// where the recipe decides it rather than the stack's default.
    #[serde(default)]
    pub tp_comm_overlap: Option<bool>,
    /// The routed experts' MLP through Transformer Engine's op fuser
    /// (`cutedsl_fused_grouped_mlp`).
    #[serde(default)]
    pub fused_grouped_mlp: Option<bool>,
    /// FP8 dot-product attention (`fp8_dot_product_attention`).
    #[serde(default)]
    pub fp8_attention: Option<bool>,
    /// Where the settings were read: repository files at a tag.
    pub source: String,
}

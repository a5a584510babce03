//! A software stack as written in its preset file (`presets/stacks/*.toml`); unknown keys are
//! rejected. [`super::Stack::from_spec`] turns it into the validated stack.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::kinds::{
    AttentionKernel, CpKvExchange, ExpertLayout, GemmPath, GradReduce, GraphScope, GroupedMoe,
    LossLogits, PipelineMicrobatches, RecomputeDefault, ShardingDefault, StackFamily,
    TorchtitanConfig,
};
use super::recipe_spec::RecipeSpec;
use crate::plan::{Engine, Precision};

/// One software stack file, after its `inherits` chain is merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    /// Who the stack is and which runs it covers.
    pub stack: StackHeader,
    /// The attention kernel it runs on each GPU generation.
    #[serde(default)]
    pub attention: AttentionSpec,
    /// How it runs GEMMs.
    #[serde(default)]
    pub gemm: GemmSpec,
    /// Its precision recipes and defaults.
    #[serde(default)]
    pub precision: PrecisionSpec,
    /// Which communication overlaps it has and turns on by default.
    #[serde(default)]
    pub overlap: OverlapSpec,
    /// Its CUDA-graph support.
    #[serde(default)]
    pub cuda_graphs: CudaGraphsSpec,
    /// Host-side settings.
    #[serde(default)]
    pub host: HostSpec,
    /// Which kernels it fuses by default.
    #[serde(default)]
    pub fusions: FusionsSpec,
    /// What a published run of this stack used when it does not say (its recipes' defaults).
    #[serde(default)]
    pub defaults: DefaultsSpec,
    /// How the stack holds memory beyond the model's tensors.
    #[serde(default)]
    pub memory: MemorySpec,
    /// Which layouts of the parallel groups it can build.
    #[serde(default)]
    pub parallelism: ParallelismSpec,
    /// Which release's launch arguments its exported plans are written for.
    #[serde(default)]
    pub export: ExportSpec,
    /// Per-model notes on its published performance recipes (text only, not read by the model).
    #[serde(default)]
    pub recipes: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    /// Its published performance recipes as typed settings, one `[[recipe]]` entry per group of
    /// runs (model, GPU, precision); each entry carries its own source. A file that lists any
    /// replaces the whole list of the stack it inherits from.
    #[serde(default, rename = "recipe", skip_serializing_if = "Vec::is_empty")]
    pub recipe: Vec<RecipeSpec>,
    /// Where each field comes from: `"table.field" = "repo path@tag"` (or `"table"` for all of
    /// a table's fields).
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// Fields searched for and not established; never guessed.
    #[serde(default)]
    pub unknown: Vec<String>,
}

/// The `[stack]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackHeader {
    /// Short name, the file name without `.toml` (`nemo-26.04`).
    pub id: String,
    /// Human name.
    pub name: String,
    /// The software family.
    pub family: StackFamily,
    /// The engine meshplan exports to that runs this stack's plans, if any.
    #[serde(default)]
    pub engine: Option<Engine>,
    /// Text that names this stack in a run's software description, matched case-insensitively
    /// as a substring; the longest match over all stacks wins (`"nemo 26.04"`).
    #[serde(default)]
    pub matches: Vec<String>,
    /// The source code the facts were read from (`owner/repo@tag`).
    pub code: String,
    /// The stack this file starts from; its keys replace the parent's.
    #[serde(default)]
    pub inherits: Option<String>,
    /// Versions of its components (`megatron_core = "0.17.0"`).
    #[serde(default)]
    pub components: BTreeMap<String, String>,
}

/// The `[attention]` table: the kernel per GPU generation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttentionSpec {
    /// On Volta.
    #[serde(default)]
    pub volta: Option<AttentionKernel>,
    /// On Ampere.
    #[serde(default)]
    pub ampere: Option<AttentionKernel>,
    /// On Hopper.
    #[serde(default)]
    pub hopper: Option<AttentionKernel>,
    /// On Blackwell.
    #[serde(default)]
    pub blackwell: Option<AttentionKernel>,
    /// Whether the model code copies grouped-query attention's key/value heads up to the query
    /// heads before calling the kernel (a `repeat_kv`), so that the kernel and context
    /// parallelism's exchange see as many key/value heads as query heads. Default false.
    #[serde(default)]
    pub repeat_kv_heads: Option<bool>,
}

/// The `[gemm]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GemmSpec {
    /// The library its linear layers call.
    #[serde(default)]
    pub path: Option<GemmPath>,
    /// The path of its FP8 linear layers, when different.
    #[serde(default)]
    pub fp8_path: Option<GemmPath>,
    /// How it runs the routed experts' GEMMs.
    #[serde(default)]
    pub grouped_moe: Option<GroupedMoe>,
}

/// The `[precision]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrecisionSpec {
    /// The recipes it has, in its own words (`fp8_cs`, `mxfp8`).
    #[serde(default)]
    pub fp8_recipes: Vec<String>,
    /// What "FP8" means when a run does not name a recipe.
    #[serde(default)]
    pub fp8_default: Option<Precision>,
    /// The precision of a run that does not say.
    #[serde(default)]
    pub default: Option<Precision>,
    /// The data type of the data-parallel gradient reduction by default.
    #[serde(default)]
    pub grad_reduce: Option<GradReduce>,
}

/// One overlap: whether the software has it and whether it is on without extra flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverlapSupport {
    /// The software has it.
    pub exists: bool,
    /// It is on without extra flags.
    #[serde(default)]
    pub default: Option<bool>,
    /// When it applies, in words.
    #[serde(default)]
    pub note: Option<String>,
}

/// The `[overlap]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverlapSpec {
    /// Tensor-parallel communication with the GEMMs.
    #[serde(default)]
    pub tp_comm: Option<OverlapSupport>,
    /// Data-parallel gradient reduction with the backward.
    #[serde(default)]
    pub dp_grad_reduce: Option<OverlapSupport>,
    /// Parameter all-gather with the forward.
    #[serde(default)]
    pub param_gather: Option<OverlapSupport>,
    /// Parameter all-gather with the optimizer step.
    #[serde(default)]
    pub param_gather_with_optimizer_step: Option<OverlapSupport>,
    /// Expert-parallel all-to-all with computation.
    #[serde(default)]
    pub ep_a2a: Option<OverlapSupport>,
    /// Context-parallel ring exchange with attention.
    #[serde(default)]
    pub cp_ring: Option<OverlapSupport>,
    /// How its ring attention passes keys and values (default `ring`).
    #[serde(default)]
    pub cp_kv_exchange: Option<CpKvExchange>,
    /// Pipeline send/receive with computation.
    #[serde(default)]
    pub pp_p2p: Option<OverlapSupport>,
}

/// The `[cuda_graphs]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CudaGraphsSpec {
    /// The software can capture CUDA graphs.
    #[serde(default)]
    pub exists: Option<bool>,
    /// The scopes it can capture, in its own words.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// What its published recipes capture by default.
    #[serde(default)]
    pub default: Option<GraphScope>,
    /// When the default differs by recipe, in words.
    #[serde(default)]
    pub note: Option<String>,
}

/// The `[host]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Python's garbage collector is run by hand at fixed steps.
    #[serde(default)]
    pub manual_gc: Option<bool>,
    /// Steps between manual collections.
    #[serde(default)]
    pub manual_gc_interval: Option<i64>,
}

/// The `[memory]` table: how the stack holds memory beyond what the model's own tensors need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// How the loss holds the logits; unset: `vocab-parallel`, Megatron-Core's.
    #[serde(default)]
    pub loss_logits: Option<LossLogits>,
}

/// The `[parallelism]` table: which layouts of the parallel groups the software can build.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelismSpec {
    /// How it lays the routed experts over a stage's ranks; unset: `folded`.
    #[serde(default)]
    pub experts: Option<ExpertLayout>,
    /// Whether expert parallelism runs beside context parallelism (`ep > 1` with `cp > 1`);
    /// unset: true.
    #[serde(default)]
    pub experts_with_context_parallel: Option<bool>,
}

/// The `[export]` table: what an exported plan of this stack must launch on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportSpec {
    /// The Megatron-Core release whose `arguments.py` the exported flags are checked against:
    /// `"0.N"` (the lowest release of a stack that spans several), `"newest"` (an open-ended
    /// range: the newest arguments meshplan writes) or `"before-core"` (Megatron-LM before
    /// Megatron-Core, which meshplan does not write). Unset: the newest.
    #[serde(default)]
    pub megatron_core: Option<String>,
    /// The job configuration its torchtitan reads; unset: v0.2's, which meshplan writes.
    #[serde(default)]
    pub torchtitan_config: Option<TorchtitanConfig>,
}

/// The `[fusions]` table: `true` when the fused kernel is used by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FusionsSpec {
    /// Normalization (RMSNorm / LayerNorm) as one fused kernel.
    #[serde(default)]
    pub norm: Option<bool>,
    /// Rotary embedding.
    #[serde(default)]
    pub rope: Option<bool>,
    /// Cross-entropy loss.
    #[serde(default)]
    pub cross_entropy: Option<bool>,
    /// MoE token permute and unpermute.
    #[serde(default)]
    pub permute: Option<bool>,
    /// Bias and activation.
    #[serde(default)]
    pub bias_activation: Option<bool>,
    /// Rotary embedding whose cos and sin carry YaRN's attention factor (a model with
    /// `rope_scaling = "yarn"`) as one fused kernel; `false`: the eager PyTorch rotation.
    #[serde(default)]
    pub yarn_rope: Option<bool>,
    /// The routed experts' output-projection bias, weighted by each token's routing
    /// probability, added inside a fused kernel; `false`: eager PyTorch ops per local expert.
    #[serde(default)]
    pub expert_bias: Option<bool>,
    /// The clamp of a clamped gated activation (a model with `glu_clamp`) inside the fused
    /// activation kernel; `false`: eager clamps and a concatenation before it.
    #[serde(default)]
    pub glu_clamp: Option<bool>,
    /// The model is compiled (`torch.compile`), which fuses element-wise kernels.
    #[serde(default)]
    pub compile: Option<bool>,
    /// Fusions that depend on the recipe, in words.
    #[serde(default)]
    pub note: Option<String>,
}

/// The `[defaults]` table: what a published run of this stack used when it does not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultsSpec {
    /// Activation recompute.
    #[serde(default)]
    pub recompute: Option<RecomputeDefault>,
    /// Data-parallel sharding.
    #[serde(default)]
    pub sharding: Option<ShardingDefault>,
    /// Sequence parallelism with tp > 1.
    #[serde(default)]
    pub sequence_parallel: Option<bool>,
    /// Tensor-parallel communication overlap with tp > 1.
    #[serde(default)]
    pub tp_comm_overlap: Option<bool>,
    /// Data-parallel gradient reduction overlapped with the backward.
    #[serde(default)]
    pub overlap_grad_reduce: Option<bool>,
    /// When layers do not divide evenly over the pipeline, the embedding and the loss count as
    /// one layer each.
    #[serde(default)]
    pub uneven_split_counts_embedding_and_loss: Option<bool>,
    /// `false` when a run that states only its global batch used no gradient accumulation
    /// (micro-batch = global batch / dp); otherwise such a run is taken at micro-batch 1.
    #[serde(default)]
    pub gradient_accumulation: Option<bool>,
    /// The pipeline schedule, in the software's words.
    #[serde(default)]
    pub pp_schedule: Option<String>,
    /// How a run that states only a per-rank batch splits it into pipeline micro-batches;
    /// unset: one sequence each.
    #[serde(default)]
    pub pipeline_microbatches: Option<PipelineMicrobatches>,
    /// Model chunks per pipeline rank of an interleaved (looped) schedule that does not say how
    /// many; unset: a run must state its virtual pipeline size.
    #[serde(default)]
    pub interleaved_stages_per_rank: Option<u64>,
    /// The MoE token dispatcher, in the software's words.
    #[serde(default)]
    pub moe_dispatcher: Option<String>,
}

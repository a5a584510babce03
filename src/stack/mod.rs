//! The software stack a run is trained with: what kernels it runs, what it overlaps and fuses,
//! and what its published runs use when they do not say.
//!
//! One TOML file per stack lives in `presets/stacks/` (`spec.rs` mirrors it, `inherit.rs` merges
//! a file with the one it inherits from). [`Stack::from_spec`] checks it: every field set has a
//! source, every unknown field names a table, and the defaults are complete (that they never ask
//! for what the stack's engine cannot run is checked beside the capability table). The cost model prices the kernel the stack really runs
//! ([`Stack::attention_speed`], [`Stack::eager_elementwise`]); validation fills what a published
//! run leaves blank from [`Stack::defaults`]. The built-in files and the lookup of the stack a
//! run's software text names are in [`crate::presets`]. Its typed performance recipes
//! (`recipe.rs`) say what a published run of a given model, GPU and precision used when the run
//! does not say ([`Stack::recipe_for`]).

mod arguments_release;
mod inherit;
pub mod kinds;
mod recipe;
mod recipe_spec;
mod spec;

use std::collections::BTreeMap;

pub use arguments_release::MegatronArguments;
pub use inherit::{MAX_INHERITANCE_DEPTH, merge_inherited};
pub use kinds::{
    AttentionKernel, CpKvExchange, CudaGraphImpl, CudaGraphModule, ExpertLaunches, ExpertLayout,
    FlexBackend, GemmPath, GradReduce, GraphScope, GroupedMoe, LossLogits, PipelineMicrobatches,
    RecomputeDefault, StackFamily, TorchtitanConfig,
};
pub use recipe::{Recipe, RecipeSettings, model_key};
pub use recipe_spec::RecipeSpec;
pub use spec::StackSpec;

use crate::hardware::Generation;
use crate::plan::{Engine, Precision};
use crate::violation::{Collector, Violations};

/// The tables of a stack file whose fields need a source.
const SOURCED_TABLES: [&str; 11] = [
    "attention",
    "gemm",
    "precision",
    "overlap",
    "cuda_graphs",
    "host",
    "fusions",
    "defaults",
    "memory",
    "parallelism",
    "export",
];

/// What a published run of a stack used when it does not say, complete.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StackDefaults {
    /// Activation recompute.
    pub recompute: RecomputeDefault,
    /// ZeRO stage (1 = distributed optimizer, 3 = full sharding).
    pub zero: i64,
    /// Full sharding is PyTorch FSDP rather than ZeRO-3.
    pub fsdp: bool,
    /// Sequence parallelism with tp > 1.
    pub sequence_parallel: bool,
    /// Tensor-parallel communication overlap with tp > 1.
    pub tp_comm_overlap: bool,
    /// DP gradient reduction overlapped with the backward.
    pub overlap_grad_reduce: bool,
    /// Precision when the run does not say.
    pub precision: Precision,
    /// What "FP8" without a recipe means; `None` for a stack with no FP8 recipe of its own.
    pub fp8: Option<Precision>,
    /// The data type of the data-parallel gradient buffer and its reduction; `None` where the
    /// stack's file does not say (a plan then keeps fp32, Megatron-LM's and PyTorch's default).
    pub grad_reduce: Option<GradReduce>,
    /// Uneven pipeline splits count the embedding and the loss as one layer each.
    pub uneven_split_counts_embedding_and_loss: bool,
    /// A run that states only its global batch used no gradient accumulation (micro-batch =
    /// global batch / dp) rather than micro-batch 1.
    pub no_gradient_accumulation: bool,
    /// How a run that states only a per-rank batch splits it into pipeline micro-batches.
    pub pipeline_microbatches: PipelineMicrobatches,
    /// Model chunks per pipeline rank of an interleaved schedule that does not say; `None`: the
    /// run must state its virtual pipeline size.
    pub interleaved_stages_per_rank: Option<u64>,
}

/// Element-wise work a stack runs as separate eager PyTorch kernels beside its fused ones, for
/// the model features that need it (`[fusions]` fields set to `false`; unset is fused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EagerOps {
    /// The rotary embedding of every RoPE model, as Hugging Face transformers' `rotate_half`
    /// rotation (`fusions.rope = false`).
    pub rope: bool,
    /// The rotary embedding of a YaRN model (`fusions.yarn_rope = false`).
    pub yarn_rope: bool,
    /// The routed experts' output bias (`fusions.expert_bias = false`).
    pub expert_bias: bool,
    /// The clamp of a clamped gated activation (`fusions.glu_clamp = false`).
    pub glu_clamp: bool,
}

/// The kernel and launch choices of a performance recipe that change how a stack prices a run
/// rather than the plan ([`Stack::with_recipe_kernels`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecipeKernels {
    /// The routed experts' MLP through the Transformer Engine op fuser.
    pub fused_grouped_mlp: bool,
    /// FP8 dot-product attention.
    pub fp8_attention: bool,
    /// The whole iteration captured in one CUDA graph.
    pub full_iteration_graphs: bool,
}

/// A validated software stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    id: String,
    name: String,
    family: StackFamily,
    engine: Option<Engine>,
    attention: BTreeMap<Generation, AttentionKernel>,
    eager_elementwise: bool,
    eager: EagerOps,
    loss_logits: LossLogits,
    cp_kv_exchange: CpKvExchange,
    repeats_kv_heads: bool,
    /// Attention runs in FP8 under an FP8 recipe ([`Stack::with_fp8_attention`]).
    fp8_attention: bool,
    /// How the host issues the routed experts' GEMMs ([`Stack::expert_launches`]).
    expert_launches: ExpertLaunches,
    /// How it lays the routed experts over a stage's ranks ([`Stack::expert_layout`]).
    expert_layout: ExpertLayout,
    /// Whether expert parallelism runs beside context parallelism.
    experts_with_context_parallel: bool,
    /// The Megatron-Core release its exported flags are written for.
    megatron_arguments: MegatronArguments,
    /// The torchtitan job configuration its torchtitan reads.
    torchtitan_config: TorchtitanConfig,
    defaults: StackDefaults,
    code: String,
    sources: BTreeMap<String, String>,
    unknown: Vec<String>,
    recipes: Vec<Recipe>,
}

/// The field paths (`table.field`) a spec sets, from its serialized form.
fn set_fields(spec: &StackSpec) -> Vec<String> {
    let mut fields = Vec::new();
    let Ok(toml::Value::Table(table)) = toml::Value::try_from(spec) else { return fields };
    for name in SOURCED_TABLES {
        if let Some(toml::Value::Table(inner)) = table.get(name) {
            for (key, value) in inner {
                let empty = matches!(value, toml::Value::Array(items) if items.is_empty());
                // A note says in words when a set field applies; the field's source covers it.
                if !empty && key != "note" {
                    fields.push(format!("{name}.{key}"));
                }
            }
        }
    }
    if !spec.recipes.is_empty() {
        fields.push("recipes".to_owned());
    }
    fields
}

fn has_source(sources: &BTreeMap<String, String>, field: &str) -> bool {
    sources.keys().any(|key| {
        key == field || field.strip_prefix(key.as_str()).is_some_and(|rest| rest.starts_with('.'))
    }) || sources.keys().any(|key| key.starts_with(&format!("{field}.")))
}

impl Stack {
    /// Checks a merged stack spec (see [`merge_inherited`]) and builds the stack.
    pub fn from_spec(spec: &StackSpec) -> Result<Stack, Violations> {
        let mut problems = Collector::default();
        let header = &spec.stack;
        let id_ok = !header.id.is_empty()
            && header
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !id_ok {
            problems.add(
                "stack.id",
                &header.id,
                "must be lowercase letters, digits, dots and dashes",
                "name it after the software and release, e.g. `nemo-26.04`",
            );
        }
        let fields = set_fields(spec);
        for field in &fields {
            if !has_source(&spec.sources, field) {
                problems.add(
                    format!("stack.sources.\"{field}\""),
                    "missing",
                    "every field a stack sets needs its source",
                    "add the file and tag it was read from, or move the field to `unknown`",
                );
            }
        }
        for entry in &spec.unknown {
            let table = entry.split('.').next().unwrap_or_default();
            if !SOURCED_TABLES.contains(&table) {
                problems.add(
                    "stack.unknown",
                    entry,
                    "names no table of a stack file",
                    format!("use one of {} (optionally `.field`)", SOURCED_TABLES.join(", ")),
                );
            } else if fields.contains(entry) {
                problems.add(
                    "stack.unknown",
                    entry,
                    "is listed as unknown but the stack sets it",
                    "remove it from `unknown`",
                );
            }
        }
        let megatron_arguments = match spec.export.megatron_core.as_deref() {
            None => MegatronArguments::Newest,
            Some(text) => MegatronArguments::parse(text).unwrap_or_else(|| {
                problems.add(
                    "export.megatron_core",
                    text,
                    "is not a Megatron-Core release meshplan checks flags against",
                    "give the release as \"0.N\" (0.4 or later), \"newest\" or \"before-core\"",
                );
                MegatronArguments::Newest
            }),
        };
        let defaults = complete_defaults(spec, &mut problems);
        let recipes = recipe::check_recipes(&spec.recipe, &mut problems);
        let defaults = problems.finish_with(defaults, "stack.defaults")?;
        let attention = [
            (Generation::Volta, spec.attention.volta),
            (Generation::Ampere, spec.attention.ampere),
            (Generation::Hopper, spec.attention.hopper),
            (Generation::Blackwell, spec.attention.blackwell),
        ]
        .into_iter()
        .filter_map(|(generation, kernel)| kernel.map(|kernel| (generation, kernel)))
        .collect();
        let fused_by_library = spec.gemm.path == Some(GemmPath::TransformerEngine);
        let eager_elementwise = spec.fusions.norm == Some(false)
            && spec.fusions.compile != Some(true)
            && !fused_by_library;
        let per_expert = spec.gemm.grouped_moe.is_some_and(GroupedMoe::launches_per_expert);
        let expert_launches =
            if per_expert { ExpertLaunches::PerExpertEager } else { ExpertLaunches::OneKernel };
        let eager = EagerOps {
            rope: spec.fusions.rope == Some(false) && spec.fusions.compile != Some(true),
            yarn_rope: spec.fusions.yarn_rope == Some(false),
            expert_bias: spec.fusions.expert_bias == Some(false),
            glu_clamp: spec.fusions.glu_clamp == Some(false),
        };
        Ok(Stack {
            id: header.id.clone(),
            name: header.name.clone(),
            family: header.family,
            engine: header.engine,
            attention,
            eager_elementwise,
            eager,
            loss_logits: spec.memory.loss_logits.unwrap_or_default(),
            cp_kv_exchange: spec.overlap.cp_kv_exchange.unwrap_or_default(),
            repeats_kv_heads: spec.attention.repeat_kv_heads == Some(true),
            fp8_attention: false,
            expert_launches,
            expert_layout: spec.parallelism.experts.unwrap_or_default(),
            experts_with_context_parallel: spec
                .parallelism
                .experts_with_context_parallel
                .unwrap_or(true),
            megatron_arguments,
            torchtitan_config: spec.export.torchtitan_config.unwrap_or_default(),
            defaults,
            code: header.code.clone(),
            sources: spec.sources.clone(),
            unknown: spec.unknown.clone(),
            recipes,
        })
    }

    /// How the stack lays the routed experts over a stage's ranks.
    pub fn expert_layout(&self) -> ExpertLayout {
        self.expert_layout
    }

    /// Whether expert parallelism runs beside context parallelism (`ep > 1` with `cp > 1`).
    pub fn experts_with_context_parallel(&self) -> bool {
        self.experts_with_context_parallel
    }

    /// The Megatron-Core release whose arguments its exported plans are written for.
    pub fn megatron_arguments(&self) -> MegatronArguments {
        self.megatron_arguments
    }

    /// The torchtitan job configuration its torchtitan reads.
    pub fn torchtitan_config(&self) -> TorchtitanConfig {
        self.torchtitan_config
    }

    /// Short name (`nemo-26.04`).
    pub fn id(&self) -> &str {
        &self.id
    }
    /// Human name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The software family.
    pub fn family(&self) -> StackFamily {
        self.family
    }
    /// The engine meshplan exports its plans to, if any.
    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }
    /// The code its facts were read from.
    pub fn code(&self) -> &str {
        &self.code
    }
    /// Where each field comes from.
    pub fn sources(&self) -> &BTreeMap<String, String> {
        &self.sources
    }
    /// Fields not established.
    pub fn unknown(&self) -> &[String] {
        &self.unknown
    }
    /// How its loss holds the logits.
    pub fn loss_logits(&self) -> LossLogits {
        self.loss_logits
    }
    /// How its ring attention passes keys and values.
    pub fn cp_kv_exchange(&self) -> CpKvExchange {
        self.cp_kv_exchange
    }
    /// Whether its model code copies grouped-query key/value heads up to the query heads before
    /// the attention kernel.
    pub fn repeats_kv_heads(&self) -> bool {
        self.repeats_kv_heads
    }
    /// What its published runs use when they do not say.
    pub fn defaults(&self) -> &StackDefaults {
        &self.defaults
    }

    /// Its typed performance recipes.
    pub fn recipes(&self) -> &[Recipe] {
        &self.recipes
    }

    /// The recipe a published run of this model (any spelling, see [`model_key`]), GPU preset,
    /// precision and GPU count used, if the stack has one.
    pub fn recipe_for(
        &self,
        model: &str,
        gpu: &str,
        precision: Precision,
        num_gpus: u64,
    ) -> Option<&Recipe> {
        recipe::recipe_for(&self.recipes, model, gpu, precision, num_gpus)
    }

    /// The attention kernel it runs on a GPU generation, when the file says.
    pub fn attention_kernel(&self, generation: Option<Generation>) -> Option<AttentionKernel> {
        generation.and_then(|generation| self.attention.get(&generation).copied())
    }

    /// Speed of its attention relative to the GPU preset's attention curve, forward and
    /// backward: 1 where the kernel is not known.
    pub fn attention_speed(&self, generation: Option<Generation>) -> (f64, f64) {
        self.attention_kernel(generation)
            .map_or((1.0, 1.0), |kernel| kernel.relative_speed(generation))
    }

    /// Whether its attention runs in FP8 under an FP8 recipe (Megatron-Core's
    /// `fp8_dot_product_attention`): set only by a recipe that turns it on.
    pub fn fp8_attention(&self) -> bool {
        self.fp8_attention
    }

    /// How the host issues the routed experts' GEMMs of an MoE layer: one launch per local
    /// expert under Transformer Engine's `GroupedLinear` (eager, or replayed from a whole-
    /// iteration CUDA graph), or one kernel.
    pub fn expert_launches(&self) -> ExpertLaunches {
        self.expert_launches
    }

    /// Whether its attention on `generation` materializes the score matrix (no fused kernel).
    pub fn unfused_attention(&self, generation: Option<Generation>) -> bool {
        self.attention_kernel(generation) == Some(AttentionKernel::Unfused)
    }

    /// Whether its norms and activations run as separate eager PyTorch kernels (no fused norm,
    /// no compile, no Transformer Engine modules).
    pub fn eager_elementwise(&self) -> bool {
        self.eager_elementwise
    }

    /// The element-wise work it runs eagerly beside its fused kernels.
    pub fn eager_ops(&self) -> EagerOps {
        self.eager
    }

    /// The stack with the model compiled (`torch.compile`), as a run of it may state: Inductor
    /// generates fused kernels for the norms, activations and rotary embedding, so none runs as
    /// eager PyTorch code ([`Stack::eager_elementwise`] and [`EagerOps::rope`] are false).
    pub fn compiled(&self) -> Stack {
        let eager = EagerOps { rope: false, ..self.eager };
        Stack { eager_elementwise: false, eager, ..self.clone() }
    }

    /// The stack with `kernel` as its attention on `generation`, as a run that names its kernel
    /// may state it where the stack does not.
    pub fn with_attention(&self, generation: Generation, kernel: AttentionKernel) -> Stack {
        let mut stack = self.clone();
        stack.attention.insert(generation, kernel);
        stack
    }

    /// The stack with the kernel and launch choices a performance recipe makes
    /// ([`Stack::with_fused_grouped_mlp`], [`Stack::with_fp8_attention`],
    /// [`Stack::with_full_iteration_graphs`]), each where its flag is set.
    pub fn with_recipe_kernels(&self, choices: RecipeKernels) -> Stack {
        let mut stack =
            if choices.fused_grouped_mlp { self.with_fused_grouped_mlp() } else { self.clone() };
        if choices.fp8_attention {
            stack = stack.with_fp8_attention();
        }
        if choices.full_iteration_graphs {
            stack = stack.with_full_iteration_graphs();
        }
        stack
    }

    /// The stack as a recipe that turns on FP8 dot-product attention runs it (Megatron-Core's
    /// `fp8_dot_product_attention`, set by Megatron-Bridge's 26.06 and later MoE performance
    /// recipes): Transformer Engine's `DotProductAttention` quantizes the queries, keys and values
    /// and runs cuDNN's attention in the run's FP8 recipe.
    pub fn with_fp8_attention(&self) -> Stack {
        Stack { fp8_attention: true, ..self.clone() }
    }

    /// The stack as a recipe that fuses the routed experts' MLP runs it: Megatron-Core's
    /// Transformer Engine op fuser (`use_transformer_engine_op_fuser`, Megatron-Bridge's
    /// `cutedsl_fused_grouped_mlp`) builds fc1, the activation and fc2 as fused TE ops with their
    /// biases, the routing weights and a clamped activation (`ScaledClampedQGeGLU`) inside
    /// (Megatron-LM `megatron/core/transformer/moe/experts.py@core_v0.18.0`:
    /// `_is_fused_impl_supported`, `_make_fused_ops`), so neither the expert bias nor the clamp
    /// runs eagerly, and each GEMM of the local experts is one grouped kernel, not a launch per
    /// expert.
    pub fn with_fused_grouped_mlp(&self) -> Stack {
        let mut stack = self.clone();
        stack.eager.expert_bias = false;
        stack.eager.glu_clamp = false;
        stack.expert_launches = ExpertLaunches::OneKernel;
        stack
    }

    /// The stack as a recipe that captures the whole iteration in one CUDA graph runs it
    /// (Megatron-Bridge's `cuda_graph_impl = "full_iteration"`, 0.5.0 on): the per-expert
    /// launches (GEMMs and casts) are replayed from the graph instead of issued by the host.
    pub fn with_full_iteration_graphs(&self) -> Stack {
        let mut stack = self.clone();
        if stack.expert_launches == ExpertLaunches::PerExpertEager {
            stack.expert_launches = ExpertLaunches::PerExpertGraphed;
        }
        stack
    }
}

fn complete_defaults(spec: &StackSpec, problems: &mut Collector) -> Option<StackDefaults> {
    let d = &spec.defaults;
    let mut missing = Vec::new();
    let mut need = |name: &str, set: bool| {
        if !set {
            missing.push(name.to_owned());
        }
    };
    need("defaults.recompute", d.recompute.is_some());
    need("defaults.sharding", d.sharding.is_some());
    need("defaults.sequence_parallel", d.sequence_parallel.is_some());
    need("defaults.tp_comm_overlap", d.tp_comm_overlap.is_some());
    need("defaults.overlap_grad_reduce", d.overlap_grad_reduce.is_some());
    need(
        "defaults.uneven_split_counts_embedding_and_loss",
        d.uneven_split_counts_embedding_and_loss.is_some(),
    );
    need("precision.default", spec.precision.default.is_some());
    for field in &missing {
        problems.add(
            format!("stack.{field}"),
            "unset",
            "a stack must say what its published runs use when they do not say",
            "set it with its source, or inherit a stack that does",
        );
    }
    if let Some(stages) = d.interleaved_stages_per_rank
        && !(2..=crate::limits::PARALLEL_SIZE).contains(&stages)
    {
        problems.add(
            "stack.defaults.interleaved_stages_per_rank",
            stages.to_string(),
            "an interleaved schedule runs at least two model chunks on each pipeline rank",
            format!("use a count from 2 to {}", crate::limits::PARALLEL_SIZE),
        );
    }
    let sharding = d.sharding?;
    Some(StackDefaults {
        recompute: d.recompute?,
        zero: sharding.zero_stage(),
        fsdp: sharding == kinds::ShardingDefault::FsdpFull,
        sequence_parallel: d.sequence_parallel?,
        tp_comm_overlap: d.tp_comm_overlap?,
        overlap_grad_reduce: d.overlap_grad_reduce?,
        precision: spec.precision.default?,
        fp8: spec.precision.fp8_default,
        grad_reduce: spec.precision.grad_reduce,
        uneven_split_counts_embedding_and_loss: d.uneven_split_counts_embedding_and_loss?,
        no_gradient_accumulation: d.gradient_accumulation == Some(false),
        pipeline_microbatches: d.pipeline_microbatches.unwrap_or_default(),
        interleaved_stages_per_rank: d.interleaved_stages_per_rank,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interleaved_default_of_fewer_than_two_chunks_per_rank_is_rejected_by_name() {
        let mut spec = crate::presets::stack_spec("torchtitan-2024-12").unwrap();
        let stack = Stack::from_spec(&spec).unwrap();
        assert_eq!(stack.defaults().interleaved_stages_per_rank, Some(2));
        assert_eq!(stack.defaults().pipeline_microbatches, PipelineMicrobatches::PipelineDegree);
        spec.defaults.interleaved_stages_per_rank = Some(1);
        let problems = Stack::from_spec(&spec).unwrap_err().to_string();
        assert!(problems.contains("stack.defaults.interleaved_stages_per_rank"), "{problems}");
        assert!(problems.contains("from 2"), "{problems}");
    }

    #[test]
    fn a_grouped_moe_outside_the_listed_choices_is_refused_naming_them() {
        let spec = crate::presets::stack_spec("megatron-core-0.14-plus").unwrap();
        assert_eq!(spec.gemm.grouped_moe, Some(GroupedMoe::TeGrouped));
        let mut file = toml::Value::try_from(&spec).unwrap();
        file["gemm"]["grouped_moe"] = toml::Value::String("grouped-kernel".into());
        let text = toml::to_string(&file).unwrap();
        let error = toml::from_str::<StackSpec>(&text).unwrap_err().to_string();
        assert!(error.contains("grouped-kernel"), "{error}");
        for choice in ["te-grouped", "cutlass-grouped", "sequential", "none"] {
            assert!(error.contains(choice), "{choice} missing from {error}");
        }
    }

    #[test]
    fn torchtitan_0_2_runs_cudnn_attention_on_grouped_heads_where_2024_ran_flash_attention_2() {
        let hopper = Some(Generation::Hopper);
        let new = crate::presets::stack("torchtitan-0.2").unwrap();
        assert_eq!(new.attention_kernel(hopper), Some(AttentionKernel::CudnnFused));
        assert_eq!(new.attention_speed(hopper), (1.0, 1.0));
        assert!(!new.repeats_kv_heads());
        assert_eq!(new.torchtitan_config(), TorchtitanConfig::V0_2);
        assert_eq!(new.defaults().pipeline_microbatches, PipelineMicrobatches::OneSequence);
        let old = crate::presets::stack("torchtitan-2024-12").unwrap();
        assert_eq!(old.attention_speed(hopper), (0.564, 0.610));
        assert!(old.repeats_kv_heads());
        assert_eq!(old.torchtitan_config(), TorchtitanConfig::Legacy);
    }

    #[test]
    fn a_torchtitan_config_outside_the_listed_choices_is_refused_naming_them() {
        let spec = crate::presets::stack_spec("torchtitan-2024-12").unwrap();
        let mut file = toml::Value::try_from(&spec).unwrap();
        file["export"]["torchtitan_config"] = toml::Value::String("v0.3".into());
        let text = toml::to_string(&file).unwrap();
        let error = toml::from_str::<StackSpec>(&text).unwrap_err().to_string();
        assert!(error.contains("torchtitan_config") && error.contains("v0.3"), "{error}");
        for choice in ["v0.2", "legacy"] {
            assert!(error.contains(choice), "{choice} missing from {error}");
        }
    }

    #[test]
    fn an_export_release_is_read_or_refused_by_name() {
        let old = crate::presets::stack("megatron-core-0.6").unwrap();
        assert_eq!(old.megatron_arguments(), MegatronArguments::Release { minor: 6 });
        // A NeMo release inherits its Megatron-Core range's, the open-ended range the newest.
        let nemo = crate::presets::stack("nemo-24.07-25.07").unwrap();
        assert_eq!(nemo.megatron_arguments(), MegatronArguments::Release { minor: 8 });
        let newest = crate::presets::stack("nemo-26.04").unwrap();
        assert_eq!(newest.megatron_arguments(), MegatronArguments::Newest);
        let mut spec = crate::presets::stack_spec("megatron-core-0.6").unwrap();
        spec.export.megatron_core = Some("0.6.0".to_owned());
        let problems = Stack::from_spec(&spec).unwrap_err().to_string();
        assert!(
            problems.contains("export.megatron_core") && problems.contains("0.6.0"),
            "{problems}"
        );
    }
}

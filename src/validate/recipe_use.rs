//! The settings a calibration row leaves blank, taken from the performance recipe its stack has
//! for the row's model, GPU and precision (`[[recipe]]` in the stack file), before the stack's
//! defaults: row > recipe > stack defaults > the least recompute that fits.
//!
//! A recipe whose layer counts do not fit the row's stated pipeline (more offloaded or
//! recomputed layers than a rank holds) is not the one the row ran: nothing is taken from it, and
//! the assumption says so. So is a recipe that runs Megatron-FSDP where the row states other
//! sharding, or the other way round. A recompute module of a part the mapped model lacks is left out.
//!
//! `meshplan estimate --recipe` takes a user's plan through the same steps (`cli/recipe.rs`):
//! there the plan's flags are what is stated, and the texts speak of the plan, not of a row.

use crate::model::ModelSpec;
use crate::plan::{FsdpMode, PlanSpec, Precision, RecomputeKind, RecomputeModule};
use crate::stack::{CudaGraphImpl, Recipe, Stack};

/// What a recipe fills in: a calibration row's blanks or a user's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    /// A published run (`meshplan validate`).
    Row,
    /// A plan from the command line (`--recipe`).
    Plan,
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::Row => "row",
            Subject::Plan => "plan",
        }
    }
}

/// Which of a recipe's other settings the row or the plan already states.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StatedOther {
    /// Activation offload.
    pub offload: bool,
    /// The token dispatcher.
    pub dispatch: bool,
    /// Expert-parallel all-to-all overlap.
    pub expert_overlap: bool,
}

/// The recipe covering a row (or a plan), if any, and what was taken from it.
pub(crate) struct RecipeUse<'a> {
    recipe: Option<&'a Recipe>,
    subject: Subject,
    /// The row's model, as the row names it.
    model: String,
    taken: Vec<String>,
    /// Why the recipe was not used at all.
    ruled_out: Option<String>,
    /// Settings of a used recipe the run could not take.
    dropped: Vec<String>,
}

impl<'a> RecipeUse<'a> {
    /// The recipe of `stack` for this model, GPU preset, precision and GPU count, unless its layer
    /// counts do not fit a pipeline rank of `layers_per_stage` layers.
    pub(crate) fn find(
        stack: &'a Stack,
        (model, gpu): (&str, &str),
        precision: Precision,
        num_gpus: u64,
        layers_per_stage: u64,
        subject: Subject,
    ) -> RecipeUse<'a> {
        let recipe = stack.recipe_for(model, gpu, precision, num_gpus);
        let settings = recipe.map(Recipe::settings);
        let offload = settings.and_then(|s| s.offload_activation_layers);
        let full = settings.and_then(|s| s.recompute_num_layers);
        let misfit = if let Some(n) = offload.filter(|n| *n >= layers_per_stage) {
            Some(format!("its activation offload of {n} layers"))
        } else {
            full.filter(|n| *n > layers_per_stage)
                .map(|n| format!("its full recompute of {n} layers"))
        };
        let ruled_out = misfit.map(|what| match subject {
            Subject::Row => format!(
                "not used: {what} does not fit the row's {layers_per_stage} layers per pipeline rank, so the row ran another layout"
            ),
            Subject::Plan => {
                format!("{what} does not fit the plan's {layers_per_stage} layers per pipeline rank")
            }
        });
        RecipeUse {
            recipe,
            subject,
            model: model.to_owned(),
            taken: Vec::new(),
            ruled_out,
            dropped: Vec::new(),
        }
    }

    /// Rules the recipe out where the row states its data-parallel sharding and the recipe runs the
    /// other one (`row_fsdp`: whether the row states Megatron-FSDP, `None` where it states
    /// nothing): the published run then used another configuration than the recipe, so none of
    /// the recipe's settings describe it.
    pub(crate) fn check_sharding(&mut self, row_fsdp: Option<bool>) {
        let (Some(recipe), Some(row_fsdp)) = (self.recipe, row_fsdp) else { return };
        let recipe_fsdp = recipe.settings().fsdp.unwrap_or(false);
        if self.ruled_out.is_some() || recipe_fsdp == row_fsdp {
            return;
        }
        let (row, ran) = if row_fsdp {
            ("Megatron-FSDP", "does not run it")
        } else {
            ("no Megatron-FSDP", "runs Megatron-FSDP")
        };
        self.ruled_out = Some(format!(
            "not used: the row states {row} and the recipe {ran}, so the row ran another configuration"
        ));
    }

    /// The recipe that covers the run, used or not.
    pub(crate) fn recipe(&self) -> Option<&'a Recipe> {
        self.recipe
    }

    /// Why the recipe is not used, where the run's layout rules it out.
    pub(crate) fn ruled_out(&self) -> Option<&str> {
        self.ruled_out.as_deref()
    }

    /// The recipe, unless the row's layout rules it out.
    fn usable(&self) -> Option<&'a Recipe> {
        self.recipe.filter(|_| self.ruled_out.is_none())
    }

    /// Sets the plan's recompute from the recipe (the row states none); `false` when the recipe
    /// sets no recompute the run can take.
    pub(crate) fn recompute(&mut self, model: &ModelSpec, plan: &mut PlanSpec) -> bool {
        let Some(settings) = self.usable().map(Recipe::settings) else { return false };
        let Some(kind) = settings.recompute else { return false };
        match kind {
            RecomputeKind::Selective => {
                let listed = settings.recompute_modules.clone().unwrap_or_default();
                let (kept, dropped): (Vec<RecomputeModule>, Vec<RecomputeModule>) =
                    listed.iter().partition(|module| model_has(model, **module));
                for module in &dropped {
                    self.dropped.push(format!(
                        "recompute module {} (the mapped model has no such part)",
                        module.name()
                    ));
                }
                if !listed.is_empty() && kept.is_empty() {
                    return false;
                }
                plan.recompute = Some(kind);
                let names: Vec<&str> = kept.iter().map(|m| m.name()).collect();
                if listed.is_empty() {
                    self.taken.push("selective recompute".into());
                } else {
                    plan.recompute_modules = Some(kept);
                    self.taken.push(format!("selective recompute of {}", names.join("+")));
                }
            }
            RecomputeKind::Full => {
                if let Some(n) = settings.recompute_num_layers {
                    plan.recompute_num_layers = Some(n as i64);
                    self.taken.push(format!("full recompute of {n} layers per stage"));
                } else {
                    self.taken.push("full recompute".into());
                }
                plan.recompute = Some(kind);
            }
            RecomputeKind::None => {
                plan.recompute = Some(kind);
                self.taken.push("no recompute".into());
            }
            RecomputeKind::Op => {
                plan.recompute = Some(kind);
                self.taken.push("per-op recompute".into());
            }
        }
        true
    }

    /// Megatron-FSDP from the recipe (the row states no sharding); `true` when taken.
    pub(crate) fn sharding(&mut self, plan: &mut PlanSpec) -> bool {
        let fsdp = self.usable().and_then(|recipe| recipe.settings().fsdp);
        if fsdp != Some(true) {
            return false;
        }
        plan.zero = None;
        plan.fsdp = Some(true);
        plan.fsdp_mode = Some(FsdpMode::Full);
        self.taken.push("Megatron-FSDP".into());
        true
    }

    /// Activation offload, token dispatch and expert-parallel overlap from the recipe, where the
    /// row's settings (or the plan's flags) do not state them.
    pub(crate) fn other_settings(&mut self, stated: StatedOther, moe: bool, plan: &mut PlanSpec) {
        let Some(settings) = self.usable().map(Recipe::settings) else { return };
        if let Some(n) = settings.offload_activation_layers
            && !stated.offload
        {
            plan.offload_activation_layers = Some(n as i64);
            self.taken.push(format!("activation offload {n} layers"));
        }
        if !moe {
            return;
        }
        if let Some(dispatch) = settings.expert_dispatch
            && plan.expert_dispatch.is_none()
            && !stated.dispatch
        {
            plan.expert_dispatch = Some(dispatch);
            let backend =
                settings.flex_backend.map_or(String::new(), |b| format!(" ({})", b.name()));
            self.taken.push(format!("expert dispatch {}{backend}", dispatch.name()));
        }
        if let Some(overlap) = settings.expert_comm_overlap
            && !stated.expert_overlap
        {
            plan.expert_comm_overlap = Some(overlap);
            self.taken
                .push(format!("EP all-to-all overlap {}", if overlap { "on" } else { "off" }));
        }
    }

    /// The layers the recipe keeps in BF16 at the end of the model, unless the row's settings
    /// (or the plan's flags) state BF16 layers; not taken (and said so) where they exceed the
    /// run's layers per pipeline stage, which Megatron-Core refuses.
    pub(crate) fn bf16_layers(&mut self, stated: bool, stage: u64, plan: &mut PlanSpec) {
        let Some(n) = self.usable().and_then(|recipe| recipe.settings().bf16_layers_at_end) else {
            return;
        };
        if stated {
            return;
        }
        if n > stage {
            self.dropped.push(format!(
                "the last {n} layers in BF16 (more than the {}'s {stage} layers per pipeline stage)",
                self.subject.name()
            ));
            return;
        }
        plan.bf16_layers_at_end = Some(n as i64);
        self.taken.push(format!("the last {n} layers in BF16"));
    }

    /// Tensor-parallel communication overlap from the recipe, unless the row's settings (or the
    /// plan's flags) state it; `None`: the stack's default decides.
    pub(crate) fn tp_comm_overlap(&mut self, stated: bool, tp: u64) -> Option<bool> {
        let overlap = self.usable().and_then(|recipe| recipe.settings().tp_comm_overlap)?;
        if tp == 1 || stated {
            return None;
        }
        self.taken.push(format!("TP communication overlap {}", if overlap { "on" } else { "off" }));
        Some(overlap)
    }

    /// Whether the recipe runs the routed experts' MLP through the Transformer Engine op fuser
    /// (`cutedsl_fused_grouped_mlp`): a kernel choice of the stack, not of the plan.
    pub(crate) fn fused_grouped_mlp(&mut self) -> bool {
        let fused = self.usable().and_then(|recipe| recipe.settings().fused_grouped_mlp);
        if fused == Some(true) {
            self.taken.push("TE op-fuser grouped MLP (expert bias and clamp fused)".into());
        }
        fused == Some(true)
    }

    /// Whether the recipe captures the whole iteration in one CUDA graph
    /// (`cuda_graph_impl = "full_iteration"`): a launch choice of the stack, not of the plan.
    pub(crate) fn full_iteration_graphs(&mut self) -> bool {
        let graphs = self.usable().and_then(|recipe| recipe.settings().cuda_graphs);
        let full = graphs == Some(CudaGraphImpl::FullIteration);
        if full {
            self.taken.push("whole-iteration CUDA graph (kernel launches replayed)".into());
        }
        full
    }

    /// Whether the recipe runs attention in FP8 (`fp8_dot_product_attention`): a kernel choice
    /// of the stack, not of the plan.
    pub(crate) fn fp8_attention(&mut self) -> bool {
        let fp8 = self.usable().and_then(|recipe| recipe.settings().fp8_attention);
        if fp8 == Some(true) {
            self.taken.push(
                "FP8 dot-product attention (MXFP8: at the GPU's measured speed for the model's head \
                 dimension, as BF16 where none was measured or the layer's window limits it)"
                    .into(),
            );
        }
        fp8 == Some(true)
    }

    /// The assumption naming the recipe and what was taken from it; `None` when nothing was
    /// taken or ruled out.
    pub(crate) fn assumption(
        &self,
        stack: &str,
        gpu: &str,
        precision: Precision,
    ) -> Option<String> {
        let recipe = self.recipe?;
        let what = match &self.ruled_out {
            Some(why) => why.clone(),
            None if self.taken.is_empty() && self.dropped.is_empty() => return None,
            None if self.taken.is_empty() => "nothing taken".to_owned(),
            None => self.taken.join(", "),
        };
        let model = recipe.model_named(&self.model);
        let mut text = format!("{stack} recipe for {model} on {gpu} {}: {what}", precision.name());
        if !self.dropped.is_empty() {
            text.push_str(&format!("; not taken: {}", self.dropped.join(", ")));
        }
        text.push_str(&format!(" ({})", recipe.source()));
        Some(text)
    }
}

/// Whether the model has the part a recompute module reruns (as `run/rules.rs` checks).
fn model_has(model: &ModelSpec, module: RecomputeModule) -> bool {
    let moe = model.moe.as_ref();
    match module {
        RecomputeModule::MlaUpProj => model.mla.is_some(),
        RecomputeModule::Moe | RecomputeModule::MoeAct => moe.is_some(),
        RecomputeModule::SharedExperts => moe.is_some_and(|moe| {
            moe.shared_experts.unwrap_or(0) > 0
                || moe.shared_expert_ffn_hidden_size.unwrap_or(0) > 0
        }),
        RecomputeModule::Mlp => moe.is_none_or(|moe| moe.dense_layers.unwrap_or(0) > 0),
        RecomputeModule::CoreAttn | RecomputeModule::Layernorm => true,
    }
}

#[cfg(test)]
mod tests {
    use super::{RecipeUse, Subject};
    use crate::plan::Precision;
    use crate::presets;

    /// A run of `model` on `gpus` GPUs of `gpu` (`layers` a pipeline rank) in `precision` under
    /// NeMo 26.06's recipes: what `setting` says of its recipe, and the assumption text then.
    fn taken(
        (model, gpus, layers): (&str, u64, u64),
        gpu: &str,
        precision: Precision,
        setting: fn(&mut RecipeUse<'_>) -> bool,
    ) -> (bool, String) {
        let stack = presets::stack("nemo-26.06").unwrap();
        let mut recipe =
            RecipeUse::find(&stack, (model, gpu), precision, gpus, layers, Subject::Row);
        let set = setting(&mut recipe);
        (set, recipe.assumption(stack.id(), gpu, precision).unwrap_or_default())
    }

    #[test]
    fn the_fused_grouped_mlp_is_taken_where_the_recipe_runs_it() {
        let find = |gpu: &str, precision: Precision| {
            taken(("GPT OSS 120B", 64, 36), gpu, precision, |r| r.fused_grouped_mlp())
        };
        // scripts/performance/configs/gpt_oss@v0.5.0: MXFP8 on GB200 runs the TE op fuser.
        let (fused, text) = find("gb200", Precision::Mxfp8);
        assert!(fused && text.contains("TE op-fuser grouped MLP"), "{text}");
        let (fused, text) = find("gb200", Precision::Bf16);
        assert!(!fused && !text.contains("op-fuser"), "{text}");
        let (fused, _) = find("h100-sxm", Precision::Bf16);
        assert!(!fused);
    }

    #[test]
    fn whole_iteration_graphs_are_taken_where_the_recipe_captures_them() {
        let find = |gpu: &str, precision: Precision| {
            taken(("Qwen3_30B_a3B", 8, 48), gpu, precision, |r| r.full_iteration_graphs())
        };
        // scripts/performance/configs/qwen@v0.5.0: MXFP8 on GB200 captures the whole iteration;
        // BF16 there graphs only attention and the router (Transformer Engine graphs).
        let (full, text) = find("gb200", Precision::Mxfp8);
        assert!(full && text.contains("whole-iteration CUDA graph"), "{text}");
        let (full, text) = find("gb200", Precision::Bf16);
        assert!(!full && !text.contains("whole-iteration"), "{text}");
    }

    #[test]
    fn fp8_attention_is_taken_where_the_recipe_turns_it_on() {
        let find =
            |model: &str| taken((model, 8, 48), "gb300", Precision::Mxfp8, |r| r.fp8_attention());
        // scripts/performance/configs/qwen3@v0.5.0: MXFP8 on GB300 sets fp8_dot_product_attention.
        let (fp8, text) = find("Qwen3_30B_a3B");
        assert!(fp8 && text.contains("FP8 dot-product attention"), "{text}");
        let (fp8, text) = find("LLAMA3_70B");
        assert!(!fp8 && !text.contains("FP8 dot-product attention"), "{text}");
    }

    #[test]
    fn a_recipe_is_not_used_where_the_row_states_the_other_sharding() {
        // Megatron-Bridge v0.2.0 (NeMo 25.11): Llama 3 8B on H100 in FP8 with current scaling
        // runs without Megatron-FSDP and recomputes 5 layers; a row that states Megatron-FSDP ran
        // another configuration.
        let stack = presets::stack("nemo-25.11").unwrap();
        let find = |row_fsdp: Option<bool>| {
            let mut recipe = RecipeUse::find(
                &stack,
                ("LLAMA3_8B", "h100-sxm"),
                Precision::Fp8Current,
                8,
                32,
                Subject::Row,
            );
            recipe.check_sharding(row_fsdp);
            let mut plan = crate::plan::PlanSpec::default();
            let model = presets::model("llama3-8b").unwrap();
            let taken = recipe.recompute(&model, &mut plan);
            (taken, recipe.assumption(stack.id(), "h100-sxm", Precision::Fp8Current))
        };
        let (taken, text) = find(Some(true));
        assert!(!taken, "{text:?}");
        assert!(text.unwrap().contains("the row states Megatron-FSDP"));
        for stated in [None, Some(false)] {
            let (taken, text) = find(stated);
            assert!(taken && text.unwrap().contains("full recompute of 5 layers"));
        }
    }
}

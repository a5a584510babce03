//! `--recipe`: the performance recipe the run's stack publishes for its model, GPU, precision
//! and GPU count fills the plan options the flags leave unset (recompute, Megatron-FSDP,
//! activation offload, token dispatch, communication overlaps, BF16 layers) and sets the kernels
//! it chose (the TE op fuser, FP8 attention, whole-iteration CUDA graphs), the same steps
//! `meshplan validate` takes for a published row (`validate/recipe_use.rs`).

use std::sync::Arc;

use crate::plan::Precision;
use crate::presets;
use crate::presets::StackCatalog;
use crate::stack::{Recipe, RecipeKernels, Stack};
use crate::validate::recipe_use::{RecipeUse, StatedOther, Subject};
use crate::violation::{Violation, Violations};
use crate::{Run, RunSpec};

/// A run spec with its stack's recipe taken.
#[derive(Debug)]
pub struct WithRecipe {
    /// The spec with the plan options the recipe set.
    pub spec: RunSpec,
    /// The stack with the recipe's kernel choices.
    pub stack: Arc<Stack>,
    /// What was taken, and from which file and tag.
    pub note: String,
}

/// Takes the recipe of the stack `spec` runs on for its model, GPU, precision and GPU count; a
/// stack with no such recipe, or one whose layer counts do not fit the plan's pipeline, is a
/// problem naming what the stack does have. `stacks` are the stacks the run may name (the
/// built-in ones, read once); `None` where it names another, which the run's own checks report.
pub fn take(spec: &RunSpec, stacks: &StackCatalog) -> Result<Option<WithRecipe>, Violations> {
    let id = presets::plan_stack_id(&spec.plan);
    let Some(stack) = stacks.get(&id) else { return Ok(None) };
    let (model, gpu) = (spec.model.name.as_str(), spec.cluster.gpu.name.as_str());
    let precision = spec.training.precision.unwrap_or(Precision::Bf16);
    let num_gpus = u64::try_from(spec.cluster.num_gpus).unwrap_or(0);
    let pp = u64::try_from(spec.plan.pp.unwrap_or(1)).unwrap_or(1).max(1);
    let layers = u64::try_from(spec.model.num_layers).unwrap_or(0);
    let stage = layers.div_ceil(pp);
    let mut plan = spec.plan.clone();
    let mut recipe =
        RecipeUse::find(stack, (model, gpu), precision, num_gpus, stage, Subject::Plan);
    let Some(found) = recipe.recipe() else {
        let run = (model, gpu, precision, num_gpus);
        return Err(Violations::one(missing(stacks, stack, run)));
    };
    let name = found.model_named(model).to_owned();
    if let Some(why) = recipe.ruled_out() {
        return Err(Violations::one(Violation::new(
            "recipe",
            format!("{id} {name} on {gpu} {}", precision.name()),
            why.to_owned(),
            "give --pp so that a pipeline rank holds the recipe's layers, or drop --recipe",
        )));
    }
    let moe = spec.model.moe.is_some();
    if plan.recompute.is_none() && plan.recompute_num_layers.is_none() {
        recipe.recompute(&spec.model, &mut plan);
    }
    if plan.zero.is_none() && plan.fsdp.is_none() {
        recipe.sharding(&mut plan);
    }
    let stated = StatedOther {
        offload: plan.offload_activation_layers.is_some(),
        dispatch: plan.expert_dispatch.is_some(),
        expert_overlap: plan.expert_comm_overlap.is_some(),
    };
    recipe.other_settings(stated, moe, &mut plan);
    let kernels = RecipeKernels {
        fused_grouped_mlp: moe && recipe.fused_grouped_mlp(),
        fp8_attention: recipe.fp8_attention(),
        full_iteration_graphs: moe && recipe.full_iteration_graphs(),
    };
    let tp = u64::try_from(plan.tp.unwrap_or(1)).unwrap_or(1);
    if let Some(overlap) = recipe.tp_comm_overlap(plan.tp_comm_overlap.is_some(), tp) {
        plan.tp_comm_overlap = Some(overlap);
    }
    recipe.bf16_layers(plan.bf16_layers_at_end.is_some(), stage, &mut plan);
    let note = recipe.assumption(&id, gpu, precision).unwrap_or_else(|| {
        format!(
            "{id} recipe for {name} on {gpu} {}: nothing taken (the flags set all it sets) ({})",
            precision.name(),
            found.source()
        )
    });
    let stack = Arc::new(stack.with_recipe_kernels(kernels));
    Ok(Some(WithRecipe { spec: RunSpec { plan, ..spec.clone() }, stack, note }))
}

/// Where the run's stack has a recipe for its model, GPU, precision and GPU count: the recipe
/// `--recipe` would take, named as its file names it.
pub fn available(run: &Run) -> Option<String> {
    let (model, gpu) = (run.model().name(), run.cluster().gpu().name());
    let precision = run.training().precision();
    let recipe = run.stack().recipe_for(model, gpu, precision, run.cluster().num_gpus())?;
    Some(format!(
        "{} recipe for {} on {gpu} {}",
        run.stack().id(),
        recipe.model_named(model),
        precision.name()
    ))
}

/// The problem of a stack with no recipe for the run (model, GPU, precision, GPU count): what it
/// has for the model, the other `stacks` that have one, or the models it has recipes for.
fn missing(
    stacks: &StackCatalog,
    stack: &Stack,
    (model, gpu, precision, gpus): (&str, &str, Precision, u64),
) -> Violation {
    let for_model: Vec<String> =
        stack.recipes().iter().filter(|r| r.covers_model(model)).map(describe).collect();
    let fix = if for_model.is_empty() {
        // The other stacks that do have one for the run.
        let others: Vec<&str> = stacks
            .all()
            .filter(|other| other.recipe_for(model, gpu, precision, gpus).is_some())
            .map(|other| other.id())
            .collect();
        if !others.is_empty() {
            format!(
                "pass --stack with a release that publishes one ({}), or drop --recipe",
                others.join(", ")
            )
        } else if stack.recipes().is_empty() {
            "pass --stack with a NeMo release that publishes recipes (nemo-25.07 and later), or drop --recipe".to_owned()
        } else {
            let mut models: Vec<&str> = stack
                .recipes()
                .iter()
                .flat_map(|r| r.models().iter().map(String::as_str))
                .collect();
            models.sort_unstable();
            models.dedup();
            format!("its recipes cover the models {}; or drop --recipe", models.join(", "))
        }
    } else {
        format!("its recipes for this model cover {}", for_model.join("; "))
    };
    Violation::new(
        "recipe",
        stack.id(),
        format!("has no performance recipe for {model} on {gpus} x {gpu} in {}", precision.name()),
        fix,
    )
}

/// A recipe's coverage: its GPUs, precisions and GPU counts.
fn describe(recipe: &Recipe) -> String {
    let precisions = recipe.precisions().map_or("every precision".to_owned(), |list| {
        list.iter().map(|p| p.name()).collect::<Vec<_>>().join("/")
    });
    let counts = recipe.num_gpus().map_or(String::new(), |list| {
        format!(" at {} GPUs", list.iter().map(u64::to_string).collect::<Vec<_>>().join("/"))
    });
    format!("{} in {precisions}{counts}", recipe.gpus().join("/"))
}

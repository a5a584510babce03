//! A calibration row's data-parallel sharding and activation recompute: as the row states them,
//! else from its stack's recipe for the run (`recipe_use.rs`), else from the stack's defaults
//! (recompute: possibly the least that fits, which `mapping::evaluate_row` searches); and an MoE
//! row's expert layout (ep, etp, DeepEP dispatch, token dropping) as it states it.

use super::recipe_use::RecipeUse;
use super::row::{CalibrationRow, count};
use crate::plan::{FsdpMode, PlanSpec, RecomputeKind};
use crate::stack::{ExpertLayout, Stack, StackDefaults};

/// ZeRO stage or FSDP: as stated, else Megatron-FSDP by the recipe (a blank or "not stated" cell), else
/// the stack default.
pub(super) fn sharding(
    row: &CalibrationRow,
    defaults: &StackDefaults,
    dp: u64,
    plan: &mut PlanSpec,
    assumptions: &mut Vec<String>,
    recipe: &mut RecipeUse,
) {
    let text = row.zero_or_fsdp.to_ascii_lowercase();
    let degree = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .filter_map(|part| part.parse::<u64>().ok())
        .next_back();
    if stated_fsdp(row) == Some(true) {
        plan.fsdp = Some(true);
        plan.fsdp_mode =
            Some(if text.contains("grad_op") { FsdpMode::GradOp } else { FsdpMode::Full });
        if let Some(degree) = degree.filter(|d| *d < dp && *d > 0 && dp.is_multiple_of(*d)) {
            plan.hybrid_shard = Some(degree as i64);
        }
        if text.contains("mode pure") {
            // Composer's PURE mixed precision reduces gradients in bf16.
            plan.grad_reduce_in_fp32 = Some(false);
        }
    } else if text.contains("stage 3") {
        plan.zero = Some(3);
    } else if text.contains("stage 2") {
        plan.zero = Some(2);
    } else if text.contains("stage 1") || text.contains("distributed optimizer") {
        plan.zero = Some(1);
    } else if text.contains("none") {
        plan.zero = Some(0);
    } else if (text.trim().is_empty() || text.starts_with("not stated")) && recipe.sharding(plan) {
        // Megatron-FSDP by the stack's recipe for this run.
    } else {
        plan.zero = Some(defaults.zero);
        if defaults.zero == 3 && defaults.fsdp {
            plan.zero = None;
            plan.fsdp = Some(true);
        }
        let what = match defaults.zero {
            0 => "plain DDP",
            1 => "distributed optimizer (ZeRO-1)",
            2 => "ZeRO-2",
            _ => "FSDP full shard",
        };
        assumptions.push(format!("data-parallel sharding not stated: {what} (stack default)"));
    }
}

/// Whether a row's `zero_or_fsdp` states Megatron-FSDP or PyTorch FSDP (`Some(true)`), another
/// sharding (`Some(false)`), or nothing (`None`: blank or "not stated").
pub(super) fn stated_fsdp(row: &CalibrationRow) -> Option<bool> {
    let text = row.zero_or_fsdp.trim().to_ascii_lowercase();
    if text.contains("fsdp") && !text.contains("fsdp=0") {
        Some(true)
    } else if text.is_empty() || text.starts_with("not stated") {
        None
    } else {
        Some(false)
    }
}

/// The recompute a row's `activation_recompute` states, if it states one.
pub(super) fn stated_recompute(row: &CalibrationRow) -> Option<RecomputeKind> {
    let text = row.activation_recompute.to_ascii_lowercase();
    if text.contains("per-op") {
        // torchtitan's per-op selective activation checkpointing.
        Some(RecomputeKind::Op)
    } else if text.contains("selective") || text.contains("recompute-activations") {
        Some(RecomputeKind::Selective)
    } else if text.contains("full") || text.contains("recompute=true") {
        Some(RecomputeKind::Full)
    } else if text.contains("none") {
        Some(RecomputeKind::None)
    } else {
        None
    }
}

/// Recompute as stated, else the stack default; `true` when that default is the least that fits.
pub(super) fn recompute(
    row: &CalibrationRow,
    defaults: &StackDefaults,
    plan: &mut PlanSpec,
    assumptions: &mut Vec<String>,
) -> bool {
    let mut least = false;
    plan.recompute = Some(if let Some(kind) = stated_recompute(row) {
        kind
    } else {
        match defaults.recompute.kind() {
            Some(kind) => {
                assumptions
                    .push(format!("activation recompute not stated: {kind:?} (stack default)"));
                kind
            }
            None => {
                // Priced with none first; `evaluate_row` moves to more recompute while the run
                // does not fit.
                assumptions.push(
                    "activation recompute not stated: the least that fits memory (none, else selective, else full)"
                        .to_owned(),
                );
                least = true;
                RecomputeKind::None
            }
        }
    });
    least
}

/// Expert parallelism of an MoE row: `ep` and `etp` as stated (blank `ep`: not used, 1, as
/// AutoModel's table marks unused EP with a blank; blank `etp`: the stack's, 1 under MoE Parallel
/// Folding, as the Megatron-Bridge recipes set `expert_tensor_parallel_size = 1`, and `tp` where
/// the stack splits every expert over the tensor-parallel ranks), and the capacity factor of
/// token-dropping runs.
pub(super) fn experts_plan(
    row: &CalibrationRow,
    model: &str,
    stack: &Stack,
    plan: &mut PlanSpec,
    assumptions: &mut Vec<String>,
) {
    plan.ep = Some(count(&row.ep).unwrap_or(1) as i64);
    plan.etp = count(&row.etp).map(|etp| etp as i64);
    if plan.etp.is_none() {
        assumptions.push(match stack.expert_layout() {
            ExpertLayout::Folded => "etp = 1 (expert tensor parallelism not stated)".into(),
            ExpertLayout::WithinDataParallel => format!(
                "etp = tp (expert tensor parallelism not stated; {} splits every expert over the tensor-parallel ranks)",
                stack.id()
            ),
        });
    }
    if row.other_settings.to_ascii_lowercase().contains("deepep") {
        plan.expert_dispatch = Some(crate::plan::ExpertDispatch::Deduplicated);
        assumptions
            .push("expert dispatch deduplicated per node and rank (DeepEP, row's settings)".into());
    }
    let text = format!("{model} {}", row.notes).to_ascii_lowercase();
    if text.contains("tokendrop") || text.contains("token dropping") {
        plan.moe_capacity_factor = Some(1.0);
        assumptions.push("token dropping at capacity factor 1.0".into());
    }
}

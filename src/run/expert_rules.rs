//! The rules of a plan's expert parallelism: `ep` divides the routed experts, and the experts fit
//! the ranks of a stage as the run's software lays them out (MoE Parallel Folding, or inside data
//! parallelism with each expert split over the tensor-parallel ranks, as Megatron-Core did before
//! 0.10), each problem recorded with its field, value and fix.

use crate::limits::PARALLEL_SIZE;
use crate::model::Model;
use crate::plan::{PipelineSchedule, PlanSpec};
use crate::stack::{ExpertLayout, Stack};
use crate::violation::{Collector, shown_float};

use super::field_rules::{MOE_RATIO_HINT, MOE_RATIO_RANGE, positive_or};

/// The validated expert settings of a plan.
pub(super) struct Experts {
    pub(super) ep: u64,
    pub(super) etp: u64,
    pub(super) comm_overlap: bool,
    pub(super) imbalance: f64,
    pub(super) capacity_factor: Option<f64>,
}

/// The accepted sizes of one pipeline stage's ranks.
#[derive(Debug, Clone, Copy)]
pub(super) struct StageSizes {
    pub(super) tp: u64,
    pub(super) cp: u64,
    pub(super) dp: u64,
}

/// What the run's software allows of the experts' layout, and its name for the messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExpertRules<'a> {
    layout: ExpertLayout,
    with_context_parallel: bool,
    stack: &'a str,
}

impl<'a> ExpertRules<'a> {
    /// The rules of `stack`.
    pub(crate) fn of(stack: &'a Stack) -> ExpertRules<'a> {
        ExpertRules {
            layout: stack.expert_layout(),
            with_context_parallel: stack.experts_with_context_parallel(),
            stack: stack.id(),
        }
    }
}

/// Expert-parallel settings: `ep` divides the routed experts, and the experts fit the stage's
/// ranks as `rules` lays them out. Unstated, `etp` is 1 under MoE Parallel Folding and `tp` where
/// every expert is split over the tensor-parallel ranks.
pub(super) fn validate_experts(
    collector: &mut Collector,
    spec: &PlanSpec,
    model: &Model,
    sizes: Option<StageSizes>,
    tp: u64,
    schedule: PipelineSchedule,
    rules: ExpertRules<'_>,
) -> Experts {
    let ep = positive_or(
        collector,
        "plan.ep",
        spec.ep,
        1,
        PARALLEL_SIZE,
        "expert-parallel size, e.g. 8",
    );
    let within_data_parallel = rules.layout == ExpertLayout::WithinDataParallel;
    let etp_default = if within_data_parallel && model.moe().is_some() { tp } else { 1 };
    let etp = positive_or(
        collector,
        "plan.etp",
        spec.etp,
        etp_default,
        PARALLEL_SIZE,
        "expert-tensor-parallel size, e.g. 1",
    );
    let imbalance = match spec.moe_imbalance {
        None => 1.0,
        Some(value) if crate::limits::within(value, crate::limits::MOE_RATIO) => value,
        Some(value) => {
            collector.add(
                "plan.moe_imbalance",
                shown_float(value),
                format!("{MOE_RATIO_RANGE} (the busiest rank's tokens over the mean)"),
                format!("1.0 is perfectly balanced routing, 1.2 gives the busiest rank 20% more; {MOE_RATIO_HINT}"),
            );
            1.0
        }
    };
    let capacity_factor = match spec.moe_capacity_factor {
        None => None,
        Some(value) if crate::limits::within(value, crate::limits::MOE_RATIO) => Some(value),
        Some(value) => {
            collector.add(
                "plan.moe_capacity_factor",
                shown_float(value),
                MOE_RATIO_RANGE,
                format!("e.g. 1.0 drops every token above an even share, or leave it unset for dropless; {MOE_RATIO_HINT}"),
            );
            None
        }
    };
    match model.moe() {
        None => {
            for (field, value) in [("plan.ep", ep), ("plan.etp", etp)] {
                if value > 1 {
                    collector.add(
                        field,
                        value,
                        "needs a mixture-of-experts model",
                        "the model has no experts: drop the flag or use an MoE model",
                    );
                }
            }
        }
        Some(moe) => {
            if !moe.num_experts.is_multiple_of(ep) {
                collector.add(
                    "plan.ep",
                    ep,
                    format!("does not divide the {} routed experts", moe.num_experts),
                    "each expert-parallel rank holds the same number of experts",
                );
            }
            if let Some(sizes) = sizes {
                check_layout(collector, rules, sizes, ep, etp);
            }
            if tp > 1 && spec.sequence_parallel == Some(false) {
                collector.add(
                    "plan.sequence_parallel",
                    false,
                    "is required for mixture-of-experts layers with tp > 1",
                    "Megatron-LM asserts it: drop --no-sequence-parallel",
                );
            }
        }
    }
    // DualPipe exists to hide the expert all-to-all under the other direction's compute
    // (DeepSeek-V3 report, section 3.2.1): with it the overlap is on unless the plan says no.
    let comm_overlap = spec.expert_comm_overlap.unwrap_or(schedule == PipelineSchedule::Dualpipe);
    Experts { ep, etp, comm_overlap, imbalance, capacity_factor }
}

/// The experts against the stage's ranks, as the software lays them out.
fn check_layout(
    collector: &mut Collector,
    rules: ExpertRules<'_>,
    sizes: StageSizes,
    ep: u64,
    etp: u64,
) {
    let StageSizes { tp, cp, dp } = sizes;
    let stack = rules.stack;
    const FOLDING: &str = "or name a stack with MoE Parallel Folding (Megatron-Core 0.10 or later, e.g. `megatron-core-0.14-plus`)";
    match rules.layout {
        ExpertLayout::Folded => {
            let stage_ranks = tp * cp * dp;
            if !stage_ranks.is_multiple_of(ep * etp) {
                collector.add(
                    "plan.ep",
                    ep,
                    format!(
                        "etp {etp} x ep {ep} = {} does not divide the tp x cp x dp = {stage_ranks} ranks of a stage",
                        ep * etp
                    ),
                    "experts are laid out over the same ranks as attention (MoE Parallel Folding)",
                );
            }
        }
        ExpertLayout::WithinDataParallel => {
            if etp != tp {
                collector.add(
                    "plan.etp",
                    etp,
                    format!("differs from tp {tp}: {stack} splits every expert over the tensor-parallel ranks"),
                    format!("leave etp unset (it is then tp), {FOLDING}"),
                );
            }
            if !dp.is_multiple_of(ep) {
                collector.add(
                    "plan.ep",
                    ep,
                    format!("does not divide dp = {dp}: {stack} runs expert parallelism inside data parallelism"),
                    format!("use an ep that divides dp, {FOLDING}"),
                );
            }
        }
    }
    if !rules.with_context_parallel && ep > 1 && cp > 1 {
        collector.add(
            "plan.ep",
            ep,
            format!("cannot run beside context parallelism (cp = {cp}) on {stack}"),
            format!("use ep 1 or cp 1, {FOLDING}"),
        );
    }
}

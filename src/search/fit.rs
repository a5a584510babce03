//! What makes a plan that does not fit fit: one search per group of plan options (recompute,
//! sharding, both together, micro-batch, tp, pipeline, cp, experts) with that group freed and
//! everything else pinned to the plan's resolved values, each giving its fastest plan that fits as
//! the flags to add.

use super::{Constraints, RankedPlan, SearchError, SearchSpec, search};
use crate::plan::PlanSpec;
use crate::{Run, RunSpec};

/// A change that makes a plan fit.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSuggestion {
    /// The group of options that changed, e.g. `recompute`, `sharding`, `tp`.
    pub group: &'static str,
    /// The flags that, added to the plan's, give the new plan (`--recompute full`).
    pub flags: Vec<String>,
    /// The new plan with its simulated estimate.
    pub plan: RankedPlan,
}

/// `plan` with its recompute cleared.
fn free_recompute(plan: &PlanSpec) -> PlanSpec {
    PlanSpec { recompute: None, recompute_num_layers: None, ..plan.clone() }
}

/// `plan` with its data-parallel sharding cleared.
fn free_sharding(plan: &PlanSpec) -> PlanSpec {
    PlanSpec {
        zero: None,
        fsdp: None,
        fsdp_mode: None,
        hybrid_shard: None,
        fsdp_reshard_after_forward: None,
        ..plan.clone()
    }
}

/// The option groups freed one at a time: the group's name, whether the micro-batch is free, and
/// the plan with the group's options (and those that follow from them, such as dp) cleared.
/// Sharding and recompute are also freed together: the two memory savings that leave the layout
/// as it is, which a run often needs both of (a data-parallel-only plan of an 8B model on 8 GPUs
/// under DeepSpeed fits with ZeRO-3 and recompute, and with neither alone).
fn groups(plan: &PlanSpec) -> [(&'static str, bool, PlanSpec); 8] {
    let clear_dp = PlanSpec { dp: None, ..plan.clone() };
    [
        ("recompute", false, free_recompute(plan)),
        ("sharding", false, free_sharding(plan)),
        ("sharding and recompute", false, free_recompute(&free_sharding(plan))),
        ("micro-batch", true, plan.clone()),
        ("tp", false, PlanSpec { tp: None, sequence_parallel: None, ..clear_dp.clone() }),
        (
            "pipeline",
            false,
            PlanSpec {
                pp: None,
                vp: None,
                schedule: None,
                pipeline_split: None,
                ..clear_dp.clone()
            },
        ),
        ("cp", false, PlanSpec { cp: None, cp_comm: None, ..clear_dp }),
        ("experts", false, PlanSpec { ep: None, etp: None, ..plan.clone() }),
    ]
}

/// For a run that does not fit (`base` holds its model and cluster), the fastest plan that fits
/// found by changing one group of options at a time, fastest first (ties by peak memory, then
/// group order). Groups whose search finds no plan that fits give none, and a change an earlier
/// group found is listed once, under that group.
pub fn fit_suggestions(base: &RunSpec, run: &Run) -> Result<Vec<FitSuggestion>, SearchError> {
    let resolved = crate::plan_file::resolved_spec(base, run);
    let engine = run.plan().engine();
    let mut found = Vec::new();
    for (group, free_micro_batch, pins) in groups(&resolved.plan) {
        let spec = SearchSpec {
            base: RunSpec { plan: pins, ..resolved.clone() },
            constraints: Constraints {
                // The plan's own tp stays reachable even beyond the NVLink domain.
                max_tp: (group != "tp").then_some(run.plan().tp()),
                micro_batch: (!free_micro_batch).then_some(run.training().micro_batch()),
                ..Constraints::default()
            },
            memory_headroom: 0.0,
            engine: Some(engine),
            top: 1,
        };
        let report = search(&spec, &|_, _| {})?;
        if let Some(plan) = report.plans.into_iter().next() {
            let flags = crate::plan_diff::flags_between(run, &plan.run);
            // Freeing two groups may find the change that freeing one of them found.
            if found.iter().all(|s: &FitSuggestion| s.flags != flags) {
                found.push(FitSuggestion { group, flags, plan });
            }
        }
    }
    found.sort_by(|a, b| super::rank::order(&a.plan, &b.plan));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_that_does_not_fit_gets_changes_that_fit_fastest_first() {
        // Llama 3.1 8B at seq 8192 on 8 GPUs, data-parallel only: model states and activations
        // overflow the GPU.
        let base = crate::run::test_spec("llama3.1-8b", 8, 8192, 32, 1, PlanSpec::default());
        let run = Run::from_spec(&base).unwrap();
        assert!(!crate::estimate::closed_form(&run).fits());
        let found = fit_suggestions(&base, &run).unwrap();
        assert!(found.len() >= 2, "{found:?}");
        for suggestion in &found {
            assert!(suggestion.plan.estimate.fits() && !suggestion.flags.is_empty());
        }
        let times: Vec<f64> =
            found.iter().map(|s| s.plan.estimate.time.step_time().value()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        let groups: Vec<&str> = found.iter().map(|s| s.group).collect();
        assert!(groups.contains(&"recompute") && groups.contains(&"sharding"), "{groups:?}");
        // Each change is listed once, under the fewest groups that find it.
        for (i, a) in found.iter().enumerate() {
            assert!(found[i + 1..].iter().all(|b| b.flags != a.flags), "{found:?}");
        }
        let recompute = found.iter().find(|s| s.group == "recompute").unwrap();
        assert!(recompute.flags[0].starts_with("--recompute "), "{:?}", recompute.flags);
    }

    #[test]
    fn a_change_two_groups_find_is_listed_once() {
        // Llama 3 70B on 64 GB300, tp 1 pp 4 with micro-batches of 2 in MXFP8 (NeMo 26.02.01's
        // published layout): full recompute of 10 layers fits, found by freeing recompute and by
        // freeing sharding and recompute together.
        let plan = PlanSpec {
            tp: Some(1),
            pp: Some(4),
            stack: Some("nemo-26.02.01".into()),
            ..PlanSpec::default()
        };
        let mut base = crate::run::test_spec("llama3-70b", 64, 8192, 256, 2, plan);
        base.cluster.gpu = crate::presets::gpu("gb300").unwrap();
        base.training.precision = Some(crate::plan::Precision::Mxfp8);
        let run = Run::from_spec(&base).unwrap();
        let found = fit_suggestions(&base, &run).unwrap();
        let recompute = found.iter().find(|s| s.group == "recompute").unwrap();
        assert!(recompute.flags.iter().any(|f| f.starts_with("--recompute ")), "{found:?}");
        assert!(found.iter().filter(|s| s.flags == recompute.flags).count() == 1, "{found:?}");
    }

    #[test]
    fn sharding_and_recompute_are_also_freed_together() {
        // Llama 3 8B at seq 8192 on 8 GPUs under DeepSpeed (ZeRO-0 by its defaults): neither
        // ZeRO alone nor recompute alone makes the data-parallel plan fit; both together do.
        let plan = PlanSpec { engine: Some(crate::plan::Engine::Deepspeed), ..PlanSpec::default() };
        let base = crate::run::test_spec("llama3-8b", 8, 8192, 128, 1, plan);
        let run = Run::from_spec(&base).unwrap();
        assert!(!crate::estimate::closed_form(&run).fits());
        let found = fit_suggestions(&base, &run).unwrap();
        let groups: Vec<&str> = found.iter().map(|s| s.group).collect();
        assert!(!groups.contains(&"recompute") && !groups.contains(&"sharding"), "{groups:?}");
        let both = found.iter().find(|s| s.group == "sharding and recompute").unwrap();
        assert!(both.plan.estimate.fits());
        assert!(both.flags.iter().any(|f| f.starts_with("--recompute ")), "{:?}", both.flags);
        assert!(both.flags.iter().any(|f| f.starts_with("--zero ")), "{:?}", both.flags);
        assert_eq!(both.plan.run.plan().tp() * both.plan.run.plan().pp(), 1);
    }
}

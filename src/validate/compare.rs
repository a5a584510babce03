//! The search against published plans: for every model, cluster and batch of a calibration CSV
//! that meshplan can price, the best plan its search finds, predicted against the plan the source
//! published (both by meshplan's own simulated model). A published plan that beats the search's
//! best is a hole in the search space or a bug, so it is listed, never hidden.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ValidateError;
use super::mapping::{Calibration, map_row};
use super::row::{CalibrationRow, parse_rows};
use super::summary::percentile;
use crate::estimate::estimate_simulated_with;
use crate::plan::{Engine, PlanSpec};
use crate::run::{Run, RunSpec};
use crate::search::{Constraints, SearchSpec, search};
use crate::sim::SimOptions;

/// One published run against the search's best plan for the same model, cluster and batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchComparison {
    /// Rows with this model, cluster, batch and precision (their plans may differ).
    pub row_ids: Vec<String>,
    /// The model.
    pub model: String,
    /// GPU preset.
    pub gpu: String,
    /// GPUs.
    pub num_gpus: u64,
    /// The best published plan among those rows.
    pub published_plan: String,
    /// Its predicted tokens per second per GPU.
    pub published_tokens_per_sec_per_gpu: f64,
    /// Whether it fits in memory by meshplan's model.
    pub published_fits: bool,
    /// The search's best plan, if any fits.
    pub best_plan: Option<String>,
    /// Its predicted tokens per second per GPU.
    pub best_tokens_per_sec_per_gpu: Option<f64>,
    /// (best - published) / published x 100.
    pub gain_pct: Option<f64>,
}

/// Summary of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonSummary {
    /// Distinct model / cluster / batch / precision combinations compared.
    pub cases: usize,
    /// Median predicted gain of the search's best plan over the published one, in percent.
    pub median_gain_pct: Option<f64>,
    /// Largest predicted gain.
    pub max_gain_pct: Option<f64>,
    /// Cases where a published plan that fits is predicted faster than the search's best.
    pub published_wins: usize,
    /// Cases whose published plan does not fit by meshplan's memory model.
    pub published_does_not_fit: usize,
    /// Every case.
    pub comparisons: Vec<SearchComparison>,
}

fn key(run: &Run) -> String {
    let training = run.training();
    format!(
        "{}|{}|{}|{}|{}|{}",
        run.model().name(),
        run.cluster().gpu().name(),
        run.cluster().num_gpus(),
        training.seq_len(),
        training.global_batch(),
        training.precision().name()
    )
}

/// Compares every priceable row's published plan with the search's best plan.
pub fn compare_search_csv(
    text: &str,
    engine: Option<Engine>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<ComparisonSummary, ValidateError> {
    let rows: Vec<CalibrationRow> = parse_rows(text)?;
    let calibration = Calibration::new();
    let stacks = super::calibrate::builtin_stacks()?;
    // The published plan of each case: the fastest among its rows, by meshplan's model.
    let mut cases: BTreeMap<String, (Vec<String>, crate::run::RunSpec, Run, f64, bool)> =
        BTreeMap::new();
    for row in &rows {
        let stack = row.stack(&stacks);
        let Ok(mapped) = map_row(row, &calibration, stack) else { continue };
        let Ok(run) = Run::from_spec_with_stack(&mapped.spec, mapped.stack(stack)) else {
            continue;
        };
        let Ok((estimate, _)) = estimate_simulated_with(&run, SimOptions { timeline: false })
        else {
            continue;
        };
        let tokens = estimate.throughput.tokens_per_sec_per_gpu;
        let entry = cases.entry(key(&run)).or_insert_with(|| {
            (Vec::new(), mapped.spec.clone(), run.clone(), f64::NEG_INFINITY, false)
        });
        entry.0.push(row.row_id.clone());
        if tokens > entry.3 {
            entry.1 = mapped.spec;
            entry.2 = run;
            entry.3 = tokens;
            entry.4 = estimate.fits();
        }
    }
    let total = cases.len();
    let mut comparisons = Vec::with_capacity(total);
    for (index, (_, (row_ids, spec, run, published, fits))) in cases.into_iter().enumerate() {
        progress(index, total);
        // Only the workload carries over from the published plan: how gradients are reduced and
        // the MoE routing. Everything the search explores is left free, and the engine is the
        // one asked for.
        let workload = &spec.plan;
        let pins = PlanSpec {
            grad_reduce_in_fp32: workload.grad_reduce_in_fp32,
            moe_imbalance: workload.moe_imbalance,
            moe_capacity_factor: workload.moe_capacity_factor,
            expert_comm_overlap: workload.expert_comm_overlap,
            expert_dispatch: workload.expert_dispatch,
            ..PlanSpec::default()
        };
        let search_spec = SearchSpec {
            base: RunSpec { plan: pins, ..spec },
            constraints: Constraints {
                extra_micro_batch: Some(run.training().micro_batch()),
                ..Constraints::default()
            },
            memory_headroom: 0.0,
            engine,
            top: 1,
        };
        let best = search(&search_spec, &|_, _| {})
            .ok()
            .and_then(|report| report.plans.into_iter().next());
        let best_tokens = best.as_ref().map(|b| b.estimate.throughput.tokens_per_sec_per_gpu);
        comparisons.push(SearchComparison {
            row_ids,
            model: run.model().display_name().to_owned(),
            gpu: run.cluster().gpu().name().to_owned(),
            num_gpus: run.cluster().num_gpus(),
            published_plan: format!(
                "{} mbs{} {}",
                run.plan().label(),
                run.training().micro_batch(),
                run.plan().memory_label()
            ),
            published_tokens_per_sec_per_gpu: published,
            published_fits: fits,
            best_plan: best.as_ref().map(|b| {
                let plan = b.run.plan();
                format!(
                    "{} mbs{} {} {}",
                    plan.label(),
                    b.run.training().micro_batch(),
                    plan.schedule().name(),
                    plan.memory_label()
                )
            }),
            best_tokens_per_sec_per_gpu: best_tokens,
            gain_pct: best_tokens.map(|b| (b - published) / published * 100.0),
        });
    }
    progress(total, total);
    let fitting: Vec<f64> =
        comparisons.iter().filter(|c| c.published_fits).filter_map(|c| c.gain_pct).collect();
    Ok(ComparisonSummary {
        cases: comparisons.len(),
        median_gain_pct: percentile(&fitting, 0.5),
        max_gain_pct: fitting.iter().copied().reduce(f64::max),
        published_wins: fitting.iter().filter(|g| **g < -1e-9).count(),
        published_does_not_fit: comparisons.iter().filter(|c| !c.published_fits).count(),
        comparisons,
    })
}

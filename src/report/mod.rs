//! The HTML report of a simulated plan or a search: what it shows (this file, and `data.rs` for
//! a run's document lengths), the charts drawn with plotters' SVG backend (`charts.rs`,
//! `timeline.rs`, `scatter.rs`, `data_charts.rs`), the Pareto front (`pareto.rs`) and the page
//! assembled around them (`html.rs`, `template.html`).
//!
//! A report is one self-contained HTML file: every chart is an inline SVG, the style sheet is
//! inline, nothing is loaded from elsewhere and there is no script. Like every output of the
//! library, the same input gives the same bytes: no timestamps, no generated ids, no hash-map
//! order. The library builds the text; the CLI writes the file.

mod charts;
mod data;
mod data_charts;
mod html;
pub mod pareto;
mod scatter;
mod timeline;
mod whole_run;

pub use data::{DataView, LengthBin};

use crate::Estimate;
use crate::estimate::estimate_simulated;
use crate::search::{PricedPoint, SearchReport, SearchSpec};
use crate::sim::{SimError, Simulation, Slice};
use crate::units::{Bytes, Seconds};

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The best plan of a search could not be simulated again with its timeline.
    #[error("cannot simulate the best plan's timeline: {0}")]
    Simulation(#[from] SimError),
    /// plotters could not draw a chart.
    #[error("cannot draw the {chart} chart: {message}")]
    Chart {
        /// Which chart.
        chart: &'static str,
        /// plotters' error.
        message: String,
    },
}

/// The simulated step that a pipeline timeline shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Pipeline ranks (stages).
    pub ranks: u32,
    /// Micro-batches per step.
    pub microbatches: u32,
    /// Step time.
    pub step_time: Seconds,
    /// Every busy interval of every rank's compute, pipeline-send and data-parallel lanes.
    pub slices: Vec<Slice>,
}

/// One plan: its key numbers, memory per stage, step-time breakdown and pipeline timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanView {
    /// Short description of the plan, e.g. `tp8 pp4 vp5 cp1 dp2`.
    pub label: String,
    /// Memory, time and throughput, from the simulation.
    pub estimate: Estimate,
    /// The simulated step.
    pub timeline: Timeline,
    /// The run's document lengths and one step's work per replica, when the run has data.
    pub data: Option<DataView>,
}

impl PlanView {
    /// The view of a simulated plan; `simulation` must keep its timeline.
    pub fn new(label: String, estimate: &Estimate, simulation: &Simulation) -> PlanView {
        PlanView {
            label,
            estimate: estimate.clone(),
            timeline: Timeline {
                ranks: simulation.program.ranks,
                microbatches: simulation.program.microbatches,
                step_time: simulation.step_time(),
                slices: simulation.slices.clone(),
            },
            data: None,
        }
    }

    /// The view with `run`'s data added (the run the plan was simulated for): unchanged when the
    /// run has none.
    pub fn with_data(mut self, run: &crate::Run) -> PlanView {
        self.data = DataView::new(run);
        self
    }
}

/// One reason candidates were rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectionRow {
    /// The reason.
    pub reason: &'static str,
    /// Candidates rejected for it.
    pub count: usize,
    /// The first candidate's detail.
    pub example: String,
}

/// One entry of a search's top list.
#[derive(Debug, Clone, PartialEq)]
pub struct TopRow {
    /// The plan, e.g. `tp8 pp1 vp1 cp2 dp32 mbs4 1f1b zero2 no-recompute`.
    pub label: String,
    /// Simulated step time.
    pub step_time: Seconds,
    /// Training tokens per second per GPU.
    pub tokens_per_sec_per_gpu: f64,
    /// Model FLOP utilization, in percent.
    pub mfu_pct: f64,
    /// Peak memory of the worst stage.
    pub peak_memory: Bytes,
    /// Plans with the same step time and peak, each as the flags that turn this plan into it.
    pub equivalents: Vec<String>,
}

/// What a search priced and rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchView {
    /// The top list, best first.
    pub top: Vec<TopRow>,
    /// Candidates in the space.
    pub considered: usize,
    /// Candidates that passed the closed form's checks.
    pub priced: usize,
    /// Candidates simulated.
    pub simulated: usize,
    /// Candidates skipped by their lower bound.
    pub pruned: usize,
    /// Every priced candidate that fits, in candidate order.
    pub points: Vec<PricedPoint>,
    /// Indices into `points` of the Pareto front (less memory, more throughput), by memory.
    pub front: Vec<usize>,
    /// Index into `points` of the best plan.
    pub best: Option<usize>,
    /// Memory of one GPU.
    pub capacity: Bytes,
    /// Memory a plan may use: the capacity less the search's headroom.
    pub usable: Bytes,
    /// Rejected candidates by reason.
    pub rejections: Vec<RejectionRow>,
    /// Why no plan of the model runs on the target engine, when that is why none was found.
    pub model_refused: Option<String>,
}

impl SearchView {
    /// The view of a search's candidates and rejections; `capacity` is one GPU's memory.
    pub fn new(spec: &SearchSpec, report: &SearchReport, capacity: Bytes) -> SearchView {
        let coordinates: Vec<(f64, f64)> = report
            .points
            .iter()
            .map(|p| (p.peak_memory.value(), p.tokens_per_sec_per_gpu))
            .collect();
        let best = report.plans.first().and_then(|best| {
            report.points.iter().position(|p| report.candidate(p) == best.candidate)
        });
        let top = report
            .plans
            .iter()
            .map(|plan| TopRow {
                label: plan.label(),
                step_time: plan.estimate.time.step_time(),
                tokens_per_sec_per_gpu: plan.estimate.throughput.tokens_per_sec_per_gpu,
                mfu_pct: plan.estimate.throughput.mfu_pct,
                peak_memory: plan.estimate.peak_memory.breakdown.fit_need(),
                equivalents: plan.equivalent_flags().iter().map(|flags| flags.join(" ")).collect(),
            })
            .collect();
        SearchView {
            top,
            model_refused: report.model_refused(),
            considered: report.considered,
            priced: report.priced,
            simulated: report.simulated,
            pruned: report.pruned,
            front: pareto::pareto_front(&coordinates),
            points: report.points.clone(),
            best,
            capacity,
            usable: Bytes::new(capacity.value() * (1.0 - spec.memory_headroom)),
            rejections: report
                .rejections
                .counts
                .iter()
                .map(|(kind, (count, example))| RejectionRow {
                    reason: kind.name(),
                    count: *count,
                    example: example.to_string(),
                })
                .collect(),
        }
    }
}

/// Plans side by side (`meshplan compare`): a table of their figures, the options that differ,
/// and each plan's memory and step-time charts.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonView {
    /// One heading per plan (its file).
    pub columns: Vec<String>,
    /// The figures, one row per figure: its name and its value for each plan, as shown.
    pub rows: Vec<(String, Vec<String>)>,
    /// The options whose values differ: the key and its value for each plan.
    pub differences: Vec<(String, Vec<String>)>,
    /// Each plan's label and estimate, for its charts.
    pub plans: Vec<(String, Estimate)>,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The page title, e.g. `meshplan simulate`.
    pub title: String,
    /// The inputs as (label, value) rows, in display order.
    pub inputs: Vec<(String, String)>,
    /// The simulated plan (the best one of a search); none when a search found no plan.
    pub plan: Option<PlanView>,
    /// The search's candidates and rejections, for a search.
    pub search: Option<SearchView>,
    /// Plans side by side, for a comparison.
    pub comparison: Option<ComparisonView>,
    /// The whole run of the plan, when a training length was given, with one drawn run.
    pub whole_run: Option<(crate::goodput::RunOutlook, Option<crate::goodput::DrawnRun>)>,
}

impl Report {
    /// The report of one simulated plan: header, memory, step time and timeline.
    pub fn simulated(title: &str, inputs: Vec<(String, String)>, plan: PlanView) -> Report {
        Report {
            title: title.to_owned(),
            inputs,
            plan: Some(plan),
            search: None,
            comparison: None,
            whole_run: None,
        }
    }

    /// The report of plans compared side by side.
    pub fn comparison(title: &str, comparison: ComparisonView) -> Report {
        Report {
            title: title.to_owned(),
            inputs: Vec::new(),
            plan: None,
            search: None,
            comparison: Some(comparison),
            whole_run: None,
        }
    }

    /// The report of a search: the best plan (simulated again, with its timeline) and every
    /// candidate that was priced and fits. `best_label` describes the best plan.
    pub fn search(
        title: &str,
        inputs: Vec<(String, String)>,
        spec: &SearchSpec,
        report: &SearchReport,
        best_label: String,
    ) -> Result<Report, ReportError> {
        let plan = match report.plans.first() {
            Some(best) => {
                let (estimate, simulation) = estimate_simulated(&best.run)?;
                Some(PlanView::new(best_label, &estimate, &simulation).with_data(&best.run))
            }
            None => None,
        };
        let capacity = match &plan {
            Some(plan) => plan.estimate.memory_capacity,
            // No plan: the search's GPU still has a capacity.
            None => crate::hardware::Cluster::from_spec(&spec.base.cluster)
                .map_or(Bytes::ZERO, |cluster| cluster.gpu().memory()),
        };
        Ok(Report {
            title: title.to_owned(),
            inputs,
            plan,
            search: Some(SearchView::new(spec, report, capacity)),
            comparison: None,
            whole_run: None,
        })
    }

    /// The report with the plan's whole run added: its expected time and one drawn run (none when
    /// a run has too many failures to draw).
    pub fn with_whole_run(
        mut self,
        outlook: crate::goodput::RunOutlook,
        drawn: Option<crate::goodput::DrawnRun>,
    ) -> Report {
        self.whole_run = Some((outlook, drawn));
        self
    }

    /// The report as one self-contained HTML page.
    pub fn to_html(&self) -> Result<String, ReportError> {
        html::page(self)
    }
}

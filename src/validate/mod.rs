//! Validation against published runs: read a calibration CSV (the columns of
//! `data/calibration/runs.csv`, a copy of the shared one), turn each row into a
//! [`crate::RunSpec`], predict it, and compare throughput (and peak memory where the row states
//! it).
//!
//! Rows the model cannot price are kept in the report with the reason they were skipped; no row is
//! ever dropped silently. Settings a row leaves blank are filled by one rule per software family
//! (`defaults.rs`), and every assumption made for a row is listed with its result.

mod accuracy;
pub mod bands;
mod batch_shape;
mod calibrate;
mod compare;
mod coverage;
mod fit;
mod gpu_type;
mod held_out;
mod mapping;
mod measured;
mod memory_counter;
mod rank;
pub(crate) mod recipe_use;
#[cfg(test)]
mod recipe_use_tests;
mod row;
mod row_precision;
mod row_settings;
mod run_band;
mod stated_kernel;
mod structure;
mod summary;

use crate::presets::StackCatalog;
use serde::Serialize;

pub use accuracy::{Accuracy, KindAccuracy};
pub use bands::{BandTable, ErrorBand};
pub use calibrate::{CalibrationReport, CrossValidation, GpuFit, calibrate_csv};
pub use compare::{ComparisonSummary, SearchComparison, compare_search_csv};
pub use coverage::BandCoverage;
pub use fit::OverCapacity;
pub use mapping::Calibration;
pub use rank::{RankAgreement, Sweep, kendall_tau_b};
pub use row::CalibrationRow;
pub use run_band::{run_band, run_band_key, run_stack};
pub use summary::{GroupSummary, ReasonCount, Summary, percentile};

/// The outcome for one CSV row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowResult {
    /// The row's `row_id`.
    pub row_id: String,
    /// The row's `source_id`.
    pub source_id: String,
    /// The software stack the row ran on, read from its `software_or_release` text.
    pub stack: String,
    /// The model name as the row writes it.
    pub model: String,
    /// The row's `arch_type` (`dense`, `moe`, `hybrid-mamba-moe`).
    pub architecture: String,
    /// Whether the row runs context parallelism (cp > 1).
    pub context_parallel: bool,
    /// The GPU preset the row mapped to (or the raw `gpu_type` when it did not map).
    pub gpu: String,
    /// GPUs in the run.
    pub num_gpus: Option<u64>,
    /// The plan label (`tp8 pp4 vp5 cp1 dp2`), when the row could be modelled.
    pub plan: Option<String>,
    /// Measured tokens per second per GPU.
    pub measured_tokens_per_sec_per_gpu: Option<f64>,
    /// Predicted tokens per second per GPU.
    pub predicted_tokens_per_sec_per_gpu: Option<f64>,
    /// (predicted - measured) / measured x 100.
    pub error_pct: Option<f64>,
    /// Predicted tokens per second per GPU with the calibration factors fitted without this row's
    /// source (leave-one-source-out): the out-of-sample prediction.
    pub held_out_predicted_tokens_per_sec_per_gpu: Option<f64>,
    /// The out-of-sample error: (held-out prediction - measured) / measured x 100.
    pub held_out_error_pct: Option<f64>,
    /// Measured peak memory per GPU in GiB, when the row states it.
    pub measured_memory_gib: Option<f64>,
    /// Predicted peak memory per GPU in GiB.
    pub predicted_memory_gib: Option<f64>,
    /// (predicted - measured) / measured x 100 for memory.
    pub memory_error_pct: Option<f64>,
    /// The predicted memory of the worst pipeline stage, by what it holds; the figure compared
    /// is the part of it `memory_counter` reads.
    pub memory_breakdown: Option<crate::cost::breakdown::MemoryBreakdown>,
    /// The counter the row's measured memory reads (allocated, reserved or device total), for rows
    /// that state one.
    pub memory_counter: Option<crate::cost::breakdown::MemoryCounter>,
    /// Why the run is predicted not to fit in GPU memory; `None` when it fits or was not priced.
    pub over_capacity: Option<OverCapacity>,
    /// Settings the row left blank and the value assumed, with the rule's source.
    pub assumptions: Vec<String>,
    /// Why the row was not predicted; `None` when it was.
    pub skipped_reason: Option<String>,
}

/// The whole validation: every row, the overall summary and breakdowns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationReport {
    /// The lead figures: held-out and in-sample error per architecture, rank agreement in
    /// sweeps, and the coverage of the error bands.
    pub accuracy: Accuracy,
    /// Totals and error percentiles (in-sample) over every predicted row.
    pub summary: Summary,
    /// The same statistics per `source_id`.
    pub by_source: Vec<GroupSummary>,
    /// The same statistics per GPU preset.
    pub by_gpu: Vec<GroupSummary>,
    /// The same statistics per architecture, and for the context-parallel rows.
    pub by_kind: Vec<GroupSummary>,
    /// Every row in file order.
    pub rows: Vec<RowResult>,
    /// The error bands of every held-out error (what `data/error-bands.json` holds).
    pub bands: BandTable,
    /// The predicted runs that do not fit in GPU memory, in file order (each also in `rows`).
    pub over_capacity: Vec<OverCapacity>,
}

/// Why the CSV itself could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The built-in software stacks do not read (a bug in the shipped data).
    #[error("the built-in software stacks do not read: {0}")]
    Stacks(String),
    /// The text is not CSV with the expected header.
    #[error("cannot read the calibration CSV: {0}")]
    Csv(#[from] csv::Error),
    /// The header lacks a required column or names one meshplan does not know.
    #[error("the calibration CSV's header lacks [{missing}] and has unknown columns [{unknown}]")]
    Header {
        /// Required columns that are absent, comma-separated.
        missing: String,
        /// Columns that are neither read nor provenance, comma-separated (a misspelling, say).
        unknown: String,
    },
}

/// Predicts every row of a calibration CSV with the preset factors and compares with what was
/// measured, row by row: what [`validate_csv`] reports per row before the held-out refits and the
/// accuracy figures, with a catalog of stacks read once by the caller (the fuzz target prices
/// millions of one-row files).
pub fn evaluate_csv(text: &str, stacks: &StackCatalog) -> Result<Vec<RowResult>, ValidateError> {
    let rows = row::parse_rows(text)?;
    let refs: Vec<&CalibrationRow> = rows.iter().collect();
    Ok(calibrate::evaluate(&refs, &Calibration::new(), stacks))
}

/// Predicts every row of a calibration CSV and compares with what was measured: in-sample (the
/// preset factors) and held-out (factors refitted without the row's source).
pub fn validate_csv(text: &str) -> Result<ValidationReport, ValidateError> {
    validate_csv_with(text, &calibrate::builtin_stacks()?)
}

/// [`validate_csv`] with the software stacks already read (a caller that validates many files
/// reads them once).
pub fn validate_csv_with(
    text: &str,
    stacks: &StackCatalog,
) -> Result<ValidationReport, ValidateError> {
    let rows = row::parse_rows(text)?;
    let refs: Vec<&CalibrationRow> = rows.iter().collect();
    let mut results = calibrate::evaluate(&refs, &Calibration::new(), stacks);
    held_out::attach_held_out(&rows, &mut results, stacks);
    let (accuracy, bands) = accuracy::accuracy(&rows, &results);
    let summary::Summaries { summary, by_source, by_gpu, by_kind, over_capacity } =
        summary::summarize(&results);
    Ok(ValidationReport {
        accuracy,
        summary,
        by_source,
        by_gpu,
        by_kind,
        rows: results,
        bands,
        over_capacity,
    })
}

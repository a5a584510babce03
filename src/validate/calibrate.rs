//! Fitting the one calibrated number per GPU, and measuring how well the model predicts runs it
//! was not fitted on.
//!
//! A GPU preset's `efficiency.calibration` scales its GEMM and attention efficiencies; it is fitted
//! on dense rows only, so mixture-of-experts predictions stay out-of-sample. [`fit`]
//! starts every GPU at 1.0 (the literature base values) and repeatedly divides each GPU's factor by
//! `1 + median signed error` of its rows until the medians are near zero. [`cross_validate`] does
//! this once per source with that source's rows left out, then predicts the left-out rows: the
//! honest accuracy for a kind of run (a software stack, a lab) the model has not seen. A GPU with no
//! rows outside the held-out source keeps its uncalibrated base values.

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;

use super::mapping::{Calibration, evaluate_row};
use super::row::CalibrationRow;
use super::summary::{GroupSummary, error_summary, percentile};
use super::{RowResult, ValidateError, row};
use crate::presets::StackCatalog;

/// Fixed-point iterations of the fit; the medians move by well under 0.1% after four.
const FIT_ITERATIONS: usize = 4;

/// The fitted factor of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFit {
    /// GPU preset name.
    pub gpu: String,
    /// Predicted rows of this GPU used in the fit.
    pub rows: usize,
    /// The fitted `efficiency.calibration`.
    pub factor: f64,
    /// Median signed error % of those rows with base efficiencies (factor 1).
    pub base_median_error_pct: Option<f64>,
    /// Median signed error % with the fitted factor.
    pub fitted_median_error_pct: Option<f64>,
}

/// Held-out accuracy: each source predicted with factors fitted on the other sources.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossValidation {
    /// Statistics over every held-out prediction.
    pub overall: GroupSummary,
    /// The same per held-out source.
    pub by_source: Vec<GroupSummary>,
}

/// The output of `meshplan calibrate`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// Fitted factor per GPU, from every row.
    pub fits: Vec<GpuFit>,
    /// Leave-one-source-out accuracy.
    pub cross_validation: CrossValidation,
}

/// Every row priced under `calibration`, in the rows' order (priced in parallel, collected in
/// order, so the result does not depend on thread timing).
/// Each row runs on the stack it names in `stacks` ([`CalibrationRow::stack`]).
pub(super) fn evaluate(
    rows: &[&CalibrationRow],
    calibration: &Calibration,
    stacks: &StackCatalog,
) -> Vec<RowResult> {
    rows.par_iter().map(|row| evaluate_row(row, calibration, stacks)).collect()
}

/// The built-in stacks, read once for a whole validation or calibration.
pub(super) fn builtin_stacks() -> Result<StackCatalog, ValidateError> {
    StackCatalog::builtin().map_err(|err| ValidateError::Stacks(err.to_string()))
}

fn median_error_by_gpu(results: &[RowResult]) -> BTreeMap<String, Vec<f64>> {
    let mut errors: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for result in results {
        if let Some(error) = result.error_pct {
            errors.entry(result.gpu.clone()).or_default().push(error);
        }
    }
    errors
}

/// Fits the factor of every GPU that has predicted rows among `rows`, starting from 1.0. A GPU
/// without rows takes the factor fitted for the preset its own names as the same silicon
/// (`efficiency.calibrated_as`) where that one has rows, as its preset file does; else it stays
/// at 1.0 (uncalibrated base values).
pub fn fit(rows: &[&CalibrationRow], gpus: &[String], stacks: &StackCatalog) -> Calibration {
    let mut calibration: Calibration = gpus.iter().map(|gpu| (gpu.clone(), 1.0)).collect();
    let mut fitted: Vec<String> = Vec::new();
    for _ in 0..FIT_ITERATIONS {
        let errors = median_error_by_gpu(&evaluate(rows, &calibration, stacks));
        fitted = errors.keys().cloned().collect();
        for (gpu, errors) in errors {
            if let (Some(median), Some(factor)) =
                (percentile(&errors, 0.5), calibration.get_mut(&gpu))
            {
                *factor /= 1.0 + median / 100.0;
            }
        }
    }
    for gpu in gpus.iter().filter(|gpu| !fitted.contains(gpu)) {
        let sibling = crate::presets::gpu(gpu).ok().and_then(|spec| spec.efficiency.calibrated_as);
        let borrowed = sibling.filter(|s| fitted.contains(s)).and_then(|s| calibration.get(&s));
        if let Some(factor) = borrowed.copied() {
            calibration.insert(gpu.clone(), factor);
        }
    }
    calibration
}

/// The distinct `source_id`s of `rows`, sorted.
pub(super) fn sources<'a>(rows: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut sources: Vec<&str> = rows.into_iter().collect();
    sources.sort_unstable();
    sources.dedup();
    sources
}

/// One fit per source in `held_out`: the factors fitted on `fit_rows` without that source's rows.
/// A source with no fit rows gets the fit on every row, computed once.
pub(super) fn held_out_fits(
    fit_rows: &[&CalibrationRow],
    gpus: &[String],
    held_out: &[&str],
    stacks: &StackCatalog,
) -> BTreeMap<String, Calibration> {
    let mut full: Option<Calibration> = None;
    let mut fits = BTreeMap::new();
    for &source in held_out {
        let training: Vec<&CalibrationRow> =
            fit_rows.iter().copied().filter(|r| r.source_id != source).collect();
        let calibration = if training.len() == fit_rows.len() {
            full.get_or_insert_with(|| fit(fit_rows, gpus, stacks)).clone()
        } else {
            fit(&training, gpus, stacks)
        };
        fits.insert(source.to_owned(), calibration);
    }
    fits
}

/// Leave-one-source-out cross-validation over the predicted rows.
pub fn cross_validate(
    rows: &[&CalibrationRow],
    gpus: &[String],
    stacks: &StackCatalog,
) -> CrossValidation {
    let sources = sources(rows.iter().map(|r| r.source_id.as_str()));
    let fits = held_out_fits(rows, gpus, &sources, stacks);
    let mut all_errors = Vec::new();
    let mut by_source = Vec::new();
    for source in sources {
        let held_out: Vec<&CalibrationRow> =
            rows.iter().copied().filter(|r| r.source_id == source).collect();
        let errors: Vec<f64> =
            evaluate(&held_out, &fits[source], stacks).iter().filter_map(|r| r.error_pct).collect();
        if errors.is_empty() {
            continue;
        }
        all_errors.extend_from_slice(&errors);
        by_source.push(error_summary(source.to_owned(), errors.len(), &errors));
    }
    CrossValidation {
        overall: error_summary("all held-out rows".to_owned(), all_errors.len(), &all_errors),
        by_source,
    }
}

/// The rows a fit reads, given every row's outcome under the preset factors (`results`, in the
/// rows' order): the dense rows the model prices. The factor stands for a GPU's achievable
/// efficiency on dense training, so mixture-of-experts rows (whose extra costs the model prices
/// separately) stay out-of-sample, and unpriced rows would be skipped in every fold anyway. Also
/// returns the GPUs those rows run on, sorted.
pub(super) fn fit_rows<'a>(
    rows: &[&'a CalibrationRow],
    results: &[RowResult],
) -> (Vec<&'a CalibrationRow>, Vec<String>) {
    let priced: Vec<(&CalibrationRow, &RowResult)> = rows
        .iter()
        .zip(results)
        .filter(|(row, result)| result.error_pct.is_some() && row.arch_type.trim() == "dense")
        .map(|(row, result)| (*row, result))
        .collect();
    let mut gpus: Vec<String> = priced.iter().map(|(_, result)| result.gpu.clone()).collect();
    gpus.sort();
    gpus.dedup();
    (priced.into_iter().map(|(row, _)| row).collect(), gpus)
}

/// Fits every GPU's factor on a calibration CSV and measures held-out accuracy.
pub fn calibrate_csv(text: &str) -> Result<CalibrationReport, ValidateError> {
    let parsed = row::parse_rows(text)?;
    let rows: Vec<&CalibrationRow> = parsed.iter().collect();
    let stacks = builtin_stacks()?;
    let presets = evaluate(&rows, &Calibration::new(), &stacks);
    let (priced, gpus) = fit_rows(&rows, &presets);
    let base: Calibration = gpus.iter().map(|gpu| (gpu.clone(), 1.0)).collect();
    let base_errors = median_error_by_gpu(&evaluate(&priced, &base, &stacks));
    let calibration = fit(&priced, &gpus, &stacks);
    let fitted_errors = median_error_by_gpu(&evaluate(&priced, &calibration, &stacks));
    let fits = gpus
        .iter()
        .map(|gpu| GpuFit {
            gpu: gpu.clone(),
            rows: fitted_errors.get(gpu).map_or(0, Vec::len),
            factor: calibration[gpu],
            base_median_error_pct: base_errors.get(gpu).and_then(|e| percentile(e, 0.5)),
            fitted_median_error_pct: fitted_errors.get(gpu).and_then(|e| percentile(e, 0.5)),
        })
        .collect();
    Ok(CalibrationReport { fits, cross_validation: cross_validate(&priced, &gpus, &stacks) })
}

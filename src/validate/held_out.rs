//! The out-of-sample prediction of every row: each source's rows predicted with the per-GPU
//! calibration factors refitted without that source (leave-one-source-out, the fit of
//! `calibrate.rs`). Dense, mixture-of-experts and context-parallel rows alike are predicted; only
//! dense rows enter a fit. The source groups rows for the folds only; it never enters a
//! prediction.

use super::RowResult;
use super::calibrate::{evaluate, fit_rows, held_out_fits, sources};
use super::row::CalibrationRow;
use crate::presets::StackCatalog;

/// Sets `held_out_predicted_tokens_per_sec_per_gpu` and `held_out_error_pct` of every row the
/// model predicts; `results` are the rows' outcomes under the preset factors, in the rows' order.
pub(super) fn attach_held_out(
    rows: &[CalibrationRow],
    results: &mut [RowResult],
    stacks: &StackCatalog,
) {
    let refs: Vec<&CalibrationRow> = rows.iter().collect();
    let (fit_rows, gpus) = fit_rows(&refs, results);
    let predicted: Vec<usize> =
        (0..results.len()).filter(|&i| results[i].error_pct.is_some()).collect();
    let held_out = sources(predicted.iter().map(|&i| rows[i].source_id.as_str()));
    let fits = held_out_fits(&fit_rows, &gpus, &held_out, stacks);
    for source in held_out {
        let indices: Vec<usize> =
            predicted.iter().copied().filter(|&i| rows[i].source_id == source).collect();
        let source_rows: Vec<&CalibrationRow> = indices.iter().map(|&i| &rows[i]).collect();
        for (i, outcome) in indices.into_iter().zip(evaluate(&source_rows, &fits[source], stacks)) {
            results[i].held_out_predicted_tokens_per_sec_per_gpu =
                outcome.predicted_tokens_per_sec_per_gpu;
            results[i].held_out_error_pct = outcome.error_pct;
        }
    }
}

//! The lead section of `validate`'s text report: held-out (leave-one-source-out) and in-sample
//! error per architecture side by side, rank agreement inside sweeps, the measured coverage of
//! the 80 % error bands, and the skipped rows by reason.

use std::fmt::Write as _;

use crate::validate::ValidationReport;

use super::render::{align_numbers, optional, signed, table};

/// How many of the lowest-agreement sweeps are listed.
const WORST_SWEEPS: usize = 5;

/// The accuracy section.
pub fn accuracy_text(report: &ValidationReport) -> String {
    let mut out = String::new();
    let accuracy = &report.accuracy;
    let mut kinds = table(&[
        "rows",
        "in file",
        "predicted",
        "LOSO median |err| %",
        "LOSO p90 |err| %",
        "LOSO mean err %",
        "in-sample median |err| %",
        "in-sample p90 |err| %",
        "in-sample mean err %",
    ]);
    for kind in &accuracy.kinds {
        let (held_out, in_sample) = (&kind.held_out, &kind.in_sample);
        kinds.add_row([
            kind.kind.clone(),
            held_out.rows.to_string(),
            held_out.predicted.to_string(),
            optional(held_out.median_abs_error_pct, 1),
            optional(held_out.p90_abs_error_pct, 1),
            signed(held_out.mean_error_pct),
            optional(in_sample.median_abs_error_pct, 1),
            optional(in_sample.p90_abs_error_pct, 1),
            signed(in_sample.mean_error_pct),
        ]);
    }
    align_numbers(&mut kinds, 1);
    let _ = writeln!(
        out,
        "Accuracy: LOSO = leave-one-source-out, each source predicted with calibration factors \
         fitted without it (the out-of-sample figure); in-sample = the presets' factors, fitted \
         on every dense row\n{kinds}"
    );

    let rank = &accuracy.rank;
    let _ = writeln!(
        out,
        "\nRank agreement in sweeps (rows of one source with the same software release, model, \
         GPU, GPU count and sequence length): weighted Kendall tau-b {} LOSO, {} in-sample, over {} sweeps with a \
         tau-b ({} rows; mean weighted by rows; {} sweeps of all-equal values have none)",
        optional(rank.weighted_tau_held_out, 2),
        optional(rank.weighted_tau_in_sample, 2),
        rank.sweeps_with_tau,
        rank.rows_with_tau,
        rank.sweeps.len() - rank.sweeps_with_tau,
    );
    let mut worst: Vec<_> = rank.sweeps.iter().filter(|s| s.tau_held_out.is_some()).collect();
    worst.sort_by(|a, b| {
        a.tau_held_out
            .unwrap_or(0.0)
            .total_cmp(&b.tau_held_out.unwrap_or(0.0))
            .then(a.key.cmp(&b.key))
    });
    let mut sweeps = table(&["lowest-agreement sweeps", "rows", "tau-b LOSO", "tau-b in-sample"]);
    for sweep in worst.into_iter().take(WORST_SWEEPS) {
        sweeps.add_row([
            sweep.key.clone(),
            sweep.rows.to_string(),
            optional(sweep.tau_held_out, 2),
            optional(sweep.tau_in_sample, 2),
        ]);
    }
    align_numbers(&mut sweeps, 1);
    let _ = writeln!(out, "{sweeps}");

    let coverage = &accuracy.band_coverage;
    let _ = writeln!(
        out,
        "\n80 % band coverage: {} % of {} held-out rows (each source checked against bands built \
         from the other sources' held-out errors; {} of those bands widened for thin evidence; \
         {} rows without a band)",
        optional(coverage.coverage_pct, 1),
        coverage.rows,
        coverage.widened,
        coverage.without_band,
    );

    let summary = &report.summary;
    let _ = writeln!(out, "\nSkipped: {} of {} rows", summary.skipped, summary.rows);
    for reason in &summary.skipped_reasons {
        let _ = writeln!(out, "  {:>4}  {}", reason.rows, reason.reason);
    }
    out
}

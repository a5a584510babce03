//! The lead figures of a validation: out-of-sample (leave-one-source-out) and in-sample error per
//! architecture side by side, rank agreement inside sweeps, and the measured coverage of the 80 %
//! error bands.

use serde::Serialize;

use super::RowResult;
use super::bands::{BandKey, BandTable};
use super::coverage::{BandCoverage, HeldOutError, nested_coverage};
use super::rank::{RankAgreement, rank_agreement};
use super::row::CalibrationRow;
use super::summary::{GroupSummary, error_summary};

/// In-sample and held-out error of one kind of row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindAccuracy {
    /// `all`, `dense`, `moe`, `hybrid` (Mamba-2 hybrids) or `cp` (context-parallel rows of any
    /// architecture).
    pub kind: String,
    /// Held-out (leave-one-source-out) statistics: the headline.
    pub held_out: GroupSummary,
    /// In-sample statistics (the preset factors, fitted on every dense row).
    pub in_sample: GroupSummary,
}

/// The accuracy section of a validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accuracy {
    /// Per kind of row.
    pub kinds: Vec<KindAccuracy>,
    /// Rank agreement inside sweeps.
    pub rank: RankAgreement,
    /// Coverage of the 80 % error bands, nested leave-one-source-out.
    pub band_coverage: BandCoverage,
}

fn kind(name: &str, rows: &[&RowResult]) -> KindAccuracy {
    let held_out: Vec<f64> = rows.iter().filter_map(|r| r.held_out_error_pct).collect();
    let in_sample: Vec<f64> = rows.iter().filter_map(|r| r.error_pct).collect();
    KindAccuracy {
        kind: name.to_owned(),
        held_out: error_summary(name.to_owned(), rows.len(), &held_out),
        in_sample: error_summary(name.to_owned(), rows.len(), &in_sample),
    }
}

/// The band key and held-out error of every row that has both.
fn held_out_errors(results: &[RowResult]) -> Vec<HeldOutError<'_>> {
    results
        .iter()
        .filter_map(|r| {
            Some(HeldOutError {
                source: &r.source_id,
                key: BandKey::of_row(r)?,
                error_pct: r.held_out_error_pct?,
            })
        })
        .collect()
}

/// The accuracy section and the band table of every held-out error, from the rows and their
/// outcomes (held-out predictions attached), in the same order.
pub(super) fn accuracy(rows: &[CalibrationRow], results: &[RowResult]) -> (Accuracy, BandTable) {
    let select = |keep: fn(&RowResult) -> bool| -> Vec<&RowResult> {
        results.iter().filter(|r| keep(r)).collect()
    };
    let kinds = vec![
        kind("all", &select(|_| true)),
        kind("dense", &select(|r| r.architecture == "dense")),
        kind("moe", &select(|r| r.architecture == "moe")),
        kind("hybrid", &select(|r| r.architecture.starts_with("hybrid"))),
        kind("cp", &select(|r| r.context_parallel)),
    ];
    let errors = held_out_errors(results);
    let table = BandTable::from_errors(errors.iter().map(|e| (&e.key, e.error_pct)));
    let accuracy = Accuracy {
        kinds,
        rank: rank_agreement(rows, results),
        band_coverage: nested_coverage(&errors),
    };
    (accuracy, table)
}

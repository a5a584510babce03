//! Error statistics over predicted rows: overall, per source and per GPU.

use std::collections::BTreeMap;

use serde::Serialize;

use super::RowResult;

/// Overall statistics, in the JSON shape scripts rely on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Rows in the file.
    pub rows: usize,
    /// Rows predicted.
    pub predicted: usize,
    /// Rows skipped, each with its reason in `rows`.
    pub skipped: usize,
    /// Each distinct reason rows were skipped for, with how many rows, most frequent first.
    pub skipped_reasons: Vec<ReasonCount>,
    /// Median of |error %| over predicted rows.
    pub median_abs_error_pct: Option<f64>,
    /// 90th percentile of |error %| over predicted rows.
    pub p90_abs_error_pct: Option<f64>,
    /// Mean signed error %: positive means meshplan predicts faster than measured.
    pub mean_error_pct: Option<f64>,
    /// Predicted rows that also state a measured peak memory.
    pub memory_rows: usize,
    /// Median of |memory error %| over those rows.
    pub memory_median_abs_error_pct: Option<f64>,
    /// Predicted rows whose run is predicted not to fit in GPU memory.
    pub over_capacity: usize,
}

/// A reason rows were skipped for, and how many.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonCount {
    /// The reason, as each row states it.
    pub reason: String,
    /// Rows skipped for it.
    pub rows: usize,
}

/// Each distinct skip reason with its count: most rows first, then alphabetical.
fn skipped_reasons(rows: &[RowResult]) -> Vec<ReasonCount> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in rows.iter().filter_map(|r| r.skipped_reason.as_deref()) {
        *counts.entry(reason).or_default() += 1;
    }
    let mut reasons: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, rows)| ReasonCount { reason: reason.to_owned(), rows })
        .collect();
    reasons.sort_by(|a, b| b.rows.cmp(&a.rows).then_with(|| a.reason.cmp(&b.reason)));
    reasons
}

/// Statistics of one group of rows (a source or a GPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    /// The group's name.
    pub name: String,
    /// Rows in the group.
    pub rows: usize,
    /// Rows predicted.
    pub predicted: usize,
    /// Median of |error %|.
    pub median_abs_error_pct: Option<f64>,
    /// 90th percentile of |error %|.
    pub p90_abs_error_pct: Option<f64>,
    /// Mean signed error %.
    pub mean_error_pct: Option<f64>,
}

/// The value below which `fraction` of the sorted values lie (nearest-rank on the sorted list,
/// interpolating linearly between neighbours).
pub fn percentile(values: &[f64], fraction: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = fraction.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = position.ceil() as usize;
    let weight = position - low as f64;
    Some(sorted[low] * (1.0 - weight) + sorted[high] * weight)
}

fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() { None } else { Some(values.iter().sum::<f64>() / values.len() as f64) }
}

fn group(name: String, rows: &[&RowResult]) -> GroupSummary {
    let errors: Vec<f64> = rows.iter().filter_map(|r| r.error_pct).collect();
    error_summary(name, rows.len(), &errors)
}

/// Statistics of the signed errors (%) of `rows` rows, of which `errors.len()` were predicted.
pub(super) fn error_summary(name: String, rows: usize, errors: &[f64]) -> GroupSummary {
    let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    GroupSummary {
        name,
        rows,
        predicted: errors.len(),
        median_abs_error_pct: percentile(&abs, 0.5),
        p90_abs_error_pct: percentile(&abs, 0.9),
        mean_error_pct: mean(errors),
    }
}

fn groups(rows: &[RowResult], key: impl Fn(&RowResult) -> String) -> Vec<GroupSummary> {
    let mut by_key: BTreeMap<String, Vec<&RowResult>> = BTreeMap::new();
    for row in rows {
        by_key.entry(key(row)).or_default().push(row);
    }
    by_key.into_iter().map(|(name, rows)| group(name, &rows)).collect()
}

/// The statistics of a validation's rows: overall and per source, GPU and architecture.
pub(super) struct Summaries {
    pub summary: Summary,
    pub by_source: Vec<GroupSummary>,
    pub by_gpu: Vec<GroupSummary>,
    pub by_kind: Vec<GroupSummary>,
    pub over_capacity: Vec<super::OverCapacity>,
}

/// The statistics of the per-row results.
pub(super) fn summarize(rows: &[RowResult]) -> Summaries {
    let all: Vec<&RowResult> = rows.iter().collect();
    let overall = group(String::new(), &all);
    let memory_errors: Vec<f64> =
        rows.iter().filter_map(|r| r.memory_error_pct.map(f64::abs)).collect();
    let summary = Summary {
        rows: rows.len(),
        predicted: overall.predicted,
        skipped: rows.iter().filter(|r| r.skipped_reason.is_some()).count(),
        skipped_reasons: skipped_reasons(rows),
        median_abs_error_pct: overall.median_abs_error_pct,
        p90_abs_error_pct: overall.p90_abs_error_pct,
        mean_error_pct: overall.mean_error_pct,
        memory_rows: memory_errors.len(),
        memory_median_abs_error_pct: percentile(&memory_errors, 0.5),
        over_capacity: rows.iter().filter(|r| r.over_capacity.is_some()).count(),
    };
    let mut by_kind = groups(rows, |r| r.architecture.clone());
    let context_parallel: Vec<&RowResult> = rows.iter().filter(|r| r.context_parallel).collect();
    by_kind.push(group("context parallel (cp > 1)".to_owned(), &context_parallel));
    Summaries {
        over_capacity: rows.iter().filter_map(|r| r.over_capacity.clone()).collect(),
        by_source: groups(rows, |r| r.source_id.clone()),
        by_gpu: groups(rows, |r| r.gpu.clone()),
        by_kind,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_ranks() {
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert!(
            (percentile(&(1..=10).map(f64::from).collect::<Vec<_>>(), 0.9).unwrap() - 9.1).abs()
                < 1e-12
        );
        assert_eq!(percentile(&[], 0.5), None);
    }
}

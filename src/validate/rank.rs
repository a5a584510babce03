//! Rank agreement inside sweeps: does the model order the plans of one published sweep as the
//! measurements do? A sweep is the rows of one source that run the same software release
//! (`software_or_release`), model, GPU preset, number of GPUs and sequence length, so they differ
//! only in what a planner chooses (parallel layout, micro- and global batch, recompute,
//! precision), not in the software that ran them; a sweep needs at least two predicted rows. Agreement is Kendall's tau-b between measured and predicted tokens/s/GPU, for
//! the in-sample and the held-out predictions, and the mean over sweeps weighted by each sweep's
//! number of predicted rows. A sweep whose measured or predicted values are all equal has no
//! tau-b and is left out of the mean (it is still listed).

use std::collections::BTreeMap;

use serde::Serialize;

use super::RowResult;
use super::row::CalibrationRow;

/// Kendall's tau-b of two paired samples, ties handled (Kendall 1945; what `scipy.stats.kendalltau`
/// computes by default). `None` when there are fewer than two pairs, the lengths differ, or every
/// value of either side is the same (the denominator is zero). O(n^2): sweeps are small.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (mut concordant, mut discordant, mut tied_x, mut tied_y, mut pairs) =
        (0i64, 0i64, 0usize, 0usize, 0usize);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            pairs += 1;
            let dx = x[i].total_cmp(&x[j]) as i64;
            let dy = y[i].total_cmp(&y[j]) as i64;
            if dx == 0 {
                tied_x += 1;
            }
            if dy == 0 {
                tied_y += 1;
            }
            match dx * dy {
                1 => concordant += 1,
                -1 => discordant += 1,
                _ => {}
            }
        }
    }
    let denominator = ((pairs - tied_x) as f64 * (pairs - tied_y) as f64).sqrt();
    (denominator > 0.0).then(|| (concordant - discordant) as f64 / denominator)
}

/// One sweep and its rank agreement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    /// `source / software release / model / GPU / GPUs / sequence length`.
    pub key: String,
    /// Predicted rows in the sweep.
    pub rows: usize,
    /// Kendall's tau-b of measured against in-sample predicted tokens/s/GPU.
    pub tau_in_sample: Option<f64>,
    /// The same against the held-out predictions.
    pub tau_held_out: Option<f64>,
}

/// Rank agreement over every sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankAgreement {
    /// Every sweep, in key order.
    pub sweeps: Vec<Sweep>,
    /// Mean in-sample tau-b over the sweeps that have one, weighted by their predicted rows.
    pub weighted_tau_in_sample: Option<f64>,
    /// The same for the held-out predictions.
    pub weighted_tau_held_out: Option<f64>,
    /// Sweeps with a held-out tau-b (the ones in that mean).
    pub sweeps_with_tau: usize,
    /// Predicted rows in those sweeps.
    pub rows_with_tau: usize,
}

fn weighted_mean(values: impl Iterator<Item = (Option<f64>, usize)>) -> Option<f64> {
    let (sum, weight) = values
        .filter_map(|(tau, rows)| tau.map(|tau| (tau * rows as f64, rows)))
        .fold((0.0, 0), |(sum, weight), (value, rows)| (sum + value, weight + rows));
    (weight > 0).then(|| sum / weight as f64)
}

/// The sweeps of `rows` (with their outcomes, in the same order) and their rank agreement.
pub(super) fn rank_agreement(rows: &[CalibrationRow], results: &[RowResult]) -> RankAgreement {
    let mut groups: BTreeMap<String, Vec<&RowResult>> = BTreeMap::new();
    for (row, result) in rows.iter().zip(results) {
        if result.error_pct.is_none() {
            continue;
        }
        let key = format!(
            "{} / {} / {} / {} / {} GPUs / seq {}",
            row.source_id,
            row.software_or_release.trim(),
            row.model,
            result.gpu,
            row.num_gpus.trim(),
            row.seq_length.trim()
        );
        groups.entry(key).or_default().push(result);
    }
    let tau = |rows: &[&RowResult], predicted: fn(&RowResult) -> Option<f64>| {
        let pairs: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((r.measured_tokens_per_sec_per_gpu?, predicted(r)?)))
            .collect();
        let (measured, predicted): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        kendall_tau_b(&measured, &predicted)
    };
    let sweeps: Vec<Sweep> = groups
        .into_iter()
        .filter(|(_, rows)| rows.len() >= 2)
        .map(|(key, rows)| Sweep {
            key,
            rows: rows.len(),
            tau_in_sample: tau(&rows, |r| r.predicted_tokens_per_sec_per_gpu),
            tau_held_out: tau(&rows, |r| r.held_out_predicted_tokens_per_sec_per_gpu),
        })
        .collect();
    let with_tau: Vec<&Sweep> = sweeps.iter().filter(|s| s.tau_held_out.is_some()).collect();
    RankAgreement {
        weighted_tau_in_sample: weighted_mean(sweeps.iter().map(|s| (s.tau_in_sample, s.rows))),
        weighted_tau_held_out: weighted_mean(sweeps.iter().map(|s| (s.tau_held_out, s.rows))),
        sweeps_with_tau: with_tau.len(),
        rows_with_tau: with_tau.iter().map(|s| s.rows).sum(),
        sweeps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_b_matches_the_textbook_example_with_ties() {
        // scipy.stats.kendalltau's documented example: tau-b = -0.47140452079103173.
        let tau = kendall_tau_b(&[12.0, 2.0, 1.0, 12.0, 2.0], &[1.0, 4.0, 7.0, 1.0, 0.0]).unwrap();
        assert!((tau - -0.471_404_520_791_031_73).abs() < 1e-12, "{tau}");
    }

    #[test]
    fn tau_b_of_perfect_orders_and_degenerate_inputs() {
        assert_eq!(kendall_tau_b(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]), Some(1.0));
        assert_eq!(kendall_tau_b(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(kendall_tau_b(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(kendall_tau_b(&[1.0], &[1.0]), None);
        assert_eq!(kendall_tau_b(&[1.0, 2.0], &[1.0]), None);
    }

    fn row(release: &str, gpus: &str) -> CalibrationRow {
        CalibrationRow {
            source_id: "bridge".to_owned(),
            software_or_release: release.to_owned(),
            model: "LLAMA3_70B".to_owned(),
            gpu_type: "GB200 (DGX-GB200 NVL72)".to_owned(),
            num_gpus: gpus.to_owned(),
            seq_length: "8192".to_owned(),
            ..CalibrationRow::default()
        }
    }

    /// The row's result as validation states it, priced at `predicted` in and out of sample.
    fn result(row: &CalibrationRow, measured: f64, predicted: f64) -> RowResult {
        let stack = crate::presets::stack("generic").unwrap();
        let error = Some((predicted - measured) / measured * 100.0);
        RowResult {
            measured_tokens_per_sec_per_gpu: Some(measured),
            predicted_tokens_per_sec_per_gpu: Some(predicted),
            error_pct: error,
            held_out_predicted_tokens_per_sec_per_gpu: Some(predicted),
            held_out_error_pct: error,
            ..super::super::mapping::stated(row, &stack)
        }
    }

    #[test]
    fn a_sweep_holds_one_software_release_so_its_rows_differ_only_in_plan() {
        // Two plans measured in two releases: the second release ran both plans 10 % faster. One
        // cost model prices a plan the same in both, so mixing the releases would count the
        // release-to-release gap as rank disagreement; each release is its own sweep.
        let rows = [
            row("NeMo 26.02", "64"),
            row("NeMo 26.02", "64"),
            row("NeMo 26.04", "64"),
            row("NeMo 26.04", "64"),
            row("NeMo 26.04", "32"),
        ];
        let prices = [(100.0, 100.0), (120.0, 120.0), (110.0, 100.0), (132.0, 120.0), (50.0, 50.0)];
        let results: Vec<RowResult> =
            rows.iter().zip(prices).map(|(row, (m, p))| result(row, m, p)).collect();
        let rank = rank_agreement(&rows, &results);
        let keys: Vec<&str> = rank.sweeps.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "bridge / NeMo 26.02 / LLAMA3_70B / gb200 / 64 GPUs / seq 8192",
                "bridge / NeMo 26.04 / LLAMA3_70B / gb200 / 64 GPUs / seq 8192",
            ],
            "the lone 32-GPU row is no sweep"
        );
        assert_eq!(rank.weighted_tau_held_out, Some(1.0));
        assert_eq!(rank.rows_with_tau, 4);
        // Pooled, the same four rows disagree: 110 measured beats 100 but both are predicted 100.
        let pooled: Vec<f64> =
            results[..4].iter().map(|r| r.measured_tokens_per_sec_per_gpu.unwrap()).collect();
        let predicted: Vec<f64> =
            results[..4].iter().map(|r| r.predicted_tokens_per_sec_per_gpu.unwrap()).collect();
        assert!(kendall_tau_b(&pooled, &predicted).unwrap() < 1.0);
    }

    #[test]
    fn the_mean_weights_sweeps_by_rows_and_skips_undefined_ones() {
        let mean = weighted_mean([(Some(1.0), 2), (Some(-0.5), 6), (None, 10)].into_iter());
        assert!((mean.unwrap() - (2.0 - 3.0) / 8.0).abs() < 1e-12);
        assert_eq!(weighted_mean([(None, 3)].into_iter()), None);
    }
}

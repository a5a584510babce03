//! What documents of unequal lengths do to a step. Packed into sequences under a document mask,
//! they leave each sequence's linear work as it was and change its attention work by the
//! squares of its document pieces (`crate::data`): the op tables price the mean sequence
//! (`document_attention.rs`), and the step adds what the slowest of the `dp` replicas and the
//! largest micro-batch of its pipeline take beyond the mean ([`data_imbalance`]).
//!
//! Sequences are drawn independently, so a replica's attention work is a sum of `m x mbs` draws
//! and a micro-batch's a sum of `mbs`. The expected largest of `n` such sums is taken from
//! their cumulants: Blom's normal score `z_n` (the expected largest of `n` standard normal draws,
//! Blom 1958) with the Cornish-Fisher skew term, `mean + sd (z_n + z_n^2 skew / 6)`, held between
//! the mean and the largest sum the sample allows. One replica (or one micro-batch) has none
//! above the mean. A pipeline of micro-batches of unequal work fills and drains at the pace of
//! its largest (the makespan of a proportionate flow shop is the sum of the jobs plus
//! `p - 1` times the largest): the bubble grows by that micro-batch's work over the mean's.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use crate::cost::document_attention::ramp;
use crate::cost::priced::PricedRun;
use crate::cost::work::Work;
use crate::units::Seconds;

/// The spread of a step's work over its data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DataImbalance {
    /// Time the slowest replica and its largest micro-batch add to the mean replica's step.
    pub extra: Seconds,
    /// The slowest replica's pipeline work (its critical stage's) over the mean replica's.
    pub replicas: f64,
    /// A replica's largest micro-batch's work over the mean micro-batch's (WLB-LLM's imbalance
    /// degree, largest x micro-batches / total).
    pub microbatches: f64,
    /// Document pieces per sequence, on average.
    pub pieces_per_sequence: f64,
    /// Tokens trained over tokens computed (below 1 when padding).
    pub trained_fraction: f64,
}

/// What the run's data adds to a step whose critical stage does `critical` per mean micro-batch
/// and whose pipeline fills and drains in `bubble`; `None` without data.
pub fn data_imbalance(
    priced: &PricedRun,
    critical: &Work,
    bubble: Seconds,
) -> Option<DataImbalance> {
    let run = priced.run();
    let loads = &run.data()?.loads;
    let plan = run.plan();
    let (y_forward, y_backward) = ramp(run);
    let micro_batch = run.training().micro_batch() as f64;
    let m = plan.num_microbatches();
    // One sequence's attention seconds on the critical stage, as a combination `u a + v b` of
    // its sample values: each phase's mean-sequence time over its mean ratio.
    let phase = |time: Seconds, y: f64| {
        let mean = loads.mean_ratio(y);
        let per_unit =
            if mean > 0.0 { time.value() / (mean * (1.0 + y) * micro_batch) } else { 0.0 };
        (per_unit, per_unit * y)
    };
    let (u_forward, v_forward) = phase(critical.forward_attention, y_forward);
    let (u_backward, v_backward) = phase(critical.backward_attention, y_backward);
    let (u, v) = (u_forward + u_backward, v_forward + v_backward);
    let [mean, variance, third] = loads.moments_of(u, v);
    let largest = loads.max_of(u, v);
    let per_microbatch = critical.total().value();
    // The slowest replica's attention over `m x mbs` sequences, and its largest micro-batch's.
    let sequences = m as f64 * micro_batch;
    let slowest =
        expected_largest(mean, variance, third, sequences, plan.dp(), largest) - sequences * mean;
    let largest_microbatch =
        expected_largest(mean, variance, third, micro_batch, m, largest) - micro_batch * mean;
    let microbatches = if per_microbatch > 0.0 {
        (per_microbatch + largest_microbatch) / per_microbatch
    } else {
        1.0
    };
    let replica = per_microbatch * m as f64;
    Some(DataImbalance {
        extra: Seconds::new(slowest) + bubble * (microbatches - 1.0),
        replicas: if replica > 0.0 { (replica + slowest) / replica } else { 1.0 },
        microbatches,
        pieces_per_sequence: loads.pieces_per_sequence,
        trained_fraction: loads.trained_fraction,
    })
}

/// The expected largest of `draws` independent sums of `members` sequences each, from one
/// sequence's mean, variance and third central moment; at most `members x largest`.
fn expected_largest(
    mean: f64,
    variance: f64,
    third: f64,
    members: f64,
    draws: u64,
    largest: f64,
) -> f64 {
    let sum_mean = members * mean;
    let sum_variance = members * variance;
    if draws <= 1 || sum_variance <= 0.0 {
        return sum_mean;
    }
    let z = blom_score(draws);
    let skew = members * third / sum_variance.powf(1.5);
    let value = sum_mean + sum_variance.sqrt() * (z + z * z * skew / 6.0);
    value.clamp(sum_mean, (members * largest).max(sum_mean))
}

/// Blom's approximation of the expected largest of `n` standard normal draws:
/// `Phi^-1((n - 0.375) / (n + 0.25))`.
fn blom_score(n: u64) -> f64 {
    let n = n as f64;
    let standard = Normal::standard();
    standard.inverse_cdf((n - 0.375) / (n + 0.25))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blom_scores_match_the_tabulated_expected_normal_maxima() {
        // Expected largest of n standard normals (Harter 1961): 2 -> 0.5642, 4 -> 1.0294,
        // 10 -> 1.5388, 100 -> 2.5076; Blom's formula is within 0.03 of them (0.025 at n = 2).
        for (n, expected) in [(2, 0.5642), (4, 1.0294), (10, 1.5388), (100, 2.5076)] {
            let score = blom_score(n);
            assert!((score - expected).abs() < 0.03, "n {n}: {score} vs {expected}");
        }
    }

    #[test]
    fn one_draw_or_no_spread_has_nothing_above_the_mean() {
        assert_eq!(expected_largest(2.0, 1.0, 0.5, 3.0, 1, 10.0), 6.0);
        assert_eq!(expected_largest(2.0, 0.0, 0.0, 3.0, 64, 10.0), 6.0);
    }

    #[test]
    fn no_sum_is_expected_above_its_members_largest_values() {
        let value = expected_largest(0.1, 1.0, 50.0, 1.0, 1_000_000, 1.0);
        assert_eq!(value, 1.0);
    }
}

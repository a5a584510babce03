//! What documents of unequal lengths do to a step. Packed into sequences under a document mask,
//! they leave each sequence's linear work as it was and change its attention work by the
//! squares of its document pieces (`crate::data`): the op tables price the mean sequence
//! (`document_attention.rs`), and the step adds what the slowest of the `dp` replicas and the
//! largest micro-batch of its pipeline take beyond the mean ([`data_imbalance`], computed once
//! per priced run, [`DataImbalance::extra`] for the bubble of the closed form or the simulation).
//!
//! Sequences are drawn independently, so a replica's attention work is a sum of `m x mbs` draws
//! and a micro-batch's a sum of `mbs`. The expected largest of `n` such sums is the larger of
//! the sum that holds the largest of all draws (exact from the sample for single sequences,
//! the heavy-tailed limit) and the normal limit, `mean + sd z_n` with Blom's score `z_n` (the
//! expected largest of `n` standard normal draws, Blom 1958), held between the mean and the
//! largest sum the sample allows (checked against drawing in this file's tests). One replica
//! (or one micro-batch) has none above the mean. A pipeline of micro-batches of unequal work fills and drains at the pace of
//! its largest (the makespan of a proportionate flow shop is the sum of the jobs plus
//! `p - 1` times the largest): the bubble grows by that micro-batch's work over the mean's.
//! With `--balance-window`, the spread is what re-packing leaves (`repacking.rs`); with
//! variable micro-batches, what dealing them to the replicas leaves (`dynamic_microbatches.rs`).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use crate::cost::document_attention::{mean_attention_ratio, ramp};
use crate::cost::dynamic_microbatches::dynamic_spread;
use crate::cost::repacking::{PieceWork, repacked_spread};
use crate::cost::work::Work;
use crate::run::Run;
use crate::units::Seconds;

/// The spread of a step's work over its data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DataImbalance {
    /// Time the slowest replica's sequences add to the mean replica's work.
    pub slowest_replica: Seconds,
    /// The slowest replica's pipeline work (its critical stage's) over the mean replica's.
    pub replicas: f64,
    /// A replica's largest micro-batch's work over the mean micro-batch's (WLB-LLM's imbalance
    /// degree, largest x micro-batches / total).
    pub microbatches: f64,
    /// With variable micro-batches: how many a replica runs and what their largest adds to the
    /// pipeline's fill and drain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variable: Option<VariableMicroBatches>,
}

/// What variable micro-batches (a plan's `variable_micro_batches`) leave of a step's pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VariableMicroBatches {
    /// Micro-batches a replica runs, on average (the plan's fixed count is their slots).
    pub per_replica: f64,
    /// Time the largest micro-batch adds to the pipeline's fill and drain beyond the mean
    /// slot's, priced directly rather than by scaling the bubble.
    pub largest_fill: Seconds,
}

impl DataImbalance {
    /// What it adds to a step whose pipeline fills and drains in `bubble`: the slowest
    /// replica's extra work, and the bubble grown by the largest micro-batch.
    pub fn extra(&self, bubble: Seconds) -> Seconds {
        match self.variable {
            Some(variable) => self.slowest_replica + variable.largest_fill,
            None => self.slowest_replica + bubble * (self.microbatches - 1.0),
        }
    }
}

/// The spread of the run's data on a step whose critical stage does `critical` per mean
/// micro-batch; `None` without data. It depends on neither the schedule nor the bubble, so a
/// priced run computes it once ([`crate::cost::priced::PricedRun::data_imbalance`]).
pub fn data_imbalance(run: &Run, critical: &Work) -> Option<DataImbalance> {
    let loads = &run.data()?.loads;
    let plan = run.plan();
    let micro_batch = run.training().micro_batch() as f64;
    let m = plan.num_microbatches();
    let work = sequence_work(run, critical)?;
    let per_microbatch = critical.total().value();
    // Variable micro-batches: what dealing them leaves, their largest's fill priced directly.
    if let Some(spread) = dynamic_spread(run, work) {
        let replica = per_microbatch * m as f64;
        let fill = (plan.pp() - 1) as f64 / plan.vp() as f64 * (spread.largest - per_microbatch);
        return Some(DataImbalance {
            slowest_replica: Seconds::new(spread.slowest),
            replicas: if replica > 0.0 { (replica + spread.slowest) / replica } else { 1.0 },
            microbatches: if spread.mean > 0.0 { spread.largest / spread.mean } else { 1.0 },
            variable: Some(VariableMicroBatches {
                per_replica: spread.per_replica,
                largest_fill: Seconds::new(fill.max(0.0)),
            }),
        });
    }
    // The slowest replica's attention over `m x mbs` sequences, and its largest micro-batch's:
    // drawn as packed, or dealt from a window of re-packed documents.
    let (u, v) = (work.u, work.v);
    let moments = loads.moments_of(u, v);
    let mean = moments[0];
    let sequences = m as f64 * micro_batch;
    let repacked = (plan.balance_window() > 0).then(|| repacked_spread(run, work)).flatten();
    let (slowest, largest_microbatch) = match repacked {
        Some(spread) => spread,
        None => (
            expected_largest(loads, (u, v), moments, sequences, plan.dp()) - sequences * mean,
            expected_largest(loads, (u, v), moments, micro_batch, m) - micro_batch * mean,
        ),
    };
    let microbatches = if per_microbatch > 0.0 {
        (per_microbatch + largest_microbatch) / per_microbatch
    } else {
        1.0
    };
    let replica = per_microbatch * m as f64;
    Some(DataImbalance {
        slowest_replica: Seconds::new(slowest),
        replicas: if replica > 0.0 { (replica + slowest) / replica } else { 1.0 },
        microbatches,
        variable: None,
    })
}

/// One sequence's attention seconds on the critical stage doing `critical` per mean micro-batch,
/// as a combination `u a + v b` of its sample values, forward and backward: each phase's
/// mean-sequence time over its mean ratio. `None` without data.
pub(crate) fn attention_seconds_per_unit(run: &Run, critical: &Work) -> Option<[(f64, f64); 2]> {
    let (y_forward, y_backward) = ramp(run);
    let micro_batch = run.training().micro_batch() as f64;
    let phase = |time: Seconds, y: f64| {
        // Variable micro-batches' slots average their own attention, not the sample's.
        let mean = mean_attention_ratio(run, y)?;
        let per_unit =
            if mean > 0.0 { time.value() / (mean * (1.0 + y) * micro_batch) } else { 0.0 };
        Some((per_unit, per_unit * y))
    };
    Some([
        phase(critical.forward_attention, y_forward)?,
        phase(critical.backward_attention, y_backward)?,
    ])
}

/// One sequence's (or document piece's) work on the critical stage that does `critical` per mean
/// micro-batch, `None` without data: its attention seconds as a combination `u a + v b` of its
/// sample values (both phases of [`attention_seconds_per_unit`]) and the rest of the
/// micro-batch's work spread evenly over its tokens. Over the run's sample, the sequences' mean
/// is the mean micro-batch's work over its sequences.
pub(crate) fn sequence_work(run: &Run, critical: &Work) -> Option<PieceWork> {
    let [(u_forward, v_forward), (u_backward, v_backward)] =
        attention_seconds_per_unit(run, critical)?;
    let (u, v) = (u_forward + u_backward, v_forward + v_backward);
    let micro_batch = run.training().micro_batch() as f64;
    let per_microbatch = critical.total().value();
    let attention = critical.forward_attention.value() + critical.backward_attention.value();
    // A slot of variable micro-batches computes a share of a full micro-batch's tokens.
    let computed = run
        .dynamic_batches()
        .and_then(|batches| batches.get().map(|batches| batches.computed_fraction))
        .unwrap_or(1.0);
    let tokens = micro_batch * run.training().seq_len() as f64 * computed;
    let linear_per_token = (per_microbatch - attention).max(0.0) / tokens;
    Some(PieceWork { linear_per_token, u, v })
}

/// The expected largest of `draws` independent sums of `members` sequences each (`u a + v b`
/// per sequence, with mean and variance `moments`): the larger of two
/// estimates, each exact in its own limit. Heavy tails: the sum that holds the largest single
/// sequence of all `draws x members` exceeds the mean by that sequence alone, and the sample
/// gives that sequence's expectation exactly. Light tails: a sum of many sequences is nearly
/// normal, and the largest of `draws` normals exceeds the mean by Blom's score of standard
/// deviations. At most `members x` the sample's largest value; one draw is the mean.
fn expected_largest(
    loads: &crate::data::SequenceLoads,
    (u, v): (f64, f64),
    [mean, variance]: [f64; 2],
    members: f64,
    draws: u64,
) -> f64 {
    let sum_mean = members * mean;
    if draws <= 1 {
        return sum_mean;
    }
    // The other members of the sum that holds the largest draw are draws below it: their mean
    // is the mean of the rest.
    let all = draws as f64 * members;
    let single = loads.expected_largest_of(u, v, all);
    let rest = ((all * mean - single) / (all - 1.0)).max(0.0);
    let jump = single + (members - 1.0) * rest;
    let normal = sum_mean + (members * variance.max(0.0)).sqrt() * blom_score(draws);
    let value = if members <= 1.0 { jump } else { jump.max(normal) };
    value.clamp(sum_mean, (members * loads.max_of(u, v)).max(sum_mean))
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

    /// The estimate against drawing: the expected largest of `draws` sums of `members`
    /// sequences of FlexSP's Wikipedia sample packed into 128K-token sequences (causal
    /// attention), estimated by 20,000 seeded trials of drawing from the same sample. Single
    /// draws are exact; sums were within +1.2 % (4 x 4), -8.5 % (8 x 64: two large documents in
    /// one sum, which neither limit sees), -3.3 % (32 x 8) and -0.1 % (256 x 4) when written.
    #[test]
    fn the_expected_largest_sum_is_within_a_few_percent_of_drawing_it() {
        use crate::data::{AttentionWork, Data, sample_sequences, sequence_values};
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let data = Data::from_spec(&crate::presets::lengths("wikipedia").unwrap(), None).unwrap();
        let flops = |s: u64| (s * s) as f64;
        let work = AttentionWork::new(&flops, 131_072);
        let (values, ..) = sequence_values(&data, &work);
        let loads = sample_sequences(&data, &work);
        let moments = loads.moments_of(1.0, 0.0);
        let mut rng = StdRng::seed_from_u64(3);
        for (members, draws) in [(1u64, 1u64), (1, 4), (1, 16), (4, 4), (8, 64), (32, 8), (256, 4)]
        {
            let trials = 20_000;
            let mut total = 0.0;
            for _ in 0..trials {
                let largest = (0..draws)
                    .map(|_| {
                        (0..members)
                            .map(|_| values[rng.random_range(0..values.len())][0])
                            .sum::<f64>()
                    })
                    .fold(f64::NEG_INFINITY, f64::max);
                total += largest;
            }
            let drawn = total / trials as f64;
            let estimate = expected_largest(&loads, (1.0, 0.0), moments, members as f64, draws);
            let error = estimate / drawn - 1.0;
            assert!(error.abs() < 0.10, "{members} x {draws}: {estimate} vs drawn {drawn}");
        }
    }
}

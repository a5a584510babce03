//! What re-packing documents across global batches leaves of the imbalance (WLB-LLM's
//! variable-length packing, OSDI'25): the loader deals `K` global batches' document pieces onto
//! micro-batches by their estimated work (`crate::data::deal_windows`, dealt once per batch shape
//! and shared by a search's candidates), and each plan prices the micro-batches it was dealt:
//! their tokens at its linear time per token and their attention terms at its attention times.
//! Micro-batches then hold unequal token counts but nearly equal work, and what remains uneven
//! is what single documents allow.

use std::sync::{Arc, OnceLock};

use crate::data::{DealShape, DealtWindows};
use crate::run::Run;

/// A document piece's work, in seconds on the critical stage: `linear` per token, and `u a + v b`
/// of attention for its `(a, b)` relative to a full sequence.
#[derive(Debug, Clone, Copy)]
pub struct PieceWork {
    /// Seconds per token of everything but attention.
    pub linear_per_token: f64,
    /// Attention seconds per unit of a piece's FLOP ratio `a`.
    pub u: f64,
    /// Attention seconds per unit of a piece's per-token ramp term `b`.
    pub v: f64,
}

impl PieceWork {
    /// The seconds of `tokens` with attention terms `a` and `b` (a piece's, or the sums of a
    /// micro-batch's or a sequence's pieces).
    pub fn seconds(&self, [tokens, a, b]: [f64; 3]) -> f64 {
        self.linear_per_token * tokens + self.u * a + self.v * b
    }
}

/// The shape of the batches `run` re-packs: its micro-batches' tokens, and its micro-batches
/// of `balance_window` global batches.
pub(crate) fn deal_shape(run: &Run) -> DealShape {
    deal_shape_with_window(run, run.plan().balance_window())
}

/// The shape of the batches `run` would re-pack over `window` global batches.
fn deal_shape_with_window(run: &Run, window: u64) -> DealShape {
    let plan = run.plan();
    DealShape {
        tokens_per_microbatch: run.training().micro_batch() * run.training().seq_len(),
        microbatches_per_window: window
            .saturating_mul(plan.dp())
            .saturating_mul(plan.num_microbatches()),
    }
}

/// The most tokens that `held` consecutive micro-batches of one replica carry when `run`'s
/// documents are re-packed over `window` global batches, over `held` full micro-batches (`mbs x
/// seq_len` tokens each): what a pipeline stage holding `held` micro-batches at once stores
/// beyond the activations of packed ones. Re-packing balances work, not tokens: a micro-batch of
/// short documents carries more tokens than one holding a long document's quadratic attention,
/// and activation memory follows tokens. The largest over the dealt sample of micro-batches
/// (at most 2^8 of them), so a longer run can meet a larger one. 1 without data or re-packing,
/// and where micro-batches hold more pieces than are dealt (balanced).
pub fn repacked_token_peak(run: &Run, window: u64, held: u64) -> f64 {
    match repacked_token_peaks(run, window) {
        Some(peaks) => peak_of(peaks.get().map_or(&[][..], Vec::as_slice), held),
        None => 1.0,
    }
}

/// The peak of `held` micro-batches from a table of [`repacked_token_peaks`]: its last entry
/// for more micro-batches than a replica's dealt ones, 1 for an empty table.
pub fn peak_of(peaks: &[f64], held: u64) -> f64 {
    let index = (held.max(1) as usize).min(peaks.len());
    index.checked_sub(1).map_or(1.0, |i| peaks[i])
}

/// [`repacked_token_peak`] for every number of micro-batches held, from one up to a replica's
/// dealt micro-batches (entry `h - 1` for `h` held): worked out once per batch shape and
/// micro-batches per replica for every run of the data. `None` without data or re-packing, or
/// where micro-batches hold more pieces than are dealt.
pub fn repacked_token_peaks(run: &Run, window: u64) -> Option<Arc<OnceLock<Vec<f64>>>> {
    let data = run.data()?;
    if window == 0 {
        return None;
    }
    let shape = deal_shape_with_window(run, window);
    let slot = data.dealt(run.model(), shape);
    slot.get()?.as_ref()?;
    let microbatches = run.plan().num_microbatches();
    Some(data.token_peaks(shape, microbatches, || {
        let Some(Some(dealt)) = slot.get() else { return Vec::new() };
        token_peaks(dealt, microbatches, shape.tokens_per_microbatch)
    }))
}

/// For each number `h` of consecutive micro-batches of one replica (`m` of the dealt ones, as
/// [`repacked_spread`] groups them), the most tokens `h` of them carry over `h` full ones of
/// `full` tokens, at least 1.
fn token_peaks(dealt: &DealtWindows, m: u64, full: u64) -> Vec<f64> {
    let m = (m as usize).clamp(1, dealt.bins.max(1));
    let mut most = vec![0.0f64; m];
    let mut sums = Vec::with_capacity(m + 1);
    for window in dealt.loads.chunks(dealt.bins.max(1)) {
        for replica in window.chunks(m) {
            // Prefix sums of the replica's tokens: h consecutive from i carry sums[i + h] - sums[i].
            sums.clear();
            sums.push(0.0);
            for load in replica {
                sums.push(sums[sums.len() - 1] + load[0]);
            }
            let n = replica.len();
            for (h, most) in most.iter_mut().enumerate().map(|(i, most)| (i + 1, most)) {
                // A replica shorter than h holds all its micro-batches at once.
                let best = if h >= n {
                    sums[n]
                } else {
                    (0..=n - h).map(|i| sums[i + h] - sums[i]).fold(0.0, f64::max)
                };
                *most = most.max(best);
            }
        }
    }
    most.iter().zip(1..).map(|(&most, h)| (most / (h as u64 * full) as f64).max(1.0)).collect()
}

/// What re-packing leaves: the slowest replica's work over the mean replica's and a replica's
/// largest micro-batch's over the mean micro-batch's, both in seconds above the mean, averaged
/// over the dealt windows; `None` without data.
pub fn repacked_spread(run: &Run, work: PieceWork) -> Option<(f64, f64)> {
    let data = run.data()?;
    let plan = run.plan();
    let (m, dp) = (plan.num_microbatches(), plan.dp());
    if m.saturating_mul(dp) <= 1 {
        // One micro-batch a step: nothing for it to be uneven against, whatever was dealt.
        return Some((0.0, 0.0));
    }
    let shape = deal_shape(run);
    let slot = data.dealt(run.model(), shape);
    let Some(Some(dealt)) = slot.get() else {
        // More pieces in a micro-batch than are dealt at once: balanced.
        return Some((0.0, 0.0));
    };
    let bits = [work.linear_per_token.to_bits(), work.u.to_bits(), work.v.to_bits()];
    data.spread((shape, m, dp, bits), || {
        let (mut slowest, mut largest, mut windows) = (0.0, 0.0, 0usize);
        for window in dealt.loads.chunks(dealt.bins.max(1)) {
            let (window_slowest, window_largest) = spread(window, work, m as usize, dp as usize);
            slowest += window_slowest;
            largest += window_largest;
            windows += 1;
        }
        let windows = windows.max(1) as f64;
        (slowest / windows, largest / windows)
    })
}

/// The slowest replica's work and a replica's largest micro-batch's above their means, for the
/// micro-batches of one window (their sums, priced by `work`) in order: consecutive
/// micro-batches make a replica's `m`, consecutive replicas a step's `dp`. One pass: every
/// window of every plan of a search is priced here.
fn spread(window: &[[f64; 3]], work: PieceWork, m: usize, dp: usize) -> (f64, f64) {
    let bins = window.len().max(1);
    let m = m.clamp(1, bins);
    let dp = dp.clamp(1, bins.div_ceil(m));
    // Per replica its largest micro-batch and its sum; per step (dp replicas) the largest sum.
    let mut total = 0.0;
    let (mut largest, mut replicas) = (0.0, 0usize);
    let (mut slowest, mut steps) = (0.0, 0usize);
    let mut step_max = f64::NEG_INFINITY;
    // Replicas left in the current step.
    let mut left_in_step = dp;
    for replica in window.chunks(m) {
        let (mut most, mut sum) = (f64::NEG_INFINITY, 0.0);
        for &sums in replica {
            let load = work.seconds(sums);
            total += load;
            // Loads are finite: a plain comparison, without `f64::max`'s care for NaN.
            if load > most {
                most = load;
            }
            sum += load;
        }
        largest += most;
        replicas += 1;
        if sum > step_max {
            step_max = sum;
        }
        left_in_step -= 1;
        if left_in_step == 0 {
            slowest += step_max;
            steps += 1;
            step_max = f64::NEG_INFINITY;
            left_in_step = dp;
        }
    }
    if step_max > f64::NEG_INFINITY {
        slowest += step_max;
        steps += 1;
    }
    let mean = total / bins as f64;
    let largest = largest / replicas.max(1) as f64;
    let slowest = slowest / steps.max(1) as f64;
    ((slowest - mean * m as f64).max(0.0), (largest - mean).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{DataSpec, LengthBinSpec};
    use crate::plan::PlanSpec;
    use crate::run::{RunSpec, test_spec};

    #[test]
    fn a_spread_is_kept_for_its_shape_and_piece_work_and_is_what_pricing_the_windows_gives() {
        // Llama 3.1 8B on 32 GPUs, tp 4, dp 8, 8 micro-batches of 32K a replica, a long-tailed
        // mix re-packed over 2 global batches.
        let bin = |min, max, count| LengthBinSpec { min, max, count };
        let data = DataSpec {
            histogram: Some(vec![
                bin(256, 2048, 900),
                bin(8192, 32_768, 60),
                bin(32_768, 65_536, 10),
            ]),
            ..DataSpec::default()
        };
        let plan = PlanSpec { tp: Some(4), balance_window: Some(2), ..PlanSpec::default() };
        let spec = test_spec("llama3.1-8b", 32, 32_768, 64, 1, plan);
        let run = Run::from_spec(&RunSpec { data: Some(data), ..spec }).unwrap();
        let work = PieceWork { linear_per_token: 1e-6, u: 0.05, v: 0.01 };
        let heavier = PieceWork { u: 0.5, ..work };
        let first = repacked_spread(&run, work).unwrap();
        // Another piece work is its own entry: attention that weighs more spreads more.
        let other = repacked_spread(&run, heavier).unwrap();
        assert!(other.1 > first.1, "{other:?} vs {first:?}");
        assert_eq!(repacked_spread(&run, work), Some(first));
        // The kept value is the windows' mean spread.
        let (m, dp) = (run.plan().num_microbatches() as usize, run.plan().dp() as usize);
        let slot = run.data().unwrap().dealt(run.model(), deal_shape(&run));
        let dealt = slot.get().unwrap().as_ref().unwrap();
        let windows: Vec<(f64, f64)> =
            dealt.loads.chunks(dealt.bins).map(|w| spread(w, work, m, dp)).collect();
        let count = windows.len() as f64;
        let mean = windows.iter().fold((0.0, 0.0), |sum, w| (sum.0 + w.0, sum.1 + w.1));
        assert_eq!(first, (mean.0 / count, mean.1 / count));
        assert!(first.1 > 0.0);
    }

    #[test]
    fn the_spread_is_the_slowest_step_and_the_largest_micro_batch_over_their_means() {
        // Seconds = tokens: loads 1, 5, 2, 4, 3, 3, 6, 0 (mean 3); m = 2, dp = 2.
        let work = PieceWork { linear_per_token: 1.0, u: 0.0, v: 0.0 };
        let window: Vec<[f64; 3]> =
            [1.0, 5.0, 2.0, 4.0, 3.0, 3.0, 6.0, 0.0].iter().map(|&t| [t, 9.0, 9.0]).collect();
        // Replicas (1, 5), (2, 4), (3, 3), (6, 0): sums 6, 6, 6, 6; largest 5, 4, 3, 6.
        let (slowest, largest) = spread(&window, work, 2, 2);
        assert_eq!(slowest, 0.0);
        assert_eq!(largest, (5.0 + 4.0 + 3.0 + 6.0) / 4.0 - 3.0);
        // Replicas of 4: sums 12 and 12, largest 5 and 6; one replica a step.
        assert_eq!(spread(&window, work, 4, 1), (0.0, 5.5 - 3.0));
        // Attention terms count through u and v: the first micro-batch doubles.
        let attention = PieceWork { linear_per_token: 1.0, u: 1.0 / 9.0, v: 0.0 };
        let (slowest, largest) = spread(&window[..2], attention, 1, 2);
        // Loads 2 and 6 (mean 4), one step of two replicas of one micro-batch.
        assert_eq!((slowest, largest), (2.0, 0.0));
    }
}

//! What re-packing documents across global batches leaves of the imbalance (WLB-LLM's
//! variable-length packing, OSDI'25): the loader deals `K` global batches' document pieces onto
//! micro-batches by their estimated work (`crate::data::deal_windows`, dealt once per batch shape
//! and shared by a search's candidates), and each plan prices the micro-batches it was dealt:
//! their tokens at its linear time per token and their attention terms at its attention times.
//! Micro-batches then hold unequal token counts but nearly equal work, and what remains uneven
//! is what single documents allow.

use crate::data::DealShape;
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
    let Some(data) = run.data() else { return 1.0 };
    if window == 0 {
        return 1.0;
    }
    let shape = deal_shape_with_window(run, window);
    let slot = data.dealt(run.model(), shape);
    let Some(Some(dealt)) = slot.get() else { return 1.0 };
    let m = (run.plan().num_microbatches() as usize).clamp(1, dealt.bins.max(1));
    let held = (held as usize).clamp(1, m);
    let mut most = 0.0f64;
    for window in dealt.loads.chunks(dealt.bins.max(1)) {
        for replica in window.chunks(m) {
            let mut sum: f64 = replica.iter().take(held).map(|load| load[0]).sum();
            most = most.max(sum);
            for (entering, leaving) in replica.iter().skip(held).zip(replica) {
                sum += entering[0] - leaving[0];
                most = most.max(sum);
            }
        }
    }
    let full = (held as u64 * shape.tokens_per_microbatch) as f64;
    (most / full).max(1.0)
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
    let slot = data.dealt(run.model(), deal_shape(run));
    let Some(Some(dealt)) = slot.get() else {
        // More pieces in a micro-batch than are dealt at once: balanced.
        return Some((0.0, 0.0));
    };
    let mut loads = vec![0.0; dealt.bins];
    let (mut slowest, mut largest, mut windows) = (0.0, 0.0, 0usize);
    for window in dealt.loads.chunks(dealt.bins.max(1)) {
        for (load, &sums) in loads.iter_mut().zip(window) {
            *load = work.seconds(sums);
        }
        let (window_slowest, window_largest) = spread(&loads, m as usize, dp as usize);
        slowest += window_slowest;
        largest += window_largest;
        windows += 1;
    }
    let windows = windows.max(1) as f64;
    Some((slowest / windows, largest / windows))
}

/// The slowest replica's work and a replica's largest micro-batch's above their means, for
/// micro-batch `loads` in order: consecutive micro-batches make a replica's `m`, consecutive
/// replicas a step's `dp`.
fn spread(loads: &[f64], m: usize, dp: usize) -> (f64, f64) {
    let bins = loads.len().max(1);
    let mean = loads.iter().sum::<f64>() / bins as f64;
    let m = m.clamp(1, bins);
    let dp = dp.clamp(1, bins.div_ceil(m));
    // Per replica its largest micro-batch and its sum; per step (dp replicas) the largest sum.
    let (mut largest, mut replicas) = (0.0, 0usize);
    let (mut slowest, mut steps) = (0.0, 0usize);
    let mut step_max = f64::NEG_INFINITY;
    for (index, replica) in loads.chunks(m).enumerate() {
        largest += replica.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        replicas += 1;
        step_max = step_max.max(replica.iter().sum::<f64>());
        if (index + 1) % dp == 0 {
            slowest += step_max;
            steps += 1;
            step_max = f64::NEG_INFINITY;
        }
    }
    if step_max > f64::NEG_INFINITY {
        slowest += step_max;
        steps += 1;
    }
    let largest = largest / replicas.max(1) as f64;
    let slowest = slowest / steps.max(1) as f64;
    ((slowest - mean * m as f64).max(0.0), (largest - mean).max(0.0))
}

//! Re-packing documents across global batches (WLB-LLM's variable-length packing, OSDI'25): the
//! documents of `K` global batches are cut at the sequence length and dealt, longest work first,
//! each to the micro-batch with the least work so far (longest-processing-time-first greedy).
//! Micro-batches then hold unequal token counts but nearly equal work, and what remains uneven
//! is what single documents allow. The window is drawn from the data's distribution with its
//! seed and dealt for each plan, since a document's work depends on the plan's split of linear
//! and attention time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::data::AttentionWork;
use crate::run::Run;

/// Document pieces dealt for one plan at most (2^18, a few milliseconds): a window wider than
/// that is dealt as its first part, which balances no better than the whole, and a window of
/// more pieces in one micro-batch than that is taken as balanced (hundreds of thousands of
/// documents per micro-batch leave no spread worth a figure).
const DEALT_PIECES: u64 = 1 << 18;

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

/// What re-packing leaves: the slowest replica's work over the mean replica's and a replica's
/// largest micro-batch's over the mean micro-batch's, both in seconds above the mean.
pub fn repacked_spread(run: &Run, work: PieceWork) -> Option<(f64, f64)> {
    let data = &run.data()?.data;
    let plan = run.plan();
    let seq = run.training().seq_len();
    let per_bin = run.training().micro_batch() * seq;
    let (m, dp) = (plan.num_microbatches(), plan.dp());
    let wanted = plan.balance_window().saturating_mul(dp).saturating_mul(m);
    // Pieces a micro-batch holds, on average: its tokens over the mean piece.
    let mean_piece = data.distribution().mean_length().clamp(1.0, seq as f64);
    let pieces_per_bin = (per_bin as f64 / mean_piece).ceil() as u64 + 1;
    if pieces_per_bin > DEALT_PIECES {
        return Some((0.0, 0.0));
    }
    let bins = wanted.min(DEALT_PIECES / pieces_per_bin).max(1) as usize;
    let model = run.model();
    let flops = |tokens: u64| model.document_attention_flops(tokens);
    let attention = AttentionWork::new(&flops, seq);
    // Windows are dealt until about DEALT_PIECES pieces are: the spread is their mean.
    let windows = (DEALT_PIECES / (bins as u64 * pieces_per_bin)).max(1);
    let mut rng = StdRng::seed_from_u64(data.seed());
    let piece_work = |piece: u64| {
        let [a, b] = attention.piece(piece).unwrap_or([0.0; 2]);
        work.linear_per_token * piece as f64 + work.u * a + work.v * b
    };
    let (mut slowest, mut largest) = (0.0, 0.0);
    for _ in 0..windows {
        // The window's documents, cut at the sequence length, as pieces of work.
        let mut left = bins as u64 * per_bin;
        let mut pieces: Vec<f64> = Vec::new();
        while left > 0 {
            let mut length = data.distribution().draw(&mut rng).min(left);
            left -= length;
            while length > 0 {
                let piece = length.min(seq);
                length -= piece;
                pieces.push(piece_work(piece));
            }
        }
        let (window_slowest, window_largest) = deal(pieces, bins, m as usize, dp as usize);
        slowest += window_slowest;
        largest += window_largest;
    }
    Some((slowest / windows as f64, largest / windows as f64))
}

/// Deals `pieces` of work, largest first, each onto the least loaded of `bins` micro-batches;
/// consecutive micro-batches make a replica's `m`, consecutive replicas a step's `dp`. Returns
/// the slowest replica's work and a replica's largest micro-batch's above their means.
fn deal(mut pieces: Vec<f64>, bins: usize, m: usize, dp: usize) -> (f64, f64) {
    pieces.sort_by(|x, y| y.total_cmp(x));
    // Loads are non-negative, so their bits order them.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
        (0..bins).map(|bin| Reverse((0f64.to_bits(), bin))).collect();
    let mut loads = vec![0.0; bins];
    for piece in pieces {
        if let Some(Reverse((_, bin))) = heap.pop() {
            loads[bin] += piece;
            heap.push(Reverse((loads[bin].to_bits(), bin)));
        }
    }
    let mean = loads.iter().sum::<f64>() / bins as f64;
    let m = m.clamp(1, bins);
    let replicas: Vec<&[f64]> = loads.chunks(m).collect();
    let largest = replicas
        .iter()
        .map(|bins| bins.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .sum::<f64>()
        / replicas.len() as f64;
    let sums: Vec<f64> = replicas.iter().map(|bins| bins.iter().sum::<f64>()).collect();
    let steps: Vec<&[f64]> = sums.chunks(dp.clamp(1, sums.len())).collect();
    let slowest = steps
        .iter()
        .map(|step| step.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .sum::<f64>()
        / steps.len() as f64;
    ((slowest - mean * m as f64).max(0.0), (largest - mean).max(0.0))
}

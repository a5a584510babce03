//! Re-packing documents across global batches as a balancing data loader does it (WLB-LLM's
//! variable-length packing, OSDI'25; Megatron-Core's balanced packing scheduler): the documents
//! of `window` global batches are cut at the sequence length and dealt, the heaviest first, each
//! to the micro-batch with the least work so far (longest-processing-time-first greedy). The
//! loader weighs a piece by an estimate of its work that knows the model, not the plan: its
//! training FLOPs, linear in its tokens plus its attention's square. Each micro-batch's pieces are
//! kept as sums of tokens and attention terms `(a, b)`, which any plan prices
//! (`crate::cost::repacking`).
//!
//! A dealing depends on the data, the model and the batch's shape only, so the runs of a search
//! share it through [`DealCache`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::shape_cache::ShapeCache;
use super::window_pieces::{Piece, WindowPieces};
use super::{AttentionWork, Data, heap_entry, heap_key};

/// Document pieces dealt for one batch shape at most (2^18, a few milliseconds): a window wider
/// than that is dealt as its first part, which balances no better than the whole, and a window
/// of more pieces in one micro-batch than that is taken as balanced (hundreds of thousands of
/// documents per micro-batch leave no spread worth a figure).
const DEALT_PIECES: u64 = 1 << 18;
/// Micro-batches kept over all windows at most, when a window holds fewer (2^8: every plan of a
/// search prices the windows of its batch shape, in microseconds).
const KEPT_BINS: u64 = 1 << 8;
/// Micro-batches a dealing looks through one by one for the least loaded at most (up to 8, a
/// scan costs less than a heap's sift); more are kept in a heap.
const SCANNED_BINS: usize = 8;

/// The shape of the batches a dealing fills. A dealing spreads a window's pieces over all its
/// micro-batches at once, so how they are grouped into replicas and steps is the pricing's
/// business: plans of different data-parallel degrees but the same micro-batches per window
/// share one dealing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DealShape {
    /// Tokens a micro-batch holds (micro-batch size x sequence length).
    pub tokens_per_microbatch: u64,
    /// Micro-batches of a window: global batches dealt together x replicas x micro-batches per
    /// replica and step.
    pub microbatches_per_window: u64,
}

/// The micro-batches of the dealt windows, each as the sums of its pieces' tokens and attention
/// terms `[tokens, a, b]`: window after window, micro-batches in order (a plan reads a replica's
/// micro-batches as consecutive ones, a step's replicas as consecutive replicas).
#[derive(Debug, Clone, PartialEq)]
pub struct DealtWindows {
    /// Micro-batches per window.
    pub bins: usize,
    /// Every window's micro-batches.
    pub loads: Vec<[f64; 3]>,
}

/// Deals windows of `shape` from `data`, each piece weighed `weight[0]` per token plus
/// `weight[1]` per unit of its attention FLOP ratio `a`, the windows' pieces taken from (and
/// drawn into) `pieces`. `None` when a micro-batch holds more pieces than are dealt at once
/// (balanced, for any figure that matters).
pub fn deal_windows(
    data: &Data,
    work: &AttentionWork<'_>,
    weight: [f64; 2],
    shape: DealShape,
    pieces: &WindowPieces,
) -> Option<DealtWindows> {
    let seq = work.seq_len();
    let per_bin = shape.tokens_per_microbatch;
    let wanted = shape.microbatches_per_window;
    // Pieces a micro-batch holds, on average: its tokens over the mean piece.
    let mean_piece = data.distribution().mean_length().clamp(1.0, seq as f64);
    let pieces_per_bin = (per_bin as f64 / mean_piece).ceil() as u64 + 1;
    if pieces_per_bin > DEALT_PIECES {
        return None;
    }
    let bins = wanted.min(DEALT_PIECES / pieces_per_bin).max(1);
    // Windows are dealt until about DEALT_PIECES pieces are, or KEPT_BINS micro-batches kept.
    let windows = (DEALT_PIECES / (bins * pieces_per_bin)).min(KEPT_BINS / bins).max(1);
    let drawn = pieces.windows(data, work, weight, bins * per_bin, windows as usize);
    let mut loads = Vec::with_capacity((bins * windows) as usize);
    for window in &drawn {
        deal(window, bins as usize, &mut loads);
    }
    Some(DealtWindows { bins: bins as usize, loads })
}

/// Deals `pieces`, heaviest first, each onto the least loaded of `bins` micro-batches (ties to
/// the first), and appends the micro-batches' sums to `out`.
fn deal(pieces: &[Piece], bins: usize, out: &mut Vec<[f64; 3]>) {
    let start = out.len();
    out.resize(start + bins, [0.0; 3]);
    let loads = &mut out[start..];
    let mut weights = vec![0.0f64; bins];
    if bins <= SCANNED_BINS {
        // A few micro-batches: each is looked at.
        for piece in pieces {
            let bin = (0..bins)
                .fold(0, |best, bin| if weights[bin] < weights[best] { bin } else { best });
            take(&mut weights, loads, bin, piece);
        }
        return;
    }
    // More: a heap by weight (weights are non-negative, so their bits order them). The least
    // loaded micro-batch takes the piece and sinks to its new place.
    let mut heap: BinaryHeap<Reverse<u128>> =
        (0..bins).map(|bin| Reverse(heap_key(0.0, bin))).collect();
    for piece in pieces {
        if let Some(mut least) = heap.peek_mut() {
            let (_, bin) = heap_entry(least.0);
            *least = Reverse(heap_key(take(&mut weights, loads, bin, piece), bin));
        }
    }
}

/// Puts `piece` on micro-batch `bin`, returning the micro-batch's new weight.
fn take(weights: &mut [f64], loads: &mut [[f64; 3]], bin: usize, (weight, sums): &Piece) -> f64 {
    weights[bin] += weight;
    for (total, value) in loads[bin].iter_mut().zip(sums) {
        *total += value;
    }
    weights[bin]
}

/// The dealings of one run's data by batch shape, made once and shared by every run (every
/// candidate of a search) that prices the same data and model.
pub type DealCache = ShapeCache<DealShape, Option<DealtWindows>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::histogram_data as data;

    #[test]
    fn greedy_dealing_puts_each_piece_on_the_least_loaded_micro_batch() {
        // 5, 4, 3, 3 onto two bins: 5 | 4, then 3 onto 4 (7), then 3 onto 5 (8).
        let pieces: Vec<Piece> = [5.0, 4.0, 3.0, 3.0].iter().map(|&w| (w, [w, 0.0, 0.0])).collect();
        let mut out = Vec::new();
        deal(&pieces, 2, &mut out);
        assert_eq!(out, [[8.0, 0.0, 0.0], [7.0, 0.0, 0.0]]);
    }

    #[test]
    fn dealing_by_scan_and_by_heap_pick_the_same_micro_batches() {
        // Each piece onto the first least loaded bin, found the slow way, for bin counts on both
        // sides of SCANNED_BINS.
        let weights: Vec<f64> = (0..200u64).map(|i| ((i * 7919) % 97) as f64).collect();
        let mut pieces: Vec<Piece> = weights.iter().map(|&w| (w, [w, 1.0, w * w])).collect();
        pieces.sort_by(|a, b| b.0.total_cmp(&a.0));
        for bins in 1..=3 * SCANNED_BINS {
            let mut expected = vec![[0.0; 3]; bins];
            let mut totals = vec![0.0f64; bins];
            for (weight, sums) in &pieces {
                let least = totals.iter().copied().fold(f64::INFINITY, f64::min);
                let bin = totals.iter().position(|&t| t == least).unwrap();
                totals[bin] += weight;
                for (total, value) in expected[bin].iter_mut().zip(sums) {
                    *total += value;
                }
            }
            let mut out = Vec::new();
            deal(&pieces, bins, &mut out);
            assert_eq!(out, expected, "{bins} bins");
        }
    }

    #[test]
    fn every_token_of_a_window_is_dealt_once() {
        let data = data(&[(512, 4096, 900), (32768, 131072, 60)]);
        let flops = |tokens: u64| (tokens * tokens) as f64;
        let work = AttentionWork::new(&flops, 131072);
        let shape = DealShape { tokens_per_microbatch: 131072, microbatches_per_window: 24 };
        let dealt =
            deal_windows(&data, &work, [1.0, 1e5], shape, &WindowPieces::default()).unwrap();
        assert_eq!(dealt.bins, 24);
        assert_eq!(dealt.loads.len() % dealt.bins, 0);
        for window in dealt.loads.chunks(dealt.bins) {
            let tokens: f64 = window.iter().map(|load| load[0]).sum();
            assert_eq!(tokens, 24.0 * 131072.0);
        }
        // The same data, model and shape deal the same windows, and a dealing of the same
        // window size dealt first (32 micro-batches of 3 sequences) changes none of them.
        assert_eq!(
            deal_windows(&data, &work, [1.0, 1e5], shape, &WindowPieces::default()),
            Some(dealt.clone())
        );
        let shared = WindowPieces::default();
        let wider = DealShape { tokens_per_microbatch: 3 * 131072, microbatches_per_window: 8 };
        assert!(deal_windows(&data, &work, [1.0, 1e5], wider, &shared).is_some());
        assert_eq!(deal_windows(&data, &work, [1.0, 1e5], shape, &shared), Some(dealt));
    }
}

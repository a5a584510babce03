//! Documents placed on hybrid context-parallel groups as Megatron-LM's released scheduler places
//! them (`--hybrid-context-parallel`, core_v0.16 to v0.19, `BalancedCPScheduler`): the documents
//! of a global batch, cut at the sequence length, longest first, each on the aligned
//! power-of-two block of the `dp x cp` ranks of its group size whose busiest member is least
//! loaded, by the scheduler's own estimate of a document's work on a rank, `L^2 / g`. The
//! scheduler forms waves with a barrier between them; the placement here balances the whole
//! batch at once, so it is the best case of that scheduler. What each rank then spends is the
//! plan's to price (`crate::cost::hybrid_cp`).
//!
//! A placement depends on the data, the model and the batch's shape only, so the runs of a
//! search share it through [`PlacementCache`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::shape_cache::ShapeCache;
use super::{AttentionWork, Data, heap_entry, heap_key};

/// Document pieces placed for one batch shape at most (2^12): as many global batches as hold
/// about that many, from one to [`PLACED_BATCHES`].
const PLACED_PIECES: u64 = 1 << 12;
/// Global batches placed at most.
const PLACED_BATCHES: u64 = 64;

/// The batches a placement fills and the groups it places on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupShape {
    /// Ranks of the pool (`dp x cp`), a power of two.
    pub ranks: u64,
    /// The most tokens of one document a rank holds.
    pub max_tokens_per_rank: u64,
    /// Tokens of a global batch (global batch x sequence length).
    pub tokens_per_batch: u64,
    /// Weigh a piece by its training FLOPs (ByteScale) rather than its length squared
    /// (Megatron-LM's released scheduler).
    pub by_work: bool,
}

impl GroupShape {
    /// The group a piece of `tokens` runs on: the smallest power of two of ranks holding it, at
    /// most the pool (the rule of `crate::plan::HybridCp::group_size`).
    pub fn group(&self, tokens: u64) -> u64 {
        let needed = tokens.div_ceil(self.max_tokens_per_rank.max(1)).max(1);
        needed.checked_next_power_of_two().unwrap_or(u64::MAX).min(self.ranks.max(1))
    }
}

/// One document piece on its group: ranks `first_rank .. first_rank + group` each run
/// `1 / group` of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlacedDocument {
    /// The group's first rank.
    pub first_rank: u32,
    /// Ranks in the group.
    pub group: u32,
    /// The piece's tokens.
    pub tokens: f64,
    /// Its attention FLOP ratio and ramp term, relative to a full sequence
    /// ([`AttentionWork::piece`]).
    pub attention: [f64; 2],
}

/// The placed global batches: their pieces, batch after batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlacedBatches {
    /// Ranks of the pool.
    pub ranks: usize,
    /// Every batch's pieces.
    pub documents: Vec<PlacedDocument>,
    /// Where each batch's pieces end in `documents`.
    pub batch_ends: Vec<usize>,
}

impl PlacedBatches {
    /// Each placed batch's pieces.
    pub fn batches(&self) -> impl Iterator<Item = &[PlacedDocument]> {
        let starts = std::iter::once(0).chain(self.batch_ends.iter().copied());
        starts.zip(self.batch_ends.iter().copied()).map(|(start, end)| &self.documents[start..end])
    }
}

/// The placements of one run's data by batch shape.
pub type PlacementCache = ShapeCache<GroupShape, PlacedBatches>;

/// Global batches of document pieces, each batch's longest first, as a loader hands them to its
/// scheduler: drawn once per run and placed for each batch shape.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DrawnBatches {
    /// Every batch's pieces: tokens and attention terms `[a, b]`.
    pieces: Vec<(u64, [f64; 2])>,
    /// Where each batch's pieces end.
    batch_ends: Vec<usize>,
}

/// The drawn batches of one run's data by tokens per global batch.
pub type DrawCache = ShapeCache<u64, DrawnBatches>;

/// Draws global batches of `tokens_per_batch` tokens from `data`, documents cut at `work`'s
/// sequence length: as many batches as hold about [`PLACED_PIECES`] pieces, one to
/// [`PLACED_BATCHES`].
pub fn draw_batches(data: &Data, work: &AttentionWork<'_>, tokens_per_batch: u64) -> DrawnBatches {
    let seq = work.seq_len().max(1);
    let mean_piece = data.distribution().mean_length().clamp(1.0, seq as f64);
    let pieces_per_batch = (tokens_per_batch as f64 / mean_piece).ceil().max(1.0);
    let batches = ((PLACED_PIECES as f64 / pieces_per_batch) as u64).clamp(1, PLACED_BATCHES);
    let mut rng = StdRng::seed_from_u64(data.seed());
    let mut drawn = DrawnBatches::default();
    for _ in 0..batches {
        let start = drawn.pieces.len();
        let mut left = tokens_per_batch;
        while left > 0 {
            let mut length = data.distribution().draw(&mut rng).clamp(1, left);
            left -= length;
            while length > 0 {
                let piece = length.min(seq);
                length -= piece;
                drawn.pieces.push((piece, work.piece(piece).unwrap_or([0.0; 2])));
            }
        }
        drawn.pieces[start..].sort_by_key(|piece| Reverse(piece.0));
        drawn.batch_ends.push(drawn.pieces.len());
    }
    drawn
}

/// Places the `drawn` batches on the groups of `shape`. By work, a piece weighs `flops[0]` per
/// token plus `flops[1]` per unit of its attention FLOP ratio, over its group size.
pub fn place_documents(drawn: &DrawnBatches, flops: [f64; 2], shape: GroupShape) -> PlacedBatches {
    let ranks = shape.ranks.clamp(1, u64::from(u32::MAX)) as usize;
    let mut placed = PlacedBatches { ranks, ..PlacedBatches::default() };
    let mut start = 0;
    for &end in &drawn.batch_ends {
        place_batch(&drawn.pieces[start..end], shape, flops, &mut placed.documents);
        placed.batch_ends.push(placed.documents.len());
        start = end;
    }
    placed
}

/// Places one batch's `pieces` (longest first): each on the aligned block of its group size whose
/// busiest member carries the least estimated work (ties to the first block), adding the
/// piece's weight over its group size to every member. Groups shrink with length, so the pieces
/// that need one rank come last and are placed from a heap of the ranks' loads.
fn place_batch(
    pieces: &[(u64, [f64; 2])],
    shape: GroupShape,
    flops: [f64; 2],
    out: &mut Vec<PlacedDocument>,
) {
    let ranks = shape.ranks.max(1) as usize;
    let mut loads = vec![0.0f64; ranks];
    // The blocks of the current group size by their busiest member's load (non-negative, so its
    // bits order it), ties to the first block. Blocks of one size are disjoint, so placing a
    // piece moves its own block only; pieces come longest first, so sizes only shrink, and the
    // heap is rebuilt from the ranks' loads when they do.
    let mut heap: BinaryHeap<Reverse<u128>> = BinaryHeap::new();
    let mut heap_group = 0;
    for &(piece, attention) in pieces {
        let group = (shape.group(piece) as usize).clamp(1, ranks);
        if group != heap_group {
            heap = (0..ranks / group)
                .map(|block| {
                    let members = &loads[block * group..(block + 1) * group];
                    Reverse(heap_key(members.iter().copied().fold(0.0, f64::max), block))
                })
                .collect();
            heap_group = group;
        }
        let weight = if shape.by_work {
            flops[0] * piece as f64 + flops[1] * attention[0]
        } else {
            (piece as f64).powi(2)
        } / group as f64;
        let Some(mut least) = heap.peek_mut() else { break };
        let (busiest, block) = heap_entry(least.0);
        for load in &mut loads[block * group..(block + 1) * group] {
            *load += weight;
        }
        // Every member gained the same weight: the busiest is still the busiest, and the block
        // sinks to its new place in the heap.
        *least = Reverse(heap_key(busiest + weight, block));
        out.push(PlacedDocument {
            first_rank: (block * group) as u32,
            group: group as u32,
            tokens: piece as f64,
            attention,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::histogram_data as data;

    #[test]
    fn every_token_of_a_batch_is_placed_once_on_an_aligned_group_that_holds_it() {
        let data = data(&[(512, 4096, 900), (32768, 131072, 60), (131072, 262144, 10)]);
        let flops = |tokens: u64| (tokens * tokens) as f64;
        let work = AttentionWork::new(&flops, 131072);
        let shape = GroupShape {
            ranks: 16,
            max_tokens_per_rank: 65536,
            tokens_per_batch: 4 * 131072,
            by_work: false,
        };
        let drawn = draw_batches(&data, &work, shape.tokens_per_batch);
        let placed = place_documents(&drawn, [1.0, 0.0], shape);
        assert!(!placed.batch_ends.is_empty());
        for batch in placed.batches() {
            let tokens: f64 = batch.iter().map(|d| d.tokens).sum();
            assert_eq!(tokens, 4.0 * 131072.0);
            for document in batch {
                let group = u64::from(document.group);
                assert_eq!(group, shape.group(document.tokens as u64));
                assert!(document.tokens <= (group * 65536) as f64);
                assert_eq!(document.first_rank % document.group, 0);
                assert!(document.first_rank + document.group <= 16);
            }
        }
        // The same data, model and shape place the same batches.
        assert_eq!(
            place_documents(&draw_batches(&data, &work, 4 * 131072), [1.0, 0.0], shape),
            placed
        );
    }

    #[test]
    fn short_documents_fill_the_ranks_evenly() {
        // 64 documents of 1,024 tokens on 4 ranks: 16 each.
        let pieces = vec![(1024u64, [0.0; 2]); 64];
        let shape = GroupShape {
            ranks: 4,
            max_tokens_per_rank: 4096,
            tokens_per_batch: 65536,
            by_work: false,
        };
        let mut out = Vec::new();
        place_batch(&pieces, shape, [1.0, 0.0], &mut out);
        let mut per_rank = [0usize; 4];
        for document in &out {
            per_rank[document.first_rank as usize] += 1;
        }
        assert_eq!(per_rank, [16; 4]);
    }
}

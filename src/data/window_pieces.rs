//! The document pieces of a balancing loader's windows, drawn once per window size and shared by
//! every dealing of that size.
//!
//! A window of `t` tokens is filled by drawing documents from the data's seeded generator until
//! `t` tokens are drawn (the last one cut to fit), each then cut at the sequence length; windows
//! follow one another in one stream. Two dealings whose windows hold the same tokens (one of 8
//! micro-batches of 2 sequences, one of 16 of 1) draw the same stream and cut it at the same
//! places: they differ only in the micro-batches they deal each window to. So the pieces, weighed
//! and sorted heaviest first, are made once per window size and extended as dealings ask for more
//! windows, and a dealing costs its greedy placement only.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{AttentionWork, Data};

/// Pieces reserved for one window at most before drawing it (2^20; a window of more grows).
const MOST_PIECES_RESERVED: f64 = (1u64 << 20) as f64;

/// One piece of a window: its weight for the loader, and its tokens and attention terms
/// `[tokens, a, b]`.
pub type Piece = (f64, [f64; 3]);

/// The windows of one size drawn so far, and the generator that draws the next.
#[derive(Debug)]
struct Stream {
    rng: StdRng,
    windows: Vec<Arc<[Piece]>>,
}

/// Windows of pieces by tokens per window, for one run's data and model. A clone starts empty
/// and any two compare equal, since what it holds follows from the data alone.
#[derive(Debug, Default)]
pub struct WindowPieces {
    streams: Mutex<BTreeMap<u64, Arc<Mutex<Stream>>>>,
}

impl WindowPieces {
    /// The first `count` windows of `tokens` tokens each, every window's pieces heaviest first,
    /// each piece weighed `weight[0]` per token plus `weight[1]` per unit of its attention FLOP
    /// ratio `a`. The same arguments give the same windows whatever was asked before.
    pub fn windows(
        &self,
        data: &Data,
        work: &AttentionWork<'_>,
        weight: [f64; 2],
        tokens: u64,
        count: usize,
    ) -> Vec<Arc<[Piece]>> {
        let stream = {
            let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
            let stream = streams.entry(tokens).or_insert_with(|| {
                let rng = StdRng::seed_from_u64(data.seed());
                Arc::new(Mutex::new(Stream { rng, windows: Vec::new() }))
            });
            Arc::clone(stream)
        };
        // Drawn outside the map's lock: dealings of other sizes do not wait for this one.
        let mut stream = stream.lock().unwrap_or_else(PoisonError::into_inner);
        if stream.windows.len() >= count {
            return stream.windows[..count].to_vec();
        }
        // About the window's tokens over the mean piece, so a window's pieces are not copied as
        // they grow.
        let mean_piece = data.distribution().mean_length().clamp(1.0, work.seq_len().max(1) as f64);
        let expected = (tokens as f64 / mean_piece).min(MOST_PIECES_RESERVED) as usize;
        let reserve = expected + expected / 8 + 16;
        while stream.windows.len() < count {
            let window = draw_window(data, work, weight, tokens, reserve, &mut stream.rng);
            stream.windows.push(window.into());
        }
        stream.windows[..count].to_vec()
    }
}

impl Clone for WindowPieces {
    fn clone(&self) -> WindowPieces {
        WindowPieces::default()
    }
}

impl PartialEq for WindowPieces {
    fn eq(&self, _: &WindowPieces) -> bool {
        true
    }
}

/// Draws one window of `tokens` tokens from `rng`: its documents cut at the sequence length, as
/// weighed pieces, heaviest first (room for `reserve` of them made at the start).
fn draw_window(
    data: &Data,
    work: &AttentionWork<'_>,
    weight: [f64; 2],
    tokens: u64,
    reserve: usize,
    rng: &mut StdRng,
) -> Vec<Piece> {
    let seq = work.seq_len();
    let mut pieces = Vec::with_capacity(reserve);
    let mut left = tokens;
    while left > 0 {
        let mut length = data.distribution().draw(rng).min(left);
        left -= length;
        while length > 0 {
            let piece = length.min(seq);
            length -= piece;
            let [a, b] = work.piece(piece).unwrap_or([0.0; 2]);
            let tokens = piece as f64;
            pieces.push((weight[0] * tokens + weight[1] * a, [tokens, a, b]));
        }
    }
    heaviest_first(&mut pieces);
    pieces
}

/// Sorts pieces heaviest first. A piece's weight grows with its tokens (a positive weight per
/// token plus a non-negative one per unit of attention, which grows with the piece), so the
/// pieces are radix-sorted by their tokens, a 32-bit key (a piece is at most one sequence, under
/// 2^24 tokens), longest first. Pieces of equal length weigh the same, and the sort is stable.
pub(super) fn heaviest_first(pieces: &mut [Piece]) {
    radsort::sort_by_key(pieces, |piece| u32::MAX - piece.1[0] as u32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::histogram_data as data;

    #[test]
    fn windows_of_one_size_are_the_same_stream_whatever_was_asked_first() {
        let data = data(&[(512, 4096, 900), (32768, 131072, 60)]);
        let flops = |tokens: u64| (tokens * tokens) as f64;
        let work = AttentionWork::new(&flops, 131072);
        let tokens = 4 * 131072;
        let grown = WindowPieces::default();
        let first = grown.windows(&data, &work, [1.0, 1e5], tokens, 2);
        let more = grown.windows(&data, &work, [1.0, 1e5], tokens, 5);
        let at_once = WindowPieces::default().windows(&data, &work, [1.0, 1e5], tokens, 5);
        assert_eq!(more.len(), 5);
        assert_eq!(first[..], more[..2]);
        assert_eq!(more, at_once);
        for window in &more {
            // Every token of the window once, heaviest piece first, none past the sequence.
            assert_eq!(window.iter().map(|p| p.1[0]).sum::<f64>(), tokens as f64);
            assert!(window.windows(2).all(|w| w[0].0 >= w[1].0));
            assert!(window.iter().all(|p| p.1[0] <= 131072.0));
        }
        // Windows follow one another in the stream: the second is not the first drawn again.
        assert_ne!(more[0], more[1]);
    }
}

//! The document pieces of a balancing loader's windows, drawn once per window size and shared by
//! every dealing of that size.
//!
//! A window of `t` tokens is filled by taking documents from the data's seeded stream until `t`
//! tokens are taken (the last one cut to fit), each then cut at the sequence length; windows
//! follow one another in the stream. Two dealings whose windows hold the same tokens (one of 8
//! micro-batches of 2 sequences, one of 16 of 1) take the same documents and cut them at the same
//! places: they differ only in the micro-batches they deal each window to. So the pieces, weighed
//! and sorted heaviest first, are made once per window size and extended as dealings ask for more
//! windows, and a dealing costs its greedy placement only. Windows of every size run over the
//! same documents, so each document is drawn once, whichever size asks for it first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{AttentionWork, Data};
use crate::limits;

/// Pieces reserved for one window at most before drawing it (2^20; a window of more grows).
const MOST_PIECES_RESERVED: f64 = (1u64 << 20) as f64;

/// One piece of a window: its weight for the loader, and its tokens and attention terms
/// `[tokens, a, b]`.
pub type Piece = (f64, [f64; 3]);

/// The windows of one size made so far, and the first document of the stream the next one
/// takes.
#[derive(Debug, Default)]
struct Stream {
    next_document: usize,
    windows: Vec<Arc<[Piece]>>,
}

/// The documents drawn so far from the data's seeded generator, in order, and the generator that
/// draws the next.
#[derive(Debug)]
struct Documents {
    rng: StdRng,
    lengths: Vec<u64>,
}

impl Documents {
    /// The lengths of the documents that fill `tokens` tokens from the `first`-th on (drawing
    /// those not drawn yet), the last one whole, and the index of the document after them.
    fn take(&mut self, data: &Data, first: usize, tokens: u64) -> (Vec<u64>, usize) {
        let mut taken = Vec::new();
        let mut left = tokens;
        let mut index = first;
        while left > 0 {
            if index == self.lengths.len() {
                self.lengths.push(data.distribution().draw(&mut self.rng));
            }
            let length = self.lengths[index];
            taken.push(length);
            left = left.saturating_sub(length);
            index += 1;
        }
        (taken, index)
    }
}

/// Windows of pieces by tokens per window, for one run's data and model. A clone starts empty
/// and any two compare equal, since what it holds follows from the data alone.
#[derive(Debug, Default)]
pub struct WindowPieces {
    streams: Mutex<BTreeMap<u64, Arc<Mutex<Stream>>>>,
    /// The document stream every window size takes from (`None` until a window is first made).
    documents: Mutex<Option<Documents>>,
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
            Arc::clone(streams.entry(tokens).or_default())
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
            let (lengths, next_document) = {
                let mut documents = self.documents.lock().unwrap_or_else(PoisonError::into_inner);
                let documents = documents.get_or_insert_with(|| Documents {
                    rng: StdRng::seed_from_u64(data.seed()),
                    lengths: Vec::new(),
                });
                documents.take(data, stream.next_document, tokens)
            };
            stream.next_document = next_document;
            let window = cut_window(&lengths, work, weight, tokens, reserve);
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

/// Cuts one window of `tokens` tokens from the documents of `lengths` (the last one cut to fit),
/// each at the sequence length, into weighed pieces, heaviest first (room for `reserve` of them
/// made at the start).
///
/// A piece's weight grows with its tokens (a positive weight per token plus a non-negative one
/// per unit of attention, which grows with the piece), and pieces of equal length are equal, so
/// the pieces' lengths are radix-sorted (a piece is at most one sequence, under 2^24 tokens, a
/// 32-bit key) and the pieces made longest first.
fn cut_window(
    lengths: &[u64],
    work: &AttentionWork<'_>,
    weight: [f64; 2],
    tokens: u64,
    reserve: usize,
) -> Vec<Piece> {
    let seq = work.seq_len().min(limits::SEQ_LEN);
    let mut cut: Vec<u32> = Vec::with_capacity(reserve);
    let mut left = tokens;
    for &drawn in lengths {
        let mut length = drawn.min(left);
        left -= length;
        while length > 0 {
            let piece = length.min(seq);
            length -= piece;
            cut.push(piece as u32);
        }
    }
    radsort::sort(&mut cut);
    cut.iter()
        .rev()
        .map(|&piece| {
            let [a, b] = work.piece(u64::from(piece)).unwrap_or([0.0; 2]);
            let tokens = f64::from(piece);
            (weight[0] * tokens + weight[1] * a, [tokens, a, b])
        })
        .collect()
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

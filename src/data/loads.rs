//! The attention work of sequences drawn from a length distribution, relative to one document
//! filling the sequence: a seeded sample of sequences packed (or padded) as the data says,
//! summarised by the moments the cost model needs per plan.
//!
//! A document piece of `s` tokens attends causally to itself only, so its attention costs
//! `F(s)` FLOPs, and a fused kernel over `s` keys runs at `s / (s + h)` of its full rate (the
//! GPU preset's ramp, `h` tokens at half rate). The kernel time of a sequence of pieces,
//! relative to one piece filling it (`F(S)` at `S`), is then `(a + y b) / (1 + y)` with
//! `a = sum F(s) / F(S)`, `b = sum (F(s) / s) / (F(S) / S)` and `y = h / S'` (`S'` the kernel's
//! keys per sequence, `S` scaled by the CP split): each sequence is summarised by `(a, b)`,
//! and any plan's ratio by the sample's moments of `a` and `b`.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{Batching, Data};

/// Draws of document lengths one sample makes at most: about 0.1 s.
const DRAW_BUDGET: u64 = 1 << 22;
/// Sequences a sample holds at most, and at least (a sample of very long sequences of very short
/// documents is small, but each of its sequences averages many documents).
const SEQUENCES: (u64, u64) = (8, 4096);
/// Document pieces drawn for one sequence at most: past them the rest of the sequence is taken
/// as more of the same (their mean per token), so that a sequence of millions of tiny documents
/// is summarised in milliseconds; its spread, from so many documents, is negligible anyway.
const PIECES_PER_SEQUENCE: u64 = 1 << 16;

/// The attention work of a sample of sequences, relative to full-length documents.
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceLoads {
    /// Sequences sampled.
    pub sequences: u64,
    /// Document pieces per sequence, on average.
    pub pieces_per_sequence: f64,
    /// Tokens trained over tokens computed: 1 for packed sequences, below 1 for padded ones.
    pub trained_fraction: f64,
    /// Means of `a` and `b`.
    pub mean: [f64; 2],
    /// Variance of `a`, covariance of `a` and `b`, variance of `b`.
    pub covariance: [f64; 3],
    /// Largest `a` and largest `b` drawn.
    pub max: [f64; 2],
    /// The expected largest `a` and `b` of `2^i` sequences drawn from the sample (the
    /// sequences ordered by `a`), for `i` = 0 to [`LARGEST_TABLE`] - 1.
    pub largest: [[f64; 2]; LARGEST_TABLE],
}

/// Entries of [`SequenceLoads::largest`]: up to `2^26` draws, above the most sequences a step
/// holds ([`crate::limits::GLOBAL_BATCH`]).
pub const LARGEST_TABLE: usize = 27;

/// The attention work of document pieces in sequences of one length, relative to one piece
/// filling the sequence: what a sample needs of the model.
pub struct AttentionWork<'a> {
    /// The forward attention FLOPs of one causal document of `s` tokens in one layer, `F(s)`.
    flops: &'a dyn Fn(u64) -> f64,
    seq_len: u64,
    /// `F(seq_len)`.
    full: f64,
}

impl<'a> AttentionWork<'a> {
    /// The work of pieces in sequences of `seq_len` tokens, with `flops` as `F`.
    pub fn new(flops: &'a dyn Fn(u64) -> f64, seq_len: u64) -> AttentionWork<'a> {
        AttentionWork { flops, seq_len, full: flops(seq_len) }
    }

    /// Tokens per sequence.
    pub fn seq_len(&self) -> u64 {
        self.seq_len
    }

    /// Whether the model does attention at all (a pattern of only recurrent layers does none).
    pub fn attends(&self) -> bool {
        self.full > 0.0
    }

    /// A piece of `piece` tokens as `[a, b]`: its FLOP ratio `F(s) / F(S)` and its kernel-ramp
    /// term `(F(s) / s) / (F(S) / S)`; `None` when the model does no attention.
    pub fn piece(&self, piece: u64) -> Option<[f64; 2]> {
        self.attends().then(|| {
            let flops = (self.flops)(piece);
            let per_token_full = self.full / self.seq_len as f64;
            [flops / self.full, flops / piece as f64 / per_token_full]
        })
    }
}

/// Draws the sample of sequences that `data` makes (of the length `work` prices), with its seed.
pub fn sample_sequences(data: &Data, work: &AttentionWork<'_>) -> SequenceLoads {
    let (values, trained_fraction, pieces) = sequence_values(data, work);
    let sequences = values.len() as u64;
    summarise(&values, trained_fraction, pieces, sequences)
}

/// Each sampled sequence's `[a, b]`, the tokens trained over those computed, and the document
/// pieces drawn: the sample [`sample_sequences`] summarises.
pub fn sequence_values(data: &Data, work: &AttentionWork<'_>) -> (Vec<[f64; 2]>, f64, u64) {
    let distribution = data.distribution();
    let mut rng = StdRng::seed_from_u64(data.seed());
    let seq_len = work.seq_len();
    let pieces = match data.batching() {
        Batching::Pack | Batching::Whole | Batching::Concat => {
            (seq_len as f64 / distribution.mean_length().min(seq_len as f64) + 1.0)
                .min(PIECES_PER_SEQUENCE as f64)
        }
        Batching::Pad => 1.0,
    };
    let sequences = ((DRAW_BUDGET as f64 / pieces) as u64).clamp(SEQUENCES.0, SEQUENCES.1);
    let mut values: Vec<[f64; 2]> = Vec::with_capacity(sequences as usize);
    let (mut trained, mut pieces_total) = (0u64, 0u64);
    let mut carried = 0u64;
    for _ in 0..sequences {
        match data.batching() {
            // A plan's variable micro-batches are formed per batch shape
            // (`dynamic_batches.rs`); their sequences are drawn here as padded ones.
            Batching::Pad => {
                // Padded attention runs over the whole sequence whatever the document's length.
                let length = distribution.draw(&mut rng).min(seq_len);
                trained += length;
                pieces_total += 1;
                values.push([1.0, 1.0]);
            }
            Batching::Pack | Batching::Concat => {
                // Without a document mask a sequence attends as one document filling it, so
                // its pieces' attention is neither summed nor kept.
                let masked = data.batching() == Batching::Pack && work.attends();
                let (mut room, mut a, mut b) = (seq_len, 0.0, 0.0);
                let mut drawn = 0u64;
                while room > 0 {
                    if drawn == PIECES_PER_SEQUENCE {
                        let more;
                        ([a, b], more) = rest_as_more_of_the_same([a, b], drawn, room, seq_len);
                        pieces_total += more;
                        carried = 0;
                        break;
                    }
                    drawn += 1;
                    // The rest of a document cut at the last sequence's end comes first.
                    let length = if carried > 0 {
                        std::mem::take(&mut carried)
                    } else {
                        distribution.draw(&mut rng)
                    };
                    let piece = length.min(room);
                    carried = length - piece;
                    room -= piece;
                    pieces_total += 1;
                    if let Some([piece_a, piece_b]) = masked.then(|| work.piece(piece)).flatten() {
                        a += piece_a;
                        b += piece_b;
                    }
                }
                trained += seq_len;
                values.push(if masked { [a, b] } else { [1.0, 1.0] });
            }
            Batching::Whole => {
                let (mut room, mut a, mut b) = (seq_len, 0.0, 0.0);
                let mut drawn = 0u64;
                while room > 0 {
                    if drawn == PIECES_PER_SEQUENCE {
                        let more;
                        ([a, b], more) = rest_as_more_of_the_same([a, b], drawn, room, seq_len);
                        pieces_total += more;
                        trained += room;
                        carried = 0;
                        break;
                    }
                    // A document that did not fit the last sequence opens this one.
                    let length = if carried > 0 {
                        std::mem::take(&mut carried)
                    } else {
                        distribution.draw(&mut rng).min(seq_len)
                    };
                    if length > room {
                        // It starts the next sequence; the rest of this one is padding.
                        carried = length;
                        break;
                    }
                    drawn += 1;
                    room -= length;
                    trained += length;
                    pieces_total += 1;
                    if let Some([piece_a, piece_b]) = work.piece(length) {
                        a += piece_a;
                        b += piece_b;
                    }
                }
                values.push(if work.attends() { [a, b] } else { [1.0, 1.0] });
            }
        }
    }
    (values, trained as f64 / (sequences * seq_len) as f64, pieces_total)
}

/// A sequence whose `drawn` pieces (sums `[a, b]`) left `room` of its `seq_len` tokens, its rest
/// taken as more of the same (the drawn pieces' sums per token): its sums, and the pieces the
/// rest stands for.
fn rest_as_more_of_the_same(
    [a, b]: [f64; 2],
    drawn: u64,
    room: u64,
    seq_len: u64,
) -> ([f64; 2], u64) {
    let scale = room as f64 / (seq_len - room) as f64;
    ([a * (1.0 + scale), b * (1.0 + scale)], (drawn as f64 * scale) as u64)
}

fn summarise(
    values: &[[f64; 2]],
    trained_fraction: f64,
    pieces: u64,
    sequences: u64,
) -> SequenceLoads {
    let n = values.len() as f64;
    let mean = [0, 1].map(|i| values.iter().map(|v| v[i]).sum::<f64>() / n);
    let central = |powers: [i32; 2]| {
        values
            .iter()
            .map(|v| (v[0] - mean[0]).powi(powers[0]) * (v[1] - mean[1]).powi(powers[1]))
            .sum::<f64>()
            / n
    };
    // The expected largest of n draws from the sample: the k-th smallest is the largest with
    // probability (k / K)^n - ((k - 1) / K)^n.
    let mut sorted = values.to_vec();
    sorted.sort_by(|x, y| x[0].total_cmp(&y[0]).then(x[1].total_cmp(&y[1])));
    let largest = std::array::from_fn(|i| {
        let draws = (1u64 << i) as f64;
        let mut below = 0.0;
        let mut expected = [0.0; 2];
        for (k, value) in sorted.iter().enumerate() {
            let upto = ((k + 1) as f64 / n).powf(draws);
            let weight = upto - below;
            below = upto;
            expected[0] += weight * value[0];
            expected[1] += weight * value[1];
        }
        expected
    });
    SequenceLoads {
        largest,
        sequences,
        pieces_per_sequence: pieces as f64 / sequences as f64,
        trained_fraction,
        mean,
        covariance: [central([2, 0]), central([1, 1]), central([0, 2])],
        max: [0, 1].map(|i| values.iter().map(|v| v[i]).fold(f64::NEG_INFINITY, f64::max)),
    }
}

impl SequenceLoads {
    /// The mean kernel-time ratio of a sequence at `y` (the ramp's half-rate keys over the
    /// kernel's keys per sequence).
    pub fn mean_ratio(&self, y: f64) -> f64 {
        (self.mean[0] + y * self.mean[1]) / (1.0 + y)
    }

    /// Mean and variance of `u a + v b` over the sample's sequences.
    pub fn moments_of(&self, u: f64, v: f64) -> [f64; 2] {
        let [aa, ab, bb] = self.covariance;
        [u * self.mean[0] + v * self.mean[1], u * u * aa + 2.0 * u * v * ab + v * v * bb]
    }

    /// The largest `u a + v b` of one sequence (`u`, `v` not negative): no sum of sequences
    /// exceeds its count times this.
    pub fn max_of(&self, u: f64, v: f64) -> f64 {
        u * self.max[0] + v * self.max[1]
    }

    /// The expected largest `u a + v b` of `draws` sequences drawn from the sample (`u`, `v`
    /// not negative), interpolated in `log2 draws` between the table's powers of two.
    pub fn expected_largest_of(&self, u: f64, v: f64, draws: f64) -> f64 {
        let at = |i: usize| u * self.largest[i][0] + v * self.largest[i][1];
        let position = draws.max(1.0).log2().min((LARGEST_TABLE - 1) as f64);
        let low = position.floor() as usize;
        let high = (low + 1).min(LARGEST_TABLE - 1);
        let fraction = position - low as f64;
        at(low) + (at(high) - at(low)) * fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DataSpec;

    fn causal(s: u64) -> f64 {
        (s as f64) * (s as f64 + 1.0) / 2.0
    }

    fn data(lengths: Vec<i64>, batching: Batching) -> Data {
        let spec =
            DataSpec { lengths: Some(lengths), batching: Some(batching), ..DataSpec::default() };
        Data::from_spec(&spec, None).unwrap()
    }

    #[test]
    fn documents_as_long_as_the_sequence_are_one_full_sequence_each() {
        let loads =
            sample_sequences(&data(vec![4096], Batching::Pack), &AttentionWork::new(&causal, 4096));
        assert_eq!(loads.mean, [1.0, 1.0]);
        assert_eq!(loads.covariance, [0.0; 3]);
        assert_eq!(loads.mean_ratio(0.3), 1.0);
        assert_eq!(loads.trained_fraction, 1.0);
    }

    #[test]
    fn documents_concatenated_without_a_mask_attend_as_full_sequences() {
        // The same draws as packed (the pieces counted alike), but no mask: each sequence is
        // one full one, and every token is trained.
        let work = AttentionWork::new(&causal, 4096);
        let packed = sample_sequences(&data(vec![1000, 3000], Batching::Pack), &work);
        let concat = sample_sequences(&data(vec![1000, 3000], Batching::Concat), &work);
        assert!(packed.mean[0] < 1.0, "{:?}", packed.mean);
        assert_eq!(concat.mean, [1.0, 1.0]);
        assert_eq!(concat.covariance, [0.0; 3]);
        assert_eq!(concat.max, [1.0, 1.0]);
        assert_eq!(concat.trained_fraction, 1.0);
        assert_eq!(concat.pieces_per_sequence, packed.pieces_per_sequence);
        assert_eq!(concat.sequences, packed.sequences);
    }

    #[test]
    fn two_documents_of_half_the_sequence_do_a_quarter_of_its_attention_each() {
        let loads = sample_sequences(
            &data(vec![2048], Batching::Pack),
            &AttentionWork::new(&|s| (s * s) as f64, 4096),
        );
        assert_eq!(loads.mean[0], 0.5);
        // Per-token kernel overhead is per token: the same for any split.
        assert_eq!(loads.mean[1], 1.0);
        assert!(loads.covariance.iter().all(|&c| c == 0.0));
    }

    #[test]
    fn documents_longer_than_the_sequence_are_cut_and_carried_into_the_next() {
        // 6144-token documents in 4096-token sequences: every three sequences hold two
        // documents as [4096], [2048 | 2048], [4096], so a is 1, 1/2, 1.
        let loads = sample_sequences(
            &data(vec![6144], Batching::Pack),
            &AttentionWork::new(&|s| (s * s) as f64, 4096),
        );
        assert!((loads.mean[0] - 5.0 / 6.0).abs() < 0.01, "{:?}", loads.mean);
        assert!(loads.covariance[0] > 0.0);
        assert_eq!(loads.max[0], 1.0);
    }

    #[test]
    fn padded_sequences_compute_in_full_and_train_their_documents_tokens_only() {
        let loads = sample_sequences(
            &data(vec![1024, 3072], Batching::Pad),
            &AttentionWork::new(&causal, 4096),
        );
        assert_eq!(loads.mean, [1.0, 1.0]);
        assert!((loads.trained_fraction - 0.5).abs() < 0.03, "{}", loads.trained_fraction);
    }

    #[test]
    fn whole_documents_start_a_new_sequence_when_they_do_not_fit_and_the_rest_is_padding() {
        // 3072-token documents in 4096-token sequences: one a sequence, 1024 tokens of padding
        // each, which attend to nothing: a = F(3072) / F(4096) = 9/16, three quarters trained.
        let loads = sample_sequences(
            &data(vec![3072], Batching::Whole),
            &AttentionWork::new(&|s| (s * s) as f64, 4096),
        );
        assert_eq!(loads.mean[0], 9.0 / 16.0);
        assert_eq!(loads.trained_fraction, 0.75);
        assert_eq!(loads.pieces_per_sequence, 1.0);
        // Two 2048-token documents fill a sequence exactly: as packing them.
        let alternating = sample_sequences(
            &data(vec![2048], Batching::Whole),
            &AttentionWork::new(&|s| (s * s) as f64, 4096),
        );
        assert_eq!((alternating.mean[0], alternating.trained_fraction), (0.5, 1.0));
        // Longer documents are cut to the sequence, their rest dropped: one full sequence each.
        let long = sample_sequences(
            &data(vec![6144], Batching::Whole),
            &AttentionWork::new(&|s| (s * s) as f64, 4096),
        );
        assert_eq!((long.mean, long.trained_fraction), ([1.0, 1.0], 1.0));
    }

    #[test]
    fn sequences_of_millions_of_tiny_documents_are_summarised_from_a_bounded_draw() {
        // 2^24-token sequences of one-token documents: 2^24 pieces each, of which 2^16 are
        // drawn and the rest taken as more of the same.
        let loads = sample_sequences(
            &data(vec![1, 2], Batching::Pack),
            &AttentionWork::new(&|s| (s * s) as f64, 1 << 24),
        );
        assert_eq!(loads.sequences, 64);
        let pieces = loads.pieces_per_sequence;
        assert!((pieces / (1u64 << 24) as f64 * 1.5 - 1.0).abs() < 0.01, "{pieces}");
        // Sum of s^2 over S / 1.5 documents of mean s^2 2.5, over S^2.
        let expected = 2.5 / 1.5 / (1u64 << 24) as f64;
        assert!((loads.mean[0] / expected - 1.0).abs() < 0.01, "{:?}", loads.mean);
    }

    #[test]
    fn the_same_seed_draws_the_same_sample_and_another_seed_another() {
        let spec = |seed| DataSpec {
            histogram: Some(vec![crate::data::LengthBinSpec { min: 1, max: 8000, count: 1 }]),
            seed: Some(seed),
            ..DataSpec::default()
        };
        let draw = |seed| {
            let data = Data::from_spec(&spec(seed), None).unwrap();
            sample_sequences(&data, &AttentionWork::new(&causal, 8192))
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1).mean, draw(2).mean);
    }
}

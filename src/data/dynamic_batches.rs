//! DynaPipe's variable-length micro-batches (Jiang et al., EuroSys'24): the documents of a
//! global batch, each cut at `seq_len`, sorted longest first and cut in that order into
//! micro-batches that are padded to their longest document and hold at most the plan's token
//! budget (`micro_batch x seq_len` padded tokens). Short documents share a micro-batch, so a
//! step computes little more than its documents' tokens, and the count and size of the
//! micro-batches vary from step to step.
//!
//! DynaPipe chooses its cuts by dynamic programming against its cost model; here each
//! micro-batch takes documents until the next would overflow the budget, which leaves at most
//! one partly filled micro-batch per run of equal lengths. A micro-batch is summarised by its
//! padded tokens and the `[a, b]` attention terms of its documents at the padded length (see
//! `loads.rs`), each over one full sequence's, so the cost model prices it like any sequence.

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::Data;
use super::loads::AttentionWork;

/// Documents drawn for the global batches of one sample, at most: every plan a search prices
/// deals their micro-batches to its replicas, so they are kept to what a millisecond deals. A
/// larger global batch is drawn in part, and its micro-batches stand for a proportional share
/// of the replicas.
const DRAW_BUDGET: u64 = 1 << 14;
/// Global batches one sample holds, at most.
const GLOBAL_BATCHES: u64 = 8;

/// One variable micro-batch, in units of one full sequence (`seq_len` tokens of one document).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamicMicroBatch {
    /// Its padded tokens (documents times their padded length) over `seq_len`.
    pub tokens: f64,
    /// The sum over its documents of `[a, b]` at the padded length.
    pub attention: [f64; 2],
}

/// The micro-batches a sample of global batches forms, and what they train.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicBatches {
    /// Each drawn global batch's micro-batches, longest first.
    pub global_batches: Vec<Vec<DynamicMicroBatch>>,
    /// Documents in a global batch (the run's global batch of sequences).
    pub documents: u64,
    /// Documents drawn per global batch: all of them, or a share of a very large batch that
    /// stands for it.
    pub drawn: u64,
    /// Tokens trained over the tokens of `documents` full sequences.
    pub trained_fraction: f64,
    /// Padded tokens computed over the tokens of `documents` full sequences.
    pub computed_fraction: f64,
    /// The mean over a global batch's sequence slots of `[a, b]`: the attention a slot of the
    /// fixed-shape pricing costs, as `loads.rs` summarises packed sequences.
    pub mean: [f64; 2],
    /// Micro-batches per global batch, on average.
    pub micro_batches: f64,
    /// The attention FLOPs the documents need (each over its own tokens, not its padding) over
    /// those of their tokens in full sequences: what model FLOPs count of attention.
    pub attention_share: f64,
}

/// Forms the variable micro-batches of global batches of `documents` documents each under a
/// budget of `micro_batch x seq_len` padded tokens, drawn from `data` with its seed.
pub fn form_dynamic_batches(
    data: &Data,
    work: &AttentionWork<'_>,
    documents: u64,
    micro_batch: u64,
) -> DynamicBatches {
    let seq_len = work.seq_len().max(1);
    let budget = micro_batch.max(1).saturating_mul(seq_len);
    let drawn = documents.clamp(1, DRAW_BUDGET);
    let batches = (DRAW_BUDGET / drawn).clamp(1, GLOBAL_BATCHES);
    let mut rng = StdRng::seed_from_u64(data.seed());
    let (mut trained, mut computed, mut own) = (0u64, 0.0, 0.0);
    let mut attention = [0.0; 2];
    let mut global_batches = Vec::with_capacity(batches as usize);
    for _ in 0..batches {
        let mut lengths: Vec<u64> =
            (0..drawn).map(|_| data.distribution().draw(&mut rng).clamp(1, seq_len)).collect();
        lengths.sort_unstable_by(|x, y| y.cmp(x));
        trained += lengths.iter().sum::<u64>();
        own +=
            lengths.iter().map(|&length| work.piece(length).map_or(0.0, |[a, _]| a)).sum::<f64>();
        let formed = cut(&lengths, budget, seq_len, work);
        for batch in &formed {
            computed += batch.tokens;
            attention[0] += batch.attention[0];
            attention[1] += batch.attention[1];
        }
        global_batches.push(formed);
    }
    let slots = (batches * drawn) as f64;
    let micro_batches = global_batches.iter().map(Vec::len).sum::<usize>() as f64 / batches as f64;
    let full = trained as f64 / seq_len as f64;
    DynamicBatches {
        attention_share: if work.attends() && full > 0.0 { own / full } else { 1.0 },
        documents,
        drawn,
        trained_fraction: trained as f64 / (slots * seq_len as f64),
        computed_fraction: computed / slots,
        mean: attention.map(|sum| sum / slots),
        micro_batches: micro_batches * documents as f64 / drawn as f64,
        global_batches,
    }
}

/// The micro-batches of documents sorted longest first: each opens with the longest document
/// left, pads to it, and takes the next while the padded total stays within `budget`.
fn cut(
    lengths: &[u64],
    budget: u64,
    seq_len: u64,
    work: &AttentionWork<'_>,
) -> Vec<DynamicMicroBatch> {
    let mut formed = Vec::new();
    let mut start = 0;
    while start < lengths.len() {
        let padded = lengths[start];
        let room = (budget / padded).max(1) as usize;
        let end = (start + room).min(lengths.len());
        let count = (end - start) as f64;
        let tokens = count * padded as f64 / seq_len as f64;
        // A model without attention layers prices no attention: its terms follow the tokens.
        let [a, b] = work.piece(padded).unwrap_or([tokens / count, tokens / count]);
        formed.push(DynamicMicroBatch { tokens, attention: [count * a, count * b] });
        start = end;
    }
    formed
}

impl DynamicBatches {
    /// The mean kernel-time ratio of a sequence slot at `y` (the ramp's half-rate keys over the
    /// kernel's keys per sequence), as [`super::SequenceLoads::mean_ratio`].
    pub fn mean_ratio(&self, y: f64) -> f64 {
        (self.mean[0] + y * self.mean[1]) / (1.0 + y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Batching, DataSpec};

    fn causal(s: u64) -> f64 {
        (s as f64) * (s as f64 + 1.0) / 2.0
    }

    fn data(lengths: Vec<i64>) -> Data {
        let spec = DataSpec {
            lengths: Some(lengths),
            batching: Some(Batching::Pad),
            ..DataSpec::default()
        };
        Data::from_spec(&spec, None).unwrap()
    }

    #[test]
    fn full_length_documents_form_the_fixed_micro_batches() {
        let work = AttentionWork::new(&causal, 4096);
        let formed = form_dynamic_batches(&data(vec![4096]), &work, 64, 2);
        assert_eq!(formed.micro_batches, 32.0);
        assert_eq!(formed.trained_fraction, 1.0);
        assert_eq!(formed.computed_fraction, 1.0);
        assert_eq!(formed.mean, [1.0, 1.0]);
        assert_eq!(formed.attention_share, 1.0);
        let batch = formed.global_batches[0][0];
        assert_eq!(batch, DynamicMicroBatch { tokens: 2.0, attention: [2.0, 2.0] });
    }

    #[test]
    fn short_documents_share_a_micro_batch_and_compute_only_their_tokens() {
        // Documents of 1024 tokens under a budget of one 4096-token sequence: four a
        // micro-batch, nothing padded, each attending over its own 1024 keys.
        let work = AttentionWork::new(&causal, 4096);
        let formed = form_dynamic_batches(&data(vec![1024]), &work, 64, 1);
        assert_eq!(formed.micro_batches, 16.0);
        assert_eq!(formed.trained_fraction, 0.25);
        assert_eq!(formed.computed_fraction, 0.25);
        let [a, _] = work.piece(1024).unwrap();
        assert!((formed.mean[0] - a).abs() < 1e-12, "{:?}", formed.mean);
        // A 1024-token document does a quarter of the tokens and a sixteenth (about) of the
        // attention of a 4096-token one: a quarter of the attention a full sequence's tokens do.
        assert!((formed.attention_share - a * 4.0).abs() < 1e-12, "{}", formed.attention_share);
        assert!(formed.attention_share < 0.26);
    }

    #[test]
    fn a_micro_batch_pads_to_its_longest_document() {
        // Budget 4096: a 3000-token document goes alone (two would pad to 6000), the four of
        // 1000 tokens share the next micro-batch.
        let work = AttentionWork::new(&causal, 4096);
        let lengths = [3000u64, 1000, 1000, 1000, 1000];
        let formed = cut(&lengths, 4096, 4096, &work);
        assert_eq!(formed.len(), 2);
        assert!((formed[0].tokens - 3000.0 / 4096.0).abs() < 1e-12);
        assert!((formed[1].tokens - 4000.0 / 4096.0).abs() < 1e-12);
        // Documents of 3000 then 500: the 500 pads to 3000 and does not fit beside it.
        let formed = cut(&[3000, 500], 4096, 4096, &work);
        assert_eq!(formed.len(), 2);
        assert!((formed[1].tokens - 500.0 / 4096.0).abs() < 1e-12);
    }

    #[test]
    fn the_same_seed_forms_the_same_batches() {
        let spec = DataSpec {
            histogram: Some(vec![crate::data::LengthBinSpec { min: 10, max: 9000, count: 5 }]),
            batching: Some(Batching::Pad),
            seed: Some(7),
            ..DataSpec::default()
        };
        let data = Data::from_spec(&spec, None).unwrap();
        let work = AttentionWork::new(&causal, 8192);
        let first = form_dynamic_batches(&data, &work, 256, 2);
        assert_eq!(first, form_dynamic_batches(&data, &work, 256, 2));
        assert!(first.computed_fraction >= first.trained_fraction);
        assert!(first.computed_fraction < 1.0);
    }
}

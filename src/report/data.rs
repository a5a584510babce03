//! What a report shows of a run's data: its document lengths in bins of one power of two each
//! (the share of documents and the share of tokens in each, from the validated distribution) and
//! one step's work per data-parallel replica (`crate::cost::replica_loads`).

use crate::cost::priced::PricedRun;
use crate::cost::replica_loads::{ReplicaLoads, replica_loads};
use crate::data::{Batching, LengthDistribution};
use crate::run::Run;

/// Document lengths `low..=high` (from one power of two to below the next) and their shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LengthBin {
    /// Shortest length of the bin, in tokens: a power of two.
    pub low: u64,
    /// Longest length of the bin, in tokens: below the next power of two.
    pub high: u64,
    /// The share of the documents whose lengths are in the bin, 0 to 1.
    pub documents: f64,
    /// The share of the tokens in those documents, 0 to 1.
    pub tokens: f64,
}

/// A run's data as a report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct DataView {
    /// What the lengths are called (`crate::data::Data::name`).
    pub name: String,
    /// How documents become sequences.
    pub batching: Batching,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// The mean document length, in tokens.
    pub mean_length: f64,
    /// The share of tokens in documents longer than half the sequence, 0 to 1.
    pub long_token_share: f64,
    /// The lengths from the shortest bin to the longest, bins of one power of two each, up to
    /// the sequence length at least.
    pub bins: Vec<LengthBin>,
    /// One step's work per data-parallel replica.
    pub loads: ReplicaLoads,
    /// Micro-batches per replica and step.
    pub microbatches: u64,
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Global batches a re-packing window holds; 0 without re-packing.
    pub balance_window: u64,
    /// Whether the plan sorts documents into variable micro-batches.
    pub variable_micro_batches: bool,
    /// Seed of the data's sample, from which the step is drawn.
    pub seed: u64,
    /// Why the plan's engine would refuse to export the plan for this data, when none of its
    /// loaders batches documents as the data is batched (`Refusal::DocumentBatching`).
    pub engine_refusal: Option<String>,
    /// The multiple of tokens context parallelism pads each document to and the share of the
    /// tokens that are documents' own (`Run::context_parallel_padding`), when it pads any.
    pub context_parallel_padding: Option<(u64, f64)>,
}

impl DataView {
    /// The view of `run`'s data; `None` without data.
    pub fn new(run: &Run) -> Option<DataView> {
        let data = run.data()?;
        let loads = replica_loads(&PricedRun::new(run))?;
        let distribution = data.data.distribution();
        let seq_len = run.training().seq_len();
        let tokens = distribution.tokens();
        let long_tokens = distribution.tokens_between(seq_len / 2 + 1, u64::MAX);
        Some(DataView {
            name: data.data.name().to_owned(),
            batching: data.data.batching(),
            seq_len,
            mean_length: distribution.mean_length(),
            long_token_share: if tokens > 0.0 { long_tokens / tokens } else { 0.0 },
            bins: power_of_two_bins(distribution, seq_len),
            loads,
            microbatches: run.plan().num_microbatches(),
            micro_batch: run.training().micro_batch(),
            balance_window: run.plan().balance_window(),
            variable_micro_batches: run.plan().variable_micro_batches(),
            seed: data.data.seed(),
            engine_refusal: crate::export::data_refusal_sentence(run),
            context_parallel_padding: Some(run.context_parallel_padding())
                .filter(|&share| share < 1.0)
                .map(|share| (run.context_parallel_granularity(), share)),
        })
    }
}

/// The distribution in bins from one power of two to below the next, from the bin of its
/// shortest length to that of its longest or of `seq_len`, whichever is longer.
pub(super) fn power_of_two_bins(distribution: &LengthDistribution, seq_len: u64) -> Vec<LengthBin> {
    let documents = distribution.documents_between(0, u64::MAX);
    let tokens = distribution.tokens();
    let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
    let first = distribution.min_length().max(1).ilog2();
    let last = distribution.max_length().max(seq_len).max(1).ilog2();
    (first..=last)
        .map(|power| {
            let low = 1u64 << power;
            let high = low.saturating_mul(2) - 1;
            LengthBin {
                low,
                high,
                documents: share(distribution.documents_between(low, high), documents),
                tokens: share(distribution.tokens_between(low, high), tokens),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::LengthBinSpec;

    #[test]
    fn bins_run_from_the_shortest_length_to_the_sequence_and_share_it_all() {
        let bins = [
            LengthBinSpec { min: 512, max: 4096, count: 900 },
            LengthBinSpec { min: 32_768, max: 131_072, count: 60 },
        ];
        let distribution = LengthDistribution::from_histogram("h", &bins).unwrap();
        let shown = power_of_two_bins(&distribution, 262_144);
        // 512 (2^9) to the sequence's 262144 (2^18): ten bins.
        assert_eq!(shown.len(), 10);
        assert_eq!((shown[0].low, shown[0].high), (512, 1023));
        assert_eq!(shown[9].low, 262_144);
        let documents: f64 = shown.iter().map(|bin| bin.documents).sum();
        let tokens: f64 = shown.iter().map(|bin| bin.tokens).sum();
        assert!((documents - 1.0).abs() < 1e-12 && (tokens - 1.0).abs() < 1e-12);
        // Long documents are few but carry most of the tokens.
        let long = |bin: &&LengthBin| bin.low >= 32_768;
        let long_documents: f64 = shown.iter().filter(long).map(|bin| bin.documents).sum();
        let long_tokens: f64 = shown.iter().filter(long).map(|bin| bin.tokens).sum();
        assert!(long_documents < 0.07 && long_tokens > 0.65, "{shown:?}");
    }
}

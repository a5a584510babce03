//! The training data's document lengths and how they become sequences: `DataSpec` mirrors the
//! `[data]` table of a plan file (and the `--lengths` / `--batching` flags), `Data` is reachable
//! only by validating it, and `SequenceLoads` summarises the attention work of the sequences a
//! seeded sample of the distribution packs, which the cost model prices per plan.
//!
//! Without data every sequence is one document exactly `seq_len` tokens long, as meshplan priced
//! runs before: a distribution whose documents all have that length gives the same prediction.

mod distribution;
mod dynamic_batches;
mod hybrid_groups;
mod loads;
mod repacking;
mod shape_cache;
mod window_pieces;

pub use distribution::{LengthBinSpec, LengthDistribution};
pub use dynamic_batches::{DynamicBatches, DynamicMicroBatch, form_dynamic_batches};
pub use hybrid_groups::{
    DrawCache, DrawnBatches, GroupShape, PlacedBatches, PlacedDocument, PlacementCache,
    draw_batches, place_documents,
};
pub use loads::{AttentionWork, SequenceLoads, sample_sequences, sequence_values};
pub use repacking::{DealCache, DealShape, DealtWindows, deal_windows};
pub use shape_cache::ShapeCache;
pub use window_pieces::WindowPieces;

use serde::{Deserialize, Serialize};

use crate::violation::{Collector, Violations};

/// How documents become the fixed-length sequences of a batch.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Batching {
    /// Documents are concatenated and cut into sequences of `seq_len` tokens, each document
    /// attending only to itself (a document mask: Transformer Engine's THD layout over the
    /// documents' `cu_seqlens`, which Megatron-LM reads from packed samples): every token is
    /// trained on, and attention work follows the squares of the document pieces.
    #[default]
    Pack,
    /// One document per sequence, cut at `seq_len` and padded to it: every sequence costs a full
    /// one, and only the document's tokens count as trained; `global_batch` counts documents. A
    /// plan's variable micro-batches (DynaPipe) pad each only to the longest of its micro-batch.
    Pad,
    /// Whole documents packed in the order they arrive, each attending only to itself, a
    /// document that does not fit the rest of a sequence starting the next one and the rest
    /// padded (Megatron-LM's `--sft` packing; DeepSpeed's dynamic batching in data-loader
    /// order); a document longer than `seq_len` is cut to it. Padding costs its linear work
    /// and no attention, and only the documents' tokens count as trained.
    Whole,
    /// Documents are concatenated and cut into sequences of `seq_len` tokens with no document
    /// mask: every token attends to every earlier token of its sequence, across documents, so
    /// every sequence costs a full one whatever the lengths. What the engines' pre-training
    /// loaders run by default: Megatron-LM's `GPTDataset` (whose `--reset-attention-mask` mask
    /// Transformer Engine's causal attention does not read, Megatron-LM issue 2357) and
    /// torchtitan's causal attention.
    Concat,
}

impl Batching {
    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Batching::Pack => "pack",
            Batching::Pad => "pad",
            Batching::Whole => "whole",
            Batching::Concat => "concat",
        }
    }

    /// Whether the cost of a sequence follows its documents' lengths, so that a loader can
    /// balance sequences by them (re-packing windows, hybrid CP's placement): documents packed
    /// under a document mask. Not padded documents (every sequence one, costing a full one) nor
    /// documents concatenated without a mask (every sequence a full one).
    pub fn balances_by_length(self) -> bool {
        match self {
            Batching::Pack | Batching::Whole => true,
            Batching::Pad | Batching::Concat => false,
        }
    }

    /// How its sequences are made, in a phrase that follows "the data is batched `name`".
    pub fn phrase(self) -> &'static str {
        match self {
            Batching::Pack => "documents packed into sequences under a document mask",
            Batching::Pad => "one document per padded sequence",
            Batching::Whole => "whole documents packed under a document mask, the rest padded",
            Batching::Concat => "documents concatenated with no document mask",
        }
    }
}

/// The data as written: a built-in distribution, a sample of document lengths or a histogram
/// (exactly one), and how documents are batched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// A built-in length distribution (`meshplan presets` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Where the lengths come from, shown with the prediction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Document lengths in tokens, one entry per document of a sample of the data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lengths: Option<Vec<i64>>,
    /// A histogram of document lengths: bins of `min` to `max` tokens (inclusive) with their
    /// document counts; lengths inside a bin are taken as evenly spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<Vec<LengthBinSpec>>,
    /// How documents become sequences. [default: pack]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batching: Option<Batching>,
    /// Seed of the sample of sequences drawn from the distribution. [default: 0]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Validated data: a length distribution and its batching.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    distribution: LengthDistribution,
    batching: Batching,
    seed: u64,
    source: Option<String>,
    preset: Option<String>,
}

impl Data {
    /// Validates a spec whose `preset` has been replaced by the preset's own lengths (`preset`
    /// names it; the run resolves built-in names, which live a layer above). Every problem is
    /// reported at once, under `data.*`.
    pub fn from_spec(spec: &DataSpec, preset: Option<&str>) -> Result<Data, Violations> {
        let mut problems = Collector::default();
        let distribution = match (&spec.lengths, &spec.histogram) {
            (Some(lengths), None) => {
                problems.take(LengthDistribution::from_lengths("data.lengths", lengths))
            }
            (None, Some(bins)) => {
                problems.take(LengthDistribution::from_histogram("data.histogram", bins))
            }
            (Some(_), Some(_)) => {
                problems.add(
                    "data",
                    "lengths and histogram",
                    "gives document lengths twice",
                    "keep one of `lengths` (one entry per document) and `histogram`",
                );
                None
            }
            (None, None) => {
                problems.add(
                    "data",
                    "(no lengths)",
                    "gives no document lengths",
                    "name a built-in distribution (`preset`, `meshplan presets`), or give \
                     `lengths` or `histogram`",
                );
                None
            }
        };
        let distribution = problems.finish_with(distribution, "data")?;
        Ok(Data {
            distribution,
            batching: spec.batching.unwrap_or_default(),
            seed: spec.seed.unwrap_or(0),
            source: spec.source.clone(),
            preset: preset.map(str::to_owned),
        })
    }

    /// The document length distribution.
    pub fn distribution(&self) -> &LengthDistribution {
        &self.distribution
    }
    /// How documents become sequences.
    pub fn batching(&self) -> Batching {
        self.batching
    }
    /// Seed of the sample of sequences.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Where the lengths come from, when the spec says.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }
    /// The built-in distribution's name, when it is one.
    pub fn preset(&self) -> Option<&str> {
        self.preset.as_deref()
    }
    /// What the lengths are called where they are shown: the preset's name, else their source.
    pub fn name(&self) -> &str {
        self.preset().or(self.source()).unwrap_or("given lengths")
    }

    /// The share of the tokens its sequences hold that are documents' own when every document
    /// under a document mask is padded to a multiple of `granularity` tokens, as context
    /// parallelism over Transformer Engine's THD layout needs (`granularity` = 2 x cp: each
    /// document is cut into 2 x cp chunks): packed pieces as drawn, whole documents cut to
    /// `seq_len` first. Padding takes room in the sequences, so it displaces documents' tokens:
    /// the step computes as many tokens and trains this share of them. Documents concatenated
    /// with no mask, or one padded to the whole sequence, need none (1).
    pub fn document_padding_share(&self, granularity: u64, seq_len: u64) -> f64 {
        let cap = match self.batching {
            Batching::Pack => None,
            Batching::Whole => Some(seq_len),
            Batching::Pad | Batching::Concat => return 1.0,
        };
        if granularity <= 1 {
            return 1.0;
        }
        let [documents, padded] = self.distribution.padded_tokens(granularity, cap);
        if padded > 0.0 { (documents / padded).clamp(0.0, 1.0) } else { 1.0 }
    }

    /// The spec this data validates from, with every default explicit and a preset's lengths
    /// left to its name.
    pub fn to_spec(&self) -> DataSpec {
        let (lengths, histogram) = match &self.preset {
            Some(_) => (None, None),
            None => (None, Some(self.distribution.to_histogram())),
        };
        DataSpec {
            preset: self.preset.clone(),
            source: if self.preset.is_some() { None } else { self.source.clone() },
            lengths,
            histogram,
            batching: Some(self.batching),
            seed: Some(self.seed),
        }
    }
}

/// A heap key of a non-negative `weight` and an `index` that breaks its ties: ordered by the
/// weight (whose bits order it, being non-negative), then by the index. One integer compares in
/// fewer instructions than a pair.
pub(crate) fn heap_key(weight: f64, index: usize) -> u128 {
    debug_assert!(weight >= 0.0, "a heap weight is non-negative: {weight}");
    (u128::from(weight.to_bits()) << 64) | index as u128
}

/// The weight and index of a [`heap_key`].
pub(crate) fn heap_entry(key: u128) -> (f64, usize) {
    (f64::from_bits((key >> 64) as u64), (key & u128::from(u64::MAX)) as usize)
}

/// Data of a histogram of `(min, max, count)` bins, packed: what unit tests of the dealing and
/// the placement draw from.
#[cfg(test)]
pub(crate) fn histogram_data(bins: &[(i64, i64, i64)]) -> Data {
    let histogram =
        bins.iter().map(|&(min, max, count)| LengthBinSpec { min, max, count }).collect();
    let spec = DataSpec { histogram: Some(histogram), ..DataSpec::default() };
    Data::from_spec(&spec, None).unwrap()
}

//! The training setup: sequence length, batch sizes and numeric recipe, raw and validated.

use serde::{Deserialize, Serialize};

use super::Precision;

/// The training setup as written by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSpec {
    /// Tokens per sequence.
    pub seq_len: i64,
    /// Sequences per optimizer step, across all DP ranks.
    pub global_batch: i64,
    /// Sequences per micro-batch on one model replica (default 1).
    pub micro_batch: Option<i64>,
    /// Numeric recipe (default bf16).
    pub precision: Option<Precision>,
}

/// A validated training setup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Training {
    pub(crate) seq_len: u64,
    pub(crate) global_batch: u64,
    pub(crate) micro_batch: u64,
    pub(crate) precision: Precision,
}

impl Training {
    /// Tokens per sequence.
    pub fn seq_len(&self) -> u64 {
        self.seq_len
    }
    /// Sequences per step.
    pub fn global_batch(&self) -> u64 {
        self.global_batch
    }
    /// Sequences per micro-batch.
    pub fn micro_batch(&self) -> u64 {
        self.micro_batch
    }
    /// Numeric recipe.
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Tokens per optimizer step.
    pub fn tokens_per_step(&self) -> u64 {
        self.global_batch * self.seq_len
    }
    /// The setup written back as a spec with every default explicit (what a plan file holds).
    pub fn to_spec(&self) -> TrainingSpec {
        TrainingSpec {
            seq_len: self.seq_len as i64,
            global_batch: self.global_batch as i64,
            micro_batch: Some(self.micro_batch as i64),
            precision: Some(self.precision),
        }
    }
}

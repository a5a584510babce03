//! Accelerators and the machines they sit in: the GPU's compute, memory and achievable
//! efficiencies (`gpu.rs`), its links (`interconnect.rs`) and a whole cluster (`cluster.rs`).
//!
//! Vendor figures are parsed from text with units once, here. The efficiencies are the only
//! calibrated numbers in meshplan: each is a global property of a GPU or link (what fraction of
//! the datasheet peak a large GEMM, an attention kernel, a memory-bound kernel or a collective
//! really reaches), documented with its source in the preset that sets it.

mod attention_ratios;
mod cluster;
mod generation;
mod gpu;
mod interconnect;

pub use attention_ratios::{AttentionRatioSpec, AttentionRatios};
pub use cluster::{Cluster, ClusterSpec};
pub use generation::Generation;
pub use gpu::{Efficiency, EfficiencySpec, Gpu, GpuSpec, PeakSpec, PrecisionClass};
pub use interconnect::{Interconnect, InterconnectSpec, LinkTier};

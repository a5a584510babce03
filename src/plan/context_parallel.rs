//! How context-parallel ranks work together: the exchange that feeds attention (`CpComm`) and
//! per-document context-parallel groups (`HybridCp`, Megatron-LM's hybrid context parallel).

use serde::{Deserialize, Serialize};

/// How context-parallel ranks exchange what attention needs (Megatron-LM `--cp-comm-type`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum CpComm {
    /// Ring attention (`p2p`): keys and values pass around the ring, each step overlapped with
    /// the attention block it feeds (Liu et al. 2023; Megatron-LM's default).
    #[value(alias = "p2p")]
    Ring,
    /// Ulysses (`a2a`): all-to-alls re-shard Q, K and V from sequence to heads before attention
    /// and the output back after it; heads / tp must divide by cp (Jacobs et al. 2023).
    #[value(alias = "a2a")]
    AllToAll,
    /// `a2a+p2p`: all-to-all inside an NVLink domain, ring across domains (USP / Megatron-LM's
    /// `--hierarchical-context-parallel-sizes`).
    #[value(alias = "a2a+p2p")]
    Hierarchical,
    /// Mesh-Attention (Chen et al. 2025): each rank computes an a x b tile of the attention
    /// matrix's query-chunk x key/value-chunk blocks (a x b = cp, both at least 2), gathering its
    /// rows' queries and its columns' keys and values; priced only, no released engine runs it
    Mesh,
}

impl CpComm {
    /// Every kind, in the order the CLI lists them.
    pub const ALL: [CpComm; 4] =
        [CpComm::Ring, CpComm::AllToAll, CpComm::Hierarchical, CpComm::Mesh];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            CpComm::Ring => "ring",
            CpComm::AllToAll => "all-to-all",
            CpComm::Hierarchical => "hierarchical",
            CpComm::Mesh => "mesh",
        }
    }
}

/// A Mesh-Attention grid of `rows x columns = cp` ranks. The sequence's query chunks and
/// key/value chunks index the attention matrix's rows and columns; each rank computes a tile of
/// `rows` query chunks by `columns` key/value chunks, its own query and key/value chunk among them
/// (the paper's "local Q-KV" arrangement). Tiles are dealt row-first, so the `rows` ranks that
/// share a tile row (its query chunks) are consecutive cp ranks and the `columns` ranks that share
/// a tile column (its key/value chunks) are every `rows`-th one. A one-row grid is ring attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshGrid {
    /// Query chunks in a tile: the ranks of one tile row, which all-gather them.
    pub rows: u64,
    /// Key/value chunks in a tile: the ranks of one tile column, which all-gather them.
    pub columns: u64,
}

impl MeshGrid {
    /// Every grid of `cp` ranks with at least two rows and two columns, fewest rows first. None
    /// for cp below 4 or prime, whose only grid is the ring's single row.
    pub fn all(cp: u64) -> Vec<MeshGrid> {
        let mut rows: Vec<u64> = Vec::new();
        let mut divisor: u64 = 2;
        while divisor.saturating_mul(divisor) <= cp {
            if cp.is_multiple_of(divisor) {
                rows.push(divisor);
                if divisor * divisor != cp {
                    rows.push(cp / divisor);
                }
            }
            divisor += 1;
        }
        rows.sort_unstable();
        rows.into_iter().map(|rows| MeshGrid { rows, columns: cp / rows }).collect()
    }
}

/// Per-document context-parallel groups (Megatron-LM `--hybrid-context-parallel`, core_v0.16 to
/// v0.19; ByteScale's hybrid data parallelism): the `dp x cp` ranks form one pool, and each
/// document of a global batch runs on its own group of `2^ceil(log2(L / M))` of them (one rank,
/// with no context-parallel exchange, for a document of at most `M` tokens), placed by the
/// loader's scheduler. `M` is the most tokens of one document a rank holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HybridCp {
    pub(crate) max_tokens_per_rank: u64,
    pub(crate) scheduler: HybridCpScheduler,
}

impl HybridCp {
    /// The most tokens of one document a rank holds (Megatron-LM `--max-seqlen-per-dp-cp-rank`).
    pub fn max_tokens_per_rank(&self) -> u64 {
        self.max_tokens_per_rank
    }
    /// How the loader places documents on groups and runs them.
    pub fn scheduler(&self) -> HybridCpScheduler {
        self.scheduler
    }
}

/// How a hybrid-CP loader places documents on groups and how the ranks run them.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum HybridCpScheduler {
    /// Megatron-LM's released scheduler (`BalancedCPScheduler`, core_v0.16 to v0.19): a document
    /// weighs its length squared over its group size (linear work is left out, so ranks of many
    /// short documents carry more than it counts), and each runs as its own forward and
    /// backward, so a short one costs at least the host time to issue every layer.
    #[default]
    Megatron,
    /// ByteScale's data-aware balancing: a document weighs its training FLOPs over its group
    /// size (linear in its tokens plus its attention's square), and a rank's documents run
    /// packed together. No released engine's loader has it.
    ByWork,
}

impl HybridCpScheduler {
    /// Every scheduler, in the order the CLI lists them.
    pub const ALL: [HybridCpScheduler; 2] =
        [HybridCpScheduler::Megatron, HybridCpScheduler::ByWork];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            HybridCpScheduler::Megatron => "megatron",
            HybridCpScheduler::ByWork => "by-work",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mesh_grids_have_two_rows_and_two_columns_at_least() {
        let shapes = |cp| MeshGrid::all(cp).iter().map(|g| (g.rows, g.columns)).collect::<Vec<_>>();
        assert_eq!(shapes(16), [(2, 8), (4, 4), (8, 2)]);
        assert_eq!(shapes(12), [(2, 6), (3, 4), (4, 3), (6, 2)]);
        assert_eq!(shapes(4), [(2, 2)]);
        // A ring is the one-row grid: cp 1, 2 and primes have no other.
        for cp in [0, 1, 2, 3, 7, 13] {
            assert!(shapes(cp).is_empty(), "{cp}");
        }
        assert_eq!(shapes(1 << 20).len(), 19);
    }
}

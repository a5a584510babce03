//! Mesh-Attention's context-parallel exchange (Chen, Chen, Zhu, Jiang, Peng and Qian, "Mesh-
//! Attention: A New Communication-Efficient Distributed Attention with Improved Data Locality",
//! arXiv 2512.20968, December 2025; what was read of it and what is derived here is in
//! `docs/mesh-attention.md`).
//!
//! The paper's matrix model: a sequence split into `cp` query chunks and `cp` key/value chunks
//! makes the attention matrix `cp x cp` blocks; an assignment of blocks to ranks fixes what each
//! rank must receive. Ring attention gives a rank one row of blocks (its own queries against
//! every key/value chunk: `cp - 1` key/value chunks received); Mesh-Attention gives it a tile of
//! `rows x columns = cp` blocks ([`MeshGrid`]), holding its own query and key/value chunk, so it
//! receives `rows - 1` query chunks and `columns - 1` key/value chunks and returns the partial
//! outputs of the `rows - 1` query chunks it does not own. Per rank and layer, with `Q`, `KV`
//! and `O` the bytes of its own query, key-and-value and output chunk (sequence / cp tokens,
//! its TP share of the heads, 2 bytes an element) and `S` one fp32 statistic per query row and
//! head (the softmax's log-sum-exp forward; it and the backward's `rowsum(dO * O)` backward):
//!
//! - forward: `(rows - 1) Q` all-gathered over the tile row, `(columns - 1) KV` all-gathered over
//!   the tile column, `(rows - 1) (O + S)` reduce-scattered back over the tile row;
//! - backward: `(rows - 1) (Q + O + 2 S)` (queries, output gradient and both statistics) and
//!   `(columns - 1) KV` gathered again, `(rows - 1) Q` of query gradients reduce-scattered over
//!   the tile row and `(columns - 1) KV` of key/value gradients over the tile column.
//!
//! Against the ring's `(cp - 1) KV` forward and `2 (cp - 1) KV` backward, with as many key/value
//! heads as query heads (`KV = 2Q = 2O`) and a square grid the forward moves
//! `2 / (sqrt(cp) + 1)` of the ring's bytes (statistics aside): the `O(sqrt(cp))` against `O(cp)`
//! of the paper's analysis. Grouped-query attention shrinks `KV` against `Q` and `O`, and with
//! it the saving: at 8 query heads per key/value head a 2 x 2 grid moves more than a ring of 4.
//!
//! meshplan prices the grid of fewest bytes per rank over both phases (ties to fewer rows), not
//! one the user sets; the tile rows are consecutive cp ranks (tiles dealt row-first), the tile
//! columns every `rows`-th one. Each rank computes its tile one block at a time as the chunks
//! arrive, so its attention kernel sees one chunk of keys, as the ring's does, and the exchange
//! overlaps the tile's blocks as the ring's steps overlap theirs ([`OpKind::CpComm`]). The
//! collectives of a phase are priced one after another, and the gathered chunks' memory is not
//! priced.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::op_table::{OpKind, OpTable, Phase};
use crate::plan::{CpComm, MeshGrid, Precision};
use crate::run::Run;
use crate::units::{Bytes, Flops};

/// Bytes of an fp32 statistic per query row and head.
const STATISTIC_BYTES: f64 = 4.0;

/// What one rank holds of each tensor the exchange moves, per micro-batch of one layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshChunks {
    /// Its queries (and their gradient's size).
    pub query: Bytes,
    /// Its keys and values together (and their gradients' size).
    pub key_value: Bytes,
    /// Its attention output (the size of a partial output and of the output gradient).
    pub output: Bytes,
    /// One fp32 number per query row and head: the log-sum-exp, or the backward's row sum.
    pub statistic: Bytes,
}

impl MeshChunks {
    /// The chunks of a run's ranks: `tokens / cp` of each sequence of a micro-batch, with `1 / tp`
    /// of the heads.
    pub fn of(run: &Run) -> MeshChunks {
        let model = run.model();
        let tokens = run.tokens_per_microbatch();
        let tp = run.plan().tp() as f64;
        let act = Precision::ACTIVATION_BYTES;
        let width = |w: u64| Bytes::new(tokens * w as f64 / tp * act);
        MeshChunks {
            query: width(model.query_width()),
            key_value: width(2 * model.kv_width()),
            output: width(model.attention_output_width()),
            statistic: Bytes::new(
                tokens * model.num_attention_heads() as f64 / tp * STATISTIC_BYTES,
            ),
        }
    }
}

/// The bytes one rank receives in one phase, by the collective that moves them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshTraffic {
    /// All-gathered over the tile row: queries forward; queries, the output gradient and the
    /// two statistics backward.
    pub row_gather: Bytes,
    /// All-gathered over the tile column: keys and values.
    pub column_gather: Bytes,
    /// Reduce-scattered over the tile row: partial outputs with their log-sum-exp forward,
    /// partial query gradients backward.
    pub row_reduce: Bytes,
    /// Reduce-scattered over the tile column: partial key and value gradients (backward only).
    pub column_reduce: Bytes,
}

impl MeshTraffic {
    /// Everything the rank receives in the phase.
    pub fn total(&self) -> Bytes {
        self.row_gather + self.column_gather + self.row_reduce + self.column_reduce
    }
}

/// The bytes a rank of `grid` receives in `phase` (see the module's formulas).
pub fn traffic(grid: MeshGrid, chunks: &MeshChunks, phase: Phase) -> MeshTraffic {
    let other_rows = grid.rows.saturating_sub(1) as f64;
    let other_columns = grid.columns.saturating_sub(1) as f64;
    let c = chunks;
    match phase {
        Phase::Forward => MeshTraffic {
            row_gather: c.query * other_rows,
            column_gather: c.key_value * other_columns,
            row_reduce: (c.output + c.statistic) * other_rows,
            column_reduce: Bytes::ZERO,
        },
        Phase::Backward => MeshTraffic {
            row_gather: (c.query + c.output + c.statistic * 2.0) * other_rows,
            column_gather: c.key_value * other_columns,
            row_reduce: c.query * other_rows,
            column_reduce: c.key_value * other_columns,
        },
    }
}

/// The bytes a rank receives in both phases.
fn both_phases(grid: MeshGrid, chunks: &MeshChunks) -> Bytes {
    traffic(grid, chunks, Phase::Forward).total() + traffic(grid, chunks, Phase::Backward).total()
}

/// The buffers a rank holds during one layer's attention backward beyond its own chunks, per
/// micro-batch: the chunks it gathered and the partial gradients it reduces, as many bytes as it
/// receives in that phase (the backward's exceed the forward's). Zero unless the run's exchange is
/// Mesh-Attention: the ring holds one chunk in flight, which meshplan leaves out.
pub fn gathered_bytes(run: &Run) -> Bytes {
    if run.plan().cp_comm() != CpComm::Mesh {
        return Bytes::ZERO;
    }
    grid(run)
        .map_or(Bytes::ZERO, |grid| traffic(grid, &MeshChunks::of(run), Phase::Backward).total())
}

/// The grid meshplan prices for a run: of every grid of its cp ranks with two rows and two
/// columns at least, the one whose ranks receive the fewest bytes over both phases (the fewer
/// rows on a tie). `None` when cp has no such grid (cp below 4, or prime), which validation
/// refuses.
pub fn grid(run: &Run) -> Option<MeshGrid> {
    let chunks = MeshChunks::of(run);
    MeshGrid::all(run.plan().cp())
        .into_iter()
        .map(|grid| (grid, both_phases(grid, &chunks).value()))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(grid, _)| grid)
}

/// The exchange's rows of one layer: per phase, each collective over the tile row (`rows` ranks
/// `tp` apart) or the tile column (`columns` ranks `tp x rows` apart), with the bytes the rank
/// receives; all hidden behind the tile's attention as far as it lasts.
pub(super) fn push_exchange(run: &Run, table: &mut OpTable) {
    let Some(grid) = grid(run) else { return };
    let chunks = MeshChunks::of(run);
    let tp = run.plan().tp();
    let links = run.cluster().interconnect();
    let row = Group { size: grid.rows, stride: tp };
    let column = Group { size: grid.columns, stride: tp * grid.rows };
    // The collective's time on its full buffer (nccl-tests convention): the received bytes and
    // the rank's own share.
    let time = |collective, group: Group, received: Bytes| {
        let full = received * (group.size as f64 / (group.size - 1) as f64);
        collective_time(links, collective, group, full)
    };
    for phase in [Phase::Forward, Phase::Backward] {
        let moved = traffic(grid, &chunks, phase);
        let rows = [
            ("cp-mesh-row-gather", Collective::AllGather, row, moved.row_gather),
            ("cp-mesh-column-gather", Collective::AllGather, column, moved.column_gather),
            ("cp-mesh-row-reduce", Collective::ReduceScatter, row, moved.row_reduce),
            ("cp-mesh-column-reduce", Collective::ReduceScatter, column, moved.column_reduce),
        ];
        for (name, collective, group, bytes) in rows {
            if bytes.value() > 0.0 {
                let seconds = time(collective, group, bytes);
                table.push(name, phase, OpKind::CpComm, Flops::ZERO, bytes, seconds);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::layer::{Rows, transformer_layer};
    use crate::plan::{CpComm, PlanSpec};
    use crate::presets;
    use crate::run::test_run;

    const MIB: f64 = 1024.0 * 1024.0;

    /// `model` on 16 H100s with tp 1 and cp 16, one 65,536-token sequence per micro-batch.
    fn run(model: &str, cp_comm: CpComm) -> Run {
        let plan = PlanSpec { cp: Some(16), cp_comm: Some(cp_comm), ..PlanSpec::default() };
        test_run(presets::model(model).unwrap(), 16, 65536, 16, 1, plan)
    }

    #[test]
    fn a_square_grid_receives_the_formulas_bytes() {
        // Llama 2 7B (32 query and 32 key/value heads of 128), 4096 tokens a rank: Q = O =
        // 4096 x 4096 x 2 B = 32 MiB, KV = 64 MiB, S = 4096 x 32 x 4 B = 0.5 MiB. Over both
        // phases a rank of an r x c grid receives (r - 1)(3Q + 2O + 3S) + 3 (c - 1) KV: 1060.5
        // MiB at 4 x 4, 1505.5 at 2 x 8, 1322.5 at 8 x 2.
        let run = run("llama2-7b", CpComm::Mesh);
        let chunks = MeshChunks::of(&run);
        assert_eq!(chunks.query.value(), 32.0 * MIB);
        assert_eq!(chunks.key_value.value(), 64.0 * MIB);
        assert_eq!(chunks.output.value(), 32.0 * MIB);
        assert_eq!(chunks.statistic.value(), 0.5 * MIB);
        let grid = grid(&run).unwrap();
        assert_eq!((grid.rows, grid.columns), (4, 4));
        let forward = traffic(grid, &chunks, Phase::Forward);
        assert_eq!(forward.row_gather.value(), 3.0 * 32.0 * MIB);
        assert_eq!(forward.column_gather.value(), 3.0 * 64.0 * MIB);
        assert_eq!(forward.row_reduce.value(), 3.0 * 32.5 * MIB);
        assert_eq!(forward.total().value(), 385.5 * MIB);
        let backward = traffic(grid, &chunks, Phase::Backward);
        assert_eq!(backward.total().value(), (3.0 * (65.0 + 32.0) + 6.0 * 64.0) * MIB);
        // The rows of the layer's table carry the same bytes.
        let layer = transformer_layer(&run, true, Rows::Keep);
        let exchanged = |phase| -> f64 {
            let rows = layer.ops.iter().filter(|op| op.phase == phase && op.kind == OpKind::CpComm);
            rows.map(|op| op.bytes.value()).sum()
        };
        assert_eq!(exchanged(Phase::Forward), forward.total().value());
        assert_eq!(exchanged(Phase::Backward), backward.total().value());
    }

    #[test]
    fn grouped_query_attention_picks_fewer_rows() {
        // Llama 3.1 8B has 4 query heads per key/value head: KV = 16 MiB against Q = O = 32 MiB,
        // so 161.5 (r - 1) + 48 (c - 1) MiB: 497.5 at 2 x 8, 628.5 at 4 x 4, 1178.5 at 8 x 2.
        let run = run("llama3.1-8b", CpComm::Mesh);
        let grid = grid(&run).unwrap();
        assert_eq!((grid.rows, grid.columns), (2, 8));
    }

    #[test]
    fn the_rows_are_hidden_behind_attention_as_the_ring_steps_are() {
        let mesh = transformer_layer(&run("llama2-7b", CpComm::Mesh), true, Rows::Keep);
        let ring = transformer_layer(&run("llama2-7b", CpComm::Ring), true, Rows::Keep);
        for phase in [Phase::Forward, Phase::Backward] {
            assert_eq!(mesh.time(phase, OpKind::CpAllToAll).value(), 0.0);
            let (mesh, ring) = (mesh.time(phase, OpKind::CpComm), ring.time(phase, OpKind::CpComm));
            assert!(mesh.value() > 0.0 && mesh < ring, "{phase:?}: {mesh:?} vs {ring:?}");
        }
        // The same kernels: one chunk of keys a block.
        assert_eq!(
            mesh.time(Phase::Forward, OpKind::Attention),
            ring.time(Phase::Forward, OpKind::Attention)
        );
    }
    #[test]
    fn a_rank_holds_its_gathered_chunks_through_a_layers_backward() {
        // The 4 x 4 grid above: the backward's buffers are what it receives, 3 (Q + O + 2S) +
        // 3 Q + 6 KV = 675 MiB a layer; the ring holds none (one chunk in flight, left out).
        let (mesh, ring) = (run("llama2-7b", CpComm::Mesh), run("llama2-7b", CpComm::Ring));
        assert_eq!(gathered_bytes(&mesh).value(), (3.0 * 65.0 + 3.0 * 32.0 + 6.0 * 64.0) * MIB);
        assert_eq!(gathered_bytes(&ring), Bytes::ZERO);
        // They add to the stage's peak once, as transient bytes beside the stored activations.
        let peak = |run: &Run| crate::cost::memory::stage_memory(run)[0].breakdown.activations;
        assert_eq!((peak(&mesh) - peak(&ring)).value(), 675.0 * MIB);
    }
}

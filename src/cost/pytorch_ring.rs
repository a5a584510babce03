//! PyTorch's ring attention (`torch.distributed.tensor.experimental._attention`, which
//! torchtitan's context parallelism runs) with its `allgather` rotate method: the key/value
//! all-gather, the fp32 key/value gradients passed around the ring, and the fp32 merges of each
//! chunk's output into the running one.
//!
//! Read from pytorch/pytorch `torch/distributed/tensor/experimental/_attention.py`@0123248a:
//! `_AllGatherRotater` gathers every rank's keys and values once and waits for them at the
//! second chunk; the backward gathers them again and passes the key/value gradients with an
//! all-to-all rotater (`_RotateMethod.ALL_TO_ALL`), accumulated in fp32 (`convert_to_f32`
//! True); `_SDPAMerger` merges each chunk's output and log-sum-exp into the running ones in fp32,
//! and with round-robin load balancing half of the chunks update only the second half of the
//! queries through `torch.cat`.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::op_table::{OpKind, OpTable, Phase};
use crate::plan::Precision;
use crate::run::Run;
use crate::units::{Bytes, Flops};

/// Bytes per output element of merging one chunk's output into the running one (forward): the
/// chunk's bf16 output cast to fp32 (2 read, 4 written); `out - sigmoid(lse_b - lse) * (out -
/// out_b)` as three fp32 element-wise kernels: the difference (8 read, 4 written), its product
/// with the per-row sigmoid (4 read, 4 written; the log-sum-exp terms are one value a row) and
/// the subtraction (8 read, 4 written); and, on half the chunks (round-robin load balancing),
/// `torch.cat` rebuilding the output from its halves (4 read, 4 written).
pub const MERGE_FORWARD_BYTES: f64 = 6.0 + 12.0 + 8.0 + 12.0 + 0.5 * 8.0;
/// Bytes per query-gradient element of one chunk's backward: `grad_query += grad_query_` into
/// the fp32 accumulator (4 + 2 read, 4 written), and on half the chunks the `torch.cat` of its
/// halves (4 read, 4 written).
pub const MERGE_BACKWARD_QUERY_BYTES: f64 = 10.0 + 0.5 * 8.0;
/// Bytes per key/value-gradient element of one chunk's backward: the fp32 accumulation (10) and
/// the `torch.cat` that flattens the gradients for the next send (4 read, 4 written).
pub const MERGE_BACKWARD_KV_BYTES: f64 = 10.0 + 8.0;

/// Where one layer's exchange runs: `tokens` a rank holds of each micro-batch, over a ring of
/// `ring` ranks (`group`) at tensor-parallel degree `tp`, each rank holding `kv_bytes` of bf16
/// keys and values of `kv_width` each (the heads the kernel sees).
pub(super) struct RingShape {
    pub(super) tokens: f64,
    pub(super) tp: f64,
    pub(super) kv_width: u64,
    pub(super) kv_bytes: Bytes,
    pub(super) group: Group,
    pub(super) ring: u64,
}

/// The exchange and merges of one layer.
pub(super) fn push(run: &Run, table: &mut OpTable, shape: RingShape) {
    let RingShape { tokens, tp, kv_width, kv_bytes, group, ring } = shape;
    let model = run.model();
    let gpu = run.cluster().gpu();
    let links = run.cluster().interconnect();
    let steps = (ring - 1) as f64;
    let gathered = kv_bytes * ring as f64;
    let gather = collective_time(links, Collective::AllGather, group, gathered);
    for phase in [Phase::Forward, Phase::Backward] {
        let moved = kv_bytes * steps;
        table.push("cp-kv-all-gather", phase, OpKind::CpGather, Flops::ZERO, moved, gather);
    }
    // The key/value gradients in fp32, one send per chunk (the last brings each rank's own home).
    let gradients = kv_bytes * (4.0 / Precision::ACTIVATION_BYTES);
    let step = collective_time(links, Collective::SendRecv, group, gradients);
    let sends = ring as f64;
    let (bytes, time) = (gradients * sends, step * sends);
    table.push("cp-grad-ring", Phase::Backward, OpKind::CpComm, Flops::ZERO, bytes, time);
    // The merges after the first, local chunk.
    let elements = |width: u64| tokens * width as f64 / tp;
    let outputs = elements(model.attention_output_width());
    let forward = Bytes::new(MERGE_FORWARD_BYTES * outputs * steps);
    table.push_memory(gpu, "cp-merge", Phase::Forward, forward);
    let queries = elements(model.query_width());
    let keys_values = elements(2 * kv_width);
    let backward = Bytes::new(
        (MERGE_BACKWARD_QUERY_BYTES * queries + MERGE_BACKWARD_KV_BYTES * keys_values) * steps,
    );
    table.push_memory(gpu, "cp-merge", Phase::Backward, backward);
}

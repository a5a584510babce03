//! Tests of how a stack's ring attention passes keys and values (`Stack::cp_kv_exchange`):
//! Megatron-Core's point-to-point ring, and PyTorch's all-gather, which only the local chunk's
//! attention hides, with its fp32 merges of each chunk's output (`cost/pytorch_ring.rs`); and
//! the key/value heads a stack's model code repeats before the kernel (`Stack::repeats_kv_heads`).

use crate::cost::layer::{OpKind, Phase, Rows, transformer_layer};
use crate::cost::pytorch_ring::{
    MERGE_BACKWARD_KV_BYTES, MERGE_BACKWARD_QUERY_BYTES, MERGE_FORWARD_BYTES,
};
use crate::cost::work::{OVERLAP_EFFICIENCY, Tables, segment_work, stage_segment};
use crate::plan::{Engine, PlanSpec};
use crate::run::{Run, test_spec};
use crate::stack::CpKvExchange;

/// Llama 3.1 8B at 16K tokens on 16 H100 with cp 16 (a ring over two nodes), run by `stack`.
fn run(stack: &str, engine: Engine) -> Run {
    let plan = PlanSpec {
        cp: Some(16),
        stack: Some(stack.to_owned()),
        engine: Some(engine),
        ..PlanSpec::default()
    };
    Run::from_spec(&test_spec("llama3.1-8b", 16, 16384, 16, 1, plan)).unwrap()
}

#[test]
fn pytorchs_all_gather_is_hidden_only_by_the_local_chunk() {
    let torchtitan = run("torchtitan-2024-12", Engine::Torchtitan);
    assert_eq!(torchtitan.stack().cp_kv_exchange(), CpKvExchange::AllGather);
    let layer = transformer_layer(&torchtitan, true, Rows::Keep);
    let names: Vec<(&str, Phase)> = layer
        .ops
        .iter()
        .filter(|op| matches!(op.kind, OpKind::CpComm | OpKind::CpGather))
        .map(|op| (op.name, op.phase))
        .collect();
    assert_eq!(
        names,
        [
            ("cp-kv-all-gather", Phase::Forward),
            ("cp-kv-all-gather", Phase::Backward),
            ("cp-grad-ring", Phase::Backward),
        ]
    );
    // The gradients' ring: 16 sends of the fp32 key/value gradients, twice the bf16 keys and
    // values' bytes, against the 15 the all-gather moves of them.
    let bytes = |name: &str, phase| {
        layer.ops.iter().find(|op| op.name == name && op.phase == phase).unwrap().bytes.value()
    };
    let gathered = bytes("cp-kv-all-gather", Phase::Forward);
    assert_eq!(bytes("cp-grad-ring", Phase::Backward), gathered / 15.0 * 2.0 * 16.0);

    // The fp32 merges after the local chunk, 15 of them: per output element forward, per query
    // and key/value gradient element backward (4096 and 2 x 4096 wide: torchtitan repeats the
    // 8 key/value heads up to the 32 query heads before the kernel; 1024 tokens a rank).
    let merge = |phase| {
        layer.ops.iter().find(|op| op.name == "cp-merge" && op.phase == phase).unwrap().bytes
    };
    let tokens = 16384.0 / 16.0;
    assert_eq!(merge(Phase::Forward).value(), MERGE_FORWARD_BYTES * tokens * 4096.0 * 15.0);
    let backward = MERGE_BACKWARD_QUERY_BYTES * 4096.0 + MERGE_BACKWARD_KV_BYTES * 8192.0;
    assert_eq!(merge(Phase::Backward).value(), backward * tokens * 15.0);

    // The forward's exposed exchange: the all-gather less the local chunk's attention.
    let segment = stage_segment(&torchtitan, 0);
    let work = segment_work(&torchtitan, &Tables::new(&torchtitan), segment);
    let forward = layer.totals.forward;
    let hidden = forward.attention * OVERLAP_EFFICIENCY * (1.0 / 16.0);
    let exposed = (forward.cp_gather - hidden).value().max(0.0);
    assert!(exposed > 0.0);
    let layers = torchtitan.model().num_layers() as f64;
    let expected = exposed * layers;
    assert!((work.forward_cp.value() / expected - 1.0).abs() < 1e-9, "{work:?} {expected}");

    // Megatron-Core's ring passes keys and values step by step, with no all-gather.
    let megatron = run("megatron-core-0.14-plus", Engine::Megatron);
    assert_eq!(megatron.stack().cp_kv_exchange(), CpKvExchange::Ring);
    let ring = transformer_layer(&megatron, true, Rows::TotalsOnly).totals;
    assert_eq!((ring.forward.cp_gather.value(), ring.backward.cp_gather.value()), (0.0, 0.0));
    assert!(ring.forward.cp_ring.value() > 0.0);
}

#[test]
fn repeated_key_value_heads_are_copied_and_are_what_the_ring_moves() {
    // Llama 3.1 8B: 32 query heads, 8 key/value heads of 128.
    let torchtitan = run("torchtitan-2024-12", Engine::Torchtitan);
    let megatron = run("megatron-core-0.14-plus", Engine::Megatron);
    assert!(torchtitan.stack().repeats_kv_heads());
    assert!(!megatron.stack().repeats_kv_heads());
    let ops = |run: &Run| transformer_layer(run, true, Rows::Keep).ops;
    let (repeated, native) = (ops(&torchtitan), ops(&megatron));
    let bytes = |ops: &[crate::cost::layer::Op], name: &str, phase| {
        ops.iter()
            .filter(|op| op.name == name && op.phase == phase)
            .map(|op| op.bytes.value())
            .sum::<f64>()
    };
    // The copy: read 2 x 1024 and write 2 x 4096 bf16 elements per token (1024 tokens a rank),
    // and the same traffic again to sum the copies' gradients.
    let copy = 2.0 * (4096.0 + 1024.0) * 2.0 * 1024.0;
    assert_eq!(bytes(&repeated, "repeat-kv", Phase::Forward), copy);
    assert_eq!(bytes(&repeated, "repeat-kv", Phase::Backward), copy);
    assert_eq!(bytes(&native, "repeat-kv", Phase::Forward), 0.0);
    // The ring moves the repeated heads: 15 of the 16 ranks' 2 x 4096-wide keys and values, four
    // times what Megatron-Core's ring moves per step (2 x 1024 wide, 15 steps).
    let gathered = bytes(&repeated, "cp-kv-all-gather", Phase::Forward);
    assert_eq!(gathered, 2.0 * 4096.0 * 2.0 * 1024.0 * 15.0);
    assert_eq!(gathered, 4.0 * bytes(&native, "cp-ring", Phase::Forward));
}

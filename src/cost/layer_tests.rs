//! Tests of the per-layer operation tables (`layer.rs`): every table of a model gives the same
//! totals whether its rows are kept or not, and a context-parallel ring that spans nodes is paced
//! by the NICs.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::layer::*;
use crate::plan::{PlanSpec, RecomputeKind};
use crate::presets;
use crate::run::{Run, test_run};
use crate::units::{Flops, Seconds};

/// Every table of DeepSeek-V3 (MoE, MLA, MTP) and Llama 3.1 8B under TP, CP and selective
/// recompute, built both ways.
fn tables(run: &Run, rows: Rows) -> Vec<OpTable> {
    vec![
        transformer_layer(run, true, rows),
        transformer_layer(run, false, rows),
        embedding(run, rows),
        head(run, rows),
        mtp_projection(run, rows),
    ]
}

fn runs() -> Vec<Run> {
    let plan = PlanSpec {
        tp: Some(4),
        cp: Some(2),
        recompute: Some(RecomputeKind::Selective),
        ..PlanSpec::default()
    };
    let dsv3 = PlanSpec { tp: Some(2), ep: Some(8), ..PlanSpec::default() };
    vec![
        test_run(presets::model("llama3.1-8b").unwrap(), 64, 8192, 64, 1, plan),
        test_run(presets::model("deepseek-v3").unwrap(), 256, 4096, 256, 1, dsv3),
    ]
}

#[test]
fn totals_are_the_sums_of_the_rows_whether_or_not_the_rows_are_kept() {
    for run in runs() {
        let kept = tables(&run, Rows::Keep);
        let summed = tables(&run, Rows::TotalsOnly);
        for (kept, summed) in kept.iter().zip(&summed) {
            assert!(summed.ops.is_empty());
            assert_eq!(kept.totals, summed.totals);
            let mut by_rows = OpTotals::default();
            kept.ops.iter().for_each(|op| by_rows.add(op));
            assert_eq!(by_rows, kept.totals);
            for phase in [Phase::Forward, Phase::Backward] {
                let rows = kept.ops.iter().filter(|op| op.phase == phase);
                let flops: Flops = rows.clone().map(|op| op.flops).sum();
                assert_eq!(kept.flops(phase), flops);
                let gemm: Seconds =
                    rows.filter(|op| op.kind == OpKind::Gemm).map(|op| op.time).sum();
                assert_eq!(kept.time(phase, OpKind::Gemm), gemm);
            }
        }
        assert!(kept[0].totals.forward.compute > Seconds::ZERO);
    }
}

#[test]
fn a_ring_that_spans_nodes_paces_every_step_at_the_nics() {
    // Llama 3.1 8B at cp 4 on H100 nodes of 8: at tp 2 the ring's 8 GPUs share a node, at
    // tp 4 its 16 GPUs span two and the hop between them sets every step (one NIC a GPU).
    let step = |tp: i64| {
        let plan = PlanSpec { tp: Some(tp), cp: Some(4), ..PlanSpec::default() };
        let run = test_run(presets::model("llama3.1-8b").unwrap(), 4 * tp, 32768, 1, 1, plan);
        let layer = transformer_layer(&run, true, Rows::Keep);
        let ring = layer.ops.iter().find(|op| op.name == "cp-ring").unwrap();
        let links = run.cluster().interconnect();
        let kv = ring.bytes * (1.0 / 3.0);
        let over =
            |size, stride| collective_time(links, Collective::SendRecv, Group { size, stride }, kv);
        (ring.time * (1.0 / 3.0), over(2, 1), over(2, 8))
    };
    let (within, nvlink, _) = step(2);
    assert_eq!(within, nvlink);
    let (across, _, network) = step(4);
    assert_eq!(across, network);
    assert!(across > within * 2.0, "{across:?} vs {within:?}");
}

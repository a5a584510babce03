//! Tests of how much TP communication `--tp-comm-overlap` hides: 80 % of it while the GEMMs it is
//! pipelined with last long enough, and no more than those GEMMs' time at the overlap efficiency
//! when the link is slow.

use crate::cost::work::{
    OVERLAP_EFFICIENCY, Segment, TP_COMM_OVERLAP_HIDDEN, Tables, segment_work, stage_segments,
};
use crate::plan::PlanSpec;
use crate::run::{Run, test_spec};
use crate::units::Seconds;

/// Llama 3.1 8B at tp 8 on one H100 node, its NVLink at `nvlink`, TP overlap `overlap`: the
/// forward's exposed TP time, its TP time without overlap, and its GEMM time.
fn forward(nvlink: &str, overlap: bool) -> (Seconds, Seconds, Seconds) {
    let plan = PlanSpec {
        tp: Some(8),
        sequence_parallel: Some(true),
        tp_comm_overlap: Some(overlap),
        ..PlanSpec::default()
    };
    let mut spec = test_spec("llama3.1-8b", 8, 8192, 8, 1, plan);
    spec.cluster.gpu.interconnect.nvlink_bandwidth = nvlink.to_owned();
    let run = Run::from_spec(&spec).unwrap();
    let tables = Tables::new(&run);
    // The layers alone: the embedding and the head have collectives and GEMMs of their own.
    let segment = Segment { first: false, last: false, ..stage_segments(&run)[0] };
    let work = segment_work(&run, &tables, segment);
    let gemm = tables.layers.layer.forward.gemm * segment.all.layers;
    let tp = tables.layers.layer.forward.tp * segment.all.layers;
    (work.forward_tp, tp, gemm)
}

#[test]
fn overlap_hides_four_fifths_of_the_tp_collectives_behind_long_gemms() {
    let (exposed, tp, gemm) = forward("450 GB/s", true);
    assert!(tp * TP_COMM_OVERLAP_HIDDEN < gemm * OVERLAP_EFFICIENCY, "{tp:?} vs {gemm:?}");
    let expected = tp * (1.0 - TP_COMM_OVERLAP_HIDDEN);
    assert!((exposed / expected - 1.0).abs() < 1e-9, "{exposed:?} vs {expected:?}");
    // Without overlap all of it is exposed.
    let (all, _, _) = forward("450 GB/s", false);
    assert!((all / tp - 1.0).abs() < 1e-9);
}

#[test]
fn overlap_hides_no_more_than_the_gemms_last_on_a_slow_link() {
    // At 5 GB/s the collectives outlast the GEMMs several times over.
    let (exposed, tp, gemm) = forward("5 GB/s", true);
    assert!(tp * TP_COMM_OVERLAP_HIDDEN > gemm * OVERLAP_EFFICIENCY, "{tp:?} vs {gemm:?}");
    let expected = tp - gemm * OVERLAP_EFFICIENCY;
    assert!((exposed / expected - 1.0).abs() < 1e-9, "{exposed:?} vs {expected:?}");
    assert!(exposed > tp * (1.0 - TP_COMM_OVERLAP_HIDDEN));
}

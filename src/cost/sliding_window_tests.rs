//! Tests of how a sliding-window layer's attention is priced: its forward at the rate of a
//! sequence of its window (the keys each query block reaches), its backward at the sequence's.

use std::sync::Arc;

use crate::cost::kernels::{attention_backward_time, attention_forward_time};
use crate::cost::layer::{OpTable, Phase, Rows, transformer_layer};
use crate::plan::PlanSpec;
use crate::presets;
use crate::run::{Run, test_spec};
use crate::units::Flops;

/// gpt-oss-120b (a 128-token window on every other layer) on 8 H100 at ep 8, one 4096-token
/// sequence per micro-batch.
fn gpt_oss() -> Run {
    let plan = PlanSpec { ep: Some(8), stack: Some("nemo-26.04".into()), ..PlanSpec::default() };
    let spec = test_spec("gpt-oss-120b", 8, 4096, 64, 1, plan);
    Run::from_spec_with_stack(&spec, Arc::new(presets::stack("nemo-26.04").unwrap())).unwrap()
}

fn attention(table: &OpTable, phase: Phase) -> (Flops, f64) {
    let op = table.ops.iter().find(|op| op.name == "attention" && op.phase == phase).unwrap();
    (op.flops, op.time.value())
}

#[test]
fn a_windowed_layers_forward_runs_at_its_windows_rate_and_its_backward_at_the_sequences() {
    let run = gpt_oss();
    let model = run.model();
    let gpu = run.cluster().gpu();
    let reach = model.layer_attention_flops_by_reach(4096);
    assert_eq!(reach.window, 128);
    // Per token, 2 x 64 heads x (64 + 64) dims x the keys: half the layers reach 2048 keys on
    // average, the other half 128 less the first positions' shortfall.
    let per_key = 2.0 * 64.0 * 128.0;
    assert_eq!(reach.full, per_key * 2048.0 / 2.0);
    assert_eq!(reach.windowed, per_key * (128.0 - 128.0 * 127.0 / 8192.0) / 2.0);
    let tokens = 4096.0;
    let (full, windowed) = (Flops::new(reach.full * tokens), Flops::new(reach.windowed * tokens));
    let (speed, backward_speed) = run.stack().attention_speed(gpu.generation());
    let head_dim = model.qk_head_dim() as f64;
    let table = transformer_layer(&run, false, Rows::Keep);
    let (flops, forward) = attention(&table, Phase::Forward);
    assert_eq!(flops, full + windowed);
    let expected = attention_forward_time(gpu, full, 4096.0, head_dim, speed)
        + attention_forward_time(gpu, windowed, 128.0, head_dim, speed);
    assert!((forward / expected.value() - 1.0).abs() < 1e-12);
    // The windowed part costs more than it would at the sequence's rate.
    let at_sequence = attention_forward_time(gpu, full + windowed, 4096.0, head_dim, speed);
    assert!(forward > at_sequence.value(), "{forward} vs {}", at_sequence.value());
    let (_, backward) = attention(&table, Phase::Backward);
    let expected = attention_backward_time(gpu, full + windowed, 4096.0, head_dim, backward_speed);
    assert!((backward / expected.value() - 1.0).abs() < 1e-12);
}

//! Tests of how a recipe's FP8 dot-product attention is priced: under MXFP8 the attention runs at
//! the GPU's measured MXFP8 speed against BF16 for its head dimension and length, and pays the
//! casts of its inputs; elsewhere it is priced as before.

use std::sync::Arc;

use crate::cost::kernels::{attention_backward_time, attention_forward_time};
use crate::cost::layer::{OpTable, Phase, Rows, transformer_layer};
use crate::plan::{PlanSpec, Precision};
use crate::presets;
use crate::run::{Run, test_spec};

/// `model` on 8 GB300 at ep 8 in `precision`, one 4096-token sequence per micro-batch, run by
/// NeMo 26.06 with FP8 attention on or off.
fn run(model: &str, precision: Precision, fp8_attention: bool) -> Run {
    let plan = PlanSpec { ep: Some(8), stack: Some("nemo-26.06".into()), ..PlanSpec::default() };
    let mut spec = test_spec(model, 8, 4096, 64, 1, plan);
    spec.cluster.gpu = presets::gpu("gb300").unwrap();
    spec.training.precision = Some(precision);
    let stack = presets::stack("nemo-26.06").unwrap();
    let stack = if fp8_attention { stack.with_fp8_attention() } else { stack };
    Run::from_spec_with_stack(&spec, Arc::new(stack)).unwrap()
}

fn time(table: &OpTable, name: &str, phase: Phase) -> Option<f64> {
    let op = table.ops.iter().find(|op| op.name == name && op.phase == phase)?;
    Some(op.time.value())
}

#[test]
fn mxfp8_attention_runs_at_the_measured_speed_for_its_head_dimension() {
    let fp8 = run("qwen3-30b-a3b", Precision::Mxfp8, true);
    let bf16_kernel = run("qwen3-30b-a3b", Precision::Mxfp8, false);
    let gpu = fp8.cluster().gpu();
    let model = fp8.model();
    assert_eq!(model.qk_head_dim(), 128);
    // GB300's cuDNN 9.24 ratios at 4096 tokens, head dimension 128.
    let (ratio_forward, ratio_backward) = gpu.mxfp8_attention_speed(128, 4096.0).unwrap();
    assert!((ratio_forward - 1.255).abs() < 1e-12 && (ratio_backward - 0.906).abs() < 1e-12);
    let (with, without) = (
        transformer_layer(&fp8, false, Rows::Keep),
        transformer_layer(&bf16_kernel, false, Rows::Keep),
    );
    let forward = time(&with, "attention", Phase::Forward).unwrap();
    let backward = time(&with, "attention", Phase::Backward).unwrap();
    let forward_bf16 = time(&without, "attention", Phase::Forward).unwrap();
    let backward_bf16 = time(&without, "attention", Phase::Backward).unwrap();
    assert!((forward_bf16 / forward - 1.255).abs() < 1e-9, "{forward_bf16} / {forward}");
    assert!((backward_bf16 / backward - 0.906).abs() < 1e-9, "{backward_bf16} / {backward}");
    // The same kernels as the BF16 curve, scaled: nothing else about the attention moves.
    let reach = model.layer_attention_flops_by_reach(4096);
    let flops = crate::units::Flops::new(reach.full * 4096.0);
    let (speed, backward_speed) = fp8.stack().attention_speed(gpu.generation());
    let expected = attention_forward_time(gpu, flops, 4096.0, 128.0, speed * 1.255);
    assert!((forward / expected.value() - 1.0).abs() < 1e-12);
    let expected = attention_backward_time(gpu, flops, 4096.0, 128.0, backward_speed * 0.906);
    assert!((backward / expected.value() - 1.0).abs() < 1e-12);
    // Its inputs are cast before the forward, the output and its gradient before the backward.
    for phase in [Phase::Forward, Phase::Backward] {
        assert!(time(&with, "attention-quantize", phase).unwrap() > 0.0);
        assert_eq!(time(&without, "attention-quantize", phase), None);
    }
}

#[test]
fn fp8_attention_is_priced_as_bf16_where_nothing_was_measured() {
    // Another recipe than MXFP8, and a head dimension with no measurement (gpt-oss's 64).
    for (model, precision) in
        [("qwen3-30b-a3b", Precision::Fp8Current), ("gpt-oss-120b", Precision::Mxfp8)]
    {
        let with = transformer_layer(&run(model, precision, true), false, Rows::Keep);
        let without = transformer_layer(&run(model, precision, false), false, Rows::Keep);
        for phase in [Phase::Forward, Phase::Backward] {
            assert_eq!(time(&with, "attention", phase), time(&without, "attention", phase));
            assert_eq!(time(&with, "attention-quantize", phase), None, "{model} {precision:?}");
        }
    }
}

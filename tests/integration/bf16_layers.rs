//! Tests of the layers a low-precision plan keeps in BF16 (`--bf16-layers-at-start`,
//! `--bf16-layers-at-end`; Megatron-LM's `--first-last-layers-bf16`): each is priced by the
//! BF16 tables, on the pipeline stage that holds it, and only Megatron-LM's export takes them.

use meshplan::closed_form;
use meshplan::cost::activations::stored_activation_bytes;
use meshplan::cost::work::stage_segments;
use meshplan::export::{Engine, export};
use meshplan::plan::{PlanSpec, Precision};
use meshplan::presets;
use meshplan::{Run, RunSpec};

use crate::support::{spec, training};

/// Llama 3.1 8B (32 layers) on 8 H100 at `precision`, keeping `(start, end)` layers in BF16.
fn llama(precision: Precision, pp: i64, (start, end): (i64, i64)) -> RunSpec {
    let plan = PlanSpec {
        pp: Some(pp),
        bf16_layers_at_start: Some(start),
        bf16_layers_at_end: Some(end),
        ..PlanSpec::default()
    };
    spec(
        presets::model("llama3.1-8b").unwrap(),
        "h100-sxm",
        8,
        training(4096, 64, 1, Some(precision)),
        plan,
    )
}

fn step(spec: &RunSpec) -> f64 {
    closed_form(&Run::from_spec(spec).unwrap()).time.step_time().value()
}

/// Checks that keeping n of Llama 3.1 8B's 32 layers in BF16 moves `measure` n / 32 of the way
/// from the all-FP8 run to the all-BF16 one, for each `(start, end)` of `kept` (no pipeline, so
/// every layer counts alike), and returns the all-FP8 and all-BF16 values.
fn interpolates(measure: impl Fn(&RunSpec) -> f64, kept: &[(i64, i64)]) -> (f64, f64) {
    let fp8 = measure(&llama(Precision::Fp8Current, 1, (0, 0)));
    let bf16 = measure(&llama(Precision::Bf16, 1, (0, 0)));
    for &kept in kept {
        let n = (kept.0 + kept.1) as f64;
        let expected = fp8 + n / 32.0 * (bf16 - fp8);
        let actual = measure(&llama(Precision::Fp8Current, 1, kept));
        assert!((actual / expected - 1.0).abs() < 1e-9, "{kept:?}: {actual} vs {expected}");
    }
    (fp8, bf16)
}

#[test]
fn each_layer_kept_in_bf16_costs_a_bf16_layer_instead_of_an_fp8_one() {
    // Without a pipeline the step is the sum of its layers, whichever end they are at.
    let (fp8, bf16) = interpolates(step, &[(1, 1), (0, 4), (3, 0), (8, 8)]);
    assert!(bf16 > fp8 * 1.2, "BF16 GEMMs are slower: {bf16} vs {fp8}");
}

#[test]
fn each_layer_kept_in_bf16_stores_its_gemm_inputs_in_bf16() {
    // Without recompute or a pipeline a micro-batch stores every layer's activations: all-FP8
    // keeps one-byte GEMM inputs, all-BF16 two-byte ones.
    let stored = |spec: &RunSpec| {
        let run = Run::from_spec(spec).unwrap();
        stored_activation_bytes(&run, &stage_segments(&run)[0]).value()
    };
    let (fp8, bf16) = interpolates(stored, &[(1, 1), (0, 4), (8, 8)]);
    assert!(bf16 > fp8 * 1.1, "BF16 GEMM inputs are wider: {bf16} vs {fp8}");
}

#[test]
fn the_kept_layers_sit_on_the_first_and_last_pipeline_stages() {
    let run = Run::from_spec(&llama(Precision::Fp8Current, 4, (1, 3))).unwrap();
    let kept: Vec<f64> = stage_segments(&run).iter().map(|s| s.bf16.layers).collect();
    assert_eq!(kept, [1.0, 0.0, 0.0, 3.0]);
    // The last stage, slower by its BF16 layers, sets the pipeline's pace: the step is slower
    // than keeping none.
    let none = step(&llama(Precision::Fp8Current, 4, (0, 0)));
    assert!(step(&llama(Precision::Fp8Current, 4, (1, 3))) > none);
}

#[test]
fn bf16_layers_need_a_low_precision_and_fit_a_stage() {
    let refused = |spec: RunSpec| Run::from_spec(&spec).unwrap_err().to_string();
    let text = refused(llama(Precision::Bf16, 1, (0, 2)));
    assert!(
        text.contains("plan.bf16_layers_at_end = 2") && text.contains("bf16 already"),
        "{text}"
    );
    // Megatron-Core refuses more than a pipeline stage's layers at either end.
    let text = refused(llama(Precision::Fp8Current, 4, (9, 0)));
    assert!(text.contains("plan.bf16_layers_at_start = 9"), "{text}");
    assert!(text.contains("the 8 layers of a pipeline stage"), "{text}");
    let text = refused(llama(Precision::Fp8Current, 1, (-1, 0)));
    assert!(text.contains("plan.bf16_layers_at_start = -1"), "{text}");
}

#[test]
fn megatron_writes_the_bf16_layers_and_the_other_engines_refuse_them() {
    let run = Run::from_spec(&llama(Precision::Fp8Current, 1, (1, 2))).unwrap();
    let args = export(Engine::Megatron, &run).unwrap();
    for flag in [
        "--first-last-layers-bf16",
        "--num-layers-at-start-in-bf16 1",
        "--num-layers-at-end-in-bf16 2",
    ] {
        assert!(args.lines().any(|line| line == flag), "{flag} in\n{args}");
    }
    let mut spec = llama(Precision::Fp8Current, 1, (1, 2));
    spec.plan.engine = Some(Engine::Torchtitan);
    let run = Run::from_spec(&spec).unwrap();
    let err = export(Engine::Torchtitan, &run).unwrap_err().to_string();
    assert!(err.contains("keeps layers at the ends of the model in BF16"), "{err}");
    // A plan keeping none writes none of the flags.
    let run = Run::from_spec(&llama(Precision::Fp8Current, 1, (0, 0))).unwrap();
    assert!(!export(Engine::Megatron, &run).unwrap().contains("layers-bf16"));
}

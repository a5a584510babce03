//! Tests of what a release's recipe decides for a row that leaves it blank: tensor-parallel
//! communication overlap, which NeMo's Llama recipes turn off under NVFP4.

use super::mapping::{Calibration, evaluate_row};
use super::row::CalibrationRow;
use crate::presets::StackCatalog;

/// Megatron-Bridge's Llama 3.1 405B on 256 GB300 (tp 4, pp 8, vp 4) in NeMo 26.06.
fn llama_405b(precision: &str, other_settings: &str) -> CalibrationRow {
    CalibrationRow {
        row_id: "1".into(),
        source_id: "megatron_bridge_perf".into(),
        software_or_release: "NeMo 26.06 container (Megatron-Bridge + Megatron-Core)".into(),
        model: "LLAMA3.1_405B".into(),
        arch_type: "dense".into(),
        num_layers: "126".into(),
        hidden_size: "16384".into(),
        ffn_hidden_size: "53248".into(),
        num_attention_heads: "128".into(),
        num_kv_heads: "8".into(),
        vocab_size: "128256".into(),
        seq_length: "8192".into(),
        gpu_type: "GB300 (DGX-GB300 NVL72)".into(),
        num_gpus: "256".into(),
        tp: "4".into(),
        pp: "8".into(),
        vp: "4".into(),
        cp: "1".into(),
        micro_batch_size: "1".into(),
        global_batch_size: "1536".into(),
        precision: precision.into(),
        other_settings: other_settings.into(),
        tokens_per_sec_per_gpu: "1400".into(),
        ..CalibrationRow::default()
    }
}

#[test]
fn nvfp4_llama_recipes_run_without_tp_communication_overlap() {
    let stacks = StackCatalog::builtin().unwrap();
    let evaluate = |row: &CalibrationRow| evaluate_row(row, &Calibration::new(), &stacks);
    // NVFP4: the recipe's `tp_comm_overlap = False if precision == "nvfp4"`.
    let nvfp4 = evaluate(&llama_405b("NVFP4", ""));
    assert_eq!(nvfp4.skipped_reason, None);
    let plan = nvfp4.plan.as_deref().unwrap();
    assert!(plan.starts_with("tp4 pp8 vp4") && !plan.contains("tp-overlap"), "{plan}");
    let text = nvfp4.assumptions.join("\n");
    assert!(text.contains("TP communication overlap off"), "{text}");
    assert!(text.contains("nemo-26.06: sequence parallel by its defaults"), "{text}");
    // MXFP8: no recipe decides it, so the stack's default (on) holds and is listed.
    let mxfp8 = evaluate(&llama_405b("MXFP8", ""));
    assert!(mxfp8.plan.as_deref().unwrap().contains("tp-overlap"));
    let text = mxfp8.assumptions.join("\n");
    assert!(text.contains("sequence parallel and TP communication overlap by its defaults"));
    // What the row states wins over the recipe.
    let stated = evaluate(&llama_405b("NVFP4", "--tp-comm-overlap"));
    assert!(stated.plan.as_deref().unwrap().contains("tp-overlap"));
    assert!(!stated.assumptions.join("\n").contains("TP communication overlap off"));
    // Turning the overlap off exposes the TP collectives: the prediction is slower.
    let (off, on) =
        (nvfp4.predicted_tokens_per_sec_per_gpu, stated.predicted_tokens_per_sec_per_gpu);
    assert!(off.unwrap() < on.unwrap(), "{off:?} vs {on:?}");
}

/// Nemotron 3 Super's NVFP4 recipe keeps its last 14 layers in BF16 (and its MXFP8 one none).
#[test]
fn nemotron_3_super_under_nvfp4_keeps_its_last_14_layers_in_bf16() {
    let stacks = StackCatalog::builtin().unwrap();
    let row = |precision: &str| CalibrationRow {
        row_id: "1".into(),
        source_id: "megatron_bridge_perf".into(),
        software_or_release: "NeMo 26.06 container (Megatron-Bridge + Megatron-Core)".into(),
        model: "Nemotron_3_Super".into(),
        arch_type: "hybrid-mamba-moe".into(),
        seq_length: "8192".into(),
        gpu_type: "GB200 (DGX-GB200 NVL72)".into(),
        num_gpus: "64".into(),
        tp: "2".into(),
        pp: "1".into(),
        cp: "1".into(),
        ep: "64".into(),
        micro_batch_size: "1".into(),
        global_batch_size: "512".into(),
        precision: precision.into(),
        tokens_per_sec_per_gpu: "7000".into(),
        ..CalibrationRow::default()
    };
    let evaluate = |row: &CalibrationRow| evaluate_row(row, &Calibration::new(), &stacks);
    let nvfp4 = evaluate(&row("NVFP4"));
    assert_eq!(nvfp4.skipped_reason, None);
    let text = nvfp4.assumptions.join("\n");
    assert!(text.contains("the last 14 layers in BF16"), "{text}");
    assert!(text.contains("TP communication overlap off"), "{text}");
    let mxfp8 = evaluate(&row("MXFP8"));
    assert!(!mxfp8.assumptions.join("\n").contains("layers in BF16"));
    // Eight pipeline stages hold 11 of the 88 layers each: the recipe's 14 do not fit one, so
    // they are not taken, and the row is still priced.
    let piped = evaluate(&CalibrationRow { pp: "8".into(), ep: "8".into(), ..row("NVFP4") });
    assert_eq!(piped.skipped_reason, None);
    let text = piped.assumptions.join("\n");
    assert!(
        text.contains("not taken: the last 14 layers in BF16 (more than the row's 11"),
        "{text}"
    );
}

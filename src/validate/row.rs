//! One row of a calibration CSV, every column kept as the text the source gave.

use serde::Deserialize;

/// A calibration row with the columns of `shared/calibration/runs.csv`. Empty cells are empty
/// strings; interpretation happens in `mapping.rs` and `measured.rs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct CalibrationRow {
    pub row_id: String,
    #[serde(default)]
    pub source_id: String,
    #[serde(default)]
    pub source_title: String,
    #[serde(default)]
    pub software_or_release: String,
    #[serde(default)]
    pub task: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub arch_type: String,
    #[serde(default)]
    pub num_layers: String,
    #[serde(default)]
    pub hidden_size: String,
    #[serde(default)]
    pub ffn_hidden_size: String,
    #[serde(default)]
    pub num_attention_heads: String,
    #[serde(default)]
    pub num_kv_heads: String,
    #[serde(default)]
    pub vocab_size: String,
    #[serde(default)]
    pub seq_length: String,
    #[serde(default)]
    pub num_experts: String,
    #[serde(default)]
    pub moe_top_k: String,
    #[serde(default)]
    pub moe_ffn_hidden_size: String,
    #[serde(default)]
    pub num_shared_experts: String,
    #[serde(default)]
    pub arch_notes: String,
    #[serde(default)]
    pub gpu_type: String,
    #[serde(default)]
    pub num_gpus: String,
    #[serde(default)]
    pub tp: String,
    #[serde(default)]
    pub pp: String,
    #[serde(default)]
    pub vp: String,
    #[serde(default)]
    pub dp: String,
    #[serde(default)]
    pub cp: String,
    #[serde(default)]
    pub ep: String,
    #[serde(default)]
    pub etp: String,
    #[serde(default)]
    pub zero_or_fsdp: String,
    #[serde(default)]
    pub micro_batch_size: String,
    #[serde(default)]
    pub global_batch_size: String,
    #[serde(default)]
    pub grad_accum: String,
    #[serde(default)]
    pub activation_recompute: String,
    #[serde(default)]
    pub precision: String,
    #[serde(default)]
    pub sequence_parallel: String,
    #[serde(default)]
    pub other_settings: String,
    #[serde(default)]
    pub tflops_per_gpu: String,
    #[serde(default)]
    pub tflops_definition: String,
    #[serde(default)]
    pub mfu_pct: String,
    #[serde(default)]
    pub hfu_pct: String,
    #[serde(default)]
    pub tokens_per_sec_per_gpu: String,
    #[serde(default)]
    pub tokens_per_sec_total: String,
    #[serde(default)]
    pub step_time_s: String,
    #[serde(default)]
    pub peak_memory_gib: String,
    #[serde(default)]
    pub notes: String,
}

/// Reads every row; extra columns are ignored, missing optional ones are empty.
pub(super) fn parse_rows(text: &str) -> Result<Vec<CalibrationRow>, csv::Error> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    reader.deserialize().collect()
}

/// The cell as a number, or `None` when blank or not a plain number.
pub(super) fn number(cell: &str) -> Option<f64> {
    let cell = cell.trim().replace(',', "");
    if cell.is_empty() { None } else { cell.parse().ok().filter(|v: &f64| v.is_finite()) }
}

/// The cell as a positive whole number.
pub(super) fn count(cell: &str) -> Option<u64> {
    number(cell).filter(|v| *v > 0.0 && v.fract() == 0.0).map(|v| v as u64)
}

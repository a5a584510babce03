//! One row of a calibration CSV, every column kept as the text the source gave.

use std::sync::Arc;

use serde::Deserialize;

use crate::presets::StackCatalog;
use crate::stack::Stack;

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
    pub other_metrics: String,
    #[serde(default)]
    pub notes: String,
}

impl CalibrationRow {
    /// The software stack the row ran on: the one its `software_or_release` text names, else
    /// the one its `other_settings` name (a benchmark harness that runs several frameworks),
    /// else the generic stack. Nothing else about the row's source is read.
    pub(super) fn stack<'a>(&self, stacks: &'a StackCatalog) -> &'a Arc<Stack> {
        stacks.for_software_or_settings(&self.software_or_release, &self.other_settings)
    }
}

/// Reads every row; extra columns are ignored, missing optional ones are empty.
pub(super) fn parse_rows(text: &str) -> Result<Vec<CalibrationRow>, super::ValidateError> {
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    check_header(reader.headers()?)?;
    Ok(reader.deserialize().collect::<Result<_, _>>()?)
}

/// The columns without which no row can be priced: a file that lacks one (a misspelled name, say)
/// is refused rather than validated with every row skipped.
const REQUIRED_COLUMNS: [&str; 10] = [
    "row_id",
    "model",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
    "seq_length",
    "gpu_type",
    "num_gpus",
    "global_batch_size",
];

/// Columns of the shared calibration file that carry provenance only, kept but never read.
const PROVENANCE_COLUMNS: [&str; 6] = [
    "source_location",
    "source_url",
    "arch_source",
    "mfu_peak_basis",
    "inferred_fields",
    "reliability",
];

/// Every required column present and every column known, else one error listing them all.
fn check_header(header: &csv::StringRecord) -> Result<(), super::ValidateError> {
    let known = known_columns();
    let present: Vec<&str> = header.iter().map(str::trim).collect();
    let missing: Vec<&str> =
        REQUIRED_COLUMNS.into_iter().filter(|c| !present.contains(c)).collect();
    let unknown: Vec<&str> = present
        .iter()
        .copied()
        .filter(|c| !known.contains(c) && !PROVENANCE_COLUMNS.contains(c))
        .collect();
    if missing.is_empty() && unknown.is_empty() {
        return Ok(());
    }
    Err(super::ValidateError::Header { missing: missing.join(", "), unknown: unknown.join(", ") })
}

/// The columns [`CalibrationRow`] reads: its field names, as serde sees them.
fn known_columns() -> &'static [&'static str] {
    serde_aux::serde_introspection::serde_introspect::<CalibrationRow>()
}

/// The cell as a number, or `None` when blank or not a plain number.
pub(super) fn number(cell: &str) -> Option<f64> {
    let cell = cell.trim().replace(',', "");
    if cell.is_empty() { None } else { cell.parse().ok().filter(|v: &f64| v.is_finite()) }
}

/// The cell as a positive number: a measured figure (throughput, time, memory) that is zero or
/// negative is not a measurement.
pub(super) fn positive(cell: &str) -> Option<f64> {
    number(cell).filter(|v| *v > 0.0)
}

/// The cell as a positive whole number.
pub(super) fn count(cell: &str) -> Option<u64> {
    number(cell).filter(|v| *v > 0.0 && v.fract() == 0.0).map(|v| v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_required_column_is_refused_naming_it() {
        let text = "row_id,model,num_layer,hidden_size,num_attention_heads,vocab_size,seq_length,\
                    gpu_type,num_gpus,global_batch_size\n1,x,2,64,4,100,8,h100,8,8\n";
        let err = parse_rows(text).unwrap_err().to_string();
        assert!(err.contains("lacks [num_layers]") && err.contains("unknown columns [num_layer]"));
    }

    #[test]
    fn the_shared_file_header_is_accepted() {
        let header = include_str!("../../data/calibration/runs.csv").lines().next().unwrap();
        assert!(parse_rows(&format!("{header}\n")).unwrap().is_empty());
    }
}

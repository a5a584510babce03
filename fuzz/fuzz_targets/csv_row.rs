//! Feeds arbitrary bytes as one calibration CSV row (after the real header of
//! `data/calibration/runs.csv`) to the row parser (`CalibrationRow` through `csv`) and to
//! `validate::evaluate_csv` (mapping, measured figures, run, simulated estimate); asserts no
//! panic, one result per parsed row, and that every figure a result reports (measured and
//! predicted throughput, predicted memory, error percentages) is finite, throughput positive and
//! memory non-negative. One input in 4096 (by its first two bytes) also goes through the whole
//! `validate::validate_csv_with` (held-out refits, accuracy, bands, summary), whose fixed cost (~50 ms)
//! would otherwise bound the run at ~20 executions a second (at one in 64 it still held the run
//! near 1,000 a second). Inputs are capped at 4 KiB: a row
//! that maps to a large run is simulated, which is the expensive part.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use meshplan::presets::StackCatalog;
use meshplan::validate::{CalibrationRow, RowResult, evaluate_csv, validate_csv_with};

const RUNS: &str = include_str!("../../data/calibration/runs.csv");

/// The built-in stacks, read once for the whole run (as one validation reads them once).
static STACKS: OnceLock<StackCatalog> = OnceLock::new();

fn finite(what: &str, value: Option<f64>) {
    if let Some(value) = value {
        assert!(value.is_finite(), "{what} = {value}");
    }
}

fn check_rows(rows: &[RowResult], parsed: &Result<Vec<CalibrationRow>, csv::Error>) {
    if let Ok(parsed) = parsed {
        assert_eq!(rows.len(), parsed.len());
    }
    for result in rows {
        finite("measured tokens/s/GPU", result.measured_tokens_per_sec_per_gpu);
        finite("predicted tokens/s/GPU", result.predicted_tokens_per_sec_per_gpu);
        finite("error %", result.error_pct);
        finite("measured memory GiB", result.measured_memory_gib);
        finite("predicted memory GiB", result.predicted_memory_gib);
        finite("memory error %", result.memory_error_pct);
        if let Some(measured) = result.measured_tokens_per_sec_per_gpu {
            assert!(measured > 0.0, "measured tokens/s/GPU {measured}");
        }
        if let Some(predicted) = result.predicted_tokens_per_sec_per_gpu {
            assert!(predicted > 0.0, "predicted tokens/s/GPU {predicted}");
            assert!(result.skipped_reason.is_none());
        }
        if let Some(memory) = result.predicted_memory_gib {
            assert!(memory >= 0.0, "predicted memory {memory} GiB");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 4096 {
        return;
    }
    let Ok(row) = std::str::from_utf8(data) else { return };
    let header = RUNS.lines().next().unwrap();
    let text = format!("{header}\n{row}");
    let parsed: Result<Vec<CalibrationRow>, csv::Error> = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes())
        .deserialize()
        .collect();
    let stacks = STACKS.get_or_init(|| StackCatalog::builtin().expect("the built-in stacks read"));
    let Ok(rows) = evaluate_csv(&text, stacks) else {
        assert!(parsed.is_err(), "evaluate_csv refused a CSV the row type reads");
        return;
    };
    check_rows(&rows, &parsed);
    if data.len() < 2 || data[0] % 64 != 0 || data[1] % 64 != 0 {
        return;
    }
    let report =
        validate_csv_with(&text, stacks).expect("validate_csv reads what evaluate_csv read");
    check_rows(&report.rows, &parsed);
    let summary = &report.summary;
    assert_eq!(summary.rows, report.rows.len());
    assert_eq!(summary.predicted + summary.skipped, summary.rows);
    finite("median |error| %", summary.median_abs_error_pct);
    finite("p90 |error| %", summary.p90_abs_error_pct);
    finite("mean error %", summary.mean_error_pct);
    finite("memory median |error| %", summary.memory_median_abs_error_pct);
});

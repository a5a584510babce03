//! Feeds arbitrary bytes as one calibration CSV row (after the real header of
//! `data/calibration/runs.csv`) to the row parser (`CalibrationRow` through `csv`) and to
//! `validate::validate_csv`; asserts no panic, one result per parsed row, and that every figure
//! a result or the summary reports (measured and predicted throughput, predicted memory, error
//! percentages) is finite, throughput positive and memory non-negative. Inputs are capped at
//! 4 KiB: a row that maps to a large run is simulated, which is the expensive part.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::validate::{CalibrationRow, validate_csv};

const RUNS: &str = include_str!("../../data/calibration/runs.csv");

fn finite(what: &str, value: Option<f64>) {
    if let Some(value) = value {
        assert!(value.is_finite(), "{what} = {value}");
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
    let Ok(report) = validate_csv(&text) else {
        assert!(parsed.is_err(), "validate_csv refused a CSV the row type reads");
        return;
    };
    if let Ok(parsed) = &parsed {
        assert_eq!(report.rows.len(), parsed.len());
    }
    for result in &report.rows {
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
    let summary = &report.summary;
    assert_eq!(summary.rows, report.rows.len());
    assert_eq!(summary.predicted + summary.skipped, summary.rows);
    finite("median |error| %", summary.median_abs_error_pct);
    finite("p90 |error| %", summary.p90_abs_error_pct);
    finite("mean error %", summary.mean_error_pct);
    finite("memory median |error| %", summary.memory_median_abs_error_pct);
});

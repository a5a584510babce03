//! The accuracy gate: predicts every row of `data/calibration/runs.csv` and holds the dense
//! rows to the figures the README reports (issue #2: at least 90% predicted, median absolute
//! error at most 8%, 90th percentile at most 20%), context-parallel rows to a median of 8% and
//! mixture-of-experts rows to what the model reaches today. Also: the out-of-sample
//! (leave-one-source-out) figures `validate` leads with, and the measured coverage of the 80 %
//! error bands, whose table `data/error-bands.json` must be what the CSV regenerates.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use meshplan::validate::{ValidationReport, validate_csv};

use crate::support::{read_repo_file, repo_path, run};

/// The in-repository copy of the shared calibration table (see `data/calibration/README.md`).
fn calibration_text() -> String {
    read_repo_file("data/calibration/runs.csv")
}

/// The validation of the calibration table, computed once for every test here (it refits the
/// calibration once per source).
fn report() -> &'static ValidationReport {
    static REPORT: OnceLock<ValidationReport> = OnceLock::new();
    REPORT.get_or_init(|| validate_csv(&calibration_text()).unwrap())
}

/// The share of the selected rows that is predicted, and the median and p90 |error| %.
fn accuracy(select: impl Fn(&BTreeMap<String, String>) -> bool) -> (f64, f64, f64) {
    let text = calibration_text();
    let report = report();
    let selected: BTreeMap<String, bool> = csv::Reader::from_reader(text.as_bytes())
        .deserialize::<BTreeMap<String, String>>()
        .map(|row| {
            let row = row.unwrap();
            (row["row_id"].clone(), select(&row))
        })
        .collect();
    let rows: Vec<_> = report.rows.iter().filter(|r| selected[&r.row_id]).collect();
    let errors: Vec<f64> = rows.iter().filter_map(|r| r.error_pct.map(f64::abs)).collect();
    let share = errors.len() as f64 / rows.len() as f64;
    let median = meshplan::validate::percentile(&errors, 0.5).unwrap();
    let p90 = meshplan::validate::percentile(&errors, 0.9).unwrap();
    (share, median, p90)
}

#[test]
fn dense_rows_meet_the_accuracy_targets() {
    let (share, median, p90) = accuracy(|row| row["arch_type"] == "dense");
    assert!(share >= 0.90, "only {:.1}% of dense rows predicted", share * 100.0);
    assert!(median <= 8.0, "median |error| {median:.2}% > 8%");
    assert!(p90 <= 20.0, "p90 |error| {p90:.2}% > 20%");
}

#[test]
fn context_parallel_rows_meet_the_accuracy_target() {
    let (share, median, _) = accuracy(|row| !matches!(row["cp"].trim(), "" | "1"));
    assert!(share >= 0.90, "only {:.1}% of CP rows predicted", share * 100.0);
    assert!(median <= 8.0, "CP median |error| {median:.2}% > 8%");
}

#[test]
fn mixture_of_experts_rows_are_priced() {
    // Issue #5 asks for a median |error| of at most 10% on MoE rows; the model reaches about 19%
    // today (README, Accuracy). This gate holds what is reached so a regression fails.
    let (share, median, _) = accuracy(|row| row["arch_type"] == "moe");
    assert!(share >= 0.90, "only {:.1}% of MoE rows predicted", share * 100.0);
    assert!(median <= 21.0, "MoE median |error| {median:.2}% > 21%");
}

#[test]
fn every_row_is_either_predicted_or_skipped_with_a_reason() {
    let report = report();
    assert_eq!(report.summary.rows, 550);
    for row in &report.rows {
        assert_eq!(row.error_pct.is_some(), row.skipped_reason.is_none(), "row {}", row.row_id);
    }
    assert_eq!(report.summary.predicted + report.summary.skipped, report.summary.rows);
}

#[test]
fn gpu_presets_carry_the_fitted_calibration() {
    // The `calibration` factor in each GPU preset must be what `meshplan calibrate` fits today: a
    // cost-model change that moves the fit without a reviewed preset update fails here.
    let report = meshplan::validate::calibrate_csv(&calibration_text()).unwrap();
    assert!(report.fits.len() >= 10, "{:?}", report.fits);
    for fit in &report.fits {
        let preset = meshplan::presets::gpu(&fit.gpu).unwrap();
        let stored = preset.efficiency.calibration.unwrap_or(1.0);
        assert!(
            (stored - fit.factor).abs() < 0.005,
            "{}: preset calibration {stored} but the fit gives {:.3}; run `meshplan calibrate` and update presets/gpus/{}.toml",
            fit.gpu,
            fit.factor,
            fit.gpu
        );
        let residual = fit.fitted_median_error_pct.unwrap();
        assert!(residual.abs() < 0.5, "{}: median error {residual} after the fit", fit.gpu);
    }
    // A preset without runs of its own carries the factor fitted for its silicon's preset; every
    // `calibrated_as` names a preset.
    for file in meshplan::presets::GPUS {
        let preset = meshplan::presets::gpu(file.name).unwrap();
        let Some(sibling) = preset.efficiency.calibrated_as.as_deref() else { continue };
        let reference = meshplan::presets::gpu(sibling).unwrap();
        assert!(reference.efficiency.calibrated_as.is_none(), "{sibling} borrows in turn");
        if report.fits.iter().any(|fit| fit.gpu == file.name) {
            continue;
        }
        let stored = preset.efficiency.calibration.unwrap_or(1.0);
        let fit = report.fits.iter().find(|fit| fit.gpu == sibling).unwrap();
        assert!(
            (stored - fit.factor).abs() < 0.005,
            "{}: preset calibration {stored} but {sibling}'s fit gives {:.3}",
            file.name,
            fit.factor
        );
    }
}

#[test]
fn held_out_sources_are_predicted_within_the_reported_bounds() {
    // Leave-one-source-out accuracy, the out-of-sample figure the README reports.
    let report = meshplan::validate::calibrate_csv(&calibration_text()).unwrap();
    let overall = &report.cross_validation.overall;
    assert!(overall.predicted >= 300);
    let median = overall.median_abs_error_pct.unwrap();
    let p90 = overall.p90_abs_error_pct.unwrap();
    assert!(median <= 6.0, "held-out median |error| {median:.2}%");
    assert!(p90 <= 20.0, "held-out p90 |error| {p90:.2}%");
}

#[test]
fn every_predicted_row_has_a_held_out_prediction() {
    for row in &report().rows {
        assert_eq!(row.error_pct.is_some(), row.held_out_error_pct.is_some(), "row {}", row.row_id);
    }
    let skipped: usize = report().summary.skipped_reasons.iter().map(|r| r.rows).sum();
    assert_eq!(skipped, report().summary.skipped);
}

#[test]
fn the_error_band_table_is_what_the_calibration_table_gives() {
    // Like the preset calibration factors: a cost-model or data change that moves the bands fails
    // here until the table is regenerated and reviewed.
    let stored = read_repo_file("data/error-bands.json");
    assert!(
        report().bands.to_json() == stored,
        "data/error-bands.json is stale: run `meshplan calibrate data/calibration/runs.csv \
         --write-bands data/error-bands.json`"
    );
    assert_eq!(meshplan::validate::BandTable::embedded(), report().bands);
}

/// The number after `prefix` on the first line of `text` that holds it.
fn figure_after(text: &str, prefix: &str) -> f64 {
    let start =
        text.find(prefix).unwrap_or_else(|| panic!("no `{prefix}` in:\n{text}")) + prefix.len();
    let number: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    number.parse().unwrap_or_else(|_| panic!("no number after `{prefix}`"))
}

#[test]
fn validate_leads_with_out_of_sample_accuracy_and_calibrated_bands() {
    let csv = repo_path("data/calibration/runs.csv");
    let output = run(&["validate", csv.to_str().unwrap()]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    let text = output.stdout;
    assert!(text.starts_with("Accuracy: LOSO = leave-one-source-out"), "{}", &text[..200]);
    let accuracy = &text[..text.find("\n| row ").expect("the per-row table follows")];
    for kind in ["all", "dense", "moe", "hybrid", "cp"] {
        assert!(accuracy.contains(&format!("\n| {kind} ")), "no {kind} row in:\n{accuracy}");
    }
    // The printed held-out figures are the library's.
    let dense = report().accuracy.kinds.iter().find(|k| k.kind == "dense").unwrap();
    let median = dense.held_out.median_abs_error_pct.unwrap();
    assert!(accuracy.contains(&format!("{median:.1}")), "{accuracy}");
    // Issue #12's target for the dense rows out of sample.
    assert!(median <= 6.0, "dense held-out median |error| {median:.2}%");
    let line = accuracy.lines().find(|l| l.starts_with("Rank agreement in sweeps")).unwrap();
    let tau = figure_after(line, "weighted Kendall tau-b ");
    assert!(tau > 0.0 && tau <= 1.0, "weighted tau-b {tau}");
    assert!(figure_after(line, " over ") >= 20.0, "too few sweeps");
    // The bands are checked on sources they were not built from; an 80 % band must hold for
    // roughly 80 % of them.
    let line = accuracy.lines().find(|l| l.starts_with("80 % band coverage: ")).unwrap();
    let coverage = figure_after(line, "80 % band coverage: ");
    let rows = figure_after(line, " % of ");
    assert!(rows >= 400.0, "coverage over {rows} rows only");
    assert!((65.0..=95.0).contains(&coverage), "80 % bands cover {coverage} % of held-out rows");
    assert!(accuracy.contains("Skipped: "), "{accuracy}");
}

#[test]
fn at_least_nine_in_ten_hybrid_rows_are_predicted() {
    // The hybrid Mamba-2 rows state no shape: each is priced from its model's preset.
    let report = report();
    let hybrid = report.accuracy.kinds.iter().find(|k| k.kind == "hybrid").unwrap();
    let in_file = report.rows.iter().filter(|r| r.architecture.starts_with("hybrid")).count();
    assert!(in_file >= 50, "{in_file} hybrid rows in the file");
    let predicted = hybrid.held_out.predicted;
    assert!(predicted * 10 >= in_file * 9, "{predicted} of {in_file} predicted");
}

#[test]
fn renaming_every_source_id_changes_no_prediction() {
    // A row's source plays no part in its prediction: the software comes from its
    // `software_or_release` text. Rename every source and compare each row's in-sample result.
    let text = calibration_text();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = headers.iter().position(|h| h == "source_id").unwrap();
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(&headers).unwrap();
    for (i, record) in reader.records().enumerate() {
        let record = record.unwrap();
        let renamed: Vec<String> = record
            .iter()
            .enumerate()
            .map(|(c, v)| if c == column { format!("unseen_{}", i % 7) } else { v.to_owned() })
            .collect();
        writer.write_record(&renamed).unwrap();
    }
    let renamed = String::from_utf8(writer.into_inner().unwrap()).unwrap();
    let original = meshplan::validate::validate_csv(&text).unwrap();
    let other = meshplan::validate::validate_csv(&renamed).unwrap();
    assert_eq!(original.rows.len(), other.rows.len());
    for (a, b) in original.rows.iter().zip(&other.rows) {
        assert_eq!(
            a.predicted_tokens_per_sec_per_gpu, b.predicted_tokens_per_sec_per_gpu,
            "row {}",
            a.row_id
        );
        assert_eq!(a.predicted_memory_gib, b.predicted_memory_gib, "row {}", a.row_id);
        assert_eq!(a.assumptions, b.assumptions, "row {}", a.row_id);
        assert_eq!(a.stack, b.stack, "row {}", a.row_id);
    }
}

/// Issue #12: at most 2 % of the published runs meshplan predicts are predicted not to fit in
/// GPU memory, and each one says by how much and what is largest.
#[test]
fn at_most_two_percent_of_published_runs_are_predicted_not_to_fit() {
    let report = report();
    let predicted = report.rows.iter().filter(|r| r.error_pct.is_some()).count();
    let over = &report.over_capacity;
    let share = over.len() as f64 / predicted as f64;
    assert!(share <= 0.02, "{} of {predicted} predicted not to fit: {over:?}", over.len());
    for row in over {
        assert!(row.over_gib > 0.0 && !row.largest_part.is_empty(), "{row:?}");
    }
}

/// Issue #12: the published runs that state their peak memory are predicted within 10 % at the
/// median, each compared with the counter its source measured (allocated, reserved or the
/// device's total).
#[test]
fn memory_rows_are_predicted_within_ten_percent_at_the_median() {
    let summary = &report().summary;
    // 40 published runs state their peak memory; FlagPerf's Mixtral row (965) states a plan its
    // Megatron-Core 0.6 cannot build (ep 8 over dp 2) and is skipped.
    assert!(summary.memory_rows >= 39, "{} memory rows", summary.memory_rows);
    let median = summary.memory_median_abs_error_pct.unwrap();
    assert!(median <= 10.0, "memory median |error| {median:.1} %");
}

#[test]
fn held_out_figures_hold_what_is_reached() {
    // Issue #12's targets (dense p90 15 %, MoE median 12 %) and issue #17's (hybrid median 10 %)
    // are not met yet (README, Accuracy); this holds the held-out figures reached on 2026-12-05
    // (dense 5.1 / 15.9 %, MoE 15.4 / 49.7 %, hybrid 35.7 / 61.9 %, tau-b 0.96), with a little
    // room, so that a regression fails here.
    let kinds = &report().accuracy.kinds;
    let held_out = |name: &str| {
        let kind = kinds.iter().find(|k| k.kind == name).unwrap();
        (kind.held_out.median_abs_error_pct.unwrap(), kind.held_out.p90_abs_error_pct.unwrap())
    };
    let bounds = [("dense", 6.0, 17.0), ("moe", 16.5, 52.0), ("hybrid", 37.0, 64.0)];
    for (name, median_bound, p90_bound) in bounds {
        let (median, p90) = held_out(name);
        assert!(median <= median_bound, "{name} held-out median |error| {median:.2}%");
        assert!(p90 <= p90_bound, "{name} held-out p90 |error| {p90:.2}%");
    }
    // Issue #12's target for the rank agreement inside sweeps is 0.8.
    let tau = report().accuracy.rank.weighted_tau_held_out.unwrap();
    assert!(tau >= 0.9, "weighted held-out tau-b {tau:.3}");
}

/// `estimate --recipe` prices a published run as `validate` does: row 118 (NeMo 26.08,
/// GPT-OSS 120B on 64 GB300 in MXFP8, ep 16, micro-batch 4, global batch 1280 at 4096 tokens)
/// comes out at the same throughput from the command line as from its row.
#[test]
fn estimate_with_the_recipe_prices_a_published_run_as_validate_does() {
    let row = report().rows.iter().find(|r| r.row_id == "118").unwrap();
    let validated = row.predicted_tokens_per_sec_per_gpu.unwrap();
    let mut args = crate::support::GPT_OSS_ROW_118.to_vec();
    args.extend(["--recipe", "--format", "json"]);
    let estimate = crate::support::json(&args);
    let estimated = estimate["throughput"]["tokens_per_sec_per_gpu"].as_f64().unwrap();
    assert!(
        (estimated / validated - 1.0).abs() < 1e-9,
        "estimate {estimated}, validate {validated}"
    );
}

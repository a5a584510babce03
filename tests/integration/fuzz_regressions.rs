//! The inputs fuzzing found to crash meshplan (`fuzz/regressions/`), replayed on every `cargo
//! test` through the same library entry points as their fuzz targets, so a fix that regresses is
//! caught without the nightly toolchain. (`scripts/fuzz-smoke.sh` replays every target's
//! reproducers, the structured `plan_estimate` ones included.)

use crate::support::{read_repo_file, repo_path};

/// The reproducers of one target, as (name, bytes).
fn reproducers(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = repo_path(&format!("fuzz/regressions/{target}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect()
}

#[test]
fn calibration_rows_that_crashed_give_finite_figures_or_a_reason() {
    let runs = read_repo_file("data/calibration/runs.csv");
    let header = runs.lines().next().unwrap();
    let found = reproducers("csv_row");
    assert!(found.len() >= 5, "{} reproducers", found.len());
    for (name, bytes) in found {
        let text = format!("{header}\n{}", String::from_utf8_lossy(&bytes));
        let Ok(report) = meshplan::validate::validate_csv(&text) else { continue };
        for row in &report.rows {
            for (what, value) in [
                ("measured", row.measured_tokens_per_sec_per_gpu),
                ("predicted", row.predicted_tokens_per_sec_per_gpu),
                ("error", row.error_pct),
                ("measured memory", row.measured_memory_gib),
                ("predicted memory", row.predicted_memory_gib),
                ("memory error", row.memory_error_pct),
            ] {
                assert!(value.is_none_or(f64::is_finite), "{name}: {what} = {value:?}");
            }
            if let Some(measured) = row.measured_tokens_per_sec_per_gpu {
                assert!(measured > 0.0, "{name}: measured {measured}");
            }
        }
    }
}

#[test]
fn model_files_whose_counts_overflowed_are_refused_with_a_reason() {
    let found = reproducers("model_toml");
    assert!(found.len() >= 3, "{} reproducers", found.len());
    for (name, bytes) in found {
        // Every field within its bound, a derived width or the parameter total past its own:
        // refused by the model's validation, which counts in u128 (no overflow, no panic).
        let spec: meshplan::model::ModelSpec = toml::from_str(&String::from_utf8_lossy(&bytes))
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let problems = meshplan::model::Model::from_spec(&spec).expect_err(&name);
        assert_eq!(problems.list().len(), 1, "{name}: {problems}");
    }
}

#[test]
fn hugging_face_configs_that_crashed_are_refused_with_a_reason() {
    let found = reproducers("hf_config");
    assert!(found.len() >= 2, "{} reproducers", found.len());
    for (name, bytes) in found {
        // Each holds a count past its bound: refused, by the reader or by the model's validation,
        // without a panic or an allocation of that size.
        let refused = match meshplan::model::from_hf_config(&String::from_utf8_lossy(&bytes), &name)
        {
            Err(problems) => !problems.list().is_empty(),
            Ok(spec) => meshplan::model::Model::from_spec(&spec).is_err(),
        };
        assert!(refused, "{name} was accepted");
    }
}

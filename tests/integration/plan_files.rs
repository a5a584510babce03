//! A plan is one object: every plan a search ranks, written as a plan file and read back, prices
//! to the identical step time and memory; every plan flag given to `search` pins that option or is
//! refused; the engine is stated and `--export-to` implies it; Megatron-LM's flag names and short
//! GPU names are accepted.

use meshplan::estimate::estimate_simulated_with;
use meshplan::plan::{Engine, PlanSpec, TrainingSpec};
use meshplan::search::{Constraints, SearchSpec, search};
use meshplan::sim::SimOptions;
use meshplan::{Run, plan_file, presets};
use serde_json::Value;

use crate::support::{self, spec};

fn search_spec(model: &str, gpus: i64, seq_len: i64, global_batch: i64) -> SearchSpec {
    let training = TrainingSpec { seq_len, global_batch, micro_batch: None, precision: None };
    SearchSpec {
        base: spec(presets::model(model).unwrap(), "h100-sxm", gpus, training, PlanSpec::default()),
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine: Some(Engine::Megatron),
        top: 5,
    }
}

#[test]
fn the_top_plans_of_dense_moe_and_long_context_searches_reprice_exactly_from_their_files() {
    let cases = [
        ("dense", search_spec("llama3.1-70b", 64, 8192, 128)),
        ("moe", search_spec("qwen3-30b-a3b", 64, 4096, 256)),
        ("long context", search_spec("llama3.1-8b", 32, 131_072, 32)),
    ];
    for (name, spec) in cases {
        let report = search(&spec, &|_, _| {}).unwrap();
        assert_eq!(report.plans.len(), 5, "{name}: five plans fit");
        for ranked in &report.plans {
            let text =
                plan_file::to_toml(&plan_file::resolved_spec(&spec.base, &ranked.run)).unwrap();
            let read = plan_file::from_toml(&text).unwrap();
            let run = Run::from_spec(&read).unwrap();
            assert_eq!(run, ranked.run, "{name}: the file builds the same run\n{text}");
            let (estimate, _) =
                estimate_simulated_with(&run, SimOptions { timeline: false }).unwrap();
            assert_eq!(
                estimate.time.step_time(),
                ranked.estimate.time.step_time(),
                "{name}: {}",
                ranked.run.plan().label()
            );
            assert_eq!(estimate.peak_memory, ranked.estimate.peak_memory, "{name}");
        }
    }
}

/// Runs a command line (words without spaces): exit code, stdout, stderr.
fn meshplan(line: &str) -> (i32, String, String) {
    let output = support::run(&support::words(line));
    (output.code, output.stdout, output.stderr)
}

/// Runs a command line that must succeed and print one JSON value.
fn json(line: &str) -> Value {
    support::json(&support::words(line))
}

#[test]
fn the_best_plan_saved_by_search_is_what_estimate_prices_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("best.toml");
    let found = json(&format!(
        "search --model llama3.1-8b --gpus 16 --seq-len 4096 --global-batch 32 --format json \
         --save-plan {}",
        file.display()
    ));
    let best = &found["plans"][0];
    let priced = json(&format!("estimate --plan {} --format json", file.display()));
    assert_eq!(priced["time"]["step_time_s"], best["step_time_s"]);
    assert_eq!(priced["memory"]["total_gib"], best["peak_memory_gib"]);
    // The JSON of both names every option under its plan-file key.
    assert_eq!(priced["run"]["plan"], best["plan"]);
    for key in ["ep", "etp", "cp_comm", "pipeline_split", "expert_dispatch", "engine"] {
        assert!(!best["plan"][key].is_null(), "{key} in {}", best["plan"]);
    }
    // A flag beside the file overrides it; dp follows the new tp.
    let resized = json(&format!(
        "estimate --plan {} --tp 1 --pp 1 --cp 1 --micro-batch 1 --format json",
        file.display()
    ));
    assert_eq!(
        (resized["run"]["plan"]["tp"].as_u64(), resized["run"]["plan"]["dp"].as_u64()),
        (Some(1), Some(16))
    );
}

#[test]
fn a_plan_file_with_an_unknown_key_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plan.toml");
    let (code, _, stderr) =
        meshplan(&format!("estimate --model llama3.1-8b --gpus 8 --save-plan {}", file.display()));
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap().replace("zero = 1", "zer0 = 1");
    std::fs::write(&file, text).unwrap();
    let (code, _, stderr) = meshplan(&format!("estimate --plan {}", file.display()));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("plan") && stderr.contains("zer0") && stderr.contains("line"),
        "{stderr}"
    );
}

#[test]
fn every_plan_flag_given_to_search_pins_that_option() {
    let base =
        "search --model llama3.1-8b --gpus 16 --seq-len 4096 --global-batch 32 --format json";
    let pins: [(&str, &str, Value); 8] = [
        ("--recompute full", "recompute", "full".into()),
        ("--zero 0", "zero", 0.into()),
        ("--fsdp", "fsdp", true.into()),
        ("--schedule gpipe --pp 2 --engine torchtitan", "schedule", "gpipe".into()),
        ("--vp 2 --pp 2", "vp", 2.into()),
        ("--tp-comm-overlap false --tp 2", "tp_comm_overlap", false.into()),
        ("--pipeline-split balanced --pp 2", "pipeline_split", "balanced".into()),
        ("--dp 4", "dp", 4.into()),
    ];
    for (flags, key, value) in pins {
        let found = json(&format!("{base} {flags}"));
        let plans = found["plans"].as_array().unwrap();
        assert!(!plans.is_empty(), "{flags}: a plan fits");
        for plan in plans {
            assert_eq!(plan["plan"][key], value, "{flags}: {}", plan["description"]);
        }
    }
}

#[test]
fn search_refuses_pins_that_cannot_be_and_says_why() {
    let base = "search --model llama3.1-8b --gpus 16 --seq-len 4096 --global-batch 32";
    for (flags, field) in [
        ("--tp -4", "plan.tp"),
        ("--tp 0", "plan.tp"),
        ("--zero 7", "plan.zero"),
        ("--moe-imbalance -1", "plan.moe_imbalance"),
        ("--engine megatron --export-to torchtitan", "export_to"),
    ] {
        let (code, stdout, stderr) = meshplan(&format!("{base} {flags}"));
        assert_eq!(code, 2, "{flags}: {stdout}");
        assert!(stderr.contains(field), "{flags}: {stderr}");
    }
}

#[test]
fn the_engine_defaults_to_megatron_and_export_to_implies_it() {
    let base = "search --model qwen3-30b-a3b --gpus 64 --seq-len 4096 --global-batch 256";
    let default = json(&format!("{base} --format json"));
    assert_eq!(default["engine"], "megatron");
    for plan in default["plans"].as_array().unwrap() {
        let schedule = plan["plan"]["schedule"].as_str().unwrap();
        assert!(["1f1b", "interleaved"].contains(&schedule), "{schedule}");
    }
    let (code, stdout, stderr) = meshplan(&format!("{base} --export-to torchtitan"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("[parallelism]"), "a torchtitan job config: {stdout}");
}

#[test]
fn no_best_plan_means_no_output_file_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("best.args");
    let (code, _, stderr) = meshplan(&format!(
        "search --model llama3.1-405b --gpus 8 --seq-len 8192 --global-batch 8 \
         --export-to megatron --output {}",
        out.display()
    ));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no plan fits"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn megatron_flag_names_and_short_gpu_names_mean_the_same_run() {
    let ours = json(
        "estimate --model llama3.1-8b --gpu h100-sxm --gpus 16 --tp 2 --pp 2 --cp 2 \
         --seq-len 8192 --global-batch 32 --micro-batch 2 --recompute selective --format json",
    );
    let megatron = json(
        "estimate --model llama3.1-8b --gpu h100 --gpus 16 --tensor-model-parallel-size 2 \
         --pipeline-model-parallel-size 2 --context-parallel-size 2 --seq-length 8192 \
         --global-batch-size 32 --micro-batch-size 2 --recompute-granularity selective \
         --format json",
    );
    assert_eq!(ours, megatron);
    let (code, _, stderr) = meshplan("estimate --model llama3.1-8b --gpu h1OO");
    assert_eq!(code, 2);
    assert!(stderr.contains("h100-sxm") && stderr.contains("known gpu presets"), "{stderr}");
}

#[test]
fn an_unknown_adam_moment_precision_is_refused_naming_the_choices() {
    let (code, _, stderr) = meshplan("estimate --model llama3.1-8b --gpus 8 --adam-moments fp16");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--adam-moments") && stderr.contains("fp32") && stderr.contains("bf16"),
        "{stderr}"
    );
    let (code, _, stderr) =
        meshplan("export --to torchtitan --model llama3.1-8b --gpus 8 --fsdp --adam-moments bf16");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--adam-moments fp32"), "{stderr}");
}

//! The inputs of issue 13 ("never panics, never hangs, never prints a number that cannot be
//! true"), each run end to end through the binary: a count past its bound, a figure that cannot
//! be priced, a negative or zero flag, a file that is not what it says. Every one is answered by
//! meshplan's own error naming the field, the value and the bound or fix (exit 2), never by a
//! panic (exit 101), a wrapped figure, a stand-in number the user never typed, or a file written.
//! (`input_files.rs` covers `--gpu FILE`, `/dev/zero`, planted links and failed exports.)

use crate::support::{Output, json, read_repo_file, repo_path, run, words};

/// The run ended with meshplan's input error, and every part is in its message.
fn refused(output: &Output, parts: &[&str]) {
    assert_eq!(output.code, 2, "stdout: {}\nstderr: {}", output.stdout, output.stderr);
    assert!(output.stdout.is_empty(), "nothing is printed as an answer: {}", output.stdout);
    assert!(output.stderr.starts_with("error: "), "{}", output.stderr);
    for part in parts {
        assert!(output.stderr.contains(part), "{part:?} not in: {}", output.stderr);
    }
    let problems = output.stderr.matches("\n- ").count();
    assert!(problems >= 1, "{}", output.stderr);
    assert_eq!(output.stderr.matches("\n  hint: ").count(), problems, "{}", output.stderr);
}

/// How many problems the error lists.
fn problems(output: &Output) -> usize {
    output.stderr.matches("\n- ").count()
}

#[test]
fn parallel_sizes_that_would_wrap_are_refused_with_the_bound_in_the_hint() {
    // tp x pp was 2^64 = 0 in u64: a division by zero.
    let output = run(&words("estimate --model llama3.1-8b --tp 4294967296 --pp 4294967296"));
    refused(&output, &["plan.tp = 4294967296", "plan.pp = 4294967296", "at most 1048576"]);
    assert_eq!(problems(&output), 2, "{}", output.stderr);
    let output = run(&words("estimate --model llama3.1-8b --gpus 4294967296"));
    refused(&output, &["cluster.num_gpus = 4294967296", "at most 1048576"]);
    // dp's default comes from the refused count: no rule is checked against a stand-in.
    assert_eq!(problems(&output), 1, "{}", output.stderr);
}

#[test]
fn a_global_batch_past_its_bound_is_refused_not_cut_to_32_bits() {
    // 2^33 sequences were cut to 32 bits: a step of 0 s and an infinite MFU, exit 0.
    let output = run(&words("estimate --global-batch 8589934592"));
    refused(&output, &["training.global_batch = 8589934592", "at most 16777216"]);
    // The batch rules are not checked against the stand-in of 1 sequence.
    assert_eq!(problems(&output), 1, "{}", output.stderr);
    assert!(!output.stderr.contains("1 micro-batches"), "{}", output.stderr);
    let output = run(&words("estimate --seq-len 4294967296 --micro-batch 4294967296"));
    refused(&output, &["training.seq_len = 4294967296", "training.micro_batch = 4294967296"]);
}

#[test]
fn a_step_with_more_tasks_than_meshplan_simulates_is_refused_not_run_for_minutes() {
    // 2^24 micro-batches on 8 stages: one task per micro-batch, stage and phase.
    let output =
        run(&words("estimate --model llama3.1-8b --gpus 8 --pp 8 --global-batch 16777216"));
    refused(&output, &["training.global_batch = 16777216", "tasks per step", "16777216"]);
}

#[test]
fn model_counts_past_their_bounds_are_refused_before_any_work_grows_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let preset = read_repo_file("presets/models/llama3.1-8b.toml");
    for (key, value, bound) in [
        ("hidden_size", "4294967296", "1048576"),
        ("num_layers", "1000000000000", "4096"),
        ("vocab_size", "4294967296", "16777216"),
    ] {
        let file = dir.path().join(format!("{key}.toml"));
        let text: String = preset
            .lines()
            .map(|line| {
                if line.starts_with(&format!("{key} =")) {
                    format!("{key} = {value}\n")
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        assert_ne!(text, preset, "{key} is in the preset");
        std::fs::write(&file, text).unwrap();
        let output = run(&["estimate", "--model", file.to_str().unwrap(), "--gpus", "8"]);
        refused(&output, &[&format!("model.{key} = {value}"), &format!("at most {bound}")]);
    }
}

#[test]
fn models_whose_bounded_counts_multiply_past_u64_are_refused_naming_the_field() {
    // Each field lay within its bound, their products did not: 65,536 query heads of 2^20 (a
    // 2^36-wide query), Mamba-2 heads of 2^20 over 4096 layers, 65,536 experts of 2^20 over 4096
    // layers. Their parameter counts overflowed u64: a panic in a debug build, wrapped counts
    // and exit 0 in a release one.
    for (file, parts) in [
        (
            "counts-query-width-65536-heads-of-2-20.toml",
            ["model.head_dim = 1048576", "makes the query width", "is at most 1048576"],
        ),
        (
            "counts-mamba-inner-width-4096-layers.toml",
            ["model.mamba.head_dim = 1048576", "makes the inner width", "is at most 1048576"],
        ),
        (
            "counts-65536-experts-of-2-20-over-4096-layers.toml",
            [
                "model.moe.num_experts = 65536",
                "parameters, over the 1125899906842624",
                "at most 1125899906842624 parameters",
            ],
        ),
    ] {
        let path = repo_path(&format!("fuzz/regressions/model_toml/{file}"));
        let output = run(&["estimate", "--model", path.to_str().unwrap(), "--gpus", "8"]);
        refused(&output, &parts);
        assert_eq!(problems(&output), 1, "{}", output.stderr);
    }
}

#[test]
fn a_hugging_face_config_with_a_trillion_layers_is_refused_at_once() {
    // One entry per layer was allocated before the count was checked: the process aborted.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"model_type": "mistral", "num_hidden_layers": 1000000000000, "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096}"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let output = run(&["estimate", "--model", config.to_str().unwrap(), "--gpus", "8"]);
    refused(&output, &["1000000000000", "4096"]);
    assert!(started.elapsed().as_secs() < 10, "took {:?}", started.elapsed());
}

#[test]
fn hardware_figures_that_would_make_a_non_finite_answer_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let preset = read_repo_file("presets/gpus/h100-sxm.toml");
    for (from, to, field) in [
        ("network_latency = \"10 us\"", "network_latency = \"1e308 s\"", "network_latency"),
        ("bf16 = \"989.4 TFLOP/s\"", "bf16 = \"1e300 TFLOP/s\"", "bf16"),
        ("memory_bandwidth = \"3.35 TB/s\"", "memory_bandwidth = \"0 TB/s\"", "memory_bandwidth"),
    ] {
        assert!(preset.contains(from), "{from}");
        let file = dir.path().join("gpu.toml");
        std::fs::write(&file, preset.replace(from, to)).unwrap();
        let output = run(&["estimate", "--model", "llama3.1-8b", "--gpus", "8", "--gpu"]
            .into_iter()
            .chain([file.to_str().unwrap()])
            .collect::<Vec<_>>());
        refused(&output, &[field]);
        assert!(!output.stderr.contains("NaN") && !output.stderr.contains("inf"), "{to}");
    }
}

#[test]
fn mfu_under_nvfp4_is_taken_against_the_fp4_peak_and_stays_under_100_percent() {
    // Against the BF16 peak this plan printed an MFU of 125-131 %.
    let line = "estimate --model bloom-176b --gpu b200 --gpus 1 --seq-len 1024 --global-batch 1024 \
                --precision nvfp4 --fsdp --format json";
    let value = json(&words(line));
    let throughput = &value["throughput"];
    let mfu = throughput["mfu_pct"].as_f64().unwrap();
    assert!(mfu > 0.0 && mfu <= 100.0, "MFU {mfu}");
    assert_eq!(throughput["mfu_peak_basis"], "fp4", "{throughput}");
    let text = run(&words(line.trim_end_matches(" --format json")));
    assert!(text.stdout.contains("dense fp4"), "the peak is named: {}", text.stdout);
}

#[test]
fn zero_negative_and_out_of_range_search_flags_are_refused_not_dropped() {
    // Each ran a full search and exited 0.
    for (flag, value, field) in [
        ("--tp", "-4", "plan.tp = -4"),
        ("--tp", "0", "plan.tp = 0"),
        ("--zero", "7", "plan.zero = 7"),
        ("--max-tp", "-4", "search.max_tp = -4"),
        ("--max-pp", "0", "search.max_pp = 0"),
        ("--top", "0", "search.top = 0"),
        ("--memory-headroom", "-0.5", "search.memory_headroom = -0.5"),
        ("--recompute-num-layers", "5000000000", "plan.recompute_num_layers = 5000000000"),
    ] {
        let output = run(&["search", "--model", "llama3.1-8b", "--gpus", "8", flag, value]);
        refused(&output, &[field]);
        assert!(!output.stderr.contains("unexpected argument"), "{flag}: {}", output.stderr);
    }
    // The search's own flags and the run's come back together.
    let output = run(&words("search --model llama3.1-8b --gpus 8 --max-tp -4 --tp 0 --seq-len -1"));
    refused(&output, &["search.max_tp = -4", "plan.tp = 0", "training.seq_len = -1"]);
}

#[test]
fn negative_numbers_reach_meshplans_checks_not_the_argument_parser() {
    // `--moe-imbalance -1` was clap's "unexpected argument '-1'".
    for (flag, value, field) in [
        ("--moe-imbalance", "-1", "plan.moe_imbalance = -1"),
        ("--moe-capacity-factor", "-2.5", "plan.moe_capacity_factor = -2.5"),
        ("--gpus", "-8", "cluster.num_gpus = -8"),
        ("--micro-batch", "-1", "training.micro_batch = -1"),
        ("--recompute-num-layers", "-3", "plan.recompute_num_layers = -3"),
        ("--hybrid-shard", "-2", "plan.hybrid_shard = -2"),
    ] {
        let output = run(&["estimate", "--model", "mixtral-8x7b", flag, value]);
        refused(&output, &[field]);
    }
}

#[test]
fn a_finite_routing_ratio_too_large_to_price_is_refused_with_its_bound() {
    // Found by the plan_estimate fuzz target: an imbalance of 7e304 overflowed the expert times
    // it scales to infinity, and the step's forward compute came out NaN.
    for flag in ["--moe-imbalance", "--moe-capacity-factor"] {
        let output = run(&[
            "estimate",
            "--model",
            "mixtral-8x7b",
            "--gpu",
            "a100-40gb",
            "--gpus",
            "1",
            "--seq-len",
            "1",
            "--global-batch",
            "255",
            flag,
            "6.984483145486255e304",
        ]);
        refused(&output, &["= 6.984483145486255e304: must be from 1 to 65536", "at most 65536"]);
    }
}

#[test]
fn search_export_with_no_plan_that_fits_is_an_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f");
    let line = "search --model llama3.1-405b --gpus 8 --seq-len 8192 --global-batch 8 \
                --export-to megatron --output";
    let output = run(&[words(line), vec![out.to_str().unwrap()]].concat());
    refused(&output, &["no plan fits"]);
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no temporary file is left");
}

#[test]
fn hugging_face_activations_are_named_or_priced_as_the_mlp_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let gemma = r#"{"model_type": "gemma3_text", "num_hidden_layers": 26, "hidden_size": 2304,
        "intermediate_size": 9216, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
        "hidden_activation": "gelu_pytorch_tanh"}"#;
    let write = |name: &str, text: &str| {
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("config.json");
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let weights = |path: &str| {
        let value = json(&["estimate", "--model", path, "--gpus", "8", "--format", "json"]);
        value["memory"]["breakdown_gib"]["weights"].as_f64().unwrap_or_else(|| panic!("{value}"))
    };
    // Gemma's GeGLU MLP has gate, up and down projections: more weights than the same shape
    // read as a plain two-matrix MLP (a family meshplan does not list, with a GELU).
    let gated = weights(&write("gemma-3", gemma));
    let plain = weights(&write("plain", &gemma.replace("gemma3_text", "some_gelu_model")));
    assert!(gated > plain * 1.2, "gated {gated} GiB vs plain {plain} GiB");
    // An activation meshplan does not know is an error naming the key, the value and the
    // known ones, not a plain MLP.
    for key in ["hidden_activation", "hidden_act"] {
        let text =
            gemma.replace("hidden_activation\": \"gelu_pytorch_tanh", &format!("{key}\": \"mish"));
        let output = run(&["estimate", "--model", &write(key, &text), "--gpus", "8"]);
        refused(&output, &[&format!("config.{key} = mish"), "gelu_pytorch_tanh", "silu"]);
    }
}

#[test]
fn a_calibration_csv_with_a_misspelled_column_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.csv");
    let runs = read_repo_file("data/calibration/runs.csv");
    let header = runs.lines().next().unwrap();
    assert!(header.contains("num_gpus"));
    std::fs::write(&file, runs.replacen("num_gpus", "num_gpu", 1)).unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    refused(&output, &["num_gpus", "num_gpu"]);
}

#[test]
fn a_calibration_row_whose_plan_needs_more_gpus_than_it_has_is_skipped_with_the_reason() {
    // It panicked with a remainder by zero in validate/mapping.rs.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.csv");
    let runs = read_repo_file("data/calibration/runs.csv");
    let header = runs.lines().next().unwrap();
    let row = read_repo_file("fuzz/regressions/csv_row/mapping-510-dp-zero.csv");
    std::fs::write(&file, format!("{header}\n{row}")).unwrap();
    let output = run(&["validate", file.to_str().unwrap()]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.contains("needs more than the 32 GPUs"),
        "the skip names why: {}",
        output.stdout
    );
}

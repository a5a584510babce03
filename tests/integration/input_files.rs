//! Files as a user passes them: a GPU described in a file is used like a preset; a file that is too
//! large, unreadable or malformed is refused naming the field, the path and the fix; output files
//! are written whole or not at all, never through a link planted beside them, and none is written
//! when the command fails.

use crate::support::{json, read_repo_file, run, words};

#[test]
fn a_gpu_file_prices_like_the_preset_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("my-gpu.toml");
    let text = read_repo_file("presets/gpus/h100-sxm.toml")
        .replace("name = \"h100-sxm\"", "name = \"my-gpu\"");
    std::fs::write(&file, text).unwrap();
    let line = "estimate --model llama3.1-8b --gpus 8 --format json --gpu";
    let from_file = json(&[words(line), vec![file.to_str().unwrap()]].concat());
    let from_preset = json(&words(&format!("{line} h100-sxm")));
    assert_eq!(from_file["time"], from_preset["time"]);
    assert_eq!(from_file["memory"], from_preset["memory"]);
    assert_eq!(from_file["run"]["gpu"], "my-gpu");
}

#[test]
fn a_malformed_gpu_file_names_its_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad-gpu.toml");
    let text = read_repo_file("presets/gpus/h100-sxm.toml") + "\nclock_speed = 3\n";
    std::fs::write(&file, text).unwrap();
    let output =
        run(&[words("estimate --model llama3.1-8b --gpus 8 --gpu"), vec![file.to_str().unwrap()]]
            .concat());
    assert_eq!(output.code, 2, "{}", output.stdout);
    for part in ["cluster.gpu", "clock_speed", "(line", "presets/gpus/"] {
        assert!(output.stderr.contains(part), "{part}: {}", output.stderr);
    }
}

#[test]
fn a_gpu_file_with_an_unknown_generation_names_the_key_and_the_generations() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pascal.toml");
    let text = read_repo_file("presets/gpus/h100-sxm.toml")
        .replace("generation = \"hopper\"", "generation = \"pascal\"");
    std::fs::write(&file, text).unwrap();
    let output =
        run(&[words("estimate --model llama3.1-8b --gpus 8 --gpu"), vec![file.to_str().unwrap()]]
            .concat());
    assert_eq!(output.code, 2, "{}", output.stdout);
    for part in ["cluster.gpu", "(line 2)", "pascal", "hopper", "blackwell"] {
        assert!(output.stderr.contains(part), "{part}: {}", output.stderr);
    }
}

#[test]
fn an_endless_model_file_is_refused_not_read_to_the_end() {
    let output = run(&words("estimate --model /dev/zero"));
    assert_eq!(output.code, 2, "{}", output.stdout);
    assert!(
        output.stderr.contains("model") && output.stderr.contains("larger than"),
        "{}",
        output.stderr
    );
}

#[cfg(unix)]
#[test]
fn an_output_file_is_never_written_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let report = dir.path().join("step.html");
    std::os::unix::fs::symlink(&victim, dir.path().join("step.html.partial")).unwrap();
    let output = run(&[words("simulate --report"), vec![report.to_str().unwrap()]].concat());
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(std::fs::read_to_string(&report).unwrap().starts_with("<!DOCTYPE html>"));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".partial") && name != "step.html.partial")
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_failed_search_writes_none_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (report, args) = (dir.path().join("r.html"), dir.path().join("best.args"));
    let line = "search --model llama3.1-405b --gpus 8 --seq-len 8192 --global-batch 8 \
                --export-to megatron --report";
    let output =
        run(&[words(line), vec![report.to_str().unwrap(), "--output", args.to_str().unwrap()]]
            .concat());
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(!report.exists() && !args.exists());
}

#[test]
fn link_and_gpu_figures_outside_their_physical_range_are_refused() {
    for (flag, value, field) in [
        ("--inter-node-latency", "1e308 s", "cluster.network_latency"),
        ("--intra-node-bandwidth", "1e-300 GB/s", "cluster.nvlink_bandwidth"),
    ] {
        let output = run(&["estimate", flag, value]);
        assert_eq!(output.code, 2, "{flag}: {}", output.stdout);
        assert!(
            output.stderr.contains(field) && output.stderr.contains("the range meshplan prices"),
            "{flag}: {}",
            output.stderr
        );
    }
}

#[test]
fn a_pattern_of_attention_and_mlp_pairs_prices_exactly_as_the_plain_model() {
    // Megatron-LM's hybrid pattern counts attention and MLP as two layers: 32 `*-` pairs are
    // Llama 3.1 8B's 32 layers, and the estimate is the preset's, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("llama-as-pattern.toml");
    let preset = read_repo_file("presets/models/llama3.1-8b.toml");
    let text = preset.replace("num_layers = 32", "num_layers = 64")
        + &format!("hybrid_pattern = \"{}\"\n", "*-".repeat(32));
    assert_ne!(text, preset);
    std::fs::write(&file, text).unwrap();
    let line = "estimate --gpus 16 --tp 2 --pp 2 --seq-len 8192 --global-batch 64 --format json";
    let from_pattern = run(&[words(line), vec!["--model", file.to_str().unwrap()]].concat());
    let from_preset = run(&[words(line), vec!["--model", "llama3.1-8b"]].concat());
    assert_eq!(from_pattern.code, 0, "{}", from_pattern.stderr);
    assert_eq!(from_pattern.stdout, from_preset.stdout);
}

//! Input files as a user passes them: a GPU described in a file is used like a preset, and a file
//! that is too large, unreadable or malformed is refused naming the field, the path and the fix.

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
fn an_endless_model_file_is_refused_not_read_to_the_end() {
    let output = run(&words("estimate --model /dev/zero"));
    assert_eq!(output.code, 2, "{}", output.stdout);
    assert!(
        output.stderr.contains("model") && output.stderr.contains("larger than"),
        "{}",
        output.stderr
    );
}

//! Code the integration tests share: paths into the repository, runs built from presets, and
//! running the `meshplan` binary.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use meshplan::data::DataSpec;
use meshplan::hardware::ClusterSpec;
use meshplan::model::ModelSpec;
use meshplan::plan::{PlanSpec, Precision, TrainingSpec};
use meshplan::{Estimate, Run, RunSpec, closed_form, presets};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// the repository

/// A path inside the repository (`relative` is from its root).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The text of a file in the repository; a missing file fails the test, naming the path.
pub fn read_repo_file(relative: &str) -> String {
    let path = repo_path(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// runs

/// Training settings: sequence length, sequences per step and per micro-batch, and precision
/// (`None`: the GPU preset's default).
pub fn training(
    seq_len: i64,
    global_batch: i64,
    micro_batch: i64,
    precision: Option<Precision>,
) -> TrainingSpec {
    TrainingSpec { seq_len, global_batch, micro_batch: Some(micro_batch), precision }
}

/// The spec of `model` trained with `training` and `plan` on `gpus` GPUs of the preset `gpu`.
pub fn spec(
    model: ModelSpec,
    gpu: &str,
    gpus: i64,
    training: TrainingSpec,
    plan: PlanSpec,
) -> RunSpec {
    RunSpec {
        model,
        cluster: ClusterSpec { gpu: presets::gpu(gpu).unwrap(), num_gpus: gpus },
        training,
        plan,
        data: None,
    }
}

/// The validated run of the preset `model` on `gpus` GPUs of the preset `gpu`; an invalid
/// combination fails the test.
pub fn preset_run(
    model: &str,
    gpu: &str,
    gpus: i64,
    training: TrainingSpec,
    plan: PlanSpec,
) -> Run {
    Run::from_spec(&spec(presets::model(model).unwrap(), gpu, gpus, training, plan)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// the binary

/// What one run of the binary left behind.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The binary with a fixed help width, so snapshots do not depend on the terminal.
fn meshplan() -> Command {
    let mut command = Command::cargo_bin("meshplan").expect("the meshplan binary is built");
    command.env("COLUMNS", "100").env_remove("NO_COLOR");
    command
}

/// A command line's words (none of them holds a space).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `meshplan` with `args`.
pub fn run(args: &[&str]) -> Output {
    let output = meshplan().args(args).output().expect("meshplan runs");
    Output {
        code: output.status.code().expect("meshplan exited normally"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `meshplan` with `args`, expects success and parses stdout as one JSON value.
pub fn json(args: &[&str]) -> Value {
    let output = run(args);
    assert_eq!(output.code, 0, "stderr: {}", output.stderr);
    serde_json::from_str(&output.stdout).expect("stdout is one JSON value")
}

/// Runs `args` with `--report` into two files and checks that both runs wrote the same bytes,
/// a whole HTML page, one inline SVG per chart in `charts` and nothing loaded from a network.
pub fn report(args: &[&str], charts: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut pages = Vec::new();
    for name in ["first.html", "second.html"] {
        let path = dir.path().join(name);
        let mut all = args.to_vec();
        all.extend(["--report", path.to_str().unwrap()]);
        let output = run(&all);
        assert_eq!(output.code, 0, "stderr: {}", output.stderr);
        assert!(output.stdout.contains("Report written to"), "{}", output.stdout);
        pages.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(pages[0], pages[1], "the same input gives the same bytes");
    // No partial file is left beside the reports.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    let page = String::from_utf8(pages.swap_remove(0)).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<svg").count(), charts.len(), "one SVG per chart");
    assert_eq!(page.matches("data-chart=").count(), charts.len());
    for chart in charts {
        let figure = format!("<figure id=\"chart-{chart}\" data-chart=\"{chart}\"");
        let at = page.find(&figure).unwrap_or_else(|| panic!("{chart} missing"));
        assert!(page[at..].trim_start_matches(|c| c != '\n').trim_start().starts_with("<svg"));
    }
    for network in ["http://", "https://", "src=", "href=", "url(", "@import", "<script", "<link"] {
        assert!(!page.contains(network), "the page refers to {network}");
    }
    page
}

/// `meshplan estimate` of calibration row 118 (NeMo 26.08, GPT-OSS 120B on 64 GB300 in MXFP8,
/// ep 16, micro-batches of 4, global batch 1280, 4096 tokens), with Megatron-Bridge v0.6.0's
/// 64-GPU recipe for it in the stack; index 10 is the precision.
pub const GPT_OSS_ROW_118: [&str; 19] = [
    "estimate",
    "--model",
    "gpt-oss-120b",
    "--gpu",
    "gb300",
    "--gpus",
    "64",
    "--stack",
    "nemo-26.08",
    "--precision",
    "mxfp8",
    "--ep",
    "16",
    "--micro-batch",
    "4",
    "--global-batch",
    "1280",
    "--seq-len",
    "4096",
];

/// The closed-form estimate of WLB-LLM's Llama 2 7B layout at context `seq` on `data` (Table 1:
/// tp 8 at 128K and tp 4 at 64K, cp 2, pp 4, dp 1 on tp x 8 H100, a global batch of pp = 4
/// micro-batches), re-packing `window` global batches together (0: packed as they arrive).
pub fn wlb_llm_7b(seq: i64, window: i64, data: DataSpec) -> Estimate {
    let tp = if seq > 65_536 { 8 } else { 4 };
    let plan = PlanSpec {
        tp: Some(tp),
        cp: Some(2),
        pp: Some(4),
        balance_window: Some(window),
        ..PlanSpec::default()
    };
    let model = presets::model("llama2-7b").unwrap();
    let mut spec = spec(model, "h100-sxm", tp * 8, training(seq, 4, 1, None), plan);
    spec.data = Some(data);
    closed_form(&Run::from_spec(&spec).unwrap())
}

//! Flags, presets and files → one validated [`Run`].
//!
//! Every problem found on the way is collected into one list: a preset name that does not exist,
//! a model file that cannot be read or parsed, a unit string or precision name that does not
//! parse, and everything `Run::from_spec` finds. `Run::from_spec` runs whenever a model and a GPU
//! were found, so its violations come back together with the flag problems.

use std::path::Path;

use crate::hardware::{ClusterSpec, GpuSpec};
use crate::model::ModelSpec;
use crate::plan::{PlanSpec, Precision, TrainingSpec};
use crate::plan_file;
use crate::presets::{self, PresetError, StackCatalog};
use crate::units::{parse_bandwidth, parse_seconds};
use crate::violation::{Collector, Violation, Violations, toml_error_line};
use crate::{Run, RunSpec};

use super::args::RunArgs;
pub use super::read::{MAX_INPUT_FILE_BYTES, read_bounded};

/// The built-in example's model preset, used when `--model` is not given.
pub const EXAMPLE_MODEL: &str = "llama3.1-70b";
/// The built-in example's GPU preset, used when `--gpu` is not given.
const EXAMPLE_GPU: &str = "h100-sxm";
/// The built-in example's GPU count, sequence length and global batch.
const EXAMPLE_GPUS: i64 = 64;
const EXAMPLE_SEQ_LEN: i64 = 8192;
const EXAMPLE_GLOBAL_BATCH: i64 = 128;

/// The built-in example's plan: tensor parallelism inside each 8-GPU node and an interleaved
/// pipeline across nodes (tp 8, pp 4, vp 5, so dp 2 on 64 GPUs), which fits BF16 activations.
pub fn example_plan() -> PlanSpec {
    PlanSpec { tp: Some(8), pp: Some(4), vp: Some(5), ..PlanSpec::default() }
}

/// A validated run and how it was described.
#[derive(Debug)]
pub struct Inputs {
    /// The run to price.
    pub run: Run,
    /// Whether the built-in example (no `--model`, no `--plan`) was used.
    pub example: bool,
    /// The spec the run was built from (model and cluster inline), for `--save-plan`.
    pub spec: RunSpec,
    /// With `--recipe`: what the stack's recipe set, and where it was read.
    pub recipe: Option<String>,
    /// Without `--recipe`, where the stack has a recipe for the run: which one `--recipe` takes.
    pub recipe_available: Option<String>,
}

/// Builds the run from the flags, reporting every problem at once.
pub fn build_run(args: &RunArgs) -> Result<Inputs, Violations> {
    build_run_with(args, false)
}

/// Builds the run from the flags, with its stack's performance recipe taken where `recipe` is set
/// (`recipe.rs`), reporting every problem at once.
pub fn build_run_with(args: &RunArgs, recipe: bool) -> Result<Inputs, Violations> {
    let mut problems = Collector::default();
    let example = args.model.is_none() && args.plan.is_none();
    let spec = build_spec(&mut problems, args, true);
    let taken = match &spec {
        Some(spec) if recipe => StackCatalog::builtin()
            .map_err(|err| {
                let why = format!("the built-in stacks do not read: {err}");
                Violations::one(Violation::new("recipe", "--recipe", why, "drop --recipe"))
            })
            .and_then(|stacks| super::recipe::take(spec, &stacks)),
        _ => Ok(None),
    };
    let (spec, run, note) = match (spec, taken) {
        (Some(_), Ok(Some(taken))) => {
            let run = problems.take(Run::from_spec_with_stack(&taken.spec, taken.stack));
            (Some(taken.spec), run, Some(taken.note))
        }
        // A recipe that cannot be taken is one problem among those of the run without it.
        (Some(spec), taken) => {
            let refused = problems.take(taken).is_none();
            let run = problems.take(Run::from_spec(&spec)).filter(|_| !refused);
            (Some(spec), run, None)
        }
        (None, _) => (None, None, None),
    };
    let (run, spec) = problems.finish_with(run.zip(spec), "run")?;
    let recipe_available = if note.is_none() { super::recipe::available(&run) } else { None };
    Ok(Inputs { run, example, spec, recipe: note, recipe_available })
}

/// The run as specified by the flags, before the checks that tie its parts together (what a
/// search starts from). Its plan holds only the plan flags given, which the search takes as pins:
/// neither the built-in example's plan nor a plan file's plan constrains a search.
pub fn build_run_spec(args: &RunArgs) -> Result<RunSpec, Violations> {
    let mut problems = Collector::default();
    let spec = build_spec(&mut problems, args, false);
    problems.finish_with(spec, "run spec")
}

/// The run the flags describe: a plan file (or the built-in example) with the flags given
/// beside it on top. `with_base_plan` keeps the file's or the example's plan under the plan flags;
/// without it only the plan flags make up the plan.
fn build_spec(problems: &mut Collector, args: &RunArgs, with_base_plan: bool) -> Option<RunSpec> {
    let file = match &args.plan {
        Some(path) => Some(plan_file(problems, path)?),
        None => None,
    };
    let model = match (&args.model, &file) {
        (Some(value), _) => model_spec(problems, value),
        (None, Some(file)) => Some(file.model.clone()),
        (None, None) => model_spec(problems, EXAMPLE_MODEL),
    };
    let gpu = match (&args.gpu, &file) {
        (Some(value), _) if is_file(value) => gpu_file(problems, Path::new(value)),
        (Some(name), _) => preset(
            problems,
            "cluster.gpu",
            name,
            presets::gpu(name),
            "or pass a path to a GPU TOML file (schemas/gpu.schema.json)",
        ),
        (None, Some(file)) => Some(file.cluster.gpu.clone()),
        (None, None) => preset(problems, "cluster.gpu", EXAMPLE_GPU, presets::gpu(EXAMPLE_GPU), ""),
    }
    .map(|gpu| with_interconnect_flags(problems, args, gpu));
    let precision = match &args.precision {
        Some(name) => precision(problems, name),
        None => file.as_ref().and_then(|f| f.training.precision),
    };
    let file_training = file.as_ref().map(|f| &f.training);
    let training = TrainingSpec {
        seq_len: args.seq_len.or(file_training.map(|t| t.seq_len)).unwrap_or(EXAMPLE_SEQ_LEN),
        global_batch: args
            .global_batch
            .or(file_training.map(|t| t.global_batch))
            .unwrap_or(EXAMPLE_GLOBAL_BATCH),
        micro_batch: args.micro_batch.or(file_training.and_then(|t| t.micro_batch)),
        precision,
    };
    let num_gpus = args.gpus.or(file.as_ref().map(|f| f.cluster.num_gpus)).unwrap_or(EXAMPLE_GPUS);
    let base = match (&file, args.model.is_none()) {
        (_, _) if !with_base_plan => PlanSpec::default(),
        (Some(file), _) => without_stale(&file.plan, &args.plan_options),
        (None, true) => example_plan(),
        (None, false) => PlanSpec::default(),
    };
    let plan = base.overridden_by(&args.plan_options);
    let data = super::lengths_file::data_spec(
        problems,
        args.lengths.as_deref(),
        args.batching,
        file.as_ref().and_then(|f| f.data.as_ref()),
    );
    let data_failed = args.lengths.is_some() && data.is_none();
    let spec = RunSpec {
        model: model?,
        cluster: ClusterSpec { gpu: gpu?, num_gpus },
        training,
        plan,
        data,
    };
    (!data_failed).then_some(spec)
}

/// A plan file's plan without what the flags beside it make stale, so that the flags can switch
/// a choice the file made explicit: its dp under a new tp, pp or cp (without --dp), its ZeRO stage
/// under FSDP flags and its FSDP options under --zero, its recompute layer count under another
/// --recompute (without --recompute-num-layers).
fn without_stale(file: &PlanSpec, flags: &PlanSpec) -> PlanSpec {
    let mut plan = file.clone();
    let resized = flags.tp.is_some() || flags.pp.is_some() || flags.cp.is_some();
    if resized && flags.dp.is_none() {
        plan.dp = None;
    }
    if flags.fsdp == Some(true) || flags.fsdp_mode.is_some() || flags.hybrid_shard.is_some() {
        plan.zero = None;
    }
    if flags.zero.is_some() && flags.fsdp.is_none() {
        (plan.fsdp, plan.fsdp_mode, plan.hybrid_shard) = (None, None, None);
    }
    if flags.recompute.is_some() && flags.recompute_num_layers.is_none() {
        plan.recompute_num_layers = None;
    }
    plan
}

/// Reads a GPU file (the keys of `presets/gpus/*.toml`, schema in `schemas/gpu.schema.json`).
fn gpu_file(problems: &mut Collector, path: &Path) -> Option<GpuSpec> {
    let shown = path.display().to_string();
    let hint = "GPU files take the GpuSpec keys of the presets in presets/gpus/";
    let text = match read_bounded(path, MAX_INPUT_FILE_BYTES) {
        Ok(text) => text,
        Err(message) => {
            problems.add("cluster.gpu", &shown, format!("GPU file: {message}"), hint);
            return None;
        }
    };
    match toml::from_str(&text) {
        Ok(spec) => Some(spec),
        Err(err) => {
            problems.add(
                "cluster.gpu",
                &shown,
                format!(
                    "GPU file {shown}{}: {}",
                    toml_error_line(&text, &err),
                    err.message().trim_end()
                ),
                hint,
            );
            None
        }
    }
}

/// Reads a plan file, naming the path in every problem.
fn plan_file(problems: &mut Collector, path: &Path) -> Option<RunSpec> {
    let shown = path.display().to_string();
    let text = match read_bounded(path, MAX_INPUT_FILE_BYTES) {
        Ok(text) => text,
        Err(message) => {
            problems.add("plan", &shown, message, "pass a file written by --save-plan");
            return None;
        }
    };
    match plan_file::from_toml(&text) {
        Ok(spec) => Some(spec),
        Err(err) => {
            problems.add(
                "plan",
                &shown,
                format!("{shown}: {err}"),
                "plan files take the keys `meshplan estimate --save-plan` writes",
            );
            None
        }
    }
}

/// Whether a `--model` value names a file rather than a preset.
fn is_file(value: &str) -> bool {
    value.ends_with(".toml")
        || value.ends_with(".json")
        || value.contains('/')
        || value.contains(std::path::MAIN_SEPARATOR)
}

fn model_spec(problems: &mut Collector, value: &str) -> Option<ModelSpec> {
    if is_file(value) {
        return model_file(problems, Path::new(value));
    }
    preset(problems, "model", value, presets::model(value), "or pass a path to a model TOML file")
}

fn model_file(problems: &mut Collector, path: &Path) -> Option<ModelSpec> {
    let shown = path.display().to_string();
    let text = match read_bounded(path, MAX_INPUT_FILE_BYTES) {
        Ok(text) => text,
        Err(message) => {
            problems.add(
                "model",
                &shown,
                format!("model file: {message}"),
                "check the path, or pass a preset name such as llama3.1-70b",
            );
            return None;
        }
    };
    if path.extension().is_some_and(|ext| ext == "json") {
        // A Hugging Face config.json, named after its directory (`Llama-3.1-8B/config.json`).
        let name = path
            .parent()
            .and_then(Path::file_name)
            .or_else(|| path.file_stem())
            .map_or_else(|| "model".to_owned(), |n| n.to_string_lossy().into_owned());
        return problems.take(crate::model::from_hf_config(&text, &name));
    }
    match toml::from_str(&text) {
        Ok(spec) => Some(spec),
        Err(err) => {
            let message = err.message().trim_end().to_owned();
            let location = toml_error_line(&text, &err);
            problems.add(
                "model",
                &shown,
                format!("model file {shown}{location}: {message}"),
                "model files take the ModelSpec keys of the presets in presets/models/",
            );
            None
        }
    }
}

fn preset<T>(
    problems: &mut Collector,
    field: &str,
    value: &str,
    result: Result<T, PresetError>,
    alternative: &str,
) -> Option<T> {
    match result {
        Ok(spec) => Some(spec),
        Err(PresetError::Unknown { kind, known, .. }) => {
            problems.add(
                field,
                value,
                format!("unknown {kind} preset"),
                format!("known {kind} presets: {known}{}", alternative_suffix(alternative)),
            );
            None
        }
        Err(err @ PresetError::Malformed { .. }) => {
            problems.add(
                field,
                value,
                err.to_string(),
                "this is a bug in meshplan's built-in data",
            );
            None
        }
    }
}

fn alternative_suffix(alternative: &str) -> String {
    if alternative.is_empty() { String::new() } else { format!("; {alternative}") }
}

fn with_interconnect_flags(problems: &mut Collector, args: &RunArgs, mut gpu: GpuSpec) -> GpuSpec {
    let links = &mut gpu.interconnect;
    if let Some(n) = args.gpus_per_node {
        links.gpus_per_node = n;
    }
    if let Some(n) = args.nvlink_domain {
        links.nvlink_domain = Some(n);
    }
    // Unit strings are checked here so the problem names the flag; a bad value leaves the
    // preset's figure in place, so `Run::from_spec` does not report it a second time.
    let overrides = [
        (
            &args.intra_node_bandwidth,
            &mut links.nvlink_bandwidth,
            "nvlink_bandwidth",
            "--intra-node-bandwidth",
            true,
        ),
        (
            &args.inter_node_bandwidth,
            &mut links.network_bandwidth,
            "network_bandwidth",
            "--inter-node-bandwidth",
            true,
        ),
        (
            &args.intra_node_latency,
            &mut links.nvlink_latency,
            "nvlink_latency",
            "--intra-node-latency",
            false,
        ),
        (
            &args.inter_node_latency,
            &mut links.network_latency,
            "network_latency",
            "--inter-node-latency",
            false,
        ),
    ];
    if let Some(text) = &args.host_memory {
        match crate::units::parse_bytes(text) {
            Ok(_) => links.host_memory = Some(text.clone()),
            Err(err) => problems.add(
                "cluster.host_memory",
                text,
                format!("--host-memory: {err}"),
                "the server's CPU memory, e.g. \"2 TB\" or \"1024 GiB\"",
            ),
        }
    }
    for (value, target, field, flag, is_bandwidth) in overrides {
        let Some(text) = value else { continue };
        let checked = if is_bandwidth {
            parse_bandwidth(text).map(|_| ())
        } else {
            parse_seconds(text).map(|_| ())
        };
        match checked {
            Ok(()) => *target = text.clone(),
            Err(err) => problems.add(
                format!("cluster.{field}"),
                text,
                format!("{flag}: {err}"),
                if is_bandwidth {
                    "per GPU and direction, e.g. \"450 GB/s\" or \"400 Gb/s\""
                } else {
                    "e.g. \"3 us\" or \"0.01 ms\""
                },
            ),
        }
    }
    gpu
}

fn precision(problems: &mut Collector, name: &str) -> Option<Precision> {
    let parsed = Precision::parse(name);
    if parsed.is_none() {
        // `fp8` is an alias of fp8-delayed; list it where a reader looks for it.
        let mut names = vec!["fp8"];
        names.extend(Precision::ALL.iter().map(|p| p.name()));
        names.sort_by_key(|n| (Precision::parse(n).map(|p| p as usize), n.len()));
        problems.add(
            "training.precision",
            name,
            "unknown precision",
            format!("use one of: {}", names.join(" ")),
        );
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_told_from_preset_names() {
        assert!(is_file("my-model.toml"));
        assert!(is_file("models/llama"));
        assert!(!is_file("llama3.1-70b"));
    }

    #[test]
    fn precision_hint_lists_every_name() {
        let mut problems = Collector::default();
        assert_eq!(precision(&mut problems, "int8"), None);
        let err = problems.finish().unwrap_err();
        assert_eq!(
            err.list()[0].hint,
            "use one of: bf16 fp16 fp8 fp8-delayed fp8-current fp8-blockwise mxfp8 nvfp4"
        );
    }
}

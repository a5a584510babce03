//! Flags, presets and files → one validated [`Run`].
//!
//! Every problem found on the way is collected into one list: a preset name that does not exist,
//! a model file that cannot be read or parsed, a unit string or precision name that does not
//! parse, and everything `Run::from_spec` finds. `Run::from_spec` runs whenever a model and a GPU
//! were found, so its violations come back together with the flag problems.

use std::path::Path;

use meshplan::hardware::{ClusterSpec, GpuSpec};
use meshplan::model::ModelSpec;
use meshplan::plan::{FsdpMode, PipelineSplit, PlanSpec, Precision, RecomputeKind, TrainingSpec};
use meshplan::presets::{self, PresetError};
use meshplan::units::{parse_bandwidth, parse_seconds};
use meshplan::violation::{Collector, Violations};
use meshplan::{Run, RunSpec};

use super::args::{
    CpCommArg, ExpertDispatchArg, FsdpModeArg, PipelineSplitArg, RecomputeArg, RunArgs, ScheduleArg,
};

/// The built-in example's model preset, used when `--model` is not given.
pub const EXAMPLE_MODEL: &str = "llama3.1-70b";

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
    /// Whether the built-in example (no `--model`) was used.
    pub example: bool,
}

/// Builds the run from the flags, reporting every problem at once.
pub fn build_run(args: &RunArgs) -> Result<Inputs, Violations> {
    let mut problems = Collector::default();
    let example = args.model.is_none();
    let spec = build_spec(&mut problems, args);
    let run = spec.and_then(|spec| problems.take(Run::from_spec(&spec)));
    problems.finish()?;
    let Some(run) = run else {
        unreachable!("no problem was recorded, so the run was built");
    };
    Ok(Inputs { run, example })
}

/// The run as specified by the flags, before the checks that tie its parts together (what a
/// search starts from).
pub fn build_run_spec(args: &RunArgs) -> Result<RunSpec, Violations> {
    let mut problems = Collector::default();
    let spec = build_spec(&mut problems, args);
    problems.finish()?;
    let Some(spec) = spec else {
        unreachable!("no problem was recorded, so the spec was built");
    };
    Ok(spec)
}

fn build_spec(problems: &mut Collector, args: &RunArgs) -> Option<RunSpec> {
    let example = args.model.is_none();
    let model = model_spec(problems, args.model.as_deref().unwrap_or(EXAMPLE_MODEL));
    let gpu = gpu_spec(problems, args);
    let precision = args.precision.as_deref().and_then(|name| precision(problems, name));
    let training = TrainingSpec {
        seq_len: args.seq_len,
        global_batch: args.global_batch,
        micro_batch: args.micro_batch,
        precision,
    };
    let base = if example { example_plan() } else { PlanSpec::default() };
    let plan = plan_spec(args, base);
    match (model, gpu) {
        (Some(model), Some(gpu)) => Some(RunSpec {
            model,
            cluster: ClusterSpec { gpu, num_gpus: args.gpus },
            training,
            plan,
        }),
        _ => None,
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
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            problems.add(
                "model",
                &shown,
                format!("cannot read model file {shown}: {err}"),
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
        return problems.take(meshplan::model::from_hf_config(&text, &name));
    }
    match toml::from_str(&text) {
        Ok(spec) => Some(spec),
        Err(err) => {
            let message = err.message().trim_end().to_owned();
            let location = err
                .span()
                .map(|span| {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
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

fn gpu_spec(problems: &mut Collector, args: &RunArgs) -> Option<GpuSpec> {
    let mut gpu = preset(problems, "cluster.gpu", &args.gpu, presets::gpu(&args.gpu), "")?;
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
    Some(gpu)
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

fn plan_spec(args: &RunArgs, base: PlanSpec) -> PlanSpec {
    PlanSpec {
        tp: args.tp.or(base.tp),
        pp: args.pp.or(base.pp),
        vp: args.vp.or(base.vp),
        dp: args.dp.or(base.dp),
        cp: args.cp.or(base.cp),
        cp_comm: args.cp_comm.map(CpCommArg::kind).or(base.cp_comm),
        pipeline_split: args
            .pipeline_split
            .map(|split| match split {
                PipelineSplitArg::Even => PipelineSplit::Even,
                PipelineSplitArg::EmbeddingAndLoss => PipelineSplit::EmbeddingAndLoss,
                PipelineSplitArg::Balanced => PipelineSplit::Balanced,
            })
            .or(base.pipeline_split),
        schedule: args.schedule.map(ScheduleArg::schedule).or(base.schedule),
        sequence_parallel: args.sequence_parallel.or(base.sequence_parallel),
        zero: args.zero.or(base.zero),
        fsdp: if args.fsdp { Some(true) } else { base.fsdp },
        fsdp_mode: args
            .fsdp_mode
            .map(|mode| match mode {
                FsdpModeArg::Full => FsdpMode::Full,
                FsdpModeArg::GradOp => FsdpMode::GradOp,
            })
            .or(base.fsdp_mode),
        hybrid_shard: args.hybrid_shard.or(base.hybrid_shard),
        fsdp_reshard_after_forward: args
            .fsdp_reshard_after_forward
            .or(base.fsdp_reshard_after_forward),
        recompute: args
            .recompute
            .map(|kind| match kind {
                RecomputeArg::None => RecomputeKind::None,
                RecomputeArg::Selective => RecomputeKind::Selective,
                RecomputeArg::Op => RecomputeKind::Op,
                RecomputeArg::Full => RecomputeKind::Full,
            })
            .or(base.recompute),
        recompute_num_layers: args.recompute_num_layers.or(base.recompute_num_layers),
        overlap_grad_reduce: args.overlap_grad_reduce.or(base.overlap_grad_reduce),
        overlap_param_gather: args.overlap_param_gather.or(base.overlap_param_gather),
        tp_comm_overlap: args.tp_comm_overlap.or(base.tp_comm_overlap),
        grad_reduce_in_fp32: args.grad_reduce_in_fp32.or(base.grad_reduce_in_fp32),
        ep: args.ep.or(base.ep),
        etp: args.etp.or(base.etp),
        expert_comm_overlap: args.expert_comm_overlap.or(base.expert_comm_overlap),
        expert_dispatch: args.expert_dispatch.map(ExpertDispatchArg::kind).or(base.expert_dispatch),
        moe_imbalance: args.moe_imbalance.or(base.moe_imbalance),
        moe_capacity_factor: args.moe_capacity_factor.or(base.moe_capacity_factor),
    }
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

//! Rendering: text tables (comfy-table) and JSON for every subcommand. Nothing here computes a
//! prediction; it only lays out what the library returned.

use std::fmt::Write as _;

use comfy_table::{CellAlignment, Table, presets};
use serde::Serialize;

use crate::Estimate;
use crate::estimate::{HostMemory, MemoryBreakdown, StageMemory, TimeBreakdown, TimeSource};
use crate::plan::{Plan, RecomputeKind, Sharding};
use crate::search::fit::FitSuggestion;
use crate::units::Bytes;
use crate::validate::{CalibrationReport, GroupSummary, ValidationReport};

use super::inputs::Inputs;
use super::render_data::{DataJson, batching_refusal_line, data_imbalance_line, data_label};

// ---------------------------------------------------------------------------------------------
// Shared helpers

pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_style(presets::ASCII_MARKDOWN).set_header(header.iter().copied());
    table
}

/// Right-aligns every column but the first `text_columns`.
pub fn align_numbers(table: &mut Table, text_columns: usize) {
    for column in table.column_iter_mut().skip(text_columns) {
        column.set_cell_alignment(CellAlignment::Right);
    }
}

fn percent(part: f64, total: f64) -> String {
    if total > 0.0 { format!("{:.1}", 100.0 * part / total) } else { "-".to_owned() }
}

/// A number with `decimals` decimals, or `-`.
pub fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// A signed number with one decimal, or `-`.
pub fn signed(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}"))
}

/// How data-parallel ranks share model state, for the header line.
fn sharding_label(plan: &Plan) -> String {
    let label = match (plan.fsdp(), plan.sharding()) {
        (true, Sharding::Full) => "FSDP full shard".to_owned(),
        (true, _) => "FSDP grad-op shard".to_owned(),
        (false, Sharding::None) => "ZeRO-0 (plain DDP)".to_owned(),
        (false, Sharding::Optimizer) => "ZeRO-1 (distributed optimizer)".to_owned(),
        (false, Sharding::OptimizerAndGradients) => "ZeRO-2".to_owned(),
        (false, Sharding::Full) => "ZeRO-3".to_owned(),
    };
    if plan.fsdp() && plan.shard_group() < plan.dp() {
        format!("{label}, HSDP groups of {}", plan.shard_group())
    } else {
        label
    }
}

fn recompute_label(plan: &Plan, layers_per_stage: u64) -> String {
    match plan.recompute() {
        RecomputeKind::None => "no recompute".to_owned(),
        RecomputeKind::Selective => "selective recompute".to_owned(),
        RecomputeKind::Op => "per-op selective checkpointing".to_owned(),
        RecomputeKind::Full => format!(
            "full recompute ({} of {layers_per_stage} layers per stage)",
            plan.recompute_num_layers()
        ),
    }
}

pub fn memory_parts(memory: &MemoryBreakdown) -> [(&'static str, f64); 10] {
    memory.parts().map(|(name, bytes)| (name, bytes.as_gib()))
}

// ---------------------------------------------------------------------------------------------
// estimate: text

/// The line under the capacity that says where the offloaded activations go: their host memory
/// per GPU against the server's host memory over its GPUs.
fn host_memory_line(host: &HostMemory) -> String {
    let offloaded = host.offloaded.as_gib();
    match host.capacity {
        None => format!(
            "Host memory: offloaded activations {offloaded:.2} GiB per GPU (the GPU's file states no host memory: not checked; pass --host-memory)"
        ),
        Some(capacity) => format!(
            "Host memory: offloaded activations {offloaded:.2} GiB per GPU {}",
            host_capacity_verdict(host.offloaded, capacity)
        ),
    }
}

/// What `need` bytes of host memory per GPU leave of each GPU's share of the server's, `capacity`:
/// `of C GiB (the server's, shared by its GPUs): fits`, or `...: DOES NOT FIT (X GiB over)`.
pub(super) fn host_capacity_verdict(need: Bytes, capacity: Bytes) -> String {
    let verdict = if need <= capacity {
        "fits".to_owned()
    } else {
        format!("DOES NOT FIT ({:.2} GiB over)", need.as_gib() - capacity.as_gib())
    };
    format!("of {:.2} GiB (the server's, shared by its GPUs): {verdict}", capacity.as_gib())
}

/// A step-time breakdown as a table: each part in ms and % of the step, and the total.
pub fn time_table(title: &str, time: &TimeBreakdown) -> Table {
    let step = time.step_time().value();
    let mut out = table(&[title, "ms", "% of step"]);
    for (name, seconds) in time.parts() {
        let seconds = seconds.value();
        out.add_row([name.to_owned(), format!("{:.1}", seconds * 1e3), percent(seconds, step)]);
    }
    out.add_row(["total".to_owned(), format!("{:.1}", step * 1e3), percent(step, step)]);
    align_numbers(&mut out, 1);
    out
}

/// The lines that describe the run: model, cluster, batch, precision and plan.
pub fn run_header(inputs: &Inputs) -> String {
    let run = &inputs.run;
    let (model, gpu, training, plan) =
        (run.model(), run.cluster().gpu(), run.training(), run.plan());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} x {}, seq {}, global batch {} (micro batch {}, {} micro-batches), {}",
        model.display_name(),
        run.cluster().num_gpus(),
        gpu.display_name(),
        training.seq_len(),
        training.global_batch(),
        training.micro_batch(),
        plan.num_microbatches(),
        precision_label(run),
    );
    let _ = writeln!(
        out,
        "Plan: {}, SP {}, {}, {}, schedule {}",
        plan.label(),
        if plan.sequence_parallel() { "on" } else { "off" },
        sharding_label(plan),
        recompute_label(plan, run.stage_layers(0)),
        plan.schedule().name(),
    );
    let _ = writeln!(out, "Software: {}", software_label(run));
    if let Some(note) = &inputs.recipe {
        let _ = writeln!(out, "Recipe: {note}");
    }
    if let Some(recipe) = &inputs.recipe_available {
        let _ = writeln!(out, "Recipe: not taken; --recipe takes the {recipe}");
    }
    if let Some(data) = run.data() {
        let _ = writeln!(out, "Data: {}", data_label(run, data));
    }
    if let Some(line) = batching_refusal_line(run) {
        let _ = writeln!(out, "{line}");
    }
    if inputs.example {
        let _ = writeln!(
            out,
            "(built-in example: no --model given, so the example plan is used; flags override it)"
        );
    }
    out
}

/// The run's precision, with the layers it keeps in BF16 at either end when it keeps any.
fn precision_label(run: &crate::Run) -> String {
    let name = run.training().precision().name();
    match run.plan().bf16_layers() {
        (0, 0) => name.to_owned(),
        (start, end) => format!("{name} (the first {start} and last {end} layers in bf16)"),
    }
}

/// The software stack that prices the run: its id and name.
fn software_label(run: &crate::Run) -> String {
    format!("{}: {}", run.stack().id(), run.stack().name())
}

/// The run as (label, value) rows, for the header of an HTML report.
pub fn run_facts(run: &crate::Run) -> Vec<(String, String)> {
    let (model, cluster, training, plan) = (run.model(), run.cluster(), run.training(), run.plan());
    let rows = [
        ("Model", model.display_name().to_owned()),
        ("GPUs", format!("{} x {}", cluster.num_gpus(), cluster.gpu().display_name())),
        (
            "Training",
            format!(
                "seq {}, global batch {}, micro batch {} ({} micro-batches), {}",
                training.seq_len(),
                training.global_batch(),
                training.micro_batch(),
                plan.num_microbatches(),
                precision_label(run)
            ),
        ),
        (
            "Plan",
            format!(
                "{}, SP {}, schedule {}",
                plan.label(),
                if plan.sequence_parallel() { "on" } else { "off" },
                plan.schedule().name()
            ),
        ),
        ("Sharding", sharding_label(plan)),
        ("Recompute", recompute_label(plan, run.stage_layers(0))),
        ("Software", software_label(run)),
    ];
    let data = run.data().map(|data| ("Data", data_label(run, data)));
    rows.into_iter().chain(data).map(|(name, value)| (name.to_owned(), value)).collect()
}

/// The text report of one estimate.
pub fn estimate_text(inputs: &Inputs, estimate: &Estimate) -> String {
    let mut out = run_header(inputs);
    let peak = &estimate.peak_memory;
    let total = peak.breakdown.total().as_gib();
    let mut memory =
        table(&[&format!("Memory per GPU (stage {}, the peak)", peak.stage), "GiB", "% of total"]);
    for (name, gib) in memory_parts(&peak.breakdown) {
        memory.add_row([name.to_owned(), format!("{gib:.2}"), percent(gib, total)]);
    }
    memory.add_row([
        "total (device, nvidia-smi)".to_owned(),
        format!("{total:.2}"),
        percent(total, total),
    ]);
    for (name, bytes) in [
        ("  of which allocated (torch max allocated)", peak.breakdown.allocated()),
        ("  of which reserved (torch max reserved)", peak.breakdown.reserved()),
    ] {
        let gib = bytes.as_gib();
        memory.add_row([name.to_owned(), format!("{gib:.2}"), percent(gib, total)]);
    }
    align_numbers(&mut memory, 1);
    let _ = writeln!(out, "\n{memory}");
    let capacity = estimate.memory_capacity.as_gib();
    let need = peak.breakdown.fit_need().as_gib();
    if estimate.fits_on_gpu() {
        let _ = writeln!(
            out,
            "Capacity {capacity:.2} GiB per GPU: fits ({:.2} GiB free for allocated tensors, CUDA context and NCCL)",
            capacity - need
        );
    } else {
        let _ = writeln!(
            out,
            "Capacity {capacity:.2} GiB per GPU: DOES NOT FIT (allocated tensors, CUDA context and NCCL {:.2} GiB over)",
            need - capacity
        );
    }
    if let Some(host) = &estimate.host_memory {
        let _ = writeln!(out, "{}", host_memory_line(host));
    }

    let title = match estimate.time_source {
        TimeSource::Simulated => "Step time (simulated)",
        TimeSource::ClosedForm => "Step time (closed form)",
    };
    let _ = writeln!(out, "\n{}\n", time_table(title, &estimate.time));

    let throughput = &estimate.throughput;
    let lines = [
        ("Step time", format!("{:.3} s", throughput.step_time.value())),
        ("Tokens/s per GPU", format!("{:.1}", throughput.tokens_per_sec_per_gpu)),
        ("Model TFLOP/s per GPU", format!("{:.1}", throughput.model_tflops_per_gpu)),
        ("MFU", format!("{:.1} %", throughput.mfu_pct)),
        ("HFU", format!("{:.1} %", throughput.hfu_pct)),
        (
            "MFU/HFU peak",
            format!("dense {} {:.1} TFLOP/s", throughput.peak_basis, throughput.peak_tflops),
        ),
    ];
    for (name, value) in lines {
        let _ = writeln!(out, "{name:<22} {value}");
    }
    if let Some(line) = data_imbalance_line(inputs.run.plan(), estimate) {
        let _ = writeln!(out, "{line}");
    }
    match crate::validate::run_band(&inputs.run) {
        Some(band) => {
            let (low, high) = band.throughput_range(throughput.tokens_per_sec_per_gpu);
            let (fast, slow) = band.step_time_range(throughput.step_time.value());
            let _ = writeln!(
                out,
                "{:<22} {low:.1} .. {high:.1} tokens/s per GPU, step time {fast:.3} .. {slow:.3} s \
                 (errors {:+.1} .. {:+.1} %)\n{:<22} {}",
                "80 % band",
                band.low_pct,
                band.high_pct,
                "",
                band.describe()
            );
        }
        None => {
            let _ = writeln!(out, "{:<22} none: too few validated runs of this kind", "80 % band");
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// estimate: JSON
//
// The JSON wire format carries units in its key names (`_gib`, `_s`, `_pct`, `tokens_per_sec`)
// because JSON numbers have none: memory is in GiB (2^30 bytes), times in seconds, rates per
// second per GPU, and `breakdown_s` has one key per `TimeBreakdown` field, summing to
// `step_time_s`.

#[derive(Serialize)]
struct EstimateJson<'a, W: Serialize> {
    run: RunJson<'a>,
    memory: MemoryJson,
    time: TimeJson,
    throughput: ThroughputJson,
    /// The 80 % error band of the throughput, from held-out validation errors; null when there is
    /// too little evidence for one.
    error_band: Option<BandJson>,
    /// Empty when the plan fits.
    fit_suggestions: Vec<FitJson>,
    /// The whole run, when a training length was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    whole_run: Option<W>,
    /// The data's lengths and the imbalance they cause, when a length distribution was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<DataJson>,
}

/// An estimate's 80 % error band: the signed-error band, the ranges it gives, and its basis.
#[derive(Serialize)]
struct BandJson {
    tokens_per_sec_per_gpu_low: f64,
    tokens_per_sec_per_gpu_high: f64,
    step_time_s_low: f64,
    step_time_s_high: f64,
    /// The band as the source of truth: (predicted - measured) / measured, in %.
    #[serde(flatten)]
    band: crate::validate::ErrorBand,
    /// The basis in words.
    description: String,
}

impl BandJson {
    fn of(estimate: &Estimate, band: crate::validate::ErrorBand) -> BandJson {
        let throughput = &estimate.throughput;
        let (tokens_low, tokens_high) = band.throughput_range(throughput.tokens_per_sec_per_gpu);
        let (step_low, step_high) = band.step_time_range(throughput.step_time.value());
        BandJson {
            tokens_per_sec_per_gpu_low: tokens_low,
            tokens_per_sec_per_gpu_high: tokens_high,
            step_time_s_low: step_low,
            step_time_s_high: step_high,
            description: band.describe(),
            band,
        }
    }
}

/// A change that makes a plan fit: the flags to add and the plan they give.
#[derive(Serialize)]
struct FitJson {
    group: &'static str,
    flags: Vec<String>,
    plan: String,
    step_time_s: f64,
    peak_memory_gib: f64,
    tokens_per_sec_per_gpu: f64,
}

impl From<&FitSuggestion> for FitJson {
    fn from(suggestion: &FitSuggestion) -> Self {
        let estimate = &suggestion.plan.estimate;
        FitJson {
            group: suggestion.group,
            flags: suggestion.flags.clone(),
            plan: suggestion.plan.label(),
            step_time_s: estimate.time.step_time().value(),
            peak_memory_gib: estimate.peak_memory.breakdown.fit_need().as_gib(),
            tokens_per_sec_per_gpu: estimate.throughput.tokens_per_sec_per_gpu,
        }
    }
}

/// The changes that make a plan fit as a table, fastest first; nothing when there are none.
pub fn fit_text(suggestions: &[FitSuggestion], fits: bool) -> String {
    if fits {
        return String::new();
    }
    if suggestions.is_empty() {
        return "\nNo change of one group of options (recompute, sharding, micro-batch, tp, \
                pipeline, cp, experts) makes it fit: try more GPUs, or `meshplan search`.\n"
            .to_owned();
    }
    let mut out = table(&["to make it fit, add", "step s", "tokens/s/GPU", "peak GiB"]);
    for suggestion in suggestions {
        let estimate = &suggestion.plan.estimate;
        out.add_row([
            suggestion.flags.join(" "),
            format!("{:.3}", estimate.time.step_time().value()),
            format!("{:.1}", estimate.throughput.tokens_per_sec_per_gpu),
            format!("{:.1}", estimate.peak_memory.breakdown.total().as_gib()),
        ]);
    }
    align_numbers(&mut out, 1);
    format!(
        "\nChanges that make it fit, one group of options at a time (sharding and recompute also together), fastest first:\n\n{out}\n"
    )
}

#[derive(Serialize)]
struct RunJson<'a> {
    example: bool,
    model: &'a str,
    model_display_name: &'a str,
    gpu: &'a str,
    gpu_display_name: &'a str,
    num_gpus: u64,
    gpus_per_node: u64,
    nvlink_domain: u64,
    seq_len: u64,
    global_batch: u64,
    micro_batch: u64,
    precision: &'static str,
    plan: PlanJson,
    /// With `--recipe`: what the stack's recipe set.
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe: Option<&'a str>,
    /// Without `--recipe`: the recipe the stack has for the run, which `--recipe` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe_available: Option<&'a str>,
}

/// A plan in JSON: its label, every option under its file key (the resolved plan, as a plan file
/// holds it, so the JSON names what the plan file names), and what validation derived.
#[derive(Serialize)]
pub(super) struct PlanJson {
    label: String,
    #[serde(flatten)]
    options: crate::plan::PlanSpec,
    /// DP ranks one shard group spans (dp unless hybrid sharding).
    shard_group: u64,
    /// Expert-data-parallel size.
    edp: u64,
    /// Micro-batches per pipeline per step.
    num_microbatches: u64,
}

impl PlanJson {
    /// The JSON of a run's validated plan, naming the software stack that priced it.
    pub(super) fn of(run: &crate::run::Run) -> PlanJson {
        let plan = run.plan();
        PlanJson {
            label: plan.label(),
            options: crate::plan::PlanSpec {
                stack: Some(run.stack().id().to_owned()),
                ..plan.to_spec()
            },
            shard_group: plan.shard_group(),
            edp: plan.edp(),
            num_microbatches: plan.num_microbatches(),
        }
    }
}

#[derive(Serialize)]
pub struct MemoryGib {
    weights: f64,
    gradients: f64,
    optimizer_states: f64,
    activations: f64,
    logits: f64,
    buffers: f64,
    workspaces: f64,
    fragmentation: f64,
    cuda_context: f64,
    nccl_buffers: f64,
}

impl From<&MemoryBreakdown> for MemoryGib {
    fn from(memory: &MemoryBreakdown) -> Self {
        MemoryGib {
            weights: memory.weights.as_gib(),
            gradients: memory.gradients.as_gib(),
            optimizer_states: memory.optimizer_states.as_gib(),
            activations: memory.activations.as_gib(),
            logits: memory.logits.as_gib(),
            buffers: memory.buffers.as_gib(),
            workspaces: memory.workspaces.as_gib(),
            fragmentation: memory.fragmentation.as_gib(),
            cuda_context: memory.cuda_context.as_gib(),
            nccl_buffers: memory.nccl_buffers.as_gib(),
        }
    }
}

#[derive(Serialize)]
struct StageJson {
    stage: u64,
    breakdown_gib: MemoryGib,
    total_gib: f64,
}

impl From<&StageMemory> for StageJson {
    fn from(stage: &StageMemory) -> Self {
        StageJson {
            stage: stage.stage,
            breakdown_gib: MemoryGib::from(&stage.breakdown),
            total_gib: stage.breakdown.total().as_gib(),
        }
    }
}

/// The memory of an estimate in JSON: the peak stage's breakdown, capacity and every stage.
#[derive(Serialize)]
pub(super) struct MemoryJson {
    stage: u64,
    breakdown_gib: MemoryGib,
    total_gib: f64,
    capacity_gib: f64,
    fits: bool,
    stages: Vec<StageJson>,
    /// Host memory of the offloaded activations; absent without activation offload.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<HostMemoryJson>,
}

/// The host memory of an estimate's offloaded activations in JSON.
#[derive(Serialize)]
struct HostMemoryJson {
    offloaded_gib: f64,
    /// The server's host memory over its GPUs; null where the GPU's file does not state it.
    capacity_gib: Option<f64>,
    fits: bool,
}

impl From<&Estimate> for MemoryJson {
    fn from(estimate: &Estimate) -> Self {
        let peak = &estimate.peak_memory;
        MemoryJson {
            stage: peak.stage,
            breakdown_gib: MemoryGib::from(&peak.breakdown),
            total_gib: peak.breakdown.total().as_gib(),
            capacity_gib: estimate.memory_capacity.as_gib(),
            fits: estimate.fits(),
            stages: estimate.stages.iter().map(StageJson::from).collect(),
            host: estimate.host_memory.map(|host| HostMemoryJson {
                offloaded_gib: host.offloaded.as_gib(),
                capacity_gib: host.capacity.map(|c| c.as_gib()),
                fits: host.fits(),
            }),
        }
    }
}

#[derive(Serialize)]
struct TimeJson {
    /// `closed-form` or `simulated`.
    source: TimeSource,
    step_time_s: f64,
    /// Seconds per part; `Seconds` serializes as a plain number of seconds.
    breakdown_s: TimeBreakdown,
}

#[derive(Serialize)]
pub struct ThroughputJson {
    step_time_s: f64,
    tokens_per_sec_per_gpu: f64,
    model_tflops_per_gpu: f64,
    mfu_pct: f64,
    hfu_pct: f64,
    /// The peak MFU and HFU are taken against (the dense peak of the plan's GEMM precision).
    mfu_peak_tflops: f64,
    /// `bf16`, `fp8` or `fp4`.
    mfu_peak_basis: &'static str,
}

impl From<&Estimate> for ThroughputJson {
    fn from(estimate: &Estimate) -> Self {
        let throughput = &estimate.throughput;
        ThroughputJson {
            step_time_s: throughput.step_time.value(),
            tokens_per_sec_per_gpu: throughput.tokens_per_sec_per_gpu,
            model_tflops_per_gpu: throughput.model_tflops_per_gpu,
            mfu_pct: throughput.mfu_pct,
            hfu_pct: throughput.hfu_pct,
            mfu_peak_tflops: throughput.peak_tflops,
            mfu_peak_basis: throughput.peak_basis,
        }
    }
}

/// The JSON report of one estimate: one object, pretty-printed.
pub fn estimate_json<W: Serialize>(
    inputs: &Inputs,
    estimate: &Estimate,
    suggestions: &[FitSuggestion],
    whole_run: Option<W>,
) -> serde_json::Result<String> {
    let run = &inputs.run;
    let (model, cluster, training) = (run.model(), run.cluster(), run.training());
    let json = EstimateJson {
        run: RunJson {
            example: inputs.example,
            model: model.name(),
            model_display_name: model.display_name(),
            gpu: cluster.gpu().name(),
            gpu_display_name: cluster.gpu().display_name(),
            num_gpus: cluster.num_gpus(),
            gpus_per_node: cluster.interconnect().gpus_per_node(),
            nvlink_domain: cluster.interconnect().nvlink_domain(),
            seq_len: training.seq_len(),
            global_batch: training.global_batch(),
            micro_batch: training.micro_batch(),
            precision: training.precision().name(),
            plan: PlanJson::of(run),
            recipe: inputs.recipe.as_deref(),
            recipe_available: inputs.recipe_available.as_deref(),
        },
        memory: MemoryJson::from(estimate),
        time: TimeJson {
            source: estimate.time_source,
            step_time_s: estimate.time.step_time().value(),
            breakdown_s: estimate.time,
        },
        throughput: ThroughputJson::from(estimate),
        error_band: crate::validate::run_band(run).map(|band| BandJson::of(estimate, band)),
        fit_suggestions: suggestions.iter().map(FitJson::from).collect(),
        whole_run,
        data: DataJson::of(run, estimate),
    };
    serde_json::to_string_pretty(&json)
}

// ---------------------------------------------------------------------------------------------
// validate

fn group_table(title: &str, groups: &[GroupSummary]) -> Table {
    let mut out =
        table(&[title, "rows", "predicted", "median |err| %", "p90 |err| %", "mean err %"]);
    for group in groups {
        out.add_row([
            group.name.clone(),
            group.rows.to_string(),
            group.predicted.to_string(),
            optional(group.median_abs_error_pct, 1),
            optional(group.p90_abs_error_pct, 1),
            signed(group.mean_error_pct),
        ]);
    }
    align_numbers(&mut out, 1);
    out
}

/// The text report of a validation run.
pub fn validation_text(report: &ValidationReport) -> String {
    let mut out = String::new();
    let mut rows = table(&[
        "row",
        "source",
        "model",
        "GPUs",
        "GPU",
        "plan",
        "measured tok/s/GPU",
        "predicted",
        "error %",
        "memory measured GiB",
        "memory predicted GiB",
    ]);
    for row in &report.rows {
        rows.add_row([
            row.row_id.clone(),
            row.source_id.clone(),
            row.model.clone(),
            row.num_gpus.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            row.gpu.clone(),
            row.plan.clone().unwrap_or_else(|| "-".to_owned()),
            optional(row.measured_tokens_per_sec_per_gpu, 1),
            match (&row.skipped_reason, row.predicted_tokens_per_sec_per_gpu) {
                (Some(_), _) => "skipped".to_owned(),
                (None, predicted) => optional(predicted, 1),
            },
            signed(row.error_pct),
            optional(row.measured_memory_gib, 1),
            optional(row.predicted_memory_gib, 1),
        ]);
    }
    align_numbers(&mut rows, 6);
    if let Some(gpus) = rows.column_mut(3) {
        gpus.set_cell_alignment(CellAlignment::Right);
    }
    let _ = writeln!(out, "{rows}");

    let assumed: Vec<_> = report.rows.iter().filter(|r| !r.assumptions.is_empty()).collect();
    let _ = writeln!(out, "\nAssumptions");
    if assumed.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for row in assumed {
        for assumption in &row.assumptions {
            let _ = writeln!(out, "  {}: {assumption}", row.row_id);
        }
    }

    let _ = writeln!(out, "\n{}", group_table("By source", &report.by_source));
    let _ = writeln!(out, "\n{}", group_table("By GPU", &report.by_gpu));
    let _ = writeln!(out, "\n{}", group_table("By architecture", &report.by_kind));

    let _ = writeln!(out, "\nSkipped rows");
    let skipped: Vec<_> = report.rows.iter().filter(|r| r.skipped_reason.is_some()).collect();
    if skipped.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for row in skipped {
        let _ = writeln!(out, "  {}: {}", row.row_id, row.skipped_reason.as_deref().unwrap_or(""));
    }

    let s = &report.summary;
    let _ = writeln!(
        out,
        "\nOverall: {} rows, {} predicted, {} skipped; median |error| {} %, p90 |error| {} %, \
         mean error {} %; memory rows {}, memory median |error| {} %",
        s.rows,
        s.predicted,
        s.skipped,
        optional(s.median_abs_error_pct, 1),
        optional(s.p90_abs_error_pct, 1),
        signed(s.mean_error_pct),
        s.memory_rows,
        optional(s.memory_median_abs_error_pct, 1),
    );
    out
}

/// The JSON report of a validation run: the library's report, serialized as is.
pub fn validation_json(report: &ValidationReport) -> serde_json::Result<String> {
    serde_json::to_string_pretty(report)
}

/// The text report of `meshplan calibrate`.
pub fn calibration_text(report: &CalibrationReport) -> String {
    let mut out = String::new();
    let mut fits =
        table(&["GPU", "rows", "fitted calibration", "median err % at 1.0", "median err % fitted"]);
    for fit in &report.fits {
        fits.add_row([
            fit.gpu.clone(),
            fit.rows.to_string(),
            format!("{:.3}", fit.factor),
            signed(fit.base_median_error_pct),
            signed(fit.fitted_median_error_pct),
        ]);
    }
    align_numbers(&mut fits, 1);
    let _ = writeln!(
        out,
        "Efficiency calibration per GPU (fitted on every predicted dense row)\n{fits}"
    );
    let cross = &report.cross_validation;
    let _ = writeln!(
        out,
        "\nLeave-one-source-out: each source predicted with factors fitted on the other sources\n{}",
        group_table("held-out source", &cross.by_source)
    );
    let overall = &cross.overall;
    let _ = writeln!(
        out,
        "\nHeld out overall: {} rows, median |error| {} %, p90 |error| {} %, mean error {} %",
        overall.predicted,
        optional(overall.median_abs_error_pct, 1),
        optional(overall.p90_abs_error_pct, 1),
        signed(overall.mean_error_pct),
    );
    out
}

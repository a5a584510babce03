//! Command-line flags as clap derive structs. No logic lives here: turning flags into a
//! [`crate::RunSpec`] is `inputs.rs`, running a subcommand is its own file.
//!
//! Integer flags are `i64` so that zero and negative values reach `Run::from_spec` and come back
//! as violations naming the field; clap only rejects text that is not a number at all.

use std::path::PathBuf;

use crate::plan::{Engine, PlanSpec};
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Predict per-GPU memory and step time of a distributed LLM training plan before booking GPUs.
#[derive(Debug, Parser)]
#[command(name = "meshplan", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Price one training run: memory per GPU, step time and throughput.
    ///
    /// With no flags this prices the built-in example: Llama 3.1 70B on 64 H100 SXM, seq 8192,
    /// global batch 128, micro batch 1, bf16, tp 8 x pp 4 x vp 5 (dp 2): tensor parallelism inside
    /// each 8-GPU node, interleaved pipeline across nodes, Megatron-style. Plan flags override
    /// that example's plan; once --model is given the plan starts empty (tp = pp = vp = cp = 1,
    /// dp = the GPUs left, ZeRO-1 distributed optimizer) and only the flags shape it.
    Estimate(Box<EstimateArgs>),
    /// Simulate one training step under the plan's pipeline schedule: step time, bubble, exposed
    /// communication and each stage's memory; --trace writes a Chrome trace for Perfetto.
    Simulate(Box<SimulateArgs>),
    /// Search the plan space for the fastest plans that fit, and count what was rejected and why.
    Search(Box<SearchArgs>),
    /// Write a plan as an engine's launch configuration (Megatron-LM arguments, torchtitan TOML,
    /// DeepSpeed JSON).
    Export(Box<ExportArgs>),
    /// Put two or more plan files side by side: memory, step time and throughput of each, and
    /// every option that differs between them.
    Compare(Box<CompareArgs>),
    /// List every built-in model and GPU preset with its key numbers and source.
    Presets(PresetsArgs),
    /// Predict every row of a calibration CSV and compare with the published measurements.
    Validate(ValidateArgs),
    /// Fit each GPU's efficiency `calibration` factor on a calibration CSV and report how well
    /// runs from a source left out of the fit are predicted (leave-one-source-out).
    Calibrate(CalibrateArgs),
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable tables.
    Text,
    /// One JSON object.
    Json,
}

/// `meshplan estimate` flags.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// The run to price.
    #[command(flatten)]
    pub run: RunArgs,
    /// Write the run's complete plan (every option explicit) as a plan file for --plan.
    #[arg(long, value_name = "FILE.toml")]
    pub save_plan: Option<PathBuf>,
    /// The stack's performance recipe.
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Output format; json is one object with units in its key names.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How much to train, and the failures, checkpoints and price of the whole run.
    #[command(flatten)]
    pub whole: WholeRunArgs,
}

/// `--recipe`, shared by `estimate` and `simulate`.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct RecipeArgs {
    /// Take the performance recipe that the stack (--stack, a NeMo release) publishes for this
    /// model, GPU, precision and GPU count: it sets the plan options the flags leave unset
    /// (recompute, Megatron-FSDP, offload, token dispatch, overlaps, BF16 layers) and its
    /// kernels (TE op fuser, FP8 attention, whole-iteration CUDA graphs), as `meshplan validate`
    /// does for a published run. A plan file saved with it holds the options, not the kernels:
    /// give --recipe again beside --plan.
    #[arg(long)]
    pub recipe: bool,
}

/// `meshplan simulate` flags.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The run to simulate.
    #[command(flatten)]
    pub run: RunArgs,
    /// Write the simulated step as a Chrome Trace Event Format file (opens in Perfetto).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// Write a self-contained HTML report: memory per stage, step-time breakdown and the
    /// pipeline timeline, drawn as inline SVG charts.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// The stack's performance recipe.
    #[command(flatten)]
    pub recipe: RecipeArgs,
    /// Output format; json is one object, times in seconds.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How much to train, and the failures, checkpoints and price of the whole run.
    #[command(flatten)]
    pub whole: WholeRunArgs,
    /// Whole runs to draw, failure by failure, for the spread of the time to train.
    #[arg(long, value_name = "N", default_value_t = 1000, help_heading = "Whole run")]
    pub runs: u64,
    /// Seed of the drawn runs: the same seed draws the same runs.
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Whole run")]
    pub seed: u64,
}

/// `meshplan search` flags.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Model, cluster and training setup; every plan flag given (and --micro-batch) pins that
    /// choice, and --engine (megatron unless given) limits the search to plans that engine runs.
    #[command(flatten)]
    pub run: RunArgs,
    /// Largest tensor-parallel size. [default: the NVLink domain]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Search")]
    pub max_tp: Option<i64>,
    /// Largest pipeline-parallel size. [default: no limit]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Search")]
    pub max_pp: Option<i64>,
    /// Largest context-parallel size. [default: no limit]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Search")]
    pub max_cp: Option<i64>,
    /// Fraction of GPU memory to keep free. [default: 0.05]
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.05,
        allow_negative_numbers = true,
        help_heading = "Search"
    )]
    pub memory_headroom: f64,
    /// How many plans to list. [default: 5]
    #[arg(
        long,
        value_name = "N",
        default_value_t = 5,
        allow_negative_numbers = true,
        help_heading = "Search"
    )]
    pub top: i64,
    /// Print (or write with --output) the best plan as this engine's configuration instead of the
    /// report; implies --engine ENGINE.
    #[arg(long, value_enum, value_name = "ENGINE", help_heading = "Search")]
    pub export_to: Option<Engine>,
    /// Search every plan meshplan prices, whatever engine runs it: no engine's refusals apply,
    /// and with document lengths the search also tries re-packing across global batches and
    /// both hybrid-CP schedulers (packed documents) or variable micro-batches (padded ones),
    /// which no released engine runs. Not with --engine or --export-to.
    #[arg(long, help_heading = "Search")]
    pub any_engine: bool,
    /// Write the best plan as a plan file (TOML, every option explicit) that `estimate`,
    /// `simulate`, `export` and `compare` read with --plan.
    #[arg(long, value_name = "FILE.toml", help_heading = "Search")]
    pub save_plan: Option<PathBuf>,
    /// File for --export-to.
    #[arg(long, value_name = "FILE", help_heading = "Search")]
    pub output: Option<PathBuf>,
    /// Write a self-contained HTML report: the best plan's memory, step time and pipeline
    /// timeline, throughput vs memory of every candidate that fits, and the rejections.
    #[arg(long, value_name = "FILE.html", help_heading = "Search")]
    pub report: Option<PathBuf>,
    /// Output format; json is one object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How much to train: adds the time, cost and ETTR of a whole run for each plan found.
    #[command(flatten)]
    pub whole: WholeRunArgs,
    /// Also try more GPUs, up to this many: --gpus doubled while it stays at most N, and N
    /// itself; the GPU count whose best plan wins --objective is the one reported.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Search")]
    pub max_gpus: Option<i64>,
    /// What decides between GPU counts: the step time, or (with --train-tokens) the time to
    /// train or the cost (GPU-hours, priced with --price-per-gpu-hour when given); more GPUs
    /// mean more failures.
    #[arg(long, value_enum, default_value_t = Objective::StepTime, help_heading = "Search")]
    pub objective: Objective,
}

/// What decides between GPU counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Objective {
    /// The simulated step time of the best plan.
    StepTime,
    /// The expected wall-clock time to train, failures counted.
    TimeToTrain,
    /// The GPU-hours (or dollars) to train.
    Cost,
}

/// `meshplan export` flags.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The engine whose configuration to write (the same as --engine). [default: the plan's
    /// engine: a plan file's, else megatron]
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub to: Option<Engine>,
    /// The run and plan to export.
    #[command(flatten)]
    pub run: RunArgs,
    /// Write to this file (whole or not at all) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write the configuration even when the plan's predicted peak memory per GPU is over the
    /// GPU's capacity (refused otherwise).
    #[arg(long)]
    pub allow_over_capacity: bool,
}

/// `meshplan compare` flags.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A plan file (written by --save-plan); give two or more, one --plan each.
    #[arg(long = "plan", value_name = "FILE.toml")]
    pub plans: Vec<PathBuf>,
    /// Write a self-contained HTML report: the plans side by side, what differs, and each plan's
    /// memory and step-time charts.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Output format; json is one object with every plan and the differences.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `meshplan presets` flags.
#[derive(Debug, Args)]
pub struct PresetsArgs {
    /// Output format; json lists models and GPUs.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `meshplan validate` flags.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Calibration CSV with the columns of data/calibration/runs.csv.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,
    /// Instead of comparing with measurements, search every model / cluster / batch of the file
    /// and compare the best plan found with the published one (by meshplan's own model).
    #[arg(long)]
    pub search: bool,
    /// With --search: only plans this engine runs. [default: megatron]
    #[arg(long, value_enum, value_name = "ENGINE", requires = "search")]
    pub engine: Option<Engine>,
    /// Output format; json is the whole report as one object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `meshplan calibrate` flags.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Calibration CSV with the columns of data/calibration/runs.csv.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,
    /// Also write the table of 80 % error bands (from every row's leave-one-source-out error, as
    /// `validate` computes them) to this file; data/error-bands.json is the one meshplan embeds.
    #[arg(long, value_name = "FILE.json")]
    pub write_bands: Option<PathBuf>,
    /// Output format; json is the whole report as one object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Flags that describe one run; shared by every subcommand that prices a run.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// A plan file (written by --save-plan): model, cluster, training and every plan option.
    /// Flags given beside it override what it says.
    #[arg(long, value_name = "FILE.toml", help_heading = "Model and cluster")]
    pub plan: Option<PathBuf>,
    /// Model preset name, a TOML file with ModelSpec fields, or a Hugging Face config.json (a value
    /// ending in .toml or .json or containing a path separator is read as a file). [default:
    /// llama3.1-70b, the built-in example, whose plan tp 8 pp 4 vp 5 is then the base that plan
    /// flags override]
    #[arg(long, value_name = "NAME|FILE", help_heading = "Model and cluster")]
    pub model: Option<String>,
    /// GPU preset name (h100 means h100-sxm; `meshplan presets` lists them). [default: h100-sxm]
    #[arg(long, value_name = "NAME", help_heading = "Model and cluster")]
    pub gpu: Option<String>,
    /// Total GPUs in the job. [default: 64]
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help_heading = "Model and cluster"
    )]
    pub gpus: Option<i64>,
    /// GPUs per server. [default: the GPU preset's, 8 for h100-sxm]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Interconnect")]
    pub gpus_per_node: Option<i64>,
    /// GPUs sharing one NVLink domain. [default: the GPU preset's, 8 for h100-sxm]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Interconnect")]
    pub nvlink_domain: Option<i64>,
    /// NVLink bandwidth per GPU, one direction, e.g. "450 GB/s". [default: the GPU preset's]
    #[arg(long, value_name = "RATE", help_heading = "Interconnect")]
    pub intra_node_bandwidth: Option<String>,
    /// Network bandwidth per GPU, one direction, e.g. "50 GB/s" or "400 Gb/s". [default: the
    /// GPU preset's]
    #[arg(long, value_name = "RATE", help_heading = "Interconnect")]
    pub inter_node_bandwidth: Option<String>,
    /// Latency of one NVLink hop, e.g. "3 us". [default: the GPU preset's]
    #[arg(long, value_name = "TIME", help_heading = "Interconnect")]
    pub intra_node_latency: Option<String>,
    /// Latency of one network hop, e.g. "10 us". [default: the GPU preset's]
    #[arg(long, value_name = "TIME", help_heading = "Interconnect")]
    pub inter_node_latency: Option<String>,
    /// Host (CPU) memory of one server, shared by its GPUs, e.g. "2 TB": the activations a plan
    /// offloads (--offload-activation-layers) must fit in it. [default: the GPU preset's, 2 TB
    /// for h100-sxm (DGX H100)]
    #[arg(long, value_name = "SIZE", help_heading = "Interconnect")]
    pub host_memory: Option<String>,

    /// Tokens per sequence. [default: 8192]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Training")]
    #[arg(alias = "seq-length")]
    pub seq_len: Option<i64>,
    /// Sequences per optimizer step, across all data-parallel ranks. [default: 128]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Training")]
    #[arg(alias = "global-batch-size")]
    pub global_batch: Option<i64>,
    /// Sequences per micro-batch on one model replica. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Training")]
    #[arg(alias = "micro-batch-size")]
    pub micro_batch: Option<i64>,
    /// Numeric recipe: bf16 fp16 fp8 fp8-delayed fp8-current fp8-blockwise mxfp8 nvfp4 (fp8 means
    /// fp8-delayed). [default: bf16]
    #[arg(long, value_name = "NAME", help_heading = "Training")]
    pub precision: Option<String>,
    /// Document lengths of the data: a built-in distribution (`meshplan presets`), or a file of
    /// lengths (CSV or Parquet with a `length` column, or a histogram with `min`, `max` and
    /// `count` columns; JSON or TOML with a `lengths` list or a `histogram` of those bins).
    /// [default: every sequence one document of --seq-len tokens]
    #[arg(long, value_name = "NAME|FILE", help_heading = "Training")]
    pub lengths: Option<String>,
    /// How documents become sequences: pack (cut into --seq-len sequences, each document
    /// attending to itself), pad (one document per sequence; --variable-micro-batches pads each
    /// only to the longest of its micro-batch), whole (whole documents packed, the rest of a
    /// sequence padded) or concat (cut into --seq-len sequences with no document mask: each
    /// costs a full sequence, the engines' default pre-training loaders). [default: pack]
    #[arg(long, value_enum, value_name = "HOW", help_heading = "Training")]
    pub batching: Option<crate::data::Batching>,

    /// The parallel plan: one flag per plan option.
    #[command(flatten)]
    pub plan_options: PlanSpec,
}

/// How much to train, and what the run meets on the way.
#[derive(Debug, Clone, Default, Args)]
pub struct WholeRunArgs {
    /// Tokens to train (15T, 300B, 1.5e13): adds the time and cost to train them, failures,
    /// checkpoints and restarts counted.
    #[arg(long, value_name = "COUNT", help_heading = "Whole run")]
    pub train_tokens: Option<String>,
    /// Optimizer steps to train, instead of --train-tokens.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Whole run")]
    pub train_steps: Option<i64>,
    /// Failures per node-day: llama3, meta-rsc, byterobust, opt-era (published fleets) or a
    /// number of failures per 1000 node-days. [default: llama3, 3.79]
    #[arg(long, value_name = "PRESET|RATE", help_heading = "Whole run")]
    pub failure_rate: Option<String>,
    /// Checkpoints block training for the device-to-host copy (async) or the whole write (sync).
    /// [default: async]
    #[arg(long, value_name = "MODE", value_parser = ["sync", "async"], help_heading = "Whole run")]
    pub checkpoint: Option<String>,
    /// Time between checkpoints (30 min). [default: Daly's optimum]
    #[arg(long, value_name = "TIME", help_heading = "Whole run")]
    pub checkpoint_interval: Option<String>,
    /// Aggregate write bandwidth of checkpoint storage. [default: 2 TB/s, Llama 3's Tectonic]
    #[arg(long, value_name = "RATE", help_heading = "Whole run")]
    pub storage_write: Option<String>,
    /// Aggregate read bandwidth of checkpoint storage. [default: 2 TB/s]
    #[arg(long, value_name = "RATE", help_heading = "Whole run")]
    pub storage_read: Option<String>,
    /// Storage bandwidth one node reaches, each way: a node's ranks move their shares through
    /// it. [default: only the aggregate rates]
    #[arg(long, value_name = "RATE", help_heading = "Whole run")]
    pub storage_per_node: Option<String>,
    /// A restart besides loading the checkpoint: detection, rescheduling, initialisation.
    /// [default: 690 s]
    #[arg(long, value_name = "TIME", help_heading = "Whole run")]
    pub restart_time: Option<String>,
    /// Warm spare nodes: a failure that finds one free swaps it in (about 60 s) instead of
    /// rescheduling the job (about 600 s). [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Whole run")]
    pub spare_nodes: Option<i64>,
    /// Time to repair a failed node and return it to the spares. [default: 1 d, an assumption]
    #[arg(long, value_name = "TIME", help_heading = "Whole run")]
    pub repair_time: Option<String>,
    /// Checkpoint to the hosts' memory and a peer's (GEMINI-style) instead of storage: saved
    /// over the host link and the network, loaded from the peer at a restart.
    #[arg(long, help_heading = "Whole run")]
    pub in_memory_checkpoints: bool,
    /// Price of one GPU-hour in dollars, for the run's cost.
    #[arg(long, value_name = "DOLLARS", allow_negative_numbers = true, help_heading = "Whole run")]
    pub price_per_gpu_hour: Option<f64>,
}

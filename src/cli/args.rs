//! Command-line flags as clap derive structs. No logic lives here: turning flags into a
//! [`meshplan::RunSpec`] is `inputs.rs`, running a subcommand is its own file.
//!
//! Integer flags are `i64` so that zero and negative values reach `Run::from_spec` and come back
//! as violations naming the field; clap only rejects text that is not a number at all.

use std::path::PathBuf;

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

/// `--fsdp-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FsdpModeArg {
    /// Shard parameters, gradients and optimizer state (ZeRO-3).
    Full,
    /// Shard gradients and optimizer state, keep parameters whole (ZeRO-2).
    GradOp,
}

/// `--recompute` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecomputeArg {
    /// Store every activation the backward needs.
    None,
    /// Recompute the attention core only.
    Selective,
    /// Store each layer's input and rerun its forward in the backward.
    Full,
    /// torchtitan's per-op selective checkpointing: store every other matmul output and the
    /// attention output, rerun the rest.
    Op,
}

/// `--pipeline-split` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PipelineSplitArg {
    /// Every stage gets the same number of layers.
    Even,
    /// The embedding and the loss count as one layer each (first and last stage hold one fewer).
    EmbeddingAndLoss,
    /// Any layer count: layers, embedding, loss and MTP modules spread evenly over the chunks
    /// (a Megatron-LM --pipeline-model-parallel-layout).
    Balanced,
}

/// `--cp-comm` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CpCommArg {
    /// Ring attention: keys and values pass around the ring, overlapped with attention.
    Ring,
    /// Ulysses: all-to-alls re-shard the sequence into heads around attention.
    AllToAll,
    /// All-to-all inside an NVLink domain, ring across domains.
    Hierarchical,
}

impl CpCommArg {
    /// The plan's value.
    pub fn kind(self) -> meshplan::plan::CpComm {
        use meshplan::plan::CpComm;
        match self {
            CpCommArg::Ring => CpComm::Ring,
            CpCommArg::AllToAll => CpComm::AllToAll,
            CpCommArg::Hierarchical => CpComm::Hierarchical,
        }
    }
}

/// `--expert-dispatch` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpertDispatchArg {
    /// One message per (token, expert) pair.
    AllToAll,
    /// One copy per destination node (network) and rank (NVLink), as DeepEP sends.
    Deduplicated,
}

impl ExpertDispatchArg {
    /// The plan's value.
    pub fn kind(self) -> meshplan::plan::ExpertDispatch {
        use meshplan::plan::ExpertDispatch;
        match self {
            ExpertDispatchArg::AllToAll => ExpertDispatch::AllToAll,
            ExpertDispatchArg::Deduplicated => ExpertDispatch::Deduplicated,
        }
    }
}

/// `--schedule` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleArg {
    /// All forwards, then all backwards.
    Gpipe,
    /// One forward, one backward (PipeDream-Flush).
    #[value(name = "1f1b")]
    OneFOneB,
    /// Megatron-LM's interleaved 1F1B over --vp chunks.
    Interleaved,
    /// ZB-H1: weight gradients deferred into the drain bubble.
    ZeroBubble,
    /// DeepSeek-V3's DualPipe: micro-batches from both ends, two stages per rank.
    Dualpipe,
}

impl ScheduleArg {
    /// The library's schedule.
    pub fn schedule(self) -> meshplan::plan::PipelineSchedule {
        use meshplan::plan::PipelineSchedule as S;
        match self {
            ScheduleArg::Gpipe => S::Gpipe,
            ScheduleArg::OneFOneB => S::OneFOneB,
            ScheduleArg::Interleaved => S::Interleaved,
            ScheduleArg::ZeroBubble => S::ZeroBubble,
            ScheduleArg::Dualpipe => S::Dualpipe,
        }
    }
}

/// `meshplan estimate` flags.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// The run to price.
    #[command(flatten)]
    pub run: RunArgs,
    /// Output format; json is one object with units in its key names.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
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
    /// Output format; json is one object, times in seconds.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// A training engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// Megatron-LM command-line arguments.
    Megatron,
    /// A torchtitan job config TOML.
    Torchtitan,
    /// A DeepSpeed JSON config.
    Deepspeed,
}

impl EngineArg {
    /// The library's engine.
    pub fn engine(self) -> meshplan::export::Engine {
        use meshplan::export::Engine;
        match self {
            EngineArg::Megatron => Engine::Megatron,
            EngineArg::Torchtitan => Engine::Torchtitan,
            EngineArg::Deepspeed => Engine::Deepspeed,
        }
    }
}

/// `meshplan search` flags.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Model, cluster and training setup; --tp, --pp, --cp and --micro-batch pin those choices.
    #[command(flatten)]
    pub run: RunArgs,
    /// Largest tensor-parallel size. [default: the NVLink domain]
    #[arg(long, value_name = "N", help_heading = "Search")]
    pub max_tp: Option<u64>,
    /// Largest pipeline-parallel size. [default: no limit]
    #[arg(long, value_name = "N", help_heading = "Search")]
    pub max_pp: Option<u64>,
    /// Largest context-parallel size. [default: no limit]
    #[arg(long, value_name = "N", help_heading = "Search")]
    pub max_cp: Option<u64>,
    /// Fraction of GPU memory to keep free. [default: 0.05]
    #[arg(long, value_name = "FRACTION", default_value_t = 0.05, help_heading = "Search")]
    pub memory_headroom: f64,
    /// Only plans this engine can run. [default: any]
    #[arg(long, value_enum, value_name = "ENGINE", help_heading = "Search")]
    pub engine: Option<EngineArg>,
    /// How many plans to list. [default: 5]
    #[arg(long, value_name = "N", default_value_t = 5, help_heading = "Search")]
    pub top: usize,
    /// Print (or write with --output) the best plan as this engine's configuration instead of the
    /// report.
    #[arg(long, value_enum, value_name = "ENGINE", help_heading = "Search")]
    pub export_to: Option<EngineArg>,
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
}

/// `meshplan export` flags.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The engine.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub to: EngineArg,
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
    /// Calibration CSV with the columns of shared/calibration/runs.csv.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,
    /// Instead of comparing with measurements, search every model / cluster / batch of the file
    /// and compare the best plan found with the published one (by meshplan's own model).
    #[arg(long)]
    pub search: bool,
    /// Output format; json is the whole report as one object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `meshplan calibrate` flags.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Calibration CSV with the columns of shared/calibration/runs.csv.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,
    /// Output format; json is the whole report as one object.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Flags that describe one run; shared by every subcommand that prices a run.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Model preset name, a TOML file with ModelSpec fields, or a Hugging Face config.json (a value
    /// ending in .toml or .json or containing a path separator is read as a file). [default:
    /// llama3.1-70b, the built-in example, whose plan tp 8 pp 4 vp 5 is then the base that plan
    /// flags override]
    #[arg(long, value_name = "NAME|FILE", help_heading = "Model and cluster")]
    pub model: Option<String>,
    /// GPU preset name.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "h100-sxm",
        help_heading = "Model and cluster"
    )]
    pub gpu: String,
    /// Total GPUs in the job.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 64,
        allow_negative_numbers = true,
        help_heading = "Model and cluster"
    )]
    pub gpus: i64,
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

    /// Tokens per sequence.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 8192,
        allow_negative_numbers = true,
        help_heading = "Training"
    )]
    pub seq_len: i64,
    /// Sequences per optimizer step, across all data-parallel ranks.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 128,
        allow_negative_numbers = true,
        help_heading = "Training"
    )]
    pub global_batch: i64,
    /// Sequences per micro-batch on one model replica. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Training")]
    pub micro_batch: Option<i64>,
    /// Numeric recipe: bf16 fp16 fp8 fp8-delayed fp8-current fp8-blockwise mxfp8 nvfp4 (fp8 means
    /// fp8-delayed). [default: bf16]
    #[arg(long, value_name = "NAME", help_heading = "Training")]
    pub precision: Option<String>,

    /// Tensor-parallel size. [default: 4 for the built-in example, else 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub tp: Option<i64>,
    /// Pipeline-parallel size. [default: 8 for the built-in example, else 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub pp: Option<i64>,
    /// Virtual pipeline chunks per rank (interleaved 1F1B). [default: 5 for the built-in
    /// example, else 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub vp: Option<i64>,
    /// Data-parallel size. [default: the GPUs left after tp x pp x cp]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub dp: Option<i64>,
    /// Context-parallel size. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub cp: Option<i64>,
    /// How context-parallel ranks exchange keys and values (Megatron-LM --cp-comm-type p2p, a2a,
    /// a2a+p2p). [default: ring]
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Parallel plan")]
    pub cp_comm: Option<CpCommArg>,
    /// How layers are split over pipeline stages; embedding-and-loss is Megatron-LM's
    /// --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split. [default: even]
    #[arg(long, value_enum, value_name = "SPLIT", help_heading = "Parallel plan")]
    pub pipeline_split: Option<PipelineSplitArg>,
    /// Pipeline schedule. [default: interleaved when --vp > 1, else 1f1b, as Megatron-LM runs]
    #[arg(long, value_enum, value_name = "SCHEDULE", help_heading = "Parallel plan")]
    pub schedule: Option<ScheduleArg>,
    /// ZeRO stage 0-3; 1 is Megatron's distributed optimizer. [default: 1]
    #[arg(
        long,
        value_name = "0|1|2|3",
        allow_negative_numbers = true,
        help_heading = "Parallel plan"
    )]
    pub zero: Option<i64>,
    /// Shard with PyTorch FSDP instead of ZeRO. [default: off]
    #[arg(long, help_heading = "Parallel plan")]
    pub fsdp: bool,
    /// FSDP sharding mode (needs --fsdp). [default: full]
    #[arg(long, value_enum, value_name = "MODE", help_heading = "Parallel plan")]
    pub fsdp_mode: Option<FsdpModeArg>,
    /// HSDP: shard inside groups of N data-parallel ranks, replicate across them (needs --fsdp).
    /// [default: shard across all of dp]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub hybrid_shard: Option<i64>,
    /// FSDP full shard: re-gather parameters for the backward instead of keeping the stage whole
    /// (needs --fsdp). [default: true without pipeline parallelism, false with it (torchtitan)]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub fsdp_reshard_after_forward: Option<bool>,
    /// Megatron sequence parallelism. [default: true whenever tp > 1]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub sequence_parallel: Option<bool>,
    /// Activation recomputation granularity. [default: none]
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Parallel plan")]
    pub recompute: Option<RecomputeArg>,
    /// With --recompute full: layers per pipeline stage that recompute. [default: all of them]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Parallel plan")]
    pub recompute_num_layers: Option<i64>,
    /// Overlap the data-parallel gradient reduction with the backward. [default: true]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub overlap_grad_reduce: Option<bool>,
    /// Overlap the distributed optimizer's parameter all-gather with the forward.
    /// [default: the value of --overlap-grad-reduce]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub overlap_param_gather: Option<bool>,
    /// Overlap tensor-parallel communication with GEMMs (only when tp > 1). [default: false]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub tp_comm_overlap: Option<bool>,
    /// Reduce gradients in fp32. [default: true]
    #[arg(long, value_name = "BOOL", help_heading = "Parallel plan")]
    pub grad_reduce_in_fp32: Option<bool>,
    /// Expert-parallel size (MoE models). [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Experts")]
    pub ep: Option<i64>,
    /// Expert-tensor-parallel size; experts are laid out over etp x ep ranks independently of
    /// attention's tp x cp (MoE Parallel Folding). [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = "Experts")]
    pub etp: Option<i64>,
    /// How tokens reach their experts: one message per token and expert (Megatron-LM alltoall),
    /// or one per destination node and rank (DeepEP, Megatron-LM flex). [default: all-to-all]
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Experts")]
    pub expert_dispatch: Option<ExpertDispatchArg>,
    /// Overlap the expert-parallel all-to-all with another micro-batch's compute (DualPipe,
    /// Megatron-LM --overlap-moe-expert-parallel-comm). [default: true under --schedule dualpipe,
    /// else false]
    #[arg(long, value_name = "BOOL", help_heading = "Experts")]
    pub expert_comm_overlap: Option<bool>,
    /// Routed tokens on the busiest expert-parallel rank over the mean. [default: 1.0, balanced]
    #[arg(long, value_name = "RATIO", help_heading = "Experts")]
    pub moe_imbalance: Option<f64>,
    /// Expert capacity factor; tokens above it are dropped. [default: dropless]
    #[arg(long, value_name = "FACTOR", help_heading = "Experts")]
    pub moe_capacity_factor: Option<f64>,
}

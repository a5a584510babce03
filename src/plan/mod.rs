//! The parallel plan and the training setup: raw specs as the user writes them, the enums for
//! every choice, and the validated `Plan` / `Training` (built together with the model and cluster
//! in `run.rs`, since most checks need all four).
//!
//! Names follow Megatron-LM (`tp`, `pp`, `vp`, `dp`, `cp`, `--sequence-parallel`,
//! `--use-distributed-optimizer`, `--recompute-granularity`, `--overlap-grad-reduce`).

mod context_parallel;
mod engine;
mod precision;
mod recompute_modules;
mod training;

use serde::{Deserialize, Serialize};

pub use context_parallel::{CpComm, HybridCp, HybridCpScheduler, MeshGrid};
pub use engine::Engine;
pub use precision::Precision;
pub use recompute_modules::{RecomputeModule, RecomputeModules};
pub use training::{Training, TrainingSpec};

/// Activation recomputation granularity (`--recompute-granularity`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RecomputeKind {
    /// Store every activation the backward needs.
    None,
    /// Recompute the attention core only (Korthikanti et al. 2022).
    Selective,
    /// Store only each layer's input and rerun its forward in the backward.
    Full,
    /// torchtitan's per-op selective checkpointing (`selective_ac_option = "op"`): every other
    /// matmul output and the attention output are stored; the other matmuls and the element-wise
    /// ops are rerun in the backward.
    Op,
}

/// How FSDP shards (PyTorch `ShardingStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FsdpMode {
    /// Parameters, gradients and optimizer state sharded (ZeRO-3).
    Full,
    /// Gradients and optimizer state sharded, parameters kept whole (ZeRO-2).
    GradOp,
}

/// The pipeline schedule: the order in which each stage runs forward and backward work.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineSchedule {
    /// All forwards, then all backwards (Huang et al. 2019).
    Gpipe,
    /// One forward, one backward, after a warm-up of `pp - stage - 1` forwards (PipeDream-Flush,
    /// Megatron-LM's default without interleaving).
    #[serde(rename = "1f1b")]
    #[value(name = "1f1b")]
    OneFOneB,
    /// Megatron-LM's interleaved 1F1B over `vp` virtual chunks per rank (Narayanan et al. 2021).
    Interleaved,
    /// ZB-H1 (Qi et al. 2024): backward split into input and weight gradients, the weight
    /// gradients deferred into the drain bubble at 1F1B's memory.
    ZeroBubble,
    /// DualPipe (DeepSeek-V3): micro-batches enter from both ends; every rank holds two stages.
    Dualpipe,
}

impl PipelineSchedule {
    /// Every schedule, in the order the CLI lists them.
    pub const ALL: [PipelineSchedule; 5] = [
        PipelineSchedule::Gpipe,
        PipelineSchedule::OneFOneB,
        PipelineSchedule::Interleaved,
        PipelineSchedule::ZeroBubble,
        PipelineSchedule::Dualpipe,
    ];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            PipelineSchedule::Gpipe => "gpipe",
            PipelineSchedule::OneFOneB => "1f1b",
            PipelineSchedule::Interleaved => "interleaved",
            PipelineSchedule::ZeroBubble => "zero-bubble",
            PipelineSchedule::Dualpipe => "dualpipe",
        }
    }
}

/// How transformer layers are assigned to pipeline stages.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineSplit {
    /// Every stage (and virtual chunk) gets the same number of layers; pp x vp must divide them.
    Even,
    /// The embedding and the loss each count as one layer (Megatron-LM
    /// `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split`, torchtitan's
    /// `first/last_stage_less_layers = 1`): the first and last stage hold one layer fewer, and
    /// pp x vp must divide layers + 2.
    EmbeddingAndLoss,
    /// Any layer count: the layers, the embedding, the loss and each MTP module count as units,
    /// spread as evenly as the pp x vp chunks allow (the extra ones to the middle chunks), the
    /// first chunk holding the embedding and the last the MTP modules and the loss, as a
    /// Megatron-LM `--pipeline-model-parallel-layout` lays out 61-layer DeepSeek-V3
    /// (`Et|(tt|)*30mL` on 32 chunks).
    Balanced,
}

impl PipelineSplit {
    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            PipelineSplit::Even => "even",
            PipelineSplit::EmbeddingAndLoss => "embedding-and-loss",
            PipelineSplit::Balanced => "balanced",
        }
    }
}

/// How tokens reach their experts across the expert-parallel group.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertDispatch {
    /// One message per (token, expert) pair: Megatron-LM's `alltoall` dispatcher and
    /// torchtitan's standard backend.
    #[value(alias = "alltoall")]
    AllToAll,
    /// One copy per destination node over the network and per destination rank over NVLink
    /// (DeepEP; Megatron-LM's `flex` dispatcher, torchtitan's `deepep` backend).
    #[value(alias = "flex", alias = "deepep")]
    Deduplicated,
}

impl ExpertDispatch {
    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            ExpertDispatch::AllToAll => "all-to-all",
            ExpertDispatch::Deduplicated => "deduplicated",
        }
    }
}

/// The storage precision of Adam's two moment estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AdamMoments {
    /// FP32 moments (4 bytes each), every engine's default.
    Fp32,
    /// BF16 moments (2 bytes each) beside the FP32 master weights, as DeepSeek-V3 trained
    /// (Megatron-LM `--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`).
    Bf16,
}

impl AdamMoments {
    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            AdamMoments::Fp32 => "fp32",
            AdamMoments::Bf16 => "bf16",
        }
    }

    /// Bytes of one moment estimate per parameter.
    pub fn bytes(self) -> f64 {
        match self {
            AdamMoments::Fp32 => 4.0,
            AdamMoments::Bf16 => 2.0,
        }
    }
}

/// How data-parallel ranks share model state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharding {
    /// Every DP rank holds everything (plain DDP).
    None,
    /// Optimizer state sharded: ZeRO-1 or Megatron's distributed optimizer.
    Optimizer,
    /// Optimizer state and gradients sharded: ZeRO-2, FSDP `SHARD_GRAD_OP`.
    OptimizerAndGradients,
    /// Everything sharded and parameters gathered per layer: ZeRO-3, FSDP `FULL_SHARD`.
    Full,
}

/// The parallel plan as written by the user: the one declaration of every plan option.
///
/// Each field is declared once, here: its doc comment is the flag's help and the documentation,
/// its name is the key of plan files (`[plan]`), of model-run TOML and of the JSON outputs, and
/// its `#[arg]` is the command-line flag (with Megatron-LM's long name as an alias where one
/// exists). Every field is optional; the default is stated in its help and applied, with the
/// checks, by [`crate::Run::from_spec`]. [`Plan::to_spec`] writes a validated plan back with every
/// default made explicit, which is what a plan file holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    /// Tensor-parallel size. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "tensor-model-parallel-size")]
    pub tp: Option<i64>,
    /// Pipeline-parallel size. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "pipeline-model-parallel-size")]
    pub pp: Option<i64>,
    /// Virtual pipeline chunks per rank (interleaved 1F1B). [default: 1, not interleaved]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "virtual-pipeline-model-parallel-size")]
    pub vp: Option<i64>,
    /// Data-parallel size. [default: the GPUs left after tp x pp x cp]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "data-parallel-size")]
    pub dp: Option<i64>,
    /// Context-parallel size. [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "context-parallel-size")]
    pub cp: Option<i64>,
    /// How context-parallel ranks exchange keys and values (Megatron-LM --cp-comm-type p2p, a2a,
    /// a2a+p2p are accepted too). [default: ring]
    #[arg(long, value_enum, value_name = "KIND", help_heading = PLAN, alias = "cp-comm-type")]
    pub cp_comm: Option<CpComm>,
    /// How layers are split over pipeline stages; embedding-and-loss is Megatron-LM's
    /// --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split.
    /// [default: even]
    #[arg(long, value_enum, value_name = "SPLIT", help_heading = PLAN)]
    pub pipeline_split: Option<PipelineSplit>,
    /// Pipeline schedule. [default: interleaved when vp > 1, else 1f1b, as Megatron-LM runs]
    #[arg(long, value_enum, value_name = "SCHEDULE", help_heading = PLAN)]
    pub schedule: Option<PipelineSchedule>,
    /// Megatron sequence parallelism, with tp > 1. [default: the stack's: true (Megatron-Core,
    /// NeMo, torchtitan), false (DeepSpeed, Megatron-DeepSpeed, Megatron-LM 2020-2022)]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub sequence_parallel: Option<bool>,
    /// ZeRO stage 0-3; 1 is Megatron's distributed optimizer. [default: the stack's: 1 (Megatron-Core),
    /// FSDP full shard (torchtitan), 0 (DeepSpeed)]
    #[arg(long, value_name = "0|1|2|3", allow_negative_numbers = true, help_heading = PLAN)]
    pub zero: Option<i64>,
    /// Shard with PyTorch FSDP instead of ZeRO (`--fsdp` alone means true). [default: true on a
    /// stack that shards with FSDP (torchtitan) when --zero is not given, else false]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub fsdp: Option<bool>,
    /// FSDP sharding mode (needs --fsdp). [default: full]
    #[arg(long, value_enum, value_name = "MODE", help_heading = PLAN)]
    pub fsdp_mode: Option<FsdpMode>,
    /// HSDP: shard inside groups of N data-parallel ranks, replicate across them (needs --fsdp).
    /// [default: shard across all of dp]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    pub hybrid_shard: Option<i64>,
    /// FSDP full shard: free gathered parameters after each layer's forward and gather them again
    /// for its backward; without, a stage keeps its whole 16-bit parameters and accumulates
    /// unsharded FP32 gradients until the step's reduce-scatter (needs --fsdp). [default: true
    /// without pipeline parallelism, false with it, as torchtitan's "default" does]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub fsdp_reshard_after_forward: Option<bool>,
    /// Activation recomputation granularity (Megatron-LM --recompute-granularity). [default: the
    /// stack's: op (torchtitan), none (Megatron-Core, DeepSpeed)]
    #[arg(long, value_enum, value_name = "KIND", help_heading = PLAN)]
    #[arg(alias = "recompute-granularity")]
    pub recompute: Option<RecomputeKind>,
    /// With --recompute full: layers per pipeline stage that recompute. [default: all of them]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    pub recompute_num_layers: Option<i64>,
    /// With --recompute selective: the modules rerun in the backward (Megatron-LM
    /// --recompute-modules), comma-separated. [default: core_attn]
    #[arg(long, value_enum, value_name = "MODULES", value_delimiter = ',', num_args = 1..)]
    #[arg(help_heading = PLAN)]
    pub recompute_modules: Option<Vec<RecomputeModule>>,
    /// Transformer layers per pipeline rank whose activations are offloaded to host memory
    /// during the forward and brought back for the backward (Megatron-LM's
    /// --cpu-offloading-num-layers, which it runs with pp 1 and no recompute; NeMo's
    /// activation_offload_layers). [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    pub offload_activation_layers: Option<i64>,
    /// Transformer layers at the start of the model that run in BF16 under a low-precision
    /// (FP8 / FP4) recipe (Megatron-LM --first-last-layers-bf16 --num-layers-at-start-in-bf16).
    /// [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    pub bf16_layers_at_start: Option<i64>,
    /// Transformer layers at the end of the model that run in BF16 under a low-precision recipe
    /// (Megatron-LM --num-layers-at-end-in-bf16; NVIDIA's NVFP4 recipes keep the last layers in
    /// BF16). [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = PLAN)]
    pub bf16_layers_at_end: Option<i64>,
    /// Overlap the data-parallel gradient reduction with the backward. [default: true]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub overlap_grad_reduce: Option<bool>,
    /// Overlap the distributed optimizer's parameter all-gather with the forward.
    /// [default: the value of overlap-grad-reduce]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub overlap_param_gather: Option<bool>,
    /// Overlap tensor-parallel communication with GEMMs (only when tp > 1). [default: false;
    /// the search turns it on for engines that have it]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub tp_comm_overlap: Option<bool>,
    /// Storage precision of Adam's two moment estimates: fp32, or bf16 beside fp32 master
    /// weights (Megatron-LM's precision-aware optimizer). [default: fp32]
    #[arg(long, value_enum, value_name = "DTYPE", help_heading = PLAN)]
    pub adam_moments: Option<AdamMoments>,
    /// Reduce gradients in fp32. [default: true]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN, alias = "accumulate-allreduce-grads-in-fp32")]
    pub grad_reduce_in_fp32: Option<bool>,
    /// Expert-parallel size (MoE models). [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = EXPERTS)]
    #[arg(alias = "expert-model-parallel-size")]
    pub ep: Option<i64>,
    /// Expert-tensor-parallel size; experts are laid out over etp x ep ranks independently of
    /// attention's tp x cp (MoE Parallel Folding). [default: 1]
    #[arg(long, value_name = "N", allow_negative_numbers = true, help_heading = EXPERTS)]
    #[arg(alias = "expert-tensor-parallel-size")]
    pub etp: Option<i64>,
    /// How tokens reach their experts: one message per token and expert (Megatron-LM alltoall),
    /// or one per destination node and rank (DeepEP, Megatron-LM flex). [default: all-to-all]
    #[arg(long, value_enum, value_name = "KIND", help_heading = EXPERTS)]
    pub expert_dispatch: Option<ExpertDispatch>,
    /// Overlap the expert-parallel all-to-all with another micro-batch's compute (DualPipe,
    /// Megatron-LM --overlap-moe-expert-parallel-comm). [default: true under the dualpipe
    /// schedule, else false]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = EXPERTS, alias = "overlap-moe-expert-parallel-comm")]
    pub expert_comm_overlap: Option<bool>,
    /// Re-pack the documents of this many global batches into micro-batches of equal work,
    /// longest first onto the least loaded (WLB-LLM's packing across global batches); 0 packs
    /// them as they arrive. Needs --lengths. [default: 0]
    #[arg(long, value_name = "K", allow_negative_numbers = true, help_heading = PLAN)]
    pub balance_window: Option<i64>,
    /// Give each document its own context-parallel group of the dp x cp ranks, sized to its
    /// length: short documents on one rank with no exchange, long ones on as many ranks as
    /// hold them (Megatron-LM --hybrid-context-parallel; ByteScale). Needs --lengths and pp 1.
    /// [default: false]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN, alias = "hybrid-context-parallel")]
    pub hybrid_cp: Option<bool>,
    /// With --hybrid-cp: the most tokens of one document a rank holds (Megatron-LM
    /// --max-seqlen-per-dp-cp-rank). [default: seq-len / cp]
    #[arg(long, value_name = "TOKENS", allow_negative_numbers = true, help_heading = PLAN)]
    #[arg(alias = "max-seqlen-per-dp-cp-rank")]
    pub max_seqlen_per_rank: Option<i64>,
    /// With --hybrid-cp: how the loader places documents on groups and runs them: Megatron-LM's
    /// (by length squared, each document its own forward and backward) or ByteScale's (by
    /// training FLOPs, a rank's documents packed). [default: megatron]
    #[arg(long, value_enum, value_name = "SCHEDULER", help_heading = PLAN)]
    pub hybrid_cp_scheduler: Option<HybridCpScheduler>,
    /// Sort each global batch's documents longest first and cut them in that order into
    /// micro-batches of at most micro-batch x seq-len padded tokens, each padded to its longest
    /// (DynaPipe): short documents share a micro-batch, so the count and size of micro-batches
    /// vary. Needs --lengths batched `pad`; no engine's loader forms them, so no export.
    /// [default: false]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[arg(help_heading = PLAN)]
    pub variable_micro_batches: Option<bool>,
    /// Routed tokens on the busiest expert-parallel rank over the mean. [default: 1.0, balanced,
    /// as published benchmarks force it]
    #[arg(long, value_name = "RATIO", allow_negative_numbers = true, help_heading = EXPERTS)]
    pub moe_imbalance: Option<f64>,
    /// Expert capacity factor; tokens beyond capacity x mean per expert are dropped.
    /// [default: dropless]
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true, help_heading = EXPERTS)]
    #[arg(alias = "moe-expert-capacity-factor")]
    pub moe_capacity_factor: Option<f64>,
    /// The engine that runs the plan: what it cannot run is refused, and export writes its
    /// configuration. [default: megatron]
    #[arg(long, value_enum, value_name = "ENGINE", help_heading = PLAN)]
    pub engine: Option<Engine>,
    /// The software stack and release the plan runs on (`meshplan presets` lists them): it
    /// decides the kernels priced, such as the attention kernel and fused or eager norms.
    /// [default: the engine's newest: megatron-core-0.14-plus, torchtitan-0.2, deepspeed]
    #[arg(long, value_name = "STACK", help_heading = PLAN)]
    pub stack: Option<String>,
}

/// Help heading of the parallel-plan flags.
const PLAN: &str = "Parallel plan";
/// Help heading of the expert flags.
const EXPERTS: &str = "Experts";

impl PlanSpec {
    /// This plan with every option `over` sets replacing this plan's: flags over a plan file, a
    /// plan file over the built-in example. Options are merged by their file keys, so an option
    /// added to the struct is merged without being named here.
    pub fn overridden_by(&self, over: &PlanSpec) -> PlanSpec {
        let (Ok(serde_json::Value::Object(mut base)), Ok(serde_json::Value::Object(set))) =
            (serde_json::to_value(self), serde_json::to_value(over))
        else {
            return over.clone();
        };
        for (key, value) in set {
            if !value.is_null() {
                base.insert(key, value);
            }
        }
        serde_json::from_value(serde_json::Value::Object(base)).unwrap_or_else(|_| over.clone())
    }
}

/// A validated plan. Built only by [`crate::Run::from_spec`], which checks it against the model,
/// the cluster and the batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub(crate) tp: u64,
    pub(crate) pp: u64,
    pub(crate) vp: u64,
    pub(crate) dp: u64,
    pub(crate) cp: u64,
    pub(crate) cp_comm: CpComm,
    pub(crate) cp_a2a: u64,
    pub(crate) pipeline_split: PipelineSplit,
    pub(crate) schedule: PipelineSchedule,
    pub(crate) sequence_parallel: bool,
    pub(crate) sharding: Sharding,
    pub(crate) fsdp: bool,
    pub(crate) shard_group: u64,
    pub(crate) reshard_after_forward: bool,
    pub(crate) recompute: RecomputeKind,
    pub(crate) recompute_num_layers: u64,
    pub(crate) recompute_modules: RecomputeModules,
    pub(crate) offload_activation_layers: u64,
    pub(crate) bf16_layers: (u64, u64),
    pub(crate) overlap_grad_reduce: bool,
    pub(crate) overlap_param_gather: bool,
    pub(crate) tp_comm_overlap: bool,
    pub(crate) grad_reduce_in_fp32: bool,
    pub(crate) adam_moments: AdamMoments,
    pub(crate) num_microbatches: u64,
    pub(crate) ep: u64,
    pub(crate) etp: u64,
    pub(crate) expert_comm_overlap: bool,
    pub(crate) expert_dispatch: ExpertDispatch,
    pub(crate) moe_imbalance: f64,
    pub(crate) balance_window: u64,
    pub(crate) hybrid_cp: Option<HybridCp>,
    pub(crate) variable_micro_batches: bool,
    pub(crate) moe_capacity_factor: Option<f64>,
    pub(crate) engine: Engine,
}

impl Plan {
    /// The plan written back as a spec with every default made explicit: building a run from it
    /// (with the same model, cluster and training) gives this plan again. This is what a plan file
    /// holds. Options that only apply to another setting (the FSDP mode without FSDP, the
    /// recompute layer count without full recompute) stay unset, as validation asks.
    pub fn to_spec(&self) -> PlanSpec {
        let zero = match self.sharding {
            _ if self.fsdp => None,
            Sharding::None => Some(0),
            Sharding::Optimizer => Some(1),
            Sharding::OptimizerAndGradients => Some(2),
            Sharding::Full => Some(3),
        };
        let fsdp_mode = self.fsdp.then_some(if self.sharding == Sharding::Full {
            FsdpMode::Full
        } else {
            FsdpMode::GradOp
        });
        let whole = |n: u64| Some(n as i64);
        PlanSpec {
            tp: whole(self.tp),
            pp: whole(self.pp),
            vp: whole(self.vp),
            dp: whole(self.dp),
            cp: whole(self.cp),
            cp_comm: Some(self.cp_comm),
            pipeline_split: Some(self.pipeline_split),
            schedule: Some(self.schedule),
            sequence_parallel: Some(self.sequence_parallel),
            zero,
            fsdp: Some(self.fsdp),
            fsdp_mode,
            hybrid_shard: if self.fsdp { whole(self.shard_group) } else { None },
            fsdp_reshard_after_forward: Some(self.reshard_after_forward),
            recompute: Some(self.recompute),
            recompute_num_layers: if self.recompute == RecomputeKind::Full {
                whole(self.recompute_num_layers)
            } else {
                None
            },
            recompute_modules: (self.recompute == RecomputeKind::Selective)
                .then(|| self.recompute_modules.to_vec()),
            offload_activation_layers: whole(self.offload_activation_layers),
            bf16_layers_at_start: whole(self.bf16_layers.0),
            bf16_layers_at_end: whole(self.bf16_layers.1),
            overlap_grad_reduce: Some(self.overlap_grad_reduce),
            overlap_param_gather: Some(self.overlap_param_gather),
            tp_comm_overlap: Some(self.tp_comm_overlap),
            grad_reduce_in_fp32: Some(self.grad_reduce_in_fp32),
            adam_moments: Some(self.adam_moments),
            ep: whole(self.ep),
            etp: whole(self.etp),
            expert_dispatch: Some(self.expert_dispatch),
            expert_comm_overlap: Some(self.expert_comm_overlap),
            moe_imbalance: Some(self.moe_imbalance),
            balance_window: Some(self.balance_window as i64),
            hybrid_cp: Some(self.hybrid_cp.is_some()),
            max_seqlen_per_rank: self.hybrid_cp.map(|h| h.max_tokens_per_rank as i64),
            hybrid_cp_scheduler: self.hybrid_cp.map(|h| h.scheduler),
            variable_micro_batches: Some(self.variable_micro_batches),
            moe_capacity_factor: self.moe_capacity_factor,
            engine: Some(self.engine),
            // The stack is the run's, not the plan's: `plan_file::resolved_spec` writes it.
            stack: None,
        }
    }

    /// The engine that runs the plan.
    pub fn engine(&self) -> Engine {
        self.engine
    }
    /// Tensor-parallel size.
    pub fn tp(&self) -> u64 {
        self.tp
    }
    /// Pipeline-parallel size.
    pub fn pp(&self) -> u64 {
        self.pp
    }
    /// Virtual pipeline chunks per rank (1 = plain 1F1B).
    pub fn vp(&self) -> u64 {
        self.vp
    }
    /// Data-parallel size.
    pub fn dp(&self) -> u64 {
        self.dp
    }
    /// Context-parallel size.
    pub fn cp(&self) -> u64 {
        self.cp
    }
    /// How context-parallel ranks exchange keys and values.
    pub fn cp_comm(&self) -> CpComm {
        self.cp_comm
    }
    /// Context-parallel ranks that exchange by all-to-all: cp under Ulysses, the inner size of a
    /// hierarchical exchange, 1 for a ring. The remaining `cp / cp_a2a` ranks form a ring.
    pub fn cp_a2a(&self) -> u64 {
        self.cp_a2a
    }
    /// Context-parallel ranks that form a ring: `cp / cp_a2a` (cp for a ring, 1 under Ulysses).
    pub fn cp_ring(&self) -> u64 {
        self.cp / self.cp_a2a
    }
    /// The pipeline schedule.
    pub fn schedule(&self) -> PipelineSchedule {
        self.schedule
    }
    /// How layers are split across pipeline stages.
    pub fn pipeline_split(&self) -> PipelineSplit {
        self.pipeline_split
    }
    /// Whether sequence parallelism is in effect (only when tp > 1).
    pub fn sequence_parallel(&self) -> bool {
        self.sequence_parallel
    }
    /// The factor by which element-wise work and saved layer inputs are split across TP ranks:
    /// tp under sequence parallelism, else 1.
    pub fn sequence_split(&self) -> u64 {
        if self.sequence_parallel { self.tp } else { 1 }
    }
    /// Data-parallel sharding.
    pub fn sharding(&self) -> Sharding {
        self.sharding
    }
    /// Whether sharding is done by FSDP (rather than ZeRO / the distributed optimizer).
    pub fn fsdp(&self) -> bool {
        self.fsdp
    }
    /// DP ranks that one shard group spans (dp unless hybrid sharding).
    pub fn shard_group(&self) -> u64 {
        self.shard_group
    }
    /// Under full sharding: whether parameters are re-gathered for the backward (else kept whole
    /// and gradients accumulated unsharded until the end of the step).
    pub fn reshard_after_forward(&self) -> bool {
        self.reshard_after_forward
    }
    /// Recompute granularity.
    pub fn recompute(&self) -> RecomputeKind {
        self.recompute
    }
    /// Layers per pipeline stage that recompute under full recompute.
    pub fn recompute_num_layers(&self) -> u64 {
        self.recompute_num_layers
    }
    /// The modules selective recompute reruns (empty unless the recompute is selective).
    pub fn recompute_modules(&self) -> RecomputeModules {
        self.recompute_modules
    }
    /// Transformer layers per pipeline rank whose activations are offloaded to host memory.
    pub fn offload_activation_layers(&self) -> u64 {
        self.offload_activation_layers
    }
    /// Transformer layers at the start and at the end of the model that run in BF16 under a
    /// low-precision recipe ((0, 0) under BF16 or FP16).
    pub fn bf16_layers(&self) -> (u64, u64) {
        self.bf16_layers
    }
    /// Whether the DP gradient reduction overlaps the backward.
    pub fn overlap_grad_reduce(&self) -> bool {
        self.overlap_grad_reduce
    }
    /// Whether the parameter all-gather overlaps the forward.
    pub fn overlap_param_gather(&self) -> bool {
        self.overlap_param_gather
    }
    /// Whether TP communication overlaps GEMMs.
    pub fn tp_comm_overlap(&self) -> bool {
        self.tp_comm_overlap
    }
    /// Whether gradients are reduced in fp32.
    pub fn grad_reduce_in_fp32(&self) -> bool {
        self.grad_reduce_in_fp32
    }
    /// Storage precision of Adam's moment estimates.
    pub fn adam_moments(&self) -> AdamMoments {
        self.adam_moments
    }
    /// Micro-batches per pipeline per step (gradient-accumulation steps).
    pub fn num_microbatches(&self) -> u64 {
        self.num_microbatches
    }
    /// Expert-parallel size.
    pub fn ep(&self) -> u64 {
        self.ep
    }
    /// Expert-tensor-parallel size.
    pub fn etp(&self) -> u64 {
        self.etp
    }
    /// Expert-data-parallel size: the ranks of a pipeline stage (`tp x cp x dp`) over `etp x ep`;
    /// expert gradients are reduced over these.
    pub fn edp(&self) -> u64 {
        (self.tp * self.cp * self.dp / (self.ep * self.etp)).max(1)
    }
    /// How tokens reach their experts.
    pub fn expert_dispatch(&self) -> ExpertDispatch {
        self.expert_dispatch
    }
    /// Global batches whose documents are re-packed together (0: packed as they arrive).
    pub fn balance_window(&self) -> u64 {
        self.balance_window
    }
    /// Per-document context-parallel groups, when the plan has them.
    pub fn hybrid_cp(&self) -> Option<HybridCp> {
        self.hybrid_cp
    }
    /// Whether each global batch's documents are sorted and cut into variable micro-batches
    /// (DynaPipe) instead of fixed ones of `micro_batch` padded sequences.
    pub fn variable_micro_batches(&self) -> bool {
        self.variable_micro_batches
    }
    /// Whether the expert-parallel all-to-all overlaps other compute.
    pub fn expert_comm_overlap(&self) -> bool {
        self.expert_comm_overlap
    }
    /// Expert capacity factor (`None`: dropless).
    pub fn moe_capacity_factor(&self) -> Option<f64> {
        self.moe_capacity_factor
    }
    /// Routed tokens the busiest expert-parallel rank computes, over the balanced mean: the
    /// routing imbalance, capped by the capacity factor when tokens are dropped.
    pub fn expert_load_factor(&self) -> f64 {
        match self.moe_capacity_factor {
            Some(capacity) => self.moe_imbalance.min(capacity),
            None => self.moe_imbalance,
        }
    }
    /// Model-parallel size of one replica (tp x pp x cp).
    pub fn model_parallel_size(&self) -> u64 {
        self.tp * self.pp * self.cp
    }
    /// A compact label such as `tp8 pp4 vp5 cp1 dp2`.
    pub fn label(&self) -> String {
        let mut label =
            format!("tp{} pp{} vp{} cp{} dp{}", self.tp, self.pp, self.vp, self.cp, self.dp);
        if self.cp > 1 && self.cp_comm != CpComm::Ring {
            label += &format!(" cp-{}", self.cp_comm.name());
        }
        if self.ep > 1 || self.etp > 1 {
            label += &format!(" ep{} etp{}", self.ep, self.etp);
        }
        if self.pipeline_split != PipelineSplit::Even {
            label += &format!(" split-{}", self.pipeline_split.name());
        }
        if self.tp_comm_overlap {
            label += " tp-overlap";
        }
        if self.balance_window > 0 {
            label += &format!(" repack{}", self.balance_window);
        }
        if let Some(hybrid) = self.hybrid_cp {
            label += &format!(" hybrid-cp{}", hybrid.max_tokens_per_rank);
            if hybrid.scheduler == HybridCpScheduler::ByWork {
                label += "-by-work";
            }
        }
        if self.variable_micro_batches {
            label += " variable-mb";
        }
        label
    }

    /// How the plan shards data-parallel state and recomputes, compactly, as `search` lists
    /// plans: `zero1 no-recompute`, `fsdp hsdp8 full16` (full recompute of 16 layers per stage).
    pub fn memory_label(&self) -> String {
        let sharding = match self.sharding {
            Sharding::None => "ddp".to_owned(),
            Sharding::Optimizer => "zero1".to_owned(),
            Sharding::OptimizerAndGradients => "zero2".to_owned(),
            Sharding::Full if self.shard_group < self.dp => {
                format!("fsdp hsdp{}", self.shard_group)
            }
            Sharding::Full => "fsdp".to_owned(),
        };
        let recompute = match self.recompute {
            RecomputeKind::None => "no-recompute".to_owned(),
            RecomputeKind::Selective
                if self.recompute_modules == RecomputeModules::DEFAULT_SELECTIVE =>
            {
                "selective".to_owned()
            }
            RecomputeKind::Selective => format!("selective[{}]", self.recompute_modules.names()),
            RecomputeKind::Op => "per-op".to_owned(),
            RecomputeKind::Full => format!("full{}", self.recompute_num_layers),
        };
        let bf16 = match self.bf16_layers {
            (0, 0) => String::new(),
            (start, end) => format!(" bf16-layers{start}+{end}"),
        };
        match self.offload_activation_layers {
            0 => format!("{sharding} {recompute}{bf16}"),
            n => format!("{sharding} {recompute} offload{n}{bf16}"),
        }
    }
}

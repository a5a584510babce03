//! The parallel plan and the training setup: raw specs as the user writes them, the enums for
//! every choice, and the validated `Plan` / `Training` (built together with the model and cluster
//! in `run.rs`, since most checks need all four).
//!
//! Names follow Megatron-LM (`tp`, `pp`, `vp`, `dp`, `cp`, `--sequence-parallel`,
//! `--use-distributed-optimizer`, `--recompute-granularity`, `--overlap-grad-reduce`).

mod precision;

use serde::{Deserialize, Serialize};

pub use precision::Precision;

/// Activation recomputation granularity (`--recompute-granularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsdpMode {
    /// Parameters, gradients and optimizer state sharded (ZeRO-3).
    Full,
    /// Gradients and optimizer state sharded, parameters kept whole (ZeRO-2).
    GradOp,
}

/// The pipeline schedule: the order in which each stage runs forward and backward work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PipelineSchedule {
    /// All forwards, then all backwards (Huang et al. 2019).
    Gpipe,
    /// One forward, one backward, after a warm-up of `pp - stage - 1` forwards (PipeDream-Flush,
    /// Megatron-LM's default without interleaving).
    #[serde(rename = "1f1b")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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

/// How context-parallel ranks exchange what attention needs (Megatron-LM `--cp-comm-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpComm {
    /// Ring attention (`p2p`): keys and values pass around the ring, each step overlapped with
    /// the attention block it feeds (Liu et al. 2023; Megatron-LM's default).
    Ring,
    /// Ulysses (`a2a`): all-to-alls re-shard Q, K and V from sequence to heads before attention
    /// and the output back after it; heads / tp must divide by cp (Jacobs et al. 2023).
    AllToAll,
    /// `a2a+p2p`: all-to-all inside an NVLink domain, ring across domains (USP / Megatron-LM's
    /// `--hierarchical-context-parallel-sizes`).
    Hierarchical,
}

impl CpComm {
    /// Every kind, in the order the CLI lists them.
    pub const ALL: [CpComm; 3] = [CpComm::Ring, CpComm::AllToAll, CpComm::Hierarchical];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            CpComm::Ring => "ring",
            CpComm::AllToAll => "all-to-all",
            CpComm::Hierarchical => "hierarchical",
        }
    }
}

/// How tokens reach their experts across the expert-parallel group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpertDispatch {
    /// One message per (token, expert) pair: Megatron-LM's `alltoall` dispatcher and
    /// torchtitan's standard backend.
    AllToAll,
    /// One copy per destination node over the network and per destination rank over NVLink
    /// (DeepEP; Megatron-LM's `flex` dispatcher, torchtitan's `deepep` backend).
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

/// The parallel plan as written by the user; every field is optional and has a documented default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSpec {
    /// Tensor-parallel size (default 1).
    pub tp: Option<i64>,
    /// Pipeline-parallel size (default 1).
    pub pp: Option<i64>,
    /// Virtual pipeline chunks per rank, interleaved 1F1B (default 1 = not interleaved).
    pub vp: Option<i64>,
    /// Data-parallel size (default: what the GPU count leaves after tp x pp x cp).
    pub dp: Option<i64>,
    /// Context-parallel size (default 1).
    pub cp: Option<i64>,
    /// How context-parallel ranks exchange keys and values (default ring).
    pub cp_comm: Option<CpComm>,
    /// How layers are split across pipeline stages (default even).
    pub pipeline_split: Option<PipelineSplit>,
    /// Pipeline schedule (default: interleaved when vp > 1, else 1F1B, as Megatron-LM runs).
    pub schedule: Option<PipelineSchedule>,
    /// Megatron sequence parallelism (default: on whenever tp > 1).
    pub sequence_parallel: Option<bool>,
    /// ZeRO stage 0-3 (default 1, Megatron's distributed optimizer).
    pub zero: Option<i64>,
    /// PyTorch FSDP instead of ZeRO (default off).
    pub fsdp: Option<bool>,
    /// FSDP sharding mode (default full).
    pub fsdp_mode: Option<FsdpMode>,
    /// HSDP: shard inside groups of this many DP ranks, replicate across them (default: all dp).
    pub hybrid_shard: Option<i64>,
    /// FSDP full shard: free gathered parameters after each layer's forward and gather them again
    /// for its backward (default: yes without pipeline parallelism, no with it, as torchtitan's
    /// `fsdp_reshard_after_forward = "default"` does). Without resharding a stage keeps its whole
    /// 16-bit parameters and accumulates unsharded FP32 gradients until the step's reduce-scatter.
    pub fsdp_reshard_after_forward: Option<bool>,
    /// Recompute granularity (default none).
    pub recompute: Option<RecomputeKind>,
    /// With full recompute: how many layers per pipeline stage recompute (default all).
    pub recompute_num_layers: Option<i64>,
    /// Overlap the DP gradient reduction with the backward (default on).
    pub overlap_grad_reduce: Option<bool>,
    /// Overlap the distributed optimizer's parameter all-gather with the forward (default: as
    /// `overlap_grad_reduce`).
    pub overlap_param_gather: Option<bool>,
    /// Overlap TP communication with GEMMs, `--tp-comm-overlap` (default off).
    pub tp_comm_overlap: Option<bool>,
    /// Reduce gradients in fp32 (default on, as Megatron-LM does with `--bf16`).
    pub grad_reduce_in_fp32: Option<bool>,
    /// Expert-parallel size: routed experts split across this many ranks (default 1).
    pub ep: Option<i64>,
    /// Expert-tensor-parallel size: each expert's FFN split across this many ranks (default 1;
    /// MoE Parallel Folding lays experts out over `etp x ep` ranks independently of attention's
    /// `tp x cp`).
    pub etp: Option<i64>,
    /// How tokens reach their experts (default all-to-all).
    pub expert_dispatch: Option<ExpertDispatch>,
    /// Overlap the expert-parallel all-to-all with another micro-batch's compute (DualPipe /
    /// Megatron-LM `--overlap-moe-expert-parallel-comm`; default: on under DualPipe, else off).
    pub expert_comm_overlap: Option<bool>,
    /// Routed tokens on the busiest expert-parallel rank over the mean (default 1.0: balanced, as
    /// published benchmarks force it).
    pub moe_imbalance: Option<f64>,
    /// Expert capacity factor: tokens beyond `capacity x mean` per expert are dropped (default:
    /// dropless).
    pub moe_capacity_factor: Option<f64>,
}

/// The training setup as written by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSpec {
    /// Tokens per sequence.
    pub seq_len: i64,
    /// Sequences per optimizer step, across all DP ranks.
    pub global_batch: i64,
    /// Sequences per micro-batch on one model replica (default 1).
    pub micro_batch: Option<i64>,
    /// Numeric recipe (default bf16).
    pub precision: Option<Precision>,
}

/// A validated training setup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Training {
    pub(crate) seq_len: u64,
    pub(crate) global_batch: u64,
    pub(crate) micro_batch: u64,
    pub(crate) precision: Precision,
}

impl Training {
    /// Tokens per sequence.
    pub fn seq_len(&self) -> u64 {
        self.seq_len
    }
    /// Sequences per step.
    pub fn global_batch(&self) -> u64 {
        self.global_batch
    }
    /// Sequences per micro-batch.
    pub fn micro_batch(&self) -> u64 {
        self.micro_batch
    }
    /// Numeric recipe.
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Tokens per optimizer step.
    pub fn tokens_per_step(&self) -> u64 {
        self.global_batch * self.seq_len
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
    pub(crate) overlap_grad_reduce: bool,
    pub(crate) overlap_param_gather: bool,
    pub(crate) tp_comm_overlap: bool,
    pub(crate) grad_reduce_in_fp32: bool,
    pub(crate) num_microbatches: u64,
    pub(crate) ep: u64,
    pub(crate) etp: u64,
    pub(crate) expert_comm_overlap: bool,
    pub(crate) expert_dispatch: ExpertDispatch,
    pub(crate) moe_imbalance: f64,
    pub(crate) moe_capacity_factor: Option<f64>,
}

impl Plan {
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
            RecomputeKind::Selective => "selective".to_owned(),
            RecomputeKind::Op => "per-op".to_owned(),
            RecomputeKind::Full => format!("full{}", self.recompute_num_layers),
        };
        format!("{sharding} {recompute}")
    }
}

//! Every reason an engine refuses a plan ([`Refusal`], found by `capability::refusals`) and what
//! each says: what the engine lacks and what to change; the kinds of expert-tensor parallelism an
//! engine runs, which a refusal names; and how a plan's activation offload differs from an
//! engine's ([`OffloadMismatch`], found by `offload.rs`).

use std::fmt;

use crate::data::Batching;
use crate::plan::{AdamMoments, CpComm, PipelineSchedule, Precision, RecomputeKind, Sharding};

use super::Engine;

/// The flags (and flag values) the exporter writes from the model alone, whatever the plan: its
/// attention, MLP, normalization, embedding, expert and multi-token-prediction structure. A
/// release that lacks one of them runs no plan of the model. In byte order (a test keeps it).
pub const MODEL_FLAGS: &[&str] = &[
    "--disable-bias-linear",
    "--group-query-attention",
    "--hybrid-override-pattern",
    "--kv-lora-rank",
    "--mamba-head-dim",
    "--mamba-num-groups",
    "--mamba-num-heads",
    "--mamba-state-dim",
    "--moe-ffn-hidden-size",
    "--moe-grouped-gemm",
    "--moe-latent-size",
    "--moe-layer-freq",
    "--moe-router-load-balancing-type",
    "--moe-router-topk",
    "--moe-shared-expert-intermediate-size",
    "--mtp-hybrid-override-pattern",
    "--mtp-num-layers",
    "--mtp-use-repeated-layer",
    "--multi-latent-attention",
    "--normalization",
    "--num-experts",
    "--num-query-groups",
    "--position-embedding-type none",
    "--q-lora-rank",
    "--qk-head-dim",
    "--qk-pos-emb-head-dim",
    "--squared-relu",
    "--swiglu",
    "--untie-embeddings-and-output-weights",
    "--v-head-dim",
];

/// Whether `flag` (a name of `megatron_release`'s release tables) is written from the model
/// alone ([`MODEL_FLAGS`]).
pub fn is_model_flag(flag: &str) -> bool {
    MODEL_FLAGS.binary_search(&flag).is_ok()
}

/// Which expert-tensor-parallel sizes an engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertTensorParallel {
    /// Any etp (MoE Parallel Folding).
    Any,
    /// 1, or the attention's tp.
    OneOrTp,
    /// Experts are never split inside (etp 1 only).
    One,
}

/// Whether an engine splits the activations between tensor-parallel regions (norms, dropout,
/// residuals) over the sequence with tp > 1 (Megatron-style sequence parallelism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceParallel {
    /// As the plan says.
    Optional,
    /// Always, with tp > 1.
    Always,
    /// Never: the tensor-parallel layers all-reduce their outputs and keep those activations
    /// whole on every rank.
    Never,
}

/// How an engine's all-to-all (Ulysses) context parallelism deals each TP rank's key/value heads
/// over its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UlyssesKvHeads {
    /// Split only: the ranks must divide the heads.
    Divide,
    /// Split, or replicated by a whole factor where there are fewer heads than ranks.
    DivideOrReplicate,
}

/// How a plan's activation offload differs from what an engine runs (`docs/activation-offload.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadMismatch {
    /// The engine offloads no activations to host memory in a release.
    NoOffload,
    /// The engine offloads only without pipeline parallelism.
    Pipeline {
        /// Pipeline stages.
        pp: u64,
    },
    /// The engine offloads only without activation recomputation.
    Recompute {
        /// The plan's recompute.
        kind: RecomputeKind,
    },
    /// The engine's hybrid (Mamba-2 / layer-pattern) stack does not offload.
    HybridLayers,
    /// The engine offloads every checkpointed layer's input but the newest (full recompute only)
    /// and copies each back on demand: not N layers' activations copied back beside the
    /// backward, what meshplan prices.
    CheckpointInputs,
}

/// One reason an engine cannot run a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Gated DeltaNet layers, whose Megatron-LM flags meshplan does not write: an export's
    /// refusal only (`export::export`), since Megatron-Core 0.17 runs them and the search still
    /// prices their plans for it.
    LinearAttentionLayers,
    /// Lightning attention layers (MiniMax-01, pattern `L`), which none of the exported engines
    /// builds: every plan of the model, for every engine (estimate, simulate and
    /// `search --any-engine` still price them).
    LightningAttentionLayers,
    /// Falcon-H1's parallel layers (pattern `P`), which none of the exported engines builds
    /// (Megatron-Bridge's own Falcon-H1 model does): every plan of the model, for every engine.
    ParallelHybridLayers,
    /// Mamba-1 layers (Jamba, pattern `S`), which none of the exported engines builds: every
    /// plan of the model, for every engine.
    Mamba1Layers,
    /// The model has a hybrid layer pattern the engine does not build.
    HybridLayers {
        /// The engine.
        engine: Engine,
    },
    /// The pipeline schedule is not one the engine runs.
    Schedule {
        /// The engine.
        engine: Engine,
        /// The plan's schedule.
        schedule: PipelineSchedule,
    },
    /// The data-parallel sharding is not one the engine runs at all.
    Sharding {
        /// The plan's sharding.
        sharding: Sharding,
    },
    /// The sharding does not combine with pipeline parallelism.
    ShardingWithPipeline {
        /// The engine.
        engine: Engine,
        /// The plan's sharding.
        sharding: Sharding,
        /// Pipeline stages.
        pp: u64,
    },
    /// An FSDP shard group smaller than dp.
    HybridShard {
        /// The shard group.
        group: u64,
        /// Data-parallel size.
        dp: u64,
    },
    /// Plain data parallelism beside tp or pp.
    DdpWithModelParallel,
    /// No sharding with context parallelism, which the engine shards over anyway.
    UnshardedContextParallel,
    /// The parameter all-gather overlapped without the gradient-reduce overlap.
    ParamGatherWithoutGradReduce,
    /// Gradients reduced in bf16 where the engine reduces in float32 only.
    Bf16GradReduce,
    /// TP communication overlap where the engine has none.
    TpCommOverlap,
    /// Sequence parallelism with tp > 1 where the engine does it otherwise.
    SequenceParallel {
        /// What the engine does.
        runs: SequenceParallel,
    },
    /// A recompute kind the engine does not run.
    RecomputeKind {
        /// The plan's kind.
        kind: RecomputeKind,
        /// The selective recompute the engine runs, if any.
        runs: Option<RecomputeKind>,
    },
    /// Documents re-packed across global batches, which no engine's data loader does.
    DocumentRepacking {
        /// Global batches re-packed together.
        window: u64,
    },
    /// DynaPipe's variable-length micro-batches (`--variable-micro-batches`), which no engine's
    /// data loader forms.
    VariableMicroBatches,
    /// Data batched in a way none of the engine's loaders batches it.
    DocumentBatching {
        /// The engine.
        engine: Engine,
        /// The data's batching.
        batching: Batching,
    },
    /// Layers kept in BF16 at the ends of the model, which the engine cannot choose by number.
    Bf16Layers {
        /// The engine.
        engine: Engine,
    },
    /// Per-document context-parallel groups where the engine has none, or with what its hybrid
    /// context parallel refuses.
    HybridCp {
        /// The engine.
        engine: Engine,
        /// Why and what to do, when the engine has hybrid CP but not with this plan.
        with: Option<&'static str>,
    },
    /// Activations offloaded to host memory in a way the engine does not run.
    ActivationOffload {
        /// The engine.
        engine: Engine,
        /// Layers per pipeline rank offloaded.
        layers: u64,
        /// How the plan's offload differs from the engine's.
        mismatch: OffloadMismatch,
    },
    /// Full recompute of only some of a stage's layers.
    PartialRecompute {
        /// Layers per stage that recompute.
        layers: u64,
    },
    /// Context parallelism where the engine has none of its kind.
    ContextParallel {
        /// Context-parallel size.
        cp: u64,
    },
    /// A context-parallel exchange the engine does not run (Mesh-Attention: none runs it).
    CpComm {
        /// The engine.
        engine: Engine,
        /// The plan's exchange.
        comm: CpComm,
        /// The exchange the engine runs first (its capability table's), the one to use instead.
        instead: CpComm,
    },
    /// Key/value heads that the engine's all-to-all context parallelism cannot deal over its
    /// ranks.
    UlyssesKeyValueHeads {
        /// Key/value heads per TP rank.
        kv: u64,
        /// Ranks of the all-to-all.
        a2a: u64,
        /// How the engine deals them.
        rule: UlyssesKvHeads,
    },
    /// Context parallelism beside tensor or pipeline parallelism where the engine runs it beside
    /// data parallelism only.
    ContextParallelWithModelParallel {
        /// The engine.
        engine: Engine,
        /// Tensor-parallel size.
        tp: u64,
        /// Pipeline-parallel size.
        pp: u64,
    },
    /// The deduplicated (DeepEP) expert dispatch.
    DeduplicatedDispatch,
    /// An expert-tensor-parallel size the engine does not run.
    ExpertTensorParallel {
        /// The plan's etp.
        etp: u64,
        /// The plan's tp.
        tp: u64,
        /// The sizes the engine runs.
        runs: ExpertTensorParallel,
    },
    /// An MoE capacity factor on a dropless engine.
    CapacityFactor,
    /// The balanced (uneven) pipeline split.
    BalancedSplit {
        /// The engine.
        engine: Engine,
    },
    /// Adam moments stored at a precision the engine's optimizer does not offer.
    AdamMoments {
        /// The plan's moment precision.
        moments: AdamMoments,
    },
    /// A stack whose torchtitan reads an older job configuration than the one meshplan writes:
    /// an export's refusal only (`export::check_export`), since that torchtitan runs the plan and the
    /// search still ranks it.
    TorchtitanConfig,
    /// A stack of Megatron-LM before Megatron-Core, whose arguments meshplan does not write: an
    /// export's refusal only.
    MegatronBeforeCore,
    /// A flag the plan needs that the stack's Megatron-Core release does not define
    /// (`[export] megatron_core`; `megatron_release.rs`).
    FlagNotInRelease {
        /// The flag (with its value where only the value is missing).
        flag: &'static str,
        /// The minor release that first defines it (`None`: a flag outside meshplan's table).
        since: Option<u32>,
        /// The stack's minor release.
        release: u32,
    },
    /// A precision the engine has no recipe for.
    Precision {
        /// The engine.
        engine: Engine,
        /// The plan's precision.
        precision: Precision,
    },
}

fn sharding_flag(sharding: Sharding) -> &'static str {
    match sharding {
        Sharding::None => "--zero 0",
        Sharding::Optimizer => "--zero 1",
        Sharding::OptimizerAndGradients => "--zero 2",
        Sharding::Full => "--fsdp",
    }
}

impl Refusal {
    /// Whether it refuses the model itself, whatever the plan: layer kinds the engine does not
    /// build, or a flag of the model's structure that the stack's release lacks.
    pub fn concerns_model(&self) -> bool {
        match self {
            Refusal::FlagNotInRelease { flag, .. } => is_model_flag(flag),
            _ => matches!(
                self,
                Refusal::LightningAttentionLayers
                    | Refusal::ParallelHybridLayers
                    | Refusal::Mamba1Layers
                    | Refusal::HybridLayers { .. }
            ),
        }
    }

    /// Whether it is meshplan's writer that refuses, not the engine, which runs the plan: the
    /// export's own refusals ([`crate::export::check_export`]), which the search does not apply.
    pub fn concerns_writer(&self) -> bool {
        matches!(
            self,
            Refusal::LinearAttentionLayers
                | Refusal::TorchtitanConfig
                | Refusal::MegatronBeforeCore
        )
    }

    /// Whether it refuses the run's data whatever the layout (but per-document context-parallel
    /// groups, which the engine may not have): how its loaders batch documents.
    pub fn concerns_data(&self) -> bool {
        matches!(self, Refusal::DocumentBatching { .. })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::TorchtitanConfig => f.write_str(
                "the stack's torchtitan reads the job configuration of its 2024 releases (degrees under [training] and [experimental]), and meshplan writes torchtitan v0.2's ([parallelism]); price the plan with this stack, and export it with --stack torchtitan-0.2",
            ),
            Refusal::MegatronBeforeCore => f.write_str(
                "the stack is Megatron-LM before Megatron-Core (2020-2022), whose arguments meshplan does not write (it writes Megatron-Core's); price the plan with this stack, and export it with --stack megatron-core-0.6 or a later release",
            ),
            Refusal::FlagNotInRelease { flag, since: None, release } => write!(
                f,
                "the stack runs Megatron-Core 0.{release}, and meshplan does not know which release first has `{flag}`; pick a stack of a newer release with --stack"
            ),
            Refusal::FlagNotInRelease { flag, since: Some(since), release } => {
                let or = if self.concerns_model() {
                    "; the model needs it whatever the plan"
                } else {
                    ", or a plan without it"
                };
                write!(
                    f,
                    "the stack runs Megatron-Core 0.{release}, whose arguments have no `{flag}` (core_v0.{since}.0 added it); pick a stack of 0.{since} or later with --stack{or}"
                )
            }
            Refusal::LinearAttentionLayers => f.write_str(
                "meshplan does not write the flags of gated DeltaNet (G) layers yet; price the plan with estimate or search, and write those flags by hand",
            ),
            Refusal::LightningAttentionLayers => f.write_str(
                "it builds no lightning attention (L) layer (MiniMax-01 trains on its own stack); estimate and simulate price the plan and `search --any-engine` its alternatives, but there is no engine configuration to write",
            ),
            Refusal::ParallelHybridLayers => f.write_str(
                "it builds no Falcon-H1 parallel (P) layer: Megatron-LM has none (Megatron-Bridge 0.5 and later builds them from a Hugging Face checkpoint with its own Falcon-H1 model); estimate and simulate price the plan and `search --any-engine` its alternatives, but there is no engine configuration to write",
            ),
            Refusal::Mamba1Layers => f.write_str(
                "it builds no Mamba-1 (S) layer: Megatron-LM's hybrid models have Mamba-2 mixers only (Jamba trains on AI21's own stack); estimate and simulate price the plan and `search --any-engine` its alternatives, but there is no engine configuration to write",
            ),
            Refusal::HybridLayers { engine } => write!(
                f,
                "{} builds no hybrid (Mamba-2 / layer-pattern) model; export it for Megatron-LM (--engine megatron)",
                engine.name()
            ),
            Refusal::Schedule { engine, schedule } => {
                let explanation = match (engine, schedule) {
                    (Engine::Torchtitan, PipelineSchedule::ZeroBubble) => "its zero-bubble schedules are multi-stage (InterleavedZeroBubble, ZBVZeroBubble), not ZB-H1 with one stage per rank".to_owned(),
                    (Engine::Torchtitan, PipelineSchedule::Dualpipe) => {
                        "it runs DualPipeV (one copy of the weights in a V), not DualPipe".to_owned()
                    }
                    (Engine::Megatron, _) => format!(
                        "its pipeline schedules are 1F1B and interleaved 1F1B, not {}",
                        schedule.name()
                    ),
                    (Engine::Deepspeed, _) => {
                        format!("its pipeline engine runs 1F1B, not {}", schedule.name())
                    }
                    (Engine::Torchtitan, _) => format!(
                        "its pipeline schedules are GPipe, 1F1B and interleaved 1F1B, not {}",
                        schedule.name()
                    ),
                };
                let runs: Vec<&str> =
                    engine.capabilities().schedules.iter().map(|s| s.name()).collect();
                write!(f, "{explanation}; use --schedule {}", runs.join(" or "))
            }
            Refusal::Sharding { .. } => f.write_str(
                "it shards data-parallel state with FSDP2 only (no ZeRO-1/2); use --fsdp or --zero 0",
            ),
            Refusal::ShardingWithPipeline { engine, sharding, pp } => {
                let explanation = match engine {
                    Engine::Deepspeed => "pipeline parallelism is not compatible with ZeRO-2 and ZeRO-3",
                    _ => "FSDP / ZeRO-2/3 sharding (Megatron-FSDP, FSDP2) does not combine with pipeline parallelism",
                };
                write!(
                    f,
                    "{explanation}; use --zero 0 or --zero 1 instead of {} with pp {pp}, or --pp 1",
                    sharding_flag(sharding)
                )
            }
            Refusal::HybridShard { group, dp } => write!(
                f,
                "hybrid sharding (an FSDP shard group smaller than dp) is not exported; drop --hybrid-shard {group} (dp is {dp})"
            ),
            Refusal::DdpWithModelParallel => f.write_str("its DDP (no FSDP) runs only when data parallelism is the only parallelism; use --fsdp (HSDP with --hybrid-shard) with tp or pp"),
            Refusal::UnshardedContextParallel => f.write_str("with context parallelism it shards parameters over the cp ranks (FSDP2 over dp_shard x cp); use --fsdp"),
            Refusal::ParamGatherWithoutGradReduce => f.write_str(
                "--overlap-param-gather needs --overlap-grad-reduce (Megatron-LM's argument check); \
                 set both overlaps on, or --overlap-param-gather false",
            ),
            Refusal::Bf16GradReduce => f.write_str(
                "it reduces gradients in float32 only (training.mixed_precision_reduce); use --grad-reduce-in-fp32 true",
            ),
            Refusal::TpCommOverlap => f.write_str(
                "its AutoTP does not overlap tensor-parallel communication with GEMMs; use --tp-comm-overlap false",
            ),
            Refusal::SequenceParallel { runs } => match runs {
                SequenceParallel::Never => f.write_str(
                    "its AutoTP all-reduces each tensor-parallel layer's output and keeps the norms' activations whole on every rank (no sequence parallelism); drop --sequence-parallel",
                ),
                SequenceParallel::Always | SequenceParallel::Optional => f.write_str(
                    "its tensor parallelism always shards the norms' activations over the sequence (SequenceParallel); add --sequence-parallel",
                ),
            },
            Refusal::RecomputeKind { runs, .. } => match runs {
                Some(RecomputeKind::Op) => f.write_str("its selective checkpointing is per op (--recompute op) or per layer; recomputing only the attention core is Megatron-LM's"),
                Some(_) => f.write_str("its selective recompute is the attention core (--recompute selective); per-op checkpointing is torchtitan's"),
                None => f.write_str("its activation checkpointing is per layer (full); selective recompute is not available; use --recompute full or none"),
            },
            Refusal::Bf16Layers { engine } => write!(
                f,
                "{} has no setting that keeps layers at the ends of the model in BF16 under its low-precision recipe; drop --bf16-layers-at-start / --bf16-layers-at-end, or export for Megatron-LM",
                engine.name()
            ),
            Refusal::DocumentRepacking { window } => write!(
                f,
                "its data loader packs documents as they arrive; re-packing across global batches (WLB-LLM) is not in Megatron-LM, torchtitan or DeepSpeed; drop --balance-window {window}"
            ),
            Refusal::VariableMicroBatches => write!(
                f,
                "its data loader forms micro-batches of a fixed number of sequences; DynaPipe's variable micro-batches (sorted by length, each padded to its longest document) are not in Megatron-LM, torchtitan or DeepSpeed; drop --variable-micro-batches"
            ),
            Refusal::DocumentBatching { engine, batching } => {
                let runs: Vec<&str> = engine
                    .capabilities()
                    .batchings
                    .iter()
                    .map(|batching| batching.name())
                    .collect();
                write!(
                    f,
                    "the data is batched `{}` ({}), which none of {}'s data loaders does; it batches `{}`: pass --batching with one of those, or search --any-engine",
                    batching.name(),
                    batching.phrase(),
                    engine.name(),
                    runs.join("`, `")
                )
            }
            Refusal::HybridCp { engine, with: None } => write!(
                f,
                "{} has no per-document context-parallel groups (Megatron-LM's --hybrid-context-parallel); drop --hybrid-cp or use --engine megatron",
                engine.name()
            ),
            Refusal::HybridCp { with: Some(what), .. } => write!(
                f,
                "Megatron-LM's hybrid context parallel (core_v0.16 to v0.19) {what}"
            ),
            Refusal::ActivationOffload { layers, mismatch, .. } => {
                let drop = format!("drop --offload-activation-layers {layers}");
                match mismatch {
                    OffloadMismatch::NoOffload => write!(
                        f,
                        "it offloads no activations to host memory in a release; {drop}, or export for Megatron-LM (--engine megatron) with --pp 1 and no recompute"
                    ),
                    OffloadMismatch::Pipeline { pp } => write!(
                        f,
                        "its activation offloading runs only without pipeline parallelism; use --pp 1 instead of pp {pp}, or {drop}"
                    ),
                    OffloadMismatch::Recompute { .. } => write!(
                        f,
                        "its activation offloading does not run with activation recomputation; use --recompute none, or {drop}"
                    ),
                    OffloadMismatch::HybridLayers => write!(
                        f,
                        "its hybrid (Mamba) stack does not offload activations, only its GPT transformer block does; {drop}"
                    ),
                    OffloadMismatch::CheckpointInputs => write!(
                        f,
                        "its cpu_checkpointing moves the input of every checkpointed layer but the newest to host memory (full recompute only) and copies each back when its backward asks, not the activations of N layers per rank copied back beside the backward as priced; {drop}, or export for Megatron-LM (--engine megatron) with --pp 1 and no recompute"
                    ),
                }
            }
            Refusal::PartialRecompute { layers } => write!(
                f,
                "full activation checkpointing applies to every layer; partial recompute is not available; drop --recompute-num-layers {layers}"
            ),
            Refusal::ContextParallel { .. } => {
                f.write_str("it has no context parallelism; use --cp 1")
            }
            Refusal::CpComm { comm: CpComm::Mesh, instead, .. } => write!(
                f,
                "no released engine runs Mesh-Attention (Chen et al. 2025); meshplan prices it only; use --cp-comm {}",
                instead.name()
            ),
            Refusal::CpComm { engine: Engine::Deepspeed, comm, .. } => write!(
                f,
                "its context parallelism is Ulysses (Arctic Long Sequence Training's UlyssesSPAttentionHF): an all-to-all of the attention heads; {} is not; use --cp-comm all-to-all",
                comm.name()
            ),
            Refusal::CpComm { comm, .. } => write!(
                f,
                "its context parallelism passes keys and values around a ring; {} is Megatron-LM's; use --cp-comm ring",
                comm.name()
            ),
            Refusal::UlyssesKeyValueHeads { kv, a2a, rule: UlyssesKvHeads::DivideOrReplicate } => write!(
                f,
                "its Ulysses attention splits or replicates the {kv} key/value heads over the context-parallel ranks only when one count divides the other, and cp is {a2a}; use a cp that divides {kv} or that {kv} divides"
            ),
            Refusal::UlyssesKeyValueHeads { kv, a2a, rule: UlyssesKvHeads::Divide } => write!(
                f,
                "Transformer Engine's all-to-all context parallelism splits each TP rank's {kv} key/value heads over its {a2a} ranks and needs them to divide; use a cp (or all-to-all group) that divides {kv}, or --cp-comm ring"
            ),
            Refusal::ContextParallelWithModelParallel { tp, pp, .. } => write!(
                f,
                "its Ulysses context parallelism (ALST) runs beside ZeRO data parallelism only, not with tp {tp} or pp {pp}; use --tp 1 --pp 1, or --cp 1"
            ),
            Refusal::DeduplicatedDispatch => f.write_str("its AutoEP dispatches one message per token and expert, not DeepEP's deduplicated dispatch; use --expert-dispatch all-to-all"),
            Refusal::ExpertTensorParallel { etp, tp, runs } => match runs {
                ExpertTensorParallel::One => f.write_str(
                    "its AutoEP splits experts over ranks, not inside an expert (etp > 1); use --etp 1",
                ),
                _ => write!(
                    f,
                    "its expert tensor parallelism is 1 or tp ({tp}), not {etp}; use --etp 1 or --etp {tp}"
                ),
            },
            Refusal::CapacityFactor => f.write_str(
                "its MoE layers are dropless; a capacity factor is not available; drop --moe-capacity-factor",
            ),
            Refusal::BalancedSplit { engine } => {
                let explanation = match engine {
                    Engine::Deepspeed => "its PipelineModule partitions by parameters or uniformly, not by an explicit uneven layout",
                    _ => "its stages hold the same number of layers (first/last one less at most); an uneven balanced split is not expressible",
                };
                write!(f, "{explanation}; use --pipeline-split even or embedding-and-loss with a pp that divides the layers")
            }
            Refusal::AdamMoments { moments } => write!(
                f,
                "its optimizer stores Adam's moments in fp32, not {}; use --adam-moments fp32",
                moments.name()
            ),
            Refusal::Precision { engine, precision } => {
                let explanation = match engine {
                    Engine::Deepspeed => format!("its JSON config has no {} recipe", precision.name()),
                    _ => format!(
                        "its low-precision recipes are torchao float8 tensorwise and MXFP8, not {}",
                        precision.name()
                    ),
                };
                let runs: Vec<&str> =
                    engine.capabilities().precisions.iter().map(|p| p.name()).collect();
                write!(f, "{explanation}; use --precision {}", runs.join(" or "))
            }
        }
    }
}

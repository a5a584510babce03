//! The one table of what each training engine runs, and every reason it refuses a plan.
//!
//! [`Capabilities`] holds each engine's facts (schedules, sharding, recompute kinds, context and
//! expert parallelism, precisions, TP communication overlap, activation offload, ...);
//! [`refusals`] compares a plan with them and returns every mismatch as a typed [`Refusal`]
//! (`refusal.rs`), whose `Display` says what the engine lacks and what to change. The exporters,
//! the search (TP overlap, which selective recompute to try) and the calibration defaults read
//! these facts instead of keeping copies; [`Capabilities::activation_offload_allowed`] says from
//! them whether an engine runs an offloading plan of a given shape.

use crate::data::Batching;
use crate::plan::{
    AdamMoments, CpComm, ExpertDispatch, HybridCpScheduler, PipelineSchedule, PipelineSplit,
    Precision,
};
use crate::plan::{RecomputeKind, Sharding};
use crate::run::Run;

use super::Engine;
pub use super::offload::ActivationOffload;
use super::refusal::Refusal;
pub use super::refusal::{ExpertTensorParallel, OffloadMismatch, SequenceParallel, UlyssesKvHeads};

/// What one engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The engine.
    pub engine: Engine,
    /// The pipeline schedules it runs.
    pub schedules: &'static [PipelineSchedule],
    /// Whether a plan without a pipeline (pp 1) is held to `schedules` too. DeepSpeed's schedule
    /// belongs to its pipeline engine, which a one-stage plan does not use.
    pub schedule_without_pipeline: bool,
    /// The data-parallel shardings it runs.
    pub shardings: &'static [Sharding],
    /// The shardings it runs together with pipeline parallelism (pp > 1).
    pub shardings_with_pipeline: &'static [Sharding],
    /// Whether it runs an FSDP shard group smaller than dp (HSDP).
    pub hybrid_shard: bool,
    /// Whether plain data parallelism (no sharding) combines with tp or pp.
    pub ddp_with_model_parallel: bool,
    /// Whether context parallelism leaves parameters unsharded when the plan shards nothing.
    pub unsharded_context_parallel: bool,
    /// Whether the parameter all-gather overlap needs the gradient-reduce overlap (distributed
    /// optimizer, dp x cp > 1).
    pub param_gather_needs_grad_reduce: bool,
    /// Whether it reduces gradients in bf16 (else in float32 only).
    pub bf16_grad_reduce: bool,
    /// Whether it overlaps tensor-parallel communication with GEMMs.
    pub tp_comm_overlap: bool,
    /// Whether its tensor parallelism shards the activations between TP regions over the
    /// sequence.
    pub sequence_parallel: SequenceParallel,
    /// The selective recompute it runs, if any: the attention core ([`RecomputeKind::Selective`])
    /// or per-op checkpointing ([`RecomputeKind::Op`]).
    pub selective_recompute: Option<RecomputeKind>,
    /// Whether full recompute may cover only some layers of a stage.
    pub partial_recompute: bool,
    /// The context-parallel exchanges it runs; empty when it has no context parallelism.
    pub cp_comms: &'static [CpComm],
    /// Whether context parallelism combines with tensor or pipeline parallelism.
    pub cp_with_model_parallel: bool,
    /// How its all-to-all context parallelism deals the key/value heads over its ranks.
    pub ulysses_kv_heads: UlyssesKvHeads,
    /// Whether it runs the deduplicated (DeepEP) expert dispatch.
    pub deduplicated_dispatch: bool,
    /// The expert-tensor-parallel sizes it runs.
    pub expert_tensor_parallel: ExpertTensorParallel,
    /// Whether its MoE layers take a capacity factor (else they are dropless).
    pub capacity_factor: bool,
    /// Whether it runs the balanced (uneven) pipeline split.
    pub balanced_split: bool,
    /// The precisions it has a recipe for.
    pub precisions: &'static [Precision],
    /// The Adam moment precisions its optimizer stores.
    pub adam_moments: &'static [AdamMoments],
    /// Whether it builds hybrid models (Mamba-2 layers and a layer pattern).
    pub hybrid_layers: bool,
    /// Whether it keeps chosen layers at either end of the model in BF16 under a low-precision
    /// recipe (`--bf16-layers-at-start` / `--bf16-layers-at-end`).
    pub bf16_layers: bool,
    /// The widest window of global batches its data loader re-packs documents across to balance
    /// work (0: it packs documents as they arrive).
    pub balance_window: u64,
    /// Whether it places documents on per-document context-parallel groups (`--hybrid-cp`).
    pub hybrid_cp: bool,
    /// How its data loaders turn documents into sequences, each as its attention then runs
    /// (`--lengths` data batched another way is refused, but under its per-document
    /// context-parallel groups, which read documents whole).
    pub batchings: &'static [Batching],
    /// Whether its loader sorts documents into variable micro-batches (DynaPipe,
    /// `--variable-micro-batches`): none of the three forms micro-batches other than of a fixed
    /// count of sequences.
    pub variable_micro_batches: bool,
    /// The activation offload to host memory it runs (`offload.rs`, sources in
    /// `docs/activation-offload.md`).
    pub activation_offload: ActivationOffload,
}

impl Capabilities {
    /// Whether the engine runs meshplan's activation offload (some of each rank's layers to host
    /// memory, `offload_activation_layers`) on a plan of `pp` stages with `recompute`, for a
    /// hybrid (layer-pattern) model or not: what a search asks before it tries offload.
    pub fn activation_offload_allowed(
        &self,
        pp: u64,
        recompute: RecomputeKind,
        hybrid_model: bool,
    ) -> bool {
        self.activation_offload.mismatches(pp, recompute, hybrid_model).is_empty()
    }
}

const ALL_SHARDINGS: &[Sharding] =
    &[Sharding::None, Sharding::Optimizer, Sharding::OptimizerAndGradients, Sharding::Full];

const MEGATRON: Capabilities = Capabilities {
    engine: Engine::Megatron,
    schedules: &[PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved],
    schedule_without_pipeline: true,
    shardings: ALL_SHARDINGS,
    shardings_with_pipeline: &[Sharding::None, Sharding::Optimizer],
    hybrid_shard: false,
    ddp_with_model_parallel: true,
    unsharded_context_parallel: true,
    param_gather_needs_grad_reduce: true,
    bf16_grad_reduce: true,
    tp_comm_overlap: true,
    sequence_parallel: SequenceParallel::Optional,
    selective_recompute: Some(RecomputeKind::Selective),
    partial_recompute: true,
    // `--cp-comm-type p2p`, `a2a`, `a2a+p2p`; Mesh-Attention is in no release.
    cp_comms: &[CpComm::Ring, CpComm::AllToAll, CpComm::Hierarchical],
    cp_with_model_parallel: true,
    // Transformer Engine's a2a (transformer_engine/pytorch/attention/dot_product_attention/
    // context_parallel.py, `AttnFuncWithCPAndQKVOA2A`): "requires num_heads % cp_size == 0 for
    // Q, K, V".
    ulysses_kv_heads: UlyssesKvHeads::Divide,
    deduplicated_dispatch: true,
    expert_tensor_parallel: ExpertTensorParallel::Any,
    capacity_factor: true,
    balanced_split: true,
    precisions: &Precision::ALL,
    adam_moments: &[AdamMoments::Fp32, AdamMoments::Bf16],
    // `--hybrid-override-pattern` with the Mamba stack (megatron/core/ssm, pretrain_mamba.py).
    hybrid_layers: true,
    // `--first-last-layers-bf16 --num-layers-at-start-in-bf16 --num-layers-at-end-in-bf16`
    // (megatron/training/arguments.py@core_v0.15.0; Megatron-Core's fp8_utils / fp4_utils skip
    // the quantization context by layer number).
    bf16_layers: true,
    balance_window: 0,
    // `--hybrid-context-parallel --max-seqlen-per-dp-cp-rank`, core_v0.16.0 to core_v0.19.0
    // (docs/megatron-packing-schedulers.md).
    hybrid_cp: true,
    // `GPTDataset` concatenates documents, and the mask `--reset-attention-mask` builds is not
    // read by Transformer Engine's causal attention (`extensions/transformer_engine.py@
    // core_v0.18.0`; Megatron-LM issue 2357): concat. The SFT dataset (`--sft`) packs each
    // sample's documents whole and pads the rest, with the `cu_seqlens` of Transformer Engine's
    // THD layout (`training/datasets/sft_dataset.py@core_v0.18.0`): whole, or pad with one
    // document a sample. No released loader cuts documents at sequence ends under a mask
    // (`--use-varlen-dataset` is on the dev branch only, docs/megatron-packing-schedulers.md).
    batchings: &[Batching::Concat, Batching::Whole, Batching::Pad],
    variable_micro_batches: false,
    // `--cpu-offloading-num-layers N`, core_v0.16.0 to core_v0.19.0: TransformerConfig refuses
    // it with pp > 1 or any recompute; the hybrid (Mamba) stack never enters the offload context
    // (docs/activation-offload.md, section 1a).
    activation_offload: ActivationOffload::Layers {
        with_pipeline: false,
        with_recompute: false,
        hybrid_layers: false,
    },
};

const TORCHTITAN: Capabilities = Capabilities {
    engine: Engine::Torchtitan,
    schedules: &[
        PipelineSchedule::Gpipe,
        PipelineSchedule::OneFOneB,
        PipelineSchedule::Interleaved,
    ],
    schedule_without_pipeline: true,
    shardings: &[Sharding::None, Sharding::Full],
    shardings_with_pipeline: &[Sharding::None, Sharding::Full],
    hybrid_shard: true,
    // parallelize_llama (every model) raises "DDP has not supported > 1D parallelism".
    ddp_with_model_parallel: false,
    // parallelize_llama applies FSDP over the `dp_shard_cp` mesh whenever cp > 1.
    unsharded_context_parallel: false,
    param_gather_needs_grad_reduce: false,
    // `training.mixed_precision_reduce` is `Literal["float32"]` in v0.2.2.
    bf16_grad_reduce: false,
    // Async TP (`enable_async_tensor_parallel`, with torch.compile).
    tp_comm_overlap: true,
    // models/llama3/infra/parallelize.py@v0.2.2 `apply_tp`: the norms' outputs are sharded on the
    // sequence (`SequenceParallel()`) whenever tp > 1.
    sequence_parallel: SequenceParallel::Always,
    selective_recompute: Some(RecomputeKind::Op),
    partial_recompute: false,
    cp_comms: &[CpComm::Ring],
    cp_with_model_parallel: true,
    // No all-to-all context parallelism.
    ulysses_kv_heads: UlyssesKvHeads::Divide,
    deduplicated_dispatch: true,
    expert_tensor_parallel: ExpertTensorParallel::OneOrTp,
    capacity_factor: false,
    balanced_split: false,
    precisions: &[Precision::Bf16, Precision::Fp8Current, Precision::Mxfp8],
    adam_moments: &[AdamMoments::Fp32],
    // Its model registry has no Mamba or hybrid model (torchtitan/models).
    hybrid_layers: false,
    bf16_layers: false,
    balance_window: 0,
    hybrid_cp: false,
    // Its text loader appends every document's tokens to one buffer and cuts it every
    // `seq_len + 1` tokens (`datasets/hf_datasets.py`, `HuggingFaceDataset.__iter__`), and its
    // attention is causal SDPA with no document mask (`models/llama/model.py`,
    // `Attention.forward`: `F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)`).
    batchings: &[Batching::Concat],
    variable_micro_batches: false,
    // v0.2.2's only CPU offload, `training.enable_cpu_offload`, is FSDP2's parameter, gradient
    // and optimizer-state offload (docs/activation-offload.md, section 3).
    activation_offload: ActivationOffload::None,
};

const DEEPSPEED: Capabilities = Capabilities {
    engine: Engine::Deepspeed,
    schedules: &[PipelineSchedule::OneFOneB],
    schedule_without_pipeline: false,
    shardings: ALL_SHARDINGS,
    shardings_with_pipeline: &[Sharding::None, Sharding::Optimizer],
    hybrid_shard: true,
    ddp_with_model_parallel: true,
    unsharded_context_parallel: true,
    param_gather_needs_grad_reduce: false,
    bf16_grad_reduce: true,
    // AutoTP has no GEMM/communication overlap.
    tp_comm_overlap: false,
    // module_inject/layers.py (AutoTP's `LinearAllreduce`, `LinearLayer`): all-reduce of each
    // row-parallel output, no reduce-scatter over the sequence.
    sequence_parallel: SequenceParallel::Never,
    selective_recompute: None,
    partial_recompute: true,
    // Ulysses sequence parallelism for Hugging Face models (Arctic Long Sequence Training, 0.17.0
    // on: runtime/sequence_parallel/ulysses_sp.py `UlyssesSPAttentionHF`): an all-to-all of the
    // attention heads, beside ZeRO data parallelism (docs/_tutorials/
    // ulysses-alst-sequence-parallelism.md shows it with ZeRO only; neither AutoTP nor the
    // pipeline engine is documented with it).
    cp_comms: &[CpComm::AllToAll],
    cp_with_model_parallel: false,
    // UlyssesSPAttentionHF.__init__: replicates key/value heads by a whole factor.
    ulysses_kv_heads: UlyssesKvHeads::DivideOrReplicate,
    deduplicated_dispatch: false,
    expert_tensor_parallel: ExpertTensorParallel::One,
    capacity_factor: true,
    balanced_split: false,
    precisions: &[Precision::Bf16, Precision::Fp16],
    adam_moments: &[AdamMoments::Fp32],
    // It wraps a model the user writes; meshplan's DeepSpeed export names a GPT-style one.
    hybrid_layers: false,
    bf16_layers: false,
    balance_window: 0,
    hybrid_cp: false,
    // The data loader and the attention are the user's training script's (DeepSpeed wraps the
    // model and batches it is given), so any batching.
    batchings: &[Batching::Pack, Batching::Pad, Batching::Whole, Batching::Concat],
    variable_micro_batches: false,
    // `activation_checkpointing.cpu_checkpointing`: full recompute's checkpoint inputs, all but
    // the newest from 0.19.6 on (0.19.8 is pinned; docs/activation-offload.md, section 2a).
    activation_offload: ActivationOffload::CheckpointInputs,
};

impl Engine {
    /// What this engine runs.
    pub fn capabilities(self) -> &'static Capabilities {
        match self {
            Engine::Megatron => &MEGATRON,
            Engine::Torchtitan => &TORCHTITAN,
            Engine::Deepspeed => &DEEPSPEED,
        }
    }
}

/// The layer kinds of the run's model that no engine meshplan exports for builds, whatever the
/// plan: lightning attention (`L`), Falcon-H1's parallel layers (`P`) and Mamba-1 (`S`). A search
/// for an engine rejects every plan of such a model (`search --any-engine` prices them), and its
/// export is refused, from this one check.
fn model_refusals(run: &Run) -> Vec<Refusal> {
    let model = run.model();
    let parallel = crate::model::Sublayer::ParallelHybrid.index();
    [
        (model.hybrid_lightning_attention().is_some(), Refusal::LightningAttentionLayers),
        (
            model.hybrid().is_some_and(|hybrid| hybrid.counts()[parallel] > 0),
            Refusal::ParallelHybridLayers,
        ),
        (model.hybrid_mamba1().is_some(), Refusal::Mamba1Layers),
    ]
    .into_iter()
    .filter_map(|(present, refusal)| present.then_some(refusal))
    .collect()
}

/// The plan's own engine's refusal of the run's data, when none of its loaders batches
/// documents as the data is batched (what `estimate` and the report say beside the data).
pub fn data_refusal(run: &Run) -> Option<Refusal> {
    batching_refusal(run.plan().engine(), run)
}

/// [`data_refusal`] as the sentence `estimate` and the report show beside the data:
/// "{engine}'s export refuses this data: {refusal}".
pub fn data_refusal_sentence(run: &Run) -> Option<String> {
    let refusal = data_refusal(run)?;
    Some(format!("{}'s export refuses this data: {refusal}", run.plan().engine().name()))
}

/// `engine`'s refusal of the run's data when none of its loaders batches documents as the data
/// is batched; none under per-document context-parallel groups, which read documents whole,
/// whatever the batching.
fn batching_refusal(engine: Engine, run: &Run) -> Option<Refusal> {
    let batching = run.data()?.data.batching();
    let refused = !engine.capabilities().batchings.contains(&batching);
    (refused && run.plan().hybrid_cp().is_none())
        .then_some(Refusal::DocumentBatching { engine, batching })
}

/// Every reason `engine` cannot run the plan of `run`, in a fixed order; empty when it can.
pub fn refusals(engine: Engine, run: &Run) -> Vec<Refusal> {
    let caps = engine.capabilities();
    let plan = run.plan();
    let (tp, pp, cp, dp) = (plan.tp(), plan.pp(), plan.cp(), plan.dp());
    let mut out = model_refusals(run);
    if out.is_empty() && run.model().hybrid().is_some() && !caps.hybrid_layers {
        out.push(Refusal::HybridLayers { engine });
    }
    // Data its loaders do not batch so, first: it holds for every plan but one with
    // per-document context-parallel groups.
    out.extend(batching_refusal(engine, run));
    let schedule = plan.schedule();
    if (pp > 1 || caps.schedule_without_pipeline) && !caps.schedules.contains(&schedule) {
        out.push(Refusal::Schedule { engine, schedule });
    }
    let sharding = plan.sharding();
    if !caps.shardings.contains(&sharding) {
        out.push(Refusal::Sharding { sharding });
    } else if pp > 1 && !caps.shardings_with_pipeline.contains(&sharding) {
        out.push(Refusal::ShardingWithPipeline { engine, sharding, pp });
    }
    if !caps.hybrid_shard && plan.shard_group() != dp {
        out.push(Refusal::HybridShard { group: plan.shard_group(), dp });
    }
    if !caps.ddp_with_model_parallel
        && sharding == Sharding::None
        && dp > 1
        && cp == 1
        && tp * pp > 1
    {
        out.push(Refusal::DdpWithModelParallel);
    }
    if !caps.unsharded_context_parallel && sharding == Sharding::None && cp > 1 {
        out.push(Refusal::UnshardedContextParallel);
    }
    if caps.param_gather_needs_grad_reduce
        && plan.overlap_param_gather()
        && !plan.overlap_grad_reduce()
        && sharding == Sharding::Optimizer
        && dp * cp > 1
    {
        out.push(Refusal::ParamGatherWithoutGradReduce);
    }
    if !caps.bf16_grad_reduce && !plan.grad_reduce_in_fp32() {
        out.push(Refusal::Bf16GradReduce);
    }
    if !caps.tp_comm_overlap && plan.tp_comm_overlap() {
        out.push(Refusal::TpCommOverlap);
    }
    let sequence_parallel_runs = match caps.sequence_parallel {
        SequenceParallel::Optional => true,
        SequenceParallel::Always => plan.sequence_parallel(),
        SequenceParallel::Never => !plan.sequence_parallel(),
    };
    if tp > 1 && !sequence_parallel_runs {
        out.push(Refusal::SequenceParallel { runs: caps.sequence_parallel });
    }
    let kind = plan.recompute();
    if matches!(kind, RecomputeKind::Selective | RecomputeKind::Op)
        && caps.selective_recompute != Some(kind)
    {
        out.push(Refusal::RecomputeKind { kind, runs: caps.selective_recompute });
    }
    let layers = plan.offload_activation_layers();
    if layers > 0 {
        let hybrid_model = run.model().hybrid().is_some();
        for mismatch in caps.activation_offload.mismatches(pp, kind, hybrid_model) {
            out.push(Refusal::ActivationOffload { engine, layers, mismatch });
        }
    }
    if plan.hybrid_cp().is_some() {
        if !caps.hybrid_cp {
            out.push(Refusal::HybridCp { engine, with: None });
        } else if plan.hybrid_cp().is_some_and(|h| h.scheduler() == HybridCpScheduler::ByWork) {
            let with = "places documents by length squared, not by work (ByteScale's balancing); \
                        use --hybrid-cp-scheduler megatron";
            out.push(Refusal::HybridCp { engine, with: Some(with) });
        } else if run.model().mla().is_some() {
            let with = "asserts no multi-latent attention; drop --hybrid-cp";
            out.push(Refusal::HybridCp { engine, with: Some(with) });
        } else if matches!(sharding, Sharding::OptimizerAndGradients | Sharding::Full) {
            let with = "does not run with Megatron-FSDP; use --zero 0 or 1, or drop --hybrid-cp";
            out.push(Refusal::HybridCp { engine, with: Some(with) });
        }
    }
    if plan.bf16_layers() != (0, 0) && !caps.bf16_layers {
        out.push(Refusal::Bf16Layers { engine });
    }
    if plan.balance_window() > caps.balance_window {
        out.push(Refusal::DocumentRepacking { window: plan.balance_window() });
    }
    if plan.variable_micro_batches() && !caps.variable_micro_batches {
        out.push(Refusal::VariableMicroBatches);
    }
    if !caps.partial_recompute
        && kind == RecomputeKind::Full
        && plan.recompute_num_layers() < run.stage_layers(0).min(run.stage_layers(pp - 1))
    {
        out.push(Refusal::PartialRecompute { layers: plan.recompute_num_layers() });
    }
    if cp > 1 && caps.cp_comms.is_empty() {
        out.push(Refusal::ContextParallel { cp });
    } else if let Some(&instead) = caps.cp_comms.first()
        && cp > 1
        && !caps.cp_comms.contains(&plan.cp_comm())
    {
        out.push(Refusal::CpComm { engine, comm: plan.cp_comm(), instead });
    }
    if cp > 1 && !caps.cp_with_model_parallel && tp * pp > 1 {
        out.push(Refusal::ContextParallelWithModelParallel { engine, tp, pp });
    }
    // The all-to-all deals each TP rank's key/value heads over its ranks.
    let a2a = plan.cp_a2a();
    if cp > 1 && a2a > 1 {
        let kv = run.model().num_kv_heads() / tp.max(1);
        let dealt = match caps.ulysses_kv_heads {
            UlyssesKvHeads::Divide => kv.is_multiple_of(a2a),
            UlyssesKvHeads::DivideOrReplicate => kv.is_multiple_of(a2a) || a2a.is_multiple_of(kv),
        };
        if kv > 0 && !dealt {
            out.push(Refusal::UlyssesKeyValueHeads { kv, a2a, rule: caps.ulysses_kv_heads });
        }
    }
    if !caps.deduplicated_dispatch
        && plan.ep() > 1
        && plan.expert_dispatch() == ExpertDispatch::Deduplicated
    {
        out.push(Refusal::DeduplicatedDispatch);
    }
    let etp = plan.etp();
    let etp_runs = match caps.expert_tensor_parallel {
        ExpertTensorParallel::Any => true,
        ExpertTensorParallel::OneOrTp => etp == 1 || etp == tp,
        ExpertTensorParallel::One => etp == 1,
    };
    if !etp_runs {
        out.push(Refusal::ExpertTensorParallel { etp, tp, runs: caps.expert_tensor_parallel });
    }
    if !caps.capacity_factor && plan.moe_capacity_factor().is_some() {
        out.push(Refusal::CapacityFactor);
    }
    if !caps.balanced_split && plan.pipeline_split() == PipelineSplit::Balanced {
        out.push(Refusal::BalancedSplit { engine });
    }
    let precision = run.training().precision();
    if !caps.precisions.contains(&precision) {
        out.push(Refusal::Precision { engine, precision });
    }
    if !caps.adam_moments.contains(&plan.adam_moments()) {
        out.push(Refusal::AdamMoments { moments: plan.adam_moments() });
    }
    // The flags a stack's older Megatron-Core release lacks, for a model whose layers the
    // engine builds (the arguments of any other are not written).
    let older_release = run.stack().megatron_arguments().minor().is_some();
    if engine == Engine::Megatron && older_release && !out.iter().any(Refusal::concerns_model) {
        out.extend(super::megatron::for_stack(run).1);
    }
    out
}

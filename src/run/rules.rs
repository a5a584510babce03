//! The rules that check one run's training setup and plan against its model and cluster: every
//! single-field bound, every divisibility and precondition, each problem recorded with its field,
//! value and fix. [`validate_plan`] builds the validated [`Plan`] from them.

use crate::hardware::Cluster;
use crate::limits::{self, PARALLEL_SIZE, VIRTUAL_STAGES};
use crate::model::Model;
use crate::plan::{
    AdamMoments, Engine, ExpertDispatch, FsdpMode, PipelineSchedule, PipelineSplit, Plan, PlanSpec,
    Precision, RecomputeKind, RecomputeModule, RecomputeModules, Sharding, Training, TrainingSpec,
};
use crate::violation::{Collector, shown_float};

use super::context_parallel_rules::{self, HybridCpInputs};
use super::expert_rules::{ExpertRules, StageSizes, validate_experts};
use super::field_rules::{MOE_RATIO_HINT, MOE_RATIO_RANGE, POSITIVE, positive_or};
use super::mixer_rules::{self, check_divides};

pub(crate) fn check_plan_fields(collector: &mut Collector, spec: &PlanSpec) {
    let sizes = [
        ("plan.tp", spec.tp),
        ("plan.pp", spec.pp),
        ("plan.vp", spec.vp),
        ("plan.dp", spec.dp),
        ("plan.cp", spec.cp),
        ("plan.ep", spec.ep),
        ("plan.etp", spec.etp),
        ("plan.hybrid_shard", spec.hybrid_shard),
    ];
    for (field, value) in sizes {
        match value {
            Some(v) if v <= 0 => collector.add(field, v, POSITIVE, "a parallel size is 1 or more"),
            Some(v) if v as u64 > PARALLEL_SIZE => collector.add(
                field,
                v,
                format!("exceeds {PARALLEL_SIZE}, the largest meshplan prices"),
                format!(
                    "a parallel size is at most the GPUs of the job, and at most {PARALLEL_SIZE}"
                ),
            ),
            _ => {}
        }
    }
    if let Some(stage) = spec.zero
        && !(0..=3).contains(&stage)
    {
        collector.add("plan.zero", stage, ZERO_STAGES, "ZeRO stages are 0 (off) to 3");
    }
    match spec.recompute_num_layers {
        Some(n) if n < 0 => collector.add(
            "plan.recompute_num_layers",
            n,
            "must not be negative",
            "0 or more layers",
        ),
        Some(n) if n as u64 > limits::LAYERS => collector.add(
            "plan.recompute_num_layers",
            n,
            format!("exceeds {}, the most layers meshplan prices", limits::LAYERS),
            format!("at most the layers of a pipeline stage, and at most {}", limits::LAYERS),
        ),
        _ => {}
    }
    for (field, value) in [
        ("plan.moe_imbalance", spec.moe_imbalance),
        ("plan.moe_capacity_factor", spec.moe_capacity_factor),
    ] {
        if let Some(v) = value
            && !crate::limits::within(v, crate::limits::MOE_RATIO)
        {
            collector.add(field, shown_float(v), MOE_RATIO_RANGE, MOE_RATIO_HINT);
        }
    }
}

/// The message of a ZeRO stage out of range.
const ZERO_STAGES: &str = "must be 0, 1, 2 or 3";

pub(crate) fn validate_training(collector: &mut Collector, spec: &TrainingSpec) -> Training {
    let seq_len = positive_or(
        collector,
        "training.seq_len",
        Some(spec.seq_len),
        1,
        limits::SEQ_LEN,
        &format!("pass --seq-len, e.g. 8192, at most {}", limits::SEQ_LEN),
    );
    let global_batch = positive_or(
        collector,
        "training.global_batch",
        Some(spec.global_batch),
        1,
        limits::GLOBAL_BATCH,
        &format!("pass --global-batch in sequences, e.g. 128, at most {}", limits::GLOBAL_BATCH),
    );
    let micro_batch = positive_or(
        collector,
        "training.micro_batch",
        spec.micro_batch,
        1,
        limits::GLOBAL_BATCH,
        "pass --micro-batch, e.g. 1",
    );
    Training {
        seq_len,
        global_batch,
        micro_batch,
        precision: spec.precision.unwrap_or(Precision::Bf16),
    }
}

/// Which inputs of the plan's cross-field rules passed their own checks. A refused value is
/// replaced by a stand-in (1) so that validation goes on; a rule that reads a stand-in is skipped,
/// since its message would name a number the user never gave.
#[derive(Debug, Clone, Copy)]
pub(super) struct Accepted {
    /// The cluster's GPU count lies within 1..=`limits::GPUS`.
    pub gpus: bool,
    /// Sequence length, global batch and micro-batch passed their bounds.
    pub training: bool,
}

/// What a plan runs on: the GPU count as written (within its bound), the cluster when it passed
/// its checks, and the experts' layouts the software builds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target<'a> {
    pub gpus: u64,
    pub cluster: Option<&'a Cluster>,
    pub experts: ExpertRules<'a>,
}

pub(super) fn validate_plan(
    collector: &mut Collector,
    spec: &PlanSpec,
    model: &Model,
    target: Target<'_>,
    training: &Training,
    accepted: Accepted,
) -> Option<Plan> {
    let Target { gpus, cluster, experts: layout } = target;
    let gpu = cluster.map(Cluster::gpu);
    let size = PARALLEL_SIZE;
    let mut accepted_size = |field: &str, value, default, max, hint: &str| {
        let before = collector.len();
        let size = positive_or(collector, field, value, default, max, hint);
        (size, collector.len() == before)
    };
    let (tp, tp_ok) = accepted_size("plan.tp", spec.tp, 1, size, "tensor-parallel size, e.g. 8");
    let (pp, pp_ok) = accepted_size("plan.pp", spec.pp, 1, size, "pipeline-parallel size, e.g. 4");
    let (vp, vp_ok) = accepted_size(
        "plan.vp",
        spec.vp,
        1,
        VIRTUAL_STAGES,
        "virtual pipeline chunks per rank, e.g. 2",
    );
    let (cp, cp_ok) = accepted_size("plan.cp", spec.cp, 1, size, "context-parallel size, e.g. 2");
    // Each size is at most 2^20: three of them multiply within u64, all four within u128.
    let model_parallel = tp * pp * cp;
    let default_dp = (gpus / model_parallel).max(1);
    let (dp, dp_ok) = accepted_size("plan.dp", spec.dp, default_dp, size, "data-parallel size");
    // Which values are the ones given (or their defaults) rather than stand-ins: dp's default is
    // read from the GPU count and the other sizes.
    let model_parallel_ok = tp_ok && pp_ok && cp_ok;
    let pipeline = pp_ok && vp_ok;
    let dp_known = dp_ok && (spec.dp.is_some() || (accepted.gpus && model_parallel_ok));
    let batch = dp_known && pipeline && accepted.training;
    let world = u128::from(model_parallel) * u128::from(dp);
    if model_parallel_ok && dp_known && accepted.gpus && world != u128::from(gpus) {
        collector.add(
            "plan.dp",
            dp,
            format!("tp {tp} x pp {pp} x cp {cp} x dp {dp} = {world} is not the GPU count {gpus}"),
            if gpus.is_multiple_of(model_parallel) {
                format!("leave dp unset (it becomes {}) or change --gpus", gpus / model_parallel)
            } else {
                format!("tp x pp x cp = {model_parallel} must divide the {gpus} GPUs")
            },
        );
    }
    check_divides(collector, "plan.tp", tp, "num_attention_heads", model.num_attention_heads());
    check_divides(collector, "plan.tp", tp, "num_kv_heads", model.num_kv_heads());
    mixer_rules::check(collector, model, gpu, (tp, tp_ok), (cp, cp_ok));
    let pipeline_split = spec.pipeline_split.unwrap_or(PipelineSplit::Even);
    let split_layers = match pipeline_split {
        PipelineSplit::Even | PipelineSplit::Balanced => model.num_layers(),
        PipelineSplit::EmbeddingAndLoss => model.num_layers() + 2,
    };
    let balanced_hint = "or --pipeline-split balanced (an uneven layout)";
    if !pipeline {
        // pp or vp is a stand-in: the layer split is checked once they are accepted.
    } else if pipeline_split == PipelineSplit::EmbeddingAndLoss && pp == 1 {
        collector.add(
            "plan.pipeline_split",
            "embedding-and-loss",
            "needs pipeline parallelism (pp > 1)",
            "drop --pipeline-split or raise --pp",
        );
    } else if pipeline_split == PipelineSplit::Balanced {
        if split_layers < pp * vp {
            collector.add(
                "plan.pp",
                pp,
                format!("pp {pp} x vp {vp} chunks exceed the {split_layers} layers"),
                "every pipeline chunk needs at least one layer",
            );
        }
    } else if split_layers % pp != 0 {
        let hint = if (model.num_layers() + 2).is_multiple_of(pp) {
            "pick a divisor, or --pipeline-split embedding-and-loss (the embedding and loss count as layers)".to_owned()
        } else {
            format!("pick a divisor of {split_layers}, {balanced_hint}")
        };
        collector.add(
            "plan.pp",
            pp,
            format!("does not divide the {split_layers} layers to split"),
            hint,
        );
    }
    if pipeline && vp > 1 {
        if pp == 1 {
            collector.add(
                "plan.vp",
                vp,
                "needs pipeline parallelism (pp > 1)",
                "set --vp 1 or raise --pp",
            );
        } else if pipeline_split != PipelineSplit::Balanced
            && split_layers % pp == 0
            && split_layers % (pp * vp) != 0
        {
            collector.add(
                "plan.vp",
                vp,
                format!("pp {pp} x vp {vp} does not divide the {split_layers} layers to split"),
                format!(
                    "each virtual stage needs the same whole number of layers, {balanced_hint}"
                ),
            );
        }
    }
    let domain = cluster.map_or(8, |cluster| cluster.interconnect().nvlink_domain());
    let (cp_comm, cp_a2a) =
        context_parallel_rules::validate_cp_comm(collector, spec, model, tp, cp, domain);
    if cp_ok && accepted.training && cp > 1 && !training.seq_len.is_multiple_of(2 * cp) {
        collector.add(
            "plan.cp",
            cp,
            format!("2 x cp does not divide seq_len {}", training.seq_len),
            "causal load balancing splits each sequence into 2 x cp chunks",
        );
    }
    let per_step = training.micro_batch * dp;
    let num_microbatches = (training.global_batch / per_step.max(1)).max(1);
    // One forward and one backward task per micro-batch, stage and chunk: bounded so that the
    // simulated step stays seconds of work (the sizes are bounded, so the product is exact).
    let tasks = num_microbatches * pp * vp * 2;
    if batch && tasks > limits::SIMULATED_TASKS {
        collector.add(
            "training.global_batch",
            training.global_batch,
            format!(
                "gives {num_microbatches} micro-batches x pp {pp} x vp {vp} x 2 = {tasks} tasks \
                 per step, over the {} meshplan simulates",
                limits::SIMULATED_TASKS
            ),
            "raise --micro-batch or dp, or lower pp x vp",
        );
    }
    let schedule = validate_schedule(
        collector,
        spec,
        pipeline.then_some((pp, vp)),
        batch.then_some(num_microbatches),
    );
    if batch && !training.global_batch.is_multiple_of(per_step) {
        collector.add(
            "training.global_batch",
            training.global_batch,
            format!(
                "is not a multiple of micro_batch {} x dp {dp} = {per_step}",
                training.micro_batch
            ),
            format!("use a multiple of {per_step}, or change --micro-batch / the plan"),
        );
    }
    let precision = training.precision;
    if let Some(gpu) = gpu {
        if gpu.peak(precision.gemm_class()).is_none() {
            collector.add(
                "training.precision",
                precision.name(),
                format!("{} has no tensor cores for this precision", gpu.display_name()),
                "use bf16 (or fp16) on this GPU",
            );
        } else if precision.needs_block_scaling() && !gpu.block_scaled() {
            collector.add(
                "training.precision",
                precision.name(),
                format!("{} has no hardware MX block scaling", gpu.display_name()),
                "use fp8-blockwise or fp8-current on Hopper, mxfp8/nvfp4 need Blackwell",
            );
        }
    }
    let (sharding, fsdp) = sharding(collector, spec);
    let shard_group = match spec.hybrid_shard {
        None => dp,
        Some(group) if group > 0 && dp.is_multiple_of(group as u64) => group as u64,
        // A stand-in dp says nothing about the group (dp's own bound is reported).
        Some(group) if group > 0 && !dp_known => dp,
        Some(group) => {
            collector.add(
                "plan.hybrid_shard",
                group,
                format!("must be a positive divisor of dp {dp}"),
                "shard inside groups of this many DP ranks, e.g. the GPUs of one node",
            );
            dp
        }
    };
    let recompute = spec.recompute.unwrap_or(RecomputeKind::None);
    if recompute == RecomputeKind::Op && model.hybrid().is_some() {
        collector.add(
            "plan.recompute",
            "op",
            "per-op checkpointing of a hybrid model is not modelled",
            "use none, selective or full",
        );
    }
    let layers_per_stage = split_layers.div_ceil(pp.max(1));
    let recompute_num_layers = match (recompute, spec.recompute_num_layers) {
        (RecomputeKind::Full, Some(n)) if n >= 0 && n as u64 <= layers_per_stage => n as u64,
        (RecomputeKind::Full, Some(n)) if n >= 0 && !pp_ok => layers_per_stage,
        (RecomputeKind::Full, Some(n)) => {
            collector.add(
                "plan.recompute_num_layers",
                n,
                format!("must be between 0 and the {layers_per_stage} layers of a pipeline stage"),
                "leave it unset to recompute every layer",
            );
            layers_per_stage
        }
        (RecomputeKind::Full, None) => layers_per_stage,
        (_, Some(n)) => {
            collector.add(
                "plan.recompute_num_layers",
                n,
                "applies only to full recompute",
                "add --recompute full or drop --recompute-num-layers",
            );
            0
        }
        (_, None) => 0,
    };
    let recompute_modules = validate_recompute_modules(collector, spec, recompute, model);
    let offload_activation_layers = validate_offload(collector, spec, layers_per_stage);
    if offload_activation_layers > 0
        && cluster.is_some_and(|cluster| cluster.interconnect().host_bandwidth().is_none())
    {
        collector.add(
            "plan.offload_activation_layers",
            offload_activation_layers,
            "the GPU's file states no host link to offload over",
            "add interconnect.host_bandwidth and host_efficiency to the GPU file, or drop the offload",
        );
    }
    let bf16_layers = validate_bf16_layers(collector, spec, precision, model, layers_per_stage);
    let sizes = (tp_ok && cp_ok && dp_known).then_some(StageSizes { tp, cp, dp });
    let experts = validate_experts(collector, spec, model, sizes, tp, schedule, layout);
    let balance_window = super::data::validate_balance_window(collector, spec.balance_window);
    Some(Plan {
        tp,
        pp,
        vp,
        dp,
        cp,
        cp_comm,
        cp_a2a,
        pipeline_split,
        schedule,
        // `run::with_stack_defaults` has set it from the stack where the plan does not.
        sequence_parallel: tp > 1 && spec.sequence_parallel.unwrap_or(true),
        sharding,
        fsdp,
        shard_group,
        reshard_after_forward: spec.fsdp_reshard_after_forward.unwrap_or(pp == 1),
        recompute,
        recompute_num_layers,
        recompute_modules,
        offload_activation_layers,
        bf16_layers,
        overlap_grad_reduce: spec.overlap_grad_reduce.unwrap_or(true),
        // Follows the gradient-reduce overlap unless set: Megatron-LM accepts the parameter
        // gather overlap only together with it.
        overlap_param_gather: spec
            .overlap_param_gather
            .unwrap_or(spec.overlap_grad_reduce.unwrap_or(true)),
        tp_comm_overlap: tp > 1 && spec.tp_comm_overlap.unwrap_or(false),
        grad_reduce_in_fp32: spec.grad_reduce_in_fp32.unwrap_or(true),
        adam_moments: spec.adam_moments.unwrap_or(AdamMoments::Fp32),
        num_microbatches,
        ep: experts.ep,
        etp: experts.etp,
        expert_comm_overlap: experts.comm_overlap,
        expert_dispatch: spec.expert_dispatch.unwrap_or(ExpertDispatch::AllToAll),
        moe_imbalance: experts.imbalance,
        balance_window,
        hybrid_cp: context_parallel_rules::validate_hybrid_cp(
            collector,
            spec,
            HybridCpInputs {
                known: model_parallel_ok && dp_known && accepted.training,
                pp,
                dp,
                cp,
                cp_comm,
                balance_window,
                training,
            },
        ),
        variable_micro_batches: spec.variable_micro_batches.unwrap_or(false),
        moe_capacity_factor: experts.capacity_factor,
        engine: spec.engine.unwrap_or(Engine::DEFAULT),
    })
}

fn validate_schedule(
    collector: &mut Collector,
    spec: &PlanSpec,
    sizes: Option<(u64, u64)>,
    microbatches: Option<u64>,
) -> PipelineSchedule {
    let (pp, vp) = sizes.unwrap_or((1, 1));
    let default = if vp > 1 { PipelineSchedule::Interleaved } else { PipelineSchedule::OneFOneB };
    let schedule = spec.schedule.unwrap_or(default);
    if sizes.is_none() {
        // pp or vp is a stand-in for a refused value: the schedule is checked once they are not.
        return schedule;
    }
    let name = schedule.name();
    // The micro-batch count is unknown when the batch or a parallel size was refused.
    let (known, microbatches) = (microbatches.is_some(), microbatches.unwrap_or(0));
    match schedule {
        PipelineSchedule::Interleaved if vp == 1 => collector.add(
            "plan.schedule",
            name,
            "needs virtual pipeline chunks (vp > 1)",
            "raise --vp, or use --schedule 1f1b",
        ),
        PipelineSchedule::Interleaved if known && !microbatches.is_multiple_of(pp) => {
            collector.add(
            "plan.schedule",
            name,
            format!("runs micro-batches in groups of pp, but {microbatches} micro-batches do not divide by pp {pp}"),
            "make global batch / (micro batch x dp) a multiple of pp, as Megatron-LM's interleaved schedule requires",
            )
        }
        PipelineSchedule::Gpipe | PipelineSchedule::OneFOneB | PipelineSchedule::ZeroBubble
            if vp > 1 =>
        {
            collector.add(
                "plan.schedule",
                name,
                format!("runs one chunk per rank, but vp is {vp}"),
                "use --schedule interleaved, or --vp 1",
            )
        }
        PipelineSchedule::Dualpipe if vp > 1 => collector.add(
            "plan.schedule",
            name,
            "places two stages on every rank itself; vp must be 1",
            "drop --vp",
        ),
        PipelineSchedule::Dualpipe
            if known
                && (!pp.is_multiple_of(2)
                    || !microbatches.is_multiple_of(2)
                    || microbatches < 2 * pp) =>
        {
            collector.add(
                "plan.schedule",
                name,
                format!("needs an even pp and an even number of micro-batches >= 2 x pp (pp {pp}, {microbatches} micro-batches)"),
                "DualPipe feeds half the micro-batches from each end; raise the global batch or change pp",
            )
        }
        _ => {}
    }
    schedule
}

fn sharding(collector: &mut Collector, spec: &PlanSpec) -> (Sharding, bool) {
    if spec.fsdp.unwrap_or(false) {
        if let Some(stage) = spec.zero {
            collector.add(
                "plan.zero",
                stage,
                "cannot be combined with --fsdp",
                "FSDP full shard is ZeRO-3 and grad-op shard is ZeRO-2: pick one of the two flags",
            );
        }
        let sharding = match spec.fsdp_mode.unwrap_or(FsdpMode::Full) {
            FsdpMode::Full => Sharding::Full,
            FsdpMode::GradOp => Sharding::OptimizerAndGradients,
        };
        return (sharding, true);
    }
    if spec.fsdp_mode.is_some() || spec.hybrid_shard.is_some() {
        collector.add("plan.fsdp", "false", "fsdp_mode and hybrid_shard need FSDP", "add --fsdp");
    }
    let sharding = match spec.zero.unwrap_or(1) {
        0 => Sharding::None,
        1 => Sharding::Optimizer,
        2 => Sharding::OptimizerAndGradients,
        3 => Sharding::Full,
        other => {
            collector.add("plan.zero", other, ZERO_STAGES, "ZeRO stages are 0 (off) to 3");
            Sharding::Optimizer
        }
    };
    (sharding, false)
}

/// The modules a selective recompute reruns: Megatron-LM's default (the attention core) unless
/// listed; a list needs selective recompute, and each module must exist in the model.
fn validate_recompute_modules(
    collector: &mut Collector,
    spec: &PlanSpec,
    recompute: RecomputeKind,
    model: &Model,
) -> RecomputeModules {
    let Some(listed) = &spec.recompute_modules else {
        return if recompute == RecomputeKind::Selective {
            RecomputeModules::DEFAULT_SELECTIVE
        } else {
            RecomputeModules::NONE
        };
    };
    let modules = RecomputeModules::of(listed);
    if recompute != RecomputeKind::Selective {
        collector.add(
            "plan.recompute_modules",
            modules.names(),
            "applies only to selective recompute",
            "add --recompute selective or drop --recompute-modules",
        );
        return RecomputeModules::NONE;
    }
    if modules.is_empty() {
        collector.add(
            "plan.recompute_modules",
            "[]",
            "names no module",
            "list at least one, e.g. core_attn, or drop it for the default",
        );
    }
    let moe = model.moe();
    for module in modules.to_vec() {
        let missing = match module {
            RecomputeModule::MlaUpProj => model.mla().is_none().then_some("latent attention (MLA)"),
            RecomputeModule::Moe | RecomputeModule::MoeAct => moe.is_none().then_some("MoE layers"),
            RecomputeModule::SharedExperts => {
                moe.is_none_or(|moe| moe.shared_ffn_hidden_size == 0).then_some("shared experts")
            }
            RecomputeModule::Mlp => match model.hybrid() {
                Some(hybrid) => {
                    let counts = hybrid.counts();
                    let mlps =
                        [crate::model::Sublayer::Mlp, crate::model::Sublayer::ParallelHybrid]
                            .map(|kind| counts[kind.index()]);
                    (mlps == [0, 0]).then_some("dense-MLP layers")
                }
                None => (moe.is_some() && model.dense_layers() == 0).then_some("dense-MLP layers"),
            },
            RecomputeModule::CoreAttn | RecomputeModule::Layernorm => None,
        };
        if let Some(missing) = missing {
            collector.add(
                "plan.recompute_modules",
                module.name(),
                format!("the model has no {missing}"),
                "drop this module from the list",
            );
        }
    }
    modules
}

/// Layers kept in BF16 at each end of the model under a low-precision recipe: each at most the
/// layers of a pipeline stage (Megatron-Core's `TransformerConfig` check), together at most the
/// model's layers, and only where the recipe is not BF16 (or FP16) already.
fn validate_bf16_layers(
    collector: &mut Collector,
    spec: &PlanSpec,
    precision: Precision,
    model: &Model,
    layers_per_stage: u64,
) -> (u64, u64) {
    let mut count = |field: &str, value: Option<i64>| match value {
        None | Some(0) => 0,
        Some(n) if !precision.is_low_precision() => {
            collector.add(
                format!("plan.{field}"),
                n,
                format!("keeps layers in BF16, but the run trains in {} already", precision.name()),
                "drop it, or train in fp8 / mxfp8 / nvfp4",
            );
            0
        }
        Some(n) if n > 0 && (n as u64) <= layers_per_stage.max(1) => n as u64,
        Some(n) => {
            collector.add(
                format!("plan.{field}"),
                n,
                format!("must be between 0 and the {layers_per_stage} layers of a pipeline stage"),
                "keep fewer layers in BF16, or use fewer pipeline stages",
            );
            0
        }
    };
    let start = count("bf16_layers_at_start", spec.bf16_layers_at_start);
    let end = count("bf16_layers_at_end", spec.bf16_layers_at_end);
    let layers = model.num_layers();
    if start + end > layers {
        collector.add(
            "plan.bf16_layers_at_end",
            end,
            format!("with {start} at the start, exceeds the model's {layers} layers"),
            "keep fewer layers in BF16",
        );
        return (0, 0);
    }
    (start, end)
}

/// Layers per pipeline rank whose activations go to host memory: fewer than the rank's layers
/// (Megatron-LM keeps the last one on the GPU, whose backward starts at once).
fn validate_offload(collector: &mut Collector, spec: &PlanSpec, layers_per_stage: u64) -> u64 {
    match spec.offload_activation_layers {
        None => 0,
        Some(n) if n >= 0 && (n as u64) < layers_per_stage.max(1) => n as u64,
        Some(n) => {
            collector.add(
                "plan.offload_activation_layers",
                n,
                format!(
                    "must be between 0 and {}, fewer than the {layers_per_stage} layers of a pipeline rank",
                    layers_per_stage.saturating_sub(1)
                ),
                "offload fewer layers, or use more pipeline stages",
            );
            0
        }
    }
}

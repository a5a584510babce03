//! Feeds a structured plan (a preset model and GPU, a GPU count, the training setup and every
//! `PlanSpec` option, small values most of the time and any `i64`/`f64` some of the time) to
//! `Run::from_spec_with_stack` (the presets and stacks are read once, as a search reads them
//! once: parsing their TOML for every input took most of the run's time), and every run that
//! validates to `estimate_simulated_with` (no timeline) when
//! its step has at most `SIMULATED` tasks, else to the closed form (a step of millions of tasks
//! takes seconds to simulate, which held the target at ~100 executions a second; the bound on
//! the tasks is `Run::from_spec`'s and is fuzzed either way); asserts no panic, and that every
//! memory and time figure is finite and non-negative, the step time positive, throughput finite
//! and positive, and MFU and HFU at most 100 % (`Estimate::check_figures`, what the CLI checks).
//! Every such run also goes through each engine's capability table (`export::check`, with its
//! sequence-parallel, context-parallel and key/value-head rules) and, where that accepts it, the
//! engine's exporter: no panic, and every refusal says something. And its stack's performance
//! recipe is taken as `--recipe` takes it (`cli::recipe::take`): the run with it validates or
//! not without a panic, its closed form passes the same checks, and a recipe that cannot be
//! taken says why.
#![no_main]

use std::sync::{Arc, OnceLock};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use meshplan::estimate::{closed_form, estimate_simulated_with};
use meshplan::export;
use meshplan::hardware::{ClusterSpec, GpuSpec};
use meshplan::model::ModelSpec;
use meshplan::plan::{
    AdamMoments, CpComm, Engine, ExpertDispatch, FsdpMode, HybridCpScheduler, PipelineSchedule,
    PipelineSplit, PlanSpec, Precision, RecomputeKind, RecomputeModule, TrainingSpec,
};
use meshplan::presets::StackCatalog;
use meshplan::sim::SimOptions;
use meshplan::stack::Stack;
use meshplan::{Run, RunSpec, presets};

/// A count: mostly a power of two or a small number, sometimes anything.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Count {
    Pow2(u8),
    Small(u8),
    Any(i64),
}

impl Count {
    fn value(self) -> i64 {
        match self {
            Count::Pow2(shift) => 1 << (shift % 12),
            Count::Small(n) => i64::from(n),
            Count::Any(n) => n,
        }
    }
}

/// A ratio: mostly near 1, sometimes any `f64` (NaN and infinities included).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ratio {
    Near(u8),
    Any(f64),
}

impl Ratio {
    fn value(self) -> f64 {
        match self {
            Ratio::Near(n) => 1.0 + f64::from(n) / 64.0,
            Ratio::Any(x) => x,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    model: u8,
    gpu: u8,
    num_gpus: Count,
    seq_len: Count,
    /// Micro-batches per step: global batch = mbs x dp x this (when dp is given), or `global_batch`.
    micro_batches: Option<u8>,
    global_batch: Count,
    micro_batch: Option<Count>,
    precision: Option<u8>,
    tp: Option<Count>,
    pp: Option<Count>,
    vp: Option<Count>,
    dp: Option<Count>,
    cp: Option<Count>,
    cp_comm: Option<u8>,
    pipeline_split: Option<u8>,
    schedule: Option<u8>,
    sequence_parallel: Option<bool>,
    zero: Option<Count>,
    fsdp: Option<bool>,
    fsdp_mode: Option<bool>,
    hybrid_shard: Option<Count>,
    fsdp_reshard_after_forward: Option<bool>,
    recompute: Option<u8>,
    recompute_num_layers: Option<Count>,
    recompute_modules: Option<Vec<u8>>,
    offload_activation_layers: Option<Count>,
    bf16_layers_at_start: Option<Count>,
    bf16_layers_at_end: Option<Count>,
    overlap_grad_reduce: Option<bool>,
    overlap_param_gather: Option<bool>,
    tp_comm_overlap: Option<bool>,
    adam_moments: Option<bool>,
    grad_reduce_in_fp32: Option<bool>,
    ep: Option<Count>,
    etp: Option<Count>,
    expert_dispatch: Option<bool>,
    expert_comm_overlap: Option<bool>,
    moe_imbalance: Option<Ratio>,
    moe_capacity_factor: Option<Ratio>,
    engine: Option<u8>,
    /// A built-in software stack (often one of another engine than the plan's).
    stack: Option<u8>,
    /// Global batches re-packed together (refused without data, which this target never gives).
    balance_window: Option<Count>,
    /// Per-document CP groups (refused without data, which this target never gives).
    hybrid_cp: Option<bool>,
    /// Variable micro-batches (refused without data likewise).
    variable_micro_batches: Option<bool>,
    max_seqlen_per_rank: Option<Count>,
    hybrid_cp_scheduler: Option<bool>,
}

fn pick<T: Copy>(all: &[T], index: u8) -> T {
    all[usize::from(index) % all.len()]
}

/// Every preset model and GPU, and the built-in stacks, read once for the whole run.
struct Presets {
    models: Vec<ModelSpec>,
    gpus: Vec<GpuSpec>,
    stacks: StackCatalog,
}

static PRESETS: OnceLock<Presets> = OnceLock::new();

fn presets() -> &'static Presets {
    PRESETS.get_or_init(|| Presets {
        models: presets::MODELS.iter().map(|f| presets::model(f.name).unwrap()).collect(),
        gpus: presets::GPUS.iter().map(|f| presets::gpu(f.name).unwrap()).collect(),
        stacks: StackCatalog::builtin().expect("the built-in stacks read"),
    })
}

/// The stack the run is validated with: the one the plan names, else its engine's default.
fn stack_of(spec: &RunSpec) -> Arc<Stack> {
    let id = presets::plan_stack_id(&spec.plan);
    Arc::clone(presets().stacks.get(&id).expect("a built-in stack"))
}

fn spec(input: &Input) -> RunSpec {
    let presets_read = presets();
    let model = &presets_read.models[usize::from(input.model) % presets_read.models.len()];
    let gpu = &presets_read.gpus[usize::from(input.gpu) % presets_read.gpus.len()];
    let count = |c: Option<Count>| c.map(Count::value);
    let micro_batch = count(input.micro_batch);
    let global_batch = match (input.micro_batches, input.dp) {
        (Some(m), Some(dp)) => {
            micro_batch.unwrap_or(1).saturating_mul(dp.value()).saturating_mul(i64::from(m))
        }
        _ => input.global_batch.value(),
    };
    RunSpec {
        model: model.clone(),
        cluster: ClusterSpec { gpu: gpu.clone(), num_gpus: input.num_gpus.value() },
        training: TrainingSpec {
            seq_len: input.seq_len.value(),
            global_batch,
            micro_batch,
            precision: input.precision.map(|i| pick(&Precision::ALL, i)),
        },
        plan: PlanSpec {
            tp: count(input.tp),
            pp: count(input.pp),
            vp: count(input.vp),
            dp: count(input.dp),
            cp: count(input.cp),
            cp_comm: input.cp_comm.map(|i| pick(&CpComm::ALL, i)),
            pipeline_split: input.pipeline_split.map(|i| {
                pick(
                    &[
                        PipelineSplit::Even,
                        PipelineSplit::EmbeddingAndLoss,
                        PipelineSplit::Balanced,
                    ],
                    i,
                )
            }),
            schedule: input.schedule.map(|i| pick(&PipelineSchedule::ALL, i)),
            sequence_parallel: input.sequence_parallel,
            zero: count(input.zero),
            fsdp: input.fsdp,
            fsdp_mode: input.fsdp_mode.map(|b| if b { FsdpMode::Full } else { FsdpMode::GradOp }),
            hybrid_shard: count(input.hybrid_shard),
            fsdp_reshard_after_forward: input.fsdp_reshard_after_forward,
            recompute: input.recompute.map(|i| {
                pick(
                    &[
                        RecomputeKind::None,
                        RecomputeKind::Selective,
                        RecomputeKind::Full,
                        RecomputeKind::Op,
                    ],
                    i,
                )
            }),
            recompute_num_layers: count(input.recompute_num_layers),
            recompute_modules: input.recompute_modules.as_ref().map(|modules| {
                modules.iter().take(8).map(|i| pick(&RecomputeModule::ALL, *i)).collect()
            }),
            offload_activation_layers: count(input.offload_activation_layers),
            bf16_layers_at_start: count(input.bf16_layers_at_start),
            bf16_layers_at_end: count(input.bf16_layers_at_end),
            overlap_grad_reduce: input.overlap_grad_reduce,
            overlap_param_gather: input.overlap_param_gather,
            tp_comm_overlap: input.tp_comm_overlap,
            adam_moments: input
                .adam_moments
                .map(|b| if b { AdamMoments::Fp32 } else { AdamMoments::Bf16 }),
            grad_reduce_in_fp32: input.grad_reduce_in_fp32,
            ep: count(input.ep),
            etp: count(input.etp),
            expert_dispatch: input
                .expert_dispatch
                .map(|b| if b { ExpertDispatch::AllToAll } else { ExpertDispatch::Deduplicated }),
            expert_comm_overlap: input.expert_comm_overlap,
            moe_imbalance: input.moe_imbalance.map(Ratio::value),
            moe_capacity_factor: input.moe_capacity_factor.map(Ratio::value),
            engine: input.engine.map(|i| pick(&Engine::ALL, i)),
            stack: input.stack.map(|i| pick(presets::STACKS, i).name.to_owned()),
            balance_window: count(input.balance_window),
            hybrid_cp: input.hybrid_cp,
            max_seqlen_per_rank: count(input.max_seqlen_per_rank),
            hybrid_cp_scheduler: input
                .hybrid_cp_scheduler
                .map(|b| if b { HybridCpScheduler::Megatron } else { HybridCpScheduler::ByWork }),
            variable_micro_batches: input.variable_micro_batches,
        },
        data: None,
    }
}

/// The most tasks (micro-batches x pp x vp x 2) of a step the target simulates.
const SIMULATED: u64 = 1 << 14;

fn non_negative(what: &str, value: f64) {
    assert!(value.is_finite() && value >= 0.0, "{what} = {value}");
}

fuzz_target!(|input: Input| {
    let spec = spec(&input);
    let Ok(run) = Run::from_spec_with_stack(&spec, stack_of(&spec)) else { return };
    for engine in Engine::ALL {
        match export::check(engine, &run) {
            Ok(()) => {
                let _ = export::export(engine, &run);
            }
            Err(unsupported) => assert!(!unsupported.to_string().is_empty(), "{engine:?}"),
        }
    }
    match meshplan::cli::recipe::take(&spec, &presets().stacks) {
        Ok(Some(taken)) => {
            assert!(!taken.note.is_empty());
            if let Ok(with) = Run::from_spec_with_stack(&taken.spec, taken.stack) {
                if let Err(err) = closed_form(&with).check_figures() {
                    panic!("with the recipe: {err} ({})", with.plan().label());
                }
            }
        }
        Ok(None) => {}
        Err(problems) => assert!(problems.list().iter().all(|p| !p.to_string().is_empty())),
    }
    let plan = run.plan();
    let tasks = plan.num_microbatches() * plan.pp() * plan.vp() * 2;
    let estimate = if tasks <= SIMULATED {
        let Ok((estimate, _)) = estimate_simulated_with(&run, SimOptions { timeline: false })
        else {
            return;
        };
        estimate
    } else {
        closed_form(&run)
    };
    if let Err(err) = estimate.check_figures() {
        panic!(
            "{err} ({:?} on {}, {})",
            run.training().precision(),
            run.cluster().gpu().name(),
            plan.label()
        );
    }
    // `check_figures` covers every memory part, time part, throughput and utilization; what
    // it does not see: the capacity, and the throughput taken over the step it reports.
    non_negative("memory capacity", estimate.memory_capacity.value());
    let step = estimate.time.step_time();
    assert!(estimate.throughput.step_time == step, "throughput's step vs {step:?}");
});

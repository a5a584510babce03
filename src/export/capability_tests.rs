//! Tests of the engines' capability table (`capability.rs`): each refusal, and what the
//! exporters write where the table accepts a plan.

use super::capability::*;
use super::{Engine, Refusal};
use crate::export::{check, export};
use crate::hardware::ClusterSpec;
use crate::plan::{
    AdamMoments, CpComm, PipelineSchedule, PipelineSplit, Precision, RecomputeKind, Sharding,
};
use crate::plan::{PlanSpec, TrainingSpec};
use crate::run::Run;
use crate::run::RunSpec;

#[test]
fn a_stack_never_defaults_to_what_its_engine_lacks() {
    let stacks = crate::presets::StackCatalog::builtin().unwrap();
    for stack in stacks.all() {
        let Some(engine) = stack.engine() else { continue };
        let (defaults, caps) = (stack.defaults(), engine.capabilities());
        assert!(!defaults.tp_comm_overlap || caps.tp_comm_overlap, "{}", stack.id());
        if let Some(kind @ (RecomputeKind::Selective | RecomputeKind::Op)) =
            defaults.recompute.kind()
        {
            assert_eq!(Some(kind), caps.selective_recompute, "{}", stack.id());
        }
        for precision in std::iter::once(defaults.precision).chain(defaults.fp8) {
            assert!(caps.precisions.contains(&precision), "{} {precision:?}", stack.id());
        }
    }
}

#[test]
fn torchtitan_runs_checkpoint_per_op_and_leave_async_tp_off_as_its_config_does() {
    let stack = crate::presets::stack("torchtitan-2024-12").unwrap();
    let caps = Engine::Torchtitan.capabilities();
    assert_eq!(stack.defaults().recompute.kind(), caps.selective_recompute);
    // Off by the published default, though the engine has it.
    assert!(caps.tp_comm_overlap && !stack.defaults().tp_comm_overlap);
}

fn run(gpus: i64, precision: Precision, plan: PlanSpec) -> Run {
    Run::from_spec(&RunSpec {
        model: crate::presets::model("llama3.1-8b").unwrap(),
        cluster: ClusterSpec { gpu: crate::presets::gpu("h100-sxm").unwrap(), num_gpus: gpus },
        training: TrainingSpec {
            seq_len: 4096,
            global_batch: 32,
            micro_batch: Some(1),
            precision: Some(precision),
        },
        plan,
        data: None,
    })
    .unwrap()
}

/// ZeRO-1, the attention-core recompute, ZB-H1, Ulysses CP, a balanced split, bf16
/// gradient reduction and delayed-scaling FP8 in one plan.
fn troubled() -> Run {
    let plan = PlanSpec {
        tp: Some(2),
        pp: Some(4),
        cp: Some(2),
        cp_comm: Some(CpComm::AllToAll),
        schedule: Some(PipelineSchedule::ZeroBubble),
        pipeline_split: Some(PipelineSplit::Balanced),
        zero: Some(1),
        recompute: Some(RecomputeKind::Selective),
        grad_reduce_in_fp32: Some(false),
        ..PlanSpec::default()
    };
    run(32, Precision::Fp8Delayed, plan)
}

#[test]
fn bf16_adam_moments_run_on_megatron_only_and_export_its_flags() {
    let plan = PlanSpec { adam_moments: Some(AdamMoments::Bf16), ..PlanSpec::default() };
    let run = run(8, Precision::Bf16, plan);
    let args = export(Engine::Megatron, &run).unwrap();
    assert!(args.contains("--use-precision-aware-optimizer\n--exp-avg-dtype bf16"), "{args}");
    for engine in [Engine::Torchtitan, Engine::Deepspeed] {
        let refused = check(engine, &run).unwrap_err().refusals;
        assert!(
            refused.contains(&Refusal::AdamMoments { moments: AdamMoments::Bf16 }),
            "{engine:?}: {refused:?}"
        );
    }
}

#[test]
fn a_plan_with_several_problems_gets_every_refusal() {
    let run = troubled();
    assert_eq!(
        refusals(Engine::Torchtitan, &run),
        [
            Refusal::Schedule {
                engine: Engine::Torchtitan,
                schedule: PipelineSchedule::ZeroBubble
            },
            Refusal::Sharding { sharding: Sharding::Optimizer },
            Refusal::Bf16GradReduce,
            Refusal::RecomputeKind {
                kind: RecomputeKind::Selective,
                runs: Some(RecomputeKind::Op)
            },
            Refusal::CpComm {
                engine: Engine::Torchtitan,
                comm: CpComm::AllToAll,
                instead: CpComm::Ring
            },
            Refusal::BalancedSplit { engine: Engine::Torchtitan },
            Refusal::Precision { engine: Engine::Torchtitan, precision: Precision::Fp8Delayed },
        ]
    );
    assert_eq!(
        refusals(Engine::Deepspeed, &run),
        [
            Refusal::Schedule { engine: Engine::Deepspeed, schedule: PipelineSchedule::ZeroBubble },
            Refusal::SequenceParallel { runs: SequenceParallel::Never },
            Refusal::RecomputeKind { kind: RecomputeKind::Selective, runs: None },
            Refusal::ContextParallelWithModelParallel { engine: Engine::Deepspeed, tp: 2, pp: 4 },
            Refusal::BalancedSplit { engine: Engine::Deepspeed },
            Refusal::Precision { engine: Engine::Deepspeed, precision: Precision::Fp8Delayed },
        ]
    );
    assert_eq!(
        refusals(Engine::Megatron, &run),
        [Refusal::Schedule { engine: Engine::Megatron, schedule: PipelineSchedule::ZeroBubble }]
    );
    // The error lists them all, each saying what to change.
    let err = check(Engine::Torchtitan, &run).unwrap_err().to_string();
    assert!(err.starts_with("torchtitan cannot run this plan: 7 reasons\n  1. "), "{err}");
    assert!(err.contains("\n  7. its low-precision recipes"), "{err}");
    assert!(err.contains("use --schedule gpipe or 1f1b or interleaved"), "{err}");
    assert!(err.contains("use --cp-comm ring"), "{err}");
    assert!(export(Engine::Torchtitan, &run).is_err());
}

#[test]
fn one_refusal_reads_as_one_sentence() {
    let err = check(Engine::Megatron, &troubled()).unwrap_err().to_string();
    assert_eq!(
        err,
        "megatron cannot run this plan: its pipeline schedules are 1F1B and interleaved 1F1B, \
         not zero-bubble; use --schedule 1f1b or interleaved"
    );
}

#[test]
fn tp_comm_overlap_is_exported_exactly_where_the_table_has_it() {
    for engine in Engine::ALL {
        let caps = engine.capabilities();
        let plan = PlanSpec {
            tp: Some(2),
            fsdp: Some(true),
            tp_comm_overlap: Some(true),
            sequence_parallel: Some(caps.sequence_parallel != SequenceParallel::Never),
            ..PlanSpec::default()
        };
        let run = run(8, Precision::Bf16, plan);
        match export(engine, &run) {
            Ok(text) => {
                assert!(caps.tp_comm_overlap, "{engine:?}");
                let written = match engine {
                    Engine::Megatron => "--tp-comm-overlap",
                    Engine::Torchtitan => "enable_async_tensor_parallel = true",
                    Engine::Deepspeed => unreachable!("DeepSpeed has no TP overlap"),
                };
                assert!(text.contains(written), "{engine:?}: {text}");
            }
            Err(err) => {
                assert!(!caps.tp_comm_overlap, "{engine:?}: {err}");
                assert_eq!(err.refusals, [Refusal::TpCommOverlap]);
            }
        }
    }
}

#[test]
fn deepspeed_runs_ulysses_context_parallelism_beside_zero_only() {
    let plan = |tp: i64, cp_comm: CpComm| PlanSpec {
        tp: Some(tp),
        cp: Some(2),
        cp_comm: Some(cp_comm),
        zero: Some(3),
        sequence_parallel: Some(false),
        ..PlanSpec::default()
    };
    // Llama 3.1 8B at 4096 on 8 GPUs: cp 2 x dp 4, Ulysses' all-to-all of the 32 heads.
    let ulysses = run(8, Precision::Bf16, plan(1, CpComm::AllToAll));
    let json: serde_json::Value =
        serde_json::from_str(&export(Engine::Deepspeed, &ulysses).unwrap()).unwrap();
    assert_eq!(json["sequence_parallel_size"], 2);
    // DeepSpeed's data-parallel ranks are the world over the sequence-parallel size.
    assert_eq!(
        json["train_batch_size"].as_u64().unwrap(),
        json["train_micro_batch_size_per_gpu"].as_u64().unwrap()
            * json["gradient_accumulation_steps"].as_u64().unwrap()
            * 4
    );
    // Without context parallelism the key is absent.
    let plain = run(8, Precision::Bf16, PlanSpec { zero: Some(3), ..PlanSpec::default() });
    let text = export(Engine::Deepspeed, &plain).unwrap();
    assert!(!text.contains("sequence_parallel_size"), "{text}");
    // A ring, or context parallelism beside AutoTP, is not what it runs.
    let ring = run(8, Precision::Bf16, plan(1, CpComm::Ring));
    let refused = refusals(Engine::Deepspeed, &ring);
    let instead = CpComm::AllToAll;
    let ring = Refusal::CpComm { engine: Engine::Deepspeed, comm: CpComm::Ring, instead };
    assert_eq!(refused, [ring]);
    assert!(refused[0].to_string().ends_with("use --cp-comm all-to-all"));
    let with_tp = run(8, Precision::Bf16, plan(2, CpComm::AllToAll));
    assert_eq!(
        refusals(Engine::Deepspeed, &with_tp),
        [Refusal::ContextParallelWithModelParallel { engine: Engine::Deepspeed, tp: 2, pp: 1 }]
    );
    let text = check(Engine::Deepspeed, &with_tp).unwrap_err().to_string();
    assert!(text.ends_with("not with tp 2 or pp 1; use --tp 1 --pp 1, or --cp 1"), "{text}");
    assert!(refusals(Engine::Megatron, &with_tp).is_empty());
    // Nemotron-4 15B's 8 key/value heads over 6 ranks: neither count divides the other, so
    // UlyssesSPAttentionHF refuses it.
    let nemotron = Run::from_spec(&RunSpec {
        model: crate::presets::model("nemotron4-15b").unwrap(),
        cluster: ClusterSpec { gpu: crate::presets::gpu("h100-sxm").unwrap(), num_gpus: 24 },
        training: TrainingSpec {
            seq_len: 6144,
            global_batch: 24,
            micro_batch: Some(1),
            precision: Some(Precision::Bf16),
        },
        plan: PlanSpec { cp: Some(6), ..plan(1, CpComm::AllToAll) },
        data: None,
    })
    .unwrap();
    let refused = refusals(Engine::Deepspeed, &nemotron);
    let rule = UlyssesKvHeads::DivideOrReplicate;
    assert_eq!(refused, [Refusal::UlyssesKeyValueHeads { kv: 8, a2a: 6, rule }]);
    assert!(refused[0].to_string().contains("use a cp that divides 8"));
    // Transformer Engine's all-to-all needs them to divide: Megatron-LM refuses it too.
    let refused = refusals(Engine::Megatron, &nemotron);
    let rule = UlyssesKvHeads::Divide;
    assert_eq!(refused, [Refusal::UlyssesKeyValueHeads { kv: 8, a2a: 6, rule }]);
    let text = refused[0].to_string();
    assert!(text.contains("8 key/value heads over its 6 ranks and needs them to divide"), "{text}");
    assert!(text.ends_with("use a cp (or all-to-all group) that divides 8, or --cp-comm ring"));
}

#[test]
fn sequence_parallelism_is_refused_where_the_engine_shards_otherwise() {
    let refused = |engine: Engine, tp: i64, sequence_parallel: bool| {
        let plan = PlanSpec {
            tp: Some(tp),
            fsdp: Some(true),
            sequence_parallel: Some(sequence_parallel),
            tp_comm_overlap: Some(false),
            ..PlanSpec::default()
        };
        refusals(engine, &run(8, Precision::Bf16, plan))
    };
    // Megatron-LM: as the plan says.
    assert!(refused(Engine::Megatron, 2, true).is_empty());
    assert!(refused(Engine::Megatron, 2, false).is_empty());
    // torchtitan always shards the norms over the sequence with tp; DeepSpeed's AutoTP never.
    let always = [Refusal::SequenceParallel { runs: SequenceParallel::Always }];
    let never = [Refusal::SequenceParallel { runs: SequenceParallel::Never }];
    assert_eq!(refused(Engine::Torchtitan, 2, false), always);
    assert!(refused(Engine::Torchtitan, 2, true).is_empty());
    assert_eq!(refused(Engine::Deepspeed, 2, true), never);
    assert!(refused(Engine::Deepspeed, 2, false).is_empty());
    // Without tensor parallelism there is nothing to shard.
    for engine in Engine::ALL {
        for sequence_parallel in [false, true] {
            assert!(refused(engine, 1, sequence_parallel).is_empty(), "{engine:?}");
        }
    }
    let text = never[0].to_string();
    assert!(text.contains("drop --sequence-parallel"), "{text}");
}

#[test]
fn the_selective_recompute_exported_is_the_tables() {
    for kind in [RecomputeKind::Selective, RecomputeKind::Op] {
        let plan = PlanSpec { fsdp: Some(true), recompute: Some(kind), ..PlanSpec::default() };
        let run = run(8, Precision::Bf16, plan);
        for engine in Engine::ALL {
            let runs = engine.capabilities().selective_recompute == Some(kind);
            match export(engine, &run) {
                Ok(text) => {
                    assert!(runs, "{engine:?} {kind:?}");
                    let written = match engine {
                        Engine::Megatron => "--recompute-granularity selective",
                        Engine::Torchtitan => "selective_ac_option = \"op\"",
                        Engine::Deepspeed => unreachable!("DeepSpeed has no selective kind"),
                    };
                    assert!(text.contains(written), "{engine:?}: {text}");
                }
                Err(err) => assert!(!runs, "{engine:?} {kind:?}: {err}"),
            }
        }
    }
}

#[test]
fn every_schedule_is_refused_exactly_where_the_table_lacks_it() {
    for schedule in PipelineSchedule::ALL {
        let vp = if schedule == PipelineSchedule::Interleaved { 2 } else { 1 };
        let plan =
            PlanSpec { pp: Some(4), vp: Some(vp), schedule: Some(schedule), ..PlanSpec::default() };
        let run = run(8, Precision::Bf16, plan);
        for engine in Engine::ALL {
            let refused = refusals(engine, &run)
                .iter()
                .any(|refusal| matches!(refusal, Refusal::Schedule { .. }));
            let runs = engine.capabilities().schedules.contains(&schedule);
            assert_eq!(refused, !runs, "{engine:?} {schedule:?}");
        }
    }
}

//! Snapshot tests of every exporter for a few plan shapes, and the refusals of plans an engine
//! cannot run.

use meshplan::Run;
use meshplan::export::{Engine, export};
use meshplan::plan::{CpComm, PipelineSplit, PlanSpec, Precision, RecomputeKind};

use crate::support::{preset_run, training};

/// `model` on `gpus` H100s, sequences of 8192, one per micro-batch.
fn run(model: &str, gpus: i64, global_batch: i64, precision: Precision, plan: PlanSpec) -> Run {
    preset_run(model, "h100-sxm", gpus, training(8192, global_batch, 1, Some(precision)), plan)
}

/// Pure FSDP with the engine's selective recompute: the attention core (Megatron-LM) or per-op
/// checkpointing (torchtitan).
fn pure_fsdp_with(recompute: RecomputeKind) -> Run {
    let plan = PlanSpec { fsdp: Some(true), recompute: Some(recompute), ..PlanSpec::default() };
    run("llama3.1-8b", 8, 16, Precision::Bf16, plan)
}

fn pure_fsdp() -> Run {
    pure_fsdp_with(RecomputeKind::Selective)
}

fn tp_pp() -> Run {
    tp_pp_with(true)
}

/// The tp 4 pp 2 plan, with or without sequence parallelism (DeepSpeed's AutoTP has none).
fn tp_pp_with(sequence_parallel: bool) -> Run {
    let plan = PlanSpec {
        tp: Some(4),
        pp: Some(2),
        zero: Some(1),
        recompute: Some(RecomputeKind::Full),
        sequence_parallel: Some(sequence_parallel),
        ..PlanSpec::default()
    };
    run("llama3.1-8b", 16, 32, Precision::Bf16, plan)
}

fn interleaved() -> Run {
    let plan = PlanSpec { tp: Some(8), pp: Some(4), vp: Some(5), ..PlanSpec::default() };
    run("llama3.1-70b", 64, 128, Precision::Fp8Delayed, plan)
}

fn context_parallel() -> Run {
    let plan = PlanSpec {
        tp: Some(8),
        pp: Some(8),
        vp: Some(8),
        cp: Some(2),
        pipeline_split: Some(PipelineSplit::EmbeddingAndLoss),
        tp_comm_overlap: Some(true),
        ..PlanSpec::default()
    };
    run("llama3.1-405b", 1024, 512, Precision::Fp8Blockwise, plan)
}

fn torchtitan_shaped() -> Run {
    let plan = PlanSpec {
        tp: Some(8),
        pp: Some(2),
        vp: Some(2),
        cp: Some(2),
        fsdp: Some(true),
        recompute: Some(RecomputeKind::Full),
        ..PlanSpec::default()
    };
    run("llama3.1-70b", 64, 32, Precision::Fp8Current, plan)
}

/// DeepSeek-V3 with latent attention, MTP, 3 dense layers, 61 layers split unevenly, ep 64 and a
/// hierarchical CP exchange.
fn deepseek_moe() -> Run {
    let plan = PlanSpec {
        tp: Some(2),
        pp: Some(8),
        vp: Some(4),
        cp: Some(8),
        cp_comm: Some(CpComm::Hierarchical),
        ep: Some(64),
        pipeline_split: Some(PipelineSplit::Balanced),
        ..PlanSpec::default()
    };
    run("deepseek-v3", 1024, 512, Precision::Fp8Blockwise, plan)
}

/// Qwen3-30B-A3B under FSDP with ep 8.
fn qwen_moe_fsdp() -> Run {
    let plan = PlanSpec { fsdp: Some(true), ep: Some(8), ..PlanSpec::default() };
    run("qwen3-30b-a3b", 16, 32, Precision::Bf16, plan)
}

/// Mixtral 8x7B with ZeRO-1 and ep 8.
fn mixtral_zero1() -> Run {
    let plan = PlanSpec { zero: Some(1), ep: Some(8), ..PlanSpec::default() };
    run("mixtral-8x7b", 16, 32, Precision::Bf16, plan)
}

#[test]
fn mixture_of_experts_exports() {
    insta::assert_snapshot!(
        "megatron_deepseek_moe",
        export(Engine::Megatron, &deepseek_moe()).unwrap()
    );
    insta::assert_snapshot!(
        "torchtitan_qwen_moe",
        export(Engine::Torchtitan, &qwen_moe_fsdp()).unwrap()
    );
    insta::assert_snapshot!(
        "deepspeed_mixtral_moe",
        export(Engine::Deepspeed, &mixtral_zero1()).unwrap()
    );
    for (engine, reason) in [(Engine::Torchtitan, "ZeRO-1/2"), (Engine::Deepspeed, "1F1B")] {
        let err = export(engine, &deepseek_moe()).unwrap_err().to_string();
        assert!(err.contains(reason), "{engine:?}: {err}");
    }
}

#[test]
fn megatron_arguments() {
    insta::assert_snapshot!("megatron_tp_pp", export(Engine::Megatron, &tp_pp()).unwrap());
    insta::assert_snapshot!(
        "megatron_interleaved",
        export(Engine::Megatron, &interleaved()).unwrap()
    );
    insta::assert_snapshot!(
        "megatron_context_parallel",
        export(Engine::Megatron, &context_parallel()).unwrap()
    );
    insta::assert_snapshot!("megatron_fsdp", export(Engine::Megatron, &pure_fsdp()).unwrap());
}

#[test]
fn torchtitan_job_configs() {
    let per_op = pure_fsdp_with(RecomputeKind::Op);
    insta::assert_snapshot!("torchtitan_fsdp", export(Engine::Torchtitan, &per_op).unwrap());
    insta::assert_snapshot!(
        "torchtitan_tp_pp_cp",
        export(Engine::Torchtitan, &torchtitan_shaped()).unwrap()
    );
}

#[test]
fn deepspeed_configs() {
    let zero3 = run(
        "llama3.1-8b",
        8,
        16,
        Precision::Bf16,
        PlanSpec { zero: Some(3), ..PlanSpec::default() },
    );
    insta::assert_snapshot!("deepspeed_zero3", export(Engine::Deepspeed, &zero3).unwrap());
    let refused = export(Engine::Deepspeed, &pure_fsdp()).unwrap_err().to_string();
    assert!(refused.contains("selective recompute"), "{refused}");
    let refused = export(Engine::Deepspeed, &tp_pp()).unwrap_err().to_string();
    assert!(refused.contains("drop --sequence-parallel"), "{refused}");
    let tp_pp = tp_pp_with(false);
    insta::assert_snapshot!("deepspeed_tp_pp", export(Engine::Deepspeed, &tp_pp).unwrap());
    let json: serde_json::Value =
        serde_json::from_str(&export(Engine::Deepspeed, &tp_pp).unwrap()).unwrap();
    // train_batch_size = micro x accumulation x data-parallel ranks.
    let product = json["train_micro_batch_size_per_gpu"].as_u64().unwrap()
        * json["gradient_accumulation_steps"].as_u64().unwrap()
        * tp_pp.plan().dp();
    assert_eq!(json["train_batch_size"].as_u64().unwrap(), product);
}

#[test]
fn plans_an_engine_cannot_run_are_refused_with_the_reason() {
    let refusals = [
        (Engine::Torchtitan, interleaved(), "ZeRO-1/2"),
        (Engine::Deepspeed, interleaved(), "1F1B"),
        (Engine::Deepspeed, context_parallel(), "1F1B"),
        (Engine::Megatron, torchtitan_shaped(), "pipeline parallelism"),
        (Engine::Torchtitan, context_parallel(), "ZeRO-1/2"),
        (Engine::Torchtitan, pure_fsdp(), "attention core is Megatron-LM's"),
        (
            Engine::Megatron,
            pure_fsdp_with(RecomputeKind::Op),
            "per-op checkpointing is torchtitan's",
        ),
        (Engine::Deepspeed, pure_fsdp_with(RecomputeKind::Op), "selective recompute"),
    ];
    for (engine, run, reason) in refusals {
        let err = export(engine, &run).unwrap_err().to_string();
        assert!(err.contains(reason), "{engine:?}: {err}");
    }
    let zero_bubble = run(
        "llama3.1-8b",
        8,
        16,
        Precision::Bf16,
        PlanSpec {
            pp: Some(4),
            schedule: Some(meshplan::plan::PipelineSchedule::ZeroBubble),
            ..PlanSpec::default()
        },
    );
    for engine in Engine::ALL {
        assert!(export(engine, &zero_bubble).is_err(), "{engine:?} exported ZB-H1");
    }
}

#[test]
fn megatron_overlaps_the_parameter_gather_only_with_the_gradient_reduce() {
    let plan = |reduce: bool, gather: Option<bool>| PlanSpec {
        overlap_grad_reduce: Some(reduce),
        overlap_param_gather: gather,
        ..PlanSpec::default()
    };
    // Unset, the gather overlap follows the reduce overlap.
    let neither = run("llama3.1-8b", 8, 16, Precision::Bf16, plan(false, None));
    let args = export(Engine::Megatron, &neither).unwrap();
    assert!(!args.contains("--overlap-param-gather") && !args.contains("--overlap-grad-reduce"));
    let both = run("llama3.1-8b", 8, 16, Precision::Bf16, plan(true, None));
    let args = export(Engine::Megatron, &both).unwrap();
    assert!(args.contains("--overlap-param-gather") && args.contains("--overlap-grad-reduce"));
    // Megatron-LM asserts "Must use --overlap-param-gather with --overlap-grad-reduce".
    let gather_only = run("llama3.1-8b", 8, 16, Precision::Bf16, plan(false, Some(true)));
    let err = export(Engine::Megatron, &gather_only).unwrap_err().to_string();
    assert!(err.contains("--overlap-param-gather needs --overlap-grad-reduce"), "{err}");
}

#[test]
fn torchtitan_refuses_what_its_trainer_rejects() {
    // Its DDP (no FSDP) raises "DDP has not supported > 1D parallelism" beside tp or pp.
    let ddp_tp_pp = PlanSpec { tp: Some(2), pp: Some(4), zero: Some(0), ..PlanSpec::default() };
    let err = export(Engine::Torchtitan, &run("llama3.1-8b", 16, 32, Precision::Bf16, ddp_tp_pp))
        .unwrap_err()
        .to_string();
    assert!(err.contains("DDP (no FSDP)"), "{err}");
    // Plain data parallelism stays exportable.
    let ddp = PlanSpec { zero: Some(0), ..PlanSpec::default() };
    assert!(export(Engine::Torchtitan, &run("llama3.1-8b", 8, 16, Precision::Bf16, ddp)).is_ok());
    // `training.mixed_precision_reduce` is Literal["float32"] in torchtitan v0.2.2.
    let bf16_reduce =
        PlanSpec { fsdp: Some(true), grad_reduce_in_fp32: Some(false), ..PlanSpec::default() };
    let err = export(Engine::Torchtitan, &run("llama3.1-8b", 8, 16, Precision::Bf16, bf16_reduce))
        .unwrap_err()
        .to_string();
    assert!(err.contains("float32 only"), "{err}");
    // With cp > 1 it applies FSDP over dp_shard x cp whatever the sharding asked for.
    let ddp_cp = PlanSpec { cp: Some(2), zero: Some(0), ..PlanSpec::default() };
    let err = export(Engine::Torchtitan, &run("llama3.1-8b", 8, 16, Precision::Bf16, ddp_cp))
        .unwrap_err()
        .to_string();
    assert!(err.contains("shards parameters over the cp ranks"), "{err}");
}

/// Nemotron 3 Super (LatentMoE, two MTP modules sharing weights) with ep 64, and Nemotron-H 8B
/// (Mamba-2 and dense MLPs) with tp 2.
#[test]
fn hybrid_models_export_their_pattern_for_megatron_and_are_refused_elsewhere() {
    let nemotron_super = run(
        "nemotron-3-super",
        64,
        512,
        Precision::Bf16,
        PlanSpec { ep: Some(64), ..PlanSpec::default() },
    );
    insta::assert_snapshot!(
        "megatron_nemotron_3_super",
        export(Engine::Megatron, &nemotron_super).unwrap()
    );
    let nemotronh = run(
        "nemotronh-8b",
        16,
        64,
        Precision::Bf16,
        PlanSpec { tp: Some(2), fsdp: Some(true), ..PlanSpec::default() },
    );
    let args = export(Engine::Megatron, &nemotronh).unwrap();
    assert!(args.contains("--hybrid-override-pattern \"M-M-M-M*-"), "{args}");
    assert!(args.contains("--mamba-num-heads 128"), "{args}");
    assert!(!args.contains("--num-experts"), "{args}");
    for engine in [Engine::Torchtitan, Engine::Deepspeed] {
        let err = export(engine, &nemotronh).unwrap_err().to_string();
        assert!(err.contains("builds no hybrid"), "{engine:?}: {err}");
    }
    // A balanced split over three stages cuts the pattern where the work balances, written as
    // Megatron-Core's `|` stage boundaries instead of a GPT layout.
    let balanced = PlanSpec {
        pp: Some(3),
        pipeline_split: Some(PipelineSplit::Balanced),
        ..PlanSpec::default()
    };
    let args =
        export(Engine::Megatron, &run("nemotronh-8b", 48, 48, Precision::Bf16, balanced)).unwrap();
    let line = args.lines().find(|l| l.starts_with("--hybrid-override-pattern")).unwrap();
    let pattern = line.split('"').nth(1).unwrap();
    assert_eq!(pattern.matches('|').count(), 2, "{pattern}");
    assert_eq!(pattern.chars().filter(|c| "M*-".contains(*c)).count(), 52, "{pattern}");
    assert!(!args.contains("--pipeline-model-parallel-layout"), "{args}");
    // Megatron-Core 0.17 runs gated DeltaNet layers, but meshplan writes none of their flags.
    let qwen = run(
        "qwen3-next-80b-a3b",
        64,
        64,
        Precision::Bf16,
        PlanSpec { ep: Some(8), ..PlanSpec::default() },
    );
    let err = export(Engine::Megatron, &qwen).unwrap_err().to_string();
    assert!(err.contains("gated DeltaNet"), "{err}");
    // No exported engine builds lightning attention: every export of MiniMax-01 is refused, and
    // the plan is still priced.
    let minimax = run(
        "minimax-text-01",
        512,
        512,
        Precision::Bf16,
        PlanSpec { tp: Some(8), pp: Some(8), ep: Some(8), ..PlanSpec::default() },
    );
    assert!(meshplan::closed_form(&minimax).throughput.tokens_per_sec_per_gpu > 0.0);
    for engine in [Engine::Megatron, Engine::Torchtitan, Engine::Deepspeed] {
        let err = export(engine, &minimax).unwrap_err().to_string();
        assert!(err.contains("lightning attention") || err.contains("builds no hybrid"), "{err}");
    }
    let err = export(Engine::Megatron, &minimax).unwrap_err().to_string();
    assert!(err.contains("lightning attention (L)"), "{err}");
    // Megatron-LM builds no Falcon-H1 parallel layer (Megatron-Bridge's own model does): every
    // export is refused, and the plan is still priced.
    let falcon = run("falcon-h1-0.5b", 8, 64, Precision::Bf16, PlanSpec::default());
    assert!(meshplan::closed_form(&falcon).throughput.tokens_per_sec_per_gpu > 0.0);
    let err = export(Engine::Megatron, &falcon).unwrap_err().to_string();
    assert!(err.contains("Falcon-H1 parallel (P)"), "{err}");
    for engine in [Engine::Torchtitan, Engine::Deepspeed] {
        let err = export(engine, &falcon).unwrap_err().to_string();
        assert!(err.contains("Falcon-H1 parallel") || err.contains("builds no hybrid"), "{err}");
    }
    // No exported engine builds Jamba's Mamba-1 layers: every export is refused, and the plan is
    // still priced.
    let jamba = run(
        "jamba-v0.1",
        64,
        64,
        Precision::Bf16,
        PlanSpec { tp: Some(2), ep: Some(8), ..PlanSpec::default() },
    );
    assert!(meshplan::closed_form(&jamba).throughput.tokens_per_sec_per_gpu > 0.0);
    let err = export(Engine::Megatron, &jamba).unwrap_err().to_string();
    assert!(err.contains("Mamba-1 (S)"), "{err}");
    for engine in [Engine::Torchtitan, Engine::Deepspeed] {
        let err = export(engine, &jamba).unwrap_err().to_string();
        assert!(err.contains("Mamba-1 (S)") || err.contains("builds no hybrid"), "{err}");
    }
}

/// `plan` on the stack `stack`.
fn on_stack(stack: &str, plan: PlanSpec) -> PlanSpec {
    PlanSpec { stack: Some(stack.to_owned()), ..plan }
}

#[test]
fn an_older_megatron_core_gets_its_own_flag_spellings() {
    // The interleaved 70B plan with delayed-scaling FP8, for the core 0.6 that FlagPerf launches:
    // Megatron-Core's model asked for by flag, the interleaved schedule given as layers per model
    // chunk (80 / (4 x 5)), and FP8 without a recipe flag (delayed scaling is the only one).
    let plan = PlanSpec { tp: Some(8), pp: Some(4), vp: Some(5), ..PlanSpec::default() };
    let old =
        run("llama3.1-70b", 64, 128, Precision::Fp8Delayed, on_stack("megatron-core-0.6", plan));
    let args = export(Engine::Megatron, &old).unwrap();
    insta::assert_snapshot!("megatron_core_0_6_interleaved", args);
    assert!(args.starts_with("--use-mcore-models\n"));
    assert!(args.contains("--num-layers-per-virtual-pipeline-stage 4\n"));
    assert!(!args.contains("--num-virtual-stages-per-pipeline-rank"));
    assert!(args.contains("--fp8-format hybrid\n") && !args.contains("--fp8-recipe"));
    // The newest release's spelling of the same plan.
    let new = export(Engine::Megatron, &interleaved()).unwrap();
    assert!(new.contains("--num-virtual-stages-per-pipeline-rank 5\n--"));
    assert!(new.contains("--fp8-recipe delayed\n") && !new.contains("--use-mcore-models"));
}

#[test]
fn what_an_older_megatron_core_lacks_is_refused_flag_by_flag() {
    // Per-tensor current scaling (core 0.12's `--fp8-recipe tensorwise`) and the embedding and
    // loss counted in the pipeline split (core 0.11), each named with the release that added it.
    let plan = PlanSpec {
        tp: Some(8),
        pp: Some(2),
        pipeline_split: Some(PipelineSplit::EmbeddingAndLoss),
        ..PlanSpec::default()
    };
    let old = run(
        "llama3.1-70b",
        64,
        128,
        Precision::Fp8Current,
        on_stack("megatron-core-0.8-0.11", plan.clone()),
    );
    let error = export(Engine::Megatron, &old).unwrap_err();
    let text = error.to_string();
    for (flag, since) in [
        ("--fp8-recipe", 12),
        ("--account-for-embedding-in-pipeline-split", 11),
        ("--account-for-loss-in-pipeline-split", 11),
    ] {
        assert!(text.contains(&format!("no `{flag}` (core_v0.{since}.0 added it)")), "{text}");
    }
    assert_eq!(error.refusals.len(), 3, "{text}");
    assert!(text.contains("Megatron-Core 0.8"), "{text}");
    // The newest arguments write both.
    let plan = PlanSpec { pipeline_split: Some(PipelineSplit::EmbeddingAndLoss), ..plan };
    let new = run("llama3.1-70b", 64, 128, Precision::Fp8Current, plan);
    assert!(export(Engine::Megatron, &new).is_ok());
}

#[test]
fn megatron_fsdp_takes_its_core_0_12_name() {
    let plan = PlanSpec { fsdp: Some(true), ..PlanSpec::default() };
    let run = run("llama3.1-8b", 8, 16, Precision::Bf16, on_stack("megatron-core-0.12-0.13", plan));
    let args = export(Engine::Megatron, &run).unwrap();
    assert!(
        args.contains("--use-custom-fsdp\n--data-parallel-sharding-strategy optim_grads_params\n")
    );
    assert!(!args.contains("--use-megatron-fsdp"), "{args}");
    // A release before either name is refused naming the first release that runs it.
    let plan = PlanSpec { fsdp: Some(true), ..PlanSpec::default() };
    let older = crate::exports::run(
        "llama3.1-8b",
        8,
        16,
        Precision::Bf16,
        on_stack("megatron-core-0.8-0.11", plan),
    );
    let error = export(Engine::Megatron, &older).unwrap_err().to_string();
    assert!(error.contains("no `--use-custom-fsdp` (core_v0.12.0 added it)"), "{error}");
}

#[test]
fn torchtitan_exports_for_the_stack_whose_job_config_it_writes() {
    let plan = PlanSpec {
        engine: Some(Engine::Torchtitan),
        fsdp: Some(true),
        recompute: Some(RecomputeKind::Op),
        ..PlanSpec::default()
    };
    // The default torchtitan stack reads v0.2's job config, which the exporter writes.
    let default = run("llama3.1-8b", 8, 16, Precision::Bf16, plan.clone());
    assert_eq!(default.stack().id(), "torchtitan-0.2");
    let toml = export(Engine::Torchtitan, &default).unwrap();
    assert!(toml.contains("[parallelism]\n"), "{toml}");
    // The 2024 commit of the calibration rows reads the older one: refused at export only, so
    // that a search on that stack still ranks the plan.
    let old = run("llama3.1-8b", 8, 16, Precision::Bf16, on_stack("torchtitan-2024-12", plan));
    let error = export(Engine::Torchtitan, &old).unwrap_err();
    assert_eq!(error.refusals, [meshplan::export::Refusal::TorchtitanConfig]);
    assert!(error.to_string().contains("--stack torchtitan-0.2"), "{error}");
    let text = error.to_string();
    assert!(text.starts_with("meshplan does not write torchtitan's configuration"), "{text}");
    assert!(meshplan::export::check(Engine::Torchtitan, &old).is_ok());
}

#[test]
fn megatron_lm_before_megatron_core_is_priced_but_not_written() {
    let plan = PlanSpec { tp: Some(8), ..PlanSpec::default() };
    let old = run("llama3.1-8b", 8, 16, Precision::Bf16, on_stack("megatron-lm-2020-2022", plan));
    let error = export(Engine::Megatron, &old).unwrap_err();
    assert_eq!(error.refusals, [meshplan::export::Refusal::MegatronBeforeCore]);
    assert!(error.to_string().contains("--stack megatron-core-0.6"), "{error}");
    // The engine runs it, so a search on that stack still ranks it.
    assert!(meshplan::export::check(Engine::Megatron, &old).is_ok());
}

//! Per-document context-parallel groups (`--hybrid-cp`, issue 16): ByteScale's long-context
//! comparison of static DP x CP with groups sized to each document, the rules a hybrid plan
//! must pass (every problem at once), and what the exporters write or refuse.

use meshplan::data::{Batching, DataSpec, LengthBinSpec};
use meshplan::export::{Engine, export};
use meshplan::plan::{HybridCpScheduler, PlanSpec, RecomputeKind};
use meshplan::search::{Constraints, RejectionKind, SearchReport, SearchSpec, brute_force, search};
use meshplan::{Run, RunSpec, closed_form, presets};

use crate::support::{run, spec, training};

/// LLaMA-7B on 1,024 H100 with 32M tokens per global batch and 8K tokens per CP rank (ByteScale
/// section 8.3's configuration), on FlexSP's Wikipedia sample (ByteScale's own distributions
/// are published only as figures).
fn bytescale(seq: i64, hybrid: Option<HybridCpScheduler>) -> RunSpec {
    let mut spec = spec(
        presets::model("llama2-7b").unwrap(),
        "h100-sxm",
        1024,
        training(seq, (32 << 20) / seq, 1, None),
        PlanSpec {
            cp: Some(seq / 8192),
            recompute: Some(RecomputeKind::Full),
            hybrid_cp: hybrid.map(|_| true),
            hybrid_cp_scheduler: hybrid,
            ..PlanSpec::default()
        },
    );
    spec.data = Some(DataSpec { preset: Some("wikipedia".into()), ..DataSpec::default() });
    spec
}

fn tokens_per_sec(spec: &RunSpec) -> f64 {
    closed_form(&Run::from_spec(spec).unwrap()).throughput.tokens_per_sec_per_gpu
}

/// ByteScale (arXiv 2502.21231, section 8.2 and figure 20): with static DP x CP the ring's
/// traffic follows the packed length, and throughput halves with each context doubling; giving
/// each document a group sized to it removes the exchange of short documents (ByteScale's
/// "dynamic communication": 1.59x at 2M), and its balancing slows the decay to /1.08 a doubling.
/// Here, with either scheduler, throughput falls less than the static plan's at every doubling,
/// the exchange all but vanishes at 2M, and the groups are at least 1.4x faster there. At 256K
/// they gain nothing: with 8K tokens a rank, a 196K-token document runs on a ring of 32 ranks
/// across nodes, an exchange that neither scheduler's weight counts, and that rank sets the step.
#[test]
fn per_document_groups_keep_long_context_throughput_that_static_cp_loses() {
    let contexts = [256 << 10, 512 << 10, 1 << 20, 2 << 20];
    let rate = |scheduler: Option<HybridCpScheduler>| -> Vec<f64> {
        contexts.iter().map(|&seq| tokens_per_sec(&bytescale(seq, scheduler))).collect()
    };
    let fixed = rate(None);
    let last = contexts.len() - 1;
    for scheduler in [HybridCpScheduler::Megatron, HybridCpScheduler::ByWork] {
        let grouped = rate(Some(scheduler));
        for i in 1..contexts.len() {
            let (fixed_fall, fall) = (fixed[i - 1] / fixed[i], grouped[i - 1] / grouped[i]);
            assert!(fall < fixed_fall, "{scheduler:?}: {fixed:?} vs {grouped:?}");
        }
        assert!(grouped[last] >= 1.4 * fixed[last], "{scheduler:?}: {fixed:?} vs {grouped:?}");
        // The exchange a static plan pays at 2M is nearly gone.
        let exchange = |scheduler| {
            closed_form(&Run::from_spec(&bytescale(2 << 20, scheduler)).unwrap()).time.cp_exposed
        };
        let (fixed_exchange, grouped) = (exchange(None), exchange(Some(scheduler)));
        assert!(grouped.value() < 0.03 * fixed_exchange.value(), "{fixed_exchange:?} {grouped:?}");
    }
}

/// What a hybrid plan must be, all reported at once, each naming its field.
#[test]
fn a_hybrid_plan_that_breaks_every_rule_is_refused_with_every_reason() {
    let output = run(&[
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "48",
        "--seq-len",
        "131072",
        "--global-batch",
        "12",
        "--tp",
        "8",
        "--pp",
        "2",
        "--cp",
        "3",
        "--cp-comm",
        "all-to-all",
        "--hybrid-cp",
        "--max-seqlen-per-rank",
        "131072",
    ]);
    assert_eq!(output.code, 2, "{}", output.stderr);
    for expected in [
        "plan.hybrid_cp",
        "needs pp 1",
        "must be a power of two",
        "plan.cp_comm",
        "plan.max_seqlen_per_rank",
        "no document lengths were given",
    ] {
        assert!(output.stderr.contains(expected), "{expected}: {}", output.stderr);
    }
    let stray = run(&[
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "8",
        "--seq-len",
        "4096",
        "--global-batch",
        "8",
        "--max-seqlen-per-rank",
        "1024",
        "--hybrid-cp-scheduler",
        "by-work",
    ]);
    assert_eq!(stray.code, 2);
    assert!(stray.stderr.contains("plan.max_seqlen_per_rank"), "{}", stray.stderr);
    assert!(stray.stderr.contains("plan.hybrid_cp_scheduler"), "{}", stray.stderr);
    // A pool past the bound is refused, not placed for minutes.
    let huge = run(&[
        "estimate",
        "--model",
        "llama2-7b",
        "--gpus",
        "131072",
        "--seq-len",
        "8192",
        "--global-batch",
        "131072",
        "--lengths",
        "wikipedia",
        "--hybrid-cp",
    ]);
    assert_eq!(huge.code, 2);
    assert!(huge.stderr.contains("more than the 65536 ranks"), "{}", huge.stderr);
}

fn long_context_hybrid(scheduler: HybridCpScheduler) -> Run {
    let mut spec = bytescale(256 << 10, Some(scheduler));
    spec.plan.recompute = None;
    Run::from_spec(&spec).unwrap()
}

/// Megatron-LM writes its released flags; its scheduler places by length squared only, and
/// the other engines have no hybrid context parallel.
#[test]
fn megatron_exports_hybrid_context_parallel_and_the_others_refuse_it() {
    let run = long_context_hybrid(HybridCpScheduler::Megatron);
    let args = export(Engine::Megatron, &run).unwrap();
    for flag in [
        "--hybrid-context-parallel",
        "--max-seqlen-per-dp-cp-rank 8192",
        "--calculate-per-token-loss",
        "--dataloader-type single",
        "--context-parallel-size 32",
        "--pipeline-model-parallel-size 1",
    ] {
        assert!(args.lines().any(|line| line == flag), "{flag}: {args}");
    }
    for engine in [Engine::Torchtitan, Engine::Deepspeed] {
        let refused = export(engine, &run).unwrap_err().to_string();
        assert!(refused.contains("--hybrid-cp"), "{refused}");
    }
    let by_work = long_context_hybrid(HybridCpScheduler::ByWork);
    let refused = export(Engine::Megatron, &by_work).unwrap_err().to_string();
    assert!(refused.contains("length squared"), "{refused}");
}

/// Megatron-LM's loader masks documents from the SFT dataset's packed samples (`--sft`), which
/// hold whole documents: data batched `whole` writes it once (hybrid CP writes it too), and data
/// that the pre-training loader runs without a mask (`concat`), or without data, does not.
#[test]
fn megatron_reads_whole_documents_from_the_sft_dataset() {
    let sft_flags = |batching: Option<Batching>, hybrid_cp: bool| {
        let mut spec = bytescale(256 << 10, hybrid_cp.then_some(HybridCpScheduler::Megatron));
        spec.plan.recompute = None;
        match (spec.data.as_mut(), batching) {
            (Some(data), Some(batching)) => data.batching = Some(batching),
            (_, None) => spec.data = None,
            (None, Some(_)) => panic!("the ByteScale run has data"),
        }
        let args = export(Engine::Megatron, &Run::from_spec(&spec).unwrap()).unwrap();
        args.lines().filter(|line| *line == "--sft").count()
    };
    assert_eq!(sft_flags(Some(Batching::Whole), false), 1);
    assert_eq!(sft_flags(Some(Batching::Whole), true), 1);
    assert_eq!(sft_flags(Some(Batching::Pad), false), 1);
    assert_eq!(sft_flags(Some(Batching::Concat), false), 0);
    assert_eq!(sft_flags(None, false), 0);
}

/// Documents cut at sequence ends under a mask (`pack`) come from no Megatron-LM loader, and
/// torchtitan's attention masks no document at all: each export refuses what its loaders do not
/// batch, naming what they do; the per-document groups read documents whole and pass.
#[test]
fn an_export_refuses_data_batched_as_no_loader_of_its_engine_batches_it() {
    let refusal = |engine, batching, hybrid_cp: bool| {
        let mut spec = bytescale(256 << 10, hybrid_cp.then_some(HybridCpScheduler::Megatron));
        spec.plan.recompute = None;
        if let Some(data) = spec.data.as_mut() {
            data.batching = Some(batching);
        }
        match export(engine, &Run::from_spec(&spec).unwrap()) {
            Ok(_) => None,
            Err(err) => {
                let text = err.to_string();
                text.contains("the data is batched").then_some(text)
            }
        }
    };
    let megatron = refusal(Engine::Megatron, Batching::Pack, false).unwrap();
    assert!(megatron.contains("it batches `concat`, `whole`, `pad`"), "{megatron}");
    assert_eq!(refusal(Engine::Megatron, Batching::Pack, true), None);
    for batching in [Batching::Whole, Batching::Pad, Batching::Concat] {
        assert_eq!(refusal(Engine::Megatron, batching, false), None, "{batching:?}");
    }
    for batching in [Batching::Pack, Batching::Whole, Batching::Pad] {
        let torchtitan = refusal(Engine::Torchtitan, batching, false).unwrap();
        assert!(torchtitan.contains("it batches `concat`:"), "{torchtitan}");
    }
    assert_eq!(refusal(Engine::Torchtitan, Batching::Concat, false), None);
}

/// The plan's label and its written spec carry the groups, and the spec builds the same plan.
#[test]
fn a_hybrid_plan_round_trips_through_its_spec() {
    let run = long_context_hybrid(HybridCpScheduler::ByWork);
    let plan = run.plan();
    assert!(plan.label().ends_with("hybrid-cp8192-by-work"), "{}", plan.label());
    let written = plan.to_spec();
    assert_eq!(written.hybrid_cp, Some(true));
    assert_eq!(written.max_seqlen_per_rank, Some(8192));
    let mut again = bytescale(256 << 10, None);
    again.plan = written;
    assert_eq!(Run::from_spec(&again).unwrap().plan(), plan);
}

/// A search over 16 H100 at 32K on a long-tailed mix of whole documents (Megatron-LM's SFT
/// packing), targeting `engine`.
fn searched(engine: Option<Engine>, fast: bool) -> SearchReport {
    searched_batched(engine, fast, Batching::Whole)
}

/// The same, the documents batched as `batching` says.
fn searched_batched(engine: Option<Engine>, fast: bool, batching: Batching) -> SearchReport {
    let bin = |min, max, count| LengthBinSpec { min, max, count };
    let mut base = spec(
        presets::model("llama2-7b").unwrap(),
        "h100-sxm",
        16,
        training(32768, 16, 1, None),
        PlanSpec::default(),
    );
    base.data = Some(DataSpec {
        histogram: Some(vec![bin(256, 2048, 900), bin(8192, 65536, 60)]),
        batching: Some(batching),
        ..DataSpec::default()
    });
    let spec = SearchSpec {
        base,
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine,
        top: 5,
    };
    if fast { search(&spec, &|_, _| {}).unwrap() } else { brute_force(&spec).unwrap() }
}

/// With document lengths the search tries per-document groups on every layout without a
/// pipeline: both schedulers with no target engine, Megatron-LM's alone when it is the target,
/// and its bound-pruned fast path ranks them as simulating everything does.
#[test]
fn a_search_with_lengths_tries_hybrid_cp_where_a_plan_can_have_it() {
    let schedulers = |report: &SearchReport| {
        let mut seen: Vec<Option<HybridCpScheduler>> = Vec::new();
        for point in &report.points {
            let candidate = report.candidate(point);
            if candidate.hybrid_cp.is_some() {
                assert_eq!(candidate.pp, 1, "{candidate:?}");
            }
            if !seen.contains(&candidate.hybrid_cp) {
                seen.push(candidate.hybrid_cp);
            }
        }
        seen.sort();
        seen
    };
    let free = searched(None, true);
    let all = [None, Some(HybridCpScheduler::Megatron), Some(HybridCpScheduler::ByWork)];
    assert_eq!(schedulers(&free), all);
    let megatron = searched(Some(Engine::Megatron), true);
    assert_eq!(schedulers(&megatron), all[..2]);
    // Documents cut at sequence ends under a mask: no Megatron-LM loader packs them so, but its
    // per-document groups read documents whole, so those are all it has.
    let cut = searched_batched(Some(Engine::Megatron), true, Batching::Pack);
    assert_eq!(schedulers(&cut), all[1..2]);
    let (refused, example) = &cut.rejections.counts[&RejectionKind::UnsupportedByEngine];
    assert!(*refused > 0);
    assert!(example.to_string().contains("the data is batched `pack`"), "{example}");
    let order =
        |report: &SearchReport| report.plans.iter().map(|plan| plan.candidate).collect::<Vec<_>>();
    assert_eq!(order(&free), order(&searched(None, false)));
}

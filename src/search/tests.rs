//! Unit tests of the search: shared pricing against each candidate's own, the fast path against
//! the brute force, the ranking's order and determinism, and engine targets.

use super::*;
use crate::export::check;
use crate::hardware::ClusterSpec;
use crate::plan::TrainingSpec;
use crate::presets;

fn spec(gpus: i64, engine: Option<Engine>) -> SearchSpec {
    SearchSpec {
        base: RunSpec {
            model: presets::model("llama3.1-8b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: gpus },
            training: TrainingSpec {
                seq_len: 4096,
                global_batch: 32,
                micro_batch: None,
                precision: None,
            },
            plan: Default::default(),
            data: None,
        },
        constraints: Constraints::default(),
        memory_headroom: 0.0,
        engine,
        top: 5,
    }
}

/// Short-tailed documents one per sequence: a search for any engine tries variable
/// micro-batches beside fixed ones.
fn padded(gpus: i64) -> SearchSpec {
    batched(gpus, Batching::Pad)
}

/// Short-tailed documents batched `batching`.
fn batched(gpus: i64, batching: Batching) -> SearchSpec {
    let mut spec = spec(gpus, None);
    spec.base.data = Some(crate::data::DataSpec {
        histogram: Some(vec![
            crate::data::LengthBinSpec { min: 64, max: 1024, count: 80 },
            crate::data::LengthBinSpec { min: 1024, max: 4096, count: 20 },
        ]),
        batching: Some(batching),
        ..Default::default()
    });
    spec
}

#[test]
fn shared_op_tables_price_every_candidate_as_its_own_tables_do() {
    // A dense and an MoE space, documents one per sequence (variable micro-batches beside
    // fixed ones) and packed (re-packing windows and hybrid CP beside static CP): sharing
    // tables by table key must not change a single figure.
    let dense = spec(16, None);
    let mut moe = spec(64, None);
    moe.base.model = presets::model("qwen3-30b-a3b").unwrap();
    for spec in [dense, moe, padded(8), batched(8, Batching::Pack)] {
        let shape = shape(&spec).unwrap();
        let blocks = space::blocks(&shape, &spec.constraints, &spec.base.plan);
        let template = template(&spec);
        let (shared, shared_rejections) = price_all(&spec, &template, &blocks, true, &|_, _| {});
        let (own, own_rejections) = price_all(&spec, &template, &blocks, false, &|_, _| {});
        let shared: Vec<Kept> = shared.into_iter().flatten().collect();
        let own: Vec<Kept> = own.into_iter().flatten().collect();
        assert!(shared.len() > 100, "{} kept", shared.len());
        assert_eq!(shared.len(), own.len());
        for (a, b) in shared.iter().zip(&own) {
            assert_eq!(a.place, b.place);
            assert_eq!((a.closed_form, a.bound, a.peak), (b.closed_form, b.bound, b.peak));
        }
        assert_eq!(shared_rejections, own_rejections);
        // Every grouping kept somewhere where the data has them.
        let kept = |test: &dyn Fn(&Candidate) -> bool| {
            shared.iter().any(|k| test(&k.place.candidate(&blocks)))
        };
        match spec.base.data.as_ref().and_then(|data| data.batching) {
            Some(Batching::Pad) => {
                assert!(kept(&|c| c.variable_micro_batches));
                assert!(kept(&|c| !c.variable_micro_batches));
                assert!(!kept(&|c| c.balance_window > 0 || c.hybrid_cp.is_some()));
            }
            Some(_) => {
                assert!(kept(&|c| c.balance_window > 0));
                assert!(kept(&|c| c.hybrid_cp.is_some()));
                assert!(!kept(&|c| c.variable_micro_batches));
            }
            None => {}
        }
    }
}

#[test]
fn the_fast_path_finds_the_brute_force_ranking() {
    // A long top list takes more than one opening round to set a bar.
    // The last with documents, whose imbalance the bound includes.
    for (gpus, engine, top, data) in [
        (8, None, 5, false),
        (16, None, 5, false),
        (16, Some(Engine::Torchtitan), 5, false),
        (16, None, 40, false),
        (8, None, 20, true),
    ] {
        let mut spec = if data { padded(gpus) } else { spec(gpus, engine) };
        spec.top = top;
        let fast = search(&spec, &|_, _| {}).unwrap();
        let reference = brute_force(&spec).unwrap();
        // Entries and their equivalents alike.
        let order = |report: &SearchReport| {
            let equivalents =
                |p: &RankedPlan| p.equivalents.iter().map(|e| e.candidate).collect::<Vec<_>>();
            report.plans.iter().map(|p| (p.candidate, equivalents(p))).collect::<Vec<_>>()
        };
        assert_eq!(order(&fast), order(&reference), "{gpus} GPUs, {engine:?}, top {top}");
        assert_eq!(fast.plans.len(), top);
        assert!(
            fast.simulated < reference.simulated,
            "the bound prunes: {} vs {}",
            fast.simulated,
            reference.simulated
        );
        // Every priced candidate is either simulated or pruned by its bound.
        assert_eq!(fast.priced, fast.simulated + fast.pruned);
        assert!(fast.considered > fast.priced);
    }
}

#[test]
fn recommended_plans_fit_and_are_sorted() {
    let report = search(&spec(16, None), &|_, _| {}).unwrap();
    assert!(!report.plans.is_empty());
    for pair in report.plans.windows(2) {
        assert!(pair[0].estimate.time.step_time() <= pair[1].estimate.time.step_time());
        assert_eq!(rank::order(&pair[0], &pair[1]), std::cmp::Ordering::Less);
    }
    assert!(report.plans.iter().all(|p| p.estimate.fits()));
    assert!(report.rejections.counts.contains_key(&RejectionKind::BreaksARule));
}

#[test]
fn an_engine_target_only_returns_plans_that_engine_runs() {
    let report = search(&spec(16, Some(Engine::Deepspeed)), &|_, _| {}).unwrap();
    assert!(report.rejections.counts.contains_key(&RejectionKind::UnsupportedByEngine));
    for plan in &report.plans {
        assert!(check(Engine::Deepspeed, &plan.run).is_ok());
    }
}

#[test]
fn a_model_no_engine_builds_has_no_plan_for_an_engine_and_plans_for_any() {
    // Jamba's Mamba-1 layers: every engine's search rejects every plan for that reason (the
    // export's refusal, from the same table), while a search for any engine ranks plans.
    let mut jamba = spec(64, Some(Engine::Megatron));
    jamba.base.model = presets::model("jamba-v0.1").unwrap();
    jamba.base.training.global_batch = 64;
    for engine in [Engine::Megatron, Engine::Torchtitan, Engine::Deepspeed] {
        jamba.engine = Some(engine);
        let report = search(&jamba, &|_, _| {}).unwrap();
        assert!(report.plans.is_empty() && report.priced == 0, "{engine:?}");
        let (count, example) = &report.rejections.counts[&RejectionKind::UnsupportedByEngine];
        assert!(*count > 0);
        assert!(example.to_string().contains("Mamba-1 (S)"), "{engine:?}: {example}");
    }
    jamba.engine = None;
    let report = search(&jamba, &|_, _| {}).unwrap();
    assert!(!report.plans.is_empty());
    assert!(!report.rejections.counts.contains_key(&RejectionKind::UnsupportedByEngine));
}

#[test]
fn a_release_that_lacks_a_flag_of_the_model_refuses_every_candidate_without_pricing_one() {
    // DeepSeek-V3's multi-latent attention needs `--multi-latent-attention` (core_v0.10.0 on):
    // under Megatron-Core 0.8 no plan runs, and the search says so for the whole space.
    let mut old = spec(64, Some(Engine::Megatron));
    old.base.model = presets::model("deepseek-v3").unwrap();
    old.base.plan.stack = Some("megatron-core-0.8-0.11".to_owned());
    let report = search(&old, &|_, _| {}).unwrap();
    assert!(report.plans.is_empty() && report.priced == 0 && report.considered > 0);
    let (count, _) = &report.rejections.counts[&RejectionKind::UnsupportedByEngine];
    assert_eq!((*count, report.rejections.counts.len()), (report.considered, 1));
    let refused = report.model_refused().unwrap();
    assert!(refused.contains("--multi-latent-attention") && refused.contains("whatever the plan"));
    // A release that has the flag looks at each plan (on 64 GPUs none fits in memory).
    old.base.plan.stack = Some("megatron-core-0.14-plus".to_owned());
    let report = search(&old, &|_, _| {}).unwrap();
    assert!(report.model_refused().is_none());
    assert!(report.rejections.counts.contains_key(&RejectionKind::DoesNotFit));
}

#[test]
fn points_hold_every_fitting_candidate_and_none_beats_the_best_plan() {
    let spec = spec(16, None);
    let report = search(&spec, &|_, _| {}).unwrap();
    assert_eq!(report.points.iter().filter(|p| !p.simulated).count(), report.pruned);
    assert!(report.points.len() <= report.priced && report.points.len() > report.pruned);
    // In the space's order: each candidate once.
    assert!(report.points.windows(2).all(|w| w[0].place() < w[1].place()));
    let best = &report.plans[0];
    let top = report.points.iter().find(|p| report.candidate(p) == best.candidate).unwrap();
    assert!(top.simulated && top.step_time == best.estimate.time.step_time());
    let capacity = best.estimate.memory_capacity;
    for point in &report.points {
        assert!(point.tokens_per_sec_per_gpu <= top.tokens_per_sec_per_gpu * (1.0 + 1e-12));
        assert!(point.peak_memory <= capacity);
    }
    // Without pruning every point is simulated, and the best plan is the fastest point.
    let reference = brute_force(&spec).unwrap();
    assert!(reference.points.iter().all(|p| p.simulated));
    let fastest = reference
        .points
        .iter()
        .max_by(|a, b| a.tokens_per_sec_per_gpu.total_cmp(&b.tokens_per_sec_per_gpu))
        .unwrap();
    assert_eq!(fastest.step_time, reference.plans[0].estimate.time.step_time());
}

#[test]
fn searching_twice_gives_the_same_ranking() {
    let spec = spec(16, None);
    let first = search(&spec, &|_, _| {}).unwrap();
    let second = search(&spec, &|_, _| {}).unwrap();
    assert_eq!(first, second);
}

/// A pruned point counts the tokens a step trains, as a simulated plan does: with padded
/// documents (most of each sequence padding) none beats the best plan, fixed or variable.
#[test]
fn points_of_padded_documents_count_only_the_tokens_trained() {
    let report = search(&padded(8), &|_, _| {}).unwrap();
    assert!(report.pruned > 0);
    let best = report.plans[0].estimate.throughput.tokens_per_sec_per_gpu;
    let fastest = |variable: bool| {
        report
            .points
            .iter()
            .filter(|p| report.candidate(p).variable_micro_batches == variable)
            .map(|p| p.tokens_per_sec_per_gpu)
            .fold(0.0, f64::max)
    };
    assert!(fastest(true) <= best * (1.0 + 1e-12), "{} vs {best}", fastest(true));
    assert!(fastest(false) <= best * (1.0 + 1e-12), "{} vs {best}", fastest(false));
    assert!(fastest(false) > 0.0 && fastest(false) < 0.5 * best);
}

#[test]
fn a_grouping_derived_from_the_first_is_the_plan_validated_whole() {
    // Every candidate of another grouping than its block's first: its run derived from the
    // first grouping's (`Run::with_grouping`) is the run, or the refusal, that validating its
    // whole plan gives; pipelines refuse hybrid CP, packed data variable micro-batches.
    let (mut derived, mut refused) = (0, 0);
    for spec in [padded(8), batched(8, Batching::Pack)] {
        let shape = shape(&spec).unwrap();
        let blocks = space::blocks(&shape, &spec.constraints, &spec.base.plan);
        let template = template(&spec);
        for block in blocks.iter().filter(|b| b.groupings.len() > 1) {
            for layout in 0..block.layouts.len() {
                for inner in (0..block.per_window()).filter(|&i| block.first_grouping(i) != i) {
                    let first = block.candidate(layout, 0, 0, block.first_grouping(inner));
                    let candidate = block.candidate(layout, 0, 0, inner);
                    let Ok(run) = candidate_run(&spec, &template, &first) else { continue };
                    let whole = candidate_run(&spec, &template, &candidate).ok();
                    let grouping = candidate.grouping_spec(&template.plan);
                    assert_eq!(run.with_grouping(&grouping).ok(), whole, "{candidate:?}");
                    derived += 1;
                    refused += usize::from(whole.is_none());
                }
            }
        }
    }
    assert!(derived > 50 && refused > 0 && refused < derived, "{refused} of {derived}");
}

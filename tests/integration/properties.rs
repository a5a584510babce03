//! Invariants of the cost model, checked on random valid plans with proptest: breakdowns add up,
//! sharded totals equal unsharded totals, the pipeline bubble matches its closed form on uniform
//! stages, and the same input always gives the same estimate. The generator is seeded, so every
//! run checks the same cases.

use meshplan::cost::layer::padded_vocab;
use meshplan::cost::memory::stage_params;
use meshplan::model::ModelSpec;
use meshplan::plan::{PlanSpec, Precision, RecomputeKind};
use meshplan::{Run, RunSpec, closed_form, presets};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

use crate::support::training;

/// A random plan of Llama 3.1 8B (32 layers, 32 heads, 8 KV heads) on a power-of-two GPU count.
fn plans() -> impl Strategy<Value = (i64, i64, i64, i64, i64, i64, u8, u8)> {
    (
        0u32..4, // tp = 1, 2, 4, 8
        0u32..4, // pp = 1, 2, 4, 8
        0u32..3, // dp = 1, 2, 4
        0u32..2, // cp = 1, 2
        1i64..3, // micro batch
        1i64..5, // micro-batches per step
        0u8..4,  // sharding: zero 0..2, fsdp
        0u8..4,  // recompute
    )
        .prop_map(|(tp, pp, dp, cp, mbs, m, sharding, recompute)| {
            (1 << tp, 1 << pp, 1 << dp, 1 << cp, mbs, m, sharding, recompute)
        })
}

fn spec(model: ModelSpec, plan: (i64, i64, i64, i64, i64, i64, u8, u8)) -> RunSpec {
    let (tp, pp, dp, cp, mbs, m, sharding, recompute) = plan;
    crate::support::spec(
        model,
        "h100-sxm",
        tp * pp * dp * cp,
        training(4096, mbs * dp * m, mbs, Some(Precision::Bf16)),
        PlanSpec {
            tp: Some(tp),
            pp: Some(pp),
            cp: Some(cp),
            zero: (sharding < 3).then_some(i64::from(sharding)),
            fsdp: Some(sharding == 3),
            recompute: Some(
                [
                    RecomputeKind::None,
                    RecomputeKind::Selective,
                    RecomputeKind::Full,
                    RecomputeKind::Op,
                ][recompute as usize],
            ),
            ..PlanSpec::default()
        },
    )
}

/// Every property runs with the same fixed seed, so every run checks the same cases.
fn fixed_seed() -> ProptestConfig {
    ProptestConfig {
        rng_seed: RngSeed::Fixed(0x6d65_7368),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(fixed_seed())]
    #[test]
    fn breakdowns_add_up_to_their_totals(plan in plans()) {
        let run = Run::from_spec(&spec(presets::model("llama3.1-8b").unwrap(), plan)).unwrap();
        let estimate = closed_form(&run);
        let parts: f64 = estimate.time.parts().iter().map(|(_, t)| t.value()).sum();
        let step = estimate.throughput.step_time.value();
        prop_assert!((parts - step).abs() <= 1e-12 * step);
        for part in estimate.time.parts() {
            prop_assert!(part.1.value() >= 0.0, "{} is negative", part.0);
        }
        let stage = estimate.peak_memory.breakdown;
        let sum = stage.parts().iter().fold(meshplan::units::Bytes::ZERO, |a, (_, b)| a + *b);
        prop_assert!((sum - stage.total()).value().abs() <= 1e-12 * stage.total().value());
        prop_assert!(stage.allocated() <= stage.reserved() && stage.reserved() <= stage.total());
        prop_assert!(stage.fit_need() <= stage.total());
        prop_assert!(estimate.stages.iter().all(|s| s.breakdown.total() <= stage.total()));
    }

    #[test]
    fn sharded_parameters_add_up_to_the_unsharded_model(plan in plans()) {
        let run = Run::from_spec(&spec(presets::model("llama3.1-8b").unwrap(), plan)).unwrap();
        let model = run.model();
        let tp = run.plan().tp() as f64;
        let per_rank: f64 = (0..run.plan().pp()).map(|stage| stage_params(&run, stage).total()).sum();
        // Norms are replicated on every TP rank; the embedding and output rows are padded to a
        // multiple of 128 x tp as Megatron-LM pads them.
        let h = model.hidden_size() as f64;
        let replicated = 2.0 * h * model.num_layers() as f64 + h;
        let padding = (padded_vocab(&run) - model.vocab_size() as f64) * h * 2.0;
        let reconstructed = per_rank * tp - (tp - 1.0) * replicated - padding;
        prop_assert!((reconstructed - model.total_params() as f64).abs() < 1.0);
        // Model states shard exactly: per-GPU states x shard size = 18 bytes per parameter.
        let estimate = closed_form(&run);
        if run.plan().fsdp() {
            let shard = (run.plan().shard_group() * run.plan().cp()) as f64;
            let stage0 = estimate.stages[0].breakdown;
            let states = (stage0.weights + stage0.gradients + stage0.optimizer_states).value();
            prop_assert!((states * shard / stage_params(&run, 0).total() - 18.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_same_input_gives_the_same_estimate(plan in plans()) {
        let spec = spec(presets::model("llama3.1-8b").unwrap(), plan);
        let first = closed_form(&Run::from_spec(&spec).unwrap());
        let second = closed_form(&Run::from_spec(&spec).unwrap());
        prop_assert_eq!(first, second);
    }

    #[test]
    fn more_tensor_parallelism_never_adds_weight_memory(plan in plans()) {
        let (tp, ..) = plan;
        prop_assume!(tp < 8);
        let narrow = Run::from_spec(&spec(presets::model("llama3.1-8b").unwrap(), plan)).unwrap();
        let mut wider_plan = plan;
        wider_plan.0 = tp * 2;
        let wider = Run::from_spec(&spec(presets::model("llama3.1-8b").unwrap(), wider_plan)).unwrap();
        let weights = |run: &Run| closed_form(run).stages[0].breakdown.weights;
        prop_assert!(weights(&wider) <= weights(&narrow));
    }
}

/// A model whose embedding and logit layer are negligible, so every pipeline stage costs the same.
fn uniform_model() -> ModelSpec {
    let mut model = presets::model("llama3.1-8b").unwrap();
    model.vocab_size = 128;
    model
}

proptest! {
    #![proptest_config(fixed_seed())]
    #[test]
    fn the_pipeline_bubble_matches_its_closed_form_on_uniform_stages(
        pp_log in 1u32..4, vp_index in 0usize..3, m in 1i64..17,
    ) {
        let pp = 1i64 << pp_log;
        let vp = [1i64, 2, 4][vp_index];
        prop_assume!(32 % (pp * vp) == 0);
        // Megatron-LM's interleaved schedule runs micro-batches in groups of pp.
        prop_assume!(vp == 1 || m % pp == 0);
        let mut spec = spec(uniform_model(), (1, pp, 1, 1, 1, m, 1, 0));
        spec.plan.vp = Some(vp);
        let run = Run::from_spec(&spec).unwrap();
        let time = closed_form(&run).time;
        let ideal = time.forward + time.backward + time.recompute + time.tp_exposed + time.cp_exposed;
        let expected = (pp - 1) as f64 / (vp * m) as f64;
        let bubble = time.pipeline_bubble / ideal;
        // The embedding lookup and a 128-word head still make the end stages ~0.1% heavier.
        prop_assert!((bubble - expected).abs() <= 0.01 * expected.max(1e-3), "bubble {bubble} vs {expected}");
    }

    /// On uniform stages without data parallelism the bound is the whole 1F1B step but for the
    /// sends of the fill: within 2 % of the simulation, however deep the pipeline.
    #[test]
    fn the_search_bound_is_tight_on_uniform_one_f_one_b_stages(
        pp_log in 1u32..4, m in 1i64..17,
    ) {
        let pp = 1i64 << pp_log;
        let mut spec = spec(uniform_model(), (1, pp, 1, 1, 1, m, 1, 0));
        spec.plan.schedule = Some(meshplan::plan::PipelineSchedule::OneFOneB);
        let run = Run::from_spec(&spec).unwrap();
        let simulated = meshplan::sim::simulate(&run).unwrap().step_time();
        let bound = meshplan::sim::lower_bound(&run);
        prop_assert!(bound <= simulated && bound >= simulated * 0.98, "{bound:?} vs {simulated:?}");
    }
}

proptest! {
    #![proptest_config(fixed_seed())]
    #[test]
    fn the_search_bound_never_exceeds_the_simulation(
        plan in plans(), schedule_index in 0usize..5, vp_index in 0usize..2, model in 0usize..2,
    ) {
        use meshplan::plan::PipelineSchedule;
        let (_, pp, ..) = plan;
        let schedule = PipelineSchedule::ALL[schedule_index];
        let vp = if schedule == PipelineSchedule::Interleaved { [2, 4][vp_index] } else { 1 };
        prop_assume!(pp > 1 || schedule == PipelineSchedule::OneFOneB);
        let model = ["llama3.1-8b", "qwen3-30b-a3b"][model];
        let mut spec = spec(presets::model(model).unwrap(), plan);
        spec.plan.schedule = Some(schedule);
        spec.plan.vp = Some(vp);
        let Ok(run) = Run::from_spec(&spec) else { return Ok(()) };
        let simulated = meshplan::sim::simulate(&run).unwrap().step_time();
        let bound = meshplan::sim::lower_bound(&run);
        prop_assert!(bound <= simulated * (1.0 + 1e-12), "bound {bound:?} > simulated {simulated:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..fixed_seed() })]
    /// Any valid run, dense or MoE, on Hopper or Blackwell, in any precision the GPU has: every
    /// figure finite and non-negative, and MFU and HFU at most 100 % of the peak that matches
    /// the precision.
    #[test]
    fn every_figure_is_finite_and_utilization_stays_under_the_matching_peak(
        plan in plans(),
        model in 0usize..2,
        hardware in 0usize..4,
    ) {
        let model = ["llama3.1-8b", "qwen3-30b-a3b"][model];
        let (gpu, precision) = [
            ("h100-sxm", Precision::Bf16),
            ("h100-sxm", Precision::Fp8Current),
            ("b200", Precision::Mxfp8),
            ("b200", Precision::Nvfp4),
        ][hardware];
        let mut spec = spec(presets::model(model).unwrap(), plan);
        spec.cluster.gpu = presets::gpu(gpu).unwrap();
        spec.training.precision = Some(precision);
        let Ok(run) = Run::from_spec(&spec) else { return Ok(()) };
        let options = meshplan::sim::SimOptions { timeline: false };
        let (estimate, _) = meshplan::estimate::estimate_simulated_with(&run, options).unwrap();
        for (name, part) in estimate.time.parts() {
            prop_assert!(part.value().is_finite() && part.value() >= 0.0, "{name}");
        }
        prop_assert!(estimate.time.step_time().value() > 0.0);
        for stage in &estimate.stages {
            let total = stage.breakdown.total().value();
            prop_assert!(total.is_finite() && total > 0.0);
        }
        let t = &estimate.throughput;
        prop_assert!(t.tokens_per_sec_per_gpu.is_finite() && t.tokens_per_sec_per_gpu > 0.0);
        prop_assert!(t.mfu_pct > 0.0 && t.mfu_pct <= 100.0, "MFU {} % of {}", t.mfu_pct, t.peak_basis);
        prop_assert!(t.hfu_pct >= t.mfu_pct && t.hfu_pct <= 100.0, "HFU {} %", t.hfu_pct);
    }
}

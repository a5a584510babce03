//! DynaPipe's variable-length micro-batches (issue 16, a plan's `variable_micro_batches` over
//! documents batched `pad`): documents sorted by length into micro-batches padded to their
//! longest, priced as the plan's fixed slots at their mean plus the slowest replica and the
//! largest micro-batch's pipeline fill; full-length documents price as no data, short ones
//! compute little more than their tokens, a search for any engine tries them beside fixed
//! micro-batches, and no engine runs them (validation, export and a targeted search say so).

use meshplan::data::{Batching, DataSpec, LengthBinSpec};
use meshplan::estimate::estimate_simulated_with;
use meshplan::plan::{Engine, PlanSpec};
use meshplan::search::{Constraints, SearchSpec, search};
use meshplan::sim::SimOptions;
use meshplan::{Run, RunSpec, closed_form, presets};

use crate::support::{run, spec, training};

fn llama(gpus: i64, seq: i64, global_batch: i64, micro_batch: i64, plan: PlanSpec) -> RunSpec {
    spec(
        presets::model("llama3.1-8b").unwrap(),
        "h100-sxm",
        gpus,
        training(seq, global_batch, micro_batch, None),
        plan,
    )
}

fn with_data(mut spec: RunSpec, bins: &[(i64, i64, i64)], batching: Batching) -> RunSpec {
    let histogram = bins.iter().map(|&(min, max, count)| LengthBinSpec { min, max, count });
    spec.data = Some(DataSpec {
        histogram: Some(histogram.collect()),
        batching: Some(batching),
        ..DataSpec::default()
    });
    spec
}

/// Instruction-tuning-like data: most documents short, a few near the sequence length (the
/// multi-task mixes DynaPipe trains on).
const SHORT_TAILED: [(i64, i64, i64); 3] = [(64, 1024, 800), (1024, 4096, 180), (4096, 8192, 20)];

/// The documents of `bins`, one per sequence, sorted into variable micro-batches.
fn variable(spec: RunSpec, bins: &[(i64, i64, i64)]) -> RunSpec {
    let mut spec = with_data(spec, bins, Batching::Pad);
    spec.plan.variable_micro_batches = Some(true);
    spec
}

fn tokens_per_sec(spec: &RunSpec) -> f64 {
    let run = Run::from_spec(spec).unwrap();
    closed_form(&run).throughput.tokens_per_sec_per_gpu
}

/// Documents that fill their sequences form the fixed micro-batches: the same step as no data,
/// closed form and simulated, to rounding.
#[test]
fn full_length_documents_price_as_no_data() {
    for (tp, pp, dp, micro_batch) in [(1, 1, 8, 1), (2, 4, 2, 2), (4, 2, 4, 1)] {
        let plan = PlanSpec { tp: Some(tp), pp: Some(pp), ..PlanSpec::default() };
        let base = llama(tp * pp * dp, 4096, dp * micro_batch * 8, micro_batch, plan);
        let plain = Run::from_spec(&base).unwrap();
        let filled = Run::from_spec(&variable(base, &[(4096, 4096, 1)])).unwrap();
        let (a, b) = (closed_form(&plain), closed_form(&filled));
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs();
        assert!(close(a.time.step_time().value(), b.time.step_time().value()), "{a:?} {b:?}");
        assert!(close(a.throughput.tokens_per_sec_per_gpu, b.throughput.tokens_per_sec_per_gpu));
        let balance = b.data_balance.unwrap();
        assert!(close(balance.replicas, 1.0) && close(balance.microbatches, 1.0), "{balance:?}");
        let options = SimOptions { timeline: false };
        let (a, _) = estimate_simulated_with(&plain, options).unwrap();
        let (b, _) = estimate_simulated_with(&filled, options).unwrap();
        assert!(close(a.time.step_time().value(), b.time.step_time().value()));
    }
}

/// Short documents share a micro-batch: against one padded document a sequence, the step
/// computes little more than the documents' tokens, so throughput rises about as far as padding
/// fell (DynaPipe's gains over padded batches); against packing under a document mask it pays
/// only the padding inside its micro-batches and the largest one's pipeline fill.
#[test]
fn variable_micro_batches_remove_most_of_the_padding() {
    let plan = PlanSpec { tp: Some(2), pp: Some(2), ..PlanSpec::default() };
    let base = llama(32, 8192, 1024, 1, plan);
    let padded = tokens_per_sec(&with_data(base.clone(), &SHORT_TAILED, Batching::Pad));
    let dynamic = tokens_per_sec(&variable(base.clone(), &SHORT_TAILED));
    let packed = tokens_per_sec(&with_data(base, &SHORT_TAILED, Batching::Pack));
    // The mix's mean document is 903 tokens: a padded sequence trains 11 % of what it computes.
    assert!(dynamic > 5.0 * padded, "dynamic {dynamic} vs padded {padded}");
    assert!(dynamic < packed && dynamic > 0.8 * packed, "dynamic {dynamic} vs packed {packed}");
}

/// The largest micro-batch holds the pipeline's fill and drain: the deeper the pipeline, the
/// more it adds (what DynaPipe's cut search weighs against padding). A stage's share of it falls
/// as `1 / pp` while the stages it holds up grow as `pp - 1`: from pp 2 to 8, 7 / 4 as much.
#[test]
fn the_largest_micro_batch_costs_more_fill_in_a_deeper_pipeline() {
    let fill = |pp: i64| {
        let plan = PlanSpec { pp: Some(pp), ..PlanSpec::default() };
        let spec = variable(llama(8 * pp, 8192, 512, 1, plan), &SHORT_TAILED);
        let balance = closed_form(&Run::from_spec(&spec).unwrap()).data_balance.unwrap();
        let variable = balance.variable.unwrap();
        assert!(balance.microbatches > 1.0, "{balance:?}");
        assert!(variable.per_replica > 0.0 && variable.per_replica < 64.0, "{variable:?}");
        variable.largest_fill.value()
    };
    let (none, shallow, deep) = (fill(1), fill(2), fill(8));
    assert_eq!(none, 0.0);
    assert!(shallow > 0.0 && deep > 1.5 * shallow, "pp 2 {shallow} s, pp 8 {deep} s");
}

/// Re-packing windows and hybrid-CP groups form batches of their own: with variable
/// micro-batches (or padded documents) they are refused by name, an export is refused with what
/// to do, and a search for an engine keeps fixed micro-batches.
#[test]
fn no_engine_runs_variable_micro_batches_and_nothing_re_packs_them() {
    // An estimate of Wikipedia batched `batching` with a re-packing window and hybrid-CP groups,
    // and `more` flags.
    let grouped = |batching: &str, more: &[&str]| {
        let base = ["estimate", "--lengths", "wikipedia", "--batching", batching];
        run(&[&base[..], &["--balance-window", "2", "--hybrid-cp"], more].concat())
    };
    let output = grouped("pad", &["--variable-micro-batches"]);
    assert_eq!(output.code, 2);
    for field in ["plan.balance_window = 2", "plan.hybrid_cp = true"] {
        assert!(output.stderr.contains(field), "{}", output.stderr);
    }
    assert!(output.stderr.contains("the plan forms variable micro-batches"), "{}", output.stderr);
    // Without them, padded documents are neither re-packed nor placed by length.
    let output = grouped("pad", &[]);
    assert_eq!(output.code, 2);
    assert_eq!(output.stderr.matches("the data is batched `pad`").count(), 2, "{}", output.stderr);
    // Nor documents concatenated with no mask, whose sequences all cost a full one; nor are
    // they sorted into variable micro-batches.
    let output = grouped("concat", &["--variable-micro-batches"]);
    assert_eq!(output.code, 2);
    let batched = "the data is batched `concat` (documents concatenated with no document mask)";
    assert_eq!(output.stderr.matches(batched).count(), 1, "{}", output.stderr);
    assert!(output.stderr.contains("plan.variable_micro_batches = true"), "{}", output.stderr);
    let output = grouped("concat", &[]);
    assert_eq!(output.code, 2);
    assert_eq!(output.stderr.matches(batched).count(), 2, "{}", output.stderr);
    assert_eq!(output.stderr.matches("every sequence costs a full one").count(), 2);
    // Packed sequences and no lengths at all are refused too, each saying what to do.
    for batching in [&["--lengths", "wikipedia", "--batching", "pack"][..], &[]] {
        let output = run(&[&["estimate", "--variable-micro-batches"], batching].concat());
        assert_eq!(output.code, 2);
        assert!(output.stderr.contains("plan.variable_micro_batches = true"), "{}", output.stderr);
        assert!(output.stderr.contains("--batching pad"), "{}", output.stderr);
    }
    let output = run(&[
        "export",
        "--to",
        "deepspeed",
        "--model",
        "llama3.1-8b",
        "--gpus",
        "8",
        "--lengths",
        "wikipedia",
        "--batching",
        "pad",
        "--variable-micro-batches",
    ]);
    assert_ne!(output.code, 0);
    assert!(output.stderr.contains("DynaPipe's variable micro-batches"), "{}", output.stderr);
    // A search for an engine keeps fixed micro-batches.
    let report = search(&search_spec(Some(Engine::Megatron), None), &|_, _| {}).unwrap();
    assert!(!report.plans.is_empty());
    assert!(report.plans.iter().all(|ranked| !ranked.run.plan().variable_micro_batches()));
}

fn search_spec(engine: Option<Engine>, pinned: Option<bool>) -> SearchSpec {
    let plan = PlanSpec { variable_micro_batches: pinned, ..PlanSpec::default() };
    SearchSpec {
        base: with_data(llama(16, 8192, 256, 1, plan), &SHORT_TAILED, Batching::Pad),
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine,
        top: 3,
    }
}

/// A search for any engine over documents one per sequence tries variable micro-batches beside
/// the fixed ones (DynaPipe's re-batching as a balancing strategy): on short-tailed data they
/// remove most of the padding, so they lead, with neither a re-packing window nor hybrid CP
/// beside them; pinned off, the search keeps fixed ones.
#[test]
fn a_search_for_any_engine_tries_variable_micro_batches_on_padded_documents() {
    let report = search(&search_spec(None, None), &|_, _| {}).unwrap();
    assert!(!report.plans.is_empty());
    for ranked in &report.plans {
        let plan = ranked.run.plan();
        assert!(plan.variable_micro_batches(), "{}", plan.label());
        assert!(plan.label().contains("variable-mb"), "{}", plan.label());
        assert_eq!(plan.balance_window(), 0);
        assert!(plan.hybrid_cp().is_none());
        assert!(ranked.estimate.data_balance.unwrap().variable.is_some());
    }
    let fixed = search(&search_spec(None, Some(false)), &|_, _| {}).unwrap();
    let best = |report: &meshplan::search::SearchReport| {
        report.plans[0].estimate.throughput.tokens_per_sec_per_gpu
    };
    assert!(fixed.plans.iter().all(|ranked| !ranked.run.plan().variable_micro_batches()));
    assert!(best(&report) > 3.0 * best(&fixed), "{} vs {}", best(&report), best(&fixed));
    // Pinned on, every candidate sorts its documents: the same best plan out of fewer.
    let pinned = search(&search_spec(None, Some(true)), &|_, _| {}).unwrap();
    assert!(pinned.plans.iter().all(|ranked| ranked.run.plan().variable_micro_batches()));
    assert_eq!(best(&pinned), best(&report));
    assert!(pinned.considered < report.considered, "{} {}", pinned.considered, report.considered);
}

/// `estimate --variable-micro-batches` says how the documents were batched and what the
/// variable micro-batches leave uneven.
#[test]
fn estimate_prints_the_variable_micro_batches() {
    let output = run(&[
        "estimate",
        "--model",
        "llama3.1-8b",
        "--gpus",
        "16",
        "--pp",
        "2",
        "--seq-len",
        "8192",
        "--global-batch",
        "512",
        "--lengths",
        "wikipedia",
        "--batching",
        "pad",
        "--variable-micro-batches",
    ]);
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.contains("sorted by length into variable micro-batches of up to 8192"),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains("variable micro-batches a replica"), "{}", output.stdout);
    assert!(output.stdout.contains("global batches of 512 documents drawn"), "{}", output.stdout);
}

/// A global batch of more documents than a sample draws (16,384) is drawn in part, its
/// micro-batches dealt to the share of the replicas they stand for: with as many documents a
/// replica, a replica runs as many micro-batches and its spread is the one of a global batch
/// drawn whole (the slowest of that share of the replicas, not of all of them).
#[test]
fn a_global_batch_larger_than_the_sample_is_priced_per_replica_alike() {
    let balance = |gpus: i64, global_batch: i64| {
        let plan = PlanSpec { tp: Some(1), ..PlanSpec::default() };
        let spec = variable(llama(gpus, 8192, global_batch, 1, plan), &SHORT_TAILED);
        closed_form(&Run::from_spec(&spec).unwrap()).data_balance.unwrap()
    };
    // 64 documents a replica either way: 16,384 documents drawn whole on 256 GPUs, 262,144
    // drawn in part on 4,096.
    let (whole, part) = (balance(256, 16_384), balance(4096, 262_144));
    let per_replica =
        |b: &meshplan::cost::imbalance::DataImbalance| b.variable.unwrap().per_replica;
    assert!((per_replica(&whole) / per_replica(&part) - 1.0).abs() < 0.1, "{whole:?} {part:?}");
    assert!(part.replicas >= 1.0 && part.replicas < 1.5, "{part:?}");
    assert!((part.replicas / whole.replicas - 1.0).abs() < 0.1, "{whole:?} {part:?}");
}

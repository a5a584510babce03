//! Criterion benchmarks: one closed-form estimate (issue #14 target: 2 microseconds for a
//! 126-layer model) and one simulated step of Llama 3.1 405B on 16,384 H100 under interleaved
//! 1F1B, with and without the timeline a trace needs, and with its Chrome trace written
//! (`simulate --trace`, issue #14 target: 50 ms), and one estimate through the command-line layer
//! that the Python package calls (issue #18).

mod cases;

use criterion::{Criterion, criterion_group, criterion_main};
use meshplan::sim::trace::chrome_trace;
use meshplan::sim::{SimOptions, simulate, simulate_with};
use meshplan::{Run, closed_form};

fn llama_405b_on_16k_h100() -> Run {
    Run::from_spec(&cases::llama_405b_on_16k_h100().unwrap()).unwrap()
}

fn bench_estimate(c: &mut Criterion) {
    let run = llama_405b_on_16k_h100();
    c.bench_function("estimate llama3.1-405b 16384 h100", |b| {
        b.iter(|| closed_form(std::hint::black_box(&run)))
    });
}

/// Issue 16's target: pricing a plan on a 10,000-document sample adds at most 10x to an
/// estimate; drawing the sample is once per run (a search shares it), benchmarked apart.
fn bench_estimate_with_lengths(c: &mut Criterion) {
    let spec = cases::llama_405b_on_16k_h100_with_10k_lengths().unwrap();
    let run = Run::from_spec(&spec).unwrap();
    c.bench_function("estimate llama3.1-405b 16384 h100 on 10k document lengths", |b| {
        b.iter(|| closed_form(std::hint::black_box(&run)))
    });
    c.bench_function("validate and sample llama3.1-405b 16384 h100 on 10k document lengths", |b| {
        b.iter(|| Run::from_spec(std::hint::black_box(&spec)).unwrap())
    });
}

fn bench_simulate(c: &mut Criterion) {
    let run = llama_405b_on_16k_h100();
    assert_eq!(run.plan().num_microbatches(), 16);
    c.bench_function("simulate llama3.1-405b 16384 h100 interleaved (timeline)", |b| {
        b.iter(|| simulate(std::hint::black_box(&run)).unwrap())
    });
    c.bench_function("simulate llama3.1-405b 16384 h100 interleaved (totals only)", |b| {
        b.iter(|| {
            simulate_with(std::hint::black_box(&run), SimOptions { timeline: false }).unwrap()
        })
    });
    c.bench_function("simulate --trace llama3.1-405b 16384 h100 interleaved", |b| {
        b.iter(|| {
            let simulation = simulate(std::hint::black_box(&run)).unwrap();
            chrome_trace(&simulation, "llama3.1-405b").len()
        })
    });
}

/// One estimate through the command-line layer, as the Python package runs it
/// (`meshplan.estimate`; issue #18 compares a Python loop of them with this).
fn bench_command_line(c: &mut Criterion) {
    let words = [
        "meshplan",
        "estimate",
        "--format",
        "json",
        "--model",
        "llama3.1-70b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--seq-len",
        "8192",
        "--global-batch",
        "128",
        "--tp",
        "8",
        "--pp",
        "4",
    ];
    c.bench_function("estimate via the command line llama3.1-70b 64 h100 tp8 pp4", |b| {
        b.iter(|| meshplan::cli::run_words(std::hint::black_box(words)).unwrap())
    });
}

criterion_group!(
    benches,
    bench_estimate,
    bench_estimate_with_lengths,
    bench_simulate,
    bench_command_line
);
criterion_main!(benches);

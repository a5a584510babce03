//! Criterion benchmarks of the full plan search (issue #14 targets on a 2-core machine: GPT-3
//! 175B on 1,024 A100 80GB in 0.5 s, Llama 3.1 405B on 16,384 H100 in 1 s, DeepSeek-V3 on 1,024
//! H100 in 2 s and on 8,192 H100 in 4 s), of Qwen3-30B-A3B on 64 H100 and of Llama 3.1 405B on
//! 131,072 H100, and (issue #16) of Llama 2 7B at 128K tokens on 64 H100 over a long-tailed
//! document mix: without the lengths; with them packed as they arrive and static CP (no
//! balancing strategy: `balance_window` pinned to 0, `hybrid_cp` to false); packed as they
//! arrive with hybrid CP tried; and trying every balancing strategy (re-packing windows of 0 to
//! 8 global batches and hybrid CP with both schedulers); and with the documents one per padded
//! sequence, in fixed micro-batches against every strategy (variable micro-batches too). Each
//! also prints the candidates it considered, priced and simulated, and the
//! candidates considered per second. `RAYON_NUM_THREADS=1` measures one thread.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use meshplan::data::Batching;
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PlanSpec, TrainingSpec};
use meshplan::search::{Constraints, SearchSpec, search};
use meshplan::{RunSpec, presets};

#[path = "cases/long_context.rs"]
mod long_context;
use long_context::{long_context, no_balancing};

fn spec(model: &str, gpu: &str, gpus: i64, seq_len: i64, global_batch: i64) -> SearchSpec {
    SearchSpec {
        base: RunSpec {
            model: presets::model(model).unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu(gpu).unwrap(), num_gpus: gpus },
            training: TrainingSpec { seq_len, global_batch, micro_batch: None, precision: None },
            plan: Default::default(),
            data: None,
        },
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine: None,
        top: 5,
    }
}

fn bench_search(c: &mut Criterion) {
    let (pack, pad) = (Some(Batching::Pack), Some(Batching::Pad));
    let cases = [
        ("search gpt3-175b 1024 a100-80gb", spec("gpt3-175b", "a100-80gb", 1024, 2048, 1536)),
        ("search llama3.1-405b 16384 h100", spec("llama3.1-405b", "h100-sxm", 16384, 8192, 2048)),
        ("search qwen3-30b-a3b 64 h100", spec("qwen3-30b-a3b", "h100-sxm", 64, 4096, 512)),
        ("search deepseek-v3 1024 h100", spec("deepseek-v3", "h100-sxm", 1024, 4096, 8192)),
        ("search deepseek-v3 8192 h100", spec("deepseek-v3", "h100-sxm", 8192, 4096, 8192)),
        (
            "search llama3.1-405b 131072 h100",
            spec("llama3.1-405b", "h100-sxm", 131072, 8192, 16384),
        ),
        ("search llama2-7b 64 h100 128k", long_context(None, PlanSpec::default())),
        ("search llama2-7b 64 h100 128k lengths packed static", long_context(pack, no_balancing())),
        (
            "search llama2-7b 64 h100 128k lengths packed",
            long_context(pack, PlanSpec { balance_window: Some(0), ..PlanSpec::default() }),
        ),
        (
            "search llama2-7b 64 h100 128k lengths every strategy",
            long_context(pack, PlanSpec::default()),
        ),
        ("search llama2-7b 64 h100 128k lengths padded fixed", long_context(pad, no_balancing())),
        (
            "search llama2-7b 64 h100 128k lengths padded every strategy",
            long_context(pad, PlanSpec::default()),
        ),
    ];
    let mut group = c.benchmark_group("search");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, spec) in &cases {
        let started = Instant::now();
        let report = search(spec, &|_, _| {}).unwrap();
        let seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "{name}: {} candidates, {} priced, {} simulated, {:.0} candidates/s",
            report.considered,
            report.priced,
            report.simulated,
            report.considered as f64 / seconds
        );
        group.bench_function(*name, |b| {
            b.iter(|| search(std::hint::black_box(spec), &|_, _| {}).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);

//! Criterion benchmark of one estimate (issue #2 target: under 10 microseconds on one core for a
//! 126-layer model).

use criterion::{Criterion, criterion_group, criterion_main};
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PipelineSplit, PlanSpec, Precision, TrainingSpec};
use meshplan::{Run, RunSpec, estimate, presets};

fn llama_405b_on_16k_h100() -> Run {
    Run::from_spec(&RunSpec {
        model: presets::model("llama3.1-405b").unwrap(),
        cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 16384 },
        training: TrainingSpec {
            seq_len: 8192,
            global_batch: 2048,
            micro_batch: Some(1),
            precision: Some(Precision::Bf16),
        },
        plan: PlanSpec {
            tp: Some(8),
            pp: Some(16),
            vp: Some(8),
            pipeline_split: Some(PipelineSplit::EmbeddingAndLoss),
            ..PlanSpec::default()
        },
    })
    .unwrap()
}

fn bench_estimate(c: &mut Criterion) {
    let run = llama_405b_on_16k_h100();
    c.bench_function("estimate llama3.1-405b 16384 h100", |b| {
        b.iter(|| estimate(std::hint::black_box(&run)))
    });
}

criterion_group!(benches, bench_estimate);
criterion_main!(benches);

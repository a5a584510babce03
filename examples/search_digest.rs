//! Prints a digest of the benchmarked searches (counts, rejections, ranked plans with their
//! figures bit for bit, a hash of every priced point) so that two builds can be compared:
//! `cargo run --release --example search_digest [--no-points] [CASE...] > digest.txt` on each and
//! `diff` the files (`--no-points` skips hashing the points, to time the searches alone).

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use meshplan::hardware::ClusterSpec;
use meshplan::plan::TrainingSpec;
use meshplan::search::{Constraints, SearchSpec, brute_force, search};
use meshplan::{RunSpec, presets};

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hash_points = !args.iter().any(|a| a == "--no-points");
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let cases = [
        ("gpt3", spec("gpt3-175b", "a100-80gb", 1024, 2048, 1536)),
        ("l405", spec("llama3.1-405b", "h100-sxm", 16384, 8192, 2048)),
        ("qwen", spec("qwen3-30b-a3b", "h100-sxm", 64, 4096, 512)),
        ("dsv3_1k", spec("deepseek-v3", "h100-sxm", 1024, 4096, 8192)),
        ("dsv3_8k", spec("deepseek-v3", "h100-sxm", 8192, 4096, 8192)),
        ("l405_131k", spec("llama3.1-405b", "h100-sxm", 131072, 8192, 16384)),
        ("small_brute", spec("llama3.1-8b", "h100-sxm", 16, 4096, 32)),
    ];
    for (name, spec) in &cases {
        if !filter.is_empty() && !filter.iter().any(|f| f.as_str() == *name) {
            continue;
        }
        let started = Instant::now();
        let report = if *name == "small_brute" {
            brute_force(spec).unwrap()
        } else {
            search(spec, &|_, _| {}).unwrap()
        };
        let seconds = started.elapsed().as_secs_f64();
        let mut out = String::new();
        writeln!(
            out,
            "{name}: considered {} priced {} simulated {} pruned {}",
            report.considered, report.priced, report.simulated, report.pruned
        )
        .unwrap();
        writeln!(out, "  rejections {:?}", report.rejections).unwrap();
        for plan in &report.plans {
            writeln!(
                out,
                "  plan {:?} step {:?} peak {:?} closed {:?} equivalents {:?}",
                plan.candidate,
                plan.estimate.time.step_time(),
                plan.estimate.peak_memory.breakdown.total(),
                plan.closed_form,
                plan.equivalents.iter().map(|e| e.candidate).collect::<Vec<_>>()
            )
            .unwrap();
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        if hash_points {
            for point in &report.points {
                let figures = (point.peak_memory, point.step_time, point.tokens_per_sec_per_gpu);
                format!("{:?} {figures:?} {}", report.candidate(point), point.simulated)
                    .hash(&mut hasher);
            }
        }
        writeln!(out, "  points {} hash {:x}", report.points.len(), hasher.finish()).unwrap();
        print!("{out}");
        eprintln!("{name}: {seconds:.2} s");
    }
}

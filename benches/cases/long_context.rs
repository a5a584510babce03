//! The long-context search that the search benchmark times and `examples/search_instructions.rs`
//! counts (issue 16's benchmark): WLB-LLM's 7B-128K setting, Llama 2 7B on 64 H100 at 128K tokens
//! with a global batch of 16, on a stated long-tailed mix of mostly 0.5-4K documents, some of
//! 32-128K and a few past the 128K sequence, packed or one per (padded) sequence.

use meshplan::data::{Batching, DataSpec, LengthBinSpec};
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PlanSpec, TrainingSpec};
use meshplan::search::{Constraints, SearchSpec};
use meshplan::{RunSpec, presets};

/// No balancing strategy: documents packed as they arrive (or padded), static CP, fixed
/// micro-batches.
pub fn no_balancing() -> PlanSpec {
    PlanSpec {
        balance_window: Some(0),
        hybrid_cp: Some(false),
        variable_micro_batches: Some(false),
        ..PlanSpec::default()
    }
}

/// The search, with the mix batched by `batching` or without it, and the plan pinned by `pins`
/// (unpinned, the search tries every balancing strategy the data allows).
pub fn long_context(batching: Option<Batching>, pins: PlanSpec) -> SearchSpec {
    let bin = |min, max, count| LengthBinSpec { min, max, count };
    SearchSpec {
        base: RunSpec {
            model: presets::model("llama2-7b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 64 },
            training: TrainingSpec {
                seq_len: 131_072,
                global_batch: 16,
                micro_batch: None,
                precision: None,
            },
            plan: pins,
            data: batching.map(|batching| DataSpec {
                histogram: Some(vec![
                    bin(512, 4096, 900),
                    bin(32768, 131_072, 60),
                    bin(131_072, 262_144, 10),
                ]),
                batching: Some(batching),
                ..DataSpec::default()
            }),
        },
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine: None,
        top: 5,
    }
}

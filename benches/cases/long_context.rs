//! The long-context search that the search benchmark times and `examples/search_instructions.rs`
//! counts (issue 16's benchmark): WLB-LLM's 7B-128K setting, Llama 2 7B on 64 H100 at 128K tokens
//! with a global batch of 16, on a stated long-tailed mix of mostly 0.5-4K documents, some of
//! 32-128K and a few past the 128K sequence.

use meshplan::data::{DataSpec, LengthBinSpec};
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PlanSpec, TrainingSpec};
use meshplan::search::{Constraints, SearchSpec};
use meshplan::{RunSpec, presets};

/// The search, with the mix or without (`data`), and the balancing pins: `balance_window` 0
/// packs documents as they arrive, `hybrid_cp` false keeps CP static; `None` tries every choice.
pub fn long_context(
    data: bool,
    balance_window: Option<i64>,
    hybrid_cp: Option<bool>,
) -> SearchSpec {
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
            plan: PlanSpec { balance_window, hybrid_cp, ..PlanSpec::default() },
            data: data.then(|| DataSpec {
                histogram: Some(vec![
                    bin(512, 4096, 900),
                    bin(32768, 131_072, 60),
                    bin(131_072, 262_144, 10),
                ]),
                ..DataSpec::default()
            }),
        },
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine: None,
        top: 5,
    }
}

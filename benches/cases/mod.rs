//! The run the estimate benchmark prices, shared with `examples/estimate_loop.rs` so that the
//! instructions it counts are those of the benchmarked estimate: Llama 3.1 405B on 16,384 H100,
//! seq 8192, batch 2048, tp 8 pp 16 vp 8 with the embedding and loss counted as layers.

use meshplan::RunSpec;
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PipelineSplit, PlanSpec, Precision, TrainingSpec};
use meshplan::presets::{self, PresetError};

/// The benchmarked run's spec.
pub fn llama_405b_on_16k_h100() -> Result<RunSpec, PresetError> {
    Ok(RunSpec {
        model: presets::model("llama3.1-405b")?,
        cluster: ClusterSpec { gpu: presets::gpu("h100-sxm")?, num_gpus: 16384 },
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
        data: None,
    })
}

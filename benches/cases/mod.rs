//! The run the estimate benchmark prices, shared with `examples/estimate_loop.rs` so that the
//! instructions it counts are those of the benchmarked estimate: Llama 3.1 405B on 16,384 H100,
//! seq 8192, batch 2048, tp 8 pp 16 vp 8 with the embedding and loss counted as layers; and the
//! same run on a sample of 10,000 document lengths (issue 16's benchmark).

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

/// The benchmarked run on data: 10,000 document lengths spread evenly from 1 to 16,384 tokens
/// (a fixed, synthetic sample), packed into its 8,192-token sequences.
pub fn llama_405b_on_16k_h100_with_10k_lengths() -> Result<RunSpec, PresetError> {
    let lengths = (0..10_000i64).map(|i| 1 + (i * 7919) % 16_384).collect();
    Ok(RunSpec {
        data: Some(meshplan::data::DataSpec {
            lengths: Some(lengths),
            ..meshplan::data::DataSpec::default()
        }),
        ..llama_405b_on_16k_h100()?
    })
}

//! A DeepSpeed JSON config (`docs/_pages/config-json.md`, reference section 4): batch, precision,
//! ZeRO, AutoTP, Ulysses context parallelism and activation checkpointing. Pipeline stages are set in code
//! (`PipelineModule(num_stages=...)`), so the config carries them under `pipeline.stages`.

use serde_json::json;

use crate::plan::{Precision, RecomputeKind, Sharding};
use crate::run::Run;

fn stage(sharding: Sharding) -> u8 {
    match sharding {
        Sharding::None => 0,
        Sharding::Optimizer => 1,
        Sharding::OptimizerAndGradients => 2,
        Sharding::Full => 3,
    }
}

/// The JSON config, pretty-printed.
pub fn config(run: &Run) -> String {
    let (plan, training) = (run.plan(), run.training());
    let micro = training.micro_batch();
    let accumulation = plan.num_microbatches();
    let mut config = json!({
        "train_batch_size": training.global_batch(),
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accumulation,
        "gradient_clipping": 1.0,
        "zero_optimization": {
            "stage": stage(plan.sharding()),
            "overlap_comm": plan.overlap_grad_reduce(),
            "contiguous_gradients": true,
            "reduce_scatter": true,
        },
    });
    if run.model().moe().is_some() && plan.ep() > 1 {
        config["expert_parallel"] = json!({"enabled": true, "autoep_size": plan.ep()});
    }
    let precision = if training.precision() == Precision::Fp16 { "fp16" } else { "bf16" };
    config[precision] = json!({"enabled": true});
    if plan.sharding() == Sharding::Full && plan.shard_group() != plan.dp() {
        config["zero_optimization"]["zero_hpz_partition_size"] = json!(plan.shard_group());
    }
    if plan.tp() > 1 {
        config["tensor_parallel"] = json!({"autotp_size": plan.tp()});
    }
    if plan.cp() > 1 {
        // Arctic Long Sequence Training (docs/_tutorials/ulysses-alst-sequence-parallelism.md):
        // the script registers `UlyssesSPAttentionHF` with the same size and passes its mpu.
        config["sequence_parallel_size"] = json!(plan.cp());
    }
    if plan.pp() > 1 {
        config["pipeline"] = json!({"stages": plan.pp(), "partition": "uniform"});
    }
    if plan.recompute() == RecomputeKind::Full {
        // `cpu_checkpointing` stays off: it offloads every checkpointed input but the newest, not
        // what a plan's offload prices, so the capability table refuses offloading plans.
        config["activation_checkpointing"] = json!({
            "partition_activations": plan.tp() > 1,
            "contiguous_memory_optimization": false,
            "number_checkpoints": plan.recompute_num_layers(),
        });
    }
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    text
}

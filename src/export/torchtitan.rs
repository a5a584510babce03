//! A torchtitan job configuration TOML (`torchtitan/config/job_config.py` @ v0.2.2, reference
//! section 3): the `[parallelism]`, `[training]`, `[activation_checkpoint]` and float8 sections a
//! plan decides. Model architecture is torchtitan's `[model]` flavor, which meshplan cannot name
//! for an arbitrary model, so it is left to the user with a comment.

use std::fmt::Write as _;

use crate::plan::{
    ExpertDispatch, PipelineSchedule, PipelineSplit, Precision, RecomputeKind, Sharding,
};
use crate::run::Run;

/// The job TOML.
pub fn job_config(run: &Run) -> String {
    let (model, plan, training) = (run.model(), run.plan(), run.training());
    let mut out = String::new();
    let _ =
        writeln!(out, "# torchtitan job config written by meshplan for {}", model.display_name());
    let _ = writeln!(
        out,
        "# [model] name and flavor: set them to the torchtitan model that matches this architecture."
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "[training]");
    // Without a pipeline the local batch is one micro-batch and torchtitan accumulates gradients
    // up to the global batch; with one, the whole per-rank batch goes through the pipeline in
    // micro-batches of `pipeline_parallel_microbatch_size`.
    let local =
        if plan.pp() > 1 { training.global_batch() / plan.dp() } else { training.micro_batch() };
    let _ = writeln!(out, "local_batch_size = {local}");
    let _ = writeln!(out, "global_batch_size = {}", training.global_batch());
    let _ = writeln!(out, "seq_len = {}", training.seq_len());
    let _ = writeln!(out, "mixed_precision_param = \"bfloat16\"");
    let _ = writeln!(out, "mixed_precision_reduce = \"float32\"");
    let _ = writeln!(out);
    let _ = writeln!(out, "[parallelism]");
    let (replicate, shard) = match plan.sharding() {
        Sharding::Full => (plan.dp() / plan.shard_group(), plan.shard_group()),
        _ => (plan.dp(), 1),
    };
    let _ = writeln!(out, "data_parallel_replicate_degree = {replicate}");
    let _ = writeln!(out, "data_parallel_shard_degree = {shard}");
    if plan.sharding() == Sharding::Full {
        let reshard = if plan.reshard_after_forward() { "always" } else { "never" };
        let _ = writeln!(out, "fsdp_reshard_after_forward = \"{reshard}\"");
    }
    let _ = writeln!(out, "tensor_parallel_degree = {}", plan.tp());
    if plan.tp() > 1 {
        let _ = writeln!(out, "enable_async_tensor_parallel = {}", plan.tp_comm_overlap());
    }
    let _ = writeln!(out, "context_parallel_degree = {}", plan.cp());
    if plan.cp() > 1 {
        // PyTorch context parallel: `alltoall` rotates key/value shards around the ring step by
        // step (ring attention); `allgather` would gather them all first.
        let _ = writeln!(out, "context_parallel_rotate_method = \"alltoall\"");
    }
    if run.model().moe().is_some() {
        let _ = writeln!(out, "expert_parallel_degree = {}", plan.ep());
        let _ = writeln!(out, "expert_tensor_parallel_degree = {}", plan.etp());
        if plan.expert_dispatch() == ExpertDispatch::Deduplicated {
            let _ = writeln!(out, "expert_parallel_comm_backend = \"deepep\"");
        }
    }
    let _ = writeln!(out, "pipeline_parallel_degree = {}", plan.pp());
    if plan.pp() > 1 {
        let schedule = match plan.schedule() {
            PipelineSchedule::Gpipe => "GPipe",
            PipelineSchedule::Interleaved => "Interleaved1F1B",
            _ => "1F1B",
        };
        let _ = writeln!(out, "pipeline_parallel_schedule = \"{schedule}\"");
        let _ = writeln!(out, "pipeline_parallel_microbatch_size = {}", training.micro_batch());
        // torchtitan counts the embedding and the loss as layers when its first and last stages
        // hold one layer less, which is meshplan's embedding-and-loss split.
        let less = u64::from(plan.pipeline_split() == PipelineSplit::EmbeddingAndLoss);
        let units = run.model().num_layers() + 2 * less;
        let _ = writeln!(
            out,
            "pipeline_parallel_layers_per_stage = {}",
            units / (plan.pp() * plan.vp())
        );
        let _ = writeln!(out, "pipeline_parallel_first_stage_less_layers = {less}");
        let _ = writeln!(out, "pipeline_parallel_last_stage_less_layers = {less}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "[activation_checkpoint]");
    let mode = match plan.recompute() {
        RecomputeKind::None => "none",
        // The attention-core kind is refused by the capability table before this is written.
        RecomputeKind::Op | RecomputeKind::Selective => "selective",
        RecomputeKind::Full => "full",
    };
    let _ = writeln!(out, "mode = \"{mode}\"");
    if plan.recompute() == RecomputeKind::Op {
        // Per-op SAC: torchtitan's default option "2" would instead checkpoint every second
        // layer whole.
        let _ = writeln!(out, "selective_ac_option = \"op\"");
    }
    if plan.tp_comm_overlap() && plan.tp() > 1 {
        let _ = writeln!(out);
        let _ = writeln!(out, "[compile]");
        let _ = writeln!(out, "enable = true");
        let _ = writeln!(out, "components = [\"model\", \"loss\"]");
    }
    match training.precision() {
        Precision::Fp8Current => {
            let _ = writeln!(out);
            let _ = writeln!(out, "[model]");
            let _ = writeln!(out, "converters = [\"quantize.linear.float8\"]");
            let _ = writeln!(out);
            // Tensorwise scaling is the converter's path without a `recipe_name`; it refuses a
            // recipe name together with the FSDP float8 all-gather.
            let fsdp = plan.sharding() == Sharding::Full;
            let _ = writeln!(out, "[quantize.linear.float8]");
            let _ = writeln!(out, "enable_fsdp_float8_all_gather = {fsdp}");
            let _ = writeln!(out, "precompute_float8_dynamic_scale_for_fsdp = {fsdp}");
        }
        Precision::Mxfp8 => {
            let _ = writeln!(out);
            let _ = writeln!(out, "[model]");
            let _ = writeln!(out, "converters = [\"quantize.linear.mx\"]");
            let _ = writeln!(out);
            let _ = writeln!(out, "[quantize.linear.mx]");
            let _ = writeln!(out, "recipe_name = \"mxfp8_cublas\"");
        }
        _ => {}
    }
    out
}

//! One training step's time, assembled from the per-layer tables: every stage's per-micro-batch
//! work, the pipeline schedule (1F1B or interleaved 1F1B), exposed communication and the
//! optimizer.
//!
//! The pipeline runs `m` micro-batches at the pace of its slowest stage; filling and draining it
//! costs the other stages' work once, divided by the interleaving degree: for equal stages this is
//! the closed-form bubble `(p - 1) / (v m)` of the ideal time (Narayanan et al. 2021). Data-parallel
//! communication hides under the backward (gradient reduction) or forward (parameter gather) of a
//! micro-batch on the first stage, which finishes last; only the remainder is exposed.
//!
//! The closed form prices every schedule as 1F1B (or interleaved 1F1B when vp > 1): it is the fast
//! path a search ranks candidates with. What a schedule changes beyond that (zero-bubble's deferred
//! weight gradients, DualPipe's two directions, GPipe's memory) is the simulator's (`crate::sim`).

use crate::cost::breakdown::{Throughput, TimeBreakdown};
use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::kernels::memory_time;
use crate::cost::memory::{Params, layer_input_bytes, segment_params, shard_counts};
use crate::cost::work::{OVERLAP_EFFICIENCY, Tables, Work, segment_work, stage_segments};
use crate::plan::{Precision, RecomputeKind, Sharding};
use crate::run::Run;
use crate::units::{Bytes, Seconds};

/// HBM traffic of an Adam step per parameter of the shard being updated, besides the moments:
/// read the FP32 gradient and master weight (8 bytes), write the master weight (4) and the 16-bit
/// weight (2). Each moment is read and written once more at its own precision (30 bytes in all
/// with FP32 moments).
const ADAM_BYTES_PER_SHARD_PARAM: f64 = 14.0;
/// HBM traffic per parameter of the whole gradient buffer: the gradient-norm read and the zeroing
/// write of the FP32 buffer.
const GRADIENT_BUFFER_BYTES_PER_PARAM: f64 = 8.0;

/// Time of one optimizer step, broken down.
pub fn step_time(run: &Run) -> TimeBreakdown {
    step_time_with(run, &Tables::new(run))
}

/// [`step_time`] from op tables already built for the run.
pub fn step_time_with(run: &Run, tables: &Tables) -> TimeBreakdown {
    let plan = run.plan();
    let segments = stage_segments(run);
    let params: Vec<Params> = segments.iter().map(|segment| segment_params(run, segment)).collect();
    let stages: Vec<Work> =
        segments.iter().map(|segment| segment_work(run, tables, *segment)).collect();
    let critical = stages
        .iter()
        .copied()
        .max_by(|a, b| a.total().value().total_cmp(&b.total().value()))
        .unwrap_or_default();
    let m = plan.num_microbatches() as f64;
    let all_stages: Seconds = stages.iter().map(Work::total).sum();
    let first = stages.first().copied().unwrap_or_default();
    TimeBreakdown {
        forward: critical.forward * m,
        backward: critical.backward * m,
        recompute: critical.recompute * m,
        tp_exposed: (critical.forward_tp + critical.backward_tp) * m,
        cp_exposed: (critical.forward_cp + critical.backward_cp) * m,
        ep_exposed: (critical.forward_ep + critical.backward_ep) * m,
        pp_exposed: pipeline_comm(run),
        dp_exposed: data_parallel_comm(run, &first, params[0], segments[0].layers),
        pipeline_bubble: (all_stages - critical.total()) / plan.vp() as f64,
        optimizer: params
            .iter()
            .map(|&stage| optimizer_time_for(run, stage))
            .fold(Seconds::ZERO, Seconds::max),
    }
}

/// Send/receive time on the pipeline's critical path.
fn pipeline_comm(run: &Run) -> Seconds {
    let plan = run.plan();
    if plan.pp() == 1 {
        return Seconds::ZERO;
    }
    let transfer = p2p_transfer(run);
    let (m, pp, vp) = (plan.num_microbatches() as f64, plan.pp() as f64, plan.vp() as f64);
    if plan.vp() == 1 {
        // Plain 1F1B blocks on every send/receive pair: one forward and one backward transfer per
        // micro-batch, plus the fill and drain.
        transfer * (2.0 * (m + pp - 1.0))
    } else {
        // Interleaved 1F1B overlaps steady-state transfers with compute; the first micro-batch's
        // forward and the last one's backward still cross every chunk boundary in sequence.
        transfer * (2.0 * (pp * vp - 1.0))
    }
}

/// One pipeline send/receive of a micro-batch's activations (or their gradients) between
/// neighbouring stages, which sit `tp x cp x dp` ranks apart in Megatron-LM's rank order.
pub fn p2p_transfer(run: &Run) -> Seconds {
    let plan = run.plan();
    let bytes = p2p_bytes(run);
    let group = Group { size: 2, stride: plan.tp() * plan.cp() * plan.dp() };
    collective_time(run.cluster().interconnect(), Collective::SendRecv, group, bytes)
}

/// Bytes of one pipeline send: a micro-batch's activations, split by TP under sequence parallelism.
pub fn p2p_bytes(run: &Run) -> Bytes {
    layer_input_bytes(run)
}

/// The data-parallel collectives over `params` parameters, each as one un-overlapped duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataParallelCollectives {
    /// Gradient all-reduce over the sharding group (plain DDP).
    pub all_reduce: Seconds,
    /// Gradient reduce-scatter over the sharding group (ZeRO / FSDP).
    pub reduce_scatter: Seconds,
    /// 16-bit parameter all-gather over the sharding group.
    pub all_gather: Seconds,
    /// Hybrid sharding: the shard's all-reduce across replicas.
    pub replica_reduce: Seconds,
}

/// The collectives that synchronize a rank's parameters across data-parallel ranks: dense
/// parameters over the (hybrid-)shard group of `dp x cp` ranks, routed-expert parameters over the
/// expert-data-parallel ranks (`edp`, laid out `etp x ep` ranks apart). The two run one after the
/// other on the same stream.
pub fn data_parallel_collectives(run: &Run, params: Params) -> DataParallelCollectives {
    let plan = run.plan();
    let links = run.cluster().interconnect();
    let grad_bytes_per_param = if plan.grad_reduce_in_fp32() { 4.0 } else { 2.0 };
    let shard = Group { size: plan.shard_group() * plan.cp(), stride: plan.tp() };
    let replicas = plan.dp() / plan.shard_group();
    let replicate = Group { size: replicas, stride: plan.tp() * plan.cp() * plan.shard_group() };
    let expert_shard = Group {
        size: (plan.edp() * plan.shard_group() / plan.dp()).max(1),
        stride: plan.etp() * plan.ep(),
    };
    let expert_replicas = Group {
        size: plan.edp() / expert_shard.size,
        stride: plan.etp() * plan.ep() * expert_shard.size,
    };
    let over = |params: f64, shard: Group, replicate: Group| {
        let grad_bytes = Bytes::new(params * grad_bytes_per_param);
        let param_bytes = Bytes::new(params * Precision::ACTIVATION_BYTES);
        DataParallelCollectives {
            all_reduce: collective_time(links, Collective::AllReduce, shard, grad_bytes),
            reduce_scatter: collective_time(links, Collective::ReduceScatter, shard, grad_bytes),
            all_gather: collective_time(links, Collective::AllGather, shard, param_bytes),
            replica_reduce: collective_time(
                links,
                Collective::AllReduce,
                replicate,
                grad_bytes / shard.size as f64,
            ),
        }
    };
    let dense = over(params.dense, shard, replicate);
    if params.expert <= 0.0 {
        return dense;
    }
    let expert = over(params.expert, expert_shard, expert_replicas);
    DataParallelCollectives {
        all_reduce: dense.all_reduce + expert.all_reduce,
        reduce_scatter: dense.reduce_scatter + expert.reduce_scatter,
        all_gather: dense.all_gather + expert.all_gather,
        replica_reduce: dense.replica_reduce + expert.replica_reduce,
    }
}

/// Data-parallel communication not hidden under the first stage's compute.
fn data_parallel_comm(run: &Run, first: &Work, params: Params, layers: f64) -> Seconds {
    let plan = run.plan();
    let DataParallelCollectives { all_reduce, reduce_scatter, all_gather, replica_reduce } =
        data_parallel_collectives(run, params);
    let m = plan.num_microbatches() as f64;
    let window_backward = (first.backward + first.recompute) * OVERLAP_EFFICIENCY;
    let window_forward = first.forward * OVERLAP_EFFICIENCY;
    let exposed = |comm: Seconds, window: Seconds, overlap: bool| {
        if overlap { (comm - window).max(Seconds::ZERO) } else { comm }
    };
    match plan.sharding() {
        Sharding::None => exposed(all_reduce, window_backward, plan.overlap_grad_reduce()),
        Sharding::Optimizer => {
            exposed(reduce_scatter, window_backward, plan.overlap_grad_reduce())
                + exposed(all_gather, window_forward, plan.overlap_param_gather())
                + replica_reduce
        }
        Sharding::OptimizerAndGradients => {
            // Gradients are reduce-scattered after every micro-batch's backward.
            exposed(reduce_scatter, window_backward, plan.overlap_grad_reduce()) * m
                + exposed(all_gather, window_forward, plan.overlap_param_gather())
                + replica_reduce
        }
        Sharding::Full if !plan.reshard_after_forward() => {
            // Gathered once in the first micro-batch's forward and kept; gradients accumulate
            // unsharded and are reduce-scattered once, under the last backward.
            exposed(all_gather, window_forward, true)
                + all_gather / layers.max(1.0)
                + exposed(reduce_scatter, window_backward, plan.overlap_grad_reduce())
                + replica_reduce
        }
        Sharding::Full => {
            // Parameters are gathered layer by layer in the forward and again in the backward,
            // prefetched one layer ahead; the first layer's gather is never hidden.
            let per_microbatch = exposed(all_gather, window_forward, true)
                + exposed(all_gather + reduce_scatter, window_backward, true)
                + all_gather / layers.max(1.0);
            per_microbatch * m + replica_reduce
        }
    }
}

/// The Adam step and gradient bookkeeping of a rank holding `params` parameters.
pub fn optimizer_time_for(run: &Run, params: Params) -> Seconds {
    let plan = run.plan();
    let [_, _, (dense_shard, expert_shard)] = shard_counts(run);
    let (dense_shard, expert_shard) = match plan.sharding() {
        Sharding::None => (1.0, 1.0),
        _ => (dense_shard, expert_shard),
    };
    let shard_params = params.dense / dense_shard + params.expert / expert_shard;
    let moments = 2.0 * 2.0 * plan.adam_moments().bytes();
    let bytes = shard_params * (ADAM_BYTES_PER_SHARD_PARAM + moments)
        + params.total() * GRADIENT_BUFFER_BYTES_PER_PARAM;
    memory_time(run.cluster().gpu(), Bytes::new(bytes))
}

/// Throughput figures for a step.
pub fn throughput(run: &Run, time: &TimeBreakdown) -> Throughput {
    let model = run.model();
    let training = run.training();
    let plan = run.plan();
    let step = time.step_time();
    let gpus = run.cluster().num_gpus() as f64;
    let tokens = training.tokens_per_step() as f64;
    let seq = training.seq_len();
    let model_flops = model.training_flops_per_token(seq) * tokens;
    let layer_forward =
        model.layer_gemm_flops_per_token() + model.layer_attention_flops_per_token(seq);
    let recompute_per_token = match plan.recompute() {
        RecomputeKind::None => 0.0,
        RecomputeKind::Selective => {
            model.num_layers() as f64 * model.layer_attention_flops_per_token(seq)
        }
        RecomputeKind::Full => (plan.recompute_num_layers() * plan.pp()) as f64 * layer_forward,
        RecomputeKind::Op => model.num_layers() as f64 * 0.5 * model.layer_gemm_flops_per_token(),
    };
    let hardware_flops = model_flops + recompute_per_token * tokens;
    let peak = run.cluster().gpu().peak_bf16().value();
    let per_gpu = |flops: f64| flops / step.value() / gpus;
    Throughput {
        step_time: step,
        tokens_per_sec_per_gpu: tokens / step.value() / gpus,
        model_tflops_per_gpu: per_gpu(model_flops) / 1e12,
        mfu_pct: per_gpu(model_flops) / peak * 100.0,
        hfu_pct: per_gpu(hardware_flops) / peak * 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::memory::stage_params;
    use crate::plan::PlanSpec;
    use crate::presets;
    use crate::run::test_run;

    fn run(plan: PlanSpec, gpus: i64, global_batch: i64) -> Run {
        test_run(presets::model("llama3.1-8b").unwrap(), gpus, 8192, global_batch, 1, plan)
    }

    #[test]
    fn without_a_pipeline_there_is_no_bubble_and_no_send_receive() {
        let time = step_time(&run(PlanSpec { tp: Some(8), ..PlanSpec::default() }, 64, 64));
        assert_eq!(time.pipeline_bubble, Seconds::ZERO);
        assert_eq!(time.pp_exposed, Seconds::ZERO);
    }

    #[test]
    fn unoverlapped_distributed_optimizer_exposes_its_whole_reduce_scatter_and_gather() {
        let plan = PlanSpec {
            tp: Some(8),
            overlap_grad_reduce: Some(false),
            overlap_param_gather: Some(false),
            ..PlanSpec::default()
        };
        let run = run(plan, 64, 64);
        let links = run.cluster().interconnect();
        let params = stage_params(&run, 0).total();
        let group = Group { size: 8, stride: 8 };
        let expected =
            collective_time(links, Collective::ReduceScatter, group, Bytes::new(params * 4.0))
                + collective_time(links, Collective::AllGather, group, Bytes::new(params * 2.0));
        assert!((step_time(&run).dp_exposed - expected).value().abs() < 1e-12);
        // Overlapped, most of it hides under the first stage's compute.
        let overlapped = self::run(PlanSpec { tp: Some(8), ..PlanSpec::default() }, 64, 64);
        assert!(step_time(&overlapped).dp_exposed < expected);
    }

    #[test]
    fn full_recompute_reruns_the_forward_of_every_layer() {
        let plan =
            PlanSpec { tp: Some(8), recompute: Some(RecomputeKind::Full), ..PlanSpec::default() };
        let time = step_time(&run(plan, 8, 8));
        // The recomputed forward is the layers' forward, without the embedding and the logit head.
        let ratio = time.recompute / time.forward;
        assert!(ratio > 0.85 && ratio < 1.0, "recompute / forward = {ratio}");
    }

    #[test]
    fn per_op_checkpointing_reruns_half_the_matmuls_and_the_element_wise_ops() {
        let recompute = |kind| {
            let plan = PlanSpec { recompute: Some(kind), ..PlanSpec::default() };
            step_time(&run(plan, 8, 8)).recompute
        };
        let (selective, op, full) = (
            recompute(RecomputeKind::Selective),
            recompute(RecomputeKind::Op),
            recompute(RecomputeKind::Full),
        );
        // The attention core alone < half the matmuls and the norms < the whole forward.
        assert!(selective < op && op < full, "{selective:?} {op:?} {full:?}");
        let run = run(PlanSpec { recompute: Some(RecomputeKind::Op), ..PlanSpec::default() }, 8, 8);
        let layer = &crate::cost::work::Tables::new(&run).layer.forward;
        let gemms = layer.compute - layer.attention - layer.memory;
        let per_layer = gemms * 0.5 + layer.memory;
        let layers = run.model().num_layers() as f64;
        let expected = per_layer * layers * run.plan().num_microbatches() as f64;
        assert!((op - expected).value().abs() < 1e-9 * expected.value());
    }

    #[test]
    fn throughput_is_the_step_tokens_over_time_and_gpus() {
        let run = run(PlanSpec { tp: Some(2), pp: Some(2), ..PlanSpec::default() }, 16, 64);
        let time = step_time(&run);
        let throughput = throughput(&run, &time);
        let tokens = throughput.tokens_per_sec_per_gpu * time.step_time().value() * 16.0;
        assert!((tokens - 64.0 * 8192.0).abs() < 1e-6);
        assert!((throughput.hfu_pct - throughput.mfu_pct).abs() < 1e-12);
    }
}

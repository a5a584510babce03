//! One training step's time, assembled from the per-layer tables: every stage's per-micro-batch
//! work, the pipeline schedule (1F1B or interleaved 1F1B), exposed communication and the
//! optimizer.
//!
//! The pipeline runs `m` micro-batches at the pace of its slowest stage; filling and draining it
//! costs the other stages' work once, divided by the interleaving degree: for equal stages this is
//! the closed-form bubble `(p - 1) / (v m)` of the ideal time (Narayanan et al. 2021). Data-parallel
//! communication hides under the backward (gradient reduction) or forward (parameter gather) of a
//! micro-batch on the first stage, which finishes last; only the remainder is exposed.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::kernels::memory_time;
use crate::cost::layer::{self, OpKind, OpTable, Phase};
use crate::cost::memory::stage_params;
use crate::estimate::{Throughput, TimeBreakdown};
use crate::plan::{Precision, RecomputeKind, Sharding};
use crate::run::Run;
use crate::units::{Bytes, Seconds};

/// Fraction of a compute window that can hide communication: collective kernels take SMs and
/// memory bandwidth from the compute they overlap. Galvatron calibrates this as a 1.1-1.3x
/// slowdown of overlapped compute (reference/peers.md); 1 / 1.15 is taken.
pub const OVERLAP_EFFICIENCY: f64 = 1.0 / 1.15;
/// Fraction of TP communication hidden by `--tp-comm-overlap` (Transformer Engine userbuffers
/// pipeline the all-gather / reduce-scatter with GEMM chunks; the first and last chunks stay
/// exposed).
pub const TP_COMM_OVERLAP_HIDDEN: f64 = 0.8;
/// HBM traffic of an Adam step per parameter of the shard being updated: read the FP32 gradient,
/// master weight and two moments (16 bytes), write the last three (12) and the 16-bit weight (2).
const ADAM_BYTES_PER_SHARD_PARAM: f64 = 30.0;
/// HBM traffic per parameter of the whole gradient buffer: the gradient-norm read and the zeroing
/// write of the FP32 buffer.
const GRADIENT_BUFFER_BYTES_PER_PARAM: f64 = 8.0;

/// One stage's work for one micro-batch.
#[derive(Debug, Clone, Copy, Default)]
struct StageWork {
    forward: Seconds,
    backward: Seconds,
    recompute: Seconds,
    tp_exposed: Seconds,
    cp_exposed: Seconds,
}

impl StageWork {
    fn total(&self) -> Seconds {
        self.forward + self.backward + self.recompute + self.tp_exposed + self.cp_exposed
    }
}

fn exposed_tp(run: &Run, time: Seconds) -> Seconds {
    if run.plan().tp_comm_overlap() { time * (1.0 - TP_COMM_OVERLAP_HIDDEN) } else { time }
}

fn stage_work(run: &Run, stage: u64, tables: &Tables) -> StageWork {
    let plan = run.plan();
    let layers = run.stage_layers(stage) as f64;
    let recomputed = (plan.recompute_num_layers() as f64).min(layers);
    let layer = &tables.layer;
    let mut extras: Vec<&OpTable> = Vec::new();
    if stage == 0 {
        extras.push(&tables.embedding);
    }
    if stage + 1 == plan.pp() {
        extras.push(&tables.head);
    }
    let extra = |f: &dyn Fn(&OpTable) -> Seconds| extras.iter().map(|t| f(t)).sum::<Seconds>();
    let tp_forward = layer.time(Phase::Forward, OpKind::TpComm);
    let recompute = match plan.recompute() {
        RecomputeKind::None => Seconds::ZERO,
        RecomputeKind::Selective => layer.time(Phase::Forward, OpKind::Attention) * layers,
        RecomputeKind::Full => layer.compute(Phase::Forward) * recomputed,
    };
    let recompute_tp = match plan.recompute() {
        RecomputeKind::Full => tp_forward * recomputed,
        _ => Seconds::ZERO,
    };
    let tp = (tp_forward + layer.time(Phase::Backward, OpKind::TpComm)) * layers
        + recompute_tp
        + extra(&|t| {
            t.time(Phase::Forward, OpKind::TpComm) + t.time(Phase::Backward, OpKind::TpComm)
        });
    // Ring attention overlaps each key/value transfer with the attention block it feeds.
    let hidden = |phase| {
        (layer.time(phase, OpKind::CpComm)
            - layer.time(phase, OpKind::Attention) * OVERLAP_EFFICIENCY)
            .max(Seconds::ZERO)
    };
    StageWork {
        forward: layer.compute(Phase::Forward) * layers + extra(&|t| t.compute(Phase::Forward)),
        backward: layer.compute(Phase::Backward) * layers + extra(&|t| t.compute(Phase::Backward)),
        recompute,
        tp_exposed: exposed_tp(run, tp),
        cp_exposed: (hidden(Phase::Forward) + hidden(Phase::Backward)) * layers,
    }
}

struct Tables {
    layer: OpTable,
    embedding: OpTable,
    head: OpTable,
}

/// Time of one optimizer step, broken down.
pub fn step_time(run: &Run) -> TimeBreakdown {
    let plan = run.plan();
    let tables = Tables {
        layer: layer::transformer_layer(run),
        embedding: layer::embedding(run),
        head: layer::head(run),
    };
    let stages: Vec<StageWork> =
        (0..plan.pp()).map(|stage| stage_work(run, stage, &tables)).collect();
    let critical = stages
        .iter()
        .copied()
        .max_by(|a, b| a.total().value().total_cmp(&b.total().value()))
        .unwrap_or_default();
    let m = plan.num_microbatches() as f64;
    let all_stages: Seconds = stages.iter().map(StageWork::total).sum();
    let first = stages.first().copied().unwrap_or_default();
    TimeBreakdown {
        forward: critical.forward * m,
        backward: critical.backward * m,
        recompute: critical.recompute * m,
        tp_exposed: critical.tp_exposed * m,
        cp_exposed: critical.cp_exposed * m,
        pp_exposed: pipeline_comm(run),
        dp_exposed: data_parallel_comm(run, &first),
        pipeline_bubble: (all_stages - critical.total()) / plan.vp() as f64,
        optimizer: optimizer_time(run),
    }
}

/// Send/receive time on the pipeline's critical path.
fn pipeline_comm(run: &Run) -> Seconds {
    let plan = run.plan();
    if plan.pp() == 1 {
        return Seconds::ZERO;
    }
    let training = run.training();
    let sp = if plan.sequence_parallel() { plan.tp() } else { 1 };
    let tokens = (training.micro_batch() * training.seq_len()) as f64 / plan.cp() as f64;
    let bytes = Bytes::new(
        tokens * run.model().hidden_size() as f64 * Precision::ACTIVATION_BYTES / sp as f64,
    );
    let group = Group { size: 2, stride: plan.tp() * plan.cp() * plan.dp() };
    let transfer =
        collective_time(run.cluster().interconnect(), Collective::SendRecv, group, bytes);
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

/// Data-parallel communication not hidden under the first stage's compute.
fn data_parallel_comm(run: &Run, first: &StageWork) -> Seconds {
    let plan = run.plan();
    let links = run.cluster().interconnect();
    let params = stage_params(run, 0);
    let grad_bytes = Bytes::new(params * if plan.grad_reduce_in_fp32() { 4.0 } else { 2.0 });
    let param_bytes = Bytes::new(params * Precision::ACTIVATION_BYTES);
    let shard = Group { size: plan.shard_group() * plan.cp(), stride: plan.tp() };
    let replicas = plan.dp() / plan.shard_group();
    let replicate = Group { size: replicas, stride: plan.tp() * plan.cp() * plan.shard_group() };
    let m = plan.num_microbatches() as f64;
    let window_backward = (first.backward + first.recompute) * OVERLAP_EFFICIENCY;
    let window_forward = first.forward * OVERLAP_EFFICIENCY;
    let exposed = |comm: Seconds, window: Seconds, overlap: bool| {
        if overlap { (comm - window).max(Seconds::ZERO) } else { comm }
    };
    let reduce_scatter = collective_time(links, Collective::ReduceScatter, shard, grad_bytes);
    let all_gather = collective_time(links, Collective::AllGather, shard, param_bytes);
    // Hybrid sharding all-reduces each shard across the replicas once per step.
    let replica_reduce =
        collective_time(links, Collective::AllReduce, replicate, grad_bytes / shard.size as f64);
    match plan.sharding() {
        Sharding::None => {
            let all_reduce = collective_time(links, Collective::AllReduce, shard, grad_bytes);
            exposed(all_reduce, window_backward, plan.overlap_grad_reduce())
        }
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
            let layers = run.stage_layers(0) as f64;
            exposed(all_gather, window_forward, true)
                + all_gather / layers.max(1.0)
                + exposed(reduce_scatter, window_backward, plan.overlap_grad_reduce())
                + replica_reduce
        }
        Sharding::Full => {
            // Parameters are gathered layer by layer in the forward and again in the backward,
            // prefetched one layer ahead; the first layer's gather is never hidden.
            let layers = run.stage_layers(0) as f64;
            let per_microbatch = exposed(all_gather, window_forward, true)
                + exposed(all_gather + reduce_scatter, window_backward, true)
                + all_gather / layers.max(1.0);
            per_microbatch * m + replica_reduce
        }
    }
}

/// The Adam step and gradient bookkeeping on the stage with the most parameters.
fn optimizer_time(run: &Run) -> Seconds {
    let plan = run.plan();
    let params = (0..plan.pp()).map(|stage| stage_params(run, stage)).fold(0.0, f64::max);
    let shard = match plan.sharding() {
        Sharding::None => 1.0,
        _ => (plan.shard_group() * plan.cp()) as f64,
    };
    let bytes =
        params / shard * ADAM_BYTES_PER_SHARD_PARAM + params * GRADIENT_BUFFER_BYTES_PER_PARAM;
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
    use crate::hardware::ClusterSpec;
    use crate::plan::{PlanSpec, TrainingSpec};
    use crate::{RunSpec, presets};

    fn run(plan: PlanSpec, gpus: i64, global_batch: i64) -> Run {
        Run::from_spec(&RunSpec {
            model: presets::model("llama3.1-8b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: gpus },
            training: TrainingSpec {
                seq_len: 8192,
                global_batch,
                micro_batch: Some(1),
                precision: None,
            },
            plan,
        })
        .unwrap()
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
        let params = stage_params(&run, 0);
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
    fn throughput_is_the_step_tokens_over_time_and_gpus() {
        let run = run(PlanSpec { tp: Some(2), pp: Some(2), ..PlanSpec::default() }, 16, 64);
        let time = step_time(&run);
        let throughput = throughput(&run, &time);
        let tokens = throughput.tokens_per_sec_per_gpu * time.step_time().value() * 16.0;
        assert!((tokens - 64.0 * 8192.0).abs() < 1e-6);
        assert!((throughput.hfu_pct - throughput.mfu_pct).abs() < 1e-12);
    }
}

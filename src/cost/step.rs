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

use std::sync::OnceLock;

use crate::cost::breakdown::{Throughput, TimeBreakdown};
use crate::cost::imbalance::DataImbalance;
use crate::cost::priced::PricedRun;
use crate::cost::step_terms::DataParallelCollectives;
use crate::cost::work::{OVERLAP_EFFICIENCY, Tables, Work};
use crate::hardware::PrecisionClass;
use crate::plan::{RecomputeKind, Sharding};
use crate::run::Run;
use crate::units::Seconds;

/// Time of one optimizer step, broken down.
pub fn step_time(run: &Run) -> TimeBreakdown {
    step_time_from(&PricedRun::new(run))
}

/// [`step_time`] from op tables already built for the run.
pub fn step_time_with(run: &Run, tables: &Tables) -> TimeBreakdown {
    step_time_from(&PricedRun::with_tables(run, tables))
}

/// The closed-form step time of a priced run.
pub fn step_time_from(priced: &PricedRun) -> TimeBreakdown {
    let run = priced.run();
    let plan = run.plan();
    let stages = priced.stages();
    let (critical, all_stages) = priced.critical_stage();
    let m = plan.num_microbatches() as f64;
    let first = stages.first().map(|stage| stage.work).unwrap_or_default();
    let pipeline_bubble = priced.fill_and_drain_of(&critical, all_stages);
    TimeBreakdown {
        forward: critical.forward * m,
        backward: critical.backward * m,
        recompute: critical.recompute * m,
        tp_exposed: (critical.forward_tp + critical.backward_tp) * m,
        cp_exposed: (critical.forward_cp + critical.backward_cp) * m,
        ep_exposed: (critical.forward_ep + critical.backward_ep) * m,
        pp_exposed: pipeline_comm(priced),
        dp_exposed: data_parallel_comm(priced, &first),
        pipeline_bubble,
        data_imbalance: priced
            .data_imbalance()
            .map_or(Seconds::ZERO, |imbalance| imbalance.extra(pipeline_bubble)),
        // The slowest optimizer step, each distinct stage priced once (the middle ones are equal).
        optimizer: stages
            .iter()
            .enumerate()
            .filter(|(i, stage)| *i == 0 || stages[i - 1].params != stage.params)
            .map(|(_, stage)| priced.optimizer_time(stage.params))
            .fold(Seconds::ZERO, Seconds::max),
    }
}

/// The closed form `base` with the data's imbalance `imbalance` instead of its own: the closed
/// form of the same run re-packing its documents over another window, which changes the data's
/// balance and no other term.
pub fn step_time_with_imbalance(
    base: &TimeBreakdown,
    imbalance: Option<DataImbalance>,
) -> TimeBreakdown {
    let data_imbalance =
        imbalance.map_or(Seconds::ZERO, |imbalance| imbalance.extra(base.pipeline_bubble));
    TimeBreakdown { data_imbalance, ..*base }
}

/// Send/receive time on the pipeline's critical path.
fn pipeline_comm(priced: &PricedRun) -> Seconds {
    let plan = priced.run().plan();
    if plan.pp() == 1 {
        return Seconds::ZERO;
    }
    let transfer = priced.transfer();
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
fn data_parallel_comm(priced: &PricedRun, first: &Work) -> Seconds {
    let plan = priced.run().plan();
    let layers = priced.stages().first().map_or(0.0, |stage| stage.segment.all.layers);
    let DataParallelCollectives { all_reduce, reduce_scatter, all_gather, replica_reduce } =
        priced.first_stage_collectives();
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

/// Throughput figures for a step.
pub fn throughput(run: &Run, time: &TimeBreakdown) -> Throughput {
    let model = run.model();
    let training = run.training();
    let plan = run.plan();
    let step = time.step_time();
    let gpus = run.cluster().num_gpus() as f64;
    // Padded sequences train only their documents' tokens; under a document mask attention
    // does the FLOPs of the document pieces, the mean sequence's share of a full one's.
    // Variable micro-batches train what their own draws hold, and each document's attention
    // over its own tokens is what the model needs of it (not its padding's).
    let dynamic = run.dynamic_batches();
    let dynamic = dynamic.as_deref().and_then(OnceLock::get);
    let attention_share = match dynamic {
        Some(batches) => batches.attention_share,
        None => run.data().map_or(1.0, |data| data.loads.mean[0]),
    };
    let tokens = training.tokens_per_step() as f64 * run.trained_fraction();
    // The tokens the GPUs compute: every slot of the step's sequences, or what the variable
    // micro-batches hold; those beyond the trained ones are padding.
    let computed_fraction = dynamic.map_or(1.0, |batches| batches.computed_fraction);
    let padding = (training.tokens_per_step() as f64 * computed_fraction - tokens).max(0.0);
    let seq = training.seq_len();
    let attention_per_token =
        model.attention_layers() as f64 * model.layer_attention_flops_per_token(seq);
    // Without data the share is one and nothing is masked away.
    let masked_away = 3.0 * attention_per_token * (1.0 - attention_share);
    let model_flops = (model.training_flops_per_token(seq) - masked_away) * tokens;
    let layer_forward = model.layer_forward_flops_per_token(seq);
    let recompute_per_token = match plan.recompute() {
        RecomputeKind::None => 0.0,
        RecomputeKind::Selective => attention_per_token * attention_share,
        RecomputeKind::Full => (plan.recompute_num_layers() * plan.pp()) as f64 * layer_forward,
        RecomputeKind::Op => model.num_layers() as f64 * 0.5 * model.layer_gemm_flops_per_token(),
    };
    // Hardware FLOPs add what the GPUs compute beyond the model's: the recompute of the trained
    // tokens, and the padding's forward and backward through every layer's linear work (not its
    // attention, which the fused kernel skips past the documents' offsets, nor its recompute).
    let linear_per_token = model.training_flops_per_token(seq) - 3.0 * attention_per_token;
    let hardware_flops =
        model_flops + recompute_per_token * tokens + linear_per_token.max(0.0) * padding;
    // MFU against the dense peak of the precision the GEMMs run in (validation guarantees the GPU
    // has one), so that an FP8 or FP4 run is not measured against the slower BF16 peak.
    let gpu = run.cluster().gpu();
    let class = training.precision().gemm_class();
    let (peak, basis) = match gpu.peak(class) {
        Some(peak) => (peak.value(), class.name()),
        None => (gpu.peak_bf16().value(), PrecisionClass::Bits16.name()),
    };
    let per_gpu = |flops: f64| flops / step.value() / gpus;
    Throughput {
        step_time: step,
        tokens_per_sec_per_gpu: tokens / step.value() / gpus,
        model_tflops_per_gpu: per_gpu(model_flops) / 1e12,
        mfu_pct: per_gpu(model_flops) / peak * 100.0,
        hfu_pct: per_gpu(hardware_flops) / peak * 100.0,
        peak_tflops: peak / 1e12,
        peak_basis: basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::collective::{Collective, Group, collective_time};
    use crate::cost::memory::stage_params;
    use crate::plan::PlanSpec;
    use crate::presets;
    use crate::run::test_run;
    use crate::units::Bytes;

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
        let layer = &crate::cost::work::Tables::new(&run).layers.layer.forward;
        let gemms = layer.compute - layer.attention - layer.memory;
        let per_layer = gemms * 0.5 + layer.memory;
        let layers = run.model().num_layers() as f64;
        let expected = per_layer * layers * run.plan().num_microbatches() as f64;
        assert!((op - expected).value().abs() < 1e-9 * expected.value());
    }

    /// Documents of half a sequence, each padded to a whole one: the GPUs compute twice the
    /// tokens they train, and hardware FLOPs count the padding's linear work, not its attention.
    #[test]
    fn hardware_flops_count_the_padding_the_gpus_compute() {
        use crate::data::{Batching, DataSpec, LengthBinSpec};
        let mut spec = crate::run::RunSpec {
            model: presets::model("llama3.1-8b").unwrap(),
            cluster: crate::hardware::ClusterSpec {
                gpu: presets::gpu("h100-sxm").unwrap(),
                num_gpus: 8,
            },
            training: crate::plan::TrainingSpec {
                seq_len: 8192,
                global_batch: 64,
                micro_batch: Some(1),
                precision: None,
            },
            plan: PlanSpec::default(),
            data: Some(DataSpec {
                histogram: Some(vec![LengthBinSpec { min: 4096, max: 4096, count: 1 }]),
                batching: Some(Batching::Pad),
                ..DataSpec::default()
            }),
        };
        let padded = Run::from_spec(&spec).unwrap();
        assert!((padded.trained_fraction() - 0.5).abs() < 1e-12);
        let t = throughput(&padded, &step_time(&padded));
        let model = padded.model();
        let attention =
            model.attention_layers() as f64 * model.layer_attention_flops_per_token(8192);
        let linear = model.training_flops_per_token(8192) - 3.0 * attention;
        let tokens = 64.0 * 8192.0;
        let model_flops_per_gpu = t.model_tflops_per_gpu * 1e12;
        let padding_per_gpu = linear * tokens * 0.5 / t.step_time.value() / 8.0;
        let expected = (model_flops_per_gpu + padding_per_gpu) / (t.peak_tflops * 1e12) * 100.0;
        assert!((t.hfu_pct - expected).abs() < 1e-9 * expected, "{} vs {expected}", t.hfu_pct);
        assert!(t.hfu_pct > 1.5 * t.mfu_pct, "HFU {} MFU {}", t.hfu_pct, t.mfu_pct);
        // Concatenated documents fill every slot: nothing is padding.
        spec.data.as_mut().unwrap().batching = Some(Batching::Concat);
        let concat = Run::from_spec(&spec).unwrap();
        let t = throughput(&concat, &step_time(&concat));
        assert!((t.hfu_pct - t.mfu_pct).abs() < 1e-12);
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

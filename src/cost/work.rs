//! The work of one micro-batch through a run of consecutive layers (a pipeline stage or a virtual
//! chunk), by phase: the numbers both the closed-form step time (`step.rs`) and the event
//! simulator (`crate::sim`) are built from, so the two share one cost model.

use crate::cost::layer::{self, OpKind, OpTable, Phase};
use crate::plan::RecomputeKind;
use crate::run::Run;
use crate::units::Seconds;

/// Fraction of a compute window that can hide communication: collective kernels take SMs and
/// memory bandwidth from the compute they overlap. Galvatron calibrates this as a 1.1-1.3x
/// slowdown of overlapped compute (reference/peers.md); 1 / 1.15 is taken.
pub const OVERLAP_EFFICIENCY: f64 = 1.0 / 1.15;
/// Fraction of TP communication hidden by `--tp-comm-overlap` (Transformer Engine userbuffers
/// pipeline the all-gather / reduce-scatter with GEMM chunks; the first and last chunks stay
/// exposed).
pub const TP_COMM_OVERLAP_HIDDEN: f64 = 0.8;

/// The op tables of one run: a transformer layer, the embedding and the head.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// One transformer layer: an MoE layer when the model has experts.
    pub layer: OpTable,
    /// One dense-MLP layer of an MoE model (its leading dense layers); `None` for dense models,
    /// whose `layer` is already dense.
    pub dense_layer: Option<OpTable>,
    /// The input embedding (first stage).
    pub embedding: OpTable,
    /// Final norm, logits and loss (last stage).
    pub head: OpTable,
    /// What a multi-token-prediction module adds to its transformer layer and head: the norms
    /// and the `2h -> h` projection.
    pub mtp: OpTable,
}

impl Tables {
    /// Builds the tables of a run.
    pub fn new(run: &Run) -> Tables {
        let moe = run.model().moe().is_some();
        Tables {
            layer: layer::transformer_layer(run, !moe),
            dense_layer: moe.then(|| layer::transformer_layer(run, true)),
            embedding: layer::embedding(run),
            head: layer::head(run),
            mtp: layer::mtp_projection(run),
        }
    }

    /// Every table a segment runs, with how many times one micro-batch runs it; the flag marks
    /// transformer layers (what recomputation reruns).
    pub fn parts(&self, run: &Run, segment: &Segment) -> Vec<(&OpTable, f64, bool)> {
        let mut parts = Vec::with_capacity(6);
        match &self.dense_layer {
            Some(dense) => {
                parts.push((&self.layer, segment.layers - segment.dense_layers, true));
                parts.push((dense, segment.dense_layers, true));
            }
            None => parts.push((&self.layer, segment.layers, true)),
        }
        if segment.first {
            parts.push((&self.embedding, 1.0, false));
        }
        if segment.last {
            let mtp = run.model().mtp_layers() as f64;
            parts.push((&self.head, 1.0 + mtp, false));
            if mtp > 0.0 {
                parts.push((&self.layer, mtp, false));
                parts.push((&self.mtp, mtp, false));
            }
        }
        parts
    }
}

/// A run of consecutive layers priced together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Transformer layers in it.
    pub layers: f64,
    /// Layers among them with a dense MLP in an MoE model (0 for dense models).
    pub dense_layers: f64,
    /// Layers among them that recompute their forward under full recompute.
    pub recomputed_layers: f64,
    /// Whether it holds the input embedding.
    pub first: bool,
    /// Whether it holds the final norm, logits and loss.
    pub last: bool,
}

/// One micro-batch's work through a segment, by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    /// Forward compute.
    pub forward: Seconds,
    /// Exposed TP communication of the forward.
    pub forward_tp: Seconds,
    /// Exposed CP communication of the forward.
    pub forward_cp: Seconds,
    /// Exposed expert-parallel all-to-all of the forward.
    pub forward_ep: Seconds,
    /// Backward compute (input and weight gradients).
    pub backward: Seconds,
    /// The weight-gradient GEMMs within `backward`.
    pub weight_gradient: Seconds,
    /// Forward work recomputed in the backward.
    pub recompute: Seconds,
    /// Exposed TP communication of the backward and of the recomputed forward.
    pub backward_tp: Seconds,
    /// Exposed CP communication of the backward.
    pub backward_cp: Seconds,
    /// Exposed expert-parallel all-to-all of the backward and of the recomputed forward.
    pub backward_ep: Seconds,
}

impl Work {
    /// Duration of the forward task.
    pub fn forward_task(&self) -> Seconds {
        self.forward + self.forward_tp + self.forward_cp + self.forward_ep
    }

    /// Duration of the full backward task (with recompute and its communication).
    pub fn backward_task(&self) -> Seconds {
        self.backward + self.recompute + self.backward_tp + self.backward_cp + self.backward_ep
    }

    /// Everything one micro-batch costs the segment.
    pub fn total(&self) -> Seconds {
        self.forward_task() + self.backward_task()
    }
}

fn exposed_tp(run: &Run, time: Seconds) -> Seconds {
    if run.plan().tp_comm_overlap() { time * (1.0 - TP_COMM_OVERLAP_HIDDEN) } else { time }
}

/// Ring attention overlaps each key/value transfer with the attention block it feeds; Ulysses
/// all-to-alls block the layer.
fn exposed_cp(layer: &OpTable, phase: Phase) -> Seconds {
    (layer.time(phase, OpKind::CpComm) - layer.time(phase, OpKind::Attention) * OVERLAP_EFFICIENCY)
        .max(Seconds::ZERO)
        + layer.time(phase, OpKind::CpAllToAll)
}

/// Expert-parallel all-to-all left exposed: all of it, or with `expert_comm_overlap` what the
/// other micro-batch's compute of the same layer cannot hide (DualPipe / Megatron-LM's
/// 1F1B all-to-all overlap run one micro-batch's dispatch under another's compute).
fn exposed_ep(run: &Run, layer: &OpTable, phase: Phase) -> Seconds {
    let comm = layer.time(phase, OpKind::EpComm);
    if run.plan().expert_comm_overlap() {
        (comm - layer.compute(phase) * OVERLAP_EFFICIENCY).max(Seconds::ZERO)
    } else {
        comm
    }
}

/// The work of one micro-batch through a segment.
pub fn segment_work(run: &Run, tables: &Tables, segment: Segment) -> Work {
    let plan = run.plan();
    let parts = tables.parts(run, &segment);
    let sum = |f: &dyn Fn(&OpTable) -> Seconds| parts.iter().map(|(t, n, _)| f(t) * *n).sum();
    let layers_only = |f: &dyn Fn(&OpTable) -> Seconds| -> Seconds {
        parts.iter().filter(|p| p.2).map(|(t, n, _)| f(t) * *n).sum()
    };
    let share = if segment.layers > 0.0 {
        segment.recomputed_layers.min(segment.layers) / segment.layers
    } else {
        0.0
    };
    let zero = Seconds::ZERO;
    let (recompute, recompute_tp, recompute_ep) = match plan.recompute() {
        RecomputeKind::None => (zero, zero, zero),
        RecomputeKind::Selective => {
            (layers_only(&|t| t.time(Phase::Forward, OpKind::Attention)), zero, zero)
        }
        RecomputeKind::Full => (
            layers_only(&|t| t.compute(Phase::Forward)) * share,
            layers_only(&|t| t.time(Phase::Forward, OpKind::TpComm)) * share,
            layers_only(&|t| exposed_ep(run, t, Phase::Forward)) * share,
        ),
    };
    let tp = |phase: Phase| exposed_tp(run, sum(&|t| t.time(phase, OpKind::TpComm)));
    let ep = |phase: Phase| sum(&|t| exposed_ep(run, t, phase));
    Work {
        forward: sum(&|t| t.compute(Phase::Forward)),
        forward_tp: tp(Phase::Forward),
        forward_cp: sum(&|t| exposed_cp(t, Phase::Forward)),
        forward_ep: ep(Phase::Forward),
        backward: sum(&|t| t.compute(Phase::Backward)),
        weight_gradient: sum(&|t| t.time(Phase::Backward, OpKind::WeightGradient)),
        recompute,
        backward_tp: tp(Phase::Backward) + exposed_tp(run, recompute_tp),
        backward_cp: sum(&|t| exposed_cp(t, Phase::Backward)),
        backward_ep: ep(Phase::Backward) + recompute_ep,
    }
}

/// The segment of a whole pipeline stage.
pub fn stage_segment(run: &Run, stage: u64) -> Segment {
    let layers = run.stage_layers(stage);
    let dense = stage_dense_layers(run, stage);
    Segment {
        layers: layers as f64,
        dense_layers: dense as f64,
        recomputed_layers: (run.plan().recompute_num_layers() as f64).min(layers as f64),
        first: stage == 0,
        last: stage + 1 == run.plan().pp(),
    }
}

/// Dense-MLP layers (of an MoE model) held by pipeline stage `stage` over its virtual chunks.
fn stage_dense_layers(run: &Run, stage: u64) -> u64 {
    if run.model().moe().is_none() {
        return 0;
    }
    let pp = run.plan().pp();
    let mut first = 0;
    let mut dense = 0;
    for (position, layers) in run.path_layers(pp * run.plan().vp()).into_iter().enumerate() {
        if position as u64 % pp == stage {
            dense += run.dense_layers_in(first, layers);
        }
        first += layers;
    }
    dense
}

/// The segments of `positions` consecutive chunks along a micro-batch's path, with the full
/// recompute share of a stage applied to each chunk.
pub fn path_segments(run: &Run, positions: u64) -> Vec<Segment> {
    let plan = run.plan();
    let layers = run.path_layers(positions);
    let stage_layers = layers.iter().sum::<u64>() as f64 / plan.pp() as f64;
    let recompute_fraction = (plan.recompute_num_layers() as f64 / stage_layers).min(1.0);
    let moe = run.model().moe().is_some();
    let mut first_layer = 0;
    layers
        .iter()
        .enumerate()
        .map(|(position, &count)| {
            let dense = if moe { run.dense_layers_in(first_layer, count) } else { 0 };
            first_layer += count;
            Segment {
                layers: count as f64,
                dense_layers: dense as f64,
                recomputed_layers: count as f64 * recompute_fraction,
                first: position == 0,
                last: position as u64 + 1 == positions,
            }
        })
        .collect()
}

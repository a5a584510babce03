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
    /// One transformer layer.
    pub layer: OpTable,
    /// The input embedding (first stage).
    pub embedding: OpTable,
    /// Final norm, logits and loss (last stage).
    pub head: OpTable,
}

impl Tables {
    /// Builds the tables of a run.
    pub fn new(run: &Run) -> Tables {
        Tables {
            layer: layer::transformer_layer(run),
            embedding: layer::embedding(run),
            head: layer::head(run),
        }
    }
}

/// A run of consecutive layers priced together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Transformer layers in it.
    pub layers: f64,
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
}

impl Work {
    /// Duration of the forward task.
    pub fn forward_task(&self) -> Seconds {
        self.forward + self.forward_tp + self.forward_cp
    }

    /// Duration of the full backward task (with recompute and its communication).
    pub fn backward_task(&self) -> Seconds {
        self.backward + self.recompute + self.backward_tp + self.backward_cp
    }

    /// Everything one micro-batch costs the segment.
    pub fn total(&self) -> Seconds {
        self.forward_task() + self.backward_task()
    }
}

fn exposed_tp(run: &Run, time: Seconds) -> Seconds {
    if run.plan().tp_comm_overlap() { time * (1.0 - TP_COMM_OVERLAP_HIDDEN) } else { time }
}

/// Ring attention overlaps each key/value transfer with the attention block it feeds.
fn exposed_cp(layer: &OpTable, phase: Phase) -> Seconds {
    (layer.time(phase, OpKind::CpComm) - layer.time(phase, OpKind::Attention) * OVERLAP_EFFICIENCY)
        .max(Seconds::ZERO)
}

/// The work of one micro-batch through a segment.
pub fn segment_work(run: &Run, tables: &Tables, segment: Segment) -> Work {
    let plan = run.plan();
    let layer = &tables.layer;
    let layers = segment.layers;
    let recomputed = segment.recomputed_layers.min(layers);
    let mut extras: Vec<&OpTable> = Vec::new();
    if segment.first {
        extras.push(&tables.embedding);
    }
    if segment.last {
        extras.push(&tables.head);
    }
    let extra = |f: &dyn Fn(&OpTable) -> Seconds| extras.iter().map(|t| f(t)).sum::<Seconds>();
    let tp = |phase| {
        layer.time(phase, OpKind::TpComm) * layers + extra(&|t| t.time(phase, OpKind::TpComm))
    };
    let (recompute, recompute_tp) = match plan.recompute() {
        RecomputeKind::None => (Seconds::ZERO, Seconds::ZERO),
        RecomputeKind::Selective => {
            (layer.time(Phase::Forward, OpKind::Attention) * layers, Seconds::ZERO)
        }
        RecomputeKind::Full => (
            layer.compute(Phase::Forward) * recomputed,
            layer.time(Phase::Forward, OpKind::TpComm) * recomputed,
        ),
    };
    Work {
        forward: layer.compute(Phase::Forward) * layers + extra(&|t| t.compute(Phase::Forward)),
        forward_tp: exposed_tp(run, tp(Phase::Forward)),
        forward_cp: exposed_cp(layer, Phase::Forward) * layers,
        backward: layer.compute(Phase::Backward) * layers + extra(&|t| t.compute(Phase::Backward)),
        weight_gradient: layer.time(Phase::Backward, OpKind::WeightGradient) * layers
            + extra(&|t| t.time(Phase::Backward, OpKind::WeightGradient)),
        recompute,
        backward_tp: exposed_tp(run, tp(Phase::Backward) + recompute_tp),
        backward_cp: exposed_cp(layer, Phase::Backward) * layers,
    }
}

/// The segment of a whole pipeline stage.
pub fn stage_segment(run: &Run, stage: u64) -> Segment {
    let layers = run.stage_layers(stage) as f64;
    Segment {
        layers,
        recomputed_layers: (run.plan().recompute_num_layers() as f64).min(layers),
        first: stage == 0,
        last: stage + 1 == run.plan().pp(),
    }
}

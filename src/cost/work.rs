//! The work of one micro-batch through a run of consecutive layers (a pipeline stage or a virtual
//! chunk), by phase: the numbers both the closed-form step time (`step.rs`) and the event
//! simulator (`crate::sim`) are built from, so the two share one cost model.

use arrayvec::ArrayVec;

use crate::cost::document_attention::AttentionScale;
use crate::cost::layer::{self, OpTable, OpTotals, Phase, PhaseTimes, Rerun, Rows};
use crate::cost::sublayer::sublayer;
use crate::model::{SUBLAYER_KINDS, Sublayer, SublayerCounts};
use crate::plan::RecomputeKind;
use crate::run::{LayerMix, Run};
use crate::units::{Bytes, Seconds};

/// Fraction of a compute window that can hide communication: collective kernels take SMs and
/// memory bandwidth from the compute they overlap. Galvatron calibrates this as a 1.1-1.3x
/// slowdown of overlapped compute (reference/peers.md); 1 / 1.15 is taken.
pub const OVERLAP_EFFICIENCY: f64 = 1.0 / 1.15;
/// Fraction of TP communication hidden by `--tp-comm-overlap` (Transformer Engine userbuffers
/// pipeline the all-gather / reduce-scatter with GEMM chunks; the first and last chunks stay
/// exposed), when the GEMMs last long enough to hide it.
pub const TP_COMM_OVERLAP_HIDDEN: f64 = 0.8;

/// The op tables of one run: its layer tables, the embedding and the head.
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    /// The run's layer tables, in its own precision.
    pub layers: LayerTables,
    /// The input embedding (first stage).
    pub embedding: OpTotals,
    /// Final norm, logits and loss (last stage).
    pub head: OpTotals,
    /// What a multi-token-prediction module adds to its transformer layer and head: the norms
    /// and the `2h -> h` projection.
    pub mtp: OpTotals,
    /// The same layer tables priced in BF16, for the layers a low-precision plan keeps in BF16
    /// ([`crate::plan::Plan::bf16_layers`]); `None` when it keeps none.
    pub bf16: Option<Box<LayerTables>>,
}

/// A run's layer tables (the transformer layer, its dense-MLP layer, a hybrid model's kinds).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerTables {
    /// One transformer layer: an MoE layer when the model has experts.
    pub layer: OpTotals,
    /// One dense-MLP layer of an MoE model (its leading dense layers); `None` for dense models,
    /// whose `layer` is already dense, and for hybrid models, whose pattern places dense MLPs.
    pub dense_layer: Option<OpTotals>,
    /// A hybrid model's layers by kind ([`Sublayer::index`]); `None` for other models.
    pub sublayers: Option<Box<[OpTotals; SUBLAYER_KINDS]>>,
}

/// One table a segment runs, how many times one micro-batch runs it, and whether it is a
/// transformer layer (what recomputation reruns).
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// The table.
    pub table: &'a OpTotals,
    /// Runs per micro-batch (0 when the segment does not hold it).
    pub count: f64,
    /// Whether it is a transformer layer of the segment.
    pub layer: bool,
}

impl Tables {
    /// Builds the tables of a run: with a length distribution, attention as the mean sequence
    /// of its documents costs it, and with variable micro-batches everything as their mean slot
    /// ([`crate::cost::document_attention::attention_scale`]).
    pub fn new(run: &Run) -> Tables {
        let scale = crate::cost::document_attention::attention_scale(run);
        let priced = |table: OpTable| scaled(scale, table);
        Tables {
            layers: LayerTables::new(run, scale),
            embedding: priced(layer::embedding(run, Rows::TotalsOnly)),
            head: priced(layer::head(run, Rows::TotalsOnly)),
            // A model without MTP modules runs the table zero times: it is not built.
            mtp: if run.model().mtp_layers() > 0 {
                priced(layer::mtp_projection(run, Rows::TotalsOnly))
            } else {
                priced(OpTable::new(Rows::TotalsOnly))
            },
            bf16: (run.plan().bf16_layers() != (0, 0))
                .then(|| Box::new(LayerTables::new(&run.in_bf16(), scale))),
        }
    }

    /// Every table a segment runs, with how many times one micro-batch runs it (absent tables
    /// count zero times): a transformer's six parts, then a hybrid model's layer kinds, then the
    /// layers kept in BF16 by the BF16 tables.
    pub fn parts(&self, run: &Run, segment: &Segment) -> ArrayVec<Part<'_>, { MAX_PARTS }> {
        let mtp = if segment.last { run.model().mtp_layers() as f64 } else { 0.0 };
        let part = |table, count, layer| Part { table, count, layer };
        let mut parts = ArrayVec::new();
        // The layers kept in BF16 are priced by the BF16 tables, the rest by the run's own.
        let (rest, kept) = segment.split_bf16();
        let (rest, kept) = (rest.all, kept.all);
        self.layers.push_transformer(&rest, &mut parts);
        parts.extend([
            part(&self.embedding, if segment.first { 1.0 } else { 0.0 }, false),
            part(&self.head, if segment.last { 1.0 + mtp } else { 0.0 }, false),
            part(&self.layers.layer, mtp, false),
            part(&self.mtp, mtp, false),
        ]);
        self.layers.push_sublayers(&rest, &mut parts);
        if let Some(bf16) = &self.bf16 {
            bf16.push_transformer(&kept, &mut parts);
            bf16.push_sublayers(&kept, &mut parts);
        }
        parts
    }
}

/// The most parts a segment runs: the run's transformer layer, its dense-MLP layer, the
/// embedding, the head, an MTP module's layer and projection and a hybrid model's kinds, then
/// the same layer tables in BF16.
pub const MAX_PARTS: usize = 6 + SUBLAYER_KINDS + 2 + SUBLAYER_KINDS;

impl LayerTables {
    /// The layer tables of a run, attention scaled by its documents (`scale`) as
    /// [`Tables::new`] does.
    fn new(run: &Run, scale: Option<AttentionScale>) -> LayerTables {
        let moe = run.model().moe().is_some();
        let priced = |table: OpTable| scaled(scale, table);
        LayerTables {
            layer: priced(layer::transformer_layer(run, !moe, Rows::TotalsOnly)),
            // A hybrid model places its dense MLPs in its pattern: no dense transformer layer.
            dense_layer: (moe && run.model().hybrid().is_none())
                .then(|| priced(layer::transformer_layer(run, true, Rows::TotalsOnly))),
            sublayers: run.model().hybrid().map(|_| {
                Box::new(Sublayer::ALL.map(|kind| priced(sublayer(run, kind, Rows::TotalsOnly))))
            }),
        }
    }
}

/// A table's totals with the run's documents scaling its attention (and, for variable
/// micro-batches, the rest of it): [`crate::cost::document_attention::attention_scale`].
fn scaled(scale: Option<AttentionScale>, table: OpTable) -> OpTotals {
    match scale {
        Some(scale) => {
            table.totals.with_attention_scale(scale.forward, scale.backward, scale.tokens)
        }
        None => table.totals,
    }
}

/// Layers of a segment by the table that prices them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LayerCounts {
    /// Transformer layers (every layer of a hybrid model, whose kinds are counted apart).
    pub layers: f64,
    /// Layers among them with a dense MLP in an MoE model.
    pub dense: f64,
    /// A hybrid model's layers by kind ([`Sublayer::index`]).
    pub sublayers: SublayerCounts,
}

impl LayerCounts {
    /// These layers without `part`'s (a subset of them).
    fn without(&self, part: &LayerCounts) -> LayerCounts {
        LayerCounts {
            layers: self.layers - part.layers,
            dense: self.dense - part.dense,
            sublayers: std::array::from_fn(|i| self.sublayers[i] - part.sublayers[i]),
        }
    }
}

impl From<LayerMix> for LayerCounts {
    fn from(mix: LayerMix) -> LayerCounts {
        LayerCounts { layers: mix.layers as f64, dense: mix.dense as f64, sublayers: mix.sublayers }
    }
}

impl LayerTables {
    /// The transformer layer and the dense-MLP layer, run `counts` times.
    fn push_transformer<'a>(
        &'a self,
        counts: &LayerCounts,
        parts: &mut ArrayVec<Part<'a>, MAX_PARTS>,
    ) {
        // A hybrid segment's layers are all counted by kind: no transformer layer is left.
        let transformer = match &self.sublayers {
            Some(_) => counts.layers - counts.sublayers.iter().map(|&n| f64::from(n)).sum::<f64>(),
            None => counts.layers,
        };
        let (moe_layers, dense_layers, dense) = match &self.dense_layer {
            Some(dense) => (transformer - counts.dense, counts.dense, dense),
            None => (transformer, 0.0, &self.layer),
        };
        parts.push(Part { table: &self.layer, count: moe_layers, layer: true });
        parts.push(Part { table: dense, count: dense_layers, layer: true });
    }

    /// A hybrid model's kinds, run `counts` times (nothing for other models).
    fn push_sublayers<'a>(
        &'a self,
        counts: &LayerCounts,
        parts: &mut ArrayVec<Part<'a>, MAX_PARTS>,
    ) {
        if let Some(tables) = &self.sublayers {
            for (table, &count) in tables.iter().zip(&counts.sublayers) {
                parts.push(Part { table, count: f64::from(count), layer: true });
            }
        }
    }
}

/// A run of consecutive layers priced together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Its layers by the table that prices them: every transformer layer, those among them with
    /// a dense MLP in an MoE model (0 for dense models), and a hybrid model's layers by kind.
    pub all: LayerCounts,
    /// Layers among them kept in BF16 under a low-precision recipe, by table.
    pub bf16: LayerCounts,
    /// Layers among them that recompute their forward under full recompute.
    pub recomputed_layers: f64,
    /// Whether it holds the input embedding.
    pub first: bool,
    /// Whether it holds the final norm, logits and loss.
    pub last: bool,
}

impl Segment {
    /// The layers priced in the run's own precision and those kept in BF16, as two segments:
    /// the embedding and the head stay with the first, and a full recompute's layers are shared
    /// between them in proportion to their layers.
    pub fn split_bf16(&self) -> (Segment, Segment) {
        let kept = self.bf16;
        let share = if self.all.layers > 0.0 { kept.layers / self.all.layers } else { 0.0 };
        let rest = Segment {
            all: self.all.without(&kept),
            bf16: LayerCounts::default(),
            recomputed_layers: self.recomputed_layers * (1.0 - share),
            ..*self
        };
        let bf16 = Segment {
            all: kept,
            bf16: LayerCounts::default(),
            recomputed_layers: self.recomputed_layers * share,
            first: false,
            last: false,
        };
        (rest, bf16)
    }
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
    /// Fused attention within `forward` and `recompute` (forward kernels).
    pub forward_attention: Seconds,
    /// Fused attention within `backward`.
    pub backward_attention: Seconds,
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

/// TP communication left exposed: all of it, or with `--tp-comm-overlap` what the GEMMs it is
/// pipelined with cannot hide: at most [`TP_COMM_OVERLAP_HIDDEN`] of it, and no more than those
/// GEMMs' time at [`OVERLAP_EFFICIENCY`] (a chunk's transfer runs beside the next chunk's GEMM).
fn exposed_tp(run: &Run, time: Seconds, gemms: Seconds) -> Seconds {
    if run.plan().tp_comm_overlap() {
        time - (time * TP_COMM_OVERLAP_HIDDEN).min(gemms * OVERLAP_EFFICIENCY)
    } else {
        time
    }
}

/// [`exposed_tp`] of one phase of a table: its forward GEMMs, or its backward's input- and
/// weight-gradient GEMMs, hide its collectives.
fn exposed_tp_of(run: &Run, times: &PhaseTimes) -> Seconds {
    exposed_tp(run, times.tp, times.gemm + times.weight_gradient)
}

/// Ring attention overlaps each key/value transfer with the attention block it feeds (and
/// LASP-2's state all-gather the linear-attention kernel); Ulysses all-to-alls block the layer.
/// A key/value all-gather is hidden only by the first, local chunk's attention (`local_share`
/// of it, one over the ring's ranks), and the ring's steps then by the other chunks'.
fn exposed_cp(times: &PhaseTimes, local_share: f64) -> Seconds {
    let overlapped = (times.attention + times.recurrence) * OVERLAP_EFFICIENCY;
    let (gathered, ring_overlap) = if times.cp_gather > Seconds::ZERO {
        let local = overlapped * local_share;
        ((times.cp_gather - local).max(Seconds::ZERO), overlapped - local)
    } else {
        (Seconds::ZERO, overlapped)
    };
    (times.cp_ring - ring_overlap).max(Seconds::ZERO) + gathered + times.cp_all_to_all
}

/// Expert-parallel all-to-all left exposed: all of it, or with `expert_comm_overlap` what the
/// other micro-batch's compute of the same layer cannot hide (DualPipe / Megatron-LM's
/// 1F1B all-to-all overlap run one micro-batch's dispatch under another's compute).
fn exposed_ep(run: &Run, times: &PhaseTimes) -> Seconds {
    if run.plan().expert_comm_overlap() {
        (times.ep - times.compute * OVERLAP_EFFICIENCY).max(Seconds::ZERO)
    } else {
        times.ep
    }
}

/// The work of one micro-batch through a segment.
pub fn segment_work(run: &Run, tables: &Tables, segment: Segment) -> Work {
    let plan = run.plan();
    let parts = tables.parts(run, &segment);
    let sum = |phase: Phase, f: &dyn Fn(&PhaseTimes) -> Seconds| -> Seconds {
        parts.iter().map(|p| f(p.table.phase(phase)) * p.count).sum()
    };
    let layers_only = |f: &dyn Fn(&PhaseTimes) -> Seconds| -> Seconds {
        parts.iter().filter(|p| p.layer).map(|p| f(&p.table.forward) * p.count).sum()
    };
    let share = if segment.all.layers > 0.0 {
        segment.recomputed_layers.min(segment.all.layers) / segment.all.layers
    } else {
        0.0
    };
    let zero = Seconds::ZERO;
    let (recompute, recompute_tp, recompute_ep, recompute_attention) = match plan.recompute() {
        RecomputeKind::None => (zero, zero, zero, zero),
        RecomputeKind::Selective => {
            let modules = plan.recompute_modules();
            let rerun = |pick: &dyn Fn(&Rerun) -> Seconds| -> Seconds {
                parts
                    .iter()
                    .filter(|p| p.layer)
                    .map(|p| pick(&p.table.selective_rerun(modules)) * p.count)
                    .sum()
            };
            let ep = |r: &Rerun| {
                if plan.expert_comm_overlap() {
                    (r.ep - r.compute * OVERLAP_EFFICIENCY).max(Seconds::ZERO)
                } else {
                    r.ep
                }
            };
            // A rerun counts its GEMMs with its element-wise kernels: both bound the overlap.
            let tp = |r: &Rerun| exposed_tp(run, r.tp, r.compute - r.attention);
            (rerun(&|r| r.compute), rerun(&tp), rerun(&ep), rerun(&|r| r.attention))
        }
        // Half the matmuls and every element-wise op (the attention and recurrent kernels' outputs
        // are stored); collective outputs are among what the policy stores, so no communication
        // is rerun.
        RecomputeKind::Op => (
            layers_only(&|t| (t.compute - t.attention - t.recurrence - t.memory) * 0.5 + t.memory),
            zero,
            zero,
            zero,
        ),
        RecomputeKind::Full => (
            layers_only(&|t| t.compute) * share,
            layers_only(&|t| exposed_tp_of(run, t)) * share,
            layers_only(&|t| exposed_ep(run, t)) * share,
            layers_only(&|t| t.attention) * share,
        ),
    };
    let tp = |phase: Phase| sum(phase, &|t| exposed_tp_of(run, t));
    let local_share = 1.0 / run.plan().cp_ring().max(1) as f64;
    let ep = |phase: Phase| sum(phase, &|t| exposed_ep(run, t));
    Work {
        forward: sum(Phase::Forward, &|t| t.compute),
        forward_tp: tp(Phase::Forward),
        forward_cp: sum(Phase::Forward, &|t| exposed_cp(t, local_share)),
        forward_ep: ep(Phase::Forward),
        backward: sum(Phase::Backward, &|t| t.compute),
        weight_gradient: sum(Phase::Backward, &|t| t.weight_gradient),
        recompute,
        backward_tp: tp(Phase::Backward) + recompute_tp,
        backward_cp: sum(Phase::Backward, &|t| exposed_cp(t, local_share)),
        backward_ep: ep(Phase::Backward) + recompute_ep,
        forward_attention: sum(Phase::Forward, &|t| t.attention) + recompute_attention,
        backward_attention: sum(Phase::Backward, &|t| t.attention),
    }
}

/// The segment of a whole pipeline stage.
pub fn stage_segment(run: &Run, stage: u64) -> Segment {
    stage_segments(run)[stage as usize]
}

/// The segment of every pipeline stage (each over all its virtual chunks), from one pass over
/// the layer layout.
pub fn stage_segments(run: &Run) -> Vec<Segment> {
    let plan = run.plan();
    let recompute = plan.recompute_num_layers() as f64;
    let stages = run.stage_layer_counts();
    let last = stages.len() - 1;
    stages
        .iter()
        .enumerate()
        .map(|(stage, counts)| Segment {
            all: counts.all.into(),
            bf16: counts.bf16.into(),
            recomputed_layers: recompute.min(counts.all.layers as f64),
            first: stage == 0,
            last: stage == last,
        })
        .collect()
}

/// The segments of `positions` consecutive chunks along a micro-batch's path, with the full
/// recompute share of a stage applied to each chunk.
pub fn path_segments(run: &Run, positions: u64) -> Vec<Segment> {
    let plan = run.plan();
    let layers = run.path_layers(positions);
    let stage_layers = layers.iter().sum::<u64>() as f64 / plan.pp() as f64;
    let recompute_fraction = (plan.recompute_num_layers() as f64 / stage_layers).min(1.0);
    let mut first_layer = 0;
    layers
        .iter()
        .enumerate()
        .map(|(position, &count)| {
            let mix = run.layers_in(first_layer, count);
            let kept = run.bf16_layers_in(first_layer, count);
            first_layer += count;
            Segment {
                all: mix.into(),
                bf16: kept.into(),
                recomputed_layers: count as f64 * recompute_fraction,
                first: position == 0,
                last: position as u64 + 1 == positions,
            }
        })
        .collect()
}

/// The compute stalls activation offloading adds to one micro-batch in a segment: the copies to
/// host memory run beside the forward and the copies back beside the backward, over the GPU's
/// host link; what a copy takes beyond the compute it hides behind stalls that compute (the
/// engines wait on the copy before the next layer's buffers are reused).
/// `offloaded` is what one micro-batch moves each way in the segment.
pub fn with_offload_stalls(run: &Run, work: Work, offloaded: Bytes) -> Work {
    let Some(link) = run.cluster().interconnect().host_bandwidth() else { return work };
    if offloaded <= Bytes::ZERO {
        return work;
    }
    let copy = offloaded / link;
    Work {
        forward: work.forward + (copy - work.forward).max(Seconds::ZERO),
        backward: work.backward + (copy - work.backward).max(Seconds::ZERO),
        ..work
    }
}

//! The plan space: every candidate a search considers, enumerated in a fixed order.
//!
//! A candidate fixes every plan choice: the factorization of the GPUs into tp x cp x pp x dp, the
//! context-parallel exchange, the expert layout (ep x etp over the same ranks, MoE Parallel
//! Folding), the virtual chunks and pipeline schedule, how layers split, data-parallel sharding,
//! recomputation and the micro-batch size. Sequence parallelism, DP and parameter-gather overlap and (for engines
//! that have it) TP communication overlap are on unless pinned off, since they only remove
//! exposed time. Every option the user pins (a plan flag given to `search`) narrows its dimension
//! to that one value, so every plan the search returns carries every pin.
//! Divisibility that the enumeration does not guarantee is left to `Run::from_spec`, so a rejected
//! candidate carries the same reason a user would see.

pub use super::grouping::Grouping;
use super::grouping::groupings;
use crate::plan::{
    CpComm, FsdpMode, HybridCpScheduler, MeshGrid, PipelineSchedule, PipelineSplit, PlanSpec,
    RecomputeKind,
};

/// Data-parallel sharding of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShardingChoice {
    /// Plain DDP.
    Zero0,
    /// Distributed optimizer.
    Zero1,
    /// Optimizer and gradients sharded.
    Zero2,
    /// FSDP full shard over groups of this many DP ranks (dp = no replication).
    Fsdp(u32),
    /// ZeRO-3 (DeepSpeed's parameter sharding), only when pinned with `--zero 3`.
    Zero3,
    /// FSDP shard-grad-op over groups of this many DP ranks, only when pinned with
    /// `--fsdp-mode grad-op`.
    FsdpGradOp(u32),
}

/// Recomputation of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecomputeChoice {
    /// No recomputation.
    None,
    /// Attention core.
    Selective,
    /// Per-op selective checkpointing (torchtitan), in place of `Selective` when the search
    /// targets torchtitan.
    Op,
    /// Full recompute of half of each stage's layers.
    HalfFull,
    /// Full recompute of every layer.
    Full,
    /// Full recompute of this many layers per stage, only when pinned with
    /// `--recompute-num-layers`.
    Layers(u32),
    /// No recomputation; the activations of half of each stage's layers go to host memory
    /// (`offload_activation_layers`), copied back beside the backward.
    OffloadHalf,
    /// No recomputation; the activations of every layer of a stage but its last go to host
    /// memory (the last one's backward starts at once, so engines keep it).
    OffloadAllButLast,
    /// Full recompute of half of each stage's layers, and the activations of the others but the
    /// last offloaded to host memory: recompute and offload split the layers between them
    /// (MEMO's split, by layer rather than by token).
    HalfFullOffloadRest,
}

/// One point of the space. Field order is the tie-break order of equal predictions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// Tensor-parallel size.
    pub tp: u64,
    /// Context-parallel size.
    pub cp: u64,
    /// Pipeline-parallel size.
    pub pp: u64,
    /// Virtual chunks per pipeline rank.
    pub vp: u64,
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// How layers split over the pipeline.
    pub split: PipelineSplit,
    /// Data-parallel sharding.
    pub sharding: ShardingChoice,
    /// Recomputation.
    pub recompute: RecomputeChoice,
    /// Micro-batch size.
    pub micro_batch: u64,
    /// Context-parallel exchange (ring when cp = 1).
    pub cp_comm: CpComm,
    /// Expert-parallel size (1 for dense models).
    pub ep: u64,
    /// Expert-tensor-parallel size (1 for dense models).
    pub etp: u64,
    /// Global batches whose documents a balancing loader re-packs together (0: packed as they
    /// arrive).
    pub balance_window: u64,
    /// Per-document context-parallel groups and their scheduler (`None`: static CP).
    pub hybrid_cp: Option<HybridCpScheduler>,
    /// Whether documents are sorted into variable micro-batches (DynaPipe).
    pub variable_micro_batches: bool,
}

/// Limits on the space, from the user.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Constraints {
    /// Largest tensor-parallel size (default: the NVLink domain).
    pub max_tp: Option<u64>,
    /// Largest pipeline-parallel size.
    pub max_pp: Option<u64>,
    /// Largest context-parallel size.
    pub max_cp: Option<u64>,
    /// Fixed micro-batch size.
    pub micro_batch: Option<u64>,
    /// A micro-batch size to try beside the space's (powers of the batch up to 16), such as the
    /// one a published plan uses.
    pub extra_micro_batch: Option<u64>,
}

/// What the enumeration needs to know about the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// GPUs.
    pub gpus: u64,
    /// GPUs per NVLink domain.
    pub nvlink_domain: u64,
    /// GPUs per node.
    pub gpus_per_node: u64,
    /// Transformer layers.
    pub layers: u64,
    /// Attention heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Sequence length.
    pub seq_len: u64,
    /// Global batch in sequences.
    pub global_batch: u64,
    /// Routed experts per MoE layer (0 for a dense model).
    pub experts: u64,
    /// The selective recompute tried: the attention core ([`RecomputeKind::Selective`],
    /// Megatron-LM's) or per-op checkpointing ([`RecomputeKind::Op`], torchtitan's), as the
    /// target engine's capabilities say.
    pub selective_recompute: RecomputeKind,
    /// The widest re-packing window tried beside packing as documents arrive: 0 tries none
    /// (no document lengths, or a target engine whose loader does not balance), else every
    /// power of two up to it.
    pub max_balance_window: u64,
    /// The hybrid-CP schedulers tried beside static CP on layouts without a pipeline (none
    /// without document lengths, or when the target engine has no hybrid CP).
    pub hybrid_cp_schedulers: &'static [HybridCpScheduler],
    /// Whether Mesh-Attention is tried unpinned: no release of any engine runs it, so only a
    /// pin (`--cp-comm mesh`) brings it into a search.
    pub mesh_attention: bool,
    /// Whether activation offload to host memory is tried unpinned, on layouts without a
    /// pipeline (the GPU has a host link, and the target engine, if any, offloads there).
    pub activation_offload: bool,
    /// Whether offload beside full recompute of the other layers is tried too (the target
    /// engine, if any, offloads under full recompute).
    pub offload_beside_recompute: bool,
    /// Whether variable micro-batches are tried beside fixed ones (documents one per sequence,
    /// batched `pad`, and a target engine, if any, whose loader forms them).
    pub variable_micro_batches: bool,
}

/// Largest micro-batch size the space tries.
const MAX_MICRO_BATCH: u64 = 16;
/// Largest number of virtual chunks per pipeline rank the space tries for an uneven (balanced)
/// split; even splits try every vp down to one layer per chunk.
const MAX_VP: u64 = 8;

/// The divisors of `n` in increasing order, found up to its square root.
fn divisors(n: u64) -> impl Iterator<Item = u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d * d != n {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.into_iter().chain(large.into_iter().rev())
}

fn allowed(value: u64, fixed: Option<u64>, max: Option<u64>) -> bool {
    fixed.is_none_or(|f| f == value) && max.is_none_or(|m| value <= m)
}

/// A pinned size as the enumeration compares it (validation has already refused non-positive
/// pins; one that slips through matches no candidate).
fn size(pin: Option<i64>) -> Option<u64> {
    pin.map(|value| u64::try_from(value).unwrap_or(0))
}

/// A count the search has already bounded (a shard group at most the GPUs, a layer count at most
/// the layers), kept in 32 bits: the search holds millions of candidates.
fn narrow(count: u64) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Whether a pinned choice, if any, is this one.
fn agrees<T: PartialEq>(pin: Option<T>, value: T) -> bool {
    pin.is_none_or(|pinned| pinned == value)
}

/// The candidates of one tp x cp x pp factorization: every combination of its pipeline
/// layouts, shardings, recomputes (per layout), micro-batches, CP exchanges and expert layouts,
/// in that nesting order. The space is its blocks in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Tensor-parallel size.
    pub tp: u64,
    /// Context-parallel size.
    pub cp: u64,
    /// Pipeline-parallel size.
    pub pp: u64,
    /// Pipeline layouts: (vp, split, schedule).
    pub layouts: Vec<(u64, PipelineSplit, PipelineSchedule)>,
    /// Data-parallel shardings.
    pub shardings: Vec<ShardingChoice>,
    /// The recompute choices of each layout.
    pub recomputes: Vec<Vec<RecomputeChoice>>,
    /// Micro-batch sizes.
    pub micro_batches: Vec<u64>,
    /// Context-parallel exchanges.
    pub exchanges: Vec<CpComm>,
    /// Expert layouts (ep, etp).
    pub experts: Vec<(u64, u64)>,
    /// Re-packing windows (0: packed as documents arrive).
    pub balance_windows: Vec<u64>,
    /// Static CP in fixed micro-batches, then the hybrid-CP schedulers and variable
    /// micro-batches tried.
    pub groupings: Vec<Grouping>,
}

impl Block {
    /// Combinations of re-packing window, grouping, micro-batch, exchange and expert layout: with
    /// tp and cp, what a candidate's op tables depend on (all but the window, which prices the
    /// step only, and hybrid CP, which prices the work from the same tables). `inner` numbers them
    /// in enumeration order, the window slowest.
    pub fn inner_len(&self) -> usize {
        self.balance_windows.len() * self.per_window()
    }

    /// Inner combinations of one re-packing window (grouping, micro-batch, exchange and expert
    /// layout): window `w`'s combinations are `w x per_window()` onwards.
    pub fn per_window(&self) -> usize {
        self.groupings.len() * self.per_grouping()
    }

    /// Inner combinations of one re-packing window and grouping (micro-batch, exchange and
    /// expert layout): the grouping's combinations are `grouping x per_grouping()` onwards.
    pub fn per_grouping(&self) -> usize {
        self.micro_batches.len() * self.exchanges.len() * self.experts.len()
    }

    /// The grouping of inner combination `inner`.
    pub fn grouping(&self, inner: usize) -> Grouping {
        self.groupings[(inner / self.per_grouping().max(1)) % self.groupings.len().max(1)]
    }

    /// Inner combination `inner` with the first grouping instead of its own (the same window,
    /// micro-batch, exchange and expert layout).
    pub fn first_grouping(&self, inner: usize) -> usize {
        let below = self.per_grouping().max(1);
        let per_window = self.per_window().max(1);
        inner / per_window * per_window + inner % below
    }

    /// Whether inner combination `inner` is in the space: every combination of the first
    /// re-packing window, and of the others those whose grouping re-packs (a search does not
    /// re-pack documents that hybrid CP places or variable micro-batches sort).
    pub fn searches(&self, inner: usize) -> bool {
        inner < self.per_window() || self.grouping(inner).re_packs()
    }

    /// Inner combinations in the space ([`Self::searches`]).
    pub fn searched_inner_len(&self) -> usize {
        let re_packing = self.groupings.iter().filter(|g| g.re_packs()).count();
        let windows = self.balance_windows.len();
        if windows == 0 {
            return 0;
        }
        self.per_window() + (windows - 1) * re_packing * self.per_grouping()
    }

    /// Candidates in the block.
    pub fn len(&self) -> usize {
        let rows: usize = self.recomputes.iter().map(Vec::len).sum();
        rows * self.shardings.len() * self.searched_inner_len()
    }

    /// Whether the block has no candidate.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The micro-batch, exchange and expert layout of inner combination `inner`.
    pub fn inner(&self, inner: usize) -> (u64, CpComm, (u64, u64)) {
        let experts = self.experts.len();
        let exchanges = self.exchanges.len();
        let expert = self.experts[inner % experts];
        let exchange = self.exchanges[(inner / experts) % exchanges];
        let micro_batch =
            self.micro_batches[(inner / (experts * exchanges)) % self.micro_batches.len()];
        (micro_batch, exchange, expert)
    }

    /// The re-packing window of inner combination `inner`.
    pub fn balance_window(&self, inner: usize) -> u64 {
        self.balance_windows[inner / self.per_window()]
    }

    /// The candidate of a layout, sharding, recompute and inner combination (indexes).
    pub fn candidate(
        &self,
        layout: usize,
        sharding: usize,
        recompute: usize,
        inner: usize,
    ) -> Candidate {
        let (vp, split, schedule) = self.layouts[layout];
        let (micro_batch, cp_comm, (ep, etp)) = self.inner(inner);
        let grouping = self.grouping(inner);
        Candidate {
            tp: self.tp,
            cp: self.cp,
            pp: self.pp,
            vp,
            schedule,
            split,
            sharding: self.shardings[sharding],
            recompute: self.recomputes[layout][recompute],
            micro_batch,
            cp_comm,
            ep,
            etp,
            balance_window: self.balance_window(inner),
            hybrid_cp: grouping.hybrid_cp,
            variable_micro_batches: grouping.variable_micro_batches,
        }
    }

    /// The candidates of one layout and sharding in order, each with its recompute and inner
    /// combination.
    pub fn row(
        &self,
        layout: usize,
        sharding: usize,
    ) -> impl Iterator<Item = (usize, usize, Candidate)> {
        let inner = self.inner_len();
        (0..self.recomputes[layout].len()).flat_map(move |recompute| {
            (0..inner)
                .filter(|&i| self.searches(i))
                .map(move |i| (recompute, i, self.candidate(layout, sharding, recompute, i)))
        })
    }

    /// Every candidate of the block in order.
    pub fn candidates(&self) -> impl Iterator<Item = Candidate> + '_ {
        (0..self.layouts.len()).flat_map(move |layout| {
            (0..self.shardings.len())
                .flat_map(move |sharding| self.row(layout, sharding).map(|(_, _, c)| c))
        })
    }
}

/// Every candidate that carries every pin, in a fixed order.
pub fn candidates(shape: &Shape, constraints: &Constraints, pins: &PlanSpec) -> Vec<Candidate> {
    blocks(shape, constraints, pins).iter().flat_map(Block::candidates).collect()
}

/// The space as blocks of one tp x cp x pp each, in the order of [`candidates`].
pub fn blocks(shape: &Shape, constraints: &Constraints, pins: &PlanSpec) -> Vec<Block> {
    let mut out = Vec::new();
    let max_tp = constraints.max_tp.unwrap_or(shape.nvlink_domain);
    for tp in divisors(shape.gpus).filter(|tp| {
        allowed(*tp, size(pins.tp), Some(max_tp))
            && shape.heads.is_multiple_of(*tp)
            && shape.kv_heads.is_multiple_of(*tp)
    }) {
        for cp in divisors(shape.gpus / tp).filter(|cp| {
            allowed(*cp, size(pins.cp), constraints.max_cp) && shape.seq_len.is_multiple_of(2 * cp)
                || (*cp == 1 && allowed(1, size(pins.cp), constraints.max_cp))
        }) {
            for pp in divisors(shape.gpus / (tp * cp))
                .filter(|pp| allowed(*pp, size(pins.pp), constraints.max_pp))
            {
                let dp = shape.gpus / (tp * cp * pp);
                if !shape.global_batch.is_multiple_of(dp) || !agrees(size(pins.dp), dp) {
                    continue;
                }
                let layouts: Vec<_> = pipelines(shape.layers, pp, pins.pipeline_split)
                    .into_iter()
                    .filter(|&(vp, _, schedule)| {
                        agrees(size(pins.vp), vp) && agrees(pins.schedule, schedule)
                    })
                    .collect();
                let exchanges: Vec<CpComm> = cp_exchanges(shape, tp, cp, pins.cp_comm)
                    .into_iter()
                    .filter(|exchange| agrees(pins.cp_comm, *exchange))
                    .collect();
                let experts: Vec<(u64, u64)> = expert_layouts(shape, tp, tp * cp * dp)
                    .into_iter()
                    .filter(|&(ep, etp)| agrees(size(pins.ep), ep) && agrees(size(pins.etp), etp))
                    .collect();
                let micro_batches: Vec<u64> = divisors(shape.global_batch / dp)
                    .filter(|mbs| match constraints.micro_batch {
                        Some(pinned) => pinned == *mbs,
                        None => {
                            *mbs <= MAX_MICRO_BATCH || constraints.extra_micro_batch == Some(*mbs)
                        }
                    })
                    .collect();
                let recomputes = layouts
                    .iter()
                    .map(|&(_, split, _)| {
                        recomputes(shape, pp, stage_layers(shape.layers, pp, split), pins)
                    })
                    .collect();
                out.push(Block {
                    tp,
                    cp,
                    pp,
                    layouts,
                    shardings: shardings(shape, tp, cp, dp, pins),
                    recomputes,
                    micro_batches,
                    exchanges,
                    experts,
                    balance_windows: balance_windows(shape, pins),
                    groupings: groupings(
                        shape.variable_micro_batches,
                        shape.hybrid_cp_schedulers,
                        pp,
                        dp * cp,
                        pins,
                    ),
                });
            }
        }
    }
    out
}

/// Layers per pipeline stage for the partial-recompute count: the embedding and the loss take
/// a layer's place each under the embedding-and-loss split.
pub fn stage_layers(layers: u64, pp: u64, split: PipelineSplit) -> u64 {
    match split {
        PipelineSplit::EmbeddingAndLoss => (layers + 2) / pp,
        _ => layers / pp,
    }
}

const RECOMPUTE: [RecomputeChoice; 4] = [
    RecomputeChoice::None,
    RecomputeChoice::Selective,
    RecomputeChoice::HalfFull,
    RecomputeChoice::Full,
];

/// The recompute choices for `pp` stages of `stage_layers` layers: the pinned kind (and layer
/// count) alone, else every kind, with the engine's selective kind, and on a layout without a
/// pipeline offloading half or all but one of the layers' activations where the shape allows it
/// and no offload is pinned (a pinned offload holds for every candidate).
fn recomputes(shape: &Shape, pp: u64, stage_layers: u64, pins: &PlanSpec) -> Vec<RecomputeChoice> {
    if let Some(layers) = pins.recompute_num_layers {
        let full = agrees(pins.recompute, RecomputeKind::Full);
        return if full {
            vec![RecomputeChoice::Layers(narrow(size(Some(layers)).unwrap_or(0)))]
        } else {
            Vec::new()
        };
    }
    RECOMPUTE
        .into_iter()
        .filter_map(|r| match r {
            // Half of a one-layer stage is no layer: the same plan as no recompute.
            RecomputeChoice::HalfFull if stage_layers < 2 => None,
            RecomputeChoice::Selective if shape.selective_recompute == RecomputeKind::Op => {
                Some(RecomputeChoice::Op)
            }
            other => Some(other),
        })
        .chain(
            // A pinned kind the engine's default would not try (per-op under Megatron-LM, the
            // attention core under torchtitan) is tried as pinned.
            match (pins.recompute, shape.selective_recompute == RecomputeKind::Op) {
                (Some(RecomputeKind::Op), false) => Some(RecomputeChoice::Op),
                (Some(RecomputeKind::Selective), true) => Some(RecomputeChoice::Selective),
                _ => None,
            },
        )
        .chain(offloads(shape, pp, stage_layers, pins))
        .filter(|choice| agrees(pins.recompute, choice.kind()))
        .collect()
}

/// The offload choices tried: none on a pipeline, on a stage of one layer (whose one layer an
/// engine keeps), or when the shape or a pin rules offload out; half of the layers only where
/// that is not also all but the last.
fn offloads(shape: &Shape, pp: u64, stage_layers: u64, pins: &PlanSpec) -> Vec<RecomputeChoice> {
    if !shape.activation_offload
        || pp > 1
        || stage_layers < 2
        || pins.offload_activation_layers.is_some()
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    if stage_layers / 2 < stage_layers - 1 {
        out.push(RecomputeChoice::OffloadHalf);
    }
    out.push(RecomputeChoice::OffloadAllButLast);
    // Half recomputed and the rest but the last offloaded: at least one layer of each.
    if shape.offload_beside_recompute && stage_layers - stage_layers / 2 >= 2 {
        out.push(RecomputeChoice::HalfFullOffloadRest);
    }
    out
}

impl RecomputeChoice {
    /// Whether this choice offloads activations to host memory.
    pub fn offloads(self) -> bool {
        matches!(
            self,
            RecomputeChoice::OffloadHalf
                | RecomputeChoice::OffloadAllButLast
                | RecomputeChoice::HalfFullOffloadRest
        )
    }

    /// The recompute kind of this choice.
    pub fn kind(self) -> RecomputeKind {
        match self {
            RecomputeChoice::None
            | RecomputeChoice::OffloadHalf
            | RecomputeChoice::OffloadAllButLast => RecomputeKind::None,
            RecomputeChoice::Selective => RecomputeKind::Selective,
            RecomputeChoice::Op => RecomputeKind::Op,
            RecomputeChoice::HalfFull
            | RecomputeChoice::Full
            | RecomputeChoice::Layers(_)
            | RecomputeChoice::HalfFullOffloadRest => RecomputeKind::Full,
        }
    }
}

/// Re-packing windows worth trying: the pinned one alone, else packing as documents arrive and
/// every power of two up to the shape's widest window.
fn balance_windows(shape: &Shape, pins: &PlanSpec) -> Vec<u64> {
    if let Some(window) = pins.balance_window {
        return vec![u64::try_from(window).unwrap_or(0)];
    }
    std::iter::once(0)
        .chain(std::iter::successors(Some(1), |w: &u64| w.checked_mul(2)))
        .take_while(|&w| w <= shape.max_balance_window)
        .collect()
}

/// Context-parallel exchanges worth trying at this tp x cp: the ring always, Ulysses when cp
/// divides the heads per TP rank, the hierarchical mix when the CP group spans NVLink domains,
/// and Mesh-Attention where cp has a grid of at least 2 x 2 and the shape tries it or the user
/// pinned it (a target engine then rejects it, saying why).
fn cp_exchanges(shape: &Shape, tp: u64, cp: u64, pinned: Option<CpComm>) -> Vec<CpComm> {
    let mut out = vec![CpComm::Ring];
    if cp > 1 {
        if (shape.heads / tp).is_multiple_of(cp) {
            out.push(CpComm::AllToAll);
        }
        if tp * cp > shape.nvlink_domain {
            out.push(CpComm::Hierarchical);
        }
        let mesh = shape.mesh_attention || pinned == Some(CpComm::Mesh);
        if mesh && !MeshGrid::all(cp).is_empty() {
            out.push(CpComm::Mesh);
        }
    }
    out
}

/// Expert layouts over the `stage_ranks = tp x cp x dp` ranks of a stage: every ep dividing the
/// experts, with etp 1 (MoE Parallel Folding's usual choice) or tp (experts split like attention,
/// Megatron-LM's default and torchtitan's other option), and ep x etp dividing the stage's ranks.
/// Dense models have the one layout (1, 1).
fn expert_layouts(shape: &Shape, tp: u64, stage_ranks: u64) -> Vec<(u64, u64)> {
    if shape.experts == 0 {
        return vec![(1, 1)];
    }
    let mut out = Vec::new();
    let etps: &[u64] = if tp == 1 { &[1] } else { &[1, tp] };
    for &etp in etps {
        for ep in divisors(shape.experts) {
            if stage_ranks.is_multiple_of(ep * etp) {
                out.push((ep, etp));
            }
        }
    }
    out
}

/// Pipeline layouts of `pp` stages: (vp, split, schedule). The even split is preferred, the
/// embedding-and-loss split where the even one fails, and the balanced split (chunks differing
/// by one layer) where both fail; a pinned split is used as pinned.
fn pipelines(
    layers: u64,
    pp: u64,
    pinned: Option<PipelineSplit>,
) -> Vec<(u64, PipelineSplit, PipelineSchedule)> {
    if pp == 1 {
        return vec![(1, pinned.unwrap_or(PipelineSplit::Even), PipelineSchedule::OneFOneB)];
    }
    let split = if let Some(split) = pinned {
        split
    } else if layers.is_multiple_of(pp) {
        PipelineSplit::Even
    } else if (layers + 2).is_multiple_of(pp) {
        PipelineSplit::EmbeddingAndLoss
    } else if layers >= pp {
        PipelineSplit::Balanced
    } else {
        return Vec::new();
    };
    let units = if split == PipelineSplit::EmbeddingAndLoss { layers + 2 } else { layers };
    let mut out = Vec::new();
    for schedule in [
        PipelineSchedule::OneFOneB,
        PipelineSchedule::ZeroBubble,
        PipelineSchedule::Dualpipe,
        PipelineSchedule::Gpipe,
    ] {
        out.push((1, split, schedule));
    }
    // Chunks of equal whole layers: every vp that divides a stage's units, down to one layer per
    // chunk (Megatron-LM runs Llama 2 70B at pp 4 x vp 20); an uneven split tries up to MAX_VP.
    let interleavings: Vec<u64> = match split {
        PipelineSplit::Balanced => (2..=MAX_VP).filter(|vp| units >= pp * vp).collect(),
        _ if units.is_multiple_of(pp) => divisors(units / pp).filter(|vp| *vp >= 2).collect(),
        _ => Vec::new(),
    };
    out.extend(interleavings.into_iter().map(|vp| (vp, split, PipelineSchedule::Interleaved)));
    out
}

/// Data-parallel sharding choices: every ZeRO stage the search tries and FSDP over all of dp or
/// inside a node, narrowed by the pinned ZeRO stage, FSDP switch, mode and shard group.
fn shardings(shape: &Shape, tp: u64, cp: u64, dp: u64, pins: &PlanSpec) -> Vec<ShardingChoice> {
    let mut groups = vec![dp];
    // Hybrid sharding inside a node, replicated across nodes.
    let in_node = (shape.gpus_per_node / (tp * cp)).max(1);
    if in_node > 1 && in_node < dp && dp.is_multiple_of(in_node) {
        groups.push(in_node);
    }
    if let Some(group) = size(pins.hybrid_shard) {
        groups = vec![group];
    }
    let fsdp = |mode: FsdpMode| {
        groups.iter().map(move |&group| match mode {
            FsdpMode::Full => ShardingChoice::Fsdp(narrow(group)),
            FsdpMode::GradOp => ShardingChoice::FsdpGradOp(narrow(group)),
        })
    };
    if pins.fsdp == Some(true) || pins.fsdp_mode.is_some() || pins.hybrid_shard.is_some() {
        return fsdp(pins.fsdp_mode.unwrap_or(FsdpMode::Full)).collect();
    }
    let zero = |stage: i64| match stage {
        0 => Some(ShardingChoice::Zero0),
        1 => Some(ShardingChoice::Zero1),
        2 => Some(ShardingChoice::Zero2),
        3 => Some(ShardingChoice::Zero3),
        _ => None,
    };
    if let Some(stage) = pins.zero {
        return zero(stage).into_iter().collect();
    }
    let mut out = vec![ShardingChoice::Zero0];
    if dp * cp > 1 {
        out.extend([ShardingChoice::Zero1, ShardingChoice::Zero2]);
        if pins.fsdp != Some(false) {
            out.extend(fsdp(FsdpMode::Full));
        }
    }
    out
}

impl Candidate {
    /// The candidate as a plan spec: its explored choices set on `template`, which holds the
    /// options the search does not explore (overlaps, the engine, the MoE workload) with every
    /// pin applied.
    pub fn plan_spec(&self, stage_layers: u64, template: &PlanSpec) -> PlanSpec {
        let (zero, fsdp, fsdp_mode, hybrid_shard) = match self.sharding {
            ShardingChoice::Zero0 => (Some(0), None, None, None),
            ShardingChoice::Zero1 => (Some(1), None, None, None),
            ShardingChoice::Zero2 => (Some(2), None, None, None),
            ShardingChoice::Zero3 => (Some(3), None, None, None),
            ShardingChoice::Fsdp(group) => {
                (None, Some(true), Some(FsdpMode::Full), Some(group as i64))
            }
            ShardingChoice::FsdpGradOp(group) => {
                (None, Some(true), Some(FsdpMode::GradOp), Some(group as i64))
            }
        };
        let recompute_num_layers = match self.recompute {
            RecomputeChoice::HalfFull | RecomputeChoice::HalfFullOffloadRest => {
                Some((stage_layers / 2) as i64)
            }
            RecomputeChoice::Layers(layers) => Some(layers as i64),
            _ => None,
        };
        let offload_activation_layers = match self.recompute {
            RecomputeChoice::OffloadHalf => Some((stage_layers / 2) as i64),
            RecomputeChoice::OffloadAllButLast => Some(stage_layers as i64 - 1),
            RecomputeChoice::HalfFullOffloadRest => {
                Some((stage_layers - stage_layers / 2) as i64 - 1)
            }
            _ => template.offload_activation_layers,
        };
        let grouping = self.grouping_spec(template);
        PlanSpec {
            tp: Some(self.tp as i64),
            pp: Some(self.pp as i64),
            vp: Some(self.vp as i64),
            cp: Some(self.cp as i64),
            cp_comm: Some(self.cp_comm),
            ep: Some(self.ep as i64),
            etp: Some(self.etp as i64),
            pipeline_split: Some(self.split),
            schedule: Some(self.schedule),
            zero,
            fsdp,
            fsdp_mode,
            hybrid_shard,
            recompute: Some(self.recompute.kind()),
            recompute_num_layers,
            offload_activation_layers,
            balance_window: Some(self.balance_window as i64),
            hybrid_cp: grouping.hybrid_cp,
            hybrid_cp_scheduler: grouping.hybrid_cp_scheduler,
            max_seqlen_per_rank: grouping.max_seqlen_per_rank,
            variable_micro_batches: grouping.variable_micro_batches,
            ..template.clone()
        }
    }

    /// The plan fields of the candidate's grouping (`hybrid_cp`, `hybrid_cp_scheduler`,
    /// `max_seqlen_per_rank`, `variable_micro_batches`), the others unset.
    pub fn grouping_spec(&self, template: &PlanSpec) -> PlanSpec {
        PlanSpec {
            hybrid_cp: Some(self.hybrid_cp.is_some()),
            hybrid_cp_scheduler: self.hybrid_cp,
            max_seqlen_per_rank: self.hybrid_cp.and(template.max_seqlen_per_rank),
            variable_micro_batches: Some(self.variable_micro_batches),
            ..PlanSpec::default()
        }
    }
}

#[cfg(test)]
mod tests;

//! The rows of a per-layer operation table and their totals: what each row is (phase, kind,
//! FLOPs, bytes, time, recompute module), and the per-phase sums pricing reads, kept as rows are
//! pushed so that pricing builds its tables without keeping (or allocating) the rows.

use crate::cost::kernels::memory_time;
use crate::hardware::Gpu;
use crate::plan::{RecomputeModule, RecomputeModules};
use crate::units::{Bytes, Flops, Seconds};

/// Forward or backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Forward pass.
    Forward,
    /// Backward pass (input and weight gradients).
    Backward,
}

/// What resource an operation occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A GEMM on the tensor cores: forward, or the input-gradient GEMM of the backward.
    Gemm,
    /// The weight-gradient GEMM of the backward, which zero-bubble schedules defer.
    WeightGradient,
    /// A fused attention kernel.
    Attention,
    /// A chunked recurrent kernel (Mamba-2's scan, gated DeltaNet's delta rule, lightning
    /// attention): its work grows with the tokens, not with the squares of the documents'
    /// lengths as attention's does, so document lengths do not scale it.
    Recurrence,
    /// A memory-bound kernel (norms, residuals, activations, casts, loss).
    Memory,
    /// Tensor-parallel collective.
    TpComm,
    /// Context-parallel exchange that overlaps attention: the ring's key/value steps, or
    /// Mesh-Attention's gathers and reductions over its grid.
    CpComm,
    /// Context-parallel all-to-all (Ulysses), which blocks the layer.
    CpAllToAll,
    /// Context-parallel all-gather of every rank's keys and values before the ring's chunks
    /// (PyTorch's `allgather` rotate method), which only the first, local chunk's attention
    /// hides.
    CpGather,
    /// Expert-parallel token dispatch and combine (all-to-all).
    EpComm,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Op {
    /// Short name (`qkv`, `fc1`, `attention`, `tp-reduce-scatter`).
    pub name: &'static str,
    /// Forward or backward.
    pub phase: Phase,
    /// The resource it occupies.
    pub kind: OpKind,
    /// Arithmetic work.
    pub flops: Flops,
    /// Bytes moved through HBM or over the link.
    pub bytes: Bytes,
    /// Time on one GPU.
    pub time: Seconds,
    /// The recompute module whose rerun repeats this op (`None`: outside every module, such as
    /// the residual adds, or outside the transformer layers).
    pub module: Option<RecomputeModule>,
}

/// Forward work a selective recompute reruns, per micro-batch of one layer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rerun {
    /// GEMMs, attention and memory-bound kernels.
    pub compute: Seconds,
    /// Fused attention within `compute`.
    pub attention: Seconds,
    /// Tensor-parallel collectives.
    pub tp: Seconds,
    /// Expert-parallel dispatch and combine.
    pub ep: Seconds,
}

impl Rerun {
    /// Adds one forward row of the module: its compute, or the TP or EP collective it waits on
    /// (context-parallel exchanges are not counted in a rerun).
    pub fn add(&mut self, kind: OpKind, time: Seconds) {
        match kind {
            OpKind::Gemm | OpKind::WeightGradient | OpKind::Memory | OpKind::Recurrence => {
                self.compute += time
            }
            OpKind::Attention => {
                self.compute += time;
                self.attention += time;
            }
            OpKind::TpComm => self.tp += time,
            OpKind::EpComm => self.ep += time,
            OpKind::CpComm | OpKind::CpAllToAll | OpKind::CpGather => {}
        }
    }
}

/// Per-phase totals of one op table, summed as its rows are pushed (the search prices hundreds
/// of thousands of segments from the same tables).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    /// GEMMs, weight gradients, attention and memory-bound kernels.
    pub compute: Seconds,
    /// Forward GEMMs and input-gradient GEMMs within `compute`.
    pub gemm: Seconds,
    /// The weight-gradient GEMMs within `compute`.
    pub weight_gradient: Seconds,
    /// Fused attention within `compute`.
    pub attention: Seconds,
    /// Chunked recurrent kernels within `compute`.
    pub recurrence: Seconds,
    /// Memory-bound (element-wise) kernels within `compute`.
    pub memory: Seconds,
    /// Tensor-parallel (and expert-tensor-parallel) collectives.
    pub tp: Seconds,
    /// Context-parallel ring steps.
    pub cp_ring: Seconds,
    /// Context-parallel all-to-alls.
    pub cp_all_to_all: Seconds,
    /// Context-parallel key/value all-gathers.
    pub cp_gather: Seconds,
    /// Expert-parallel dispatch and combine.
    pub ep: Seconds,
}

impl PhaseTimes {
    /// Adds one row of the phase.
    fn add(&mut self, kind: OpKind, time: Seconds) {
        match kind {
            OpKind::Gemm => {
                self.compute += time;
                self.gemm += time;
            }
            OpKind::Memory => {
                self.compute += time;
                self.memory += time;
            }
            OpKind::WeightGradient => {
                self.compute += time;
                self.weight_gradient += time;
            }
            OpKind::Attention => {
                self.compute += time;
                self.attention += time;
            }
            OpKind::Recurrence => {
                self.compute += time;
                self.recurrence += time;
            }
            OpKind::TpComm => self.tp += time,
            OpKind::CpComm => self.cp_ring += time,
            OpKind::CpAllToAll => self.cp_all_to_all += time,
            OpKind::CpGather => self.cp_gather += time,
            OpKind::EpComm => self.ep += time,
        }
    }

    /// The totals with the fused attention's time scaled by `scale` (what documents shorter
    /// than the sequence leave of it) and every other row's by `tokens` (what variable
    /// micro-batches compute of a full one's tokens).
    fn with_attention_scale(self, scale: f64, tokens: f64) -> PhaseTimes {
        let attention = self.attention * scale;
        PhaseTimes {
            compute: (self.compute - self.attention) * tokens + attention,
            gemm: self.gemm * tokens,
            weight_gradient: self.weight_gradient * tokens,
            attention,
            recurrence: self.recurrence * tokens,
            memory: self.memory * tokens,
            tp: self.tp * tokens,
            cp_ring: self.cp_ring * tokens,
            cp_all_to_all: self.cp_all_to_all * tokens,
            cp_gather: self.cp_gather * tokens,
            ep: self.ep * tokens,
        }
    }

    /// The total of one kind of row.
    pub fn of(&self, kind: OpKind) -> Seconds {
        match kind {
            OpKind::Gemm => self.gemm,
            OpKind::WeightGradient => self.weight_gradient,
            OpKind::Attention => self.attention,
            OpKind::Recurrence => self.recurrence,
            OpKind::Memory => self.memory,
            OpKind::TpComm => self.tp,
            OpKind::CpComm => self.cp_ring,
            OpKind::CpAllToAll => self.cp_all_to_all,
            OpKind::CpGather => self.cp_gather,
            OpKind::EpComm => self.ep,
        }
    }
}

/// Everything pricing reads of a table, summed as its rows are pushed: both phases' times, each
/// recompute module's forward rerun, and FLOPs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpTotals {
    /// Forward totals.
    pub forward: PhaseTimes,
    /// Backward totals.
    pub backward: PhaseTimes,
    /// The forward work of each module's own rows (in [`RecomputeModule::ALL`] order).
    pub module_rerun: [Rerun; 7],
    /// FLOPs of the forward rows, and of the backward rows.
    pub flops: [Flops; 2],
    /// FLOPs of the weight-gradient GEMMs within the backward.
    pub weight_gradient_flops: Flops,
}

impl OpTotals {
    pub(crate) fn add(&mut self, op: &Op) {
        match op.phase {
            Phase::Forward => {
                self.forward.add(op.kind, op.time);
                self.flops[0] += op.flops;
                if let Some(module) = op.module {
                    self.module_rerun[module.index()].add(op.kind, op.time);
                }
            }
            Phase::Backward => {
                self.backward.add(op.kind, op.time);
                self.flops[1] += op.flops;
                if op.kind == OpKind::WeightGradient {
                    self.weight_gradient_flops += op.flops;
                }
            }
        }
    }

    /// The totals with the fused attention's time scaled, `forward` in the forward rows (and
    /// every module's rerun of them) and `backward` in the backward rows, and every other row's
    /// time by `tokens`; FLOPs are left as the rows count them.
    pub fn with_attention_scale(&self, forward: f64, backward: f64, tokens: f64) -> OpTotals {
        let rerun = |rerun: Rerun| {
            let attention = rerun.attention * forward;
            Rerun {
                compute: (rerun.compute - rerun.attention) * tokens + attention,
                attention,
                tp: rerun.tp * tokens,
                ep: rerun.ep * tokens,
            }
        };
        OpTotals {
            forward: self.forward.with_attention_scale(forward, tokens),
            backward: self.backward.with_attention_scale(backward, tokens),
            module_rerun: self.module_rerun.map(rerun),
            ..*self
        }
    }

    /// The totals of one phase.
    pub fn phase(&self, phase: Phase) -> &PhaseTimes {
        match phase {
            Phase::Forward => &self.forward,
            Phase::Backward => &self.backward,
        }
    }

    /// The FLOPs of one phase's rows.
    pub fn phase_flops(&self, phase: Phase) -> Flops {
        match phase {
            Phase::Forward => self.flops[0],
            Phase::Backward => self.flops[1],
        }
    }

    /// The forward work a selective recompute of `modules` reruns. The routed experts'
    /// activation is inside the MoE block: rerunning `moe` reruns it too.
    pub fn selective_rerun(&self, modules: RecomputeModules) -> Rerun {
        let reruns = |module: RecomputeModule| {
            modules.contains(module)
                || (module == RecomputeModule::MoeAct && modules.contains(RecomputeModule::Moe))
        };
        RecomputeModule::ALL
            .iter()
            .zip(&self.module_rerun)
            .filter(|(module, _)| reruns(**module))
            .fold(Rerun::default(), |sum, (_, rerun)| Rerun {
                compute: sum.compute + rerun.compute,
                attention: sum.attention + rerun.attention,
                tp: sum.tp + rerun.tp,
                ep: sum.ep + rerun.ep,
            })
    }
}

/// Whether a table keeps its rows, to be read one by one, or only their totals: pricing reads
/// the totals alone and builds its tables without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Keep every row (and the totals).
    Keep,
    /// Keep the totals only.
    TotalsOnly,
}

/// The operations of one layer (or of the embedding / head) for one micro-batch.
#[derive(Debug, Clone, PartialEq)]
pub struct OpTable {
    /// The rows, in execution order within each phase (empty under [`Rows::TotalsOnly`]).
    pub ops: Vec<Op>,
    /// The rows' totals, whether or not the rows are kept.
    pub totals: OpTotals,
    /// Whether rows are kept.
    rows: Rows,
    /// The module the rows pushed next belong to (set while the table is built).
    module: Option<RecomputeModule>,
}

impl OpTable {
    /// An empty table.
    pub fn new(rows: Rows) -> OpTable {
        OpTable::with_capacity(rows, 0)
    }

    /// An empty table with room for `capacity` rows when it keeps them, so that building one
    /// does not grow it.
    pub(crate) fn with_capacity(rows: Rows, capacity: usize) -> OpTable {
        let ops = match rows {
            Rows::Keep => Vec::with_capacity(capacity),
            Rows::TotalsOnly => Vec::new(),
        };
        OpTable { ops, totals: OpTotals::default(), rows, module: None }
    }

    /// Adds a memory-bound kernel that moves `bytes` through HBM.
    pub(crate) fn push_memory(
        &mut self,
        gpu: &Gpu,
        name: &'static str,
        phase: Phase,
        bytes: Bytes,
    ) {
        self.push_memory_at_least(gpu, name, phase, bytes, Seconds::ZERO);
    }

    /// [`OpTable::push_memory`] for kernels that last no less than `floor` (their host launches,
    /// `kernels::launch_floor`), however few bytes they move.
    pub(crate) fn push_memory_at_least(
        &mut self,
        gpu: &Gpu,
        name: &'static str,
        phase: Phase,
        bytes: Bytes,
        floor: Seconds,
    ) {
        let time = memory_time(gpu, bytes).max(floor);
        self.push(name, phase, OpKind::Memory, Flops::ZERO, bytes, time);
    }

    /// Total time of the rows of one phase and kind.
    pub fn time(&self, phase: Phase, kind: OpKind) -> Seconds {
        self.totals.phase(phase).of(kind)
    }

    /// Marks the rows pushed from now on as part of `module`.
    pub(crate) fn enter(&mut self, module: Option<RecomputeModule>) {
        self.module = module;
    }

    /// Total FLOPs of a phase.
    pub fn flops(&self, phase: Phase) -> Flops {
        self.totals.phase_flops(phase)
    }

    pub(crate) fn push(
        &mut self,
        name: &'static str,
        phase: Phase,
        kind: OpKind,
        flops: Flops,
        bytes: Bytes,
        time: Seconds,
    ) {
        let op = Op { name, phase, kind, flops, bytes, time, module: self.module };
        self.totals.add(&op);
        if self.rows == Rows::Keep {
            self.ops.push(op);
        }
    }
}

//! The engine's input and output types: what each position costs, the data-parallel collectives,
//! the setup, and the timeline, per-rank times and deadlock report that come back.

use super::program::{Program, Task};
use crate::cost::work::Work;
use crate::units::{Bytes, Seconds};

/// What one position (virtual stage) costs per micro-batch, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PositionCost {
    /// Transformer layers in the position: data-parallel traffic streams layer by layer.
    pub layers: f64,
    /// Compute and exposed in-layer communication by phase.
    pub work: Work,
    /// Activations stored from the forward to the backward.
    pub activations: Bytes,
    /// Of those, what is kept after an input-gradient backward until the weight gradient.
    pub weight_gradient_inputs: Bytes,
    /// Transient memory alive during the backward (a layer rebuilt by full recompute, logits).
    pub backward_working: Bytes,
    /// Of that, the logits (the last position of the path only).
    pub logits: Bytes,
}

/// Data-parallel collectives, per position of the path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DataParallel {
    /// Parameter gather before a position's first forward (distributed optimizer, or FSDP that
    /// keeps stages gathered), issued at the start of the step.
    pub gather_before_first_forward: Vec<Seconds>,
    /// Parameter gather before every forward and backward (FSDP with resharding), prefetched
    /// when the rank's previous task starts.
    pub gather_each_task: Vec<Seconds>,
    /// Gradient reduction after every backward (FSDP with resharding, ZeRO-2).
    pub reduce_each_backward: Vec<Seconds>,
    /// Gradient reduction once a position's gradients are complete for the step.
    pub reduce_when_complete: Vec<Seconds>,
    /// Whether `reduce_when_complete` starts as soon as the position is complete (else after the
    /// rank's last task).
    pub overlap_reduce: bool,
    /// Work after the data-parallel stream drains: un-overlapped gathers, replica reductions.
    pub tail: Seconds,
}

/// Everything the engine needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup<'a> {
    /// The schedule.
    pub program: &'a Program,
    /// Cost of each position.
    pub positions: Vec<PositionCost>,
    /// One pipeline send/receive.
    pub transfer: Seconds,
    /// Data-parallel collectives.
    pub data_parallel: DataParallel,
    /// Factor by which compute slows while a data-parallel collective runs.
    pub slowdown: f64,
    /// Model states of each rank (weights, gradients, optimizer, buffers).
    pub base_memory: Vec<Bytes>,
    /// Optimizer step of each rank.
    pub optimizer: Vec<Seconds>,
    /// Whether to keep every slice and memory sample (for traces); totals are kept regardless.
    pub timeline: bool,
}

/// A stream of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Forward, backward and weight-gradient compute.
    Compute,
    /// Pipeline sends to the neighbouring stage.
    PipelineSend,
    /// Data-parallel collectives.
    DataParallel,
}

/// What a slice of a lane is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceKind {
    /// A compute task.
    Task(Task),
    /// The send of a task's output to the rank that needs it.
    Send(Task),
    /// A parameter all-gather for a position.
    ParamGather {
        /// Position gathered.
        position: u32,
    },
    /// A gradient reduction for a position.
    GradientReduce {
        /// Position reduced.
        position: u32,
    },
    /// The optimizer step.
    Optimizer,
}

/// One busy interval of a lane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice {
    /// Rank.
    pub rank: u32,
    /// Lane.
    pub lane: Lane,
    /// What ran.
    pub kind: SliceKind,
    /// Start.
    pub start: Seconds,
    /// End.
    pub end: Seconds,
}

/// Memory in use on a rank from `time` on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemorySample {
    /// Rank.
    pub rank: u32,
    /// Time of the change.
    pub time: Seconds,
    /// Memory in use.
    pub bytes: Bytes,
}

/// Where one rank's time went.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RankTime {
    /// Forward compute.
    pub forward: Seconds,
    /// Backward compute.
    pub backward: Seconds,
    /// Recomputed forward.
    pub recompute: Seconds,
    /// Exposed TP communication.
    pub tp: Seconds,
    /// Exposed CP communication.
    pub cp: Seconds,
    /// Exposed expert-parallel all-to-all.
    pub ep: Seconds,
    /// Waiting for a neighbour's send beyond its compute.
    pub pp: Seconds,
    /// Data-parallel collectives not hidden, and the slowdown of compute they overlapped.
    pub dp: Seconds,
    /// Waiting for a neighbour's compute (fill, drain and imbalance).
    pub bubble: Seconds,
    /// Optimizer step.
    pub optimizer: Seconds,
    /// End of the rank's step.
    pub end: Seconds,
}

/// The result of a run of the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Every busy interval, per rank and lane, in placement order.
    pub slices: Vec<Slice>,
    /// Memory over time, per rank, in time order within a rank.
    pub memory: Vec<MemorySample>,
    /// Where each rank's time went.
    pub ranks: Vec<RankTime>,
    /// Peak memory in use per rank.
    pub peak_memory: Vec<Bytes>,
    /// The logits alive at that peak, per rank (zero unless the peak falls in a backward of the
    /// path's last position).
    pub peak_logits: Vec<Bytes>,
    /// Peak micro-batches with a finished forward and an unfinished backward, per rank.
    pub peak_in_flight: Vec<u32>,
}

/// A task that could not start, and what it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckTask {
    /// Rank.
    pub rank: u32,
    /// The rank's next task.
    pub task: Task,
    /// Tasks it depends on that never ran.
    pub waiting_for: Vec<Task>,
}

//! What a pipeline schedule is, as data: the ordered list of tasks each rank runs, and where each
//! micro-batch's path of virtual stages is placed.
//!
//! A micro-batch flows through `positions` virtual stages (pp for 1F1B, pp x vp interleaved, pp
//! per direction for DualPipe). Its forward at position `k` needs its forward at `k - 1`; its
//! backward at `k` needs its forward at `k` and its backward at `k + 1`; a deferred weight gradient
//! needs the input-gradient backward of the same position. Those are the only dependencies; the
//! schedule is nothing but each rank's order.

use std::fmt;

/// The kind of work in a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskKind {
    /// Forward of one micro-batch through one virtual stage.
    Forward,
    /// Full backward (input and weight gradients).
    Backward,
    /// Input-gradient part of a split backward (zero-bubble schedules).
    BackwardInput,
    /// Weight-gradient part of a split backward, run later.
    WeightGradient,
}

impl TaskKind {
    /// One-letter name as in the zero-bubble paper and torchtitan CSV schedules.
    pub fn letter(self) -> char {
        match self {
            TaskKind::Forward => 'F',
            TaskKind::Backward => 'B',
            TaskKind::BackwardInput => 'I',
            TaskKind::WeightGradient => 'W',
        }
    }
}

/// One unit of work on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Task {
    /// Forward, backward, input gradient or weight gradient.
    pub kind: TaskKind,
    /// Micro-batch index, over all directions.
    pub microbatch: u32,
    /// Position of the virtual stage along the micro-batch's path.
    pub position: u32,
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{} mb{}", self.kind.letter(), self.position, self.microbatch)
    }
}

/// Where the virtual stages sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Position `k` runs on rank `k % ranks` (1F1B, GPipe, zero-bubble, interleaved 1F1B).
    Looped,
    /// Two directions: the first half of the micro-batches runs positions on ranks `0..p`, the
    /// second half on ranks `p-1..=0` (DualPipe).
    Bidirectional,
}

/// A whole schedule: every rank's ordered tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Pipeline ranks.
    pub ranks: u32,
    /// Virtual stages along one micro-batch's path.
    pub positions: u32,
    /// Micro-batches per step.
    pub microbatches: u32,
    /// How positions map to ranks.
    pub placement: Placement,
    /// Each rank's tasks in execution order.
    pub order: Vec<Vec<Task>>,
}

impl Program {
    /// The rank that runs `position` of `microbatch`'s path.
    pub fn rank_of(&self, microbatch: u32, position: u32) -> u32 {
        match self.placement {
            Placement::Looped => position % self.ranks,
            Placement::Bidirectional => {
                if microbatch < self.microbatches / 2 {
                    position
                } else {
                    self.ranks - 1 - position
                }
            }
        }
    }

    /// Model chunk index of a position on its rank (0 for one stage per rank).
    pub fn chunk_of(&self, microbatch: u32, position: u32) -> u32 {
        match self.placement {
            Placement::Looped => position / self.ranks,
            Placement::Bidirectional => u32::from(microbatch >= self.microbatches / 2),
        }
    }

    /// The positions a rank runs tasks for, in increasing order.
    pub fn positions_held(&self, rank: u32) -> Vec<u32> {
        // Marked, not sorted: a rank runs hundreds of tasks over a few positions.
        let mut held = vec![false; self.positions as usize];
        for task in &self.order[rank as usize] {
            if let Some(mark) = held.get_mut(task.position as usize) {
                *mark = true;
            }
        }
        (0..self.positions).filter(|&p| held[p as usize]).collect()
    }

    /// Total number of tasks.
    pub fn len(&self) -> usize {
        self.order.iter().map(Vec::len).sum()
    }

    /// Whether the program has no tasks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

//! DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437, and the `deepseek-ai/DualPipe`
//! reference schedule): half the micro-batches enter at rank 0 and flow down, the other half enter
//! at the last rank and flow up, so every rank holds two stages (rank `r` holds stage `r` of the
//! first direction and stage `p - 1 - r` of the second). Each rank's order follows the reference
//! implementation's eight steps; "phase 0" of a rank is the direction in which it is nearer the
//! entry. Overlapped forward-and-backward chunks (which hide expert-parallel all-to-all in
//! DeepSeek-V3) run back to back here, since dense layers have no all-to-all to hide.

use std::collections::VecDeque;

use super::task;
use crate::sim::program::{Task, TaskKind};

struct Rank {
    tasks: Vec<Task>,
    /// Direction of phase 0 and phase 1.
    directions: [u32; 2],
    next_forward: [u32; 2],
    next_backward: [u32; 2],
    deferred: VecDeque<Task>,
    pp: u32,
    rank: u32,
    half: u32,
}

impl Rank {
    fn microbatch(&self, direction: u32, index: u32) -> u32 {
        direction * self.half + index
    }

    fn position(&self, direction: u32) -> u32 {
        if direction == 0 { self.rank } else { self.pp - 1 - self.rank }
    }

    fn forward(&mut self, phase: usize) {
        let direction = self.directions[phase];
        let mb = self.microbatch(direction, self.next_forward[phase]);
        self.next_forward[phase] += 1;
        self.tasks.push(task(TaskKind::Forward, mb, self.position(direction)));
    }

    fn backward(&mut self, phase: usize, zero_bubble: bool) {
        let direction = self.directions[phase];
        let mb = self.microbatch(direction, self.next_backward[phase]);
        self.next_backward[phase] += 1;
        let position = self.position(direction);
        if zero_bubble {
            self.tasks.push(task(TaskKind::BackwardInput, mb, position));
            self.deferred.push_back(task(TaskKind::WeightGradient, mb, position));
        } else {
            self.tasks.push(task(TaskKind::Backward, mb, position));
        }
    }

    fn weight(&mut self) {
        if let Some(task) = self.deferred.pop_front() {
            self.tasks.push(task);
        }
    }
}

/// Each rank's tasks; `pp` is even and `microbatches` is even and at least `2 pp`.
pub fn order(pp: u32, microbatches: u32) -> Vec<Vec<Task>> {
    (0..pp).map(|rank| rank_order(pp, microbatches, rank)).collect()
}

fn rank_order(pp: u32, microbatches: u32, rank: u32) -> Vec<Task> {
    let half_ranks = pp / 2;
    let half_rank = rank.min(pp - 1 - rank);
    let half = microbatches / 2;
    let first_direction = u32::from(rank >= half_ranks);
    let mut r = Rank {
        tasks: Vec::with_capacity(3 * microbatches as usize),
        directions: [first_direction, 1 - first_direction],
        next_forward: [0; 2],
        next_backward: [0; 2],
        deferred: VecDeque::new(),
        pp,
        rank,
        half,
    };
    // Step 1: forwards of phase 0 only.
    for _ in 0..(half_ranks - half_rank - 1) * 2 {
        r.forward(0);
    }
    // Step 2: forwards of both phases.
    for _ in 0..=half_rank {
        r.forward(0);
        r.forward(1);
    }
    // Step 3: zero-bubble backward of phase 1, a weight gradient, a forward of phase 1.
    for _ in 0..half_ranks - half_rank - 1 {
        r.backward(1, true);
        r.weight();
        r.forward(1);
    }
    // Step 4, the main step: forward 0 with backward 1, forward 1 with backward 0.
    for _ in 0..half - pp + half_rank + 1 {
        r.forward(0);
        r.backward(1, false);
        r.forward(1);
        r.backward(0, false);
    }
    // Step 5: backward of phase 1, then forward 1 with backward 0.
    for _ in 0..half_ranks - half_rank - 1 {
        r.backward(1, false);
        r.forward(1);
        r.backward(0, false);
    }
    // Step 6: backwards of both phases, the second half of them split for zero bubble.
    let steps = half_rank + 1;
    let mut zero_bubble = false;
    for i in 0..steps {
        if i == steps / 2 && half_rank % 2 == 1 {
            zero_bubble = true;
        }
        r.backward(1, zero_bubble);
        if i == steps / 2 && half_rank.is_multiple_of(2) {
            zero_bubble = true;
        }
        r.backward(0, zero_bubble);
    }
    // Step 7: a weight gradient, then a zero-bubble backward of phase 0.
    for _ in 0..half_ranks - half_rank - 1 {
        r.weight();
        r.backward(0, true);
    }
    // Step 8: the remaining weight gradients.
    while !r.deferred.is_empty() {
        r.weight();
    }
    r.tasks
}

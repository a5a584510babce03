//! 1F1B (PipeDream-Flush, Megatron-LM's non-interleaved schedule): stage `s` warms up with
//! `pp - s - 1` forwards, then alternates one forward and one backward, then drains.

use super::task;
use crate::sim::program::{Task, TaskKind};

/// Each rank's tasks.
pub fn order(pp: u32, microbatches: u32) -> Vec<Vec<Task>> {
    (0..pp)
        .map(|stage| {
            let warmup = (pp - stage - 1).min(microbatches);
            let mut tasks: Vec<Task> =
                (0..warmup).map(|mb| task(TaskKind::Forward, mb, stage)).collect();
            for mb in 0..microbatches {
                if mb + warmup < microbatches {
                    tasks.push(task(TaskKind::Forward, mb + warmup, stage));
                }
                tasks.push(task(TaskKind::Backward, mb, stage));
            }
            tasks
        })
        .collect()
}

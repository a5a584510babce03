//! ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B with each backward split
//! into its input-gradient part (`I`, on the critical path) and its weight-gradient part (`W`).
//! Stage `s` runs `W` of micro-batch `j - s` after `I` of `j`, so the last stages, which idle longest
//! in the drain, keep the most weight gradients to fill it, while no stage holds more micro-batches
//! than under 1F1B. With `W` as long as `I` the bubble falls from `(p-1)(F+B)` to `(p-1) F`.

use super::task;
use crate::sim::program::{Task, TaskKind};

/// Each rank's tasks.
pub fn order(pp: u32, microbatches: u32) -> Vec<Vec<Task>> {
    (0..pp)
        .map(|stage| {
            let warmup = (pp - stage - 1).min(microbatches);
            let delay = stage.min(microbatches);
            let mut tasks: Vec<Task> =
                (0..warmup).map(|mb| task(TaskKind::Forward, mb, stage)).collect();
            for mb in 0..microbatches {
                if mb + warmup < microbatches {
                    tasks.push(task(TaskKind::Forward, mb + warmup, stage));
                }
                tasks.push(task(TaskKind::BackwardInput, mb, stage));
                if mb >= delay {
                    tasks.push(task(TaskKind::WeightGradient, mb - delay, stage));
                }
            }
            tasks.extend(
                (microbatches - delay..microbatches)
                    .map(|mb| task(TaskKind::WeightGradient, mb, stage)),
            );
            tasks
        })
        .collect()
}

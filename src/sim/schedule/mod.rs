//! Schedule generators: each turns (pp, vp, micro-batches) into a [`Program`], every rank's task
//! order, exactly as the engine that runs it orders its work.

mod dualpipe;
mod gpipe;
mod interleaved;
mod one_f_one_b;
mod zero_bubble;

use super::program::{Placement, Program, Task, TaskKind};
use crate::plan::PipelineSchedule;

/// Builds the program of a schedule. The plan validation guarantees its preconditions (vp for
/// interleaving, even pp and enough micro-batches for DualPipe).
pub fn program(schedule: PipelineSchedule, pp: u32, vp: u32, microbatches: u32) -> Program {
    let (placement, positions, order) = match schedule {
        PipelineSchedule::Gpipe => (Placement::Looped, pp, gpipe::order(pp, microbatches)),
        PipelineSchedule::OneFOneB => (Placement::Looped, pp, one_f_one_b::order(pp, microbatches)),
        PipelineSchedule::Interleaved => {
            (Placement::Looped, pp * vp, interleaved::order(pp, vp, microbatches))
        }
        PipelineSchedule::ZeroBubble => {
            (Placement::Looped, pp, zero_bubble::order(pp, microbatches))
        }
        PipelineSchedule::Dualpipe => {
            (Placement::Bidirectional, pp, dualpipe::order(pp, microbatches))
        }
    };
    Program { ranks: pp, positions, microbatches, placement, order }
}

fn task(kind: TaskKind, microbatch: u32, position: u32) -> Task {
    Task { kind, microbatch, position }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schedule_runs_each_micro_batch_once_per_stage() {
        for schedule in PipelineSchedule::ALL {
            let (pp, vp, m) = match schedule {
                PipelineSchedule::Interleaved => (4, 2, 8),
                _ => (4, 1, 8),
            };
            let program = program(schedule, pp, vp, m);
            let mut seen = std::collections::BTreeSet::new();
            for (rank, tasks) in program.order.iter().enumerate() {
                for task in tasks {
                    assert_eq!(program.rank_of(task.microbatch, task.position), rank as u32);
                    assert!(seen.insert(*task), "{schedule:?}: {task} twice");
                }
            }
            let backwards = |kind| seen.iter().filter(|t| t.kind == kind).count() as u32;
            let expected = m * program.positions;
            assert_eq!(backwards(TaskKind::Forward), expected, "{schedule:?}");
            assert_eq!(
                backwards(TaskKind::Backward) + backwards(TaskKind::BackwardInput),
                expected,
                "{schedule:?}"
            );
            assert_eq!(backwards(TaskKind::WeightGradient), backwards(TaskKind::BackwardInput));
        }
    }
}

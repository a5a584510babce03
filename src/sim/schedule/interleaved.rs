//! Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM `forward_backward_pipelining_with_
//! interleaving`): each rank holds `vp` chunks; position `c * pp + r` is chunk `c` of rank `r`.
//! Micro-batches go through the chunks in groups of `pp`: the k-th forward of a rank is micro-batch
//! `(k / (pp vp)) pp + k % pp` of chunk `(k / pp) % vp`, backwards likewise with the chunks in
//! reverse. Rank `r` warms up with `(pp - r - 1) x 2 + (vp - 1) x pp` forwards, then alternates,
//! then drains. The plan validation requires the micro-batches to be a multiple of `pp`, as
//! Megatron-LM's schedule does.

use super::task;
use crate::sim::program::{Task, TaskKind};

/// The (micro-batch, chunk) of every forward of one rank in order; backwards use the same list
/// with the chunks reversed.
fn chunk_sequence(pp: u32, vp: u32, microbatches: u32, reverse: bool) -> Vec<(u32, u32)> {
    let mut sequence = Vec::with_capacity((microbatches * vp) as usize);
    let mut first = 0;
    while first < microbatches {
        let group = (microbatches - first).min(pp);
        for chunk in 0..vp {
            let chunk = if reverse { vp - 1 - chunk } else { chunk };
            sequence.extend((first..first + group).map(|mb| (mb, chunk)));
        }
        first += group;
    }
    sequence
}

/// Each rank's tasks.
pub fn order(pp: u32, vp: u32, microbatches: u32) -> Vec<Vec<Task>> {
    let forwards = chunk_sequence(pp, vp, microbatches, false);
    let backwards = chunk_sequence(pp, vp, microbatches, true);
    let total = forwards.len() as u32;
    (0..pp)
        .map(|rank| {
            let position = |chunk: u32| chunk * pp + rank;
            let warmup = ((pp - rank - 1) * 2 + (vp - 1) * pp).min(total);
            let forward = |k: u32| {
                let (mb, chunk) = forwards[k as usize];
                task(TaskKind::Forward, mb, position(chunk))
            };
            let backward = |k: u32| {
                let (mb, chunk) = backwards[k as usize];
                task(TaskKind::Backward, mb, position(chunk))
            };
            let mut tasks: Vec<Task> = (0..warmup).map(forward).collect();
            for k in 0..total {
                if k + warmup < total {
                    tasks.push(forward(k + warmup));
                }
                tasks.push(backward(k));
            }
            tasks
        })
        .collect()
}

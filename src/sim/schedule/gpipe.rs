//! GPipe (Huang et al. 2019): every stage runs all forwards, then all backwards in reverse order.

use super::task;
use crate::sim::program::{Task, TaskKind};

/// Each rank's tasks.
pub fn order(pp: u32, microbatches: u32) -> Vec<Vec<Task>> {
    (0..pp)
        .map(|stage| {
            let forwards = (0..microbatches).map(|mb| task(TaskKind::Forward, mb, stage));
            let backwards = (0..microbatches).rev().map(|mb| task(TaskKind::Backward, mb, stage));
            forwards.chain(backwards).collect()
        })
        .collect()
}

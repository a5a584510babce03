//! Memory per pipeline stage.
use crate::estimate::StageMemory;
use crate::run::Run;
/// Memory of every stage.
pub fn stage_memory(_run: &Run) -> Vec<StageMemory> { Vec::new() }

//! The launch configuration of a plan for the engine that runs it: Megatron-LM command-line
//! arguments (`megatron.rs`), a torchtitan job TOML (`torchtitan.rs`) and a DeepSpeed JSON config
//! (`deepspeed.rs`), with exactly the option names of `reference/formats-and-hardware.md`.
//!
//! Each engine also says which plans it cannot run ([`check`]); the search uses the same check to
//! reject candidates for a target engine, and an export of such a plan is refused with the reason.

mod deepspeed;
mod megatron;
mod torchtitan;

use crate::run::Run;

pub use crate::plan::Engine;

/// Why an engine cannot run a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{engine} cannot run this plan: {reason}")]
pub struct Unsupported {
    /// The engine.
    pub engine: &'static str,
    /// What it lacks.
    pub reason: String,
}

/// Whether an engine can run the plan of a run.
pub fn check(engine: Engine, run: &Run) -> Result<(), Unsupported> {
    let reason = match engine {
        Engine::Megatron => megatron::unsupported(run),
        Engine::Torchtitan => torchtitan::unsupported(run),
        Engine::Deepspeed => deepspeed::unsupported(run),
    };
    match reason {
        None => Ok(()),
        Some(reason) => Err(Unsupported { engine: engine.name(), reason }),
    }
}

/// The plan of a run as the engine's launch configuration.
pub fn export(engine: Engine, run: &Run) -> Result<String, Unsupported> {
    check(engine, run)?;
    Ok(match engine {
        Engine::Megatron => megatron::arguments(run),
        Engine::Torchtitan => torchtitan::job_config(run),
        Engine::Deepspeed => deepspeed::config(run),
    })
}

//! The launch configuration of a plan for the engine that runs it: Megatron-LM command-line
//! arguments (`megatron.rs`), a torchtitan job TOML (`torchtitan.rs`) and a DeepSpeed JSON config
//! (`deepspeed.rs`), with exactly the option names of `reference/formats-and-hardware.md`.
//!
//! What each engine runs is one table (`capability.rs`; its activation offload is described in
//! `offload.rs`): [`check`] returns every reason an engine refuses a plan; the search uses the
//! same check to reject candidates for a target engine, and an export of such a plan is refused
//! with all the reasons. [`check_memory`] is the export's other refusal: a plan predicted over the
//! GPU's memory.

pub mod capability;
#[cfg(test)]
mod capability_tests;
mod deepspeed;
mod megatron;
mod megatron_release;
mod offload;
mod refusal;
mod torchtitan;

use std::fmt;

use crate::estimate::Estimate;
use crate::run::Run;
use crate::stack::{MegatronArguments, TorchtitanConfig};
use crate::units::Bytes;

pub use capability::{Capabilities, data_refusal, data_refusal_sentence, refusals};
pub use refusal::Refusal;

pub use crate::plan::Engine;

/// Why an engine cannot run a plan: every reason, in the table's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The engine.
    pub engine: Engine,
    /// Everything it lacks (never empty).
    pub refusals: Vec<Refusal>,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.refusals.iter().all(Refusal::concerns_writer) {
            write!(
                f,
                "meshplan does not write {}'s configuration of this plan: ",
                self.engine.name()
            )?;
        } else {
            write!(f, "{} cannot run this plan: ", self.engine.name())?;
        }
        match self.refusals.as_slice() {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} reasons", all.len())?;
                for (index, refusal) in all.iter().enumerate() {
                    write!(f, "\n  {}. {refusal}", index + 1)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Unsupported {}

/// Whether an engine can run the plan of a run: every reason it cannot, from the capability
/// table ([`capability::refusals`]).
pub fn check(engine: Engine, run: &Run) -> Result<(), Unsupported> {
    let refusals = refusals(engine, run);
    if refusals.is_empty() { Ok(()) } else { Err(Unsupported { engine, refusals }) }
}

/// A plan's memory over what the hardware has: the worst stage's peak over the GPU's memory, or
/// its offloaded activations over the host memory each GPU of the server has.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum OverCapacity {
    /// GPU memory.
    #[error(
        "the plan needs {:.2} GiB per GPU (stage {stage}, the peak) but the GPU has {:.2} GiB",
        needed.as_gib(),
        available.as_gib()
    )]
    Gpu {
        /// Predicted peak memory of the worst stage.
        needed: Bytes,
        /// Usable memory of one GPU.
        available: Bytes,
        /// The stage with that peak.
        stage: u64,
    },
    /// Host memory of the offloaded activations.
    #[error(
        "the plan offloads {:.2} GiB of activations per GPU but the server's host memory gives \
         each GPU {:.2} GiB",
        needed.as_gib(),
        available.as_gib()
    )]
    Host {
        /// Offloaded activations one GPU holds in host memory at the peak.
        needed: Bytes,
        /// The server's host memory over its GPUs.
        available: Bytes,
    },
}

impl OverCapacity {
    /// The memory the plan needs.
    pub fn needed(&self) -> Bytes {
        match self {
            OverCapacity::Gpu { needed, .. } | OverCapacity::Host { needed, .. } => *needed,
        }
    }
}

/// What an estimate needs beyond the hardware's memory, GPU first (empty when it fits); an export
/// of a plan that does not fit is refused unless the user asks for it anyway.
pub fn check_memory(estimate: &Estimate) -> Vec<OverCapacity> {
    let mut over = Vec::new();
    if !estimate.fits_on_gpu() {
        over.push(OverCapacity::Gpu {
            needed: estimate.peak_memory.breakdown.fit_need(),
            available: estimate.memory_capacity,
            stage: estimate.peak_memory.stage,
        });
    }
    if let Some(host) = estimate.host_memory.filter(|host| !host.fits())
        && let Some(available) = host.capacity
    {
        over.push(OverCapacity::Host { needed: host.offloaded, available });
    }
    over
}

/// Whether the plan of a run can be exported for an engine: every reason the engine refuses it
/// ([`check`]) and those of the writer alone, which the search does not apply since the engine
/// runs the plan: gated DeltaNet layers (Megatron-Core 0.17 builds them; meshplan does not write
/// their flags), Megatron-LM before Megatron-Core, and a torchtitan that reads an older job
/// configuration than meshplan writes.
pub fn check_export(engine: Engine, run: &Run) -> Result<(), Unsupported> {
    let mut refusals = refusals(engine, run);
    if engine == Engine::Megatron && run.model().hybrid_linear_attention().is_some() {
        refusals.push(Refusal::LinearAttentionLayers);
    }
    if engine == Engine::Torchtitan && run.stack().torchtitan_config() == TorchtitanConfig::Legacy {
        refusals.push(Refusal::TorchtitanConfig);
    }
    if engine == Engine::Megatron
        && run.stack().megatron_arguments() == MegatronArguments::BeforeCore
    {
        refusals.push(Refusal::MegatronBeforeCore);
    }
    if refusals.is_empty() { Ok(()) } else { Err(Unsupported { engine, refusals }) }
}

/// The plan of a run as the engine's launch configuration.
pub fn export(engine: Engine, run: &Run) -> Result<String, Unsupported> {
    check_export(engine, run)?;
    Ok(match engine {
        Engine::Megatron => {
            megatron::arguments(run).map_err(|refusals| Unsupported { engine, refusals })?
        }
        Engine::Torchtitan => torchtitan::job_config(run),
        Engine::Deepspeed => deepspeed::config(run),
    })
}

//! The result of pricing one run: memory per GPU, step time and throughput, each broken down so
//! that the parts add up to the totals.
//!
//! These are plain values; the CLI renders them as tables or JSON. `estimate()` is the single
//! entry point that turns a validated [`Run`] into an [`Estimate`]. The breakdown types live in
//! [`crate::cost::breakdown`], below the cost model that fills them, and are re-exported here.

use serde::Serialize;

use crate::cost;
pub use crate::cost::breakdown::{MemoryBreakdown, StageMemory, Throughput, TimeBreakdown};
use crate::run::Run;
use crate::sim::{SimError, SimOptions, Simulation, simulate_with};
use crate::units::Bytes;

/// Where an estimate's step time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    /// The closed form: slowest stage times micro-batches plus the schedule's bubble formula.
    ClosedForm,
    /// The event simulation of the plan's pipeline schedule.
    Simulated,
}

/// The full prediction for one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// How the step time was obtained.
    pub time_source: TimeSource,
    /// Memory of the stage with the highest peak.
    pub peak_memory: StageMemory,
    /// Memory of every pipeline stage.
    pub stages: Vec<StageMemory>,
    /// Usable memory of one GPU.
    pub memory_capacity: Bytes,
    /// Where the step's time goes.
    pub time: TimeBreakdown,
    /// Throughput figures.
    pub throughput: Throughput,
}

impl Estimate {
    /// Whether the worst stage's predicted peak fits in GPU memory.
    pub fn fits(&self) -> bool {
        self.peak_memory.breakdown.total() <= self.memory_capacity
    }
}

/// The stage with the highest peak.
fn peak_stage(stages: &[StageMemory]) -> StageMemory {
    *stages
        .iter()
        .max_by(|a, b| a.breakdown.total().value().total_cmp(&b.breakdown.total().value()))
        .unwrap_or(&StageMemory { stage: 0, breakdown: MemoryBreakdown::default() })
}

/// Prices one run with the closed form: memory of every stage and the time of one step. This is
/// the fast path (a few microseconds) that a plan search calls for every candidate.
pub fn estimate(run: &Run) -> Estimate {
    let stages = cost::memory::stage_memory(run);
    let time = cost::step::step_time(run);
    Estimate {
        time_source: TimeSource::ClosedForm,
        peak_memory: peak_stage(&stages),
        stages,
        memory_capacity: run.cluster().gpu().memory(),
        throughput: cost::step::throughput(run, &time),
        time,
    }
}

/// Prices one run with the step simulated under its pipeline schedule: the step time and each
/// stage's peak memory come from the simulation, which knows what the closed form cannot (the
/// schedule's real order, zero-bubble and DualPipe, bucketed data-parallel traffic).
pub fn estimate_simulated(run: &Run) -> Result<(Estimate, Simulation), SimError> {
    estimate_simulated_with(run, SimOptions { timeline: true })
}

/// [`estimate_simulated`] with a choice of what the simulation keeps; pricing without the
/// timeline is several times faster.
pub fn estimate_simulated_with(
    run: &Run,
    options: SimOptions,
) -> Result<(Estimate, Simulation), SimError> {
    let simulation = simulate_with(run, options)?;
    let stages: Vec<StageMemory> = simulation
        .ranks
        .iter()
        .map(|rank| StageMemory { stage: u64::from(rank.rank), breakdown: rank.peak_memory })
        .collect();
    let time = simulation.time;
    let estimate = Estimate {
        time_source: TimeSource::Simulated,
        peak_memory: peak_stage(&stages),
        stages,
        memory_capacity: run.cluster().gpu().memory(),
        throughput: cost::step::throughput(run, &time),
        time,
    };
    Ok((estimate, simulation))
}

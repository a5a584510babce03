//! The whole run, not one step: how long and how much it takes to train a token budget once
//! failures, checkpoints and restarts are counted. A plan's step time (closed form or simulated)
//! becomes the run's productive time; the job's failure rate (from its node count), the
//! checkpoint the plan's state makes and the restart cost turn it into wall-clock time, GPU-hours
//! and cost, with the effective training time ratio (ETTR) and its losses broken down.
//!
//! `spec.rs` holds the inputs (raw and validated), `failures.rs` the fleets' failure rates,
//! `checkpoint.rs` the checkpoint's size and times, `expected.rs` the closed form (expected time
//! under Poisson failures) and `monte_carlo.rs` a seeded simulation of whole runs.

pub mod checkpoint;
pub mod expected;
pub mod failures;
pub mod monte_carlo;
pub mod spec;

pub use checkpoint::{Checkpoint, CheckpointMode};
pub use expected::{Losses, RunOutlook, outlook};
pub use failures::FleetPreset;
pub use monte_carlo::{DrawnRun, MonteCarlo, draw_run, simulate_runs};
pub use spec::{Goodput, GoodputSpec, TrainLength};

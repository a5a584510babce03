//! meshplan: predict the memory and step time of a distributed LLM training plan before any GPU
//! is booked.
//!
//! The flow is: raw specs (`ModelSpec`, `GpuSpec`, `TrainingSpec`, `PlanSpec`, from presets, files
//! and flags) → [`Run::from_spec`] validates them together, reporting every problem at once →
//! [`estimate`] prices the run with the analytical cost model in [`cost`] → an [`Estimate`] with
//! memory and time breakdowns that the CLI renders. [`validate`] runs the same pipeline over the
//! published measurements in a calibration CSV.
//!
//! ```
//! use meshplan::{estimate::closed_form, presets, Run, RunSpec};
//! use meshplan::hardware::ClusterSpec;
//! use meshplan::plan::{PlanSpec, TrainingSpec};
//!
//! let spec = RunSpec {
//!     model: presets::model("llama3.1-70b").unwrap(),
//!     cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 64 },
//!     training: TrainingSpec { seq_len: 8192, global_batch: 128, micro_batch: Some(1), precision: None },
//!     plan: PlanSpec { tp: Some(8), pp: Some(4), vp: Some(5), ..PlanSpec::default() },
//!     data: None,
//! };
//! let run = Run::from_spec(&spec).unwrap();
//! let estimate = closed_form(&run);
//! assert!(estimate.throughput.tokens_per_sec_per_gpu > 0.0);
//! assert!((estimate.time.step_time().value() - estimate.throughput.step_time.value()).abs() < 1e-12);
//! ```

#![warn(missing_docs)]

pub mod cli;
pub mod cost;
pub mod data;
pub mod estimate;
pub mod export;
pub mod goodput;
pub mod hardware;
pub mod limits;
pub mod model;
pub mod plan;
pub mod plan_diff;
pub mod plan_file;
pub mod presets;
pub mod report;
pub mod run;
pub mod schema;
pub mod search;
pub mod sim;
pub mod stack;
pub mod units;
pub mod validate;
pub mod violation;

pub use estimate::{Estimate, closed_form, estimate_simulated};
pub use run::{Run, RunSpec};

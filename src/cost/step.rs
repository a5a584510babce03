//! Step time.
use crate::estimate::{Throughput, TimeBreakdown};
use crate::run::Run;
/// Step time.
pub fn step_time(_run: &Run) -> TimeBreakdown { TimeBreakdown::default() }
/// Throughput.
pub fn throughput(_run: &Run, time: &TimeBreakdown) -> Throughput { Throughput { step_time: time.step_time(), tokens_per_sec_per_gpu: 1.0, model_tflops_per_gpu: 0.0, mfu_pct: 0.0, hfu_pct: 0.0 } }

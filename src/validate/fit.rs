//! A row's predicted memory against what it measured (the counter it read), and published runs
//! predicted not to fit in GPU memory: they did run, so each is a modelling or default error to
//! find. For each, what must fit (allocated tensors, CUDA context, NCCL buffers), the capacity, how
//! much over, and the part that dominates.

use serde::Serialize;

use super::RowResult;
use super::memory_counter::memory_counter;
use super::row::CalibrationRow;
use crate::Estimate;
use crate::cost::breakdown::MemoryBreakdown;
use crate::units::Bytes;

/// Fills a priced row's memory figures: the breakdown, the counter its measurement reads and the
/// error against it, and why it does not fit when it does not.
pub(super) fn compare_memory(row: &CalibrationRow, estimate: &Estimate, result: &mut RowResult) {
    let breakdown = estimate.peak_memory.breakdown;
    result.memory_breakdown = Some(breakdown);
    let mut predicted_memory = breakdown.total().as_gib();
    if let Some(measured_memory) = result.measured_memory_gib {
        let (counter, assumed) = memory_counter(row);
        if let Some(why) = assumed {
            result.assumptions.push(format!("measured memory read as {}: {why}", counter.name()));
        }
        predicted_memory = breakdown.counted(counter).as_gib();
        result.memory_counter = Some(counter);
        result.memory_error_pct =
            Some((predicted_memory - measured_memory) / measured_memory * 100.0);
    }
    result.predicted_memory_gib = Some(predicted_memory);
    let Some((need, capacity, part, part_gib, memory_assumptions)) =
        over_capacity(&breakdown, estimate.memory_capacity, &result.assumptions)
    else {
        return;
    };
    result.assumptions.push(format!(
        "predicted allocated memory, CUDA context and NCCL buffers {need:.1} GiB exceed the \
         {capacity:.1} GiB capacity by {:.1} GiB (largest part: {part} {part_gib:.1} GiB)",
        need - capacity
    ));
    result.over_capacity = Some(OverCapacity {
        row_id: result.row_id.clone(),
        model: result.model.clone(),
        gpu: result.gpu.clone(),
        plan: result.plan.clone().unwrap_or_default(),
        need_gib: need,
        capacity_gib: capacity,
        over_gib: need - capacity,
        largest_part: part.to_owned(),
        largest_part_gib: part_gib,
        memory_assumptions,
    });
}

/// Why one predicted run does not fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverCapacity {
    /// The row's `row_id`.
    pub row_id: String,
    /// The model as the row writes it.
    pub model: String,
    /// The GPU preset.
    pub gpu: String,
    /// The plan label.
    pub plan: String,
    /// What must fit ([`MemoryBreakdown::fit_need`]), in GiB.
    pub need_gib: f64,
    /// The GPU's memory, in GiB.
    pub capacity_gib: f64,
    /// `need_gib - capacity_gib`.
    pub over_gib: f64,
    /// The largest part of what must fit.
    pub largest_part: String,
    /// That part, in GiB.
    pub largest_part_gib: f64,
    /// Settings the row left blank that decide memory (recompute, sharding, micro-batch), as
    /// assumed.
    pub memory_assumptions: Vec<String>,
}

/// The over-capacity record of a run needing more than `capacity`, or `None` when it fits.
pub fn over_capacity(
    memory: &MemoryBreakdown,
    capacity: Bytes,
    assumptions: &[String],
) -> Option<(f64, f64, &'static str, f64, Vec<String>)> {
    let need = memory.fit_need();
    if need <= capacity {
        return None;
    }
    let (name, largest) = memory
        .parts()
        .into_iter()
        .filter(|(name, _)| *name != "allocator cache")
        .max_by(|a, b| a.1.value().total_cmp(&b.1.value()))
        .expect("a breakdown has parts");
    let decisive = ["recompute", "sharding", "micro-batch", "local batch"];
    let memory_assumptions = assumptions
        .iter()
        .filter(|a| decisive.iter().any(|d| a.contains(d)) && !a.contains("exceeds"))
        .cloned()
        .collect();
    Some((need.as_gib(), capacity.as_gib(), name, largest.as_gib(), memory_assumptions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dominant_part_and_the_overshoot_are_named() {
        let memory = MemoryBreakdown {
            weights: Bytes::gib(10.0),
            activations: Bytes::gib(75.0),
            fragmentation: Bytes::gib(50.0),
            cuda_context: Bytes::gib(1.0),
            ..MemoryBreakdown::default()
        };
        let assumptions = vec!["activation recompute not stated: None (family default)".into()];
        let (need, capacity, name, largest, decisive) =
            over_capacity(&memory, Bytes::gib(80.0), &assumptions).unwrap();
        assert_eq!((need, capacity, name, largest), (86.0, 80.0, "activations", 75.0));
        assert_eq!(decisive, assumptions);
        // The allocator's cache does not count against the capacity.
        assert!(over_capacity(&memory, Bytes::gib(86.0), &assumptions).is_none());
    }
}

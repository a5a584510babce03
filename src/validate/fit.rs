//! Published runs predicted not to fit in GPU memory: they did run, so each is a modelling or
//! default error to find. For each, what must fit (allocated tensors, CUDA context, NCCL buffers),
//! the capacity, how much over, and the part that dominates.

use serde::Serialize;

use crate::cost::breakdown::MemoryBreakdown;
use crate::units::Bytes;

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

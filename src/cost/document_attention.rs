//! How a run's documents scale the fused attention kernels of its mean sequence: each document
//! piece attends to itself only, so a sequence's kernel time follows the squares of its pieces
//! and the kernel's rate ramp over the keys it sees (`crate::data::SequenceLoads`). The op tables
//! are priced at the mean sequence's scale.

use crate::run::Run;

/// The factors by which documents scale the attention kernels' time of a mean sequence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionScale {
    /// Forward kernels (and their reruns).
    pub forward: f64,
    /// Backward kernels.
    pub backward: f64,
}

/// The ramp's half-rate keys over the kernel's keys per sequence, forward and backward: a
/// sequence split over CP ranks (by ring or all-to-all) runs kernels over its share of keys.
pub(crate) fn ramp(run: &Run) -> (f64, f64) {
    let plan = run.plan();
    let keys = run.training().seq_len() as f64 * plan.cp_a2a() as f64 / plan.cp() as f64;
    let efficiency = run.cluster().gpu().efficiency();
    (efficiency.attention_forward_half_seq / keys, efficiency.attention_backward_half_seq / keys)
}

/// How the mean sequence of the run's data scales attention, if it has data and it differs
/// from one document filling each sequence.
pub fn attention_scale(run: &Run) -> Option<AttentionScale> {
    let loads = &run.data()?.loads;
    let (forward, backward) = ramp(run);
    let scale =
        AttentionScale { forward: loads.mean_ratio(forward), backward: loads.mean_ratio(backward) };
    (scale.forward != 1.0 || scale.backward != 1.0).then_some(scale)
}

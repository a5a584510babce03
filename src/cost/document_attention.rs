//! How a run's documents scale the fused attention kernels of its mean sequence: each document
//! piece attends to itself only, so a sequence's kernel time follows the squares of its pieces
//! and the kernel's rate ramp over the keys it sees (`crate::data::SequenceLoads`). The op tables
//! are priced at the mean sequence's scale; variable micro-batches at their mean slot's, whose
//! other kernels follow the share of a full micro-batch's tokens the slot computes.

use crate::run::Run;

/// The factors by which documents scale the attention kernels' time of a mean sequence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionScale {
    /// Forward kernels (and their reruns).
    pub forward: f64,
    /// Backward kernels.
    pub backward: f64,
    /// Every other kernel and collective: 1, but for variable micro-batches, whose mean slot
    /// computes a share of a full micro-batch's padded tokens (`crate::data::DynamicBatches`).
    pub tokens: f64,
}

/// The ramp's half-rate keys over the kernel's keys per sequence, forward and backward: a
/// sequence split over CP ranks (by ring or all-to-all) runs kernels over its share of keys.
pub(crate) fn ramp(run: &Run) -> (f64, f64) {
    let plan = run.plan();
    let keys = run.training().seq_len() as f64 * plan.cp_a2a() as f64 / plan.cp() as f64;
    let efficiency = run.cluster().gpu().efficiency();
    (efficiency.attention_forward_half_seq / keys, efficiency.attention_backward_half_seq / keys)
}

/// The mean sequence's attention time over one document filling it, for a kernel whose half-rate
/// keys over the sequence's keys are `ramp` (one phase of [`ramp`]): over the plan's variable
/// micro-batches' slots if it has them, whose attention is their own, else over the data's
/// sequences. `None` without data. The one place that choice is made.
pub(crate) fn mean_attention_ratio(run: &Run, ramp: f64) -> Option<f64> {
    let data = run.data()?;
    Some(match run.dynamic_batches().as_deref().and_then(|made| made.get()) {
        Some(batches) => batches.mean_ratio(ramp),
        None => data.loads.mean_ratio(ramp),
    })
}

/// How the mean sequence of the run's data scales attention (and, for variable micro-batches,
/// the rest of a micro-batch), if it has data and it differs from one document filling each
/// sequence.
pub fn attention_scale(run: &Run) -> Option<AttentionScale> {
    let (forward, backward) = ramp(run);
    // Variable micro-batches: the plan's fixed slots at their mean, attention and the rest.
    let tokens = run
        .dynamic_batches()
        .as_deref()
        .and_then(|made| made.get())
        .map_or(1.0, |batches| batches.computed_fraction);
    let scale = AttentionScale {
        forward: mean_attention_ratio(run, forward)?,
        backward: mean_attention_ratio(run, backward)?,
        tokens,
    };
    (scale != FULL).then_some(scale)
}

/// One document filling each sequence: nothing scaled.
const FULL: AttentionScale = AttentionScale { forward: 1.0, backward: 1.0, tokens: 1.0 };

//! What DynaPipe's variable-length micro-batches (a plan's `variable_micro_batches`,
//! `crate::data::DynamicBatches`) do to a step. The op tables price the plan's `m` fixed
//! micro-batch slots at their mean: the variable micro-batches' padded tokens and attention
//! spread over the slots (`document_attention.rs`), so `m` mean slots do a replica's mean
//! work. The step then adds what the slowest replica and the largest micro-batch take beyond that
//! ([`dynamic_spread`]): each drawn global batch's micro-batches are dealt to the `dp` replicas
//! longest first onto the least loaded (DynaPipe balances its data-parallel ranks' micro-batches
//! by their cost), and a replica's pipeline fills and drains at the pace of its largest: the
//! makespan of a proportionate flow shop is the sum of its jobs plus `p - 1` times the largest
//! (`(p - 1) / vp` of it under an interleaved schedule), of which the bubble already holds the
//! mean slot's share.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::cost::repacking::PieceWork;
use crate::run::Run;

/// What the variable micro-batches leave uneven on a step whose critical stage prices a
/// sequence's work as `work`.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicSpread {
    /// Seconds the slowest replica's micro-batches add to the mean replica's work, averaged over
    /// the drawn global batches.
    pub slowest: f64,
    /// The largest micro-batch's seconds, averaged over the drawn global batches.
    pub largest: f64,
    /// The mean micro-batch's seconds, likewise.
    pub mean: f64,
    /// Micro-batches a replica runs, on average.
    pub per_replica: f64,
    /// The first drawn global batch's work per replica (of the replicas its micro-batches
    /// stand for, when it was drawn in part).
    pub first_step: Vec<f64>,
}

/// The spread of the run's variable micro-batches; `None` unless it forms them.
pub(crate) fn dynamic_spread(run: &Run, work: PieceWork) -> Option<DynamicSpread> {
    let batches = run.dynamic_batches()?;
    let batches = batches.get()?;
    let dp = run.plan().dp().max(1);
    // A very large global batch is drawn in part: its micro-batches go to as many replicas as
    // they stand for, each with a replica's share.
    let share = batches.drawn as f64 / batches.documents.max(1) as f64;
    let replicas = ((dp as f64 * share).round() as usize).clamp(1, dp as usize);
    let (mut slowest, mut largest, mut mean) = (0.0, 0.0, 0.0);
    let mut first_step = Vec::new();
    for (index, micro_batches) in batches.global_batches.iter().enumerate() {
        let mut seconds: Vec<f64> = micro_batches
            .iter()
            .map(|batch| {
                let [a, b] = batch.attention;
                work.seconds([batch.tokens * run.training().seq_len() as f64, a, b])
            })
            .collect();
        seconds.sort_unstable_by(|x, y| y.total_cmp(x));
        let loads = deal(&seconds, replicas);
        let total: f64 = loads.iter().map(|load| load[0]).sum();
        let heaviest = loads.iter().map(|load| load[0]).fold(0.0, f64::max);
        slowest += heaviest - total / replicas as f64;
        largest += seconds.first().copied().unwrap_or(0.0);
        mean += total / seconds.len().max(1) as f64;
        if index == 0 {
            first_step = loads.iter().map(|load| load[0]).collect();
        }
    }
    let drawn = batches.global_batches.len().max(1) as f64;
    Some(DynamicSpread {
        slowest: (slowest / drawn).max(0.0),
        largest: largest / drawn,
        mean: mean / drawn,
        per_replica: batches.micro_batches / dp as f64,
        first_step,
    })
}

/// Micro-batches of `seconds` (longest first) dealt onto `replicas`, each to the least loaded
/// (the lowest-numbered of equal ones): each replica's total and its largest micro-batch.
fn deal(seconds: &[f64], replicas: usize) -> Vec<[f64; 2]> {
    let mut loads = vec![[0.0, 0.0]; replicas];
    // Loads are sums of non-negative seconds: their bits order them.
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
        (0..replicas).map(|replica| Reverse((0, replica))).collect();
    for &time in seconds {
        let Some(Reverse((_, replica))) = heap.pop() else { break };
        let load = &mut loads[replica];
        load[0] += time;
        load[1] = f64::max(load[1], time);
        heap.push(Reverse((load[0].to_bits(), replica)));
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_batches_go_longest_first_onto_the_least_loaded_replica() {
        let loads = deal(&[5.0, 4.0, 3.0, 3.0, 1.0], 2);
        assert_eq!(loads, vec![[5.0 + 3.0, 5.0], [4.0 + 3.0 + 1.0, 4.0]]);
        let alone = deal(&[2.0, 1.0], 1);
        assert_eq!(alone, vec![[3.0, 2.0]]);
        let idle = deal(&[2.0], 3);
        assert_eq!(idle, vec![[2.0, 2.0], [0.0, 0.0], [0.0, 0.0]]);
    }
}

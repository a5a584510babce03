//! The balanced pipeline split of a hybrid model: its layers differ in cost (a Mamba-2 layer,
//! an attention layer, an MLP and a mixture of experts each do different work), so the pattern
//! is cut into consecutive chunks that balance their forward FLOPs per token, the embedding's
//! lookup on the first and the logits and MTP modules on the last, rather than their layer
//! counts. Megatron-Core 0.17 runs such a split from the pattern's `|` stage boundaries.

use crate::model::{Model, Sublayer};

/// Layers of each of `positions` consecutive chunks (each at least one; `positions` at most the
/// layers, as the plan rules ensure), minimising the largest chunk's forward FLOPs per token.
pub(super) fn weighted_chunks(model: &Model, seq_len: u64, positions: u64) -> Vec<u64> {
    let Some(hybrid) = model.hybrid() else { return vec![model.num_layers()] };
    let flops = |kind: Sublayer| {
        model.sublayer_gemm_flops_per_token(kind)
            + model.sublayer_core_flops_per_token(kind, seq_len)
    };
    let per_kind = Sublayer::ALL.map(flops);
    let mut weights: Vec<f64> = hybrid.pattern.iter().map(|kind| per_kind[kind.index()]).collect();
    if let Some(last) = weights.last_mut() {
        *last += model.logit_flops_per_token() + model.mtp_flops_per_token(seq_len);
    }
    chunks(&weights, positions.clamp(1, weights.len().max(1) as u64) as usize)
}

/// The linear partition of `weights` into `positions` non-empty runs with the smallest largest
/// sum: a bisection on that sum (a fixed 64 steps, so the result is the same on every machine),
/// then a greedy cut at the sum found, with the runs of most items split until there are
/// `positions` of them.
fn chunks(weights: &[f64], positions: usize) -> Vec<u64> {
    let heaviest = weights.iter().copied().fold(0.0, f64::max);
    let (mut low, mut high) = (heaviest, weights.iter().sum::<f64>());
    for _ in 0..64 {
        let middle = 0.5 * (low + high);
        if greedy(weights, middle).len() <= positions {
            high = middle;
        } else {
            low = middle;
        }
    }
    let mut runs = greedy(weights, high);
    while runs.len() < positions {
        // Splitting a run never raises the largest sum; the longest run (the first of equals)
        // gives up its last item.
        let Some(longest) =
            (0..runs.len()).filter(|&i| runs[i] > 1).max_by_key(|&i| (runs[i], usize::MAX - i))
        else {
            break;
        };
        runs[longest] -= 1;
        runs.insert(longest + 1, 1);
    }
    runs
}

/// Item counts of the runs a greedy cut at `limit` makes: a run closes before the item that
/// would take it over the limit.
fn greedy(weights: &[f64], limit: f64) -> Vec<u64> {
    let mut runs = Vec::new();
    let (mut count, mut sum) = (0u64, 0.0);
    for &weight in weights {
        if count > 0 && sum + weight > limit {
            runs.push(count);
            (count, sum) = (0, 0.0);
        }
        count += 1;
        sum += weight;
    }
    if count > 0 {
        runs.push(count);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_balances_weights_not_counts() {
        // Two heavy items and six light ones over three runs: the largest sum is 5 (4 | 4 1 |
        // five 1s), where equal counts would give 8 or 9.
        assert_eq!(chunks(&[4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 3), [1, 2, 5]);
        // Equal weights split evenly; more runs than a greedy cut makes are split off.
        assert_eq!(chunks(&[1.0; 8], 4), [2, 2, 2, 2]);
        assert_eq!(chunks(&[1.0, 9.0], 2), [1, 1]);
        assert_eq!(chunks(&[5.0], 1), [1]);
    }

    #[test]
    fn a_hybrid_pattern_is_cut_where_its_work_balances() {
        let model = Model::from_spec(&crate::presets::model("nemotronh-8b").unwrap()).unwrap();
        let runs = weighted_chunks(&model, 8192, 4);
        assert_eq!(runs.iter().sum::<u64>(), 52);
        assert_eq!(runs.len(), 4);
        // Each run's forward work is within one layer's of the others'.
        let hybrid = model.hybrid().unwrap();
        let flops = |kind: Sublayer| {
            model.sublayer_gemm_flops_per_token(kind)
                + model.sublayer_core_flops_per_token(kind, 8192)
        };
        let mut first = 0;
        let mut sums = Vec::new();
        for &run in &runs {
            let counts = hybrid.counts_in(first, run);
            sums.push(
                Sublayer::ALL.iter().map(|&k| f64::from(counts[k.index()]) * flops(k)).sum::<f64>(),
            );
            first += run;
        }
        let heaviest_layer = Sublayer::ALL.map(flops).into_iter().fold(0.0, f64::max);
        let (low, high) = sums.iter().fold((f64::MAX, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        assert!(high - low <= heaviest_layer + model.logit_flops_per_token(), "{sums:?}");
    }
}

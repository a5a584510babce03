//! What per-document context-parallel groups (`--hybrid-cp`, Megatron-LM's hybrid context
//! parallel, ByteScale's hybrid data parallelism) cost a step. The loader places each document
//! of a global batch on a group of the `dp x cp` ranks sized to its length
//! (`crate::data::place_documents`); every member of a group runs `1 / g` of the document's
//! linear work and attention, and a group of more than one rank passes the document's keys and
//! values around its ring, `g - 1` steps forward and twice that backward, hidden behind the
//! attention they feed as far as it lasts (the static ring's rule, `work.rs`). A document of one
//! rank exchanges nothing: short documents no longer pay the context-parallel exchange that a
//! static `cp` makes every sequence pay.
//!
//! The loader hands out documents whole (cut only at the sequence length), not pieces of packed
//! sequences: a long document that packing would have split across two sequences keeps its whole
//! attention square.
//!
//! Megatron-LM's released scheduler runs each document as its own forward and backward, so a
//! short document costs at least the host time to issue every layer eagerly (CUDA graphs are
//! refused with hybrid CP): the GPU waits on the host when the document's kernels are shorter.
//! ByteScale's balancing packs a rank's documents together, which leaves no such floor.
//!
//! Each rank's step is the sum of its documents' times; the slowest rank sets the step. The
//! mean rank's exchange and host wait replace the static exchange in the micro-batch's work, and
//! the slowest rank's excess over the mean is the step's data imbalance.

use crate::cost::collective::{Collective, CollectiveTerms, Group, collective_terms};
use crate::cost::imbalance::{DataImbalance, attention_seconds_per_unit};
use crate::cost::work::{OVERLAP_EFFICIENCY, Work};
use crate::data::{GroupShape, PlacedDocument};
use crate::plan::{HybridCpScheduler, Precision};
use crate::run::Run;
use crate::units::{Bytes, Seconds};

/// Host time to issue one transformer layer's forward eagerly, with its kernels launched: 0.35
/// ms for a Llama 3 8B layer on the H100 machine's host (`measurements/h100-sxm-kernels.json`,
/// section `host`; `measurements/README.md`, "Launch and host").
const HOST_ISSUE_FORWARD_PER_LAYER: f64 = 0.35e-3;
/// The same for the layer's backward: 1.26 ms (same measurement).
const HOST_ISSUE_BACKWARD_PER_LAYER: f64 = 1.26e-3;

/// One step under hybrid CP, over the placed global batches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridCpStep {
    /// The mean rank's exposed exchange in the forward, over its whole step.
    pub forward_exchange: Seconds,
    /// The same in the backward.
    pub backward_exchange: Seconds,
    /// The mean rank's time waiting on the host to issue its documents' layers.
    pub host_wait: Seconds,
    /// The mean rank's whole step of documents.
    pub mean_rank: Seconds,
    /// The slowest rank's step over the mean rank's.
    pub slowest_extra: Seconds,
}

impl HybridCpStep {
    /// The micro-batch `work` of a static plan with this step's exchange and host wait in place
    /// of its own exchange, spread over the `m` micro-batches of the step.
    pub fn apply(&self, work: Work, m: u64) -> Work {
        let m = m.max(1) as f64;
        Work {
            forward: work.forward + self.host_wait / m,
            forward_cp: self.forward_exchange / m,
            backward_cp: self.backward_exchange / m,
            ..work
        }
    }

    /// What the slowest rank adds to the step, as the data's imbalance (there is no pipeline,
    /// so no micro-batch spread).
    pub fn imbalance(&self) -> DataImbalance {
        let mean = self.mean_rank.value();
        let ratio = if mean > 0.0 { (mean + self.slowest_extra.value()) / mean } else { 1.0 };
        DataImbalance {
            slowest_replica: self.slowest_extra,
            replicas: ratio,
            microbatches: 1.0,
            variable: None,
        }
    }
}

/// One document's cost on each member of its group.
struct DocumentCost {
    time: f64,
    forward_exchange: f64,
    backward_exchange: f64,
    host_wait: f64,
}

/// What pricing a document needs from the plan: per static sequence its linear seconds and its
/// attention seconds per unit of `a` and `b` (forward, backward), with the static `cp` ranks it
/// was priced over, and the ring's hardware.
struct Pricing {
    linear_per_sequence: f64,
    attention: [(f64, f64); 2],
    cp: f64,
    seq_len: f64,
    kv_bytes_per_token: f64,
    attention_layers: f64,
    host_floor: f64,
    /// What times one ring step for each group size `2^i` of the pool.
    rings: Vec<Option<CollectiveTerms>>,
}

/// What times one ring step on groups of `2^i` ranks of the pool, `i` from 0 to the pool's size,
/// consecutive members `stride` ranks apart (`None` for a group of one, which exchanges nothing).
fn ring_steps(run: &Run, pool: u64, stride: u64) -> Vec<Option<CollectiveTerms>> {
    let links = run.cluster().interconnect();
    let sizes = std::iter::successors(Some(1u64), |g| g.checked_mul(2)).take_while(|&g| g <= pool);
    sizes
        .map(|size| {
            (size > 1)
                .then(|| collective_terms(links, Collective::SendRecv, Group { size, stride }))
                .flatten()
        })
        .collect()
}

impl Pricing {
    /// A document's linear, forward attention and backward attention seconds on each rank of
    /// its group of `group`.
    fn own_work(&self, document: &PlacedDocument, group: f64) -> [f64; 3] {
        let share = self.cp / group;
        let [a, b] = document.attention;
        let [(u_forward, v_forward), (u_backward, v_backward)] = self.attention;
        let linear = self.linear_per_sequence * document.tokens / self.seq_len * share;
        // The FLOPs split over the group; the kernel's ramp over the keys a rank sees (the
        // `b` term) costs a rank the same on any group, since a rank of a group of `g` holds
        // `1 / g` of the FLOPs over `1 / g` of the keys.
        [linear, u_forward * a * share + v_forward * b, u_backward * a * share + v_backward * b]
    }

    /// A document on one rank, which exchanges nothing: its time and the host wait in it.
    fn alone(&self, document: &PlacedDocument) -> (f64, f64) {
        let [linear, attention_forward, attention_backward] = self.own_work(document, 1.0);
        let gpu = linear + attention_forward + attention_backward;
        let host_wait = (self.host_floor - gpu).max(0.0);
        (gpu + host_wait, host_wait)
    }

    fn document(&self, document: &PlacedDocument) -> DocumentCost {
        let group = f64::from(document.group.max(1));
        let [linear, attention_forward, attention_backward] = self.own_work(document, group);
        let (forward_exchange, backward_exchange) = if document.group > 1 {
            let bytes = Bytes::new(document.tokens / group * self.kv_bytes_per_token);
            let ring = self.rings.get(document.group.trailing_zeros() as usize).copied().flatten();
            let step = ring.map_or(0.0, |ring| ring.time(bytes).value());
            let steps = (group - 1.0) * self.attention_layers;
            let exposed =
                |comm: f64, attention: f64| (comm - attention * OVERLAP_EFFICIENCY).max(0.0);
            (
                exposed(step * steps, attention_forward),
                exposed(2.0 * step * steps, attention_backward),
            )
        } else {
            (0.0, 0.0)
        };
        let gpu =
            linear + attention_forward + attention_backward + forward_exchange + backward_exchange;
        let host_wait = (self.host_floor - gpu).max(0.0);
        DocumentCost { time: gpu + host_wait, forward_exchange, backward_exchange, host_wait }
    }
}

/// The step of a hybrid-CP run whose single stage does `work` per micro-batch as a static plan
/// prices it; `None` without hybrid CP or data.
pub fn hybrid_cp_step(run: &Run, work: &Work) -> Option<HybridCpStep> {
    let plan = run.plan();
    let hybrid = plan.hybrid_cp()?;
    let data = run.data()?;
    let training = run.training();
    let model = run.model();
    let (micro_batch, seq_len) = (training.micro_batch(), training.seq_len());
    let attention = attention_seconds_per_unit(run, work)?;
    let exchanged = work.forward_cp + work.backward_cp;
    let linear = work.total() - work.forward_attention - work.backward_attention - exchanged;
    let layers = model.num_layers() as f64;
    let pool = plan.dp().saturating_mul(plan.cp());
    let pricing = Pricing {
        linear_per_sequence: linear.value().max(0.0) / micro_batch.max(1) as f64,
        attention,
        cp: plan.cp() as f64,
        seq_len: seq_len.max(1) as f64,
        kv_bytes_per_token: (2 * model.kv_width()) as f64 / plan.tp() as f64
            * Precision::ACTIVATION_BYTES,
        attention_layers: model.attention_layers() as f64,
        host_floor: match hybrid.scheduler() {
            HybridCpScheduler::Megatron => {
                layers * (HOST_ISSUE_FORWARD_PER_LAYER + HOST_ISSUE_BACKWARD_PER_LAYER)
            }
            HybridCpScheduler::ByWork => 0.0,
        },
        rings: ring_steps(run, pool, plan.tp()),
    };
    let shape = GroupShape {
        ranks: pool,
        max_tokens_per_rank: hybrid.max_tokens_per_rank(),
        tokens_per_batch: training.global_batch().saturating_mul(seq_len),
        by_work: hybrid.scheduler() == HybridCpScheduler::ByWork,
    };
    let slot = data.placed(model, shape);
    let placed = slot.get()?;
    let ranks = placed.ranks.max(1);
    let mut loads = vec![0.0; ranks];
    let mut sums = [0.0; 5];
    let mut batches = 0usize;
    for batch in placed.batches() {
        loads.iter_mut().for_each(|load| *load = 0.0);
        let mut exchange = [0.0; 3];
        for document in batch {
            let first = document.first_rank as usize;
            if document.group <= 1 && first < ranks {
                // One rank, no exchange: the common case of short documents, kept lean.
                let (time, host_wait) = pricing.alone(document);
                loads[first] += time;
                exchange[2] += host_wait;
                continue;
            }
            let cost = pricing.document(document);
            let end = (first + document.group as usize).min(ranks);
            for load in &mut loads[first.min(end)..end] {
                *load += cost.time;
            }
            let members = (end - first.min(end)) as f64;
            exchange[0] += cost.forward_exchange * members;
            exchange[1] += cost.backward_exchange * members;
            exchange[2] += cost.host_wait * members;
        }
        let mean = loads.iter().sum::<f64>() / ranks as f64;
        let slowest = loads.iter().copied().fold(0.0, f64::max);
        for (sum, value) in sums.iter_mut().zip([
            exchange[0] / ranks as f64,
            exchange[1] / ranks as f64,
            exchange[2] / ranks as f64,
            mean,
            slowest - mean,
        ]) {
            *sum += value;
        }
        batches += 1;
    }
    let per_batch = |sum: f64| Seconds::new(sum / batches.max(1) as f64);
    Some(HybridCpStep {
        forward_exchange: per_batch(sums[0]),
        backward_exchange: per_batch(sums[1]),
        host_wait: per_batch(sums[2]),
        mean_rank: per_batch(sums[3]),
        slowest_extra: per_batch(sums[4].max(0.0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::collective::collective_time;
    use crate::cost::priced::PricedRun;
    use crate::data::{DataSpec, LengthBinSpec};
    use crate::hardware::ClusterSpec;
    use crate::plan::{PlanSpec, TrainingSpec};
    use crate::presets;
    use crate::run::RunSpec;

    /// Llama 2 7B at 128K on 16 H100 (tp 8, cp 2, dp 1) over `histogram`.
    fn run(hybrid: bool, histogram: &[(i64, i64, i64)]) -> Run {
        let bin = |&(min, max, count)| LengthBinSpec { min, max, count };
        let spec = RunSpec {
            model: presets::model("llama2-7b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 16 },
            training: TrainingSpec {
                seq_len: 131_072,
                global_batch: 8,
                micro_batch: Some(1),
                precision: None,
            },
            plan: PlanSpec {
                tp: Some(8),
                cp: Some(2),
                hybrid_cp: Some(hybrid),
                ..PlanSpec::default()
            },
            data: Some(DataSpec {
                histogram: Some(histogram.iter().map(bin).collect()),
                ..DataSpec::default()
            }),
        };
        Run::from_spec(&spec).unwrap()
    }

    #[test]
    fn a_short_document_on_one_rank_exchanges_nothing_and_waits_on_the_host() {
        let run = run(true, &[(512, 4096, 900), (32768, 262_144, 70)]);
        let pricing = Pricing {
            linear_per_sequence: 1.0,
            attention: [(0.5, 0.0), (1.0, 0.0)],
            cp: 2.0,
            seq_len: 131_072.0,
            kv_bytes_per_token: 512.0,
            attention_layers: 32.0,
            host_floor: 0.05,
            rings: ring_steps(&run, 2, 8),
        };
        let short = PlacedDocument { first_rank: 0, group: 1, tokens: 1024.0, attention: [0.0; 2] };
        let cost = pricing.document(&short);
        // 1,024 of 131,072 tokens on one rank instead of two: 1/64 of a sequence's linear work.
        assert_eq!((cost.forward_exchange, cost.backward_exchange), (0.0, 0.0));
        assert!((cost.host_wait - (0.05 - 1.0 / 64.0)).abs() < 1e-12, "{}", cost.host_wait);
        assert_eq!(cost.time, 0.05);
        // A whole sequence on two ranks: the static share, and a ring of one step per layer
        // forward and two backward, each passing half the sequence's keys and values.
        let long =
            PlacedDocument { first_rank: 0, group: 2, tokens: 131_072.0, attention: [1.0, 0.0] };
        let cost = pricing.document(&long);
        let links = run.cluster().interconnect();
        let ring = Group { size: 2, stride: 8 };
        let step = collective_time(links, Collective::SendRecv, ring, Bytes::new(65536.0 * 512.0));
        let forward = (32.0 * step.value() - 0.5 * OVERLAP_EFFICIENCY).max(0.0);
        let backward = (64.0 * step.value() - 1.0 * OVERLAP_EFFICIENCY).max(0.0);
        assert!((cost.forward_exchange - forward).abs() < 1e-12);
        assert!((cost.backward_exchange - backward).abs() < 1e-12);
        assert!((cost.time - (2.5 + forward + backward)).abs() < 1e-12);
        assert_eq!(cost.host_wait, 0.0);
    }

    /// Documents of a quarter sequence: packing cuts none, and each fits one rank, so the two
    /// ranks share the static plan's compute, but for the attention kernel's ramp: a document on
    /// one rank runs over all its keys, not half of them on each of cp 2, and saves half its
    /// ramp term.
    #[test]
    fn the_mean_rank_does_the_static_plans_compute_without_its_exchange() {
        let quarter = [(32768, 32768, 1)];
        let (hybrid, fixed) = (run(true, &quarter), run(false, &quarter));
        let step = PricedRun::new(&hybrid).hybrid_cp_step().unwrap();
        let work = PricedRun::new(&fixed).critical_stage().0;
        let m = fixed.plan().num_microbatches() as f64;
        let [(_, v_forward), (_, v_backward)] = attention_seconds_per_unit(&fixed, &work).unwrap();
        let model = fixed.model();
        let flops = |tokens: u64| model.document_attention_flops(tokens);
        let ramp = crate::data::AttentionWork::new(&flops, 131_072).piece(32768).unwrap()[1];
        // 4 documents a sequence, each on one of the 2 ranks.
        let saved = 4.0 * m * (v_forward + v_backward) * ramp / 2.0;
        let compute = (work.total() - work.forward_cp - work.backward_cp).value() * m - saved;
        let grouped =
            (step.mean_rank - step.forward_exchange - step.backward_exchange - step.host_wait)
                .value();
        assert!((grouped / compute - 1.0).abs() < 1e-9, "{grouped} vs {compute}");
        assert_eq!(step.forward_exchange + step.backward_exchange, Seconds::ZERO);
        assert!(step.slowest_extra.value() >= 0.0);
        assert!(step.imbalance().replicas >= 1.0);
    }
}

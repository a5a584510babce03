//! One representative step's work per data-parallel replica, for the report's load chart: the
//! straggler that [`crate::cost::imbalance::DataImbalance`] prices, shown as one step's replicas.
//!
//! Each replica's work is its critical stage's over its `m x mbs` sequences, each priced as the
//! estimate prices it (`crate::cost::imbalance::sequence_work`: the linear work of its tokens
//! plus `u a + v b` of attention). Packed or padded, the step's sequences are drawn independently
//! from the run's seeded sample, as the estimate assumes; re-packed (`balance_window > 0`), the
//! step is the median one of the first dealt window, consecutive micro-batches making a replica
//! and consecutive replicas a step as `crate::cost::repacking` reads them; in variable
//! micro-batches, the first drawn global batch's, dealt as `crate::cost::dynamic_microbatches`
//! deals them. The draw is seeded
//! from the data's seed, so the same run gives the same loads.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cost::imbalance::sequence_work;
use crate::cost::priced::PricedRun;
use crate::cost::repacking::{PieceWork, deal_shape};
use crate::run::Run;
use crate::units::Seconds;

/// Mixed into the data's seed for the step drawn here, so that the step is not drawn from the
/// stream the sample itself was (`replicas` in ASCII).
const STEP_SEED: u64 = 0x7265_706c_6963_6173;

/// One step's work per data-parallel replica, with what the estimate prices for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaLoads {
    /// Each replica's critical-stage work over the step, replica after replica: every replica of
    /// the step, or those of a dealt window that holds fewer.
    pub loads: Vec<Seconds>,
    /// Data-parallel replicas of the plan.
    pub replicas: u64,
    /// The mean replica's work the estimate prices: `m` mean micro-batches of the critical stage.
    pub priced_mean: Seconds,
    /// The slowest replica's work the estimate prices: the mean and the data's
    /// `slowest_replica` above it.
    pub priced_slowest: Seconds,
    /// Whether the step was dealt from a re-packed window rather than drawn as packed.
    pub repacked: bool,
    /// Re-packed, the lightest and the heaviest slowest replica over the steps of the dealt
    /// window (the loads are its median step's); `None` when drawn, or when nothing was dealt
    /// and every replica does the mean.
    pub window_slowest: Option<[Seconds; 2]>,
}

impl ReplicaLoads {
    /// The mean of the step's loads.
    pub fn mean(&self) -> Seconds {
        let total: f64 = self.loads.iter().map(|load| load.value()).sum();
        Seconds::new(total / self.loads.len().max(1) as f64)
    }

    /// The slowest replica of the step (the first of equal ones) and its load.
    pub fn slowest(&self) -> (usize, Seconds) {
        let mut slowest = (0, Seconds::ZERO);
        for (index, load) in self.loads.iter().enumerate() {
            if index == 0 || load.value() > slowest.1.value() {
                slowest = (index, *load);
            }
        }
        slowest
    }

    /// The lightest replica's load.
    pub fn lightest(&self) -> Seconds {
        let lightest = self.loads.iter().map(|load| load.value()).fold(f64::INFINITY, f64::min);
        Seconds::new(if lightest.is_finite() { lightest } else { 0.0 })
    }
}

/// One step's work per replica of a priced run; `None` without data or with hybrid CP.
pub fn replica_loads(priced: &PricedRun) -> Option<ReplicaLoads> {
    let run = priced.run();
    // Hybrid CP has no replicas: its ranks share one pool of documents (`hybrid_cp.rs`).
    if run.plan().hybrid_cp().is_some() {
        return None;
    }
    let critical = priced.critical_stage().0;
    let work = sequence_work(run, &critical)?;
    let imbalance = priced.data_imbalance()?;
    let plan = run.plan();
    let priced_mean = critical.total() * plan.num_microbatches() as f64;
    let repacked = plan.balance_window() > 0;
    let dynamic = crate::cost::dynamic_microbatches::dynamic_spread(run, work);
    let (loads, window_slowest) = if let Some(dynamic) = dynamic {
        (dynamic.first_step, None)
    } else if repacked {
        match dealt_step(run, work) {
            Some((loads, range)) => (loads, Some(range.map(Seconds::new))),
            None => (vec![priced_mean.value(); plan.dp() as usize], None),
        }
    } else {
        (drawn_step(run, work), None)
    };
    Some(ReplicaLoads {
        loads: loads.into_iter().map(Seconds::new).collect(),
        replicas: plan.dp(),
        priced_mean,
        priced_slowest: priced_mean + imbalance.slowest_replica,
        repacked,
        window_slowest,
    })
}

/// Each replica's work over `m x mbs` sequences drawn independently from the run's sample.
fn drawn_step(run: &Run, work: PieceWork) -> Vec<f64> {
    let plan = run.plan();
    let Some(data) = run.data() else {
        return Vec::new();
    };
    let sequences = data.sampled_sequences(run.model());
    let tokens = run.training().seq_len() as f64;
    let per_replica = plan.num_microbatches().saturating_mul(run.training().micro_batch());
    if sequences.is_empty() {
        return Vec::new();
    }
    let mut rng = StdRng::seed_from_u64(data.data.seed() ^ STEP_SEED);
    (0..plan.dp())
        .map(|_| {
            (0..per_replica)
                .map(|_| {
                    let [a, b] = sequences[rng.random_range(0..sequences.len())];
                    work.seconds([tokens, a, b])
                })
                .sum()
        })
        .collect()
}

/// The replicas of the median step of the first re-packed window (by its slowest replica), and
/// the lightest and heaviest slowest replica over the window's steps. A window's replicas are
/// its consecutive `m` micro-batches and its steps consecutive `dp` replicas, as the estimate
/// reads them; its steps differ (the heaviest pieces are dealt first, to the first
/// micro-batches), and the estimate prices their average, so the chart shows a typical one.
/// `None` when nothing was dealt (a micro-batch of more pieces than are dealt at once, which
/// the estimate takes as balanced) or the window holds less than one replica.
fn dealt_step(run: &Run, work: PieceWork) -> Option<(Vec<f64>, [f64; 2])> {
    let plan = run.plan();
    let slot = run.data()?.dealt(run.model(), deal_shape(run));
    let dealt = slot.get()?.as_ref()?;
    let window = dealt.loads.get(..dealt.bins)?;
    let m = usize::try_from(plan.num_microbatches()).ok()?.max(1);
    let dp = usize::try_from(plan.dp()).ok()?.max(1);
    let replicas: Vec<f64> = window
        .chunks_exact(m)
        .map(|replica| replica.iter().map(|&sums| work.seconds(sums)).sum())
        .collect();
    let steps: Vec<&[f64]> = replicas.chunks(dp).collect();
    let slowest = |step: &[f64]| step.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by(|&x, &y| slowest(steps[x]).total_cmp(&slowest(steps[y])));
    let median = steps.get(*order.get(order.len() / 2)?)?;
    let range = [slowest(steps[*order.first()?]), slowest(steps[*order.last()?])];
    Some((median.to_vec(), range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{DataSpec, LengthBinSpec};
    use crate::plan::PlanSpec;
    use crate::run::{Run, RunSpec, test_spec};

    /// Llama 3.1 8B on 32 GPUs, 32K sequences, tp 4 and dp 8, 8 micro-batches a replica, with
    /// `data` re-packed over `window` global batches.
    fn run_with(data: DataSpec, window: i64) -> Run {
        let plan = PlanSpec { tp: Some(4), balance_window: Some(window), ..PlanSpec::default() };
        let spec = test_spec("llama3.1-8b", 32, 32_768, 64, 1, plan);
        Run::from_spec(&RunSpec { data: Some(data), ..spec }).unwrap()
    }

    fn lengths(lengths: Vec<i64>) -> DataSpec {
        DataSpec { lengths: Some(lengths), ..DataSpec::default() }
    }

    /// Mostly short documents and a few as long as the sequence or longer.
    fn long_tailed() -> DataSpec {
        let bin = |min, max, count| LengthBinSpec { min, max, count };
        DataSpec {
            histogram: Some(vec![
                bin(256, 2048, 900),
                bin(8192, 32_768, 60),
                bin(32_768, 65_536, 10),
            ]),
            ..DataSpec::default()
        }
    }

    fn loads_of(run: &Run) -> ReplicaLoads {
        replica_loads(&PricedRun::new(run)).unwrap()
    }

    fn relative(x: f64, y: f64) -> f64 {
        (x - y).abs() / y.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn a_run_without_data_has_no_replica_loads() {
        let spec = test_spec("llama3.1-8b", 8, 4096, 16, 1, PlanSpec::default());
        let run = Run::from_spec(&spec).unwrap();
        assert_eq!(replica_loads(&PricedRun::new(&run)), None);
    }

    #[test]
    fn equal_documents_give_every_replica_the_mean_work() {
        // Four 8K documents fill each 32K sequence alike.
        for window in [0, 2] {
            let loads = loads_of(&run_with(lengths(vec![8192]), window));
            assert_eq!(loads.loads.len(), 8);
            let mean = loads.priced_mean.value();
            for load in &loads.loads {
                assert!(relative(load.value(), mean) < 1e-9, "{load:?} vs {mean} ({window})");
            }
            assert!(relative(loads.priced_slowest.value(), mean) < 1e-9);
        }
    }

    #[test]
    fn the_sample_priced_sequence_by_sequence_averages_the_estimates_mean() {
        let run = run_with(long_tailed(), 0);
        let priced = PricedRun::new(&run);
        let critical = priced.critical_stage().0;
        let work = sequence_work(&run, &critical).unwrap();
        let data = run.data().unwrap();
        let sequences = data.sampled_sequences(run.model());
        assert_eq!(sequences.len() as u64, data.loads.sequences);
        let tokens = run.training().seq_len() as f64;
        let total: f64 = sequences.iter().map(|&[a, b]| work.seconds([tokens, a, b])).sum();
        let per_sequence = total / sequences.len() as f64;
        let per_replica = (run.plan().num_microbatches() * run.training().micro_batch()) as f64;
        let loads = replica_loads(&priced).unwrap();
        assert!(relative(per_sequence * per_replica, loads.priced_mean.value()) < 1e-9);
        // One drawn step averages it to the sampling error of 512 sequences.
        let drawn = loads.mean().value();
        assert!(relative(drawn, loads.priced_mean.value()) < 0.05, "{drawn} vs {loads:?}");
        assert!(loads.slowest().1.value() > loads.lightest().value());
    }

    #[test]
    fn the_same_run_draws_the_same_loads() {
        let run = run_with(long_tailed(), 0);
        assert_eq!(loads_of(&run), loads_of(&run));
        let repacked = run_with(long_tailed(), 2);
        assert_eq!(loads_of(&repacked), loads_of(&repacked));
    }

    #[test]
    fn re_packing_narrows_the_spread_of_a_long_tailed_mix() {
        let spread = |loads: &ReplicaLoads| {
            (loads.slowest().1.value() - loads.lightest().value()) / loads.mean().value()
        };
        let packed = loads_of(&run_with(long_tailed(), 0));
        let repacked = loads_of(&run_with(long_tailed(), 4));
        assert!(!packed.repacked && repacked.repacked);
        assert_eq!(repacked.loads.len(), 8);
        assert!(spread(&repacked) < spread(&packed) / 2.0, "{packed:?} vs {repacked:?}");
        assert!(repacked.priced_slowest < packed.priced_slowest);
        // The window's steps range around the median one shown.
        let [lightest, heaviest] = repacked.window_slowest.unwrap();
        assert!(lightest <= repacked.slowest().1 && repacked.slowest().1 <= heaviest);
        assert_eq!(packed.window_slowest, None);
    }
}

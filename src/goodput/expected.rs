//! The closed form of a whole run under Poisson failures. Work is done in segments of `tau`
//! seconds, each ended by a checkpoint that blocks training `w` seconds; a failure (rate `1/M`,
//! `M` the job's MTTF) loses the segment's work and costs a restart `R` (detection, rescheduling
//! or a warm spare's swap, initialisation, and loading the checkpoint). A segment then takes `(e^((tau + w)/M) - 1)(M + R)` seconds on average, with
//! `e^((tau + w)/M) - 1` failures (the renewal argument behind Daly, FGCS 2006). To first order
//! the ETTR is `1 - (R + tau/2)/M - w/tau`, the model Kokolis et al. (arXiv 2410.21680) use; the
//! exact form stays right when failures are frequent.

use serde::Serialize;

use super::checkpoint::{Checkpoint, Storage, checkpoint};
use super::failures::{job_mttf, nodes};
use super::spec::{
    DETECTION_SECONDS, Goodput, INIT_SECONDS, RESCHEDULING_SECONDS, SPARE_SWAP_SECONDS, TrainLength,
};
use crate::run::Run;
use crate::units::Seconds;

/// Failures one segment may expect before meshplan calls the run hopeless rather than print an
/// astronomical time.
const MAX_FAILURES_PER_SEGMENT: f64 = 1e6;

/// Where the time that trains nothing goes, over the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Losses {
    /// Work done since the last checkpoint and lost to failures.
    pub lost_work: Seconds,
    /// Training blocked by checkpoints.
    pub checkpoints: Seconds,
    /// Restarts: detection, rescheduling, initialisation and checkpoint load.
    pub restarts: Seconds,
}

/// A whole run of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutlook {
    /// Optimizer steps.
    pub steps: u64,
    /// Training tokens.
    pub tokens: f64,
    /// The plan's step time the run is built on.
    pub step_time: Seconds,
    /// Time spent on steps that count: steps x step time.
    pub productive: Seconds,
    /// Expected wall-clock time to train.
    pub wall: Seconds,
    /// Effective training time ratio: productive over wall-clock time.
    pub ettr: f64,
    /// What the rest of the wall-clock time is.
    pub losses: Losses,
    /// Nodes the job occupies.
    pub nodes: u64,
    /// Failures per node-day.
    pub failures_per_node_day: f64,
    /// The job's mean time to failure.
    pub mttf: Seconds,
    /// Failures expected over the run.
    pub failures: f64,
    /// Time between checkpoints.
    pub interval: Seconds,
    /// Whether the interval is Daly's optimum (else the one given).
    pub optimal_interval: bool,
    /// Whether the interval was raised to its floor: one step, or an asynchronous checkpoint's
    /// write (the next cannot start before the last is on storage).
    pub interval_raised: bool,
    /// One checkpoint.
    pub checkpoint: Checkpoint,
    /// One restart, checkpoint load included (on average, when spares are free for some).
    pub restart: Seconds,
    /// What one restart is made of (the parts add up to `restart`).
    pub restart_parts: Vec<(&'static str, Seconds)>,
    /// The share of failures that find a warm spare free (0 without spares).
    pub spare_free: f64,
    /// GPU-hours of the wall-clock time.
    pub gpu_hours: f64,
    /// Their price, when one was given.
    pub cost: Option<f64>,
    /// Energy in megawatt-hours: the GPUs' board power at full load over the wall-clock time
    /// (hosts, network, storage and cooling not counted); `None` when the GPU's preset states no
    /// power.
    pub energy_mwh: Option<f64>,
}

/// A run that cannot make progress: failures come faster than a segment and its restart.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a segment of {segment} between checkpoints expects {failures:.3e} failures at a job MTTF of \
     {mttf}: the run would not finish; checkpoint more often, use fewer nodes or a lower failure rate"
)]
pub struct NoProgress {
    /// The segment, checkpoint included.
    pub segment: Seconds,
    /// The job's MTTF.
    pub mttf: Seconds,
    /// Failures expected per segment.
    pub failures: f64,
}

/// Daly's optimal checkpoint interval (FGCS 2006) for a blocking time `w` and job MTTF `m`:
/// Young's `sqrt(2 w m)` with Daly's higher-order terms, and `m` when `w >= 2 m`.
pub fn daly_interval(w: Seconds, m: Seconds) -> Seconds {
    let (w, m) = (w.value(), m.value());
    if w >= 2.0 * m {
        return Seconds::new(m);
    }
    let ratio = w / (2.0 * m);
    Seconds::new((2.0 * w * m).sqrt() * (1.0 + ratio.sqrt() / 3.0 + ratio / 9.0) - w)
}

/// The share of failures that find one of `spares` warm spare nodes free, when a failed node
/// takes `repair` to return: nodes in repair form an M/G/infinity queue, so their number is
/// Poisson with mean `repair / mttf`, and a spare is free when fewer than `spares` are in repair.
pub fn spare_free(mttf: Seconds, repair: Seconds, spares: u64) -> f64 {
    if spares == 0 {
        return 0.0;
    }
    let mean = repair.value() / mttf.value();
    if mean.is_nan() || mean <= 0.0 {
        return 1.0;
    }
    // P(Poisson(mean) < spares), summed in log space so a large mean does not underflow.
    let (ln_mean, mut log_term, mut log_sum) = (mean.ln(), -mean, -mean);
    for k in 1..spares {
        log_term += ln_mean - (k as f64).ln();
        let (high, low) =
            if log_term > log_sum { (log_term, log_sum) } else { (log_sum, log_term) };
        log_sum = high + (low - high).exp().ln_1p();
    }
    log_sum.exp().clamp(0.0, 1.0)
}

/// The whole run of `run` at `step_time` per step.
pub fn outlook(run: &Run, step_time: Seconds, inputs: &Goodput) -> Result<RunOutlook, NoProgress> {
    let training = run.training();
    let tokens_per_step = (training.global_batch() * training.seq_len()) as f64;
    let steps = match inputs.length() {
        TrainLength::Tokens(tokens) => (tokens / tokens_per_step).ceil() as u64,
        TrainLength::Steps(steps) => steps,
    };
    let productive = step_time * steps as f64;
    let gpus = run.cluster().num_gpus();
    let nodes = nodes(gpus, run.cluster().interconnect().gpus_per_node());
    let mttf = job_mttf(nodes, inputs.per_node_day());
    let storage = if inputs.in_memory() {
        Storage::HostMemory
    } else {
        Storage::Shared { write: inputs.write(), read: inputs.read(), per_node: inputs.per_node() }
    };
    let checkpoint = checkpoint(run, inputs.mode(), storage);
    let w = checkpoint.blocking;
    // A checkpoint is taken between steps, and an asynchronous one cannot start before the last
    // one is on storage.
    let floor = match inputs.mode() {
        super::CheckpointMode::Async => step_time.max(checkpoint.save),
        super::CheckpointMode::Sync => step_time,
    };
    let wanted = inputs.interval().unwrap_or_else(|| daly_interval(w, mttf));
    let raised = wanted < floor;
    let interval = wanted.max(floor);
    let interval = interval.min(productive.max(floor));
    // A failure that finds a warm spare free swaps it in instead of rescheduling the job.
    let spare_free = spare_free(mttf, inputs.repair(), inputs.spare_nodes());
    let skipped =
        (RESCHEDULING_SECONDS.min(inputs.restart().value()) - SPARE_SWAP_SECONDS).max(0.0);
    let saved = Seconds::new(spare_free * skipped);
    let restart = inputs.restart() - saved + checkpoint.load;
    let restart_parts = if inputs.restart_given() {
        vec![("given", inputs.restart() - saved), ("checkpoint load", checkpoint.load)]
    } else {
        vec![
            ("detection", Seconds::new(DETECTION_SECONDS)),
            ("rescheduling or spare swap", Seconds::new(RESCHEDULING_SECONDS) - saved),
            ("initialisation", Seconds::new(INIT_SECONDS)),
            ("checkpoint load", checkpoint.load),
        ]
    };
    let segment = interval + w;
    let failures_per_segment = (segment.value() / mttf.value()).exp_m1();
    // A NaN (an infinite interval over an infinite MTTF) is refused too.
    if failures_per_segment.is_nan() || failures_per_segment > MAX_FAILURES_PER_SEGMENT {
        return Err(NoProgress { segment, mttf, failures: failures_per_segment });
    }
    let segments = productive.value() / interval.value();
    let segment_time = (mttf + restart) * failures_per_segment;
    let wall = segment_time * segments;
    let failures = failures_per_segment * segments;
    let checkpoints = w * segments;
    let restarts = restart * failures;
    let lost_work = (wall - productive - checkpoints - restarts).max(Seconds::ZERO);
    let gpu_hours = wall.value() * gpus as f64 / 3600.0;
    Ok(RunOutlook {
        steps,
        tokens: steps as f64 * tokens_per_step,
        step_time,
        productive,
        wall,
        ettr: productive.value() / wall.value(),
        losses: Losses { lost_work, checkpoints, restarts },
        nodes,
        failures_per_node_day: inputs.per_node_day(),
        mttf,
        failures,
        interval,
        optimal_interval: inputs.interval().is_none(),
        interval_raised: raised,
        checkpoint,
        restart,
        restart_parts,
        spare_free,
        gpu_hours,
        cost: inputs.price_per_gpu_hour().map(|price| price * gpu_hours),
        energy_mwh: run.cluster().gpu().power().map(|watts| watts.value() * gpu_hours / 1e6),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ETTR of segments of `tau` under MTTF `m`, blocking `w` and restart `r` (seconds).
    fn ettr(tau: f64, w: f64, m: f64, r: f64) -> f64 {
        tau / ((m + r) * ((tau + w) / m).exp_m1())
    }

    /// Kokolis et al.'s first-order model, `1 - (r + tau/2)/m - w/tau`.
    fn first_order(tau: f64, w: f64, m: f64, r: f64) -> f64 {
        1.0 - (r + tau / 2.0) / m - w / tau
    }

    #[test]
    fn a_12k_gpu_job_needs_10_s_checkpoints_or_a_sixth_of_the_failures_for_an_ettr_of_0_9() {
        // Kokolis et al. (arXiv 2410.21680): on RSC-1's largest runs (~12,000 GPUs, 1,500 nodes)
        // an ETTR of 0.9 needs checkpoint writes of about 10 s, or the failure rate cut from 6.5
        // to about 1 per 1000 node-days, with 5 min writes and 10 min restarts.
        let mttf = |rate: f64| job_mttf(1500, rate).value();
        let at = |w: f64, m: f64| {
            let tau = daly_interval(Seconds::new(w), Seconds::new(m)).value();
            (ettr(tau, w, m, 600.0), first_order(tau, w, m, 600.0))
        };
        let (today, today_first) = at(300.0, mttf(6.5e-3));
        let (fast_writes, fast_first) = at(10.0, mttf(6.5e-3));
        let (fewer_failures, fewer_first) = at(300.0, mttf(1e-3));
        // The first-order figures are the derived 0.67 / 0.885 / 0.89 of the anchors.
        assert!((today_first - 0.67).abs() < 0.01, "{today_first}");
        assert!((fast_first - 0.885).abs() < 0.01, "{fast_first}");
        assert!((fewer_first - 0.89).abs() < 0.01, "{fewer_first}");
        // The exact form agrees where failures are rare and keeps the conclusion.
        assert!(today < 0.75, "{today}");
        for value in [fast_writes, fewer_failures] {
            assert!((0.87..=0.92).contains(&value), "{value}");
        }
    }

    #[test]
    fn spares_are_free_as_often_as_the_poisson_count_of_nodes_in_repair_says() {
        let (m, day) = (Seconds::new(3.0 * 3600.0), Seconds::new(86_400.0));
        assert_eq!(spare_free(m, day, 0), 0.0);
        // Eight nodes in repair on average: one spare is free with probability e^-8.
        assert!((spare_free(m, day, 1) - (-8.0f64).exp()).abs() < 1e-12);
        // P(Poisson(8) < 8) = 0.4530, P(Poisson(8) < 16) = 0.9918.
        assert!((spare_free(m, day, 8) - 0.4530).abs() < 1e-4, "{}", spare_free(m, day, 8));
        assert!((spare_free(m, day, 16) - 0.9918).abs() < 1e-4, "{}", spare_free(m, day, 16));
        // A huge mean neither underflows to NaN nor claims a spare.
        let rare = spare_free(Seconds::new(1.0), Seconds::new(1e6), 10);
        assert!(rare.is_finite() && rare < 1e-100);
    }

    #[test]
    fn daly_is_youngs_interval_when_writes_are_short_and_the_mttf_when_they_are_long() {
        let young = (2.0f64 * 10.0 * 36_000.0).sqrt();
        let daly = daly_interval(Seconds::new(10.0), Seconds::new(36_000.0)).value();
        assert!((daly - young).abs() / young < 0.02, "{daly} vs {young}");
        assert_eq!(daly_interval(Seconds::new(100.0), Seconds::new(40.0)), Seconds::new(40.0));
        // Daly's interval is where the exact ETTR peaks, to within a tenth of a percent.
        let (w, m, r) = (300.0, 8862.0, 600.0);
        let tau = daly_interval(Seconds::new(w), Seconds::new(m)).value();
        let best = (1..2000).map(|i| ettr(i as f64 * 5.0, w, m, r)).fold(0.0, f64::max);
        assert!(best - ettr(tau, w, m, r) < 1e-3, "{best} vs {}", ettr(tau, w, m, r));
    }
}

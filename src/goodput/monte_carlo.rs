//! Whole runs drawn one failure at a time, with an explicit seed: the spread of the time to train
//! around the closed form's expectation. The same model as `expected.rs` (segments of work ended
//! by a checkpoint, Poisson failures that lose the segment and cost a restart), so the two agree
//! on the mean and the draws add the distribution; one drawn run's failures make the report's
//! timeline. The generator is rand's `StdRng`, fixed by the
//! lock file: the same seed gives the same runs.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::expected::RunOutlook;
use crate::limits;
use crate::units::Seconds;

/// The time to train over many drawn runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MonteCarlo {
    /// Runs drawn.
    pub runs: u64,
    /// The seed they were drawn with.
    pub seed: u64,
    /// Mean wall-clock time.
    pub mean: Seconds,
    /// Its 10th, 50th and 90th percentiles.
    pub p10: Seconds,
    /// Median.
    pub median: Seconds,
    /// 90th percentile.
    pub p90: Seconds,
    /// Mean ETTR (productive over wall-clock time).
    pub ettr: f64,
}

/// One run: the wall-clock time of `outlook`'s work, failure by failure. Failures are memoryless,
/// so one draw gives the time to the next failure, and the segments that finish before it are
/// counted at once.
fn one_run(outlook: &RunOutlook, rng: &mut StdRng, mut failed: impl FnMut(f64, f64)) -> f64 {
    let (m, restart) = (outlook.mttf.value(), outlook.restart.value());
    let (interval, blocking) = (outlook.interval.value(), outlook.checkpoint.blocking.value());
    let full = interval + blocking;
    let mut remaining = outlook.productive.value();
    let mut wall = 0.0;
    while remaining > 0.0 {
        // An exponential draw by inversion: 1 - u lies in (0, 1].
        let mut until_failure = -m * (1.0 - rng.random::<f64>()).ln();
        // Whole segments first, then the last, shorter one.
        let whole = (remaining / interval).floor();
        let survived = (until_failure / full).floor().min(whole);
        wall += survived * full;
        until_failure -= survived * full;
        remaining -= survived * interval;
        if survived < whole {
            // The failure strikes inside a whole segment: its work is lost.
            wall += until_failure;
            failed(wall, until_failure);
            wall += restart;
            continue;
        }
        let last = remaining.max(0.0);
        if last <= 0.0 {
            break;
        }
        if until_failure >= last + blocking {
            wall += last + blocking;
            break;
        }
        wall += until_failure;
        failed(wall, until_failure);
        wall += restart;
    }
    wall
}

/// Failures one drawn run records at most (a run that fails more is still drawn to its end).
pub const MAX_RECORDED_FAILURES: usize = 100_000;

/// One drawn run, failure by failure: what a timeline of the run shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrawnRun {
    /// The seed it was drawn with.
    pub seed: u64,
    /// Its wall-clock time.
    pub wall: Seconds,
    /// Each failure: when it struck and the work since the last checkpoint it lost (the first
    /// [`MAX_RECORDED_FAILURES`]).
    pub failures: Vec<(Seconds, Seconds)>,
    /// Each restart's length.
    pub restart: Seconds,
}

/// The first run `seed` draws, with its failures; `None` when it would draw more than
/// [`limits::DRAWN_FAILURES`].
pub fn draw_run(outlook: &RunOutlook, seed: u64) -> Option<DrawnRun> {
    if outlook.failures > limits::DRAWN_FAILURES {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut failures = Vec::new();
    let wall = one_run(outlook, &mut rng, |at, lost| {
        if failures.len() < MAX_RECORDED_FAILURES {
            failures.push((Seconds::new(at), Seconds::new(lost)));
        }
    });
    Some(DrawnRun { seed, wall: Seconds::new(wall), failures, restart: outlook.restart })
}

/// Draws `runs` runs of `outlook` (at most [`limits::DRAWN_RUNS`], and fewer when they would draw more than
/// [`limits::DRAWN_FAILURES`] failures) from `seed`; `None` when one run alone would.
pub fn simulate_runs(outlook: &RunOutlook, runs: u64, seed: u64) -> Option<MonteCarlo> {
    let per_run = outlook.failures.max(1.0);
    if per_run > limits::DRAWN_FAILURES {
        return None;
    }
    let affordable = (limits::DRAWN_FAILURES / per_run).floor() as u64;
    let runs = runs.clamp(1, limits::DRAWN_RUNS).min(affordable.max(1));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut walls: Vec<f64> = (0..runs).map(|_| one_run(outlook, &mut rng, |_, _| {})).collect();
    walls.sort_by(f64::total_cmp);
    let at = |q: f64| Seconds::new(walls[((walls.len() - 1) as f64 * q).round() as usize]);
    let mean = walls.iter().sum::<f64>() / walls.len() as f64;
    Some(MonteCarlo {
        runs,
        seed,
        mean: Seconds::new(mean),
        p10: at(0.1),
        median: at(0.5),
        p90: at(0.9),
        ettr: outlook.productive.value() / mean,
    })
}

//! The whole-run flags of `estimate` and `simulate` (`--train-tokens` and the failure,
//! checkpoint and price options): their spec, the outlook of a run at its step time, and its
//! text and JSON.

use std::fmt::Write as _;

use crate::goodput::spec::FailureSource;
use crate::goodput::{
    CheckpointMode, Goodput, GoodputSpec, MonteCarlo, RunOutlook, outlook, simulate_runs,
};
use crate::run::Run;
use crate::units::{SECONDS_PER_DAY, Seconds};
use crate::violation::Violations;
use serde::Serialize;

use super::CliError;
use super::args::WholeRunArgs;
use super::render::{self, align_numbers, table};

impl WholeRunArgs {
    /// The flags as a spec.
    pub fn spec(&self) -> GoodputSpec {
        GoodputSpec {
            train_tokens: self.train_tokens.clone(),
            train_steps: self.train_steps,
            failure_rate: self.failure_rate.clone(),
            checkpoint: self.checkpoint.as_deref().map(|mode| match mode {
                "sync" => CheckpointMode::Sync,
                _ => CheckpointMode::Async,
            }),
            checkpoint_interval: self.checkpoint_interval.clone(),
            storage_write: self.storage_write.clone(),
            storage_read: self.storage_read.clone(),
            storage_per_node: self.storage_per_node.clone(),
            restart: self.restart_time.clone(),
            price_per_gpu_hour: self.price_per_gpu_hour,
            spare_nodes: self.spare_nodes,
            repair_time: self.repair_time.clone(),
            in_memory_checkpoint: self.in_memory_checkpoints.then_some(true),
        }
    }

    /// The validated inputs (`None` without a training length).
    pub fn goodput(&self) -> Result<Option<Goodput>, Violations> {
        Goodput::from_spec(&self.spec())
    }
}

/// The outlook of `run` at `step_time`, when a training length was given.
pub fn run_outlook(
    goodput: Option<&Goodput>,
    run: &Run,
    step_time: Seconds,
) -> Result<Option<RunOutlook>, CliError> {
    goodput
        .map(|goodput| outlook(run, step_time, goodput))
        .transpose()
        .map_err(|err| CliError::Other(anyhow::Error::new(err)))
}

/// Days, hours or minutes, whichever reads best.
fn duration(time: Seconds) -> String {
    let seconds = time.value();
    if seconds >= 2.0 * SECONDS_PER_DAY {
        format!("{:.1} days", time.as_days())
    } else if seconds >= 2.0 * 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else if seconds >= 120.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{seconds:.2} s")
    }
}

fn count(value: f64) -> String {
    match value {
        v if v >= 1e12 => format!("{:.2}T", v / 1e12),
        v if v >= 1e9 => format!("{:.2}B", v / 1e9),
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}K", v / 1e3),
        v => format!("{v:.1}"),
    }
}

/// The outlook as text, with the drawn runs' spread when there are some.
pub fn text(outlook: &RunOutlook, drawn: Option<&MonteCarlo>) -> String {
    let mut out = format!(
        "\nWhole run: {} tokens in {} steps of {:.3} s\n",
        count(outlook.tokens),
        outlook.steps,
        outlook.step_time.value()
    );
    let wall = outlook.wall.value();
    let share = |time: Seconds| format!("{:.2}", 100.0 * time.value() / wall);
    let mut times = table(&["Wall-clock time", "time", "% of wall"]);
    let losses = &outlook.losses;
    for (name, time) in [
        ("training steps (productive)", outlook.productive),
        ("lost work since the last checkpoint", losses.lost_work),
        ("checkpoints (blocking)", losses.checkpoints),
        ("restarts (incl. checkpoint load)", losses.restarts),
        ("time to train", outlook.wall),
    ] {
        times.add_row([name.to_owned(), duration(time), share(time)]);
    }
    align_numbers(&mut times, 1);
    let _ = writeln!(out, "\n{times}");
    let _ = writeln!(
        out,
        "ETTR {:.1} %: {:.0} failures expected, one every {} (job MTTF) on {} nodes at {:.2} per 1000 node-days",
        100.0 * outlook.ettr,
        outlook.failures,
        duration(outlook.mttf),
        outlook.nodes,
        1000.0 * outlook.failures_per_node_day,
    );
    let ckpt = &outlook.checkpoint;
    let parts: Vec<String> = outlook
        .restart_parts
        .iter()
        .map(|(name, time)| format!("{name} {}", duration(*time)))
        .collect();
    let _ = writeln!(
        out,
        "Checkpoint {:.2} TB {} every {} ({}), {} checkpoints; blocks {} ({}), saves in {}, loads in {}; a restart takes {} ({}){}",
        ckpt.total.value() / 1e12,
        if ckpt.in_host_memory { "in host memory" } else { "to storage" },
        duration(outlook.interval),
        match (outlook.optimal_interval, outlook.interval_raised) {
            (true, false) => "Daly's optimum",
            (false, false) => "as given",
            (true, true) => "Daly's optimum raised to one step or the write",
            (false, true) => "as given, raised to one step or the write",
        },
        ckpt.mode.name(),
        duration(ckpt.blocking),
        if ckpt.blocking == ckpt.save { "the whole write" } else { "device-to-host copy" },
        duration(ckpt.save),
        duration(ckpt.load),
        duration(outlook.restart),
        parts.join(", "),
        if outlook.spare_free > 0.0 {
            format!(
                " on average (a warm spare free for {:.1} % of failures)",
                100.0 * outlook.spare_free
            )
        } else {
            String::new()
        },
    );
    if let Some(host) = &ckpt.host {
        let per_gpu = host.per_gpu.as_gib();
        let offloaded = host.offloaded.as_gib();
        let beside = if offloaded > 0.0 {
            format!(", beside {offloaded:.2} GiB of offloaded activations")
        } else {
            String::new()
        };
        let _ = match host.capacity {
            None => writeln!(
                out,
                "Checkpoint in host memory: {per_gpu:.2} GiB per GPU (its share and a peer's \
                 replica{beside}; the GPU's file states no host memory: not checked, pass \
                 --host-memory)"
            ),
            Some(capacity) => writeln!(
                out,
                "Checkpoint in host memory: {per_gpu:.2} GiB per GPU (its share and a peer's \
                 replica{beside}) {}",
                render::host_capacity_verdict(host.per_gpu + host.offloaded, capacity)
            ),
        };
    }
    let _ = write!(out, "{:.3}M GPU-hours", outlook.gpu_hours / 1e6);
    match outlook.cost {
        Some(cost) => {
            let _ = write!(out, ", ${:.2}M", cost / 1e6);
        }
        None => out.push_str(" (--price-per-gpu-hour gives the cost)"),
    }
    match outlook.energy_mwh {
        Some(mwh) => {
            let _ = writeln!(out, "; {mwh:.0} MWh at the GPUs' board power (GPUs only, no PUE)");
        }
        None => out.push_str("; no energy: the GPU preset states no power\n"),
    }
    if let Some(drawn) = drawn {
        let _ = writeln!(
            out,
            "{} drawn runs (seed {}): time to train p10 {}, median {}, p90 {}; mean ETTR {:.1} %",
            drawn.runs,
            drawn.seed,
            duration(drawn.p10),
            duration(drawn.median),
            duration(drawn.p90),
            100.0 * drawn.ettr
        );
    }
    out
}

/// The outlook as JSON fields, times in seconds.
#[derive(Debug, Serialize)]
pub struct WholeRunJson {
    tokens: f64,
    steps: u64,
    step_time_s: f64,
    time_to_train_s: f64,
    productive_s: f64,
    lost_work_s: f64,
    checkpoint_blocking_s: f64,
    restarts_s: f64,
    ettr: f64,
    nodes: u64,
    failures_per_1000_node_days: f64,
    failure_rate_source: String,
    job_mttf_s: f64,
    failures: f64,
    checkpoint_mode: &'static str,
    checkpoint_interval_s: f64,
    checkpoint_interval_optimal: bool,
    checkpoint_interval_raised: bool,
    checkpoint_bytes: f64,
    checkpoint_largest_share_bytes: f64,
    checkpoint_save_s: f64,
    checkpoint_load_s: f64,
    restart_s: f64,
    /// What one restart is made of.
    restart_parts: Vec<RestartPartJson>,
    spare_free: f64,
    checkpoint_in_host_memory: bool,
    /// Host memory an in-memory checkpoint takes per GPU (its share and a peer's replica).
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_host_gib_per_gpu: Option<f64>,
    /// Whether that, with the activations the plan offloads to the same memory, fits in the
    /// host memory each GPU has (null where not stated).
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_fits_in_host_memory: Option<bool>,
    gpu_hours: f64,
    cost_dollars: Option<f64>,
    /// GPUs' board power at full load over the wall-clock time; hosts, network, cooling not
    /// counted.
    energy_mwh: Option<f64>,
    drawn: Option<MonteCarloJson>,
}

/// One part of a restart.
#[derive(Debug, Serialize)]
pub struct RestartPartJson {
    part: &'static str,
    seconds: f64,
}

/// The drawn runs as JSON.
#[derive(Debug, Serialize)]
pub struct MonteCarloJson {
    runs: u64,
    seed: u64,
    mean_s: f64,
    p10_s: f64,
    median_s: f64,
    p90_s: f64,
    ettr: f64,
}

/// The whole runs of a search's plans, one row each in the plans' order (empty without any).
pub fn ranked_text(outlooks: &[RunOutlook]) -> String {
    let Some(first) = outlooks.first() else { return String::new() };
    let mut rows = table(&["#", "time to train", "ETTR %", "GPU-hours", "cost", "energy MWh"]);
    for (rank, outlook) in outlooks.iter().enumerate() {
        rows.add_row([
            (rank + 1).to_string(),
            duration(outlook.wall),
            format!("{:.1}", 100.0 * outlook.ettr),
            format!("{:.3}M", outlook.gpu_hours / 1e6),
            outlook.cost.map_or("-".to_owned(), |cost| format!("${:.2}M", cost / 1e6)),
            outlook.energy_mwh.map_or("-".to_owned(), |mwh| format!("{mwh:.0}")),
        ]);
    }
    align_numbers(&mut rows, 1);
    format!(
        "\nWhole run of each plan: {} tokens, {:.2} failures per 1000 node-days, {} checkpoints\n{rows}\n",
        count(first.tokens),
        1000.0 * first.failures_per_node_day,
        first.checkpoint.mode.name()
    )
}

/// The JSON of an outlook.
pub fn json(outlook: &RunOutlook, goodput: &Goodput, drawn: Option<&MonteCarlo>) -> WholeRunJson {
    let ckpt = &outlook.checkpoint;
    WholeRunJson {
        tokens: outlook.tokens,
        steps: outlook.steps,
        step_time_s: outlook.step_time.value(),
        time_to_train_s: outlook.wall.value(),
        productive_s: outlook.productive.value(),
        lost_work_s: outlook.losses.lost_work.value(),
        checkpoint_blocking_s: outlook.losses.checkpoints.value(),
        restarts_s: outlook.losses.restarts.value(),
        ettr: outlook.ettr,
        nodes: outlook.nodes,
        failures_per_1000_node_days: 1000.0 * outlook.failures_per_node_day,
        failure_rate_source: match goodput.failure_source() {
            FailureSource::Preset(preset) => preset.source().to_owned(),
            FailureSource::Given => "given".to_owned(),
        },
        job_mttf_s: outlook.mttf.value(),
        failures: outlook.failures,
        checkpoint_mode: ckpt.mode.name(),
        checkpoint_interval_s: outlook.interval.value(),
        checkpoint_interval_optimal: outlook.optimal_interval,
        checkpoint_interval_raised: outlook.interval_raised,
        checkpoint_bytes: ckpt.total.value(),
        checkpoint_largest_share_bytes: ckpt.largest_share.value(),
        checkpoint_save_s: ckpt.save.value(),
        checkpoint_load_s: ckpt.load.value(),
        restart_s: outlook.restart.value(),
        restart_parts: outlook
            .restart_parts
            .iter()
            .map(|(part, time)| RestartPartJson { part, seconds: time.value() })
            .collect(),
        spare_free: outlook.spare_free,
        checkpoint_in_host_memory: ckpt.in_host_memory,
        checkpoint_host_gib_per_gpu: ckpt.host.map(|host| host.per_gpu.as_gib()),
        checkpoint_fits_in_host_memory: ckpt
            .host
            .filter(|host| host.capacity.is_some())
            .map(|host| host.fits()),
        gpu_hours: outlook.gpu_hours,
        cost_dollars: outlook.cost,
        energy_mwh: outlook.energy_mwh,
        drawn: drawn.map(|d| MonteCarloJson {
            runs: d.runs,
            seed: d.seed,
            mean_s: d.mean.value(),
            p10_s: d.p10.value(),
            median_s: d.median.value(),
            p90_s: d.p90.value(),
            ettr: d.ettr,
        }),
    }
}

/// Draws `runs` runs from `seed` when an outlook was asked for.
pub fn drawn(outlook: Option<&RunOutlook>, runs: u64, seed: u64) -> Option<MonteCarlo> {
    outlook.and_then(|outlook| simulate_runs(outlook, runs, seed))
}

//! The result of pricing one run: memory per GPU, step time and throughput, each broken down so
//! that the parts add up to the totals.
//!
//! These are plain values; the CLI renders them as tables or JSON. Two entry points turn a
//! validated [`Run`] into an [`Estimate`]: [`estimate_simulated`] (what `meshplan estimate`,
//! `simulate` and `validate` report: the step simulated under the plan's schedule) and
//! [`closed_form`] (the microsecond fast path a search prices every candidate with). The breakdown types live in
//! [`crate::cost::breakdown`], below the cost model that fills them, and are re-exported here.

use serde::Serialize;

use crate::cost;
pub use crate::cost::breakdown::{
    HostMemory, MemoryBreakdown, StageMemory, Throughput, TimeBreakdown,
};
use crate::cost::imbalance::DataImbalance;
use crate::cost::priced::PricedRun;
use crate::run::Run;
use crate::sim::{SimError, SimOptions, Simulation, simulate_from};
use crate::units::Bytes;

/// Where an estimate's step time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    /// The closed form: slowest stage times micro-batches plus the schedule's bubble formula.
    ClosedForm,
    /// The event simulation of the plan's pipeline schedule.
    Simulated,
}

/// The full prediction for one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// How the step time was obtained.
    pub time_source: TimeSource,
    /// Memory of the stage with the highest peak.
    pub peak_memory: StageMemory,
    /// Memory of every pipeline stage.
    pub stages: Vec<StageMemory>,
    /// Usable memory of one GPU.
    pub memory_capacity: Bytes,
    /// Where the step's time goes.
    pub time: TimeBreakdown,
    /// Throughput figures.
    pub throughput: Throughput,
    /// How unequal the data's sequences make the replicas and micro-batches; absent when every
    /// sequence is one document of the run's length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_balance: Option<DataImbalance>,
    /// Host memory the offloaded activations take; absent without activation offload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_memory: Option<HostMemory>,
}

impl Estimate {
    /// Whether the plan fits: the worst stage in GPU memory ([`Estimate::fits_on_gpu`]) and the
    /// activations it offloads, if any, in the host memory each GPU has ([`HostMemory::fits`]).
    pub fn fits(&self) -> bool {
        self.fits_on_gpu() && self.host_memory.is_none_or(|host| host.fits())
    }

    /// Whether the worst stage fits in GPU memory: its allocated tensors, CUDA context and NCCL
    /// buffers within the capacity ([`MemoryBreakdown::fit_need`]; the allocator's cache gives
    /// way before an out-of-memory).
    pub fn fits_on_gpu(&self) -> bool {
        self.peak_memory.breakdown.fit_need() <= self.memory_capacity
    }

    /// Every figure an estimate reports, checked against what can be true: memory and time parts
    /// finite and non-negative, a positive finite step and throughput, MFU and HFU within 0..=100 %
    /// of the peak they are taken against. Validated runs always pass (the bounds of `limits.rs`
    /// and the hardware ranges see to it, fuzzing and a property test check it); the CLI checks
    /// before it prints, so a bug shows as this error rather than as a number.
    pub fn check_figures(&self) -> Result<(), ImpossibleFigure> {
        let fail = |figure: String, value: f64| Err(ImpossibleFigure { figure, value });
        for stage in self.stages.iter().chain([&self.peak_memory]) {
            let m = &stage.breakdown;
            for (what, bytes) in m.parts().into_iter().chain([("total memory", m.total())]) {
                if !(bytes.value().is_finite() && bytes.value() >= 0.0) {
                    return fail(format!("stage {} {what}", stage.stage), bytes.value());
                }
            }
        }
        if let Some(host) = &self.host_memory {
            let offloaded = host.offloaded.value();
            if !(offloaded.is_finite() && offloaded >= 0.0) {
                return fail("offloaded host memory".to_owned(), offloaded);
            }
        }
        for (what, seconds) in self.time.parts() {
            if !(seconds.value().is_finite() && seconds.value() >= 0.0) {
                return fail(format!("{what} time"), seconds.value());
            }
        }
        let t = &self.throughput;
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let percent = |x: f64| x.is_finite() && (0.0..=100.0).contains(&x);
        for (what, value, ok) in [
            ("step time", self.time.step_time().value(), positive(self.time.step_time().value())),
            ("tokens/s per GPU", t.tokens_per_sec_per_gpu, positive(t.tokens_per_sec_per_gpu)),
            (
                "model TFLOP/s per GPU",
                t.model_tflops_per_gpu,
                t.model_tflops_per_gpu.is_finite() && t.model_tflops_per_gpu >= 0.0,
            ),
            ("MFU %", t.mfu_pct, percent(t.mfu_pct)),
            ("HFU %", t.hfu_pct, percent(t.hfu_pct)),
        ] {
            if !ok {
                return fail(what.to_owned(), value);
            }
        }
        Ok(())
    }
}

/// A figure of an estimate that cannot be true (see [`Estimate::check_figures`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the estimate's {figure} came out as {value}, which cannot be true: this is a bug in \
     meshplan's cost model for this input; please report the command"
)]
pub struct ImpossibleFigure {
    /// Which figure.
    pub figure: String,
    /// Its value.
    pub value: f64,
}

/// The stage with the highest peak.
fn peak_stage(stages: &[StageMemory]) -> StageMemory {
    // Each stage's total summed once (the last of equal peaks is taken, as `max_by` does).
    let mut peak: Option<(f64, &StageMemory)> = None;
    for stage in stages {
        let total = stage.breakdown.total().value();
        if peak.is_none_or(|(most, _)| total.total_cmp(&most).is_ge()) {
            peak = Some((total, stage));
        }
    }
    peak.map_or(StageMemory { stage: 0, breakdown: MemoryBreakdown::default() }, |(_, s)| *s)
}

/// Prices one run with the closed form: memory of every stage and the time of one step. This is
/// the fast path (a few microseconds) that a plan search calls for every candidate.
pub fn closed_form(run: &Run) -> Estimate {
    closed_form_from(&PricedRun::new(run))
}

/// [`closed_form`] of a run already priced.
pub fn closed_form_from(priced: &PricedRun) -> Estimate {
    let run = priced.run();
    let stages = priced.stage_memory();
    let time = cost::step::step_time_from(priced);
    Estimate {
        time_source: TimeSource::ClosedForm,
        peak_memory: peak_stage(&stages),
        stages,
        memory_capacity: run.cluster().gpu().memory(),
        throughput: cost::step::throughput(run, &time),
        data_balance: priced.data_imbalance(),
        host_memory: host_memory(priced),
        time,
    }
}

/// The host memory of a run's offloaded activations, where it offloads any.
fn host_memory(priced: &PricedRun) -> Option<HostMemory> {
    let run = priced.run();
    (run.plan().offload_activation_layers() > 0).then(|| HostMemory {
        offloaded: priced.host_offload_need(),
        capacity: run.cluster().interconnect().host_memory_per_gpu(),
    })
}

/// Prices one run with the step simulated under its pipeline schedule: the step time and each
/// stage's peak memory come from the simulation, which knows what the closed form cannot (the
/// schedule's real order, zero-bubble and DualPipe, bucketed data-parallel traffic).
pub fn estimate_simulated(run: &Run) -> Result<(Estimate, Simulation), SimError> {
    estimate_simulated_with(run, SimOptions { timeline: true })
}

/// [`estimate_simulated`] with a choice of what the simulation keeps; pricing without the
/// timeline is several times faster.
pub fn estimate_simulated_with(
    run: &Run,
    options: SimOptions,
) -> Result<(Estimate, Simulation), SimError> {
    estimate_simulated_from(&PricedRun::new(run), options)
}

/// [`estimate_simulated_with`] of a run already priced (by a search that timed it with the closed
/// form first), without pricing it again.
pub fn estimate_simulated_from(
    priced: &PricedRun,
    options: SimOptions,
) -> Result<(Estimate, Simulation), SimError> {
    let run = priced.run();
    let simulation = simulate_from(priced, options)?;
    let stages: Vec<StageMemory> = simulation
        .ranks
        .iter()
        .map(|rank| StageMemory { stage: u64::from(rank.rank), breakdown: rank.peak_memory })
        .collect();
    let time = simulation.time;
    let estimate = Estimate {
        time_source: TimeSource::Simulated,
        peak_memory: peak_stage(&stages),
        stages,
        memory_capacity: run.cluster().gpu().memory(),
        throughput: cost::step::throughput(run, &time),
        data_balance: priced.data_imbalance(),
        host_memory: host_memory(priced),
        time,
    };
    Ok((estimate, simulation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::work::Tables;
    use crate::plan::{PipelineSchedule, PlanSpec, RecomputeKind};
    use crate::presets;
    use crate::run::test_run;
    use crate::sim::{lower_bound, lower_bound_from, lower_bound_with};
    use crate::units::Seconds;

    /// A dense run (interleaved, per-op checkpointing), an MoE run (ep 8, full recompute) and a
    /// context-parallel run (cp 4, zero-bubble), with the closed-form step time, closed-form peak,
    /// lower bound, simulated step time and simulated peak the code gave before the priced run
    /// existed (the bound since tightened by the pipeline drain and the data-parallel stream, and
    /// the MoE run's figures re-taken when the grouped GEMMs were priced per product), as the bits
    /// of their `f64` values.
    fn runs() -> [(Run, [u64; 5]); 3] {
        let run = |model: &str, gpus, seq_len, global_batch, plan| {
            test_run(presets::model(model).unwrap(), gpus, seq_len, global_batch, 1, plan)
        };
        let dense = PlanSpec {
            tp: Some(8),
            pp: Some(4),
            vp: Some(2),
            recompute: Some(RecomputeKind::Op),
            ..PlanSpec::default()
        };
        let moe = PlanSpec {
            pp: Some(2),
            ep: Some(8),
            recompute: Some(RecomputeKind::Full),
            ..PlanSpec::default()
        };
        let cp = PlanSpec {
            tp: Some(2),
            cp: Some(4),
            pp: Some(2),
            schedule: Some(PipelineSchedule::ZeroBubble),
            ..PlanSpec::default()
        };
        [
            (run("llama3.1-70b", 64, 4096, 64, dense), GOLDEN_DENSE),
            (run("qwen3-30b-a3b", 16, 4096, 64, moe), GOLDEN_MOE),
            (run("llama3.1-8b", 32, 32768, 32, cp), GOLDEN_CP),
        ]
    }

    const GOLDEN_DENSE: [u64; 5] = [
        0x401454e518ed1a1f,
        0x4222b501e5604189,
        0x40142113d27e3ace,
        0x401436e0df9abaec,
        0x4222b7d32d0e5604,
    ];
    const GOLDEN_MOE: [u64; 5] = [
        0x3fffd91310ec3e4d,
        0x422757b895f5c28f,
        0x3fffbefb56b5ac79,
        0x3fffc48f11947156,
        0x422757b895f5c28f,
    ];
    const GOLDEN_CP: [u64; 5] = [
        0x4016ddbf92164866,
        0x42228ed01f3b645a,
        0x4015e6c3b1ecb114,
        0x40165d21760b9a80,
        0x42228ed01f3b645a,
    ];

    fn figures(closed: &Estimate, bound: Seconds, simulated: &Estimate) -> [u64; 5] {
        [
            closed.time.step_time().value().to_bits(),
            closed.peak_memory.breakdown.total().value().to_bits(),
            bound.value().to_bits(),
            simulated.time.step_time().value().to_bits(),
            simulated.peak_memory.breakdown.total().value().to_bits(),
        ]
    }

    #[test]
    fn a_simulated_peak_on_the_last_stage_names_its_logits_as_the_closed_form_does() {
        // Without pipelining the one stage is the last: its backward holds the logits. The
        // simulation used to fold them into the activations line.
        let run = test_run(
            crate::presets::model("llama3.1-8b").unwrap(),
            8,
            8192,
            8,
            1,
            crate::plan::PlanSpec::default(),
        );
        let closed = closed_form(&run).peak_memory.breakdown;
        let (simulated, _) = estimate_simulated_with(&run, SimOptions { timeline: false }).unwrap();
        let simulated = simulated.peak_memory.breakdown;
        assert!(closed.logits.value() > 1e9, "{:?}", closed.logits);
        assert_eq!(simulated.logits, closed.logits);
        assert!((simulated.activations.value() - closed.activations.value()).abs() < 1.0);
    }

    #[test]
    fn a_figure_that_cannot_be_true_is_named() {
        let run = test_run(
            crate::presets::model("llama3.1-8b").unwrap(),
            8,
            4096,
            16,
            1,
            crate::plan::PlanSpec::default(),
        );
        let estimate = closed_form(&run);
        assert_eq!(estimate.check_figures(), Ok(()));
        let mut broken = estimate.clone();
        broken.throughput.mfu_pct = 131.0;
        let err = broken.check_figures().unwrap_err();
        assert_eq!((err.figure.as_str(), err.value), ("MFU %", 131.0));
        let mut broken = estimate;
        broken.throughput.tokens_per_sec_per_gpu = f64::NAN;
        assert_eq!(broken.check_figures().unwrap_err().figure, "tokens/s per GPU");
    }

    #[test]
    fn one_priced_run_gives_the_figures_of_the_run_entry_points_and_of_before() {
        let options = SimOptions { timeline: true };
        for (run, before) in runs() {
            let priced = PricedRun::new(&run);
            let closed = closed_form_from(&priced);
            let bound = lower_bound_from(&priced);
            let (simulated, simulation) = estimate_simulated_from(&priced, options).unwrap();
            assert_eq!(figures(&closed, bound, &simulated), before, "{}", run.plan().label());
            // The entry points that take a run price it themselves, to the same figures.
            assert_eq!(closed_form(&run), closed);
            assert_eq!(cost::memory::stage_memory(&run), closed.stages);
            assert_eq!(lower_bound(&run), bound);
            assert_eq!(estimate_simulated_with(&run, options).unwrap(), (simulated, simulation));
        }
    }

    #[test]
    fn a_run_priced_from_existing_tables_gives_identical_results() {
        let options = SimOptions { timeline: false };
        for (run, _) in runs() {
            let tables = Tables::new(&run);
            let owned = PricedRun::new(&run);
            let borrowed = PricedRun::with_tables(&run, &tables);
            assert_eq!(borrowed.tables(), owned.tables());
            assert_eq!(borrowed.stages(), owned.stages());
            assert_eq!(borrowed.path(), owned.path());
            assert_eq!(closed_form_from(&borrowed), closed_form_from(&owned));
            assert_eq!(cost::step::step_time_with(&run, &tables), closed_form(&run).time);
            assert_eq!(lower_bound_with(&run, &tables), lower_bound_from(&owned));
            assert_eq!(
                estimate_simulated_from(&borrowed, options).unwrap(),
                estimate_simulated_from(&owned, options).unwrap()
            );
        }
    }
}

//! The step simulator: one training step of one pipeline replica, event by event, under the
//! plan's pipeline schedule.
//!
//! Everything it prices comes from one [`PricedRun`], the value the closed form reads too: the
//! same per-segment work (`cost::work`), per-micro-batch byte counts (`cost::memory`),
//! data-parallel collectives, pipeline send and optimizer step (`cost::step_terms`); the simulator
//! adds the schedule's order, the dependencies between ranks, pipeline sends,
//! data-parallel buckets on their own stream and the memory each rank holds over time.
//!
//! Symmetry: every tensor-, context- and data-parallel rank of a pipeline stage does the same work,
//! so one pipeline (pp ranks) stands for the whole job; a 16,384-GPU run costs what its pipeline
//! costs. Determinism: ranks are visited in index order and nothing is random, so the same run
//! gives the same timeline, byte for byte.

mod engine;
pub mod program;
mod schedule;
mod timeline;
pub mod trace;

use serde::Serialize;

use crate::cost::breakdown::{MemoryBreakdown, TimeBreakdown};
use crate::cost::memory::{Params, TokenPeaks, with_fragmentation};
use crate::cost::priced::{PricedRun, PricedSegment};
use crate::cost::step_terms::DataParallelCollectives;
use crate::cost::work::{OVERLAP_EFFICIENCY, Tables};
use crate::plan::Sharding;
use crate::run::Run;
use crate::units::{Bytes, Flops, Seconds};

pub use engine::{Lane, MemorySample, Slice, SliceKind, StuckTask};
pub use program::{Placement, Program, Task, TaskKind};

/// One rank (pipeline stage) of the simulated step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSummary {
    /// Pipeline rank.
    pub rank: u32,
    /// When its step ends (optimizer included).
    pub end: Seconds,
    /// Peak memory over the step, with the fragmentation allowance.
    pub peak_memory: MemoryBreakdown,
    /// Most micro-batches whose forward had run and whose backward had not, at any time.
    pub peak_in_flight: u32,
    /// Pipeline bubble seen by this rank (idle waiting for neighbours' compute).
    pub bubble: Seconds,
}

/// What one position (virtual stage) of the path holds and computes, for reports and traces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PositionInfo {
    /// Transformer layers.
    pub layers: f64,
    /// Parameters per GPU before data-parallel sharding (a count).
    pub params: f64,
    /// One micro-batch's forward.
    pub forward_flops: Flops,
    /// One micro-batch's backward (input and weight gradients, recompute excluded).
    pub backward_flops: Flops,
    /// Of those, the weight-gradient GEMMs.
    pub weight_gradient_flops: Flops,
    /// Recomputed forward time within the backward.
    pub recompute: Seconds,
    /// Exposed tensor-, context- and expert-parallel communication within the forward.
    pub forward_comm: (Seconds, Seconds, Seconds),
    /// Exposed tensor-, context- and expert-parallel communication within the backward.
    pub backward_comm: (Seconds, Seconds, Seconds),
}

/// A simulated step.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    /// Each position of a micro-batch's path.
    pub positions: Vec<PositionInfo>,
    /// One pipeline send.
    pub transfer_bytes: Bytes,
    /// Bytes per parameter of a gradient reduction (4 in FP32, 2 in BF16).
    pub gradient_bytes_per_param: f64,
    /// Where the step's time goes, read on the rank that finishes last.
    pub time: TimeBreakdown,
    /// Every rank.
    pub ranks: Vec<RankSummary>,
    /// Busy intervals of every rank's lanes.
    pub slices: Vec<Slice>,
    /// Memory in use over time.
    pub memory: Vec<MemorySample>,
    /// The schedule that ran.
    pub program: Program,
}

impl Simulation {
    /// The step time.
    pub fn step_time(&self) -> Seconds {
        self.time.step_time()
    }
}

/// Why a step could not be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The schedule's orders wait on each other: no rank can run its next task.
    #[error("the pipeline schedule cannot make progress: {}", describe(.stuck))]
    Deadlock {
        /// Each rank's next task and the tasks it waits for.
        stuck: Vec<StuckTask>,
    },
}

fn describe(stuck: &[StuckTask]) -> String {
    stuck
        .iter()
        .map(|s| {
            let waits: Vec<String> = s.waiting_for.iter().map(Task::to_string).collect();
            format!("rank {} at {} waits for [{}]", s.rank, s.task, waits.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A lower bound on the simulated step time, without running the schedule: every rank does its
/// share of the work back to back after the first micro-batch's forward has reached it, then its
/// optimizer step. It uses the simulator's own task costs, so it never exceeds the simulation;
/// searches skip candidates whose bound cannot beat the plans they already have.
///
/// Under a schedule whose backward is one task (GPipe, 1F1B, interleaved 1F1B), the drain is
/// bounded too: a rank's last task is the backward of its first chunk (every other task of the
/// rank comes before it: a forward before its own backward, a later chunk's backward before the
/// first chunk's), and that backward still has to pass through every earlier stage, one send
/// each, before the first rank can step its optimizer. With the fill, this is the classic
/// `(pp - 1) (f + b)` bubble of uniform stages.
///
/// A rank's data-parallel collectives run on one stream, one at a time: the rank cannot end
/// before that stream has carried all of them (its gradient reductions and, under ZeRO-3 / FSDP,
/// the parameter gathers of every task), and the collectives that wait for the last backward (the
/// tail) come after both.
pub fn lower_bound(run: &Run) -> Seconds {
    lower_bound_from(&PricedRun::new(run))
}

/// [`lower_bound`] from op tables already built for the run.
pub fn lower_bound_with(run: &Run, tables: &Tables) -> Seconds {
    lower_bound_from(&PricedRun::with_tables(run, tables))
}

/// [`lower_bound`] of a priced run.
pub fn lower_bound_from(priced: &PricedRun) -> Seconds {
    use crate::plan::PipelineSchedule;
    let run = priced.run();
    let plan = run.plan();
    let (pp, vp, m) = (plan.pp() as usize, plan.vp() as usize, plan.num_microbatches() as f64);
    let path = priced.path();
    let work = |position: usize| path[position].work;
    let params = |position: usize| path[position].params;
    // Forward time of micro-batch 0 before each position.
    let mut before = vec![Seconds::ZERO; path.len() + 1];
    for (position, p) in path.iter().enumerate() {
        before[position + 1] = before[position] + p.work.forward_task();
    }
    let dp = data_parallel(run, priced.path_collectives());
    // The data-parallel stream runs one collective at a time: a rank's stream is busy at least
    // as long as its collectives take, and the rank ends after the stream drains.
    let stream = |position: usize, microbatches: f64| {
        let at = |times: &[Seconds]| times.get(position).copied().unwrap_or(Seconds::ZERO);
        at(&dp.reduce_when_complete)
            + at(&dp.gather_before_first_forward)
            + (at(&dp.reduce_each_backward) + at(&dp.gather_each_task) * 2.0) * microbatches
    };
    let schedule = plan.schedule();
    if schedule == PipelineSchedule::Dualpipe {
        // Rank r runs position r for the first half of the micro-batches and position
        // pp - 1 - r for the rest.
        let first_half = (plan.num_microbatches() / 2) as f64;
        return (0..pp)
            .map(|rank| {
                let mirror = pp - 1 - rank;
                let busy =
                    work(rank).total() * first_half + work(mirror).total() * (m - first_half);
                let start = before[rank].min(before[mirror]);
                let streamed = stream(rank, first_half) + stream(mirror, m - first_half);
                let optimizer = priced.optimizer_time(params(rank) + params(mirror));
                (start + busy).max(streamed) + dp.tail + optimizer
            })
            .fold(Seconds::ZERO, Seconds::max);
    }
    let held = |rank: usize| (0..vp).map(move |chunk| chunk * pp + rank);
    let optimizer = |rank: usize| priced.optimizer_time(held(rank).map(params).sum::<Params>());
    // The backward of each earlier stage's first chunk and its send, summed from the first
    // stage: what follows a rank's last task before the first rank's optimizer step.
    let drains = matches!(
        schedule,
        PipelineSchedule::Gpipe | PipelineSchedule::OneFOneB | PipelineSchedule::Interleaved
    );
    let first_optimizer = if drains { optimizer(0) } else { Seconds::ZERO };
    let mut drain = Seconds::ZERO;
    let transfer = priced.transfer();
    (0..pp)
        .map(|rank| {
            let busy = held(rank).map(|p| work(p).total()).sum::<Seconds>() * m;
            let streamed = held(rank).map(|p| stream(p, m)).sum::<Seconds>();
            let own = (before[rank] + busy).max(streamed) + dp.tail + optimizer(rank);
            if drains && rank > 0 {
                drain += work(rank - 1).backward_task() + transfer;
                own.max(before[rank] + busy + drain + dp.tail + first_optimizer)
            } else {
                own
            }
        })
        .fold(Seconds::ZERO, Seconds::max)
}

/// What a simulation keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOptions {
    /// Keep every slice and memory sample, for a trace. Without it only totals, per-rank
    /// summaries and peaks are kept, which is what pricing a plan needs.
    pub timeline: bool,
}

/// Simulates one step of a run under its plan's schedule, keeping the whole timeline.
pub fn simulate(run: &Run) -> Result<Simulation, SimError> {
    simulate_with(run, SimOptions { timeline: true })
}

/// Simulates one step of a run under its plan's schedule.
pub fn simulate_with(run: &Run, options: SimOptions) -> Result<Simulation, SimError> {
    simulate_from(&PricedRun::new(run), options)
}

/// Simulates one step of a priced run under its plan's schedule.
pub fn simulate_from(priced: &PricedRun, options: SimOptions) -> Result<Simulation, SimError> {
    let run = priced.run();
    let plan = run.plan();
    let program = schedule::program(
        plan.schedule(),
        plan.pp() as u32,
        plan.vp() as u32,
        plan.num_microbatches() as u32,
    );
    // Validation ties the schedule to vp, so the program has the path's `pp x vp` positions.
    let path = priced.path();
    debug_assert_eq!(path.len(), program.positions as usize);
    let bytes = priced.activations();
    let layers: Vec<f64> = path.iter().map(|p| p.segment.all.layers).collect();
    let held: Vec<Vec<u32>> = (0..program.ranks).map(|rank| program.positions_held(rank)).collect();
    // Re-packed micro-batches carry unequal tokens; every micro-batch is simulated at the token
    // peaks the closed form takes for its rank (`crate::cost::memory::stage_peak`).
    let tokens = |position: usize| -> TokenPeaks {
        let rank = held.iter().position(|h| h.contains(&(position as u32))).unwrap_or(0) as u64;
        TokenPeaks::of(run, plan.balance_window(), rank)
    };
    let positions: Vec<engine::PositionCost> = path
        .iter()
        .enumerate()
        .map(|(position, p)| {
            let TokenPeaks { held: held_tokens, largest } = tokens(position);
            let logits = if p.segment.last { bytes.logits * largest } else { Bytes::ZERO };
            engine::PositionCost {
                layers: p.segment.all.layers,
                work: p.work,
                activations: priced.stored_activations(&p.segment) * held_tokens,
                weight_gradient_inputs: bytes.weight_gradient_inputs_per_layer
                    * (p.segment.all.layers * held_tokens),
                backward_working: bytes.recompute_working * largest + logits,
                logits,
            }
        })
        .collect();
    let params: Vec<Params> = path.iter().map(|p| p.params).collect();
    let rank_params: Vec<Params> =
        held.iter().map(|held| held.iter().map(|&p| params[p as usize]).sum()).collect();
    let rank_layers: Vec<f64> =
        held.iter().map(|held| held.iter().map(|&p| layers[p as usize]).sum()).collect();
    let states: Vec<MemoryBreakdown> = (0..program.ranks as usize)
        .map(|rank| priced.model_states(rank_params[rank], rank_layers[rank]))
        .collect();
    let setup = engine::Setup {
        program: &program,
        positions,
        transfer: priced.transfer(),
        data_parallel: data_parallel(run, priced.path_collectives()),
        slowdown: 1.0 / OVERLAP_EFFICIENCY,
        base_memory: states.iter().map(MemoryBreakdown::total).collect(),
        optimizer: rank_params.iter().map(|&p| priced.optimizer_time(p)).collect(),
        timeline: options.timeline,
    };
    let outcome = engine::run(&setup).map_err(|stuck| SimError::Deadlock { stuck })?;
    // Equal positions (the middle chunks of a path) have equal figures: each is counted once.
    let mut distinct: Vec<(&PricedSegment, PositionInfo)> = Vec::new();
    let info = path
        .iter()
        .map(|p| {
            if let Some((_, info)) = distinct.iter().find(|(q, _)| *q == p) {
                return *info;
            }
            let info = position_info(priced, p);
            distinct.push((p, info));
            info
        })
        .collect();
    let mut simulation = summarize(&program, &states, outcome);
    // The simulated pipeline runs the mean replica's micro-batches; what the slowest replica and
    // its largest micro-batch add is the cost model's expectation over the data. The largest
    // micro-batch stretches the fill and drain, not the idle time that unequal stages add to
    // the simulated bubble on every micro-batch: the closed form's fill and drain it is.
    if let Some(imbalance) = priced.data_imbalance() {
        simulation.time.data_imbalance = imbalance.extra(priced.fill_and_drain());
    }
    simulation.positions = info;
    simulation.transfer_bytes = priced.transfer_bytes();
    simulation.gradient_bytes_per_param = if plan.grad_reduce_in_fp32() { 4.0 } else { 2.0 };
    Ok(simulation)
}

fn position_info(priced: &PricedRun, position: &PricedSegment) -> PositionInfo {
    use crate::cost::layer::Phase;
    let parts = priced.tables().parts(priced.run(), &position.segment);
    let flops =
        |phase: Phase| parts.iter().map(|p| p.table.phase_flops(phase) * p.count).sum::<Flops>();
    let weight = parts.iter().map(|p| p.table.weight_gradient_flops * p.count).sum();
    let work = &position.work;
    PositionInfo {
        layers: position.segment.all.layers,
        params: position.params.total(),
        forward_flops: flops(Phase::Forward),
        backward_flops: flops(Phase::Backward),
        weight_gradient_flops: weight,
        recompute: work.recompute,
        forward_comm: (work.forward_tp, work.forward_cp, work.forward_ep),
        backward_comm: (work.backward_tp, work.backward_cp, work.backward_ep),
    }
}

/// The data-parallel collectives of each position under the plan's sharding.
fn data_parallel(run: &Run, collectives: &[DataParallelCollectives]) -> engine::DataParallel {
    let plan = run.plan();
    let each = |f: &dyn Fn(&DataParallelCollectives) -> Seconds| {
        collectives.iter().map(f).collect::<Vec<Seconds>>()
    };
    let replicas: Seconds = collectives.iter().map(|c| c.replica_reduce).sum();
    let gathers: Seconds = collectives.iter().map(|c| c.all_gather).sum();
    let mut dp =
        engine::DataParallel { overlap_reduce: plan.overlap_grad_reduce(), ..Default::default() };
    match plan.sharding() {
        Sharding::None => dp.reduce_when_complete = each(&|c| c.all_reduce),
        Sharding::Optimizer | Sharding::OptimizerAndGradients => {
            if plan.sharding() == Sharding::Optimizer {
                dp.reduce_when_complete = each(&|c| c.reduce_scatter);
            } else {
                dp.reduce_each_backward = each(&|c| c.reduce_scatter);
            }
            if plan.overlap_param_gather() {
                dp.gather_before_first_forward = each(&|c| c.all_gather);
            } else {
                dp.tail += gathers;
            }
            dp.tail += replicas;
        }
        Sharding::Full if !plan.reshard_after_forward() => {
            dp.gather_before_first_forward = each(&|c| c.all_gather);
            dp.reduce_when_complete = each(&|c| c.reduce_scatter);
            dp.tail += replicas;
        }
        Sharding::Full => {
            // Forward and backward both gather their parameters; every backward reduce-scatters.
            dp.gather_each_task = each(&|c| c.all_gather);
            dp.reduce_each_backward = each(&|c| c.reduce_scatter);
            dp.tail += replicas;
        }
    }
    dp
}

fn summarize(
    program: &Program,
    states: &[MemoryBreakdown],
    outcome: engine::Outcome,
) -> Simulation {
    let critical = outcome
        .ranks
        .iter()
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.end.value().total_cmp(&b.end.value()).then(ib.cmp(ia)))
        .map_or(0, |(rank, _)| rank);
    let times = outcome.ranks[critical];
    let time = TimeBreakdown {
        forward: times.forward,
        backward: times.backward,
        recompute: times.recompute,
        tp_exposed: times.tp,
        cp_exposed: times.cp,
        ep_exposed: times.ep,
        pp_exposed: times.pp,
        dp_exposed: times.dp,
        pipeline_bubble: times.bubble,
        data_imbalance: Seconds::ZERO,
        optimizer: times.optimizer,
    };
    let ranks = outcome
        .ranks
        .iter()
        .enumerate()
        .map(|(rank, times)| {
            let mut peak = states[rank];
            peak.logits = outcome.peak_logits[rank];
            peak.activations = outcome.peak_memory[rank] - states[rank].total() - peak.logits;
            RankSummary {
                rank: rank as u32,
                end: times.end,
                peak_memory: with_fragmentation(peak),
                peak_in_flight: outcome.peak_in_flight[rank],
                bubble: times.bubble,
            }
        })
        .collect();
    Simulation {
        positions: Vec::new(),
        transfer_bytes: Bytes::ZERO,
        gradient_bytes_per_param: 0.0,
        time,
        ranks,
        slices: outcome.slices,
        memory: outcome.memory,
        program: program.clone(),
    }
}

#[cfg(test)]
mod tests;

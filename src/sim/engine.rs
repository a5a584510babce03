//! The event-driven core: runs every rank's task order against the dependencies between ranks,
//! with a compute stream, a pipeline send stream and a data-parallel stream per rank.
//!
//! A task starts when its rank's compute stream is free, its inputs have arrived (the producing
//! task's end plus one send/receive when it ran on another rank) and, under FSDP, its parameters
//! have been gathered. Task times are exact for a fixed per-rank order, whatever order the loop
//! visits ranks in: each task is placed once all its dependencies are placed, and ranks are
//! visited in index order so ties resolve the same way every time. A pass that places nothing
//! while tasks remain is a deadlock, reported with the tasks that are stuck and what they wait
//! for; the loop never spins.
//!
//! Data-parallel collectives run on their own stream; compute that overlaps them is slowed by
//! `slowdown` (collective kernels take SMs and memory bandwidth).

use super::program::{Task, TaskKind};
pub use super::timeline::{
    DataParallel, Lane, MemorySample, Outcome, PositionCost, RankTime, Setup, Slice, SliceKind,
    StuckTask,
};
use crate::units::{Bytes, Seconds};

struct Dependency {
    ready: Seconds,
    /// Send time included in `ready` when the binding input came from another rank.
    transfer: Seconds,
}

struct Engine<'a> {
    setup: &'a Setup<'a>,
    forward_end: Vec<Option<Seconds>>,
    backward_end: Vec<Option<Seconds>>,
    /// A position's start-of-step parameter gather, until its first forward consumes it.
    /// Indexed by rank x positions + position: DualPipe holds a position on two ranks.
    gather_pending: Vec<Option<(Seconds, Seconds)>>,
    /// Backward passes a (rank, position) still has to run before its gradients are complete.
    remaining_gradients: Vec<u32>,
    outcome: Outcome,
}

/// Runs the program.
pub fn run(setup: &Setup) -> Result<Outcome, Vec<StuckTask>> {
    let program = setup.program;
    let ranks = program.ranks as usize;
    let slots = (program.microbatches * program.positions) as usize;
    let mut engine = Engine {
        setup,
        forward_end: vec![None; slots],
        backward_end: vec![None; slots],
        gather_pending: vec![None; ranks * program.positions as usize],
        remaining_gradients: vec![0; ranks * program.positions as usize],
        outcome: Outcome {
            // Slices are kept only for a timeline.
            slices: Vec::with_capacity(if setup.timeline { program.len() * 2 } else { 0 }),
            memory: Vec::new(),
            ranks: vec![RankTime::default(); ranks],
            peak_memory: setup.base_memory.clone(),
            peak_logits: vec![Bytes::ZERO; ranks],
            peak_in_flight: vec![0; ranks],
        },
    };
    for (rank, tasks) in program.order.iter().enumerate() {
        for task in tasks {
            if matches!(task.kind, TaskKind::Backward | TaskKind::WeightGradient) {
                let held = engine.held(rank, task.position);
                engine.remaining_gradients[held] += 1;
            }
        }
    }
    engine.execute(ranks)?;
    Ok(engine.outcome)
}

/// Per-rank progress of the main loop.
#[derive(Clone, Copy, Default)]
struct Cursor {
    next: usize,
    compute_free: Seconds,
    data_parallel_free: Seconds,
    previous_start: Seconds,
    memory: Bytes,
    /// Of `memory`, the logits of a backward under way.
    logits: Bytes,
    in_flight: u32,
    /// Index into the rank's data-parallel intervals below which all end before `compute_free`.
    overlap_from: usize,
}

impl Engine<'_> {
    /// Index of a position held by a rank.
    fn held(&self, rank: usize, position: u32) -> usize {
        rank * self.setup.program.positions as usize + position as usize
    }

    fn slot(&self, microbatch: u32, position: u32) -> usize {
        (microbatch * self.setup.program.positions + position) as usize
    }

    fn execute(&mut self, ranks: usize) -> Result<(), Vec<StuckTask>> {
        let program = self.setup.program;
        let mut cursors: Vec<Cursor> = (0..ranks)
            .map(|rank| Cursor { memory: self.setup.base_memory[rank], ..Cursor::default() })
            .collect();
        let mut intervals: Vec<Vec<(Seconds, Seconds)>> = vec![Vec::new(); ranks];
        self.issue_start_gathers(&mut cursors, &mut intervals);
        for (rank, cursor) in cursors.iter().enumerate() {
            self.sample(rank as u32, Seconds::ZERO, cursor.memory);
        }
        let total = program.len();
        let mut placed = 0;
        while placed < total {
            let mut progress = false;
            for rank in 0..ranks {
                while let Some(&task) = program.order[rank].get(cursors[rank].next) {
                    let Some(dependency) = self.dependency(task) else { break };
                    self.place(rank, task, dependency, &mut cursors[rank], &mut intervals[rank]);
                    cursors[rank].next += 1;
                    placed += 1;
                    progress = true;
                }
            }
            if !progress {
                return Err(self.stuck(&cursors));
            }
        }
        for rank in 0..ranks {
            self.finish(rank, &cursors[rank], &mut intervals[rank]);
        }
        Ok(())
    }

    fn issue_start_gathers(
        &mut self,
        cursors: &mut [Cursor],
        intervals: &mut [Vec<(Seconds, Seconds)>],
    ) {
        let program = self.setup.program;
        let gathers = &self.setup.data_parallel.gather_before_first_forward;
        if gathers.is_empty() {
            return;
        }
        for (rank, tasks) in program.order.iter().enumerate() {
            let mut seen = Vec::new();
            for task in tasks.iter().filter(|t| t.kind == TaskKind::Forward) {
                if seen.contains(&task.position) {
                    continue;
                }
                seen.push(task.position);
                let duration = gathers[task.position as usize];
                let start = cursors[rank].data_parallel_free;
                let end = start + duration;
                cursors[rank].data_parallel_free = end;
                let held = self.held(rank, task.position);
                self.gather_pending[held] = Some((start, end));
                intervals[rank].push((start, end));
                self.push_slice(Slice {
                    rank: rank as u32,
                    lane: Lane::DataParallel,
                    kind: SliceKind::ParamGather { position: task.position },
                    start,
                    end,
                });
            }
        }
    }

    /// When the task's inputs are available, or `None` if a producer has not been placed.
    fn dependency(&self, task: Task) -> Option<Dependency> {
        let program = self.setup.program;
        let rank = program.rank_of(task.microbatch, task.position);
        let transfer = self.setup.transfer;
        let from = |end: Seconds, producer_position: u32| {
            if program.rank_of(task.microbatch, producer_position) == rank {
                Dependency { ready: end, transfer: Seconds::ZERO }
            } else {
                Dependency { ready: end + transfer, transfer }
            }
        };
        let later = |a: Dependency, b: Dependency| if b.ready > a.ready { b } else { a };
        let own = self.slot(task.microbatch, task.position);
        match task.kind {
            TaskKind::Forward => {
                if task.position == 0 {
                    return Some(Dependency { ready: Seconds::ZERO, transfer: Seconds::ZERO });
                }
                let end = self.forward_end[self.slot(task.microbatch, task.position - 1)]?;
                Some(from(end, task.position - 1))
            }
            TaskKind::Backward | TaskKind::BackwardInput => {
                let forward = Dependency { ready: self.forward_end[own]?, transfer: Seconds::ZERO };
                if task.position + 1 == program.positions {
                    return Some(forward);
                }
                let next = self.backward_end[self.slot(task.microbatch, task.position + 1)]?;
                Some(later(forward, from(next, task.position + 1)))
            }
            TaskKind::WeightGradient => {
                Some(Dependency { ready: self.backward_end[own]?, transfer: Seconds::ZERO })
            }
        }
    }

    fn duration(&self, task: Task) -> (Seconds, RankTime) {
        let work = self.setup.positions[task.position as usize].work;
        let mut parts = RankTime::default();
        match task.kind {
            TaskKind::Forward => {
                parts.forward = work.forward;
                parts.tp = work.forward_tp;
                parts.cp = work.forward_cp;
                parts.ep = work.forward_ep;
            }
            TaskKind::Backward | TaskKind::BackwardInput => {
                parts.backward = work.backward;
                if task.kind == TaskKind::BackwardInput {
                    parts.backward = work.backward - work.weight_gradient;
                }
                parts.recompute = work.recompute;
                parts.tp = work.backward_tp;
                parts.cp = work.backward_cp;
                parts.ep = work.backward_ep;
            }
            TaskKind::WeightGradient => parts.backward = work.weight_gradient,
        }
        let total =
            parts.forward + parts.backward + parts.recompute + parts.tp + parts.cp + parts.ep;
        (total, parts)
    }

    fn place(
        &mut self,
        rank: usize,
        task: Task,
        dependency: Dependency,
        cursor: &mut Cursor,
        intervals: &mut Vec<(Seconds, Seconds)>,
    ) {
        let setup = self.setup;
        let dp = &setup.data_parallel;
        let position = task.position as usize;
        let (duration, parts) = self.duration(task);
        let layers = setup.positions[position].layers.max(1.0);
        let ready = cursor.compute_free.max(dependency.ready);
        let mut start = ready;
        // Parameter gathers stream layer by layer: the task can start once the first layer's
        // parameters arrived, and cannot finish before the last layer's arrived and ran.
        let mut floor = Seconds::ZERO;
        let held = self.held(rank, task.position);
        if task.kind == TaskKind::Forward
            && let Some((gather_start, gather_end)) = self.gather_pending[held].take()
        {
            start = start.max(gather_start + (gather_end - gather_start) / layers);
            floor = gather_end + duration / layers;
        }
        if task.kind != TaskKind::WeightGradient && !dp.gather_each_task.is_empty() {
            // Prefetched when the previous task started, behind whatever the stream is doing.
            let issue = cursor.previous_start.max(cursor.data_parallel_free);
            let gather = dp.gather_each_task[position];
            let end = issue + gather;
            self.push_dp(
                rank,
                SliceKind::ParamGather { position: task.position },
                issue,
                end,
                cursor,
                intervals,
            );
            start = start.max(issue + gather / layers);
            floor = floor.max(end + duration / layers);
        }
        let gather_wait = start - ready;
        // Attribute the wait before the task.
        let wait = start - cursor.compute_free;
        let times = &mut self.outcome.ranks[rank];
        if wait > Seconds::ZERO {
            let waited_for_dp = gather_wait.min(wait);
            let waited_for_send = dependency.transfer.min(wait - waited_for_dp);
            times.dp += waited_for_dp;
            times.pp += waited_for_send;
            times.bubble += wait - waited_for_dp - waited_for_send;
        }
        // Slow the compute by the data-parallel traffic it overlaps.
        while cursor.overlap_from < intervals.len() && intervals[cursor.overlap_from].1 <= start {
            cursor.overlap_from += 1;
        }
        let mut overlapped = Seconds::ZERO;
        for &(busy_start, busy_end) in &intervals[cursor.overlap_from..] {
            if busy_start >= start + duration {
                break;
            }
            overlapped +=
                (busy_end.min(start + duration) - busy_start.max(start)).max(Seconds::ZERO);
        }
        let stretch = overlapped * (setup.slowdown - 1.0);
        let end = (start + duration + stretch).max(floor);
        // Rounding can leave a stretch of -1e-16 when nothing overlapped; report it as zero.
        let stretch = (end - start - duration).max(Seconds::ZERO);
        let times = &mut self.outcome.ranks[rank];
        times.forward += parts.forward;
        times.backward += parts.backward;
        times.recompute += parts.recompute;
        times.tp += parts.tp;
        times.cp += parts.cp;
        times.ep += parts.ep;
        times.dp += stretch;
        cursor.previous_start = start;
        cursor.compute_free = end;
        self.push_slice(Slice {
            rank: rank as u32,
            lane: Lane::Compute,
            kind: SliceKind::Task(task),
            start,
            end,
        });
        self.record(rank, task, start, end, cursor, intervals);
    }

    fn record(
        &mut self,
        rank: usize,
        task: Task,
        start: Seconds,
        end: Seconds,
        cursor: &mut Cursor,
        intervals: &mut Vec<(Seconds, Seconds)>,
    ) {
        let setup = self.setup;
        let program = setup.program;
        let cost = setup.positions[task.position as usize];
        let own = self.slot(task.microbatch, task.position);
        let sends = |position_next: Option<u32>| {
            position_next.is_some_and(|p| program.rank_of(task.microbatch, p) != rank as u32)
        };
        match task.kind {
            TaskKind::Forward => {
                self.forward_end[own] = Some(end);
                cursor.in_flight += 1;
                let peak = &mut self.outcome.peak_in_flight[rank];
                *peak = (*peak).max(cursor.in_flight);
                self.change_memory(rank, end, cost.activations, cursor);
                let next = (task.position + 1 < program.positions).then_some(task.position + 1);
                if sends(next) {
                    self.push_send(rank, task, end);
                }
            }
            TaskKind::Backward | TaskKind::BackwardInput => {
                self.backward_end[own] = Some(end);
                cursor.in_flight -= 1;
                cursor.logits += cost.logits;
                self.change_memory(rank, start, cost.backward_working, cursor);
                let kept = if task.kind == TaskKind::BackwardInput {
                    cost.weight_gradient_inputs
                } else {
                    Bytes::ZERO
                };
                self.change_memory(
                    rank,
                    end,
                    -cost.backward_working - (cost.activations - kept),
                    cursor,
                );
                cursor.logits = cursor.logits - cost.logits;
                if sends(task.position.checked_sub(1)) {
                    self.push_send(rank, task, end);
                }
            }
            TaskKind::WeightGradient => {
                self.change_memory(rank, end, -cost.weight_gradient_inputs, cursor);
            }
        }
        let dp = &setup.data_parallel;
        let position = task.position as usize;
        if matches!(task.kind, TaskKind::Backward | TaskKind::BackwardInput)
            && !dp.reduce_each_backward.is_empty()
        {
            let reduce = dp.reduce_each_backward[position];
            self.stream_reduce(rank, task.position, (start, end), reduce, cursor, intervals);
        }
        if matches!(task.kind, TaskKind::Backward | TaskKind::WeightGradient) {
            let held = self.held(rank, task.position);
            self.remaining_gradients[held] -= 1;
            if self.remaining_gradients[held] == 0
                && dp.overlap_reduce
                && !dp.reduce_when_complete.is_empty()
            {
                let reduce = dp.reduce_when_complete[position];
                self.stream_reduce(rank, task.position, (start, end), reduce, cursor, intervals);
            }
        }
    }

    /// A gradient reduction that streams layer by layer behind the backward `task` producing it:
    /// it starts once the first layer's gradients exist and ends no earlier than one layer's share
    /// after the backward.
    fn stream_reduce(
        &mut self,
        rank: usize,
        position: u32,
        (start, end): (Seconds, Seconds),
        reduce: Seconds,
        cursor: &mut Cursor,
        intervals: &mut Vec<(Seconds, Seconds)>,
    ) {
        let layers = self.setup.positions[position as usize].layers.max(1.0);
        let issue = (start + (end - start) / layers).max(cursor.data_parallel_free);
        let done = (issue + reduce).max(end + reduce / layers);
        self.push_dp(rank, SliceKind::GradientReduce { position }, issue, done, cursor, intervals);
    }

    fn push_send(&mut self, rank: usize, task: Task, end: Seconds) {
        self.push_slice(Slice {
            rank: rank as u32,
            lane: Lane::PipelineSend,
            kind: SliceKind::Send(task),
            start: end,
            end: end + self.setup.transfer,
        });
    }

    fn push_dp(
        &mut self,
        rank: usize,
        kind: SliceKind,
        start: Seconds,
        end: Seconds,
        cursor: &mut Cursor,
        intervals: &mut Vec<(Seconds, Seconds)>,
    ) {
        cursor.data_parallel_free = end;
        intervals.push((start, end));
        self.push_slice(Slice { rank: rank as u32, lane: Lane::DataParallel, kind, start, end });
    }

    fn change_memory(&mut self, rank: usize, time: Seconds, delta: Bytes, cursor: &mut Cursor) {
        if delta == Bytes::ZERO {
            return;
        }
        cursor.memory += delta;
        if cursor.memory > self.outcome.peak_memory[rank] {
            self.outcome.peak_memory[rank] = cursor.memory;
            self.outcome.peak_logits[rank] = cursor.logits;
        }
        self.sample(rank as u32, time, cursor.memory);
    }

    fn sample(&mut self, rank: u32, time: Seconds, bytes: Bytes) {
        if self.setup.timeline {
            self.outcome.memory.push(MemorySample { rank, time, bytes });
        }
    }

    fn push_slice(&mut self, slice: Slice) {
        if self.setup.timeline {
            self.outcome.slices.push(slice);
        }
    }

    /// Drains the data-parallel stream and runs the optimizer.
    fn finish(&mut self, rank: usize, cursor: &Cursor, intervals: &mut Vec<(Seconds, Seconds)>) {
        let setup = self.setup;
        let dp = &setup.data_parallel;
        let mut cursor = *cursor;
        if !dp.overlap_reduce {
            let positions = setup.program.positions_held(rank as u32);
            for position in positions {
                if let Some(&duration) = dp.reduce_when_complete.get(position as usize) {
                    let issue = cursor.compute_free.max(cursor.data_parallel_free);
                    self.push_dp(
                        rank,
                        SliceKind::GradientReduce { position },
                        issue,
                        issue + duration,
                        &mut cursor,
                        intervals,
                    );
                }
            }
        }
        let drained = cursor.compute_free.max(cursor.data_parallel_free) + dp.tail;
        let optimizer = setup.optimizer[rank];
        self.push_slice(Slice {
            rank: rank as u32,
            lane: Lane::Compute,
            kind: SliceKind::Optimizer,
            start: drained,
            end: drained + optimizer,
        });
        let times = &mut self.outcome.ranks[rank];
        times.dp += drained - cursor.compute_free;
        times.optimizer = optimizer;
        times.end = drained + optimizer;
    }

    fn stuck(&self, cursors: &[Cursor]) -> Vec<StuckTask> {
        let program = self.setup.program;
        let mut stuck = Vec::new();
        for (rank, cursor) in cursors.iter().enumerate() {
            let Some(&task) = program.order[rank].get(cursor.next) else { continue };
            let mut waiting_for = Vec::new();
            let own = self.slot(task.microbatch, task.position);
            let mut need = |kind, position: u32, done: bool| {
                if !done {
                    waiting_for.push(Task { kind, microbatch: task.microbatch, position });
                }
            };
            match task.kind {
                TaskKind::Forward if task.position > 0 => {
                    let done =
                        self.forward_end[self.slot(task.microbatch, task.position - 1)].is_some();
                    need(TaskKind::Forward, task.position - 1, done);
                }
                TaskKind::Forward => {}
                TaskKind::Backward | TaskKind::BackwardInput => {
                    need(TaskKind::Forward, task.position, self.forward_end[own].is_some());
                    if task.position + 1 < program.positions {
                        let done = self.backward_end[self.slot(task.microbatch, task.position + 1)]
                            .is_some();
                        need(TaskKind::Backward, task.position + 1, done);
                    }
                }
                TaskKind::WeightGradient => {
                    need(TaskKind::BackwardInput, task.position, self.backward_end[own].is_some());
                }
            }
            stuck.push(StuckTask { rank: rank as u32, task, waiting_for });
        }
        stuck
    }
}

//! A simulated step as a Chrome Trace Event Format document (reference file section 6.1), which
//! Perfetto and chrome://tracing open.
//!
//! One process per pipeline stage (it stands for every tensor-, context- and data-parallel rank of
//! that stage, which do the same work), with three threads: compute, pipeline sends and
//! data-parallel collectives. Every task is a complete (`X`) slice named like the zero-bubble paper
//! and torchtitan CSV schedules (`F`, `B`, `I`, `W`, with the stage position and micro-batch), with
//! its micro-batch, chunk, layers and FLOPs in `args`, with its recomputed forward and exposed
//! TP/CP communication as nested slices; sends and data-parallel collectives carry their bytes;
//! memory in use is a counter track per stage. Events are emitted in a fixed order, so the same simulation gives the
//! same bytes.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Lane, Simulation, SliceKind, TaskKind};
use crate::units::Seconds;

const COMPUTE: u32 = 0;
const SEND: u32 = 1;
const DATA_PARALLEL: u32 = 2;

fn micros(time: Seconds) -> f64 {
    // Rounded to nanoseconds so that the text does not depend on float noise below that.
    (time.value() * 1e9).round() / 1e3
}

fn thread(lane: Lane) -> u32 {
    match lane {
        Lane::Compute => COMPUTE,
        Lane::PipelineSend => SEND,
        Lane::DataParallel => DATA_PARALLEL,
    }
}

/// One trace event. Events are serialized one by one into the document's text, never built as a
/// JSON tree; every object's keys are declared in sorted order (the order the document has always
/// had), and absent keys are left out.
#[derive(Serialize)]
struct Event<'a, A: Serialize> {
    args: A,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    name: &'a str,
    ph: &'static str,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
}

#[derive(Serialize)]
struct NameArgs<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct SortIndexArgs {
    sort_index: u32,
}

#[derive(Serialize)]
struct LabelArgs<'a> {
    labels: &'a str,
}

#[derive(Serialize)]
struct TaskArgs {
    chunk: u32,
    flops: f64,
    layers: f64,
    microbatch: u32,
    position: u32,
}

#[derive(Serialize)]
struct CommArgs {
    microbatch: u32,
    position: u32,
}

#[derive(Serialize)]
struct SendArgs {
    bytes: f64,
    microbatch: u32,
    position: u32,
}

#[derive(Serialize)]
struct CollectiveArgs {
    bytes: f64,
    position: u32,
}

#[derive(Serialize)]
struct NoArgs {}

#[derive(Serialize)]
struct MemoryArgs {
    #[serde(rename = "GiB")]
    gib: f64,
}

/// The events written so far, as the text of a JSON array's elements.
struct Events {
    text: Vec<u8>,
    first: bool,
}

impl Events {
    fn push<A: Serialize>(&mut self, event: &Event<'_, A>) {
        if !self.first {
            self.text.push(b',');
        }
        self.first = false;
        // Writing into memory fails only on a type that refuses to serialize, which none is.
        serde_json::to_writer(&mut self.text, event)
            .unwrap_or_else(|_| unreachable!("trace events serialize into memory"));
    }

    fn metadata<A: Serialize>(&mut self, name: &str, pid: u32, tid: u32, args: A) {
        let event = Event { args, cat: None, dur: None, name, ph: "M", pid, tid, ts: None };
        self.push(&event);
    }

    #[allow(clippy::too_many_arguments)]
    fn slice<A: Serialize>(
        &mut self,
        pid: u32,
        tid: u32,
        name: &str,
        cat: &str,
        start: Seconds,
        end: Seconds,
        args: A,
    ) {
        let event = Event {
            args,
            cat: Some(cat),
            dur: Some(micros(end) - micros(start)),
            name,
            ph: "X",
            pid,
            tid,
            ts: Some(micros(start)),
        };
        self.push(&event);
    }
}

fn metadata(events: &mut Events, simulation: &Simulation, label: &str) {
    for rank in &simulation.ranks {
        let pid = rank.rank;
        let process = format!("pp stage {pid}");
        events.metadata("process_name", pid, 0, NameArgs { name: &process });
        events.metadata("process_sort_index", pid, 0, SortIndexArgs { sort_index: pid });
        events.metadata("process_labels", pid, 0, LabelArgs { labels: label });
        for (tid, name) in
            [(COMPUTE, "compute"), (SEND, "pp send"), (DATA_PARALLEL, "dp collectives")]
        {
            events.metadata("thread_name", pid, tid, NameArgs { name });
            events.metadata("thread_sort_index", pid, tid, SortIndexArgs { sort_index: tid });
        }
    }
}

fn slices(events: &mut Events, simulation: &Simulation) {
    let program = &simulation.program;
    let mut name = String::new();
    for s in &simulation.slices {
        let (pid, tid) = (s.rank, thread(s.lane));
        name.clear();
        match s.kind {
            SliceKind::Task(task) => {
                let info = simulation.positions[task.position as usize];
                let chunk = program.chunk_of(task.microbatch, task.position);
                let flops = match task.kind {
                    TaskKind::Forward => info.forward_flops,
                    TaskKind::Backward => info.backward_flops,
                    TaskKind::BackwardInput => info.backward_flops - info.weight_gradient_flops,
                    TaskKind::WeightGradient => info.weight_gradient_flops,
                };
                let args = || TaskArgs {
                    chunk,
                    flops: flops.value(),
                    layers: info.layers,
                    microbatch: task.microbatch,
                    position: task.position,
                };
                let cat = match task.kind {
                    TaskKind::Forward => "forward",
                    TaskKind::Backward | TaskKind::BackwardInput => "backward",
                    TaskKind::WeightGradient => "weight-gradient",
                };
                let mut start = s.start;
                let recomputes = matches!(task.kind, TaskKind::Backward | TaskKind::BackwardInput);
                if recomputes && info.recompute > Seconds::ZERO {
                    let end = (s.start + info.recompute).min(s.end);
                    let _ = write!(name, "recompute {task}");
                    events.slice(pid, tid, &name, "recompute", s.start, end, args());
                    start = end;
                    name.clear();
                }
                let _ = write!(name, "{task}");
                events.slice(pid, tid, &name, cat, start, s.end, args());
                // Exposed TP, CP and EP communication at the end of the task, nested inside it.
                let (tp, cp, ep) = match task.kind {
                    TaskKind::Forward => info.forward_comm,
                    TaskKind::Backward | TaskKind::BackwardInput => info.backward_comm,
                    TaskKind::WeightGradient => (Seconds::ZERO, Seconds::ZERO, Seconds::ZERO),
                };
                let ep_start = (s.end - ep).max(start);
                let cp_start = (ep_start - cp).max(start);
                let tp_start = (cp_start - tp).max(start);
                for (name, cat, from, to) in [
                    ("tp comm (exposed)", "tp-comm", tp_start, cp_start),
                    ("cp comm (exposed)", "cp-comm", cp_start, ep_start),
                    ("ep comm (exposed)", "ep-comm", ep_start, s.end),
                ] {
                    if to > from {
                        let args =
                            CommArgs { microbatch: task.microbatch, position: task.position };
                        events.slice(pid, tid, name, cat, from, to, args);
                    }
                }
            }
            SliceKind::Send(task) => {
                let args = SendArgs {
                    bytes: simulation.transfer_bytes.value(),
                    microbatch: task.microbatch,
                    position: task.position,
                };
                let _ = write!(name, "send {task}");
                events.slice(pid, tid, &name, "pp-send", s.start, s.end, args);
            }
            SliceKind::ParamGather { position } => {
                let bytes = simulation.positions[position as usize].params * 2.0;
                let _ = write!(name, "param all-gather {position}");
                let args = CollectiveArgs { bytes, position };
                events.slice(pid, tid, &name, "dp-all-gather", s.start, s.end, args);
            }
            SliceKind::GradientReduce { position } => {
                let bytes = simulation.positions[position as usize].params
                    * simulation.gradient_bytes_per_param;
                let _ = write!(name, "grad reduce {position}");
                let args = CollectiveArgs { bytes, position };
                events.slice(pid, tid, &name, "dp-reduce", s.start, s.end, args);
            }
            SliceKind::Optimizer => {
                events.slice(pid, tid, "optimizer", "optimizer", s.start, s.end, NoArgs {});
            }
        }
    }
    for sample in &simulation.memory {
        let event = Event {
            args: MemoryArgs { gib: sample.bytes.as_gib() },
            cat: None,
            dur: None,
            name: "memory",
            ph: "C",
            pid: sample.rank,
            tid: 0,
            ts: Some(micros(sample.time)),
        };
        events.push(&event);
    }
}

/// What the document says besides its events.
#[derive(Serialize)]
struct OtherData<'a> {
    generator: &'static str,
    run: &'a str,
    step_time_s: f64,
    symmetry: &'static str,
}

/// The trace as JSON text. `label` names the run (model, plan) in every process's labels.
pub fn chrome_trace(simulation: &Simulation, label: &str) -> String {
    let other = OtherData {
        generator: "meshplan simulate",
        run: label,
        step_time_s: simulation.step_time().value(),
        symmetry: "each process is one pipeline stage and stands for all of its tensor-, context- and data-parallel ranks",
    };
    // The keys in sorted order: displayTimeUnit, otherData, traceEvents.
    let mut events =
        Events { text: Vec::with_capacity(256 * simulation.slices.len()), first: true };
    events.text.extend_from_slice(br#"{"displayTimeUnit":"ms","otherData":"#);
    serde_json::to_writer(&mut events.text, &other)
        .unwrap_or_else(|_| unreachable!("the trace's header serializes into memory"));
    events.text.extend_from_slice(br#","traceEvents":["#);
    metadata(&mut events, simulation, label);
    slices(&mut events, simulation);
    events.text.extend_from_slice(b"]}");
    String::from_utf8(events.text).unwrap_or_else(|_| unreachable!("serde_json writes UTF-8"))
}

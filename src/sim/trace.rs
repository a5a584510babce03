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

use serde_json::{Value, json};

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

fn metadata(simulation: &Simulation, label: &str) -> Vec<Value> {
    let mut events = Vec::new();
    for rank in &simulation.ranks {
        let pid = rank.rank;
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": format!("pp stage {pid}")}}));
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
            "args": {"sort_index": pid}}));
        events.push(json!({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
            "args": {"labels": label}}));
        for (tid, name) in
            [(COMPUTE, "compute"), (SEND, "pp send"), (DATA_PARALLEL, "dp collectives")]
        {
            events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                "args": {"name": name}}));
            events.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                "args": {"sort_index": tid}}));
        }
    }
    events
}

fn slice(
    pid: u32,
    tid: u32,
    name: String,
    cat: &str,
    start: Seconds,
    end: Seconds,
    args: Value,
) -> Value {
    json!({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
        "ts": micros(start), "dur": micros(end) - micros(start), "args": args})
}

fn events(simulation: &Simulation) -> Vec<Value> {
    let program = &simulation.program;
    let mut events = Vec::new();
    for s in &simulation.slices {
        let (pid, tid) = (s.rank, thread(s.lane));
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
                let args = json!({"microbatch": task.microbatch, "chunk": chunk,
                    "position": task.position, "layers": info.layers, "flops": flops.value()});
                let cat = match task.kind {
                    TaskKind::Forward => "forward",
                    TaskKind::Backward | TaskKind::BackwardInput => "backward",
                    TaskKind::WeightGradient => "weight-gradient",
                };
                let mut start = s.start;
                let recomputes = matches!(task.kind, TaskKind::Backward | TaskKind::BackwardInput);
                if recomputes && info.recompute > Seconds::ZERO {
                    let end = (s.start + info.recompute).min(s.end);
                    let name = format!("recompute {task}");
                    events.push(slice(pid, tid, name, "recompute", s.start, end, args.clone()));
                    start = end;
                }
                events.push(slice(pid, tid, task.to_string(), cat, start, s.end, args));
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
                            json!({"microbatch": task.microbatch, "position": task.position});
                        events.push(slice(pid, tid, name.into(), cat, from, to, args));
                    }
                }
            }
            SliceKind::Send(task) => {
                let args = json!({"microbatch": task.microbatch, "position": task.position,
                    "bytes": simulation.transfer_bytes.value()});
                let name = format!("send {task}");
                events.push(slice(pid, tid, name, "pp-send", s.start, s.end, args));
            }
            SliceKind::ParamGather { position } => {
                let bytes = simulation.positions[position as usize].params * 2.0;
                let args = json!({"position": position, "bytes": bytes});
                let name = format!("param all-gather {position}");
                events.push(slice(pid, tid, name, "dp-all-gather", s.start, s.end, args));
            }
            SliceKind::GradientReduce { position } => {
                let bytes = simulation.positions[position as usize].params
                    * simulation.gradient_bytes_per_param;
                let args = json!({"position": position, "bytes": bytes});
                let name = format!("grad reduce {position}");
                events.push(slice(pid, tid, name, "dp-reduce", s.start, s.end, args));
            }
            SliceKind::Optimizer => {
                events.push(slice(
                    pid,
                    tid,
                    "optimizer".into(),
                    "optimizer",
                    s.start,
                    s.end,
                    json!({}),
                ));
            }
        }
    }
    for sample in &simulation.memory {
        events.push(json!({"ph": "C", "name": "memory", "pid": sample.rank, "tid": 0,
            "ts": micros(sample.time), "args": {"GiB": sample.bytes.as_gib()}}));
    }
    events
}

/// The trace as JSON text. `label` names the run (model, plan) in every process's labels.
pub fn chrome_trace(simulation: &Simulation, label: &str) -> String {
    let mut all = metadata(simulation, label);
    all.extend(events(simulation));
    let document = json!({
        "traceEvents": all,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "meshplan simulate",
            "run": label,
            "symmetry": "each process is one pipeline stage and stands for all of its tensor-, context- and data-parallel ranks",
            "step_time_s": simulation.step_time().value(),
        },
    });
    document.to_string()
}

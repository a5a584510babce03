//! `meshplan simulate`: simulate one training step under the plan's pipeline schedule and print
//! its time, bubble, exposed communication and each stage's memory; `--trace FILE` also writes the
//! step as a Chrome trace for Perfetto.

use crate::report::{PlanView, Report};
use crate::sim::{Simulation, trace};
use anyhow::Context as _;
use serde::Serialize;

use super::args::{Format, SimulateArgs};
use super::inputs::{self, Inputs};
use super::{CliError, render, whole_run, write_atomically};
use crate::violation::Collector;

/// Builds the run, simulates it, writes the trace if asked and renders the result.
pub fn run(args: &SimulateArgs) -> Result<String, CliError> {
    // Every problem of the run and of the whole-run flags at once.
    let mut problems = Collector::default();
    let goodput = problems.take(args.whole.goodput());
    let inputs = problems.take(inputs::build_run_with(&args.run, args.recipe.recipe));
    if args.runs == 0 || args.runs > crate::limits::DRAWN_RUNS {
        problems.add(
            "runs",
            args.runs,
            format!("must be from 1 to {}", crate::limits::DRAWN_RUNS),
            "draw fewer runs; 1000 give a stable median and p90",
        );
    }
    let (inputs, goodput) = problems.finish_with(inputs.zip(goodput), "run")?;
    let (estimate, simulation) = crate::estimate_simulated(&inputs.run)
        .context("cannot simulate the pipeline schedule")
        .map_err(CliError::Other)?;
    estimate.check_figures().map_err(|err| CliError::Other(err.into()))?;
    // The whole run is priced before any file is written: a run that cannot finish writes none.
    let outlook = whole_run::run_outlook(goodput.as_ref(), &inputs.run, simulation.step_time())?;
    let drawn = whole_run::drawn(outlook.as_ref(), args.runs, args.seed);
    if let Some(path) = &args.trace {
        let label = format!(
            "{} on {} GPUs, {}",
            inputs.run.model().display_name(),
            inputs.run.cluster().num_gpus(),
            inputs.run.plan().label()
        );
        write_atomically(path, "trace", &trace::chrome_trace(&simulation, &label))?;
    }
    if let Some(path) = &args.report {
        let mut facts = render::run_facts(&inputs.run);
        if inputs.example {
            facts.push(("Note".to_owned(), "the built-in example (no --model given)".to_owned()));
        }
        if let Some(note) = &inputs.recipe {
            facts.push(("Recipe".to_owned(), note.clone()));
        }
        let plan = inputs.run.plan();
        let label = format!("{}, schedule {}", plan.label(), plan.schedule().name());
        let view = PlanView::new(label, &estimate, &simulation).with_data(&inputs.run);
        let mut report = Report::simulated(&report_title(&inputs), facts, view);
        if let Some(outlook) = &outlook {
            let drawn = crate::goodput::draw_run(outlook, args.seed);
            report = report.with_whole_run(outlook.clone(), drawn);
        }
        let html =
            report.to_html().context("cannot make the HTML report").map_err(CliError::Other)?;
        write_atomically(path, "report", &html)?;
    }
    match args.format {
        Format::Text => {
            let mut out = render::run_header(&inputs);
            out.push_str(&text(&inputs, &simulation));
            let throughput = &estimate.throughput;
            out.push_str(&format!(
                "\nStep time {:.3} s, {:.1} tokens/s per GPU, MFU {:.1} %\n",
                throughput.step_time.value(),
                throughput.tokens_per_sec_per_gpu,
                throughput.mfu_pct
            ));
            if let Some(outlook) = &outlook {
                out.push_str(&whole_run::text(outlook, drawn.as_ref()));
                if drawn.is_none() {
                    out.push_str(&format!(
                        "No runs drawn: {:.3e} failures a run is more than the {:.0e} meshplan draws\n",
                        outlook.failures,
                        crate::limits::DRAWN_FAILURES
                    ));
                }
            }
            if let Some(path) = &args.trace {
                out.push_str(&format!(
                    "Trace written to {} (open it in Perfetto)\n",
                    path.display()
                ));
            }
            if let Some(path) = &args.report {
                out.push_str(&format!(
                    "Report written to {} (open it in a browser)\n",
                    path.display()
                ));
            }
            Ok(out)
        }
        Format::Json => {
            let whole = outlook
                .as_ref()
                .zip(goodput.as_ref())
                .map(|(o, g)| whole_run::json(o, g, drawn.as_ref()));
            json(&inputs, &simulation, whole)
                .context("cannot serialize the simulation as JSON")
                .map_err(CliError::Other)
        }
    }
}

fn report_title(inputs: &Inputs) -> String {
    format!(
        "meshplan simulate: {} on {} GPUs",
        inputs.run.model().display_name(),
        inputs.run.cluster().num_gpus()
    )
}

fn text(inputs: &Inputs, simulation: &Simulation) -> String {
    let plan = inputs.run.plan();
    let program = &simulation.program;
    let mut out = format!(
        "\nSimulated step: schedule {}, {} micro-batches through {} virtual stages on {} pipeline ranks\n",
        plan.schedule().name(),
        program.microbatches,
        program.positions,
        program.ranks
    );
    out.push_str(&format!("\n{}\n", render::time_table("Step time (simulated)", &simulation.time)));
    let mut stages =
        render::table(&["Stage", "step end ms", "bubble ms", "peak in-flight", "peak memory GiB"]);
    for rank in &simulation.ranks {
        stages.add_row([
            rank.rank.to_string(),
            format!("{:.1}", rank.end.as_millis()),
            format!("{:.1}", rank.bubble.as_millis()),
            rank.peak_in_flight.to_string(),
            format!("{:.2}", rank.peak_memory.total().as_gib()),
        ]);
    }
    render::align_numbers(&mut stages, 1);
    out.push_str(&format!("\n{stages}\n"));
    out
}

#[derive(Serialize)]
struct StageJson {
    stage: u32,
    end_s: f64,
    bubble_s: f64,
    peak_in_flight: u32,
    peak_memory_gib: f64,
}

#[derive(Serialize)]
struct SimulationJson<'a> {
    model: &'a str,
    plan: String,
    /// The software stack that priced the run.
    stack: &'a str,
    /// With `--recipe`: what the stack's recipe set.
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe: Option<&'a str>,
    /// Without `--recipe`: the recipe the stack has for the run, which `--recipe` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    recipe_available: Option<&'a str>,
    schedule: &'static str,
    microbatches: u32,
    step_time_s: f64,
    /// Seconds per part, summing to `step_time_s`.
    breakdown_s: crate::estimate::TimeBreakdown,
    stages: Vec<StageJson>,
    /// The whole run, when a training length was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    whole_run: Option<whole_run::WholeRunJson>,
}

fn json(
    inputs: &Inputs,
    simulation: &Simulation,
    whole_run: Option<whole_run::WholeRunJson>,
) -> serde_json::Result<String> {
    let plan = inputs.run.plan();
    let report = SimulationJson {
        model: inputs.run.model().name(),
        plan: plan.label(),
        stack: inputs.run.stack().id(),
        recipe: inputs.recipe.as_deref(),
        recipe_available: inputs.recipe_available.as_deref(),
        schedule: plan.schedule().name(),
        microbatches: simulation.program.microbatches,
        step_time_s: simulation.step_time().value(),
        breakdown_s: simulation.time,
        stages: simulation
            .ranks
            .iter()
            .map(|rank| StageJson {
                stage: rank.rank,
                end_s: rank.end.value(),
                bubble_s: rank.bubble.value(),
                peak_in_flight: rank.peak_in_flight,
                peak_memory_gib: rank.peak_memory.total().as_gib(),
            })
            .collect(),
        whole_run,
    };
    serde_json::to_string_pretty(&report)
}

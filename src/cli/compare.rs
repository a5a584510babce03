//! `meshplan compare`: two or more plan files side by side — each one's simulated memory, step
//! time and throughput, and every option whose value differs between them.

use anyhow::Context as _;
use serde::Serialize;

use crate::Estimate;
use crate::plan::{PlanSpec, TrainingSpec};
use crate::plan_diff::{Difference, differences};
use crate::report::{ComparisonView, Report};
use crate::violation::{Violation, Violations};

use super::args::{CompareArgs, Format, RunArgs};
use super::inputs::{self, Inputs};
use super::render;
use super::{CliError, write_atomically};

/// One plan file, validated and priced.
struct Compared {
    /// The file as given.
    file: String,
    inputs: Inputs,
    estimate: Estimate,
}

/// Reads, validates and prices every plan file, reporting the problems of all of them at once.
fn price(args: &CompareArgs) -> Result<Vec<Compared>, CliError> {
    if args.plans.len() < 2 {
        let given = args.plans.first().map_or("(none)".to_owned(), |p| p.display().to_string());
        return Err(CliError::Input(Violations::one(Violation::new(
            "plan",
            given,
            format!("compare needs at least two plans, {} given", args.plans.len()),
            "give one --plan FILE.toml per plan, e.g. `meshplan compare --plan a.toml --plan \
             b.toml`; write plan files with `estimate --save-plan` or `search --save-plan`",
        ))));
    }
    let mut problems: Option<Violations> = None;
    let mut built = Vec::new();
    for path in &args.plans {
        let file = path.display().to_string();
        let run_args = RunArgs { plan: Some(path.clone()), ..RunArgs::default() };
        match inputs::build_run(&run_args) {
            Ok(inputs) => built.push((file, inputs)),
            Err(found) => {
                // Name the file in every problem: the same key may be wrong in one file only.
                let named = found.list().iter().map(|v| {
                    let message = if v.message.contains(&file) {
                        v.message.clone()
                    } else {
                        format!("{file}: {}", v.message)
                    };
                    Violation::new(&v.field, &v.value, message, &v.hint)
                });
                let named = Violations::check(named.collect()).err();
                match (&mut problems, named) {
                    (Some(all), Some(more)) => all.extend(more),
                    (None, more) => problems = more,
                    (Some(_), None) => {}
                }
            }
        }
    }
    if let Some(problems) = problems {
        return Err(CliError::Input(problems));
    }
    let options = crate::sim::SimOptions { timeline: false };
    built
        .into_iter()
        .map(|(file, inputs)| {
            let (estimate, _) = crate::estimate::estimate_simulated_with(&inputs.run, options)
                .with_context(|| format!("cannot simulate the pipeline schedule of {file}"))
                .map_err(CliError::Other)?;
            estimate
                .check_figures()
                .with_context(|| format!("the plan of {file}"))
                .map_err(CliError::Other)?;
            Ok(Compared { file, inputs, estimate })
        })
        .collect()
}

/// Runs the comparison and renders it.
pub fn run(args: &CompareArgs) -> Result<String, CliError> {
    let plans = price(args)?;
    let resolved: Vec<crate::RunSpec> = plans
        .iter()
        .map(|p| crate::plan_file::resolved_spec(&p.inputs.spec, &p.inputs.run))
        .collect();
    let found = differences(&resolved.iter().collect::<Vec<_>>());
    if let Some(path) = &args.report {
        let view = ComparisonView {
            columns: plans.iter().map(|p| p.file.clone()).collect(),
            rows: figures(&plans),
            differences: found.iter().map(|d| (d.key.clone(), cells(d))).collect(),
            plans: plans
                .iter()
                .map(|p| (p.inputs.run.plan().label(), p.estimate.clone()))
                .collect(),
        };
        let title = format!("meshplan compare: {} plans", plans.len());
        let html = Report::comparison(&title, view)
            .to_html()
            .context("cannot make the HTML report")
            .map_err(CliError::Other)?;
        write_atomically(path, "report", &html)?;
    }
    match args.format {
        Format::Text => {
            let mut out = text(&plans, &found);
            if let Some(path) = &args.report {
                out.push_str(&format!(
                    "\nReport written to {} (open it in a browser)\n",
                    path.display()
                ));
            }
            Ok(out)
        }
        Format::Json => json(&plans, &resolved, &found)
            .context("cannot serialize the comparison as JSON")
            .map_err(CliError::Other),
    }
}

/// A difference's values as table cells, `-` where an option is not set.
fn cells(difference: &Difference) -> Vec<String> {
    difference.values.iter().map(|v| v.clone().unwrap_or_else(|| "-".to_owned())).collect()
}

/// Every figure of every plan as (name, one value per plan): the run, each memory part, each time
/// part, step time, throughput, peak and whether it fits. Text and report show the same rows.
fn figures(plans: &[Compared]) -> Vec<(String, Vec<String>)> {
    let row = |name: &str, value: &dyn Fn(&Compared) -> String| {
        (name.to_owned(), plans.iter().map(value).collect::<Vec<_>>())
    };
    let mut rows = vec![
        row("model", &|p| p.inputs.run.model().display_name().to_owned()),
        row("GPUs", &|p| {
            let cluster = p.inputs.run.cluster();
            format!("{} x {}", cluster.num_gpus(), cluster.gpu().display_name())
        }),
        row("plan", &|p| p.inputs.run.plan().label()),
        row("micro-batch, schedule", &|p| {
            let (training, plan) = (p.inputs.run.training(), p.inputs.run.plan());
            format!("mbs{} {}", training.micro_batch(), plan.schedule().name())
        }),
        row("sharding, recompute", &|p| p.inputs.run.plan().memory_label()),
    ];
    for index in 0..10 {
        let name = render::memory_parts(&plans[0].estimate.peak_memory.breakdown)[index].0;
        rows.push(row(&format!("{name} GiB"), &|p| {
            format!("{:.2}", render::memory_parts(&p.estimate.peak_memory.breakdown)[index].1)
        }));
    }
    rows.push(row("peak GiB (stage)", &|p| {
        let peak = &p.estimate.peak_memory;
        format!("{:.2} ({})", peak.breakdown.total().as_gib(), peak.stage)
    }));
    rows.push(row("fits", &|p| {
        let over = p.estimate.peak_memory.breakdown.fit_need().as_gib()
            - p.estimate.memory_capacity.as_gib();
        if p.estimate.fits() {
            format!("yes ({:.2} GiB free)", -over)
        } else {
            format!("NO ({over:.2} GiB over)")
        }
    }));
    for index in 0..10 {
        let name = plans[0].estimate.time.parts()[index].0;
        rows.push(row(&format!("{name} ms"), &|p| {
            format!("{:.1}", p.estimate.time.parts()[index].1.value() * 1e3)
        }));
    }
    rows.push(row("step time s", &|p| format!("{:.3}", p.estimate.time.step_time().value())));
    rows.push(row("tokens/s/GPU", &|p| {
        format!("{:.1}", p.estimate.throughput.tokens_per_sec_per_gpu)
    }));
    rows.push(row("MFU %", &|p| format!("{:.1}", p.estimate.throughput.mfu_pct)));
    rows
}

fn text(plans: &[Compared], found: &[Difference]) -> String {
    let mut header = vec!["".to_owned()];
    header.extend(plans.iter().map(|p| p.file.clone()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut table = render::table(&header);
    for (name, values) in figures(plans) {
        table.add_row(std::iter::once(name).chain(values));
    }
    render::align_numbers(&mut table, 1);
    let mut out = format!("Comparing {} plans (simulated step time)\n\n{table}\n\n", plans.len());
    if found.is_empty() {
        out.push_str("What differs: nothing; the plans set every option alike.\n");
        return out;
    }
    let mut header = header;
    header[0] = "what differs";
    let mut differs = render::table(&header);
    for difference in found {
        differs.add_row(std::iter::once(difference.key.clone()).chain(cells(difference)));
    }
    out.push_str(&format!("{differs}\n"));
    out
}

#[derive(Serialize)]
struct PlanJson<'a> {
    file: &'a str,
    label: String,
    model: &'a str,
    gpu: &'a str,
    num_gpus: u64,
    training: &'a TrainingSpec,
    plan: &'a PlanSpec,
    memory: render::MemoryJson,
    time: TimeJson,
    throughput: render::ThroughputJson,
}

#[derive(Serialize)]
struct TimeJson {
    step_time_s: f64,
    breakdown_s: crate::estimate::TimeBreakdown,
}

#[derive(Serialize)]
struct DifferenceJson<'a> {
    key: &'a str,
    values: &'a [Option<String>],
}

#[derive(Serialize)]
struct CompareJson<'a> {
    plans: Vec<PlanJson<'a>>,
    differences: Vec<DifferenceJson<'a>>,
}

fn json(
    plans: &[Compared],
    resolved: &[crate::RunSpec],
    found: &[Difference],
) -> serde_json::Result<String> {
    let plans = plans
        .iter()
        .zip(resolved)
        .map(|(p, spec)| {
            let (run, e) = (&p.inputs.run, &p.estimate);
            PlanJson {
                file: &p.file,
                label: run.plan().label(),
                model: run.model().name(),
                gpu: run.cluster().gpu().name(),
                num_gpus: run.cluster().num_gpus(),
                training: &spec.training,
                plan: &spec.plan,
                memory: render::MemoryJson::from(e),
                time: TimeJson { step_time_s: e.time.step_time().value(), breakdown_s: e.time },
                throughput: render::ThroughputJson::from(e),
            }
        })
        .collect();
    let differences =
        found.iter().map(|d| DifferenceJson { key: &d.key, values: &d.values }).collect();
    serde_json::to_string_pretty(&CompareJson { plans, differences })
}

//! `meshplan search`: the best plans for a model, cluster, batch and precision, with the rejected
//! candidates counted by reason, and optionally the best plan exported for an engine.

use anyhow::Context as _;
use std::path::Path;

use crate::export::{Engine, export};
use crate::plan_file;
use crate::report::Report;
use crate::search::{
    Constraints, RankedPlan, Rejection, RejectionKind, SearchError, SearchReport, SearchSpec,
    search,
};
use crate::violation::{Collector, Violation, Violations};
use serde::Serialize;

use super::args::{Format, Objective, SearchArgs};
use super::{CliError, Progress, inputs, render, whole_run, write_atomically};

/// The engine a search is for: none with `--any-engine`, else `--engine`, else the one
/// `--export-to` names, else Megatron-LM. Two different engines, or an engine beside
/// `--any-engine`, are a contradiction, refused naming both.
fn engine_of(
    pinned: Option<Engine>,
    export_to: Option<Engine>,
    any_engine: bool,
) -> Result<Option<Engine>, Violations> {
    match (pinned, export_to) {
        (Some(engine), _) | (None, Some(engine)) if any_engine => {
            Err(Violations::one(Violation::new(
                "any_engine",
                "true",
                format!("searches for no engine, but {} is named", engine.name()),
                "drop --any-engine, or drop --engine / --export-to (and a plan file's engine)",
            )))
        }
        (Some(pinned), Some(target)) if pinned != target => Err(Violations::one(Violation::new(
            "export_to",
            target.name(),
            format!("differs from --engine {}", pinned.name()),
            "--export-to implies --engine: give one of the two, or the same engine to both",
        ))),
        (Some(engine), _) | (None, Some(engine)) => Ok(Some(engine)),
        (None, None) if any_engine => Ok(None),
        (None, None) => Ok(Some(Engine::DEFAULT)),
    }
}

/// A count flag of the search (`--max-tp`, `--top`): one that is not positive is a problem
/// naming the flag, not a search run without it.
fn search_count(
    problems: &mut Collector,
    field: &str,
    value: Option<i64>,
    hint: &str,
) -> Option<u64> {
    match value {
        Some(v) if v > 0 => Some(v as u64),
        Some(v) => {
            problems.add(field, v, "must be a positive whole number", hint);
            None
        }
        None => None,
    }
}

/// Runs the search and renders its report.
pub fn run(args: &SearchArgs) -> Result<String, CliError> {
    // The search's own flags and the run's are checked together, every problem at once.
    let mut problems = Collector::default();
    let limit = "the largest size the search tries, e.g. 8";
    let max_tp = search_count(&mut problems, "search.max_tp", args.max_tp, limit);
    let max_pp = search_count(&mut problems, "search.max_pp", args.max_pp, limit);
    let max_cp = search_count(&mut problems, "search.max_cp", args.max_cp, limit);
    let top = search_count(&mut problems, "search.top", Some(args.top), "how many plans, e.g. 5");
    let goodput = problems.take(args.whole.goodput()).flatten();
    let max_gpus = search_count(
        &mut problems,
        "search.max_gpus",
        args.max_gpus,
        "the most GPUs to try, e.g. 16384",
    );
    if let Some(max) = max_gpus
        && max > crate::limits::GPUS
    {
        problems.add(
            "search.max_gpus",
            max,
            format!("is more than the {} GPUs meshplan prices", crate::limits::GPUS),
            "give a count up to 1048576",
        );
    }
    if args.objective != Objective::StepTime && goodput.is_none() {
        problems.add(
            "search.objective",
            format!("{:?}", args.objective),
            "needs a training length to price the whole run",
            "give --train-tokens (or --train-steps), or use --objective step-time",
        );
    }
    let flags_accepted = problems.is_empty();
    let base = problems.take(inputs::build_run_spec(&args.run));
    let pinned = base.as_ref().and_then(|b| b.plan.engine);
    let engine = problems.take(engine_of(pinned, args.export_to, args.any_engine));
    let (Some(base), Some(engine)) = (base, engine) else {
        return Err(CliError::Input(problems.finish().expect_err("a problem was recorded")));
    };
    let constraints = Constraints {
        max_tp,
        max_pp,
        max_cp,
        micro_batch: base
            .training
            .micro_batch
            .filter(|_| args.run.micro_batch.is_some())
            .map(|m| m.max(0) as u64),
        extra_micro_batch: None,
    };
    let spec = SearchSpec {
        base,
        constraints,
        memory_headroom: args.memory_headroom,
        engine,
        top: top.map_or(1, |top| usize::try_from(top).unwrap_or(usize::MAX)),
    };
    if !flags_accepted {
        // The run's and the other search settings' problems beside the flags' own.
        if let Err(more) = crate::search::check_spec(&spec) {
            problems.take::<()>(Err(more));
        }
        return Err(CliError::Input(problems.finish().expect_err("a flag was refused")));
    }
    let counts = gpu_counts(spec.base.cluster.num_gpus, max_gpus)?;
    let mut tried = Vec::with_capacity(counts.len());
    for gpus in counts {
        let mut spec = spec.clone();
        spec.base.cluster.num_gpus = gpus;
        let report = search_once(&spec)?;
        let outlooks = report
            .plans
            .iter()
            .map(|plan| {
                whole_run::run_outlook(goodput.as_ref(), &plan.run, plan.estimate.time.step_time())
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        tried.push(Tried { spec, report, outlooks });
    }
    let winner = winner(&tried, args.objective);
    let ranked_counts = (tried.len() > 1).then(|| counts_table(&tried, winner, args.objective));
    let counts_json: Vec<CountJson> =
        if tried.len() > 1 { tried.iter().map(CountJson::of).collect() } else { Vec::new() };
    let Tried { spec, report, outlooks } = tried.swap_remove(winner);
    // Every output is made before any is written, so a failure leaves no file behind.
    let mut files = Vec::new();
    if let Some(path) = &args.report {
        files.push((path, "report", html_report(&spec, &report, engine)?));
    }
    if let Some(path) = &args.save_plan {
        let best = report.plans.first().ok_or_else(|| no_plan("save_plan", path))?;
        let file = plan_file::to_toml(&plan_file::resolved_spec(&spec.base, &best.run))
            .context("cannot write the best plan")
            .map_err(CliError::Other)?;
        files.push((path, "save_plan", file));
    }
    let mut exported = None;
    if let Some(target) = args.export_to {
        let Some(best) = report.plans.first() else {
            return Err(no_plan("export_to", args.output.as_deref().unwrap_or(Path::new("-"))));
        };
        let text = export(target, &best.run)
            .context("cannot export the best plan")
            .map_err(CliError::Other)?;
        match &args.output {
            Some(path) => files.push((path, "output", text)),
            None => exported = Some(text),
        }
    }
    for (path, field, text) in files {
        write_atomically(path, field, &text)?;
    }
    if let Some(text) = exported {
        return Ok(text);
    }
    match args.format {
        Format::Text => {
            let mut out = ranked_counts.unwrap_or_default();
            out.push_str(&text(&report, engine));
            out.push_str(&whole_run::ranked_text(&outlooks));
            if let Some(path) = &args.report {
                out.push_str(&format!(
                    "\nReport written to {} (open it in a browser)\n",
                    path.display()
                ));
            }
            Ok(out)
        }
        Format::Json => json(&report, engine, &outlooks, goodput.as_ref(), counts_json)
            .context("cannot serialize the search report")
            .map_err(CliError::Other),
    }
}

/// One GPU count's search.
struct Tried {
    spec: SearchSpec,
    report: SearchReport,
    outlooks: Vec<crate::goodput::RunOutlook>,
}

impl Tried {
    /// What `objective` scores this count's best plan at (lower is better); `None` when no plan
    /// fits.
    fn score(&self, objective: Objective) -> Option<f64> {
        let best = self.report.plans.first()?;
        let outlook = self.outlooks.first();
        Some(match objective {
            Objective::StepTime => best.estimate.time.step_time().value(),
            Objective::TimeToTrain => outlook?.wall.value(),
            Objective::Cost => outlook.map(|o| o.cost.unwrap_or(o.gpu_hours))?,
        })
    }
}

/// The GPU counts a search tries: `gpus` alone, or doubled while at most `max`, and `max`.
fn gpu_counts(gpus: i64, max: Option<u64>) -> Result<Vec<i64>, CliError> {
    let Some(max) = max else { return Ok(vec![gpus]) };
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    if max < gpus || gpus <= 0 {
        return Err(CliError::Input(Violations::one(Violation::new(
            "search.max_gpus",
            max,
            format!("is fewer than --gpus {gpus}"),
            "give a count at least --gpus, the smallest count to try",
        ))));
    }
    let mut counts = vec![gpus];
    while let Some(next) = counts.last().and_then(|c| c.checked_mul(2)).filter(|n| *n <= max) {
        counts.push(next);
    }
    if counts.last() != Some(&max) {
        counts.push(max);
    }
    Ok(counts)
}

/// The count whose best plan scores lowest (the first of equals; the first count when none has
/// a plan).
fn winner(tried: &[Tried], objective: Objective) -> usize {
    let scored = tried.iter().enumerate().filter_map(|(i, t)| Some((i, t.score(objective)?)));
    scored
        .fold(None, |best: Option<(usize, f64)>, (i, score)| match best {
            Some((_, low)) if low <= score => best,
            _ => Some((i, score)),
        })
        .map_or(0, |(i, _)| i)
}

/// The GPU counts tried, each with its best plan and whole run, the winner marked.
fn counts_table(tried: &[Tried], winner: usize, objective: Objective) -> String {
    let mut rows = render::table(&[
        "GPUs",
        "best plan",
        "step s",
        "time to train",
        "ETTR %",
        "GPU-hours",
        "cost",
    ]);
    for (i, t) in tried.iter().enumerate() {
        let gpus = t.spec.base.cluster.num_gpus;
        let mark = if i == winner { " *" } else { "" };
        let Some(best) = t.report.plans.first() else {
            rows.add_row([format!("{gpus}{mark}"), "no plan fits".to_owned()]);
            continue;
        };
        let outlook = t.outlooks.first();
        let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
        rows.add_row([
            format!("{gpus}{mark}"),
            best.label(),
            format!("{:.3}", best.estimate.time.step_time().value()),
            or_dash(outlook.map(|o| format!("{:.1} days", o.wall.as_days()))),
            or_dash(outlook.map(|o| format!("{:.1}", 100.0 * o.ettr))),
            or_dash(outlook.map(|o| format!("{:.3}M", o.gpu_hours / 1e6))),
            or_dash(outlook.and_then(|o| o.cost).map(|c| format!("${:.2}M", c / 1e6))),
        ]);
    }
    render::align_numbers(&mut rows, 2);
    format!(
        "GPU counts tried (* the best by {}; the rest of the report is its search)\n{rows}\n\n",
        match objective {
            Objective::StepTime => "step time",
            Objective::TimeToTrain => "time to train",
            Objective::Cost => "cost",
        }
    )
}

/// A GPU count tried, as JSON.
#[derive(Serialize)]
struct CountJson {
    gpus: i64,
    best_plan: Option<String>,
    step_time_s: Option<f64>,
    time_to_train_s: Option<f64>,
    ettr: Option<f64>,
    gpu_hours: Option<f64>,
    cost_dollars: Option<f64>,
}

impl CountJson {
    fn of(t: &Tried) -> CountJson {
        let best = t.report.plans.first();
        let outlook = t.outlooks.first();
        CountJson {
            gpus: t.spec.base.cluster.num_gpus,
            best_plan: best.map(RankedPlan::label),
            step_time_s: best.map(|b| b.estimate.time.step_time().value()),
            time_to_train_s: outlook.map(|o| o.wall.value()),
            ettr: outlook.map(|o| o.ettr),
            gpu_hours: outlook.map(|o| o.gpu_hours),
            cost_dollars: outlook.and_then(|o| o.cost),
        }
    }
}

/// One search, with its progress bar and timing on a terminal.
fn search_once(spec: &SearchSpec) -> Result<SearchReport, CliError> {
    let progress = Progress::on_terminal("pricing", "candidates");
    let started = std::time::Instant::now();
    let report =
        search(spec, &|done, total| progress.update(done, total)).map_err(|err| match err {
            SearchError::Input(violations) => CliError::Input(violations),
            other => CliError::Other(anyhow::Error::new(other)),
        })?;
    for plan in &report.plans {
        plan.estimate.check_figures().map_err(|err| CliError::Other(err.into()))?;
    }
    if progress.finish() {
        // Timing goes to the terminal only: the report itself is the same on every run.
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!(
            "searched {} candidates on {} GPUs in {elapsed:.2} s ({:.0} candidates/s)",
            report.considered,
            spec.base.cluster.num_gpus,
            report.considered as f64 / elapsed.max(1e-9)
        );
    }
    Ok(report)
}

/// The error of a command that needs a best plan when no plan fits: nothing is written.
fn no_plan(field: &str, path: &Path) -> CliError {
    CliError::Input(Violations::one(Violation::new(
        field,
        path.display().to_string(),
        "no plan fits, so there is no best plan to write",
        "see the rejections (run without --export-to / --save-plan), relax the pins, or add GPUs",
    )))
}

/// The HTML report: the best plan's charts, every fitting candidate and the rejections.
fn html_report(
    spec: &SearchSpec,
    report: &SearchReport,
    engine: Option<Engine>,
) -> Result<String, CliError> {
    let base = &spec.base;
    let mut facts = match report.plans.first() {
        Some(best) => render::run_facts(&best.run),
        None => vec![
            (
                "Model".to_owned(),
                base.model.display_name.clone().unwrap_or(base.model.name.clone()),
            ),
            (
                "GPUs".to_owned(),
                format!(
                    "{} x {}",
                    base.cluster.num_gpus,
                    base.cluster.gpu.display_name.clone().unwrap_or(base.cluster.gpu.name.clone())
                ),
            ),
            (
                "Training".to_owned(),
                format!(
                    "seq {}, global batch {}",
                    base.training.seq_len, base.training.global_batch
                ),
            ),
        ],
    };
    facts.push((
        "Search".to_owned(),
        format!(
            "plans {} can run, {:.0} % of memory kept free; {} candidates, {} rejected",
            engine.map_or("any engine", Engine::name),
            spec.memory_headroom * 100.0,
            report.considered,
            report.rejections.total()
        ),
    ));
    // The first row names the model either way.
    let title = format!("meshplan search: {} on {} GPUs", facts[0].1, base.cluster.num_gpus);
    let best = report.plans.first().map(RankedPlan::label).unwrap_or_default();
    Report::search(&title, facts, spec, report, best)
        .and_then(|report| report.to_html())
        .context("cannot make the HTML report")
        .map_err(CliError::Other)
}

/// The equivalents of an entry, each as the flags that turn the entry's plan into it.
fn also(plan: &RankedPlan) -> Vec<String> {
    plan.equivalent_flags().iter().map(|flags| flags.join(" ")).collect()
}

fn text(report: &SearchReport, engine: Option<Engine>) -> String {
    let mut out = String::new();
    let target = engine.map_or("any engine".to_owned(), |e| e.name().to_owned());
    out.push_str(&format!(
        "Searched {} candidates for {target}: {} priced, {} simulated, {} pruned by bound, {} rejected\n",
        report.considered,
        report.priced,
        report.simulated,
        report.pruned,
        report.rejections.total(),
    ));
    let mut stacks: Vec<&str> = report.plans.iter().map(|plan| plan.run.stack().id()).collect();
    stacks.sort_unstable();
    stacks.dedup();
    if !stacks.is_empty() {
        out.push_str(&format!("Software: {}\n", stacks.join(", ")));
    }
    out.push('\n');
    let mut table = render::table(&[
        "#",
        "plan",
        "step s",
        "tokens/s/GPU",
        "MFU %",
        "peak GiB",
        "largest overhead",
    ]);
    for (rank, plan) in report.plans.iter().enumerate() {
        let e = &plan.estimate;
        let mut label = plan.label();
        let alternatives = also(plan);
        if !alternatives.is_empty() {
            label.push_str(&format!("\n  also: {}", alternatives.join("; ")));
        }
        table.add_row([
            (rank + 1).to_string(),
            label,
            format!("{:.3}", e.time.step_time().value()),
            format!("{:.1}", e.throughput.tokens_per_sec_per_gpu),
            format!("{:.1}", e.throughput.mfu_pct),
            format!("{:.1}", e.peak_memory.breakdown.total().as_gib()),
            plan.dominant_overhead().to_owned(),
        ]);
    }
    render::align_numbers(&mut table, 2);
    if report.considered == 0 {
        out.push_str(
            "The space is empty: no tp x cp x pp x dp factorization of the GPUs fits the heads, the \
             global batch and the pinned choices (check --gpus, --global-batch and the plan flags).\n",
        );
    } else if let Some(why) = report.model_refused() {
        out.push_str(&format!("{why}\n"));
    } else if report.plans.is_empty() {
        out.push_str("No plan fits: see the rejections below.\n");
    } else {
        out.push_str(&format!("{table}\n"));
    }
    let mut rejected = render::table(&["rejected because", "candidates", "example"]);
    for (kind, (count, example)) in &report.rejections.counts {
        rejected.add_row([kind.name().to_owned(), count.to_string(), example.to_string()]);
    }
    out.push_str(&format!("\n{rejected}\n"));
    out
}

#[derive(Serialize)]
struct RankedJson {
    rank: usize,
    /// The compact description of the text table.
    description: String,
    /// Every plan option under its plan-file key.
    plan: render::PlanJson,
    micro_batch: u64,
    step_time_s: f64,
    closed_form_step_time_s: f64,
    tokens_per_sec_per_gpu: f64,
    mfu_pct: f64,
    peak_memory_gib: f64,
    largest_overhead: &'static str,
    /// Plans with the same step time and peak memory, as the flags that turn this one into each.
    equivalents: Vec<String>,
}

#[derive(Serialize)]
struct RejectionJson {
    reason: &'static str,
    candidates: usize,
    /// The first rejected candidate of this kind, in words.
    example: String,
    /// Its figures: the rule's field, or the memory needed and available.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    needed_gib: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    available_gib: Option<f64>,
}

impl RejectionJson {
    fn of(kind: RejectionKind, count: usize, example: &Rejection) -> RejectionJson {
        let (field, memory) = match example {
            Rejection::BreaksARule(violation) => (Some(violation.field.clone()), None),
            Rejection::DoesNotFit(over) => (None, Some((over.needed, over.available))),
            Rejection::UnsupportedByEngine(_) | Rejection::OffloadNotNeeded(_) => (None, None),
        };
        RejectionJson {
            reason: kind.name(),
            candidates: count,
            example: example.to_string(),
            field,
            needed_gib: memory.map(|(needed, _)| needed.as_gib()),
            available_gib: memory.map(|(_, available)| available.as_gib()),
        }
    }
}

#[derive(Serialize)]
struct SearchJson {
    engine: Option<&'static str>,
    considered: usize,
    priced: usize,
    simulated: usize,
    pruned: usize,
    rejected: Vec<RejectionJson>,
    plans: Vec<RankedJson>,
    /// The whole run of each plan, in the plans' order, when a training length was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    whole_runs: Vec<whole_run::WholeRunJson>,
    /// Each GPU count tried with --max-gpus: its best plan and whole run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gpu_counts: Vec<CountJson>,
}

fn json(
    report: &SearchReport,
    engine: Option<Engine>,
    outlooks: &[crate::goodput::RunOutlook],
    goodput: Option<&crate::goodput::Goodput>,
    gpu_counts: Vec<CountJson>,
) -> serde_json::Result<String> {
    let plans = report
        .plans
        .iter()
        .enumerate()
        .map(|(rank, plan)| {
            let e = &plan.estimate;
            RankedJson {
                rank: rank + 1,
                description: plan.label(),
                plan: render::PlanJson::of(&plan.run),
                micro_batch: plan.run.training().micro_batch(),
                step_time_s: e.time.step_time().value(),
                closed_form_step_time_s: plan.closed_form.value(),
                tokens_per_sec_per_gpu: e.throughput.tokens_per_sec_per_gpu,
                mfu_pct: e.throughput.mfu_pct,
                peak_memory_gib: e.peak_memory.breakdown.total().as_gib(),
                largest_overhead: plan.dominant_overhead(),
                equivalents: also(plan),
            }
        })
        .collect();
    let rejected = report
        .rejections
        .counts
        .iter()
        .map(|(kind, (count, example))| RejectionJson::of(*kind, *count, example))
        .collect();
    serde_json::to_string_pretty(&SearchJson {
        engine: engine.map(Engine::name),
        considered: report.considered,
        priced: report.priced,
        simulated: report.simulated,
        pruned: report.pruned,
        rejected,
        plans,
        whole_runs: goodput
            .map(|g| outlooks.iter().map(|o| whole_run::json(o, g, None)).collect())
            .unwrap_or_default(),
        gpu_counts,
    })
}

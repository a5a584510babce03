//! `meshplan validate`: predict every row of a calibration CSV and compare with what was measured.

use std::path::Path;

use crate::violation::{Violation, Violations};
use anyhow::Context as _;

use super::args::{Format, ValidateArgs};
use super::{CliError, Progress};
use super::{accuracy, render};

/// Reads the CSV, validates every row and renders the report.
pub fn run(args: &ValidateArgs) -> Result<String, CliError> {
    let text = read_csv(&args.file)?;
    if args.search {
        return compare(args, &text);
    }
    let report = crate::validate::validate_csv(&text).map_err(|err| malformed(&args.file, err))?;
    let rendered = match args.format {
        Format::Text => {
            accuracy::accuracy_text(&report)
                + "\n"
                + &render::validation_text(&report)
                + &over_capacity_text(&report)
        }
        Format::Json => render::validation_json(&report)
            .context("cannot serialize the validation report as JSON")
            .map_err(CliError::Other)?,
    };
    Ok(rendered)
}

/// Reads a calibration CSV, naming the path when it cannot.
pub(super) fn read_csv(file: &Path) -> Result<String, CliError> {
    super::inputs::read_bounded(file, MAX_CSV_BYTES).map_err(|message| {
        input(
            file.display().to_string(),
            message,
            "check the path; a calibration CSV of 550 rows is under 1 MiB",
        )
    })
}

/// The largest calibration CSV read, in bytes (64 MiB: tens of thousands of rows).
const MAX_CSV_BYTES: u64 = 64 << 20;

/// The error for a CSV that does not parse.
pub(super) fn malformed(file: &Path, err: crate::validate::ValidateError) -> CliError {
    let path = file.display();
    input(
        path.to_string(),
        format!("{path}: {err}"),
        "the file needs the header of data/calibration/runs.csv and one row per line",
    )
}

fn input(value: String, message: String, hint: &str) -> CliError {
    CliError::Input(Violations::one(Violation::new("file", value, message, hint)))
}

/// `validate --search`: the search's best plan against each published plan.
fn compare(args: &ValidateArgs, text: &str) -> Result<String, CliError> {
    let progress = Progress::on_terminal("searching", "cases");
    let summary = crate::validate::compare_search_csv(
        text,
        Some(args.engine.unwrap_or(crate::plan::Engine::DEFAULT)),
        &|done, total| progress.update(done, total),
    )
    .map_err(|err| malformed(&args.file, err))?;
    progress.finish();
    match args.format {
        Format::Json => serde_json::to_string_pretty(&summary)
            .context("cannot serialize the comparison as JSON")
            .map_err(CliError::Other),
        Format::Text => {
            let mut table = render::table(&[
                "rows",
                "model",
                "GPUs",
                "GPU",
                "published plan",
                "tok/s/GPU",
                "best plan found",
                "tok/s/GPU",
                "gain %",
            ]);
            for c in &summary.comparisons {
                let rows = if c.row_ids.len() > 3 {
                    format!("{} +{}", c.row_ids[..3].join(","), c.row_ids.len() - 3)
                } else {
                    c.row_ids.join(",")
                };
                let fits = if c.published_fits { "" } else { " (does not fit)" };
                table.add_row([
                    rows,
                    c.model.clone(),
                    c.num_gpus.to_string(),
                    c.gpu.clone(),
                    format!("{}{fits}", c.published_plan),
                    format!("{:.1}", c.published_tokens_per_sec_per_gpu),
                    c.best_plan.clone().unwrap_or_else(|| "none fits".into()),
                    c.best_tokens_per_sec_per_gpu.map_or("-".into(), |t| format!("{t:.1}")),
                    c.gain_pct.map_or("-".into(), |g| format!("{g:+.1}")),
                ]);
            }
            let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:+.1} %"));
            Ok(format!(
                "{table}\n\n{} cases: median predicted gain {}, largest {}; published plan faster in {} cases; {} published plans do not fit by meshplan's memory model\n",
                summary.cases,
                opt(summary.median_gain_pct),
                opt(summary.max_gain_pct),
                summary.published_wins,
                summary.published_does_not_fit,
            ))
        }
    }
}

/// The published runs predicted not to fit in GPU memory, one line each with what must fit, the
/// capacity, the largest part and the blank settings that decide memory: each is a modelling or
/// default error, since the run did fit.
fn over_capacity_text(report: &crate::validate::ValidationReport) -> String {
    use std::fmt::Write as _;
    let runs = &report.over_capacity;
    let mut out = format!(
        "\nPublished runs predicted not to fit in GPU memory: {} of {} predicted \
         (allocated tensors + CUDA context + NCCL buffers vs the GPU's memory)\n",
        runs.len(),
        report.summary.predicted
    );
    if runs.is_empty() {
        return out;
    }
    let mut table = render::table(&[
        "row",
        "model",
        "GPU",
        "plan",
        "need GiB",
        "capacity GiB",
        "over GiB",
        "largest part",
        "assumed",
    ]);
    for run in runs {
        table.add_row([
            run.row_id.clone(),
            run.model.clone(),
            run.gpu.clone(),
            run.plan.clone(),
            format!("{:.1}", run.need_gib),
            format!("{:.1}", run.capacity_gib),
            format!("{:.1}", run.over_gib),
            format!("{} {:.1} GiB", run.largest_part, run.largest_part_gib),
            run.memory_assumptions.join("; "),
        ]);
    }
    let _ = writeln!(out, "{table}");
    out
}

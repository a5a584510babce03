//! `meshplan validate`: predict every row of a calibration CSV and compare with what was measured.

use std::path::Path;

use anyhow::Context as _;
use meshplan::violation::{Violation, Violations};

use super::CliError;
use super::args::{Format, ValidateArgs};
use super::render;

/// Reads the CSV, validates every row and renders the report.
pub fn run(args: &ValidateArgs) -> Result<String, CliError> {
    let text = read_csv(&args.file)?;
    let report =
        meshplan::validate::validate_csv(&text).map_err(|err| malformed(&args.file, err))?;
    let rendered = match args.format {
        Format::Text => render::validation_text(&report),
        Format::Json => render::validation_json(&report)
            .context("cannot serialize the validation report as JSON")
            .map_err(CliError::Other)?,
    };
    Ok(rendered)
}

/// Reads a calibration CSV, naming the path when it cannot.
pub(super) fn read_csv(file: &Path) -> Result<String, CliError> {
    let path = file.display();
    std::fs::read_to_string(file).map_err(|err| {
        input(path.to_string(), format!("cannot read {path}: {err}"), "check the path")
    })
}

/// The error for a CSV that does not parse.
pub(super) fn malformed(file: &Path, err: meshplan::validate::ValidateError) -> CliError {
    let path = file.display();
    input(
        path.to_string(),
        format!("{path}: {err}"),
        "the file needs the header of shared/calibration/runs.csv and one row per line",
    )
}

fn input(value: String, message: String, hint: &str) -> CliError {
    CliError::Input(Violations::one(Violation::new("file", value, message, hint)))
}

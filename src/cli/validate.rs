//! `meshplan validate`: predict every row of a calibration CSV and compare with what was measured.

use anyhow::Context as _;
use meshplan::violation::{Violation, Violations};

use super::CliError;
use super::args::{Format, ValidateArgs};
use super::render;

/// Reads the CSV, validates every row and renders the report.
pub fn run(args: &ValidateArgs) -> Result<String, CliError> {
    let path = args.file.display();
    let text = std::fs::read_to_string(&args.file).map_err(|err| {
        input(
            path.to_string(),
            format!("cannot read {path}: {err}"),
            "check the path",
        )
    })?;
    let report = meshplan::validate::validate_csv(&text).map_err(|err| {
        input(
            path.to_string(),
            format!("{path}: {err}"),
            "the file needs the header of shared/calibration/runs.csv and one row per line",
        )
    })?;
    let rendered = match args.format {
        Format::Text => render::validation_text(&report),
        Format::Json => render::validation_json(&report)
            .context("cannot serialize the validation report as JSON")
            .map_err(CliError::Other)?,
    };
    Ok(rendered)
}

fn input(value: String, message: String, hint: &str) -> CliError {
    CliError::Input(Violations::one(Violation::new(
        "file", value, message, hint,
    )))
}

//! `meshplan calibrate`: fit each GPU's efficiency factor on a calibration CSV and report the
//! leave-one-source-out accuracy. It prints the factors; applying them to `presets/gpus/` is a
//! reviewed edit, never a side effect.

use anyhow::Context as _;

use super::CliError;
use super::args::{CalibrateArgs, Format};
use super::render;
use super::validate::{malformed, read_csv};

/// Reads the CSV, fits and cross-validates, and renders the report.
pub fn run(args: &CalibrateArgs) -> Result<String, CliError> {
    let text = read_csv(&args.file)?;
    let report =
        meshplan::validate::calibrate_csv(&text).map_err(|err| malformed(&args.file, err))?;
    match args.format {
        Format::Text => Ok(render::calibration_text(&report)),
        Format::Json => serde_json::to_string_pretty(&report)
            .context("cannot serialize the calibration report as JSON")
            .map_err(CliError::Other),
    }
}

//! `meshplan calibrate`: fit each GPU's efficiency factor on a calibration CSV and report the
//! leave-one-source-out accuracy. It prints the factors; applying them to `presets/gpus/` is a
//! reviewed edit, never a side effect. `--write-bands` writes the error-band table
//! (`data/error-bands.json` is the embedded one).

use anyhow::Context as _;

use super::args::{CalibrateArgs, Format};
use super::render;
use super::validate::{malformed, read_csv};
use super::{CliError, write_atomically};

/// Reads the CSV, fits and cross-validates, and renders the report.
pub fn run(args: &CalibrateArgs) -> Result<String, CliError> {
    let text = read_csv(&args.file)?;
    let report = crate::validate::calibrate_csv(&text).map_err(|err| malformed(&args.file, err))?;
    if let Some(path) = &args.write_bands {
        let validation =
            crate::validate::validate_csv(&text).map_err(|err| malformed(&args.file, err))?;
        write_atomically(path, "write_bands", &validation.bands.to_json())?;
    }
    match args.format {
        Format::Text => Ok(render::calibration_text(&report)),
        Format::Json => serde_json::to_string_pretty(&report)
            .context("cannot serialize the calibration report as JSON")
            .map_err(CliError::Other),
    }
}

//! `meshplan estimate`: price one run and print its memory, step time and throughput. The step
//! time is the simulated one, under the plan's pipeline schedule.

use anyhow::Context as _;

use super::args::{EstimateArgs, Format};
use super::{CliError, write_atomically};
use super::{inputs, render, whole_run};
use crate::violation::Collector;

/// Builds the run from the flags, prices it and renders the result.
pub fn run(args: &EstimateArgs) -> Result<String, CliError> {
    // Every problem of the run and of the whole-run flags at once.
    let mut problems = Collector::default();
    let goodput = problems.take(args.whole.goodput());
    let inputs = problems.take(inputs::build_run_with(&args.run, args.recipe.recipe));
    let (inputs, goodput) = problems.finish_with(inputs.zip(goodput), "run")?;
    let options = crate::sim::SimOptions { timeline: false };
    let (estimate, _) = crate::estimate::estimate_simulated_with(&inputs.run, options)
        .context("cannot simulate the pipeline schedule")
        .map_err(CliError::Other)?;
    estimate.check_figures().map_err(|err| CliError::Other(err.into()))?;
    if let Some(path) = &args.save_plan {
        let spec = crate::plan_file::resolved_spec(&inputs.spec, &inputs.run);
        let text = crate::plan_file::to_toml(&spec)
            .context("cannot write the plan file")
            .map_err(CliError::Other)?;
        write_atomically(path, "save_plan", &text)?;
    }
    // A plan that does not fit: the fastest changes of one group of options that make it fit.
    let suggestions = if estimate.fits() {
        Vec::new()
    } else {
        crate::search::fit::fit_suggestions(&inputs.spec, &inputs.run).map_err(|err| match err {
            crate::search::SearchError::Input(violations) => CliError::Input(violations),
            other => CliError::Other(anyhow::Error::new(other)),
        })?
    };
    let outlook = whole_run::run_outlook(goodput.as_ref(), &inputs.run, estimate.time.step_time())?;
    match args.format {
        Format::Text => Ok(render::estimate_text(&inputs, &estimate)
            + &render::fit_text(&suggestions, estimate.fits())
            + &outlook.as_ref().map(|o| whole_run::text(o, None)).unwrap_or_default()),
        Format::Json => {
            let whole =
                outlook.as_ref().zip(goodput.as_ref()).map(|(o, g)| whole_run::json(o, g, None));
            render::estimate_json(&inputs, &estimate, &suggestions, whole)
                .context("cannot serialize the estimate as JSON")
                .map_err(CliError::Other)
        }
    }
}

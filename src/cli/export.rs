//! `meshplan export --to ENGINE`: a given plan as the launch configuration of the engine that
//! runs it, refused with the reason when the engine cannot run it.

use meshplan::export::export;
use meshplan::violation::{Violation, Violations};

use super::args::ExportArgs;
use super::{CliError, inputs, write_atomically};

/// Builds the run and writes its configuration to stdout or `--output`.
pub fn run(args: &ExportArgs) -> Result<String, CliError> {
    let mut run_args = args.run.clone();
    let engine_flag = &mut run_args.plan_options.engine;
    *engine_flag = args.to.or(*engine_flag);
    let inputs = inputs::build_run(&run_args)?;
    let engine = inputs.run.plan().engine();
    let text = export(engine, &inputs.run).map_err(|unsupported| {
        CliError::Input(Violations::one(Violation::new(
            "to",
            engine.name(),
            unsupported.to_string(),
            "change the plan (see `meshplan search --engine`), or export to another engine",
        )))
    })?;
    match &args.output {
        Some(path) => {
            write_atomically(path, "output", &text)?;
            Ok(format!("{} configuration written to {}", engine.name(), path.display()))
        }
        None => Ok(text),
    }
}

//! `meshplan export --to ENGINE`: a given plan as the launch configuration of the engine that
//! runs it, refused with every reason when the engine cannot run it, and refused when the plan is
//! predicted over the GPU's memory unless `--allow-over-capacity` asks for it anyway.

use crate::export::{Engine, OverCapacity, Unsupported, check_export, check_memory, export};
use crate::violation::{Violation, Violations};
use anyhow::Context as _;

use super::args::ExportArgs;
use super::{CliError, inputs, write_atomically};

fn unsupported(engine: Engine, unsupported: &Unsupported) -> Violation {
    let hint = if unsupported.refusals.iter().all(|refusal| refusal.concerns_writer()) {
        "the plan runs; `meshplan estimate` prices it, and the message says what to export instead"
    } else {
        "change the plan (see `meshplan search --engine`), or export to another engine"
    };
    Violation::new("to", engine.name(), unsupported.to_string(), hint)
}

/// Builds the run and writes its configuration to stdout or `--output`.
pub fn run(args: &ExportArgs) -> Result<String, CliError> {
    let mut run_args = args.run.clone();
    let engine_flag = &mut run_args.plan_options.engine;
    *engine_flag = args.to.or(*engine_flag);
    let inputs = inputs::build_run(&run_args)?;
    let engine = inputs.run.plan().engine();
    let mut problems = Vec::new();
    if let Err(refused) = check_export(engine, &inputs.run) {
        problems.push(unsupported(engine, &refused));
    }
    if !args.allow_over_capacity {
        // The peak `meshplan estimate` reports: the simulated one.
        let options = crate::sim::SimOptions { timeline: false };
        let (estimate, _) = crate::estimate::estimate_simulated_with(&inputs.run, options)
            .context("cannot simulate the pipeline schedule")
            .map_err(CliError::Other)?;
        for over in check_memory(&estimate) {
            let (field, hint) = match over {
                OverCapacity::Gpu { .. } => (
                    "memory",
                    "shard more (--zero, --fsdp), recompute (--recompute), raise --tp or --pp, or \
                     lower --micro-batch (`meshplan search` finds plans that fit); \
                     --allow-over-capacity writes it anyway",
                ),
                OverCapacity::Host { .. } => (
                    "host_memory",
                    "offload fewer layers (--offload-activation-layers), recompute instead \
                     (--recompute), or state the server's memory (--host-memory); \
                     --allow-over-capacity writes it anyway",
                ),
            };
            problems.push(Violation::new(
                field,
                format!("{:.2} GiB", over.needed().as_gib()),
                over.to_string(),
                hint,
            ));
        }
    }
    Violations::check(problems)?;
    let text = export(engine, &inputs.run)
        .map_err(|refused| CliError::Input(Violations::one(unsupported(engine, &refused))))?;
    match &args.output {
        Some(path) => {
            write_atomically(path, "output", &text)?;
            Ok(format!("{} configuration written to {}", engine.name(), path.display()))
        }
        None => Ok(text),
    }
}

//! Plan files: a run written out whole (training, every plan option, model and cluster) as TOML,
//! so that a plan the search found, or an estimate priced, is priced again exactly from the file.
//!
//! A plan file is a [`RunSpec`] with the plan's defaults made explicit ([`Plan::to_spec`]) and
//! the model and cluster written inline rather than by preset name, so that the file still means
//! the same run when a preset changes. Reading one rejects unknown keys like every other input.

use serde::{Deserialize, Serialize};

use crate::hardware::ClusterSpec;
use crate::model::ModelSpec;
use crate::plan::{PlanSpec, TrainingSpec};
use crate::run::{Run, RunSpec};

/// The file's tables, in the order they are written: what a reader looks for first comes first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    training: TrainingSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<crate::data::DataSpec>,
    plan: PlanSpec,
    model: ModelSpec,
    cluster: ClusterSpec,
}

/// Why a plan file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    /// The text is not a plan file (TOML syntax, an unknown key, a wrong type).
    #[error("not a meshplan plan file{location}: {message}")]
    Malformed {
        /// " (line N)" where the parser knows it.
        location: String,
        /// The parser's message.
        message: String,
    },
    /// The spec could not be written as TOML (a value TOML cannot hold).
    #[error("cannot write the plan as TOML: {0}")]
    Write(#[from] toml::ser::Error),
}

/// The spec of a validated run with every plan default explicit: `base` supplies the model and
/// the cluster, `run` the training setup and the plan as validation resolved them.
pub fn resolved_spec(base: &RunSpec, run: &Run) -> RunSpec {
    RunSpec {
        model: base.model.clone(),
        cluster: base.cluster.clone(),
        training: run.training().to_spec(),
        plan: PlanSpec { stack: Some(run.stack().id().to_owned()), ..run.plan().to_spec() },
        data: run.data().map(|data| data.data.to_spec()),
    }
}

/// The plan file of a run spec, with a header naming what it holds.
pub fn to_toml(spec: &RunSpec) -> Result<String, PlanFileError> {
    let file = PlanFile {
        training: spec.training.clone(),
        data: spec.data.clone(),
        plan: spec.plan.clone(),
        model: spec.model.clone(),
        cluster: spec.cluster.clone(),
    };
    let body = toml::to_string(&file)?;
    Ok(format!(
        "# meshplan plan file: the training setup, every plan option, the model and the cluster.\n\
         # Read it with `meshplan estimate|simulate|export|compare --plan FILE`; flags given beside\n\
         # --plan override what it says.\n\n{body}"
    ))
}

/// Reads a plan file.
pub fn from_toml(text: &str) -> Result<RunSpec, PlanFileError> {
    let file: PlanFile = toml::from_str(text).map_err(|err| PlanFileError::Malformed {
        location: crate::violation::toml_error_line(text, &err),
        message: err.message().trim_end().to_owned(),
    })?;
    Ok(RunSpec {
        model: file.model,
        cluster: file.cluster,
        training: file.training,
        plan: file.plan,
        data: file.data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    fn spec(plan: PlanSpec) -> RunSpec {
        RunSpec {
            model: presets::model("qwen3-30b-a3b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 64 },
            training: TrainingSpec {
                seq_len: 4096,
                global_batch: 256,
                micro_batch: Some(2),
                precision: None,
            },
            plan,
            data: None,
        }
    }

    #[test]
    fn a_resolved_plan_reads_back_as_the_same_run() {
        let plans = [
            PlanSpec { tp: Some(2), pp: Some(4), vp: Some(2), ep: Some(8), ..PlanSpec::default() },
            PlanSpec { fsdp: Some(true), hybrid_shard: Some(8), ..PlanSpec::default() },
            PlanSpec {
                pp: Some(4),
                recompute: Some(crate::plan::RecomputeKind::Full),
                recompute_num_layers: Some(3),
                tp_comm_overlap: Some(true),
                tp: Some(2),
                ..PlanSpec::default()
            },
        ];
        for plan in plans {
            let base = spec(plan);
            let run = Run::from_spec(&base).unwrap();
            let text = to_toml(&resolved_spec(&base, &run)).unwrap();
            let read = from_toml(&text).unwrap();
            assert_eq!(Run::from_spec(&read).unwrap(), run, "{text}");
            // Every option is explicit except those that apply to another setting.
            assert!(read.plan.engine.is_some() && read.plan.schedule.is_some());
        }
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let base = spec(PlanSpec::default());
        let run = Run::from_spec(&base).unwrap();
        let text = to_toml(&resolved_spec(&base, &run)).unwrap().replace("tp = 1", "tq = 1");
        let err = from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("tq") && err.contains("(line"), "{err}");
    }
}

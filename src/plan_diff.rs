//! What differs between runs: their specs compared key by key (as plan files name the keys), and
//! the command-line flags that turn one plan into another.
//!
//! Specs are compared through their serialized form, so an option added to `PlanSpec` or
//! `TrainingSpec` is compared, and turned into a flag, without being named here.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::Run;
use crate::RunSpec;

/// One key whose value differs between runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The key as a plan file names it, with its table: `plan.zero`, `training.micro_batch`,
    /// `cluster.num_gpus`, `model.name`.
    pub key: String,
    /// Its value in each run, in the order the runs were given (`None`: not set).
    pub values: Vec<Option<String>>,
}

/// Every key of `spec` with its value: the plan file's tables flattened to dotted keys.
fn leaves(spec: &RunSpec) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Ok(value) = serde_json::to_value(spec) {
        flatten("", &value, &mut out);
    }
    out
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&path, inner, out);
            }
        }
        Value::Null => {}
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

/// A value as a flag or a table cell shows it: strings unquoted, numbers and booleans as written.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The keys whose values differ between `specs`, in key order. Where a table names its preset and
/// the names differ (two models, two GPUs), only the name is listed: the rest follows from it.
pub fn differences(specs: &[&RunSpec]) -> Vec<Difference> {
    let all: Vec<BTreeMap<String, Value>> = specs.iter().map(|spec| leaves(spec)).collect();
    let keys: BTreeSet<&String> = all.iter().flat_map(BTreeMap::keys).collect();
    let differs = |key: &str| {
        let values: Vec<Option<&Value>> = all.iter().map(|leaves| leaves.get(key)).collect();
        values.windows(2).any(|pair| pair[0] != pair[1])
    };
    // Tables whose `name` differs: their other keys are left out.
    let renamed: Vec<String> = keys
        .iter()
        .filter_map(|key| key.strip_suffix(".name").filter(|_| differs(key)))
        .map(|table| format!("{table}."))
        .collect();
    keys.into_iter()
        .filter(|key| differs(key))
        .filter(|key| {
            !renamed
                .iter()
                .any(|table| key.strip_prefix(table.as_str()).is_some_and(|rest| rest != "name"))
        })
        .map(|key| Difference {
            key: key.clone(),
            values: all.iter().map(|leaves| leaves.get(key).map(shown)).collect(),
        })
        .collect()
}

/// The flag of a training or plan key: `plan.cp_comm` is `--cp-comm`, `training.micro_batch` is
/// `--micro-batch`. Other tables (model, cluster) have no one flag per key.
fn flag_name(key: &str) -> Option<String> {
    let option = key.strip_prefix("plan.").or_else(|| key.strip_prefix("training."))?;
    Some(format!("--{}", option.replace('_', "-")))
}

/// The flags that, added to `from`'s, give `to`'s training setup and plan: one per option whose
/// resolved value differs and is set in `to`, in key order (`--fsdp`, `--micro-batch 2`,
/// `--recompute full`). Both runs are compared with every default explicit.
pub fn flags_between(from: &Run, to: &Run) -> Vec<String> {
    let setup = |run: &Run| {
        let mut out = BTreeMap::new();
        for (table, value) in [
            ("training", serde_json::to_value(run.training().to_spec())),
            ("plan", serde_json::to_value(run.plan().to_spec())),
        ] {
            if let Ok(value) = value {
                flatten(table, &value, &mut out);
            }
        }
        out
    };
    let (before, after) = (setup(from), setup(to));
    after
        .iter()
        .filter(|(key, value)| before.get(*key) != Some(value))
        .filter_map(|(key, value)| {
            let flag = flag_name(key)?;
            Some(match value {
                Value::Bool(true) => flag,
                other => format!("{flag} {}", shown(other)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{PlanSpec, RecomputeKind, TrainingSpec};

    fn spec(model: &str, plan: PlanSpec) -> RunSpec {
        crate::run::test_spec(model, 16, 4096, 32, 1, plan)
    }

    #[test]
    fn differences_name_each_key_once_and_a_renamed_model_by_its_name() {
        let a = spec("llama3.1-8b", PlanSpec { tp: Some(2), ..PlanSpec::default() });
        let b = spec("llama3.1-8b", PlanSpec { tp: Some(4), zero: Some(2), ..PlanSpec::default() });
        let found = differences(&[&a, &b]);
        let keys: Vec<&str> = found.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["plan.tp", "plan.zero"]);
        assert_eq!(found[1].values, [None, Some("2".to_owned())]);
        let c = spec("llama3.1-70b", PlanSpec { tp: Some(2), ..PlanSpec::default() });
        let keys: Vec<String> = differences(&[&a, &c]).into_iter().map(|d| d.key).collect();
        assert_eq!(keys, ["model.name"]);
        assert!(differences(&[&a, &a]).is_empty());
    }

    #[test]
    fn flags_between_runs_name_what_to_add() {
        let base = spec("llama3.1-8b", PlanSpec::default());
        let from = Run::from_spec(&base).unwrap();
        let to = Run::from_spec(&RunSpec {
            plan: PlanSpec { recompute: Some(RecomputeKind::Full), ..PlanSpec::default() },
            training: TrainingSpec { micro_batch: Some(2), ..base.training.clone() },
            ..base.clone()
        })
        .unwrap();
        assert_eq!(
            flags_between(&from, &to),
            ["--recompute full", "--recompute-num-layers 32", "--micro-batch 2"]
        );
        let fsdp = Run::from_spec(&RunSpec {
            plan: PlanSpec { fsdp: Some(true), ..PlanSpec::default() },
            ..base.clone()
        })
        .unwrap();
        assert_eq!(
            flags_between(&from, &fsdp),
            ["--fsdp", "--fsdp-mode full", "--hybrid-shard 16"]
        );
        assert!(flags_between(&from, &from).is_empty());
    }
}

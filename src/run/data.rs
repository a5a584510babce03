//! A run's data: its spec with a built-in distribution resolved by name, validated, and the
//! sample of sequences its documents pack into, drawn once per run (a search shares it).

use std::sync::Arc;

use crate::data::{AttentionWork, Data, DataSpec, SequenceLoads, sample_sequences};
use crate::model::Model;
use crate::presets;
use crate::violation::Collector;

/// The validated data of a run and the attention work of its sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    /// The length distribution and its batching.
    pub data: Data,
    /// The sample of sequences of the run's length.
    pub loads: SequenceLoads,
}

/// Validates `spec` (if any) and draws its sample for sequences of `seq_len` tokens of `model`
/// (when both were accepted: without them no sample is drawn, and the data's own problems are
/// still reported).
pub(crate) fn validate_data(
    collector: &mut Collector,
    spec: Option<&DataSpec>,
    model: Option<&Model>,
    seq_len: Option<u64>,
) -> Option<Arc<RunData>> {
    let spec = spec?;
    let resolved = match &spec.preset {
        Some(name) => {
            if spec.lengths.is_some() || spec.histogram.is_some() || spec.source.is_some() {
                collector.add(
                    "data.preset",
                    name,
                    "names a built-in distribution beside lengths of its own",
                    "keep either `preset` or `lengths` / `histogram` (with their `source`)",
                );
                return None;
            }
            match presets::lengths(name) {
                Ok(preset) => DataSpec { batching: spec.batching, seed: spec.seed, ..preset },
                Err(err) => {
                    collector.add(
                        "data.preset",
                        name,
                        err.to_string(),
                        "name a distribution `meshplan presets` lists, or pass a file of lengths",
                    );
                    return None;
                }
            }
        }
        None => spec.clone(),
    };
    let data = collector.take(Data::from_spec(&resolved, spec.preset.as_deref()))?;
    let (model, seq_len) = (model?, seq_len?);
    let flops = |length: u64| model.layer_attention_flops_per_token(length) * length as f64;
    let loads = sample_sequences(&data, seq_len, &AttentionWork { flops: &flops });
    Some(Arc::new(RunData { data, loads }))
}

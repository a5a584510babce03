//! Megatron-LM arguments for an older Megatron-Core release: the flags the exporter writes
//! (core_v0.15.0's names) respelled where an older release names the same setting otherwise or
//! leaves it at the only value it has, and every flag the release still lacks found in
//! [`FLAG_SINCE`], the release each first appears in.
//!
//! The table was read from `megatron/training/arguments.py` (`megatron/arguments.py` before
//! core_v0.6.0) at NVIDIA/Megatron-LM tags core_v0.4.0 to core_v0.15.0: each entry is the first
//! of those releases that defines the flag (4 for one already in core_v0.4.0). Flags that no
//! release up to core_v0.15.0 defines are core_v0.16.0's, whose arguments come from its
//! configuration dataclasses.

use crate::run::Run;

use super::refusal::Refusal;
#[cfg(test)]
use super::refusal::{MODEL_FLAGS, is_model_flag};

/// Each flag the exporter writes, with the minor release of Megatron-Core that first defines it,
/// in byte order of the flag (looked up by binary search; a test keeps the order).
pub const FLAG_SINCE: &[(&str, u32)] = &[
    ("--account-for-embedding-in-pipeline-split", 11),
    ("--account-for-loss-in-pipeline-split", 11),
    ("--bf16", 4),
    ("--calculate-per-token-loss", 7),
    ("--context-parallel-size", 4),
    ("--cp-comm-type", 10),
    ("--cpu-offloading-num-layers", 16),
    ("--data-parallel-sharding-strategy", 12),
    ("--dataloader-type", 4),
    ("--disable-bias-linear", 4),
    ("--exp-avg-dtype", 11),
    ("--exp-avg-sq-dtype", 11),
    ("--expert-model-parallel-size", 4),
    ("--expert-tensor-parallel-size", 10),
    ("--ffn-hidden-size", 4),
    ("--first-last-layers-bf16", 12),
    ("--fp16", 4),
    ("--fp4-format", 15),
    ("--fp8-format", 4),
    ("--fp8-recipe", 12),
    ("--global-batch-size", 4),
    ("--group-query-attention", 4),
    ("--hidden-size", 4),
    ("--hierarchical-context-parallel-sizes", 10),
    ("--hybrid-context-parallel", 16),
    ("--hybrid-override-pattern", 8),
    ("--kv-channels", 4),
    ("--kv-lora-rank", 10),
    ("--mamba-head-dim", 12),
    ("--mamba-num-groups", 12),
    ("--mamba-num-heads", 13),
    ("--mamba-state-dim", 12),
    ("--max-position-embeddings", 4),
    ("--max-seqlen-per-dp-cp-rank", 16),
    ("--micro-batch-size", 4),
    ("--moe-enable-deepep", 12),
    ("--moe-expert-capacity-factor", 7),
    ("--moe-ffn-hidden-size", 10),
    ("--moe-grouped-gemm", 5),
    ("--moe-latent-size", 16),
    ("--moe-layer-freq", 10),
    ("--moe-router-load-balancing-type", 5),
    ("--moe-router-topk", 5),
    ("--moe-shared-expert-intermediate-size", 10),
    ("--moe-token-dispatcher-type", 6),
    ("--moe-token-drop-policy", 7),
    ("--mtp-hybrid-override-pattern", 16),
    ("--mtp-num-layers", 12),
    ("--mtp-use-repeated-layer", 16),
    ("--multi-latent-attention", 10),
    ("--normalization", 4),
    ("--num-attention-heads", 4),
    ("--num-experts", 4),
    ("--num-layers", 4),
    ("--num-layers-at-end-in-bf16", 12),
    ("--num-layers-at-start-in-bf16", 12),
    ("--num-layers-per-virtual-pipeline-stage", 4),
    ("--num-query-groups", 4),
    ("--num-virtual-stages-per-pipeline-rank", 11),
    ("--overlap-grad-reduce", 4),
    ("--overlap-moe-expert-parallel-comm", 14),
    ("--overlap-param-gather", 4),
    ("--pipeline-model-parallel-layout", 13),
    ("--pipeline-model-parallel-size", 4),
    ("--position-embedding-type", 4),
    ("--q-lora-rank", 10),
    ("--qk-head-dim", 10),
    ("--qk-pos-emb-head-dim", 10),
    ("--recompute-granularity", 4),
    ("--recompute-method", 4),
    ("--recompute-modules", 12),
    ("--recompute-num-layers", 4),
    ("--seq-length", 4),
    ("--sequence-parallel", 4),
    ("--sft", 13),
    ("--squared-relu", 4),
    ("--swiglu", 4),
    ("--tensor-model-parallel-size", 4),
    ("--tp-comm-overlap", 4),
    ("--untie-embeddings-and-output-weights", 4),
    ("--use-custom-fsdp", 12),
    ("--use-distributed-optimizer", 4),
    ("--use-mcore-models", 4),
    ("--use-megatron-fsdp", 14),
    ("--use-precision-aware-optimizer", 11),
    ("--v-head-dim", 10),
    ("--vocab-size", 4),
];

/// Values of a flag that a later release than the flag added to its `choices`.
pub const VALUE_SINCE: &[(&str, u32)] = &[
    // core_v0.6.0: choices learned_absolute, rope; core_v0.8.0 adds none.
    ("--position-embedding-type none", 8),
    // core_v0.12.0: tensorwise, delayed, mxfp8; core_v0.13.0 adds blockwise.
    ("--fp8-recipe blockwise", 13),
    // core_v0.12.0 adds flex beside allgather, alltoall and alltoall_seq.
    ("--moe-token-dispatcher-type flex", 12),
];

/// What a flag's spelling and release lookup gives: the table's own name for it and the
/// release that first has it (`None` for a flag outside the table, which a test rules out).
fn first_release(argument: &str) -> (&'static str, Option<u32>) {
    let mut words = argument.splitn(3, ' ');
    let flag = words.next().unwrap_or_default();
    if let Some(value) = words.next() {
        let written = |entry: &str| {
            entry.strip_prefix(flag).and_then(|rest| rest.strip_prefix(' ')) == Some(value)
        };
        if let Some(&(name, since)) = VALUE_SINCE.iter().find(|(entry, _)| written(entry)) {
            return (name, Some(since));
        }
    }
    match FLAG_SINCE.binary_search_by(|(name, _)| (*name).cmp(flag)) {
        Ok(index) => (FLAG_SINCE[index].0, Some(FLAG_SINCE[index].1)),
        Err(_) => ("(a flag outside meshplan's release table)", None),
    }
}

/// The arguments respelled for Megatron-Core `0.minor`, and a refusal for each flag that release
/// still lacks (empty when it launches).
pub fn for_release(run: &Run, arguments: Vec<String>, minor: u32) -> (Vec<String>, Vec<Refusal>) {
    let (model, plan) = (run.model(), run.plan());
    let tp = plan.tp().to_string();
    let ffn = model.ffn_hidden_size().to_string();
    let chunks = run.path_layers(plan.pp() * plan.vp());
    let even_chunks = chunks.windows(2).all(|pair| pair[0] == pair[1]);
    let mut out = Vec::with_capacity(arguments.len() + 1);
    if minor < 8 {
        // arguments.py@core_v0.6.0 and @core_v0.7.0: `--use-mcore-models` picks Megatron-Core's
        // GPT model over the legacy one, the default; core_v0.8.0 makes Megatron-Core's the default.
        out.push("--use-mcore-models".to_owned());
    }
    for argument in arguments {
        let (flag, value) = argument.split_once(' ').unwrap_or((argument.as_str(), ""));
        let respelled = match flag {
            // Before core_v0.11.0 the interleaved schedule is given by layers per model chunk.
            "--num-virtual-stages-per-pipeline-rank" if minor < 11 && even_chunks => {
                let layers = chunks.first().copied().unwrap_or_default();
                Some(Some(format!("--num-layers-per-virtual-pipeline-stage {layers}")))
            }
            // Before core_v0.12.0 `--fp8-format` turns on Transformer Engine's delayed scaling,
            // the one FP8 recipe (TEDelayedScaling, megatron/core/extensions/transformer_engine.py
            // @core_v0.11.0).
            "--fp8-recipe" if minor < 12 && value == "delayed" => Some(None),
            // Before core_v0.10.0 context parallelism exchanges keys and values over a p2p ring
            // only.
            "--cp-comm-type" if minor < 10 && value == "p2p" => Some(None),
            // Before core_v0.10.0 every expert is split over the tensor-parallel ranks.
            "--expert-tensor-parallel-size" if minor < 10 && value == tp => Some(None),
            // Before core_v0.10.0 the experts' MLP takes `--ffn-hidden-size`
            // (megatron/core/transformer/moe/experts.py@core_v0.8.0: config.ffn_hidden_size).
            "--moe-ffn-hidden-size" if minor < 10 && value == ffn => Some(None),
            // core_v0.12.0 and core_v0.13.0 name Megatron's FSDP `--use-custom-fsdp` (and an
            // older release, which has neither, is refused naming the release that added it).
            "--use-megatron-fsdp" if minor < 14 => Some(Some("--use-custom-fsdp".to_owned())),
            _ => None,
        };
        match respelled {
            Some(Some(replacement)) => out.push(replacement),
            Some(None) => {}
            None => out.push(argument),
        }
    }
    let mut refusals = Vec::new();
    for argument in &out {
        let (flag, since) = first_release(argument);
        if since.is_none_or(|since| since > minor) {
            let refusal = Refusal::FlagNotInRelease { flag, since, release: minor };
            if !refusals.contains(&refusal) {
                refusals.push(refusal);
            }
        }
    }
    (out, refusals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_flags_are_sorted_and_in_the_release_tables() {
        assert!(MODEL_FLAGS.windows(2).all(|pair| pair[0] < pair[1]));
        for flag in MODEL_FLAGS {
            let listed = FLAG_SINCE.iter().chain(VALUE_SINCE).any(|(name, _)| name == flag);
            assert!(listed, "{flag}");
            assert!(is_model_flag(flag));
        }
        assert!(!is_model_flag("--tensor-model-parallel-size"));
        assert!(!is_model_flag("--position-embedding-type"));
    }

    #[test]
    fn the_table_lists_each_flag_once_and_within_the_releases_read() {
        for (index, (flag, since)) in FLAG_SINCE.iter().enumerate() {
            assert!(flag.starts_with("--") && !flag.contains(' '), "{flag}");
            assert!((4..=16).contains(since), "{flag}");
            // Strictly increasing: each flag once, in the order the binary search needs.
            assert!(index == 0 || FLAG_SINCE[index - 1].0 < *flag, "{flag}");
        }
        for (entry, since) in VALUE_SINCE {
            let (flag, _) = entry.split_once(' ').unwrap();
            let flag_since = FLAG_SINCE.iter().find(|(name, _)| *name == flag).unwrap().1;
            assert!(*since > flag_since, "{entry}");
        }
    }

    #[test]
    fn every_flag_the_exporter_writes_is_in_the_table() {
        // Read from the writer's source, so that a flag added there without its release here
        // fails (it would be refused as unknown on every older stack).
        let source = include_str!("megatron.rs");
        let mut flags: Vec<&str> = source
            .split('"')
            .filter_map(|literal| literal.strip_prefix("--"))
            .map(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .next()
                    .unwrap_or_default()
            })
            .filter(|name| !name.is_empty())
            .collect();
        flags.sort_unstable();
        flags.dedup();
        assert!(flags.len() > 60, "{flags:?}");
        for name in flags {
            let flag = format!("--{name}");
            assert!(FLAG_SINCE.iter().any(|(known, _)| *known == flag), "{flag} has no release");
        }
    }

    #[test]
    fn a_value_added_later_than_its_flag_is_looked_up_as_written() {
        assert_eq!(first_release("--fp8-recipe blockwise"), ("--fp8-recipe blockwise", Some(13)));
        assert_eq!(first_release("--fp8-recipe tensorwise"), ("--fp8-recipe", Some(12)));
        assert_eq!(first_release("--sequence-parallel"), ("--sequence-parallel", Some(4)));
        assert_eq!(first_release("--no-such-flag 3").1, None);
    }
}

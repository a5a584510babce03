//! One rule per software family for what a calibration row leaves blank.
//!
//! A published table rarely states every setting. Each family below fills the gaps with what its
//! software or its published recipe does by default, with the source of the rule. The rule depends
//! only on the family, never on the row, and every use of it is listed in the row's assumptions.
//! A family that is one engine's ([`Family::engine`]) never defaults to a feature that engine's
//! capabilities ([`crate::export::Capabilities`]) lack; a default may leave a feature off that the
//! engine has when the published recipe does.

use crate::export::Engine;
use crate::plan::{Precision, RecomputeKind};

/// The software that produced a row, which decides its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Megatron-LM 2020 README tables.
    Megatron2020,
    /// Megatron-LM 2021-2022 papers (Narayanan et al., Korthikanti et al.).
    Megatron2021,
    /// Megatron-Core r0.8 README tables.
    MegatronCore,
    /// NVIDIA NeMo and Megatron-Bridge performance summaries.
    Nemo,
    /// NeMo AutoModel (PyTorch FSDP2 backend).
    AutoModel,
    /// torchtitan benchmark reports.
    Torchtitan,
    /// MosaicML llm-foundry / Composer benchmarks.
    Composer,
    /// FlagPerf reference runs (Megatron-LM core 0.6 and DeepSpeed).
    FlagPerf,
    /// Megatron-DeepSpeed (BigScience).
    MegatronDeepSpeed,
    /// Anything else (metaseq, ...).
    Other,
}

/// Settings assumed for a family when a row leaves them blank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FamilyDefaults {
    /// Recompute when the row does not say.
    pub recompute: RecomputeKind,
    /// ZeRO stage when the row does not say (1 = distributed optimizer).
    pub zero: i64,
    /// Sequence parallelism with tp > 1.
    pub sequence_parallel: bool,
    /// `--tp-comm-overlap` with tp > 1.
    pub tp_comm_overlap: bool,
    /// DP gradient reduction overlapped with the backward.
    pub overlap_grad_reduce: bool,
    /// Precision when the row does not say.
    pub precision: Precision,
    /// What "FP8" without a recipe means for this family.
    pub fp8: Precision,
    /// Whether, when layers do not divide evenly over the pipeline, the embedding and the loss
    /// count as one layer each (Megatron-Bridge's Llama 3.1 405B recipes set
    /// `account_for_embedding/loss_in_pipeline_split`; torchtitan's `first/last_stage_less_layers`
    /// default to 1).
    pub uneven_split_counts_embedding_and_loss: bool,
    /// Where the rules come from.
    pub source: &'static str,
}

impl Family {
    /// The family of a row, from its `source_id` and `software_or_release`.
    pub fn of(source_id: &str, software: &str) -> Family {
        let software = software.to_ascii_lowercase();
        match source_id {
            id if id.starts_with("megatron2020") => Family::Megatron2020,
            id if id.starts_with("narayanan2021") || id.starts_with("korthikanti2022") => {
                Family::Megatron2021
            }
            id if id.starts_with("mcore") => Family::MegatronCore,
            id if id.starts_with("nemo_automodel") => Family::AutoModel,
            id if id.starts_with("nemo") || id.starts_with("megatron_bridge") => Family::Nemo,
            id if id.starts_with("torchtitan") => Family::Torchtitan,
            id if id.starts_with("mosaicml") => Family::Composer,
            id if id.starts_with("flagperf") => Family::FlagPerf,
            _ if software.contains("megatron-deepspeed") => Family::MegatronDeepSpeed,
            _ => Family::Other,
        }
    }

    /// The engine every row of this family ran on, where it is one engine: its capabilities
    /// bound the family's defaults.
    pub fn engine(self) -> Option<Engine> {
        match self {
            Family::Megatron2020 | Family::Megatron2021 | Family::MegatronCore | Family::Nemo => {
                Some(Engine::Megatron)
            }
            Family::Torchtitan => Some(Engine::Torchtitan),
            // NeMo AutoModel, Composer and metaseq are other trainers; FlagPerf mixes Megatron-LM
            // and DeepSpeed runs; Megatron-DeepSpeed runs Megatron-LM's model code on DeepSpeed.
            Family::AutoModel
            | Family::Composer
            | Family::FlagPerf
            | Family::MegatronDeepSpeed
            | Family::Other => None,
        }
    }

    /// The family's defaults: its published ones, with no feature its engine lacks.
    pub fn defaults(self) -> FamilyDefaults {
        let published = self.published();
        let caps = self.engine().map(Engine::capabilities);
        FamilyDefaults {
            tp_comm_overlap: published.tp_comm_overlap
                && caps.is_none_or(|caps| caps.tp_comm_overlap),
            ..published
        }
    }

    /// What the family's software or recipe does by default.
    fn published(self) -> FamilyDefaults {
        match self {
            Family::Megatron2020 => FamilyDefaults {
                recompute: RecomputeKind::Full,
                zero: 0,
                sequence_parallel: false,
                tp_comm_overlap: false,
                overlap_grad_reduce: true,
                precision: Precision::Fp16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "Megatron-LM 2020 example scripts pass --checkpoint-activations and --fp16 with torch DDP",
            },
            Family::Megatron2021 => FamilyDefaults {
                recompute: RecomputeKind::Full,
                zero: 0,
                sequence_parallel: false,
                tp_comm_overlap: false,
                overlap_grad_reduce: true,
                precision: Precision::Fp16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "Megatron-LM examples/sc21 scripts (full checkpointing, fp16, DDP)",
            },
            Family::MegatronCore => FamilyDefaults {
                recompute: RecomputeKind::None,
                zero: 1,
                sequence_parallel: true,
                tp_comm_overlap: true,
                overlap_grad_reduce: true,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "Megatron-LM README r0.8: --overlap-grad-reduce --overlap-param-gather (distributed optimizer) --tp-comm-overlap (needs sequence parallelism); no recompute flag; bf16",
            },
            Family::Nemo => FamilyDefaults {
                recompute: RecomputeKind::None,
                zero: 1,
                sequence_parallel: true,
                tp_comm_overlap: true,
                overlap_grad_reduce: true,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: true,
                source: "NeMo/Megatron-Bridge performance recipes: distributed optimizer, sequence parallel and TP comm overlap with tp > 1, DP overlap, no activation recompute, FP8 = Transformer Engine delayed scaling",
            },
            Family::AutoModel | Family::Torchtitan => FamilyDefaults {
                recompute: RecomputeKind::Op,
                zero: 3,
                sequence_parallel: true,
                // torchtitan has async TP (the capability table says so, and the search turns it
                // on), but `parallelism.enable_async_tensor_parallel` defaults to false and needs
                // torch.compile: a benchmark that does not mention it ran without it.
                tp_comm_overlap: false,
                overlap_grad_reduce: true,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Current,
                uneven_split_counts_embedding_and_loss: true,
                source: "torchtitan job config defaults: FSDP2 over the data-parallel ranks, selective activation checkpointing per op, TP with sequence parallel, torchao float8 tensorwise (current) scaling",
            },
            Family::Composer => FamilyDefaults {
                recompute: RecomputeKind::None,
                zero: 3,
                sequence_parallel: false,
                tp_comm_overlap: false,
                overlap_grad_reduce: true,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "llm-foundry benchmark yamls: PyTorch FSDP FULL_SHARD with prefetching, bf16",
            },
            Family::FlagPerf => FamilyDefaults {
                recompute: RecomputeKind::None,
                zero: 1,
                sequence_parallel: true,
                tp_comm_overlap: false,
                overlap_grad_reduce: false,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "FlagPerf Megatron-LM core 0.6 scripts: --use-distributed-optimizer --sequence-parallel, no overlap flags (Megatron-LM defaults them off)",
            },
            Family::MegatronDeepSpeed | Family::Other => FamilyDefaults {
                recompute: RecomputeKind::Full,
                zero: 1,
                sequence_parallel: false,
                tp_comm_overlap: false,
                overlap_grad_reduce: true,
                precision: Precision::Bf16,
                fp8: Precision::Fp8Delayed,
                uneven_split_counts_embedding_and_loss: false,
                source: "Megatron-DeepSpeed (BigScience tr11): ZeRO-1 BF16Optimizer, full checkpointing",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAMILIES: [Family; 10] = [
        Family::Megatron2020,
        Family::Megatron2021,
        Family::MegatronCore,
        Family::Nemo,
        Family::AutoModel,
        Family::Torchtitan,
        Family::Composer,
        Family::FlagPerf,
        Family::MegatronDeepSpeed,
        Family::Other,
    ];

    #[test]
    fn a_family_never_defaults_to_what_its_engine_lacks() {
        for family in FAMILIES {
            let Some(engine) = family.engine() else { continue };
            // The published defaults already agree with the table, without the bound.
            assert_eq!(family.published(), family.defaults(), "{family:?}");
            let (defaults, caps) = (family.published(), engine.capabilities());
            assert!(!defaults.tp_comm_overlap || caps.tp_comm_overlap, "{family:?}");
            if matches!(defaults.recompute, RecomputeKind::Selective | RecomputeKind::Op) {
                assert_eq!(Some(defaults.recompute), caps.selective_recompute, "{family:?}");
            }
            for precision in [defaults.precision, defaults.fp8] {
                assert!(caps.precisions.contains(&precision), "{family:?} {precision:?}");
            }
        }
    }

    #[test]
    fn torchtitan_rows_checkpoint_per_op_and_leave_async_tp_off_as_its_config_does() {
        let (defaults, caps) = (Family::Torchtitan.defaults(), Engine::Torchtitan.capabilities());
        assert_eq!(Some(defaults.recompute), caps.selective_recompute);
        // Off by the published default, though the engine has it.
        assert!(caps.tp_comm_overlap && !defaults.tp_comm_overlap);
    }
}

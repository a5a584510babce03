//! What activation offload to host memory an engine runs ([`ActivationOffload`], the capability
//! table's `activation_offload`), and every way a plan's offload differs from it
//! ([`ActivationOffload::mismatches`]). Sources: `docs/activation-offload.md`.
//!
//! meshplan prices `offload_activation_layers: N` as the stored activations of N of each pipeline
//! rank's layers (fewer than its layers) moved to host memory during the forward and copied back
//! beside the backward; an engine runs a plan's offload only when it does exactly that.

use crate::plan::RecomputeKind;

use super::refusal::OffloadMismatch;

/// The activation offload to host memory an engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationOffload {
    /// None in a release.
    None,
    /// A count of whole layers per rank whose activations go to host memory in the forward and
    /// come back for the backward, the rest staying on the GPU: what meshplan prices.
    Layers {
        /// Whether it offloads with pipeline parallelism (pp > 1).
        with_pipeline: bool,
        /// Whether it offloads with activation recomputation of any kind.
        with_recompute: bool,
        /// Whether its hybrid (Mamba-2 / layer-pattern) model stack offloads.
        hybrid_layers: bool,
    },
    /// The saved input of every checkpointed layer but the newest, under full recompute only,
    /// each copied back when its backward asks for it (DeepSpeed's `cpu_checkpointing`): never
    /// what meshplan prices.
    CheckpointInputs,
}

impl ActivationOffload {
    /// Every way an offloading plan of `pp` stages with `recompute`, for a hybrid model or not,
    /// differs from what the engine runs, in a fixed order; empty when the engine runs it as
    /// priced.
    pub fn mismatches(
        self,
        pp: u64,
        recompute: RecomputeKind,
        hybrid_model: bool,
    ) -> Vec<OffloadMismatch> {
        match self {
            ActivationOffload::None => vec![OffloadMismatch::NoOffload],
            ActivationOffload::CheckpointInputs => vec![OffloadMismatch::CheckpointInputs],
            ActivationOffload::Layers { with_pipeline, with_recompute, hybrid_layers } => {
                let mut out = Vec::new();
                if pp > 1 && !with_pipeline {
                    out.push(OffloadMismatch::Pipeline { pp });
                }
                if recompute != RecomputeKind::None && !with_recompute {
                    out.push(OffloadMismatch::Recompute { kind: recompute });
                }
                if hybrid_model && !hybrid_layers {
                    out.push(OffloadMismatch::HybridLayers);
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{Engine, Refusal, check, export, refusals};
    use crate::hardware::ClusterSpec;
    use crate::plan::{PlanSpec, Precision, TrainingSpec};
    use crate::run::{Run, RunSpec};

    /// `model` on 8 H100s at 4096 tokens, offloading `layers` per rank.
    fn offloading(model: &str, layers: i64, plan: PlanSpec) -> Run {
        Run::from_spec(&RunSpec {
            model: crate::presets::model(model).unwrap(),
            cluster: ClusterSpec { gpu: crate::presets::gpu("h100-sxm").unwrap(), num_gpus: 8 },
            training: TrainingSpec {
                seq_len: 4096,
                global_batch: 32,
                micro_batch: Some(1),
                precision: Some(Precision::Bf16),
            },
            plan: PlanSpec { offload_activation_layers: Some(layers), ..plan },
            data: None,
        })
        .unwrap()
    }

    fn offload_refusals(engine: Engine, run: &Run) -> Vec<Refusal> {
        refusals(engine, run)
            .into_iter()
            .filter(|refusal| matches!(refusal, Refusal::ActivationOffload { .. }))
            .collect()
    }

    #[test]
    fn megatron_offloads_layers_with_pp_1_and_no_recompute_and_writes_the_count() {
        let run =
            offloading("llama3.1-8b", 12, PlanSpec { fsdp: Some(true), ..PlanSpec::default() });
        assert_eq!(refusals(Engine::Megatron, &run), []);
        let args = export(Engine::Megatron, &run).unwrap();
        assert!(args.lines().any(|line| line == "--cpu-offloading-num-layers 12"), "{args}");
        assert!(!args.contains("--recompute") && !args.contains("--cpu-offloading\n"), "{args}");
        // Without offload no such flag is written.
        let plain =
            offloading("llama3.1-8b", 0, PlanSpec { fsdp: Some(true), ..PlanSpec::default() });
        assert!(!export(Engine::Megatron, &plain).unwrap().contains("cpu-offloading"));
    }

    #[test]
    fn megatron_refuses_offload_with_a_pipeline_and_with_recompute_giving_both_reasons() {
        let plan = PlanSpec {
            pp: Some(2),
            recompute: Some(RecomputeKind::Selective),
            ..PlanSpec::default()
        };
        let run = offloading("llama3.1-8b", 4, plan);
        let layers = 4;
        assert_eq!(
            refusals(Engine::Megatron, &run),
            [
                Refusal::ActivationOffload {
                    engine: Engine::Megatron,
                    layers,
                    mismatch: OffloadMismatch::Pipeline { pp: 2 },
                },
                Refusal::ActivationOffload {
                    engine: Engine::Megatron,
                    layers,
                    mismatch: OffloadMismatch::Recompute { kind: RecomputeKind::Selective },
                },
            ]
        );
        let err = check(Engine::Megatron, &run).unwrap_err().to_string();
        assert!(err.contains("use --pp 1 instead of pp 2"), "{err}");
        assert!(err.contains("use --recompute none"), "{err}");
        assert!(err.contains("drop --offload-activation-layers 4"), "{err}");
        // Full recompute is refused the same way.
        let full = PlanSpec { recompute: Some(RecomputeKind::Full), ..PlanSpec::default() };
        let run = offloading("llama3.1-8b", 4, full);
        assert_eq!(
            offload_refusals(Engine::Megatron, &run),
            [Refusal::ActivationOffload {
                engine: Engine::Megatron,
                layers,
                mismatch: OffloadMismatch::Recompute { kind: RecomputeKind::Full },
            }]
        );
    }

    #[test]
    fn megatron_refuses_offload_for_a_hybrid_model_whose_stack_ignores_it() {
        let run =
            offloading("nemotronh-8b", 4, PlanSpec { fsdp: Some(true), ..PlanSpec::default() });
        assert_eq!(
            refusals(Engine::Megatron, &run),
            [Refusal::ActivationOffload {
                engine: Engine::Megatron,
                layers: 4,
                mismatch: OffloadMismatch::HybridLayers,
            }]
        );
        let err = export(Engine::Megatron, &run).unwrap_err().to_string();
        assert!(err.contains("hybrid (Mamba) stack"), "{err}");
    }

    #[test]
    fn deepspeed_and_torchtitan_refuse_every_offload_each_saying_why() {
        for recompute in [RecomputeKind::None, RecomputeKind::Full] {
            let plan = PlanSpec { recompute: Some(recompute), ..PlanSpec::default() };
            let run = offloading("llama3.1-8b", 31, plan);
            assert_eq!(
                offload_refusals(Engine::Deepspeed, &run),
                [Refusal::ActivationOffload {
                    engine: Engine::Deepspeed,
                    layers: 31,
                    mismatch: OffloadMismatch::CheckpointInputs,
                }]
            );
        }
        let run =
            offloading("llama3.1-8b", 8, PlanSpec { fsdp: Some(true), ..PlanSpec::default() });
        assert_eq!(
            refusals(Engine::Torchtitan, &run),
            [Refusal::ActivationOffload {
                engine: Engine::Torchtitan,
                layers: 8,
                mismatch: OffloadMismatch::NoOffload,
            }]
        );
        let err = check(Engine::Torchtitan, &run).unwrap_err().to_string();
        assert!(err.contains("offloads no activations"), "{err}");
        let err = check(Engine::Deepspeed, &run).unwrap_err().to_string();
        assert!(err.contains("cpu_checkpointing"), "{err}");
    }

    #[test]
    fn the_search_question_agrees_with_the_refusals() {
        let shapes = [(1, RecomputeKind::None), (1, RecomputeKind::Full), (2, RecomputeKind::None)];
        for engine in Engine::ALL {
            let caps = engine.capabilities();
            for (pp, recompute) in shapes {
                let plan =
                    PlanSpec { pp: Some(pp), recompute: Some(recompute), ..PlanSpec::default() };
                let run = offloading("llama3.1-8b", 4, plan);
                assert_eq!(
                    caps.activation_offload_allowed(pp as u64, recompute, false),
                    offload_refusals(engine, &run).is_empty(),
                    "{engine:?} pp {pp} {recompute:?}"
                );
            }
        }
        let megatron = Engine::Megatron.capabilities();
        assert!(megatron.activation_offload_allowed(1, RecomputeKind::None, false));
        assert!(!megatron.activation_offload_allowed(1, RecomputeKind::None, true));
        assert!(!megatron.activation_offload_allowed(1, RecomputeKind::Op, false));
    }

    #[test]
    fn a_plan_without_offload_is_never_refused_for_it() {
        let plan =
            PlanSpec { pp: Some(2), recompute: Some(RecomputeKind::Full), ..PlanSpec::default() };
        let run = offloading("llama3.1-8b", 0, plan);
        for engine in Engine::ALL {
            assert_eq!(offload_refusals(engine, &run), [], "{engine:?}");
        }
    }
}

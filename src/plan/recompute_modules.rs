//! The modules a selective recompute reruns in the backward (Megatron-LM `--recompute-modules`),
//! as an enum per module and a small set of them.

use serde::{Deserialize, Serialize};

/// One module of a transformer layer that selective recompute can rerun, named as Megatron-LM's
/// `--recompute-modules` names it (megatron/core/transformer/transformer_config.py).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[clap(rename_all = "snake_case")]
pub enum RecomputeModule {
    /// The attention core (scores, softmax, the weighted sum). A fused attention kernel stores
    /// no score matrix, so rerunning it frees nothing more.
    CoreAttn,
    /// The two layer norms: their outputs (the inputs of the QKV and FC1 GEMMs) are rebuilt.
    Layernorm,
    /// The dense MLP of dense-MLP layers: only its input is kept.
    Mlp,
    /// The up projections of latent attention (MLA): the full-width queries, keys and values are
    /// rebuilt from the compressed ones.
    MlaUpProj,
    /// The whole MoE block (router, dispatch, experts, combine): only its input is kept.
    Moe,
    /// The activation function of the routed experts: its output (the FC2 input) is rebuilt.
    MoeAct,
    /// The shared experts of MoE layers: only their input is kept.
    SharedExperts,
}

impl RecomputeModule {
    /// Every module, in a fixed order.
    pub const ALL: [RecomputeModule; 7] = [
        RecomputeModule::CoreAttn,
        RecomputeModule::Layernorm,
        RecomputeModule::Mlp,
        RecomputeModule::MlaUpProj,
        RecomputeModule::Moe,
        RecomputeModule::MoeAct,
        RecomputeModule::SharedExperts,
    ];

    /// The name Megatron-LM and plan files use.
    pub fn name(self) -> &'static str {
        match self {
            RecomputeModule::CoreAttn => "core_attn",
            RecomputeModule::Layernorm => "layernorm",
            RecomputeModule::Mlp => "mlp",
            RecomputeModule::MlaUpProj => "mla_up_proj",
            RecomputeModule::Moe => "moe",
            RecomputeModule::MoeAct => "moe_act",
            RecomputeModule::SharedExperts => "shared_experts",
        }
    }

    /// Its place in [`RecomputeModule::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of recompute modules (at most the seven there are), iterated in [`RecomputeModule::ALL`]
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct RecomputeModules(u8);

impl RecomputeModules {
    /// No module.
    pub const NONE: RecomputeModules = RecomputeModules(0);

    /// Megatron-LM's default for `--recompute-granularity selective`: the attention core only.
    pub const DEFAULT_SELECTIVE: RecomputeModules = RecomputeModules(1);

    /// The set of the given modules (repeats are ignored).
    pub fn of(modules: &[RecomputeModule]) -> RecomputeModules {
        RecomputeModules(modules.iter().fold(0, |bits, module| bits | module.bit()))
    }

    /// Whether `module` is in the set.
    pub fn contains(self, module: RecomputeModule) -> bool {
        self.0 & module.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The modules, in a fixed order.
    pub fn to_vec(self) -> Vec<RecomputeModule> {
        RecomputeModule::ALL.into_iter().filter(|m| self.contains(*m)).collect()
    }

    /// The Megatron-LM spelling, comma-separated (`core_attn,mlp`).
    pub fn names(self) -> String {
        self.to_vec().iter().map(|m| m.name()).collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_module_indexes_its_place_in_all() {
        for (place, module) in RecomputeModule::ALL.into_iter().enumerate() {
            assert_eq!(module.index(), place, "{module:?}");
        }
    }

    #[test]
    fn a_set_keeps_each_module_once_in_a_fixed_order() {
        let set = RecomputeModules::of(&[
            RecomputeModule::MoeAct,
            RecomputeModule::MlaUpProj,
            RecomputeModule::MoeAct,
        ]);
        assert_eq!(set.to_vec(), vec![RecomputeModule::MlaUpProj, RecomputeModule::MoeAct]);
        assert_eq!(set.names(), "mla_up_proj,moe_act");
        assert!(!set.contains(RecomputeModule::Mlp));
        assert_eq!(RecomputeModules::DEFAULT_SELECTIVE.to_vec(), vec![RecomputeModule::CoreAttn]);
        assert!(RecomputeModules::NONE.is_empty());
    }

    #[test]
    fn names_are_megatron_lms() {
        for module in RecomputeModule::ALL {
            let json = serde_json::to_string(&module).unwrap();
            assert_eq!(json, format!("\"{}\"", module.name()));
        }
    }
}

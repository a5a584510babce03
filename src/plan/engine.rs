//! The training engines a plan is run by (and exported to): declared once, here, so the plan,
//! the capability table, the search and the exporters name the same thing.

use serde::{Deserialize, Serialize};

/// A training engine that runs a plan.
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
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// NVIDIA Megatron-LM (`pretrain_gpt.py` arguments, megatron-core).
    Megatron,
    /// PyTorch torchtitan (job config TOML).
    Torchtitan,
    /// Microsoft DeepSpeed (JSON config).
    Deepspeed,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 3] = [Engine::Megatron, Engine::Torchtitan, Engine::Deepspeed];

    /// The engine a plan is run by when none is named: Megatron-LM, which runs every schedule
    /// the published large runs used except ZB-H1 and DualPipe.
    pub const DEFAULT: Engine = Engine::Megatron;

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Megatron => "megatron",
            Engine::Torchtitan => "torchtitan",
            Engine::Deepspeed => "deepspeed",
        }
    }
}

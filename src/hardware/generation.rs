//! The architecture generation of a GPU: which kernels exist for it and whose measurements apply.

use serde::{Deserialize, Serialize};

/// A GPU's architecture generation, as its preset names it (`generation = "hopper"`).
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
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// NVIDIA Volta (V100, sm70).
    Volta,
    /// NVIDIA Ampere (A100, A800, sm80).
    Ampere,
    /// NVIDIA Hopper (H100, H800, H200, sm90).
    Hopper,
    /// NVIDIA Blackwell (B200, GB200, B300, GB300, sm100).
    Blackwell,
    /// AMD CDNA 3 (MI300X).
    Cdna3,
}

impl Generation {
    /// The name used in files.
    pub fn name(self) -> &'static str {
        match self {
            Generation::Volta => "volta",
            Generation::Ampere => "ampere",
            Generation::Hopper => "hopper",
            Generation::Blackwell => "blackwell",
            Generation::Cdna3 => "cdna3",
        }
    }

    /// The name people use (`Hopper`, `CDNA 3`).
    pub fn display_name(self) -> &'static str {
        match self {
            Generation::Volta => "Volta",
            Generation::Ampere => "Ampere",
            Generation::Hopper => "Hopper",
            Generation::Blackwell => "Blackwell",
            Generation::Cdna3 => "CDNA 3",
        }
    }
}

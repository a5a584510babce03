//! The architecture generation of a GPU (Volta, Ampere, Hopper, Blackwell, CDNA 3): what groups
//! GPUs whose kernels and software maturity behave alike, used to pool validation evidence.

use serde::{Deserialize, Serialize};

/// A GPU architecture generation, as a GPU file's `generation` key names it.
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
#[serde(rename_all = "lowercase")]
pub enum GpuGeneration {
    /// NVIDIA V100.
    Volta,
    /// NVIDIA A100, A800.
    Ampere,
    /// NVIDIA H100, H200, H800.
    Hopper,
    /// NVIDIA B200, B300, GB200, GB300.
    Blackwell,
    /// AMD MI300X.
    Cdna3,
}

impl GpuGeneration {
    /// The name people use (`Hopper`, `CDNA 3`).
    pub fn display_name(self) -> &'static str {
        match self {
            GpuGeneration::Volta => "Volta",
            GpuGeneration::Ampere => "Ampere",
            GpuGeneration::Hopper => "Hopper",
            GpuGeneration::Blackwell => "Blackwell",
            GpuGeneration::Cdna3 => "CDNA 3",
        }
    }
}

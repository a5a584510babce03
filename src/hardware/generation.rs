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

    /// Whether the FP8 GEMMs take their operands in any layout, so that a tensor-scaled FP8
    /// tensor needs no transposed copy for the backward GEMMs. Blackwell's do: Transformer
    /// Engine's `is_non_tn_fp8_gemm_supported` (compute capability 10.x, 11.x, 13+) makes
    /// `Float8Tensor.update_usage` drop the transpose there
    /// (NVIDIA/TransformerEngine@7515c0eb `pytorch/utils.py`, `pytorch/tensor/float8_tensor.py`).
    /// Hopper's and Ada's FP8 GEMMs take only the TN layout, so the cast writes the transpose too.
    pub fn fp8_gemm_any_layout(self) -> bool {
        matches!(self, Generation::Blackwell)
    }

    /// FP32 instructions an SM issues in the time of one base-2 exponential (`exp2f` under
    /// `--use_fast_math`, one special-function-unit instruction): 16 special-function results
    /// per SM and clock against 64 FP32 results on Volta and the A100 (compute capability 7.0
    /// and 8.0) and 128 on Hopper and Blackwell (CUDA C++ Programming Guide, "Arithmetic
    /// Instructions" throughput table). CDNA 3 evaluates transcendentals at a quarter of its FP32
    /// rate (AMD CDNA 3 ISA). Blackwell Ultra's doubled exponential rate is not taken.
    pub fn fp32_issues_per_exponential(self) -> f64 {
        match self {
            Generation::Volta | Generation::Ampere | Generation::Cdna3 => 4.0,
            Generation::Hopper | Generation::Blackwell => 8.0,
        }
    }
}

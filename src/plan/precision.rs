//! Numeric training recipes and what each costs: GEMM precision class, bytes of saved GEMM
//! inputs, and the memory traffic of casting an operand into the low-precision format.

use serde::{Deserialize, Serialize};

use crate::hardware::PrecisionClass;

/// A training precision recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// BF16 mixed precision (fp32 master weights and optimizer state).
    Bf16,
    /// FP16 mixed precision with loss scaling.
    Fp16,
    /// FP8 GEMMs with delayed (amax-history) per-tensor scaling, Transformer Engine's default.
    #[serde(alias = "fp8")]
    Fp8Delayed,
    /// FP8 GEMMs with current (just-in-time) per-tensor scaling ("FP8-CS", torchao tensorwise).
    Fp8Current,
    /// FP8 GEMMs with 1x128 / 128x128 block scales (DeepSeek-V3 style, "blockwise").
    Fp8Blockwise,
    /// MXFP8: FP8 with an 8-bit scale per 32 elements, scaled in Blackwell tensor cores.
    Mxfp8,
    /// NVFP4: 4-bit elements with FP8 scales per 16 elements (Blackwell).
    Nvfp4,
}

impl Precision {
    /// Every recipe, in the order the CLI lists them.
    pub const ALL: [Precision; 7] = [
        Precision::Bf16,
        Precision::Fp16,
        Precision::Fp8Delayed,
        Precision::Fp8Current,
        Precision::Fp8Blockwise,
        Precision::Mxfp8,
        Precision::Nvfp4,
    ];

    /// The name used on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
            Precision::Fp8Delayed => "fp8-delayed",
            Precision::Fp8Current => "fp8-current",
            Precision::Fp8Blockwise => "fp8-blockwise",
            Precision::Mxfp8 => "mxfp8",
            Precision::Nvfp4 => "nvfp4",
        }
    }

    /// Parses a command-line name; `fp8` means Transformer Engine's default, delayed scaling.
    pub fn parse(text: &str) -> Option<Precision> {
        let text = text.trim().to_ascii_lowercase();
        if text == "fp8" {
            return Some(Precision::Fp8Delayed);
        }
        Precision::ALL.into_iter().find(|p| p.name() == text)
    }

    /// Tensor-core class of the transformer layers' weight GEMMs. Attention and the logit layer
    /// stay in 16-bit under every recipe (Transformer Engine and torchao leave them out).
    pub fn gemm_class(self) -> PrecisionClass {
        match self {
            Precision::Bf16 | Precision::Fp16 => PrecisionClass::Bits16,
            Precision::Fp8Delayed
            | Precision::Fp8Current
            | Precision::Fp8Blockwise
            | Precision::Mxfp8 => PrecisionClass::Bits8,
            Precision::Nvfp4 => PrecisionClass::Bits4,
        }
    }

    /// Whether the recipe quantizes its weight GEMMs below 16 bits (FP8 or FP4), so that layers
    /// can be kept out of it in BF16.
    pub fn is_low_precision(self) -> bool {
        self.gemm_class() != PrecisionClass::Bits16
    }

    /// Whether the recipe needs the tensor cores' MX block scaling (Blackwell and later).
    pub fn needs_block_scaling(self) -> bool {
        matches!(self, Precision::Mxfp8 | Precision::Nvfp4)
    }

    /// Bytes per element of a GEMM input saved for the backward pass. Low-precision recipes keep
    /// the already-quantized copy (Transformer Engine saves the FP8 tensor, not the BF16 one).
    pub fn saved_gemm_input_bytes(self) -> f64 {
        match self {
            Precision::Bf16 | Precision::Fp16 => 2.0,
            Precision::Fp8Delayed | Precision::Fp8Current => 1.0,
            // One byte per element plus one scale per 128 (blockwise) or 32 (MX) elements.
            Precision::Fp8Blockwise => 1.0 + 4.0 / 128.0,
            Precision::Mxfp8 => 1.0 + 1.0 / 32.0,
            // Half a byte per element plus one FP8 scale per 16 elements.
            Precision::Nvfp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// Whether Transformer Engine quantizes a tensor split over the routed experts one expert at
    /// a time under this recipe (a kernel launch per expert): `split_quantize` has a fused
    /// kernel only for FP8 delayed scaling (`nvte_multi_cast_transpose`) and NVFP4, and none to
    /// run for 16-bit recipes (`transformer_engine/pytorch/csrc/extensions/cast.cpp@v2.12`, also
    /// @v2.16: `multi_tensor_quantize_impl`, `QuantizationMethod`).
    pub fn quantizes_per_expert(self) -> bool {
        matches!(self, Precision::Fp8Current | Precision::Fp8Blockwise | Precision::Mxfp8)
    }

    /// Memory traffic, in bytes per element, of turning a 16-bit GEMM operand into this recipe's
    /// format: read the BF16 value and write the quantized copies the forward and backward GEMMs
    /// need, plus an extra read for recipes that find the scale first. Block-scaled recipes write
    /// a row-wise and a column-wise copy (their scales run along different axes); tensor-scaled
    /// FP8 writes a transposed copy only where the FP8 GEMMs take just the TN layout
    /// (`fp8_any_layout` false: before Blackwell).
    pub fn cast_bytes_per_element(self, fp8_any_layout: bool) -> f64 {
        let quantized = self.saved_gemm_input_bytes();
        let tensorwise_copies = if fp8_any_layout { 1.0 } else { 2.0 };
        match self {
            Precision::Bf16 | Precision::Fp16 => 0.0,
            // Read once, write the quantized copies; the amax comes from history.
            Precision::Fp8Delayed => 2.0 + tensorwise_copies * quantized,
            // An extra read pass computes the current amax before quantizing.
            Precision::Fp8Current => 2.0 + 2.0 + tensorwise_copies * quantized,
            // Block scales are computed in the same pass that quantizes.
            Precision::Fp8Blockwise | Precision::Mxfp8 => 2.0 + 2.0 * quantized,
            // NVFP4 adds a random Hadamard transform (read and write BF16) on weight-gradient inputs
            // and a per-tensor amax pass (NVIDIA's NVFP4 pretraining recipe, arXiv 2509.25149).
            Precision::Nvfp4 => 2.0 + 2.0 + 2.0 * quantized + 4.0,
        }
    }

    /// Bytes of one element of a 16-bit activation or weight (BF16 or FP16).
    pub const ACTIVATION_BYTES: f64 = 2.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_names_and_the_fp8_alias() {
        assert_eq!(Precision::parse("fp8"), Some(Precision::Fp8Delayed));
        assert_eq!(Precision::parse("MXFP8"), Some(Precision::Mxfp8));
        assert_eq!(Precision::parse("int8"), None);
        for precision in Precision::ALL {
            assert_eq!(Precision::parse(precision.name()), Some(precision));
        }
    }

    #[test]
    fn low_precision_saves_fewer_bytes_and_costs_casts() {
        assert!(
            Precision::Fp8Delayed.saved_gemm_input_bytes()
                < Precision::Bf16.saved_gemm_input_bytes()
        );
        assert!(
            Precision::Nvfp4.saved_gemm_input_bytes() < Precision::Mxfp8.saved_gemm_input_bytes()
        );
        for any_layout in [false, true] {
            assert_eq!(Precision::Bf16.cast_bytes_per_element(any_layout), 0.0);
            assert!(
                Precision::Fp8Current.cast_bytes_per_element(any_layout)
                    > Precision::Fp8Delayed.cast_bytes_per_element(any_layout)
            );
        }
    }

    #[test]
    fn tensor_scaled_fp8_writes_its_transpose_only_for_tn_only_gemms() {
        // Hopper: read 2 B, write the 1 B copy and its 1 B transpose (+ the 2 B amax read).
        assert_eq!(Precision::Fp8Delayed.cast_bytes_per_element(false), 4.0);
        assert_eq!(Precision::Fp8Current.cast_bytes_per_element(false), 6.0);
        // Blackwell: one copy serves both layouts.
        assert_eq!(Precision::Fp8Delayed.cast_bytes_per_element(true), 3.0);
        assert_eq!(Precision::Fp8Current.cast_bytes_per_element(true), 5.0);
        // MX blocks run along the GEMM's reduction axis: both copies on every GPU.
        let mx = 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
        assert_eq!(Precision::Mxfp8.cast_bytes_per_element(true), mx);
        assert_eq!(Precision::Mxfp8.cast_bytes_per_element(false), mx);
    }
}

//! Kernel times on one GPU: GEMMs from a shape-aware roofline, fused attention, and streaming
//! (memory-bound) kernels.
//!
//! A GEMM's time is the larger of its compute time at an achievable fraction of peak and its
//! memory time at an achievable fraction of bandwidth. The achievable compute fraction is the
//! GPU's large-GEMM efficiency (a calibrated, documented preset value) times three shape factors:
//! tile quantization (output tiles of 128 x 128 padded at the edges), wave quantization (tiles
//! spread over the SMs in whole waves) and a K-depth factor (the prologue and epilogue of each
//! tile's main loop, `k / (k + K_OVERHEAD)`). This is the "efficiency curve keyed by shape" that
//! Calculon uses, derived from how GEMM kernels are tiled rather than fitted point by point.

use crate::hardware::{Gpu, PrecisionClass};
use crate::units::{Bytes, Flops, FlopsPerSec, Seconds};

/// Output tile edge of the GEMM kernels modelled (CUTLASS/cuBLAS default 128 x 128 tiles).
const TILE: f64 = 128.0;
/// K-depth at which a tile's fixed prologue/epilogue costs as much as its main loop; 64 matches
/// the drop of cuBLAS efficiency for K below ~1k on A100 and H100 in public GEMM sweeps.
const K_OVERHEAD: f64 = 64.0;
/// Sequence length at which a fused attention kernel reaches half its long-sequence efficiency
/// (FlashAttention-2 paper, causal forward throughput vs. sequence length, head dim 128).
const ATTENTION_HALF_SEQ: f64 = 512.0;
/// Head dimension constant of the attention efficiency curve: head dim 64 runs at ~0.83 of head
/// dim 128 (FlashAttention-2 paper, Fig. 4-5).
const ATTENTION_HEAD_DIM_OVERHEAD: f64 = 32.0;
/// FLOPs of a fused attention backward relative to its forward (FlashAttention convention: the
/// backward recomputes the scores, five matmuls against two).
pub const ATTENTION_BACKWARD_FLOP_RATIO: f64 = 2.5;

/// The shape of a GEMM `C[m x n] = A[m x k] * B[k x n]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmShape {
    /// Rows of the output (tokens for a linear layer).
    pub m: f64,
    /// Columns of the output.
    pub n: f64,
    /// Reduction depth.
    pub k: f64,
}

impl GemmShape {
    /// FLOPs of the GEMM (a multiply-add counts two).
    pub fn flops(&self) -> Flops {
        Flops::new(2.0 * self.m * self.n * self.k)
    }
}

fn quantized(extent: f64) -> f64 {
    (extent / TILE).ceil().max(1.0) * TILE
}

/// Fraction of peak a GEMM of this shape reaches, before the GPU's large-GEMM efficiency.
pub fn shape_efficiency(gpu: &Gpu, shape: GemmShape) -> f64 {
    grouped_shape_efficiency(gpu, shape, 1.0)
}

/// Fraction of peak a grouped GEMM reaches: `groups` problems of one shape in one launch (the
/// routed experts of an MoE layer, cuBLAS/CUTLASS grouped GEMM). Each group pads its own edge
/// tiles; the tiles of all groups fill the SMs' waves together.
pub fn grouped_shape_efficiency(gpu: &Gpu, shape: GemmShape, groups: f64) -> f64 {
    let tile = (shape.m / quantized(shape.m)) * (shape.n / quantized(shape.n));
    let tiles = (quantized(shape.m) / TILE) * (quantized(shape.n) / TILE) * groups.max(1.0);
    let waves = tiles / gpu.sm_count() as f64;
    // Under one wave the library splits K across the idle SMs (split-K / stream-K), which recovers
    // occupancy as long as K is deep enough to split.
    let wave = if waves >= 1.0 {
        waves / waves.ceil()
    } else {
        (waves * (shape.k / 512.0).max(1.0)).min(1.0)
    };
    let depth = shape.k / (shape.k + K_OVERHEAD);
    tile * wave * depth
}

/// Time of one GEMM in a precision class, reading `input_bytes`-wide operands and writing a
/// 16-bit output.
pub fn gemm_time(gpu: &Gpu, class: PrecisionClass, shape: GemmShape, input_bytes: f64) -> Seconds {
    grouped_gemm_time(gpu, class, shape, 1.0, input_bytes)
}

/// Time of a grouped GEMM: `groups` GEMMs of `shape` in one kernel.
pub fn grouped_gemm_time(
    gpu: &Gpu,
    class: PrecisionClass,
    shape: GemmShape,
    groups: f64,
    input_bytes: f64,
) -> Seconds {
    let peak = gpu.peak(class).unwrap_or(gpu.peak_bf16());
    let efficiency = gpu.gemm_efficiency(class) * grouped_shape_efficiency(gpu, shape, groups);
    let compute = shape.flops() * groups / (peak * efficiency);
    let bytes =
        ((shape.m * shape.k + shape.k * shape.n) * input_bytes + shape.m * shape.n * 2.0) * groups;
    compute.max(memory_time(gpu, Bytes::new(bytes)))
}

/// Achieved attention throughput for a kernel over sequences of `seq_len` keys with `head_dim`.
fn attention_rate(gpu: &Gpu, seq_len: f64, head_dim: f64, base_efficiency: f64) -> FlopsPerSec {
    let seq_factor = seq_len / (seq_len + ATTENTION_HALF_SEQ);
    let reference = 128.0 / (128.0 + ATTENTION_HEAD_DIM_OVERHEAD);
    let dim_factor = (head_dim / (head_dim + ATTENTION_HEAD_DIM_OVERHEAD)) / reference;
    gpu.peak_bf16() * (base_efficiency * seq_factor * dim_factor.min(1.0))
}

/// Time of a fused attention forward doing `flops` over sequences of `seq_len` keys.
pub fn attention_forward_time(gpu: &Gpu, flops: Flops, seq_len: f64, head_dim: f64) -> Seconds {
    flops / attention_rate(gpu, seq_len, head_dim, gpu.efficiency().attention_forward)
}

/// Time of the matching fused attention backward (`flops` is the forward's FLOPs).
pub fn attention_backward_time(gpu: &Gpu, flops: Flops, seq_len: f64, head_dim: f64) -> Seconds {
    (flops * ATTENTION_BACKWARD_FLOP_RATIO)
        / attention_rate(gpu, seq_len, head_dim, gpu.efficiency().attention_backward)
}

/// Time of a streaming kernel that moves `bytes` through HBM.
pub fn memory_time(gpu: &Gpu, bytes: Bytes) -> Seconds {
    bytes / (gpu.memory_bandwidth() * gpu.efficiency().memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    fn h100() -> Gpu {
        Gpu::from_spec(&presets::gpu("h100-sxm").unwrap()).unwrap()
    }

    #[test]
    fn large_gemms_reach_the_preset_efficiency() {
        let gpu = h100();
        let shape = GemmShape { m: 16384.0, n: 16384.0, k: 16384.0 };
        let factor = shape_efficiency(&gpu, shape);
        // 128 x 128 tiles = 16384 tiles over 132 SMs: 124.1 waves, the last one 12% full.
        assert!((factor - (16384.0 / 132.0) / 125.0 * 16384.0 / (16384.0 + 64.0)).abs() < 1e-12);
        let time = gemm_time(&gpu, PrecisionClass::Bits16, shape, 2.0);
        let achieved = shape.flops() / time;
        let expected = 989.4 * gpu.gemm_efficiency(PrecisionClass::Bits16) * factor;
        assert!((achieved.as_tera() - expected).abs() < 1e-6);
    }

    #[test]
    fn tile_padding_and_shallow_k_cost_efficiency() {
        let gpu = h100();
        // 132 row tiles fill the 132 SMs exactly, so only tile padding and depth differ.
        let m = 132.0 * 128.0;
        let aligned = shape_efficiency(&gpu, GemmShape { m, n: 4096.0, k: 4096.0 });
        let ragged = shape_efficiency(&gpu, GemmShape { m, n: 4160.0, k: 4096.0 });
        let shallow = shape_efficiency(&gpu, GemmShape { m, n: 4096.0, k: 256.0 });
        // 4160 columns occupy 33 tiles of 128 = 4224 columns.
        assert!((ragged / aligned - 4160.0 / 4224.0).abs() < 1e-12);
        assert!((shallow / aligned - (256.0 / 320.0) / (4096.0 / 4160.0)).abs() < 1e-12);
    }

    #[test]
    fn tiny_gemms_are_memory_bound() {
        let gpu = h100();
        let shape = GemmShape { m: 1.0, n: 8192.0, k: 8192.0 };
        let time = gemm_time(&gpu, PrecisionClass::Bits16, shape, 2.0);
        let bytes = Bytes::new((8192.0 + 8192.0 * 8192.0) * 2.0 + 8192.0 * 2.0);
        assert_eq!(time, memory_time(&gpu, bytes));
    }

    #[test]
    fn attention_efficiency_rises_with_sequence_length() {
        let gpu = h100();
        let flops = Flops::new(1e12);
        let short = attention_forward_time(&gpu, flops, 512.0, 128.0);
        let long = attention_forward_time(&gpu, flops, 8192.0, 128.0);
        assert!((short / long - (8192.0 / 8704.0) / 0.5).abs() < 1e-9);
        let backward = attention_backward_time(&gpu, flops, 8192.0, 128.0);
        assert!(backward > long * 2.5);
    }
}

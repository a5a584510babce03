//! Kernel times on one GPU: GEMMs from a shape-aware roofline, fused attention, and streaming
//! (memory-bound) kernels.
//!
//! A GEMM's time is the larger of its compute time at an achievable fraction of peak and its
//! memory time at an achievable fraction of bandwidth. The achievable compute fraction is the
//! GPU's large-GEMM efficiency (a documented preset value) times three shape factors: tile
//! padding (output tiles of 128 x 128 padded at the edges), occupancy (a GEMM of less than one
//! wave of tiles leaves SMs idle unless its K is deep enough to split) and a K-depth factor (the
//! prologue and epilogue of each tile's main loop, `k / (k + gemm_k_overhead)`, a GPU preset
//! value). This is the "efficiency curve keyed by shape" that Calculon uses, derived from how
//! GEMM kernels are tiled.
//!
//! The curve was measured on an H100 SXM and an H200 (`scripts/measure_kernels.py`, figures in
//! `measurements/`, method in `measurements/README.md`), and
//! `tests/integration/kernel_measurements.rs` checks the model against every measured shape.

use crate::hardware::{Gpu, PrecisionClass};
use crate::plan::Precision;
use crate::stack::ExpertLaunches;
use crate::units::{Bytes, Flops, FlopsPerSec, Seconds};

/// Output tile edge of the GEMM kernels modelled (CUTLASS/cuBLAS default 128 x 128 tiles).
const TILE: f64 = 128.0;
/// A grouped GEMM's efficiency relative to a plain GEMM of one group's shape, for the forward
/// product and the input gradient: fitted over the routed-expert kernels of five MoE models
/// measured with `torch._grouped_mm` on H100 and H200 (44 kernels per product and GPU,
/// `grouped_split` in `measurements/`; median |error| 4.2 % forward and 8.4 % input gradient on
/// H100, 3.4 % and 7.6 % on H200). Per-group scheduling and ragged tiles cost this much.
const GROUPED_FORWARD_EFFICIENCY: f64 = 0.94;
/// See [`GROUPED_FORWARD_EFFICIENCY`].
const GROUPED_DATA_GRADIENT_EFFICIENCY: f64 = 0.83;
/// A grouped weight gradient reduces over each group's own rows into a `k x n` output per group
/// (one expert's weights), however few rows the group holds: its main loops run at the plain
/// GEMM's rate for that depth, and each group's output costs one more pass of this many bytes
/// per element through memory, which short main loops cannot hide. Fitted over the same kernels
/// (median |error| 4.5 % on H100 and 2.1 % on H200, p90 13 % and 7 %; one grouped factor for
/// all three products had left the weight gradient up to 3x faster than measured): at 128-512
/// rows per expert it runs at 90-310 TFLOP/s on H100, a fifth to a half of the forward's rate.
pub const GROUPED_WEIGHT_GRADIENT_PASS_BYTES: f64 = 5.5;

/// Which product of a linear layer a GEMM computes. Plain GEMMs run all three alike; a grouped
/// kernel (the routed experts) runs them differently ([`GROUPED_FORWARD_EFFICIENCY`],
/// [`GROUPED_WEIGHT_GRADIENT_PASS_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmRole {
    /// The output from the input and the weights (`x W`); also any batched product of
    /// activations, such as attention scores.
    Forward,
    /// The input's gradient (`dy W^T`) and the backward's other activation products.
    DataGradient,
    /// The weights' gradient (`x^T dy`), reducing over the tokens.
    WeightGradient,
}

/// Speed of FP8 GEMMs with DeepSeek-V3-style block scales (1 x 128 activation blocks, 128 x 128
/// weight blocks) relative to per-tensor scales, on tensor cores that do not scale blocks in
/// hardware (Hopper): the median over 58 linear-layer shapes measured on H100 with cuBLAS through
/// `torch.nn.functional.scaled_mm` was 0.877 (0.75 to 0.99; `measurements/README.md`).
pub const SOFTWARE_BLOCK_SCALED_FP8_SPEED: f64 = 0.88;
/// Speed of MXFP8 GEMMs relative to per-tensor-scaled FP8 on tensor cores that apply the block
/// scales in hardware (Blackwell): the scale factors still stream through shared memory beside
/// each tile. Kernel-only times (operands quantized before the timed loop) of the twelve GEMMs of
/// a layer of hidden 4096 and MLP 16384 at 15,872 tokens, measured by NVIDIA on a B300 with
/// Transformer Engine's `benchmarks/gemm/benchmark_gemm.py --pre-quantize`: 7.161 ms per layer
/// for MXFP8 against 6.812 ms for FP8 with current per-tensor scaling, a ratio of 0.951
/// (NVIDIA/TransformerEngine `docs/examples/gemm_profiling/gemm_profiling.rst`, "Autocast vs
/// Pre-quantized"). Transformer Engine runs FP8 block scaling through the MXFP8 kernels on
/// Blackwell (same file), so both recipes take it there.
pub const HARDWARE_BLOCK_SCALED_FP8_SPEED: f64 = 0.95;
/// Head dimension constant of the attention efficiency curve: head dim 64 runs at ~0.83 of head
/// dim 128 (FlashAttention-2 paper, Fig. 4-5).
const ATTENTION_HEAD_DIM_OVERHEAD: f64 = 32.0;
/// FLOPs of a fused attention backward relative to its forward (FlashAttention convention: the
/// backward recomputes the scores, five matmuls against two).
pub const ATTENTION_BACKWARD_FLOP_RATIO: f64 = 2.5;

/// Host time to launch one kernel eagerly: 6.18 us per one-element kernel, launched in a loop
/// by eager PyTorch on the H100 machine's host (`measurements/h100-sxm-kernels.json`, section
/// `launch`, `add_1_element_eager`). A GPU kernel shorter than this waits on its launch.
pub const EAGER_LAUNCH_SECONDS: f64 = 6.18e-6;
/// The same kernel replayed inside a CUDA graph: 1.16 us (same section,
/// `add_1_element_cuda_graph`).
pub const GRAPHED_LAUNCH_SECONDS: f64 = 1.16e-6;

/// The least time `launches` kernels of the routed experts (their GEMMs, or their casts), each
/// launched on its own by the host as `how` says, take: the host issues them one after another,
/// so however small each kernel, the group lasts at least as long as its launches. Zero where
/// the stack runs the experts as one grouped kernel.
pub fn launch_floor(how: ExpertLaunches, launches: f64) -> Seconds {
    let each = match how {
        ExpertLaunches::OneKernel => return Seconds::ZERO,
        ExpertLaunches::PerExpertEager => EAGER_LAUNCH_SECONDS,
        ExpertLaunches::PerExpertGraphed => GRAPHED_LAUNCH_SECONDS,
    };
    Seconds::new(each * launches.max(0.0))
}

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
    grouped_shape_efficiency(gpu, shape, 1.0, GemmRole::Forward)
}

/// Fraction of peak a grouped GEMM reaches: `groups` problems of one shape in one launch (the
/// routed experts of an MoE layer, cuBLAS/CUTLASS grouped GEMM). Each group pads its own edge
/// tiles; the tiles of all groups fill the SMs together.
pub fn grouped_shape_efficiency(gpu: &Gpu, shape: GemmShape, groups: f64, role: GemmRole) -> f64 {
    let tile = (shape.m / quantized(shape.m)) * (shape.n / quantized(shape.n));
    let tiles = (quantized(shape.m) / TILE) * (quantized(shape.n) / TILE) * groups.max(1.0);
    let waves = tiles / gpu.sm_count() as f64;
    // Partial last waves are not charged: Hopper's cuBLAS schedules tiles stream-K and mixes tile
    // shapes. Sweeping an 8192 x n x 8192 GEMM's width in 128-column steps on H100 moved the rate
    // by up to 20 % but not in step with the waves, and charging whole waves fitted the measured
    // shapes no better (median error 2.8 % against 2.4 %). Under one wave the library splits K
    // across the idle SMs, which recovers occupancy as long as K is deep enough to split.
    let occupancy = (waves * (shape.k / 512.0).max(1.0)).min(1.0);
    let depth = shape.k / (shape.k + gpu.efficiency().gemm_k_overhead);
    let grouping = match role {
        _ if groups <= 1.0 => 1.0,
        GemmRole::Forward => GROUPED_FORWARD_EFFICIENCY,
        GemmRole::DataGradient => GROUPED_DATA_GRADIENT_EFFICIENCY,
        GemmRole::WeightGradient => 1.0,
    };
    tile * occupancy * depth * grouping
}

/// How fast a precision recipe's GEMMs run relative to its class's efficiency on this GPU:
/// block-scaled FP8 pays for its scales, most where the tensor cores do not apply them. The
/// 4-bit class's efficiency is NVFP4's own block-scaled rate, so NVFP4 takes no factor.
pub fn recipe_gemm_speed(gpu: &Gpu, precision: Precision) -> f64 {
    match precision {
        Precision::Fp8Blockwise if !gpu.block_scaled() => SOFTWARE_BLOCK_SCALED_FP8_SPEED,
        Precision::Fp8Blockwise | Precision::Mxfp8 if gpu.block_scaled() => {
            HARDWARE_BLOCK_SCALED_FP8_SPEED
        }
        _ => 1.0,
    }
}

/// Time of one GEMM in a precision class, reading `input_bytes`-wide operands and writing a
/// 16-bit output.
pub fn gemm_time(gpu: &Gpu, class: PrecisionClass, shape: GemmShape, input_bytes: f64) -> Seconds {
    grouped_gemm_time(gpu, class, shape, 1.0, GemmRole::Forward, input_bytes)
}

/// Time of a grouped GEMM: `groups` GEMMs of `shape` in one kernel, computing `role`.
pub fn grouped_gemm_time(
    gpu: &Gpu,
    class: PrecisionClass,
    shape: GemmShape,
    groups: f64,
    role: GemmRole,
    input_bytes: f64,
) -> Seconds {
    let peak = gpu.peak(class).unwrap_or(gpu.peak_bf16());
    let efficiency =
        gpu.gemm_efficiency(class) * grouped_shape_efficiency(gpu, shape, groups, role);
    let output_pass = if groups > 1.0 && role == GemmRole::WeightGradient {
        memory_time(
            gpu,
            Bytes::new(shape.m * shape.n * groups * GROUPED_WEIGHT_GRADIENT_PASS_BYTES),
        )
    } else {
        Seconds::ZERO
    };
    let compute = shape.flops() * groups / (peak * efficiency) + output_pass;
    let bytes =
        ((shape.m * shape.k + shape.k * shape.n) * input_bytes + shape.m * shape.n * 2.0) * groups;
    compute.max(memory_time(gpu, Bytes::new(bytes)))
}

/// Achieved attention throughput for a kernel over sequences of `seq_len` keys with `head_dim`.
fn attention_rate(
    gpu: &Gpu,
    seq_len: f64,
    head_dim: f64,
    base_efficiency: f64,
    half_seq: f64,
) -> FlopsPerSec {
    let seq_factor = seq_len / (seq_len + half_seq);
    let reference = 128.0 / (128.0 + ATTENTION_HEAD_DIM_OVERHEAD);
    let dim_factor = (head_dim / (head_dim + ATTENTION_HEAD_DIM_OVERHEAD)) / reference;
    gpu.peak_bf16() * (base_efficiency * seq_factor * dim_factor.min(1.0))
}

/// Time of a fused attention forward doing `flops` over sequences of `seq_len` keys, for a
/// kernel running at `speed` of the GPU preset's attention curve (the software stack's kernel,
/// [`crate::stack::Stack::attention_speed`]).
pub fn attention_forward_time(
    gpu: &Gpu,
    flops: Flops,
    seq_len: f64,
    head_dim: f64,
    speed: f64,
) -> Seconds {
    let efficiency = gpu.efficiency();
    let (base, half_seq) = (efficiency.attention_forward, efficiency.attention_forward_half_seq);
    flops / (attention_rate(gpu, seq_len, head_dim, base, half_seq) * speed)
}

/// Time of the matching fused attention backward (`flops` is the forward's FLOPs).
pub fn attention_backward_time(
    gpu: &Gpu,
    flops: Flops,
    seq_len: f64,
    head_dim: f64,
    speed: f64,
) -> Seconds {
    let efficiency = gpu.efficiency();
    let (base, half_seq) = (efficiency.attention_backward, efficiency.attention_backward_half_seq);
    (flops * ATTENTION_BACKWARD_FLOP_RATIO)
        / (attention_rate(gpu, seq_len, head_dim, base, half_seq) * speed)
}

/// Time of Mamba-2's chunked scan doing `flops` of matmuls while moving `bytes` through HBM:
/// bound by the slower of its small matmuls (at the GPU's `efficiency.scan` of its BF16 peak)
/// and its memory traffic.
pub fn scan_time(gpu: &Gpu, flops: Flops, bytes: Bytes) -> Seconds {
    (flops / (gpu.peak_bf16() * gpu.efficiency().scan)).max(memory_time(gpu, bytes))
}

/// Time of a kernel that runs on the CUDA cores, not the tensor cores (Mamba-1's selective
/// scan): `issues` FP32 instructions (a fused multiply-add is one) and `exponentials` base-2
/// exponentials, each of which holds the SM for as many FP32 issues as its special-function
/// units are narrower (`Generation::fp32_issues_per_exponential`, 8 without a generation),
/// at the GPU's FP32 peak (`peak.fp32`, which counts a multiply-add as two FLOPs); or its
/// memory traffic, if slower. No efficiency below that issue bound is taken: none was
/// measured. Validation refuses such kernels on a GPU whose preset states no FP32 peak; this
/// prices them by their memory traffic alone there.
pub fn cuda_core_time(gpu: &Gpu, issues: f64, exponentials: f64, bytes: Bytes) -> Seconds {
    let memory = memory_time(gpu, bytes);
    let Some(peak) = gpu.peak_fp32() else { return memory };
    let per_exponential = gpu.generation().map_or(8.0, |g| g.fp32_issues_per_exponential());
    let issued = Flops::new(2.0 * (issues + exponentials * per_exponential));
    (issued / peak).max(memory)
}

/// Fractions of HBM bandwidth that eager PyTorch element-wise code reaches on H100 SXM
/// (`measurements/h100-sxm-kernels.json`, bytes read plus written): a Python RMSNorm
/// (`x * rsqrt(mean(x^2) + eps) * w`) forward 1.98 and backward 0.89 TB/s, SwiGLU 1.08 TB/s, of
/// 3.35 TB/s. A stack that runs its norms and activations this way (no fused kernel, no
/// compile) pays these instead of the fused kernels' `memory` efficiency.
pub const EAGER_NORM_FORWARD_BANDWIDTH: f64 = 0.59;
/// See [`EAGER_NORM_FORWARD_BANDWIDTH`].
pub const EAGER_NORM_BACKWARD_BANDWIDTH: f64 = 0.27;
/// See [`EAGER_NORM_FORWARD_BANDWIDTH`].
pub const EAGER_ACTIVATION_BANDWIDTH: f64 = 0.32;

/// Time of an eager element-wise kernel that moves `bytes` at `fraction` of HBM bandwidth.
pub fn eager_memory_time(gpu: &Gpu, bytes: Bytes, fraction: f64) -> Seconds {
    bytes / (gpu.memory_bandwidth() * fraction)
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
        // Aligned tiles and many waves: only the K-depth factor is left.
        assert!((factor - 16384.0 / (16384.0 + 160.0)).abs() < 1e-12);
        let time = gemm_time(&gpu, PrecisionClass::Bits16, shape, 2.0);
        let achieved = shape.flops() / time;
        let expected = 989.4 * gpu.gemm_efficiency(PrecisionClass::Bits16) * factor;
        assert!((achieved.as_tera() - expected).abs() < 1e-6);
    }

    #[test]
    fn tile_padding_and_shallow_k_cost_efficiency() {
        let gpu = h100();
        let m = 132.0 * 128.0;
        let aligned = shape_efficiency(&gpu, GemmShape { m, n: 4096.0, k: 4096.0 });
        let ragged = shape_efficiency(&gpu, GemmShape { m, n: 4160.0, k: 4096.0 });
        let shallow = shape_efficiency(&gpu, GemmShape { m, n: 4096.0, k: 256.0 });
        // 4160 columns occupy 33 tiles of 128 = 4224 columns.
        assert!((ragged / aligned - 4160.0 / 4224.0).abs() < 1e-12);
        assert!((shallow / aligned - (256.0 / 416.0) / (4096.0 / 4256.0)).abs() < 1e-12);
    }

    #[test]
    fn under_one_wave_only_a_deep_k_recovers_the_idle_sms() {
        let gpu = h100();
        // 8 x 8 = 64 tiles on 132 SMs.
        let shallow = shape_efficiency(&gpu, GemmShape { m: 1024.0, n: 1024.0, k: 512.0 });
        assert!((shallow - 64.0 / 132.0 * 512.0 / 672.0).abs() < 1e-12);
        // K = 2048 splits four ways: 256 work units fill the SMs.
        let deep = shape_efficiency(&gpu, GemmShape { m: 1024.0, n: 1024.0, k: 2048.0 });
        assert!((deep - 2048.0 / 2208.0).abs() < 1e-12);
    }

    #[test]
    fn block_scaled_fp8_pays_for_its_scales_most_without_hardware_block_scaling() {
        let b200 = Gpu::from_spec(&presets::gpu("b200").unwrap()).unwrap();
        assert_eq!(recipe_gemm_speed(&h100(), Precision::Fp8Blockwise), 0.88);
        assert_eq!(recipe_gemm_speed(&h100(), Precision::Fp8Current), 1.0);
        // Blackwell: MXFP8 (and FP8 blocks, which run on its kernels) at 7.161 ms against
        // 6.812 ms for per-tensor FP8 (B300, Transformer Engine's GEMM profiling guide).
        assert!((recipe_gemm_speed(&b200, Precision::Mxfp8) - 6.812 / 7.161).abs() < 0.005);
        assert_eq!(recipe_gemm_speed(&b200, Precision::Fp8Blockwise), 0.95);
        for tensor_scaled in [Precision::Fp8Current, Precision::Fp8Delayed, Precision::Bf16] {
            assert_eq!(recipe_gemm_speed(&b200, tensor_scaled), 1.0);
        }
        // NVFP4's block scaling is in the 4-bit efficiency itself.
        assert_eq!(recipe_gemm_speed(&b200, Precision::Nvfp4), 1.0);
    }

    #[test]
    fn grouped_gemms_run_below_plain_ones_of_the_same_shape() {
        let gpu = h100();
        let shape = GemmShape { m: 2048.0, n: 1536.0, k: 2048.0 };
        let efficiency = |groups, role| grouped_shape_efficiency(&gpu, shape, groups, role);
        let plain = efficiency(1.0, GemmRole::Forward);
        for role in [GemmRole::Forward, GemmRole::DataGradient, GemmRole::WeightGradient] {
            assert_eq!(efficiency(1.0, role), plain, "a plain GEMM runs every role alike");
        }
        assert!((efficiency(16.0, GemmRole::Forward) / plain - 0.94).abs() < 1e-12);
        assert!((efficiency(16.0, GemmRole::DataGradient) / plain - 0.83).abs() < 1e-12);
        assert_eq!(efficiency(16.0, GemmRole::WeightGradient), plain);
    }

    #[test]
    fn a_grouped_weight_gradient_pays_a_pass_over_each_groups_output() {
        // Qwen3-30B-A3B's expert fc1 at ep 1, 4k tokens: 128 experts of 256 rows, 2048 x 1536.
        let gpu = h100();
        let (groups, rows) = (128.0, 256.0);
        let shape = GemmShape { m: 2048.0, n: 1536.0, k: rows };
        let time = grouped_gemm_time(
            &gpu,
            PrecisionClass::Bits16,
            shape,
            groups,
            GemmRole::WeightGradient,
            2.0,
        );
        let plain = shape.flops() * groups
            / (gpu.peak_bf16()
                * gpu.gemm_efficiency(PrecisionClass::Bits16)
                * shape_efficiency(&gpu, shape));
        let pass = memory_time(&gpu, Bytes::new(2048.0 * 1536.0 * groups * 5.5));
        assert!((time - (plain + pass)).value().abs() < 1e-15);
        // The output pass (2.2 GB at 2.68 TB/s, 0.83 ms) is larger than the main loops (about
        // 0.5 ms at 0.62 of the depth-256 rate): the measured kernel took 1.30 ms, 158 TFLOP/s.
        assert!(pass > plain);
        let rate = (shape.flops() * groups / time).as_tera();
        assert!((140.0..230.0).contains(&rate), "{rate} TFLOP/s");
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
        let short = attention_forward_time(&gpu, flops, 384.0, 128.0, 1.0);
        let long = attention_forward_time(&gpu, flops, 8192.0, 128.0, 1.0);
        assert!((short / long - (8192.0 / 8576.0) / 0.5).abs() < 1e-9);
        // The backward fills the GPU later: half its long-sequence rate at 1536 tokens.
        let backward_short = attention_backward_time(&gpu, flops, 1536.0, 128.0, 1.0);
        let backward_long = attention_backward_time(&gpu, flops, 8192.0, 128.0, 1.0);
        assert!((backward_short / backward_long - (8192.0 / 9728.0) / 0.5).abs() < 1e-9);
    }
}

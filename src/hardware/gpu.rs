//! One GPU: peak compute per precision, memory size and bandwidth, and achievable efficiencies.

use serde::{Deserialize, Serialize};

use super::Generation;
use super::attention_ratios::{AttentionRatioSpec, AttentionRatios};

use super::interconnect::InterconnectSpec;
use crate::units::{
    Bytes, BytesPerSec, FlopsPerSec, Watts, parse_bandwidth, parse_bytes, parse_flops_rate,
    parse_power,
};
use crate::violation::{Collector, Violations};

/// Dense tensor-core peaks as written in a preset (`"989.4 TFLOP/s"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PeakSpec {
    /// BF16 dense peak (for GPUs without BF16, the FP16 figure).
    pub bf16: String,
    /// FP16 dense peak; defaults to the BF16 figure.
    #[serde(default)]
    pub fp16: Option<String>,
    /// FP8 dense peak, absent when the GPU has no FP8 tensor cores.
    #[serde(default)]
    pub fp8: Option<String>,
    /// FP4 dense peak (NVFP4/MXFP4), absent when the GPU has none.
    #[serde(default)]
    pub fp4: Option<String>,
    /// Whether the tensor cores scale MX blocks in hardware (Blackwell and later).
    #[serde(default)]
    pub block_scaled: bool,
    /// FP32 peak of the CUDA cores (not the tensor cores; a fused multiply-add counts two):
    /// what kernels of element-wise recurrences run at, such as Mamba-1's selective scan.
    /// Without it, such layers cannot be priced on this GPU.
    #[serde(default)]
    pub fp32: Option<String>,
}

/// Achievable fractions of peak, as written in a preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EfficiencySpec {
    /// Factor applied to every GEMM and attention efficiency below (default 1): the one number per
    /// GPU that `meshplan calibrate` fits against published runs.
    #[serde(default)]
    pub calibration: Option<f64>,
    /// The GPU preset of the same tensor-core silicon (`h100-sxm` for an H200) whose fitted
    /// `calibration` this one takes when no published run of its own calibrates it: how presets
    /// without runs are set, and what a leave-one-source-out fit gives a GPU whose only runs are
    /// the held-out source's.
    #[serde(default)]
    pub calibrated_as: Option<String>,
    /// Fraction of the 16-bit peak a large, well-shaped GEMM reaches.
    pub gemm_16bit: f64,
    /// Fraction of the FP8 peak a large FP8 GEMM reaches.
    #[serde(default)]
    pub gemm_8bit: Option<f64>,
    /// Fraction of the FP4 peak a large FP4 GEMM reaches.
    #[serde(default)]
    pub gemm_4bit: Option<f64>,
    /// Fraction of the 16-bit peak a long-sequence fused attention forward reaches.
    pub attention_forward: f64,
    /// Same for the backward, counting its FLOPs as 2.5x the forward (FlashAttention convention).
    pub attention_backward: f64,
    /// Fraction of the memory bandwidth a streaming (element-wise) kernel reaches.
    pub memory: f64,
    /// Reduction depth K at which a GEMM tile's fixed prologue and epilogue cost as much as its
    /// main loop: the efficiency curve's `k / (k + gemm_k_overhead)` (default 64, public cuBLAS
    /// sweeps on A100).
    #[serde(default)]
    pub gemm_k_overhead: Option<f64>,
    /// Keys per sequence at which the fused attention forward reaches half its long-sequence
    /// efficiency (default 512, FlashAttention-2 on A100).
    #[serde(default)]
    pub attention_forward_half_seq: Option<f64>,
    /// Same for the attention backward (default 512).
    #[serde(default)]
    pub attention_backward_half_seq: Option<f64>,
    /// MXFP8 fused attention's speed against BF16's at the same shape, per measured head
    /// dimension and sequence length (cuDNN's kernels, as Transformer Engine runs them under an
    /// MXFP8 recipe with FP8 dot-product attention on). A head dimension not listed is priced
    /// at BF16's speed. Kernel ratios, not scaled by `calibration`.
    #[serde(default)]
    pub mxfp8_attention: Option<Vec<AttentionRatioSpec>>,
    /// Fraction of the 16-bit peak Mamba-2's chunked scan (mamba_ssm's Triton kernels) reaches
    /// (default [`DEFAULT_SCAN_EFFICIENCY`], derived on Hopper). A kernel figure, not scaled by
    /// `calibration`.
    #[serde(default)]
    pub scan: Option<f64>,
}

/// Default of `gemm_k_overhead`: cuBLAS efficiency on A100 falls below ~1k of K in public sweeps.
pub const DEFAULT_GEMM_K_OVERHEAD: f64 = 64.0;
/// Default of `scan`: the fraction of the BF16 tensor-core peak Mamba-2's chunked scan reaches as
/// mamba_ssm's five Triton kernels on Hopper. TileLang's fused chunk-scan forward runs at 126-136
/// TFLOP/s on an H800 (`tile-ai/tilelang` `benchmark/mamba2/README.md`, b 8, 80 heads, Q 256, P
/// 64, N 128, 1K-32K tokens), and fusing the five kernels into one is 1.50-2.51x faster than the
/// unfused ones on A100 and H100 (PyTorch blog, "Accelerating Mamba2 with Kernel Fusion"): 130
/// TFLOP/s over the middle speedup, 2.0, is 65 TFLOP/s, 0.066 of 989. vLLM's copy of the same
/// five kernels runs at about 68-82 TFLOP/s on one H100 (vllm-project/vllm PR 27299,
/// "microbenchmark", "Original" column, granite-4.0-h-small shapes, in meshplan's FLOP count).
pub const DEFAULT_SCAN_EFFICIENCY: f64 = 0.066;
/// Default of the attention half-efficiency sequence lengths (FlashAttention-2 paper, causal
/// throughput against sequence length on A100, head dim 128).
pub const DEFAULT_ATTENTION_HALF_SEQ: f64 = 512.0;

/// A GPU as written in a preset file. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Short name used on the command line (`h100-sxm`).
    pub name: String,
    /// Architecture generation (`hopper`): which attention kernels a software stack runs on it.
    /// Without it, every stack's attention is priced at this preset's own attention curve.
    #[serde(default)]
    pub generation: Option<Generation>,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Where the figures come from.
    #[serde(default)]
    pub source: Option<String>,
    /// Memory capacity usable by the program (`"80 GB"`).
    pub memory: String,
    /// Memory bandwidth (`"3.35 TB/s"`).
    pub memory_bandwidth: String,
    /// Board power at full load (`"700 W"`, the vendor's maximum TGP/TDP): what a whole run's
    /// energy counts. Without it, energy is not priced.
    #[serde(default)]
    pub power: Option<String>,
    /// Streaming multiprocessors (compute units): how many GEMM tiles run at once.
    pub sm_count: i64,
    /// Tensor-core peaks.
    pub peak: PeakSpec,
    /// Achievable fractions of peak.
    pub efficiency: EfficiencySpec,
    /// The links of the typical system this GPU is sold in.
    pub interconnect: InterconnectSpec,
}

/// The numeric class a GEMM runs in, which picks its peak and efficiency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PrecisionClass {
    /// BF16 or FP16 tensor cores.
    Bits16,
    /// FP8 tensor cores (per-tensor or block-scaled).
    Bits8,
    /// FP4 tensor cores (NVFP4, MXFP4).
    Bits4,
}

impl PrecisionClass {
    /// The short name of the class's dense peak: `bf16`, `fp8` or `fp4`.
    pub fn name(self) -> &'static str {
        match self {
            PrecisionClass::Bits16 => "bf16",
            PrecisionClass::Bits8 => "fp8",
            PrecisionClass::Bits4 => "fp4",
        }
    }
}

/// Validated efficiencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Efficiency {
    /// Large-GEMM fraction of the 16-bit peak.
    pub gemm_16bit: f64,
    /// Large-GEMM fraction of the FP8 peak.
    pub gemm_8bit: f64,
    /// Large-GEMM fraction of the FP4 peak.
    pub gemm_4bit: f64,
    /// Attention forward fraction of the 16-bit peak.
    pub attention_forward: f64,
    /// Attention backward fraction of the 16-bit peak (2.5x forward FLOPs).
    pub attention_backward: f64,
    /// Streaming fraction of memory bandwidth.
    pub memory: f64,
    /// K depth at which a GEMM tile's prologue and epilogue cost as much as its main loop.
    pub gemm_k_overhead: f64,
    /// Sequence length at which the attention forward reaches half its long-sequence rate.
    pub attention_forward_half_seq: f64,
    /// Same for the attention backward.
    pub attention_backward_half_seq: f64,
    /// Fraction of the 16-bit peak Mamba-2's chunked scan reaches.
    pub scan: f64,
}

/// A validated GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    name: String,
    display_name: String,
    generation: Option<Generation>,
    memory: Bytes,
    memory_bandwidth: BytesPerSec,
    power: Option<Watts>,
    sm_count: u64,
    peak_bf16: FlopsPerSec,
    peak_fp16: FlopsPerSec,
    peak_fp8: Option<FlopsPerSec>,
    peak_fp4: Option<FlopsPerSec>,
    peak_fp32: Option<FlopsPerSec>,
    block_scaled: bool,
    efficiency: Efficiency,
    mxfp8_attention: AttentionRatios,
}

fn positive(collector: &mut Collector, field: &str, value: f64) -> f64 {
    if !(value >= 0.0 && value.is_finite()) {
        collector.add(
            format!("gpu.efficiency.{field}"),
            value,
            "must be a finite number of elements, zero or more",
            "leave it unset for the default or use a measured value (measurements/README.md)",
        );
    }
    value
}

fn fraction(collector: &mut Collector, field: &str, value: f64) -> f64 {
    if !(value > 0.0 && value <= 1.0) {
        collector.add(
            format!("gpu.efficiency.{field}"),
            value,
            "must be a fraction in (0, 1]",
            "efficiencies are achieved/peak ratios, e.g. 0.75",
        );
        return 1.0;
    }
    value
}

impl Gpu {
    /// Checks a spec and builds the GPU; the interconnect is validated by [`super::Cluster`].
    pub fn from_spec(spec: &GpuSpec) -> Result<Gpu, Violations> {
        let mut collector = Collector::default();
        let mut quantity =
            |field: &str, text: &str, result: Result<f64, crate::units::QuantityError>| {
                let (range, words) = match field {
                    "memory" => (crate::limits::GPU_MEMORY, "1 GB to 100 TB"),
                    "memory_bandwidth" => (crate::limits::BANDWIDTH, "1 MB/s to 1 PB/s"),
                    "power" => (crate::limits::GPU_POWER, "10 W to 10 kW"),
                    _ => (crate::limits::PEAK_FLOPS, "1 TFLOP/s to 1 EFLOP/s"),
                };
                let checked = result.and_then(|value| {
                    if crate::limits::within(value, range) {
                        Ok(value)
                    } else {
                        Err(crate::units::QuantityError::OutOfRange {
                            text: format!("{value:e}"),
                            range: words,
                        })
                    }
                });
                checked.unwrap_or_else(|err| {
                    collector.add(
                        format!("gpu.{field}"),
                        text,
                        err.to_string(),
                        format!("a number and a unit, within {words}"),
                    );
                    1.0
                })
            };
        let memory = quantity("memory", &spec.memory, parse_bytes(&spec.memory).map(|b| b.value()));
        let bandwidth = quantity(
            "memory_bandwidth",
            &spec.memory_bandwidth,
            parse_bandwidth(&spec.memory_bandwidth).map(|b| b.value()),
        );
        let power = spec
            .power
            .as_ref()
            .map(|text| quantity("power", text, parse_power(text).map(|w| w.value())));
        let bf16 = quantity(
            "peak.bf16",
            &spec.peak.bf16,
            parse_flops_rate(&spec.peak.bf16).map(|f| f.value()),
        );
        // A peak the preset may leave out: parsed where given.
        let mut optional_peak = |field: &str, text: &Option<String>| {
            text.as_ref()
                .map(|text| quantity(field, text, parse_flops_rate(text).map(|f| f.value())))
        };
        let fp16 = optional_peak("peak.fp16", &spec.peak.fp16).unwrap_or(bf16);
        let fp8 = optional_peak("peak.fp8", &spec.peak.fp8);
        let fp4 = optional_peak("peak.fp4", &spec.peak.fp4);
        let fp32 = optional_peak("peak.fp32", &spec.peak.fp32);
        let eff = &spec.efficiency;
        let scale = eff.calibration.unwrap_or(1.0);
        if !(scale > 0.0 && scale.is_finite()) {
            collector.add(
                "gpu.efficiency.calibration",
                scale,
                "must be a positive factor",
                "leave it unset (1.0) or use the value `meshplan calibrate` prints",
            );
        }
        let mut scaled = |field: &str, value: f64| fraction(&mut collector, field, value * scale);
        let efficiency = Efficiency {
            gemm_16bit: scaled("gemm_16bit", eff.gemm_16bit),
            gemm_8bit: scaled("gemm_8bit", eff.gemm_8bit.unwrap_or(eff.gemm_16bit)),
            gemm_4bit: scaled("gemm_4bit", eff.gemm_4bit.unwrap_or(eff.gemm_16bit)),
            attention_forward: scaled("attention_forward", eff.attention_forward),
            attention_backward: scaled("attention_backward", eff.attention_backward),
            memory: fraction(&mut collector, "memory", eff.memory),
            gemm_k_overhead: positive(
                &mut collector,
                "gemm_k_overhead",
                eff.gemm_k_overhead.unwrap_or(DEFAULT_GEMM_K_OVERHEAD),
            ),
            attention_forward_half_seq: positive(
                &mut collector,
                "attention_forward_half_seq",
                eff.attention_forward_half_seq.unwrap_or(DEFAULT_ATTENTION_HALF_SEQ),
            ),
            attention_backward_half_seq: positive(
                &mut collector,
                "attention_backward_half_seq",
                eff.attention_backward_half_seq.unwrap_or(DEFAULT_ATTENTION_HALF_SEQ),
            ),
            scan: fraction(&mut collector, "scan", eff.scan.unwrap_or(DEFAULT_SCAN_EFFICIENCY)),
        };
        let mxfp8_attention = AttentionRatios::from_spec(
            "gpu.efficiency.mxfp8_attention",
            eff.mxfp8_attention.as_deref().unwrap_or_default(),
            &mut collector,
        );
        if spec.sm_count <= 0 {
            collector.add(
                "gpu.sm_count",
                spec.sm_count,
                "must be positive",
                "e.g. 132 for H100 SXM",
            );
        }
        collector.finish()?;
        Ok(Gpu {
            name: spec.name.clone(),
            display_name: spec.display_name.clone().unwrap_or_else(|| spec.name.clone()),
            generation: spec.generation,
            memory: Bytes::new(memory),
            memory_bandwidth: BytesPerSec::new(bandwidth),
            power: power.map(Watts::new),
            sm_count: spec.sm_count as u64,
            peak_bf16: FlopsPerSec::new(bf16),
            peak_fp16: FlopsPerSec::new(fp16),
            peak_fp8: fp8.map(FlopsPerSec::new),
            peak_fp4: fp4.map(FlopsPerSec::new),
            peak_fp32: fp32.map(FlopsPerSec::new),
            block_scaled: spec.peak.block_scaled,
            efficiency,
            mxfp8_attention,
        })
    }

    /// Short name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Architecture generation, when the preset names it.
    pub fn generation(&self) -> Option<Generation> {
        self.generation
    }
    /// Human-readable name.
    pub fn display_name(&self) -> &str {
        &self.display_name
    }
    /// Memory capacity.
    pub fn memory(&self) -> Bytes {
        self.memory
    }
    /// Memory bandwidth.
    pub fn memory_bandwidth(&self) -> BytesPerSec {
        self.memory_bandwidth
    }
    /// Board power at full load, when the preset states it.
    pub fn power(&self) -> Option<Watts> {
        self.power
    }
    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> u64 {
        self.sm_count
    }
    /// Dense BF16 peak.
    pub fn peak_bf16(&self) -> FlopsPerSec {
        self.peak_bf16
    }
    /// Dense FP16 peak.
    pub fn peak_fp16(&self) -> FlopsPerSec {
        self.peak_fp16
    }
    /// Dense FP8 peak, if the GPU has FP8 tensor cores.
    pub fn peak_fp8(&self) -> Option<FlopsPerSec> {
        self.peak_fp8
    }
    /// Dense FP4 peak, if the GPU has FP4 tensor cores.
    pub fn peak_fp4(&self) -> Option<FlopsPerSec> {
        self.peak_fp4
    }
    /// FP32 peak of the CUDA cores, if the preset states it.
    pub fn peak_fp32(&self) -> Option<FlopsPerSec> {
        self.peak_fp32
    }
    /// Whether MX block scaling runs in the tensor cores.
    pub fn block_scaled(&self) -> bool {
        self.block_scaled
    }
    /// Achievable efficiencies.
    pub fn efficiency(&self) -> &Efficiency {
        &self.efficiency
    }

    /// MXFP8 fused attention's forward and backward speed against BF16's for queries of
    /// `head_dim` over `seq` keys; `None` where this GPU's preset has no measurement at that head
    /// dimension.
    pub fn mxfp8_attention_speed(&self, head_dim: u64, seq: f64) -> Option<(f64, f64)> {
        self.mxfp8_attention.speed(head_dim, seq)
    }

    /// The dense peak of a precision class.
    pub fn peak(&self, class: PrecisionClass) -> Option<FlopsPerSec> {
        match class {
            PrecisionClass::Bits16 => Some(self.peak_bf16),
            PrecisionClass::Bits8 => self.peak_fp8,
            PrecisionClass::Bits4 => self.peak_fp4,
        }
    }

    /// The large-GEMM efficiency of a precision class.
    pub fn gemm_efficiency(&self, class: PrecisionClass) -> f64 {
        match class {
            PrecisionClass::Bits16 => self.efficiency.gemm_16bit,
            PrecisionClass::Bits8 => self.efficiency.gemm_8bit,
            PrecisionClass::Bits4 => self.efficiency.gemm_4bit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    #[test]
    fn every_bad_efficiency_field_is_reported_at_once() {
        let mut spec = presets::gpu("h100-sxm").unwrap();
        spec.efficiency.calibration = Some(-1.0);
        spec.efficiency.gemm_k_overhead = Some(-5.0);
        spec.efficiency.attention_backward_half_seq = Some(f64::NAN);
        spec.efficiency.scan = Some(1.5);
        let message = Gpu::from_spec(&spec).unwrap_err().to_string();
        for field in [
            "gpu.efficiency.calibration",
            "gpu.efficiency.gemm_k_overhead",
            "gpu.efficiency.attention_backward_half_seq",
            "gpu.efficiency.scan = 1.5",
        ] {
            assert!(message.contains(field), "{field} missing from: {message}");
        }
    }

    #[test]
    fn every_optional_peak_is_a_rate_where_given() {
        let mut spec = presets::gpu("h100-sxm").unwrap();
        let gpu = Gpu::from_spec(&spec).unwrap();
        assert_eq!(gpu.peak_fp32(), Some(FlopsPerSec::new(67e12)));
        assert_eq!(gpu.peak_fp16(), gpu.peak_bf16());
        spec.peak.fp16 = None;
        spec.peak.fp32 = None;
        let gpu = Gpu::from_spec(&spec).unwrap();
        assert_eq!((gpu.peak_fp16(), gpu.peak_fp32()), (gpu.peak_bf16(), None));
        spec.peak.fp8 = Some("fast".into());
        spec.peak.fp32 = Some("67 TB/s".into());
        let message = Gpu::from_spec(&spec).unwrap_err().to_string();
        for field in ["gpu.peak.fp8 = fast", "gpu.peak.fp32 = 67 TB/s"] {
            assert!(message.contains(field), "{field} missing from: {message}");
        }
    }

    #[test]
    fn a_board_power_is_a_power_in_its_range() {
        let mut spec = presets::gpu("h100-sxm").unwrap();
        assert_eq!(Gpu::from_spec(&spec).unwrap().power(), Some(Watts::new(700.0)));
        spec.power = Some("700 V".into());
        let message = Gpu::from_spec(&spec).unwrap_err().to_string();
        assert!(message.contains("gpu.power = 700 V: `700 V` has unit `V`"), "{message}");
        spec.power = Some("20 kW".into());
        let message = Gpu::from_spec(&spec).unwrap_err().to_string();
        assert!(message.contains("outside 10 W to 10 kW"), "{message}");
        spec.power = None;
        assert_eq!(Gpu::from_spec(&spec).unwrap().power(), None);
    }

    #[test]
    fn shape_constants_default_to_the_a100_era_values() {
        let mut spec = presets::gpu("a100-80gb").unwrap();
        spec.efficiency.gemm_k_overhead = None;
        let gpu = Gpu::from_spec(&spec).unwrap();
        assert_eq!(gpu.efficiency().gemm_k_overhead, DEFAULT_GEMM_K_OVERHEAD);
        assert_eq!(gpu.efficiency().attention_forward_half_seq, DEFAULT_ATTENTION_HALF_SEQ);
        let hopper = Gpu::from_spec(&presets::gpu("h100-sxm").unwrap()).unwrap();
        assert_eq!(hopper.efficiency().gemm_k_overhead, 160.0);
        assert_eq!(hopper.efficiency().attention_backward_half_seq, 1536.0);
    }
}

//! The breakdowns a priced run is reported in: memory per pipeline stage by what it holds, a
//! step's time by where it goes, and the throughput derived from it. The cost model and the
//! simulator fill them; [`crate::estimate`] assembles them into an `Estimate` and re-exports them.

use serde::Serialize;

use crate::units::{Bytes, Seconds};

/// Per-GPU memory of one pipeline stage, by what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    /// Model weights in their training dtype (BF16), after TP/PP/FSDP sharding.
    pub weights: Bytes,
    /// Gradient buffers (FP32 main grads in Megatron, sharded under ZeRO-2/3).
    pub gradients: Bytes,
    /// FP32 master weights and Adam moments, sharded under ZeRO-1 and above.
    pub optimizer_states: Bytes,
    /// Activations stored for the backward pass of every micro-batch in flight.
    pub activations: Bytes,
    /// Logits and loss buffers on the last stage.
    pub logits: Bytes,
    /// Transient buffers: gathered FSDP parameters, communication buckets, workspaces.
    pub buffers: Bytes,
    /// Allocator fragmentation allowance.
    pub fragmentation: Bytes,
}

impl MemoryBreakdown {
    /// The sum of all parts: the predicted peak allocated memory.
    pub fn total(&self) -> Bytes {
        self.weights
            + self.gradients
            + self.optimizer_states
            + self.activations
            + self.logits
            + self.buffers
            + self.fragmentation
    }
}

/// Memory of one pipeline stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageMemory {
    /// Pipeline stage index (0 = first).
    pub stage: u64,
    /// What the stage holds.
    pub breakdown: MemoryBreakdown,
}

/// Where one training step's time goes. The parts add up to `step_time`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct TimeBreakdown {
    /// Forward compute of all micro-batches on the critical stage.
    pub forward: Seconds,
    /// Backward compute of all micro-batches on the critical stage.
    pub backward: Seconds,
    /// Forward work recomputed during the backward.
    pub recompute: Seconds,
    /// Tensor-parallel communication not hidden under compute.
    pub tp_exposed: Seconds,
    /// Context-parallel communication not hidden under attention.
    pub cp_exposed: Seconds,
    /// Expert-parallel all-to-all (token dispatch and combine) not hidden under compute.
    pub ep_exposed: Seconds,
    /// Pipeline send/receive time on the critical path.
    pub pp_exposed: Seconds,
    /// Data-parallel (gradient, ZeRO, FSDP) communication not hidden under compute.
    pub dp_exposed: Seconds,
    /// Pipeline fill and drain (bubble).
    pub pipeline_bubble: Seconds,
    /// Optimizer step and gradient-norm work.
    pub optimizer: Seconds,
}

impl TimeBreakdown {
    /// The step time: the sum of the parts.
    pub fn step_time(&self) -> Seconds {
        self.forward
            + self.backward
            + self.recompute
            + self.tp_exposed
            + self.cp_exposed
            + self.ep_exposed
            + self.pp_exposed
            + self.dp_exposed
            + self.pipeline_bubble
            + self.optimizer
    }

    /// The parts with their report names, in display order.
    pub fn parts(&self) -> [(&'static str, Seconds); 10] {
        [
            ("forward compute", self.forward),
            ("backward compute", self.backward),
            ("recompute", self.recompute),
            ("TP comm (exposed)", self.tp_exposed),
            ("CP comm (exposed)", self.cp_exposed),
            ("EP comm (exposed)", self.ep_exposed),
            ("PP comm (exposed)", self.pp_exposed),
            ("DP comm (exposed)", self.dp_exposed),
            ("pipeline bubble", self.pipeline_bubble),
            ("optimizer step", self.optimizer),
        ]
    }
}

/// Throughput figures derived from the step time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Throughput {
    /// Seconds per optimizer step.
    pub step_time: Seconds,
    /// Training tokens per second per GPU.
    pub tokens_per_sec_per_gpu: f64,
    /// Model FLOPs (no recompute, causal attention, logit layer included) per second per GPU,
    /// in TFLOP/s.
    pub model_tflops_per_gpu: f64,
    /// Model FLOPs utilization against [`Throughput::peak_tflops`], in percent.
    pub mfu_pct: f64,
    /// Hardware FLOPs utilization (recomputation counted) against the same peak, in percent.
    pub hfu_pct: f64,
    /// The peak MFU and HFU are taken against, in TFLOP/s: the GPU's dense peak at the precision
    /// the plan's GEMMs run in (BF16 for bf16 and fp16, FP8 for the fp8 recipes, FP4 for nvfp4),
    /// as published tables quote it.
    pub peak_tflops: f64,
    /// Which dense peak that is: `bf16`, `fp8` or `fp4`.
    pub peak_basis: &'static str,
}

//! The breakdowns a priced run is reported in: memory per pipeline stage by what it holds, a
//! step's time by where it goes, and the throughput derived from it. The cost model and the
//! simulator fill them; [`crate::estimate`] assembles them into an `Estimate` and re-exports them.

use serde::Serialize;

use crate::units::{Bytes, Seconds};

/// Per-GPU memory of one pipeline stage, by what it holds. The parts sum, in three nested
/// figures, to what the three usual counters read ([`MemoryCounter`]): the tensors the caching
/// allocator has handed out ([`MemoryBreakdown::allocated`]), plus what it keeps cached
/// ([`MemoryBreakdown::reserved`]), plus what lives outside it ([`MemoryBreakdown::device_total`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct MemoryBreakdown {
    /// Model weights in their training dtype (BF16), after TP/PP/FSDP sharding.
    pub weights: Bytes,
    /// Gradient buffers (FP32 main grads in Megatron, BF16 without `grad_reduce_in_fp32`,
    /// sharded under ZeRO-2/3).
    pub gradients: Bytes,
    /// FP32 master weights and Adam moments, sharded under ZeRO-1 and above.
    pub optimizer_states: Bytes,
    /// Activations stored for the backward pass of every micro-batch in flight.
    pub activations: Bytes,
    /// Logits and loss buffers on the last stage.
    pub logits: Bytes,
    /// Transient buffers: gathered FSDP parameters and unsharded gradients.
    pub buffers: Bytes,
    /// cuBLAS and Transformer Engine GEMM workspaces, allocated through the caching allocator.
    pub workspaces: Bytes,
    /// The caching allocator's reserved-over-allocated overhead: block rounding and cached free
    /// blocks (what `max_memory_reserved` adds to `max_memory_allocated`).
    pub fragmentation: Bytes,
    /// The CUDA context and loaded kernel modules: outside the allocator, seen by nvidia-smi.
    pub cuda_context: Bytes,
    /// NCCL communicator buffers (cudaMalloc'ed by NCCL): outside the allocator.
    pub nccl_buffers: Bytes,
}

/// Which counter a memory figure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryCounter {
    /// `torch.cuda.max_memory_allocated` (or `max_active`): the tensors alone.
    Allocated,
    /// `torch.cuda.max_memory_reserved`: the tensors and the allocator's cached blocks.
    Reserved,
    /// nvidia-smi's used memory: everything the process holds on the device.
    DeviceTotal,
}

impl MemoryCounter {
    /// The counter's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            MemoryCounter::Allocated => "allocated",
            MemoryCounter::Reserved => "reserved",
            MemoryCounter::DeviceTotal => "device total",
        }
    }
}

impl MemoryBreakdown {
    /// Every part: what the device holds for the process (nvidia-smi's figure).
    pub fn total(&self) -> Bytes {
        self.device_total()
    }

    /// The tensors the caching allocator has handed out: `max_memory_allocated`.
    pub fn allocated(&self) -> Bytes {
        self.weights
            + self.gradients
            + self.optimizer_states
            + self.activations
            + self.logits
            + self.buffers
            + self.workspaces
    }

    /// What the caching allocator holds from the driver: `max_memory_reserved`.
    pub fn reserved(&self) -> Bytes {
        self.allocated() + self.fragmentation
    }

    /// Everything on the device: the reserved pool, the CUDA context and NCCL's buffers.
    pub fn device_total(&self) -> Bytes {
        self.reserved() + self.cuda_context + self.nccl_buffers
    }

    /// The figure a counter reads.
    pub fn counted(&self, counter: MemoryCounter) -> Bytes {
        match counter {
            MemoryCounter::Allocated => self.allocated(),
            MemoryCounter::Reserved => self.reserved(),
            MemoryCounter::DeviceTotal => self.device_total(),
        }
    }

    /// What must fit in the GPU's memory: the allocated tensors and what lives outside the
    /// allocator. The allocator's cached blocks are not counted: before it reports out-of-memory
    /// the PyTorch caching allocator frees its cached blocks and retries (`release_cached_blocks`
    /// in c10/cuda/CUDACachingAllocator.cpp), so they give way as a run nears the capacity.
    pub fn fit_need(&self) -> Bytes {
        self.allocated() + self.cuda_context + self.nccl_buffers
    }

    /// The parts with their report names, in display order.
    pub fn parts(&self) -> [(&'static str, Bytes); 10] {
        [
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer states", self.optimizer_states),
            ("activations", self.activations),
            ("logits", self.logits),
            ("buffers", self.buffers),
            ("GEMM workspaces", self.workspaces),
            ("allocator cache", self.fragmentation),
            ("CUDA context", self.cuda_context),
            ("NCCL buffers", self.nccl_buffers),
        ]
    }
}

/// Host memory taken by the activations a plan offloads, against what the server gives each GPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostMemory {
    /// The offloaded activations one GPU holds in host memory at the plan's peak.
    pub offloaded: Bytes,
    /// The server's host memory over its GPUs; `None` where the GPU's file does not state it
    /// (no check).
    pub capacity: Option<Bytes>,
}

impl HostMemory {
    /// Whether the offloaded activations fit in the host memory each GPU has (an unstated
    /// capacity is not checked).
    pub fn fits(&self) -> bool {
        self.capacity.is_none_or(|capacity| self.offloaded <= capacity)
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
    /// What the slowest data-parallel replica's sequences add over the mean replica's, and the
    /// larger fill and drain of its largest micro-batch (documents of unequal lengths; zero
    /// without a length distribution).
    pub data_imbalance: Seconds,
    /// Optimizer step and gradient-norm work.
    pub optimizer: Seconds,
}

impl TimeBreakdown {
    /// How many parts a step's time is broken into.
    pub const PARTS: usize = 11;

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
            + self.data_imbalance
            + self.optimizer
    }

    /// The parts with their report names, in display order.
    pub fn parts(&self) -> [(&'static str, Seconds); TimeBreakdown::PARTS] {
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
            ("data imbalance", self.data_imbalance),
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

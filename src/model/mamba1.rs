//! Mamba-1 (the selective state-space layer of Gu and Dao 2023, as Jamba uses it; the `S` layers
//! of a hybrid pattern): its sizes as a file writes them, their validation, and the mixer's
//! parameters, GEMM shapes and selective-scan work.
//!
//! One mixer (transformers `JambaMambaMixer`, mamba_ssm `Mamba`): `in_proj` from the layer input
//! to x and the gate z (`2 x inner`), a causal depthwise convolution and SiLU over x, `x_proj`
//! from x to the step sizes' low-rank input and B and C (`dt_rank + 2 x state`), Jamba's RMSNorms
//! over those three, `dt_proj` back to one step size per channel, the selective scan (every
//! channel its own `state`-wide recurrence, gated by z inside the kernel) and `out_proj`.
//!
//! Unlike Mamba-2's chunked scan, the selective scan does no matrix product: mamba_ssm's CUDA
//! kernel (`csrc/selective_scan/selective_scan_fwd_kernel.cuh`) runs a block-wide prefix scan of
//! `(exp(delta A), delta B u)` pairs per channel and state on the CUDA cores, so its time follows
//! the GPU's FP32 and special-function issue rates, not the tensor cores'.

use serde::{Deserialize, Serialize};

use crate::violation::Collector;

/// FP32 instructions per token, channel and state of the selective scan's forward kernel
/// (`selective_scan_fwd_kernel.cuh`, real weights, B and C varying along the sequence): the
/// products `delta A` and `B delta u`, two combines of the scan operator `(a1 a2, a2 b1 + b2)`
/// (a multiply and a fused multiply-add each: the thread's own items up and down), about one
/// more for the warp scan spread over a thread's items, and the output's `C h` multiply-add.
pub const SCAN_FORWARD_ISSUES: f64 = 8.0;
/// FP32 instructions per token, channel and state of the backward kernel
/// (`selective_scan_bwd_kernel.cuh`): the forward scan rerun from the saved chunk states (six),
/// the reverse scan of the output gradient (five), `dout C`, and the gradients of u, delta, A, B
/// and C (`du`, `ddelta`, `dA`, `dB`, `dC` with the recomputed `delta B u`: eleven).
pub const SCAN_BACKWARD_ISSUES: f64 = 23.0;
/// Base-2 exponentials per token, channel and state: `exp2f(delta A)`, forward, and again in the
/// backward's rerun.
pub const SCAN_EXPONENTIALS: f64 = 1.0;
/// Bytes of atomic additions per token, channel and state in the backward: every channel's
/// thread block adds its FP32 share of `dB` and `dC` into the same per-token, per-state values
/// (`gpuAtomicAdd`), priced as memory traffic.
pub const SCAN_BACKWARD_ATOMIC_BYTES: f64 = 8.0;

/// The Mamba-1 mixer as written in a file (Hugging Face Jamba `mamba_expand x hidden_size`,
/// `mamba_d_state`, `mamba_d_conv`, `mamba_dt_rank`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mamba1Spec {
    /// Inner width: the channels of x, z and the scan (`expand x hidden_size`).
    pub inner_size: i64,
    /// State size per channel (`d_state`; default 16).
    #[serde(default)]
    pub state_size: Option<i64>,
    /// Width of the causal depthwise convolution (`d_conv`; default 4).
    #[serde(default)]
    pub conv_kernel: Option<i64>,
    /// Rank of the step sizes' low-rank projection (`dt_rank`; `ceil(hidden_size / 16)` in
    /// mamba_ssm and Jamba).
    pub dt_rank: i64,
    /// Whether RMSNorms run over the step sizes' low-rank input, B and C after `x_proj`
    /// (Jamba's `dt_layernorm`, `b_layernorm`, `c_layernorm`; default false, plain Mamba-1).
    #[serde(default)]
    pub dt_bc_norms: Option<bool>,
}

/// Validated Mamba-1 mixer sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mamba1 {
    /// Channels of x, z and the scan.
    pub inner: u64,
    /// State size per channel.
    pub state_size: u64,
    /// Convolution width.
    pub conv_kernel: u64,
    /// Rank of the step sizes' projection.
    pub dt_rank: u64,
    /// Whether the RMSNorms over dt, B and C run.
    pub dt_bc_norms: bool,
}

impl Mamba1 {
    /// Output width of `in_proj`: x and the gate z.
    pub fn in_projection(&self) -> u64 {
        2 * self.inner
    }

    /// Output width of `x_proj`: the step sizes' low-rank input, B and C.
    pub fn x_projection(&self) -> u64 {
        self.dt_rank + 2 * self.state_size
    }

    /// Parameters of one mixer besides its pre-norm: `in_proj`, the convolution's weights and
    /// biases, `x_proj`, `dt_proj` with its bias, A (`A_log`) and D per channel and state, the
    /// RMSNorms over dt, B and C when they run, and `out_proj` (no projection biases).
    pub fn params(&self, hidden: u64) -> u64 {
        let conv = self.inner * (self.conv_kernel + 1);
        let dt_proj = self.dt_rank * self.inner + self.inner;
        let a_and_d = self.inner * self.state_size + self.inner;
        let norms = if self.dt_bc_norms { self.x_projection() } else { 0 };
        hidden * self.in_projection()
            + conv
            + self.inner * self.x_projection()
            + dt_proj
            + a_and_d
            + norms
            + self.inner * hidden
    }

    /// Matrix elements of the mixer's GEMMs per token, hidden width `hidden`: `in_proj`,
    /// `x_proj`, `dt_proj` and `out_proj` (twice this is their forward FLOPs).
    pub fn gemm_elements(&self, hidden: u64) -> u64 {
        hidden * self.in_projection()
            + self.inner * self.x_projection()
            + self.dt_rank * self.inner
            + self.inner * hidden
    }

    /// Forward FLOPs per token of the selective scan's arithmetic (a multiply-add counts two;
    /// the exponential not counted): [`SCAN_FORWARD_ISSUES`] instructions per channel and state,
    /// the multiplies among them counted once and the multiply-adds twice, about 1.5 FLOPs each.
    pub fn scan_flops_per_token(&self) -> f64 {
        1.5 * SCAN_FORWARD_ISSUES * (self.inner * self.state_size) as f64
    }

    /// Backward FLOPs per token of the selective scan's arithmetic, counted as the forward's.
    pub fn scan_backward_flops_per_token(&self) -> f64 {
        1.5 * SCAN_BACKWARD_ISSUES * (self.inner * self.state_size) as f64
    }

    /// Forward FLOPs per token of the depthwise convolution.
    pub fn conv_flops_per_token(&self) -> f64 {
        2.0 * (self.inner * self.conv_kernel) as f64
    }
}

/// Checks the sizes: each positive, the widths within what meshplan prices.
pub(super) fn validate(collector: &mut Collector, spec: &Mamba1Spec) -> Mamba1 {
    let accepted = |collector: &mut Collector, name: &str, value: i64| {
        super::accepted(collector, &format!("mamba1.{name}"), value)
    };
    let inner = accepted(collector, "inner_size", spec.inner_size);
    let state = accepted(collector, "state_size", spec.state_size.unwrap_or(16));
    let conv_kernel = accepted(collector, "conv_kernel", spec.conv_kernel.unwrap_or(4));
    let dt_rank = accepted(collector, "dt_rank", spec.dt_rank);
    if let (Some(inner), Some(state)) = (inner, state) {
        let factors = [("mamba1.inner_size", inner), ("mamba1.state_size", state)];
        super::bounds::check_width(collector, "scan width (inner x state)", factors[1], &factors);
    }
    Mamba1 {
        inner: inner.unwrap_or(1),
        state_size: state.unwrap_or(1),
        conv_kernel: conv_kernel.unwrap_or(1),
        dt_rank: dt_rank.unwrap_or(1),
        dt_bc_norms: spec.dt_bc_norms.unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Jamba-v0.1's mixer (hidden 4096, expand 2, d_state 16, d_conv 4, dt_rank 256).
    fn jamba() -> Mamba1 {
        Mamba1 { inner: 8192, state_size: 16, conv_kernel: 4, dt_rank: 256, dt_bc_norms: true }
    }

    #[test]
    fn a_mixer_counts_its_projections_convolution_and_state_matrices() {
        // transformers `JambaMambaMixer`: in_proj 4096 -> 16384, conv1d 8192 x 4 with bias,
        // x_proj 8192 -> 256 + 32, dt_proj 256 -> 8192 with bias, A_log 8192 x 16, D 8192, the
        // norms over 256, 16 and 16, out_proj 8192 -> 4096.
        let expected = 4096 * 16384
            + 8192 * 5
            + 8192 * 288
            + (256 * 8192 + 8192)
            + (8192 * 16 + 8192)
            + 288
            + 8192 * 4096;
        assert_eq!(jamba().params(4096), expected);
        let plain = Mamba1 { dt_bc_norms: false, ..jamba() };
        assert_eq!(jamba().params(4096) - plain.params(4096), 288);
        assert_eq!(
            jamba().gemm_elements(4096),
            4096 * 16384 + 8192 * 288 + 256 * 8192 + 8192 * 4096
        );
    }

    #[test]
    fn the_scan_works_per_channel_and_state() {
        // 8192 channels x 16 states: 131,072 recurrences per token, 12 FLOPs each forward.
        let mixer = jamba();
        assert_eq!(mixer.scan_flops_per_token(), 12.0 * 131_072.0);
        let ratio = mixer.scan_backward_flops_per_token() / mixer.scan_flops_per_token();
        assert!((ratio - 23.0 / 8.0).abs() < 1e-12);
        assert_eq!(mixer.conv_flops_per_token(), 2.0 * 8192.0 * 4.0);
    }
}

//! Lightning attention (MiniMax-01's linear attention, the `L` layers of a hybrid pattern): its
//! sizes as a file writes them, their validation, and the block's parameters, FLOPs and
//! recurrent state.
//!
//! One block (transformers `MiniMaxLightningAttention`, MiniMax-01 report, arXiv 2501.08313):
//! `qkv_proj` from the layer input to q, k and v of every head, SiLU on them, the lightning
//! kernel (causal linear attention with a fixed per-head decay, computed block by block: within
//! a block as masked attention, across blocks through the running `d x d` key-value state), an
//! RMSNorm over the heads' output, a sigmoid output gate (`output_gate`, from the layer input)
//! and `out_proj`. No convolution and no learned decay: the decay rates are fixed buffers.

use serde::{Deserialize, Serialize};

use crate::violation::Collector;

/// Lightning attention as written in a file (Hugging Face MiniMax `num_attention_heads`,
/// `head_dim`, `block_size`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LightningAttentionSpec {
    /// Heads (queries, keys and values alike).
    pub num_heads: i64,
    /// Width of one head.
    pub head_dim: i64,
    /// Length of the blocks the kernel works in (default 256, MiniMax's `block_size`).
    #[serde(default)]
    pub block_size: Option<i64>,
}

/// Validated lightning attention sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LightningAttention {
    /// Heads.
    pub num_heads: u64,
    /// Head width.
    pub head_dim: u64,
    /// Kernel block length.
    pub block_size: u64,
}

impl LightningAttention {
    /// Width of the queries (and of the keys, the values, the gate and the block's output).
    pub fn width(&self) -> u64 {
        self.num_heads * self.head_dim
    }

    /// Output width of the GEMMs that read the layer input: q, k and v (`qkv_proj`) and the
    /// output gate (`output_gate`).
    pub fn in_projection(&self) -> u64 {
        4 * self.width()
    }

    /// Parameters of one block besides its pre-norm: `qkv_proj`, `output_gate`, the RMSNorm
    /// over the heads' output and `out_proj` (no biases).
    pub fn params(&self, hidden: u64) -> u64 {
        hidden * self.in_projection() + self.width() + self.width() * hidden
    }

    /// Forward FLOPs per token of the lightning kernel, per head of width `d` with blocks of
    /// `B` (Lightning Attention-2's forward, Qin et al. 2024, as its Triton kernel runs it):
    /// within the block, the masked `Q K^T` and its product with V over the whole block
    /// (`2 B d` each); across blocks, the read of the running state by Q and the state's update
    /// by `K^T V` (`2 d^2` each).
    pub fn kernel_flops_per_token(&self) -> f64 {
        let (b, d) = (self.block_size as f64, self.head_dim as f64);
        self.num_heads as f64 * (4.0 * b * d + 4.0 * d * d)
    }

    /// Backward FLOPs per token of the lightning kernel: within the block the scores again, the
    /// gradient of the masked scores (`dO V^T`) and from it the gradients of Q, K and V
    /// (`2 B d` each, five products); across blocks the gradients of Q, K and V through the
    /// running state and the state's own gradient (`2 d^2` each, four products). About 2.3
    /// times the forward at MiniMax's sizes.
    pub fn kernel_backward_flops_per_token(&self) -> f64 {
        let (b, d) = (self.block_size as f64, self.head_dim as f64);
        self.num_heads as f64 * (10.0 * b * d + 8.0 * d * d)
    }

    /// Bytes of one block's key-value state per sequence (FP32, `d x d` per head): what
    /// LASP-2 gathers across the context-parallel ranks.
    pub fn state_bytes(&self) -> f64 {
        (self.num_heads * self.head_dim * self.head_dim) as f64 * 4.0
    }
}

/// Checks the sizes: each positive, the width within what meshplan prices.
pub(super) fn validate(
    collector: &mut Collector,
    spec: &LightningAttentionSpec,
) -> LightningAttention {
    let accepted = |collector: &mut Collector, name: &str, value: i64| {
        super::accepted(collector, &format!("lightning_attention.{name}"), value)
    };
    let heads = accepted(collector, "num_heads", spec.num_heads);
    let dim = accepted(collector, "head_dim", spec.head_dim);
    let block_size = accepted(collector, "block_size", spec.block_size.unwrap_or(256));
    if let (Some(heads), Some(dim)) = (heads, dim) {
        let factors =
            [("lightning_attention.num_heads", heads), ("lightning_attention.head_dim", dim)];
        super::bounds::check_width(collector, "width", factors[1], &factors);
    }
    LightningAttention {
        num_heads: heads.unwrap_or(1),
        head_dim: dim.unwrap_or(1),
        block_size: block_size.unwrap_or(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimax() -> LightningAttention {
        LightningAttention { num_heads: 64, head_dim: 128, block_size: 256 }
    }

    #[test]
    fn a_block_counts_its_projections_norm_and_gate() {
        // MiniMax-Text-01: qkv_proj 6144 -> 24576, output_gate 6144 -> 8192, norm over 8192,
        // out_proj 8192 -> 6144 (transformers `MiniMaxLightningAttention`).
        let block = minimax();
        assert_eq!(block.width(), 8192);
        assert_eq!(block.params(6144), 6144 * 24576 + 6144 * 8192 + 8192 + 8192 * 6144);
    }

    #[test]
    fn the_kernel_works_within_blocks_and_through_the_state() {
        // Per head: 4 x 256 x 128 within the block and 4 x 128^2 across blocks.
        let block = minimax();
        let per_head = 4.0 * 256.0 * 128.0 + 4.0 * 128.0 * 128.0;
        assert_eq!(block.kernel_flops_per_token(), 64.0 * per_head);
        let ratio = block.kernel_backward_flops_per_token() / block.kernel_flops_per_token();
        assert!((ratio - 2.33).abs() < 0.01, "{ratio}");
        // A 64-head state of 128 x 128 FP32 values per sequence: 4 MiB.
        assert_eq!(block.state_bytes(), 4.0 * 1024.0 * 1024.0);
    }
}

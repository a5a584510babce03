//! Parameter and FLOP counts derived from the architecture, the numbers every cost rests on.
//!
//! FLOPs count a multiply-add as two operations. Attention FLOPs are causal (half of the
//! `s x s` score matrix is computed), which is what FlashAttention-style kernels execute and what
//! MFU is reported against in this crate.

use arrayvec::ArrayVec;

use super::{MlpKind, Model, NormKind, PARALLEL_HYBRID_PARTS, PositionEmbedding, Sublayer};

/// One weight matrix of the attention block: `input -> output` features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionGemm {
    /// Short name (`qkv`, `q-down`, `kv-up`, `proj`).
    pub name: &'static str,
    /// Input features (the GEMM's reduction depth).
    pub input: u64,
    /// Output features.
    pub output: u64,
    /// Whether tensor parallelism splits it (Megatron-Core replicates MLA's down-projections).
    pub split_by_tp: bool,
    /// Whether it reads the layer's (sequence-parallel) input rather than a TP-split tensor.
    pub reads_layer_input: bool,
}

/// Forward attention FLOPs per token of one layer, averaged over the layers, by how far its
/// queries reach: the full-causal layers' part and the sliding-window layers' part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionReach {
    /// What the full-causal layers do.
    pub full: f64,
    /// What the sliding-window layers do (0 without a window).
    pub windowed: f64,
    /// The keys a windowed layer's query block reaches: the window, or the sequence when it is
    /// shorter (the sequence without a window).
    pub window: u64,
}

impl Model {
    /// Width of the query projection output (`heads x qk head dim`).
    pub fn query_width(&self) -> u64 {
        self.num_attention_heads() * self.qk_head_dim()
    }

    /// Width of the key (or value) projection output (`kv_heads x head_dim`); with latent
    /// attention, the per-head keys and values the up-projection rebuilds, halved.
    pub fn kv_width(&self) -> u64 {
        match self.mla() {
            None => self.num_kv_heads() * self.head_dim(),
            Some(_) => self.num_attention_heads() * (self.qk_head_dim() + self.v_head_dim()) / 2,
        }
    }

    /// Per-head width of queries and keys (`head_dim`, or MLA's no-rope plus rope widths).
    pub fn qk_head_dim(&self) -> u64 {
        match self.mla() {
            None => self.head_dim(),
            Some(mla) => mla.qk_nope_head_dim + mla.qk_rope_head_dim,
        }
    }

    /// Per-head width of values (and of the attention output).
    pub fn v_head_dim(&self) -> u64 {
        match self.mla() {
            None => self.head_dim(),
            Some(mla) => mla.v_head_dim,
        }
    }

    /// Width of the attention output that the output projection reads.
    pub fn attention_output_width(&self) -> u64 {
        self.num_attention_heads() * self.v_head_dim()
    }

    /// The attention block's weight matrices, in execution order (at most five: MLA's query
    /// down and up, key/value down and up, and the output projection), derived when the model
    /// was validated.
    pub fn attention_gemms(&self) -> &[AttentionGemm] {
        &self.attention_gemms
    }

    /// Derives [`Model::attention_gemms`] from the architecture.
    pub(super) fn derive_attention_gemms(&self) -> ArrayVec<AttentionGemm, 5> {
        let h = self.hidden_size();
        let heads = self.num_attention_heads();
        let gemm = |name, input, output, split_by_tp, reads_layer_input| AttentionGemm {
            name,
            input,
            output,
            split_by_tp,
            reads_layer_input,
        };
        let mut gemms = ArrayVec::new();
        match self.mla() {
            None => {
                // An output gate is computed by the query projection beside the queries.
                let gate = if self.attention_output_gate() { self.query_width() } else { 0 };
                let width = self.query_width() + gate + 2 * self.kv_width();
                gemms.push(gemm("qkv", h, width, true, true))
            }
            Some(mla) => {
                if mla.q_lora_rank > 0 {
                    gemms.push(gemm("q-down", h, mla.q_lora_rank, false, true));
                    gemms.push(gemm("q-up", mla.q_lora_rank, self.query_width(), true, false));
                } else {
                    gemms.push(gemm("q", h, self.query_width(), true, true));
                }
                gemms.push(gemm(
                    "kv-down",
                    h,
                    mla.kv_lora_rank + mla.qk_rope_head_dim,
                    false,
                    true,
                ));
                let kv_up = heads * (mla.qk_nope_head_dim + mla.v_head_dim);
                gemms.push(gemm("kv-up", mla.kv_lora_rank, kv_up, true, false));
            }
        }
        gemms.push(gemm("proj", self.attention_output_width(), h, true, false));
        gemms
    }

    /// Output width of an MLP's up-projection of intermediate width `ffn` (twice `ffn` for
    /// gated MLPs).
    pub fn up_width(&self, ffn: u64) -> u64 {
        match self.mlp() {
            MlpKind::Gated => 2 * ffn,
            MlpKind::Plain => ffn,
        }
    }

    /// Output width of the dense MLP's up-projection.
    pub fn mlp_up_width(&self) -> u64 {
        self.up_width(self.ffn_hidden_size())
    }

    /// Weight-matrix parameters of an MLP of intermediate width `ffn`.
    pub fn mlp_matmul_params(&self, ffn: u64) -> u64 {
        (self.up_width(ffn) + ffn) * self.hidden_size()
    }

    /// Parameters of one norm over the hidden width.
    pub fn norm_params(&self) -> u64 {
        match self.norm() {
            NormKind::Rmsnorm => self.hidden_size(),
            NormKind::Layernorm => 2 * self.hidden_size(),
        }
    }

    /// Parameters of one layer's norms (replicated across TP ranks): the two block norms and
    /// MLA's norms of the compressed query and key/value.
    pub fn layer_norm_params(&self) -> u64 {
        let latent = self.mla().map_or(0, |mla| mla.q_lora_rank + mla.kv_lora_rank);
        2 * self.norm_params() + latent
    }

    /// Parameters of the attention block's weight matrices.
    pub fn attention_matmul_params(&self) -> u64 {
        self.attention_gemms().iter().map(|g| g.input * g.output).sum()
    }

    /// Bias parameters of the attention block (0 without biases).
    fn attention_bias_params(&self) -> u64 {
        if !self.linear_bias() {
            return 0;
        }
        self.query_width() + 2 * self.kv_width() + self.hidden_size()
    }

    /// Bias parameters of the attention block and of an MLP of width `ffn` (0 without biases).
    fn bias_params(&self, ffn: u64) -> u64 {
        self.attention_bias_params() + self.mlp_bias_params(ffn)
    }

    /// Weight-matrix parameters of one dense layer (what its GEMMs multiply by).
    pub fn matmul_params_per_layer(&self) -> u64 {
        self.attention_matmul_params() + self.mlp_matmul_params(self.ffn_hidden_size())
    }

    /// All parameters of one dense transformer layer: matrices, biases and norms.
    pub fn params_per_layer(&self) -> u64 {
        self.matmul_params_per_layer()
            + self.bias_params(self.ffn_hidden_size())
            + self.layer_norm_params()
    }

    /// Width the routed experts read and write: the latent width of a LatentMoE layer, else
    /// the hidden width.
    pub fn expert_width(&self) -> u64 {
        match self.moe() {
            Some(moe) if moe.latent_size > 0 => moe.latent_size,
            _ => self.hidden_size(),
        }
    }

    /// Parameters of one routed expert.
    pub fn expert_params(&self) -> u64 {
        self.moe().map_or(0, |moe| {
            let ffn = moe.expert_ffn_hidden_size;
            (self.up_width(ffn) + ffn) * self.expert_width()
        })
    }

    /// Parameters of a LatentMoE layer's down and up projections around its experts (0
    /// without a latent width).
    pub fn latent_projection_params(&self) -> u64 {
        match self.moe() {
            Some(moe) if moe.latent_size > 0 => 2 * self.hidden_size() * moe.latent_size,
            _ => 0,
        }
    }

    /// Bias parameters of an MLP of intermediate width `ffn` (0 without biases or experts of
    /// width 0).
    fn mlp_bias_params(&self, ffn: u64) -> u64 {
        if !self.linear_bias() || ffn == 0 {
            return 0;
        }
        self.up_width(ffn) + self.hidden_size()
    }

    /// Bias parameters of one routed expert (GPT-OSS's experts carry them; 0 without biases).
    pub fn expert_bias_params(&self) -> u64 {
        self.moe().map_or(0, |moe| self.mlp_bias_params(moe.expert_ffn_hidden_size))
    }

    /// Parameters of one MoE layer that are not routed experts: attention, router, shared
    /// experts, norms and their biases.
    pub fn moe_layer_dense_params(&self) -> u64 {
        if self.moe().is_none() {
            return 0;
        }
        self.attention_matmul_params()
            + self.moe_block_dense_params()
            + self.attention_bias_params()
            + self.layer_norm_params()
    }

    /// Parameters of an MoE block that every token uses: the router (and its biases), the
    /// shared experts and a LatentMoE layer's projections (0 without experts).
    fn moe_block_dense_params(&self) -> u64 {
        let Some(moe) = self.moe() else { return 0 };
        let router = self.hidden_size() * moe.num_experts;
        let router_bias = if self.linear_bias() { moe.num_experts } else { 0 };
        let shared = self.mlp_matmul_params(moe.shared_ffn_hidden_size)
            + self.mlp_bias_params(moe.shared_ffn_hidden_size);
        router + router_bias + shared + self.latent_projection_params()
    }

    /// Weight-matrix parameters of an MoE block a token multiplies by: the router, the shared
    /// experts, a LatentMoE layer's projections and its top-k routed experts.
    fn moe_block_active_matrices(&self) -> u64 {
        self.moe().map_or(0, |moe| {
            self.hidden_size() * moe.num_experts
                + self.mlp_matmul_params(moe.shared_ffn_hidden_size)
                + self.latent_projection_params()
                + moe.top_k * self.expert_params()
        })
    }

    /// All parameters of one MoE layer.
    pub fn moe_layer_params(&self) -> u64 {
        let experts = self.moe().map_or(0, |moe| moe.num_experts);
        self.moe_layer_dense_params() + experts * (self.expert_params() + self.expert_bias_params())
    }

    /// Parameters of one MoE layer a token passes through (its top-k experts).
    pub fn moe_layer_active_params(&self) -> u64 {
        let top_k = self.moe().map_or(0, |moe| moe.top_k);
        self.moe_layer_dense_params() + top_k * (self.expert_params() + self.expert_bias_params())
    }

    /// Parameters of the input embedding table plus the learned position table, if any.
    pub fn embedding_params(&self) -> u64 {
        let positions = match self.position_embedding() {
            PositionEmbedding::Learned => self.max_position_embeddings() * self.hidden_size(),
            _ => 0,
        };
        self.vocab_size() * self.hidden_size() + positions
    }

    /// Parameters of the output (logit) projection; zero when tied to the embedding.
    pub fn output_params(&self) -> u64 {
        if self.tied_embeddings() { 0 } else { self.vocab_size() * self.hidden_size() }
    }

    /// Parameters of the final norm before the logit layer.
    pub fn final_norm_params(&self) -> u64 {
        self.norm_params()
    }

    /// Layers with a dense MLP (every layer of a dense model).
    pub fn dense_layers(&self) -> u64 {
        self.num_layers() - self.moe_layers()
    }

    /// The transformer layer inside a multi-token-prediction module: an MoE layer when the model
    /// has experts.
    fn mtp_block_params(&self) -> u64 {
        if self.moe().is_some() { self.moe_layer_params() } else { self.params_per_layer() }
    }

    /// Parameters of one multi-token-prediction module (DeepSeek-V3): two input norms, the
    /// `2h -> h` projection, a transformer layer and the output norm; embedding and head are
    /// shared with the main model.
    pub fn mtp_module_params(&self) -> u64 {
        let h = self.hidden_size();
        3 * self.norm_params() + 2 * h * h + self.mtp_block_params()
    }

    /// Parameters of the main model, without multi-token-prediction modules (what model cards
    /// call the total: 671B for DeepSeek-V3).
    pub fn params_without_mtp(&self) -> u64 {
        self.layer_params()
            + self.embedding_params()
            + self.output_params()
            + self.final_norm_params()
    }

    /// Every trained parameter, multi-token-prediction modules included.
    pub fn total_params(&self) -> u64 {
        self.params_without_mtp() + self.mtp_weight_sets() * self.mtp_module_params()
    }

    /// Parameters a token passes through in the main model (37B for DeepSeek-V3); the total for
    /// a dense model.
    pub fn active_params(&self) -> u64 {
        if let Some(hybrid) = self.hybrid() {
            let counts = hybrid.counts();
            let routed = u64::from(counts[Sublayer::Moe.index()]);
            return self.params_without_mtp() - routed * self.sublayer_params(Sublayer::Moe)
                + routed * self.sublayer_active_params(Sublayer::Moe);
        }
        self.params_without_mtp() - self.moe_layers() * self.moe_layer_params()
            + self.moe_layers() * self.moe_layer_active_params()
    }

    /// Parameters of every layer (without embedding, head and MTP modules).
    fn layer_params(&self) -> u64 {
        match self.hybrid() {
            Some(hybrid) => {
                let counts = hybrid.counts();
                Sublayer::ALL
                    .iter()
                    .map(|&kind| u64::from(counts[kind.index()]) * self.sublayer_params(kind))
                    .sum()
            }
            None => {
                self.dense_layers() * self.params_per_layer()
                    + self.moe_layers() * self.moe_layer_params()
            }
        }
    }

    /// Parameters of one layer of a hybrid pattern, its pre-norm included.
    pub fn sublayer_params(&self, kind: Sublayer) -> u64 {
        let norm = self.norm_params();
        match kind {
            Sublayer::Mamba => {
                norm + self.hybrid_mamba().map_or(0, |m| m.params(self.hidden_size()))
            }
            Sublayer::Attention => {
                norm + self.attention_matmul_params() + self.attention_bias_params()
            }
            Sublayer::Mlp => {
                norm + self.mlp_matmul_params(self.ffn_hidden_size())
                    + self.mlp_bias_params(self.ffn_hidden_size())
            }
            Sublayer::Moe => self.moe_block_params(false) + norm,
            Sublayer::GatedDeltaNet => {
                norm + self.hybrid_linear_attention().map_or(0, |l| l.params(self.hidden_size()))
            }
            Sublayer::LightningAttention => {
                norm + self.hybrid_lightning_attention().map_or(0, |l| l.params(self.hidden_size()))
            }
            Sublayer::Mamba1 => {
                norm + self.hybrid_mamba1().map_or(0, |m| m.params(self.hidden_size()))
            }
            // The two mixers share one pre-norm.
            Sublayer::ParallelHybrid => {
                PARALLEL_HYBRID_PARTS.iter().map(|&part| self.sublayer_params(part)).sum::<u64>()
                    - norm
            }
        }
    }

    /// Parameters of one hybrid layer a token passes through (its top-k experts for `E`).
    pub fn sublayer_active_params(&self, kind: Sublayer) -> u64 {
        match kind {
            Sublayer::Moe => self.moe_block_params(true) + self.norm_params(),
            _ => self.sublayer_params(kind),
        }
    }

    /// Router, shared experts and routed experts (all, or the `top_k` a token uses).
    fn moe_block_params(&self, active: bool) -> u64 {
        let Some(moe) = self.moe() else { return 0 };
        let experts = if active { moe.top_k } else { moe.num_experts };
        self.moe_block_dense_params() + experts * (self.expert_params() + self.expert_bias_params())
    }

    /// The gated DeltaNet blocks of a hybrid model.
    pub fn hybrid_linear_attention(&self) -> Option<&super::LinearAttention> {
        self.hybrid().and_then(|hybrid| hybrid.linear_attention.as_ref())
    }

    /// The lightning attention blocks of a hybrid model.
    pub fn hybrid_lightning_attention(&self) -> Option<&super::LightningAttention> {
        self.hybrid().and_then(|hybrid| hybrid.lightning_attention.as_ref())
    }

    /// The Mamba-2 mixer of a hybrid model.
    pub fn hybrid_mamba(&self) -> Option<&super::Mamba> {
        self.hybrid().and_then(|hybrid| hybrid.mamba.as_ref())
    }

    /// The Mamba-1 mixer of a hybrid model.
    pub fn hybrid_mamba1(&self) -> Option<&super::Mamba1> {
        self.hybrid().and_then(|hybrid| hybrid.mamba1.as_ref())
    }

    /// Forward FLOPs per token of one hybrid layer's weight GEMMs.
    pub fn sublayer_gemm_flops_per_token(&self, kind: Sublayer) -> f64 {
        let matrices = match kind {
            Sublayer::Mamba => self
                .hybrid_mamba()
                .map_or(0, |m| (m.in_projection() + m.inner()) * self.hidden_size()),
            Sublayer::Attention => self.attention_matmul_params(),
            Sublayer::Mlp => self.mlp_matmul_params(self.ffn_hidden_size()),
            Sublayer::Moe => self.moe_block_active_matrices(),
            Sublayer::GatedDeltaNet => self
                .hybrid_linear_attention()
                .map_or(0, |l| (l.in_projection() + l.value_width()) * self.hidden_size()),
            Sublayer::LightningAttention => self
                .hybrid_lightning_attention()
                .map_or(0, |l| (l.in_projection() + l.width()) * self.hidden_size()),
            Sublayer::Mamba1 => {
                self.hybrid_mamba1().map_or(0, |m| m.gemm_elements(self.hidden_size()))
            }
            Sublayer::ParallelHybrid => {
                return PARALLEL_HYBRID_PARTS
                    .iter()
                    .map(|&part| self.sublayer_gemm_flops_per_token(part))
                    .sum();
            }
        };
        2.0 * matrices as f64
    }

    /// Forward FLOPs per token of one hybrid layer beyond its weight GEMMs: the attention core,
    /// or the Mamba-2 or Mamba-1 scan and convolution.
    pub fn sublayer_core_flops_per_token(&self, kind: Sublayer, seq_len: u64) -> f64 {
        match kind {
            Sublayer::Mamba => self
                .hybrid_mamba()
                .map_or(0.0, |m| m.scan_flops_per_token() + m.conv_flops_per_token()),
            Sublayer::Attention => self.layer_attention_flops_per_token(seq_len),
            Sublayer::GatedDeltaNet => self.hybrid_linear_attention().map_or(0.0, |l| {
                l.scan_flops_per_token() + 2.0 * (l.conv_channels() * l.conv_kernel) as f64
            }),
            Sublayer::LightningAttention => {
                self.hybrid_lightning_attention().map_or(0.0, |l| l.kernel_flops_per_token())
            }
            Sublayer::Mamba1 => self
                .hybrid_mamba1()
                .map_or(0.0, |m| m.scan_flops_per_token() + m.conv_flops_per_token()),
            Sublayer::ParallelHybrid => PARALLEL_HYBRID_PARTS
                .iter()
                .map(|&part| self.sublayer_core_flops_per_token(part, seq_len))
                .sum(),
            Sublayer::Mlp | Sublayer::Moe => 0.0,
        }
    }

    /// Layers with an attention block (every layer unless the model is hybrid; in a hybrid the
    /// `*` layers and Falcon-H1's `P` layers).
    pub fn attention_layers(&self) -> u64 {
        match self.hybrid() {
            Some(hybrid) => {
                let counts = hybrid.counts();
                u64::from(counts[Sublayer::Attention.index()])
                    + u64::from(counts[Sublayer::ParallelHybrid.index()])
            }
            None => self.num_layers(),
        }
    }

    /// Forward FLOPs per token of one layer, averaged over the layers: what full recompute
    /// reruns per layer.
    pub fn layer_forward_flops_per_token(&self, seq_len: u64) -> f64 {
        match self.hybrid() {
            Some(hybrid) => {
                let counts = hybrid.counts();
                let total: f64 = Sublayer::ALL
                    .iter()
                    .map(|&kind| {
                        f64::from(counts[kind.index()])
                            * (self.sublayer_gemm_flops_per_token(kind)
                                + self.sublayer_core_flops_per_token(kind, seq_len))
                    })
                    .sum();
                total / self.num_layers() as f64
            }
            None => {
                self.layer_gemm_flops_per_token() + self.layer_attention_flops_per_token(seq_len)
            }
        }
    }

    /// Forward FLOPs per token of one dense layer's weight GEMMs.
    pub fn dense_layer_gemm_flops_per_token(&self) -> f64 {
        2.0 * self.matmul_params_per_layer() as f64
    }

    /// Forward FLOPs per token of one MoE layer's weight GEMMs: attention, router, shared
    /// experts and the top-k routed experts.
    pub fn moe_layer_gemm_flops_per_token(&self) -> f64 {
        if self.moe().is_none() {
            return self.dense_layer_gemm_flops_per_token();
        }
        let matrices = self.attention_matmul_params() + self.moe_block_active_matrices();
        2.0 * matrices as f64
    }

    /// Forward FLOPs per token of one layer's weight GEMMs, averaged over the layers.
    pub fn layer_gemm_flops_per_token(&self) -> f64 {
        if let Some(hybrid) = self.hybrid() {
            let counts = hybrid.counts();
            let total: f64 = Sublayer::ALL
                .iter()
                .map(|&kind| {
                    f64::from(counts[kind.index()]) * self.sublayer_gemm_flops_per_token(kind)
                })
                .sum();
            return total / self.num_layers() as f64;
        }
        (self.dense_layers() as f64 * self.dense_layer_gemm_flops_per_token()
            + self.moe_layers() as f64 * self.moe_layer_gemm_flops_per_token())
            / self.num_layers() as f64
    }

    /// Forward FLOPs per token of one layer's causal attention, averaged over the layers, split
    /// into what its full-causal layers do (`s / 2` keys a query on average) and what its
    /// sliding-window layers do (`min(i + 1, w)` keys averaged over positions `i`): a windowed
    /// layer's kernel sees only `window` keys per query block, so it is priced as a sequence of
    /// that length.
    pub fn layer_attention_flops_by_reach(&self, seq_len: u64) -> AttentionReach {
        // QK^T costs 2 x keys x heads x qk_dim per token, PV 2 x keys x heads x v_dim.
        let heads = self.num_attention_heads() as f64;
        let dims = (self.qk_head_dim() + self.v_head_dim()) as f64;
        let per_key = 2.0 * heads * dims;
        let s = seq_len as f64;
        let full = s / 2.0;
        let Some(window) = self.sliding_window() else {
            return AttentionReach { full: per_key * full, windowed: 0.0, window: seq_len };
        };
        let w = window.window as f64;
        let windowed = if w >= s { full } else { w - w * (w - 1.0) / (2.0 * s) };
        let full_share = if window.full_attention_every == 0 {
            0.0
        } else {
            1.0 / window.full_attention_every as f64
        };
        AttentionReach {
            full: per_key * (full_share * full),
            windowed: per_key * ((1.0 - full_share) * windowed),
            window: window.window.min(seq_len),
        }
    }

    /// Forward FLOPs of one layer's causal attention over a document of `tokens` tokens that
    /// attends to itself only.
    pub fn document_attention_flops(&self, tokens: u64) -> f64 {
        self.layer_attention_flops_per_token(tokens) * tokens as f64
    }

    /// Forward FLOPs per token of one layer's causal attention (scores and weighted sum),
    /// averaged over the layers when some attend through a sliding window.
    pub fn layer_attention_flops_per_token(&self, seq_len: u64) -> f64 {
        let reach = self.layer_attention_flops_by_reach(seq_len);
        reach.full + reach.windowed
    }

    /// Forward FLOPs per token of the logit projection.
    pub fn logit_flops_per_token(&self) -> f64 {
        2.0 * (self.vocab_size() * self.hidden_size()) as f64
    }

    /// Forward FLOPs per token of the multi-token-prediction modules (each with its own logits).
    pub fn mtp_flops_per_token(&self, seq_len: u64) -> f64 {
        let h = self.hidden_size() as f64;
        let block = if self.moe().is_some() {
            self.moe_layer_gemm_flops_per_token()
        } else {
            self.dense_layer_gemm_flops_per_token()
        };
        let module = 2.0 * 2.0 * h * h
            + block
            + self.layer_attention_flops_per_token(seq_len)
            + self.logit_flops_per_token();
        self.mtp_layers() as f64 * module
    }

    /// Forward FLOPs per token of the whole model at a sequence length.
    pub fn forward_flops_per_token(&self, seq_len: u64) -> f64 {
        if self.hybrid().is_some() {
            return self.num_layers() as f64 * self.layer_forward_flops_per_token(seq_len)
                + self.logit_flops_per_token()
                + self.mtp_flops_per_token(seq_len);
        }
        let per_layer =
            self.layer_gemm_flops_per_token() + self.layer_attention_flops_per_token(seq_len);
        self.num_layers() as f64 * per_layer
            + self.logit_flops_per_token()
            + self.mtp_flops_per_token(seq_len)
    }

    /// Model FLOPs per token of one training step: forward plus a backward of twice its cost.
    /// Recomputation is not counted (that is hardware FLOPs, not model FLOPs).
    pub fn training_flops_per_token(&self, seq_len: u64) -> f64 {
        3.0 * self.forward_flops_per_token(seq_len)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::Model;
    use crate::presets;

    fn model(name: &str) -> Model {
        Model::from_spec(&presets::model(name).unwrap()).unwrap()
    }

    #[test]
    fn gpt3_training_flops_match_the_papers_6n_budget() {
        // Brown et al. 2020, Table D.1: GPT-3 175B took 3.14e23 FLOPs for 300B tokens, counted as
        // 6N per token without attention. Causal attention at s = 2048 adds 6 s h per layer (~1.4%).
        let gpt3 = model("gpt3-175b");
        let per_token = gpt3.training_flops_per_token(2048);
        let paper = 3.14e23 / 300e9;
        let attention = 3.0 * 96.0 * gpt3.layer_attention_flops_per_token(2048);
        assert!(((per_token - attention) / paper - 1.0).abs() < 0.01, "{per_token:e} vs {paper:e}");
        assert!((attention / per_token - 0.014).abs() < 0.002);
    }

    #[test]
    fn llama_layer_gemm_flops_are_twice_its_matrix_parameters() {
        // Llama 3.1 70B layer: q 8192x8192, k and v 8192x1024, o 8192x8192, three 8192x28672.
        let llama = model("llama3.1-70b");
        let matrices = 2.0 * 8192.0 * 8192.0 + 2.0 * 8192.0 * 1024.0 + 3.0 * 8192.0 * 28672.0;
        assert_eq!(llama.matmul_params_per_layer() as f64, matrices);
        assert_eq!(llama.layer_gemm_flops_per_token(), 2.0 * matrices);
        // Causal attention: QK^T and PV over half the 8192 x 8192 scores, 64 heads of 128.
        assert_eq!(llama.layer_attention_flops_per_token(8192), 2.0 * 8192.0 * 8192.0);
    }
}

//! Parameter and FLOP counts derived from the architecture, the numbers every cost rests on.
//!
//! FLOPs count a multiply-add as two operations. Attention FLOPs are causal (half of the
//! `s x s` score matrix is computed), which is what FlashAttention-style kernels execute and what
//! MFU is reported against in this crate.

use super::{MlpKind, Model, NormKind, PositionEmbedding};

impl Model {
    /// Width of the query projection output (`heads x head_dim`).
    pub fn query_width(&self) -> u64 {
        self.num_attention_heads() * self.head_dim()
    }

    /// Width of the key (or value) projection output (`kv_heads x head_dim`).
    pub fn kv_width(&self) -> u64 {
        self.num_kv_heads() * self.head_dim()
    }

    /// Output width of the MLP's up-projection (twice the FFN width for gated MLPs).
    pub fn mlp_up_width(&self) -> u64 {
        match self.mlp() {
            MlpKind::Gated => 2 * self.ffn_hidden_size(),
            MlpKind::Plain => self.ffn_hidden_size(),
        }
    }

    fn norm_params(&self) -> u64 {
        match self.norm() {
            NormKind::Rmsnorm => self.hidden_size(),
            NormKind::Layernorm => 2 * self.hidden_size(),
        }
    }

    /// Parameters of the weight matrices of one layer (what GEMMs multiply by).
    pub fn matmul_params_per_layer(&self) -> u64 {
        let h = self.hidden_size();
        let attention = h * (self.query_width() + 2 * self.kv_width()) + self.query_width() * h;
        let mlp = h * self.mlp_up_width() + self.ffn_hidden_size() * h;
        attention + mlp
    }

    /// All parameters of one transformer layer: matrices, biases and the two norms.
    pub fn params_per_layer(&self) -> u64 {
        let h = self.hidden_size();
        let biases = if self.linear_bias() {
            (self.query_width() + 2 * self.kv_width()) + h + self.mlp_up_width() + h
        } else {
            0
        };
        self.matmul_params_per_layer() + biases + 2 * self.norm_params()
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

    /// Total parameter count, as model cards report it.
    pub fn total_params(&self) -> u64 {
        self.num_layers() * self.params_per_layer()
            + self.embedding_params()
            + self.output_params()
            + self.final_norm_params()
    }

    /// Forward FLOPs per token of one layer's weight GEMMs.
    pub fn layer_gemm_flops_per_token(&self) -> f64 {
        2.0 * self.matmul_params_per_layer() as f64
    }

    /// Forward FLOPs per token of one layer's causal attention (scores and weighted sum).
    pub fn layer_attention_flops_per_token(&self, seq_len: u64) -> f64 {
        // QK^T and PV each cost 2 * s * heads * head_dim per token; causal masking halves both.
        2.0 * 2.0 * seq_len as f64 * self.query_width() as f64 * 0.5
    }

    /// Forward FLOPs per token of the logit projection.
    pub fn logit_flops_per_token(&self) -> f64 {
        2.0 * (self.vocab_size() * self.hidden_size()) as f64
    }

    /// Forward FLOPs per token of the whole model at a sequence length.
    pub fn forward_flops_per_token(&self, seq_len: u64) -> f64 {
        let per_layer =
            self.layer_gemm_flops_per_token() + self.layer_attention_flops_per_token(seq_len);
        self.num_layers() as f64 * per_layer + self.logit_flops_per_token()
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

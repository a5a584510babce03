//! The transformer being trained: its raw file shape (`ModelSpec`) and the validated `Model`.
//!
//! A `Model` holds architecture numbers only (layers, widths, heads, vocabulary and the few
//! structural switches that change parameter counts or FLOPs). Counting parameters and FLOPs
//! lives in `counts.rs`; nothing here knows about GPUs or plans.

mod counts;
mod hf;

use serde::{Deserialize, Serialize};

use crate::violation::{Collector, Violations};

pub use hf::from_hf_config;

/// The MLP block's structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MlpKind {
    /// Gated linear unit (SwiGLU, GeGLU): two up-projections and one down-projection.
    Gated,
    /// Plain two-matrix MLP (GeLU in GPT-2/3, MPT, BLOOM).
    Plain,
}

/// Normalization layer kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NormKind {
    /// RMSNorm: one weight vector.
    Rmsnorm,
    /// LayerNorm: a weight and a bias vector.
    Layernorm,
}

/// How token positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PositionEmbedding {
    /// Rotary embeddings applied to queries and keys (no parameters).
    Rope,
    /// A learned table of `max_position_embeddings x hidden` parameters.
    Learned,
    /// ALiBi attention biases (no parameters).
    Alibi,
    /// No position information.
    None,
}

/// A model as written in a preset or a TOML file. Unknown keys are rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Short name used on the command line (`llama3.1-70b`).
    pub name: String,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: Option<String>,
    /// Number of transformer layers.
    pub num_layers: i64,
    /// Model (hidden) width.
    pub hidden_size: i64,
    /// Width of the MLP's intermediate layer (per branch for gated MLPs).
    pub ffn_hidden_size: i64,
    /// Number of query heads.
    pub num_attention_heads: i64,
    /// Number of key/value heads (query groups); defaults to `num_attention_heads` (MHA).
    #[serde(default)]
    pub num_kv_heads: Option<i64>,
    /// Width of one attention head; defaults to `hidden_size / num_attention_heads`.
    #[serde(default)]
    pub head_dim: Option<i64>,
    /// Vocabulary size (before any padding the engine adds).
    pub vocab_size: i64,
    /// Longest sequence the position embedding supports.
    #[serde(default)]
    pub max_position_embeddings: Option<i64>,
    /// MLP structure.
    pub mlp: MlpKind,
    /// Normalization kind; defaults to RMSNorm.
    #[serde(default)]
    pub norm: Option<NormKind>,
    /// Position embedding kind; defaults to rotary.
    #[serde(default)]
    pub position_embedding: Option<PositionEmbedding>,
    /// Whether the output projection shares the input embedding's weights.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Whether linear layers carry biases (GPT-2/3 and BLOOM do, Llama does not).
    #[serde(default)]
    pub linear_bias: bool,
    /// Whether attention and hidden dropout are active (they store masks for backward).
    #[serde(default)]
    pub dropout: bool,
}

/// A validated model. Obtainable only through [`Model::from_spec`].
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    name: String,
    display_name: String,
    num_layers: u64,
    hidden_size: u64,
    ffn_hidden_size: u64,
    num_attention_heads: u64,
    num_kv_heads: u64,
    head_dim: u64,
    vocab_size: u64,
    max_position_embeddings: u64,
    mlp: MlpKind,
    norm: NormKind,
    position_embedding: PositionEmbedding,
    tied_embeddings: bool,
    linear_bias: bool,
    dropout: bool,
}

fn positive(collector: &mut Collector, field: &str, value: i64) -> u64 {
    if value <= 0 {
        collector.add(
            format!("model.{field}"),
            value,
            "must be a positive whole number",
            format!("set `{field}` to the architecture's value, e.g. from its config.json"),
        );
        return 1;
    }
    value as u64
}

impl Model {
    /// Checks a spec and builds the model, reporting every problem at once.
    pub fn from_spec(spec: &ModelSpec) -> Result<Model, Violations> {
        let mut collector = Collector::default();
        let num_layers = positive(&mut collector, "num_layers", spec.num_layers);
        let hidden_size = positive(&mut collector, "hidden_size", spec.hidden_size);
        let ffn_hidden_size = positive(&mut collector, "ffn_hidden_size", spec.ffn_hidden_size);
        let heads = positive(&mut collector, "num_attention_heads", spec.num_attention_heads);
        let kv_heads =
            positive(&mut collector, "num_kv_heads", spec.num_kv_heads.unwrap_or(heads as i64));
        let vocab_size = positive(&mut collector, "vocab_size", spec.vocab_size);
        let head_dim = match spec.head_dim {
            Some(dim) => positive(&mut collector, "head_dim", dim),
            None => {
                if spec.hidden_size > 0
                    && spec.num_attention_heads > 0
                    && !hidden_size.is_multiple_of(heads)
                {
                    collector.add(
                        "model.num_attention_heads",
                        heads,
                        format!("does not divide hidden_size {hidden_size}"),
                        "set `head_dim` explicitly or fix the head count",
                    );
                }
                (hidden_size / heads).max(1)
            }
        };
        if spec.num_attention_heads > 0 && !heads.is_multiple_of(kv_heads) {
            collector.add(
                "model.num_kv_heads",
                kv_heads,
                format!("does not divide num_attention_heads {heads}"),
                "each key/value head must serve a whole number of query heads",
            );
        }
        let max_position_embeddings = match spec.max_position_embeddings {
            Some(value) => positive(&mut collector, "max_position_embeddings", value),
            None => 0,
        };
        let position_embedding = spec.position_embedding.unwrap_or(PositionEmbedding::Rope);
        if position_embedding == PositionEmbedding::Learned && max_position_embeddings == 0 {
            collector.add(
                "model.max_position_embeddings",
                "(unset)",
                "is required with learned position embeddings",
                "set it to the longest sequence the model was built for, e.g. 2048",
            );
        }
        if spec.name.trim().is_empty() {
            collector.add("model.name", "\"\"", "must not be empty", "give the model a short name");
        }
        collector.finish()?;
        Ok(Model {
            name: spec.name.clone(),
            display_name: spec.display_name.clone().unwrap_or_else(|| spec.name.clone()),
            num_layers,
            hidden_size,
            ffn_hidden_size,
            num_attention_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
            vocab_size,
            max_position_embeddings,
            mlp: spec.mlp,
            norm: spec.norm.unwrap_or(NormKind::Rmsnorm),
            position_embedding,
            tied_embeddings: spec.tied_embeddings,
            linear_bias: spec.linear_bias,
            dropout: spec.dropout,
        })
    }

    /// Short name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Human-readable name.
    pub fn display_name(&self) -> &str {
        &self.display_name
    }
    /// Number of transformer layers.
    pub fn num_layers(&self) -> u64 {
        self.num_layers
    }
    /// Hidden width.
    pub fn hidden_size(&self) -> u64 {
        self.hidden_size
    }
    /// MLP intermediate width (per branch for gated MLPs).
    pub fn ffn_hidden_size(&self) -> u64 {
        self.ffn_hidden_size
    }
    /// Query heads.
    pub fn num_attention_heads(&self) -> u64 {
        self.num_attention_heads
    }
    /// Key/value heads.
    pub fn num_kv_heads(&self) -> u64 {
        self.num_kv_heads
    }
    /// Width of one head.
    pub fn head_dim(&self) -> u64 {
        self.head_dim
    }
    /// Vocabulary size.
    pub fn vocab_size(&self) -> u64 {
        self.vocab_size
    }
    /// Position-table length (0 when the model has no learned table).
    pub fn max_position_embeddings(&self) -> u64 {
        self.max_position_embeddings
    }
    /// MLP structure.
    pub fn mlp(&self) -> MlpKind {
        self.mlp
    }
    /// Normalization kind.
    pub fn norm(&self) -> NormKind {
        self.norm
    }
    /// Position embedding kind.
    pub fn position_embedding(&self) -> PositionEmbedding {
        self.position_embedding
    }
    /// Whether input and output embeddings share weights.
    pub fn tied_embeddings(&self) -> bool {
        self.tied_embeddings
    }
    /// Whether linear layers have biases.
    pub fn linear_bias(&self) -> bool {
        self.linear_bias
    }
    /// Whether dropout masks are stored.
    pub fn dropout(&self) -> bool {
        self.dropout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ModelSpec {
        ModelSpec {
            name: "tiny".into(),
            display_name: None,
            source: None,
            num_layers: 2,
            hidden_size: 64,
            ffn_hidden_size: 256,
            num_attention_heads: 4,
            num_kv_heads: None,
            head_dim: None,
            vocab_size: 1000,
            max_position_embeddings: None,
            mlp: MlpKind::Gated,
            norm: None,
            position_embedding: None,
            tied_embeddings: false,
            linear_bias: false,
            dropout: false,
        }
    }

    #[test]
    fn reports_every_problem_with_field_and_hint() {
        let mut bad = spec();
        bad.num_layers = 0;
        bad.hidden_size = -5;
        bad.num_kv_heads = Some(3);
        let errors = Model::from_spec(&bad).unwrap_err();
        let fields: Vec<_> = errors.list().iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["model.num_layers", "model.hidden_size", "model.num_kv_heads"]);
        assert!(errors.list().iter().all(|v| !v.hint.is_empty()));
    }

    #[test]
    fn defaults_follow_hugging_face_conventions() {
        let model = Model::from_spec(&spec()).unwrap();
        assert_eq!(model.num_kv_heads(), 4);
        assert_eq!(model.head_dim(), 16);
        assert_eq!(model.norm(), NormKind::Rmsnorm);
        assert_eq!(model.position_embedding(), PositionEmbedding::Rope);
    }
}

//! The transformer being trained: its raw file shape (`ModelSpec`) and the validated `Model`.
//!
//! A `Model` holds architecture numbers only (layers, widths, heads, vocabulary and the few
//! structural switches that change parameter counts or FLOPs). Counting parameters and FLOPs
//! lives in `counts.rs`; nothing here knows about GPUs or plans.

mod bounds;
mod counts;
mod hf;
mod hybrid;
mod lightning;
mod mamba1;

use arrayvec::ArrayVec;
use serde::{Deserialize, Serialize};

use crate::violation::{Collector, Violations};

pub use counts::{AttentionGemm, AttentionReach};
pub use hf::from_hf_config;
pub use hybrid::{
    Hybrid, LinearAttention, LinearAttentionSpec, Mamba, MambaSpec, PARALLEL_HYBRID_PARTS,
    SUBLAYER_KINDS, Sublayer, SublayerCounts,
};
pub use lightning::{LightningAttention, LightningAttentionSpec};
pub use mamba1::{
    Mamba1, Mamba1Spec, SCAN_BACKWARD_ATOMIC_BYTES, SCAN_BACKWARD_ISSUES, SCAN_EXPONENTIALS,
    SCAN_FORWARD_ISSUES,
};

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

/// How a model scales its rotary embeddings for long contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RopeScaling {
    /// YaRN (Peng et al. 2023): interpolated frequencies, with cos and sin multiplied by the
    /// attention factor `0.1 ln(factor) + 1` (gpt-oss: factor 32, 1.35). Megatron-Core's
    /// `position_embedding_type = "yarn"`.
    Yarn,
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
    /// Long-context scaling of the rotary embeddings (absent: plain RoPE; only with rotary
    /// position embeddings).
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    /// Whether the output projection shares the input embedding's weights.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Whether linear layers carry biases (GPT-2/3 and BLOOM do, Llama does not).
    #[serde(default)]
    pub linear_bias: bool,
    /// Whether attention and hidden dropout are active (they store masks for backward).
    #[serde(default)]
    pub dropout: bool,
    /// Whether the gated MLP clamps its two halves before the activation: the gate from above,
    /// the linear half on both sides (gpt-oss: `swiglu_limit` 7; Megatron-Core
    /// `activation_func_clamp_value`). Only with a gated MLP.
    #[serde(default)]
    pub glu_clamp: bool,
    /// Mixture-of-experts MLPs (absent for a dense model).
    #[serde(default)]
    pub moe: Option<MoeSpec>,
    /// DeepSeek multi-head latent attention instead of (grouped-query) multi-head attention.
    #[serde(default)]
    pub mla: Option<MlaSpec>,
    /// Sliding-window attention on some layers (absent: every layer attends to the whole sequence).
    #[serde(default)]
    pub sliding_window: Option<SlidingWindowSpec>,
    /// Multi-token-prediction modules after the last layer (DeepSeek-V3: 1; default 0).
    #[serde(default)]
    pub mtp_layers: Option<i64>,
    /// Whether the multi-token-prediction modules share one set of weights (Megatron-LM
    /// `--mtp-use-repeated-layer`; default false: each module has its own).
    #[serde(default)]
    pub mtp_shared_weights: bool,
    /// Hybrid layer pattern, one symbol per layer as Megatron-LM's `--hybrid-override-pattern`
    /// writes it: `M` Mamba-2, `G` gated DeltaNet, `*` attention, `-` MLP, `E` mixture of
    /// experts, meshplan's `L` for lightning attention and `S` for Mamba-1, and Megatron-Bridge's
    /// `P` for a Falcon-H1 layer (Mamba-2 and attention on one pre-norm, then an MLP) (absent:
    /// every layer is attention followed by the MLP or the experts).
    #[serde(default)]
    pub hybrid_pattern: Option<String>,
    /// The Mamba-2 mixer of the pattern's `M` layers.
    #[serde(default)]
    pub mamba: Option<MambaSpec>,
    /// The gated DeltaNet blocks of the pattern's `G` layers.
    #[serde(default)]
    pub linear_attention: Option<LinearAttentionSpec>,
    /// The lightning attention blocks of the pattern's `L` layers (MiniMax-01).
    #[serde(default)]
    pub lightning_attention: Option<LightningAttentionSpec>,
    /// The Mamba-1 mixer of the pattern's `S` layers (Jamba).
    #[serde(default)]
    pub mamba1: Option<Mamba1Spec>,
    /// Whether attention multiplies its output by a sigmoid gate computed from the layer input
    /// (Qwen3-Next's `attn_output_gate`: the query projection is twice as wide; default false).
    #[serde(default)]
    pub attention_output_gate: bool,
}

/// Mixture-of-experts MLPs as written in a file (Megatron-LM `--num-experts`, `--moe-router-topk`,
/// `--moe-ffn-hidden-size`, `--moe-shared-expert-intermediate-size`, `--moe-layer-freq`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub num_experts: i64,
    /// Experts each token is routed to.
    pub top_k: i64,
    /// Intermediate width of one routed expert (per branch for gated MLPs).
    pub expert_ffn_hidden_size: i64,
    /// Shared experts every token passes through (default 0).
    #[serde(default)]
    pub shared_experts: Option<i64>,
    /// Intermediate width of all shared experts together (default: `shared_experts x
    /// expert_ffn_hidden_size`, as DeepSeek counts them).
    #[serde(default)]
    pub shared_expert_ffn_hidden_size: Option<i64>,
    /// Leading layers with a dense MLP of `ffn_hidden_size` (DeepSeek `first_k_dense_replace`;
    /// default 0).
    #[serde(default)]
    pub dense_layers: Option<i64>,
    /// Width the routed experts work in when the layer projects tokens down before dispatch
    /// and back up after the combine (LatentMoE, Nemotron 3 Super: Megatron-LM
    /// `--moe-latent-size`; absent: the experts work at the hidden width).
    #[serde(default)]
    pub latent_size: Option<i64>,
}

/// Multi-head latent attention (DeepSeek-V2/V3) as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// Rank of the query compression (absent: queries are projected directly, as in V2-Lite).
    #[serde(default)]
    pub q_lora_rank: Option<i64>,
    /// Rank of the joint key/value compression.
    pub kv_lora_rank: i64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: i64,
    /// Per-head query/key width carrying the rotary embedding (the key part is shared by heads).
    pub qk_rope_head_dim: i64,
    /// Per-head value width.
    pub v_head_dim: i64,
}

/// Sliding-window attention as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindowSpec {
    /// Keys each query attends to on a windowed layer.
    pub window: i64,
    /// One layer in this many attends to the whole sequence (GPT-OSS alternates: 2; default:
    /// none, every layer is windowed).
    #[serde(default)]
    pub full_attention_every: Option<i64>,
}

/// Validated mixture-of-experts settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    /// Routed experts per MoE layer.
    pub num_experts: u64,
    /// Experts per token.
    pub top_k: u64,
    /// Intermediate width of one routed expert.
    pub expert_ffn_hidden_size: u64,
    /// Intermediate width of the shared experts together (0 without shared experts).
    pub shared_ffn_hidden_size: u64,
    /// Leading dense layers.
    pub dense_layers: u64,
    /// Width the routed experts work in (0: the hidden width, no latent projections).
    pub latent_size: u64,
}

/// Validated multi-head latent attention sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mla {
    /// Query compression rank (0: no compression).
    pub q_lora_rank: u64,
    /// Joint key/value compression rank.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u64,
    /// Per-head rotary query/key width.
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
}

/// Validated sliding-window attention.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlidingWindow {
    /// Keys per query on windowed layers.
    pub window: u64,
    /// One layer in this many attends to the whole sequence (0: none).
    pub full_attention_every: u64,
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
    rope_scaling: Option<RopeScaling>,
    tied_embeddings: bool,
    linear_bias: bool,
    dropout: bool,
    glu_clamp: bool,
    moe: Option<Moe>,
    mla: Option<Mla>,
    sliding_window: Option<SlidingWindow>,
    mtp_layers: u64,
    mtp_shared_weights: bool,
    attention_output_gate: bool,
    hybrid: Option<Hybrid>,
    /// The attention block's weight matrices, derived once from the fields above.
    attention_gemms: ArrayVec<AttentionGemm, 5>,
}

/// A positive field within its bound (`limits::model_field`), or 1 in its place once its problem
/// is recorded.
pub(super) fn positive(collector: &mut Collector, field: &str, value: i64) -> u64 {
    accepted(collector, field, value).unwrap_or(1)
}

/// A positive field within its bound, or `None` once its problem is recorded: what a rule relating
/// several fields reads, so that it is never checked against a stand-in.
pub(super) fn accepted(collector: &mut Collector, field: &str, value: i64) -> Option<u64> {
    let max = crate::limits::model_field(field);
    if value <= 0 {
        collector.add(
            format!("model.{field}"),
            value,
            "must be a positive whole number",
            format!("set `{field}` to the architecture's value, e.g. from its config.json"),
        );
        return None;
    }
    if value as u64 > max {
        collector.add(
            format!("model.{field}"),
            value,
            format!("exceeds the largest value meshplan prices, {max}"),
            format!("set `{field}` to the architecture's value, at most {max}"),
        );
        return None;
    }
    Some(value as u64)
}

impl Model {
    /// Checks a spec and builds the model, reporting every problem at once.
    pub fn from_spec(spec: &ModelSpec) -> Result<Model, Violations> {
        let mut collector = Collector::default();
        let mut num_layers = positive(&mut collector, "num_layers", spec.num_layers);
        let hidden_accepted = accepted(&mut collector, "hidden_size", spec.hidden_size);
        let hidden_size = hidden_accepted.unwrap_or(1);
        let ffn_hidden_size = positive(&mut collector, "ffn_hidden_size", spec.ffn_hidden_size);
        let heads_accepted =
            accepted(&mut collector, "num_attention_heads", spec.num_attention_heads);
        let heads = heads_accepted.unwrap_or(1);
        let kv_heads_accepted =
            accepted(&mut collector, "num_kv_heads", spec.num_kv_heads.unwrap_or(heads as i64));
        let kv_heads = kv_heads_accepted.unwrap_or(1);
        let vocab_size = positive(&mut collector, "vocab_size", spec.vocab_size);
        let head_dim_accepted =
            spec.head_dim.and_then(|dim| accepted(&mut collector, "head_dim", dim));
        let head_dim = match spec.head_dim {
            Some(_) => head_dim_accepted.unwrap_or(1),
            None => {
                // Checked only against accepted values, never a stand-in for a refused one.
                if let (Some(hidden), Some(heads)) = (hidden_accepted, heads_accepted)
                    && !hidden.is_multiple_of(heads)
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
        if let (Some(heads), Some(kv_heads)) = (heads_accepted, kv_heads_accepted)
            && !heads.is_multiple_of(kv_heads)
        {
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
        if let Some(scaling) = spec.rope_scaling
            && position_embedding != PositionEmbedding::Rope
        {
            collector.add(
                "model.rope_scaling",
                format!("{scaling:?}").to_ascii_lowercase(),
                "scales rotary position embeddings only",
                "remove rope_scaling, or set position_embedding = \"rope\"",
            );
        }
        if spec.glu_clamp && spec.mlp != MlpKind::Gated {
            collector.add(
                "model.glu_clamp",
                true,
                "clamps the two halves of a gated MLP only",
                "remove glu_clamp, or set mlp = \"gated\"",
            );
        }
        let layout = match &spec.hybrid_pattern {
            Some(pattern) => Some(hybrid::validate(
                &mut collector,
                pattern,
                spec.num_layers,
                hybrid::MixerSpecs {
                    mamba: spec.mamba.as_ref(),
                    linear: spec.linear_attention.as_ref(),
                    lightning: spec.lightning_attention.as_ref(),
                    mamba1: spec.mamba1.as_ref(),
                },
                spec.moe.is_some(),
            )),
            None => {
                if spec.mamba1.is_some() {
                    collector.add(
                        "model.mamba1",
                        "(set)",
                        "needs a hybrid_pattern placing its S layers",
                        "add hybrid_pattern, e.g. \"S-SE*-SE\", or remove [mamba1]",
                    );
                }
                if spec.lightning_attention.is_some() {
                    collector.add(
                        "model.lightning_attention",
                        "(set)",
                        "needs a hybrid_pattern placing its L layers",
                        "add hybrid_pattern, e.g. \"LELELE*E\", or remove [lightning_attention]",
                    );
                }
                if spec.linear_attention.is_some() {
                    collector.add(
                        "model.linear_attention",
                        "(set)",
                        "needs a hybrid_pattern placing its G layers",
                        "add hybrid_pattern, e.g. \"GEGE*E\", or remove [linear_attention]",
                    );
                }
                if spec.mamba.is_some() {
                    collector.add(
                        "model.mamba",
                        "(set)",
                        "needs a hybrid_pattern placing its M (or Falcon-H1 P) layers",
                        "add hybrid_pattern, e.g. \"M-M*-\", or remove [mamba]",
                    );
                }
                None
            }
        };
        let hybrid = match layout {
            Some(hybrid::Layout::Transformer { layers }) => {
                num_layers = layers;
                None
            }
            Some(hybrid::Layout::Hybrid(hybrid)) => Some(*hybrid),
            None => None,
        };
        let moe = spec.moe.as_ref().map(|moe| validate_moe(&mut collector, moe, num_layers));
        if hybrid.is_some() {
            if spec.moe.as_ref().is_some_and(|moe| moe.dense_layers.unwrap_or(0) > 0) {
                collector.add(
                    "model.moe.dense_layers",
                    spec.moe.as_ref().and_then(|moe| moe.dense_layers).unwrap_or(0),
                    "does not apply to a hybrid pattern",
                    "place dense MLP layers in the pattern with `-`",
                );
            }
            if spec.mla.is_some() {
                collector.add(
                    "model.hybrid_pattern",
                    spec.hybrid_pattern.as_deref().unwrap_or(""),
                    "is not priced together with mla",
                    "drop mla from a hybrid model",
                );
            }
        }
        let mla =
            spec.mla.as_ref().map(|mla| bounds::validate_mla(&mut collector, mla, heads_accepted));
        if spec.mla.is_none()
            && let (Some(heads), Some(dim)) = (heads_accepted, head_dim_accepted)
        {
            // Without latent attention the keys and values are at most as wide: their heads
            // divide the query heads (a problem above when they do not).
            let factors = [("num_attention_heads", heads), ("head_dim", dim)];
            bounds::check_width(&mut collector, "query width", factors[1], &factors);
        }
        let window_start = collector.len();
        let sliding_window = spec.sliding_window.as_ref().map(|window| SlidingWindow {
            window: positive(&mut collector, "sliding_window.window", window.window),
            full_attention_every: match window.full_attention_every {
                Some(every) => {
                    positive(&mut collector, "sliding_window.full_attention_every", every)
                }
                None => 0,
            },
        });
        let window_problems = collector.len() - window_start;
        let mtp_layers = match spec.mtp_layers {
            Some(n) if n >= 0 && n as u64 <= crate::limits::LAYERS => n as u64,
            Some(n) => {
                collector.add(
                    "model.mtp_layers",
                    n,
                    format!("must be between 0 and {}", crate::limits::LAYERS),
                    "set it to the number of multi-token-prediction modules, e.g. 1, or 0",
                );
                0
            }
            None => 0,
        };
        // The parameter count reads every field checked above but the name and the sliding window:
        // it is taken only once they (and the widths derived from them) passed their checks.
        let counts_accepted = collector.len() == window_problems;
        let model = counts_accepted.then(|| Model {
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
            rope_scaling: spec.rope_scaling,
            tied_embeddings: spec.tied_embeddings,
            linear_bias: spec.linear_bias,
            dropout: spec.dropout,
            glu_clamp: spec.glu_clamp,
            moe,
            mla,
            sliding_window,
            mtp_layers,
            mtp_shared_weights: spec.mtp_shared_weights,
            attention_output_gate: spec.attention_output_gate,
            hybrid,
            attention_gemms: ArrayVec::new(),
        });
        let model = model.map(|mut model| {
            model.attention_gemms = model.derive_attention_gemms();
            model
        });
        if let Some(model) = &model {
            bounds::check_parameters(&mut collector, model);
        }
        if spec.name.trim().is_empty() {
            collector.add("model.name", "\"\"", "must not be empty", "give the model a short name");
        }
        collector.finish_with(model, "model")
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
    /// Long-context scaling of the rotary embeddings (`None`: plain RoPE, or no RoPE).
    pub fn rope_scaling(&self) -> Option<RopeScaling> {
        self.rope_scaling
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
    /// Whether the gated MLP clamps its halves before the activation.
    pub fn glu_clamp(&self) -> bool {
        self.glu_clamp
    }
    /// Mixture-of-experts settings (`None` for a dense model).
    pub fn moe(&self) -> Option<&Moe> {
        self.moe.as_ref()
    }
    /// Multi-head latent attention sizes (`None` for standard attention).
    pub fn mla(&self) -> Option<&Mla> {
        self.mla.as_ref()
    }
    /// Sliding-window attention (`None` when every layer attends to the whole sequence).
    pub fn sliding_window(&self) -> Option<&SlidingWindow> {
        self.sliding_window.as_ref()
    }
    /// Multi-token-prediction modules after the last layer.
    pub fn mtp_layers(&self) -> u64 {
        self.mtp_layers
    }
    /// Multi-token-prediction modules whose weights are stored: one when the modules share
    /// theirs, else every module.
    pub fn mtp_weight_sets(&self) -> u64 {
        if self.mtp_shared_weights { self.mtp_layers.min(1) } else { self.mtp_layers }
    }
    /// Whether attention gates its output (the query projection also produces the gate).
    pub fn attention_output_gate(&self) -> bool {
        self.attention_output_gate
    }
    /// The hybrid layout (`None` when every layer is attention plus MLP or experts).
    pub fn hybrid(&self) -> Option<&Hybrid> {
        self.hybrid.as_ref()
    }
    /// Transformer layers (attention plus MLP or experts) whose MLP is a mixture of experts
    /// (0 for a hybrid model, whose layers are counted by kind).
    pub fn moe_layers(&self) -> u64 {
        if self.hybrid.is_some() {
            return 0;
        }
        self.moe.map_or(0, |moe| self.num_layers - moe.dense_layers)
    }
    /// Whether layer `index` (0-based) has a dense MLP.
    pub fn is_dense_layer(&self, index: u64) -> bool {
        self.moe.is_none_or(|moe| index < moe.dense_layers)
    }
}

fn validate_moe(collector: &mut Collector, spec: &MoeSpec, num_layers: u64) -> Moe {
    let num_experts = positive(collector, "moe.num_experts", spec.num_experts);
    let top_k = positive(collector, "moe.top_k", spec.top_k);
    if spec.num_experts > 0 && spec.top_k > spec.num_experts {
        collector.add(
            "model.moe.top_k",
            spec.top_k,
            format!("exceeds num_experts {}", spec.num_experts),
            "a token is routed to at most every expert",
        );
    }
    let expert_ffn_accepted =
        accepted(collector, "moe.expert_ffn_hidden_size", spec.expert_ffn_hidden_size);
    let expert_ffn_hidden_size = expert_ffn_accepted.unwrap_or(1);
    let shared_experts = match spec.shared_experts {
        Some(n) if n >= 0 && n as u64 <= crate::limits::EXPERTS => n as u64,
        Some(n) => {
            collector.add(
                "model.moe.shared_experts",
                n,
                format!("must be between 0 and {}", crate::limits::EXPERTS),
                "set the number of shared experts, or 0",
            );
            0
        }
        None => 0,
    };
    let shared_ffn_hidden_size = match spec.shared_expert_ffn_hidden_size {
        Some(width) if width >= 0 && width as u64 <= crate::limits::WIDTH => width as u64,
        Some(width) => {
            collector.add(
                "model.moe.shared_expert_ffn_hidden_size",
                width,
                format!("must be between 0 and {}", crate::limits::WIDTH),
                "give the shared experts' total intermediate width, or leave it unset",
            );
            0
        }
        None => {
            if let Some(width) = expert_ffn_accepted {
                let factors =
                    [("moe.shared_experts", shared_experts), ("moe.expert_ffn_hidden_size", width)];
                bounds::check_width(collector, "shared experts' width", factors[0], &factors);
            }
            shared_experts * expert_ffn_hidden_size
        }
    };
    let dense_layers = match spec.dense_layers {
        Some(n) if n >= 0 && (n as u64) < num_layers => n as u64,
        Some(n) => {
            collector.add(
                "model.moe.dense_layers",
                n,
                format!("must be between 0 and num_layers - 1 = {}", num_layers.saturating_sub(1)),
                "count the leading layers with a dense MLP (DeepSeek-V3: 3)",
            );
            0
        }
        None => 0,
    };
    let latent_size = match spec.latent_size {
        Some(size) => positive(collector, "moe.latent_size", size),
        None => 0,
    };
    Moe {
        num_experts,
        top_k,
        expert_ffn_hidden_size,
        shared_ffn_hidden_size,
        dense_layers,
        latent_size,
    }
}

#[cfg(test)]
mod tests;

//! Reading a Hugging Face `config.json` as published into a [`ModelSpec`].
//!
//! Field names follow `reference/formats-and-hardware.md` section 1: Llama / Mistral / Qwen2 /
//! Qwen3 names, GPT-2 (`n_layer`, `n_embd`, ...) and GPT-NeoX names, the mixture-of-experts,
//! latent-attention and multi-token-prediction fields of Mixtral, Qwen2/3-MoE, DeepSeek-V3,
//! Kimi-K2 and GPT-OSS (`experts.rs`), sliding windows and `layer_types` (`window.rs`), the
//! hybrid pattern and Mamba-2 mixer of Nemotron-H and Nemotron 3, the gated DeltaNet layers
//! of Qwen3-Next, MiniMax-01's lightning attention, Falcon-H1's parallel layers and Jamba's
//! Mamba-1 layers (`hybrid.rs`), with the
//! text model of a vision-language config read from `text_config`. Every key is either mapped,
//! known not to change the architecture (`keys.rs`), or an error naming it; so is a mapped value
//! whose layout the spec cannot represent (experts on every other layer, an irregular mix of
//! windowed and full layers): nothing that may change what is being trained is silently ignored.

mod experts;
mod hybrid;
mod keys;
mod window;

use std::fmt::Display;

use serde_json::{Map, Value};

use super::{MlpKind, ModelSpec, NormKind, PositionEmbedding, RopeScaling};
use crate::violation::{Collector, Violation, Violations};

/// The text model's keys (the root, or its `text_config`) and the problems found reading them.
struct Config<'a> {
    map: &'a Map<String, Value>,
    /// The whole file, for keys a vision-language config keeps outside `text_config`.
    root: &'a Map<String, Value>,
    /// `config.` or `config.text_config.`, so that problems name the key where it is written.
    prefix: &'static str,
    problems: Collector,
}

impl<'a> Config<'a> {
    /// The key's value, treating JSON `null` as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// Records a problem with a key of the text model.
    fn problem(
        &mut self,
        key: &str,
        value: impl Display,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.problems.add(format!("{}{key}", self.prefix), value, message, hint);
    }

    /// The first of `keys` that is set, as a whole number (a problem if it is not one).
    fn int(&mut self, keys: &[&str]) -> Option<i64> {
        let (key, value) = keys.iter().find_map(|key| self.get(key).map(|v| (*key, v)))?;
        if let Some(n) = value.as_i64() {
            return Some(n);
        }
        self.problem(key, value, "must be a whole number", "as in the published config");
        None
    }

    /// Like [`Config::int`], with a problem when none of `keys` is set.
    fn required(&mut self, keys: &[&str], why: &str) -> Option<i64> {
        let value = self.int(keys);
        if value.is_none() && keys.iter().all(|key| self.get(key).is_none()) {
            self.problem(
                keys[0],
                "(missing)",
                format!("is required{why}"),
                "as in the published config",
            );
        }
        value
    }

    /// A boolean key (a problem if it is set to something else).
    fn flag(&mut self, key: &str) -> Option<bool> {
        let value = self.get(key)?;
        if let Some(flag) = value.as_bool() {
            return Some(flag);
        }
        self.problem(key, value, "must be true or false", "as in the published config");
        None
    }

    /// Every key must be mapped or known to be harmless.
    /// Records a problem when the flag `key` is set to `refused`: a layout meshplan does not
    /// price.
    fn refuse_flag(&mut self, key: &str, refused: bool, message: &str, hint: &str) {
        if self.flag(key) == Some(refused) {
            self.problem(key, refused, message, hint);
        }
    }

    fn check_keys(&mut self) {
        for (key, value) in self.map {
            if !keys::HARMLESS.contains(&key.as_str()) && !keys::MAPPED.contains(&key.as_str()) {
                self.problem(
                    key,
                    value,
                    "is not a field meshplan understands, and it may change the architecture",
                    "remove it if it does not change layers, widths, heads, experts or vocabulary",
                );
            }
        }
    }
}

fn not_a_config(name: &str, message: String) -> Violations {
    Violations::one(Violation::new(
        "config.json",
        name,
        message,
        "pass a Hugging Face config.json as published",
    ))
}

/// Reads a `config.json` text. `name` names the model (the file stem).
pub fn from_hf_config(text: &str, name: &str) -> Result<ModelSpec, Violations> {
    let root: Value = serde_json::from_str(text)
        .map_err(|err| not_a_config(name, format!("is not JSON: {err}")))?;
    let Some(root) = root.as_object() else {
        return Err(not_a_config(name, "is not a JSON object".to_owned()));
    };
    // Vision-language configs nest the language model under `text_config`.
    let (map, prefix) = match root.get("text_config").and_then(Value::as_object) {
        Some(text) => (text, "config.text_config."),
        None => (root, "config."),
    };
    let mut config = Config { map, root, prefix, problems: Collector::default() };
    config.check_keys();
    let spec = read(&mut config, name);
    config.problems.finish()?;
    spec.ok_or_else(|| not_a_config(name, "lacks required fields".to_owned()))
}

/// The text model's `model_type`, else the file's.
fn model_type(config: &Config) -> String {
    [config.map, config.root]
        .iter()
        .find_map(|map| map.get("model_type").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned()
}

/// Builds the spec; `None` when a required field is missing (already recorded as a problem).
fn read(config: &mut Config, name: &str) -> Option<ModelSpec> {
    let model_type = model_type(config);
    let layers = config.required(&["num_hidden_layers", "n_layer"], "");
    let hidden = config.required(&["hidden_size", "n_embd"], "");
    let heads = config.required(&["num_attention_heads", "n_head"], "");
    let vocab = config.required(&["vocab_size"], "");
    let ffn = config.int(&["intermediate_size", "n_inner"]);
    let kv_heads = config.int(&["num_key_value_heads"]);
    let head_dim = config.int(&["head_dim", "attention_head_dim"]);
    let max_positions = config.int(&["max_position_embeddings", "n_positions"]);
    let mut moe = experts::moe(config, layers, ffn);
    if let Some(moe) = moe.as_mut() {
        moe.latent_size = hybrid::latent_size(config);
    }
    let (mut hybrid_pattern, mamba) = hybrid::hybrid(config, hidden);
    let linear = hybrid::linear_attention(config, layers, moe.as_mut());
    let attention_output_gate = linear.is_some()
        && (model_type == "qwen3_next" || config.flag("attn_output_gate").unwrap_or(false));
    let linear_attention = linear.map(|(pattern, spec)| {
        hybrid_pattern = Some(pattern);
        spec
    });
    let lightning =
        hybrid::lightning_attention(config, &model_type, layers, (hidden, heads, head_dim));
    let lightning_attention = lightning.map(|(pattern, spec)| {
        hybrid_pattern = Some(pattern);
        spec
    });
    let jamba = hybrid::jamba(config, &model_type, layers, hidden, &mut moe);
    let mamba1 = jamba.map(|(pattern, spec)| {
        hybrid_pattern = Some(pattern);
        spec
    });
    let falcon = hybrid::falcon_h1(config, &model_type, layers, hidden);
    let mamba = match falcon {
        Some((pattern, spec)) => {
            hybrid_pattern = Some(pattern);
            Some(spec)
        }
        None => mamba,
    };
    let mla = experts::mla(config);
    let mtp_layers = experts::mtp_layers(config);
    // A lightning attention hybrid's `layer_types` names its token mixers, not windows.
    let sliding_window = match lightning_attention {
        Some(_) => None,
        None => window::sliding_window(config, layers),
    };
    let gpt_style = matches!(model_type.as_str(), "gpt2" | "gpt_neox" | "gptj" | "bloom");
    let mlp = mlp_kind(config, &model_type, gpt_style);
    let position_embedding = match model_type.as_str() {
        "gpt2" => PositionEmbedding::Learned,
        "bloom" => PositionEmbedding::Alibi,
        // Nemotron-H and Nemotron 3 have no position embedding (the Mamba layers order
        // the tokens).
        kind if hybrid::is_hybrid_type(kind) => PositionEmbedding::None,
        _ => PositionEmbedding::Rope,
    };
    let rope_scaling = (position_embedding == PositionEmbedding::Rope && mla.is_none())
        .then(|| rope_scaling(config))
        .flatten();
    let glu_clamp = glu_clamp(config);
    let (layers, hidden, heads, vocab, mlp) = (layers?, hidden?, heads?, vocab?, mlp?);
    // Megatron-LM's pattern counts each mixer and each MLP as a layer.
    let layers = hybrid_pattern.as_ref().map_or(layers, |pattern| pattern.chars().count() as i64);
    Some(ModelSpec {
        name: name.to_owned(),
        display_name: Some(name.to_owned()),
        source: Some(format!(
            "Hugging Face config.json ({})",
            if model_type.is_empty() { "no model_type" } else { &model_type }
        )),
        num_layers: layers,
        hidden_size: hidden,
        // GPT-2: `n_inner: null` means 4 x hidden. A hidden size past i64 / 4 is refused itself
        // (past its width bound), so the width it would give is not shown (1 stands in for it).
        ffn_hidden_size: ffn.unwrap_or_else(|| hidden.checked_mul(4).unwrap_or(1)),
        num_attention_heads: heads,
        num_kv_heads: kv_heads,
        // Latent attention takes its head widths from `qk_*_head_dim` and `v_head_dim`;
        // transformers writes `head_dim` there as the rotary width, which is not a head's width.
        head_dim: if mla.is_some() { None } else { head_dim },
        vocab_size: vocab,
        max_position_embeddings: max_positions,
        mlp,
        norm: Some(if gpt_style { NormKind::Layernorm } else { NormKind::Rmsnorm }),
        position_embedding: Some(position_embedding),
        rope_scaling,
        tied_embeddings: tied_embeddings(config),
        linear_bias: linear_bias(config, gpt_style),
        dropout: false,
        glu_clamp: glu_clamp && mlp == MlpKind::Gated,
        moe,
        mla,
        sliding_window,
        mtp_layers,
        mtp_shared_weights: false,
        hybrid_pattern,
        mamba,
        linear_attention,
        lightning_attention,
        mamba1,
        attention_output_gate,
    })
}

/// The activations a transformers config names that meshplan prices (each a cheap element-wise
/// op; what matters is whether the MLP is gated).
const KNOWN_ACTIVATIONS: [&str; 11] = [
    "silu",
    "swish",
    "gelu",
    "gelu_new",
    "gelu_fast",
    "gelu_pytorch_tanh",
    "quick_gelu",
    "relu",
    "relu2",
    "tanh",
    "swiglu",
];

/// Architectures whose MLP is gated (gate and up projections) whatever the activation: the Llama
/// family with SiLU, Gemma with GELU-tanh (GeGLU), and the MoE families built on them.
const GATED_FAMILIES: [&str; 22] = [
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "phi3",
    "olmo",
    "olmo2",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "gpt_oss",
    "granite",
    "internlm2",
    "yi",
    "cohere",
];

/// Architectures whose MLP is plain (two matrices): GPT-2-style models and Nemotron's and
/// Nemotron-H's squared ReLU.
const PLAIN_FAMILIES: [&str; 8] =
    ["gpt2", "gpt_neox", "gptj", "bloom", "opt", "falcon", "nemotron", "nemotron_h"];

/// The keys that name the MLP's activation, the one transformers reads first: Gemma 2 and 3
/// write `hidden_activation` (Gemma 1 beside a legacy `hidden_act`), GPT-2-style configs
/// `activation_function`.
const ACTIVATION_KEYS: [&str; 3] = ["hidden_activation", "hidden_act", "activation_function"];

/// Gated or plain MLP: from the architecture where meshplan knows it, else from the activation
/// (SiLU/Swish/GLU-named ones are gated). Every activation key that is set must name an
/// activation meshplan knows: an unknown one (or one that is not text) is a problem naming the
/// key, not a silent plain MLP.
fn mlp_kind(config: &mut Config, model_type: &str, gpt_style: bool) -> Option<MlpKind> {
    let mut chosen = None;
    let mut readable = true;
    for key in ACTIVATION_KEYS {
        let Some(value) = config.get(key) else { continue };
        match value.as_str() {
            Some(act) if KNOWN_ACTIVATIONS.contains(&act) => {
                chosen.get_or_insert_with(|| act.to_owned());
            }
            Some(act) => {
                config.problem(
                    key,
                    act,
                    "is an activation meshplan does not know",
                    format!("known: {}", KNOWN_ACTIVATIONS.join(", ")),
                );
                readable = false;
            }
            None => {
                config.problem(
                    key,
                    value,
                    "must name the activation as text",
                    format!("as in the published config; known: {}", KNOWN_ACTIVATIONS.join(", ")),
                );
                readable = false;
            }
        }
    }
    if !readable {
        return None;
    }
    let act = chosen.unwrap_or_else(|| (if gpt_style { "gelu" } else { "silu" }).to_owned());
    Some(if GATED_FAMILIES.contains(&model_type) {
        MlpKind::Gated
    } else if PLAIN_FAMILIES.contains(&model_type) {
        MlpKind::Plain
    } else if act.contains("silu") || act.contains("swish") || act.contains("glu") {
        MlpKind::Gated
    } else {
        MlpKind::Plain
    })
}

/// transformers' default for `tie_word_embeddings` is true (PretrainedConfig); Llama-family
/// configs state false explicitly, and vision-language configs may state it outside
/// `text_config`.
fn tied_embeddings(config: &mut Config) -> bool {
    if let Some(tied) = config.flag("tie_word_embeddings") {
        return tied;
    }
    config.root.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(true)
}

/// `rope_scaling.rope_type` (or the older `type`) `yarn`: Megatron-Core's YaRN embedding, whose
/// cos and sin carry the attention factor. Other scalings (Llama 3's `llama3`, `linear`,
/// `dynamic`) only change the frequencies, which is plain RoPE to every kernel. A latent-attention
/// model keeps its YaRN inside MLA (DeepSeek-V3's `mscale` and `mscale_all_dim` cancel), so
/// the caller asks only for standard attention.
fn rope_scaling(config: &Config) -> Option<RopeScaling> {
    let scaling = config.get("rope_scaling")?.as_object()?;
    let kind = ["rope_type", "type"].iter().find_map(|key| scaling.get(*key)?.as_str())?;
    (kind == "yarn").then_some(RopeScaling::Yarn)
}

/// `swiglu_limit` (GPT-OSS: 7.0): the gate and linear halves are clamped before the activation.
/// A limit that is not a positive number is a problem naming the key.
fn glu_clamp(config: &mut Config) -> bool {
    let Some(value) = config.get("swiglu_limit") else { return false };
    match value.as_f64() {
        Some(limit) if limit > 0.0 && limit.is_finite() => true,
        _ => {
            config.problem(
                "swiglu_limit",
                value,
                "must be a positive number",
                "as in the published config (gpt-oss: 7.0)",
            );
            false
        }
    }
}

/// `attention_bias` (Llama, GPT-OSS) or `bias` (GPT-NeoX-style); GPT-2-style models have biases.
fn linear_bias(config: &mut Config, gpt_style: bool) -> bool {
    config
        .flag("attention_bias")
        .or_else(|| config.flag("bias"))
        .or_else(|| config.flag("use_bias"))
        .unwrap_or(gpt_style)
}

#[cfg(test)]
mod tests;

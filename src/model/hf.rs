//! Reading a Hugging Face `config.json` as published into a [`ModelSpec`].
//!
//! Field names follow `reference/formats-and-hardware.md` section 1: Llama / Mistral / Qwen2 /
//! Qwen3 names, GPT-2 (`n_layer`, `n_embd`, ...) and GPT-NeoX names, with the text model of a
//! vision-language config read from `text_config`. Every key is either mapped, known not to change
//! the architecture (token ids, dtypes, initialisation, RoPE parameters, dropout, epsilons), or an
//! error naming it: a field meshplan does not understand is never silently ignored, since it may
//! change what is being trained (experts, latent attention, sliding windows).

use serde_json::{Map, Value};

use super::{MlpKind, ModelSpec, NormKind, PositionEmbedding};
use crate::violation::{Collector, Violations};

/// Keys that do not change parameter counts, FLOPs or activation sizes.
const HARMLESS: &[&str] = &[
    "_name_or_path",
    "architectures",
    "model_type",
    "transformers_version",
    "torch_dtype",
    "dtype",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "initializer_range",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "use_cache",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rotary_emb_base",
    "rotary_pct",
    "attention_dropout",
    "hidden_dropout",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
    "task_specific_params",
    "scale_attn_weights",
    "use_parallel_residual",
    "reorder_and_upcast_attn",
    "scale_attn_by_inverse_layer_idx",
    "pretraining_tp",
    "max_window_layers",
    "use_sliding_window",
    "tokenizer_class",
    "output_router_logits",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "classifier_dropout",
    "n_ctx",
    "bias",
    "use_qk_norm",
    "qk_layernorm",
    "partial_rotary_factor",
    "hidden_act",
    "activation_function",
    "attention_bias",
    "mlp_bias",
    "tie_word_embeddings",
    "is_decoder",
    "image_token_index",
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "vision_token_id",
    "vision_config",
    "projector_hidden_act",
    "vision_feature_layer",
    "vision_feature_select_strategy",
    "quantization_config",
];

/// Keys meshplan reads.
const MAPPED: &[&str] = &[
    "num_hidden_layers",
    "n_layer",
    "hidden_size",
    "n_embd",
    "intermediate_size",
    "n_inner",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "n_positions",
    "sliding_window",
    "text_config",
];

/// Keys of architectures meshplan does not model yet (mixture of experts, latent attention,
/// multi-token prediction, per-layer attention types), with what they mean.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("num_experts", "mixture-of-experts layers"),
    ("num_local_experts", "mixture-of-experts layers"),
    ("n_routed_experts", "mixture-of-experts layers"),
    ("num_experts_per_tok", "mixture-of-experts routing"),
    ("moe_intermediate_size", "mixture-of-experts layers"),
    ("shared_expert_intermediate_size", "shared experts"),
    ("n_shared_experts", "shared experts"),
    ("q_lora_rank", "multi-head latent attention"),
    ("kv_lora_rank", "multi-head latent attention"),
    ("num_nextn_predict_layers", "multi-token prediction layers"),
    ("layer_types", "per-layer attention types"),
];

fn number(config: &Map<String, Value>, keys: &[&str]) -> Option<Value> {
    keys.iter().find_map(|key| config.get(*key).filter(|v| !v.is_null()).cloned())
}

/// Reads a `config.json` text. `name` names the model (the file stem).
pub fn from_hf_config(text: &str, name: &str) -> Result<ModelSpec, Violations> {
    let mut problems = Collector::default();
    let root: Value = serde_json::from_str(text).map_err(|err| {
        Violations::one(crate::violation::Violation::new(
            "config.json",
            name,
            format!("is not JSON: {err}"),
            "pass a Hugging Face config.json as published",
        ))
    })?;
    let Some(root) = root.as_object() else {
        return Err(Violations::one(crate::violation::Violation::new(
            "config.json",
            name,
            "is not a JSON object",
            "pass a Hugging Face config.json as published",
        )));
    };
    // Vision-language configs nest the language model under `text_config`.
    let config = root.get("text_config").and_then(Value::as_object).unwrap_or(root);
    let model_type = root.get("model_type").and_then(Value::as_str).unwrap_or("").to_owned();
    for (key, value) in config {
        if let Some((_, what)) = UNSUPPORTED.iter().find(|(k, _)| k == key) {
            if !value.is_null() && value != &Value::from(0) {
                problems.add(
                    format!("config.{key}"),
                    value,
                    format!("describes {what}, which meshplan does not model yet"),
                    "use a dense model; mixture-of-experts and latent attention come with issue #5",
                );
            }
        } else if !HARMLESS.contains(&key.as_str()) && !MAPPED.contains(&key.as_str()) {
            problems.add(
                format!("config.{key}"),
                value,
                "is not a field meshplan understands, and it may change the architecture",
                "remove it if it does not change layers, widths, heads or vocabulary",
            );
        }
    }
    let int = |problems: &mut Collector, keys: &[&str], required: bool| -> Option<i64> {
        match number(config, keys) {
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(other) => {
                problems.add(
                    format!("config.{}", keys[0]),
                    other,
                    "must be a whole number",
                    "as in the published config",
                );
                None
            }
            None if required => {
                problems.add(
                    format!("config.{}", keys[0]),
                    "(missing)",
                    "is required",
                    "as in the published config",
                );
                None
            }
            None => None,
        }
    };
    let layers = int(&mut problems, &["num_hidden_layers", "n_layer"], true);
    let hidden = int(&mut problems, &["hidden_size", "n_embd"], true);
    let heads = int(&mut problems, &["num_attention_heads", "n_head"], true);
    let vocab = int(&mut problems, &["vocab_size"], true);
    let ffn = int(&mut problems, &["intermediate_size", "n_inner"], false);
    let kv_heads = int(&mut problems, &["num_key_value_heads"], false);
    let head_dim = int(&mut problems, &["head_dim"], false);
    let max_positions = int(&mut problems, &["max_position_embeddings", "n_positions"], false);
    if let Some(window) = config.get("sliding_window").filter(|v| !v.is_null()) {
        let used = config.get("use_sliding_window").and_then(Value::as_bool).unwrap_or(true);
        if used {
            problems.add(
                "config.sliding_window",
                window,
                "sliding-window attention is not modelled yet",
                "set use_sliding_window to false or remove the window (issue #5)",
            );
        }
    }
    let gpt_style = matches!(model_type.as_str(), "gpt2" | "gpt_neox" | "gptj" | "bloom");
    let act = config
        .get("hidden_act")
        .or_else(|| config.get("activation_function"))
        .and_then(Value::as_str)
        .unwrap_or(if gpt_style { "gelu" } else { "silu" });
    let mlp = if act.contains("silu") || act.contains("swish") || act.contains("glu") {
        MlpKind::Gated
    } else {
        MlpKind::Plain
    };
    // transformers' default for tie_word_embeddings is true (PretrainedConfig); Llama-family
    // configs state false explicitly.
    let tied = config.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(true);
    let bias = config
        .get("attention_bias")
        .or_else(|| config.get("bias"))
        .and_then(Value::as_bool)
        .unwrap_or(gpt_style);
    problems.finish()?;
    let (Some(layers), Some(hidden), Some(heads), Some(vocab)) = (layers, hidden, heads, vocab)
    else {
        unreachable!("required fields were checked");
    };
    Ok(ModelSpec {
        name: name.to_owned(),
        display_name: Some(name.to_owned()),
        source: Some(format!(
            "Hugging Face config.json ({})",
            if model_type.is_empty() { "no model_type" } else { &model_type }
        )),
        num_layers: layers,
        hidden_size: hidden,
        // GPT-2: `n_inner: null` means 4 x hidden.
        ffn_hidden_size: ffn.unwrap_or(4 * hidden),
        num_attention_heads: heads,
        num_kv_heads: kv_heads,
        head_dim,
        vocab_size: vocab,
        max_position_embeddings: max_positions,
        mlp,
        norm: Some(if gpt_style { NormKind::Layernorm } else { NormKind::Rmsnorm }),
        position_embedding: Some(match model_type.as_str() {
            "gpt2" => PositionEmbedding::Learned,
            "bloom" => PositionEmbedding::Alibi,
            _ => PositionEmbedding::Rope,
        }),
        tied_embeddings: tied,
        linear_bias: bias,
        dropout: false,

        moe: None,
        mla: None,
        sliding_window: None,
        mtp_layers: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    #[test]
    fn llama_3_1_8b_config_matches_the_preset_and_published_count() {
        let config = r#"{
            "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
            "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 128, "hidden_act": "silu",
            "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
            "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "pretraining_tp": 1, "rms_norm_eps": 1e-05,
            "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256
        }"#;
        let spec = from_hf_config(config, "llama-3.1-8b").unwrap();
        let model = Model::from_spec(&spec).unwrap();
        assert!((model.total_params() as f64 / 8.03e9 - 1.0).abs() < 0.005);
        let preset = Model::from_spec(&crate::presets::model("llama3.1-8b").unwrap()).unwrap();
        assert_eq!(model.total_params(), preset.total_params());
    }

    #[test]
    fn gpt2_defaults_and_qwen3_explicit_head_dim() {
        let gpt2 = r#"{"model_type": "gpt2", "n_layer": 48, "n_embd": 1600, "n_head": 25,
            "n_inner": null, "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new"}"#;
        let spec = from_hf_config(gpt2, "gpt2-xl").unwrap();
        assert_eq!(spec.ffn_hidden_size, 6400);
        assert!(spec.tied_embeddings && spec.mlp == MlpKind::Plain);
        assert_eq!(spec.position_embedding, Some(PositionEmbedding::Learned));
        // Qwen3-32B: 64 heads of 128 = 8192 wide queries on a 5120-wide model.
        let qwen = r#"{"model_type": "qwen3", "num_hidden_layers": 64, "hidden_size": 5120,
            "intermediate_size": 25600, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
            "tie_word_embeddings": false, "hidden_act": "silu", "sliding_window": null,
            "use_sliding_window": false}"#;
        let model = Model::from_spec(&from_hf_config(qwen, "qwen3-32b").unwrap()).unwrap();
        assert_eq!(model.query_width(), 8192);
        assert!(
            (model.total_params() as f64 / 32.8e9 - 1.0).abs() < 0.01,
            "{}",
            model.total_params()
        );
    }

    #[test]
    fn vision_language_configs_read_their_text_config() {
        let config = r#"{"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
            "vision_config": {"hidden_size": 1024}, "image_token_index": 32000,
            "text_config": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                "intermediate_size": 11008, "num_attention_heads": 32, "vocab_size": 32064,
                "max_position_embeddings": 4096, "tie_word_embeddings": false}}"#;
        let spec = from_hf_config(config, "llava").unwrap();
        assert_eq!((spec.num_layers, spec.hidden_size, spec.vocab_size), (32, 4096, 32064));
    }

    #[test]
    fn experts_latent_attention_and_unknown_fields_are_errors_naming_them() {
        let deepseek = r#"{"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
            "intermediate_size": 18432, "num_attention_heads": 128, "vocab_size": 129280,
            "n_routed_experts": 256, "kv_lora_rank": 512, "frobnicate_layers": 3}"#;
        let errors = from_hf_config(deepseek, "deepseek-v3").unwrap_err();
        let fields: Vec<&str> = errors.list().iter().map(|v| v.field.as_str()).collect();
        assert!(fields.contains(&"config.n_routed_experts"), "{fields:?}");
        assert!(fields.contains(&"config.kv_lora_rank"), "{fields:?}");
        assert!(fields.contains(&"config.frobnicate_layers"), "{fields:?}");
        let missing = from_hf_config(r#"{"model_type": "llama"}"#, "empty").unwrap_err();
        assert!(missing.list().iter().any(|v| v.field == "config.num_hidden_layers"));
    }
}

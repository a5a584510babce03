//! Tests of the `config.json` reader against published configs (`tests/fixtures/hf/`) and the
//! parameter totals their publishers state.

use super::*;
use crate::model::Model;

const DEEPSEEK_V3: &str = include_str!("../../../tests/fixtures/hf/deepseek-v3.json");
const KIMI_K2: &str = include_str!("../../../tests/fixtures/hf/kimi-k2.json");
const QWEN3_30B: &str = include_str!("../../../tests/fixtures/hf/qwen3-30b-a3b.json");
const QWEN3_235B: &str = include_str!("../../../tests/fixtures/hf/qwen3-235b-a22b.json");
const MIXTRAL_8X7B: &str = include_str!("../../../tests/fixtures/hf/mixtral-8x7b.json");
const GPT_OSS_120B: &str = include_str!("../../../tests/fixtures/hf/gpt-oss-120b.json");
const LLAMA_405B: &str = include_str!("../../../tests/fixtures/hf/llama3.1-405b.json");
const QWEN2_VL_7B: &str = include_str!("../../../tests/fixtures/hf/qwen2-vl-7b-instruct.json");
const FALCON_H1_05B: &str = include_str!("../../../tests/fixtures/hf/falcon-h1-0.5b.json");
const JAMBA_V01: &str = include_str!("../../../tests/fixtures/hf/jamba-v0.1.json");
const NEMOTRON_3_NANO: &str =
    include_str!("../../../tests/fixtures/hf/nemotron-3-nano-30b-a3b.json");

fn model(text: &str, name: &str) -> Model {
    let spec = from_hf_config(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    Model::from_spec(&spec).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn preset(name: &str) -> Model {
    Model::from_spec(&crate::presets::model(name).unwrap()).unwrap()
}

fn assert_near(name: &str, what: &str, actual: u64, published: f64, tolerance: f64) {
    let error = (actual as f64 / published - 1.0).abs();
    assert!(
        error < tolerance,
        "{name} {what}: {actual} vs published {published:e} ({:.2}% off)",
        error * 100.0
    );
}

/// Field names of the problems a config raises.
fn problem_fields(text: &str) -> Vec<String> {
    let errors = from_hf_config(text, "bad").unwrap_err();
    assert!(errors.list().iter().all(|v| !v.hint.is_empty() && !v.value.is_empty()));
    errors.list().iter().map(|v| v.field.clone()).collect()
}

/// A published config with one key replaced (or added).
fn with(text: &str, key: &str, value: serde_json::Value) -> String {
    let mut config: serde_json::Value = serde_json::from_str(text).unwrap();
    config[key] = value;
    config.to_string()
}

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
    let model = model(config, "llama-3.1-8b");
    assert_near("llama-3.1-8b", "total", model.total_params(), 8.03e9, 0.005);
    assert_eq!(model.total_params(), preset("llama3.1-8b").total_params());
}

#[test]
fn published_configs_match_published_totals_and_active_parameters() {
    // (fixture, name, total, active, tolerance). Totals are `params_without_mtp` (what model
    // cards call the total); active counts embedding and output layer unless noted.
    let published: &[(&str, &str, f64, f64, f64)] = &[
        // DeepSeek-V3 technical report (arXiv 2412.19437), abstract: "671B total parameters with
        // 37B activated for each token".
        (DEEPSEEK_V3, "deepseek-v3", 671e9, 37e9, 0.02),
        // Qwen/Qwen3-235B-A22B model card: "235B in total and 22B activated".
        (QWEN3_235B, "qwen3-235b-a22b", 235e9, 22e9, 0.02),
        // Qwen/Qwen3-30B-A3B model card: "30.5B in total and 3.3B activated".
        (QWEN3_30B, "qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02),
        // Mistral AI, "Mixtral of experts" announcement: "46.7B total parameters but only uses
        // 12.9B parameters per token".
        (MIXTRAL_8X7B, "mixtral-8x7b", 46.7e9, 12.9e9, 0.01),
        // Kimi K2 technical report (arXiv 2507.20534), architecture table: 1.04T total, 32.6B
        // activated (the model card rounds to 1T / 32B).
        (KIMI_K2, "kimi-k2", 1.04e12, 32.6e9, 0.015),
        // Meta's Llama 3.1 model card: 405B (dense: active = total).
        (LLAMA_405B, "llama3.1-405b", 405e9, 405e9, 0.01),
    ];
    for &(text, name, total, active, tolerance) in published {
        let model = model(text, name);
        assert_near(name, "total", model.params_without_mtp(), total, tolerance);
        assert_near(name, "active", model.active_params(), active, tolerance);
    }
}

#[test]
fn deepseek_v3_reads_latent_attention_dense_layers_and_its_mtp_module() {
    let spec = from_hf_config(DEEPSEEK_V3, "deepseek-v3").unwrap();
    let moe = spec.moe.as_ref().unwrap();
    assert_eq!((moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size), (256, 8, 2048));
    assert_eq!((moe.shared_experts, moe.dense_layers), (Some(1), Some(3)));
    let mla = spec.mla.as_ref().unwrap();
    assert_eq!((mla.q_lora_rank, mla.kv_lora_rank, mla.v_head_dim), (Some(1536), 512, 128));
    assert_eq!((mla.qk_nope_head_dim, mla.qk_rope_head_dim), (128, 64));
    assert_eq!((spec.mtp_layers, spec.ffn_hidden_size), (Some(1), 18432));
    assert!(spec.sliding_window.is_none() && spec.head_dim.is_none());
    // DeepSeek-V3 README: "685B ... includes 671B of the Main Model weights and 14B of the
    // Multi-Token Prediction (MTP) Module weights". The checkpoint's MTP module stores its own copy
    // of the embedding and output head (1.85B) that training shares with the main model, so the
    // trained total is 0.3% below 685B.
    let model = Model::from_spec(&spec).unwrap();
    assert_near("deepseek-v3", "with MTP", model.total_params(), 685e9, 0.01);
    let copies = 2 * model.vocab_size() * model.hidden_size();
    assert_near("deepseek-v3", "checkpoint", model.total_params() + copies, 685e9, 0.005);
    // DeepSeek-V2-Lite style: no query compression.
    let lite = with(DEEPSEEK_V3, "q_lora_rank", serde_json::Value::Null);
    assert_eq!(from_hf_config(&lite, "lite").unwrap().mla.unwrap().q_lora_rank, None);
}

#[test]
fn gpt_oss_reads_alternating_windows_biases_and_narrow_heads() {
    let spec = from_hf_config(GPT_OSS_120B, "gpt-oss-120b").unwrap();
    let window = spec.sliding_window.as_ref().unwrap();
    assert_eq!((window.window, window.full_attention_every), (128, Some(2)));
    assert!(spec.linear_bias && !spec.tied_embeddings);
    // `rope_scaling.rope_type: yarn` and `swiglu_limit: 7.0`.
    assert_eq!(spec.rope_scaling, Some(RopeScaling::Yarn));
    assert!(spec.glu_clamp);
    assert_eq!((spec.head_dim, spec.num_kv_heads), (Some(64), Some(8)));
    let moe = spec.moe.as_ref().unwrap();
    assert_eq!((moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size), (128, 4, 2880));
    // OpenAI gpt-oss model card (arXiv 2508.10925), Table 1: 116.83B total, 5.13B active. The card
    // does not count the input embedding (a lookup) among the active parameters but does count the
    // unembedding; meshplan's active count includes both.
    let model = Model::from_spec(&spec).unwrap();
    assert_near("gpt-oss-120b", "total", model.total_params(), 116.83e9, 0.005);
    let lookup = model.vocab_size() * model.hidden_size();
    assert_near("gpt-oss-120b", "active", model.active_params() - lookup, 5.13e9, 0.01);
}

#[test]
fn hugging_face_configs_and_presets_count_the_same() {
    for (text, name) in [
        (DEEPSEEK_V3, "deepseek-v3"),
        (KIMI_K2, "kimi-k2"),
        (QWEN3_30B, "qwen3-30b-a3b"),
        (QWEN3_235B, "qwen3-235b-a22b"),
        (MIXTRAL_8X7B, "mixtral-8x7b"),
        (GPT_OSS_120B, "gpt-oss-120b"),
        (LLAMA_405B, "llama3.1-405b"),
    ] {
        let (read, preset) = (model(text, name), preset(name));
        assert_eq!(read.total_params(), preset.total_params(), "{name}");
        assert_eq!(read.active_params(), preset.active_params(), "{name}");
        assert_eq!(read.sliding_window(), preset.sliding_window(), "{name}");
        assert_eq!(read.rope_scaling(), preset.rope_scaling(), "{name}");
        assert_eq!(read.glu_clamp(), preset.glu_clamp(), "{name}");
        assert_eq!(read.training_flops_per_token(4096), preset.training_flops_per_token(4096));
    }
}

#[test]
fn only_yarn_scales_rope_and_a_swiglu_limit_must_be_a_positive_number() {
    // Llama 3.1's `llama3` scaling changes only the frequencies: plain RoPE to the kernels.
    let llama = from_hf_config(LLAMA_405B, "llama3.1-405b").unwrap();
    assert_eq!((llama.rope_scaling, llama.glu_clamp), (None, false));
    // DeepSeek-V3 keeps its YaRN inside latent attention.
    assert_eq!(from_hf_config(DEEPSEEK_V3, "deepseek-v3").unwrap().rope_scaling, None);
    let legacy =
        with(GPT_OSS_120B, "rope_scaling", serde_json::json!({"type": "yarn", "factor": 4.0}));
    assert_eq!(from_hf_config(&legacy, "x").unwrap().rope_scaling, Some(RopeScaling::Yarn));
    let no_limit = with(GPT_OSS_120B, "swiglu_limit", serde_json::Value::Null);
    assert!(!from_hf_config(&no_limit, "x").unwrap().glu_clamp);
    for bad in [serde_json::json!(0.0), serde_json::json!("seven")] {
        let text = with(GPT_OSS_120B, "swiglu_limit", bad);
        assert_eq!(problem_fields(&text), ["config.swiglu_limit"]);
    }
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
    let model = model(qwen, "qwen3-32b");
    assert_eq!(model.query_width(), 8192);
    assert_near("qwen3-32b", "total", model.total_params(), 32.8e9, 0.01);
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
    // transformers >= 5 layout: `layer_types` and `rope_parameters` inside `text_config`, and
    // `tie_word_embeddings` only at the top. Qwen2-VL-7B's language model has Qwen2.5-7B's shape,
    // whose model card gives 7.61B parameters.
    let spec = from_hf_config(QWEN2_VL_7B, "qwen2-vl-7b").unwrap();
    assert!(spec.sliding_window.is_none() && spec.moe.is_none() && !spec.tied_embeddings);
    let model = Model::from_spec(&spec).unwrap();
    assert_near("qwen2-vl-7b", "text model", model.total_params(), 7.61e9, 0.005);
    // Problems name the key where it is written.
    let mut nested: serde_json::Value = serde_json::from_str(QWEN2_VL_7B).unwrap();
    nested["text_config"]["linear_attention_layers"] = serde_json::json!([3, 7]);
    assert_eq!(problem_fields(&nested.to_string()), ["config.text_config.linear_attention_layers"]);
}

#[test]
fn sliding_windows_follow_mistral_qwen2_and_layer_types() {
    // Mistral 7B v0.1: one window on every layer.
    let mistral = with(MIXTRAL_8X7B, "sliding_window", 4096.into());
    let window = from_hf_config(&mistral, "mistral").unwrap().sliding_window.unwrap();
    assert_eq!((window.window, window.full_attention_every), (4096, None));
    // Qwen: the window is off unless `use_sliding_window` is true.
    let qwen = with(QWEN3_30B, "sliding_window", 32768.into());
    assert_eq!(from_hf_config(&qwen, "qwen").unwrap().sliding_window, None);
    // Qwen2 keeps the first `max_window_layers` layers full: only 0 or all of them fit.
    let qwen = with(&with(&qwen, "use_sliding_window", true.into()), "max_window_layers", 0.into());
    assert!(from_hf_config(&qwen, "qwen").unwrap().sliding_window.is_some());
    let qwen = with(&qwen, "max_window_layers", 28.into());
    assert_eq!(problem_fields(&qwen), ["config.max_window_layers"]);
    // Gemma-3-style five windowed layers then a full one (36 layers: 6 groups).
    let types: Vec<_> =
        (0..36).map(|i| if i % 6 == 5 { "full_attention" } else { "sliding_attention" }).collect();
    let gemma = with(GPT_OSS_120B, "layer_types", types.into());
    let window = from_hf_config(&gemma, "gemma").unwrap().sliding_window.unwrap();
    assert_eq!(window.full_attention_every, Some(6));
}

#[test]
fn layouts_the_spec_cannot_represent_are_errors_naming_the_field() {
    let cases: &[(&str, &str, serde_json::Value, &str)] = &[
        (DEEPSEEK_V3, "moe_layer_freq", 2.into(), "config.moe_layer_freq"),
        (QWEN3_30B, "decoder_sparse_step", 2.into(), "config.decoder_sparse_step"),
        (QWEN3_30B, "mlp_only_layers", serde_json::json!([0, 2]), "config.mlp_only_layers"),
        (QWEN3_30B, "mlp_only_layers", serde_json::json!([0, 48]), "config.mlp_only_layers"),
        (DEEPSEEK_V3, "first_k_dense_replace", 61.into(), "config.first_k_dense_replace"),
        (GPT_OSS_120B, "experts_per_token", 2.into(), "config.experts_per_token"),
        (
            MIXTRAL_8X7B,
            "num_experts_per_tok",
            serde_json::Value::Null,
            "config.num_experts_per_tok",
        ),
        (DEEPSEEK_V3, "v_head_dim", serde_json::Value::Null, "config.v_head_dim"),
        (DEEPSEEK_V3, "index_topk", 2048.into(), "config.index_topk"),
        (GPT_OSS_120B, "sliding_window", serde_json::Value::Null, "config.sliding_window"),
    ];
    for (text, key, value, field) in cases {
        assert_eq!(problem_fields(&with(text, key, value.clone())), [*field], "{key} = {value}");
    }
    // Leading dense layers are fine, in any order.
    let leading = with(QWEN3_30B, "mlp_only_layers", serde_json::json!([1, 0]));
    assert_eq!(from_hf_config(&leading, "qwen").unwrap().moe.unwrap().dense_layers, Some(2));
    let mixtral = with(MIXTRAL_8X7B, "intermediate_size", serde_json::Value::Null);
    assert_eq!(problem_fields(&mixtral), ["config.moe_intermediate_size"]);
    // Full attention on layers 1, 3 and 4: no single period.
    let mut types = vec!["sliding_attention"; 36];
    for layer in [1, 3, 4] {
        types[layer] = "full_attention";
    }
    let irregular = with(GPT_OSS_120B, "layer_types", types.clone().into());
    assert_eq!(problem_fields(&irregular), ["config.layer_types"]);
    types[7] = "chunked_attention";
    let chunked = with(GPT_OSS_120B, "layer_types", types.into());
    assert_eq!(problem_fields(&chunked), ["config.layer_types[7]"]);
    let short = with(GPT_OSS_120B, "layer_types", serde_json::json!(["full_attention"]));
    assert_eq!(problem_fields(&short), ["config.layer_types"]);
}

#[test]
fn unknown_fields_and_missing_ones_are_errors_naming_them() {
    let deepseek = r#"{"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
        "intermediate_size": 18432, "num_attention_heads": 128, "vocab_size": 129280,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "frobnicate_layers": 3}"#;
    assert_eq!(problem_fields(deepseek), ["config.frobnicate_layers"]);
    let missing = problem_fields(r#"{"model_type": "llama"}"#);
    assert!(missing.contains(&"config.num_hidden_layers".to_owned()), "{missing:?}");
    assert_eq!(problem_fields("[1, 2]"), ["config.json"]);
    assert_eq!(problem_fields("{"), ["config.json"]);
    let text = with(MIXTRAL_8X7B, "num_local_experts", "eight".into());
    assert_eq!(problem_fields(&text), ["config.num_local_experts"]);
}

#[test]
fn gated_gelu_families_are_gated_and_unknown_activations_are_named() {
    let gemma = r#"{"model_type": "gemma2", "num_hidden_layers": 26, "hidden_size": 2304,
        "intermediate_size": 9216, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 256000, "hidden_act": "gelu_pytorch_tanh"}"#;
    let spec = from_hf_config(gemma, "gemma-2-2b").unwrap();
    assert_eq!(spec.mlp, MlpKind::Gated, "Gemma's GeGLU MLP has gate and up projections");
    let unknown = gemma.replace("gelu_pytorch_tanh", "mish");
    let err = from_hf_config(&unknown, "x").unwrap_err();
    let problem = &err.list()[0];
    assert_eq!((problem.field.as_str(), problem.value.as_str()), ("config.hidden_act", "mish"));
    assert!(problem.hint.contains("gelu_pytorch_tanh"), "{}", problem.hint);
}

#[test]
fn gemma_3_names_its_activation_hidden_activation_and_every_activation_key_is_checked() {
    // Gemma 3 text configs have `hidden_activation` and no `hidden_act`.
    let gemma3 = r#"{"model_type": "gemma3_text", "num_hidden_layers": 26, "hidden_size": 2304,
        "intermediate_size": 9216, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 256000, "hidden_activation": "gelu_pytorch_tanh"}"#;
    assert_eq!(from_hf_config(gemma3, "gemma-3").unwrap().mlp, MlpKind::Gated);
    // A GeGLU activation in a family meshplan does not list is still read as gated.
    let other = gemma3.replace("gemma3_text", "my_geglu").replace("gelu_pytorch_tanh", "swiglu");
    assert_eq!(from_hf_config(&other, "x").unwrap().mlp, MlpKind::Gated);
    let unknown = gemma3.replace("gelu_pytorch_tanh", "mish");
    let err = from_hf_config(&unknown, "x").unwrap_err();
    let problem = &err.list()[0];
    assert_eq!(problem.field, "config.hidden_activation");
    assert_eq!(problem.value, "mish");
    assert!(problem.hint.contains("gelu_pytorch_tanh"), "{}", problem.hint);
    // A legacy `hidden_act` beside it is checked too, and a number is not an activation.
    let both = with(gemma3, "hidden_act", "mish".into());
    assert_eq!(problem_fields(&both), ["config.hidden_act"]);
    let number = with(gemma3, "hidden_act", 3.into());
    assert_eq!(problem_fields(&number), ["config.hidden_act"]);
}

#[test]
fn nemotron_h_configs_read_their_pattern_mamba_mixer_and_experts() {
    let (read, preset) = (model(NEMOTRON_3_NANO, "nemotron-3-nano"), preset("nemotron-3-nano"));
    assert_eq!(read.hybrid(), preset.hybrid());
    assert_eq!(read.moe(), preset.moe());
    assert_eq!(read.position_embedding(), PositionEmbedding::None);
    assert_eq!(read.total_params(), preset.total_params());
    assert_eq!(read.active_params(), preset.active_params());
    assert_eq!(read.training_flops_per_token(8192), preset.training_flops_per_token(8192));
    assert_near("nemotron-3-nano", "total", read.total_params(), 31.6e9, 0.01);
    // transformers >= 5 lists the layers by name instead of the pattern; the same model.
    let mut config: serde_json::Value = serde_json::from_str(NEMOTRON_3_NANO).unwrap();
    let object = config.as_object_mut().unwrap();
    let pattern = object.remove("hybrid_override_pattern").unwrap();
    let names: Vec<&str> = pattern
        .as_str()
        .unwrap()
        .chars()
        .map(|symbol| match symbol {
            'M' => "mamba",
            '*' => "attention",
            _ => "moe",
        })
        .collect();
    object.insert("layers_block_type".into(), serde_json::json!(names));
    object.insert("mtp_layers_block_type".into(), serde_json::json!(["attention", "moe"]));
    object.insert("num_nextn_predict_layers".into(), serde_json::json!(1));
    let listed = model(&config.to_string(), "lightning");
    assert_eq!(listed.hybrid(), preset.hybrid());
    assert_eq!(listed.mtp_layers(), 1);
    // A layout meshplan does not price is a problem naming its key.
    config["mtp_layers_block_type"] = serde_json::json!(["mamba"]);
    assert_eq!(problem_fields(&config.to_string()), ["config.mtp_layers_block_type"]);
}

#[test]
fn qwen3_next_configs_read_gated_deltanet_layers_between_full_attention() {
    // The fields of Qwen/Qwen3-Coder-Next's config.json (Qwen3-Next-80B-A3B's architecture) as
    // a parser test transcribes them, with the keys every Qwen3-Next config states.
    let config = r#"{"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
        "vocab_size": 151936, "head_dim": 256, "num_attention_heads": 16, "num_key_value_heads": 2,
        "intermediate_size": 5120, "num_experts": 512, "num_experts_per_tok": 10,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": true,
        "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
        "hidden_act": "silu", "max_position_embeddings": 262144, "partial_rotary_factor": 0.25,
        "rope_theta": 10000000, "rms_norm_eps": 1e-06, "tie_word_embeddings": false}"#;
    let (read, preset) = (model(config, "qwen3-next"), preset("qwen3-next-80b-a3b"));
    assert_eq!(read.hybrid(), preset.hybrid());
    assert!(read.attention_output_gate());
    assert_eq!(read.total_params(), preset.total_params());
    assert_eq!(read.active_params(), preset.active_params());
    assert_eq!(read.training_flops_per_token(4096), preset.training_flops_per_token(4096));
    // transformers' per-layer list gives the same layers; a mixer it does not know is a problem.
    let listed: Vec<&str> =
        (0..48).map(|i| if i % 4 == 3 { "full_attention" } else { "linear_attention" }).collect();
    let mut value: serde_json::Value = serde_json::from_str(config).unwrap();
    value["layer_types"] = serde_json::json!(listed);
    assert_eq!(model(&value.to_string(), "listed").hybrid(), preset.hybrid());
    value["layer_types"][0] = serde_json::json!("sliding_attention");
    assert_eq!(problem_fields(&value.to_string()), ["config.layer_types"]);
}

#[test]
fn minimax_configs_read_lightning_attention_layers_between_softmax_attention() {
    // The fields of MiniMaxAI/MiniMax-Text-01's config.json as MiniMax writes it (attn_type_list:
    // 0 lightning, 1 softmax; the residual scales of its DeepNorm-style layers).
    let types: Vec<i64> = (0..80).map(|i| i64::from(i % 8 == 7)).collect();
    let config = serde_json::json!({"model_type": "minimax_text_01", "hidden_size": 6144,
        "num_hidden_layers": 80, "vocab_size": 200064, "head_dim": 128,
        "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 9216,
        "num_local_experts": 32, "num_experts_per_tok": 2, "shared_intermediate_size": 0,
        "attn_type_list": types, "block_size": 256, "rotary_dim": 64, "postnorm": true,
        "layernorm_full_attention_alpha": 3.5565588200778455, "layernorm_full_attention_beta": 1.0,
        "layernorm_linear_attention_alpha": 3.5565588200778455,
        "layernorm_linear_attention_beta": 1.0, "layernorm_mlp_alpha": 3.5565588200778455,
        "layernorm_mlp_beta": 1.0, "hidden_act": "silu", "max_position_embeddings": 10240000,
        "rope_theta": 10000000, "rms_norm_eps": 1e-05, "tie_word_embeddings": false});
    let (read, preset) = (model(&config.to_string(), "minimax"), preset("minimax-text-01"));
    assert_eq!(read.hybrid(), preset.hybrid());
    assert_eq!(read.total_params(), preset.total_params());
    assert_eq!(read.active_params(), preset.active_params());
    assert_eq!(read.training_flops_per_token(8192), preset.training_flops_per_token(8192));
    // transformers' MiniMaxConfig names the layers in `layer_types` instead.
    let mut listed = config.clone();
    let object = listed.as_object_mut().unwrap();
    object.remove("attn_type_list");
    object.insert("model_type".into(), "minimax".into());
    let names: Vec<&str> =
        (0..80).map(|i| if i % 8 == 7 { "full_attention" } else { "linear_attention" }).collect();
    object.insert("layer_types".into(), serde_json::json!(names));
    assert_eq!(model(&listed.to_string(), "listed").hybrid(), preset.hybrid());
    // A layer kind it does not know, or a list of the wrong length, is a problem naming its key.
    let mut unknown = config.clone();
    unknown["attn_type_list"][3] = serde_json::json!(2);
    assert_eq!(problem_fields(&unknown.to_string()), ["config.attn_type_list"]);
    let mut short = config.clone();
    short["attn_type_list"] = serde_json::json!([0, 1]);
    assert_eq!(problem_fields(&short.to_string()), ["config.attn_type_list"]);
    // With softmax attention on every layer (MiniMax-M2's configs) it is a plain MoE model.
    let mut softmax = config;
    softmax["attn_type_list"] = serde_json::json!(vec![1; 80]);
    let plain = model(&softmax.to_string(), "softmax");
    assert!(plain.hybrid().is_none());
    assert_eq!(plain.num_layers(), 80);
}

#[test]
fn jamba_reads_as_mamba1_attention_and_expert_layers() {
    let jamba = model(JAMBA_V01, "jamba-v0.1");
    let preset = Model::from_spec(&crate::presets::model("jamba-v0.1").unwrap()).unwrap();
    // Attention where layer % 8 == 4, experts where layer % 2 == 1: each layer a mixer and its
    // feed-forward block.
    assert_eq!(jamba.hybrid().unwrap().pattern_text(), "S-SES-SE*-SES-SE".repeat(4));
    assert_eq!(jamba.hybrid_mamba1(), preset.hybrid_mamba1());
    let mixer = jamba.hybrid_mamba1().unwrap();
    assert_eq!((mixer.inner, mixer.state_size, mixer.dt_rank), (8192, 16, 256));
    assert!(mixer.dt_bc_norms);
    assert_eq!(jamba.total_params(), preset.total_params());
    assert_eq!(jamba.position_embedding(), crate::model::PositionEmbedding::None);

    let mut config: serde_json::Value = serde_json::from_str(JAMBA_V01).unwrap();
    // `auto` rank: ceil(hidden / 16); one expert per layer is no experts at all.
    config["mamba_dt_rank"] = serde_json::json!("auto");
    config["hidden_size"] = serde_json::json!(1000);
    config["num_attention_heads"] = serde_json::json!(8);
    config["num_experts"] = serde_json::json!(1);
    let small = model(&config.to_string(), "small");
    assert_eq!(small.hybrid_mamba1().unwrap().dt_rank, 63);
    assert!(small.moe().is_none());
    assert_eq!(&small.hybrid().unwrap().pattern_text()[..16], "S-S-S-S-*-S-S-S-");

    // A hidden size at the edge of i64 is refused by its bound, not overflowed on.
    let mut huge = config.clone();
    huge["hidden_size"] = serde_json::json!(i64::MAX);
    huge["mamba_expand"] = serde_json::json!(1);
    let read = from_hf_config(&huge.to_string(), "huge");
    assert!(read.is_ok_and(|spec| Model::from_spec(&spec).is_err()));

    // What the layer kind does not price is named, every problem at once.
    config["mamba_proj_bias"] = serde_json::json!(true);
    config["mamba_conv_bias"] = serde_json::json!(false);
    config["attn_layer_offset"] = serde_json::json!(8);
    let errors = from_hf_config(&config.to_string(), "bad").unwrap_err();
    let fields: Vec<&str> = errors.list().iter().map(|v| v.field.as_str()).collect();
    for field in ["config.mamba_proj_bias", "config.mamba_conv_bias", "config.attn_layer_offset"] {
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
}

#[test]
fn falcon_h1_reads_as_parallel_layers() {
    let falcon = model(FALCON_H1_05B, "falcon-h1-0.5b");
    let preset = Model::from_spec(&crate::presets::model("falcon-h1-0.5b").unwrap()).unwrap();
    assert_eq!(falcon.hybrid().unwrap().pattern_text(), "P".repeat(36));
    assert_eq!(falcon.hybrid_mamba(), preset.hybrid_mamba());
    let mamba = falcon.hybrid_mamba().unwrap();
    // 24 heads of 64 (mamba_d_head), one group, no gated RMSNorm (mamba_rms_norm false).
    assert_eq!((mamba.inner(), mamba.num_groups, mamba.chunk_size), (1536, 1, 128));
    assert!(!mamba.gated_norm);
    assert_eq!(falcon.total_params(), preset.total_params());
    assert_eq!(falcon.mlp(), crate::model::MlpKind::Gated);

    let mut config: serde_json::Value = serde_json::from_str(FALCON_H1_05B).unwrap();
    // Attention in layers 0 and 2 only: the others are a Mamba-2 layer and its MLP.
    config["num_hidden_layers"] = serde_json::json!(4);
    config["attn_layer_indices"] = serde_json::json!([0, 2]);
    let sparse = model(&config.to_string(), "sparse");
    assert_eq!(sparse.hybrid().unwrap().pattern_text(), "PM-PM-");
    assert_eq!(sparse.attention_layers(), 2);
    // `auto` head width: the inner width over the heads.
    config["mamba_d_head"] = serde_json::json!("auto");
    config["mamba_d_ssm"] = serde_json::json!(1536);
    assert_eq!(model(&config.to_string(), "auto").hybrid_mamba().unwrap().head_dim, 64);

    // What the layer kind does not price is named, every problem at once.
    config["mamba_use_mlp"] = serde_json::json!(false);
    config["projectors_bias"] = serde_json::json!(true);
    config["mamba_d_ssm"] = serde_json::json!(1000);
    config["attn_layer_indices"] = serde_json::json!([7]);
    let errors = from_hf_config(&config.to_string(), "bad").unwrap_err();
    let fields: Vec<&str> = errors.list().iter().map(|v| v.field.as_str()).collect();
    for field in [
        "config.mamba_use_mlp",
        "config.projectors_bias",
        "config.mamba_n_heads",
        "config.attn_layer_indices",
    ] {
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
}

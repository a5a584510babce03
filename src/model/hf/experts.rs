//! Mixture-of-experts, latent-attention and multi-token-prediction fields of a `config.json`:
//! Mixtral and GPT-OSS (`num_local_experts`, expert width in `intermediate_size`), Qwen2/3-MoE
//! (`num_experts`, `moe_intermediate_size`, `shared_expert_intermediate_size`,
//! `decoder_sparse_step`, `mlp_only_layers`) and DeepSeek-V3 / Kimi-K2 (`n_routed_experts`,
//! `n_shared_experts`, `first_k_dense_replace`, `moe_layer_freq`, the MLA ranks and head widths,
//! `num_nextn_predict_layers`).

use serde_json::Value;

use super::Config;
use crate::model::{MlaSpec, MoeSpec};

/// The experts, or `None` for a dense model (no expert count, or zero experts).
/// `ffn` is the `intermediate_size` already read (the expert width for Mixtral and GPT-OSS).
pub(super) fn moe(config: &mut Config, layers: Option<i64>, ffn: Option<i64>) -> Option<MoeSpec> {
    let num_experts = config.int(&["num_local_experts", "num_experts", "n_routed_experts"])?;
    if num_experts == 0 {
        return None;
    }
    let top_k = top_k(config);
    // Mixtral and GPT-OSS give the expert width as `intermediate_size`; Qwen-MoE and DeepSeek
    // have a separate `moe_intermediate_size` and use `intermediate_size` for dense layers.
    let expert_ffn = match config.int(&["moe_intermediate_size"]) {
        Some(width) => Some(width),
        None if config.get("intermediate_size").is_none() => {
            let why = " as the expert width (Mixtral and GPT-OSS give it as intermediate_size)";
            config.required(&["moe_intermediate_size"], why)
        }
        None => ffn,
    };
    let (shared_experts, shared_width) = shared_experts(config);
    let dense_layers = dense_layers(config, layers?);
    Some(MoeSpec {
        num_experts,
        top_k: top_k?,
        expert_ffn_hidden_size: expert_ffn?,
        shared_experts,
        shared_expert_ffn_hidden_size: shared_width,
        dense_layers,
        latent_size: None,
    })
}

/// `num_experts_per_tok`; GPT-OSS repeats it as `experts_per_token`, which must agree.
fn top_k(config: &mut Config) -> Option<i64> {
    let top_k = config.required(&["num_experts_per_tok", "experts_per_token"], " with experts");
    if config.get("num_experts_per_tok").is_none() {
        return top_k;
    }
    if let (Some(top_k), Some(repeated)) = (top_k, config.int(&["experts_per_token"]))
        && top_k != repeated
    {
        config.problem(
            "experts_per_token",
            repeated,
            format!("disagrees with num_experts_per_tok {top_k}"),
            "the two name the same number; fix the one that is wrong",
        );
    }
    top_k
}

/// DeepSeek's `n_shared_experts` (each as wide as a routed expert) or Qwen2-MoE's
/// `shared_expert_intermediate_size` (Nemotron-H's `moe_shared_expert_intermediate_size`: one
/// shared expert of that total width).
fn shared_experts(config: &mut Config) -> (Option<i64>, Option<i64>) {
    // Nemotron-H states both: one shared expert, and its width.
    if let Some(width) = config.int(&["moe_shared_expert_intermediate_size"]) {
        let count = config.int(&["n_shared_experts"]).unwrap_or(1);
        return if width > 0 { (Some(count), Some(width)) } else { (None, None) };
    }
    if let Some(count) = config.int(&["n_shared_experts"]) {
        return (Some(count), None);
    }
    // MiniMax-01 writes `shared_intermediate_size` (0: no shared expert).
    match config.int(&["shared_expert_intermediate_size", "shared_intermediate_size"]) {
        Some(width) if width > 0 => (Some(1), Some(width)),
        _ => (None, None),
    }
}

/// Leading dense layers: DeepSeek's `first_k_dense_replace` and Qwen-MoE's `mlp_only_layers`
/// together must name layers `0..k`; experts on every n-th layer only (`moe_layer_freq`,
/// `decoder_sparse_step` above 1) cannot be represented.
fn dense_layers(config: &mut Config, layers: i64) -> Option<i64> {
    every_layer(
        config,
        "moe_layer_freq",
        "DeepSeek puts experts on layers i >= k with i % freq == 0",
    );
    every_layer(
        config,
        "decoder_sparse_step",
        "Qwen-MoE puts experts on layers i with (i + 1) % step == 0",
    );
    let first_k = config.int(&["first_k_dense_replace"]).unwrap_or(0);
    let most = crate::limits::LAYERS as i64;
    if !(0..=most).contains(&first_k) {
        config.problem(
            "first_k_dense_replace",
            first_k,
            format!("must be between 0 and {most}"),
            "as in the published config: the leading layers with a dense MLP",
        );
    }
    let mut dense: Vec<i64> = (0..first_k.clamp(0, most)).collect();
    dense.extend(mlp_only_layers(config, layers)?);
    dense.sort_unstable();
    dense.dedup();
    let count = dense.len() as i64;
    if dense.iter().enumerate().any(|(i, &layer)| layer != i as i64) {
        config.problem(
            "mlp_only_layers",
            Value::from(dense),
            "dense layers that are not the leading ones cannot be represented",
            "meshplan models dense layers 0..k followed by expert layers (moe.dense_layers = k)",
        );
        return None;
    }
    if count >= layers {
        let key = if first_k >= layers { "first_k_dense_replace" } else { "mlp_only_layers" };
        config.problem(
            key,
            count,
            format!("leaves no expert layer among the {layers} layers"),
            "drop the expert fields for a dense model",
        );
        return None;
    }
    (count > 0).then_some(count)
}

/// A layer-frequency key must be 1 (every layer past the dense ones has experts).
fn every_layer(config: &mut Config, key: &str, rule: &str) {
    if let Some(freq) = config.int(&[key])
        && freq != 1
    {
        config.problem(
            key,
            freq,
            format!("experts on only some layers cannot be represented ({rule})"),
            "meshplan models experts on every layer after the leading dense ones; use 1",
        );
    }
}

/// Qwen-MoE's `mlp_only_layers`: layer indices with a dense MLP.
fn mlp_only_layers(config: &mut Config, layers: i64) -> Option<Vec<i64>> {
    let Some(value) = config.get("mlp_only_layers") else { return Some(Vec::new()) };
    let indices: Option<Vec<i64>> = value.as_array().and_then(|list| {
        list.iter().map(|v| v.as_i64().filter(|&i| (0..layers).contains(&i))).collect()
    });
    if indices.is_none() {
        config.problem(
            "mlp_only_layers",
            value,
            format!("must be a list of layer indices from 0 to {}", layers.saturating_sub(1)),
            "as in the published config, e.g. []",
        );
    }
    indices
}

/// Multi-head latent attention, present when any of its widths is set.
pub(super) fn mla(config: &mut Config) -> Option<MlaSpec> {
    const KEYS: [&str; 5] =
        ["q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"];
    if KEYS.iter().all(|key| config.get(key).is_none()) {
        return None;
    }
    let why = " with latent attention";
    let q_lora_rank = config.int(&["q_lora_rank"]);
    let kv_lora_rank = config.required(&["kv_lora_rank"], why);
    let qk_nope_head_dim = config.required(&["qk_nope_head_dim"], why);
    let qk_rope_head_dim = config.required(&["qk_rope_head_dim"], why);
    let v_head_dim = config.required(&["v_head_dim"], why);
    Some(MlaSpec {
        // DeepSeek-V2-Lite: `q_lora_rank: null` projects queries directly.
        q_lora_rank,
        kv_lora_rank: kv_lora_rank?,
        qk_nope_head_dim: qk_nope_head_dim?,
        qk_rope_head_dim: qk_rope_head_dim?,
        v_head_dim: v_head_dim?,
    })
}

/// DeepSeek's `num_nextn_predict_layers` (multi-token-prediction modules).
pub(super) fn mtp_layers(config: &mut Config) -> Option<i64> {
    config.int(&["num_nextn_predict_layers"])
}

//! The parts of a row's architecture that its numeric columns do not carry: experts, latent
//! attention, head width, sliding windows and multi-token prediction, read from the expert
//! columns and the `arch_notes` text the calibration file transcribes from each model's config.

use super::row::{CalibrationRow, count};
use crate::model::{MlaSpec, ModelSpec, MoeSpec, SlidingWindowSpec};

/// DeepSeek-V3's published latent-attention sizes (its config.json), used for MLA rows whose
/// notes give the ranks but not the head widths.
const DEEPSEEK_V3_MLA: MlaSpec = MlaSpec {
    q_lora_rank: Some(1536),
    kv_lora_rank: 512,
    qk_nope_head_dim: 128,
    qk_rope_head_dim: 64,
    v_head_dim: 128,
};

/// The number right after `key` in `text` (`"kv_lora_rank 512"` -> 512).
fn number_after(text: &str, key: &str) -> Option<i64> {
    let start = text.find(key)? + key.len();
    let digits: String = text[start..]
        .trim_start_matches([' ', '(', '=', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Adds the experts of an `moe` row to `spec`.
pub(super) fn add_experts(
    row: &CalibrationRow,
    spec: &mut ModelSpec,
    assumptions: &mut Vec<String>,
) -> Result<(), String> {
    let field = |cell: &str, name: &str| {
        count(cell).ok_or_else(|| format!("architecture incomplete: `{name}` not stated"))
    };
    let experts = field(&row.num_experts, "num_experts")?;
    let top_k = field(&row.moe_top_k, "moe_top_k")?;
    let expert_ffn = field(&row.moe_ffn_hidden_size, "moe_ffn_hidden_size")?;
    let shared = count(&row.num_shared_experts).unwrap_or(0);
    let notes = row.arch_notes.to_ascii_lowercase();
    let dense_layers = if notes.contains("first layer dense") {
        1
    } else {
        number_after(&notes, "first").filter(|_| notes.contains("layers dense")).unwrap_or(0)
    };
    if row.ffn_hidden_size.trim().is_empty() {
        // Only dense layers use ffn_hidden_size; an all-MoE model never reads it.
        spec.ffn_hidden_size = expert_ffn as i64;
    }
    spec.moe = Some(MoeSpec {
        num_experts: experts as i64,
        top_k: top_k as i64,
        expert_ffn_hidden_size: expert_ffn as i64,
        shared_experts: Some(shared as i64),
        shared_expert_ffn_hidden_size: None,
        dense_layers: Some(dense_layers),
        latent_size: None,
    });
    assumptions.push(format!(
        "experts: {experts} routed (top-{top_k}, width {expert_ffn}), {shared} shared, {dense_layers} leading dense layers (row columns and notes)"
    ));
    Ok(())
}

/// Adds what the notes say about attention and extra modules: MLA ranks and head widths, an
/// explicit head width, sliding windows, multi-token prediction; and what a GPT-OSS config
/// states that the row's columns cannot (biases, YaRN, the clamped activation).
pub(super) fn add_attention_notes(
    row: &CalibrationRow,
    spec: &mut ModelSpec,
    assumptions: &mut Vec<String>,
) {
    let notes = row.arch_notes.to_ascii_lowercase();
    let model = row.model.to_ascii_lowercase();
    if notes.contains("mla") {
        let mut mla = DEEPSEEK_V3_MLA;
        mla.q_lora_rank = number_after(&notes, "q_lora_rank").or(mla.q_lora_rank);
        mla.kv_lora_rank = number_after(&notes, "kv_lora_rank").unwrap_or(mla.kv_lora_rank);
        let dims_stated = notes.contains("qk head");
        if dims_stated {
            mla.qk_nope_head_dim = number_after(&notes, "qk head").unwrap_or(mla.qk_nope_head_dim);
            let rope = notes.find("qk head").and_then(|at| number_after(&notes[at..], "+"));
            mla.qk_rope_head_dim = rope.unwrap_or(mla.qk_rope_head_dim);
            mla.v_head_dim = number_after(&notes, "v head").unwrap_or(mla.v_head_dim);
        }
        assumptions.push(format!(
            "MLA: q rank {:?}, kv rank {}, qk head {}+{}, v head {}{}",
            mla.q_lora_rank,
            mla.kv_lora_rank,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim,
            if dims_stated { "" } else { " (head widths: DeepSeek-V3's config)" }
        ));
        spec.mla = Some(mla);
    } else if let Some(head_dim) =
        number_after(&notes, "head_dim (kv_channels)").or_else(|| number_after(&notes, "head_dim"))
    {
        spec.head_dim = Some(head_dim);
    }
    if let Some(window) = number_after(&notes, "sliding-window(") {
        let alternating = notes.contains("alternating");
        spec.sliding_window =
            Some(SlidingWindowSpec { window, full_attention_every: alternating.then_some(2) });
        assumptions.push(format!(
            "sliding window {window}{} (notes)",
            if alternating { " on every other layer" } else { " on every layer" }
        ));
    }
    if model.contains("gpt-oss") || model.contains("gpt oss") {
        // GPT-OSS config.json (tests/fixtures/hf/gpt-oss-120b.json, as the presets): biases
        // (`attention_bias: true`), YaRN rotary scaling (`rope_scaling.rope_type: yarn`) and a
        // clamped gated activation (`swiglu_limit: 7.0`).
        spec.linear_bias = true;
        spec.rope_scaling = Some(crate::model::RopeScaling::Yarn);
        spec.glu_clamp = true;
        assumptions.push(
            "gpt-oss config.json: linear biases, YaRN rotary scaling, clamped SwiGLU (swiglu_limit 7)"
                .into(),
        );
    }
    if notes.contains("mtp") || model.contains("mtp") {
        let mtp = if model.contains("w/o mtp") {
            0
        } else if model.contains("w/ mtp") {
            1
        } else {
            assumptions.push(
                "one MTP module (DeepSeek-V3 config: num_nextn_predict_layers = 1; the row does not say)"
                    .into(),
            );
            1
        };
        spec.mtp_layers = Some(mtp);
    }
}

/// A hybrid row's architecture: the calibration file does not transcribe hybrid shapes, so the
/// built-in preset of the row's model name is read (`Nemotron_3_5_Lightning` is
/// `nemotron-3.5-lightning`), each preset with the sources of its shape.
pub(super) fn hybrid_preset(
    row: &CalibrationRow,
    assumptions: &mut Vec<String>,
) -> Result<ModelSpec, String> {
    let key = |name: &str| -> String {
        name.to_ascii_lowercase().chars().filter(char::is_ascii_alphanumeric).collect()
    };
    let wanted = key(&row.model);
    let spec = crate::presets::MODELS
        .iter()
        .filter(|preset| key(preset.name) == wanted)
        .filter_map(|preset| crate::presets::model(preset.name).ok())
        .find(|spec| spec.hybrid_pattern.is_some())
        .ok_or_else(|| {
            format!("hybrid model `{}` has no hybrid preset (shape not in the row)", row.model)
        })?;
    assumptions.push(format!(
        "shape from the preset {} (the row does not state it): {}",
        spec.name,
        spec.hybrid_pattern.as_deref().unwrap_or("")
    ));
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::number_after;

    #[test]
    fn numbers_follow_their_keys() {
        let notes =
            "mla attention (q_lora_rank 1536, kv_lora_rank 512, qk head 128+64 rope, v head 128)";
        assert_eq!(number_after(notes, "q_lora_rank"), Some(1536));
        assert_eq!(number_after(notes, "kv_lora_rank"), Some(512));
        assert_eq!(number_after(notes, "qk head"), Some(128));
        assert_eq!(number_after(notes, "v head"), Some(128));
        assert_eq!(number_after("sliding-window(128)/full", "sliding-window("), Some(128));
        assert_eq!(number_after("no such key", "head_dim"), None);
    }
}

//! The hybrid fields of a `config.json`: Nemotron-H and Nemotron 3 (`model_type` `nemotron_h`),
//! the layer pattern `hybrid_override_pattern` and the Mamba-2 mixer (`mamba_num_heads`,
//! `mamba_head_dim`, `ssm_state_size`, `n_groups`, `conv_kernel`, `chunk_size`; without
//! `mamba_num_heads`, `expand x hidden_size / mamba_head_dim` heads, as transformers builds them);
//! Qwen3-Next's gated DeltaNet layers (`linear_*`, `layer_types`, `full_attention_interval`), and
//! MiniMax-01's lightning attention layers (`attn_type_list` or `layer_types`, `block_size`).

use super::Config;
use crate::model::{LightningAttentionSpec, LinearAttentionSpec, MambaSpec, MoeSpec};

/// The pattern and the Mamba-2 sizes, or `(None, None)` for a model without a pattern.
pub(super) fn hybrid(
    config: &mut Config,
    hidden: Option<i64>,
) -> (Option<String>, Option<MambaSpec>) {
    let Some(pattern) = pattern(config) else { return (None, None) };
    let mtp = match config.get("mtp_layers_block_type") {
        Some(list) => Some(block_types(list).unwrap_or_default()),
        None => {
            config.get("mtp_hybrid_override_pattern").map(|v| v.as_str().unwrap_or("").to_owned())
        }
    };
    if let Some(mtp) = mtp
        && mtp != "*E"
    {
        let key = if config.get("mtp_layers_block_type").is_some() {
            "mtp_layers_block_type"
        } else {
            "mtp_hybrid_override_pattern"
        };
        config.problem(
            key,
            format!("\"{mtp}\""),
            "is a multi-token-prediction layout meshplan does not price",
            "meshplan prices MTP modules of one attention and one expert layer, \"*E\"",
        );
    }
    if !pattern.contains('M') {
        return (Some(pattern), None);
    }
    let head_dim = config.int(&["mamba_head_dim"]).unwrap_or(64);
    let num_heads = match config.int(&["mamba_num_heads"]) {
        Some(heads) => Some(heads),
        None => {
            let expand = config.int(&["expand"]).unwrap_or(2);
            let inner = hidden.map(|hidden| expand.checked_mul(hidden));
            if inner == Some(None) {
                config.problem(
                    "expand",
                    expand,
                    "times hidden_size is past any width meshplan prices",
                    format!(
                        "as in the published config: the Mamba-2 inner width expand x hidden_size \
                         is at most {}",
                        crate::limits::WIDTH
                    ),
                );
            }
            inner.flatten().map(|inner| inner / head_dim.max(1))
        }
    };
    let state_size = config.required(&["ssm_state_size"], " with Mamba-2 layers");
    let mamba = match (num_heads, state_size) {
        (Some(num_heads), Some(state_size)) => Some(MambaSpec {
            num_heads,
            head_dim,
            state_size,
            num_groups: config.int(&["n_groups"]),
            conv_kernel: config.int(&["conv_kernel"]),
            chunk_size: config.int(&["chunk_size"]),
        }),
        _ => None,
    };
    (Some(pattern), mamba)
}

/// The pattern: `hybrid_override_pattern`, or transformers' `layers_block_type` list
/// (`mamba`, `attention`, `mlp`, `moe`) spelled as one.
fn pattern(config: &mut Config) -> Option<String> {
    if let Some(value) = config.get("hybrid_override_pattern") {
        let text = value.as_str().map(str::to_owned);
        if text.is_none() {
            config.problem(
                "hybrid_override_pattern",
                value,
                "must be the layer pattern as text",
                "as in the published config, e.g. \"M-M*-\"",
            );
        }
        return text;
    }
    let list = config.get("layers_block_type")?;
    let text = block_types(list);
    if text.is_none() {
        config.problem(
            "layers_block_type",
            list,
            "must list mamba, attention, mlp or moe per layer",
            "as in the published config",
        );
    }
    text
}

/// A `layers_block_type` list as pattern symbols (`None` if an entry is unknown).
fn block_types(list: &serde_json::Value) -> Option<String> {
    list.as_array()?
        .iter()
        .map(|kind| match kind.as_str()? {
            "mamba" => Some('M'),
            "attention" | "full_attention" => Some('*'),
            "mlp" => Some('-'),
            "moe" => Some('E'),
            _ => None,
        })
        .collect()
}

/// A linear-attention hybrid (Qwen3-Next: `linear_num_value_heads` and the other `linear_*`
/// keys): its pattern, each layer's token mixer (`G` where `layer_types` says
/// `linear_attention`, or every layer but each `full_attention_interval`-th) followed by its MLP
/// (`E` with experts, `-` for the leading dense layers), and the gated DeltaNet sizes.
pub(super) fn linear_attention(
    config: &mut Config,
    layers: Option<i64>,
    moe: Option<&mut MoeSpec>,
) -> Option<(String, LinearAttentionSpec)> {
    config.get("linear_num_value_heads")?;
    let why = " with linear attention";
    let spec = LinearAttentionSpec {
        num_key_heads: config.required(&["linear_num_key_heads"], why)?,
        num_value_heads: config.required(&["linear_num_value_heads"], why)?,
        key_head_dim: config.required(&["linear_key_head_dim"], why)?,
        value_head_dim: config.required(&["linear_value_head_dim"], why)?,
        conv_kernel: config.int(&["linear_conv_kernel_dim"]),
        chunk_size: None,
    };
    let layers = usize::try_from(layers?).ok().filter(|&n| n as u64 <= crate::limits::LAYERS)?;
    let full: Vec<bool> = match config.get("layer_types") {
        Some(list) => {
            let kinds: Option<Vec<bool>> = list.as_array().and_then(|list| {
                list.iter()
                    .map(|kind| match kind.as_str()? {
                        "linear_attention" => Some(false),
                        "full_attention" => Some(true),
                        _ => None,
                    })
                    .collect()
            });
            match kinds {
                Some(kinds) if kinds.len() == layers => kinds,
                _ => {
                    config.problem(
                        "layer_types",
                        list,
                        format!("must name linear_attention or full_attention for each of the {layers} layers"),
                        "as in the published config",
                    );
                    return None;
                }
            }
        }
        None => {
            let every = config.int(&["full_attention_interval"]).unwrap_or(4).max(1) as usize;
            (0..layers).map(|i| (i + 1) % every == 0).collect()
        }
    };
    // Leading dense layers keep a dense MLP; the pattern places them, so the experts' count of
    // them is dropped.
    let dense = match moe {
        Some(moe) => moe.dense_layers.take().unwrap_or(0).max(0) as usize,
        None => layers,
    };
    let pattern = full
        .iter()
        .enumerate()
        .flat_map(|(i, &full)| [if full { '*' } else { 'G' }, if i < dense { '-' } else { 'E' }])
        .collect();
    Some((pattern, spec))
}

/// MiniMax-01's lightning attention hybrid (`model_type` `minimax`, `minimax_text_01` or
/// `minimax_m1`): which layers have lightning attention (`attn_type_list`, 0 lightning and 1
/// softmax, as MiniMax writes it; or transformers' `layer_types`, `linear_attention` and
/// `full_attention`), each followed by its experts (`E`), and the blocks' sizes (the attention
/// heads and head width, `block_size`). `None` when every layer has softmax attention.
pub(super) fn lightning_attention(
    config: &mut Config,
    model_type: &str,
    layers: Option<i64>,
    (hidden, heads, head_dim): (Option<i64>, Option<i64>, Option<i64>),
) -> Option<(String, LightningAttentionSpec)> {
    if !matches!(model_type, "minimax" | "minimax_text_01" | "minimax_m1") {
        return None;
    }
    let layers = usize::try_from(layers?).ok().filter(|&n| n as u64 <= crate::limits::LAYERS)?;
    let (key, list) = match (config.get("attn_type_list"), config.get("layer_types")) {
        (Some(list), _) => ("attn_type_list", list),
        (None, Some(list)) => ("layer_types", list),
        (None, None) => return None,
    };
    let lightning: Option<Vec<bool>> = list.as_array().and_then(|list| {
        list.iter()
            .map(|kind| match (kind.as_i64(), kind.as_str()) {
                (Some(0), _) | (_, Some("linear_attention")) => Some(true),
                (Some(1), _) | (_, Some("full_attention")) => Some(false),
                _ => None,
            })
            .collect()
    });
    let lightning = match lightning {
        Some(kinds) if kinds.len() == layers => kinds,
        _ => {
            config.problem(
                key,
                list,
                format!("must name lightning (0, linear_attention) or softmax (1, full_attention) attention for each of the {layers} layers"),
                "as in the published config",
            );
            return None;
        }
    };
    if !lightning.contains(&true) {
        return None;
    }
    let heads = heads?;
    let spec = LightningAttentionSpec {
        num_heads: heads,
        head_dim: head_dim.or_else(|| hidden.filter(|_| heads > 0).map(|hidden| hidden / heads))?,
        block_size: config.int(&["block_size"]),
    };
    let pattern =
        lightning.iter().flat_map(|&lightning| [if lightning { 'L' } else { '*' }, 'E']).collect();
    Some((pattern, spec))
}

/// The token mixer of a hybrid family meshplan has no layer kind for, by `model_type`: Jamba's
/// Mamba-1 selective scan, and Falcon-H1's attention and Mamba-2 running side by side in each
/// layer on one norm.
pub(super) fn unpriced_mixer(model_type: &str) -> Option<&'static str> {
    match model_type {
        "jamba" => Some("Mamba-1 (selective scan) layers"),
        "falcon_h1" => Some("parallel attention and Mamba-2 mixers in each layer"),
        _ => None,
    }
}

/// Whether `value` is a hybrid config's `model_type`.
pub(super) fn is_hybrid_type(model_type: &str) -> bool {
    model_type == "nemotron_h"
}

/// The latent width of a LatentMoE config (`moe_latent_size`; Nemotron 3 Super and Ultra).
pub(super) fn latent_size(config: &mut Config) -> Option<i64> {
    config.int(&["moe_latent_size"]).filter(|&size| size > 0)
}

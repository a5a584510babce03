//! The hybrid fields of a `config.json`: Nemotron-H and Nemotron 3 (`model_type` `nemotron_h`),
//! the layer pattern `hybrid_override_pattern` and the Mamba-2 mixer (`mamba_num_heads`,
//! `mamba_head_dim`, `ssm_state_size`, `n_groups`, `conv_kernel`, `chunk_size`; without
//! `mamba_num_heads`, `expand x hidden_size / mamba_head_dim` heads, as transformers builds them);
//! Qwen3-Next's gated DeltaNet layers (`linear_*`, `layer_types`, `full_attention_interval`),
//! MiniMax-01's lightning attention layers (`attn_type_list` or `layer_types`, `block_size`),
//! Falcon-H1's parallel layers (`mamba_*`, `attn_layer_indices`), and Jamba's Mamba-1, attention
//! and expert layers (`attn_layer_*`, `expert_layer_*`, `mamba_*`).

use super::Config;
use crate::model::{LightningAttentionSpec, LinearAttentionSpec, Mamba1Spec, MambaSpec, MoeSpec};

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
            gated_norm: None,
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

/// Falcon-H1 (`model_type` `falcon_h1`, transformers' `FalconH1Config`): each layer a `P`
/// (Mamba-2 beside attention on one pre-norm, then the MLP), or a Mamba-2 layer and its MLP
/// (`M-`) where `attn_layer_indices` lists the layers with attention and leaves it out; the
/// Mamba-2 sizes from `mamba_n_heads`, `mamba_d_head` (a number, or `auto`: the inner width
/// `mamba_d_ssm`, else `mamba_expand x hidden_size`, over the heads), `mamba_d_state`, `mamba_n_groups`, `mamba_d_conv`, `mamba_chunk_size` and
/// `mamba_rms_norm` (the gated norm), with transformers' defaults where a key is absent. The
/// muP multipliers (`*_multiplier`, `ssm_multipliers`, `mlp_multipliers`) scale activations
/// element-wise and change no width.
pub(super) fn falcon_h1(
    config: &mut Config,
    model_type: &str,
    layers: Option<i64>,
    hidden: Option<i64>,
) -> Option<(String, MambaSpec)> {
    if model_type != "falcon_h1" {
        return None;
    }
    for key in ["mamba_proj_bias", "projectors_bias", "mlp_bias", "attention_bias"] {
        config.refuse_flag(
            key,
            true,
            "adds biases meshplan's Falcon-H1 layers do not price",
            "published Falcon-H1 configs set it false",
        );
    }
    config.refuse_flag(
        "mamba_conv_bias",
        false,
        "drops the convolution's bias, which meshplan's Mamba-2 mixer has",
        "published Falcon-H1 configs set it true",
    );
    config.refuse_flag(
        "mamba_use_mlp",
        false,
        "drops each layer's MLP, which meshplan's Falcon-H1 layer (P) has",
        "published Falcon-H1 configs set it true",
    );
    let attention = falcon_attention_layers(config, layers);
    let why = " with Falcon-H1's Mamba-2 mixers";
    let heads = config.required(&["mamba_n_heads"], why)?;
    let stated_inner = config.int(&["mamba_d_ssm"]);
    let stated_head_dim = match config.get("mamba_d_head") {
        Some(value) if value.as_str() == Some("auto") => None,
        Some(_) => Some(config.int(&["mamba_d_head"])?),
        None => None,
    };
    // A stated head width gives the inner width (Megatron-Bridge's Falcon-H1 provider reads the
    // heads and their width); `auto` divides `mamba_d_ssm`, or `mamba_expand x hidden_size`.
    let head_dim = match stated_head_dim {
        Some(head_dim) => {
            if let Some(inner) = stated_inner
                && heads.checked_mul(head_dim) != Some(inner)
            {
                config.problem(
                    "mamba_d_ssm",
                    inner,
                    format!("is not mamba_n_heads x mamba_d_head = {heads} x {head_dim}"),
                    "as in the published config: the inner width is the heads' total width",
                );
            }
            head_dim
        }
        None => {
            let expand = config.int(&["mamba_expand"]).unwrap_or(2);
            let inner = stated_inner.or_else(|| hidden.and_then(|h| h.checked_mul(expand)))?;
            if heads <= 0 || inner % heads != 0 {
                config.problem(
                    "mamba_n_heads",
                    heads,
                    format!("does not divide the Mamba-2 inner width {inner}"),
                    "as in the published config: mamba_d_head = mamba_d_ssm / mamba_n_heads",
                );
                return None;
            }
            inner / heads
        }
    };
    let spec = MambaSpec {
        num_heads: heads,
        head_dim,
        state_size: config.required(&["mamba_d_state"], why)?,
        num_groups: Some(config.int(&["mamba_n_groups"]).unwrap_or(1)),
        conv_kernel: config.int(&["mamba_d_conv"]),
        chunk_size: Some(config.int(&["mamba_chunk_size"]).unwrap_or(256)),
        gated_norm: Some(config.flag("mamba_rms_norm").unwrap_or(false)),
    };
    let pattern = attention?.iter().map(|&attention| if attention { "P" } else { "M-" }).collect();
    Some((pattern, spec))
}

/// Which of Falcon-H1's `layers` layers have attention: `attn_layer_indices`, or every layer
/// when it is null or absent.
fn falcon_attention_layers(config: &mut Config, layers: Option<i64>) -> Option<Vec<bool>> {
    let layers = usize::try_from(layers?).ok().filter(|&n| n as u64 <= crate::limits::LAYERS)?;
    Some(match config.get("attn_layer_indices") {
        None => vec![true; layers],
        Some(list) => {
            let indices: Option<Vec<usize>> = list.as_array().and_then(|list| {
                list.iter()
                    .map(|index| index.as_u64().and_then(|i| usize::try_from(i).ok()))
                    .collect()
            });
            match indices {
                Some(indices) if indices.iter().all(|&i| i < layers) => {
                    let mut attention = vec![false; layers];
                    for i in indices {
                        attention[i] = true;
                    }
                    attention
                }
                _ => {
                    config.problem(
                        "attn_layer_indices",
                        list,
                        format!("must list layer numbers below num_hidden_layers {layers}"),
                        "as in the published config, or null for attention in every layer",
                    );
                    return None;
                }
            }
        }
    })
}

/// Jamba (`model_type` `jamba`, transformers' `JambaConfig`): each layer a token mixer, attention
/// where `layer % attn_layer_period == attn_layer_offset` and Mamba-1 (`S`) elsewhere, then its
/// feed-forward block, the experts (`E`) where `layer % expert_layer_period ==
/// expert_layer_offset` and a dense MLP (`-`) elsewhere; the Mamba-1 sizes from `mamba_expand x
/// hidden_size`, `mamba_d_state`, `mamba_d_conv` and `mamba_dt_rank` (a number, or `auto`:
/// `ceil(hidden_size / 16)`), with transformers' defaults (Jamba-v0.1's) where a key is absent.
/// Jamba's mixer always normalizes dt, B and C (`mamba_inner_layernorms` in Jamba-v0.1's own
/// config). The experts' count of leading dense layers is dropped: the pattern places them.
pub(super) fn jamba(
    config: &mut Config,
    model_type: &str,
    layers: Option<i64>,
    hidden: Option<i64>,
    moe: &mut Option<MoeSpec>,
) -> Option<(String, Mamba1Spec)> {
    if model_type != "jamba" {
        return None;
    }
    // One expert per layer (`num_experts` 1) is transformers' way of saying no experts.
    if moe.as_ref().is_some_and(|moe| moe.num_experts <= 1) {
        *moe = None;
    }
    config.refuse_flag(
        "mamba_proj_bias",
        true,
        "adds projection biases meshplan's Mamba-1 mixer does not price",
        "published Jamba configs set it false",
    );
    config.refuse_flag(
        "mamba_conv_bias",
        false,
        "drops the convolution's bias, which meshplan's Mamba-1 mixer has",
        "published Jamba configs set it true",
    );
    config.refuse_flag(
        "mamba_inner_layernorms",
        false,
        "drops the norms over dt, B and C, which Jamba's mixer in transformers always runs",
        "published Jamba configs set it true",
    );
    let mut period = |key: &str, default: i64| {
        let value = config.int(&[key]).unwrap_or(default);
        if value <= 0 {
            config.problem(
                key,
                value,
                "must be a positive number of layers",
                "as in the published config",
            );
        }
        value.max(1)
    };
    let attention = (period("attn_layer_period", 8), period("attn_layer_offset", 4));
    let experts = (period("expert_layer_period", 2), period("expert_layer_offset", 1));
    for (key, (every, offset)) in
        [("attn_layer_offset", attention), ("expert_layer_offset", experts)]
    {
        if offset >= every {
            config.problem(
                key,
                offset,
                format!("is not below its period {every}, so no layer matches it"),
                "as in the published config: the offset is a layer number within the period",
            );
        }
    }
    let has_experts = match moe.as_mut() {
        Some(moe) => {
            moe.dense_layers = None;
            true
        }
        None => false,
    };
    let hidden = hidden?;
    let expand = config.int(&["mamba_expand"]).unwrap_or(2);
    let Some(inner) = expand.checked_mul(hidden) else {
        config.problem(
            "mamba_expand",
            expand,
            "times hidden_size is past any width meshplan prices",
            format!(
                "as in the published config: the Mamba-1 inner width is at most {}",
                crate::limits::WIDTH
            ),
        );
        return None;
    };
    // `ceil(hidden_size / 16)`, without overflowing for any hidden size.
    let auto_rank = hidden / 16 + i64::from(hidden % 16 != 0);
    let dt_rank = match config.get("mamba_dt_rank") {
        Some(value) if value.as_str() == Some("auto") => auto_rank,
        Some(_) => config.int(&["mamba_dt_rank"])?,
        None => auto_rank,
    };
    let spec = Mamba1Spec {
        inner_size: inner,
        state_size: Some(config.int(&["mamba_d_state"]).unwrap_or(16)),
        conv_kernel: Some(config.int(&["mamba_d_conv"]).unwrap_or(4)),
        dt_rank,
        dt_bc_norms: Some(true),
    };
    let layers = usize::try_from(layers?).ok().filter(|&n| n as u64 <= crate::limits::LAYERS)?;
    let pattern = (0..layers as i64)
        .flat_map(|layer| {
            let mixer = if layer % attention.0 == attention.1 { '*' } else { 'S' };
            let feed_forward =
                if has_experts && layer % experts.0 == experts.1 { 'E' } else { '-' };
            [mixer, feed_forward]
        })
        .collect();
    Some((pattern, spec))
}

/// Whether `value` is a hybrid config's `model_type` whose layers have no position embedding
/// (the recurrent layers order the tokens): Nemotron-H and Nemotron 3, and Jamba.
pub(super) fn is_hybrid_type(model_type: &str) -> bool {
    matches!(model_type, "nemotron_h" | "jamba")
}

/// The latent width of a LatentMoE config (`moe_latent_size`; Nemotron 3 Super and Ultra).
pub(super) fn latent_size(config: &mut Config) -> Option<i64> {
    config.int(&["moe_latent_size"]).filter(|&size| size > 0)
}

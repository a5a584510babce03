//! Sliding-window attention in a `config.json`: Mistral's `sliding_window` (every layer), Qwen2's
//! `use_sliding_window` / `max_window_layers`, and the per-layer `layer_types` list of GPT-OSS and
//! transformers >= 5 (`sliding_attention` / `full_attention`), which must repeat one full layer
//! every n layers to fit the spec's `full_attention_every`.

use serde_json::Value;

use super::Config;
use crate::model::SlidingWindowSpec;

const SLIDING: &str = "sliding_attention";
const FULL: &str = "full_attention";

/// The window and how often a layer attends to the whole sequence; `None` when no layer is
/// windowed (or the layout is unreadable, which is recorded as a problem).
pub(super) fn sliding_window(
    config: &mut Config,
    layers: Option<i64>,
) -> Option<SlidingWindowSpec> {
    let window = config.int(&["sliding_window"]);
    // A linear-attention hybrid's `layer_types` names its token mixers (`hybrid.rs`).
    if config.get("linear_num_value_heads").is_some() {
        return None;
    }
    // A layer count past its bound is reported by the model's validation; no list that long is
    // built here.
    let layers = usize::try_from(layers?).ok().filter(|&n| n as u64 <= crate::limits::LAYERS)?;
    let (windowed, key) = match config.get("layer_types") {
        Some(types) => (layer_types(config, types, layers)?, "layer_types"),
        None => (legacy_windowed(config, window.is_some(), layers), "max_window_layers"),
    };
    if !windowed.contains(&true) {
        return None;
    }
    let Some(window) = window else {
        config.problem(
            "sliding_window",
            "(missing)",
            "is required when layer_types has sliding_attention layers",
            "give the window length, as in the published config",
        );
        return None;
    };
    let full_attention_every = match period(&windowed) {
        Some(0) => None,
        Some(every) => Some(every as i64),
        None => {
            irregular(config, key, &windowed);
            return None;
        }
    };
    Some(SlidingWindowSpec { window, full_attention_every })
}

/// `layer_types` as windowed (`true`) or full (`false`) per layer.
fn layer_types(config: &mut Config, types: &Value, layers: usize) -> Option<Vec<bool>> {
    let Some(list) = types.as_array() else {
        config.problem("layer_types", types, "must be a list", "as in the published config");
        return None;
    };
    if list.len() != layers {
        config.problem(
            "layer_types",
            format!("({} entries)", list.len()),
            format!("must name one attention type for each of the {layers} layers"),
            "as in the published config",
        );
        return None;
    }
    let mut windowed = Vec::with_capacity(layers);
    for (index, kind) in list.iter().enumerate() {
        match kind.as_str() {
            Some(SLIDING) => windowed.push(true),
            Some(FULL) => windowed.push(false),
            _ => {
                config.problem(
                    &format!("layer_types[{index}]"),
                    kind,
                    "is an attention type meshplan does not model",
                    format!("meshplan models \"{SLIDING}\" and \"{FULL}\" layers"),
                );
                return None;
            }
        }
    }
    Some(windowed)
}

/// Before `layer_types`: a window applies to every layer (Mistral, Mixtral) unless
/// `use_sliding_window` is false, and Qwen2 keeps the first `max_window_layers` layers full.
fn legacy_windowed(config: &mut Config, has_window: bool, layers: usize) -> Vec<bool> {
    let used = has_window && config.flag("use_sliding_window").unwrap_or(true);
    let full_prefix = match config.int(&["max_window_layers"]) {
        Some(n) if used => usize::try_from(n).unwrap_or(0),
        _ => 0,
    };
    (0..layers).map(|layer| used && layer >= full_prefix).collect()
}

/// The n of "one full layer every n" (0 when every layer is windowed), or `None` when the full
/// layers are not evenly spaced.
fn period(windowed: &[bool]) -> Option<usize> {
    let full: Vec<usize> = (0..windowed.len()).filter(|&layer| !windowed[layer]).collect();
    let (&first, &last) = match (full.first(), full.last()) {
        (Some(first), Some(last)) => (first, last),
        _ => return Some(0),
    };
    let every = if full.len() == 1 { windowed.len() } else { full[1] - full[0] };
    let even = full.windows(2).all(|pair| pair[1] - pair[0] == every);
    let ends = first < every && windowed.len() - 1 - last < every;
    (even && ends).then_some(every)
}

fn irregular(config: &mut Config, key: &str, windowed: &[bool]) {
    let full: Vec<usize> = (0..windowed.len()).filter(|&layer| !windowed[layer]).collect();
    config.problem(
        key,
        format!("(full attention on layers {full:?})"),
        "full-attention layers that do not repeat every n layers cannot be represented",
        "meshplan models one full-attention layer in every n (sliding_window.full_attention_every)",
    );
}

//! The bounds of what a model derives from its fields, checked at validation like the fields
//! themselves: each width that is a product of fields (heads x head width, groups x state, the
//! shared experts x their width) at most `limits::WIDTH`, and the parameter total at most
//! `limits::PARAMS`, counted in `u128`.
//!
//! Each field within its own bound does not bound their products: 65,536 heads of 2^20 make a
//! 2^36-wide query, whose 2^56-parameter projection overflowed `u64` over 4096 layers (a panic in
//! a debug build, a wrapped count in a release build). With every width bounded, one layer's
//! counts stay below 2^59 and are exact in `u64`; only what multiplies them by layers or modules
//! could overflow, and that is the total checked here before a `Model` is handed out.

use crate::limits::{PARAMS, WIDTH};
use crate::violation::Collector;

use super::{Mla, MlaSpec, Model, Sublayer, accepted, positive};

/// Records a problem when the product of `factors` (each a field's key and accepted value), the
/// model's `what`, is wider than `limits::WIDTH`; the problem is recorded against `named`, one of
/// the factors, and lists them all.
pub(super) fn check_width(
    collector: &mut Collector,
    what: &str,
    named: (&str, u64),
    factors: &[(&str, u64)],
) {
    let width: u128 = factors.iter().map(|&(_, value)| u128::from(value)).product();
    if width <= u128::from(WIDTH) {
        return;
    }
    let shown = |key: &str| if key.contains(' ') { format!("({key})") } else { key.to_owned() };
    let product = factors
        .iter()
        .map(|&(key, value)| format!("{} {value}", shown(key)))
        .collect::<Vec<_>>()
        .join(" x ");
    let keys = factors.iter().map(|&(key, _)| shown(key)).collect::<Vec<_>>().join(" x ");
    collector.add(
        format!("model.{}", named.0),
        named.1,
        format!(
            "makes the {what} {product} = {width}, wider than the largest width meshplan \
             prices, {WIDTH}"
        ),
        format!(
            "set each to the architecture's value (from its config.json): {keys} is at most \
             {WIDTH}"
        ),
    );
}

/// Latent attention's fields, and the two widths derived from them with the query heads (when
/// `heads` was accepted): the queries (`heads x (qk_nope_head_dim + qk_rope_head_dim)`) and the
/// keys and values the up-projection rebuilds (`heads x (qk_nope_head_dim + v_head_dim)`, at
/// least as wide as the attention output, `heads x v_head_dim`).
pub(super) fn validate_mla(collector: &mut Collector, spec: &MlaSpec, heads: Option<u64>) -> Mla {
    let q_lora_rank = match spec.q_lora_rank {
        Some(rank) => positive(collector, "mla.q_lora_rank", rank),
        None => 0,
    };
    let kv_lora_rank = positive(collector, "mla.kv_lora_rank", spec.kv_lora_rank);
    let nope = accepted(collector, "mla.qk_nope_head_dim", spec.qk_nope_head_dim);
    let rope = accepted(collector, "mla.qk_rope_head_dim", spec.qk_rope_head_dim);
    let value = accepted(collector, "mla.v_head_dim", spec.v_head_dim);
    // Each problem names the wider of the two per-head widths it adds.
    let wider = |a: (&'static str, u64), b: (&'static str, u64)| if b.1 > a.1 { b } else { a };
    if let (Some(heads), Some(nope), Some(rope)) = (heads, nope, rope) {
        let per_head = ("mla.qk_nope_head_dim + mla.qk_rope_head_dim", nope + rope);
        let factors = [("num_attention_heads", heads), per_head];
        let named = wider(("mla.qk_nope_head_dim", nope), ("mla.qk_rope_head_dim", rope));
        check_width(collector, "query width", named, &factors);
    }
    if let (Some(heads), Some(nope), Some(value)) = (heads, nope, value) {
        let per_head = ("mla.qk_nope_head_dim + mla.v_head_dim", nope + value);
        let factors = [("num_attention_heads", heads), per_head];
        let named = wider(("mla.qk_nope_head_dim", nope), ("mla.v_head_dim", value));
        check_width(collector, "key/value up-projection width", named, &factors);
    }
    Mla {
        q_lora_rank,
        kv_lora_rank,
        qk_nope_head_dim: nope.unwrap_or(1),
        qk_rope_head_dim: rope.unwrap_or(1),
        v_head_dim: value.unwrap_or(1),
    }
}

/// One part of a model's parameters: what it is, the field that scales it (key and value, as the
/// problem names it), what lowers it, and its count.
struct ParameterPart {
    /// What the part is, with its count per layer or module.
    what: String,
    /// The field a problem names.
    field: &'static str,
    /// That field's value.
    value: u64,
    /// The fields that lower the part.
    fix: &'static str,
    /// Parameters of the part.
    count: u128,
}

/// The parts [`Model::total_params`] sums (layers by kind, embedding and output layer, MTP
/// modules), each counted in `u128` from the per-layer counts (exact in `u64` once every width
/// is bounded).
fn parameter_parts(model: &Model) -> Vec<ParameterPart> {
    let wide = u128::from;
    let layers = model.num_layers();
    let per_layer =
        |count: u64, kind: &str, params: u64| format!("{count} {kind} of {params} parameters each");
    let mut parts = Vec::new();
    let mut layer_part = |what: String, count: u64, params: u64, experts: bool| {
        let (field, value, fix) = match (experts, model.moe()) {
            (true, Some(moe)) => (
                "moe.num_experts",
                moe.num_experts,
                "moe.num_experts, moe.expert_ffn_hidden_size or the layers with experts",
            ),
            _ => ("num_layers", layers, "num_layers or the layer widths"),
        };
        parts.push(ParameterPart { what, field, value, fix, count: wide(count) * wide(params) });
    };
    match model.hybrid() {
        Some(hybrid) => {
            let counts = hybrid.counts();
            for kind in Sublayer::ALL {
                let count = u64::from(counts[kind.index()]);
                let params = model.sublayer_params(kind);
                let name = format!("`{}` layers", kind.symbol());
                layer_part(per_layer(count, &name, params), count, params, kind == Sublayer::Moe);
            }
        }
        None => {
            let (dense, params) = (model.dense_layers(), model.params_per_layer());
            layer_part(per_layer(dense, "dense layers", params), dense, params, false);
            let (moe, params) = (model.moe_layers(), model.moe_layer_params());
            layer_part(per_layer(moe, "MoE layers", params), moe, params, true);
        }
    }
    let (sets, module) = (model.mtp_weight_sets(), model.mtp_module_params());
    parts.push(ParameterPart {
        what: per_layer(sets, "multi-token-prediction modules", module),
        field: "mtp_layers",
        value: model.mtp_layers(),
        fix: "mtp_layers (or share their weights, mtp_shared_weights = true)",
        count: wide(sets) * wide(module),
    });
    // At most 3 x 2^44 (vocabulary and position tables of 2^24 rows, 2^20 wide): never the
    // largest part of a total over 2^50, so never the part a problem names.
    let ends = model.embedding_params() + model.output_params() + model.final_norm_params();
    parts.push(ParameterPart {
        what: format!("the embedding, output layer and final norm, {ends} parameters"),
        field: "vocab_size",
        value: model.vocab_size(),
        fix: "vocab_size or hidden_size",
        count: wide(ends),
    });
    parts
}

/// Records a problem when the model's parameters (every part of [`Model::total_params`], summed
/// in `u128`) pass `limits::PARAMS`, naming the field that scales its largest part. `model` must
/// have every field and derived width within its bound.
pub(super) fn check_parameters(collector: &mut Collector, model: &Model) {
    let parts = parameter_parts(model);
    let total: u128 = parts.iter().map(|part| part.count).sum();
    if total <= u128::from(PARAMS) {
        return;
    }
    let Some(largest) = parts.iter().reduce(|a, b| if b.count > a.count { b } else { a }) else {
        return;
    };
    collector.add(
        format!("model.{}", largest.field),
        largest.value,
        format!(
            "gives the model {total} parameters, over the {PARAMS} meshplan prices; the most are \
             in {}",
            largest.what
        ),
        format!(
            "lower {}: a model holds at most {PARAMS} parameters (published ones about 2e12)",
            largest.fix
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MambaSpec, MlpKind, ModelSpec, MoeSpec};
    use crate::presets;

    /// A dense model of `layers` layers at the width bound.
    fn wide(layers: i64) -> ModelSpec {
        ModelSpec {
            num_layers: layers,
            hidden_size: WIDTH as i64,
            ffn_hidden_size: WIDTH as i64,
            num_attention_heads: 8,
            vocab_size: 32_000,
            ..presets::model("llama3.1-8b").unwrap()
        }
    }

    /// Every problem of a spec as `field = value: message`, each with a hint; each that `bound`
    /// names (the bound its message names) names it in its hint too.
    fn problems(spec: &ModelSpec, bound: u64) -> Vec<String> {
        let errors = Model::from_spec(spec).expect_err("refused");
        for problem in errors.list() {
            assert!(!problem.hint.is_empty(), "{problem}");
            if problem.message.contains(&bound.to_string()) {
                assert!(problem.hint.contains(&bound.to_string()), "{problem}");
            }
        }
        errors.list().iter().map(|v| format!("{} = {}: {}", v.field, v.value, v.message)).collect()
    }

    #[test]
    fn a_query_of_65536_heads_of_2_20_is_refused_naming_head_dim_and_the_width_bound() {
        let mut spec = presets::model("llama3.1-8b").unwrap();
        spec.num_attention_heads = 65_536;
        spec.num_kv_heads = Some(65_536);
        spec.head_dim = Some(1 << 20);
        spec.num_layers = 4096;
        let found = problems(&spec, WIDTH);
        assert_eq!(
            found,
            ["model.head_dim = 1048576: makes the query width num_attention_heads 65536 x \
                 head_dim 1048576 = 68719476736, wider than the largest width meshplan prices, \
                 1048576"]
        );
        // Latent attention's query and key/value widths are held to the same bound.
        let mut latent = presets::model("deepseek-v3").unwrap();
        latent.num_attention_heads = 65_536;
        latent.head_dim = Some(128);
        latent.mla.as_mut().unwrap().v_head_dim = 1 << 20;
        let found = problems(&latent, WIDTH);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("model.mla.qk_nope_head_dim = 128: makes the query width"));
        assert!(found[1].starts_with("model.mla.v_head_dim = 1048576: makes the key/value"));
    }

    #[test]
    fn mamba_layers_of_huge_heads_are_refused_by_width_then_by_parameters() {
        let mut spec = presets::model("nemotronh-8b").unwrap();
        spec.hybrid_pattern = Some("M".repeat(4096));
        spec.num_layers = 4096;
        spec.mamba = Some(MambaSpec {
            num_heads: 1 << 20,
            head_dim: 1 << 20,
            state_size: 1 << 20,
            num_groups: Some(1 << 20),
            conv_kernel: Some(1 << 20),
            chunk_size: None,
            gated_norm: None,
        });
        let found = problems(&spec, WIDTH);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("model.mamba.head_dim = 1048576: makes the inner width"));
        assert!(found[1].starts_with("model.mamba.state_size = 1048576: makes the B or C stream"));
        // Widths within the bound, 4096 such layers over 2^20 wide: too many parameters.
        spec.hidden_size = 1 << 20;
        spec.mamba = Some(MambaSpec {
            num_heads: 1 << 14,
            head_dim: 64,
            state_size: 128,
            num_groups: Some(8),
            conv_kernel: Some(1 << 20),
            chunk_size: None,
            gated_norm: None,
        });
        let found = problems(&spec, PARAMS);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("model.num_layers = 4096: gives the model "), "{found:?}");
        assert!(found[0].contains("4096 `M` layers of"), "{found:?}");
    }

    #[test]
    fn experts_65536_of_2_20_over_4096_layers_are_refused_naming_the_experts() {
        let mut spec = wide(4096);
        spec.moe = Some(MoeSpec {
            num_experts: 65_536,
            top_k: 65_536,
            expert_ffn_hidden_size: 1 << 20,
            shared_experts: Some(65_536),
            shared_expert_ffn_hidden_size: Some(1 << 20),
            dense_layers: Some(1),
            latent_size: None,
        });
        spec.mtp_layers = Some(1);
        let found = problems(&spec, PARAMS);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("model.moe.num_experts = 65536: gives the model "));
        assert!(found[0].contains("4095 MoE layers of "), "{found:?}");
        // Unset, the shared experts' width is their count x the expert width: bounded too.
        spec.moe.as_mut().unwrap().shared_expert_ffn_hidden_size = None;
        let found = problems(&spec, WIDTH);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("model.moe.shared_experts = 65536: makes the shared experts"));
    }

    #[test]
    fn every_count_at_its_bound_is_refused_for_its_parameters_without_overflow() {
        // Each field and derived width at its bound: the check's per-layer counts are exact in
        // u64 (a debug build panics on overflow), and the total is refused.
        let width = WIDTH as i64;
        let experts = MoeSpec {
            num_experts: 65_536,
            top_k: 65_536,
            expert_ffn_hidden_size: width,
            shared_experts: Some(65_536),
            shared_expert_ffn_hidden_size: Some(width),
            dense_layers: None,
            latent_size: Some(width),
        };
        let everything = ModelSpec {
            num_layers: 4096,
            hidden_size: width,
            ffn_hidden_size: width,
            num_attention_heads: 65_536,
            num_kv_heads: Some(65_536),
            head_dim: Some(16),
            vocab_size: 1 << 24,
            max_position_embeddings: Some(1 << 24),
            mlp: MlpKind::Gated,
            norm: Some(crate::model::NormKind::Layernorm),
            position_embedding: Some(crate::model::PositionEmbedding::Learned),
            linear_bias: true,
            moe: Some(experts),
            mtp_layers: Some(4096),
            attention_output_gate: true,
            ..presets::model("llama3.1-8b").unwrap()
        };
        let latent = ModelSpec {
            mla: Some(MlaSpec {
                q_lora_rank: Some(width),
                kv_lora_rank: width,
                qk_nope_head_dim: 8,
                qk_rope_head_dim: 8,
                v_head_dim: 8,
            }),
            ..everything.clone()
        };
        let hybrid = ModelSpec {
            hybrid_pattern: Some("MGLS*-E".repeat(585) + "M"),
            mamba: Some(MambaSpec {
                num_heads: 1 << 14,
                head_dim: 64,
                state_size: 1 << 10,
                num_groups: Some(1 << 10),
                conv_kernel: Some(width),
                chunk_size: Some(width),
                gated_norm: None,
            }),
            linear_attention: Some(crate::model::LinearAttentionSpec {
                num_key_heads: 1 << 10,
                num_value_heads: 1 << 10,
                key_head_dim: 1 << 10,
                value_head_dim: 1 << 10,
                conv_kernel: Some(width),
                chunk_size: Some(width),
            }),
            lightning_attention: Some(crate::model::LightningAttentionSpec {
                num_heads: 1 << 10,
                head_dim: 1 << 10,
                block_size: Some(width),
            }),
            mamba1: Some(crate::model::Mamba1Spec {
                inner_size: 1 << 16,
                state_size: Some(16),
                conv_kernel: Some(width),
                dt_rank: 1 << 16,
                dt_bc_norms: Some(true),
            }),
            ..everything.clone()
        };
        for spec in [everything, latent, hybrid] {
            let found = problems(&spec, PARAMS);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].contains(": gives the model "), "{found:?}");
        }
    }

    #[test]
    fn a_product_is_checked_only_once_its_factors_passed_their_own_checks() {
        let mut spec = presets::model("llama3.1-8b").unwrap();
        spec.num_attention_heads = 65_536;
        spec.head_dim = Some(1 << 40);
        let found = problems(&spec, WIDTH);
        assert_eq!(
            found,
            ["model.head_dim = 1099511627776: exceeds the largest value meshplan prices, 1048576"]
        );
        // Nor is a divisibility: a refused width is no stand-in of 1 that the heads fail to divide.
        let mut spec = presets::model("llama3.1-8b").unwrap();
        (spec.hidden_size, spec.head_dim) = (1 << 40, None);
        let found = problems(&spec, WIDTH);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("model.hidden_size = 1099511627776: exceeds"));
        let mut spec = presets::model("nemotronh-8b").unwrap();
        spec.mamba.as_mut().unwrap().num_heads = 1 << 40;
        let found = problems(&spec, WIDTH);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("model.mamba.num_heads = 1099511627776: exceeds"));
        // A refused name or window leaves the parameter count checked.
        let mut spec = wide(4096);
        spec.name = String::new();
        spec.sliding_window =
            Some(crate::model::SlidingWindowSpec { window: 0, full_attention_every: None });
        let found = problems(&spec, PARAMS);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[1].starts_with("model.num_layers = 4096: gives the model"), "{found:?}");
    }

    #[test]
    fn the_parts_sum_to_every_presets_total_and_a_model_at_the_bound_validates() {
        for preset in presets::MODELS {
            let name = preset.name;
            let model = Model::from_spec(&presets::model(name).unwrap()).unwrap();
            let parts: u128 = parameter_parts(&model).iter().map(|part| part.count).sum();
            assert_eq!(parts, u128::from(model.total_params()), "{name}");
        }
        // 160 layers at the width bound: 6 x 2^40 parameters each, 15 % under the bound.
        let model = Model::from_spec(&ModelSpec { mlp: MlpKind::Plain, ..wide(160) }).unwrap();
        assert!(model.total_params() <= PARAMS && model.total_params() > PARAMS / 8);
        assert!(model.active_params() == model.total_params());
        assert!(model.training_flops_per_token(1 << 24).is_finite());
    }
}

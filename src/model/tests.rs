//! Tests of model validation: every problem of a spec reported at once, with its field and hint.

use super::*;

fn spec() -> ModelSpec {
    ModelSpec {
        name: "tiny".into(),
        display_name: None,
        source: None,
        num_layers: 2,
        hidden_size: 64,
        ffn_hidden_size: 256,
        num_attention_heads: 4,
        num_kv_heads: None,
        head_dim: None,
        vocab_size: 1000,
        max_position_embeddings: None,
        mlp: MlpKind::Gated,
        norm: None,
        position_embedding: None,
        rope_scaling: None,
        tied_embeddings: false,
        linear_bias: false,
        dropout: false,
        glu_clamp: false,
        moe: None,
        mla: None,
        sliding_window: None,
        mtp_layers: None,
        mtp_shared_weights: false,
        hybrid_pattern: None,
        mamba: None,
        linear_attention: None,
        lightning_attention: None,
        mamba1: None,
        attention_output_gate: false,
    }
}

#[test]
fn reports_every_problem_with_field_and_hint() {
    let mut bad = spec();
    bad.num_layers = 0;
    bad.hidden_size = -5;
    bad.num_kv_heads = Some(3);
    let errors = Model::from_spec(&bad).unwrap_err();
    let fields: Vec<_> = errors.list().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["model.num_layers", "model.hidden_size", "model.num_kv_heads"]);
    assert!(errors.list().iter().all(|v| !v.hint.is_empty()));
}

#[test]
fn rope_scaling_needs_rotary_positions_and_a_clamp_needs_a_gated_mlp() {
    let good = ModelSpec { rope_scaling: Some(RopeScaling::Yarn), glu_clamp: true, ..spec() };
    let model = Model::from_spec(&good).unwrap();
    assert_eq!((model.rope_scaling(), model.glu_clamp()), (Some(RopeScaling::Yarn), true));
    let bad = ModelSpec {
        position_embedding: Some(PositionEmbedding::Learned),
        max_position_embeddings: Some(2048),
        mlp: MlpKind::Plain,
        ..good
    };
    let errors = Model::from_spec(&bad).unwrap_err();
    let fields: Vec<_> = errors.list().iter().map(|v| v.field.as_str()).collect();
    assert_eq!(fields, ["model.rope_scaling", "model.glu_clamp"]);
    assert!(errors.list().iter().all(|v| !v.hint.is_empty()));
}

#[test]
fn expert_attention_and_mtp_fields_are_checked_with_the_rest() {
    let mut bad = spec();
    bad.moe = Some(MoeSpec {
        num_experts: 4,
        top_k: 8,
        expert_ffn_hidden_size: 0,
        shared_experts: Some(-1),
        shared_expert_ffn_hidden_size: None,
        dense_layers: Some(2),
        latent_size: None,
    });
    bad.mla = Some(MlaSpec {
        q_lora_rank: Some(0),
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    });
    bad.sliding_window = Some(SlidingWindowSpec { window: 0, full_attention_every: Some(2) });
    bad.mtp_layers = Some(-1);
    let errors = Model::from_spec(&bad).unwrap_err();
    let found: Vec<String> =
        errors.list().iter().map(|v| format!("{} = {}: {}", v.field, v.value, v.message)).collect();
    for expected in [
        "model.moe.top_k = 8: exceeds num_experts 4",
        "model.moe.expert_ffn_hidden_size = 0: must be a positive whole number",
        "model.moe.shared_experts = -1: must be between 0 and 65536",
        "model.moe.dense_layers = 2: must be between 0 and num_layers - 1 = 1",
        "model.mla.q_lora_rank = 0: must be a positive whole number",
        "model.sliding_window.window = 0: must be a positive whole number",
        "model.mtp_layers = -1: must be between 0 and 4096",
    ] {
        assert!(found.iter().any(|f| f == expected), "{expected} not in {found:?}");
    }
    assert!(errors.list().iter().all(|v| !v.hint.is_empty()));
}

#[test]
fn counts_past_their_bound_are_refused_naming_the_bound() {
    let mut huge = spec();
    huge.hidden_size = 4_294_967_296;
    huge.num_layers = 1_000_000;
    huge.vocab_size = i64::MAX;
    let errors = Model::from_spec(&huge).unwrap_err();
    for (field, bound) in [
        ("model.hidden_size", crate::limits::WIDTH),
        ("model.num_layers", crate::limits::LAYERS),
        ("model.vocab_size", crate::limits::VOCAB),
    ] {
        let found = errors.list().iter().find(|v| v.field == field).expect(field);
        assert!(found.hint.contains(&bound.to_string()), "{field}: {}", found.hint);
    }
}

#[test]
fn defaults_follow_hugging_face_conventions() {
    let model = Model::from_spec(&spec()).unwrap();
    assert_eq!(model.num_kv_heads(), 4);
    assert_eq!(model.head_dim(), 16);
    assert_eq!(model.norm(), NormKind::Rmsnorm);
    assert_eq!(model.position_embedding(), PositionEmbedding::Rope);
}

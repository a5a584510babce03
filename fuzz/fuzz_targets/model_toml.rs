//! Feeds arbitrary bytes as a model TOML file (`toml::from_str::<ModelSpec>`) to
//! `Model::from_spec`; asserts no panic, and for a model that validates that its parameter and
//! FLOP counts are finite, positive and consistent (active <= total, training = 3 x forward or
//! more).
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::model::{Model, ModelSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = toml::from_str::<ModelSpec>(text) else { return };
    let Ok(model) = Model::from_spec(&spec) else { return };
    let total = model.total_params();
    let active = model.active_params();
    assert!(total > 0, "a validated model has parameters");
    assert!(active > 0 && active <= total, "active {active} of total {total}");
    assert!(model.params_without_mtp() <= total);
    for seq in [1, 4096, model.max_position_embeddings()] {
        let forward = model.forward_flops_per_token(seq);
        let training = model.training_flops_per_token(seq);
        assert!(forward.is_finite() && forward > 0.0, "forward FLOPs {forward} at seq {seq}");
        assert!(
            training.is_finite() && training >= forward,
            "training FLOPs {training} below forward {forward} at seq {seq}"
        );
    }
});

//! Feeds arbitrary bytes as a Hugging Face `config.json` to `model::from_hf_config`; asserts no
//! panic, and that a spec it returns either validates with `Model::from_spec` into a model with
//! finite, positive parameter and FLOP counts, or is rejected with violations (never a panic).
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::model::{Model, from_hf_config};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = from_hf_config(text, "fuzz") else { return };
    let Ok(model) = Model::from_spec(&spec) else { return };
    let total = model.total_params();
    let active = model.active_params();
    assert!(active > 0 && active <= total, "active {active} of total {total}");
    let forward = model.forward_flops_per_token(4096);
    assert!(forward.is_finite() && forward > 0.0, "forward FLOPs {forward}");
});

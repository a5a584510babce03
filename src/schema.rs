//! JSON Schemas of the input files, generated from the Rust types that read them, so editors can
//! check a model or GPU file before meshplan does. The checked-in copies under `schemas/` are kept
//! current by a test (`tests/schemas.rs`).

use schemars::schema_for;

use crate::hardware::GpuSpec;
use crate::model::ModelSpec;
use crate::stack::StackSpec;

/// Every input schema: file name under `schemas/` and its pretty-printed JSON text.
pub fn input_schemas() -> Vec<(&'static str, String)> {
    let pretty = |schema: schemars::Schema| {
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    };
    vec![
        ("model.schema.json", pretty(schema_for!(ModelSpec))),
        ("gpu.schema.json", pretty(schema_for!(GpuSpec))),
        ("stack.schema.json", pretty(schema_for!(StackSpec))),
    ]
}

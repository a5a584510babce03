//! The checked-in JSON Schemas under `schemas/` match the Rust types. Run with
//! `UPDATE_SCHEMAS=1 cargo test --test integration schemas` to rewrite them after changing an
//! input type.

use crate::support::repo_path;

#[test]
fn checked_in_schemas_are_current() {
    let dir = repo_path("schemas");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    for (name, text) in meshplan::schema::input_schemas() {
        let path = dir.join(name);
        if update {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            stored == text,
            "schemas/{name} is stale: run `UPDATE_SCHEMAS=1 cargo test --test integration schemas`"
        );
    }
}

#[test]
fn every_preset_validates_against_its_schema_shape() {
    // The schema lists the keys a preset may use; every key of every preset must be one of them.
    for (name, text) in meshplan::schema::input_schemas() {
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        let properties = schema["properties"].as_object().unwrap();
        assert_eq!(schema["additionalProperties"], false, "{name} rejects unknown keys");
        let files = if name.starts_with("model") {
            meshplan::presets::MODELS
        } else if name.starts_with("stack") {
            meshplan::presets::STACKS
        } else {
            meshplan::presets::GPUS
        };
        for file in files {
            let value: toml::Value = toml::from_str(file.text).unwrap();
            for key in value.as_table().unwrap().keys() {
                assert!(properties.contains_key(key), "{}: key {key} not in {name}", file.name);
            }
        }
    }
}

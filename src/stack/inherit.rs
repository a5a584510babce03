//! Merging a stack file with the file it inherits from: the child's keys replace the parent's,
//! table by table, so a release lists only what changed. The `[[recipe]]` list is one value: a
//! file that lists any recipe replaces its parent's whole list (a release's recipes are complete,
//! so a recipe the release dropped is gone); a file that lists none keeps its parent's.

use toml::Table;

/// Longest `inherits` chain followed before giving up (a cycle, or a mistake).
pub const MAX_INHERITANCE_DEPTH: usize = 32;

/// Tables merged key by key; every other key of the child replaces the parent's whole value.
const MERGED_TABLES: [&str; 14] = [
    "stack",
    "attention",
    "gemm",
    "precision",
    "overlap",
    "cuda_graphs",
    "host",
    "fusions",
    "defaults",
    "memory",
    "parallelism",
    "export",
    "recipes",
    "sources",
];

/// The child's table over its parent's: one level deep for [`MERGED_TABLES`]; the child's
/// `stack.matches` and `stack.inherits` are never inherited, and `stack.components` merges key
/// by key. `unknown` drops what the child establishes.
pub fn merge_inherited(parent: &Table, child: &Table) -> Table {
    let mut merged = parent.clone();
    if let Some(toml::Value::Table(stack)) = merged.get_mut("stack") {
        stack.remove("matches");
        stack.remove("inherits");
    }
    for (key, value) in child {
        match (merged.get_mut(key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over))
                if MERGED_TABLES.contains(&key.as_str()) =>
            {
                for (inner, inner_value) in over {
                    match (base.get_mut(inner), inner_value) {
                        (Some(toml::Value::Table(base_inner)), toml::Value::Table(over_inner))
                            if key == "stack" && inner == "components" =>
                        {
                            for (name, version) in over_inner {
                                base_inner.insert(name.clone(), version.clone());
                            }
                        }
                        _ => {
                            base.insert(inner.clone(), inner_value.clone());
                        }
                    }
                }
            }
            _ => {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    // A field set by now (by the child, or by a parent where the child only lists it as
    // unknown for its own release) is no longer unknown.
    let set_in = |table: &Table, entry: &str| {
        let mut parts = entry.splitn(2, '.');
        let (name, field) = (parts.next().unwrap_or_default(), parts.next());
        match (table.get(name), field) {
            (Some(toml::Value::Table(t)), Some(field)) => t.contains_key(field),
            (Some(_), None) => true,
            _ => false,
        }
    };
    let snapshot = merged.clone();
    if let Some(toml::Value::Array(unknown)) = merged.get_mut("unknown") {
        unknown.retain(|entry| entry.as_str().is_none_or(|entry| !set_in(&snapshot, entry)));
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_replaces_fields_keeps_the_rest_and_never_inherits_its_parents_matches() {
        let parent: Table = toml::from_str(
            r#"
            unknown = ["fusions.norm", "host"]
            [stack]
            id = "a"
            matches = ["a 1"]
            components = { core = "1", te = "2" }
            [defaults]
            recompute = "full"
            sequence_parallel = true
            "#,
        )
        .unwrap();
        let child: Table = toml::from_str(
            r#"
            [stack]
            id = "b"
            inherits = "a"
            components = { core = "3" }
            [defaults]
            recompute = "none"
            [fusions]
            norm = true
            "#,
        )
        .unwrap();
        let merged = merge_inherited(&parent, &child);
        let stack = merged["stack"].as_table().unwrap();
        assert_eq!(stack["id"].as_str(), Some("b"));
        assert!(!stack.contains_key("matches"));
        assert_eq!(stack["components"]["core"].as_str(), Some("3"));
        assert_eq!(stack["components"]["te"].as_str(), Some("2"));
        assert_eq!(merged["defaults"]["recompute"].as_str(), Some("none"));
        assert_eq!(merged["defaults"]["sequence_parallel"].as_bool(), Some(true));
        let unknown: Vec<&str> =
            merged["unknown"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
        assert_eq!(unknown, ["host"]);
    }

    #[test]
    fn a_child_recipe_list_replaces_the_parents_and_no_list_keeps_it() {
        let parent: Table = toml::from_str(
            r#"
            [[recipe]]
            models = ["A"]
            gpus = ["b200"]
            fsdp = true
            source = "a@1"
            [[recipe]]
            models = ["B"]
            gpus = ["b200"]
            fsdp = true
            source = "a@1"
            "#,
        )
        .unwrap();
        let child: Table = toml::from_str(
            r#"
            [[recipe]]
            models = ["C"]
            gpus = ["gb200"]
            fsdp = true
            source = "c@2"
            "#,
        )
        .unwrap();
        let merged = merge_inherited(&parent, &child);
        let recipes = merged["recipe"].as_array().unwrap();
        assert_eq!(recipes.len(), 1);
        assert_eq!(recipes[0]["models"][0].as_str(), Some("C"));
        let silent: Table = toml::from_str("[stack]\nid = \"d\"").unwrap();
        assert_eq!(merge_inherited(&parent, &silent)["recipe"].as_array().unwrap().len(), 2);
    }
}

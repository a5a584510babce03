//! Repository hygiene checked as a test: every Rust file opens with a `//!` line saying what it
//! owns, no file grows past the size where it should be split, and imports follow the layers of
//! ARCHITECTURE.md with no cycle between sibling modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::{read_repo_file, repo_path};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn project_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&repo_path(dir), &mut files);
    }
    files.sort();
    files
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let files = project_files();
    assert!(files.len() > 20, "found only {} files", files.len());
    let missing: Vec<_> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).unwrap().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a leading //! doc: {missing:?}");
}

#[test]
fn no_source_file_is_longer_than_800_lines() {
    let long: Vec<_> = project_files()
        .into_iter()
        .filter(|path| path.starts_with(repo_path("src")))
        .map(|path| (std::fs::read_to_string(&path).unwrap().lines().count(), path))
        .filter(|(lines, _)| *lines > 800)
        .collect();
    assert!(long.is_empty(), "split these files by concern: {long:?}");
}

// ---------------------------------------------------------------------------------------------
// the layer rule of ARCHITECTURE.md

/// The layers of ARCHITECTURE.md's "Layers" list, lowest first: each numbered line's backquoted
/// module names before its dash.
fn layers() -> Vec<Vec<String>> {
    let text = read_repo_file("ARCHITECTURE.md");
    let section = text.split("\n## Layers\n").nth(1).expect("ARCHITECTURE.md has a Layers section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut layers = Vec::new();
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else { continue };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        assert_eq!(number.parse::<usize>().unwrap(), layers.len() + 1, "layers numbered in order");
        let names = rest.split(" — ").next().unwrap_or_default();
        let modules: Vec<String> = names.split('`').skip(1).step_by(2).map(str::to_owned).collect();
        assert!(!modules.is_empty(), "layer line without a `module`: {line}");
        layers.push(modules);
    }
    layers
}

/// A source file's module path: `src/cost/memory.rs` is `cost::memory`, `src/cost/mod.rs` is
/// `cost`, and the binary's root `src/main.rs` is `main`.
fn module_path(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(repo_path("src")).unwrap();
    let mut path: Vec<String> =
        relative.iter().map(|part| part.to_string_lossy().trim_end_matches(".rs").into()).collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// The code of a file that is not test code, without `//` comments, each line with its number
/// (from 1): nothing of a `tests.rs`, and no item marked `#[cfg(test)]` (up to the `;` or the `}`
/// that closes it, counting braces).
fn non_test_lines(file: &Path) -> Vec<(usize, String)> {
    if file.file_name().is_some_and(|name| name == "tests.rs") {
        return Vec::new();
    }
    let text = std::fs::read_to_string(file).unwrap();
    code_lines(&text)
        .unwrap_or_else(|| panic!("{}: a #[cfg(test)] item does not end", file.display()))
}

/// [`non_test_lines`] of a text; `None` when a `#[cfg(test)]` item does not end.
fn code_lines(text: &str) -> Option<Vec<(usize, String)>> {
    let mut code = Vec::new();
    // Inside a test item: its brace depth, and whether its body has opened.
    let mut test_item: Option<(i32, bool)> = None;
    for (index, line) in text.lines().enumerate() {
        let line = line.split("//").next().unwrap_or_default();
        if line.trim() == "#[cfg(test)]" {
            test_item = Some((0, false));
            continue;
        }
        let Some((mut depth, mut opened)) = test_item else {
            code.push((index + 1, line.to_owned()));
            continue;
        };
        for c in line.chars() {
            depth += i32::from(c == '{') - i32::from(c == '}');
            opened |= c == '{';
        }
        let ended = if opened { depth == 0 } else { line.trim_end().ends_with(';') };
        test_item = (!ended).then_some((depth, opened));
    }
    test_item.is_none().then_some(code)
}

fn identifier(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The comma-separated items of a `{...}` group whose text starts after its `{`, up to its `}`.
fn top_level_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..at]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The absolute module paths a line of `module` names through `crate::`, `meshplan::` (the
/// library, from the binary) or `super::`, with `a::{b, c}` groups of one line expanded one level
/// (and `a` itself named, for groups that go on over the next lines).
fn references(module: &[String], line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("meshplan::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
    ] {
        for (at, _) in line.match_indices(prefix) {
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut rest = &line[at + prefix.len()..];
            loop {
                if let Some(group) = rest.strip_prefix('{') {
                    // The group's own path counts too: a group split over lines names its
                    // items on lines of their own, without a prefix.
                    if !path.is_empty() && path != base {
                        found.push(path.clone());
                    }
                    for item in top_level_items(group) {
                        match identifier(item.trim()) {
                            "" => {}
                            "self" => found.push(path.clone()),
                            name => found.push([path.clone(), vec![name.to_owned()]].concat()),
                        }
                    }
                    path.clear();
                    break;
                }
                let name = identifier(rest);
                if name.is_empty() {
                    break;
                }
                if name == "super" {
                    path.pop();
                } else {
                    path.push(name.to_owned());
                }
                rest = &rest[name.len()..];
                match rest.strip_prefix("::") {
                    Some(next) => rest = next,
                    None => break,
                }
            }
            if !path.is_empty() {
                found.push(path);
            }
        }
    }
    found
}

/// An edge between two sibling modules and the first place it is made.
type Edges = BTreeMap<(Vec<String>, String, String), String>;

/// Every import that runs up the layers, and every module-to-module edge between siblings (the
/// children of one parent: top-level modules, or the files of one directory).
fn layer_check(files: &[PathBuf]) -> (BTreeSet<String>, Edges) {
    let layers = layers();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(index, names)| names.iter().map(move |name| (name.as_str(), index + 1)))
        .collect();
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|file| module_path(file))
        .flat_map(|path| (1..=path.len()).map(move |len| path[..len].to_vec()))
        .filter(|path| path != &["lib"])
        .collect();
    for top in modules.iter().filter(|path| path.len() == 1) {
        assert!(
            layer_of.contains_key(top[0].as_str()),
            "src/{}: not in a layer of ARCHITECTURE.md",
            top[0]
        );
    }
    for name in layer_of.keys() {
        assert!(
            modules.contains(&vec![(*name).to_owned()]),
            "ARCHITECTURE.md layers name {name}, which is not a module"
        );
    }
    // What lib.rs re-exports (`meshplan::Run`) belongs to the module it comes from.
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    for (_, line) in non_test_lines(&repo_path("src/lib.rs")) {
        let Some(used) = line.trim().strip_prefix("pub use ") else { continue };
        let (module, names) = used.split_once("::").unwrap();
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            aliases.insert(name.to_owned(), module.to_owned());
        }
    }
    let mut upward = BTreeSet::new();
    let mut edges = Edges::new();
    for file in files {
        let from = module_path(file);
        if from == ["lib"] {
            continue;
        }
        let shown = file.strip_prefix(repo_path("")).unwrap().display().to_string();
        for (number, line) in non_test_lines(file) {
            for mut to in references(&from, &line) {
                if let Some(module) = to.first().and_then(|name| aliases.get(name)) {
                    to = vec![module.clone()];
                }
                let Some(&to_layer) = to.first().and_then(|name| layer_of.get(name.as_str()))
                else {
                    continue;
                };
                let from_layer = layer_of[from[0].as_str()];
                if to_layer > from_layer {
                    upward.insert(format!(
                        "{shown}:{number}: {} (layer {from_layer}) uses {} (layer {to_layer})",
                        from[0], to[0]
                    ));
                }
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() && modules.contains(&to[..=common]) {
                    let key = (from[..common].to_vec(), from[common].clone(), to[common].clone());
                    edges.entry(key).or_insert_with(|| format!("{shown}:{number}"));
                }
            }
        }
    }
    (upward, edges)
}

/// The cycles among siblings, each as `a -> b -> a` with where each edge is made.
fn cycles(edges: &Edges) -> Vec<String> {
    let mut found = Vec::new();
    let parents: BTreeSet<&Vec<String>> = edges.keys().map(|(parent, ..)| parent).collect();
    for parent in parents {
        let next = |node: &str| -> Vec<String> {
            edges
                .keys()
                .filter(|(p, from, _)| p == parent && from == node)
                .map(|(.., to)| to.clone())
                .collect()
        };
        let nodes: BTreeSet<&String> =
            edges.keys().filter(|(p, ..)| p == parent).map(|(_, from, _)| from).collect();
        for start in nodes {
            // Depth-first from `start`, reporting a cycle only through `start` and only from its
            // smallest node, so each cycle is named once.
            let mut stack = vec![vec![start.clone()]];
            let mut seen = BTreeSet::new();
            while let Some(path) = stack.pop() {
                for to in next(path.last().unwrap()) {
                    if &to == start {
                        if path.iter().all(|node| node >= start) {
                            let mut cycle = path.clone();
                            cycle.push(to.clone());
                            let places: Vec<&str> = cycle
                                .windows(2)
                                .map(|pair| {
                                    let key = (parent.clone(), pair[0].clone(), pair[1].clone());
                                    edges[&key].as_str()
                                })
                                .collect();
                            found.push(format!(
                                "in {}: {} ({})",
                                if parent.is_empty() { "crate".into() } else { parent.join("::") },
                                cycle.join(" -> "),
                                places.join(", ")
                            ));
                        }
                    } else if seen.insert(to.clone()) {
                        let mut longer = path.clone();
                        longer.push(to);
                        stack.push(longer);
                    }
                }
            }
        }
    }
    found
}

#[test]
fn the_scanner_reads_paths_groups_and_super_and_skips_test_items() {
    let module = ["validate".to_owned(), "mapping".to_owned()];
    let paths = |line: &str| -> Vec<String> {
        references(&module, line).iter().map(|path| path.join("::")).collect()
    };
    assert_eq!(
        paths("use crate::cost::breakdown::{Throughput, TimeBreakdown};"),
        ["cost::breakdown", "cost::breakdown::Throughput", "cost::breakdown::TimeBreakdown"]
    );
    assert_eq!(paths("use crate::plan::{"), ["plan"]);
    assert_eq!(
        paths("use super::{RowResult, row::{count, number}, self};"),
        ["validate::RowResult", "validate::row", "validate"]
    );
    assert_eq!(
        paths("let x = meshplan::estimate::estimate(&run); $crate::units::x"),
        ["estimate::estimate"]
    );
    assert_eq!(paths("use super::super::units::Bytes;"), ["units::Bytes"]);
    let text = "use crate::a;\n#[cfg(test)]\nmod tests;\nuse crate::b; // crate::c\n#[cfg(test)]\n\
                fn helper() {\n    crate::d();\n}\nuse crate::e;\n#[cfg(test)]\nmod tests {\n";
    // Unclosed, the last test module hides the rest of the file: refused rather than skipped.
    assert!(code_lines(text).is_none());
    let lines = code_lines(&format!("{text}}}\nuse crate::f;")).unwrap();
    let kept: Vec<(usize, &str)> = lines.iter().map(|(n, line)| (*n, line.trim())).collect();
    assert_eq!(
        kept,
        [(1, "use crate::a;"), (4, "use crate::b;"), (9, "use crate::e;"), (13, "use crate::f;")]
    );
}

#[test]
fn imports_only_run_down_the_layers_and_siblings_form_no_cycle() {
    let files: Vec<PathBuf> =
        project_files().into_iter().filter(|path| path.starts_with(repo_path("src"))).collect();
    let (upward, edges) = layer_check(&files);
    let cycles = cycles(&edges);
    assert!(
        upward.is_empty() && cycles.is_empty(),
        "imports up the layers of ARCHITECTURE.md:\n{}\nsibling modules that use each other:\n{}",
        upward.into_iter().collect::<Vec<_>>().join("\n"),
        cycles.join("\n")
    );
    // The check sees the imports it is meant to see.
    let key = |parent: &[&str], from: &str, to: &str| {
        (parent.iter().map(|p| (*p).to_owned()).collect(), from.to_owned(), to.to_owned())
    };
    assert!(edges.contains_key(&key(&[], "estimate", "cost")), "{edges:?}");
    assert!(edges.contains_key(&key(&["validate"], "calibrate", "mapping")), "{edges:?}");
    assert!(edges.contains_key(&key(&[], "cli", "estimate")), "{edges:?}");
}

//! Repository hygiene checked as a test: every Rust file opens with a `//!` line saying what it
//! owns, and no file grows past the size where it should be split.

use std::path::{Path, PathBuf};

use crate::support::repo_path;

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

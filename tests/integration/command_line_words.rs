//! `meshplan::cli::run_words`, the Python package's entry point: the same command line gives the
//! binary's output byte for byte, and a malformed one is an input error naming the arguments.

use meshplan::cli::{CliError, run_words};

use crate::support::run;

#[test]
fn the_words_print_what_the_binary_prints() {
    let args = [
        "estimate",
        "--model",
        "llama3.1-70b",
        "--gpus",
        "64",
        "--seq-len",
        "8192",
        "--global-batch",
        "128",
        "--tp",
        "8",
        "--pp",
        "4",
        "--format",
        "json",
    ];
    let binary = run(&args);
    assert_eq!(binary.code, 0, "{}", binary.stderr);
    let words = run_words(std::iter::once("meshplan").chain(args)).unwrap();
    // The binary ends its output with one newline; the words' output is the same text.
    assert_eq!(binary.stdout.trim_end_matches('\n'), words.trim_end_matches('\n'));
}

#[test]
fn bad_words_are_input_errors_with_every_problem_or_the_argument() {
    let Err(CliError::Input(violations)) =
        run_words(["meshplan", "estimate", "--gpus", "-3", "--seq-len", "0"])
    else {
        panic!("bad values are an input error");
    };
    let fields: Vec<&str> = violations.list().iter().map(|v| v.field.as_str()).collect();
    assert!(
        fields.contains(&"cluster.num_gpus") && fields.contains(&"training.seq_len"),
        "{fields:?}"
    );
    let Err(CliError::Input(violations)) = run_words(["meshplan", "estimate", "--schedule", "x"])
    else {
        panic!("a malformed command line is an input error");
    };
    let only = &violations.list()[0];
    assert_eq!(only.field, "arguments");
    assert!(only.value.contains("--schedule"), "{only:?}");
}

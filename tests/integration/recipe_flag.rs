//! `--recipe`: a NeMo release's performance recipe fills the plan options the flags leave unset
//! and sets its kernels, as `meshplan validate` does for a published run; a stack without one
//! for the run is a problem that names what it has.

use crate::support::{json, run};

/// GPT-OSS 120B on 64 GB300 in MXFP8 with ep 16 (Megatron-Bridge v0.6.0's 64-GPU recipe).
const GPT_OSS: [&str; 18] = [
    "estimate",
    "--model",
    "gpt-oss-120b",
    "--gpu",
    "gb300",
    "--gpus",
    "64",
    "--stack",
    "nemo-26.08",
    "--precision",
    "mxfp8",
    "--ep",
    "16",
    "--micro-batch",
    "4",
    "--global-batch",
    "1280",
    "--seq-len",
];

fn gpt_oss(extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<&str> = GPT_OSS.to_vec();
    args.extend(["4096", "--format", "json"]);
    args.extend(extra);
    json(&args)
}

fn tokens(estimate: &serde_json::Value) -> f64 {
    estimate["throughput"]["tokens_per_sec_per_gpu"].as_f64().unwrap()
}

#[test]
fn the_recipe_sets_what_the_flags_leave_and_its_kernels() {
    let plain = gpt_oss(&[]);
    let recipe = gpt_oss(&["--recipe"]);
    assert!(plain["run"].get("recipe").is_none());
    let note = recipe["run"]["recipe"].as_str().unwrap();
    for taken in [
        "nemo-26.08 recipe for GPT_OSS_120B on gb300 mxfp8",
        "expert dispatch deduplicated (hybridep)",
        "EP all-to-all overlap on",
        "TE op-fuser grouped MLP",
        "FP8 dot-product attention",
        "whole-iteration CUDA graph",
        "perf_recipes/gpt_oss",
    ] {
        assert!(note.contains(taken), "{taken}: {note}");
    }
    let plan = &recipe["run"]["plan"];
    assert_eq!(plan["expert_dispatch"], "deduplicated");
    assert_eq!(plan["expert_comm_overlap"], true);
    // The fused MLP, FP8 attention and the replayed launches make the step a quarter faster.
    assert!(tokens(&recipe) > 1.2 * tokens(&plain), "{} {}", tokens(&recipe), tokens(&plain));
    // A flag the user gives wins over the recipe's setting, and the note leaves it out.
    let stated = gpt_oss(&["--recipe", "--expert-dispatch", "all-to-all"]);
    assert_eq!(stated["run"]["plan"]["expert_dispatch"], "all-to-all");
    let note = stated["run"]["recipe"].as_str().unwrap();
    assert!(!note.contains("expert dispatch") && note.contains("EP all-to-all overlap on"));
}

#[test]
fn a_stack_without_a_recipe_for_the_run_names_the_ones_it_has() {
    let mut args: Vec<&str> = GPT_OSS.to_vec();
    args.extend(["4096", "--recipe"]);
    args[10] = "nvfp4";
    let output = run(&args);
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(
        output.stderr.contains(
            "recipe = nemo-26.08: has no performance recipe for gpt-oss-120b on 64 x gb300 in nvfp4"
        ),
        "{}",
        output.stderr
    );
    assert!(output.stderr.contains("its recipes for this model cover"), "{}", output.stderr);
    // A stack with no recipes at all names the releases that have one for the run.
    let output = run(&["estimate", "--model", "llama3-70b", "--gpu", "gb300", "--recipe"]);
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(
        output.stderr.contains("megatron-core-0.14-plus: has no performance recipe for llama3-70b"),
        "{}",
        output.stderr
    );
    let fix = "pass --stack with a release that publishes one (nemo-25.11, nemo-26.02, ";
    assert!(output.stderr.contains(fix), "{}", output.stderr);
    assert!(output.stderr.contains(", nemo-26.08), or drop --recipe"), "{}", output.stderr);
}

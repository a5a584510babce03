//! `--recipe`: a NeMo release's performance recipe fills the plan options the flags leave unset
//! and sets its kernels, as `meshplan validate` does for a published run; a stack without one
//! for the run is a problem that names what it has.

use crate::support::{GPT_OSS_ROW_118, json, run};

fn gpt_oss(extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<&str> = GPT_OSS_ROW_118.to_vec();
    args.extend(["--format", "json"]);
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
    // Without --recipe the run names the recipe its stack has for it.
    let available = "nemo-26.08 recipe for GPT_OSS_120B on gb300 mxfp8";
    assert_eq!(plain["run"]["recipe_available"], available);
    assert!(recipe["run"].get("recipe_available").is_none());
    let mut text: Vec<&str> = GPT_OSS_ROW_118.to_vec();
    let output = run(&text);
    assert!(
        output.stdout.contains(&format!("Recipe: not taken; --recipe takes the {available}\n"))
    );
    // simulate takes it the same way and says so in its JSON.
    text[0] = "simulate";
    text.extend(["--recipe", "--runs", "1", "--format", "json"]);
    let simulated = json(&text);
    assert_eq!(simulated["recipe"], recipe["run"]["recipe"]);
    let step = |v: &serde_json::Value| v["step_time_s"].as_f64().unwrap();
    assert!((step(&simulated) / step(&recipe["throughput"]) - 1.0).abs() < 1e-9);
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
    let mut args: Vec<&str> = GPT_OSS_ROW_118.to_vec();
    args.extend(["--recipe", "--tp", "0"]);
    args[10] = "nvfp4";
    let output = run(&args);
    // Every problem at once: the recipe's and the run's own.
    assert!(output.stderr.contains("2 problems in the input"), "{}", output.stderr);
    assert!(output.stderr.contains("- plan.tp = 0"), "{}", output.stderr);
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(
        output.stderr.contains(
            "recipe = nemo-26.08: has no performance recipe for gpt-oss-120b on 64 x gb300 in nvfp4"
        ),
        "{}",
        output.stderr
    );
    let covered =
        "its recipes for this model cover h100-sxm in bf16/fp8-current; b200 in bf16/mxfp8;";
    assert!(output.stderr.contains(covered), "{}", output.stderr);
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

#[test]
fn a_recipe_whose_layer_counts_do_not_fit_the_pipeline_is_refused() {
    // NeMo 25.07's Llama 3 70B on GB200 in BF16 recomputes 20 layers per stage with
    // Megatron-FSDP (recommended_model_configs/model_configs_gb200.csv@v2.4.0).
    let args = |pp| {
        let mut args = vec!["estimate", "--model", "llama3-70b", "--gpu", "gb200", "--gpus", "64"];
        args.extend(["--stack", "nemo-25.07", "--recipe", "--pp", pp]);
        args
    };
    let output = run(&args("8"));
    assert_eq!(output.code, 2, "{}", output.stderr);
    let expected = "recipe = nemo-25.07 LLAMA3_70B on gb200 bf16: its full recompute of 20 layers \
                    does not fit the plan's 10 layers per pipeline rank";
    assert!(output.stderr.contains(expected), "{}", output.stderr);
    let mut fits = args("2");
    fits.extend(["--format", "json"]);
    let estimate = json(&fits);
    let plan = &estimate["run"]["plan"];
    assert_eq!(
        (plan["recompute"].as_str(), plan["recompute_num_layers"].as_i64()),
        (Some("full"), Some(20))
    );
    assert_eq!(plan["fsdp"], true);
}

#[test]
fn the_report_names_the_recipe_taken() {
    let mut args: Vec<&str> = GPT_OSS_ROW_118.to_vec();
    args[0] = "simulate";
    args.extend(["--recipe", "--runs", "1"]);
    let page = crate::support::report(&args, &["memory", "step-time", "timeline"]);
    assert!(page.contains("nemo-26.08 recipe for GPT_OSS_120B on gb300 mxfp8: no recompute"));
}

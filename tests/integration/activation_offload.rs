//! Activation offload to host memory (`--offload-activation-layers`, MEMO-style) where the engines
//! run it (`docs/activation-offload.md`): Megatron-LM's export writes the layer count for the
//! plans it runs as priced (pp 1, no recompute, a GPT-style model), every other offload plan is
//! refused with its typed reason, and a search with the offload pinned finds Megatron-LM's plans.

use meshplan::Run;
use meshplan::export::capability::OffloadMismatch;
use meshplan::export::{Engine, Refusal, export, refusals};
use meshplan::plan::{PlanSpec, Precision, RecomputeKind};
use meshplan::search::{Constraints, SearchSpec, search};

use crate::support::{json, preset_run, run, spec, training, words};

/// Llama 3.1 8B at 64K tokens on 16 H100 (tp 4 and cp 4 unless `plan` says, the distributed
/// optimizer), `layers` per pipeline rank offloaded, on top of `plan`.
fn long_context(layers: i64, plan: PlanSpec) -> Run {
    let plan = PlanSpec {
        tp: plan.tp.or(Some(4)),
        cp: plan.cp.or(Some(4)),
        zero: Some(1),
        offload_activation_layers: Some(layers),
        ..plan
    };
    preset_run("llama3.1-8b", "h100-sxm", 16, training(65536, 16, 1, Some(Precision::Bf16)), plan)
}

/// Only the offload refusals of an engine for a run.
fn offload_refusals(engine: Engine, run: &Run) -> Vec<Refusal> {
    refusals(engine, run)
        .into_iter()
        .filter(|refusal| matches!(refusal, Refusal::ActivationOffload { .. }))
        .collect()
}

/// The count meshplan prices is the count Megatron-LM's flag asks for, and it is priced: the
/// offloading plan stores less on the GPU than the same plan without offload.
#[test]
fn megatron_exports_the_offloaded_layer_count_it_was_priced_with() {
    let run = long_context(24, PlanSpec::default());
    let args = export(Engine::Megatron, &run).unwrap();
    insta::assert_snapshot!("megatron_offload_24_layers", args);
    assert!(args.lines().any(|line| line == "--cpu-offloading-num-layers 24"), "{args}");
    assert!(!args.contains("--recompute-granularity"), "{args}");
    assert!(args.lines().any(|line| line == "--pipeline-model-parallel-size 1"), "{args}");
    let kept = meshplan::closed_form(&long_context(0, PlanSpec::default()));
    let offloaded = meshplan::closed_form(&run);
    assert!(
        offloaded.peak_memory.breakdown.activations < kept.peak_memory.breakdown.activations,
        "{:?} vs {:?}",
        offloaded.peak_memory.breakdown.activations,
        kept.peak_memory.breakdown.activations
    );
}

/// Every offload plan an engine would run differently from what meshplan priced is refused with
/// the typed reason and a message that says what to change.
#[test]
fn offload_plans_an_engine_does_not_run_as_priced_are_refused_with_the_reason() {
    let pipeline = long_context(8, PlanSpec { pp: Some(2), cp: Some(2), ..PlanSpec::default() });
    let full =
        long_context(24, PlanSpec { recompute: Some(RecomputeKind::Full), ..PlanSpec::default() });
    let selective = long_context(
        24,
        PlanSpec { recompute: Some(RecomputeKind::Selective), ..PlanSpec::default() },
    );
    let plain = long_context(24, PlanSpec::default());
    let nemotronh = preset_run(
        "nemotronh-8b",
        "h100-sxm",
        16,
        training(8192, 64, 1, Some(Precision::Bf16)),
        PlanSpec { fsdp: Some(true), offload_activation_layers: Some(8), ..PlanSpec::default() },
    );
    let cases = [
        (
            Engine::Megatron,
            &pipeline,
            8,
            OffloadMismatch::Pipeline { pp: 2 },
            "use --pp 1 instead of pp 2",
        ),
        (
            Engine::Megatron,
            &full,
            24,
            OffloadMismatch::Recompute { kind: RecomputeKind::Full },
            "use --recompute none",
        ),
        (
            Engine::Megatron,
            &selective,
            24,
            OffloadMismatch::Recompute { kind: RecomputeKind::Selective },
            "use --recompute none",
        ),
        (Engine::Megatron, &nemotronh, 8, OffloadMismatch::HybridLayers, "hybrid (Mamba) stack"),
        (Engine::Deepspeed, &full, 24, OffloadMismatch::CheckpointInputs, "cpu_checkpointing"),
        (
            Engine::Deepspeed,
            &plain,
            24,
            OffloadMismatch::CheckpointInputs,
            "every checkpointed layer",
        ),
        (Engine::Torchtitan, &plain, 24, OffloadMismatch::NoOffload, "offloads no activations"),
    ];
    for (engine, run, layers, mismatch, says) in cases {
        assert_eq!(
            offload_refusals(engine, run),
            [Refusal::ActivationOffload { engine, layers, mismatch }],
            "{engine:?}"
        );
        let err = export(engine, run).unwrap_err().to_string();
        assert!(err.contains(says), "{engine:?}: {err}");
        assert!(err.contains(&format!("drop --offload-activation-layers {layers}")), "{err}");
    }
}

/// The binary: `export --to megatron` writes the flag, `--to deepspeed` refuses with the reason
/// and writes nothing.
#[test]
fn the_command_line_exports_offload_for_megatron_and_refuses_it_elsewhere() {
    let line = "export --model llama3.1-8b --gpus 16 --seq-len 65536 --global-batch 16 --tp 4 \
                --cp 4 --zero 1 --offload-activation-layers 24 --to";
    let megatron = run(&[words(line), vec!["megatron"]].concat());
    assert_eq!(megatron.code, 0, "{}", megatron.stderr);
    assert!(
        megatron.stdout.lines().any(|l| l == "--cpu-offloading-num-layers 24"),
        "{}",
        megatron.stdout
    );
    for (engine, says) in
        [("deepspeed", "cpu_checkpointing"), ("torchtitan", "offloads no activations")]
    {
        let refused = run(&[words(line), vec![engine]].concat());
        assert_ne!(refused.code, 0, "{engine}");
        assert!(refused.stdout.is_empty(), "{engine}: {}", refused.stdout);
        assert!(refused.stderr.contains(says), "{engine}: {}", refused.stderr);
    }
}

/// With the offload pinned, a search for Megatron-LM keeps only the plans it runs offloading:
/// no pipeline and no recompute, each exportable with the flag.
#[test]
fn a_search_with_offload_pinned_finds_megatron_plans_without_pipeline_or_recompute() {
    let base = spec(
        meshplan::presets::model("llama3.1-8b").unwrap(),
        "h100-sxm",
        8,
        training(32768, 8, 1, Some(Precision::Bf16)),
        PlanSpec { offload_activation_layers: Some(16), ..PlanSpec::default() },
    );
    let spec = SearchSpec {
        base,
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine: Some(Engine::Megatron),
        top: 3,
    };
    let report = search(&spec, &|_, _| {}).unwrap();
    assert!(!report.plans.is_empty());
    for plan in &report.plans {
        let chosen = plan.run.plan();
        assert_eq!(
            (chosen.pp(), chosen.recompute()),
            (1, RecomputeKind::None),
            "{}",
            chosen.label()
        );
        assert_eq!(chosen.offload_activation_layers(), 16);
        let args = export(Engine::Megatron, &plan.run).unwrap();
        assert!(args.contains("--cpu-offloading-num-layers 16"), "{args}");
    }
}

/// Llama 2 7B at 64K tokens on 8 H100 (one context-parallel rank), searched for `engine`.
fn long_context_search(engine: Option<Engine>, fast: bool) -> meshplan::search::SearchReport {
    let base = spec(
        meshplan::presets::model("llama2-7b").unwrap(),
        "h100-sxm",
        8,
        training(65536, 8, 1, None),
        PlanSpec { cp: Some(1), ..PlanSpec::default() },
    );
    let spec = SearchSpec {
        base,
        constraints: Constraints::default(),
        memory_headroom: 0.05,
        engine,
        top: 5,
    };
    if fast {
        search(&spec, &|_, _| {}).unwrap()
    } else {
        meshplan::search::brute_force(&spec).unwrap()
    }
}

/// Unpinned, a search tries offloading half or all but the last of the layers on every layout
/// without a pipeline, as a way to fit: where the same plan fits without offload the offload is
/// counted as not needed. At 64K tokens on 8 H100 the activations of a plan without recompute
/// overflow at tp 4, and offloading 16 of its 32 layers beats both recomputing them and tp 8
/// (MEMO's trade: host-link copies hidden behind compute instead of recompute); Megatron-LM
/// exports the plan; the bound-pruned search ranks as simulating every candidate does.
#[test]
fn a_search_tries_offload_where_a_plan_does_not_fit_without_it() {
    use meshplan::search::RejectionKind;
    let report = long_context_search(Some(Engine::Megatron), true);
    let best = report.plans[0].run.plan();
    assert_eq!(
        (best.tp(), best.recompute(), best.offload_activation_layers()),
        (4, RecomputeKind::None, 16),
        "{} {}",
        best.label(),
        best.memory_label()
    );
    let args = export(Engine::Megatron, &report.plans[0].run).unwrap();
    assert!(args.contains("--cpu-offloading-num-layers 16"), "{args}");
    // Offload is tried without a pipeline only, and counted as not needed where the plan fits.
    let mut offloads = 0;
    for point in &report.points {
        let candidate = report.candidate(point);
        if candidate.recompute.offloads() {
            offloads += 1;
            assert_eq!(candidate.pp, 1, "{candidate:?}");
        }
    }
    assert!(offloads > 0);
    let not_needed = report.rejections.counts.get(&RejectionKind::OffloadNotNeeded);
    let (count, example) = not_needed.expect("some plans fit without their offload");
    assert!(*count > 0 && example.to_string().contains("fits without its offload"), "{example}");
    // The same ranking as simulating everything.
    let reference = long_context_search(Some(Engine::Megatron), false);
    let labels = |r: &meshplan::search::SearchReport| -> Vec<String> {
        r.plans
            .iter()
            .map(|p| format!("{} {}", p.run.plan().label(), p.run.plan().memory_label()))
            .collect()
    };
    assert_eq!(labels(&report), labels(&reference));
    // torchtitan has no activation offload: none is tried.
    let torchtitan = long_context_search(Some(Engine::Torchtitan), true);
    assert!(torchtitan.points.iter().all(|p| !torchtitan.candidate(p).recompute.offloads()));
    assert!(!torchtitan.rejections.counts.contains_key(&RejectionKind::OffloadNotNeeded));
}

/// MEMO's point, by layer: where the host link cannot hide every layer's copy, recomputing half
/// of the layers and offloading the others (but the last) fits, stalls less than offloading all
/// but the last, and reruns less than full recompute. Llama 3.1 8B, 4 x 8K tokens a micro-batch on
/// one H100 rank (ZeRO-3 over 8), whose PCIe copies 55 GB/s.
#[test]
fn recomputing_half_and_offloading_the_rest_beats_either_alone_when_the_link_is_slow() {
    let run = |plan: PlanSpec| {
        let plan = PlanSpec { tp: Some(1), zero: Some(3), ..plan };
        preset_run("llama3.1-8b", "h100-sxm", 8, training(8192, 64, 4, Some(Precision::Bf16)), plan)
    };
    let full = |layers: Option<i64>, offload: Option<i64>| PlanSpec {
        recompute: Some(RecomputeKind::Full),
        recompute_num_layers: layers,
        offload_activation_layers: offload,
        ..PlanSpec::default()
    };
    let estimate = |run: &Run| {
        let estimate = meshplan::closed_form(run);
        (estimate.time.step_time().value(), estimate.fits())
    };
    let (recomputed, recomputed_fits) = estimate(&run(full(None, None)));
    let (split, split_fits) = estimate(&run(full(Some(16), Some(15))));
    let offload =
        |layers| PlanSpec { offload_activation_layers: Some(layers), ..PlanSpec::default() };
    let (offloaded, offloaded_fits) = estimate(&run(offload(31)));
    let (_, half_offloaded_fits) = estimate(&run(offload(16)));
    let (_, half_recomputed_fits) = estimate(&run(full(Some(16), None)));
    assert!(recomputed_fits && split_fits && offloaded_fits);
    assert!(!half_offloaded_fits && !half_recomputed_fits);
    assert!(split < recomputed && split < offloaded, "{split} vs {recomputed}, {offloaded}");
}

/// The offloaded activations must fit in the host memory each GPU of the server has: the
/// estimate prints and reports them against it, export refuses a plan over it, and the search
/// drops such plans.
#[test]
fn offloaded_activations_must_fit_in_the_servers_host_memory() {
    // Llama 3.1 8B at 64K tokens, tp 4, cp 4: 24 layers offloaded on a DGX H100 (2 TB, 8 GPUs).
    let line = "estimate --model llama3.1-8b --gpus 16 --seq-len 65536 --global-batch 16 --tp 4 \
                --cp 4 --zero 1 --offload-activation-layers 24";
    let output = run(&words(line));
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.contains("Host memory: offloaded activations ")
            && output
                .stdout
                .contains(" GiB per GPU of 232.83 GiB (the server's, shared by its GPUs): fits"),
        "{}",
        output.stdout
    );
    // The same plan on servers of 16 GB: 2 GB a GPU.
    let small = format!("{line} --host-memory 16GB");
    let output = run(&words(&small));
    assert_eq!(output.code, 0, "{}", output.stderr);
    assert!(
        output.stdout.contains("of 1.86 GiB (the server's, shared by its GPUs): DOES NOT FIT (")
    );
    let value = json(&words(&format!("{small} --format json")));
    let host = &value["memory"]["host"];
    assert_eq!(host["fits"], false, "{value}");
    assert_eq!(value["memory"]["fits"], false, "{value}");
    let offloaded = host["offloaded_gib"].as_f64().unwrap();
    assert!(offloaded > 1.86 && (host["capacity_gib"].as_f64().unwrap() - 1.8626).abs() < 1e-3);
    let export = small.replacen("estimate", "export --to megatron", 1);
    let output = run(&words(&export));
    assert_eq!(output.code, 2, "{}", output.stdout);
    assert!(
        output.stderr.contains("host_memory")
            && output.stderr.contains(
                "of activations per GPU but the server's host memory gives each GPU 1.86 GiB"
            )
            && output.stderr.contains("--host-memory"),
        "{}",
        output.stderr
    );
    // A bad size names the flag.
    let output = run(&words(&format!("{line} --host-memory lots")));
    assert_eq!(output.code, 2);
    assert!(output.stderr.contains("cluster.host_memory") && output.stderr.contains("lots"));
}

/// A search keeps only plans whose offloaded activations fit in host memory: Llama 3.1 405B on
/// 512 H100 ranks plans that offload 125 layers among its best with a DGX H100's 2 TB, and none
/// on servers of 400 GB (50 GB a GPU).
#[test]
fn a_search_drops_plans_whose_offload_does_not_fit_in_host_memory() {
    let line = "search --model llama3.1-405b --gpus 512 --seq-len 8192 --global-batch 256 --top 5";
    let offloading = |args: &str| {
        let value = json(&words(&format!("{args} --format json")));
        value["plans"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["plan"]["offload_activation_layers"].as_i64().unwrap_or(0) > 0)
            .count()
    };
    assert!(offloading(line) > 0);
    assert_eq!(offloading(&format!("{line} --host-memory 400GB")), 0);
}

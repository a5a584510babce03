//! Tests of selective recompute by module and of activation offloading: what each frees, what
//! each reruns or copies, and the plans validation refuses.

use crate::cost::layer::{OpKind, Phase, Rows, transformer_layer};
use crate::cost::memory::{ActivationBytes, layer_activation_bytes, stage_memory};
use crate::cost::step::step_time;
use crate::cost::work::{Tables, stage_segments};
use crate::hardware::ClusterSpec;
use crate::plan::{PlanSpec, Precision, RecomputeKind, RecomputeModule, RecomputeModules};
use crate::presets;
use crate::run::{Run, RunSpec, test_run, test_spec};
use crate::units::{Bytes, Seconds};

fn selective(modules: &[RecomputeModule]) -> PlanSpec {
    PlanSpec {
        recompute: Some(RecomputeKind::Selective),
        recompute_modules: Some(modules.to_vec()),
        ..PlanSpec::default()
    }
}

fn llama8b(plan: PlanSpec) -> Run {
    test_run(presets::model("llama3.1-8b").unwrap(), 8, 8192, 16, 2, plan)
}

fn qwen_moe(plan: PlanSpec) -> Run {
    let plan = PlanSpec { ep: Some(8), ..plan };
    test_run(presets::model("qwen3-30b-a3b").unwrap(), 8, 4096, 32, 2, plan)
}

/// Llama 3.1 70B on 64 GB200 with FSDP, no pipeline: the NeMo recipes that offload.
fn llama70b_gb200(offload: i64, gpu: &str) -> Run {
    let plan = PlanSpec {
        tp: Some(1),
        pp: Some(1),
        fsdp: Some(true),
        offload_activation_layers: Some(offload),
        ..PlanSpec::default()
    };
    llama70b(gpu, 2, plan)
}

/// Llama 3.1 70B in BF16 on 64 `gpu`s, 8K tokens, 128 sequences a step in micro-batches of
/// `micro_batch`, under `plan`.
fn llama70b(gpu: &str, micro_batch: i64, plan: PlanSpec) -> Run {
    let mut spec = test_spec("llama3.1-70b", 64, 8192, 128, micro_batch, plan);
    spec.cluster = ClusterSpec { gpu: presets::gpu(gpu).unwrap(), num_gpus: 64 };
    spec.training.precision = Some(Precision::Bf16);
    Run::from_spec(&spec).unwrap()
}

fn forward_time(run: &Run, dense: bool, names: &[&str]) -> Seconds {
    transformer_layer(run, dense, Rows::Keep)
        .ops
        .iter()
        .filter(|op| op.phase == Phase::Forward && names.contains(&op.name))
        .filter(|op| op.kind != OpKind::TpComm)
        .map(|op| op.time)
        .sum()
}

#[test]
fn the_attention_core_is_the_default_and_frees_nothing_under_a_fused_kernel() {
    let none = llama8b(PlanSpec::default());
    let default =
        llama8b(PlanSpec { recompute: Some(RecomputeKind::Selective), ..PlanSpec::default() });
    let core = llama8b(selective(&[RecomputeModule::CoreAttn]));
    assert_eq!(default.plan().recompute_modules(), RecomputeModules::DEFAULT_SELECTIVE);
    assert_eq!(default.plan(), core.plan());
    assert_eq!(layer_activation_bytes(&core, true), layer_activation_bytes(&none, true));
    // Its rerun is the attention forward.
    let rerun = step_time(&core).recompute;
    let attention = forward_time(&core, true, &["attention"]);
    let layers = core.model().num_layers() as f64 * core.plan().num_microbatches() as f64;
    assert!((rerun.value() - attention.value() * layers).abs() < 1e-9 * rerun.value().max(1.0));
}

#[test]
fn rerunning_the_mlp_frees_its_fc1_output_and_fc2_input_and_reruns_its_forward() {
    let none = llama8b(PlanSpec::default());
    let mlp = llama8b(selective(&[RecomputeModule::Mlp]));
    // Llama 3.1 8B, tp 1, bf16: the gate/up output (2 x 14336) and the activation output (14336)
    // of 8192 x 2 tokens, two bytes each.
    let freed = layer_activation_bytes(&none, true) - layer_activation_bytes(&mlp, true);
    assert_eq!(freed, Bytes::new((2.0 * 14336.0 + 14336.0) * 2.0 * 16384.0));
    let rerun = forward_time(&mlp, true, &["fc1", "activation", "fc2"]);
    let layers = mlp.model().num_layers() as f64 * mlp.plan().num_microbatches() as f64;
    let recompute = step_time(&mlp).recompute;
    assert!((recompute.value() - rerun.value() * layers).abs() < 1e-9 * recompute.value());
    // The backward holds one layer's rebuilt MLP at a time.
    assert_eq!(ActivationBytes::new(&mlp).recompute_working, freed);
}

#[test]
fn rerunning_the_norms_frees_the_qkv_and_fc1_inputs() {
    let none = llama8b(PlanSpec::default());
    let norms = llama8b(selective(&[RecomputeModule::Layernorm]));
    let freed = layer_activation_bytes(&none, true) - layer_activation_bytes(&norms, true);
    assert_eq!(freed, Bytes::new(2.0 * 4096.0 * 2.0 * 16384.0));
}

#[test]
fn moe_modules_free_the_routed_rows_and_the_whole_block_includes_its_activation() {
    let none = qwen_moe(PlanSpec::default());
    let act = qwen_moe(selective(&[RecomputeModule::MoeAct]));
    let moe = qwen_moe(selective(&[RecomputeModule::Moe]));
    let both = qwen_moe(selective(&[RecomputeModule::Moe, RecomputeModule::MoeAct]));
    let bytes = |run: &Run| layer_activation_bytes(run, false);
    assert!(bytes(&moe) < bytes(&act) && bytes(&act) < bytes(&none));
    assert_eq!(bytes(&both), bytes(&moe));
    let recompute = |run: &Run| step_time(run).recompute;
    assert!(recompute(&act) < recompute(&moe));
    assert_eq!(recompute(&both), recompute(&moe));
    // The activation's rerun is the expert activation kernel's forward.
    let tables = Tables::new(&act);
    let rerun = tables.layers.layer.selective_rerun(act.plan().recompute_modules());
    assert_eq!(rerun.compute, forward_time(&act, false, &["expert-activation"]));
}

#[test]
fn offloaded_layers_leave_the_gpu_and_a_hidden_copy_costs_no_time() {
    let kept = llama70b_gb200(0, "gb200");
    let half = llama70b_gb200(40, "gb200");
    let stored = |run: &Run| ActivationBytes::new(run).stored(&stage_segments(run)[0]);
    let layer = layer_activation_bytes(&kept, true);
    // Half of the 80 layers stay; the embedding output is not offloaded.
    assert_eq!(stored(&kept) - stored(&half), layer * 40.0);
    assert_eq!(ActivationBytes::new(&half).recompute_working, layer);
    assert!(
        stage_memory(&half)[0].breakdown.activations < stage_memory(&kept)[0].breakdown.activations
    );
    // 40 layers' activations over 225 GB/s NVLink-C2C hide behind a 70B micro-batch's compute.
    assert_eq!(step_time(&half).step_time(), step_time(&kept).step_time());
}

/// Full recompute of some layers beside offload of others (MEMO's split, by layer): the
/// offloaded layers are among those that keep their activations, a recomputed layer keeps only
/// its input on the GPU, and an offload of more layers than are not recomputed moves only those.
#[test]
fn recompute_and_offload_split_the_layers_between_them() {
    let run = |recomputed: i64, offloaded: i64| {
        let plan = PlanSpec {
            tp: Some(1),
            pp: Some(1),
            fsdp: Some(true),
            recompute: Some(RecomputeKind::Full),
            recompute_num_layers: Some(recomputed),
            offload_activation_layers: Some(offloaded),
            ..PlanSpec::default()
        };
        llama70b("gb200", 2, plan)
    };
    let layer = layer_activation_bytes(&llama70b_gb200(0, "gb200"), true);
    let bytes = |run: &Run| {
        let activations = ActivationBytes::new(run);
        let segment = &stage_segments(run)[0];
        (activations.stored(segment), activations.offloaded(segment), activations.layer_input)
    };
    // 40 of 80 layers recomputed and the other 40 offloaded: the GPU keeps 40 layer inputs and
    // the embedding output; the 40 full layers go to host memory.
    let (stored, offloaded, input) = bytes(&run(40, 40));
    assert_eq!(offloaded, layer * 40.0);
    assert_eq!(stored, input * 40.0 + input);
    // Offloading 60 moves only the 40 that keep their activations.
    let (stored_60, offloaded_60, _) = bytes(&run(40, 60));
    assert_eq!((stored_60, offloaded_60), (stored, offloaded));
    // Offloading 20 of them keeps the other 20 on the GPU.
    let (stored_20, offloaded_20, _) = bytes(&run(40, 20));
    assert_eq!(offloaded_20, layer * 20.0);
    assert_eq!(stored_20, input * 40.0 + layer * 20.0 + input);
}

#[test]
fn a_copy_longer_than_the_compute_it_hides_behind_stalls_it() {
    // The same plan on H100s: PCIe Gen5 at 0.86 of 64 GB/s (measured 55 GB/s) cannot hide 79
    // layers of activations behind one micro-batch's forward.
    let kept = llama70b_gb200(0, "h100-sxm");
    let most = llama70b_gb200(79, "h100-sxm");
    let offloaded = ActivationBytes::new(&most).offloaded(&stage_segments(&most)[0]);
    let copy = offloaded.value() / (64e9 * 0.86);
    let kept_time = step_time(&kept);
    let most_time = step_time(&most);
    let m = kept.plan().num_microbatches() as f64;
    let forward = kept_time.forward.value() / m;
    assert!(copy > forward, "copy {copy} s vs forward {forward} s");
    let stall = (most_time.forward.value() - kept_time.forward.value()) / m;
    assert!((stall - (copy - forward)).abs() < 1e-9, "{stall} vs {}", copy - forward);
}

#[test]
fn validation_refuses_modules_and_offloads_that_cannot_run() {
    let problems = |model: &str, plan: PlanSpec| -> Vec<String> {
        let spec = test_spec(model, 8, 4096, 16, 1, plan);
        match Run::from_spec(&spec) {
            Ok(_) => Vec::new(),
            Err(err) => err.to_string().lines().map(str::to_owned).collect(),
        }
    };
    let text = |lines: Vec<String>| lines.join("\n");
    let mla = text(problems("llama3.1-8b", selective(&[RecomputeModule::MlaUpProj])));
    assert!(mla.contains("plan.recompute_modules") && mla.contains("latent attention"), "{mla}");
    let moe = text(problems("llama3.1-8b", selective(&[RecomputeModule::MoeAct])));
    assert!(moe.contains("MoE layers"), "{moe}");
    let without =
        PlanSpec { recompute_modules: Some(vec![RecomputeModule::Mlp]), ..PlanSpec::default() };
    let without = text(problems("llama3.1-8b", without));
    assert!(without.contains("applies only to selective recompute"), "{without}");
    // Llama 3.1 8B has 32 layers on its one pipeline rank: at most 31 offload.
    let offload = |n| PlanSpec { offload_activation_layers: Some(n), ..PlanSpec::default() };
    assert!(problems("llama3.1-8b", offload(31)).is_empty());
    for n in [32, -1] {
        let refused = text(problems("llama3.1-8b", offload(n)));
        assert!(refused.contains("plan.offload_activation_layers"), "{n}: {refused}");
    }
}

#[test]
fn a_gpu_without_a_host_link_cannot_offload() {
    let mut spec: RunSpec = test_spec(
        "llama3.1-8b",
        8,
        4096,
        16,
        1,
        PlanSpec { offload_activation_layers: Some(4), ..PlanSpec::default() },
    );
    spec.cluster.gpu.interconnect.host_bandwidth = None;
    spec.cluster.gpu.interconnect.host_efficiency = None;
    let err = Run::from_spec(&spec).unwrap_err().to_string();
    assert!(err.contains("host link"), "{err}");
}

#[test]
fn host_memory_holds_each_stage_s_offloaded_layers_for_every_micro_batch_in_flight() {
    use crate::cost::memory::{host_offload_need, in_flight_microbatches};
    use crate::cost::priced::PricedRun;
    // Llama 3.1 70B on 64 GB200, pp 4: stage 0 holds 4 micro-batches under 1F1B, each with 10 of
    // its 20 layers' activations in host memory.
    let run = |offloaded: i64| {
        let plan = PlanSpec {
            pp: Some(4),
            offload_activation_layers: Some(offloaded),
            ..PlanSpec::default()
        };
        llama70b("gb200", 1, plan)
    };
    let offloading = run(10);
    let per_microbatch =
        ActivationBytes::new(&offloading).offloaded(&stage_segments(&offloading)[0]);
    assert_eq!(in_flight_microbatches(&offloading, 0), 4.0);
    let need = PricedRun::new(&offloading).host_offload_need();
    assert_eq!(need, per_microbatch * 4.0);
    assert!(need > Bytes::ZERO);
    // Without the op tables (the whole run's checkpoint check), the same figure.
    assert_eq!(host_offload_need(&offloading), need);
    assert_eq!(PricedRun::new(&run(0)).host_offload_need(), Bytes::ZERO);
    assert_eq!(host_offload_need(&run(0)), Bytes::ZERO);
    // A GB200 compute tray's 960 GB over its 4 GPUs.
    let per_gpu = offloading.cluster().interconnect().host_memory_per_gpu().unwrap();
    assert!((per_gpu.value() - 240e9).abs() < 1.0, "{per_gpu:?}");
}

#[test]
fn a_re_packing_window_offloads_the_activations_of_its_own_micro_batches() {
    use crate::cost::priced::PricedRun;
    use crate::data::{DataSpec, LengthBinSpec};
    use crate::run::RunSpec;
    // Llama 3.1 8B at 32K on 32 GPUs (tp 4, pp 2), offloading 4 layers a stage, a long-tailed mix
    // of documents: re-packing over more global batches changes the tokens each micro-batch
    // carries, and so what its offloaded layers hold in host memory.
    let bin = |min, max, count| LengthBinSpec { min, max, count };
    let data = DataSpec {
        histogram: Some(vec![bin(256, 2048, 900), bin(8192, 32_768, 60), bin(32_768, 65_536, 10)]),
        ..DataSpec::default()
    };
    let plan = PlanSpec {
        tp: Some(4),
        pp: Some(2),
        offload_activation_layers: Some(4),
        ..PlanSpec::default()
    };
    let spec = crate::run::test_spec("llama3.1-8b", 32, 32_768, 64, 1, plan);
    let run = Run::from_spec(&RunSpec { data: Some(data), ..spec }).unwrap();
    let priced = PricedRun::new(&run);
    let windows = [1, 2, 8];
    let needs: Vec<Bytes> =
        priced.windows(&windows).iter().map(|w| priced.host_offload_need_with(w)).collect();
    for (&window, &need) in windows.iter().zip(&needs) {
        let own = run.with_balance_window(window);
        assert_eq!(PricedRun::new(&own).host_offload_need(), need, "window {window}");
        assert!(need > Bytes::ZERO);
    }
    assert!(needs.windows(2).any(|pair| pair[0] != pair[1]), "{needs:?}");
}

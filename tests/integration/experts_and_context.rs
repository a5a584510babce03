//! Mixture-of-experts, latent attention and context-parallel exchanges through the public API:
//! sharded expert totals, latent-attention memory, all-to-all placement on the topology, routing
//! imbalance, and that a plan without context parallelism is priced the same whatever exchange it
//! names.

use meshplan::cost::collective::{Collective, Group, collective_time};
use meshplan::cost::layer::{OpKind, Phase, Rows, transformer_layer};
use meshplan::cost::memory::{layer_activation_bytes, stage_params};
use meshplan::plan::{CpComm, PipelineSplit, PlanSpec};
use meshplan::units::Bytes;
use meshplan::{Run, closed_form};

use meshplan::presets;

use crate::support::{preset_run, spec, training};

/// `model` on `gpus` GPUs of the preset `gpu`: 8 sequences of `seq_len` per GPU and step, one per
/// micro-batch, in the GPU's default precision.
fn run(model: &str, gpu: &str, gpus: i64, seq_len: i64, plan: PlanSpec) -> Run {
    preset_run(model, gpu, gpus, training(seq_len, gpus * 8, 1, None), plan)
}

#[test]
fn expert_parameters_shard_over_expert_parallel_ranks_and_add_up_to_the_model() {
    // DeepSeek-V3 on 8 stages of 32 ranks, each holding 256 / 32 = 8 routed experts per layer.
    let plan = PlanSpec {
        pp: Some(8),
        ep: Some(32),
        pipeline_split: Some(PipelineSplit::Balanced),
        ..PlanSpec::default()
    };
    let run = run("deepseek-v3", "h100-sxm", 256, 4096, plan);
    let model = run.model();
    let experts: f64 = (0..8).map(|stage| stage_params(&run, stage).expert).sum::<f64>() * 32.0;
    let moe_layers = model.moe_layers() + model.mtp_layers();
    let expected = (moe_layers * 256 * model.expert_params()) as f64;
    assert!((experts - expected).abs() < 1.0, "{experts} vs {expected}");
    // Everything else is held whole by every rank of a stage (tp = 1): the model's total.
    let dense: f64 = (0..8).map(|stage| stage_params(&run, stage).dense).sum();
    assert!((dense + expected - model.total_params() as f64).abs() < 1.0);
}

#[test]
fn latent_attention_stores_the_rebuilt_heads_and_the_compressed_latents() {
    // One DeepSeek-V3 dense layer (the first three), tp = 1, bf16, 4096 tokens: per token the two
    // norm inputs (2h x 2 B), the attention block's saved tensors — Q (128 x 192), K (128 x 192),
    // V (128 x 128) and the two latents (1536 + 512), 2 B each — the projection and QKV inputs
    // (128 x 128 + h, 2 B each), and the dense MLP's FC1 input (h), FC1 output (2 x 18432) and
    // FC2 input (18432), 2 B each.
    let run = run("deepseek-v3", "h100-sxm", 8, 4096, PlanSpec::default());
    let h = 7168.0;
    let attention = 128.0 * 192.0 * 2.0 + 128.0 * 128.0 + 1536.0 + 512.0;
    let per_token = 2.0 * h * 2.0
        + attention * 2.0
        + (128.0 * 128.0 + h) * 2.0
        + (h + 2.0 * 18432.0 + 18432.0) * 2.0;
    let expected = 4096.0 * per_token;
    let actual = layer_activation_bytes(&run, true).value();
    assert!((actual - expected).abs() < 1.0, "{actual} vs {expected}");
}

#[test]
fn expert_all_to_all_stays_on_nvlink_inside_a_node_and_crosses_nics_beyond() {
    let a2a = |ep: i64| {
        let plan = PlanSpec { ep: Some(ep), ..PlanSpec::default() };
        let run = run("qwen3-30b-a3b", "h100-sxm", 16, 4096, plan);
        transformer_layer(&run, false, Rows::Keep).time(Phase::Forward, OpKind::EpComm)
    };
    // Each rank dispatches 4096 tokens x top-8 x 2048 x 2 B and gets as much back, twice a layer.
    let sent = Bytes::new(4096.0 * 8.0 * 2048.0 * 2.0);
    let links = run("qwen3-30b-a3b", "h100-sxm", 16, 4096, PlanSpec::default());
    let links = links.cluster().interconnect();
    for (ep, size) in [(8, 8), (16, 16)] {
        let group = Group { size, stride: 1 };
        let expected = collective_time(links, Collective::AllToAll, group, sent) * 2.0;
        assert!((a2a(ep) - expected).value().abs() < 1e-12);
    }
    // Half of a 16-way group is in the other node, behind one 400 Gb/s NIC per GPU.
    assert!(a2a(16).value() > 4.0 * a2a(8).value(), "{:?} vs {:?}", a2a(16), a2a(8));
}

#[test]
fn routing_imbalance_moves_the_busiest_rank_and_a_capacity_factor_caps_it() {
    let step = |imbalance: Option<f64>, capacity: Option<f64>| {
        let plan = PlanSpec {
            ep: Some(8),
            moe_imbalance: imbalance,
            moe_capacity_factor: capacity,
            ..PlanSpec::default()
        };
        closed_form(&run("mixtral-8x7b", "h100-sxm", 8, 4096, plan)).time.step_time().value()
    };
    let balanced = step(None, None);
    let skewed = step(Some(1.5), None);
    let capped = step(Some(1.5), Some(1.2));
    assert!(skewed > balanced * 1.1, "{skewed} vs {balanced}");
    assert!(balanced < capped && capped < skewed);
    assert_eq!(step(Some(1.0), Some(1.25)), balanced);
}

#[test]
fn without_context_parallelism_the_exchange_kind_changes_nothing() {
    let price = |cp_comm| {
        let plan = PlanSpec { tp: Some(8), pp: Some(2), cp_comm, ..PlanSpec::default() };
        closed_form(&run("llama3.1-70b", "h100-sxm", 64, 8192, plan))
    };
    let default = price(None);
    for kind in CpComm::ALL {
        assert_eq!(price(Some(kind)), default, "{}", kind.name());
    }
    assert_eq!(default.time.cp_exposed.value(), 0.0);
    assert_eq!(default.time.ep_exposed.value(), 0.0);
}

#[test]
fn ulysses_blocks_on_its_all_to_alls_where_the_ring_hides_under_attention() {
    let price = |kind| {
        let plan =
            PlanSpec { tp: Some(8), cp: Some(4), cp_comm: Some(kind), ..PlanSpec::default() };
        let run = run("llama3.1-70b", "h100-sxm", 64, 65536, plan);
        let layer = transformer_layer(&run, true, Rows::Keep);
        (layer.time(Phase::Forward, OpKind::CpComm), layer.time(Phase::Forward, OpKind::CpAllToAll))
    };
    let (ring, ring_a2a) = price(CpComm::Ring);
    let (ulysses_ring, ulysses) = price(CpComm::AllToAll);
    assert!(ring.value() > 0.0 && ring_a2a.value() == 0.0);
    assert!(ulysses_ring.value() == 0.0 && ulysses.value() > 0.0);
    // tp 8 x cp 4 spans four nodes: the hierarchical exchange runs its all-to-all inside a node
    // (cp 1 there, since tp fills it) and a ring across them.
    let plan = PlanSpec {
        tp: Some(8),
        cp: Some(4),
        cp_comm: Some(CpComm::Hierarchical),
        ..PlanSpec::default()
    };
    let run = run("llama3.1-70b", "h100-sxm", 64, 65536, plan);
    assert_eq!(run.plan().cp_a2a(), 1);
    let plan = PlanSpec {
        tp: Some(2),
        cp: Some(16),
        cp_comm: Some(CpComm::Hierarchical),
        ..PlanSpec::default()
    };
    let run = self::run("llama3.1-70b", "h100-sxm", 64, 65536, plan);
    assert_eq!(run.plan().cp_a2a(), 4);
    // On a GB200 NVL72 domain the 64 query heads would allow an all-to-all over 64 ranks, but
    // Transformer Engine splits the 8 key/value heads over the group too: 8 ranks, then a ring
    // of 8 (Megatron-LM's --hierarchical-context-parallel-sizes 8 8).
    let plan = PlanSpec {
        tp: Some(1),
        cp: Some(64),
        cp_comm: Some(CpComm::Hierarchical),
        ..PlanSpec::default()
    };
    let run = self::run("llama3.1-70b", "gb200", 64, 131072, plan);
    assert_eq!((run.plan().cp_a2a(), run.plan().cp_ring()), (8, 8));
}

/// Mixtral 8x7B on 32 H100 with tp 8, priced by `stack`, with `plan`'s expert and context sizes.
fn mixtral_on(stack: &str, plan: PlanSpec) -> Result<Run, Vec<String>> {
    let plan = PlanSpec { tp: Some(8), stack: Some(stack.to_owned()), ..plan };
    let spec = spec(
        presets::model("mixtral-8x7b").unwrap(),
        "h100-sxm",
        32,
        training(4096, 64, 1, None),
        plan,
    );
    Run::from_spec(&spec).map_err(|v| v.list().iter().map(ToString::to_string).collect())
}

#[test]
fn megatron_core_before_folding_runs_experts_inside_data_parallelism_split_over_tp() {
    // FlagPerf's Mixtral layout, tp 8 pp 2 dp 2 with ep 8: Megatron-Core 0.6 raises unless ep
    // divides dp (parallel_state.py@core_v0.6.0); Megatron-Core 0.14 folds the experts over the
    // 16 ranks of a stage.
    let fold = PlanSpec { pp: Some(2), ep: Some(8), ..PlanSpec::default() };
    let refused = mixtral_on("megatron-core-0.6", fold.clone()).unwrap_err();
    assert!(
        refused.iter().any(|v| v.starts_with(
            "plan.ep = 8: does not divide dp = 2: megatron-core-0.6 runs expert parallelism inside data parallelism"
        )),
        "{refused:?}"
    );
    let folded = mixtral_on("megatron-core-0.14-plus", fold).unwrap();
    assert_eq!((folded.plan().ep(), folded.plan().etp()), (8, 1));
    // ep 2 divides dp 4: accepted, every expert split over the 8 tensor-parallel ranks unless the
    // plan says otherwise, and then refused.
    let within = PlanSpec { ep: Some(2), ..PlanSpec::default() };
    let run = mixtral_on("megatron-core-0.6", within.clone()).unwrap();
    assert_eq!((run.plan().ep(), run.plan().etp()), (2, 8));
    let refused =
        mixtral_on("megatron-core-0.6", PlanSpec { etp: Some(1), ..within.clone() }).unwrap_err();
    assert!(
        refused.iter().any(|v| v.starts_with("plan.etp = 1: differs from tp 8")),
        "{refused:?}"
    );
    // Expert and context parallelism together raise in Megatron-Core 0.6.
    let with_cp = PlanSpec { cp: Some(2), ..within };
    let refused = mixtral_on("megatron-core-0.6", with_cp.clone()).unwrap_err();
    assert!(
        refused.iter().any(|v| v.contains("cannot run beside context parallelism (cp = 2)")),
        "{refused:?}"
    );
    assert!(mixtral_on("megatron-core-0.14-plus", with_cp).is_ok());
}

#[test]
fn stacks_state_their_expert_layout_and_releases_inherit_it() {
    use meshplan::stack::ExpertLayout;
    let layout = |id: &str| presets::stack(id).unwrap().expert_layout();
    assert_eq!(layout("megatron-core-0.6"), ExpertLayout::WithinDataParallel);
    assert!(!presets::stack("megatron-core-0.6").unwrap().experts_with_context_parallel());
    for id in ["megatron-core-0.12-0.13", "megatron-core-0.14-plus", "nemo-26.04", "generic"] {
        assert_eq!(layout(id), ExpertLayout::Folded, "{id}");
    }
    // A range over the release that brought folding states neither, and says so.
    let range = presets::stack("megatron-core-0.8-0.11").unwrap();
    assert!(range.unknown().iter().any(|u| u == "parallelism.experts"));
    assert!(
        !presets::stack("megatron-core-0.12-0.13")
            .unwrap()
            .unknown()
            .iter()
            .any(|u| u == "parallelism.experts")
    );
}

//! Mesh-Attention as a context-parallel exchange (`--cp-comm mesh`, `cost::mesh_attention`; Chen
//! et al. 2025, arXiv 2512.20968): a rank's bytes on a worked example, the saving against the
//! ring that a square grid gives (and that grouped-query attention takes back), nothing priced
//! without context parallelism, the grid rule, every exporter's refusal and an estimate end to
//! end.

use meshplan::cost::layer::{OpKind, Phase, Rows, transformer_layer};
use meshplan::cost::mesh_attention::{MeshChunks, grid, traffic};
use meshplan::export::{Engine, Refusal, check, export};
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{CpComm, PlanSpec};
use meshplan::{Run, RunSpec, closed_form, presets};
use serde_json::Value;

use crate::support::{json, preset_run, training, words};

const MIB: f64 = 1024.0 * 1024.0;

/// `model` with tp `tp` and cp `cp` on `tp x cp` H100s, one `seq_len` sequence per micro-batch.
fn run(model: &str, tp: i64, cp: i64, seq_len: i64, cp_comm: CpComm) -> Run {
    let plan =
        PlanSpec { tp: Some(tp), cp: Some(cp), cp_comm: Some(cp_comm), ..PlanSpec::default() };
    preset_run(model, "h100-sxm", tp * cp, training(seq_len, 8, 1, None), plan)
}

/// The bytes of one layer's context-parallel exchange rows in `phase`.
fn exchanged(run: &Run, phase: Phase) -> f64 {
    let layer = transformer_layer(run, true, Rows::Keep);
    let rows = layer.ops.iter().filter(|op| op.phase == phase);
    rows.filter(|op| matches!(op.kind, OpKind::CpComm | OpKind::CpAllToAll))
        .map(|op| op.bytes.value())
        .sum()
}

#[test]
fn a_rank_of_a_two_by_two_grid_receives_the_formulas_bytes() {
    // Llama 2 7B (32 query and 32 key/value heads of 128), tp 2, cp 4, 32,768 tokens: a rank
    // holds 8192 tokens of 16 heads. Q = O = 8192 x 2048 x 2 B = 32 MiB, KV = 64 MiB, one fp32
    // statistic per row and head S = 8192 x 16 x 4 B = 0.5 MiB. The 2 x 2 grid's forward:
    // Q over the tile row, KV over the tile column, O + S reduced over the tile row = 128.5 MiB;
    // backward: Q + O + 2 S and KV gathered, Q and KV gradients reduced = 225 MiB.
    let mesh = run("llama2-7b", 2, 4, 32768, CpComm::Mesh);
    let chunks = MeshChunks::of(&mesh);
    assert_eq!(
        [chunks.query, chunks.key_value, chunks.output, chunks.statistic].map(|b| b.value() / MIB),
        [32.0, 64.0, 32.0, 0.5]
    );
    let grid = grid(&mesh).unwrap();
    assert_eq!((grid.rows, grid.columns), (2, 2));
    assert_eq!(traffic(grid, &chunks, Phase::Forward).total().value(), 128.5 * MIB);
    assert_eq!(traffic(grid, &chunks, Phase::Backward).total().value(), 225.0 * MIB);
    assert_eq!(exchanged(&mesh, Phase::Forward), 128.5 * MIB);
    assert_eq!(exchanged(&mesh, Phase::Backward), 225.0 * MIB);
    // The ring passes 3 KV chunks forward and twice that backward.
    let ring = run("llama2-7b", 2, 4, 32768, CpComm::Ring);
    assert_eq!(exchanged(&ring, Phase::Forward), 192.0 * MIB);
    assert_eq!(exchanged(&ring, Phase::Backward), 384.0 * MIB);
}

#[test]
fn a_square_grid_moves_two_over_root_cp_plus_one_of_the_rings_bytes() {
    // With as many key/value heads as query heads (KV = 2Q = 2O), a sqrt(cp) x sqrt(cp) grid's
    // forward moves 2 (sqrt(cp) - 1) chunks of KV against the ring's cp - 1, statistics aside:
    // 2 / (sqrt(cp) + 1) of the ring, 2/3 at cp 4, 2/5 at cp 16, 2/9 at cp 64 (the paper's
    // O(sqrt(P)) against O(P)); the backward saves more.
    for (cp, side) in [(4_u64, 2_u64), (16, 4), (64, 8)] {
        let mesh = run("llama2-7b", 1, cp as i64, 65536, CpComm::Mesh);
        let ring = run("llama2-7b", 1, cp as i64, 65536, CpComm::Ring);
        let grid = grid(&mesh).unwrap();
        assert_eq!((grid.rows, grid.columns), (side, side), "cp {cp}");
        let statistics = MeshChunks::of(&mesh).statistic.value() * (side - 1) as f64;
        let ratio =
            (exchanged(&mesh, Phase::Forward) - statistics) / exchanged(&ring, Phase::Forward);
        let expected = 2.0 / (side as f64 + 1.0);
        assert!((ratio - expected).abs() < 1e-12, "cp {cp}: {ratio} vs {expected}");
        let backward = exchanged(&mesh, Phase::Backward) / exchanged(&ring, Phase::Backward);
        assert!(backward < expected, "cp {cp}: {backward}");
    }
}

#[test]
fn grouped_query_attention_takes_the_saving_back() {
    // Llama 3.1 70B has 8 query heads per key/value head: KV = Q / 4, so a rank of a 2 x 2
    // grid gathers Q and returns O (8 KV's worth) to save two KV chunks of the ring's three.
    let mesh = run("llama3.1-70b", 1, 4, 32768, CpComm::Mesh);
    let ring = run("llama3.1-70b", 1, 4, 32768, CpComm::Ring);
    let forward = exchanged(&mesh, Phase::Forward) / exchanged(&ring, Phase::Forward);
    assert!(forward > 2.9 && forward < 3.1, "{forward}");
}

#[test]
fn without_context_parallelism_mesh_prices_nothing() {
    let price = |cp_comm| {
        let plan = PlanSpec { tp: Some(8), cp_comm: Some(cp_comm), ..PlanSpec::default() };
        let run = preset_run("llama2-7b", "h100-sxm", 8, training(4096, 8, 1, None), plan);
        (exchanged(&run, Phase::Forward) + exchanged(&run, Phase::Backward), closed_form(&run))
    };
    let (bytes, mesh) = price(CpComm::Mesh);
    assert_eq!(bytes, 0.0);
    assert_eq!(mesh.time.cp_exposed.value(), 0.0);
    assert_eq!(mesh, price(CpComm::Ring).1);
}

#[test]
fn a_cp_without_a_two_by_two_grid_is_refused_with_the_ring_as_the_fix() {
    for (cp, gpus) in [(2, 8), (3, 24), (7, 56)] {
        let plan = PlanSpec { cp: Some(cp), cp_comm: Some(CpComm::Mesh), ..PlanSpec::default() };
        let spec = RunSpec {
            model: presets::model("llama2-7b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: gpus },
            training: training(4 * 2 * 3 * 7 * 64, gpus, 1, None),
            plan,
            data: None,
        };
        let violations = Run::from_spec(&spec).unwrap_err();
        let list = violations.list();
        assert_eq!(list.len(), 1, "cp {cp}: {list:?}");
        let violation = &list[0];
        assert_eq!((violation.field.as_str(), violation.value.as_str()), ("plan.cp_comm", "mesh"));
        assert!(violation.message.contains(&format!("cp {cp} has no grid")), "{violation:?}");
        assert!(violation.hint.contains("--cp-comm ring"), "{violation:?}");
    }
}

#[test]
fn no_engine_exports_mesh_attention_and_each_names_the_fix() {
    let plan = PlanSpec {
        cp: Some(4),
        cp_comm: Some(CpComm::Mesh),
        fsdp: Some(true),
        ..PlanSpec::default()
    };
    let run = preset_run("llama2-7b", "h100-sxm", 8, training(8192, 8, 1, None), plan);
    for engine in Engine::ALL {
        assert!(!engine.capabilities().cp_comms.contains(&CpComm::Mesh), "{engine:?}");
        let refusals = check(engine, &run).unwrap_err().refusals;
        let err = export(engine, &run).unwrap_err().to_string();
        // DeepSpeed's context parallelism is Ulysses' all-to-all, the others' a ring.
        let (instead, fix) = if engine == Engine::Deepspeed {
            (CpComm::AllToAll, "all-to-all")
        } else {
            (CpComm::Ring, "ring")
        };
        let mesh = Refusal::CpComm { engine, comm: CpComm::Mesh, instead };
        assert_eq!(refusals, [mesh], "{engine:?}");
        assert!(err.contains("Mesh-Attention"), "{err}");
        assert!(err.ends_with(&format!("use --cp-comm {fix}")), "{err}");
    }
    // Megatron-LM still runs the three exchanges it has.
    assert_eq!(
        Engine::Megatron.capabilities().cp_comms,
        [CpComm::Ring, CpComm::AllToAll, CpComm::Hierarchical]
    );
}

/// Every number in `value`, however deep.
fn numbers(value: &Value, out: &mut Vec<f64>) {
    match value {
        Value::Number(n) => out.push(n.as_f64().unwrap()),
        Value::Array(items) => items.iter().for_each(|item| numbers(item, out)),
        Value::Object(fields) => fields.values().for_each(|item| numbers(item, out)),
        _ => {}
    }
}

#[test]
fn an_estimate_with_a_mesh_exchange_prints_finite_figures() {
    let line = "estimate --model llama3.1-8b --gpus 64 --tp 4 --cp 16 --cp-comm mesh \
                --seq-len 131072 --global-batch 16";
    let output = crate::support::run(&words(line));
    assert_eq!(output.code, 0, "stderr: {}", output.stderr);
    let text = &output.stdout;
    assert!(text.contains("tp4 pp1 vp1 cp16 dp1 cp-mesh"), "{text}");
    for bad in ["NaN", "inf"] {
        assert!(!text.contains(bad), "{bad} in {text}");
    }
    let mut args = words(line);
    args.extend(["--format", "json"]);
    let value = json(&args);
    let mut all = Vec::new();
    numbers(&value, &mut all);
    assert!(all.len() > 20 && all.iter().all(|n| n.is_finite()));
    let step = value["time"]["step_time_s"].as_f64().unwrap();
    let tokens = value["throughput"]["tokens_per_sec_per_gpu"].as_f64().unwrap();
    assert!(step > 0.0 && tokens > 0.0, "{step} {tokens}");
    assert_eq!(value["run"]["plan"]["cp_comm"], "mesh");
}

//! Unit tests of the plan space's enumeration (`super`): factorizations, recompute and offload
//! choices, exchanges, re-packing windows and what a candidate's plan spec carries.

use super::*;

fn shape() -> Shape {
    Shape {
        gpus: 16,
        nvlink_domain: 8,
        gpus_per_node: 8,
        layers: 32,
        heads: 32,
        kv_heads: 8,
        seq_len: 4096,
        global_batch: 32,
        experts: 0,
        selective_recompute: RecomputeKind::Selective,
        max_balance_window: 0,
        hybrid_cp_schedulers: &[],
        variable_micro_batches: false,
        mesh_attention: false,
        activation_offload: false,
        offload_beside_recompute: false,
    }
}

#[test]
fn divisors_are_complete_and_sorted() {
    assert_eq!(divisors(36).collect::<Vec<_>>(), [1, 2, 3, 4, 6, 9, 12, 18, 36]);
    assert_eq!(divisors(1).collect::<Vec<_>>(), [1]);
    assert_eq!(divisors(16384).count(), 15);
}

#[test]
fn the_space_covers_every_factorization_and_respects_constraints() {
    let all = candidates(&shape(), &Constraints::default(), &PlanSpec::default());
    let factorizations: std::collections::BTreeSet<_> =
        all.iter().map(|c| (c.tp, c.cp, c.pp)).collect();
    // tp <= 8 (NVLink domain), and every tp x cp x pp dividing 16.
    assert!(factorizations.contains(&(8, 2, 1)) && factorizations.contains(&(1, 1, 16)));
    assert!(!factorizations.iter().any(|(tp, _, _)| *tp > 8));
    assert!(all.iter().all(|c| 16 % (c.tp * c.cp * c.pp) == 0));
    let limited = candidates(
        &shape(),
        &Constraints { max_pp: Some(2), ..Constraints::default() },
        &PlanSpec { tp: Some(4), ..PlanSpec::default() },
    );
    assert!(!limited.is_empty() && limited.iter().all(|c| c.pp <= 2 && c.tp == 4));
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), all.len(), "candidates are unique");
}

#[test]
fn a_torchtitan_search_tries_per_op_checkpointing_instead_of_the_attention_core() {
    let kinds = |shape: &Shape| -> std::collections::BTreeSet<RecomputeChoice> {
        candidates(shape, &Constraints::default(), &PlanSpec::default())
            .iter()
            .map(|c| c.recompute)
            .collect()
    };
    let megatron = kinds(&shape());
    assert!(megatron.contains(&RecomputeChoice::Selective));
    assert!(!megatron.contains(&RecomputeChoice::Op));
    let torchtitan = kinds(&Shape { selective_recompute: RecomputeKind::Op, ..shape() });
    assert!(torchtitan.contains(&RecomputeChoice::Op));
    assert!(!torchtitan.contains(&RecomputeChoice::Selective));
}

#[test]
fn one_layer_stages_have_no_half_recompute() {
    // 32 layers over pp 16 leave two per stage (half is one layer); over pp 32 (on 32 GPUs),
    // one, whose half would be no recompute again.
    let half = |c: &Candidate| c.recompute == RecomputeChoice::HalfFull;
    let all = candidates(&shape(), &Constraints::default(), &PlanSpec::default());
    assert!(all.iter().any(|c| c.pp == 16 && half(c)));
    let wide = Shape { gpus: 32, global_batch: 64, ..shape() };
    let all = candidates(&wide, &Constraints::default(), &PlanSpec::default());
    assert!(all.iter().any(|c| c.pp == 32 && c.recompute == RecomputeChoice::None));
    assert!(!all.iter().any(|c| c.pp == 32 && c.split == PipelineSplit::Even && half(c)));
}

#[test]
fn mesh_attention_is_tried_where_the_shape_allows_or_pinned_and_on_a_two_by_two_grid() {
    let exchanges = |shape: &Shape| -> std::collections::BTreeSet<(u64, CpComm)> {
        candidates(shape, &Constraints::default(), &PlanSpec::default())
            .iter()
            .map(|c| (c.cp, c.cp_comm))
            .collect()
    };
    let targeted = exchanges(&shape());
    assert!(!targeted.iter().any(|&(_, comm)| comm == CpComm::Mesh));
    // A shape that tries it (an engine that ran it) tries every grid of 2 x 2 at least.
    let any_engine = exchanges(&Shape { mesh_attention: true, ..shape() });
    let mesh: Vec<u64> =
        any_engine.iter().filter(|(_, comm)| *comm == CpComm::Mesh).map(|(cp, _)| *cp).collect();
    // cp 4, 8 and 16 of 16 GPUs; cp 2 has only the ring's one-row grid.
    assert_eq!(mesh, [4, 8, 16]);
    assert!(targeted.iter().all(|pair| any_engine.contains(pair)));
    // Pinned, a targeted search prices it too, for the engine check to reject with its reason.
    let pins = PlanSpec { cp_comm: Some(CpComm::Mesh), ..PlanSpec::default() };
    let pinned = candidates(&shape(), &Constraints::default(), &pins);
    assert!(!pinned.is_empty() && pinned.iter().all(|c| c.cp_comm == CpComm::Mesh));
}
#[test]
fn offload_is_tried_without_a_pipeline_where_the_shape_allows_and_nothing_is_pinned() {
    let pins = PlanSpec::default();
    let offloading = Shape { activation_offload: true, ..shape() };
    let offloads = |shape: &Shape, pp: u64, layers: u64, pins: &PlanSpec| -> Vec<_> {
        recomputes(shape, pp, layers, pins).into_iter().filter(|c| c.offloads()).collect()
    };
    assert_eq!(
        offloads(&offloading, 1, 32, &pins),
        [RecomputeChoice::OffloadHalf, RecomputeChoice::OffloadAllButLast]
    );
    // Half of two layers is all but the last; a one-layer stage keeps its layer.
    assert_eq!(offloads(&offloading, 1, 2, &pins), [RecomputeChoice::OffloadAllButLast]);
    assert!(offloads(&offloading, 1, 1, &pins).is_empty());
    // Not on a pipeline, not where the shape rules it out, not when an offload is pinned,
    // and not beside a pinned recompute.
    assert!(offloads(&offloading, 2, 16, &pins).is_empty());
    assert!(offloads(&shape(), 1, 32, &pins).is_empty());
    let pinned = PlanSpec { offload_activation_layers: Some(8), ..PlanSpec::default() };
    assert!(offloads(&offloading, 1, 32, &pinned).is_empty());
    let full = PlanSpec { recompute: Some(RecomputeKind::Full), ..PlanSpec::default() };
    assert!(offloads(&offloading, 1, 32, &full).is_empty());
    // The plan carries the count.
    let candidate = |recompute| Candidate {
        recompute,
        ..candidates(&offloading, &Constraints::default(), &pins)[0]
    };
    let spec = |choice| candidate(choice).plan_spec(32, &PlanSpec::default());
    assert_eq!(spec(RecomputeChoice::OffloadHalf).offload_activation_layers, Some(16));
    assert_eq!(spec(RecomputeChoice::OffloadAllButLast).offload_activation_layers, Some(31));
    assert_eq!(spec(RecomputeChoice::OffloadAllButLast).recompute, Some(RecomputeKind::None));
    // Offload beside recompute, where the shape allows it: 16 layers recomputed, 15 offloaded
    // and the last kept.
    let both = Shape { offload_beside_recompute: true, ..offloading };
    assert_eq!(offloads(&both, 1, 32, &pins).last(), Some(&RecomputeChoice::HalfFullOffloadRest));
    assert!(!offloads(&both, 1, 2, &pins).contains(&RecomputeChoice::HalfFullOffloadRest));
    let half = spec(RecomputeChoice::HalfFullOffloadRest);
    assert_eq!(half.recompute, Some(RecomputeKind::Full));
    assert_eq!((half.recompute_num_layers, half.offload_activation_layers), (Some(16), Some(15)));
}

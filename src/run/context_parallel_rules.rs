//! The plan's context-parallel rules: the exchange that feeds attention (ring, Ulysses or both,
//! by the heads and the NVLink domain) and per-document groups (`--hybrid-cp`), as Megatron-LM's
//! released hybrid context parallel accepts them.

use crate::model::Model;
use crate::plan::{CpComm, HybridCp, MeshGrid, PlanSpec, Training};
use crate::violation::Collector;

/// The context-parallel exchange and its all-to-all size. Ulysses splits each TP rank's heads
/// over the cp ranks, so `cp` must divide the query heads per TP rank (key/value heads are
/// replicated when there are fewer); a hierarchical exchange runs its all-to-all over the largest
/// divisor of cp whose ranks share an NVLink domain and that divides both the query and the
/// key/value heads per TP rank (Transformer Engine's all-to-all splits each head tensor over its
/// group, `flash_attn_a2a_communicate`), and a ring over the rest. Mesh-Attention
/// deals the attention matrix to the cp ranks as a grid of at least two rows and two columns
/// (a one-row grid is the ring), so cp must have such a factorisation; its ranks run one block
/// of the tile at a time, so it has no all-to-all.
pub(super) fn validate_cp_comm(
    collector: &mut Collector,
    spec: &PlanSpec,
    model: &Model,
    tp: u64,
    cp: u64,
    domain: u64,
) -> (CpComm, u64) {
    let kind = spec.cp_comm.unwrap_or(CpComm::Ring);
    let heads = model.num_attention_heads() / tp.max(1);
    let kv_heads = model.num_kv_heads() / tp.max(1);
    let a2a = match kind {
        CpComm::Ring => 1,
        CpComm::AllToAll => {
            if !heads.is_multiple_of(cp) {
                collector.add(
                    "plan.cp_comm",
                    kind.name(),
                    format!("cp {cp} does not divide the {heads} query heads per TP rank"),
                    "use --cp-comm ring or hierarchical, or a cp that divides the heads",
                );
            }
            cp
        }
        CpComm::Hierarchical => (1..=cp)
            .filter(|&a| {
                let splits = |h: u64| h.is_multiple_of(a);
                cp.is_multiple_of(a)
                    && splits(heads)
                    && (kv_heads == 0 || splits(kv_heads))
                    && a * tp <= domain
            })
            .max()
            .unwrap_or(1),
        CpComm::Mesh => {
            if cp > 1 && MeshGrid::all(cp).is_empty() {
                collector.add(
                    "plan.cp_comm",
                    kind.name(),
                    format!(
                        "cp {cp} has no grid of at least 2 x 2 ranks to deal the attention \
                         matrix's tiles over (a single row of tiles is ring attention)"
                    ),
                    "use --cp-comm ring, or a cp with a factor pair of at least 2 each \
                     (4, 6, 8, 9, 16, ...)",
                );
            }
            1
        }
    };
    (kind, a2a)
}

/// What the hybrid-CP rules read besides the spec.
pub(super) struct HybridCpInputs<'a> {
    /// The sizes and the training setup passed their own checks (else the cross-field rules
    /// are skipped: they would name stand-ins).
    pub known: bool,
    pub pp: u64,
    pub dp: u64,
    pub cp: u64,
    pub cp_comm: CpComm,
    pub balance_window: u64,
    pub training: &'a Training,
}

/// `plan.hybrid_cp` and `plan.max_seqlen_per_rank`: the `dp x cp` ranks are one pool of a power
/// of two of at least 2 (Megatron-LM builds the groups as aligned power-of-two blocks), with no
/// pipeline (its release asserts pp 1), exchanging over a ring, not also re-packing, with
/// micro-batches of one sequence (the loader hands out whole documents); a rank holds
/// at most the tokens it holds without the groups (the memory is priced so), and the pool holds a
/// whole sequence (Megatron-LM's buffer check).
pub(super) fn validate_hybrid_cp(
    collector: &mut Collector,
    spec: &PlanSpec,
    inputs: HybridCpInputs,
) -> Option<HybridCp> {
    let field = "plan.max_seqlen_per_rank";
    if !spec.hybrid_cp.unwrap_or(false) {
        if let Some(tokens) = spec.max_seqlen_per_rank {
            collector.add(field, tokens, "applies only to hybrid CP", "add --hybrid-cp or drop it");
        }
        if let Some(scheduler) = spec.hybrid_cp_scheduler {
            collector.add(
                "plan.hybrid_cp_scheduler",
                scheduler.name(),
                "applies only to hybrid CP",
                "add --hybrid-cp or drop it",
            );
        }
        return None;
    }
    let HybridCpInputs { known, pp, dp, cp, cp_comm, balance_window, training } = inputs;
    let held = training.micro_batch.saturating_mul(training.seq_len) / cp.max(1);
    let tokens = match spec.max_seqlen_per_rank {
        None => held,
        Some(tokens) => match u64::try_from(tokens) {
            Ok(tokens) if tokens >= 1 && (!known || tokens <= held) => tokens,
            _ => {
                collector.add(
                    field,
                    tokens,
                    format!(
                        "must be 1 to the {held} tokens a rank holds of a micro-batch \
                         (seq_len / cp), whose memory the plan is priced at"
                    ),
                    format!("leave it unset ({held}) or give fewer tokens"),
                );
                held.max(1)
            }
        },
    };
    let scheduler = spec.hybrid_cp_scheduler.unwrap_or_default();
    if !known {
        return Some(HybridCp { max_tokens_per_rank: tokens, scheduler });
    }
    let hybrid = "plan.hybrid_cp";
    if pp != 1 {
        collector.add(
            hybrid,
            format!("pp {pp}"),
            "needs pp 1: Megatron-LM's released hybrid context parallel (core_v0.16 to v0.19) \
             asserts it, and meshplan prices the groups without a pipeline",
            "set --pp 1 or drop --hybrid-cp",
        );
    }
    let pool = dp.saturating_mul(cp);
    if pool > crate::limits::HYBRID_CP_RANKS {
        collector.add(
            hybrid,
            format!("dp {dp} x cp {cp} = {pool}"),
            format!(
                "is more than the {} ranks meshplan places documents over",
                crate::limits::HYBRID_CP_RANKS
            ),
            "use static context parallelism (drop --hybrid-cp) at this scale",
        );
    } else if pool < 2 || !pool.is_power_of_two() {
        collector.add(
            hybrid,
            format!("dp {dp} x cp {cp} = {pool}"),
            "the dp x cp ranks must be a power of two of at least 2: documents run on aligned \
             power-of-two groups of them",
            "choose dp and cp whose product is 2, 4, 8, ...",
        );
    }
    if cp > 1 && cp_comm != CpComm::Ring {
        collector.add(
            "plan.cp_comm",
            cp_comm.name(),
            "per-document groups exchange keys and values over a ring (p2p)",
            "use --cp-comm ring with --hybrid-cp",
        );
    }
    if training.micro_batch != 1 {
        collector.add(
            hybrid,
            format!("micro_batch {}", training.micro_batch),
            "needs micro-batches of one sequence: the loader hands each rank whole documents, \
             not micro-batches, and a rank holds at most max_seqlen_per_rank tokens of one",
            "set --micro-batch 1 (and --max-seqlen-per-rank for the tokens a rank holds)",
        );
    }
    if balance_window > 0 {
        collector.add(
            hybrid,
            format!("balance_window {balance_window}"),
            "places documents on groups by its own scheduler, which re-packing would undo",
            "drop --balance-window or --hybrid-cp",
        );
    }
    if pool.saturating_mul(tokens) < training.seq_len {
        collector.add(
            field,
            tokens,
            format!(
                "dp x cp = {pool} ranks of {tokens} tokens hold less than a {}-token sequence",
                training.seq_len
            ),
            format!("give at least {} tokens", training.seq_len.div_ceil(pool.max(1))),
        );
    }
    Some(HybridCp { max_tokens_per_rank: tokens, scheduler })
}

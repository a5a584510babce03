//! How a candidate groups its documents beside its re-packing window (static or per-document
//! context-parallel groups, fixed or variable micro-batches), and the groupings a block tries.

use crate::plan::{HybridCpScheduler, PlanSpec};

/// How a candidate groups its documents beside its re-packing window: on static or
/// per-document (hybrid) context-parallel groups, in fixed or variable micro-batches. The
/// search pairs variable micro-batches with static CP only (they form batches of their own);
/// pins may ask for both, which validation then rejects, saying why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grouping {
    /// Per-document context-parallel groups and their scheduler (`None`: static CP).
    pub hybrid_cp: Option<HybridCpScheduler>,
    /// Whether documents are sorted into variable micro-batches.
    pub variable_micro_batches: bool,
}

impl Grouping {
    /// Whether documents come packed as a loader re-packs them across global batches: not on
    /// hybrid-CP groups or in variable micro-batches, which form batches of their own.
    pub fn re_packs(self) -> bool {
        self.hybrid_cp.is_none() && !self.variable_micro_batches
    }
}

/// Static CP in fixed micro-batches; per-document groups with each of `schedulers`
/// where a plan can have them (no pipeline, a power-of-two pool of `dp x cp` ranks of at least
/// 2); and variable micro-batches on static CP where `tries_variable`. A pin keeps its
/// choice alone.
pub(super) fn groupings(
    tries_variable: bool,
    schedulers: &[HybridCpScheduler],
    pp: u64,
    pool: u64,
    pins: &PlanSpec,
) -> Vec<Grouping> {
    let variable = match pins.variable_micro_batches {
        Some(pinned) => vec![pinned],
        None if tries_variable && pins.hybrid_cp != Some(true) => vec![false, true],
        None => vec![false],
    };
    hybrid_cps(schedulers, pp, pool, pins)
        .into_iter()
        .flat_map(|hybrid_cp| {
            variable.iter().filter_map(move |&variable_micro_batches| {
                // Variable micro-batches go with static CP unless both are pinned.
                (hybrid_cp.is_none() || !variable_micro_batches || pins.hybrid_cp == Some(true))
                    .then_some(Grouping { hybrid_cp, variable_micro_batches })
            })
        })
        .collect()
}

/// Static CP, and per-document groups with each of `schedulers` where a plan can
/// have them (no pipeline, a power-of-two pool of `dp x cp` ranks of at least 2); a pin keeps
/// its choice alone.
fn hybrid_cps(
    schedulers: &[HybridCpScheduler],
    pp: u64,
    pool: u64,
    pins: &PlanSpec,
) -> Vec<Option<HybridCpScheduler>> {
    let possible =
        pp == 1 && pool >= 2 && pool.is_power_of_two() && pool <= crate::limits::HYBRID_CP_RANKS;
    let hybrid = schedulers
        .iter()
        .copied()
        .filter(|&scheduler| pins.hybrid_cp_scheduler.is_none_or(|pinned| pinned == scheduler))
        .filter(|_| possible)
        .map(Some);
    match pins.hybrid_cp {
        Some(true) => hybrid.collect(),
        Some(false) => vec![None],
        None => std::iter::once(None).chain(hybrid).collect(),
    }
}

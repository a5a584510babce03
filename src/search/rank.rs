//! The top list: plans ranked by step time, then peak memory, then the candidate's fixed order;
//! plans whose step time and peak memory are the same figure (to [`DIGITS`] significant digits)
//! are one entry, the first plan standing for the others (its equivalents). Every plan of a
//! search steps through the same global batch of sequences, so step time ranks throughput, but
//! for the padding context parallelism puts after each document: a plan whose sequences are
//! padded trains fewer tokens a step, so its step time counts over the share of its tokens that
//! are documents' own ([`ranked_time`]; the step time itself without such padding).
//!
//! "The same figure" is equality of the rounded values, so it is an equivalence (two plans equal
//! to a third are equal to each other) and the ranking is a total order on whole entries. The
//! fast path prunes a candidate only when its bound, rounded, is above the last entry's rounded
//! step time: such a candidate can neither join an entry of the list nor rank before one.

use std::cmp::Ordering;

use super::{Candidate, RankedPlan};
use crate::Run;
use crate::units::Seconds;

/// Significant digits to which step times and peaks are compared: a relative 1e-9 or finer.
pub const DIGITS: usize = 10;

/// A plan with the same step time and peak memory as the entry it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Equivalent {
    /// The candidate.
    pub candidate: Candidate,
    /// The validated run with this plan.
    pub run: Run,
}

/// `value` rounded to [`DIGITS`] significant digits (decimal rounding is monotonic, so rounded
/// values keep the order of the values).
pub fn rounded(value: f64) -> f64 {
    format!("{value:.prec$e}", prec = DIGITS - 1).parse().unwrap_or(value)
}

/// A step time as the list ranks it: over `unpadded`, the share of the step's tokens that are
/// documents' own (`crate::Run::context_parallel_padding`), so that plans compare by the time
/// they take per token trained. Exactly the step time where nothing is padded (`unpadded` 1).
pub(super) fn ranked_time(step_time: Seconds, unpadded: f64) -> Seconds {
    if unpadded == 1.0 { step_time } else { step_time / unpadded.max(f64::MIN_POSITIVE) }
}

/// The rounded ranked step time and peak memory that decide a plan's place.
fn figures(plan: &RankedPlan) -> (f64, f64) {
    let step_time = plan.estimate.time.step_time();
    (
        rounded(ranked_time(step_time, plan.run.context_parallel_padding()).value()),
        rounded(plan.estimate.peak_memory.breakdown.total().value()),
    )
}

fn same(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0.total_cmp(&b.0).is_eq() && a.1.total_cmp(&b.1).is_eq()
}

/// Sorts plans by ranked step time ([`ranked_time`]), then peak memory, then candidate, and keeps
/// every plan of the first `top` entries (plans with the same figures form one entry). Returns
/// the rounded ranked step time of the `top`-th entry once there are that many: a plan whose
/// rounded ranked step time is above it cannot enter the list.
pub(super) fn keep_top(plans: &mut Vec<RankedPlan>, top: usize) -> Option<f64> {
    let mut keyed: Vec<((f64, f64), RankedPlan)> =
        plans.drain(..).map(|plan| (figures(&plan), plan)).collect();
    keyed.sort_by(|(a, pa), (b, pb)| {
        a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)).then(pa.candidate.cmp(&pb.candidate))
    });
    let mut entries = 0;
    let mut last: Option<(f64, f64)> = None;
    for (figures, plan) in keyed {
        if last.is_none_or(|last| !same(last, figures)) {
            if entries == top {
                break;
            }
            entries += 1;
            last = Some(figures);
        }
        plans.push(plan);
    }
    last.filter(|_| entries == top).map(|(step, _)| step)
}

/// Whether a candidate whose ranked step time is at least `bound` can still enter a list whose
/// last entry's rounded ranked step time is `bar`: only a strictly larger rounded bound rules it
/// out.
pub(super) fn may_enter(bound: Seconds, bar: Option<f64>) -> bool {
    let Some(bar) = bar else { return true };
    let bound = bound.value();
    // Without formatting where the answer is sure: `bar` is a rounded value, which rounding leaves
    // as it is, so a bound at or below it rounds to at most it (rounding is monotonic); a bound
    // above it by more than one step of the last digit rounds above it.
    if bound <= bar {
        return true;
    }
    if bound > bar * (1.0 + 10f64.powi(1 - DIGITS as i32)) {
        return false;
    }
    rounded(bound) <= bar
}

/// Plans sorted by [`keep_top`] as entries: each first plan of equal figures, carrying the rest as
/// its equivalents.
pub(super) fn entries(plans: Vec<RankedPlan>) -> Vec<RankedPlan> {
    let mut out: Vec<RankedPlan> = Vec::new();
    for plan in plans {
        match out.last_mut() {
            Some(entry) if same(figures(entry), figures(&plan)) => {
                entry.equivalents.push(Equivalent { candidate: plan.candidate, run: plan.run });
            }
            _ => out.push(plan),
        }
    }
    out
}

impl RankedPlan {
    /// The plan as the top list names it: `tp8 pp4 vp5 cp1 dp2 mbs1 interleaved zero1 full20`.
    pub fn label(&self) -> String {
        let plan = self.run.plan();
        format!(
            "{} mbs{} {} {}",
            plan.label(),
            self.run.training().micro_batch(),
            plan.schedule().name(),
            plan.memory_label()
        )
    }

    /// Each equivalent plan as the flags that turn this plan into it (`--cp-comm hierarchical`).
    pub fn equivalent_flags(&self) -> Vec<Vec<String>> {
        self.equivalents
            .iter()
            .map(|other| crate::plan_diff::flags_between(&self.run, &other.run))
            .collect()
    }
}

/// The order of two entries (used to check that lists are sorted).
pub fn order(a: &RankedPlan, b: &RankedPlan) -> Ordering {
    let (fa, fb) = (figures(a), figures(b));
    fa.0.total_cmp(&fb.0).then(fa.1.total_cmp(&fb.1)).then(a.candidate.cmp(&b.candidate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CpComm, PipelineSchedule, PipelineSplit, PlanSpec};
    use crate::search::{RecomputeChoice, ShardingChoice};

    /// A plan whose estimate is the one of a real run, with the candidate's exchange `cp_comm`.
    fn plan(cp_comm: CpComm, extra_gib: f64) -> RankedPlan {
        let pins =
            PlanSpec { tp: Some(8), cp: Some(2), cp_comm: Some(cp_comm), ..PlanSpec::default() };
        let spec = crate::run::test_spec("llama3.1-8b", 16, 4096, 32, 1, pins);
        let run = Run::from_spec(&spec).unwrap();
        let mut estimate = crate::estimate::closed_form(&run);
        estimate.peak_memory.breakdown.buffers +=
            crate::units::Bytes::new(extra_gib * 1073741824.0);
        let candidate = Candidate {
            tp: 8,
            cp: 2,
            pp: 1,
            vp: 1,
            schedule: PipelineSchedule::OneFOneB,
            split: PipelineSplit::Even,
            sharding: ShardingChoice::Zero1,
            recompute: RecomputeChoice::None,
            micro_batch: 1,
            cp_comm,
            ep: 1,
            etp: 1,
            balance_window: 0,
            hybrid_cp: None,
            variable_micro_batches: false,
        };
        RankedPlan { candidate, run, estimate, closed_form: Seconds::new(1.0), equivalents: vec![] }
    }

    #[test]
    fn plans_with_the_same_time_and_memory_are_one_entry() {
        // The same figures (to a relative 1e-12) but a later candidate: listed under the first.
        let ring = plan(CpComm::Ring, 0.0);
        let mut hierarchical = plan(CpComm::Hierarchical, 0.0);
        hierarchical.estimate = ring.estimate.clone();
        hierarchical.estimate.time.forward = ring.estimate.time.forward * (1.0 + 1e-13);
        let mut plans = vec![hierarchical, ring.clone()];
        assert_eq!(keep_top(&mut plans, 1), Some(rounded(ring.estimate.time.step_time().value())));
        let entries = entries(plans);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].candidate.cp_comm, CpComm::Ring);
        assert_eq!(entries[0].equivalents.len(), 1);
        assert_eq!(entries[0].equivalent_flags(), [["--cp-comm hierarchical"]]);
    }

    #[test]
    fn ties_in_step_time_are_broken_by_memory_and_each_is_an_entry() {
        // The later candidate needs less memory: it ranks first, and the two are two entries.
        let ring = plan(CpComm::Ring, 1.0);
        let mut all_to_all = plan(CpComm::AllToAll, 0.0);
        all_to_all.estimate.time = ring.estimate.time;
        let mut plans = vec![ring.clone(), all_to_all.clone()];
        assert_eq!(keep_top(&mut plans, 5), None, "fewer entries than the top asked for");
        let entries = entries(plans);
        let order: Vec<CpComm> = entries.iter().map(|e| e.candidate.cp_comm).collect();
        assert_eq!(order, [CpComm::AllToAll, CpComm::Ring]);
        assert!(entries.iter().all(|e| e.equivalents.is_empty()));
        assert_eq!(order_of(&entries), std::cmp::Ordering::Less);
        // With a top of one only the first entry is kept, and the bar is its step time.
        let mut plans = vec![ring, all_to_all];
        assert!(keep_top(&mut plans, 1).is_some());
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].candidate.cp_comm, CpComm::AllToAll);
    }

    #[test]
    fn a_plan_that_pads_its_documents_ranks_by_its_time_per_token_trained() {
        // Documents of 101 tokens on 2 context-parallel ranks are padded to 104: the plan
        // trains 101 / 104 of its tokens, so a step 1 % shorter than a plan without padding
        // still ranks after it (3 % fewer tokens trained).
        let plain = plan(CpComm::Ring, 0.0);
        let pins = PlanSpec { tp: Some(8), cp: Some(2), ..PlanSpec::default() };
        let mut spec = crate::run::test_spec("llama3.1-8b", 16, 4096, 32, 1, pins);
        spec.data = Some(crate::data::DataSpec {
            lengths: Some(vec![101]),
            ..crate::data::DataSpec::default()
        });
        let mut padded = plan(CpComm::AllToAll, 0.0);
        padded.run = Run::from_spec(&spec).unwrap();
        assert_eq!(padded.run.context_parallel_padding(), 101.0 / 104.0);
        padded.estimate = plain.estimate.clone();
        padded.estimate.time.forward = plain.estimate.time.forward * 0.99;
        assert!(padded.estimate.time.step_time() < plain.estimate.time.step_time());
        let mut plans = vec![padded.clone(), plain.clone()];
        let bar = keep_top(&mut plans, 2).unwrap();
        let order: Vec<CpComm> = plans.iter().map(|p| p.candidate.cp_comm).collect();
        assert_eq!(order, [CpComm::Ring, CpComm::AllToAll]);
        let ranked = ranked_time(padded.estimate.time.step_time(), 101.0 / 104.0);
        assert_eq!(bar, rounded(ranked.value()));
        // Without padding the shorter step ranks first.
        padded.run = plain.run.clone();
        let mut plans = vec![plain, padded];
        keep_top(&mut plans, 2);
        assert_eq!(plans[0].candidate.cp_comm, CpComm::AllToAll);
    }

    fn order_of(entries: &[RankedPlan]) -> std::cmp::Ordering {
        order(&entries[0], &entries[1])
    }

    #[test]
    fn a_bound_may_enter_up_to_the_rounded_bar() {
        let bar = Some(rounded(2.0));
        assert!(may_enter(Seconds::new(2.0 * (1.0 + 1e-13)), bar));
        assert!(may_enter(Seconds::new(1.5), bar));
        assert!(!may_enter(Seconds::new(2.0 * (1.0 + 1e-8)), bar));
        assert!(may_enter(Seconds::new(1e9), None));
    }

    #[test]
    fn the_shortcuts_of_may_enter_agree_with_rounding_the_bound() {
        // Bars over many magnitudes; bounds below, at and above each by steps around the last
        // rounded digit, where the shortcuts hand over to rounding.
        let mut value = 1.234_567_890_123e-3;
        for _ in 0..40 {
            let bar = rounded(value);
            for step in -40..=40 {
                for scale in [1e-12, 1e-11, 1e-10, 3e-10, 1e-9, 1e-8] {
                    let bound = bar * (1.0 + f64::from(step) * scale);
                    let by_rounding = rounded(bound) <= bar;
                    assert_eq!(
                        may_enter(Seconds::new(bound), Some(bar)),
                        by_rounding,
                        "{bound} {bar}"
                    );
                }
            }
            value *= 2.9;
        }
        assert!(!may_enter(Seconds::new(f64::INFINITY), Some(1.0)));
    }
}

//! Pricing the whole space: every candidate validated, checked against the target engine and
//! priced with the closed form, in parallel over the rows of the space's blocks (one layout and
//! sharding of one tp x cp x pp), with op tables built once per table key and model states checked
//! once per layout, both found by index rather than looked up per candidate.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::place::Place;
use super::rejection::{MemoryCheck, OverMemory, Rejection, RejectionKind, Rejections};
use super::space::{Block, Candidate, RecomputeChoice};
use super::{SearchSpec, Template, candidate_run, fits_in, over_memory};
use crate::cost::priced::{PricedRun, SharedPricing};
use crate::cost::step::{step_time_from, step_time_with_imbalance};
use crate::cost::work::Tables;
use crate::export::check;
use crate::plan::PipelineSchedule;
use crate::run::Run;
use crate::sim::lower_bound_from;
use crate::units::{Bytes, Seconds};

/// A candidate that passed every check of the closed form.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kept {
    pub(super) place: Place,
    pub(super) closed_form: Seconds,
    pub(super) bound: Seconds,
    pub(super) peak: Bytes,
    /// The share of its sequences' tokens that are documents' own
    /// ([`Run::context_parallel_padding`]): 1 but where context parallelism pads documents.
    pub(super) unpadded: f64,
}

impl Kept {
    /// The closed form as the top list ranks plans ([`super::rank::ranked_time`]).
    pub(super) fn ranked_closed_form(&self) -> Seconds {
        super::rank::ranked_time(self.closed_form, self.unpadded)
    }
    /// The simulation's lower bound, likewise.
    pub(super) fn ranked_bound(&self) -> Seconds {
        super::rank::ranked_time(self.bound, self.unpadded)
    }
}

enum Priced {
    /// Rejected: its kind, and the rejection itself when asked to explain.
    Rejected(RejectionKind, Option<Box<Rejection>>),
    /// Kept, with its closed-form step time, lower bound and peak memory, and the closed form,
    /// bound and peak of each re-packing window asked for (the same plan but for its data's
    /// balance and its micro-batches' tokens), `None` where that window's micro-batches do not fit;
    /// last, the share of its tokens that are documents' own (the same for every window).
    Kept(Seconds, Seconds, Bytes, Vec<Option<(Seconds, Seconds, Bytes)>>, f64),
}

/// What candidates priced together share: the slot of their op tables (built from the first
/// candidate's run) and the pricing that depends on neither sharding nor schedule.
#[derive(Clone, Copy)]
struct Shared<'a> {
    tables: &'a OnceLock<Tables>,
    pricing: &'a SharedPricing,
}

/// Prices one candidate, with what it shares with others (filled from this candidate's run where
/// empty) or on its own, and the same plan re-packing its documents over each of `windows`
/// global batches: re-packing changes neither the rules a plan passes, nor what its engine runs
/// (the space tries only windows the engine's loader has), only its data's balance and the
/// tokens its micro-batches carry (so its memory). A rejection's reason is written only when `explain` asks for it: a search rejects
/// millions of candidates and shows one example per reason.
fn price(
    spec: &SearchSpec,
    template: &Template,
    candidate: Candidate,
    shared: Option<Shared>,
    explain: bool,
    windows: &[u64],
) -> Priced {
    match candidate_run(spec, template, &candidate) {
        Ok(run) => price_run(spec, &run, shared, explain, windows),
        Err(violations) => {
            let first = violations.list().first().filter(|_| explain);
            let example = first.map(|v| Box::new(Rejection::BreaksARule(v.clone())));
            Priced::Rejected(RejectionKind::BreaksARule, example)
        }
    }
}

/// [`price`] of a candidate whose run passed validation.
fn price_run(
    spec: &SearchSpec,
    run: &Run,
    shared: Option<Shared>,
    explain: bool,
    windows: &[u64],
) -> Priced {
    if let Some(engine) = spec.engine
        && let Err(unsupported) = check(engine, run)
    {
        let example = explain.then(|| Box::new(Rejection::UnsupportedByEngine(unsupported)));
        return Priced::Rejected(RejectionKind::UnsupportedByEngine, example);
    }
    // One set of op tables and one priced run give the memory, the closed form and the
    // simulation's lower bound.
    let own;
    let tables = match shared {
        Some(shared) => shared.tables.get_or_init(|| Tables::new(run)),
        None => {
            own = Tables::new(run);
            &own
        }
    };
    let priced = priced_with(run, tables, shared);
    // Memory first: a candidate that does not fit needs no step time.
    let peak = priced.fit_need_with_window(run.plan().balance_window());
    let capacity = run.cluster().gpu().memory();
    if !fits_in(peak, capacity, spec.memory_headroom) {
        let example =
            explain.then(|| Box::new(over_memory(spec, run, peak, MemoryCheck::ClosedForm)));
        return Priced::Rejected(RejectionKind::DoesNotFit, example);
    }
    // Offloaded activations must fit in the host memory each GPU of the server has.
    let host = run.cluster().interconnect().host_memory_per_gpu();
    if let Some(host) = host {
        let offloaded = priced.host_offload_need();
        if offloaded > host {
            let example = explain.then(|| {
                Box::new(Rejection::DoesNotFit(OverMemory {
                    plan: run.plan().label(),
                    needed: offloaded,
                    available: host,
                    check: MemoryCheck::HostMemory,
                }))
            });
            return Priced::Rejected(RejectionKind::DoesNotFit, example);
        }
    }
    let breakdown = step_time_from(&priced);
    // The simulation's lower bound leaves the data's imbalance out, and the simulation adds it
    // to its pipeline as the closed form prices it (`crate::sim::simulate_from`): with the closed
    // form's term the bound is still one, and a tight one where the imbalance is much of the
    // step (variable micro-batches).
    let floor = lower_bound_from(&priced);
    let bound = floor + breakdown.data_imbalance;
    // A variant prices its data's balance and its micro-batches' tokens only: its memory holds
    // the re-packed micro-batches, its closed form is the base's with the imbalance priced
    // again, and its bound the base's without the data's imbalance, with its own.
    let variants = priced
        .windows(windows)
        .iter()
        .map(|priced_window| {
            let peak = priced.fit_need_with(priced_window);
            #[cfg(debug_assertions)]
            let window = priced_window.window;
            #[cfg(debug_assertions)]
            let variant = run.with_balance_window(window);
            #[cfg(debug_assertions)]
            let on_its_own = PricedRun::with_tables(&variant, tables);
            #[cfg(debug_assertions)]
            debug_assert_eq!(
                on_its_own
                    .stage_memory()
                    .iter()
                    .map(|s| s.breakdown.fit_need())
                    .fold(Bytes::ZERO, Bytes::max),
                peak,
                "window {window}"
            );
            if !fits_in(peak, capacity, spec.memory_headroom) {
                return None;
            }
            // Its re-packed micro-batches offload their own activations.
            if let Some(host) = host {
                let offloaded = priced.host_offload_need_with(priced_window);
                #[cfg(debug_assertions)]
                debug_assert_eq!(on_its_own.host_offload_need(), offloaded, "window {window}");
                if offloaded > host {
                    return None;
                }
            }
            let closed_form = step_time_with_imbalance(&breakdown, priced_window.imbalance);
            #[cfg(debug_assertions)]
            {
                debug_assert_eq!(closed_form, step_time_from(&on_its_own), "window {window}");
                debug_assert_eq!(lower_bound_from(&on_its_own), floor, "window {window}");
            }
            Some((closed_form.step_time(), floor + closed_form.data_imbalance, peak))
        })
        .collect();
    Priced::Kept(breakdown.step_time(), bound, peak, variants, run.context_parallel_padding())
}

/// A run priced from its op tables, with what it shares with others if any.
fn priced_with<'a>(run: &'a Run, tables: &'a Tables, shared: Option<Shared<'a>>) -> PricedRun<'a> {
    match shared {
        Some(shared) => PricedRun::with_shared(run, tables, shared.pricing),
        None => PricedRun::with_tables(run, tables),
    }
}

/// What a candidate's op tables depend on besides the search's base run: the per-layer work of
/// one micro-batch is the same whatever the pipeline layout, sharding and recompute, so
/// candidates that differ only in those share one set of tables.
pub(super) type TableKey = (u64, u64, u64, crate::plan::CpComm, u64, u64, bool);

pub(super) fn table_key(c: &Candidate) -> TableKey {
    (c.tp, c.cp, c.micro_batch, c.cp_comm, c.ep, c.etp, c.variable_micro_batches)
}

/// The model-states verdicts of one block: what fixes a candidate's model states (weights,
/// gradients, optimizer states, FSDP buffers) is its layout but for the schedule, its sharding
/// and its expert layout, so each is checked once, on the first candidate that has it.
struct LayoutStates {
    /// For each layout, the first layout with its vp and split.
    first_layout: Vec<usize>,
    /// By (first layout, sharding, expert layout): why model states alone overflow the GPU
    /// (`None` when they fit, or the representative does not build).
    verdicts: Vec<Option<Rejection>>,
}

impl LayoutStates {
    fn index(block: &Block, first_layout: usize, sharding: usize, expert: usize) -> usize {
        (first_layout * block.shardings.len() + sharding) * block.experts.len() + expert
    }

    /// The verdict of the candidate at (layout, sharding, inner combination).
    fn verdict(
        &self,
        block: &Block,
        layout: usize,
        sharding: usize,
        inner: usize,
    ) -> &Option<Rejection> {
        let expert = inner % block.experts.len();
        &self.verdicts[Self::index(block, self.first_layout[layout], sharding, expert)]
    }
}

/// Every block's model-states verdicts: model states are a lower bound of the peak, so every
/// candidate of a layout that overflows is rejected without being priced, with the same count and
/// reason kind pricing would give. The representative is the layout's first candidate in the
/// space's order (first recompute, micro-batch and exchange).
fn layout_states(spec: &SearchSpec, template: &Template, blocks: &[Block]) -> Vec<LayoutStates> {
    let mut jobs = Vec::new();
    let mut states: Vec<LayoutStates> = blocks
        .iter()
        .enumerate()
        .map(|(b, block)| {
            let first_layout: Vec<usize> = (0..block.layouts.len())
                .map(|l| {
                    let (vp, split, _) = block.layouts[l];
                    (0..l)
                        .find(|&f| block.layouts[f].0 == vp && block.layouts[f].1 == split)
                        .unwrap_or(l)
                })
                .collect();
            let size = block.layouts.len() * block.shardings.len() * block.experts.len();
            for (l, &first) in first_layout.iter().enumerate() {
                if first != l || block.recomputes[l].is_empty() || block.inner_len() == 0 {
                    continue;
                }
                for s in 0..block.shardings.len() {
                    for e in 0..block.experts.len() {
                        // Inner combination `e` is the first micro-batch and exchange with expert layout `e`.
                        jobs.push((
                            b,
                            LayoutStates::index(block, l, s, e),
                            block.candidate(l, s, 0, e),
                        ));
                    }
                }
            }
            LayoutStates { first_layout, verdicts: vec![None; size] }
        })
        .collect();
    let verdicts: Vec<Option<Rejection>> = jobs
        .par_iter()
        .map(|(_, _, candidate)| {
            let run = candidate_run(spec, template, candidate).ok()?;
            let states = crate::cost::memory::model_states_peak(&run);
            let capacity = run.cluster().gpu().memory();
            (!fits_in(states, capacity, spec.memory_headroom))
                .then(|| over_memory(spec, &run, states, MemoryCheck::ModelStates))
        })
        .collect();
    for ((b, index, _), verdict) in jobs.into_iter().zip(verdicts) {
        states[b].verdicts[index] = verdict;
    }
    states
}

/// One slot of op tables per table key of the space, and for each block the slot of each of its
/// inner combinations (tables depend on tp, cp and the inner combination only).
fn table_slots(blocks: &[Block]) -> (Vec<Vec<usize>>, Vec<OnceLock<Tables>>) {
    let mut keys: BTreeMap<TableKey, usize> = BTreeMap::new();
    let slots = blocks
        .iter()
        .map(|block| {
            (0..block.inner_len())
                .map(|inner| {
                    let (micro_batch, exchange, (ep, etp)) = block.inner(inner);
                    let variable = block.grouping(inner).variable_micro_batches;
                    let key = (block.tp, block.cp, micro_batch, exchange, ep, etp, variable);
                    let next = keys.len();
                    *keys.entry(key).or_insert(next)
                })
                .collect()
        })
        .collect();
    (slots, (0..keys.len()).map(|_| OnceLock::new()).collect())
}

const KINDS: [RejectionKind; 4] = [
    RejectionKind::BreaksARule,
    RejectionKind::DoesNotFit,
    RejectionKind::UnsupportedByEngine,
    RejectionKind::OffloadNotNeeded,
];

/// What pricing one group of candidates found: its kept candidates, and per rejection kind (in
/// the order of `KINDS`) the count and the first place rejected so.
#[derive(Default)]
struct Tally {
    kept: Vec<Kept>,
    rejected: [Option<(usize, Place)>; 4],
}

impl Tally {
    fn reject(&mut self, kind: RejectionKind, place: Place) {
        let slot = &mut self.rejected[KINDS.iter().position(|k| *k == kind).unwrap_or(0)];
        match slot {
            Some((count, first)) => {
                *count += 1;
                *first = (*first).min(place);
            }
            None => *slot = Some((1, place)),
        }
    }
}

/// The candidates of one block whose layouts share a vp and split (they differ in schedule):
/// every sharding of those layouts, by recompute choice and inner combination, so that the
/// candidates that differ only in sharding and schedule are priced one after the other and share
/// what does not depend on those. Each candidate comes once, with its place.
fn group_places(block: &Block, b: usize, members: &[usize]) -> Vec<Vec<Place>> {
    let mut choices: Vec<RecomputeChoice> = Vec::new();
    for &layout in members {
        for &choice in &block.recomputes[layout] {
            if !choices.contains(&choice) {
                choices.push(choice);
            }
        }
    }
    let mut groups = Vec::new();
    // The first re-packing window's combinations (the others are priced with them), the
    // groupings of one combination one after the other: a group of another grouping than the
    // first follows that one's group, member for member, and derives its runs from it.
    let groupings = block.groupings.len();
    let below = block.per_grouping();
    for rest in 0..below {
        for &choice in &choices {
            // DualPipe resolves its own expert overlap, which the shared work depends on.
            for (dualpipe, grouping) in
                [false, true].into_iter().flat_map(|d| (0..groupings).map(move |g| (d, g)))
            {
                let inner = grouping * below + rest;
                let mut group = Vec::new();
                for &layout in members {
                    if (block.layouts[layout].2 == PipelineSchedule::Dualpipe) != dualpipe {
                        continue;
                    }
                    let Some(recompute) =
                        block.recomputes[layout].iter().position(|c| *c == choice)
                    else {
                        continue;
                    };
                    for sharding in 0..block.shardings.len() {
                        group.push(Place::new(b, layout, sharding, recompute, inner));
                    }
                }
                if !group.is_empty() {
                    groups.push(group);
                }
            }
        }
    }
    groups
}

/// Prices every candidate of `blocks` in parallel, calling `progress(done, total)` as it goes,
/// and returns the kept ones (job by job, each job's list in a fixed order: not gathered into one
/// list, which would hold them twice at once) and the rejections (counted over the whole
/// space, each kind's example its first candidate in the space's order). With `share` the
/// candidates of one table key share one set of op tables, and those that differ only in
/// sharding and schedule share their priced segments; without, each prices everything itself
/// (the reference the sharing is tested against).
pub(super) fn price_all(
    spec: &SearchSpec,
    template: &Template,
    blocks: &[Block],
    share: bool,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> (Vec<Vec<Kept>>, Rejections) {
    let total: usize = blocks.iter().map(Block::len).sum();
    let states = layout_states(spec, template, blocks);
    let (slots, tables) = table_slots(blocks);
    // One job per block and (vp, split): its layouts, all schedules.
    let jobs: Vec<(usize, Vec<usize>)> = blocks
        .iter()
        .enumerate()
        .flat_map(|(b, block)| {
            let first = &states[b].first_layout;
            (0..block.layouts.len())
                .filter(|&l| first[l] == l)
                .map(|l| (b, (0..block.layouts.len()).filter(|&m| first[m] == l).collect()))
                .collect::<Vec<_>>()
        })
        .collect();
    let done = AtomicUsize::new(0);
    let tallies: Vec<Tally> = jobs
        .par_iter()
        .map(|(b, members)| {
            let block = &blocks[*b];
            let windows = block.balance_windows.len().max(1);
            let mut tally = Tally::default();
            let mut count = 0;
            // The (layout, sharding, inner combination) whose plan without recompute fits: its
            // offload choices, priced after it, are not needed.
            let offloads =
                members.iter().any(|&l| block.recomputes[l].iter().any(|c| c.offloads()));
            let slot = |layout: usize, sharding: usize, inner: usize| {
                (layout * block.shardings.len() + sharding) * block.per_window() + inner
            };
            let places = if offloads { slot(block.layouts.len(), 0, 0) } else { 0 };
            let mut fits_plainly = vec![false; places];
            // The runs of the last group of the first grouping (`None`: not built, or it breaks
            // a rule), for the groups of the other groupings that follow it to derive theirs
            // from (`Run::with_grouping`), member for member.
            let mut firsts: Vec<Option<(Place, Option<Run>)>> = Vec::new();
            let derives = share && block.groupings.len() > 1;
            for group in group_places(block, *b, members) {
                let pricing = SharedPricing::new();
                let first_grouping =
                    group.first().is_none_or(|p| block.first_grouping(p.inner()) == p.inner());
                if derives && first_grouping {
                    firsts.clear();
                    firsts.resize(group.len(), None);
                }
                for (member, place) in group.into_iter().enumerate() {
                    count += 1;
                    let (layout, sharding, inner) =
                        (place.layout(), place.sharding(), place.inner());
                    let choice = block.recomputes[layout][place.recompute()];
                    // The same candidate re-packing over each further window.
                    let variant = |w: usize| {
                        let inner = inner + w * block.per_window();
                        Place::new(*b, layout, sharding, place.recompute(), inner)
                    };
                    // Hybrid CP places documents by its own scheduler and variable micro-batches
                    // sort them: the space has no window variants of those.
                    let re_packs = block.grouping(inner).re_packs();
                    let windows = if re_packs { windows } else { 1 };
                    if choice.offloads()
                        && fits_plainly.get(slot(layout, sharding, inner)) == Some(&true)
                    {
                        count += windows - 1;
                        for w in 0..windows {
                            tally.reject(RejectionKind::OffloadNotNeeded, variant(w));
                        }
                        continue;
                    }
                    let candidate = place.candidate(blocks);
                    let priced_windows =
                        if re_packs { &block.balance_windows[1..] } else { &[][..] };
                    let priced = if states[*b].verdict(block, layout, sharding, inner).is_some() {
                        Priced::Rejected(RejectionKind::DoesNotFit, None)
                    } else {
                        let shared = share.then(|| Shared {
                            tables: &tables[slots[*b][inner]],
                            pricing: &pricing,
                        });
                        // Another grouping of a candidate priced just before derives its run
                        // from that one's; the reference validates every candidate itself.
                        let derived = if derives && !first_grouping {
                            firsts.get(member).and_then(Option::as_ref).map(|(first, run)| {
                                debug_assert_eq!(
                                    (first.layout(), first.sharding(), first.recompute()),
                                    (layout, sharding, place.recompute())
                                );
                                debug_assert_eq!(first.inner(), block.first_grouping(inner));
                                run
                            })
                        } else {
                            None
                        };
                        let run = match derived {
                            Some(Some(run)) => {
                                run.with_grouping(&candidate.grouping_spec(&template.plan)).ok()
                            }
                            Some(None) => None,
                            None => candidate_run(spec, template, &candidate).ok(),
                        };
                        let priced = match &run {
                            Some(run) => price_run(spec, run, shared, false, priced_windows),
                            None => Priced::Rejected(RejectionKind::BreaksARule, None),
                        };
                        if derives
                            && first_grouping
                            && let Some(first) = firsts.get_mut(member)
                        {
                            *first = Some((place, run));
                        }
                        priced
                    };
                    if choice == RecomputeChoice::None
                        && matches!(priced, Priced::Kept(..))
                        && let Some(fits) = fits_plainly.get_mut(slot(layout, sharding, inner))
                    {
                        *fits = true;
                    }
                    count += windows - 1;
                    match priced {
                        Priced::Rejected(kind, _) => {
                            // The base and the variants priced with it share its verdict.
                            for w in 0..=priced_windows.len() {
                                tally.reject(kind, if w == 0 { place } else { variant(w) });
                            }
                        }
                        Priced::Kept(closed_form, bound, peak, variants, unpadded) => {
                            tally.kept.push(Kept { place, closed_form, bound, peak, unpadded });
                            for (w, priced) in variants.into_iter().enumerate() {
                                let place = variant(w + 1);
                                match priced {
                                    Some((closed_form, bound, peak)) => tally.kept.push(Kept {
                                        place,
                                        closed_form,
                                        bound,
                                        peak,
                                        unpadded,
                                    }),
                                    None => tally.reject(RejectionKind::DoesNotFit, place),
                                }
                            }
                        }
                    }
                }
            }
            let before = done.fetch_add(count, Ordering::Relaxed);
            let after = before + count;
            if after / 1024 != before / 1024 || after == total {
                progress(after, total);
            }
            // A job's list grew by doubling: give back the slack, up to half of what millions
            // of kept candidates take.
            tally.kept.shrink_to_fit();
            tally
        })
        .collect();
    // The first rejection of each kind is explained: the model-states verdict of its layout, or
    // the candidate priced again with its reason written.
    let explain = |kind: RejectionKind, place: Place| -> Rejection {
        let (b, block) = (place.block(), &blocks[place.block()]);
        if kind == RejectionKind::OffloadNotNeeded {
            let candidate = place.candidate(blocks);
            let label = candidate_run(spec, template, &candidate).map_or_else(
                |_| format!("{candidate:?}"),
                |run| format!("{} {}", run.plan().label(), run.plan().memory_label()),
            );
            return Rejection::OffloadNotNeeded(label);
        }
        if kind == RejectionKind::DoesNotFit
            && let Some(reason) =
                states[b].verdict(block, place.layout(), place.sharding(), place.inner())
        {
            return reason.clone();
        }
        match price(spec, template, place.candidate(blocks), None, true, &[]) {
            Priced::Rejected(_, Some(example)) => *example,
            _ => unreachable!("pricing a candidate twice gives the same verdict, explained"),
        }
    };
    let mut first: [Option<(usize, Place)>; 4] = [None; 4];
    let mut kept = Vec::with_capacity(tallies.len());
    for tally in tallies {
        for (entry, found) in first.iter_mut().zip(tally.rejected) {
            *entry = match (*entry, found) {
                (Some((a, x)), Some((b, y))) => Some((a + b, x.min(y))),
                (entry, None) => entry,
                (None, found) => found,
            };
        }
        kept.push(tally.kept);
    }
    let mut rejections = Rejections::default();
    for (kind, entry) in KINDS.into_iter().zip(first) {
        if let Some((count, place)) = entry {
            rejections.add_many(kind, count, || explain(kind, place));
        }
    }
    (kept, rejections)
}

//! The plan search: the best plans for a model, cluster, batch and precision over the whole space
//! of `space.rs`, with every rejected candidate counted by reason.
//!
//! A target engine that refuses the model itself (layer kinds it does not build, or a flag of the
//! model's structure its release lacks) refuses every candidate alike: that is read once and the
//! space is counted as rejected for it, with nothing priced.
//!
//! Fast path: every candidate is validated and priced with the closed form in parallel (rayon);
//! candidates that do not divide, do not fit (closed-form peak memory over capacity minus the
//! headroom) or that the target engine cannot run are rejected. The best closed forms are
//! simulated a batch at a time until they set a bar (the current `top`-th entry); then only the
//! candidates whose lower bound ([`crate::sim::lower_bound`]: each rank's work back to back
//! between the pipeline's fill and drain, and its data-parallel stream) beats the bar are
//! simulated, in order of their closed-form time, each batch against the bar the batches before it
//! left. Simulated plans whose simulated peak memory does not fit are rejected too. The ranking (`rank.rs`) is by simulated
//! step time, then peak memory, then the candidate's fixed order, so the result does not depend on
//! thread timing; plans with the same step time and peak are one entry with their equivalents.
//! [`brute_force`] simulates every priced candidate without the bound: tests check that both
//! agree.

pub mod fit;
mod grouping;
mod place;
mod point;
mod pricing;
pub mod rank;
mod rejection;
pub mod space;

use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use rayon::prelude::*;

use crate::cost::priced::PricedRun;
use crate::cost::work::Tables;
use crate::data::Batching;
use crate::estimate::{Estimate, estimate_simulated_from};
use crate::export::Engine;
use crate::hardware::Cluster;
use crate::model::Model;
use crate::plan::{CpComm, HybridCpScheduler, PlanSpec, RecomputeKind};
use crate::presets;
use crate::run::{Run, RunParts, RunSpec, validate_training};
use crate::sim::{SimError, SimOptions};
use crate::stack::Stack;
use crate::units::Bytes;
use crate::units::Seconds;
use crate::violation::{Collector, Violation, Violations};

pub use point::PricedPoint;
pub use rank::Equivalent;
pub use rejection::{MemoryCheck, OverMemory, Rejection, RejectionKind, Rejections};
pub use space::{Block, Candidate, Constraints, RecomputeChoice, Shape, ShardingChoice};

use place::Place;
use pricing::{Kept, TableKey, price_all, table_key};

/// Candidates simulated together against one bar. Fixed (not the thread count) so that the
/// report, pruning counts included, is the same on every machine.
const SIMULATION_BATCH: usize = 16;

/// Rounds of the best closed forms (one batch, then twice as many each round) simulated at most
/// before the rest of the space is filtered by the bar they set: each round is a pass over every
/// priced candidate, and a space whose best closed forms keep failing to fit in simulation goes
/// on with every candidate in order.
const OPENING_ROUNDS: u32 = 12;

/// What to search for.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpec {
    /// Model, cluster and training setup; every option its plan sets is pinned: explored options
    /// to that one value, the others (overlaps, the MoE workload) carried into every candidate.
    pub base: RunSpec,
    /// Limits on the space.
    pub constraints: Constraints,
    /// Fraction of GPU memory to keep free (0.1 keeps 10%).
    pub memory_headroom: f64,
    /// Only plans this engine can run (`None`: any engine, for comparing schedules no one
    /// engine runs). The plans found name it as their engine.
    pub engine: Option<Engine>,
    /// How many plans to return.
    pub top: usize,
}

/// One ranked plan.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedPlan {
    /// The candidate.
    pub candidate: Candidate,
    /// The validated run with this plan.
    pub run: Run,
    /// Its simulated estimate.
    pub estimate: Estimate,
    /// Closed-form step time.
    pub closed_form: Seconds,
    /// Plans with the same step time and peak memory, listed as this one entry, in candidate
    /// order.
    pub equivalents: Vec<Equivalent>,
}

impl RankedPlan {
    /// The largest part of the step besides compute.
    pub fn dominant_overhead(&self) -> &'static str {
        let parts = self.estimate.time.parts();
        parts[2..]
            .iter()
            .max_by(|a, b| a.1.value().total_cmp(&b.1.value()))
            .map_or("none", |(name, _)| name)
    }
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchReport {
    /// Candidates in the space.
    pub considered: usize,
    /// Rejected candidates.
    pub rejections: Rejections,
    /// Candidates priced by the closed form that passed every check.
    pub priced: usize,
    /// Candidates simulated.
    pub simulated: usize,
    /// Candidates skipped because their lower bound could not beat the best plans found.
    pub pruned: usize,
    /// The best plans, best first.
    pub plans: Vec<RankedPlan>,
    /// Every priced candidate that fits, in the space's order (see [`SearchReport::candidate`]).
    pub points: Vec<PricedPoint>,
    /// The space the points are places of.
    blocks: Vec<Block>,
}

impl SearchReport {
    /// The target engine's refusal of the model itself or of its data, as the sentence the text
    /// and the HTML report lead with, when it left the search nothing to price: every candidate
    /// that passed the plan rules was refused for the model's layer kinds
    /// ([`crate::export::Refusal::concerns_model`]) or the data's batching
    /// ([`crate::export::Refusal::concerns_data`]).
    pub fn model_refused(&self) -> Option<String> {
        if self.priced > 0 || !self.plans.is_empty() {
            return None;
        }
        match self.rejections.counts.get(&RejectionKind::UnsupportedByEngine) {
            Some((_, Rejection::UnsupportedByEngine(unsupported))) => {
                let first = *unsupported.refusals.first()?;
                let engine = unsupported.engine.name();
                let what = match (first.concerns_model(), first.concerns_data()) {
                    (true, _) => "model",
                    (false, true) => "data",
                    (false, false) => return None,
                };
                Some(format!("No plan of this {what} runs on {engine}: {first}."))
            }
            _ => None,
        }
    }

    /// The candidate of one of this report's points.
    pub fn candidate(&self, point: &PricedPoint) -> Candidate {
        point.place().candidate(&self.blocks)
    }
}

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// Model, cluster or training setup is invalid.
    #[error("{0}")]
    Input(Violations),
    /// A schedule could not be simulated (a bug in a schedule generator).
    #[error(transparent)]
    Simulation(#[from] SimError),
}

/// Checks the model, cluster, batch, pinned plan options and search settings without searching:
/// every problem at once, as [`search`] reports them.
pub fn check_spec(spec: &SearchSpec) -> Result<(), Violations> {
    match shape(spec) {
        Ok(_) => Ok(()),
        Err(SearchError::Input(problems)) => Err(problems),
        Err(_) => Ok(()),
    }
}

/// Checks the model, cluster, batch and search settings, reporting every problem at once.
fn shape(spec: &SearchSpec) -> Result<Shape, SearchError> {
    let mut problems = Collector::default();
    let model = problems.take(Model::from_spec(&spec.base.model));
    let cluster = problems.take(Cluster::from_spec(&spec.base.cluster));
    let training = validate_training(&mut problems, &spec.base.training);
    if !(0.0..1.0).contains(&spec.memory_headroom) {
        problems.add(
            "search.memory_headroom",
            spec.memory_headroom,
            "must be a fraction in [0, 1)",
            "the share of GPU memory to keep free, e.g. 0.05",
        );
    }
    for (field, limit) in [
        ("search.max_tp", spec.constraints.max_tp),
        ("search.max_pp", spec.constraints.max_pp),
        ("search.max_cp", spec.constraints.max_cp),
    ] {
        if let Some(limit) = limit
            && !(1..=crate::limits::PARALLEL_SIZE).contains(&limit)
        {
            problems.add(
                field,
                limit,
                format!("must be between 1 and {}", crate::limits::PARALLEL_SIZE),
                "the largest size the search tries, e.g. 8",
            );
        }
    }
    if spec.top == 0 {
        problems.add("search.top", 0, "must be 1 or more", "how many plans to list, e.g. 5");
    }
    crate::run::check_plan_fields(&mut problems, &spec.base.plan);
    if let (Some(pinned), Some(engine)) = (spec.base.plan.engine, spec.engine)
        && pinned != engine
    {
        problems.add(
            "plan.engine",
            pinned.name(),
            format!("differs from the engine searched for, {}", engine.name()),
            "name one engine",
        );
    }
    let (model, cluster) = problems
        .finish_with(model.zip(cluster), "model and cluster")
        .map_err(SearchError::Input)?;
    Ok(Shape {
        gpus: cluster.num_gpus(),
        nvlink_domain: cluster.interconnect().nvlink_domain(),
        gpus_per_node: cluster.interconnect().gpus_per_node(),
        layers: model.num_layers(),
        heads: model.num_attention_heads(),
        kv_heads: model.num_kv_heads(),
        seq_len: training.seq_len(),
        global_batch: training.global_batch(),
        experts: model.moe().map_or(0, |moe| moe.num_experts),
        // The target engine's selective recompute; with no target, or one without selective
        // recompute (whose candidates the engine check then rejects), the attention core.
        selective_recompute: spec
            .engine
            .and_then(|engine| engine.capabilities().selective_recompute)
            .unwrap_or(RecomputeKind::Selective),
        // With document lengths, the re-packing windows the target engine's loader balances
        // (every one up to 8 global batches, WLB-LLM's widest, with no target).
        // Documents one per padded sequence, or concatenated with no mask, are not re-packed,
        // nor placed by length: every sequence costs a full one.
        max_balance_window: match (&spec.base.data, spec.engine) {
            (None, _) => 0,
            (Some(data), _) if !data.batching.unwrap_or_default().balances_by_length() => 0,
            (Some(_), None) => MAX_SEARCHED_BALANCE_WINDOW,
            (Some(_), Some(engine)) => engine.capabilities().balance_window,
        },
        // With document lengths, the hybrid-CP schedulers the target engine's loader has (both
        // with no target).
        hybrid_cp_schedulers: match (&spec.base.data, spec.engine) {
            (None, _) => &[],
            (Some(data), _) if !data.batching.unwrap_or_default().balances_by_length() => &[],
            (Some(_), None) => &HybridCpScheduler::ALL,
            (Some(_), Some(engine)) if engine.capabilities().hybrid_cp => {
                &[HybridCpScheduler::Megatron]
            }
            (Some(_), Some(_)) => &[],
        },
        // Mesh-Attention is tried only where the target runs it, which no release does: a pin
        // brings it in (and a target engine then rejects it, saying why).
        mesh_attention: spec
            .engine
            .is_some_and(|engine| engine.capabilities().cp_comms.contains(&CpComm::Mesh)),
        // Offload needs a host link to copy over, and a target engine that offloads a layout
        // without a pipeline and without recompute (Megatron-LM's `--cpu-offloading-num-layers`).
        activation_offload: cluster.interconnect().host_bandwidth().is_some()
            && spec.engine.is_none_or(|engine| {
                engine.capabilities().activation_offload_allowed(
                    1,
                    RecomputeKind::None,
                    model.hybrid().is_some(),
                )
            }),
        // The same with full recompute of the other layers (no engine offloads beside it).
        offload_beside_recompute: cluster.interconnect().host_bandwidth().is_some()
            && spec.engine.is_none_or(|engine| {
                engine.capabilities().activation_offload_allowed(
                    1,
                    RecomputeKind::Full,
                    model.hybrid().is_some(),
                )
            }),
        // With documents one per sequence, DynaPipe's variable micro-batches where the target
        // engine's loader forms them (none does: only with no target).
        variable_micro_batches: spec
            .base
            .data
            .as_ref()
            .is_some_and(|data| data.batching == Some(Batching::Pad))
            && spec.engine.is_none_or(|engine| engine.capabilities().variable_micro_batches),
    })
}

/// The widest re-packing window a search tries on its own: WLB-LLM balances across 4 to 8 global
/// batches (Table 2), and wider windows delay documents further for little more balance.
const MAX_SEARCHED_BALANCE_WINDOW: u64 = 8;

/// Whether candidates overlap TP communication: always, unless the target engine has no overlap
/// (the capability table).
fn tp_comm_overlap(engine: Option<Engine>) -> bool {
    engine.is_none_or(|engine| engine.capabilities().tp_comm_overlap)
}

/// Sequence parallelism with tp > 1, unless the engine searched for has none.
fn sequence_parallel(engine: Option<Engine>) -> bool {
    engine.is_none_or(|engine| {
        engine.capabilities().sequence_parallel
            != crate::export::capability::SequenceParallel::Never
    })
}

/// The options every candidate shares: what the search turns on because it only removes exposed
/// time (sequence parallelism and TP overlap where the engine has them, the DP overlaps), the engine,
/// and every pin on top. How gradients are reduced and the MoE workload (routing imbalance,
/// token dropping, dispatch, all-to-all overlap) are not searched: they come from the pins or
/// their defaults.
pub fn template(spec: &SearchSpec) -> Template {
    let searched = PlanSpec {
        sequence_parallel: Some(sequence_parallel(spec.engine)),
        overlap_grad_reduce: Some(true),
        overlap_param_gather: Some(true),
        tp_comm_overlap: Some(tp_comm_overlap(spec.engine)),
        engine: spec.engine,
        ..PlanSpec::default()
    };
    let plan = searched.overridden_by(&spec.base.plan);
    let id = presets::plan_stack_id(&plan);
    // Read once for every candidate; a stack that does not read is reported by each
    // candidate's validation.
    let stack = presets::stack(&id).ok().map(Arc::new);
    // The model, cluster and training setup validated once; when they do not validate (or the
    // stack does not read), each candidate's validation reports why.
    let parts = stack.as_ref().and_then(|stack| RunParts::new(&spec.base, Arc::clone(stack)).ok());
    Template { plan, stack, parts }
}

/// The options every candidate shares ([`template`]) and the software stack they run on, read
/// once.
#[derive(Debug, Clone)]
pub struct Template {
    /// The shared plan options.
    pub plan: PlanSpec,
    stack: Option<Arc<Stack>>,
    parts: Option<RunParts>,
}

/// The run of a candidate (`template` from [`template`]).
pub fn candidate_run(
    spec: &SearchSpec,
    template: &Template,
    candidate: &Candidate,
) -> Result<Run, Violations> {
    let layers = spec.base.model.num_layers.max(1) as u64;
    let stage_layers = space::stage_layers(layers, candidate.pp, candidate.split);
    let plan = candidate.plan_spec(stage_layers, &template.plan);
    let micro_batch = candidate.micro_batch as i64;
    if let Some(parts) = &template.parts {
        return parts.run(&plan, micro_batch);
    }
    let mut run_spec = spec.base.clone();
    run_spec.plan = plan;
    run_spec.training.micro_batch = Some(micro_batch);
    match &template.stack {
        Some(stack) => Run::from_spec_with_stack(&run_spec, Arc::clone(stack)),
        None => Run::from_spec(&run_spec),
    }
}

fn fits_in(peak: Bytes, capacity: Bytes, headroom: f64) -> bool {
    peak.value() <= capacity.value() * (1.0 - headroom)
}

/// The rejection of a run that needs `needed` bytes by `check`.
fn over_memory(spec: &SearchSpec, run: &Run, needed: Bytes, check: MemoryCheck) -> Rejection {
    Rejection::DoesNotFit(OverMemory {
        plan: run.plan().label(),
        needed,
        available: run.cluster().gpu().memory() * (1.0 - spec.memory_headroom),
        check,
    })
}

fn fits(estimate: &Estimate, headroom: f64) -> bool {
    fits_in(estimate.peak_memory.breakdown.fit_need(), estimate.memory_capacity, headroom)
}

/// Op tables of the simulated candidates, one set per table key, built once and shared by every
/// candidate of that key (the tables do not depend on the pipeline layout, sharding or
/// recompute), so a candidate is not priced again to be simulated.
type SimulationTables = BTreeMap<TableKey, Tables>;

/// Adds the tables of every table key of `kept` that `tables` lacks, built in parallel.
fn add_tables(
    spec: &SearchSpec,
    template: &Template,
    kept: &[(Candidate, &Kept)],
    tables: &mut SimulationTables,
) -> Result<(), SearchError> {
    let mut missing: BTreeMap<TableKey, Candidate> = BTreeMap::new();
    for (candidate, _) in kept {
        let key = table_key(candidate);
        if !tables.contains_key(&key) {
            missing.entry(key).or_insert(*candidate);
        }
    }
    let built: Vec<(TableKey, Tables)> = missing
        .into_par_iter()
        .map(|(key, candidate)| {
            let run = candidate_run(spec, template, &candidate).map_err(SearchError::Input)?;
            Ok((key, Tables::new(&run)))
        })
        .collect::<Result<_, SearchError>>()?;
    tables.extend(built);
    Ok(())
}

fn simulate_candidate(
    spec: &SearchSpec,
    template: &Template,
    tables: &SimulationTables,
    (candidate, kept): (Candidate, &Kept),
) -> Result<RankedPlan, SearchError> {
    let run = candidate_run(spec, template, &candidate).map_err(SearchError::Input)?;
    let options = SimOptions { timeline: false };
    let (estimate, _) = match tables.get(&table_key(&candidate)) {
        Some(tables) => estimate_simulated_from(&PricedRun::with_tables(&run, tables), options)?,
        None => estimate_simulated_from(&PricedRun::new(&run), options)?,
    };
    let closed_form = kept.closed_form;
    Ok(RankedPlan { candidate, run, estimate, closed_form, equivalents: Vec::new() })
}

/// Simulated plans that fit, each also recorded as a point; the rest are counted as not fitting.
fn keep_fitting(
    spec: &SearchSpec,
    plans: Vec<(Place, RankedPlan)>,
    rejections: &mut Rejections,
    points: &mut Vec<PricedPoint>,
) -> Vec<RankedPlan> {
    let mut kept = Vec::new();
    for (place, plan) in plans {
        if fits(&plan.estimate, spec.memory_headroom) {
            points.push(PricedPoint::new(
                place,
                plan.estimate.peak_memory.breakdown.fit_need(),
                plan.estimate.time.step_time(),
                plan.estimate.throughput.tokens_per_sec_per_gpu,
                true,
            ));
            kept.push(plan);
        } else {
            let needed = plan.estimate.peak_memory.breakdown.total();
            rejections.add(RejectionKind::DoesNotFit, || {
                over_memory(spec, &plan.run, needed, MemoryCheck::Simulated)
            });
        }
    }
    kept
}

/// The tokens a step trains as `cost::step::throughput` counts them, for the points of pruned
/// candidates: `global_batch x seq_len` times the share the data trains (padding left out), in
/// fixed micro-batches and in variable ones.
#[derive(Debug, Clone, Copy)]
struct TrainedTokens {
    fixed: f64,
    variable: f64,
}

impl TrainedTokens {
    fn of(spec: &SearchSpec, shape: &Shape, template: &Template) -> TrainedTokens {
        let all = (shape.global_batch * shape.seq_len) as f64;
        let padded = spec.base.data.as_ref().is_some_and(|d| d.batching == Some(Batching::Pad));
        let share = |variable: bool| {
            template.parts.as_ref().map_or(1.0, |parts| parts.trained_fraction(variable && padded))
        };
        TrainedTokens { fixed: all * share(false), variable: all * share(true) }
    }
}

/// The point of a candidate pruned by its bound: never faster than its bound.
fn pruned_point(
    shape: &Shape,
    tokens: TrainedTokens,
    blocks: &[Block],
    kept: &Kept,
) -> PricedPoint {
    let step_time = kept.closed_form.max(kept.bound);
    let place = kept.place;
    let variable = blocks[place.block()].grouping(place.inner()).variable_micro_batches;
    let tokens = if variable { tokens.variable } else { tokens.fixed } * kept.unpadded;
    let tokens_per_sec_per_gpu = tokens / step_time.value() / shape.gpus as f64;
    PricedPoint::new(kept.place, kept.peak, step_time, tokens_per_sec_per_gpu, false)
}

/// The order candidates are simulated in: most promising (fastest closed form) first, then by
/// place (candidates are distinct, so every sort by it has one result).
fn most_promising(a: &Kept, b: &Kept) -> std::cmp::Ordering {
    let (a_time, b_time) = (a.ranked_closed_form().value(), b.ranked_closed_form().value());
    a_time.total_cmp(&b_time).then(a.place.cmp(&b.place))
}

/// The candidates of the space, or why the space is too large to search.
fn space_blocks(spec: &SearchSpec, shape: &Shape) -> Result<Vec<Block>, SearchError> {
    let blocks = space::blocks(shape, &spec.constraints, &spec.base.plan);
    if !place::addressable(&blocks) {
        return Err(SearchError::Input(Violations::one(Violation::new(
            "search",
            format!("{} GPUs", shape.gpus),
            "the space has more layouts, shardings or combinations than a search can address",
            "pin some plan options (tp, pp, schedule, sharding) to narrow the space",
        ))));
    }
    Ok(blocks)
}

/// The `count` candidates with the best closed forms after `last` (in [`most_promising`] order),
/// most promising first.
fn next_best(kept: &[Vec<Kept>], last: Option<Kept>, count: usize) -> Vec<&Kept> {
    /// A kept candidate ordered by promise, so that a max-heap's top is the least promising.
    struct ByPromise<'a>(&'a Kept);
    impl PartialEq for ByPromise<'_> {
        fn eq(&self, other: &Self) -> bool {
            most_promising(self.0, other.0).is_eq()
        }
    }
    impl Eq for ByPromise<'_> {}
    impl PartialOrd for ByPromise<'_> {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for ByPromise<'_> {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            most_promising(self.0, other.0)
        }
    }
    let mut heap: BinaryHeap<ByPromise> = BinaryHeap::with_capacity(count + 1);
    let after = |k: &Kept| last.is_none_or(|last| most_promising(k, &last).is_gt());
    for candidate in kept.iter().flatten().filter(|k| after(k)) {
        if heap.len() == count
            && heap.peek().is_some_and(|worst| most_promising(candidate, worst.0).is_ge())
        {
            continue;
        }
        heap.push(ByPromise(candidate));
        if heap.len() > count {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter().map(|k| k.0).collect()
}

/// The simulation phase's state: the best plans so far and the bar they set, the points, and
/// the counts.
struct Simulating<'a> {
    spec: &'a SearchSpec,
    template: &'a Template,
    blocks: &'a [Block],
    shape: &'a Shape,
    tokens: TrainedTokens,
    tables: SimulationTables,
    best: Vec<RankedPlan>,
    bar: Option<f64>,
    rejections: Rejections,
    points: Vec<PricedPoint>,
    simulated: usize,
    pruned: usize,
}

impl Simulating<'_> {
    /// Goes through `list` (most promising first) in batches: each batch's candidates whose bound
    /// can beat the bar, fixed before the batch runs, are simulated in parallel; the others are
    /// points as they are.
    fn run(&mut self, list: &[&Kept]) -> Result<(), SearchError> {
        for chunk in list.chunks(SIMULATION_BATCH) {
            let (run, skip): (Vec<&Kept>, Vec<&Kept>) =
                chunk.iter().partition(|k| rank::may_enter(k.ranked_bound(), self.bar));
            self.pruned += skip.len();
            let (shape, tokens, blocks) = (self.shape, self.tokens, self.blocks);
            self.points.extend(skip.iter().map(|k| pruned_point(shape, tokens, blocks, k)));
            if run.is_empty() {
                // Nothing simulated: the list and its bar stay as they are.
                continue;
            }
            self.simulated += run.len();
            self.simulate_batch(&run)?;
        }
        Ok(())
    }

    /// Simulates `batch` in parallel, keeps what fits and moves the bar.
    fn simulate_batch(&mut self, batch: &[&Kept]) -> Result<(), SearchError> {
        let (spec, template) = (self.spec, self.template);
        let run: Vec<(Candidate, &Kept)> =
            batch.iter().map(|&k| (k.place.candidate(self.blocks), k)).collect();
        add_tables(spec, template, &run, &mut self.tables)?;
        let tables = &self.tables;
        let results: Vec<Result<(Place, RankedPlan), SearchError>> = run
            .par_iter()
            .map(|&(candidate, kept)| {
                Ok((kept.place, simulate_candidate(spec, template, tables, (candidate, kept))?))
            })
            .collect();
        let results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        self.best.extend(keep_fitting(spec, results, &mut self.rejections, &mut self.points));
        self.bar = rank::keep_top(&mut self.best, spec.top.max(1));
        Ok(())
    }
}

/// The target engine's refusals of the model itself ([`crate::export::Refusal::concerns_model`]):
/// they refuse every plan alike, so the search need not price any. Read once from the model on
/// one GPU with the engine's and stack's defaults (what the model needs does not depend on the
/// plan, the cluster or the data). `None` when the engine is free, that run is not valid, or
/// nothing about the model is refused.
fn model_refusal(spec: &SearchSpec, template: &Template) -> Option<crate::export::Unsupported> {
    let engine = spec.engine?;
    let base = RunSpec {
        model: spec.base.model.clone(),
        cluster: crate::hardware::ClusterSpec { num_gpus: 1, ..spec.base.cluster.clone() },
        training: crate::plan::TrainingSpec {
            global_batch: 1,
            micro_batch: Some(1),
            ..spec.base.training
        },
        plan: PlanSpec {
            engine: Some(engine),
            stack: template.plan.stack.clone(),
            ..PlanSpec::default()
        },
        data: None,
    };
    let run = Run::from_spec(&base).ok()?;
    let unsupported = crate::export::check(engine, &run).err()?;
    let refusals: Vec<_> =
        unsupported.refusals.into_iter().filter(|refusal| refusal.concerns_model()).collect();
    (!refusals.is_empty()).then_some(crate::export::Unsupported { engine, refusals })
}

/// The report of a search whose engine refuses the model: every candidate of `blocks` rejected
/// for it, none priced.
fn refused_report(
    blocks: Vec<Block>,
    refused: crate::export::Unsupported,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> SearchReport {
    let considered: usize = blocks.iter().map(Block::len).sum();
    let mut rejections = Rejections::default();
    rejections.add_many(RejectionKind::UnsupportedByEngine, considered, || {
        Rejection::UnsupportedByEngine(refused)
    });
    progress(considered, considered);
    SearchReport {
        considered,
        priced: 0,
        simulated: 0,
        pruned: 0,
        plans: Vec::new(),
        rejections,
        points: Vec::new(),
        blocks,
    }
}

/// Searches the space: the fast path described in the module documentation.
pub fn search(
    spec: &SearchSpec,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SearchReport, SearchError> {
    let shape = shape(spec)?;
    let template = template(spec);
    let blocks = space_blocks(spec, &shape)?;
    if let Some(refused) = model_refusal(spec, &template) {
        return Ok(refused_report(blocks, refused, progress));
    }
    let (kept, rejections) = price_all(spec, &template, &blocks, true, progress);
    let priced = kept.iter().map(Vec::len).sum();
    let mut state = Simulating {
        spec,
        template: &template,
        blocks: &blocks,
        shape: &shape,
        tokens: TrainedTokens::of(spec, &shape, &template),
        tables: SimulationTables::new(),
        best: Vec::new(),
        bar: None,
        rejections,
        points: Vec::with_capacity(priced),
        simulated: 0,
        pruned: 0,
    };
    // The best closed forms, in growing rounds, until they set a bar (plans that do not fit in
    // simulation set none).
    let mut last = None;
    for round in 0..OPENING_ROUNDS {
        let opening = next_best(&kept, last, SIMULATION_BATCH << round);
        let Some(&&end) = opening.last() else { break };
        last = Some(end);
        state.run(&opening)?;
        if state.bar.is_some() {
            break;
        }
    }
    // The rest: only those whose bound can beat that bar, most promising first; the others are
    // points as they are.
    let bar = state.bar;
    let after = |k: &&Kept| last.is_none_or(|last| most_promising(k, &last).is_gt());
    let mut contenders: Vec<&Kept> = kept
        .par_iter()
        .flat_map_iter(|job| {
            job.iter().filter(after).filter(|k| rank::may_enter(k.ranked_bound(), bar))
        })
        .collect();
    let skipped =
        kept.iter().flatten().filter(after).filter(|k| !rank::may_enter(k.ranked_bound(), bar));
    for k in skipped {
        state.points.push(pruned_point(&shape, state.tokens, &blocks, k));
        state.pruned += 1;
    }
    contenders.par_sort_unstable_by(|a, b| most_promising(a, b));
    state.run(&contenders)?;
    let Simulating { best, rejections, mut points, simulated, pruned, .. } = state;
    // Places are distinct: a radix sort on their keys gives the one order, in a few passes over
    // the bytes that differ (most of a key's are the same for every place).
    radsort::sort_by_key(&mut points, |point| point.place().key());
    Ok(SearchReport {
        considered: blocks.iter().map(Block::len).sum(),
        priced,
        simulated,
        pruned,
        plans: rank::entries(best),
        rejections,
        points,
        blocks,
    })
}

/// The reference: simulates every candidate that prices and fits, without bounds.
pub fn brute_force(spec: &SearchSpec) -> Result<SearchReport, SearchError> {
    let shape = shape(spec)?;
    let template = template(spec);
    let blocks = space_blocks(spec, &shape)?;
    let (kept, mut rejections) = price_all(spec, &template, &blocks, false, &|_, _| {});
    let kept: Vec<Kept> = kept.into_iter().flatten().collect();
    // The reference builds every candidate's own tables.
    let own = SimulationTables::new();
    let results = kept
        .iter()
        .map(|k| {
            let plan = simulate_candidate(spec, &template, &own, (k.place.candidate(&blocks), k))?;
            Ok((k.place, plan))
        })
        .collect::<Result<Vec<_>, SearchError>>()?;
    let mut points = Vec::with_capacity(kept.len());
    let mut plans = keep_fitting(spec, results, &mut rejections, &mut points);
    rank::keep_top(&mut plans, spec.top.max(1));
    let plans = rank::entries(plans);
    points.sort_by_key(|point| point.place().key());
    Ok(SearchReport {
        considered: blocks.iter().map(Block::len).sum(),
        priced: kept.len(),
        simulated: kept.len(),
        pruned: 0,
        plans,
        rejections,
        points,
        blocks,
    })
}

#[cfg(test)]
mod tests;

//! One run priced once: its op tables, the segments of its stages and of a micro-batch's path
//! with their work and parameters, the per-layer memory terms (stored activations), the
//! data-parallel collectives, the pipeline send and the optimizer step: everything the closed form
//! (`step.rs`) and the simulator (`crate::sim`) read, so that a caller that priced a run can time
//! it both ways without pricing it again.
//!
//! The tables are built with the value (or borrowed from a caller that has them); the pipeline
//! send, the memory terms, the stages, the path and the path's collectives are each priced on
//! first use and kept, so a closed-form step time never prices the path or the memory and a lower
//! bound prices only the path's work and parameters.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::cost::breakdown::{MemoryBreakdown, StageMemory};
use crate::cost::hybrid_cp::{HybridCpStep, hybrid_cp_step};
use crate::cost::imbalance::{DataImbalance, data_imbalance};
use crate::cost::memory::{
    ActivationBytes, LayerParams, Params, TokenPeaks, host_offload_peak, model_state_memory,
    segment_params_with, stage_allocated, stage_peak,
};
use crate::cost::repacking::repacked_token_peaks;
use crate::cost::step_terms::{
    DataParallelCollectives, data_parallel_collectives, optimizer_time_for, p2p_bytes, p2p_transfer,
};
use crate::cost::work::{
    Segment, Tables, Work, path_segments, segment_work, stage_segments, with_offload_stalls,
};
use crate::data::ShapeCache;
use crate::run::Run;
use crate::units::{Bytes, Seconds};

/// A segment (a pipeline stage, or one position of a micro-batch's path) with what it costs one
/// micro-batch and the parameters it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PricedSegment {
    /// The layers it runs.
    pub segment: Segment,
    /// One micro-batch's work through it, by phase.
    pub work: Work,
    /// Parameters one GPU holds for it, before data-parallel sharding.
    pub params: Params,
}

/// What pricing a run finds that depends neither on its data-parallel sharding nor on its
/// pipeline schedule (given the defaults the schedule resolves, such as DualPipe's expert
/// overlap): the pipeline send, the per-layer memory terms and parameters, and the priced stages
/// and path. A search prices many candidates that differ only in those two and shares one.
#[derive(Debug, Clone, Default)]
pub struct SharedPricing {
    transfer: OnceLock<Seconds>,
    activations: OnceLock<ActivationBytes>,
    layer_params: OnceLock<LayerParams>,
    stages: OnceLock<Vec<PricedSegment>>,
    path: OnceLock<Vec<PricedSegment>>,
    /// The step under hybrid CP, priced from the single stage's static work (`None` without).
    hybrid: OnceLock<Option<HybridCpStep>>,
    /// The data's imbalance by re-packing window: it reads the critical stage's work, the
    /// micro-batches and the replicas, none of which sharding or schedule change.
    imbalances: ShapeCache<u64, Option<DataImbalance>>,
    /// The re-packed micro-batches' token peaks by window, for every number of micro-batches
    /// held (`crate::cost::repacking::repacked_token_peaks`): they read the micro-batches only.
    token_peaks: ShapeCache<u64, Option<Vec<f64>>>,
    /// The imbalance and token peaks of each window a search prices beside every candidate of
    /// the group, looked up once for all of them.
    windows: OnceLock<Vec<WindowPricing>>,
    /// The plan, less its sharding and schedule, of the first run priced with it: every run that
    /// shares it must have the same (checked in debug builds, which the tests run).
    #[cfg(debug_assertions)]
    shared_by: OnceLock<crate::plan::PlanSpec>,
}

/// What re-packing over one window changes of a plan's pricing: its data's imbalance and its
/// micro-batches' token peaks (for every number held).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowPricing {
    /// Global batches re-packed together.
    pub window: u64,
    /// The data's imbalance (`None` without data).
    pub imbalance: Option<DataImbalance>,
    /// The token peaks (`None` without re-packing).
    token_peaks: Option<Vec<f64>>,
}

/// What runs that share a [`SharedPricing`] must agree on: the resolved plan with its sharding,
/// schedule and re-packing window (which prices the data's balance only) left out (what the schedule resolves, such as DualPipe's expert overlap, stays in).
#[cfg(debug_assertions)]
fn sharing_key(run: &Run) -> crate::plan::PlanSpec {
    crate::plan::PlanSpec {
        zero: None,
        fsdp: None,
        fsdp_mode: None,
        hybrid_shard: None,
        schedule: None,
        balance_window: None,
        ..run.plan().to_spec()
    }
}

impl SharedPricing {
    /// An empty one, filled by the first run priced with it.
    pub fn new() -> SharedPricing {
        SharedPricing::default()
    }
}

/// A run with everything the closed form and the simulator price it by.
#[derive(Debug, Clone)]
pub struct PricedRun<'a> {
    run: &'a Run,
    tables: Cow<'a, Tables>,
    shared: Cow<'a, SharedPricing>,
    /// The collectives of the first stage, whose compute hides them in the closed form.
    first_collectives: OnceLock<DataParallelCollectives>,
    path_collectives: OnceLock<Vec<DataParallelCollectives>>,
    data_imbalance: OnceLock<Option<DataImbalance>>,
    /// Each stage's model states and stored activations per micro-batch, which every re-packing
    /// window's memory shares.
    stage_parts: OnceLock<Vec<(MemoryBreakdown, Bytes)>>,
}

/// `price` of each of `keys`, in order, each distinct key priced once (a pipeline's keys repeat:
/// its middle stages and chunks are equal).
fn price_distinct<K: PartialEq + Copy, V: Copy>(
    keys: impl IntoIterator<Item = K>,
    mut price: impl FnMut(K) -> V,
) -> Vec<V> {
    // Pipelines have a first, a last and equal middle segments: room for those without growing.
    let mut distinct: Vec<(K, V)> = Vec::with_capacity(4);
    keys.into_iter()
        .map(|key| {
            if let Some((_, value)) = distinct.iter().find(|(k, _)| *k == key) {
                return *value;
            }
            let value = price(key);
            distinct.push((key, value));
            value
        })
        .collect()
}

impl<'a> PricedRun<'a> {
    /// Prices a run, building its op tables.
    pub fn new(run: &'a Run) -> PricedRun<'a> {
        PricedRun::from_tables(run, Cow::Owned(Tables::new(run)))
    }

    /// Prices a run from op tables already built for it (the tables do not depend on the
    /// pipeline layout, sharding or recompute, so one set serves many runs).
    pub fn with_tables(run: &'a Run, tables: &'a Tables) -> PricedRun<'a> {
        PricedRun::from_tables(run, Cow::Borrowed(tables))
    }

    /// Prices a run from op tables built for it and a [`SharedPricing`] that is empty or was
    /// filled by a run that differs from this one at most in its sharding and its schedule (and
    /// not in what the schedule resolves: DualPipe's expert overlap).
    pub fn with_shared(
        run: &'a Run,
        tables: &'a Tables,
        shared: &'a SharedPricing,
    ) -> PricedRun<'a> {
        #[cfg(debug_assertions)]
        {
            let key = sharing_key(run);
            let first = shared.shared_by.get_or_init(|| key.clone());
            debug_assert_eq!(
                *first, key,
                "runs that share their pricing differ beyond sharding and schedule"
            );
        }
        PricedRun {
            run,
            tables: Cow::Borrowed(tables),
            shared: Cow::Borrowed(shared),
            first_collectives: OnceLock::new(),
            path_collectives: OnceLock::new(),
            data_imbalance: OnceLock::new(),
            stage_parts: OnceLock::new(),
        }
    }

    fn from_tables(run: &'a Run, tables: Cow<'a, Tables>) -> PricedRun<'a> {
        PricedRun {
            run,
            tables,
            shared: Cow::Owned(SharedPricing::new()),
            first_collectives: OnceLock::new(),
            path_collectives: OnceLock::new(),
            data_imbalance: OnceLock::new(),
            stage_parts: OnceLock::new(),
        }
    }

    /// The run priced.
    pub fn run(&self) -> &'a Run {
        self.run
    }

    /// Its op tables.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The per-layer memory terms: stored activations by layer kind, a layer's input, the
    /// weight-gradient inputs, the recompute working bytes and the logits.
    pub fn activations(&self) -> &ActivationBytes {
        self.shared.activations.get_or_init(|| ActivationBytes::new(self.run))
    }

    /// Activations one micro-batch leaves stored in a segment from the forward to the backward.
    pub fn stored_activations(&self, segment: &Segment) -> Bytes {
        self.activations().stored(segment)
    }

    /// One pipeline send/receive of a micro-batch's activations (zero without a pipeline).
    pub fn transfer(&self) -> Seconds {
        *self.shared.transfer.get_or_init(|| {
            if self.run.plan().pp() > 1 { p2p_transfer(self.run) } else { Seconds::ZERO }
        })
    }

    /// What one pipeline send carries.
    pub fn transfer_bytes(&self) -> Bytes {
        p2p_bytes(self.run)
    }

    fn price(&self, segment: Segment) -> PricedSegment {
        let plan = self.run.plan();
        let mut work = segment_work(self.run, &self.tables, segment);
        if plan.offload_activation_layers() > 0 {
            work = with_offload_stalls(self.run, work, self.activations().offloaded(&segment));
        }
        if plan.hybrid_cp().is_some() {
            // Hybrid CP has no pipeline: every segment is the whole model.
            let step = self.shared.hybrid.get_or_init(|| hybrid_cp_step(self.run, &work));
            if let Some(step) = step {
                work = step.apply(work, plan.num_microbatches());
            }
        }
        PricedSegment {
            segment,
            work,
            params: segment_params_with(
                self.run,
                self.shared.layer_params.get_or_init(|| LayerParams::new(self.run)),
                &segment,
            ),
        }
    }

    /// Prices `segments`, each distinct one once: equal segments (the middle stages of an even
    /// split, the middle chunks of an interleaved path) cost the same, and one equal to a segment
    /// of `known` (the stages, when pricing the path) is taken from there.
    fn price_each(&self, segments: Vec<Segment>, known: &[PricedSegment]) -> Vec<PricedSegment> {
        price_distinct(segments, |segment| {
            known
                .iter()
                .find(|p| p.segment == segment)
                .copied()
                .unwrap_or_else(|| self.price(segment))
        })
    }

    /// Every pipeline stage (over all its virtual chunks), priced.
    pub fn stages(&self) -> &[PricedSegment] {
        self.shared.stages.get_or_init(|| self.price_each(stage_segments(self.run), &[]))
    }

    /// The slowest stage's work per micro-batch (the last of equal ones) and the sum over all
    /// stages of their work per micro-batch: what the pipeline runs at and fills with.
    pub fn critical_stage(&self) -> (Work, Seconds) {
        let mut critical = Work::default();
        let mut slowest = f64::NEG_INFINITY;
        let mut all_stages = Seconds::ZERO;
        for stage in self.stages() {
            let total = stage.work.total();
            all_stages += total;
            if total.value().total_cmp(&slowest).is_ge() {
                (critical, slowest) = (stage.work, total.value());
            }
        }
        (critical, all_stages)
    }

    /// The pipeline's fill and drain in the closed form: one micro-batch's work through every
    /// stage but the critical one (over `vp` chunks under an interleaved schedule), the
    /// makespan of a proportionate flow shop beyond the critical stage's. What a larger
    /// micro-batch stretches, whatever idle time unequal stages add to a simulated bubble.
    pub fn fill_and_drain(&self) -> Seconds {
        let (critical, all_stages) = self.critical_stage();
        self.fill_and_drain_of(&critical, all_stages)
    }

    /// [`Self::fill_and_drain`] from the critical stage and the sum over all stages, for a
    /// caller that has them ([`Self::critical_stage`]).
    pub fn fill_and_drain_of(&self, critical: &Work, all_stages: Seconds) -> Seconds {
        (all_stages - critical.total()) / self.run.plan().vp() as f64
    }

    /// The spread of the run's data over replicas and micro-batches (`None` without data),
    /// computed once per re-packing window for all the runs that share this one's pricing.
    pub fn data_imbalance(&self) -> Option<DataImbalance> {
        *self.data_imbalance.get_or_init(|| {
            let price = || match self.hybrid_cp_step() {
                Some(step) => Some(step.imbalance()),
                None => data_imbalance(self.run, &self.critical_stage().0),
            };
            let window = self.run.plan().balance_window();
            let imbalance = self.shared.imbalances.get_or_make(window, price).get().copied();
            let imbalance = imbalance.flatten();
            debug_assert_eq!(imbalance, price(), "runs sharing their pricing differ in balance");
            imbalance
        })
    }

    /// The step under hybrid CP (`None` without it or without data).
    pub fn hybrid_cp_step(&self) -> Option<HybridCpStep> {
        self.run.plan().hybrid_cp()?;
        // Priced with the stages.
        self.stages();
        self.shared.hybrid.get().copied().flatten()
    }

    /// The spread of the run's data were its documents re-packed over `window` global batches
    /// instead, the plan otherwise the same; priced once per window like [`Self::data_imbalance`].
    pub fn data_imbalance_with_window(&self, window: u64) -> Option<DataImbalance> {
        let slot = self.shared.imbalances.get_or_make(window, || {
            let variant = self.run.with_balance_window(window);
            data_imbalance(&variant, &self.critical_stage().0)
        });
        slot.get().copied().flatten()
    }

    /// The data-parallel collectives of the first stage's parameters.
    pub fn first_stage_collectives(&self) -> DataParallelCollectives {
        *self.first_collectives.get_or_init(|| {
            let first = self.stages().first().map_or_else(Params::default, |s| s.params);
            data_parallel_collectives(self.run, first)
        })
    }

    /// Every position (virtual stage) of a micro-batch's path, `pp x vp` of them, priced.
    pub fn path(&self) -> &[PricedSegment] {
        self.shared.path.get_or_init(|| {
            let plan = self.run.plan();
            let stages = self.shared.stages.get().map_or(&[][..], Vec::as_slice);
            self.price_each(path_segments(self.run, plan.pp() * plan.vp()), stages)
        })
    }

    /// The data-parallel collectives of each position of the path.
    pub fn path_collectives(&self) -> &[DataParallelCollectives] {
        self.path_collectives.get_or_init(|| {
            // Positions holding equal parameters (the middle chunks of a path) are priced once.
            price_distinct(self.path().iter().map(|p| p.params), |params| {
                data_parallel_collectives(self.run, params)
            })
        })
    }

    /// Model states, workspaces and FSDP buffers of a rank holding `params` in `layers` layers.
    pub fn model_states(&self, params: Params, layers: f64) -> MemoryBreakdown {
        model_state_memory(self.run, params, layers)
    }

    /// The optimizer step of a rank holding `params`.
    pub fn optimizer_time(&self, params: Params) -> Seconds {
        optimizer_time_for(self.run, params)
    }

    /// The peak memory of every pipeline stage, as the closed form predicts it.
    pub fn stage_memory(&self) -> Vec<StageMemory> {
        self.stage_memory_with_window(self.run.plan().balance_window())
    }

    /// The peak memory of every pipeline stage were the documents re-packed over `window` global
    /// batches, the plan otherwise the same: re-packed micro-batches carry unequal tokens.
    pub fn stage_memory_with_window(&self, window: u64) -> Vec<StageMemory> {
        let activations = self.activations();
        let slot = self.token_peaks(window);
        let peaks = slot.get().and_then(Option::as_deref);
        self.stage_parts()
            .iter()
            .zip(0..)
            .map(|(&(states, stored), stage)| {
                let tokens = TokenPeaks::from_table(self.run, peaks, stage);
                debug_assert_eq!(tokens, TokenPeaks::of(self.run, window, stage));
                let breakdown = stage_peak(self.run, stage, tokens, states, stored, activations);
                StageMemory { stage, breakdown }
            })
            .collect()
    }

    /// Each stage's model states and stored activations per micro-batch.
    fn stage_parts(&self) -> &[(MemoryBreakdown, Bytes)] {
        self.stage_parts.get_or_init(|| {
            // The middle stages of a pipeline are equal: their model states (which depend on the
            // stage's parameters and layers) and stored activations (on its segment) are priced
            // once.
            let activations = self.activations();
            let mut previous: Option<(Segment, Params, MemoryBreakdown, Bytes)> = None;
            self.stages()
                .iter()
                .map(|priced| {
                    let (segment, params) = (priced.segment, priced.params);
                    let parts = match previous {
                        Some((s, p, states, stored)) if s == segment && p == params => {
                            (states, stored)
                        }
                        _ => (
                            self.model_states(params, segment.all.layers),
                            activations.stored(&segment),
                        ),
                    };
                    previous = Some((segment, params, parts.0, parts.1));
                    parts
                })
                .collect()
        })
    }

    /// The token peaks of the run's micro-batches re-packed over `window` global batches, for
    /// every number held (`None` inside without re-packing), found once for all the runs that
    /// share this one's pricing.
    fn token_peaks(&self, window: u64) -> Arc<OnceLock<Option<Vec<f64>>>> {
        self.shared.token_peaks.get_or_make(window, || {
            repacked_token_peaks(self.run, window).and_then(|peaks| peaks.get().cloned())
        })
    }

    /// What re-packing over each of `windows` changes of the run's pricing, in order, found once
    /// for all the runs that share this one's pricing (which must ask for the same windows).
    pub fn windows(&self, windows: &[u64]) -> &[WindowPricing] {
        let priced = self.shared.windows.get_or_init(|| {
            windows
                .iter()
                .map(|&window| WindowPricing {
                    window,
                    imbalance: self.data_imbalance_with_window(window),
                    token_peaks: self.token_peaks(window).get().cloned().flatten(),
                })
                .collect()
        });
        debug_assert!(
            priced.iter().map(|w| w.window).eq(windows.iter().copied()),
            "runs sharing their pricing ask for different windows"
        );
        priced
    }

    /// The most memory any pipeline stage needs to fit (`MemoryBreakdown::fit_need`) were the
    /// documents re-packed over `window` global batches: [`Self::stage_memory_with_window`]'s
    /// peak, without building each stage's breakdown.
    pub fn fit_need_with_window(&self, window: u64) -> Bytes {
        if window == 0 || self.run.data().is_none() {
            return self.fit_need_with_peaks(None);
        }
        let slot = self.token_peaks(window);
        let need = self.fit_need_with_peaks(slot.get().and_then(Option::as_deref));
        debug_assert_eq!(
            need,
            self.stage_memory_with_window(window)
                .iter()
                .map(|s| s.breakdown.fit_need())
                .fold(Bytes::ZERO, Bytes::max)
        );
        need
    }

    /// [`Self::fit_need_with_window`] of a window that a search prices (`window` of
    /// [`Self::windows`]).
    pub fn fit_need_with(&self, window: &WindowPricing) -> Bytes {
        let need = self.fit_need_with_peaks(window.token_peaks.as_deref());
        debug_assert_eq!(need, self.fit_need_with_window(window.window));
        need
    }

    /// Host memory one GPU's offloaded activations take at the plan's peak (zero without
    /// offload): [`host_offload_peak`] over the priced stages and their cached token peaks.
    pub fn host_offload_need(&self) -> Bytes {
        if self.run.plan().offload_activation_layers() == 0 {
            return Bytes::ZERO;
        }
        let slot = self.token_peaks(self.run.plan().balance_window());
        self.host_offload_with_peaks(slot.get().and_then(Option::as_deref))
    }

    /// [`Self::host_offload_need`] were the documents re-packed over a window that a search
    /// prices (`window` of [`Self::windows`]).
    pub fn host_offload_need_with(&self, window: &WindowPricing) -> Bytes {
        if self.run.plan().offload_activation_layers() == 0 {
            return Bytes::ZERO;
        }
        self.host_offload_with_peaks(window.token_peaks.as_deref())
    }

    fn host_offload_with_peaks(&self, peaks: Option<&[f64]>) -> Bytes {
        let segments = self.stages().iter().map(|priced| priced.segment);
        host_offload_peak(self.run, self.activations(), segments, peaks)
    }

    fn fit_need_with_peaks(&self, peaks: Option<&[f64]>) -> Bytes {
        let activations = self.activations();
        self.stage_parts()
            .iter()
            .zip(0..)
            .map(|(&(states, stored), stage)| {
                let tokens = TokenPeaks::from_table(self.run, peaks, stage);
                stage_allocated(self.run, stage, tokens, states, stored, activations).fit_need()
            })
            .fold(Bytes::ZERO, Bytes::max)
    }
}

//! A run's data: its spec with a built-in distribution resolved by name, validated, and the
//! sample of sequences its documents pack into, drawn once per run (a search shares it).

use std::sync::{Arc, OnceLock};

use crate::data::{
    AttentionWork, Batching, Data, DataSpec, DealCache, DealShape, DealtWindows, DrawCache,
    DynamicBatches, GroupShape, PlacedBatches, PlacementCache, SequenceLoads, ShapeCache,
    WindowPieces, deal_windows, draw_batches, form_dynamic_batches, place_documents,
    sample_sequences, sequence_values,
};
use crate::model::Model;
use crate::plan::{HybridCpScheduler, Plan};
use crate::presets;
use crate::violation::Collector;

/// What a re-packing spread is worked out for: the batch shape dealt, the micro-batches of a
/// replica and the replicas of a step, and the bits of the seconds a token, a unit of `a` and a
/// unit of `b` take.
pub type SpreadKey = (DealShape, u64, u64, [u64; 3]);

/// The validated data of a run and the attention work of its sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct RunData {
    /// The length distribution and its batching.
    pub data: Data,
    /// The sample of sequences of the run's length.
    pub loads: SequenceLoads,
    /// What a balancing loader weighs a document piece by: its training FLOPs per token, and per
    /// unit of its attention FLOP ratio (the attention FLOPs of a full sequence).
    deal_weight: [f64; 2],
    /// Re-packed windows by batch shape, and the windows' document pieces by window size that
    /// they are dealt from, shared by the runs that price this data.
    dealt: DealCache,
    pieces: WindowPieces,
    /// Global batches of documents drawn for hybrid context-parallel groups, by tokens per
    /// batch, and their placements by batch shape, shared likewise.
    drawn: DrawCache,
    placed: PlacementCache,
    /// The re-packed micro-batches' token peaks by batch shape and micro-batches per replica
    /// (`crate::cost::repacking::repacked_token_peaks`), shared likewise.
    token_peaks: ShapeCache<(DealShape, u64), Vec<f64>>,
    /// What the re-packed windows leave uneven (`crate::cost::repacking::repacked_spread`) by
    /// batch shape, micro-batches per replica, replicas per step and the bits of the piece
    /// work they were priced at: plans that differ only where the critical stage's work does not
    /// (sharding, offload, communication overlap) share it.
    spreads: ShapeCache<SpreadKey, (f64, f64)>,
    /// The variable micro-batches of the run's global batches by micro-batch size (the token
    /// budget), shared likewise.
    dynamic: ShapeCache<u64, DynamicBatches>,
    /// The share of the tokens that are documents' own by padding granularity
    /// ([`Data::document_padding_share`]), shared likewise.
    padding: ShapeCache<u64, f64>,
    /// The sequence length the sample was drawn for.
    seq_len: u64,
    /// Documents per global batch.
    global_batch: u64,
}

impl RunData {
    /// The windows of `shape` re-packed by a balancing loader, dealt the first time a run of
    /// this data asks (`model` is the model the data was validated with, the run's).
    pub fn dealt(&self, model: &Model, shape: DealShape) -> Arc<OnceLock<Option<DealtWindows>>> {
        self.dealt.get_or_make(shape, || {
            let flops = |tokens: u64| model.document_attention_flops(tokens);
            let work = AttentionWork::new(&flops, self.seq_len);
            deal_windows(&self.data, &work, self.deal_weight, shape, &self.pieces)
        })
    }

    /// The token peaks of the windows of `shape` dealt to replicas of `microbatches` each, made
    /// by `make` the first time a run of this data asks.
    pub fn token_peaks(
        &self,
        shape: DealShape,
        microbatches: u64,
        make: impl FnOnce() -> Vec<f64>,
    ) -> Arc<OnceLock<Vec<f64>>> {
        self.token_peaks.get_or_make((shape, microbatches), make)
    }

    /// What the windows re-packed for `key` leave uneven, worked out by `make` the first time a
    /// run of this data asks.
    pub fn spread(&self, key: SpreadKey, make: impl FnOnce() -> (f64, f64)) -> Option<(f64, f64)> {
        self.spreads.get_or_make(key, make).get().copied()
    }

    /// The global batches of `shape` placed on hybrid context-parallel groups, placed the first
    /// time a run of this data asks (`model` is the run's).
    pub fn placed(&self, model: &Model, shape: GroupShape) -> Arc<OnceLock<PlacedBatches>> {
        self.placed.get_or_make(shape, || {
            let drawn = self.drawn.get_or_make(shape.tokens_per_batch, || {
                let flops = |tokens: u64| model.document_attention_flops(tokens);
                let work = AttentionWork::new(&flops, self.seq_len);
                draw_batches(&self.data, &work, shape.tokens_per_batch)
            });
            match drawn.get() {
                Some(drawn) => place_documents(drawn, self.deal_weight, shape),
                None => PlacedBatches::default(),
            }
        })
    }

    /// The variable micro-batches (a plan's `variable_micro_batches`) of the run's global
    /// batches under a budget of `micro_batch` sequences, formed the first time a run of this
    /// data asks (`model` is the run's).
    pub fn dynamic(&self, model: &Model, micro_batch: u64) -> Arc<OnceLock<DynamicBatches>> {
        self.dynamic.get_or_make(micro_batch, || {
            let flops = |tokens: u64| model.document_attention_flops(tokens);
            let work = AttentionWork::new(&flops, self.seq_len);
            form_dynamic_batches(&self.data, &work, self.global_batch, micro_batch)
        })
    }

    /// The share of the tokens its sequences hold that are documents' own when each is padded
    /// to a multiple of `granularity` tokens ([`Data::document_padding_share`]; for context
    /// parallelism, [`context_parallel_granularity`]); computed the first time a run of this
    /// data asks.
    pub fn padding_share(&self, granularity: u64) -> f64 {
        if granularity <= 1 {
            return 1.0;
        }
        let made = self.padding.get_or_make(granularity, || {
            self.data.document_padding_share(granularity, self.seq_len)
        });
        made.get().copied().unwrap_or(1.0)
    }

    /// The share of a step's `global_batch x seq_len` tokens it trains, as
    /// `crate::cost::step::throughput` counts it: the sample's, or in variable micro-batches of
    /// `variable_micro_batch` sequences' budget, their draws' (which do not depend on the
    /// budget; `model` is the run's).
    pub fn trained_fraction(&self, model: &Model, variable_micro_batch: Option<u64>) -> f64 {
        let formed = variable_micro_batch.map(|micro_batch| self.dynamic(model, micro_batch));
        match formed.as_deref().and_then(OnceLock::get) {
            Some(batches) => batches.trained_fraction,
            None => self.loads.trained_fraction,
        }
    }

    /// The sampled sequences one by one, each as its attention terms `[a, b]`: the sample that
    /// `loads` summarises, drawn again from the data's seed (`model` as for [`Self::dealt`]).
    pub fn sampled_sequences(&self, model: &Model) -> Vec<[f64; 2]> {
        let flops = |tokens: u64| model.document_attention_flops(tokens);
        let work = AttentionWork::new(&flops, self.seq_len);
        sequence_values(&self.data, &work).0
    }
}

/// The multiple of tokens each document under a document mask is padded to when its sequences
/// are split over `cp` context-parallel ranks: 2 x cp, or 1 (none) without context parallelism.
/// Transformer Engine's context parallelism cuts every document of the THD layout into 2 x cp
/// chunks and "requires sequence lengths to be, or are padded to be, divisible by (cp_size * 2)"
/// (`attn_forward_func_with_cp`,
/// `transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py@v2.12`), and
/// Megatron-LM's SFT dataset pads each document so, with `pad_granularity =
/// context_parallel_size * 2`, also under `--hybrid-context-parallel`
/// (`megatron/training/datasets/sft_dataset.py@core_v0.18.0`; `pretrain_gpt.py` passes
/// `--context-parallel-size`). ByteScale's placement (`HybridCpScheduler::ByWork`) gives each
/// document a group sized to it: a document alone on a rank needs no padding and one on `g`
/// ranks at most `2 g - 1` tokens on thousands, which is not priced.
pub fn context_parallel_granularity(cp: u64, hybrid: Option<HybridCpScheduler>) -> u64 {
    match hybrid {
        Some(HybridCpScheduler::ByWork) => 1,
        Some(HybridCpScheduler::Megatron) | None if cp > 1 => cp.saturating_mul(2),
        Some(HybridCpScheduler::Megatron) | None => 1,
    }
}

/// Validates `spec` (if any) and draws its sample for sequences of `seq_len` tokens of `model`,
/// `global_batch` of them a step (when both were accepted: without them no sample is drawn, and
/// the data's own problems are still reported).
pub(crate) fn validate_data(
    collector: &mut Collector,
    spec: Option<&DataSpec>,
    model: Option<&Model>,
    batch: Option<(u64, u64)>,
) -> Option<Arc<RunData>> {
    let spec = spec?;
    let resolved = match &spec.preset {
        Some(name) => {
            if spec.lengths.is_some() || spec.histogram.is_some() || spec.source.is_some() {
                collector.add(
                    "data.preset",
                    name,
                    "names a built-in distribution beside lengths of its own",
                    "keep either `preset` or `lengths` / `histogram` (with their `source`)",
                );
                return None;
            }
            match presets::lengths(name) {
                Ok(preset) => DataSpec { batching: spec.batching, seed: spec.seed, ..preset },
                Err(err) => {
                    collector.add(
                        "data.preset",
                        name,
                        err.to_string(),
                        "name a distribution `meshplan presets` lists, or pass a file of lengths",
                    );
                    return None;
                }
            }
        }
        None => spec.clone(),
    };
    let data = collector.take(Data::from_spec(&resolved, spec.preset.as_deref()))?;
    let (model, (seq_len, global_batch)) = (model?, batch?);
    let flops = |tokens: u64| model.document_attention_flops(tokens);
    let loads = sample_sequences(&data, &AttentionWork::new(&flops, seq_len));
    // Training FLOPs per token without attention (its share at one token is nil), and the
    // attention FLOPs of one full sequence over every layer: a piece of ratio `a` does `a` of them.
    let linear = model.training_flops_per_token(1);
    let attention = (model.training_flops_per_token(seq_len) - linear).max(0.0) * seq_len as f64;
    let deal_weight = [linear, attention];
    Some(Arc::new(RunData {
        data,
        loads,
        deal_weight,
        dealt: DealCache::default(),
        pieces: WindowPieces::default(),
        drawn: DrawCache::default(),
        placed: PlacementCache::default(),
        token_peaks: ShapeCache::default(),
        spreads: ShapeCache::default(),
        dynamic: ShapeCache::default(),
        padding: ShapeCache::default(),
        seq_len,
        global_batch,
    }))
}

/// `plan.balance_window`: 0 (packed as documents arrive) to [`crate::limits::BALANCE_WINDOW`].
pub(crate) fn validate_balance_window(collector: &mut Collector, window: Option<i64>) -> u64 {
    let window = window.unwrap_or(0);
    match u64::try_from(window) {
        Ok(window) if window <= crate::limits::BALANCE_WINDOW => window,
        _ => {
            collector.add(
                "plan.balance_window",
                window,
                "is not a number of global batches",
                format!(
                    "give 0 (no re-packing) to {} global batches",
                    crate::limits::BALANCE_WINDOW
                ),
            );
            0
        }
    }
}

/// A balance window re-packs documents, hybrid CP places them and variable micro-batches sort
/// them: without a length distribution there are none. Variable micro-batches take documents
/// one per sequence (`batching`, the data's when it has any, `pad`) and form batches of their
/// own, which no window re-packs and no group places; padded documents without them are
/// neither re-packed nor placed either.
pub(crate) fn check_plan_against_data(
    collector: &mut Collector,
    plan: &Plan,
    batching: Option<Batching>,
) {
    if plan.variable_micro_batches {
        match batching {
            Some(Batching::Pad) => {}
            None => collector.add(
                "plan.variable_micro_batches",
                true,
                "sorts documents into micro-batches, but no document lengths were given",
                "pass --lengths with --batching pad, or drop --variable-micro-batches",
            ),
            Some(other) => collector.add(
                "plan.variable_micro_batches",
                true,
                format!(
                    "sorts whole documents into micro-batches, but the data is batched `{}` ({})",
                    other.name(),
                    other.phrase()
                ),
                "batch the data with `--batching pad` (one document per sequence, the global \
                 batch counting documents), or drop --variable-micro-batches",
            ),
        }
        let fix = "drop it, or drop --variable-micro-batches";
        if plan.balance_window > 0 {
            collector.add(
                "plan.balance_window",
                plan.balance_window,
                "re-packs documents into packed micro-batches, but the plan forms variable \
                 micro-batches",
                fix,
            );
        }
        if plan.hybrid_cp.is_some() {
            collector.add(
                "plan.hybrid_cp",
                true,
                "places packed documents on context-parallel groups, but the plan forms \
                 variable micro-batches",
                fix,
            );
        }
        return;
    }
    if let Some(batching) = batching.filter(|batching| !batching.balances_by_length()) {
        // Padded sequences of one document each, and documents concatenated without a mask,
        // all cost a full sequence: nothing to re-pack or place by length.
        if plan.balance_window > 0 {
            collector.add(
                "plan.balance_window",
                plan.balance_window,
                format!(
                    "re-packs documents into packed micro-batches, but the data is batched `{}` \
                     ({}): every sequence costs a full one",
                    batching.name(),
                    batching.phrase()
                ),
                "batch the data with `--batching pack`, or drop --balance-window",
            );
        }
        if plan.hybrid_cp.is_some() {
            collector.add(
                "plan.hybrid_cp",
                true,
                format!(
                    "places packed documents on context-parallel groups, but the data is batched \
                     `{}` ({}): every sequence costs a full one",
                    batching.name(),
                    batching.phrase()
                ),
                "batch the data with `--batching pack`, or drop --hybrid-cp",
            );
        }
        return;
    }
    if batching.is_some() {
        return;
    }
    let window = plan.balance_window;
    if window > 0 {
        collector.add(
            "plan.balance_window",
            window,
            "re-packs documents, but no document lengths were given",
            "pass --lengths with a distribution or a file of lengths, or drop --balance-window",
        );
    }
    if plan.hybrid_cp.is_some() {
        collector.add(
            "plan.hybrid_cp",
            true,
            "places each document on its own group, but no document lengths were given",
            "pass --lengths with a distribution or a file of lengths, or drop --hybrid-cp",
        );
    }
}

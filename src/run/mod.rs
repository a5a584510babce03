//! One training run to price: model, cluster, training setup and plan, validated together.
//!
//! `RunSpec` is what the user wrote (presets, files and flags merged by the caller); `Run` is the
//! only way the cost model receives input, so every divisibility and capacity rule is checked
//! exactly once, here, and all violations are reported together.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

mod context_parallel_rules;
mod data;
mod expert_rules;
mod field_rules;
mod hybrid_split;
mod mixer_rules;
mod parts;
mod rules;

use crate::data::{DataSpec, DynamicBatches};
use crate::hardware::{Cluster, ClusterSpec};
use crate::model::{Model, ModelSpec};
use crate::plan::{Engine, PipelineSplit, Plan, PlanSpec, RecomputeKind, Training, TrainingSpec};
use crate::presets;
use crate::stack::{GradReduce, Stack};
use crate::violation::{Collector, Violation, Violations};

pub use data::RunData;
pub use parts::RunParts;
use rules::{Accepted, Target, validate_plan};
pub(crate) use rules::{check_plan_fields, validate_training};

/// Everything needed to price one run, as the user described it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The model architecture.
    pub model: ModelSpec,
    /// The GPUs and links.
    pub cluster: ClusterSpec,
    /// Sequence length, batch and precision.
    pub training: TrainingSpec,
    /// The parallel plan.
    pub plan: PlanSpec,
    /// The documents' lengths and how they are batched; without it every sequence is one
    /// document of `seq_len` tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSpec>,
}

/// Layers counted by the table that prices them: all of them, those with a dense MLP in an MoE
/// model, and a hybrid model's kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerMix {
    /// Transformer layers (every layer of a hybrid model).
    pub layers: u64,
    /// Layers among them with a dense MLP in an MoE model (0 for dense models).
    pub dense: u64,
    /// A hybrid model's layers of each kind (all zero otherwise; they sum to `layers` when the
    /// model is hybrid).
    pub sublayers: crate::model::SublayerCounts,
}

impl LayerMix {
    /// Adds `other`'s layers to these.
    pub fn add(&mut self, other: LayerMix) {
        self.layers += other.layers;
        self.dense += other.dense;
        for (total, add) in self.sublayers.iter_mut().zip(other.sublayers) {
            *total += add;
        }
    }
}

/// The layers one GPU of a pipeline stage holds ([`Run::stage_layer_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageLayers {
    /// Every layer, over all its virtual chunks.
    pub all: LayerMix,
    /// Those among them kept in BF16 under a low-precision recipe ([`Plan::bf16_layers`]).
    pub bf16: LayerMix,
}

/// A validated run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    // Shared, not copied, by the many runs a search builds from one model and cluster.
    model: Arc<Model>,
    cluster: Arc<Cluster>,
    training: Training,
    plan: Plan,
    stack: Arc<Stack>,
    data: Option<Arc<RunData>>,
}

impl Run {
    /// Validates every part and every rule that ties the parts together, with the stack the
    /// plan names (or its engine's default stack) read from the built-in presets.
    pub fn from_spec(spec: &RunSpec) -> Result<Run, Violations> {
        let engine = spec.plan.engine.unwrap_or(Engine::DEFAULT);
        let id = presets::plan_stack_id(&spec.plan);
        match presets::stack(&id) {
            Ok(stack) => Run::from_spec_with_stack(spec, Arc::new(stack)),
            Err(err) => {
                let mut problems = Violations::one(Violation::new(
                    "plan.stack",
                    &id,
                    err.to_string(),
                    "name one of the stacks `meshplan presets` lists",
                ));
                // Every other problem is reported too, against the engine's default stack.
                if let Ok(stack) = presets::stack(presets::default_stack_id(engine)) {
                    let mut without = spec.clone();
                    without.plan.stack = None;
                    if let Err(more) = Run::from_spec_with_stack(&without, Arc::new(stack)) {
                        problems.extend(more);
                    }
                }
                Err(problems)
            }
        }
    }

    /// Validates like [`Run::from_spec`] with a stack already read (a search or a validation
    /// prices many runs of one stack): `stack` must be the one the plan names, if it names one.
    pub fn from_spec_with_stack(spec: &RunSpec, stack: Arc<Stack>) -> Result<Run, Violations> {
        let mut collector = Collector::default();
        check_stack(&mut collector, &spec.plan, &stack);
        let model = collector.take(Model::from_spec(&spec.model));
        let cluster = collector.take(Cluster::from_spec(&spec.cluster));
        let before = collector.len();
        let training = validate_training(&mut collector, &spec.training);
        let training_accepted = collector.len() == before;
        // The plan is checked even when the cluster is broken, against the GPU count as written,
        // so that every problem is reported in one pass.
        // (A count past its bound is reported by the cluster; the plan is checked against the
        // bound, so that its arithmetic stays within u64.)
        let num_gpus = spec.cluster.num_gpus.clamp(1, crate::limits::GPUS as i64) as u64;
        // The rules that relate several values are checked only against values that passed their
        // own checks: one read with a stand-in for a refused value would print a number the user
        // never gave ("global_batch = 1 is not a multiple of ...").
        let accepted = Accepted {
            gpus: u64::try_from(spec.cluster.num_gpus) == Ok(num_gpus),
            training: training_accepted,
        };
        let hybrid = model.as_ref().is_some_and(|model| model.hybrid().is_some());
        let plan_spec = with_stack_defaults(&spec.plan, &stack, hybrid);
        let plan = model.as_ref().and_then(|model| {
            validate_plan(
                &mut collector,
                &plan_spec,
                model,
                Target {
                    gpus: num_gpus,
                    cluster: cluster.as_ref(),
                    experts: expert_rules::ExpertRules::of(&stack),
                },
                &training,
                accepted,
            )
        });
        let batch = training_accepted.then_some((training.seq_len, training.global_batch));
        let data = data::validate_data(&mut collector, spec.data.as_ref(), model.as_ref(), batch);
        if let Some(plan) = &plan {
            let batching = spec.data.as_ref().map(|data| data.batching.unwrap_or_default());
            data::check_plan_against_data(&mut collector, plan, batching);
        }
        let ((model, cluster), plan) =
            collector.finish_with(model.zip(cluster).zip(plan), "run")?;
        Ok(Run { model: Arc::new(model), cluster: Arc::new(cluster), training, plan, stack, data })
    }

    /// The software stack the run is priced with.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }
    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
    /// The training setup.
    pub fn training(&self) -> &Training {
        &self.training
    }
    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// The data's lengths and the sample of sequences they pack into; `None` when every
    /// sequence is one document of the run's length.
    pub fn data(&self) -> Option<&RunData> {
        self.data.as_deref()
    }

    /// The run's variable micro-batches (the plan's `variable_micro_batches`) at its
    /// micro-batch size; `None` for fixed micro-batches (validation gives variable ones data).
    pub fn dynamic_batches(&self) -> Option<Arc<OnceLock<DynamicBatches>>> {
        if !self.plan.variable_micro_batches {
            return None;
        }
        Some(self.data()?.dynamic(&self.model, self.training.micro_batch()))
    }

    /// The share of a step's `global_batch x seq_len` tokens it trains
    /// ([`RunData::trained_fraction`], less the padding context parallelism puts after each
    /// document, [`Run::context_parallel_padding`]; all of them without data).
    pub fn trained_fraction(&self) -> f64 {
        let variable = self.plan.variable_micro_batches.then_some(self.training.micro_batch());
        self.data().map_or(1.0, |data| data.trained_fraction(&self.model, variable))
            * self.context_parallel_padding()
    }

    /// The share of the tokens its sequences hold that are documents' own, not the padding each
    /// document under a document mask gets for context parallelism
    /// ([`RunData::padding_share`] at [`Run::context_parallel_granularity`]; 1 without data or
    /// context parallelism).
    pub fn context_parallel_padding(&self) -> f64 {
        let granularity = self.context_parallel_granularity();
        self.data().map_or(1.0, |data| data.padding_share(granularity))
    }

    /// The multiple of tokens each document is padded to for context parallelism
    /// ([`data::context_parallel_granularity`]; 1: none), whatever the data's batching.
    pub fn context_parallel_granularity(&self) -> u64 {
        let hybrid = self.plan.hybrid_cp().map(|hybrid| hybrid.scheduler());
        data::context_parallel_granularity(self.plan.cp(), hybrid)
    }

    /// The same run re-packing its documents over `window` global batches, for a window its
    /// validation accepts: at most [`crate::limits::BALANCE_WINDOW`], and above 0 only with data
    /// (a search tries such windows beside each plan it prices).
    pub(crate) fn with_balance_window(&self, window: u64) -> Run {
        debug_assert!(
            window <= crate::limits::BALANCE_WINDOW && (window == 0 || self.data.is_some())
        );
        let mut run = self.clone();
        run.plan.balance_window = window;
        run
    }

    /// The same run grouping its documents as `plan` says (its `hybrid_cp`,
    /// `hybrid_cp_scheduler`, `max_seqlen_per_rank` and `variable_micro_batches`; every other
    /// field is this run's), checked by the rules that read those fields. No other rule reads
    /// them, so for a plan that differs from this run's in them only, this is what validating
    /// the plan whole gives: a search derives the groupings it tries beside a plan from that
    /// plan's run instead of validating each again.
    pub(crate) fn with_grouping(&self, plan: &PlanSpec) -> Result<Run, Violations> {
        let mut collector = Collector::default();
        let inputs = context_parallel_rules::HybridCpInputs {
            known: true,
            pp: self.plan.pp,
            dp: self.plan.dp,
            cp: self.plan.cp,
            cp_comm: self.plan.cp_comm,
            balance_window: self.plan.balance_window,
            training: &self.training,
        };
        let hybrid_cp = context_parallel_rules::validate_hybrid_cp(&mut collector, plan, inputs);
        let mut run = self.clone();
        run.plan.hybrid_cp = hybrid_cp;
        run.plan.variable_micro_batches = plan.variable_micro_batches.unwrap_or(false);
        let batching = self.data().map(|data| data.data.batching());
        data::check_plan_against_data(&mut collector, &run.plan, batching);
        collector.finish()?;
        Ok(run)
    }

    /// The same run training in BF16: what the layers a low-precision plan keeps in BF16
    /// ([`Plan::bf16_layers`]) cost.
    pub(crate) fn in_bf16(&self) -> Run {
        let mut run = self.clone();
        run.training.precision = crate::plan::Precision::Bf16;
        run.plan.bf16_layers = (0, 0);
        run
    }

    /// The layers kept in BF16 among the `count` layers from layer `first`: how many, how many
    /// of them have a dense MLP in an MoE model, and a hybrid model's kinds among them.
    pub fn bf16_layers_in(&self, first: u64, count: u64) -> LayerMix {
        let (start, end) = self.plan.bf16_layers;
        let layers = self.model.num_layers();
        let mut out = LayerMix::default();
        let last = first.saturating_add(count);
        for (from, to) in [(0, start), (layers.saturating_sub(end), layers)] {
            let (a, b) = (from.max(first), to.min(last));
            if a < b {
                out.add(self.layers_in(a, b - a));
            }
        }
        out
    }

    /// The `count` layers from layer `first`: how many have a dense MLP in an MoE model, and a
    /// hybrid model's kinds among them.
    pub fn layers_in(&self, first: u64, count: u64) -> LayerMix {
        LayerMix {
            layers: count,
            dense: if self.model.moe().is_some() { self.dense_layers_in(first, count) } else { 0 },
            sublayers: self.sublayers_in(first, count),
        }
    }

    /// Tokens of one micro-batch on one GPU: micro batch x sequence, split across CP ranks.
    pub fn tokens_per_microbatch(&self) -> f64 {
        (self.training.micro_batch * self.training.seq_len) as f64 / self.plan.cp as f64
    }

    /// Transformer layers held by one GPU of pipeline stage `stage` (over all its virtual chunks).
    pub fn stage_layers(&self, stage: u64) -> u64 {
        self.stage_layer_counts()[stage as usize].all.layers
    }

    /// The transformer layers, and the dense-MLP layers among them, that one GPU of each pipeline
    /// stage holds over all its virtual chunks, from one pass over the layer layout.
    pub fn stage_layer_counts(&self) -> Vec<StageLayers> {
        let (pp, vp) = (self.plan.pp, self.plan.vp);
        let positions = (pp * vp).max(1);
        let layers = self.model.num_layers();
        let stage = |layers| StageLayers {
            all: LayerMix { layers, ..LayerMix::default() },
            ..StageLayers::default()
        };
        // The even splits in closed form (an estimate of a deep interleaved pipeline walked its
        // hundreds of chunks here); the balanced split from its chunks.
        let mut stages: Vec<StageLayers> = match self.plan.pipeline_split {
            PipelineSplit::Even => vec![stage(vp * (layers / positions)); pp as usize],
            PipelineSplit::EmbeddingAndLoss => {
                // Every chunk holds `per` units; the first gives one to the embedding, the last
                // one to the loss (chunk 0 is on stage 0, the last chunk on stage pp - 1).
                let per = (layers + 2) / positions;
                (0..pp)
                    .map(|s| stage(vp * per - u64::from(s == 0) - u64::from(s + 1 == pp)))
                    .collect()
            }
            PipelineSplit::Balanced => {
                let mut stages = vec![StageLayers::default(); pp as usize];
                for (position, count) in self.path_layers(positions).into_iter().enumerate() {
                    stages[position % pp as usize].all.layers += count;
                }
                stages
            }
        };
        // One walk along the chunks counts what the layer numbers decide: an MoE model's
        // dense-MLP layers (which lead the model, so their walk stops after them), a hybrid
        // model's kinds and the layers kept in BF16 (which lead and close it).
        let dense_layers = self.model.moe().map_or(0, |moe| moe.dense_layers);
        let whole_walk = self.plan.bf16_layers != (0, 0) || self.model.hybrid().is_some();
        if whole_walk || dense_layers > 0 {
            let mut first = 0;
            for (position, count) in self.path_layers(positions).into_iter().enumerate() {
                if !whole_walk && first >= dense_layers {
                    break;
                }
                let stage = &mut stages[position % pp as usize];
                stage.all.add(LayerMix { layers: 0, ..self.layers_in(first, count) });
                stage.bf16.add(self.bf16_layers_in(first, count));
                first += count;
            }
        }
        stages
    }

    /// A hybrid model's layers of each kind among the `count` layers from layer `first` (all
    /// zero for a model without a pattern).
    pub fn sublayers_in(&self, first: u64, count: u64) -> crate::model::SublayerCounts {
        self.model
            .hybrid()
            .map_or([0; crate::model::SUBLAYER_KINDS], |hybrid| hybrid.counts_in(first, count))
    }

    /// Transformer layers of each of `positions` consecutive chunks along a micro-batch's path
    /// through the pipeline (`pp x vp` chunks; DualPipe's `2 pp`), by the plan's split.
    pub fn path_layers(&self, positions: u64) -> Vec<u64> {
        let mtp = self.model.mtp_layers();
        if self.plan.pipeline_split == PipelineSplit::Balanced && self.model.hybrid().is_some() {
            return hybrid_split::weighted_chunks(&self.model, self.training.seq_len, positions);
        }
        path_layers(self.model.num_layers(), mtp, self.plan.pipeline_split, positions)
    }

    /// Layers with a dense MLP among the `count` layers starting at layer `first` (all of them
    /// for a dense model; DeepSeek-V3's first three otherwise).
    pub fn dense_layers_in(&self, first: u64, count: u64) -> u64 {
        match self.model.moe() {
            None => count,
            Some(moe) => moe.dense_layers.saturating_sub(first).min(count),
        }
    }
}

/// The stack's own rules of a plan: the stack it names, if any, is `stack`, and the engine it
/// names, if any, runs `stack`.
fn check_stack(collector: &mut Collector, plan: &PlanSpec, stack: &Stack) {
    if let Some(named) = &plan.stack
        && named.trim().to_ascii_lowercase() != stack.id()
    {
        collector.add(
            "plan.stack",
            named,
            format!("the run was given the stack `{}`", stack.id()),
            "name the same stack in both places",
        );
    }
    if let (Some(engine), Some(runs_on)) = (plan.engine, stack.engine())
        && engine != runs_on
    {
        collector.add(
            "plan.stack",
            stack.id(),
            format!("is run by {}, not by the plan's engine {}", runs_on.name(), engine.name()),
            format!("leave out --engine, or name a stack of {}", engine.name()),
        );
    }
}

/// The plan as validated: one that names no engine is run by its stack's engine; one that does
/// not say how its gradients are reduced reduces them as its stack does (NeMo's performance
/// recipes in bf16); one that does not say how it shards data-parallel state or what it
/// recomputes does what its stack does by default (torchtitan: FSDP and per-op checkpointing,
/// DeepSpeed: no ZeRO, Megatron-Core: the distributed optimizer and no recompute), and one that
/// does not say whether it runs sequence parallelism runs it as its stack does with tp > 1
/// (Megatron-Core, NeMo and torchtitan: on; DeepSpeed, whose AutoTP has none, Megatron-DeepSpeed
/// and Megatron-LM of 2020-2022: off). A stack whose
/// default recompute depends on memory (the least that fits) leaves it unset, which is none, and
/// a `hybrid` model (per-op checkpointing of its mixers is not modelled) keeps none too.
fn with_stack_defaults(plan: &PlanSpec, stack: &Stack, hybrid: bool) -> PlanSpec {
    let mut plan_spec = plan.clone();
    let defaults = stack.defaults();
    if plan_spec.engine.is_none() {
        plan_spec.engine = stack.engine();
    }
    if plan_spec.grad_reduce_in_fp32.is_none() {
        plan_spec.grad_reduce_in_fp32 = defaults.grad_reduce.map(|dtype| dtype == GradReduce::Fp32);
    }
    let sharding_unstated = plan_spec.zero.is_none()
        && plan_spec.fsdp.is_none()
        && plan_spec.fsdp_mode.is_none()
        && plan_spec.hybrid_shard.is_none();
    if sharding_unstated {
        if defaults.fsdp {
            plan_spec.fsdp = Some(true);
        } else {
            plan_spec.zero = Some(defaults.zero);
        }
    }
    if plan_spec.sequence_parallel.is_none() {
        plan_spec.sequence_parallel = Some(defaults.sequence_parallel);
    }
    let recompute_unstated = plan_spec.recompute.is_none()
        && plan_spec.recompute_num_layers.is_none()
        && plan_spec.recompute_modules.is_none();
    if recompute_unstated {
        plan_spec.recompute =
            defaults.recompute.kind().filter(|kind| !(hybrid && *kind == RecomputeKind::Op));
    }
    plan_spec
}

fn path_layers(num_layers: u64, mtp: u64, split: PipelineSplit, positions: u64) -> Vec<u64> {
    let positions = positions.max(1);
    match split {
        PipelineSplit::Even => vec![num_layers / positions; positions as usize],
        PipelineSplit::EmbeddingAndLoss => {
            let per = (num_layers + 2) / positions;
            (0..positions)
                .map(|p| per - u64::from(p == 0) - u64::from(p + 1 == positions))
                .collect()
        }
        PipelineSplit::Balanced if positions == 1 => vec![num_layers],
        PipelineSplit::Balanced => balanced_layers(num_layers, mtp, positions),
    }
}

/// The balanced split: the embedding, the loss and each MTP module count as one unit beside the
/// layers; the units are spread as evenly as the chunks allow, the extra ones to the middle
/// chunks first, and the first chunk holds the embedding, the last the MTP modules and the loss.
/// DeepSeek-V3 (61 layers, one MTP module) on 32 chunks gives Megatron-Bridge's layout
/// `Et|(tt|)*30mL`.
fn balanced_layers(num_layers: u64, mtp: u64, positions: u64) -> Vec<u64> {
    let last = positions - 1;
    let units = num_layers + 2 + mtp;
    let (base, extra) = (units / positions, units % positions);
    let mut layers: Vec<u64> = (0..positions)
        .map(|p| {
            let size = base + u64::from(p >= 1 && p <= extra);
            let held = u64::from(p == 0) + if p == last { 1 + mtp } else { 0 };
            size.saturating_sub(held)
        })
        .collect();
    // A chunk too small for what it holds takes no layers, which leaves more than the layers
    // placed: take the surplus back from the fullest chunks, the latest first.
    while layers.iter().sum::<u64>() > num_layers {
        let fullest = (0..layers.len()).max_by_key(|&c| layers[c]).unwrap_or(0);
        layers[fullest] -= 1;
    }
    layers
}

/// The spec of `model` on `gpus` H100 SXM in the default precision, for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_spec(
    model: &str,
    gpus: i64,
    seq_len: i64,
    global_batch: i64,
    micro_batch: i64,
    plan: PlanSpec,
) -> RunSpec {
    RunSpec {
        model: crate::presets::model(model).unwrap(),
        cluster: crate::hardware::ClusterSpec {
            gpu: crate::presets::gpu("h100-sxm").unwrap(),
            num_gpus: gpus,
        },
        training: TrainingSpec {
            seq_len,
            global_batch,
            micro_batch: Some(micro_batch),
            precision: None,
        },
        plan,
        data: None,
    }
}

/// A valid run of `model` on `gpus` H100 SXM in the default precision, for the crate's unit
/// tests.
#[cfg(test)]
pub(crate) fn test_run(
    model: crate::model::ModelSpec,
    gpus: i64,
    seq_len: i64,
    global_batch: i64,
    micro_batch: i64,
    plan: PlanSpec,
) -> Run {
    let spec = test_spec("llama3.1-8b", gpus, seq_len, global_batch, micro_batch, plan);
    Run::from_spec(&RunSpec { model, ..spec }).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{PlanSpec, RecomputeKind};
    use crate::presets;

    fn run(plan: PlanSpec) -> Run {
        test_run(presets::model("llama3.1-8b").unwrap(), 16, 8192, 32, 1, plan)
    }

    /// Each stage's layers as the walk along the path counts them: the reference the closed
    /// forms of `stage_layer_counts` must match.
    fn walked(run: &Run) -> Vec<StageLayers> {
        let pp = run.plan().pp();
        let mut stages = vec![StageLayers::default(); pp as usize];
        let mut first = 0;
        for (position, count) in run.path_layers(pp * run.plan().vp()).into_iter().enumerate() {
            let stage = &mut stages[position % pp as usize];
            stage.all.add(run.layers_in(first, count));
            stage.bf16.add(run.bf16_layers_in(first, count));
            first += count;
        }
        stages
    }

    #[test]
    fn a_plan_that_does_not_say_reduces_gradients_as_its_stack_does() {
        let stack_of = |id: &str, grad_reduce_in_fp32: Option<bool>| {
            let plan =
                PlanSpec { stack: Some(id.to_owned()), grad_reduce_in_fp32, ..Default::default() };
            let run = Run::from_spec(&test_spec("llama3.1-8b", 16, 8192, 32, 1, plan)).unwrap();
            run.plan().grad_reduce_in_fp32()
        };
        // NeMo's performance recipes reduce in bf16 (Megatron-Bridge
        // scripts/performance/configs/*: grad_reduce_in_fp32 = False); Megatron-LM keeps fp32.
        assert!(!stack_of("nemo-26.04.01", None));
        assert!(stack_of("megatron-core-0.14-plus", None));
        // A stack without a stated gradient dtype keeps Megatron-LM's and PyTorch's fp32.
        assert!(stack_of("deepspeed", None));
        // What the plan says wins over its stack.
        assert!(stack_of("nemo-26.04.01", Some(true)));
        assert!(!stack_of("megatron-core-0.14-plus", Some(false)));
    }

    #[test]
    fn a_plan_that_does_not_say_shards_and_recomputes_as_its_stack_does() {
        use crate::plan::Sharding;
        let resolved = |model: &str, id: &str, plan: PlanSpec| {
            let plan = PlanSpec { stack: Some(id.to_owned()), ..plan };
            let run = Run::from_spec(&test_spec(model, 16, 8192, 32, 1, plan)).unwrap();
            (run.plan().sharding(), run.plan().fsdp(), run.plan().recompute())
        };
        let unstated = PlanSpec::default();
        // torchtitan shards with FSDP2 and checkpoints per op (its llama3 train configs).
        assert_eq!(
            resolved("llama3.1-8b", "torchtitan-0.2", unstated.clone()),
            (Sharding::Full, true, RecomputeKind::Op)
        );
        assert_eq!(
            resolved("llama3.1-8b", "deepspeed", unstated.clone()),
            (Sharding::None, false, RecomputeKind::None)
        );
        assert_eq!(
            resolved("llama3.1-8b", "megatron-core-0.14-plus", unstated.clone()),
            (Sharding::Optimizer, false, RecomputeKind::None)
        );
        assert_eq!(
            resolved("llama3.1-8b", "megatron-lm-2020-2022", unstated.clone()),
            (Sharding::None, false, RecomputeKind::Full)
        );
        // What the plan says wins; a stated ZeRO stage or FSDP option leaves the stack's aside.
        let stated = PlanSpec {
            zero: Some(2),
            recompute: Some(RecomputeKind::Selective),
            ..PlanSpec::default()
        };
        assert_eq!(
            resolved("llama3.1-8b", "torchtitan-0.2", stated),
            (Sharding::OptimizerAndGradients, false, RecomputeKind::Selective)
        );
        // A layer count alone states the recompute: it needs full recompute said beside it.
        let layers = PlanSpec {
            stack: Some("megatron-lm-2020-2022".into()),
            recompute_num_layers: Some(4),
            ..PlanSpec::default()
        };
        let err = Run::from_spec(&test_spec("llama3.1-8b", 16, 8192, 32, 1, layers)).unwrap_err();
        assert_eq!(err.list()[0].field, "plan.recompute_num_layers");
        // Per-op checkpointing of a hybrid model's mixers is not modelled: such a model keeps none.
        assert_eq!(resolved("nemotronh-8b", "torchtitan-0.2", unstated).2, RecomputeKind::None);
    }

    #[test]
    fn a_plan_that_does_not_say_runs_sequence_parallelism_as_its_stack_does() {
        let sequence_parallel = |id: &str, stated: Option<bool>| {
            let plan = PlanSpec {
                stack: Some(id.to_owned()),
                tp: Some(2),
                sequence_parallel: stated,
                ..PlanSpec::default()
            };
            let run = Run::from_spec(&test_spec("llama3.1-8b", 16, 8192, 32, 1, plan)).unwrap();
            run.plan().sequence_parallel()
        };
        // DeepSpeed's AutoTP has none, Megatron-LM before 2022 had none; Megatron-Core and
        // torchtitan shard the norms over the sequence.
        assert!(!sequence_parallel("deepspeed", None));
        assert!(!sequence_parallel("megatron-lm-2020-2022", None));
        assert!(sequence_parallel("megatron-core-0.14-plus", None));
        assert!(sequence_parallel("torchtitan-0.2", None));
        // What the plan says wins.
        assert!(sequence_parallel("megatron-lm-2020-2022", Some(true)));
        assert!(!sequence_parallel("megatron-core-0.14-plus", Some(false)));
    }

    #[test]
    fn stage_layer_counts_match_the_walk_along_the_path_for_every_split() {
        use crate::plan::PipelineSplit;
        let mut checked = 0;
        let models =
            [("llama3.1-8b", 32), ("deepseek-v3", 61), ("mixtral-8x7b", 32), ("nemotronh-8b", 52)];
        for (model, layers) in models {
            for split in
                [PipelineSplit::Even, PipelineSplit::EmbeddingAndLoss, PipelineSplit::Balanced]
            {
                for (pp, vp) in [(1, 1), (2, 1), (4, 2), (8, 1), (2, 3), (6, 1), (16, 2)] {
                    let plan = PlanSpec {
                        pp: Some(pp),
                        vp: Some(vp),
                        pipeline_split: Some(split),
                        ..PlanSpec::default()
                    };
                    let spec = test_spec(model, 2048, 4096, 4096, 1, plan);
                    let Ok(run) = Run::from_spec(&spec) else { continue };
                    assert_eq!(
                        run.stage_layer_counts(),
                        walked(&run),
                        "{model} {split:?} {pp}x{vp}"
                    );
                    let total: u64 = run.stage_layer_counts().iter().map(|s| s.all.layers).sum();
                    assert!(total <= layers, "{model} {split:?} {pp}x{vp}: {total}");
                    // A hybrid stage's layers are all counted by kind, the model's M, * and -.
                    if run.model().hybrid().is_some() {
                        for stage in run.stage_layer_counts() {
                            let sum: u64 = stage.all.sublayers.iter().map(|&n| u64::from(n)).sum();
                            assert_eq!(sum, stage.all.layers);
                        }
                        let kinds = run.stage_layer_counts().iter().fold(
                            [0; crate::model::SUBLAYER_KINDS],
                            |mut sum, s| {
                                (0..crate::model::SUBLAYER_KINDS)
                                    .for_each(|k| sum[k] += s.all.sublayers[k]);
                                sum
                            },
                        );
                        if total == layers {
                            assert_eq!(kinds, run.model().hybrid().unwrap().counts());
                        }
                    }
                    checked += 1;
                }
            }
        }
        // Every split of every model was checked on several layouts.
        assert!(checked >= 30, "{checked} layouts validated");
    }

    #[test]
    fn memory_labels_name_the_sharding_and_the_recompute() {
        assert_eq!(run(PlanSpec::default()).plan().memory_label(), "zero1 no-recompute");
        let fsdp = PlanSpec { fsdp: Some(true), ..PlanSpec::default() };
        assert_eq!(run(fsdp).plan().memory_label(), "fsdp no-recompute");
        let hsdp = PlanSpec {
            fsdp: Some(true),
            hybrid_shard: Some(8),
            recompute: Some(RecomputeKind::Full),
            ..PlanSpec::default()
        };
        assert_eq!(run(hsdp).plan().memory_label(), "fsdp hsdp8 full32");
        let ddp = PlanSpec {
            zero: Some(0),
            recompute: Some(RecomputeKind::Selective),
            ..PlanSpec::default()
        };
        assert_eq!(run(ddp).plan().memory_label(), "ddp selective");
    }

    #[test]
    fn the_balanced_split_counts_embedding_loss_and_mtp_as_units() {
        // DeepSeek-V3 on pp 16 x vp 2: Megatron-Bridge's `Et|(tt|)*30mL`.
        let layers = balanced_layers(61, 1, 32);
        assert_eq!(layers[0], 1);
        assert!(layers[1..31].iter().all(|&n| n == 2));
        assert_eq!(layers[31], 0);
        // 94 layers over 12 chunks: 96 units, 8 each; the first and last hold 7.
        let layers = balanced_layers(94, 0, 12);
        assert_eq!(layers, [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]);
        // Chunks too small for the ends still place every layer.
        let layers = balanced_layers(3, 2, 4);
        assert_eq!(layers.iter().sum::<u64>(), 3);
    }
}

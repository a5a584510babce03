//! Turning one calibration row into a run, pricing it, and comparing with what was measured.
//!
//! The architecture comes from the row's own columns, with experts, latent attention, head
//! width, sliding windows and MTP from its expert columns and notes (`structure.rs`); its structure
//! (gated or plain MLP, norms, positions, tied embeddings) from the model family its name belongs
//! to. The GPU comes from
//! `gpu_type`, with the network overridden where the row states a different fabric. Blank plan
//! settings come from the software family's defaults (`defaults.rs`). Every guess is recorded in
//! the row's assumptions.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::RowResult;
use super::batch_shape::{BatchShape, batch_shape, virtual_pipeline};
use super::fit::compare_memory;
use super::gpu_type::gpu_preset;
use super::measured::{FlopShape, measured};
use super::recipe_use::{RecipeUse, StatedOther, Subject};
use super::row::{CalibrationRow, count, positive};
use super::row_precision::precision;
use super::row_settings::{experts_plan, recompute, sharding, stated_fsdp, stated_recompute};
use super::stated_kernel::stated_attention;
use super::structure;
use crate::estimate::estimate_simulated_with;
use crate::hardware::{ClusterSpec, Generation};
use crate::model::{MlpKind, ModelSpec, NormKind, PositionEmbedding};
use crate::plan::{PipelineSplit, PlanSpec, RecomputeKind, TrainingSpec};
use crate::presets::{self, StackCatalog};
use crate::run::{Run, RunSpec};
use crate::sim::SimOptions;
use crate::stack::{AttentionKernel, RecipeKernels, Stack};

/// Calibration factor per GPU preset name; a GPU not listed keeps its preset's factor. Fitted by
/// `calibrate.rs`, applied here to the GPU a row maps to.
pub type Calibration = BTreeMap<String, f64>;

/// A row ready to price, with what was assumed to get there.
pub(super) struct Mapped {
    /// The run as the row describes it.
    pub(super) spec: RunSpec,
    gpu: String,
    assumptions: Vec<String>,
    shape: Option<FlopShape>,
    /// The row leaves recompute to its stack, which takes the least that fits memory.
    least_recompute: bool,
    /// The row's recipe runs the routed experts' MLP through the Transformer Engine op fuser.
    fused_grouped_mlp: bool,
    /// The row's recipe runs attention in FP8.
    fp8_attention: bool,
    /// The row's recipe captures the whole iteration in one CUDA graph.
    full_iteration_graphs: bool,
    /// The row says its model ran under `torch.compile` (torchtitan@9dec370 `apply_compile`
    /// compiles each transformer block with `fullgraph=True`).
    compiled: bool,
    /// The attention kernel the row's settings name where its stack names none on its GPU.
    attention: Option<(Generation, AttentionKernel)>,
}

impl Mapped {
    /// The software stack the row's run is priced with: the stack its text names, with the
    /// kernels and launches its recipe chose ([`Stack::with_fused_grouped_mlp`],
    /// [`Stack::with_fp8_attention`], [`Stack::with_full_iteration_graphs`]) and, for a row that
    /// ran under `torch.compile`, compiled ([`Stack::compiled`]).
    pub(super) fn stack(&self, stack: &Arc<Stack>) -> Arc<Stack> {
        let compile = self.compiled && stack.eager_elementwise();
        let changed = self.fused_grouped_mlp
            || self.fp8_attention
            || self.full_iteration_graphs
            || compile
            || self.attention.is_some();
        if !changed {
            return Arc::clone(stack);
        }
        let mut priced = stack.with_recipe_kernels(RecipeKernels {
            fused_grouped_mlp: self.fused_grouped_mlp,
            fp8_attention: self.fp8_attention,
            full_iteration_graphs: self.full_iteration_graphs,
        });
        if compile {
            priced = priced.compiled();
        }
        if let Some((generation, kernel)) = self.attention {
            priced = priced.with_attention(generation, kernel);
        }
        Arc::new(priced)
    }
}

/// A row's result before pricing: what the row states, with no prediction yet.
pub(super) fn stated(row: &CalibrationRow, stack: &Stack) -> RowResult {
    RowResult {
        row_id: row.row_id.clone(),
        source_id: row.source_id.clone(),
        stack: stack.id().to_owned(),
        model: row.model.clone(),
        architecture: row.arch_type.trim().to_owned(),
        context_parallel: count(&row.cp).is_some_and(|cp| cp > 1),
        gpu: gpu_preset(&row.gpu_type)
            .map_or_else(|| row.gpu_type.clone(), |(name, _)| name.to_owned()),
        num_gpus: count(&row.num_gpus),
        plan: None,
        measured_tokens_per_sec_per_gpu: None,
        predicted_tokens_per_sec_per_gpu: None,
        error_pct: None,
        held_out_predicted_tokens_per_sec_per_gpu: None,
        held_out_error_pct: None,
        measured_memory_gib: positive(&row.peak_memory_gib),
        predicted_memory_gib: None,
        memory_error_pct: None,
        memory_breakdown: None,
        memory_counter: None,
        over_capacity: None,
        assumptions: Vec::new(),
        skipped_reason: None,
    }
}

/// Predicts one row, or says why it cannot be predicted, on the software stack the row names
/// ([`CalibrationRow::stack`]).
pub(super) fn evaluate_row(
    row: &CalibrationRow,
    calibration: &Calibration,
    stacks: &StackCatalog,
) -> RowResult {
    let stack = Arc::clone(row.stack(stacks));
    let mut result = stated(row, &stack);
    let mapped = match map_row(row, calibration, &stack) {
        Ok(mapped) => mapped,
        Err(reason) => {
            result.skipped_reason = Some(reason);
            return result;
        }
    };
    let stack = mapped.stack(&stack);
    result.gpu = mapped.gpu.clone();
    result.assumptions = mapped.assumptions.clone();
    let measured = match measured(row, mapped.shape.as_ref()) {
        Ok(measured) => measured,
        Err(reason) => {
            result.skipped_reason = Some(reason);
            return result;
        }
    };
    if measured.how != "tokens_per_sec_per_gpu" {
        result.assumptions.push(format!("measured throughput from {}", measured.how));
    }
    result.measured_tokens_per_sec_per_gpu = Some(measured.tokens_per_sec_per_gpu);
    // A stack that leaves recompute to memory: the least recompute whose run fits.
    let least = mapped.least_recompute;
    let kinds: &[RecomputeKind] = if least {
        &[RecomputeKind::None, RecomputeKind::Selective, RecomputeKind::Full]
    } else {
        &[RecomputeKind::None]
    };
    let mut priced = None;
    for (i, kind) in kinds.iter().enumerate() {
        let mut spec = mapped.spec.clone();
        if least {
            spec.plan.recompute = Some(*kind);
        }
        let run = match Run::from_spec_with_stack(&spec, Arc::clone(&stack)) {
            Ok(run) => run,
            Err(violations) => {
                let problems: Vec<String> = violations
                    .list()
                    .iter()
                    .map(|v| format!("{} = {}: {}", v.field, v.value, v.message))
                    .collect();
                result.skipped_reason = Some(format!("plan not modelled: {}", problems.join("; ")));
                return result;
            }
        };
        let estimate = match estimate_simulated_with(&run, SimOptions { timeline: false }) {
            Ok((estimate, _)) => estimate,
            Err(err) => {
                result.skipped_reason = Some(format!("schedule not simulated: {err}"));
                return result;
            }
        };
        let last = i + 1 == kinds.len();
        if estimate.fits() || last {
            if least {
                result.assumptions.push(format!("recompute {kind:?}: the least that fits"));
            }
            priced = Some((run, estimate));
            break;
        }
    }
    let Some((run, estimate)) = priced else {
        result.skipped_reason = Some("no recompute setting was priced".into());
        return result;
    };
    let predicted = estimate.throughput.tokens_per_sec_per_gpu;
    result.plan = Some(run.plan().label());
    result.predicted_tokens_per_sec_per_gpu = Some(predicted);
    result.error_pct = Some(
        (predicted - measured.tokens_per_sec_per_gpu) / measured.tokens_per_sec_per_gpu * 100.0,
    );
    compare_memory(row, &estimate, &mut result);
    result
}

pub(super) fn map_row(
    row: &CalibrationRow,
    calibration: &Calibration,
    stack: &Stack,
) -> Result<Mapped, String> {
    let (moe, hybrid) = match row.arch_type.trim() {
        "dense" => (false, false),
        "moe" => (true, false),
        "hybrid-mamba" => (false, true),
        "hybrid-mamba-moe" => (true, true),
        other => return Err(format!("architecture type `{other}` is not modelled")),
    };
    let defaults = stack.defaults();
    let mut assumptions = Vec::new();
    let model = if hybrid {
        structure::hybrid_preset(row, &mut assumptions)?
    } else {
        let mut model = model_spec(row, &mut assumptions)?;
        if moe {
            structure::add_experts(row, &mut model, &mut assumptions)?;
        }
        structure::add_attention_notes(row, &mut model, &mut assumptions);
        model
    };
    let (gpu_name, network) =
        gpu_preset(&row.gpu_type).ok_or_else(|| format!("GPU `{}` has no preset", row.gpu_type))?;
    let mut gpu = presets::gpu(gpu_name).map_err(|err| err.to_string())?;
    if let Some(factor) = calibration.get(gpu_name) {
        gpu.efficiency.calibration = Some(*factor);
    }
    if let Some((bandwidth, why)) = network {
        gpu.interconnect.network_bandwidth = bandwidth;
        assumptions.push(why);
    }
    let num_gpus = count(&row.num_gpus).ok_or("GPU count not stated")?;
    let seq_len = count(&row.seq_length).ok_or("sequence length not stated")?;
    let (tp, pp) = match (count(&row.tp), count(&row.pp)) {
        (Some(tp), Some(pp)) => (tp, pp),
        _ => return Err("parallel plan (tp, pp) not stated in the source".into()),
    };
    let cp = count(&row.cp).unwrap_or(1);
    let vp = virtual_pipeline(row, stack, pp, &mut assumptions);
    let largest = crate::limits::PARALLEL_SIZE;
    if [num_gpus, tp, pp, cp, vp].iter().any(|&n| n > largest) {
        return Err(format!("a GPU count or parallel size above {largest}"));
    }
    // Each at most 2^20: the product of three fits in u64.
    let model_parallel = tp * pp * cp;
    if model_parallel > num_gpus {
        return Err(format!(
            "tp {tp} x pp {pp} x cp {cp} = {model_parallel} needs more than the {num_gpus} GPUs"
        ));
    }
    let dp = num_gpus / model_parallel;
    let precision = precision(row, stack, defaults, gpu_name, &mut assumptions)?;
    let BatchShape { micro_batch, global_batch } =
        batch_shape(row, stack, dp, pp, &mut assumptions)?;
    let mut plan = PlanSpec {
        tp: Some(tp as i64),
        pp: Some(pp as i64),
        vp: Some(vp as i64),
        cp: Some(cp as i64),
        dp: count(&row.dp).map(|v| v as i64),
        ..PlanSpec::default()
    };
    let layers = model.num_layers as u64;
    if pp > 1 && !layers.is_multiple_of(pp * vp) {
        if (layers + 2).is_multiple_of(pp * vp) && defaults.uneven_split_counts_embedding_and_loss {
            plan.pipeline_split = Some(PipelineSplit::EmbeddingAndLoss);
            assumptions.push(format!(
                "{layers} layers do not split evenly over pp {pp} x vp {vp}: embedding and loss counted as layers ({} rule)",
                stack.id()
            ));
        } else {
            plan.pipeline_split = Some(PipelineSplit::Balanced);
            assumptions.push(format!(
                "{layers} layers do not split evenly over pp {pp} x vp {vp}: embedding, loss and MTP modules counted with the layers and spread evenly (a custom pipeline layout)"
            ));
        }
    }
    if moe {
        experts_plan(row, model.name.as_str(), stack, &mut plan, &mut assumptions);
    }
    // Row > the stack's recipe for this model, GPU and precision > the stack's defaults.
    let layers_per_stage = layers.div_ceil(pp);
    let mut recipe = RecipeUse::find(
        stack,
        (&row.model, gpu_name),
        precision,
        num_gpus,
        layers_per_stage,
        Subject::Row,
    );
    recipe.check_sharding(stated_fsdp(row));
    sharding(row, defaults, dp, &mut plan, &mut assumptions, &mut recipe);
    let from_recipe = stated_recompute(row).is_none() && recipe.recompute(&model, &mut plan);
    let least_recompute = !from_recipe && recompute(row, defaults, &mut plan, &mut assumptions);
    let settings = row.other_settings.to_ascii_lowercase();
    let stated = StatedOther {
        offload: settings.contains("offload"),
        dispatch: settings.contains("dispatcher"),
        expert_overlap: settings.contains("a2a") || settings.contains("overlap-moe"),
    };
    recipe.other_settings(stated, moe, &mut plan);
    let fused_grouped_mlp = moe && recipe.fused_grouped_mlp();
    let fp8_attention = recipe.fp8_attention();
    let full_iteration_graphs = moe && recipe.full_iteration_graphs();
    let tp_overlap_stated = settings.contains("async tp") || settings.contains("tp-comm-overlap");
    let recipe_tp_overlap = recipe.tp_comm_overlap(tp_overlap_stated, tp);
    recipe.bf16_layers(settings.contains("bf16-layers"), layers_per_stage, &mut plan);
    if let Some(text) = recipe.assumption(stack.id(), gpu_name, precision) {
        assumptions.push(text);
    }
    let attention =
        stated_attention(row, stack, gpu.generation).map(|(generation, kernel, why)| {
            assumptions.push(why);
            (generation, kernel)
        });
    let compiled = settings.contains("torch.compile");
    if compiled && stack.eager_elementwise() {
        assumptions.push(format!(
            "torch.compile (row's settings): norms and activations fused by Inductor, not {}'s eager kernels",
            stack.id()
        ));
    }
    let sp_stated = row.sequence_parallel.trim().to_ascii_lowercase();
    plan.sequence_parallel =
        Some(if sp_stated.starts_with("yes") || settings.contains("--sequence-parallel") {
            true
        } else if sp_stated.starts_with("no") {
            false
        } else {
            defaults.sequence_parallel
        });
    plan.tp_comm_overlap = Some(recipe_tp_overlap.unwrap_or(
        defaults.tp_comm_overlap
            || settings.contains("async tp")
            || settings.contains("tp-comm-overlap"),
    ));
    plan.overlap_grad_reduce = Some(match row.zero_or_fsdp.to_ascii_lowercase() {
        z if z.contains("ddp-impl local") => false,
        z if z.contains("ddp-impl torch") => true,
        _ => defaults.overlap_grad_reduce || settings.contains("overlap-grad-reduce"),
    });
    if tp > 1 && stack.defaults().tp_comm_overlap {
        let what = recipe_tp_overlap
            .map_or("sequence parallel and TP communication overlap", |_| "sequence parallel");
        assumptions.push(format!(
            "{}: {what} by its defaults ({})",
            stack.id(),
            stack.sources().get("defaults.tp_comm_overlap").map_or("", String::as_str)
        ));
    }
    // The published FLOP formulas (to turn a TFLOP/s figure into tokens/s) are dense ones; MoE
    // rows are compared on the throughput they state.
    let shape = (!moe).then(|| FlopShape {
        layers: model.num_layers as f64,
        hidden: model.hidden_size as f64,
        ffn: model.ffn_hidden_size as f64,
        heads: model.num_attention_heads as f64,
        kv_heads: model.num_kv_heads.unwrap_or(model.num_attention_heads) as f64,
        vocab: model.vocab_size as f64,
        seq: seq_len as f64,
        gated: model.mlp == MlpKind::Gated,
    });
    let spec = RunSpec {
        model,
        cluster: ClusterSpec { gpu, num_gpus: num_gpus as i64 },
        training: TrainingSpec {
            seq_len: seq_len as i64,
            global_batch: global_batch as i64,
            micro_batch: Some(micro_batch as i64),
            precision: Some(precision),
        },
        plan: PlanSpec { stack: Some(stack.id().to_owned()), ..plan },
        data: None,
    };
    Ok(Mapped {
        spec,
        gpu: gpu_name.to_owned(),
        assumptions,
        shape,
        least_recompute,
        fused_grouped_mlp,
        full_iteration_graphs,
        fp8_attention,
        compiled,
        attention,
    })
}

/// The architecture from the row's columns and the structure of its model family.
fn model_spec(row: &CalibrationRow, assumptions: &mut Vec<String>) -> Result<ModelSpec, String> {
    // Bounded here, before any arithmetic of the mapping reads them (the model's own validation
    // comes later): a cell of 10^25 layers is a reason to skip the row, not an overflow.
    let field = |cell: &str, name: &str| {
        let value =
            count(cell).ok_or_else(|| format!("architecture incomplete: `{name}` not stated"))?;
        let bound = crate::limits::model_field(name);
        if value > bound {
            return Err(format!("`{name}` = {value} is above the {bound} meshplan prices"));
        }
        Ok(value)
    };
    let layers = field(&row.num_layers, "num_layers")?;
    let hidden = field(&row.hidden_size, "hidden_size")?;
    let heads = field(&row.num_attention_heads, "num_attention_heads")?;
    let ffn = match count(&row.ffn_hidden_size) {
        Some(ffn) => ffn,
        None => {
            assumptions.push("ffn_hidden_size = 4 x hidden (Megatron-LM default)".into());
            4 * hidden
        }
    };
    let seq = count(&row.seq_length).unwrap_or(2048);
    let name = row.model.to_ascii_lowercase();
    // Gated (SwiGLU) MLPs, RMSNorm, RoPE and untied embeddings: Llama and every later family in
    // the file (Mistral/Mixtral, Qwen, DeepSeek-V3 and Kimi K2, GPT-OSS) as their configs state.
    let llama_like =
        ["llama", "mistral", "mixtral", "qwen", "deepseek", "kimi", "gpt-oss", "gpt oss"]
            .iter()
            .any(|family| name.contains(family));
    let mpt = name.contains("mpt");
    let bloom = name.contains("bloom");
    let nemotron = name.contains("nemotron");
    let vocab = match count(&row.vocab_size) {
        Some(vocab) => vocab,
        None if nemotron => {
            assumptions.push("vocab_size = 256000 (Nemotron tokenizer)".into());
            256_000
        }
        None => {
            assumptions
                .push("vocab_size = 50257 (GPT-2 BPE, as the NeMo GPT-3 recipes use)".into());
            50_257
        }
    };
    let (mlp, norm, position, tied, bias, dropout, family) = if llama_like {
        (
            MlpKind::Gated,
            NormKind::Rmsnorm,
            PositionEmbedding::Rope,
            false,
            false,
            false,
            "Llama-family",
        )
    } else if nemotron {
        (
            MlpKind::Plain,
            NormKind::Layernorm,
            PositionEmbedding::Rope,
            false,
            false,
            false,
            "Nemotron",
        )
    } else if mpt {
        // llm-foundry's benchmark configs: learned positions sized to the run and biases (their
        // NumParams match exactly only with both, see presets/models/mpt-*.toml).
        (
            MlpKind::Plain,
            NormKind::Layernorm,
            PositionEmbedding::Learned,
            true,
            true,
            false,
            "MPT benchmark",
        )
    } else if bloom {
        (MlpKind::Plain, NormKind::Layernorm, PositionEmbedding::Alibi, true, true, false, "BLOOM")
    } else {
        (
            MlpKind::Plain,
            NormKind::Layernorm,
            PositionEmbedding::Learned,
            true,
            true,
            true,
            "Megatron GPT",
        )
    };
    assumptions.push(format!(
        "{family} structure: {mlp:?} MLP, {norm:?}, {position:?} positions, tied embeddings {tied}"
    ));
    Ok(ModelSpec {
        name: row.model.clone(),
        display_name: Some(row.model.clone()),
        source: Some(format!("calibration row {}", row.row_id)),
        num_layers: layers as i64,
        hidden_size: hidden as i64,
        ffn_hidden_size: ffn as i64,
        num_attention_heads: heads as i64,
        num_kv_heads: count(&row.num_kv_heads).map(|v| v as i64),
        head_dim: None,
        vocab_size: vocab as i64,
        max_position_embeddings: Some(seq as i64),
        mlp,
        norm: Some(norm),
        position_embedding: Some(position),
        rope_scaling: None,
        tied_embeddings: tied,
        linear_bias: bias,
        dropout,
        glu_clamp: false,
        moe: None,
        mla: None,
        sliding_window: None,
        mtp_layers: None,
        mtp_shared_weights: false,
        hybrid_pattern: None,
        mamba: None,
        linear_attention: None,
        lightning_attention: None,
        mamba1: None,
        attention_output_gate: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Precision;

    fn stacks() -> StackCatalog {
        StackCatalog::builtin().unwrap()
    }

    #[test]
    fn gpu_types_map_to_presets_and_stated_fabrics() {
        assert_eq!(gpu_preset("GB200 (DGX-GB200 NVL72)").unwrap().0, "gb200");
        assert_eq!(gpu_preset("B200 (DGX-B200)").unwrap().0, "b200");
        assert_eq!(
            gpu_preset("A800-SXM4-80GB (DGX A800, IB 200Gb/s; table labels it A100)").unwrap().0,
            "a800"
        );
        let (name, network) = gpu_preset("A100-SXM4-80GB (Jean Zay, 8/node, 4x OmniPath)").unwrap();
        assert_eq!(name, "a100-80gb");
        assert_eq!(network.unwrap().0, "50 Gb/s");
        assert!(gpu_preset("TPU v5p").is_none());
    }

    fn dense_row() -> CalibrationRow {
        CalibrationRow {
            row_id: "1".into(),
            source_id: "megatron_bridge_perf".into(),
            model: "LLAMA3_8B".into(),
            arch_type: "dense".into(),
            num_layers: "32".into(),
            hidden_size: "4096".into(),
            ffn_hidden_size: "14336".into(),
            num_attention_heads: "32".into(),
            num_kv_heads: "8".into(),
            vocab_size: "128256".into(),
            seq_length: "8192".into(),
            gpu_type: "H100-SXM5-80GB (DGX-H100)".into(),
            num_gpus: "8".into(),
            tp: "1".into(),
            pp: "1".into(),
            cp: "1".into(),
            micro_batch_size: "1".into(),
            global_batch_size: "128".into(),
            precision: "FP8".into(),
            tokens_per_sec_per_gpu: "14000".into(),
            ..CalibrationRow::default()
        }
    }

    #[test]
    fn a_dense_row_is_priced_with_its_family_defaults_listed() {
        let result = evaluate_row(&dense_row(), &Calibration::new(), &stacks());
        assert_eq!(result.skipped_reason, None);
        assert_eq!(result.plan.as_deref(), Some("tp1 pp1 vp1 cp1 dp8"));
        let error = result.error_pct.unwrap();
        let predicted = result.predicted_tokens_per_sec_per_gpu.unwrap();
        assert!((error - (predicted / 14000.0 - 1.0) * 100.0).abs() < 1e-9);
        let assumptions = result.assumptions.join("\n");
        assert!(assumptions.contains("FP8 recipe fp8-delayed"), "{assumptions}");
        assert!(assumptions.contains("data-parallel sharding not stated"), "{assumptions}");
    }

    #[test]
    fn rows_that_cannot_be_priced_say_why() {
        let moe = CalibrationRow { arch_type: "moe".into(), ..dense_row() };
        let reason = evaluate_row(&moe, &Calibration::new(), &stacks()).skipped_reason.unwrap();
        assert!(reason.contains("`num_experts` not stated"), "{reason}");
        // A hybrid row's shape comes from the preset of its model name: one without is skipped.
        let mamba = CalibrationRow { arch_type: "hybrid-mamba-moe".into(), ..dense_row() };
        let reason = evaluate_row(&mamba, &Calibration::new(), &stacks()).skipped_reason.unwrap();
        assert!(reason.contains("has no hybrid preset"), "{reason}");
        let nano = CalibrationRow {
            arch_type: "hybrid-mamba-moe".into(),
            model: "Nemotron_3_Nano".into(),
            num_gpus: "8".into(),
            ep: "8".into(),
            ..dense_row()
        };
        let result = evaluate_row(&nano, &Calibration::new(), &stacks());
        assert_eq!(result.skipped_reason, None);
        assert!(result.assumptions.iter().any(|a| a.contains("preset nemotron-3-nano")));
        let no_plan = CalibrationRow { tp: String::new(), ..dense_row() };
        let reason = evaluate_row(&no_plan, &Calibration::new(), &stacks()).skipped_reason.unwrap();
        assert!(reason.contains("not stated"), "{reason}");
        let too_many_experts = CalibrationRow { ep: "3".into(), ..moe_row() };
        let reason =
            evaluate_row(&too_many_experts, &Calibration::new(), &stacks()).skipped_reason.unwrap();
        assert!(reason.contains("plan.ep = 3"), "{reason}");
    }

    fn moe_row() -> CalibrationRow {
        CalibrationRow {
            arch_type: "moe".into(),
            num_experts: "8".into(),
            moe_top_k: "2".into(),
            moe_ffn_hidden_size: "14336".into(),
            ep: "8".into(),
            ..dense_row()
        }
    }

    #[test]
    fn a_plan_needing_more_gpus_than_the_row_has_is_skipped_with_its_reason() {
        let row =
            CalibrationRow { tp: "8".into(), pp: "4".into(), num_gpus: "8".into(), ..dense_row() };
        let result = evaluate_row(&row, &Calibration::new(), &stacks());
        let reason = result.skipped_reason.unwrap();
        assert!(reason.contains("needs more than the 8 GPUs"), "{reason}");
        let huge = CalibrationRow { tp: "4294967296".into(), ..dense_row() };
        assert!(evaluate_row(&huge, &Calibration::new(), &stacks()).skipped_reason.is_some());
    }

    #[test]
    fn moe_rows_are_priced_with_their_experts_and_uneven_splits_balanced() {
        let uneven = CalibrationRow { pp: "3".into(), num_gpus: "24".into(), ..moe_row() };
        let result = evaluate_row(&uneven, &Calibration::new(), &stacks());
        assert_eq!(result.skipped_reason, None);
        assert_eq!(result.plan.as_deref(), Some("tp1 pp3 vp1 cp1 dp8 ep8 etp1 split-balanced"));
        let assumptions = result.assumptions.join("\n");
        assert!(assumptions.contains("experts: 8 routed (top-2"), "{assumptions}");
        assert!(assumptions.contains("spread evenly (a custom pipeline layout)"), "{assumptions}");
    }

    #[test]
    fn a_nemo_row_leaving_settings_blank_takes_its_releases_recipe_and_says_so() {
        use crate::plan::RecomputeModule;
        let stacks = stacks();
        let llama = CalibrationRow {
            model: "LLAMA3_70B".into(),
            num_layers: "80".into(),
            hidden_size: "8192".into(),
            ffn_hidden_size: "28672".into(),
            num_attention_heads: "64".into(),
            gpu_type: "GB200 (DGX-GB200 NVL72)".into(),
            num_gpus: "64".into(),
            precision: "FP8-CS".into(),
            software_or_release: "NeMo 25.11 container (Megatron-Bridge 0.2.0)".into(),
            ..dense_row()
        };
        let stack = stacks.for_software(&llama.software_or_release);
        let mapped = map_row(&llama, &Calibration::new(), stack).unwrap();
        assert_eq!(mapped.spec.plan.offload_activation_layers, Some(40));
        assert_eq!((mapped.spec.plan.fsdp, mapped.spec.plan.zero), (Some(true), None));
        let text = mapped.assumptions.join("\n");
        assert!(
            text.contains("nemo-25.11 recipe for LLAMA3_70B on gb200 fp8-current: Megatron-FSDP, activation offload 40 layers (NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/llama3/"),
            "{text}"
        );
        assert!(!text.contains("sharding not stated"), "{text}");
        // A row whose pipeline cannot hold the recipe's offloaded layers ran another layout.
        let piped = CalibrationRow { pp: "8".into(), num_gpus: "64".into(), ..llama.clone() };
        let mapped = map_row(&piped, &Calibration::new(), stack).unwrap();
        assert_eq!(
            (mapped.spec.plan.fsdp, mapped.spec.plan.offload_activation_layers),
            (None, None)
        );
        let text = mapped.assumptions.join("\n");
        assert!(text.contains("not used: its activation offload of 40 layers"), "{text}");
        // What the row states wins: no FSDP, its own recompute.
        let stated = CalibrationRow {
            zero_or_fsdp: "DDP (FSDP=0)".into(),
            activation_recompute: "full".into(),
            ..llama.clone()
        };
        let mapped = map_row(&stated, &Calibration::new(), stack).unwrap();
        assert_eq!((mapped.spec.plan.fsdp, mapped.spec.plan.zero), (None, Some(1)));
        assert_eq!(mapped.spec.plan.recompute, Some(RecomputeKind::Full));
        // A recipe's recompute modules replace the stack's default recompute.
        let gpt_oss = CalibrationRow {
            model: "GPT OSS 120B".into(),
            software_or_release: "NeMo 25.11 container (Megatron-Bridge 0.2.0)".into(),
            precision: "BF16".into(),
            ..moe_row()
        };
        let stack = stacks.for_software(&gpt_oss.software_or_release);
        let mapped = map_row(&gpt_oss, &Calibration::new(), stack).unwrap();
        assert_eq!(mapped.spec.plan.recompute, Some(RecomputeKind::Selective));
        assert_eq!(
            mapped.spec.plan.recompute_modules,
            Some(vec![RecomputeModule::Layernorm, RecomputeModule::MoeAct])
        );
        assert!(!mapped.least_recompute);
        let text = mapped.assumptions.join("\n");
        assert!(text.contains("selective recompute of layernorm+moe_act"), "{text}");
        assert!(!text.contains("activation recompute not stated"), "{text}");
        let result = evaluate_row(&gpt_oss, &Calibration::new(), &stacks);
        assert_eq!(result.skipped_reason, None);
    }

    #[test]
    fn a_row_that_ran_under_torch_compile_is_priced_without_eager_norms_and_activations() {
        let stacks = stacks();
        let eager = CalibrationRow {
            source_id: "torchtitan_202412".into(),
            software_or_release: "torchtitan 9dec370 / torch 1963fc8".into(),
            other_settings: "local batch size 2; eager".into(),
            ..dense_row()
        };
        let compiled = CalibrationRow {
            other_settings: "local batch size 2; torch.compile".into(),
            ..eager.clone()
        };
        let stack = Arc::clone(stacks.for_software(&eager.software_or_release));
        assert!(stack.eager_elementwise());
        let mapped = map_row(&eager, &Calibration::new(), &stack).unwrap();
        assert!(mapped.stack(&stack).eager_elementwise());
        let mapped = map_row(&compiled, &Calibration::new(), &stack).unwrap();
        assert!(!mapped.stack(&stack).eager_elementwise());
        assert!(mapped.assumptions.iter().any(|a| a.starts_with("torch.compile")));
        // A stack whose norms are fused already is left as it is.
        let fused = Arc::clone(stacks.for_software("NeMo 25.11 container"));
        let mapped = map_row(&compiled, &Calibration::new(), &fused).unwrap();
        assert!(Arc::ptr_eq(&mapped.stack(&fused), &fused));
    }

    #[test]
    fn torchtitan_per_op_checkpointing_is_its_own_recompute_kind() {
        let stated = |text: &str| {
            let row = CalibrationRow { activation_recompute: text.into(), ..dense_row() };
            let mut plan = PlanSpec::default();
            let stack = crate::presets::stack("torchtitan-2024-12").unwrap();
            recompute(&row, stack.defaults(), &mut plan, &mut Vec::new());
            plan.recompute.unwrap()
        };
        assert_eq!(stated("selective (per-op SAC per default config)"), RecomputeKind::Op);
        assert_eq!(stated("selective"), RecomputeKind::Selective);
        assert_eq!(stated(""), RecomputeKind::Op);
    }

    #[test]
    fn block_scaled_rows_are_mxfp8_on_blackwell_and_blockwise_fp8_on_hopper() {
        let text =
            "FP8 block-scaled (GB200/B200: MXFP8 32x32; H100: 128x128 weights / 1x128 activations)";
        let row = CalibrationRow { precision: text.into(), ..dense_row() };
        let stack = crate::presets::stack("nemo-26.04").unwrap();
        let on = |gpu| precision(&row, &stack, stack.defaults(), gpu, &mut Vec::new()).unwrap();
        assert_eq!(on("h100-sxm"), Precision::Fp8Blockwise);
        assert_eq!(on("gb200"), Precision::Mxfp8);
    }

    #[test]
    fn later_model_families_keep_their_gated_mlp_rmsnorm_and_rope() {
        for model in ["DeepSeekV3", "Kimi_K2", "GPT OSS 120B", "GPT-OSS 20B", "Mixtral-8x7B"] {
            let row = CalibrationRow { model: model.into(), ..moe_row() };
            let mut assumptions = Vec::new();
            let spec = model_spec(&row, &mut assumptions).unwrap();
            assert_eq!(spec.mlp, MlpKind::Gated, "{model}");
            assert_eq!(spec.norm, Some(NormKind::Rmsnorm), "{model}");
            assert_eq!(spec.position_embedding, Some(PositionEmbedding::Rope), "{model}");
            assert!(!spec.tied_embeddings && !spec.dropout, "{model}");
        }
        let gpt3 = CalibrationRow { model: "GPT3-175B".into(), ..dense_row() };
        let spec = model_spec(&gpt3, &mut Vec::new()).unwrap();
        assert_eq!(spec.mlp, MlpKind::Plain);
        assert_eq!(spec.position_embedding, Some(PositionEmbedding::Learned));
    }
}

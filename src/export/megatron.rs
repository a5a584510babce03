//! Megatron-LM `pretrain_gpt.py` arguments (`pretrain_mamba.py` for hybrid models; names from `megatron/training/arguments.py`,
//! core_v0.15.0, reference section 2; the hybrid context-parallel flags and
//! `--cpu-offloading-num-layers` are core_v0.16.0's), one flag per line, ready for a launch
//! script.

use crate::data::Batching;
use crate::model::{MlpKind, NormKind, PositionEmbedding};
use crate::plan::{
    AdamMoments, CpComm, ExpertDispatch, PipelineSplit, Precision, RecomputeKind, RecomputeModules,
    Sharding,
};
use crate::run::Run;

use super::megatron_release::for_release;
use super::refusal::Refusal;

fn precision_flags(precision: Precision) -> Vec<String> {
    let fp8 = |recipe: &str| {
        vec!["--bf16".into(), "--fp8-format hybrid".into(), format!("--fp8-recipe {recipe}")]
    };
    match precision {
        Precision::Bf16 => vec!["--bf16".into()],
        Precision::Fp16 => vec!["--fp16".into()],
        Precision::Fp8Delayed => fp8("delayed"),
        Precision::Fp8Current => fp8("tensorwise"),
        Precision::Fp8Blockwise => fp8("blockwise"),
        Precision::Mxfp8 => fp8("mxfp8"),
        Precision::Nvfp4 => vec!["--bf16".into(), "--fp4-format e2m1".into()],
    }
}

/// Mixture-of-experts flags: experts, router, the dense-layer pattern, expert parallelism and
/// token handling (alltoall dispatcher, grouped GEMM, dropless unless a capacity factor is set).
fn moe_flags(run: &Run, moe: &crate::model::Moe) -> Vec<String> {
    let (model, plan) = (run.model(), run.plan());
    let mut args = vec![
        format!("--num-experts {}", moe.num_experts),
        format!("--moe-router-topk {}", moe.top_k),
        format!("--moe-ffn-hidden-size {}", moe.expert_ffn_hidden_size),
    ];
    if moe.shared_ffn_hidden_size > 0 {
        args.push(format!("--moe-shared-expert-intermediate-size {}", moe.shared_ffn_hidden_size));
    }
    if moe.dense_layers > 0 {
        let sparse = model.num_layers() - moe.dense_layers;
        args.push(format!("--moe-layer-freq \"([0]*{}+[1]*{sparse})\"", moe.dense_layers));
    }
    args.push("--moe-grouped-gemm".into());
    match plan.expert_dispatch() {
        ExpertDispatch::AllToAll => args.push("--moe-token-dispatcher-type alltoall".into()),
        ExpertDispatch::Deduplicated => {
            args.push("--moe-token-dispatcher-type flex".into());
            args.push("--moe-enable-deepep".into());
        }
    }
    args.push("--moe-router-load-balancing-type aux_loss".into());
    args.push(format!("--expert-model-parallel-size {}", plan.ep()));
    args.push(format!("--expert-tensor-parallel-size {}", plan.etp()));
    if let Some(capacity) = plan.moe_capacity_factor() {
        args.push(format!("--moe-expert-capacity-factor {capacity}"));
        args.push("--moe-token-drop-policy probs".into());
    }
    if plan.expert_comm_overlap() {
        args.push("--overlap-moe-expert-parallel-comm".into());
    }
    if moe.latent_size > 0 {
        args.push(format!("--moe-latent-size {}", moe.latent_size));
    }
    if model.mtp_layers() > 0 {
        args.push(format!("--mtp-num-layers {}", model.mtp_layers()));
        if model.mtp_weight_sets() < model.mtp_layers() {
            args.push("--mtp-use-repeated-layer".into());
        }
        if model.hybrid().is_some() {
            // Each MTP module of a hybrid model is an attention layer and an expert layer.
            args.push("--mtp-hybrid-override-pattern \"*E\"".into());
        }
    }
    args
}

/// A `--pipeline-model-parallel-layout` string for the balanced split: the chunks in path order
/// (`pp x vp`), `E` (embedding) first, `m` (MTP) and `L` (loss) last, `|` between chunks.
fn layout(run: &Run) -> String {
    let plan = run.plan();
    let chunks = run.path_layers(plan.pp() * plan.vp());
    let last = chunks.len() - 1;
    let mut stages = Vec::with_capacity(chunks.len());
    for (index, layers) in chunks.into_iter().enumerate() {
        let mut stage = String::new();
        if index == 0 {
            stage.push('E');
        }
        stage.push_str(&"t".repeat(layers as usize));
        if index == last {
            stage.push_str(&"m".repeat(run.model().mtp_layers() as usize));
            stage.push('L');
        }
        stages.push(stage);
    }
    stages.join("|")
}

/// A hybrid model's pattern, with Megatron-Core 0.17's `|` stage boundaries between the chunks
/// of a balanced split (each chunk's layers in path order).
fn hybrid_pattern(run: &Run, hybrid: &crate::model::Hybrid) -> String {
    let plan = run.plan();
    let text = hybrid.pattern_text();
    let positions = plan.pp() * plan.vp();
    if plan.pipeline_split() != PipelineSplit::Balanced || positions == 1 {
        return text;
    }
    let mut chunks = Vec::new();
    let mut first = 0;
    for count in run.path_layers(positions) {
        let end = (first + count as usize).min(text.len());
        chunks.push(&text[first..end]);
        first = end;
    }
    chunks.join("|")
}

/// The arguments for the run's stack, one per line: core_v0.15.0's names (and core_v0.16.0's
/// where only it has the flag), respelled for a stack of an older release; every flag that
/// release lacks as a refusal instead.
pub fn arguments(run: &Run) -> Result<String, Vec<Refusal>> {
    let (arguments, refused) = for_stack(run);
    if !refused.is_empty() {
        return Err(refused);
    }
    let mut out = String::new();
    for argument in arguments {
        out.push_str(&argument);
        out.push('\n');
    }
    Ok(out)
}

/// The arguments for the run's stack and what its release lacks (`megatron_release.rs`).
pub fn for_stack(run: &Run) -> (Vec<String>, Vec<Refusal>) {
    let arguments = newest_arguments(run);
    match run.stack().megatron_arguments().minor() {
        Some(minor) => for_release(run, arguments, minor),
        None => (arguments, Vec::new()),
    }
}

/// The arguments of the newest release meshplan writes, in order.
fn newest_arguments(run: &Run) -> Vec<String> {
    let (model, plan, training) = (run.model(), run.plan(), run.training());
    let mut args: Vec<String> = vec![
        format!("--num-layers {}", model.num_layers()),
        format!("--hidden-size {}", model.hidden_size()),
        format!("--ffn-hidden-size {}", model.ffn_hidden_size()),
        format!("--num-attention-heads {}", model.num_attention_heads()),
    ];
    match model.mla() {
        None => args.push(format!("--kv-channels {}", model.head_dim())),
        Some(mla) => {
            args.push("--multi-latent-attention".into());
            if mla.q_lora_rank > 0 {
                args.push(format!("--q-lora-rank {}", mla.q_lora_rank));
            }
            args.push(format!("--kv-lora-rank {}", mla.kv_lora_rank));
            args.push(format!("--qk-head-dim {}", mla.qk_nope_head_dim));
            args.push(format!("--qk-pos-emb-head-dim {}", mla.qk_rope_head_dim));
            args.push(format!("--v-head-dim {}", mla.v_head_dim));
        }
    }
    if let Some(hybrid) = model.hybrid() {
        // Megatron-LM's hybrid stack (pretrain_mamba.py): one pattern symbol per layer.
        args.push(format!("--hybrid-override-pattern \"{}\"", hybrid_pattern(run, hybrid)));
        if let Some(mamba) = hybrid.mamba {
            args.push(format!("--mamba-num-heads {}", mamba.num_heads));
            args.push(format!("--mamba-head-dim {}", mamba.head_dim));
            args.push(format!("--mamba-state-dim {}", mamba.state_size));
            args.push(format!("--mamba-num-groups {}", mamba.num_groups));
        }
    }
    if model.num_kv_heads() != model.num_attention_heads() {
        args.push("--group-query-attention".into());
        args.push(format!("--num-query-groups {}", model.num_kv_heads()));
    }
    args.push(format!("--vocab-size {}", model.vocab_size()));
    args.push(format!("--seq-length {}", training.seq_len()));
    args.push(format!(
        "--max-position-embeddings {}",
        model.max_position_embeddings().max(training.seq_len())
    ));
    if model.mlp() == MlpKind::Gated {
        args.push("--swiglu".into());
    } else if model.hybrid().is_some() {
        // Nemotron-H and Nemotron 3 MLPs and experts use squared ReLU.
        args.push("--squared-relu".into());
    }
    if model.norm() == NormKind::Rmsnorm {
        args.push("--normalization RMSNorm".into());
    }
    let position = match model.position_embedding() {
        PositionEmbedding::Rope => "rope",
        PositionEmbedding::Learned => "learned_absolute",
        PositionEmbedding::Alibi | PositionEmbedding::None => "none",
    };
    args.push(format!("--position-embedding-type {position}"));
    if !model.tied_embeddings() {
        args.push("--untie-embeddings-and-output-weights".into());
    }
    if !model.linear_bias() {
        args.push("--disable-bias-linear".into());
    }
    args.push(format!("--micro-batch-size {}", training.micro_batch()));
    args.push(format!("--global-batch-size {}", training.global_batch()));
    args.extend(precision_flags(training.precision()));
    if plan.adam_moments() == AdamMoments::Bf16 {
        args.push("--use-precision-aware-optimizer".into());
        args.push("--exp-avg-dtype bf16".into());
        args.push("--exp-avg-sq-dtype bf16".into());
    }
    args.push(format!("--tensor-model-parallel-size {}", plan.tp()));
    args.push(format!("--pipeline-model-parallel-size {}", plan.pp()));
    if plan.vp() > 1 {
        args.push(format!("--num-virtual-stages-per-pipeline-rank {}", plan.vp()));
    }
    match plan.pipeline_split() {
        PipelineSplit::Even => {}
        PipelineSplit::EmbeddingAndLoss => {
            args.push("--account-for-embedding-in-pipeline-split".into());
            args.push("--account-for-loss-in-pipeline-split".into());
        }
        // A hybrid model's chunks are the `|` boundaries of its pattern.
        PipelineSplit::Balanced if model.hybrid().is_some() => {}
        PipelineSplit::Balanced => {
            args.push(format!("--pipeline-model-parallel-layout \"{}\"", layout(run)));
        }
    }
    if plan.cp() > 1 {
        args.push(format!("--context-parallel-size {}", plan.cp()));
        let (a2a, ring) = (plan.cp_a2a(), plan.cp_ring());
        match plan.cp_comm() {
            CpComm::Ring => args.push("--cp-comm-type p2p".into()),
            CpComm::AllToAll => args.push("--cp-comm-type a2a".into()),
            CpComm::Hierarchical if ring == 1 => args.push("--cp-comm-type a2a".into()),
            CpComm::Hierarchical if a2a == 1 => args.push("--cp-comm-type p2p".into()),
            CpComm::Hierarchical => {
                args.push("--cp-comm-type a2a+p2p".into());
                args.push(format!("--hierarchical-context-parallel-sizes {a2a} {ring}"));
            }
            // No release has it: `export` refuses the plan before its flags are written
            // (`Refusal::CpComm`).
            CpComm::Mesh => {}
        }
    }
    if let Some(hybrid) = plan.hybrid_cp() {
        // Megatron-LM core_v0.16.0 to core_v0.19.0 (docs/megatron-packing-schedulers.md): the
        // groups read each packed sample's `cu_seqlens`, which the SFT dataset writes.
        args.push("--hybrid-context-parallel".into());
        args.push(format!("--max-seqlen-per-dp-cp-rank {}", hybrid.max_tokens_per_rank()));
        args.push("--calculate-per-token-loss".into());
        args.push("--dataloader-type single".into());
        args.push("--sft".into());
    } else if run
        .data()
        .is_some_and(|data| matches!(data.data.batching(), Batching::Whole | Batching::Pad))
    {
        // Whole documents packed under a document mask, or one a padded sample: the SFT
        // dataset's samples, whose `cu_seqlens` give Transformer Engine's THD layout
        // (`megatron/training/datasets/sft_dataset.py@core_v0.18.0`). Without it the
        // pre-training `GPTDataset` concatenates documents with no mask (`--batching concat`).
        args.push("--sft".into());
    }
    if let Some(moe) = model.moe() {
        args.extend(moe_flags(run, moe));
    }
    if plan.sequence_parallel() {
        args.push("--sequence-parallel".into());
    }
    match plan.sharding() {
        Sharding::None => {}
        Sharding::Optimizer => args.push("--use-distributed-optimizer".into()),
        Sharding::OptimizerAndGradients => {
            args.push("--use-megatron-fsdp".into());
            args.push("--data-parallel-sharding-strategy optim_grads".into());
        }
        Sharding::Full => {
            args.push("--use-megatron-fsdp".into());
            args.push("--data-parallel-sharding-strategy optim_grads_params".into());
        }
    }
    match plan.recompute() {
        // Per-op checkpointing is refused by the capability table before this is written.
        RecomputeKind::None | RecomputeKind::Op => {}
        RecomputeKind::Selective => {
            args.push("--recompute-granularity selective".into());
            let modules = plan.recompute_modules().to_vec();
            if plan.recompute_modules() != RecomputeModules::DEFAULT_SELECTIVE {
                let names: Vec<&str> = modules.iter().map(|m| m.name()).collect();
                args.push(format!("--recompute-modules {}", names.join(" ")));
            }
        }
        RecomputeKind::Full => {
            args.push("--recompute-granularity full".into());
            args.push("--recompute-method block".into());
            args.push(format!("--recompute-num-layers {}", plan.recompute_num_layers()));
        }
    }
    if plan.offload_activation_layers() > 0 {
        // core_v0.16.0 on (docs/activation-offload.md, section 1a): a count above zero turns
        // `cpu_offloading` on, and Transformer Engine moves that many layers' activations to
        // host memory (activations only, the defaults of the fields that have no flag).
        args.push(format!("--cpu-offloading-num-layers {}", plan.offload_activation_layers()));
    }
    if plan.bf16_layers() != (0, 0) {
        // Megatron-LM takes 1 for either count unless told; both are written.
        let (start, end) = plan.bf16_layers();
        args.push("--first-last-layers-bf16".into());
        args.push(format!("--num-layers-at-start-in-bf16 {start}"));
        args.push(format!("--num-layers-at-end-in-bf16 {end}"));
    }
    if plan.overlap_grad_reduce() && plan.dp() * plan.cp() > 1 {
        args.push("--overlap-grad-reduce".into());
    }
    if plan.overlap_param_gather()
        && plan.sharding() == Sharding::Optimizer
        && plan.dp() * plan.cp() > 1
    {
        args.push("--overlap-param-gather".into());
    }
    if plan.tp_comm_overlap() {
        args.push("--tp-comm-overlap".into());
    }
    args
}

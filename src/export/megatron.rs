//! Megatron-LM `pretrain_gpt.py` arguments (names from `megatron/training/arguments.py`,
//! core_v0.15.0, reference section 2), one flag per line, ready for a launch script.

use crate::model::{MlpKind, NormKind, PositionEmbedding};
use crate::plan::{PipelineSchedule, PipelineSplit, Precision, RecomputeKind, Sharding};
use crate::run::Run;

/// What Megatron-LM cannot run, if anything.
pub fn unsupported(run: &Run) -> Option<String> {
    let plan = run.plan();
    match plan.schedule() {
        PipelineSchedule::OneFOneB | PipelineSchedule::Interleaved => {}
        other => {
            return Some(format!(
                "its pipeline schedules are 1F1B and interleaved 1F1B, not {}",
                other.name()
            ));
        }
    }
    if plan.pp() > 1 && matches!(plan.sharding(), Sharding::Full | Sharding::OptimizerAndGradients)
    {
        return Some("FSDP / ZeRO-2/3 sharding (Megatron-FSDP, FSDP2) does not combine with pipeline parallelism".into());
    }
    if plan.shard_group() != plan.dp() {
        return Some(
            "hybrid sharding (an FSDP shard group smaller than dp) is not exported".into(),
        );
    }
    None
}

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

/// The arguments, one per line.
pub fn arguments(run: &Run) -> String {
    let (model, plan, training) = (run.model(), run.plan(), run.training());
    let mut args: Vec<String> = vec![
        format!("--num-layers {}", model.num_layers()),
        format!("--hidden-size {}", model.hidden_size()),
        format!("--ffn-hidden-size {}", model.ffn_hidden_size()),
        format!("--num-attention-heads {}", model.num_attention_heads()),
        format!("--kv-channels {}", model.head_dim()),
    ];
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
    args.push(format!("--tensor-model-parallel-size {}", plan.tp()));
    args.push(format!("--pipeline-model-parallel-size {}", plan.pp()));
    if plan.vp() > 1 {
        args.push(format!("--num-virtual-stages-per-pipeline-rank {}", plan.vp()));
    }
    if plan.pipeline_split() == PipelineSplit::EmbeddingAndLoss {
        args.push("--account-for-embedding-in-pipeline-split".into());
        args.push("--account-for-loss-in-pipeline-split".into());
    }
    if plan.cp() > 1 {
        args.push(format!("--context-parallel-size {}", plan.cp()));
        args.push("--cp-comm-type p2p".into());
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
        RecomputeKind::None => {}
        RecomputeKind::Selective => args.push("--recompute-granularity selective".into()),
        RecomputeKind::Full => {
            args.push("--recompute-granularity full".into());
            args.push("--recompute-method block".into());
            args.push(format!("--recompute-num-layers {}", plan.recompute_num_layers()));
        }
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
    let mut out = String::new();
    for arg in args {
        out.push_str(&arg);
        out.push('\n');
    }
    out
}

//! Tests of the element-wise work a stack runs as eager PyTorch kernels for a model feature
//! (`Stack::eager_ops`): the rotary embedding (Hugging Face's, and Megatron-Core's YaRN
//! rotation), the routed experts' output bias and the clamp of a clamped gated activation,
//! priced at the bytes their kernels move, only where the model has the feature and the stack
//! runs it eagerly.

use std::sync::Arc;

use crate::cost::layer::{
    EAGER_GLU_CLAMP_BACKWARD_BYTES, EAGER_GLU_CLAMP_FORWARD_BYTES, EAGER_HF_ROPE_BACKWARD_BYTES,
    EAGER_HF_ROPE_FORWARD_BYTES, EAGER_YARN_ROPE_BACKWARD_BYTES, EAGER_YARN_ROPE_FORWARD_BYTES,
    OpTable, Phase, Rows, expert_bias_backward_bytes, expert_bias_forward_bytes, routed_rows,
    transformer_layer,
};
use crate::plan::{ExpertDispatch, PlanSpec, RecomputeKind, RecomputeModule};
use crate::presets;
use crate::run::{Run, test_spec};
use crate::stack::Stack;
use crate::units::Bytes;

/// gpt-oss-120b on 8 H100 at ep 8, one 4096-token sequence per micro-batch, on `stack`.
fn gpt_oss(stack: Stack, plan: PlanSpec) -> Run {
    let plan = PlanSpec { ep: Some(8), stack: Some(stack.id().to_owned()), ..plan };
    let spec = test_spec("gpt-oss-120b", 8, 4096, 64, 1, plan);
    Run::from_spec_with_stack(&spec, Arc::new(stack)).unwrap()
}

fn nemo() -> Stack {
    presets::stack("nemo-26.04").unwrap()
}

fn bytes(table: &OpTable, name: &str, phase: Phase) -> Option<Bytes> {
    let mut rows = table.ops.iter().filter(|op| op.name == name && op.phase == phase).peekable();
    rows.peek()?;
    Some(rows.map(|op| op.bytes).sum())
}

fn close(actual: Option<Bytes>, expected: f64) {
    let actual = actual.expect("the row is priced").value();
    assert!((actual / expected - 1.0).abs() < 1e-12, "{actual} vs {expected}");
}

#[test]
fn each_eager_kernel_is_counted_once() {
    // `b * p`, `t + b * p`, `torch.cat`, and `.to(bf16)` with fp32 probabilities.
    assert_eq!(expert_bias_forward_bytes(2.0), 2.0 + (2.0 + 2.0 + 2.0) + (2.0 + 2.0));
    assert_eq!(expert_bias_forward_bytes(4.0), 4.0 + (2.0 + 4.0 + 4.0) + (4.0 + 4.0) + 6.0);
    // The product's two gradients with their reductions, the split's concatenation, and with
    // fp32 probabilities the two casts.
    assert_eq!(expert_bias_backward_bytes(2.0), 6.0 * 2.0 + 4.0);
    assert_eq!(expert_bias_backward_bytes(4.0), 6.0 + 6.0 + 6.0 * 4.0 + 4.0);
    assert_eq!(EAGER_YARN_ROPE_FORWARD_BYTES, 2.0 * (2.0 + 3.0 + 2.0 + 3.0 + 2.0));
    assert_eq!(
        EAGER_YARN_ROPE_BACKWARD_BYTES,
        2.0 * (2.0 + 2.0 + 1.0 + 2.0 + 3.0 + 3.0 + 1.0 + 3.0)
    );
    // `q * cos`, the negated half, the concatenation, `* sin`, the sum.
    assert_eq!(EAGER_HF_ROPE_FORWARD_BYTES, 2.0 * (2.0 + 1.0 + 2.0 + 2.0 + 3.0));
    // The products' gradients, the negation, the two half slices' zeroed gradients, two sums.
    assert_eq!(EAGER_HF_ROPE_BACKWARD_BYTES, 2.0 * (2.0 + 2.0 + 1.0 + 2.0 + 2.0 + 3.0 + 3.0));
    assert_eq!(EAGER_GLU_CLAMP_FORWARD_BYTES, 2.0 * 4.0);
    assert_eq!(EAGER_GLU_CLAMP_BACKWARD_BYTES, 2.0 * 5.0);
}

#[test]
fn a_nemo_stack_runs_the_yarn_rotation_the_expert_bias_and_the_clamp_eagerly() {
    let run = gpt_oss(nemo(), PlanSpec::default());
    let model = run.model();
    assert!(run.stack().eager_ops().yarn_rope && run.stack().eager_ops().expert_bias);
    let table = transformer_layer(&run, false, Rows::Keep);
    let tokens = run.tokens_per_microbatch();
    let rotated = (model.query_width() + model.kv_width()) as f64 * tokens;
    close(bytes(&table, "rope", Phase::Forward), 24.0 * rotated);
    close(bytes(&table, "rope", Phase::Backward), 34.0 * rotated);
    // All-to-all dispatch: the routing probabilities stay bf16.
    let rows = routed_rows(&run);
    let hidden = model.hidden_size() as f64;
    close(bytes(&table, "expert-bias", Phase::Forward), 12.0 * rows * hidden);
    close(bytes(&table, "expert-bias", Phase::Backward), 16.0 * rows * hidden);
    let fc1 = 2.0 * model.moe().unwrap().expert_ffn_hidden_size as f64;
    close(bytes(&table, "expert-clamp", Phase::Forward), 8.0 * rows * fc1);
    close(bytes(&table, "expert-clamp", Phase::Backward), 10.0 * rows * fc1);
    // The clamp is inside the activation's checkpoint: moe_act reruns it.
    let clamp = table.ops.iter().find(|op| op.name == "expert-clamp").unwrap();
    assert_eq!(clamp.module, Some(RecomputeModule::MoeAct));
    let bias = table.ops.iter().find(|op| op.name == "expert-bias").unwrap();
    assert_eq!(bias.module, Some(RecomputeModule::Moe));
}

#[test]
fn a_flex_dispatcher_hands_the_experts_fp32_probabilities() {
    let plan =
        PlanSpec { expert_dispatch: Some(ExpertDispatch::Deduplicated), ..PlanSpec::default() };
    let run = gpt_oss(nemo(), plan);
    let table = transformer_layer(&run, false, Rows::Keep);
    let elements = routed_rows(&run) * run.model().hidden_size() as f64;
    close(bytes(&table, "expert-bias", Phase::Forward), 28.0 * elements);
    close(bytes(&table, "expert-bias", Phase::Backward), 40.0 * elements);
}

#[test]
fn the_fused_grouped_mlp_keeps_only_the_rotation_eager() {
    let eager = gpt_oss(nemo(), PlanSpec::default());
    let fused = gpt_oss(nemo().with_fused_grouped_mlp(), PlanSpec::default());
    let table = transformer_layer(&fused, false, Rows::Keep);
    assert_eq!(bytes(&table, "expert-bias", Phase::Forward), None);
    assert_eq!(bytes(&table, "expert-clamp", Phase::Forward), None);
    let eager_table = transformer_layer(&eager, false, Rows::Keep);
    assert_eq!(bytes(&table, "rope", Phase::Forward), bytes(&eager_table, "rope", Phase::Forward));
    assert!(table.totals.backward.memory < eager_table.totals.backward.memory);
}

#[test]
fn without_the_features_or_on_a_stack_that_fuses_them_nothing_is_added() {
    // A stack whose file does not say prices the fused kernels.
    let generic = gpt_oss(presets::stack("generic").unwrap(), PlanSpec::default());
    let table = transformer_layer(&generic, false, Rows::Keep);
    assert_eq!(bytes(&table, "expert-bias", Phase::Forward), None);
    assert_eq!(bytes(&table, "expert-clamp", Phase::Forward), None);
    let rotated = (generic.model().query_width() + generic.model().kv_width()) as f64
        * generic.tokens_per_microbatch();
    close(bytes(&table, "rope", Phase::Forward), 4.0 * rotated);
    // Qwen3-30B-A3B on the NeMo stack: no biases, no YaRN, no clamp.
    let plan = PlanSpec { ep: Some(8), stack: Some("nemo-26.04".into()), ..PlanSpec::default() };
    let spec = test_spec("qwen3-30b-a3b", 8, 4096, 64, 1, plan);
    let qwen = Run::from_spec_with_stack(&spec, Arc::new(nemo())).unwrap();
    let table = transformer_layer(&qwen, false, Rows::Keep);
    assert_eq!(bytes(&table, "expert-bias", Phase::Forward), None);
    assert_eq!(bytes(&table, "expert-clamp", Phase::Forward), None);
    let rotated = (qwen.model().query_width() + qwen.model().kv_width()) as f64
        * qwen.tokens_per_microbatch();
    close(bytes(&table, "rope", Phase::Forward), 4.0 * rotated);
}

#[test]
fn recomputing_the_expert_activation_reruns_the_clamp() {
    let selective = |modules: Vec<RecomputeModule>| PlanSpec {
        recompute: Some(RecomputeKind::Selective),
        recompute_modules: Some(modules),
        ..PlanSpec::default()
    };
    let run = gpt_oss(nemo(), selective(vec![RecomputeModule::MoeAct]));
    let table = transformer_layer(&run, false, Rows::Keep);
    let rerun = table.totals.selective_rerun(run.plan().recompute_modules());
    let clamp = table.ops.iter().find(|op| op.name == "expert-clamp" && op.phase == Phase::Forward);
    let activation =
        table.ops.iter().find(|op| op.name == "expert-activation" && op.phase == Phase::Forward);
    let expected = clamp.unwrap().time + activation.unwrap().time;
    assert!((rerun.compute.value() / expected.value() - 1.0).abs() < 1e-12);
}

#[test]
fn a_hugging_face_model_under_deepspeed_rotates_eagerly_unless_compiled() {
    let deepspeed = presets::stack("deepspeed").unwrap();
    assert!(deepspeed.eager_ops().rope && deepspeed.eager_elementwise());
    let llama = |stack: Stack| {
        let plan = PlanSpec { stack: Some(stack.id().to_owned()), ..PlanSpec::default() };
        let spec = test_spec("llama2-7b", 8, 4096, 8, 1, plan);
        Run::from_spec_with_stack(&spec, Arc::new(stack)).unwrap()
    };
    let run = llama(deepspeed.clone());
    let table = transformer_layer(&run, false, Rows::Keep);
    let rotated =
        (run.model().query_width() + run.model().kv_width()) as f64 * run.tokens_per_microbatch();
    close(bytes(&table, "rope", Phase::Forward), 20.0 * rotated);
    close(bytes(&table, "rope", Phase::Backward), 30.0 * rotated);
    // Compiled, Inductor fuses the rotation: one read and one write of each element.
    let compiled = llama(deepspeed.compiled());
    assert!(!compiled.stack().eager_ops().rope);
    let table = transformer_layer(&compiled, false, Rows::Keep);
    close(bytes(&table, "rope", Phase::Forward), 4.0 * rotated);
}

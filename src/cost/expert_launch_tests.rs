//! Tests of the launch floor on routed experts' GEMMs and casts (`kernels::launch_floor`): a
//! stack that launches one GEMM per local expert (Transformer Engine's `GroupedLinear`) cannot
//! run a group of tiny experts faster than the host launches them, nor quantize their inputs
//! faster where the recipe quantizes one expert at a time; a whole-iteration CUDA graph replays
//! the launches at the graphed cost, and one grouped kernel pays no floor.

use std::sync::Arc;

use crate::cost::kernels::{EAGER_LAUNCH_SECONDS, GRAPHED_LAUNCH_SECONDS, launch_floor};
use crate::cost::layer::{OpTable, Phase, Rows, transformer_layer};
use crate::plan::{PlanSpec, Precision};
use crate::presets;
use crate::run::{Run, test_spec};
use crate::stack::{ExpertLaunches, Stack};
use crate::units::Seconds;

/// Qwen3-30B-A3B's 128 experts at ep 8 (16 local experts) on 8 H100, one `seq`-token sequence
/// per micro-batch, on `stack`.
fn qwen3_30b(stack: Stack, seq: i64) -> Run {
    qwen3_30b_in(stack, seq, None)
}

fn qwen3_30b_in(stack: Stack, seq: i64, precision: Option<Precision>) -> Run {
    let plan = PlanSpec { ep: Some(8), stack: Some(stack.id().to_owned()), ..PlanSpec::default() };
    let mut spec = test_spec("qwen3-30b-a3b", 8, seq, 64, 1, plan);
    spec.training.precision = precision;
    Run::from_spec_with_stack(&spec, Arc::new(stack)).unwrap()
}

fn nemo() -> Stack {
    presets::stack("nemo-26.04").unwrap()
}

/// The time of the `name` rows of one phase.
fn time(table: &OpTable, name: &str, phase: Phase) -> Seconds {
    table.ops.iter().filter(|op| op.name == name && op.phase == phase).map(|op| op.time).sum()
}

fn expert_times(run: &Run) -> [Seconds; 2] {
    let table = transformer_layer(run, false, Rows::Keep);
    [time(&table, "expert-fc1", Phase::Forward), time(&table, "expert-fc1", Phase::Backward)]
}

fn close(actual: Seconds, expected: f64) {
    assert!((actual.value() / expected - 1.0).abs() < 1e-9, "{} vs {expected}", actual.value());
}

#[test]
fn the_floor_is_one_measured_launch_per_expert() {
    assert_eq!(launch_floor(ExpertLaunches::OneKernel, 16.0), Seconds::ZERO);
    close(launch_floor(ExpertLaunches::PerExpertEager, 16.0), 16.0 * 6.18e-6);
    close(launch_floor(ExpertLaunches::PerExpertGraphed, 16.0), 16.0 * 1.16e-6);
}

#[test]
fn megatron_stacks_launch_a_gemm_per_expert_and_recipes_change_how() {
    assert_eq!(nemo().expert_launches(), ExpertLaunches::PerExpertEager);
    assert_eq!(
        presets::stack("megatron-core-0.14-plus").unwrap().expert_launches(),
        ExpertLaunches::PerExpertEager
    );
    // A stack that does not say how it runs its experts' GEMMs pays no floor.
    assert_eq!(presets::stack("generic").unwrap().expert_launches(), ExpertLaunches::OneKernel);
    let graphed = nemo().with_full_iteration_graphs();
    assert_eq!(graphed.expert_launches(), ExpertLaunches::PerExpertGraphed);
    assert_eq!(nemo().with_fused_grouped_mlp().expert_launches(), ExpertLaunches::OneKernel);
    let fused_then_graphed = nemo().with_fused_grouped_mlp().with_full_iteration_graphs();
    assert_eq!(fused_then_graphed.expert_launches(), ExpertLaunches::OneKernel);
}

#[test]
fn tiny_experts_wait_on_their_launches() {
    // 64 tokens x top-8 over 16 local experts: 32 rows per expert, GEMMs of a few us on H100.
    let [eager_forward, eager_backward] = expert_times(&qwen3_30b(nemo(), 64));
    close(eager_forward, 16.0 * EAGER_LAUNCH_SECONDS);
    // Input and weight gradients, a launch each per expert; here the weights' traffic (the fp32
    // weight gradients written) already outlasts those launches.
    assert!(eager_backward >= Seconds::new(2.0 * 16.0 * EAGER_LAUNCH_SECONDS));
    let [graphed_forward, _] = expert_times(&qwen3_30b(nemo().with_full_iteration_graphs(), 64));
    assert!(graphed_forward < eager_forward);
    assert!(graphed_forward >= Seconds::new(16.0 * GRAPHED_LAUNCH_SECONDS));
    // One grouped kernel: the GPU's own time, which the eager launches exceed.
    let [fused_forward, _] = expert_times(&qwen3_30b(nemo().with_fused_grouped_mlp(), 64));
    assert!(fused_forward <= graphed_forward, "{fused_forward:?} vs {graphed_forward:?}");
    assert!(fused_forward < eager_forward * 0.8, "{fused_forward:?} vs {eager_forward:?}");
}

#[test]
fn large_experts_outlast_their_launches() {
    // 8192 tokens: 4096 rows per expert, far longer than a launch; the floor does not bind.
    let eager = expert_times(&qwen3_30b(nemo(), 8192));
    let fused = expert_times(&qwen3_30b(nemo().with_fused_grouped_mlp(), 8192));
    assert_eq!(eager, fused);
    assert!(eager[0] > Seconds::new(5.0 * 16.0 * EAGER_LAUNCH_SECONDS), "{:?}", eager[0]);
}

#[test]
fn tensors_quantized_one_expert_at_a_time_wait_on_those_launches() {
    assert!(Precision::Fp8Current.quantizes_per_expert());
    assert!(
        Precision::Mxfp8.quantizes_per_expert() && Precision::Fp8Blockwise.quantizes_per_expert()
    );
    assert!(
        !Precision::Fp8Delayed.quantizes_per_expert() && !Precision::Nvfp4.quantizes_per_expert()
    );
    assert!(!Precision::Bf16.quantizes_per_expert());
    let quantize = |precision| {
        let run = qwen3_30b_in(nemo(), 64, Some(precision));
        let table = transformer_layer(&run, false, Rows::Keep);
        [
            time(&table, "expert-quantize", Phase::Forward),
            time(&table, "expert-quantize", Phase::Backward),
        ]
    };
    // Current scaling: two tensors a phase, each quantized per expert (16 launches apiece).
    for phase in quantize(Precision::Fp8Current) {
        close(phase, 2.0 * 16.0 * EAGER_LAUNCH_SECONDS);
    }
    // Delayed scaling: one fused kernel for all the splits, priced by its bytes alone.
    for phase in quantize(Precision::Fp8Delayed) {
        assert!(phase < Seconds::new(2.0 * 16.0 * EAGER_LAUNCH_SECONDS), "{phase:?}");
    }
}

mod properties {
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    use super::{Precision, nemo, qwen3_30b_in};
    use crate::cost::layer::{Phase, Rows, transformer_layer};
    use crate::run::Run;
    use crate::units::Seconds;

    /// Each phase's total time of one layer.
    fn phases(run: &Run) -> [Seconds; 2] {
        let table = transformer_layer(run, false, Rows::Keep);
        let total = |phase| table.ops.iter().filter(|op| op.phase == phase).map(|op| op.time).sum();
        [total(Phase::Forward), total(Phase::Backward)]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 48,
            rng_seed: RngSeed::Fixed(45),
            ..ProptestConfig::default()
        })]

        #[test]
        fn eager_launches_never_beat_graphed_ones_nor_graphed_ones_one_kernel(
            seq_log2 in 5u32..15,
            precision in prop::sample::select(vec![
                Precision::Bf16,
                Precision::Fp8Current,
                Precision::Fp8Delayed,
            ]),
        ) {
            let seq = 1i64 << seq_log2;
            let eager = phases(&qwen3_30b_in(nemo(), seq, Some(precision)));
            let graphed = phases(&qwen3_30b_in(nemo().with_full_iteration_graphs(), seq, Some(precision)));
            let one = phases(&qwen3_30b_in(nemo().with_fused_grouped_mlp(), seq, Some(precision)));
            for phase in 0..2 {
                prop_assert!(eager[phase] >= graphed[phase], "{:?} < {:?}", eager, graphed);
                prop_assert!(graphed[phase] >= one[phase], "{:?} < {:?}", graphed, one);
            }
        }
    }
}

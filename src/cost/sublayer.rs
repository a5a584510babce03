//! The operation tables of a hybrid model's layers (`crate::model::Sublayer`): an attention
//! block, an MLP, a mixture of experts, a Mamba-2 or Mamba-1 mixer, a gated DeltaNet or a
//! lightning attention block, each with its own pre-norm and residual, as Megatron-Core's hybrid
//! stack runs them (and Jamba's Mamba-1 mixer as mamba_ssm's kernels run it).
//!
//! The attention, MLP and expert tables are the transformer layer's own blocks (`layer.rs`), so
//! an attention table plus an MLP table is a transformer layer's table row for row.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::kernels::{cuda_core_time, scan_time};
use crate::cost::layer::{Ctx, LAYER_ROWS, attention_block, mlp_block};
use crate::cost::op_table::{OpKind, OpTable, Phase, Rows};
use crate::model::{
    LightningAttention, LinearAttention, Mamba, Mamba1, SCAN_BACKWARD_ATOMIC_BYTES,
    SCAN_BACKWARD_ISSUES, SCAN_EXPONENTIALS, SCAN_FORWARD_ISSUES, Sublayer,
};
use crate::plan::{Precision, RecomputeModule};
use crate::run::Run;
use crate::units::{Bytes, Flops};

/// The operations of one hybrid layer of `kind` for one micro-batch.
pub fn sublayer(run: &Run, kind: Sublayer, rows: Rows) -> OpTable {
    let ctx = Ctx::new(run);
    let model = run.model();
    let h = model.hidden_size() as f64;
    let tp = ctx.tp;
    let mut table = OpTable::with_capacity(rows, LAYER_ROWS);
    let attention = |table: &mut OpTable, pre_norm: bool| {
        attention_block(&ctx, table, pre_norm);
        let forward = h + model.attention_output_width() as f64 / tp;
        let backward = h + (model.query_width() + 2 * model.kv_width()) as f64 / tp;
        ctx.quantize(table, forward, backward);
    };
    let mlp = |table: &mut OpTable, dense: bool| {
        let width = mlp_block(&ctx, table, dense);
        let forward = if width > 0 { h + width as f64 / tp } else { 0.0 };
        let backward = if width > 0 { h + model.up_width(width) as f64 / tp } else { 0.0 };
        ctx.quantize(table, forward, backward);
    };
    match kind {
        Sublayer::Attention => attention(&mut table, true),
        Sublayer::Mlp | Sublayer::Moe => mlp(&mut table, kind == Sublayer::Mlp),
        Sublayer::Mamba => {
            if let Some(mamba) = model.hybrid_mamba() {
                mamba_block(&ctx, &mut table, mamba);
            }
        }
        // Falcon-H1 (Megatron-Bridge's `FalconH1Layer`): the attention block reads the Mamba-2
        // mixer's pre-norm, and its residual add is the sum of the two mixers' outputs into
        // the residual (one more add over the hidden width, as an `M` then a `*` layer run).
        // Each mixer's column-parallel input projection gathers the sequence-parallel input
        // and each row-parallel output projection scatters its own output, as two layers do.
        Sublayer::ParallelHybrid => {
            if let Some(mamba) = model.hybrid_mamba() {
                mamba_block(&ctx, &mut table, mamba);
            }
            attention(&mut table, false);
            mlp(&mut table, true);
        }
        Sublayer::GatedDeltaNet => {
            if let Some(linear) = model.hybrid_linear_attention() {
                gated_delta_net_block(&ctx, &mut table, linear);
            }
        }
        Sublayer::LightningAttention => {
            if let Some(lightning) = model.hybrid_lightning_attention() {
                lightning_attention_block(&ctx, &mut table, lightning);
            }
        }
        Sublayer::Mamba1 => {
            if let Some(mixer) = model.hybrid_mamba1() {
                mamba1_block(&ctx, &mut table, mixer);
            }
        }
    }
    table
}

/// A Mamba-1 layer (Jamba's `JambaMambaMixer` over mamba_ssm's kernels): pre-norm, `in_proj`
/// to x and z, the causal convolution with its SiLU over x, `x_proj` to the step sizes' low-rank
/// input and B and C, Jamba's RMSNorms over those, `dt_proj`, the selective scan (gated by z
/// inside the kernel), `out_proj` and the residual add. Tensor parallelism splits the channels:
/// `in_proj` and `dt_proj` by their outputs, `x_proj` and `out_proj` by their inputs, so
/// `x_proj`'s narrow output is all-reduced forward, and its gradient backward (B's and C's
/// gradients are summed over every channel). The scan runs on the CUDA cores
/// (`kernels::cuda_core_time`): [`SCAN_FORWARD_ISSUES`] and [`SCAN_BACKWARD_ISSUES`] FP32
/// instructions and one exponential per token, channel and state; forward it reads u, the step
/// sizes and z and writes its output (B and C per token besides), backward it reads those and
/// the output's gradient, writes the inputs' gradients, and adds B's and C's gradients
/// atomically per channel ([`SCAN_BACKWARD_ATOMIC_BYTES`]).
fn mamba1_block(ctx: &Ctx, table: &mut OpTable, mixer: &Mamba1) {
    let run = ctx.run;
    let gpu = run.cluster().gpu();
    let h = run.model().hidden_size() as f64;
    let (tp, sp) = (ctx.tp, ctx.sp);
    let act = Precision::ACTIVATION_BYTES;
    let inner = mixer.inner as f64 / tp;
    let x_proj = mixer.x_projection() as f64;
    ctx.tp_block_comm(table, "tp-mamba1");
    table.enter(Some(RecomputeModule::Layernorm));
    ctx.streaming(table, "input-norm", 2.0 * h * act / sp);
    table.enter(None);
    ctx.gemm(table, "in-proj", mixer.in_projection() as f64 / tp, h);
    ctx.streaming(table, "conv1d", 2.0 * inner * act);
    ctx.gemm(table, "x-proj", x_proj, inner);
    let plan = run.plan();
    if plan.tp() > 1 {
        let group = Group { size: plan.tp(), stride: 1 };
        let bytes = Bytes::new(ctx.tokens * x_proj * act);
        let links = run.cluster().interconnect();
        let time = collective_time(links, Collective::AllReduce, group, bytes);
        for phase in [Phase::Forward, Phase::Backward] {
            table.push("tp-x-proj", phase, OpKind::TpComm, Flops::ZERO, bytes, time);
        }
    }
    if mixer.dt_bc_norms {
        ctx.streaming(table, "dt-bc-norms", 2.0 * x_proj * act);
    }
    ctx.gemm(table, "dt-proj", inner, mixer.dt_rank as f64);
    let tokens = ctx.tokens;
    let recurrences = tokens * inner * mixer.state_size as f64;
    // Per token the scan reads u, the step sizes and z (and B and C); forward it writes its
    // output; backward it reads the output and its gradient and writes the gradients of u, the
    // step sizes and z, besides the atomic additions.
    let per_token_inputs = 3.0 * inner + 2.0 * mixer.state_size as f64;
    let forward_bytes = Bytes::new(tokens * (per_token_inputs + inner) * act);
    let backward_bytes = Bytes::new(
        tokens * (per_token_inputs + 2.0 * inner + 3.0 * inner) * act
            + recurrences * SCAN_BACKWARD_ATOMIC_BYTES,
    );
    let scan = [
        (Phase::Forward, mixer.scan_flops_per_token(), SCAN_FORWARD_ISSUES, forward_bytes),
        (
            Phase::Backward,
            mixer.scan_backward_flops_per_token(),
            SCAN_BACKWARD_ISSUES,
            backward_bytes,
        ),
    ];
    for (phase, flops_per_token, issues, bytes) in scan {
        let flops = Flops::new(flops_per_token / tp * tokens);
        let time =
            cuda_core_time(gpu, issues * recurrences, SCAN_EXPONENTIALS * recurrences, bytes);
        table.push("selective-scan", phase, OpKind::Recurrence, flops, bytes, time);
    }
    ctx.gemm(table, "out-proj", h, inner);
    ctx.streaming(table, "residual", 3.0 * h * act / sp);
    let dt_rank = mixer.dt_rank as f64;
    ctx.quantize(
        table,
        h + 2.0 * inner + dt_rank,
        h + mixer.in_projection() as f64 / tp + x_proj + inner,
    );
}

/// What tells a chunked recurrent mixer (Mamba-2's scan, gated DeltaNet's delta rule, lightning
/// attention) from the others: its widths, its kernel's work and its context-parallel exchange.
struct RecurrentMixer {
    /// Name of its TP collectives' rows.
    tp_comm: &'static str,
    /// Name of its kernel's rows.
    kernel: &'static str,
    /// Output width of the input projections.
    in_projection: u64,
    /// The element-wise pass over the kernel's input channels before it, and those channels:
    /// the causal depthwise convolution with its SiLU (Mamba-2's x, B and C; gated DeltaNet's
    /// q, k and v), or lightning attention's SiLU on q, k and v.
    pre_kernel: (&'static str, u64),
    /// Width of the kernel's output (the gated norm's and the output projection's input).
    output: u64,
    /// Heads of the recurrence, and the per-head inputs besides the convolved ones (Mamba-2's dt;
    /// gated DeltaNet's beta and decay).
    heads: u64,
    per_head_inputs: f64,
    /// Elements of one head's recurrent state, and the chunk length it is passed between.
    state: u64,
    chunk: u64,
    /// The kernel's FLOPs per token, forward and backward.
    flops_per_token: (f64, f64),
    /// Whether the mixer works batch-first inside a sequence-first model, copying its input
    /// projection's output to that layout before the pre-kernel pass and its output back after
    /// the kernel (and their gradients in the backward) when a micro-batch holds more than one
    /// sequence: Megatron-Core's Mamba mixer (`_ssm_training`, `rearrange(...).contiguous()`,
    /// core_v0.18.0 `megatron/core/ssm/mamba_mixer.py`); one sequence needs no copy.
    layout_copies: bool,
    /// Whether the kernel's backward reruns the pre-kernel pass instead of keeping its output:
    /// mamba_ssm's `MambaSplitConv1dScanCombinedFn` recomputes the convolution in its backward
    /// (v2.2.6.post3 `mamba_ssm/ops/triton/ssd_combined.py`).
    reruns_pre_kernel: bool,
    /// Whether a gated norm runs over the kernel's output; without it (Mamba-2 with Megatron-
    /// Core's `rmsnorm` off, as Falcon-H1) the kernel reads the gate z and applies it itself.
    gated_norm: bool,
}

/// A chunked recurrent mixer layer: TP collectives, pre-norm, the input projection, the
/// element-wise pass before the kernel (reading and writing its channels), the chunked kernel,
/// the exchange `context_parallel` adds under CP, the gated norm, the output projection and the
/// residual add. Tensor parallelism splits the heads; sequence parallelism the element-wise work
/// outside them. The kernel reads the convolved channels and the per-head inputs and writes its
/// output; the states between chunks go through HBM in FP32 (written by the chunk-state pass,
/// read by the chunk scan); the backward reads them again with the output's gradient and writes
/// the inputs' gradients.
fn recurrent_mixer(
    ctx: &Ctx,
    table: &mut OpTable,
    mixer: &RecurrentMixer,
    context_parallel: impl Fn(&Ctx, &mut OpTable),
) {
    let run = ctx.run;
    let gpu = run.cluster().gpu();
    let h = run.model().hidden_size() as f64;
    let (tp, sp) = (ctx.tp, ctx.sp);
    let act = Precision::ACTIVATION_BYTES;
    let output = mixer.output as f64 / tp;
    let (pre_kernel, channels) = mixer.pre_kernel;
    let channels = channels as f64 / tp;
    ctx.tp_block_comm(table, mixer.tp_comm);
    table.enter(Some(RecomputeModule::Layernorm));
    ctx.streaming(table, "input-norm", 2.0 * h * act / sp);
    table.enter(None);
    ctx.gemm(table, "in-proj", mixer.in_projection as f64 / tp, h);
    let copies = mixer.layout_copies && run.training().micro_batch() > 1;
    let copy = |table: &mut OpTable, width: f64| {
        let bytes = Bytes::new(2.0 * width * act * ctx.tokens);
        for phase in [Phase::Forward, Phase::Backward] {
            table.push_memory(gpu, "layout-copy", phase, bytes);
        }
    };
    if copies {
        copy(table, mixer.in_projection as f64 / tp);
    }
    ctx.streaming(table, pre_kernel, 2.0 * channels * act);
    if mixer.reruns_pre_kernel {
        let bytes = Bytes::new(2.0 * channels * act * ctx.tokens);
        table.push_memory(gpu, "conv1d-rerun", Phase::Backward, bytes);
    }
    let tokens = ctx.tokens;
    let heads = mixer.heads as f64 / tp;
    let (forward, backward) = mixer.flops_per_token;
    let forward_flops = Flops::new(forward / tp * tokens);
    let backward_flops = Flops::new(backward / tp * tokens);
    let states = heads * mixer.state as f64 * 4.0 * 2.0 / mixer.chunk as f64;
    let gate = if mixer.gated_norm { 0.0 } else { output };
    let inputs = channels + output + gate + mixer.per_head_inputs * heads;
    let forward_bytes = Bytes::new(tokens * (inputs * act + states));
    for (phase, flops, bytes) in [
        (Phase::Forward, forward_flops, forward_bytes),
        (Phase::Backward, backward_flops, forward_bytes * 2.0),
    ] {
        let time = scan_time(gpu, flops, bytes);
        table.push(mixer.kernel, phase, OpKind::Recurrence, flops, bytes, time);
    }
    if run.plan().cp() > 1 {
        context_parallel(ctx, table);
    }
    if copies {
        copy(table, output);
    }
    if mixer.gated_norm {
        // The gated RMSNorm: the output and the gate z in, the normalized product out.
        ctx.streaming(table, "gated-norm", 3.0 * output * act);
    }
    ctx.gemm(table, "out-proj", h, output);
    ctx.streaming(table, "residual", 3.0 * h * act / sp);
    ctx.quantize(table, h + output, h + mixer.in_projection as f64 / tp);
}

/// A Mamba-2 layer (Megatron-Core `MambaMixer`): the input projection to z, x, B, C and dt, the
/// convolution over x, B and C, the chunked scan; tensor parallelism splits heads and groups.
fn mamba_block(ctx: &Ctx, table: &mut OpTable, mamba: &Mamba) {
    let mixer = RecurrentMixer {
        tp_comm: "tp-mamba",
        kernel: "ssd-scan",
        in_projection: mamba.in_projection(),
        pre_kernel: ("conv1d", mamba.conv_channels()),
        output: mamba.inner(),
        heads: mamba.num_heads,
        per_head_inputs: 1.0,
        state: mamba.head_dim * mamba.state_size,
        chunk: mamba.chunk_size,
        flops_per_token: (mamba.scan_flops_per_token(), mamba.scan_backward_flops_per_token()),
        layout_copies: true,
        reruns_pre_kernel: true,
        gated_norm: mamba.gated_norm,
    };
    recurrent_mixer(ctx, table, &mixer, |ctx, table| mamba_context_parallel(ctx, table, mamba));
}

/// A gated DeltaNet block (Qwen3-Next, Megatron-Core 0.17's `G` layer): the input projections
/// to q, k, v, the output gate z, beta and the decay, the convolution over q, k and v, and the
/// chunked gated delta rule (priced as the chunked scan of `kernels::scan_time`:
/// flash-linear-attention's Triton kernels, like mamba_ssm's, run chunked matmuls and
/// element-wise decay). Tensor parallelism splits the key and value heads. Under context
/// parallelism each rank runs its chunk and LASP-2's one all-gather of the ranks' recurrent
/// states (forward, and of their gradients in the backward) overlaps the kernel, as a ring step
/// overlaps attention.
fn gated_delta_net_block(ctx: &Ctx, table: &mut OpTable, linear: &LinearAttention) {
    let mixer = RecurrentMixer {
        tp_comm: "tp-linear-attention",
        kernel: "gated-delta-rule",
        in_projection: linear.in_projection(),
        pre_kernel: ("conv1d", linear.conv_channels()),
        output: linear.value_width(),
        heads: linear.num_value_heads,
        per_head_inputs: 2.0,
        state: linear.key_head_dim * linear.value_head_dim,
        chunk: linear.chunk_size,
        flops_per_token: (linear.scan_flops_per_token(), linear.scan_backward_flops_per_token()),
        layout_copies: false,
        reruns_pre_kernel: false,
        gated_norm: true,
    };
    let state = linear.state_bytes();
    recurrent_mixer(ctx, table, &mixer, |ctx, table| state_all_gather(ctx, table, state));
}

/// A lightning attention block (MiniMax-01): `qkv_proj` and the output gate from the layer
/// input, SiLU on q, k and v, the lightning kernel (priced as the chunked scan of
/// `kernels::scan_time`, its blocks' small matmuls and decays run as Triton kernels like
/// mamba_ssm's; no lightning kernel was measured), the RMSNorm and sigmoid gate over the output,
/// and `out_proj`. Tensor parallelism splits the heads; under context parallelism LASP-2 (which
/// was built for this kernel) all-gathers the ranks' key-value states once, forward and
/// backward.
fn lightning_attention_block(ctx: &Ctx, table: &mut OpTable, lightning: &LightningAttention) {
    let mixer = RecurrentMixer {
        tp_comm: "tp-lightning-attention",
        kernel: "lightning-attention",
        in_projection: lightning.in_projection(),
        pre_kernel: ("qkv-silu", 3 * lightning.width()),
        output: lightning.width(),
        heads: lightning.num_heads,
        per_head_inputs: 0.0,
        state: lightning.head_dim * lightning.head_dim,
        chunk: lightning.block_size,
        flops_per_token: (
            lightning.kernel_flops_per_token(),
            lightning.kernel_backward_flops_per_token(),
        ),
        layout_copies: false,
        reruns_pre_kernel: false,
        gated_norm: true,
    };
    let state = lightning.state_bytes();
    recurrent_mixer(ctx, table, &mixer, |ctx, table| state_all_gather(ctx, table, state));
}

/// LASP-2's exchange of a linear-attention layer (gated DeltaNet, lightning attention): each CP
/// rank's FP32 recurrent state of every sequence (`state_bytes` per sequence for all heads),
/// all-gathered over the CP group.
fn state_all_gather(ctx: &Ctx, table: &mut OpTable, state_bytes: f64) {
    let run = ctx.run;
    let plan = run.plan();
    let sequences = run.training().micro_batch() as f64;
    let state = Bytes::new(state_bytes / ctx.tp * sequences);
    let group = Group { size: plan.cp(), stride: plan.tp() };
    let links = run.cluster().interconnect();
    let time = collective_time(links, Collective::AllGather, group, state * plan.cp() as f64);
    for phase in [Phase::Forward, Phase::Backward] {
        table.push("cp-state-all-gather", phase, OpKind::CpComm, Flops::ZERO, state, time);
    }
}

/// Context parallelism of a Mamba-2 layer as Megatron-Core's `MambaContextParallel` runs it:
/// all-to-alls over the CP group trade the sequence shard for a head shard before the
/// convolution and scan (z, x, B, C and dt) and back after them (y), so each rank scans the whole
/// sequence for `1 / cp` of its heads; no state passes between ranks. B and C are copied to every
/// CP rank that has no group of its own (`cp` above the rank's groups). The backward moves the
/// same volume again.
fn mamba_context_parallel(ctx: &Ctx, table: &mut OpTable, mamba: &Mamba) {
    let run = ctx.run;
    let plan = run.plan();
    let (tp, cp) = (plan.tp(), plan.cp());
    let local_groups = (mamba.num_groups / tp).max(1);
    let replicated = (cp as f64 / local_groups as f64).max(1.0);
    let width =
        3.0 * mamba.inner() as f64 + mamba.bc() as f64 * replicated + mamba.num_heads as f64;
    let bytes = Bytes::new(ctx.tokens * width / tp as f64 * Precision::ACTIVATION_BYTES);
    let group = Group { size: cp, stride: tp };
    let time = collective_time(run.cluster().interconnect(), Collective::AllToAll, group, bytes);
    for phase in [Phase::Forward, Phase::Backward] {
        table.push("cp-mamba-all-to-all", phase, OpKind::CpAllToAll, Flops::ZERO, bytes, time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::layer::transformer_layer;
    use crate::cost::op_table::{Op, OpTotals};
    use crate::cost::work::Tables;
    use crate::model::{ModelSpec, SUBLAYER_KINDS};
    use crate::plan::PlanSpec;
    use crate::run::test_spec;

    fn run(model: ModelSpec, plan: PlanSpec) -> Run {
        let spec = test_spec("llama3.1-8b", 16, 8192, 64, 1, plan);
        Run::from_spec(&crate::run::RunSpec { model, ..spec }).unwrap()
    }

    #[test]
    fn an_attention_table_and_an_mlp_table_are_a_transformer_layer() {
        // "**--" keeps the hybrid path (it is not pairs of "*-"), over the same blocks.
        let llama = crate::presets::model("llama3.1-8b").unwrap();
        let hybrid =
            ModelSpec { num_layers: 4, hybrid_pattern: Some("**--".into()), ..llama.clone() };
        let plan = PlanSpec { tp: Some(2), sequence_parallel: Some(true), ..PlanSpec::default() };
        let run = run(hybrid, plan);
        let attention = sublayer(&run, Sublayer::Attention, Rows::TotalsOnly).totals;
        let mlp = sublayer(&run, Sublayer::Mlp, Rows::TotalsOnly).totals;
        let layer = transformer_layer(&run, true, Rows::TotalsOnly).totals;
        for phase in [Phase::Forward, Phase::Backward] {
            let (a, m, l) = (attention.phase(phase), mlp.phase(phase), layer.phase(phase));
            for (sum, whole) in [
                (a.compute + m.compute, l.compute),
                (a.tp + m.tp, l.tp),
                (a.attention + m.attention, l.attention),
                (a.memory + m.memory, l.memory),
            ] {
                assert!((sum - whole).value().abs() <= 1e-12 * whole.value().max(1e-30));
            }
        }
        // Segments of the hybrid price 2 attention and 2 MLP tables, nothing else.
        let tables = Tables::new(&run);
        assert!(tables.layers.sublayers.is_some());
    }

    #[test]
    fn a_mamba_layer_prices_its_projections_scan_and_norms() {
        let nano = crate::presets::model("nemotron-3-nano").unwrap();
        let plan = PlanSpec { ep: Some(8), ..PlanSpec::default() };
        let run = run(nano, plan);
        let table = sublayer(&run, Sublayer::Mamba, Rows::Keep);
        let names: Vec<&str> =
            table.ops.iter().filter(|op| op.phase == Phase::Forward).map(|op| op.name).collect();
        assert_eq!(
            names,
            ["input-norm", "in-proj", "conv1d", "ssd-scan", "gated-norm", "out-proj", "residual"]
        );
        // The in-projection: 2688 -> 2 x 4096 + 2 x 8 x 128 + 64 over 8192 tokens.
        let in_proj = table.ops.iter().find(|op| op.name == "in-proj").unwrap();
        assert_eq!(in_proj.flops.value(), 2.0 * 8192.0 * 2688.0 * 10304.0);
        let scan: Vec<_> = table.ops.iter().filter(|op| op.name == "ssd-scan").collect();
        assert!(scan[1].time > scan[0].time * 2.0, "the backward does 2.6x the forward's work");
        // The backward reruns the convolution over x, B and C (4096 + 2 x 8 x 128 channels).
        let rerun: Vec<_> = table.ops.iter().filter(|op| op.name == "conv1d-rerun").collect();
        assert_eq!(rerun.len(), 1);
        assert_eq!(rerun[0].phase, Phase::Backward);
        assert_eq!(rerun[0].bytes.value(), 8192.0 * 2.0 * 6144.0 * 2.0);
        // One sequence per micro-batch needs no layout copy.
        assert!(table.ops.iter().all(|op| op.name != "layout-copy"));
    }

    #[test]
    fn a_mamba_layer_of_several_sequences_copies_to_batch_first_and_back() {
        // Megatron-Core's mixer rearranges its (sequence, batch) input projection to (batch,
        // sequence) and its output back: read and write each, forward and backward.
        let nano = crate::presets::model("nemotron-3-nano").unwrap();
        let spec = test_spec(
            "llama3.1-8b",
            16,
            8192,
            64,
            2,
            PlanSpec { ep: Some(8), ..PlanSpec::default() },
        );
        let run = Run::from_spec(&crate::run::RunSpec { model: nano, ..spec }).unwrap();
        let table = sublayer(&run, Sublayer::Mamba, Rows::Keep);
        let copies: Vec<(Phase, f64)> = table
            .ops
            .iter()
            .filter(|op| op.name == "layout-copy")
            .map(|op| (op.phase, op.bytes.value()))
            .collect();
        let tokens = 2.0 * 8192.0;
        let (input, output) = (tokens * 10304.0 * 4.0, tokens * 4096.0 * 4.0);
        assert_eq!(
            copies,
            [
                (Phase::Forward, input),
                (Phase::Backward, input),
                (Phase::Forward, output),
                (Phase::Backward, output)
            ]
        );
    }

    #[test]
    fn context_parallel_mamba_layers_trade_the_sequence_for_heads_by_all_to_all() {
        let nano = crate::presets::model("nemotron-3-nano").unwrap();
        let plan = |cp| PlanSpec { cp: Some(cp), ep: Some(8), ..PlanSpec::default() };
        let (one, two) = (run(nano.clone(), plan(1)), run(nano.clone(), plan(2)));
        let a2a = |run: &Run| {
            let table = sublayer(run, Sublayer::Mamba, Rows::Keep);
            table
                .ops
                .iter()
                .filter(|op| op.name == "cp-mamba-all-to-all")
                .map(|op| op.bytes)
                .collect::<Vec<_>>()
        };
        assert!(a2a(&one).is_empty());
        // Per rank and pass: 4096 tokens x (3 x 4096 + 2 x 8 x 128 + 64) bf16 values.
        let bytes = 4096.0 * (3.0 * 4096.0 + 2048.0 + 64.0) * 2.0;
        assert_eq!(a2a(&two).iter().map(|b| b.value()).collect::<Vec<_>>(), [bytes, bytes]);
        // Each CP rank needs whole heads: 64 heads do not split over cp 3.
        let spec = test_spec("llama3.1-8b", 24, 8192, 48, 1, plan(3));
        let refused = Run::from_spec(&crate::run::RunSpec { model: nano, ..spec }).unwrap_err();
        assert!(
            refused
                .list()
                .iter()
                .any(|v| v.field == "plan.cp" && v.message.contains("Mamba-2 heads"))
        );
    }

    #[test]
    fn a_gated_delta_net_layer_gathers_its_states_across_context_parallel_ranks() {
        let qwen = crate::presets::model("qwen3-next-80b-a3b").unwrap();
        let plan = |cp| PlanSpec { cp: Some(cp), ep: Some(8), ..PlanSpec::default() };
        let table =
            |cp| sublayer(&run(qwen.clone(), plan(cp)), Sublayer::GatedDeltaNet, Rows::Keep);
        let names: Vec<&str> =
            table(1).ops.iter().filter(|op| op.phase == Phase::Forward).map(|op| op.name).collect();
        assert_eq!(
            names,
            [
                "input-norm",
                "in-proj",
                "conv1d",
                "gated-delta-rule",
                "gated-norm",
                "out-proj",
                "residual"
            ]
        );
        // LASP-2: one all-gather of each rank's 32 x 128 x 128 FP32 state, forward and backward.
        let gathers: Vec<f64> = table(2)
            .ops
            .iter()
            .filter(|op| op.name == "cp-state-all-gather")
            .map(|op| op.bytes.value())
            .collect();
        assert_eq!(gathers, [32.0 * 128.0 * 128.0 * 4.0; 2]);
    }

    #[test]
    fn a_lightning_attention_layer_silus_its_projections_and_gathers_its_states() {
        let minimax = crate::presets::model("minimax-text-01").unwrap();
        let plan = |cp| PlanSpec { cp: Some(cp), tp: Some(8), ep: Some(8), ..PlanSpec::default() };
        let table = |cp| {
            let spec = test_spec("llama3.1-8b", 64, 8192, 64, 1, plan(cp));
            let run = Run::from_spec(&crate::run::RunSpec { model: minimax.clone(), ..spec });
            sublayer(&run.unwrap(), Sublayer::LightningAttention, Rows::Keep)
        };
        let one = table(1);
        let names: Vec<&str> =
            one.ops.iter().filter(|op| op.phase == Phase::Forward).map(|op| op.name).collect();
        assert_eq!(
            names,
            [
                "tp-lightning-attention",
                "input-norm",
                "in-proj",
                "qkv-silu",
                "lightning-attention",
                "gated-norm",
                "out-proj",
                "residual"
            ]
        );
        // q, k, v and the gate (4 x 8192) out of 6144, split over tp 8, for 8192 tokens.
        let in_proj = one.ops.iter().find(|op| op.name == "in-proj").unwrap();
        assert_eq!(in_proj.flops.value(), 2.0 * 8192.0 * 6144.0 * 4.0 * 8192.0 / 8.0);
        // LASP-2: each rank's 8 heads' 128 x 128 FP32 states, forward and backward.
        let gathers: Vec<f64> = table(2)
            .ops
            .iter()
            .filter(|op| op.name == "cp-state-all-gather")
            .map(|op| op.bytes.value())
            .collect();
        assert_eq!(gathers, [8.0 * 128.0 * 128.0 * 4.0; 2]);
    }

    #[test]
    fn a_mamba1_layer_runs_its_selective_scan_on_the_cuda_cores() {
        let jamba = crate::presets::model("jamba-v0.1").unwrap();
        let plan = |tp| PlanSpec { tp: Some(tp), ep: Some(8), ..PlanSpec::default() };
        let table = |tp| sublayer(&run(jamba.clone(), plan(tp)), Sublayer::Mamba1, Rows::Keep);
        let one = table(1);
        let names: Vec<&str> =
            one.ops.iter().filter(|op| op.phase == Phase::Forward).map(|op| op.name).collect();
        assert_eq!(
            names,
            [
                "input-norm",
                "in-proj",
                "conv1d",
                "x-proj",
                "dt-bc-norms",
                "dt-proj",
                "selective-scan",
                "out-proj",
                "residual"
            ]
        );
        // x and z (2 x 8192) from 4096, for 8192 tokens.
        let in_proj = one.ops.iter().find(|op| op.name == "in-proj").unwrap();
        assert_eq!(in_proj.flops.value(), 2.0 * 8192.0 * 4096.0 * 16384.0);
        // 8192 tokens x 8192 channels x 16 states, each 8 FP32 instructions and one exponential
        // (8 instructions' time on Hopper) forward, at half H100's 67 TFLOP/s FP32 peak in
        // instructions a second: 0.51 ms, above the 0.20 ms of its memory traffic.
        let scan: Vec<_> = one.ops.iter().filter(|op| op.name == "selective-scan").collect();
        let recurrences = 8192.0 * 8192.0 * 16.0;
        let issue_bound = 2.0 * (8.0 + 8.0) * recurrences / 67e12;
        assert!((scan[0].time.value() - issue_bound).abs() < 1e-12, "{:?}", scan[0].time);
        // Backward: the atomic additions of dB and dC (8 bytes a recurrence) set its time.
        assert!(scan[1].bytes.value() > recurrences * SCAN_BACKWARD_ATOMIC_BYTES);
        assert!(scan[1].time > scan[0].time * 3.0);
        // Under TP, x_proj's 256 + 2 x 16 outputs are all-reduced, forward and backward.
        let gathers: Vec<f64> = table(2)
            .ops
            .iter()
            .filter(|op| op.name == "tp-x-proj")
            .map(|op| op.bytes.value())
            .collect();
        assert_eq!(gathers, [8192.0 * 288.0 * 2.0; 2]);
    }

    #[test]
    fn a_falcon_h1_layer_is_its_three_blocks_on_one_pre_norm() {
        let falcon = crate::presets::model("falcon-h1-0.5b").unwrap();
        let parallel_run = run(falcon.clone(), PlanSpec::default());
        let ops = |run: &Run, kind| sublayer(run, kind, Rows::Keep).ops;
        let mut parts = Vec::new();
        for kind in crate::model::PARALLEL_HYBRID_PARTS {
            let mut block = ops(&parallel_run, kind);
            if kind == Sublayer::Attention {
                block.retain(|op| op.name != "input-norm");
            }
            parts.extend(block);
        }
        let parallel = ops(&parallel_run, Sublayer::ParallelHybrid);
        assert_eq!(parallel, parts);
        // Without its gated RMSNorm (mamba_rms_norm false) the scan kernel reads the gate z,
        // 1536 wide, itself.
        assert!(parallel.iter().all(|op| op.name != "gated-norm"));
        let mut gated = falcon;
        gated.mamba.as_mut().unwrap().gated_norm = Some(true);
        let scan = |ops: &[Op]| ops.iter().find(|op| op.name == "ssd-scan").unwrap().bytes.value();
        let with_norm = ops(&run(gated, PlanSpec::default()), Sublayer::Mamba);
        assert!(with_norm.iter().any(|op| op.name == "gated-norm"));
        let tokens = parallel_run.tokens_per_microbatch();
        assert_eq!(scan(&parallel) - scan(&with_norm), 1536.0 * 2.0 * tokens);
    }

    #[test]
    fn short_documents_shrink_attention_but_not_the_recurrent_kernels() {
        // Packed 1K documents in 8K sequences: attention's work falls with the squares of the
        // documents' lengths, the scan's stays with the tokens.
        let nano = crate::presets::model("nemotron-3-nano").unwrap();
        let plan = PlanSpec { ep: Some(8), ..PlanSpec::default() };
        let with = |data: Option<crate::data::DataSpec>| {
            let spec = test_spec("llama3.1-8b", 16, 8192, 64, 1, plan.clone());
            let run = Run::from_spec(&crate::run::RunSpec { model: nano.clone(), data, ..spec });
            Tables::new(&run.unwrap()).layers.sublayers.unwrap()
        };
        let documents =
            crate::data::DataSpec { lengths: Some(vec![1024; 64]), ..Default::default() };
        let (whole, short) = (with(None), with(Some(documents)));
        let (mamba, attention) = (Sublayer::Mamba.index(), Sublayer::Attention.index());
        for phase in [Phase::Forward, Phase::Backward] {
            let scan =
                |tables: &[OpTotals; SUBLAYER_KINDS]| tables[mamba].phase(phase).recurrence.value();
            assert!(scan(&whole) > 0.0);
            assert!((scan(&short) - scan(&whole)).abs() <= 1e-12 * scan(&whole));
            let core = |tables: &[OpTotals; SUBLAYER_KINDS]| {
                tables[attention].phase(phase).attention.value()
            };
            assert!(core(&short) < 0.5 * core(&whole), "{} {}", core(&short), core(&whole));
        }
    }
}

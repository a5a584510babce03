//! The step-level terms that are not rows of a layer's op table: one pipeline send, the
//! data-parallel collectives that synchronize a rank's parameters, and the optimizer step. The
//! closed form (`step.rs`) and the priced run (`priced.rs`) both take them from here.

use crate::cost::collective::{Collective, Group, collective_time};
use crate::cost::kernels::memory_time;
use crate::cost::memory::{Params, layer_input_bytes, shard_counts};
use crate::plan::{Precision, Sharding};
use crate::run::Run;
use crate::units::{Bytes, Seconds};

/// HBM traffic of an Adam step per parameter of the shard being updated, besides the moments:
/// read the FP32 gradient and master weight (8 bytes), write the master weight (4) and the 16-bit
/// weight (2). Each moment is read and written once more at its own precision (30 bytes in all
/// with FP32 moments).
const ADAM_BYTES_PER_SHARD_PARAM: f64 = 14.0;
/// HBM traffic per parameter of the whole gradient buffer: the gradient-norm read and the zeroing
/// write of the FP32 buffer.
const GRADIENT_BUFFER_BYTES_PER_PARAM: f64 = 8.0;

/// One pipeline send/receive of a micro-batch's activations (or their gradients) between
/// neighbouring stages, which sit `tp x cp x dp` ranks apart in Megatron-LM's rank order.
pub fn p2p_transfer(run: &Run) -> Seconds {
    let plan = run.plan();
    let bytes = p2p_bytes(run);
    let group = Group { size: 2, stride: plan.tp() * plan.cp() * plan.dp() };
    collective_time(run.cluster().interconnect(), Collective::SendRecv, group, bytes)
}

/// Bytes of one pipeline send: a micro-batch's activations, split by TP under sequence parallelism.
pub fn p2p_bytes(run: &Run) -> Bytes {
    layer_input_bytes(run)
}

/// The data-parallel collectives over `params` parameters, each as one un-overlapped duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DataParallelCollectives {
    /// Gradient all-reduce over the sharding group (plain DDP).
    pub all_reduce: Seconds,
    /// Gradient reduce-scatter over the sharding group (ZeRO / FSDP).
    pub reduce_scatter: Seconds,
    /// 16-bit parameter all-gather over the sharding group.
    pub all_gather: Seconds,
    /// Hybrid sharding: the shard's all-reduce across replicas.
    pub replica_reduce: Seconds,
}

/// The collectives that synchronize a rank's parameters across data-parallel ranks: dense
/// parameters over the (hybrid-)shard group of `dp x cp` ranks, routed-expert parameters over the
/// expert-data-parallel ranks (`edp`, laid out `etp x ep` ranks apart). The two run one after the
/// other on the same stream.
pub fn data_parallel_collectives(run: &Run, params: Params) -> DataParallelCollectives {
    let plan = run.plan();
    let links = run.cluster().interconnect();
    let grad_bytes_per_param = if plan.grad_reduce_in_fp32() { 4.0 } else { 2.0 };
    let shard = Group { size: plan.shard_group() * plan.cp(), stride: plan.tp() };
    let replicas = plan.dp() / plan.shard_group();
    let replicate = Group { size: replicas, stride: plan.tp() * plan.cp() * plan.shard_group() };
    let expert_shard = Group {
        size: (plan.edp() * plan.shard_group() / plan.dp()).max(1),
        stride: plan.etp() * plan.ep(),
    };
    let expert_replicas = Group {
        size: plan.edp() / expert_shard.size,
        stride: plan.etp() * plan.ep() * expert_shard.size,
    };
    let over = |params: f64, shard: Group, replicate: Group| {
        let grad_bytes = Bytes::new(params * grad_bytes_per_param);
        let param_bytes = Bytes::new(params * Precision::ACTIVATION_BYTES);
        DataParallelCollectives {
            all_reduce: collective_time(links, Collective::AllReduce, shard, grad_bytes),
            reduce_scatter: collective_time(links, Collective::ReduceScatter, shard, grad_bytes),
            all_gather: collective_time(links, Collective::AllGather, shard, param_bytes),
            replica_reduce: collective_time(
                links,
                Collective::AllReduce,
                replicate,
                grad_bytes / shard.size as f64,
            ),
        }
    };
    let dense = over(params.dense, shard, replicate);
    if params.expert <= 0.0 {
        return dense;
    }
    let expert = over(params.expert, expert_shard, expert_replicas);
    DataParallelCollectives {
        all_reduce: dense.all_reduce + expert.all_reduce,
        reduce_scatter: dense.reduce_scatter + expert.reduce_scatter,
        all_gather: dense.all_gather + expert.all_gather,
        replica_reduce: dense.replica_reduce + expert.replica_reduce,
    }
}

/// The Adam step and gradient bookkeeping of a rank holding `params` parameters.
pub fn optimizer_time_for(run: &Run, params: Params) -> Seconds {
    let plan = run.plan();
    let [_, _, (dense_shard, expert_shard)] = shard_counts(run);
    let (dense_shard, expert_shard) = match plan.sharding() {
        Sharding::None => (1.0, 1.0),
        _ => (dense_shard, expert_shard),
    };
    let shard_params = params.dense / dense_shard + params.expert / expert_shard;
    let moments = 2.0 * 2.0 * plan.adam_moments().bytes();
    let bytes = shard_params * (ADAM_BYTES_PER_SHARD_PARAM + moments)
        + params.total() * GRADIENT_BUFFER_BYTES_PER_PARAM;
    memory_time(run.cluster().gpu(), Bytes::new(bytes))
}

//! The checkpoint a plan makes: its size from the plan's own memory model (BF16 weights, FP32
//! master weights and Adam moments of every parameter, each saved once however the plan
//! replicates it), the largest rank's share, and the time to block, save and load it.

use serde::{Deserialize, Serialize};

use crate::cost::memory::{
    WEIGHT_BYTES_PER_PARAM, host_offload_need, optimizer_bytes_per_param, stage_memory,
};
use crate::hardware::LinkTier;
use crate::run::Run;
use crate::units::{Bytes, BytesPerSec, Seconds};

/// How training waits for a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointMode {
    /// Training stops until the checkpoint is on storage.
    Sync,
    /// Training stops only for the device-to-host copy of each rank's share; the write to
    /// storage runs behind the next steps (Megatron-Core's async save, ByteCheckpoint, MegaScale's
    /// two-stage checkpoint).
    Async,
}

impl CheckpointMode {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::Sync => "sync",
            CheckpointMode::Async => "async",
        }
    }
}

/// One checkpoint of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Checkpoint {
    /// How training waits for it.
    pub mode: CheckpointMode,
    /// Whether it is kept in the hosts' memory (else on shared storage).
    pub in_host_memory: bool,
    /// Bytes of the whole checkpoint.
    pub total: Bytes,
    /// Bytes the rank with the largest share writes (ranks of the heaviest pipeline stage).
    pub largest_share: Bytes,
    /// Time training stops for each checkpoint.
    pub blocking: Seconds,
    /// Time to write the whole checkpoint to storage.
    pub save: Seconds,
    /// Time to read it back at a restart.
    pub load: Seconds,
    /// Kept in host memory: what it takes of the host memory each GPU has, two copies of the
    /// largest share (the rank's own and the peer's replica it keeps, GEMINI's two), and that
    /// capacity where the GPU's file states it.
    pub host: Option<CheckpointHostMemory>,
}

/// The host memory an in-memory checkpoint takes per GPU, beside the activations the plan
/// offloads there, against what each GPU has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CheckpointHostMemory {
    /// Two copies of the largest rank's share.
    pub per_gpu: Bytes,
    /// The activations the plan offloads to the same memory at its peak (zero without offload).
    pub offloaded: Bytes,
    /// The server's host memory over its GPUs; `None` where the GPU's file does not state it.
    pub capacity: Option<Bytes>,
}

impl CheckpointHostMemory {
    /// Whether the copies and the offloaded activations fit together (an unstated capacity is
    /// not checked).
    pub fn fits(&self) -> bool {
        self.capacity.is_none_or(|capacity| self.per_gpu + self.offloaded <= capacity)
    }
}

/// Copies of each rank's share an in-memory checkpoint keeps: its own and one peer's replica.
pub const HOST_MEMORY_CHECKPOINT_COPIES: f64 = 2.0;

/// Where checkpoints are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Storage {
    /// A file system writing at `write` and reading at `read`, aggregate over the job, and at
    /// `per_node` through each node when given.
    Shared {
        /// Aggregate write bandwidth.
        write: BytesPerSec,
        /// Aggregate read bandwidth.
        read: BytesPerSec,
        /// One node's bandwidth, each way.
        per_node: Option<BytesPerSec>,
    },
    /// The hosts' memory, each rank's share copied to a peer host (GEMINI, SOSP'23): saved over
    /// the host link and the network, loaded back from the peer over the network.
    HostMemory,
}

/// The checkpoint of `run` kept in `storage`. Without a host link in the cluster's description,
/// an asynchronous checkpoint has no copy to price and blocks like a synchronous one.
pub fn checkpoint(run: &Run, mode: CheckpointMode, storage: Storage) -> Checkpoint {
    let params = run.model().total_params() as f64;
    let total = Bytes::new(params * (WEIGHT_BYTES_PER_PARAM + optimizer_bytes_per_param(run)));
    // Ranks save disjoint shares (Megatron-Core's fully parallel save); the heaviest stage's
    // ranks hold the most.
    let states: Vec<f64> = stage_memory(run)
        .iter()
        .map(|s| (s.breakdown.weights + s.breakdown.optimizer_states).value())
        .collect();
    let mean = states.iter().sum::<f64>() / states.len().max(1) as f64;
    let heaviest = states.iter().copied().fold(0.0, f64::max);
    let imbalance = if mean > 0.0 { heaviest / mean } else { 1.0 };
    let gpus = run.cluster().num_gpus().max(1) as f64;
    let largest_share = Bytes::new(total.value() / gpus * imbalance);
    let links = run.cluster().interconnect();
    let host = links.host_bandwidth();
    let (save, load) = match storage {
        Storage::Shared { write, read, per_node } => {
            // The busiest node moves its ranks' shares through its own link.
            let node = per_node
                .map_or(Seconds::ZERO, |rate| largest_share * links.gpus_per_node() as f64 / rate);
            ((total / write).max(node), (total / read).max(node))
        }
        Storage::HostMemory => {
            let network = links.bandwidth(LinkTier::Network);
            let to_host = host.map_or(Seconds::ZERO, |host| largest_share / host);
            (to_host + largest_share / network, largest_share / network)
        }
    };
    let blocking = match (mode, host) {
        (CheckpointMode::Async, Some(host)) => largest_share / host,
        _ => save,
    };
    let in_host_memory = storage == Storage::HostMemory;
    let host = in_host_memory.then(|| CheckpointHostMemory {
        per_gpu: largest_share * HOST_MEMORY_CHECKPOINT_COPIES,
        offloaded: host_offload_need(run),
        capacity: links.host_memory_per_gpu(),
    });
    Checkpoint { mode, in_host_memory, total, largest_share, blocking, save, load, host }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::ClusterSpec;
    use crate::plan::{PipelineSplit, PlanSpec, TrainingSpec};
    use crate::{RunSpec, presets};

    /// ByteCheckpoint's Llama 3.1 405B job: TP8 DP70 PP16 on 8,960 GPUs.
    fn bytecheckpoint_405b() -> Run {
        Run::from_spec(&RunSpec {
            model: presets::model("llama3.1-405b").unwrap(),
            cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 8960 },
            training: TrainingSpec {
                seq_len: 8192,
                global_batch: 1120,
                micro_batch: Some(1),
                precision: None,
            },
            plan: PlanSpec {
                tp: Some(8),
                pp: Some(16),
                pipeline_split: Some(PipelineSplit::EmbeddingAndLoss),
                ..PlanSpec::default()
            },
            data: None,
        })
        .unwrap()
    }

    #[test]
    fn bytecheckpoint_405b_save_and_load_follow_from_the_bandwidth_they_imply() {
        // ByteCheckpoint (arXiv 2407.20143v4, Table 8): saving the 405B job's checkpoint took
        // 51.06 s and loading it 129.49 s, which at 14 bytes per parameter implies about 111 GB/s
        // of aggregate write and 44 GB/s of read bandwidth.
        let run = bytecheckpoint_405b();
        let write = BytesPerSec::giga(111.0);
        let read = BytesPerSec::giga(43.8);
        let shared = Storage::Shared { write, read, per_node: None };
        let ckpt = checkpoint(&run, CheckpointMode::Async, shared);
        let per_param = ckpt.total.value() / run.model().total_params() as f64;
        assert!((12.0..=16.0).contains(&per_param), "{per_param} bytes per parameter");
        assert!((ckpt.save.value() - 51.06).abs() / 51.06 < 0.05, "save {:?}", ckpt.save);
        assert!((ckpt.load.value() - 129.49).abs() / 129.49 < 0.05, "load {:?}", ckpt.load);
        // The blocking copy of one rank's share over PCIe is well under ByteCheckpoint's 0.59 s.
        assert!(ckpt.blocking.value() < 0.59, "{:?}", ckpt.blocking);
        assert!(ckpt.largest_share.value() * 8960.0 >= ckpt.total.value());
        let sync = checkpoint(&run, CheckpointMode::Sync, shared);
        assert_eq!(sync.blocking, sync.save);
        // In the hosts' memory, one rank's share moves instead of the whole checkpoint.
        let memory = checkpoint(&run, CheckpointMode::Async, Storage::HostMemory);
        assert!(memory.save.value() < 0.1 * ckpt.save.value(), "{:?}", memory.save);
        assert!(memory.load.value() < 0.1 * ckpt.load.value(), "{:?}", memory.load);
        // Kept in memory, each host holds its ranks' shares and a peer's replica: two shares a
        // GPU, against a DGX H100's 2 TB over 8 GPUs; on storage, no host memory.
        let host = memory.host.unwrap();
        assert_eq!(host.per_gpu, memory.largest_share * 2.0);
        assert_eq!(host.capacity.unwrap().value(), 2e12 / 8.0);
        assert!(host.fits());
        assert_eq!(host.offloaded, Bytes::ZERO);
        let tight = CheckpointHostMemory { capacity: Some(host.per_gpu * 0.5), ..host };
        assert!(!tight.fits());
        // Activations offloaded to the same memory count against it too.
        let shared = CheckpointHostMemory {
            offloaded: host.per_gpu,
            capacity: Some(host.per_gpu * 1.5),
            ..host
        };
        assert!(!shared.fits());
        assert_eq!(ckpt.host, None);
        // A slow node link bounds the save: 8 ranks' shares through 10 MB/s.
        let slow = Storage::Shared { write, read, per_node: Some(BytesPerSec::giga(0.01)) };
        let node_bound = checkpoint(&run, CheckpointMode::Sync, slow);
        let expected = ckpt.largest_share.value() * 8.0 / 1e7;
        assert!((node_bound.save.value() - expected).abs() < 1e-9 * expected);
        assert!(node_bound.save > ckpt.save);
    }
}

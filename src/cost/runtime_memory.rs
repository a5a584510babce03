//! Device memory a training process holds besides its model states and activations: the CUDA
//! context, NCCL's communicator buffers, the cuBLAS / Transformer Engine GEMM workspaces, and the
//! PyTorch caching allocator's reserved-over-allocated overhead. Each constant names its source.

use crate::units::Bytes;

/// MiB in bytes.
const MIB: f64 = 1024.0 * 1024.0;

/// The CUDA context with the kernel modules a training process loads, in GiB. Measured: 1.06 GB
/// of device memory outside PyTorch's allocator on an H100 after NCCL initialisation and before
/// the first collective (NVIDIA/nccl issue #1685); CUDA's lazy module loading (the default since
/// CUDA 11.7 / PyTorch 1.13) keeps it near that whatever the number of kernels linked.
pub const CUDA_CONTEXT_GIB: f64 = 1.0;

/// Device memory NCCL allocates for one connection of one channel, in MiB: the FIFOs of its three
/// protocols, Simple (`NCCL_BUFFSIZE`, 4 MiB by default, NCCL environment documentation), LL128
/// and LL. NVIDIA/nccl issue #1685 logs (`NCCL_DEBUG_SUBSYS=ALLOC`) one 10485760-byte allocation
/// per channel and peer.
pub const NCCL_CONNECTION_MIB: f64 = 10.0;

/// Channels of a ring collective communicator on NVLink GPUs: NCCL's `MAXCHANNELS` is 32 and
/// issue #1685 shows all 32 set up between H100s; memory is linear in channels (issue #986,
/// sjeaugey). A ring has one receiving connection per channel on every rank.
pub const NCCL_RING_CHANNELS: f64 = 32.0;

/// Channels per peer of point-to-point traffic (pipeline sends, all-to-all): NCCL's
/// `NCCL_NCHANNELS_PER_NET_PEER` default of 2 for peers across the network; send/receive
/// operations share one buffer per peer and channel (issue #1450, sjeaugey).
pub const NCCL_P2P_CHANNELS_PER_PEER: f64 = 2.0;

/// One GEMM workspace, in MiB: PyTorch's cuBLAS workspace on Hopper and later (`:4096:8`, 8 x 4096
/// KiB, `getChosenWorkspaceSize` in aten/src/ATen/cuda/CublasHandlePool.cpp) and Transformer
/// Engine's cuBLASLt workspace (`get_cublas_workspace_size_bytes`, 32 MiB on Hopper).
pub const GEMM_WORKSPACE_MIB: f64 = 32.0;

/// GEMM workspaces a rank holds: cuBLAS on the compute stream and on the communication-overlap
/// stream, and Transformer Engine's own.
pub const GEMM_WORKSPACES: f64 = 3.0;

/// The caching allocator's reserved-over-allocated overhead as a fraction of the allocated peak:
/// rounding (requests under 1 MiB come from 2 MiB blocks, 1-10 MiB ones from 20 MiB blocks,
/// larger ones round up to 2 MiB; PyTorch's CUDA memory-management notes) and freed blocks of
/// other sizes kept cached. Measured: the median of `max reserved / max allocated - 1` in three
/// published Megatron-LM training logs (`report_memory`: 12906 / 10596, 8786 / 8697,
/// 1126 / 999.6 MB), 0.127.
pub const ALLOCATOR_CACHE_FRACTION: f64 = 0.127;

/// The CUDA context of one process.
pub fn cuda_context() -> Bytes {
    Bytes::gib(CUDA_CONTEXT_GIB)
}

/// The GEMM workspaces of one rank.
pub fn gemm_workspaces() -> Bytes {
    Bytes::new(GEMM_WORKSPACES * GEMM_WORKSPACE_MIB * MIB)
}

/// The communicators a rank uses, by kind, for NCCL's buffers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Communicators {
    /// Ring collective communicators of more than one rank (TP, CP, data-parallel groups).
    pub rings: u64,
    /// Peers a rank exchanges point-to-point with (pipeline neighbours, all-to-all peers).
    pub p2p_peers: u64,
}

/// NCCL's buffers for a rank's communicators: 32 channels of one ring connection each per ring,
/// two channels per point-to-point peer, 10 MiB per channel and connection.
pub fn nccl_buffers(communicators: Communicators) -> Bytes {
    let connections = communicators.rings as f64 * NCCL_RING_CHANNELS
        + communicators.p2p_peers as f64 * NCCL_P2P_CHANNELS_PER_PEER;
    Bytes::new(connections * NCCL_CONNECTION_MIB * MIB)
}

/// The allocator's cached overhead over an allocated peak.
pub fn allocator_cache(allocated: Bytes) -> Bytes {
    allocated * ALLOCATOR_CACHE_FRACTION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nccl_connection_holds_the_10_mib_issue_1685_logs() {
        // NCCL_DEBUG_SUBSYS=ALLOC on 8 x H100: one 10485760-byte buffer per channel and peer.
        let one = nccl_buffers(Communicators { rings: 0, p2p_peers: 1 });
        assert_eq!(one.value(), 2.0 * 10_485_760.0);
        // A ring over 32 channels: 320 MiB per rank.
        let ring = nccl_buffers(Communicators { rings: 1, p2p_peers: 0 });
        assert_eq!(ring.value(), 32.0 * 10_485_760.0);
    }

    #[test]
    fn workspaces_are_pytorchs_hopper_cublas_size_three_times() {
        // `:4096:8`: 8 chunks of 4096 KiB = 32 MiB each.
        assert_eq!(gemm_workspaces().value(), 3.0 * 8.0 * 4096.0 * 1024.0);
    }

    #[test]
    fn the_allocator_cache_reproduces_the_median_published_log() {
        // Megatron-LM log: max allocated 10595.8 MB, max reserved 12906 MB; 8696.9 / 8786;
        // 999.6 / 1126. The median ratio is 1126 / 999.6.
        let ratios = [12906.0 / 10595.8, 8786.0 / 8696.9, 1126.0 / 999.6];
        let mut sorted = ratios;
        sorted.sort_by(f64::total_cmp);
        let predicted = Bytes::new(999.6) + allocator_cache(Bytes::new(999.6));
        assert!((predicted.value() / 999.6 - sorted[1]).abs() < 1e-3);
    }
}

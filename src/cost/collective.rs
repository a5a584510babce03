//! Collective communication time on a two-tier topology (NVLink domain, then NICs).
//!
//! Costs follow the ring alpha-beta model with NCCL's bus-bandwidth factors (reference file
//! section 8.1-8.2): an all-reduce of `S` bytes over `n` ranks moves `2 (n-1)/n S` through each
//! rank's bottleneck link, all-gather and reduce-scatter `(n-1)/n S` (`S` is the full, gathered
//! size), a send/receive `S`. The bottleneck of a group that spans NVLink domains is the NICs:
//! every domain pushes the ring's traffic through the NICs of its members in the group, so the
//! bandwidth per rank is `min(NVLink, members_per_domain x NIC)`, which reproduces NCCL's
//! multi-node all-reduce bus bandwidth (~370 GB/s on 8 x 400G H100 nodes, ~46 GB/s for one GPU per
//! node). A send/receive across domains, and the remote share of an all-to-all, go through one NIC
//! per GPU (NCCL cannot aggregate NICs for them, reference 8.4). Latency is one per ring step,
//! NVLink or network as the step crosses.

use crate::hardware::Interconnect;
use crate::units::{Bytes, BytesPerSec, Seconds};

/// A collective operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    /// Sum across ranks, result everywhere.
    AllReduce,
    /// Concatenate shards, result everywhere.
    AllGather,
    /// Sum across ranks, each keeps one shard.
    ReduceScatter,
    /// Every rank sends a distinct shard to every other.
    AllToAll,
    /// One point-to-point transfer to a neighbour.
    SendRecv,
}

/// A group of ranks: its size and the rank distance between consecutive members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// Number of ranks.
    pub size: u64,
    /// Global-rank distance between consecutive members (Megatron order `tp-cp-ep-dp-pp`).
    pub stride: u64,
}

struct Path {
    bandwidth: BytesPerSec,
    intra_latency: Seconds,
    inter_latency: Seconds,
    domains: u64,
}

/// Members of `group` that share one NVLink domain (at least 1, at most the group).
pub fn members_per_domain(interconnect: &Interconnect, group: Group) -> u64 {
    (interconnect.nvlink_domain() / group.stride.max(1)).clamp(1, group.size.max(1))
}

fn path(interconnect: &Interconnect, group: Group, collective: Collective) -> Path {
    use crate::hardware::LinkTier::{Network, Nvlink};
    let members_per_domain = members_per_domain(interconnect, group);
    let domains = group.size.div_ceil(members_per_domain);
    let nvlink = interconnect.bandwidth(Nvlink);
    let bandwidth = if domains <= 1 {
        nvlink
    } else if collective == Collective::SendRecv {
        interconnect.bandwidth(Network)
    } else {
        nvlink.min(interconnect.bandwidth(Network) * members_per_domain as f64)
    };
    Path {
        bandwidth,
        intra_latency: interconnect.latency(Nvlink),
        inter_latency: interconnect.latency(Network),
        domains,
    }
}

/// Time of a collective of `bytes` (the full buffer, nccl-tests convention) over a group.
pub fn collective_time(
    interconnect: &Interconnect,
    collective: Collective,
    group: Group,
    bytes: Bytes,
) -> Seconds {
    if group.size <= 1 || bytes.value() <= 0.0 {
        return Seconds::ZERO;
    }
    match collective_terms(interconnect, collective, group) {
        Some(terms) => terms.time(bytes),
        None => all_to_all_time(interconnect, group, bytes),
    }
}

/// What times a ring or send/receive collective over a group: its steps' latency, and the
/// factor and bandwidth its bytes move at. A caller that times many buffers over one group
/// computes them once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectiveTerms {
    /// The latency of its steps.
    pub latency: Seconds,
    /// The share of the buffer each rank moves.
    pub factor: f64,
    /// The bandwidth it moves at.
    pub bandwidth: BytesPerSec,
}

impl CollectiveTerms {
    /// The time of a buffer of `bytes` (more than none, over a group of more than one rank).
    pub fn time(&self, bytes: Bytes) -> Seconds {
        self.latency + (bytes * self.factor) / self.bandwidth
    }
}

/// The terms of `collective` over `group` (of more than one rank); `None` for an all-to-all,
/// which [`all_to_all_time`] times over both tiers at once.
pub fn collective_terms(
    interconnect: &Interconnect,
    collective: Collective,
    group: Group,
) -> Option<CollectiveTerms> {
    let n = group.size as f64;
    let path = path(interconnect, group, collective);
    let (factor, steps, inter_steps) = match collective {
        Collective::AllToAll => return None,
        Collective::AllReduce => {
            (2.0 * (n - 1.0) / n, 2 * (group.size - 1), 2 * (path.domains - 1))
        }
        Collective::AllGather | Collective::ReduceScatter => {
            ((n - 1.0) / n, group.size - 1, path.domains - 1)
        }
        Collective::SendRecv => (1.0, 1, u64::from(path.domains > 1)),
    };
    let intra_steps = steps - inter_steps;
    let latency = path.intra_latency * intra_steps as f64 + path.inter_latency * inter_steps as f64;
    Some(CollectiveTerms { latency, factor, bandwidth: path.bandwidth })
}

/// Pairwise-exchange all-to-all (reference section 8.1: `(p - 1) alpha + n beta`, `n` the bytes a
/// rank sends) on the two-tier topology: of a rank's `bytes` (its whole buffer, the share for
/// itself included), the shares for peers in its NVLink domain go over NVLink and the rest over
/// its one NIC, both at once; the slower tier sets the time.
pub fn all_to_all_time(interconnect: &Interconnect, group: Group, bytes: Bytes) -> Seconds {
    use crate::hardware::LinkTier::{Network, Nvlink};
    if group.size <= 1 || bytes.value() <= 0.0 {
        return Seconds::ZERO;
    }
    let n = group.size as f64;
    let local = members_per_domain(interconnect, group);
    let remote = group.size - local;
    let intra = bytes * ((local - 1) as f64 / n) / interconnect.bandwidth(Nvlink)
        + interconnect.latency(Nvlink) * (local - 1) as f64;
    let inter = bytes * (remote as f64 / n) / interconnect.bandwidth(Network)
        + interconnect.latency(Network) * remote as f64;
    intra.max(inter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::Interconnect;
    use crate::presets;

    fn h100_links() -> Interconnect {
        Interconnect::from_spec(&presets::gpu("h100-sxm").unwrap().interconnect).unwrap()
    }

    #[test]
    fn ring_all_reduce_matches_the_alpha_beta_formula() {
        let links = h100_links();
        let bytes = Bytes::new(1e9);
        let group = Group { size: 8, stride: 1 };
        let time = collective_time(&links, Collective::AllReduce, group, bytes);
        let beta = 1.0 / (450e9 * 0.82);
        let expected = 14.0 * 3e-6 + 2.0 * 7.0 / 8.0 * 1e9 * beta;
        assert!((time.value() - expected).abs() < 1e-12, "{time:?} vs {expected}");
    }

    #[test]
    fn groups_across_nodes_are_limited_by_their_nics() {
        let links = h100_links();
        let bytes = Bytes::new(1e9);
        let one_per_node = Group { size: 16, stride: 8 };
        let time = collective_time(&links, Collective::ReduceScatter, one_per_node, bytes);
        let expected = 15.0 * 10e-6 + 15.0 / 16.0 * 1e9 / (50e9 * 0.92);
        assert!((time.value() - expected).abs() < 1e-12);
        // A whole-node group aggregates its eight NICs, capped by NVLink.
        let full_nodes = Group { size: 16, stride: 1 };
        let fast = collective_time(&links, Collective::ReduceScatter, full_nodes, bytes);
        assert!(fast.value() < time.value() / 7.0);
    }

    #[test]
    fn all_to_all_inside_a_node_is_the_pairwise_exchange_formula() {
        // (p - 1) alpha + n beta, n = the (p - 1) / p of the buffer a rank sends to its peers.
        let links = h100_links();
        let group = Group { size: 8, stride: 1 };
        let time = collective_time(&links, Collective::AllToAll, group, Bytes::new(1e9));
        let expected = 7.0 * 3e-6 + 7.0 / 8.0 * 1e9 / (450e9 * 0.82);
        assert!((time.value() - expected).abs() < 1e-12, "{time:?} vs {expected}");
    }

    #[test]
    fn all_to_all_across_nodes_sends_the_remote_share_through_one_nic() {
        // 32 ranks on four 8-GPU nodes: 24/32 of the buffer leaves the node over the rank's NIC
        // (24 network messages), 7/32 stays on NVLink at the same time.
        let links = h100_links();
        let group = Group { size: 32, stride: 1 };
        let time = collective_time(&links, Collective::AllToAll, group, Bytes::new(1e9));
        let network: f64 = 24.0 * 10e-6 + 24.0 / 32.0 * 1e9 / (50e9 * 0.92);
        let nvlink = 7.0 * 3e-6 + 7.0 / 32.0 * 1e9 / (450e9 * 0.82);
        assert!((time.value() - network.max(nvlink)).abs() < 1e-12);
        // Spread one rank per node (stride 8), every peer is remote.
        let spread = Group { size: 4, stride: 8 };
        let time = collective_time(&links, Collective::AllToAll, spread, Bytes::new(1e9));
        assert!((time.value() - (3.0 * 10e-6 + 0.75 * 1e9 / (50e9 * 0.92))).abs() < 1e-12);
    }

    #[test]
    fn a_group_of_one_costs_nothing() {
        let links = h100_links();
        let group = Group { size: 1, stride: 1 };
        assert_eq!(
            collective_time(&links, Collective::AllReduce, group, Bytes::new(1e9)),
            Seconds::ZERO
        );
    }
}

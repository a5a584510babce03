//! The expert-parallel token exchange of a deduplicating dispatcher (DeepEP, Megatron-LM's `flex`
//! dispatcher): each token crosses the network once per destination node and NVLink once per
//! destination rank, however many of its top-k experts that node or rank holds.
//!
//! With routing spread evenly over `E` experts, a group of `m` experts receives none of a token's
//! `k` choices with probability `C(E - m, k) / C(E, k)` (choices without replacement). A rank holds
//! `E / ep` experts and an NVLink domain `local x E / ep`, so a token reaches
//! `(nodes - 1) x (1 - miss(local E / ep))` remote domains and `(local - 1) x (1 - miss(E / ep))`
//! other ranks of its own domain, and each remote domain it reaches forwards it over NVLink to the
//! ranks there that hold its experts. The network and NVLink shares move at the same time; the
//! slower one sets the time (DeepSeek-V3 report, section 3.2.2; DeepEP's internode kernels).

use crate::cost::collective::{Group, members_per_domain};
use crate::hardware::{Interconnect, LinkTier};
use crate::units::{Bytes, Seconds};

/// Probability that `held` of `experts` experts receive none of a token's `top_k` choices.
pub fn miss_probability(experts: u64, held: u64, top_k: u64) -> f64 {
    (0..top_k).fold(1.0, |p, i| {
        let (free, all) = (experts.saturating_sub(held + i) as f64, (experts - i) as f64);
        if all <= 0.0 { 0.0 } else { p * free / all }
    })
}

/// What one rank dispatches: `tokens` tokens of `token_bytes` each, routed to `top_k` of
/// `experts` experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dispatch {
    /// Routed experts of the layer.
    pub experts: u64,
    /// Experts per token.
    pub top_k: u64,
    /// Tokens the rank dispatches.
    pub tokens: f64,
    /// Bytes of one token's hidden state.
    pub token_bytes: f64,
}

/// The EP group's size and how many of its members share an NVLink domain.
fn members(interconnect: &Interconnect, group: Group) -> (u64, u64) {
    let ep = group.size.max(1);
    (ep, members_per_domain(interconnect, group))
}

/// Bytes a rank sends over the network and over NVLink for a dispatch deduplicated per
/// destination node and rank, over an EP group.
pub fn deduplicated_volumes(
    interconnect: &Interconnect,
    group: Group,
    d: Dispatch,
) -> (Bytes, Bytes) {
    let (ep, local) = members(interconnect, group);
    let nodes = ep.div_ceil(local);
    let per_rank = d.experts / ep;
    let rank_hit = 1.0 - miss_probability(d.experts, per_rank, d.top_k);
    let node_hit = 1.0 - miss_probability(d.experts, per_rank * local, d.top_k);
    let remote_nodes = (nodes - 1) as f64 * node_hit;
    let local_ranks = (local - 1) as f64 * rank_hit;
    // A token that reaches a node is forwarded to the ranks there holding its experts, other than
    // the one that received it: by symmetry every rank forwards as much as it receives.
    let forwarded = if node_hit > 0.0 {
        remote_nodes * ((local as f64 * rank_hit / node_hit) - 1.0).max(0.0)
    } else {
        0.0
    };
    let per_copy = d.tokens * d.token_bytes;
    (Bytes::new(per_copy * remote_nodes), Bytes::new(per_copy * (local_ranks + forwarded)))
}

/// Time of one deduplicated dispatch (or its combine, which moves the same bytes back).
pub fn deduplicated_time(interconnect: &Interconnect, group: Group, d: Dispatch) -> Seconds {
    let (network, nvlink) = deduplicated_volumes(interconnect, group, d);
    let (ep, local) = members(interconnect, group);
    let over = |bytes: Bytes, tier: LinkTier, peers: u64| {
        if bytes.value() <= 0.0 {
            Seconds::ZERO
        } else {
            bytes / interconnect.bandwidth(tier) + interconnect.latency(tier) * peers as f64
        }
    };
    over(network, LinkTier::Network, ep - local).max(over(nvlink, LinkTier::Nvlink, local - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    fn h100_links() -> Interconnect {
        Interconnect::from_spec(&presets::gpu("h100-sxm").unwrap().interconnect).unwrap()
    }

    #[test]
    fn miss_probability_counts_choices_without_replacement() {
        // 8 experts, top-2: one given expert is missed with probability C(7,2) / C(8,2) = 7/8 x 6/7,
        // two given experts with C(6,2) / C(8,2) = 6/8 x 5/7.
        assert!((miss_probability(8, 1, 2) - 0.75).abs() < 1e-12);
        assert!((miss_probability(8, 2, 2) - 30.0 / 56.0).abs() < 1e-12);
        assert_eq!(miss_probability(8, 8, 2), 0.0);
        assert_eq!(miss_probability(8, 0, 2), 1.0);
    }

    #[test]
    fn one_expert_per_token_sends_what_a_plain_all_to_all_sends() {
        // Top-1: no token has two experts on a node or rank, so nothing is deduplicated: 7 of 8
        // ranks' shares leave the rank, 4 of 8 over the network (two 4-rank domains at stride 2).
        let links = h100_links();
        let group = Group { size: 8, stride: 2 };
        let d = Dispatch { experts: 64, top_k: 1, tokens: 1000.0, token_bytes: 1.0 };
        let (network, nvlink) = deduplicated_volumes(&links, group, d);
        assert!((network.value() - 1000.0 * 4.0 / 8.0).abs() < 1e-9);
        assert!((nvlink.value() - 1000.0 * 3.0 / 8.0 - 1000.0 * 4.0 / 8.0 * 0.0).abs() < 1e-9);
    }

    #[test]
    fn deduplication_cuts_network_copies_for_wide_top_k() {
        // DeepSeek-V3-like: 256 experts, top-8, EP 64 over eight 8-GPU nodes. A token hits on
        // average 7 x (1 - miss(32 experts)) remote nodes, far fewer than its 7 remote experts.
        let links = h100_links();
        let group = Group { size: 64, stride: 1 };
        let d = Dispatch { experts: 256, top_k: 8, tokens: 1.0, token_bytes: 1.0 };
        let (network, _) = deduplicated_volumes(&links, group, d);
        let expected = 7.0 * (1.0 - miss_probability(256, 32, 8));
        assert!((network.value() - expected).abs() < 1e-12);
        assert!(network.value() < 8.0 * 56.0 / 64.0 * 0.75, "{network:?}");
    }
}

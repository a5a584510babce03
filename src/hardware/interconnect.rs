//! The two link tiers of a GPU cluster: the NVLink (scale-up) domain and the network NICs.
//!
//! Bandwidths are per GPU and per direction, as NCCL's bus bandwidth is defined; the efficiency
//! turns the line rate into what NCCL achieves (reference file section 8.4).

use serde::{Deserialize, Serialize};

use crate::units::{
    Bytes, BytesPerSec, QuantityError, Seconds, parse_bandwidth, parse_bytes, parse_seconds,
};
use crate::violation::{Collector, Violations};

/// Interconnect figures as written in a preset or overridden by flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterconnectSpec {
    /// GPUs in one server.
    pub gpus_per_node: i64,
    /// GPUs that share one NVLink (scale-up) domain; defaults to `gpus_per_node`.
    #[serde(default)]
    pub nvlink_domain: Option<i64>,
    /// NVLink bandwidth per GPU, one direction (`"450 GB/s"`).
    pub nvlink_bandwidth: String,
    /// Latency of one NVLink hop in a collective (`"3 us"`).
    pub nvlink_latency: String,
    /// Fraction of the NVLink line rate NCCL reaches.
    pub nvlink_efficiency: f64,
    /// Network (NIC) bandwidth per GPU, one direction (`"50 GB/s"`).
    pub network_bandwidth: String,
    /// Latency of one network hop (`"10 us"`).
    pub network_latency: String,
    /// Fraction of the NIC line rate NCCL reaches.
    pub network_efficiency: f64,
    /// Link between one GPU and host memory, one direction (`"64 GB/s"` for PCIe Gen5 x16):
    /// what activation offloading moves over. Without it, plans that offload are refused.
    #[serde(default)]
    pub host_bandwidth: Option<String>,
    /// Fraction of the host link's line rate a pinned-memory copy reaches.
    #[serde(default)]
    pub host_efficiency: Option<f64>,
    /// Host (CPU) memory of one server, shared by its `gpus_per_node` GPUs (`"2 TB"`): what the
    /// activations a plan offloads must fit in. Without it, offload is priced with no host-memory
    /// check.
    #[serde(default)]
    pub host_memory: Option<String>,
}

/// Which link a group of GPUs talks over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkTier {
    /// Every member is inside one NVLink domain.
    Nvlink,
    /// The group spans NVLink domains, so its ring crosses the NICs.
    Network,
}

/// Validated interconnect.
#[derive(Debug, Clone, PartialEq)]
pub struct Interconnect {
    gpus_per_node: u64,
    nvlink_domain: u64,
    nvlink_bandwidth: BytesPerSec,
    nvlink_latency: Seconds,
    network_bandwidth: BytesPerSec,
    network_latency: Seconds,
    host_bandwidth: Option<BytesPerSec>,
    host_memory: Option<Bytes>,
}

impl Interconnect {
    /// Checks a spec and builds the interconnect.
    pub fn from_spec(spec: &InterconnectSpec) -> Result<Interconnect, Violations> {
        let mut collector = Collector::default();
        let max = crate::limits::GPUS as i64;
        if !(1..=max).contains(&spec.gpus_per_node) {
            collector.add(
                "cluster.gpus_per_node",
                spec.gpus_per_node,
                format!("must be between 1 and {max}"),
                "e.g. 8 for a DGX or HGX server",
            );
        }
        let nvlink_domain = spec.nvlink_domain.unwrap_or(spec.gpus_per_node);
        if !(1..=max).contains(&nvlink_domain) {
            collector.add(
                "cluster.nvlink_domain",
                nvlink_domain,
                format!("must be between 1 and {max}"),
                "e.g. 8 for HGX, 72 for an NVL72 rack",
            );
        }
        for (field, value) in [
            ("nvlink_efficiency", spec.nvlink_efficiency),
            ("network_efficiency", spec.network_efficiency),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                collector.add(
                    format!("cluster.{field}"),
                    value,
                    "must be a fraction in (0, 1]",
                    "NCCL reaches about 0.8 of NVLink and 0.92 of NIC line rate",
                );
            }
        }
        let mut bandwidth = |field: &str, text: &str, efficiency: f64| {
            let parsed = parse_bandwidth(text).and_then(|b| {
                if crate::limits::within(b.value(), crate::limits::BANDWIDTH) {
                    Ok(b)
                } else {
                    Err(QuantityError::OutOfRange {
                        text: text.to_owned(),
                        range: "1 MB/s to 1 PB/s",
                    })
                }
            });
            parsed.map(|b| b * efficiency).unwrap_or_else(|err| {
                collector.add(
                    format!("cluster.{field}"),
                    text,
                    err.to_string(),
                    "e.g. \"450 GB/s\"",
                );
                BytesPerSec::new(1.0)
            })
        };
        let nvlink_bandwidth =
            bandwidth("nvlink_bandwidth", &spec.nvlink_bandwidth, spec.nvlink_efficiency);
        let network_bandwidth =
            bandwidth("network_bandwidth", &spec.network_bandwidth, spec.network_efficiency);
        let host_bandwidth = match (&spec.host_bandwidth, spec.host_efficiency) {
            (None, None) => None,
            (Some(text), Some(efficiency)) if efficiency > 0.0 && efficiency <= 1.0 => {
                Some(bandwidth("host_bandwidth", text, efficiency))
            }
            (Some(_), Some(efficiency)) => {
                collector.add(
                    "cluster.host_efficiency",
                    efficiency,
                    "must be a fraction in (0, 1]",
                    "a pinned copy reaches about 0.86 of PCIe Gen5 x16 on H100",
                );
                None
            }
            (Some(text), None) => {
                collector.add(
                    "cluster.host_efficiency",
                    "(missing)",
                    format!("must be given with host_bandwidth {text:?}"),
                    "add host_efficiency, e.g. 0.86",
                );
                None
            }
            (None, Some(efficiency)) => {
                collector.add(
                    "cluster.host_bandwidth",
                    format!("(missing, host_efficiency {efficiency})"),
                    "must be given with host_efficiency",
                    "add host_bandwidth, e.g. \"64 GB/s\" for PCIe Gen5 x16",
                );
                None
            }
        };
        let host_memory = spec.host_memory.as_deref().and_then(|text| {
            let parsed = parse_bytes(text).and_then(|b| {
                if crate::limits::within(b.value(), crate::limits::HOST_MEMORY) {
                    Ok(b)
                } else {
                    Err(QuantityError::OutOfRange { text: text.to_owned(), range: "1 GB to 1 PB" })
                }
            });
            parsed
                .map_err(|err| {
                    collector.add(
                        "cluster.host_memory",
                        text,
                        err.to_string(),
                        "the server's CPU memory, e.g. \"2 TB\" for a DGX H100",
                    );
                })
                .ok()
        });
        let mut latency = |field: &str, text: &str| {
            let parsed = parse_seconds(text).and_then(|t| {
                if crate::limits::within(t.value(), crate::limits::LATENCY_SECONDS) {
                    Ok(t)
                } else {
                    Err(QuantityError::OutOfRange { text: text.to_owned(), range: "0 to 1 s" })
                }
            });
            parsed.unwrap_or_else(|err| {
                collector.add(format!("cluster.{field}"), text, err.to_string(), "e.g. \"5 us\"");
                Seconds::ZERO
            })
        };
        let nvlink_latency = latency("nvlink_latency", &spec.nvlink_latency);
        let network_latency = latency("network_latency", &spec.network_latency);
        collector.finish()?;
        Ok(Interconnect {
            gpus_per_node: spec.gpus_per_node as u64,
            nvlink_domain: nvlink_domain as u64,
            nvlink_bandwidth,
            nvlink_latency,
            network_bandwidth,
            network_latency,
            host_bandwidth,
            host_memory,
        })
    }

    /// Host memory one GPU's offloaded activations may use: the server's, shared evenly by its
    /// GPUs, where the GPU's file (or `--host-memory`) states it.
    pub fn host_memory_per_gpu(&self) -> Option<Bytes> {
        self.host_memory.map(|node| node / self.gpus_per_node as f64)
    }

    /// Achievable one-direction bandwidth between one GPU and host memory, where the GPU's file
    /// states it.
    pub fn host_bandwidth(&self) -> Option<BytesPerSec> {
        self.host_bandwidth
    }

    /// GPUs per server.
    pub fn gpus_per_node(&self) -> u64 {
        self.gpus_per_node
    }
    /// GPUs per NVLink domain.
    pub fn nvlink_domain(&self) -> u64 {
        self.nvlink_domain
    }

    /// Achievable per-GPU, one-direction bandwidth of a tier.
    pub fn bandwidth(&self, tier: LinkTier) -> BytesPerSec {
        match tier {
            LinkTier::Nvlink => self.nvlink_bandwidth,
            LinkTier::Network => self.network_bandwidth,
        }
    }

    /// Per-step latency of a tier.
    pub fn latency(&self, tier: LinkTier) -> Seconds {
        match tier {
            LinkTier::Nvlink => self.nvlink_latency,
            LinkTier::Network => self.network_latency,
        }
    }

    /// The tier a group of `size` GPUs whose members are `stride` ranks apart talks over.
    ///
    /// Ranks are laid out as Megatron-LM does (`tp-cp-ep-dp-pp`, TP fastest), so the group spans
    /// `(size - 1) * stride + 1` consecutive ranks; it stays on NVLink only if that span fits
    /// inside one domain.
    pub fn tier_for_group(&self, size: u64, stride: u64) -> LinkTier {
        let span = (size.saturating_sub(1)) * stride + 1;
        if span <= self.nvlink_domain { LinkTier::Nvlink } else { LinkTier::Network }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> InterconnectSpec {
        crate::presets::gpu("h100-sxm").unwrap().interconnect
    }

    fn problems(spec: &InterconnectSpec) -> String {
        Interconnect::from_spec(spec).unwrap_err().to_string()
    }

    #[test]
    fn the_host_link_is_the_line_rate_times_its_efficiency() {
        let link = Interconnect::from_spec(&h100()).unwrap().host_bandwidth().unwrap();
        assert!((link.value() - 64e9 * 0.86).abs() < 1.0, "{link:?}");
        let without = InterconnectSpec { host_bandwidth: None, host_efficiency: None, ..h100() };
        assert_eq!(Interconnect::from_spec(&without).unwrap().host_bandwidth(), None);
    }

    #[test]
    fn host_memory_is_the_servers_shared_by_its_gpus_and_a_bad_size_is_named() {
        let links = Interconnect::from_spec(&h100()).unwrap();
        assert_eq!(links.host_memory_per_gpu().unwrap().value(), 2e12 / 8.0);
        let without = InterconnectSpec { host_memory: None, ..h100() };
        assert_eq!(Interconnect::from_spec(&without).unwrap().host_memory_per_gpu(), None);
        for bad in ["lots", "0 GB", "10 PB"] {
            let text = problems(&InterconnectSpec { host_memory: Some(bad.into()), ..h100() });
            assert!(text.contains("cluster.host_memory") && text.contains(bad), "{text}");
        }
    }

    #[test]
    fn a_host_link_needs_both_keys_and_an_efficiency_in_range() {
        let alone = problems(&InterconnectSpec { host_efficiency: None, ..h100() });
        assert!(alone.contains("cluster.host_efficiency") && alone.contains("64 GB/s"), "{alone}");
        let orphan = problems(&InterconnectSpec { host_bandwidth: None, ..h100() });
        assert!(orphan.contains("cluster.host_bandwidth"), "{orphan}");
        let high = problems(&InterconnectSpec { host_efficiency: Some(1.5), ..h100() });
        assert!(high.contains("cluster.host_efficiency") && high.contains("(0, 1]"), "{high}");
        let text = problems(&InterconnectSpec { host_bandwidth: Some("fast".into()), ..h100() });
        assert!(text.contains("cluster.host_bandwidth") && text.contains("fast"), "{text}");
    }
}

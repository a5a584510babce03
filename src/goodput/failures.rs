//! Failure rates of published fleets, per node-day, and the job's mean time to failure they give:
//! a synchronous job fails when any of its nodes does, so its MTTF is one over the node count
//! times the rate (Kokolis et al., HPCA'25, arXiv 2410.21680).

use serde::{Deserialize, Serialize};

use crate::units::{SECONDS_PER_DAY, Seconds};

/// A published fleet's failure rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FleetPreset {
    /// Llama 3 405B on 16,384 H100: 419 unexpected interruptions in 54 days on 2,048 nodes
    /// (Llama 3 Herd of Models, arXiv 2407.21783v3, section 3.3.4): 3.79 per 1000 node-days.
    Llama3,
    /// Meta's RSC-1 (16k A100): 6.50 failures per 1000 node-days (Kokolis et al., arXiv
    /// 2410.21680v2).
    MetaRsc,
    /// ByteRobust's dense job on 9,600 Hopper GPUs: 175 incidents in 3 months on 1,200 nodes
    /// (ByteRobust, arXiv 2509.16293v4, Table 4): 1.6 per 1000 node-days.
    ByteRobust,
    /// OPT-175B on 992 A100: at least 105 restarts in about 60 days on 124 nodes (OPT, arXiv
    /// 2205.01068, section 2.5): 14 per 1000 node-days.
    OptEra,
}

impl FleetPreset {
    /// Every preset, in a fixed order.
    pub const ALL: [FleetPreset; 4] =
        [FleetPreset::Llama3, FleetPreset::MetaRsc, FleetPreset::ByteRobust, FleetPreset::OptEra];

    /// The default: the largest published H100 fleet's rate.
    pub const DEFAULT: FleetPreset = FleetPreset::Llama3;

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FleetPreset::Llama3 => "llama3",
            FleetPreset::MetaRsc => "meta-rsc",
            FleetPreset::ByteRobust => "byterobust",
            FleetPreset::OptEra => "opt-era",
        }
    }

    /// Failures per node-day.
    pub fn per_node_day(self) -> f64 {
        match self {
            FleetPreset::Llama3 => 419.0 / (2048.0 * 54.0),
            FleetPreset::MetaRsc => 6.5e-3,
            FleetPreset::ByteRobust => 175.0 / (1200.0 * 91.0),
            FleetPreset::OptEra => 105.0 / (124.0 * 60.0),
        }
    }

    /// Where the rate comes from.
    pub fn source(self) -> &'static str {
        match self {
            FleetPreset::Llama3 => {
                "Llama 3 405B, 419 interruptions / (2048 nodes x 54 days), arXiv 2407.21783 s3.3.4"
            }
            FleetPreset::MetaRsc => "Meta RSC-1, 6.5 per 1000 node-days, arXiv 2410.21680",
            FleetPreset::ByteRobust => {
                "ByteRobust dense job, 175 incidents / (1200 nodes x 91 days), arXiv 2509.16293 Table 4"
            }
            FleetPreset::OptEra => {
                "OPT-175B, 105 restarts / (124 nodes x 60 days), arXiv 2205.01068 s2.5"
            }
        }
    }

    /// The preset named `name`.
    pub fn named(name: &str) -> Option<FleetPreset> {
        FleetPreset::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Nodes a job of `gpus` GPUs occupies, `gpus_per_node` to a node.
pub fn nodes(gpus: u64, gpus_per_node: u64) -> u64 {
    gpus.div_ceil(gpus_per_node.max(1))
}

/// The job's mean time to failure: one over its nodes' summed failure rate.
pub fn job_mttf(nodes: u64, per_node_day: f64) -> Seconds {
    Seconds::new(SECONDS_PER_DAY / (nodes.max(1) as f64 * per_node_day))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_mttf_reproduces_kokolis_projections() {
        // Kokolis et al. (arXiv 2410.21680) project a job MTTF of 1.8 h at 16,384 GPUs and
        // 0.23 h at 131,072 GPUs from RSC-1's 6.5 failures per 1000 node-days, 8 GPUs a node.
        let rate = FleetPreset::MetaRsc.per_node_day();
        let hours = |gpus| job_mttf(nodes(gpus, 8), rate).value() / 3600.0;
        assert!((hours(16_384) - 1.80).abs() < 0.01, "{}", hours(16_384));
        assert!((hours(131_072) - 0.225).abs() < 0.005, "{}", hours(131_072));
    }

    #[test]
    fn the_llama3_rate_gives_its_mean_time_between_interruptions() {
        // 54 days x 24 h / 419 unexpected interruptions = 3.09 h on 16,384 GPUs.
        let hours = job_mttf(nodes(16_384, 8), FleetPreset::Llama3.per_node_day()).value() / 3600.0;
        assert!((hours - 3.09).abs() < 0.01, "{hours}");
    }

    #[test]
    fn every_preset_has_a_name_it_is_found_by_and_a_source() {
        for preset in FleetPreset::ALL {
            assert_eq!(FleetPreset::named(preset.name()), Some(preset));
            assert!(preset.source().contains("arXiv"));
            assert!(preset.per_node_day() > 1e-4 && preset.per_node_day() < 0.1);
        }
    }
}

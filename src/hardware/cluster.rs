//! A cluster: how many GPUs of one kind, and the links between them.

use serde::{Deserialize, Serialize};

use super::gpu::{Gpu, GpuSpec};
use super::interconnect::Interconnect;
use crate::violation::{Collector, Violations};

/// A cluster as the user describes it: a GPU preset, a GPU count and optional link overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// The GPU, including its default interconnect.
    pub gpu: GpuSpec,
    /// Total GPUs in the job.
    pub num_gpus: i64,
}

/// A validated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    gpu: Gpu,
    num_gpus: u64,
    interconnect: Interconnect,
}

impl Cluster {
    /// Checks a spec and builds the cluster, reporting every problem at once.
    pub fn from_spec(spec: &ClusterSpec) -> Result<Cluster, Violations> {
        let mut collector = Collector::default();
        let gpu = collector.take(Gpu::from_spec(&spec.gpu));
        let interconnect = collector.take(Interconnect::from_spec(&spec.gpu.interconnect));
        if spec.num_gpus <= 0 {
            collector.add(
                "cluster.num_gpus",
                spec.num_gpus,
                "must be positive",
                "pass --gpus with the job's total GPU count",
            );
        } else if spec.num_gpus as u64 > crate::limits::GPUS {
            collector.add(
                "cluster.num_gpus",
                spec.num_gpus,
                format!("exceeds {}, the largest job meshplan prices", crate::limits::GPUS),
                format!(
                    "pass --gpus with the job's total GPU count, at most {}",
                    crate::limits::GPUS
                ),
            );
        } else if let Some(interconnect) = &interconnect {
            let per_node = interconnect.gpus_per_node() as i64;
            if spec.num_gpus > per_node && spec.num_gpus % per_node != 0 {
                collector.add(
                    "cluster.num_gpus",
                    spec.num_gpus,
                    format!("is not a whole number of {per_node}-GPU nodes"),
                    format!(
                        "use a multiple of {per_node} (e.g. {}), or change --gpus-per-node",
                        (spec.num_gpus / per_node + 1) * per_node
                    ),
                );
            }
        }
        let (gpu, interconnect) = collector.finish_with(gpu.zip(interconnect), "cluster")?;
        Ok(Cluster { gpu, num_gpus: spec.num_gpus as u64, interconnect })
    }

    /// The GPU kind.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
    /// GPUs in the job.
    pub fn num_gpus(&self) -> u64 {
        self.num_gpus
    }
    /// The links.
    pub fn interconnect(&self) -> &Interconnect {
        &self.interconnect
    }
}

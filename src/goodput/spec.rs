//! What a whole-run outlook takes besides the run: how much to train, the fleet's failure rate,
//! the checkpoint policy and storage, the restart cost and the price. `GoodputSpec` mirrors the
//! flags (and a file's keys, rejecting unknown ones); `Goodput` is reachable only by validating
//! it, every problem reported at once.

use serde::{Deserialize, Serialize};

use super::checkpoint::CheckpointMode;
use super::failures::FleetPreset;
use crate::limits;
use crate::units::{
    BytesPerSec, SECONDS_PER_DAY, Seconds, parse_bandwidth, parse_count, parse_seconds,
};
use crate::violation::{Collector, Violations};

/// Restart cost besides loading the checkpoint: detection about 60 s (ByteRobust, arXiv
/// 2509.16293, section 2.2), rescheduling about 600 s (ByteRobust Table 7: requeueing 128 to 1024
/// machines took 454 to 768 s) and initialisation under 30 s at over 10,000 GPUs (MegaScale, arXiv
/// 2402.15627, section 3): 690 s, inside the 5 to 20 minutes Kokolis et al. assume.
const DEFAULT_RESTART_SECONDS: f64 = DETECTION_SECONDS + RESCHEDULING_SECONDS + INIT_SECONDS;

/// Detecting a failure: about 60 s (ByteRobust, arXiv 2509.16293, section 2.2).
pub const DETECTION_SECONDS: f64 = 60.0;

/// Initialising the restarted job: under 30 s at over 10,000 GPUs (MegaScale, arXiv 2402.15627,
/// section 3).
pub const INIT_SECONDS: f64 = 30.0;

/// The share of the default restart spent rescheduling the job onto healthy nodes, which a free
/// warm spare replaces (ByteRobust Table 7: requeueing took 454 to 768 s).
pub const RESCHEDULING_SECONDS: f64 = 600.0;

/// Swapping a warm spare in for the failed node: ByteRobust's in-place restarts took 46 to 65 s
/// (arXiv 2509.16293, Table 7).
pub const SPARE_SWAP_SECONDS: f64 = 60.0;

/// Time to repair a failed node and return it to the spare pool by default: an assumption (a
/// day), not a published figure; `--repair-time` sets it.
const DEFAULT_REPAIR_SECONDS: f64 = SECONDS_PER_DAY;

/// Aggregate checkpoint storage bandwidth by default: Llama 3's Tectonic file system sustained
/// 2 TB/s (Llama 3 Herd of Models, arXiv 2407.21783, section 3.3.1), for writes and reads alike.
const DEFAULT_STORAGE_GBPS: f64 = 2000.0;

/// The inputs as written (flags or a file), before validation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoodputSpec {
    /// Tokens to train: a count with an optional K, M, B or T suffix (`15T`, `300B`, `1.5e13`).
    pub train_tokens: Option<String>,
    /// Optimizer steps to train (instead of tokens).
    pub train_steps: Option<i64>,
    /// Failures per node-day: a fleet preset name (`llama3`, `meta-rsc`, `byterobust`,
    /// `opt-era`) or a number of failures per 1000 node-days (`6.5`). [default: llama3]
    pub failure_rate: Option<String>,
    /// Synchronous or asynchronous checkpoints. [default: async]
    pub checkpoint: Option<CheckpointMode>,
    /// Time between checkpoints (`30 min`); without it, Daly's optimum.
    pub checkpoint_interval: Option<String>,
    /// Aggregate write bandwidth of the checkpoint storage (`2 TB/s`).
    pub storage_write: Option<String>,
    /// Aggregate read bandwidth of the checkpoint storage (`2 TB/s`).
    pub storage_read: Option<String>,
    /// Storage bandwidth one node reaches, each way (`25 GB/s`): a node's ranks write and read
    /// their shares through it. Without it, only the aggregate rates bound the checkpoint.
    pub storage_per_node: Option<String>,
    /// Time a restart takes besides loading the checkpoint: detection, rescheduling,
    /// initialisation (`690 s`).
    pub restart: Option<String>,
    /// Price of one GPU-hour, in dollars.
    pub price_per_gpu_hour: Option<f64>,
    /// Warm spare nodes: a failure that finds one free skips rescheduling. [default: 0]
    pub spare_nodes: Option<i64>,
    /// Time to repair a failed node and return it to the spares (`1 d`).
    pub repair_time: Option<String>,
    /// Checkpoints to the hosts' memory, copied to a peer (GEMINI-style): saved and loaded over
    /// the host link and the network instead of storage. [default: false]
    pub in_memory_checkpoint: Option<bool>,
}

/// How much to train.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainLength {
    /// Training tokens.
    Tokens(f64),
    /// Optimizer steps.
    Steps(u64),
}

/// Where the failure rate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureSource {
    /// A published fleet.
    Preset(FleetPreset),
    /// The user's number.
    Given,
}

/// Validated inputs of a whole-run outlook.
#[derive(Debug, Clone, PartialEq)]
pub struct Goodput {
    length: TrainLength,
    per_node_day: f64,
    failure_source: FailureSource,
    mode: CheckpointMode,
    interval: Option<Seconds>,
    write: BytesPerSec,
    read: BytesPerSec,
    per_node: Option<BytesPerSec>,
    restart: Seconds,
    restart_given: bool,
    price_per_gpu_hour: Option<f64>,
    spare_nodes: u64,
    repair: Seconds,
    in_memory: bool,
}

impl Goodput {
    /// Checks every field, reporting every problem at once. `None` when no training length is
    /// given: the outlook is asked for by giving one.
    pub fn from_spec(spec: &GoodputSpec) -> Result<Option<Goodput>, Violations> {
        let mut problems = Collector::default();
        let length = match (&spec.train_tokens, spec.train_steps) {
            (Some(_), Some(_)) => {
                problems.add(
                    "train_tokens",
                    "with train_steps",
                    "gives the training length twice",
                    "give --train-tokens or --train-steps, not both",
                );
                None
            }
            (Some(text), None) => match parse_count(text) {
                Ok(tokens) if tokens <= limits::TRAIN_TOKENS => Some(TrainLength::Tokens(tokens)),
                _ => {
                    problems.add(
                        "train_tokens",
                        text,
                        "must be a positive count of tokens up to 10^16",
                        "write it like 15T, 300B or 1.5e13",
                    );
                    None
                }
            },
            (None, Some(steps)) => {
                if (1..=limits::TRAIN_STEPS).contains(&steps) {
                    u64::try_from(steps).ok().map(TrainLength::Steps)
                } else {
                    problems.add(
                        "train_steps",
                        steps,
                        "must be a whole number of steps from 1 to 10^10",
                        "give the optimizer steps to train, e.g. 500000",
                    );
                    None
                }
            }
            (None, None) => None,
        };
        let failure_text = spec.failure_rate.as_deref().unwrap_or(FleetPreset::DEFAULT.name());
        let failure = match FleetPreset::named(failure_text) {
            Some(preset) => Some((preset.per_node_day(), FailureSource::Preset(preset))),
            None => match failure_text.trim().parse::<f64>() {
                Ok(per_thousand)
                    if per_thousand > 0.0
                        && per_thousand <= limits::FAILURES_PER_1000_NODE_DAYS =>
                {
                    Some((per_thousand / 1000.0, FailureSource::Given))
                }
                _ => {
                    let names: Vec<&str> = FleetPreset::ALL.iter().map(|p| p.name()).collect();
                    problems.add(
                        "failure_rate",
                        failure_text,
                        "is neither a fleet preset nor a number of failures per 1000 node-days in (0, 1000]",
                        format!("use one of {} or a number such as 6.5", names.join(", ")),
                    );
                    None
                }
            },
        };
        let mut seconds = |field: &str, text: &Option<String>, default: Option<f64>| {
            let Some(text) = text else { return default.map(Seconds::new) };
            match parse_seconds(text) {
                Ok(value) if value.value() <= limits::RUN_DURATION_SECONDS => Some(value),
                Ok(_) => {
                    problems.add(
                        field,
                        text,
                        "must be at most 10^8 s",
                        "give a time such as 30 min",
                    );
                    None
                }
                Err(err) => {
                    problems.add(
                        field,
                        text,
                        err.to_string(),
                        "give a time such as 30 min or 690 s",
                    );
                    None
                }
            }
        };
        let interval = seconds("checkpoint_interval", &spec.checkpoint_interval, None);
        let restart = seconds("restart", &spec.restart, Some(DEFAULT_RESTART_SECONDS));
        let repair = seconds("repair_time", &spec.repair_time, Some(DEFAULT_REPAIR_SECONDS));
        let spare_nodes = spec.spare_nodes.unwrap_or(0);
        if !(0..=limits::SPARE_NODES).contains(&spare_nodes) {
            problems.add(
                "spare_nodes",
                spare_nodes,
                format!("must be a count from 0 to {}", limits::SPARE_NODES),
                "give the warm standby nodes, e.g. 16",
            );
        }
        let mut bandwidth = |field: &str, text: &Option<String>| {
            let Some(text) = text else { return Some(BytesPerSec::giga(DEFAULT_STORAGE_GBPS)) };
            match parse_bandwidth(text) {
                Ok(value) if value.value() <= limits::STORAGE_BANDWIDTH => Some(value),
                Ok(_) => {
                    problems.add(
                        field,
                        text,
                        "must be at most 1 PB/s",
                        "give a rate such as 2 TB/s",
                    );
                    None
                }
                Err(err) => {
                    problems.add(field, text, err.to_string(), "give a rate such as 2 TB/s");
                    None
                }
            }
        };
        let per_node = match &spec.storage_per_node {
            None => Some(None),
            Some(_) => bandwidth("storage_per_node", &spec.storage_per_node).map(Some),
        };
        let write = bandwidth("storage_write", &spec.storage_write);
        let read = bandwidth("storage_read", &spec.storage_read);
        let price = spec.price_per_gpu_hour;
        if let Some(price) = price
            && !(price > 0.0 && price <= limits::PRICE_PER_GPU_HOUR)
        {
            problems.add(
                "price_per_gpu_hour",
                price,
                "must be a price in dollars in (0, 10000]",
                "give the price of one GPU-hour, e.g. 2.5",
            );
        }
        problems.finish()?;
        let (
            Some(length),
            Some((per_node_day, failure_source)),
            Some(restart),
            Some(write),
            Some(read),
            Some(repair),
            Some(per_node),
        ) = (length, failure, restart, write, read, repair, per_node)
        else {
            return Ok(None);
        };
        Ok(Some(Goodput {
            length,
            per_node_day,
            failure_source,
            mode: spec.checkpoint.unwrap_or(CheckpointMode::Async),
            interval,
            write,
            read,
            per_node,
            restart,
            restart_given: spec.restart.is_some(),
            price_per_gpu_hour: price,
            spare_nodes: u64::try_from(spare_nodes).unwrap_or(0),
            repair,
            in_memory: spec.in_memory_checkpoint.unwrap_or(false),
        }))
    }

    /// How much to train.
    pub fn length(&self) -> TrainLength {
        self.length
    }
    /// Failures per node-day.
    pub fn per_node_day(&self) -> f64 {
        self.per_node_day
    }
    /// Where the failure rate comes from.
    pub fn failure_source(&self) -> FailureSource {
        self.failure_source
    }
    /// Synchronous or asynchronous checkpoints.
    pub fn mode(&self) -> CheckpointMode {
        self.mode
    }
    /// The checkpoint interval given (`None`: Daly's optimum).
    pub fn interval(&self) -> Option<Seconds> {
        self.interval
    }
    /// Aggregate storage write bandwidth.
    pub fn write(&self) -> BytesPerSec {
        self.write
    }
    /// Aggregate storage read bandwidth.
    pub fn read(&self) -> BytesPerSec {
        self.read
    }
    /// Storage bandwidth of one node, when given.
    pub fn per_node(&self) -> Option<BytesPerSec> {
        self.per_node
    }
    /// Restart time besides loading the checkpoint.
    pub fn restart(&self) -> Seconds {
        self.restart
    }
    /// Whether the restart time was given (else it is the sourced default, in its parts).
    pub fn restart_given(&self) -> bool {
        self.restart_given
    }
    /// Price of one GPU-hour, in dollars.
    pub fn price_per_gpu_hour(&self) -> Option<f64> {
        self.price_per_gpu_hour
    }
    /// Warm spare nodes.
    pub fn spare_nodes(&self) -> u64 {
        self.spare_nodes
    }
    /// Time to repair a failed node.
    pub fn repair(&self) -> Seconds {
        self.repair
    }
    /// Whether checkpoints go to the hosts' memory.
    pub fn in_memory(&self) -> bool {
        self.in_memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named_at_once() {
        let spec = GoodputSpec {
            train_tokens: Some("lots".into()),
            failure_rate: Some("often".into()),
            checkpoint_interval: Some("5 parsecs".into()),
            storage_write: Some("fast".into()),
            price_per_gpu_hour: Some(-1.0),
            ..GoodputSpec::default()
        };
        let err = Goodput::from_spec(&spec).unwrap_err().to_string();
        for field in [
            "train_tokens",
            "failure_rate",
            "checkpoint_interval",
            "storage_write",
            "price_per_gpu_hour",
        ] {
            assert!(err.contains(field), "{field} missing from {err}");
        }
    }

    #[test]
    fn values_past_their_bounds_are_refused_with_the_bound() {
        let spec = GoodputSpec {
            train_steps: Some(0),
            failure_rate: Some("1001".into()),
            checkpoint_interval: Some("4 d".into()),
            restart: Some("2000 d".into()),
            storage_write: Some("2000 TB/s".into()),
            storage_per_node: Some("5 parsecs".into()),
            spare_nodes: Some(-1),
            price_per_gpu_hour: Some(2e4),
            ..GoodputSpec::default()
        };
        let err = Goodput::from_spec(&spec).unwrap_err().to_string();
        for message in [
            "train_steps = 0: must be a whole number of steps from 1 to 10^10",
            "failure_rate = 1001: is neither a fleet preset nor a number of failures per 1000 node-days in (0, 1000]",
            "restart = 2000 d: must be at most 10^8 s",
            "storage_write = 2000 TB/s: must be at most 1 PB/s",
            "storage_per_node = 5 parsecs:",
            "spare_nodes = -1: must be a count from 0 to 100000",
            "price_per_gpu_hour = 20000: must be a price in dollars in (0, 10000]",
        ] {
            assert!(err.contains(message), "{message:?} missing from {err}");
        }
        // Four days is inside the bound.
        assert!(!err.contains("checkpoint_interval"), "{err}");
        let tokens = GoodputSpec { train_tokens: Some("2e16".into()), ..GoodputSpec::default() };
        let err = Goodput::from_spec(&tokens).unwrap_err().to_string();
        assert!(
            err.contains("train_tokens = 2e16: must be a positive count of tokens up to 10^16")
        );
    }

    #[test]
    fn no_length_asks_for_no_outlook_and_defaults_are_stated() {
        assert_eq!(Goodput::from_spec(&GoodputSpec::default()).unwrap(), None);
        let spec = GoodputSpec { train_tokens: Some("15T".into()), ..GoodputSpec::default() };
        let goodput = Goodput::from_spec(&spec).unwrap().unwrap();
        assert_eq!(goodput.length(), TrainLength::Tokens(15e12));
        assert_eq!(goodput.failure_source(), FailureSource::Preset(FleetPreset::Llama3));
        assert_eq!(goodput.mode(), CheckpointMode::Async);
        assert_eq!(goodput.restart(), Seconds::new(DEFAULT_RESTART_SECONDS));
        let given = GoodputSpec { failure_rate: Some("6.5".into()), ..spec };
        assert!(
            (Goodput::from_spec(&given).unwrap().unwrap().per_node_day() - 6.5e-3).abs() < 1e-15
        );
    }
}

//! A priced candidate as a search report keeps it for plotting throughput against memory. A
//! search of a large MoE space keeps millions, so the candidate is stored packed (32-bit sizes,
//! which every bounded size fits): 80 bytes a point instead of 128.

use crate::plan::{CpComm, PipelineSchedule, PipelineSplit};
use crate::search::space::{Candidate, RecomputeChoice, ShardingChoice};
use crate::units::{Bytes, Seconds};

/// A [`Candidate`] in 32-bit sizes, with its fields in the candidate's order (so both sort alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct PackedCandidate {
    tp: u32,
    cp: u32,
    pp: u32,
    vp: u32,
    schedule: PipelineSchedule,
    split: PipelineSplit,
    sharding: ShardingChoice,
    recompute: RecomputeChoice,
    micro_batch: u32,
    cp_comm: CpComm,
    ep: u32,
    etp: u32,
}

/// A size of a candidate, which the space bounds far below 2^32 (parallel sizes by the GPUs,
/// the micro-batch by the global batch).
fn packed(size: u64) -> u32 {
    u32::try_from(size).unwrap_or(u32::MAX)
}

impl PackedCandidate {
    fn new(c: Candidate) -> PackedCandidate {
        PackedCandidate {
            tp: packed(c.tp),
            cp: packed(c.cp),
            pp: packed(c.pp),
            vp: packed(c.vp),
            schedule: c.schedule,
            split: c.split,
            sharding: c.sharding,
            recompute: c.recompute,
            micro_batch: packed(c.micro_batch),
            cp_comm: c.cp_comm,
            ep: packed(c.ep),
            etp: packed(c.etp),
        }
    }

    fn unpacked(self) -> Candidate {
        Candidate {
            tp: u64::from(self.tp),
            cp: u64::from(self.cp),
            pp: u64::from(self.pp),
            vp: u64::from(self.vp),
            schedule: self.schedule,
            split: self.split,
            sharding: self.sharding,
            recompute: self.recompute,
            micro_batch: u64::from(self.micro_batch),
            cp_comm: self.cp_comm,
            ep: u64::from(self.ep),
            etp: u64::from(self.etp),
        }
    }
}

/// A candidate that was priced and fits, for plotting throughput against memory.
///
/// A simulated candidate carries its simulated step time and peak; one pruned by its bound carries
/// its closed-form peak and the larger of its closed-form time and its lower bound, which is never
/// faster than the best plan (the bound is what pruned it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PricedPoint {
    candidate: PackedCandidate,
    /// Peak memory of its worst stage.
    pub peak_memory: Bytes,
    /// Step time.
    pub step_time: Seconds,
    /// Training tokens per second per GPU at that step time.
    pub tokens_per_sec_per_gpu: f64,
    /// Whether the step was simulated (else it was pruned by its bound).
    pub simulated: bool,
}

impl PricedPoint {
    /// The point of `candidate`.
    pub fn new(
        candidate: Candidate,
        peak_memory: Bytes,
        step_time: Seconds,
        tokens_per_sec_per_gpu: f64,
        simulated: bool,
    ) -> PricedPoint {
        PricedPoint {
            candidate: PackedCandidate::new(candidate),
            peak_memory,
            step_time,
            tokens_per_sec_per_gpu,
            simulated,
        }
    }

    /// The candidate.
    pub fn candidate(&self) -> Candidate {
        self.candidate.unpacked()
    }

    /// A key that sorts points in candidate order.
    pub(super) fn order(&self) -> impl Ord + Copy + use<> {
        self.candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_80_bytes_and_gives_back_its_candidate_and_its_order() {
        assert_eq!(std::mem::size_of::<PricedPoint>(), 80);
        let candidate = |tp, micro_batch, sharding| Candidate {
            tp,
            cp: 2,
            pp: 16,
            vp: 4,
            schedule: PipelineSchedule::Interleaved,
            split: PipelineSplit::Balanced,
            sharding,
            recompute: RecomputeChoice::Layers(7),
            micro_batch,
            cp_comm: CpComm::AllToAll,
            ep: 64,
            etp: 1,
        };
        let point = |c| PricedPoint::new(c, Bytes::new(1.0), Seconds::new(1.0), 1.0, true);
        let a = candidate(8, 1, ShardingChoice::Fsdp(1 << 20));
        let b = candidate(8, 2, ShardingChoice::Zero1);
        let c = candidate(16, 1, ShardingChoice::Zero0);
        for x in [a, b, c] {
            assert_eq!(point(x).candidate(), x);
        }
        for (x, y) in [(a, b), (b, c), (a, c), (b, a)] {
            assert_eq!(point(x).order().cmp(&point(y).order()), x.cmp(&y), "{x:?} {y:?}");
        }
    }
}

//! A priced candidate as a search report keeps it for plotting throughput against memory. A
//! search of a large MoE space keeps millions, so a point names its candidate by its place in the
//! space (the report turns it back into the candidate): 40 bytes a point.

use super::place::Place;
use crate::units::{Bytes, Seconds};

/// A candidate that was priced and fits, for plotting throughput against memory.
///
/// A simulated candidate carries its simulated step time and peak; one pruned by its bound carries
/// its closed-form peak and the larger of its closed-form time and its lower bound, which is never
/// faster than the best plan (the bound is what pruned it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PricedPoint {
    place: Place,
    /// Whether the step was simulated (else it was pruned by its bound).
    pub simulated: bool,
    /// Peak memory of its worst stage.
    pub peak_memory: Bytes,
    /// Step time.
    pub step_time: Seconds,
    /// Training tokens per second per GPU at that step time.
    pub tokens_per_sec_per_gpu: f64,
}

impl PricedPoint {
    /// The point of the candidate at `place`.
    pub(super) fn new(
        place: Place,
        peak_memory: Bytes,
        step_time: Seconds,
        tokens_per_sec_per_gpu: f64,
        simulated: bool,
    ) -> PricedPoint {
        PricedPoint { place, simulated, peak_memory, step_time, tokens_per_sec_per_gpu }
    }

    /// Where its candidate is in the space.
    pub(super) fn place(&self) -> Place {
        self.place
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_40_bytes() {
        assert_eq!(std::mem::size_of::<PricedPoint>(), 40);
        let point = PricedPoint::new(
            Place::new(3, 1, 0, 2, 9),
            Bytes::new(1.0),
            Seconds::new(2.0),
            4.0,
            true,
        );
        assert_eq!(point.place(), Place::new(3, 1, 0, 2, 9));
    }
}

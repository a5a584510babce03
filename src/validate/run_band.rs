//! The error band of a run priced by `estimate`: its class (mixture-of-experts or dense), its
//! GPU's generation and its software stack, looked up in the embedded band table.

use super::bands::{ArchClass, BandKey, BandTable, ErrorBand};
use crate::Run;

/// The software stack a run's band is looked up by: the stack it is priced with, named as
/// validation rows name theirs (`nemo-26.04`, `torchtitan-2024-12`).
pub fn run_stack(run: &Run) -> Option<String> {
    Some(run.stack().id().to_owned())
}

/// The band key of a run.
pub fn run_band_key(run: &Run) -> BandKey {
    BandKey {
        class: match (run.model().hybrid(), run.model().moe()) {
            (Some(_), _) => ArchClass::Hybrid,
            (None, Some(_)) => ArchClass::Moe,
            (None, None) => ArchClass::Dense,
        },
        generation: run.cluster().gpu().generation(),
        stack: run_stack(run),
    }
}

/// The 80 % error band of a run's predicted throughput, from the embedded table.
pub fn run_band(run: &Run) -> Option<ErrorBand> {
    BandTable::embedded().band(&run_band_key(run))
}

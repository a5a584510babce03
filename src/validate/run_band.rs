//! The error band of a run priced by `estimate`: its class (mixture-of-experts or dense), its
//! GPU's generation and its software stack, looked up in the embedded band table.

use super::bands::{ArchClass, BandKey, BandTable, ErrorBand};
use crate::Run;

/// The software stack a run's band is looked up by, in the vocabulary of `RowResult::stack`.
///
/// TO WIRE: a run does not name its software stack yet, so this returns `None` and the band comes
/// from every stack of the run's class and GPU generation (widened once, and saying so). When a
/// run carries a stack id (`nemo-26.04`, `torchtitan-2024-12`, as validation rows name theirs),
/// return it here; nothing else needs to change.
pub fn run_stack(_run: &Run) -> Option<String> {
    None
}

/// The band key of a run.
pub fn run_band_key(run: &Run) -> BandKey {
    BandKey {
        class: if run.model().moe().is_some() { ArchClass::Moe } else { ArchClass::Dense },
        generation: run.cluster().gpu().generation(),
        stack: run_stack(run),
    }
}

/// The 80 % error band of a run's predicted throughput, from the embedded table.
pub fn run_band(run: &Run) -> Option<ErrorBand> {
    BandTable::embedded().band(&run_band_key(run))
}

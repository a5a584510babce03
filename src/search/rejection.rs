//! Why the search rejected a candidate, as typed values with their figures: the plan rule it
//! breaks, the memory it needs against what the GPU has, or every reason the target engine refuses
//! it. Candidates are counted by [`RejectionKind`]; one [`Rejection`] per kind is kept as the
//! example a report shows.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::export::Unsupported;
use crate::units::Bytes;
use crate::violation::Violation;

/// What rejections are counted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectionKind {
    /// The candidate breaks a plan rule: a size that does not divide (heads, layers, the batch),
    /// a schedule's precondition, a precision the GPU lacks.
    BreaksARule,
    /// Its predicted peak memory exceeds the GPU's capacity minus the headroom.
    DoesNotFit,
    /// The target engine cannot run it.
    UnsupportedByEngine,
    /// It offloads activations to host memory, and the same plan fits without: offload is tried
    /// as a way to fit, never faster than keeping the activations.
    OffloadNotNeeded,
}

impl RejectionKind {
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            RejectionKind::BreaksARule => "breaks a plan rule",
            RejectionKind::DoesNotFit => "does not fit in memory",
            RejectionKind::UnsupportedByEngine => "unsupported by the target engine",
            RejectionKind::OffloadNotNeeded => "offload not needed",
        }
    }
}

/// Which memory figure a candidate was rejected on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryCheck {
    /// Weights, gradients, optimizer states and buffers alone (a lower bound of the peak, checked
    /// once per layout).
    ModelStates,
    /// The closed form's peak.
    ClosedForm,
    /// The peak over the simulated schedule.
    Simulated,
    /// The offloaded activations against the host memory each GPU of the server has.
    HostMemory,
}

/// A candidate's memory over the GPU's capacity minus the headroom, or (a
/// [`MemoryCheck::HostMemory`] check) its offloaded activations over each GPU's host memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverMemory {
    /// The candidate's plan label.
    pub plan: String,
    /// The memory it needs (bytes).
    pub needed: Bytes,
    /// The memory a plan may use: capacity minus the headroom, or each GPU's host memory (bytes).
    pub available: Bytes,
    /// Which figure was checked.
    pub check: MemoryCheck,
}

/// Why one candidate was rejected, with its figures.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The first plan rule it breaks.
    BreaksARule(Violation),
    /// Its memory.
    DoesNotFit(OverMemory),
    /// Every reason the engine refuses it.
    UnsupportedByEngine(Unsupported),
    /// The plan (its label) offloads activations although it fits without.
    OffloadNotNeeded(String),
}

impl Rejection {
    /// The kind it is counted under.
    pub fn kind(&self) -> RejectionKind {
        match self {
            Rejection::BreaksARule(_) => RejectionKind::BreaksARule,
            Rejection::DoesNotFit(_) => RejectionKind::DoesNotFit,
            Rejection::UnsupportedByEngine(_) => RejectionKind::UnsupportedByEngine,
            Rejection::OffloadNotNeeded(_) => RejectionKind::OffloadNotNeeded,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::BreaksARule(v) => write!(f, "{} = {}: {}", v.field, v.value, v.message),
            Rejection::DoesNotFit(over) => {
                let what = match over.check {
                    MemoryCheck::ModelStates => " for its model states alone",
                    MemoryCheck::ClosedForm => "",
                    MemoryCheck::Simulated => " under its simulated schedule",
                    MemoryCheck::HostMemory => {
                        return write!(
                            f,
                            "{} offloads {:.1} GiB of activations per GPU, {:.1} GiB of host memory available",
                            over.plan,
                            over.needed.as_gib(),
                            over.available.as_gib()
                        );
                    }
                };
                write!(
                    f,
                    "{} needs {:.1} GiB{what}, {:.1} GiB available",
                    over.plan,
                    over.needed.as_gib(),
                    over.available.as_gib()
                )
            }
            // The example shows the first reason, as one line.
            Rejection::UnsupportedByEngine(unsupported) => match unsupported.refusals.first() {
                Some(first) => {
                    write!(f, "{} cannot run this plan: {first}", unsupported.engine.name())
                }
                None => write!(f, "{unsupported}"),
            },
            Rejection::OffloadNotNeeded(plan) => write!(
                f,
                "{plan} fits without its offload, which copies over the host link and saves no time"
            ),
        }
    }
}

/// Rejection counts with one example each.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rejections {
    /// Count and the first rejection per kind.
    pub counts: BTreeMap<RejectionKind, (usize, Rejection)>,
}

impl Rejections {
    /// Counts one rejection of `kind`; `example` builds the rejection shown for the kind the
    /// first time it is seen.
    pub(super) fn add(&mut self, kind: RejectionKind, example: impl FnOnce() -> Rejection) {
        match self.counts.get_mut(&kind) {
            Some(entry) => entry.0 += 1,
            None => {
                self.counts.insert(kind, (1, example()));
            }
        }
    }

    /// Counts `count` rejections of `kind` at once, as `count` calls of [`Rejections::add`]
    /// would (`example` is built only if the kind is new).
    pub(super) fn add_many(
        &mut self,
        kind: RejectionKind,
        count: usize,
        example: impl FnOnce() -> Rejection,
    ) {
        match self.counts.get_mut(&kind) {
            Some(entry) => entry.0 += count,
            None => {
                self.counts.insert(kind, (count, example()));
            }
        }
    }

    /// Total rejected.
    pub fn total(&self) -> usize {
        self.counts.values().map(|(n, _)| n).sum()
    }
}

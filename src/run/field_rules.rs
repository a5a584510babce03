//! The single-field rules that every part of a plan's validation shares: a size that must be a
//! positive whole number within meshplan's bound, and the bounds of a routing ratio.

use crate::violation::Collector;

/// The message of a size that is not positive.
pub(super) const POSITIVE: &str = "must be a positive whole number";
/// The message of a routing ratio out of range ([`crate::limits::MOE_RATIO`]).
pub(super) const MOE_RATIO_RANGE: &str = "must be from 1 to 65536";
/// The bound of a routing ratio, for the hint.
pub(super) const MOE_RATIO_HINT: &str = "at most 65536, the bound on experts";

/// `value` when it is a positive whole number of at most `max`, else `default` with the problem
/// recorded against `field` (`hint` says what to give).
pub(super) fn positive_or(
    collector: &mut Collector,
    field: &str,
    value: Option<i64>,
    default: u64,
    max: u64,
    hint: &str,
) -> u64 {
    match value {
        None => default,
        Some(v) if v > 0 && v as u64 <= max => v as u64,
        Some(v) if v > 0 => {
            let bound = max.to_string();
            let hint = if hint.contains(&bound) {
                hint.to_owned()
            } else {
                format!("{hint}, at most {max}")
            };
            collector.add(field, v, format!("exceeds {max}, the largest meshplan prices"), hint);
            default
        }
        Some(v) => {
            collector.add(field, v, POSITIVE, hint);
            default
        }
    }
}

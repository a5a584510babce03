//! mapping
use super::{CalibrationRow, RowResult};
pub(super) fn evaluate_row(_row: &CalibrationRow) -> RowResult { todo!() }

//! How often the 80 % error bands hold, measured honestly: for each source, the band table is
//! built from the other sources' held-out errors only (nested leave-one-source-out), and the
//! source's held-out errors are checked against those bands. A row whose class has too few runs
//! elsewhere for a band is counted apart.

use serde::Serialize;

use super::bands::{BandKey, BandTable};

/// Measured coverage of the bands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandCoverage {
    /// Held-out rows that got a band.
    pub rows: usize,
    /// Of those, rows whose held-out error lies inside it.
    pub covered: usize,
    /// covered / rows x 100.
    pub coverage_pct: Option<f64>,
    /// Held-out rows with no band (their class has too few runs in the other sources).
    pub without_band: usize,
    /// Rows whose band came from a coarser group than their own (widened).
    pub widened: usize,
}

/// One held-out row: its source, its band key and its held-out signed error %.
pub(super) struct HeldOutError<'a> {
    pub source: &'a str,
    pub key: BandKey,
    pub error_pct: f64,
}

/// The nested coverage of the bands over `errors`.
pub(super) fn nested_coverage(errors: &[HeldOutError<'_>]) -> BandCoverage {
    let sources = super::calibrate::sources(errors.iter().map(|e| e.source));
    let (mut rows, mut covered, mut without_band, mut widened) = (0, 0, 0, 0);
    for source in sources {
        let table = BandTable::from_errors(
            errors.iter().filter(|e| e.source != source).map(|e| (&e.key, e.error_pct)),
        );
        for error in errors.iter().filter(|e| e.source == source) {
            let Some(band) = table.band(&error.key) else {
                without_band += 1;
                continue;
            };
            rows += 1;
            covered += usize::from(band.contains(error.error_pct));
            widened += usize::from(band.widening > 1.0);
        }
    }
    BandCoverage {
        rows,
        covered,
        coverage_pct: (rows > 0).then(|| covered as f64 / rows as f64 * 100.0),
        without_band,
        widened,
    }
}

//! Physical quantities as types: bytes, seconds, FLOPs and their rates.
//!
//! Every number that carries a unit inside meshplan is one of these newtypes, so a byte count can
//! never be added to a duration and a bandwidth can only turn bytes into seconds. Text such as
//! `"80 GB"`, `"3.35 TB/s"` or `"989.4 TFLOP/s"` is parsed here, once, at the edge; nothing else
//! in the crate multiplies by `1e9`.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

// Quantities serialize as plain numbers in their base unit (bytes, seconds, FLOPs, per second).
macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(f64);

        impl $name {
            /// Zero of this quantity.
            pub const ZERO: Self = Self(0.0);

            /// The value in the base unit (bytes, seconds, FLOPs, or their per-second rates).
            pub fn value(self) -> f64 {
                self.0
            }

            /// Builds the quantity from a value in the base unit.
            pub fn new(value: f64) -> Self {
                Self(value)
            }

            /// The larger of two quantities.
            pub fn max(self, other: Self) -> Self {
                Self(self.0.max(other.0))
            }

            /// The smaller of two quantities.
            pub fn min(self, other: Self) -> Self {
                Self(self.0.min(other.0))
            }
        }

        impl Add for $name {
            type Output = Self;
            fn add(self, rhs: Self) -> Self {
                Self(self.0 + rhs.0)
            }
        }

        impl AddAssign for $name {
            fn add_assign(&mut self, rhs: Self) {
                self.0 += rhs.0;
            }
        }

        impl Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                Self(self.0 - rhs.0)
            }
        }

        impl Neg for $name {
            type Output = Self;
            fn neg(self) -> Self {
                Self(-self.0)
            }
        }

        impl Mul<f64> for $name {
            type Output = Self;
            fn mul(self, rhs: f64) -> Self {
                Self(self.0 * rhs)
            }
        }

        impl Div<f64> for $name {
            type Output = Self;
            fn div(self, rhs: f64) -> Self {
                Self(self.0 / rhs)
            }
        }

        impl Div for $name {
            type Output = f64;
            fn div(self, rhs: Self) -> f64 {
                self.0 / rhs.0
            }
        }

        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                Self(iter.map(|q| q.0).sum())
            }
        }
    };
}

quantity!(
    /// A size in bytes.
    Bytes
);
quantity!(
    /// A duration in seconds.
    Seconds
);
quantity!(
    /// A count of floating-point operations.
    Flops
);
quantity!(
    /// A data rate in bytes per second.
    BytesPerSec
);
quantity!(
    /// A compute rate in floating-point operations per second.
    FlopsPerSec
);
quantity!(
    /// A power in watts.
    Watts
);

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Seconds in a day.
pub const SECONDS_PER_DAY: f64 = 86_400.0;

impl Bytes {
    /// Builds a size from gibibytes (2^30 bytes).
    pub fn gib(value: f64) -> Self {
        Self(value * GIB)
    }

    /// The size in gibibytes (2^30 bytes), the unit memory is reported in.
    pub fn as_gib(self) -> f64 {
        self.0 / GIB
    }
}

impl Seconds {
    /// Builds a duration from microseconds.
    pub fn micros(value: f64) -> Self {
        Self(value * 1e-6)
    }

    /// The duration in milliseconds.
    pub fn as_millis(self) -> f64 {
        self.0 * 1e3
    }

    /// The duration in days.
    pub fn as_days(self) -> f64 {
        self.0 / SECONDS_PER_DAY
    }
}

impl FlopsPerSec {
    /// Builds a rate from TFLOP/s (10^12 FLOP/s).
    pub fn tera(value: f64) -> Self {
        Self(value * 1e12)
    }

    /// The rate in TFLOP/s.
    pub fn as_tera(self) -> f64 {
        self.0 / 1e12
    }
}

impl BytesPerSec {
    /// Builds a rate from GB/s (10^9 bytes per second, as vendors quote links and memory).
    pub fn giga(value: f64) -> Self {
        Self(value * 1e9)
    }

    /// The rate in GB/s (10^9 bytes per second).
    pub fn as_giga(self) -> f64 {
        self.0 / 1e9
    }
}

impl Div<BytesPerSec> for Bytes {
    type Output = Seconds;
    fn div(self, rhs: BytesPerSec) -> Seconds {
        Seconds(self.0 / rhs.0)
    }
}

impl Div<FlopsPerSec> for Flops {
    type Output = Seconds;
    fn div(self, rhs: FlopsPerSec) -> Seconds {
        Seconds(self.0 / rhs.0)
    }
}

impl Div<Seconds> for Flops {
    type Output = FlopsPerSec;
    fn div(self, rhs: Seconds) -> FlopsPerSec {
        FlopsPerSec(self.0 / rhs.0)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} GiB", self.as_gib())
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.abs() >= 1.0 {
            write!(f, "{:.3} s", self.0)
        } else {
            write!(f, "{:.2} ms", self.as_millis())
        }
    }
}

impl fmt::Display for BytesPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} GB/s", self.as_giga())
    }
}

impl fmt::Display for FlopsPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} TFLOP/s", self.as_tera())
    }
}

/// Why a quantity string such as `"80 GB"` could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantityError {
    /// The text did not start with a number.
    #[error("`{text}` has no number; write it like `{example}`")]
    NoNumber {
        /// The text as written.
        text: String,
        /// A correctly written example.
        example: &'static str,
    },
    /// The unit is not one this quantity accepts.
    #[error("`{text}` has unit `{unit}`, expected one of {accepted}")]
    UnknownUnit {
        /// The text as written.
        text: String,
        /// The unit found.
        unit: String,
        /// The units accepted.
        accepted: &'static str,
    },
    /// The number is zero, negative or not finite.
    #[error("`{text}` must be a positive, finite amount")]
    NotPositive {
        /// The text as written.
        text: String,
    },
    /// The amount is outside the physical range of the quantity (see `crate::limits`).
    #[error("`{text}` is outside {range}, the range meshplan prices")]
    OutOfRange {
        /// The text as written.
        text: String,
        /// The range, in words.
        range: &'static str,
    },
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let trimmed = text.trim();
    let end = trimmed
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+' | '_')))
        .map_or(trimmed.len(), |(i, _)| i);
    let number: f64 = trimmed[..end].replace('_', "").parse().ok()?;
    Some((number, trimmed[end..].trim()))
}

fn parse_with_units(
    text: &str,
    units: &[(&str, f64)],
    accepted: &'static str,
    example: &'static str,
) -> Result<f64, QuantityError> {
    let (number, unit) = split_number(text)
        .ok_or_else(|| QuantityError::NoNumber { text: text.to_owned(), example })?;
    let scale = units.iter().find(|(name, _)| name.eq_ignore_ascii_case(unit)).map(|(_, s)| *s);
    let scale = scale.ok_or_else(|| QuantityError::UnknownUnit {
        text: text.to_owned(),
        unit: unit.to_owned(),
        accepted,
    })?;
    let value = number * scale;
    if !(value.is_finite() && value > 0.0) {
        return Err(QuantityError::NotPositive { text: text.to_owned() });
    }
    Ok(value)
}

/// Parses a memory size: `B`, `KB`, `MB`, `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB`.
pub fn parse_bytes(text: &str) -> Result<Bytes, QuantityError> {
    const UNITS: &[(&str, f64)] = &[
        ("B", 1.0),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("TB", 1e12),
        ("KiB", 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("GiB", GIB),
        ("TiB", GIB * 1024.0),
    ];
    parse_with_units(text, UNITS, "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB", "80 GB").map(Bytes)
}

/// Parses a bandwidth: `GB/s`, `TB/s`, `MB/s` or network-style `Gb/s`, `Gbps` (bits).
pub fn parse_bandwidth(text: &str) -> Result<BytesPerSec, QuantityError> {
    const UNITS: &[(&str, f64)] =
        &[("MB/s", 1e6), ("GB/s", 1e9), ("TB/s", 1e12), ("Gb/s", 1e9 / 8.0), ("Gbps", 1e9 / 8.0)];
    // Bits and bytes differ only by case, so match the unit case-sensitively first.
    let (number, unit) = split_number(text)
        .ok_or_else(|| QuantityError::NoNumber { text: text.to_owned(), example: "450 GB/s" })?;
    if let Some((_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) {
        let value = number * scale;
        if !(value.is_finite() && value > 0.0) {
            return Err(QuantityError::NotPositive { text: text.to_owned() });
        }
        return Ok(BytesPerSec(value));
    }
    Err(QuantityError::UnknownUnit {
        text: text.to_owned(),
        unit: unit.to_owned(),
        accepted: "MB/s, GB/s, TB/s, Gb/s, Gbps",
    })
}

/// Parses a compute rate: `TFLOP/s`, `PFLOP/s` or `GFLOP/s`.
pub fn parse_flops_rate(text: &str) -> Result<FlopsPerSec, QuantityError> {
    const UNITS: &[(&str, f64)] = &[
        ("GFLOP/s", 1e9),
        ("TFLOP/s", 1e12),
        ("PFLOP/s", 1e15),
        ("TFLOPS", 1e12),
        ("PFLOPS", 1e15),
    ];
    parse_with_units(text, UNITS, "GFLOP/s, TFLOP/s, PFLOP/s", "989.4 TFLOP/s").map(FlopsPerSec)
}

/// Parses a count with an optional `K`, `M`, `B` (or `G`) or `T` suffix, powers of 1000 (`15T`,
/// `300B`, `1.5e13`).
pub fn parse_count(text: &str) -> Result<f64, QuantityError> {
    const UNITS: &[(&str, f64)] =
        &[("", 1.0), ("K", 1e3), ("M", 1e6), ("B", 1e9), ("G", 1e9), ("T", 1e12)];
    parse_with_units(text, UNITS, "K, M, B, T or none", "15T")
}

/// Parses a power: `W` or `kW`.
pub fn parse_power(text: &str) -> Result<Watts, QuantityError> {
    const UNITS: &[(&str, f64)] = &[("W", 1.0), ("kW", 1e3)];
    parse_with_units(text, UNITS, "W, kW", "700 W").map(Watts)
}

/// Parses a duration: `s`, `ms`, `us`, `ns`, `min`, `h` or `d`.
pub fn parse_seconds(text: &str) -> Result<Seconds, QuantityError> {
    const UNITS: &[(&str, f64)] = &[
        ("s", 1.0),
        ("ms", 1e-3),
        ("us", 1e-6),
        ("ns", 1e-9),
        ("min", 60.0),
        ("h", 3600.0),
        ("d", SECONDS_PER_DAY),
    ];
    parse_with_units(text, UNITS, "s, ms, us, ns, min, h, d", "5 us").map(Seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vendor_figures() {
        assert_eq!(parse_bytes("80 GB").unwrap().value(), 80e9);
        assert_eq!(parse_bytes("96GiB").unwrap().as_gib(), 96.0);
        assert_eq!(parse_bandwidth("3.35 TB/s").unwrap().as_giga(), 3350.0);
        assert_eq!(parse_bandwidth("400 Gb/s").unwrap().as_giga(), 50.0);
        assert_eq!(parse_flops_rate("989.4 TFLOP/s").unwrap().as_tera(), 989.4);
        assert!((parse_seconds("5 us").unwrap().value() - 5e-6).abs() < 1e-18);
        assert_eq!(parse_power("700 W").unwrap().value(), 700.0);
        assert_eq!(parse_power("1.2 kW").unwrap().value(), 1200.0);
        assert_eq!(parse_seconds("30 min").unwrap().value(), 1800.0);
        assert!(parse_power("700 V").is_err());
        assert_eq!(parse_count("15T").unwrap(), 15e12);
        assert_eq!(parse_count("300B").unwrap(), 300e9);
        assert_eq!(parse_count("1.5e13").unwrap(), 1.5e13);
        assert_eq!(parse_count("2_000").unwrap(), 2000.0);
        assert!(parse_count("15X").is_err());
        assert!(parse_count("-3T").is_err());
    }

    #[test]
    fn rejects_bad_quantities_with_the_text() {
        let err = parse_bytes("80 GX").unwrap_err();
        assert!(err.to_string().contains("`80 GX` has unit `GX`"), "{err}");
        assert!(matches!(parse_bytes("GB"), Err(QuantityError::NoNumber { .. })));
        assert!(matches!(parse_bytes("-1 GB"), Err(QuantityError::NotPositive { .. })));
        assert!(matches!(parse_bandwidth("400 gb/s"), Err(QuantityError::UnknownUnit { .. })));
    }

    #[test]
    fn units_combine_only_in_physical_ways() {
        let time = Bytes::new(1e9) / BytesPerSec::giga(100.0);
        assert!((time.value() - 0.01).abs() < 1e-15);
        let time = Flops::new(1e12) / FlopsPerSec::tera(2.0);
        assert_eq!(time.value(), 0.5);
        assert_eq!((Flops::new(4e12) / Seconds::new(2.0)).as_tera(), 2.0);
    }
}

//! measured

//! Chrome trace output (filled in below).

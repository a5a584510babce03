//! collective

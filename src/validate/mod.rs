//! Validation against published runs.

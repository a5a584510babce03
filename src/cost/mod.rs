//! The analytical cost model: GEMM and attention kernel times (`kernels.rs`), collective
//! communication (`collective.rs`), the per-layer operation table (`layer.rs`), memory per
//! pipeline stage (`memory.rs`) and the assembly of one step's time (`step.rs`).
//!
//! Everything here is a pure function of a validated [`crate::Run`].

pub mod collective;
pub mod dispatch;
pub mod kernels;
pub mod layer;
pub mod memory;
pub mod step;
pub mod work;

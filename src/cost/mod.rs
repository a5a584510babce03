//! The analytical cost model: GEMM and attention kernel times (`kernels.rs`), collective
//! communication (`collective.rs`), the per-layer operation table (`layer.rs`, with
//! Mesh-Attention's context-parallel exchange in `mesh_attention.rs`), memory per
//! pipeline stage (`memory.rs`), one micro-batch's work through a segment (`work.rs`), the
//! step-level terms (`step_terms.rs`: pipeline send, data-parallel collectives, optimizer), one
//! run priced once for the closed form and the simulator (`priced.rs`), the closed-form assembly
//! of one step's time (`step.rs`), the breakdown types they report in (`breakdown.rs`) and one
//! step's work per data-parallel replica under the run's data (`replica_loads.rs`).
//!
//! Everything here is a pure function of a validated [`crate::Run`].

pub mod activations;
pub mod breakdown;
pub mod collective;
pub mod dispatch;
pub mod document_attention;
pub mod dynamic_microbatches;
pub mod hybrid_cp;
pub mod imbalance;
pub mod kernels;
pub mod layer;
pub mod memory;
pub mod mesh_attention;
pub mod op_table;
pub mod priced;
pub mod pytorch_ring;
pub mod repacking;
pub mod replica_loads;
pub mod runtime_memory;
pub mod step;
pub mod step_terms;
pub mod sublayer;
pub mod unfused_attention;
pub mod work;

#[cfg(test)]
mod context_parallel_tests;
#[cfg(test)]
mod eager_ops_tests;
#[cfg(test)]
mod expert_launch_tests;
#[cfg(test)]
mod fp8_attention_tests;
#[cfg(test)]
mod layer_tests;
#[cfg(test)]
mod selective_and_offload_tests;
#[cfg(test)]
mod sliding_window_tests;
#[cfg(test)]
mod tp_overlap_tests;

//! The integration tests, one test binary (one link, one run): the `meshplan` binary end to end
//! (`cli`, `hostile_input`: the inputs of issue 13), the library's public API (`activation_offload`, `bf16_layers`, `experts_and_context`, `exports`, `kernel_measurements`,
//! `mesh_attention`, `properties`, `validation`), plan files and pins (`plan_files`), the report of a run with document lengths (`data_report`), the checked-in schemas and the repository's hygiene (`tidy`).
//! `support` holds what they share. Snapshots live in `snapshots/`, named
//! `integration__<module>__<name>.snap`; proptest's regressions file sits beside `properties.rs`.

mod activation_offload;
mod bf16_layers;
mod cli;
mod command_line_words;
mod data_lengths;
mod data_report;
mod dynamic_microbatches;
mod experts_and_context;
mod exports;
mod fuzz_regressions;
mod hostile_input;
mod hybrid_cp;
mod input_files;
mod kernel_measurements;
mod lengths_parquet;
mod mesh_attention;
mod plan_files;
mod properties;
mod recipe_flag;
mod schemas;
mod support;
mod tidy;
mod validation;
mod whole_run;
mod wlb_pareto_lengths;

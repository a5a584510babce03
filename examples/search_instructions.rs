//! Runs N searches of the search benchmark's long-context case (Llama 2 7B at 128K tokens on 64
//! H100 over a long-tailed document mix) and prints the plans priced, for counting instructions
//! where wall time is too noisy: `RAYON_NUM_THREADS=1 valgrind --tool=callgrind
//! target/release/examples/search_instructions 1 every` against the same with `packed` (documents
//! packed as they arrive, static CP) compares the search over every balancing strategy with the
//! one over none; `padded-every` and `padded-fixed` do the same with the documents one per padded
//! sequence (variable micro-batches among the strategies).

#[path = "../benches/cases/long_context.rs"]
mod long_context;

use long_context::{long_context, no_balancing};
use meshplan::data::Batching;
use meshplan::plan::PlanSpec;
use meshplan::search::search;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 1,
    };
    let spec = match std::env::args().nth(2).as_deref() {
        Some("every") | None => long_context(Some(Batching::Pack), PlanSpec::default()),
        Some("packed") => long_context(Some(Batching::Pack), no_balancing()),
        Some("padded-every") => long_context(Some(Batching::Pad), PlanSpec::default()),
        Some("padded-fixed") => long_context(Some(Batching::Pad), no_balancing()),
        Some(other) => {
            let cases = "`every`, `packed`, `padded-every` or `padded-fixed`";
            return Err(format!("unknown case `{other}`; give {cases}").into());
        }
    };
    let mut priced = 0;
    for _ in 0..count {
        priced += search(std::hint::black_box(&spec), &|_, _| {})?.priced;
    }
    println!("{count} searches, candidates priced summed: {priced}");
    Ok(())
}

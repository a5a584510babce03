//! Runs N closed-form estimates of the benchmark's run (Llama 3.1 405B on 16,384 H100, tp 8 pp 16
//! vp 8) and prints the sum of their throughputs, for counting instructions where wall time is
//! too noisy: `valgrind --tool=callgrind target/release/examples/estimate_loop 2001` minus the
//! same with `1`, divided by 2,000, is the instructions of one estimate. A second argument,
//! `lengths`, prices the same run on the benchmark's sample of 10,000 document lengths.

#[path = "../benches/cases/mod.rs"]
mod cases;

use meshplan::{Run, closed_form};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 100_000,
    };
    let spec = match std::env::args().nth(2).as_deref() {
        Some("lengths") => cases::llama_405b_on_16k_h100_with_10k_lengths()?,
        Some(other) => {
            return Err(format!("unknown case `{other}`; give `lengths` or nothing").into());
        }
        None => cases::llama_405b_on_16k_h100()?,
    };
    let run = Run::from_spec(&spec).map_err(|violations| violations.to_string())?;
    let mut sum = 0.0;
    for _ in 0..count {
        sum += closed_form(std::hint::black_box(&run)).throughput.tokens_per_sec_per_gpu;
    }
    println!("{count} estimates, tokens/s/GPU summed: {sum}");
    Ok(())
}

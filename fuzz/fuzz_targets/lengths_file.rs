//! Feeds arbitrary bytes as a lengths file (`--lengths FILE`: CSV, JSON or TOML, chosen by the
//! first byte; Parquet when the rest opens with Parquet's `PAR1`, as the CLI reads any file) to
//! the reader and `Data::from_spec`; for data that validates, draws its sample of 64-token
//! sequences and asserts every summary figure finite, the FLOP ratio's mean within (0, 1] and
//! the trained share of tokens within (0, 1]; batched `pad` (one document per sequence), also
//! forms the variable micro-batches a plan would sort them into (global batches of 64
//! documents, a budget of two sequences) and asserts each within the budget, the trained share
//! within (0, 1] and at most the computed one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::cli::lengths_file::parse_bytes;
use meshplan::data::{AttentionWork, Batching, Data, form_dynamic_batches, sample_sequences};

/// Entries validated and drawn from at most: a few KiB of Parquet can state millions of rows
/// (run-length encoded), which read in well under a second but validate and sort in seconds.
const MAX_ENTRIES: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else { return };
    let extension = ["csv", "json", "toml"][usize::from(kind % 3)];
    let Ok(spec) = parse_bytes(rest.to_vec(), extension) else { return };
    let entries =
        spec.lengths.as_ref().map_or(0, Vec::len) + spec.histogram.as_ref().map_or(0, Vec::len);
    if entries > MAX_ENTRIES {
        return;
    }
    let Ok(data) = Data::from_spec(&spec, None) else { return };
    let flops = |s: u64| (s * s) as f64;
    let loads = sample_sequences(&data, &AttentionWork::new(&flops, 64));
    assert!(loads.mean[0] > 0.0 && loads.mean[0] <= 1.0 + 1e-12, "{:?}", loads.mean);
    assert!(loads.trained_fraction > 0.0 && loads.trained_fraction <= 1.0);
    for value in loads.covariance.iter().chain(&loads.max).chain(loads.largest.iter().flatten()) {
        assert!(value.is_finite(), "{loads:?}");
    }
    if data.batching() == Batching::Pad {
        let work = AttentionWork::new(&flops, 64);
        let formed = form_dynamic_batches(&data, &work, 64, 2);
        assert!(formed.trained_fraction > 0.0 && formed.trained_fraction <= 1.0, "{formed:?}");
        assert!(formed.trained_fraction <= formed.computed_fraction + 1e-12, "{formed:?}");
        assert!(formed.mean.iter().chain([&formed.attention_share]).all(|v| v.is_finite()));
        let batches = formed.global_batches.iter().flatten();
        assert!(batches.clone().all(|batch| batch.tokens > 0.0 && batch.tokens <= 2.0 + 1e-12));
        assert!(batches.map(|batch| batch.attention).flatten().all(|v| v.is_finite()));
    }
});

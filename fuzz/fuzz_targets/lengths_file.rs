//! Feeds arbitrary bytes as a lengths file (`--lengths FILE`: CSV, JSON or TOML, chosen by the
//! first byte) to the reader and `Data::from_spec`; for data that validates, draws its sample of
//! 64-token sequences and asserts every summary figure finite, the FLOP ratio's mean within
//! (0, 1] and the trained share of tokens within (0, 1].
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::cli::lengths_file::parse;
use meshplan::data::{AttentionWork, Data, sample_sequences};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let extension = ["csv", "json", "toml"][usize::from(kind % 3)];
    let Ok(spec) = parse(text, extension) else { return };
    let Ok(data) = Data::from_spec(&spec, None) else { return };
    let flops = |s: u64| (s * s) as f64;
    let loads = sample_sequences(&data, &AttentionWork::new(&flops, 64));
    assert!(loads.mean[0] > 0.0 && loads.mean[0] <= 1.0 + 1e-12, "{:?}", loads.mean);
    assert!(loads.trained_fraction > 0.0 && loads.trained_fraction <= 1.0);
    for value in loads.covariance.iter().chain(&loads.max).chain(loads.largest.iter().flatten()) {
        assert!(value.is_finite(), "{loads:?}");
    }
});

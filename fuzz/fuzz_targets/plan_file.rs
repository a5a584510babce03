//! Feeds arbitrary bytes as a plan file to `plan_file::from_toml`; asserts no panic, and for a
//! file that reads and builds a `Run` that the file written back (`to_toml`) reads to the same
//! spec.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::{Run, plan_file};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = plan_file::from_toml(text) else { return };
    if Run::from_spec(&spec).is_err() {
        return;
    }
    let written = plan_file::to_toml(&spec).expect("a validated spec writes as TOML");
    let read = plan_file::from_toml(&written).expect("a written plan file reads back");
    assert_eq!(read, spec, "plan file round trip:\n{written}");
});

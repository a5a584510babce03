//! Feeds arbitrary bytes as whole-run inputs (the keys of `GoodputSpec`, in TOML) to validation
//! and, when they validate, prices the whole run of a fixed small plan at a fixed step time;
//! asserts no panic and that every figure printed is finite (or the run is refused as one that
//! cannot finish).
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::goodput::{Goodput, GoodputSpec, outlook, simulate_runs};
use meshplan::hardware::ClusterSpec;
use meshplan::plan::{PlanSpec, TrainingSpec};
use meshplan::units::Seconds;
use meshplan::{Run, RunSpec, presets};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = toml::from_str::<GoodputSpec>(text) else { return };
    let Ok(Some(goodput)) = Goodput::from_spec(&spec) else { return };
    let run = Run::from_spec(&RunSpec {
        model: presets::model("llama3.1-8b").unwrap(),
        cluster: ClusterSpec { gpu: presets::gpu("h100-sxm").unwrap(), num_gpus: 64 },
        training: TrainingSpec {
            seq_len: 4096,
            global_batch: 64,
            micro_batch: None,
            precision: None,
        },
        plan: PlanSpec::default(),
        data: None,
    })
    .expect("the fixed run validates");
    let Ok(outlook) = outlook(&run, Seconds::new(1.5), &goodput) else { return };
    for figure in [outlook.wall, outlook.productive, outlook.interval, outlook.restart] {
        assert!(figure.value().is_finite() && figure.value() > 0.0, "{outlook:?}");
    }
    assert!(outlook.ettr > 0.0 && outlook.ettr <= 1.0, "{outlook:?}");
    assert!(outlook.gpu_hours.is_finite());
    // Drawing is bounded (10^8 failures in all) but slow near the bound: the fuzzer draws only
    // runs short enough to stay inside its per-input timeout.
    if outlook.failures < 1e6
        && let Some(drawn) = simulate_runs(&outlook, 2, 0)
    {
        assert!(drawn.mean.value().is_finite());
    }
});

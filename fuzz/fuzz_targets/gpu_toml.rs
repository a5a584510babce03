//! Feeds arbitrary bytes as a GPU TOML file (`toml::from_str::<GpuSpec>`) to `Gpu::from_spec` and
//! `Cluster::from_spec` (at a few GPU counts); asserts no panic, and for a GPU that validates that
//! memory, bandwidth and every peak are finite and positive, every efficiency a fraction in
//! (0, 1] and every MXFP8 attention ratio a speed in (0, 4], and for a cluster that its link
//! bandwidths and any host memory per GPU are finite and positive and latencies finite and
//! non-negative.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshplan::hardware::{Cluster, ClusterSpec, Gpu, GpuSpec, LinkTier, PrecisionClass};

fn positive(what: &str, value: f64) {
    assert!(value.is_finite() && value > 0.0, "{what} = {value}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(spec) = toml::from_str::<GpuSpec>(text) else { return };
    if let Ok(gpu) = Gpu::from_spec(&spec) {
        positive("memory", gpu.memory().value());
        positive("memory bandwidth", gpu.memory_bandwidth().value());
        positive("peak bf16", gpu.peak_bf16().value());
        positive("peak fp16", gpu.peak_fp16().value());
        assert!(gpu.sm_count() > 0);
        for class in [PrecisionClass::Bits16, PrecisionClass::Bits8, PrecisionClass::Bits4] {
            if let Some(peak) = gpu.peak(class) {
                positive("peak", peak.value());
            }
            let eff = gpu.gemm_efficiency(class);
            assert!(eff > 0.0 && eff <= 1.0, "GEMM efficiency {eff} of {class:?}");
        }
        let eff = gpu.efficiency();
        for (what, value) in [
            ("attention forward", eff.attention_forward),
            ("attention backward", eff.attention_backward),
            ("memory", eff.memory),
        ] {
            assert!(value > 0.0 && value <= 1.0, "{what} efficiency {value}");
        }
        for (what, value) in [
            ("gemm_k_overhead", eff.gemm_k_overhead),
            ("attention_forward_half_seq", eff.attention_forward_half_seq),
            ("attention_backward_half_seq", eff.attention_backward_half_seq),
        ] {
            assert!(value.is_finite() && value >= 0.0, "{what} = {value}");
        }
        // A listed MXFP8 attention ratio is a finite speed in (0, 4] at any length.
        for head_dim in [64, 128, 192] {
            for seq in [0.0, 1.0, 3000.0, 4096.0, 1e12] {
                if let Some((forward, backward)) = gpu.mxfp8_attention_speed(head_dim, seq) {
                    for ratio in [forward, backward] {
                        assert!(ratio > 0.0 && ratio <= 4.0, "MXFP8 attention ratio {ratio}");
                    }
                }
            }
        }
    }
    for num_gpus in [1, 8, 72, 1 << 20, 0, -1] {
        let cluster_spec = ClusterSpec { gpu: spec.clone(), num_gpus };
        let Ok(cluster) = Cluster::from_spec(&cluster_spec) else { continue };
        assert!(num_gpus > 0, "a cluster of {num_gpus} GPUs validated");
        let links = cluster.interconnect();
        assert!(links.gpus_per_node() > 0 && links.nvlink_domain() > 0);
        for tier in [LinkTier::Nvlink, LinkTier::Network] {
            positive("link bandwidth", links.bandwidth(tier).value());
            let latency = links.latency(tier).value();
            assert!(latency.is_finite() && latency >= 0.0, "latency {latency}");
        }
        if let Some(host) = links.host_memory_per_gpu() {
            positive("host memory per GPU", host.value());
        }
    }
});

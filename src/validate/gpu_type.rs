//! The GPU preset a calibration row's `gpu_type` text names, and the network it states.

type NetworkOverride = Option<(String, String)>;

/// The GPU preset for a `gpu_type` text, and a network bandwidth override where the row states a
/// fabric that differs from the preset's.
pub(super) fn gpu_preset(gpu_type: &str) -> Option<(&'static str, NetworkOverride)> {
    let text = gpu_type.to_ascii_uppercase();
    let name = if text.contains("GB300") {
        "gb300"
    } else if text.contains("GB200") {
        "gb200"
    } else if text.contains("B300") {
        "b300"
    } else if text.contains("B200") {
        "b200"
    } else if text.contains("H100") && text.contains("96GB") {
        "h100-96gb"
    } else if text.contains("H800") {
        "h800"
    } else if text.contains("H200") {
        "h200"
    } else if text.contains("H100") {
        "h100-sxm"
    } else if text.contains("A800") {
        "a800"
    } else if text.contains("A100") && text.contains("40GB") {
        "a100-40gb"
    } else if text.contains("A100") {
        "a100-80gb"
    } else if text.contains("V100") && text.contains("SXM3") {
        "v100-sxm3"
    } else if text.contains("V100") {
        "v100-sxm2"
    } else if text.contains("MI300X") {
        "mi300x"
    } else {
        return None;
    };
    let network = if text.contains("4X OMNIPATH") {
        // Jean Zay: four 100 Gb/s Omni-Path links per 8-GPU node.
        Some((
            "50 Gb/s".to_owned(),
            "network: 4 x 100 Gb/s Omni-Path per 8-GPU node = 50 Gb/s per GPU (row's gpu_type)"
                .to_owned(),
        ))
    } else if text.contains("1600 GBPS") {
        Some((
            "200 Gb/s".to_owned(),
            "network: 1600 Gb/s RoCE per 8-GPU node = 200 Gb/s per GPU (row's gpu_type)".to_owned(),
        ))
    } else if text.contains("IB 200GB/S") {
        Some(("200 Gb/s".to_owned(), "network: IB 200 Gb/s per GPU (row's gpu_type)".to_owned()))
    } else {
        None
    };
    Some((name, network))
}

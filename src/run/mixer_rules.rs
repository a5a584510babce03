//! The plan's rules for a hybrid model's token mixers: how tensor and context parallelism split
//! gated DeltaNet, lightning attention, Mamba-1 and Mamba-2 layers, and what a Mamba-1 layer
//! needs of the GPU.

use crate::hardware::Gpu;
use crate::model::Model;
use crate::violation::Collector;

/// Adds a problem unless `size` divides `count` (`what` names the count).
pub(super) fn check_divides(
    collector: &mut Collector,
    field: &str,
    size: u64,
    what: &str,
    count: u64,
) {
    if !count.is_multiple_of(size) {
        collector.add(
            field,
            size,
            format!("does not divide {what} {count}"),
            format!("pick a divisor of {count}"),
        );
    }
}

/// Checks `tp` and `cp` (each with whether it is the accepted value rather than a stand-in)
/// against the model's token mixers, and the GPU (when the cluster is known) against them.
pub(super) fn check(
    collector: &mut Collector,
    model: &Model,
    gpu: Option<&Gpu>,
    (tp, tp_ok): (u64, bool),
    (cp, cp_ok): (u64, bool),
) {
    if let Some(linear) = model.hybrid_linear_attention() {
        // Gated DeltaNet splits its key and value heads across TP ranks.
        check_divides(
            collector,
            "plan.tp",
            tp,
            "linear_attention.num_key_heads",
            linear.num_key_heads,
        );
        check_divides(
            collector,
            "plan.tp",
            tp,
            "linear_attention.num_value_heads",
            linear.num_value_heads,
        );
    }
    if let Some(lightning) = model.hybrid_lightning_attention() {
        // Lightning attention splits its heads across TP ranks.
        check_divides(
            collector,
            "plan.tp",
            tp,
            "lightning_attention.num_heads",
            lightning.num_heads,
        );
    }
    if let Some(mixer) = model.hybrid_mamba1() {
        // A Mamba-1 mixer splits its channels across TP ranks.
        check_divides(collector, "plan.tp", tp, "mamba1.inner_size", mixer.inner);
        if cp_ok && cp > 1 {
            collector.add(
                "plan.cp",
                cp,
                "splits the sequence of Mamba-1 (S) layers, which meshplan does not price over context-parallel ranks: none of its context-parallel exchanges applies to a selective scan",
                "drop --cp (cp 1) for a model with Mamba-1 layers",
            );
        }
        if let Some(gpu) = gpu
            && gpu.peak_fp32().is_none()
        {
            collector.add(
                "gpu.peak.fp32",
                "(unset)",
                format!(
                    "is needed by the Mamba-1 (S) layers: their selective scan runs on the CUDA cores, and the {} preset states no FP32 peak",
                    gpu.name()
                ),
                "add `fp32 = \"67 TFLOP/s\"` (the datasheet's FP32 figure) under [peak] in the GPU file",
            );
        }
    }
    if let Some(mamba) = model.hybrid_mamba() {
        // Megatron-Core's MambaMixer splits its heads and its B/C groups across TP ranks.
        check_divides(collector, "plan.tp", tp, "mamba.num_heads", mamba.num_heads);
        check_divides(collector, "plan.tp", tp, "mamba.num_groups", mamba.num_groups);
        // MambaContextParallel gives each CP rank whole heads of each TP rank's share.
        let heads = mamba.num_heads / tp.max(1);
        if tp_ok && cp_ok && mamba.num_heads.is_multiple_of(tp) && !heads.is_multiple_of(cp) {
            collector.add(
                "plan.cp",
                cp,
                format!("does not divide the {heads} Mamba-2 heads of a tensor-parallel rank"),
                format!("pick a cp that divides {heads}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::PlanSpec;
    use crate::run::{Run, test_spec};

    fn problems(spec: &crate::run::RunSpec) -> Vec<String> {
        let errors = Run::from_spec(spec).unwrap_err();
        errors.list().iter().map(|v| format!("{} = {}: {}", v.field, v.value, v.message)).collect()
    }

    #[test]
    fn mamba1_layers_need_whole_channels_no_cp_and_an_fp32_peak() {
        let jamba = |plan| {
            let mut spec = test_spec("llama3.1-8b", 16, 8192, 64, 1, plan);
            spec.model = crate::presets::model("jamba-v0.1").unwrap();
            spec
        };
        let fine = jamba(PlanSpec { tp: Some(2), ep: Some(8), ..PlanSpec::default() });
        assert!(Run::from_spec(&fine).is_ok());
        let split = jamba(PlanSpec { cp: Some(2), ep: Some(8), ..PlanSpec::default() });
        assert!(
            problems(&split)
                .iter()
                .any(|p| p.starts_with("plan.cp = 2: splits the sequence of Mamba-1"))
        );
        let mut no_fp32 = fine;
        no_fp32.cluster.gpu.peak.fp32 = None;
        let found = problems(&no_fp32);
        assert!(found.iter().any(|p| p.starts_with("gpu.peak.fp32 = (unset)")), "{found:?}");
        // Llama has no Mamba-1 layer: it needs no FP32 peak.
        let mut llama = test_spec("llama3.1-8b", 16, 8192, 64, 1, PlanSpec::default());
        llama.cluster.gpu.peak.fp32 = None;
        assert!(Run::from_spec(&llama).is_ok());
    }
}

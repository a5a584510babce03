//! A calibration row's precision text as a training recipe: the recipe it names, else the one
//! its release's performance recipes list for its model and GPU, else its stack's default.

use super::row::CalibrationRow;
use crate::plan::Precision;
use crate::stack::{Stack, StackDefaults};

/// The precision recipe a row ran, each assumption it takes listed.
pub(super) fn precision(
    row: &CalibrationRow,
    stack: &Stack,
    defaults: &StackDefaults,
    gpu: &str,
    assumptions: &mut Vec<String>,
) -> Result<Precision, String> {
    let text = row.precision.trim().to_ascii_lowercase();
    let blackwell = gpu.starts_with('b') || gpu.starts_with("gb");
    let precision = if text.is_empty() {
        assumptions.push(format!(
            "precision {} ({} default)",
            defaults.precision.name(),
            stack.id()
        ));
        defaults.precision
    } else if text.contains("nvfp4") {
        Precision::Nvfp4
    } else if text.contains("block-scaled") || text.contains("blockwise") {
        // Before MXFP8: a block-scaled row may name MXFP8 for its Blackwell runs only.
        if blackwell { Precision::Mxfp8 } else { Precision::Fp8Blockwise }
    } else if text.contains("mxfp8") || text.contains("fp8-mx") {
        Precision::Mxfp8
    } else if text.contains("fp8-cs") || text.contains("current scaling") || text.contains("float8")
    {
        Precision::Fp8Current
    } else if text.contains("fp8") && text.contains("te hybrid") {
        Precision::Fp8Delayed
    } else if text == "fp8"
        && let Some(listed) = listed_per_tensor_fp8(stack, &row.model, gpu)
    {
        assumptions.push(format!(
            "FP8 recipe {} (the one per-tensor FP8 recipe {}'s performance recipes list for this model on {gpu})",
            listed.name(),
            stack.id()
        ));
        listed
    } else if text.contains("fp8") {
        let fp8 = defaults.fp8.ok_or_else(|| {
            format!("precision `{}` names no FP8 recipe and {} has none", row.precision, stack.id())
        })?;
        if text == "fp8" {
            assumptions.push(format!("FP8 recipe {} ({} default)", fp8.name(), stack.id()));
        }
        fp8
    } else if text.contains("fp16") {
        Precision::Fp16
    } else if text.contains("bf16") || text.starts_with("amp") {
        Precision::Bf16
    } else {
        return Err(format!("precision `{}` (full fp32 training) is not modelled", row.precision));
    };
    Ok(precision)
}

/// The one per-tensor-scaled FP8 recipe (delayed or current scaling) that the stack's
/// performance recipes for `model` on `gpu` list, if they list exactly one: a row that names
/// plain "FP8" ran it, since the release's performance matrix has no entry for the other
/// (Megatron-Bridge 0.1's `perf_matrix` lists `fp8_cs` and block-scaled FP8 only for its MoE
/// models).
fn listed_per_tensor_fp8(stack: &Stack, model: &str, gpu: &str) -> Option<Precision> {
    let mut listed: Vec<Precision> = Vec::new();
    let lists = stack
        .recipes()
        .iter()
        .filter(|recipe| recipe.covers_model_on(model, gpu))
        .filter_map(|recipe| recipe.precisions());
    for precision in lists.flatten() {
        if matches!(precision, Precision::Fp8Delayed | Precision::Fp8Current)
            && !listed.contains(precision)
        {
            listed.push(*precision);
        }
    }
    match listed.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(model: &str, precision: &str) -> CalibrationRow {
        CalibrationRow { model: model.into(), precision: precision.into(), ..Default::default() }
    }

    #[test]
    fn plain_fp8_is_the_one_per_tensor_recipe_the_release_lists_for_the_model() {
        // NeMo 25.09's performance matrix lists fp8_cs and fp8_mx for Qwen3-30B-A3B on GB200.
        let stack = crate::presets::stack("nemo-25.09").unwrap();
        let of = |row: &CalibrationRow, gpu| {
            let mut assumptions = Vec::new();
            let precision = precision(row, &stack, stack.defaults(), gpu, &mut assumptions);
            (precision.unwrap(), assumptions.join("; "))
        };
        let (qwen, said) = of(&row("Qwen3_30B_a3B (tokendrop)", "FP8"), "gb200");
        assert_eq!(qwen, Precision::Fp8Current);
        assert!(said.contains("the one per-tensor FP8 recipe nemo-25.09's"), "{said}");
        // Llama 3 8B's recipes list both per-tensor recipes: the release's default decides.
        let (llama, said) = of(&row("LLAMA3_8B", "FP8"), "gb200");
        assert_eq!(Some(llama), stack.defaults().fp8);
        assert!(said.contains("(nemo-25.09 default)"), "{said}");
        // A row that names its recipe keeps it.
        assert_eq!(of(&row("Qwen3_30B_a3B", "FP8-DS"), "gb200").0, stack.defaults().fp8.unwrap());
        assert_eq!(of(&row("Qwen3_30B_a3B", "MXFP8"), "gb200").0, Precision::Mxfp8);
    }
}

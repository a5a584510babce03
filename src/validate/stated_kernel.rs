//! The attention kernel a calibration row's settings name, used where its stack states none for
//! the row's GPU (a stack that wraps the user's model code, such as DeepSpeed, or unlisted
//! software): the row then says what ran.

use super::row::CalibrationRow;
use crate::hardware::Generation;
use crate::stack::{AttentionKernel, Stack};

/// The kernel `row`'s settings name when `stack` states none on `generation`, with the
/// assumption that says so: FlashAttention-3 where they name its third version, else
/// FlashAttention-2 for any mention of the flash-attn package (its 2.x releases, 2023 to 2025).
pub(super) fn stated_attention(
    row: &CalibrationRow,
    stack: &Stack,
    generation: Option<Generation>,
) -> Option<(Generation, AttentionKernel, String)> {
    let generation = generation?;
    if stack.attention_kernel(Some(generation)).is_some() {
        return None;
    }
    let text = row.other_settings.to_ascii_lowercase();
    let named = |marks: &[&str]| marks.iter().any(|mark| text.contains(mark));
    let kernel = if named(&["flash-attn 3", "flash-attn-3", "flashattention-3", "flashattention 3"])
    {
        AttentionKernel::FlashAttn3
    } else if named(&["flash-attn", "flash_attn", "flashattention", "flash attention"]) {
        AttentionKernel::FlashAttn2
    } else {
        return None;
    };
    let why = format!(
        "attention kernel {} (row's settings; stack {} states none on {})",
        kernel.name(),
        stack.id(),
        generation.display_name()
    );
    Some((generation, kernel, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::StackCatalog;

    fn row(settings: &str) -> CalibrationRow {
        CalibrationRow { other_settings: settings.into(), ..CalibrationRow::default() }
    }

    #[test]
    fn a_row_names_the_kernel_only_where_its_stack_does_not() {
        let catalog = StackCatalog::builtin().unwrap();
        let deepspeed = catalog.get("deepspeed").unwrap();
        let hopper = Some(Generation::Hopper);
        let stated = |settings: &str| {
            stated_attention(&row(settings), deepspeed, hopper).map(|(_, kernel, _)| kernel)
        };
        assert_eq!(
            stated("DeepSpeed 0.11.1, HF Llama-2-7B, flash-attn"),
            Some(AttentionKernel::FlashAttn2)
        );
        assert_eq!(stated("FlashAttention-3 on H100"), Some(AttentionKernel::FlashAttn3));
        assert_eq!(stated("DeepSpeed 0.11.1, HF Llama-2-7B"), None);
        // A stack that states its kernel keeps it, whatever the row says.
        let megatron = catalog.get("megatron-core-0.6").unwrap();
        let flash = row("Megatron-LM core_v0.6.0 (TE impl, flash-attn)");
        assert!(stated_attention(&flash, megatron, hopper).is_none());
        // A GPU of no known generation has no kernel table to fill.
        assert!(stated_attention(&row("flash-attn"), deepspeed, None).is_none());
    }
}

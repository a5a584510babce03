//! A row's micro-batch, global batch and virtual pipeline size, filling what it leaves blank from
//! its stack's defaults: the per-rank batch a torchtitan row states, split into the pipeline
//! micro-batches its engine makes of it, and the model chunks per rank of an interleaved schedule
//! the row names without a size.

use super::row::{CalibrationRow, count};
use crate::stack::{PipelineMicrobatches, Stack};

/// How a row's batch is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BatchShape {
    /// Sequences per micro-batch.
    pub(super) micro_batch: u64,
    /// Sequences per optimizer step.
    pub(super) global_batch: u64,
}

/// The row's virtual pipeline size: the stated one, else the stack's model chunks per rank when
/// the row names an interleaved schedule, else 1.
pub(super) fn virtual_pipeline(
    row: &CalibrationRow,
    stack: &Stack,
    pp: u64,
    assumptions: &mut Vec<String>,
) -> u64 {
    if let Some(vp) = count(&row.vp) {
        return vp;
    }
    let settings = row.other_settings.to_ascii_lowercase();
    let interleaved = settings.contains("interleaved") && !settings.contains("non-interleaved");
    match stack.defaults().interleaved_stages_per_rank {
        Some(stages) if interleaved && pp > 1 => {
            assumptions.push(format!(
                "interleaved schedule without a stated size: {stages} model chunks per pipeline rank ({} rule)",
                stack.id()
            ));
            stages
        }
        _ => 1,
    }
}

/// Micro-batch and global batch, filling what the row leaves blank.
pub(super) fn batch_shape(
    row: &CalibrationRow,
    stack: &Stack,
    dp: u64,
    pp: u64,
    assumptions: &mut Vec<String>,
) -> Result<BatchShape, String> {
    let settings = row.other_settings.to_ascii_lowercase();
    let local_batch = settings.split(';').find_map(|part| {
        part.trim().strip_prefix("local batch size ").and_then(|v| v.trim().parse::<u64>().ok())
    });
    let gbs = count(&row.global_batch_size);
    let mbs = count(&row.micro_batch_size);
    let (micro_batch, global_batch) = match (mbs, gbs, local_batch) {
        (Some(mbs), Some(gbs), _) => {
            let Some(per_step) = mbs.checked_mul(dp) else {
                return Err(format!("micro-batch {mbs} x dp {dp} is past any batch"));
            };
            if gbs % per_step == 0 {
                (mbs, gbs)
            } else {
                // Composer splits the last micro-batch unevenly; price whole micro-batches.
                let accumulation = (gbs as f64 / per_step as f64).round().max(1.0) as u64;
                let Some(priced) = per_step.checked_mul(accumulation) else {
                    return Err(format!("global batch {gbs} is past any batch"));
                };
                assumptions.push(format!(
                    "global batch {gbs} is not a multiple of micro-batch x dp = {per_step}; priced as {accumulation} whole micro-batches"
                ));
                (mbs, priced)
            }
        }
        (None, gbs, Some(local)) => {
            // The local batch is per data-parallel rank; a pipeline splits it into micro-batches.
            let micro = local_micro_batch(local, pp, stack);
            if gbs.is_none() || pp > 1 {
                assumptions.push(format!(
                    "local batch {local}: global batch = local x dp, pipeline micro-batch {micro} ({} rule)",
                    stack.id()
                ));
            }
            match gbs.or_else(|| local.checked_mul(dp)) {
                Some(gbs) => (micro, gbs),
                None => return Err(format!("local batch {local} x dp {dp} is past any batch")),
            }
        }
        (None, Some(gbs), None) => {
            let whole = stack.defaults().no_gradient_accumulation;
            let micro = if whole { gbs / dp.max(1) } else { 1 };
            assumptions.push(format!(
                "micro-batch {micro} ({} rule: {})",
                stack.id(),
                if whole { "no gradient accumulation" } else { "Megatron-LM examples use 1" }
            ));
            (micro.max(1), gbs)
        }
        _ => return Err("global batch size not stated".into()),
    };
    Ok(BatchShape { micro_batch, global_batch })
}

/// The micro-batch a pipeline makes of a per-rank batch of `local` sequences: the whole batch
/// without a pipeline; else one sequence, or the batch split into as many micro-batches as
/// pipeline ranks where the stack does that and it splits evenly.
fn local_micro_batch(local: u64, pp: u64, stack: &Stack) -> u64 {
    if pp <= 1 {
        return local;
    }
    match stack.defaults().pipeline_microbatches {
        PipelineMicrobatches::PipelineDegree if local.is_multiple_of(pp) => local / pp,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn torchtitan_row(settings: &str) -> CalibrationRow {
        CalibrationRow {
            row_id: "1".into(),
            source_id: "torchtitan_202412".into(),
            global_batch_size: "256".into(),
            other_settings: settings.into(),
            ..CalibrationRow::default()
        }
    }

    #[test]
    fn torchtitan_splits_a_local_batch_into_as_many_micro_batches_as_pipeline_ranks() {
        let torchtitan = crate::presets::stack("torchtitan-2024-12").unwrap();
        let row = torchtitan_row("local batch size 32; torch.compile; PP schedule 1F1B");
        let mut assumptions = Vec::new();
        // Local batch 32 over 8 pipeline ranks: 8 micro-batches of 4 (build_pipeline_schedule's
        // default), not 32 of 1.
        let shape = batch_shape(&row, &torchtitan, 8, 8, &mut assumptions).unwrap();
        assert_eq!(shape, BatchShape { micro_batch: 4, global_batch: 256 });
        assert!(assumptions[0].contains("pipeline micro-batch 4"), "{assumptions:?}");
        // Without a pipeline the local batch is one micro-batch; a batch that does not split
        // evenly over the ranks is taken one sequence at a time.
        assert_eq!(batch_shape(&row, &torchtitan, 8, 1, &mut Vec::new()).unwrap().micro_batch, 32);
        let odd = torchtitan_row("local batch size 12");
        assert_eq!(batch_shape(&odd, &torchtitan, 8, 8, &mut Vec::new()).unwrap().micro_batch, 1);
        // A Megatron stack takes pipeline micro-batches of one sequence.
        let megatron = crate::presets::stack("megatron-core-0.14-plus").unwrap();
        assert_eq!(batch_shape(&row, &megatron, 8, 8, &mut Vec::new()).unwrap().micro_batch, 1);
    }

    #[test]
    fn an_interleaved_schedule_without_a_size_takes_its_stacks_chunks_per_rank() {
        let torchtitan = crate::presets::stack("torchtitan-2024-12").unwrap();
        let megatron = crate::presets::stack("megatron-core-0.14-plus").unwrap();
        let interleaved = torchtitan_row("local batch size 32; PP schedule Interleaved 1F1B");
        let plain = torchtitan_row("local batch size 32; PP schedule 1F1B");
        let mut assumptions = Vec::new();
        assert_eq!(virtual_pipeline(&interleaved, &torchtitan, 8, &mut assumptions), 2);
        assert_eq!(assumptions.len(), 1);
        assert_eq!(virtual_pipeline(&plain, &torchtitan, 8, &mut Vec::new()), 1);
        assert_eq!(virtual_pipeline(&interleaved, &torchtitan, 1, &mut Vec::new()), 1);
        assert_eq!(virtual_pipeline(&interleaved, &megatron, 8, &mut Vec::new()), 1);
        let not = torchtitan_row("local batch size 32; PP schedule non-interleaved 1F1B");
        assert_eq!(virtual_pipeline(&not, &torchtitan, 8, &mut Vec::new()), 1);
        let stated = CalibrationRow { vp: "4".into(), ..interleaved };
        assert_eq!(virtual_pipeline(&stated, &torchtitan, 8, &mut Vec::new()), 4);
    }
}

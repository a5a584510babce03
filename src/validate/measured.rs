//! The measured throughput of a row, in tokens per second per GPU.
//!
//! Taken, in order, from `tokens_per_sec_per_gpu`, `tokens_per_sec_total / num_gpus`, global batch
//! x sequence / step time / GPUs, or the row's TFLOP/s converted with the FLOP formula its
//! `tflops_definition` names (Megatron-LM's two published formulas; other definitions are not
//! converted, so such rows are skipped rather than guessed).

use super::row::{CalibrationRow, count, positive};

/// A measured throughput and how it was obtained.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Tokens per second per GPU.
    pub tokens_per_sec_per_gpu: f64,
    /// Which column it came from.
    pub how: &'static str,
}

/// Architecture numbers a FLOP formula needs.
pub struct FlopShape {
    /// Layers.
    pub layers: f64,
    /// Hidden width.
    pub hidden: f64,
    /// FFN width.
    pub ffn: f64,
    /// Query heads.
    pub heads: f64,
    /// Key/value heads.
    pub kv_heads: f64,
    /// Vocabulary.
    pub vocab: f64,
    /// Sequence length.
    pub seq: f64,
    /// Whether the MLP is gated.
    pub gated: bool,
}

/// FLOPs per token of Narayanan et al. 2021 Eq. (3): `96 B s l h^2 (1 + s/6h + V/16lh)` per
/// iteration (recomputation forward counted, non-causal attention, logit layer included).
fn narayanan_flops_per_token(shape: &FlopShape) -> f64 {
    let FlopShape { layers, hidden, vocab, seq, .. } = *shape;
    96.0 * layers
        * hidden
        * hidden
        * (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))
}

/// FLOPs per token of Megatron-LM's `num_floating_point_operations` (r0.8): model FLOPs with GQA,
/// gated MLPs, non-causal attention and the logit layer, `12 s l h^2 (...)`.
fn megatron_core_flops_per_token(shape: &FlopShape) -> f64 {
    let FlopShape { layers, hidden, ffn, heads, kv_heads, vocab, seq, gated } = *shape;
    let head_dim = hidden / heads;
    let query_ratio = heads * head_dim / hidden;
    let gated_multiplier = if gated { 1.5 } else { 1.0 };
    12.0 * layers
        * hidden
        * hidden
        * ((1.0 + kv_heads / heads + seq / hidden) * query_ratio
            + ffn / hidden * gated_multiplier
            + vocab / (2.0 * layers * hidden))
}

/// The row's measured throughput, or why there is none.
pub fn measured(row: &CalibrationRow, shape: Option<&FlopShape>) -> Result<Measured, String> {
    if let Some(value) = positive(&row.tokens_per_sec_per_gpu) {
        return Ok(Measured { tokens_per_sec_per_gpu: value, how: "tokens_per_sec_per_gpu" });
    }
    let gpus = count(&row.num_gpus);
    if let (Some(total), Some(gpus)) = (positive(&row.tokens_per_sec_total), gpus) {
        return Ok(Measured {
            tokens_per_sec_per_gpu: total / gpus as f64,
            how: "tokens_per_sec_total / num_gpus",
        });
    }
    if let (Some(step), Some(gbs), Some(seq), Some(gpus)) =
        (positive(&row.step_time_s), count(&row.global_batch_size), count(&row.seq_length), gpus)
    {
        return Ok(Measured {
            tokens_per_sec_per_gpu: gbs as f64 * seq as f64 / step / gpus as f64,
            how: "global batch x sequence / step time / GPUs",
        });
    }
    let Some(tflops) = positive(&row.tflops_per_gpu) else {
        return Err("the source states no throughput (tokens/s, step time or TFLOP/s)".into());
    };
    let Some(shape) = shape else {
        return Err("TFLOP/s cannot be converted without the architecture".into());
    };
    let definition = row.tflops_definition.to_ascii_lowercase();
    let flops_per_token = if definition.contains("eq.(3)") {
        narayanan_flops_per_token(shape)
    } else if definition.contains("model tflop/s per gpu (mfu basis)") {
        megatron_core_flops_per_token(shape)
    } else {
        return Err(format!(
            "TFLOP/s definition `{}` has no published formula to convert",
            row.tflops_definition
        ));
    };
    Ok(Measured {
        tokens_per_sec_per_gpu: tflops * 1e12 / flops_per_token,
        how: "tflops_per_gpu / FLOPs per token of the stated definition",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narayanan_eq3_reproduces_the_papers_aggregate() {
        // GPT-3 175B row of Table 1: 96 layers, h 12288, V 51200, s 2048, batch 1536 on 1024 GPUs
        // at 140 TFLOP/s: Eq. (3) gives the iteration FLOPs.
        let shape = FlopShape {
            layers: 96.0,
            hidden: 12288.0,
            ffn: 49152.0,
            heads: 96.0,
            kv_heads: 96.0,
            vocab: 51200.0,
            seq: 2048.0,
            gated: false,
        };
        let per_token = narayanan_flops_per_token(&shape);
        let per_iteration = per_token * 1536.0 * 2048.0;
        assert!((per_iteration / 4.5e18 - 1.0).abs() < 0.02, "{per_iteration:e}");
    }

    #[test]
    fn megatron_core_formula_is_72_h2_plus_attention_for_gpt() {
        let shape = FlopShape {
            layers: 1.0,
            hidden: 1000.0,
            ffn: 4000.0,
            heads: 10.0,
            kv_heads: 10.0,
            vocab: 0.0,
            seq: 2000.0,
            gated: false,
        };
        // 12 h^2 (2 + s/h + 4) = 72 h^2 + 12 s h per layer and token.
        assert!(
            (megatron_core_flops_per_token(&shape) - (72.0e6 + 12.0 * 2000.0 * 1000.0)).abs()
                < 1e-3
        );
    }

    #[test]
    fn prefers_tokens_then_step_time() {
        let row = CalibrationRow {
            tokens_per_sec_per_gpu: "1000".into(),
            step_time_s: "2".into(),
            ..CalibrationRow::default()
        };
        assert_eq!(measured(&row, None).unwrap().tokens_per_sec_per_gpu, 1000.0);
        let row = CalibrationRow {
            step_time_s: "2".into(),
            global_batch_size: "16".into(),
            seq_length: "1000".into(),
            num_gpus: "8".into(),
            ..CalibrationRow::default()
        };
        assert_eq!(measured(&row, None).unwrap().tokens_per_sec_per_gpu, 1000.0);
        assert!(measured(&CalibrationRow::default(), None).is_err());
    }
}

//! Measured speed of a low-precision attention kernel against BF16 at the same shape, per head
//! dimension and sequence length, as a GPU preset states it (`[[efficiency.mxfp8_attention]]`).

use serde::{Deserialize, Serialize};

use crate::violation::Collector;

/// Head dimensions one table may list.
const MAX_HEAD_DIMS: usize = 16;
/// Sequence lengths one head dimension may list.
const MAX_POINTS: usize = 64;
/// Largest ratio a table may state: FP8 tensor cores are 2x BF16's, so 4 leaves room for a
/// BF16 kernel that was slow at that shape.
const MAX_RATIO: f64 = 4.0;

/// One head dimension's ratios as written: forward and backward speed against BF16 at each
/// measured sequence length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttentionRatioSpec {
    /// Head dimension of the queries and keys the measurement used.
    pub head_dim: i64,
    /// Sequence lengths measured (tokens, increasing).
    pub seq: Vec<i64>,
    /// Forward speed against BF16 at each length.
    pub forward: Vec<f64>,
    /// Backward speed against BF16 at each length.
    pub backward: Vec<f64>,
}

/// One validated head dimension.
#[derive(Debug, Clone, PartialEq)]
struct HeadDimRatios {
    head_dim: u64,
    /// `(log2 of the length, forward, backward)`, increasing in length.
    points: Vec<(f64, f64, f64)>,
}

/// A validated table: per head dimension, ratios between which the speed at a sequence length is
/// interpolated in the logarithm of the length (held at the ends).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AttentionRatios {
    head_dims: Vec<HeadDimRatios>,
}

impl AttentionRatios {
    /// Checks a table written at `field`, naming every problem in `problems`.
    pub fn from_spec(
        field: &str,
        specs: &[AttentionRatioSpec],
        problems: &mut Collector,
    ) -> AttentionRatios {
        if specs.len() > MAX_HEAD_DIMS {
            problems.add(
                field,
                specs.len(),
                format!("lists more than {MAX_HEAD_DIMS} head dimensions"),
                "keep the head dimensions that were measured",
            );
            return AttentionRatios::default();
        }
        let mut head_dims: Vec<HeadDimRatios> = Vec::new();
        for (index, spec) in specs.iter().enumerate() {
            let at = format!("{field}[{index}]");
            if let Some(parsed) = head_dim_ratios(&at, spec, problems) {
                if head_dims.iter().any(|known| known.head_dim == parsed.head_dim) {
                    problems.add(
                        format!("{at}.head_dim"),
                        spec.head_dim,
                        "is listed twice",
                        "give each head dimension one entry",
                    );
                } else {
                    head_dims.push(parsed);
                }
            }
        }
        AttentionRatios { head_dims }
    }

    /// Forward and backward speed against BF16 at `head_dim` and `seq` tokens; `None` where the
    /// head dimension was not measured.
    pub fn speed(&self, head_dim: u64, seq: f64) -> Option<(f64, f64)> {
        let table = self.head_dims.iter().find(|known| known.head_dim == head_dim)?;
        let x = seq.max(1.0).log2();
        let points = &table.points;
        let (first, last) = (points.first()?, points.last()?);
        if x <= first.0 {
            return Some((first.1, first.2));
        }
        if x >= last.0 {
            return Some((last.1, last.2));
        }
        let pair = points.windows(2).find(|pair| x <= pair[1].0)?;
        let (low, high) = (pair[0], pair[1]);
        let t = (x - low.0) / (high.0 - low.0);
        Some((low.1 + t * (high.1 - low.1), low.2 + t * (high.2 - low.2)))
    }
}

fn head_dim_ratios(
    at: &str,
    spec: &AttentionRatioSpec,
    problems: &mut Collector,
) -> Option<HeadDimRatios> {
    let before = problems.len();
    if !(1..=i64::from(u16::MAX)).contains(&spec.head_dim) {
        problems.add(
            format!("{at}.head_dim"),
            spec.head_dim,
            "is not a head dimension",
            "give the head dimension of the measured queries, e.g. 128",
        );
    }
    let points = spec.seq.len();
    if points == 0 || points > MAX_POINTS {
        problems.add(
            format!("{at}.seq"),
            points,
            format!("must list 1 to {MAX_POINTS} sequence lengths"),
            "list the measured lengths, e.g. [2048, 4096, 8192]",
        );
    }
    for (name, values) in [("forward", &spec.forward), ("backward", &spec.backward)] {
        if values.len() != points {
            problems.add(
                format!("{at}.{name}"),
                values.len(),
                format!("must give one ratio per sequence length ({points})"),
                "list a ratio for each entry of seq, in the same order",
            );
            continue;
        }
        // Each value is checked only within the bound on lengths, so a hostile table's problems
        // stay few.
        for (index, &value) in values.iter().enumerate().take(MAX_POINTS) {
            if !(value > 0.0 && value <= MAX_RATIO) {
                problems.add(
                    format!("{at}.{name}[{index}]"),
                    value,
                    format!("must be a speed ratio in (0, {MAX_RATIO}]"),
                    "give the measured speed against BF16, e.g. 1.25",
                );
            }
        }
    }
    // A list past the bound is refused above; its entries are not echoed back.
    let increasing = spec.seq.windows(2).all(|pair| pair[0] < pair[1]);
    let positive = spec.seq.iter().all(|&length| length > 0);
    if points <= MAX_POINTS && !(positive && increasing) {
        problems.add(
            format!("{at}.seq"),
            format!("{:?}", spec.seq),
            "must be positive and increasing",
            "list the measured lengths from shortest to longest",
        );
    }
    if problems.len() > before {
        return None;
    }
    let points = spec
        .seq
        .iter()
        .zip(spec.forward.iter().zip(&spec.backward))
        .map(|(&length, (&forward, &backward))| ((length as f64).log2(), forward, backward))
        .collect();
    Some(HeadDimRatios { head_dim: spec.head_dim as u64, points })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seq: Vec<i64>, forward: Vec<f64>, backward: Vec<f64>) -> AttentionRatioSpec {
        AttentionRatioSpec { head_dim: 128, seq, forward, backward }
    }

    #[test]
    fn speeds_interpolate_in_the_log_of_the_length_and_hold_at_the_ends() {
        let mut problems = Collector::default();
        let table = AttentionRatios::from_spec(
            "t",
            &[spec(vec![2048, 8192], vec![1.2, 1.4], vec![0.8, 1.0])],
            &mut problems,
        );
        assert!(problems.finish().is_ok());
        let (forward, backward) = table.speed(128, 4096.0).unwrap();
        assert!((forward - 1.3).abs() < 1e-12 && (backward - 0.9).abs() < 1e-12);
        assert_eq!(table.speed(128, 512.0), Some((1.2, 0.8)));
        assert_eq!(table.speed(128, 65536.0), Some((1.4, 1.0)));
        assert_eq!(table.speed(64, 4096.0), None);
    }

    #[test]
    fn a_bad_table_names_every_problem() {
        let mut problems = Collector::default();
        let bad = [
            spec(vec![4096, 2048], vec![1.2, 9.0], vec![0.8]),
            AttentionRatioSpec { head_dim: 0, ..spec(vec![1], vec![1.0], vec![1.0]) },
        ];
        AttentionRatios::from_spec("gpu.efficiency.mxfp8_attention", &bad, &mut problems);
        let text = problems.finish().unwrap_err().to_string();
        // A list past the bound is refused once, without its entries.
        let long = spec((1..=65).rev().collect(), vec![1.0; 65], vec![1.0; 65]);
        let mut problems = Collector::default();
        AttentionRatios::from_spec("t", &[long], &mut problems);
        let long_text = problems.finish().unwrap_err().to_string();
        assert!(long_text.contains("must list 1 to 64 sequence lengths"), "{long_text}");
        assert!(!long_text.contains("increasing"), "{long_text}");
        for expected in [
            "mxfp8_attention[0].seq",
            "mxfp8_attention[0].forward[1]",
            "mxfp8_attention[0].backward",
            "mxfp8_attention[1].head_dim",
        ] {
            assert!(text.contains(expected), "{expected} missing from {text}");
        }
    }
}

//! A document length distribution: a histogram of bins (a sample of lengths is a histogram of
//! one-length bins), validated bin by bin, drawn from with a seeded generator.

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use crate::limits;
use crate::violation::{Collector, Violations};

/// One bin of a histogram as written.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LengthBinSpec {
    /// Shortest document length of the bin, in tokens.
    pub min: i64,
    /// Longest document length of the bin, in tokens (inclusive).
    pub max: i64,
    /// Documents in the bin.
    pub count: i64,
}

/// A validated bin.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bin {
    min: u64,
    max: u64,
    count: u64,
}

/// A validated length distribution: non-empty bins with their cumulative document counts.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthDistribution {
    bins: Vec<Bin>,
    /// Documents up to and including each bin.
    cumulative: Vec<u64>,
}

impl LengthDistribution {
    /// A sample of document lengths (`field` names it in errors), as one bin per distinct length.
    pub fn from_lengths(field: &str, lengths: &[i64]) -> Result<LengthDistribution, Violations> {
        let mut problems = Collector::default();
        check_entries(&mut problems, field, lengths.len());
        for (index, &length) in lengths.iter().enumerate() {
            check_length(&mut problems, &format!("{field}[{index}]"), length);
            if problems.len() >= MAX_REPORTED {
                break;
            }
        }
        problems.finish()?;
        let mut sorted: Vec<u64> = lengths.iter().map(|&length| length as u64).collect();
        sorted.sort_unstable();
        let mut bins: Vec<Bin> = Vec::new();
        for length in sorted {
            match bins.last_mut() {
                Some(bin) if bin.min == length => bin.count += 1,
                _ => bins.push(Bin { min: length, max: length, count: 1 }),
            }
        }
        Ok(LengthDistribution::from_bins(bins))
    }

    /// A histogram (`field` names it in errors): every bin's range and count checked.
    pub fn from_histogram(
        field: &str,
        bins: &[LengthBinSpec],
    ) -> Result<LengthDistribution, Violations> {
        let mut problems = Collector::default();
        check_entries(&mut problems, field, bins.len());
        let mut total: u64 = 0;
        for (index, bin) in bins.iter().enumerate() {
            let at = format!("{field}[{index}]");
            let before = problems.len();
            check_length(&mut problems, &format!("{at}.min"), bin.min);
            check_length(&mut problems, &format!("{at}.max"), bin.max);
            if problems.len() == before && bin.max < bin.min {
                problems.add(
                    format!("{at}.max"),
                    bin.max,
                    format!("is below the bin's min ({})", bin.min),
                    "give each bin's shortest length as `min` and its longest as `max`",
                );
            }
            if !(0..=limits::DOCUMENTS as i64).contains(&bin.count) {
                problems.add(
                    format!("{at}.count"),
                    bin.count,
                    "is not a document count",
                    format!("give 0 to {} documents", limits::DOCUMENTS),
                );
            } else {
                total = total.saturating_add(bin.count as u64);
            }
            if problems.len() >= MAX_REPORTED {
                break;
            }
        }
        if problems.is_empty() && total == 0 {
            problems.add(field, "0 documents", "counts no document", "give a bin a positive count");
        }
        if problems.is_empty() && total > limits::DOCUMENTS {
            problems.add(
                field,
                format!("{total} documents"),
                "counts more documents than meshplan draws from",
                format!("scale the counts down to at most {} in all", limits::DOCUMENTS),
            );
        }
        problems.finish()?;
        let bins = bins
            .iter()
            .filter(|bin| bin.count > 0)
            .map(|bin| Bin { min: bin.min as u64, max: bin.max as u64, count: bin.count as u64 })
            .collect();
        Ok(LengthDistribution::from_bins(bins))
    }

    fn from_bins(bins: Vec<Bin>) -> LengthDistribution {
        let cumulative = bins
            .iter()
            .scan(0u64, |sum, bin| {
                *sum += bin.count;
                Some(*sum)
            })
            .collect();
        LengthDistribution { bins, cumulative }
    }

    /// Documents counted in all.
    pub fn documents(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// The longest length the distribution can draw.
    pub fn max_length(&self) -> u64 {
        self.bins.iter().map(|bin| bin.max).max().unwrap_or(0)
    }

    /// The shortest length the distribution can draw.
    pub fn min_length(&self) -> u64 {
        self.bins.iter().map(|bin| bin.min).min().unwrap_or(0)
    }

    /// The documents whose lengths lie in `low..=high`, lengths spread evenly inside each bin
    /// (so a part of a bin counts its share of the bin's documents).
    pub fn documents_between(&self, low: u64, high: u64) -> f64 {
        self.bins.iter().map(|bin| bin_part(bin, low, high)[0]).sum()
    }

    /// The tokens of the documents whose lengths lie in `low..=high`, lengths spread evenly
    /// inside each bin.
    pub fn tokens_between(&self, low: u64, high: u64) -> f64 {
        self.bins.iter().map(|bin| bin_part(bin, low, high)[1]).sum()
    }

    /// The tokens of all the documents counted (their mean length times their count).
    pub fn tokens(&self) -> f64 {
        self.tokens_between(0, u64::MAX)
    }

    /// The mean document length, in tokens (lengths spread evenly inside each bin).
    pub fn mean_length(&self) -> f64 {
        let total = self.documents() as f64;
        self.bins
            .iter()
            .map(|bin| bin.count as f64 * ((bin.min + bin.max) as f64 / 2.0))
            .sum::<f64>()
            / total
    }

    /// The tokens of all the documents counted, each length first cut to `cap` (if any), as
    /// cut and then rounded up to a multiple of `granularity` (lengths spread evenly inside each
    /// bin, as [`Self::tokens_between`] spreads them): `[cut, padded]`. Exact sums, not draws.
    pub fn padded_tokens(&self, granularity: u64, cap: Option<u64>) -> [f64; 2] {
        let granularity = granularity.max(1);
        let cap = cap.unwrap_or(u64::MAX);
        self.bins.iter().fold([0.0; 2], |[cut, padded], bin| {
            let [bin_cut, bin_padded] = padded_bin(bin, granularity, cap);
            [cut + bin_cut, padded + bin_padded]
        })
    }

    /// One document length drawn at random: a bin with probability its share of the documents,
    /// then a length evenly inside it.
    pub fn draw(&self, rng: &mut impl Rng) -> u64 {
        let pick = rng.random_range(0..self.documents());
        let index = self.cumulative.partition_point(|&upto| upto <= pick);
        let bin = self.bins[index.min(self.bins.len() - 1)];
        if bin.min == bin.max { bin.min } else { rng.random_range(bin.min..=bin.max) }
    }

    /// The distribution as histogram bins.
    pub fn to_histogram(&self) -> Vec<LengthBinSpec> {
        self.bins
            .iter()
            .map(|bin| LengthBinSpec {
                min: bin.min as i64,
                max: bin.max as i64,
                count: bin.count as i64,
            })
            .collect()
    }
}

/// The documents and their tokens of the part of `bin` whose lengths lie in `low..=high`: each
/// of its lengths holds an equal share of its documents.
fn bin_part(bin: &Bin, low: u64, high: u64) -> [f64; 2] {
    let (from, to) = (bin.min.max(low), bin.max.min(high));
    if from > to {
        return [0.0; 2];
    }
    let lengths = (to - from + 1) as f64;
    let documents = bin.count as f64 * lengths / (bin.max - bin.min + 1) as f64;
    [documents, documents * (from as f64 + to as f64) / 2.0]
}

/// [`LengthDistribution::padded_tokens`] of one bin: its lengths up to `cap` summed as they are
/// and rounded up to multiples of `granularity`, and those above `cap` counted as `cap` (itself
/// rounded up), each length holding an equal share of the bin's documents.
fn padded_bin(bin: &Bin, granularity: u64, cap: u64) -> [f64; 2] {
    let share = bin.count as f64 / (bin.max - bin.min + 1) as f64;
    let rounded_up = |length: u64| length.div_ceil(granularity) as u128 * granularity as u128;
    let (mut cut, mut padded) = (0u128, 0u128);
    if bin.min <= cap {
        let (low, high) = (bin.min as u128, bin.max.min(cap) as u128);
        cut += (low + high) * (high - low + 1) / 2;
        let granules =
            ceiling_sum(bin.max.min(cap), granularity) - ceiling_sum(bin.min - 1, granularity);
        padded += granules * granularity as u128;
    }
    if bin.max > cap {
        let above = (bin.max - bin.min.max(cap + 1) + 1) as u128;
        cut += above * cap as u128;
        padded += above * rounded_up(cap);
    }
    [cut as f64 * share, padded as f64 * share]
}

/// `ceil(1 / g) + ceil(2 / g) + ... + ceil(n / g)`: `q` whole runs of `g` lengths, the `k`-th
/// of them `k` granules each, and `r` lengths of `q + 1` after them (`n = q g + r`).
fn ceiling_sum(n: u64, g: u64) -> u128 {
    let (q, r, g) = ((n / g) as u128, (n % g) as u128, g as u128);
    g * q * (q + 1) / 2 + r * (q + 1)
}

/// Problems reported for one list before the rest are left unchecked: a file of a million bad
/// lengths is not a million lines of errors.
const MAX_REPORTED: usize = 20;

fn check_entries(problems: &mut Collector, field: &str, entries: usize) {
    if entries == 0 {
        problems.add(field, "[]", "is empty", "give at least one document length");
    } else if entries as u64 > limits::LENGTH_ENTRIES {
        problems.add(
            field,
            format!("{entries} entries"),
            "has more entries than meshplan reads",
            format!(
                "give at most {} entries, or a histogram of the lengths",
                limits::LENGTH_ENTRIES
            ),
        );
    }
}

fn check_length(problems: &mut Collector, field: &str, length: i64) {
    if !(1..=limits::SEQ_LEN as i64).contains(&length) {
        problems.add(
            field,
            length,
            "is not a document length",
            format!("give a length of 1 to {} tokens", limits::SEQ_LEN),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn a_sample_becomes_one_bin_per_distinct_length() {
        let distribution = LengthDistribution::from_lengths("lengths", &[8, 2, 8, 8]).unwrap();
        let bins = distribution.to_histogram();
        assert_eq!(bins.len(), 2);
        assert_eq!((bins[0].min, bins[0].count), (2, 1));
        assert_eq!((bins[1].min, bins[1].max, bins[1].count), (8, 8, 3));
        assert_eq!(distribution.mean_length(), 6.5);
    }

    #[test]
    fn draws_follow_the_bins_shares_and_stay_inside_them() {
        let bins = [
            LengthBinSpec { min: 1, max: 10, count: 3 },
            LengthBinSpec { min: 1000, max: 1000, count: 1 },
        ];
        let distribution = LengthDistribution::from_histogram("h", &bins).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let draws: Vec<u64> = (0..40_000).map(|_| distribution.draw(&mut rng)).collect();
        assert!(draws.iter().all(|&d| (1..=10).contains(&d) || d == 1000));
        let long = draws.iter().filter(|&&d| d == 1000).count() as f64 / draws.len() as f64;
        assert!((long - 0.25).abs() < 0.01, "{long}");
    }

    #[test]
    fn parts_of_bins_count_their_share_of_documents_and_tokens() {
        let bins = [
            LengthBinSpec { min: 1, max: 10, count: 3 },
            LengthBinSpec { min: 1000, max: 1000, count: 1 },
        ];
        let distribution = LengthDistribution::from_histogram("h", &bins).unwrap();
        assert_eq!((distribution.min_length(), distribution.max_length()), (1, 1000));
        // Half of the first bin's lengths: half its documents, of lengths 1 to 5.
        assert_eq!(distribution.documents_between(1, 5), 1.5);
        assert_eq!(distribution.tokens_between(1, 5), 4.5);
        assert_eq!(distribution.documents_between(11, 999), 0.0);
        assert_eq!(distribution.tokens_between(6, 1000), 3.0 * 8.0 / 2.0 + 1000.0);
        // All of them: the mean length times the documents.
        assert_eq!(distribution.documents_between(0, u64::MAX), 4.0);
        assert_eq!(distribution.tokens(), distribution.mean_length() * 4.0);
    }

    #[test]
    fn padded_tokens_are_the_exact_sums_of_every_length_rounded_up() {
        let bins = [
            LengthBinSpec { min: 1, max: 10, count: 20 },
            LengthBinSpec { min: 30, max: 37, count: 8 },
            LengthBinSpec { min: 64, max: 64, count: 3 },
        ];
        let distribution = LengthDistribution::from_histogram("h", &bins).unwrap();
        // Each length by hand: every length of a bin holds an equal share of its documents.
        let by_hand = |granularity: u64, cap: u64| {
            let mut sums = [0.0; 2];
            for bin in &bins {
                let share = bin.count as f64 / (bin.max - bin.min + 1) as f64;
                for length in bin.min as u64..=bin.max as u64 {
                    let cut = length.min(cap);
                    sums[0] += share * cut as f64;
                    sums[1] += share * (cut.div_ceil(granularity) * granularity) as f64;
                }
            }
            sums
        };
        for granularity in [1, 2, 4, 7, 16, 64, 512] {
            for cap in [None, Some(8), Some(32), Some(64)] {
                let exact = distribution.padded_tokens(granularity, cap);
                let expected = by_hand(granularity, cap.unwrap_or(u64::MAX));
                for (a, b) in exact.iter().zip(expected) {
                    assert!((a - b).abs() < 1e-9 * b, "g {granularity} cap {cap:?}: {a} vs {b}");
                }
            }
        }
        // Granularity 1 pads nothing; uncut tokens are all the tokens.
        let [cut, padded] = distribution.padded_tokens(1, None);
        assert_eq!((cut, padded), (distribution.tokens(), distribution.tokens()));
        // 20 documents of 1-10 tokens (mean 5.5) padded to 16 each: 320 tokens for 110.
        let short = LengthDistribution::from_histogram("h", &bins[..1]).unwrap();
        assert_eq!(short.padded_tokens(16, None), [110.0, 320.0]);
    }

    #[test]
    fn every_bad_bin_is_reported_at_once() {
        let bins = [
            LengthBinSpec { min: 0, max: 10, count: 3 },
            LengthBinSpec { min: 20, max: 10, count: 1 },
            LengthBinSpec { min: 1, max: 1, count: -1 },
        ];
        let problems = LengthDistribution::from_histogram("data.histogram", &bins).unwrap_err();
        let fields: Vec<&str> = problems.list().iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            ["data.histogram[0].min", "data.histogram[1].max", "data.histogram[2].count"]
        );
    }

    #[test]
    fn an_empty_or_all_zero_histogram_is_refused() {
        assert!(LengthDistribution::from_histogram("h", &[]).is_err());
        let zero = [LengthBinSpec { min: 5, max: 5, count: 0 }];
        let problems = LengthDistribution::from_histogram("h", &zero).unwrap_err();
        assert!(problems.list()[0].message.contains("no document"));
    }
}

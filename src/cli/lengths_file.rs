//! `--lengths`: a built-in distribution's name, or a file of document lengths read into the
//! `[data]` spec: CSV or Parquet (a `length` column, or `min`, `max` and `count` columns for a
//! histogram), JSON or TOML (the `[data]` keys: `lengths`, or `histogram` with `source`).

use std::path::Path;

use crate::data::{Batching, DataSpec, LengthBinSpec};
use crate::violation::Collector;

use super::lengths_parquet::{self, MAGIC};
use super::read::read_bounded_bytes;

/// The largest lengths file read, in bytes: 64 MiB, a few million lengths as text.
pub const MAX_LENGTHS_FILE_BYTES: u64 = 64 << 20;

const HINT: &str = "give a CSV or Parquet file with a `length` column (one document per row) or \
                    `min`, `max` and `count` columns, or JSON / TOML with `lengths` or `histogram`";

/// The data spec of `--lengths VALUE --batching HOW` (a file when `VALUE` looks like a path).
pub fn data_spec(
    problems: &mut Collector,
    value: Option<&str>,
    batching: Option<Batching>,
    from_plan_file: Option<&DataSpec>,
) -> Option<DataSpec> {
    let base = match value {
        Some(value) if looks_like_file(value) => lengths_file(problems, Path::new(value))?,
        Some(name) => DataSpec { preset: Some(name.to_owned()), ..DataSpec::default() },
        None => match (from_plan_file, batching) {
            (Some(spec), _) => spec.clone(),
            (None, Some(_)) => {
                problems.add(
                    "data.batching",
                    batching.map_or("", Batching::name),
                    "batches documents, but no document lengths were given",
                    "pass --lengths with a distribution or a file of lengths",
                );
                return None;
            }
            (None, None) => return None,
        },
    };
    Some(DataSpec { batching: batching.or(base.batching), ..base })
}

fn looks_like_file(value: &str) -> bool {
    [".csv", ".json", ".toml", ".parquet"].iter().any(|ext| value.ends_with(ext))
        || value.contains('/')
        || value.contains(std::path::MAIN_SEPARATOR)
}

fn lengths_file(problems: &mut Collector, path: &Path) -> Option<DataSpec> {
    let shown = path.display().to_string();
    let bytes = match read_bounded_bytes(path, MAX_LENGTHS_FILE_BYTES) {
        Ok(bytes) => bytes,
        Err(message) => {
            problems.add("data.lengths", &shown, format!("lengths file: {message}"), HINT);
            return None;
        }
    };
    let extension = path.extension().and_then(|ext| ext.to_str()).unwrap_or("");
    match read_spec(bytes, extension) {
        Ok(spec) if spec.preset.is_some() => {
            problems.add(
                "data.preset",
                &shown,
                "a lengths file names a built-in distribution",
                "pass the name itself to --lengths, or give the file its own lengths",
            );
            None
        }
        Ok(spec) => Some(DataSpec { source: spec.source.clone().or(Some(shown)), ..spec }),
        Err(refusal) => {
            let message = format!("lengths file: {}", refusal.message);
            problems.add("data.lengths", &shown, message, refusal.hint);
            None
        }
    }
}

/// A lengths file's bytes as the data spec they write: Parquet by its extension (`parquet`) or
/// its opening bytes (`PAR1`), else text as [`parse`] reads it. What the lengths are is checked
/// by validation, not here.
pub fn parse_bytes(bytes: Vec<u8>, extension: &str) -> Result<DataSpec, String> {
    read_spec(bytes, extension).map_err(|refusal| refusal.message)
}

fn read_spec(bytes: Vec<u8>, extension: &str) -> Result<DataSpec, lengths_parquet::Refusal> {
    if extension == "parquet" || bytes.starts_with(MAGIC) {
        return lengths_parquet::read(bytes);
    }
    let text = String::from_utf8(bytes).map_err(|err| lengths_parquet::Refusal {
        message: format!("is neither Parquet nor UTF-8 text ({err})"),
        hint: HINT.to_owned(),
    })?;
    parse(&text, extension)
        .map_err(|message| lengths_parquet::Refusal { message, hint: HINT.to_owned() })
}

/// A lengths file's text as the data spec it writes: JSON or TOML by its extension (`json`,
/// `toml`), else CSV. What the lengths are is checked by validation, not here.
pub fn parse(text: &str, extension: &str) -> Result<DataSpec, String> {
    match extension {
        "json" => serde_json::from_str::<DataSpec>(text).map_err(|err| err.to_string()),
        "toml" => toml::from_str::<DataSpec>(text).map_err(|err| err.message().to_owned()),
        _ => from_csv(text),
    }
}

/// A CSV of lengths: a `length` column, or a histogram's `min`, `max` and `count` columns.
fn from_csv(text: &str) -> Result<DataSpec, String> {
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|err| err.to_string())?.clone();
    let column = |name: &str| headers.iter().position(|header| header == name);
    let number = |record: &csv::StringRecord, index: usize, row: usize| -> Result<i64, String> {
        let cell = record.get(index).unwrap_or("");
        cell.parse::<i64>()
            .map_err(|_| format!("row {row}: `{cell}` is not a whole number of tokens"))
    };
    let rows = reader.records().enumerate().map(|(index, record)| {
        record.map(|record| (index + 2, record)).map_err(|err| err.to_string())
    });
    match (column("length"), column("min"), column("max"), column("count")) {
        (Some(length), ..) => {
            let lengths = rows
                .map(|row| row.and_then(|(row, record)| number(&record, length, row)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(DataSpec { lengths: Some(lengths), ..DataSpec::default() })
        }
        (None, Some(min), Some(max), Some(count)) => {
            let bins = rows
                .map(|row| {
                    row.and_then(|(row, record)| {
                        Ok(LengthBinSpec {
                            min: number(&record, min, row)?,
                            max: number(&record, max, row)?,
                            count: number(&record, count, row)?,
                        })
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(DataSpec { histogram: Some(bins), ..DataSpec::default() })
        }
        _ => Err(format!(
            "its header `{}` has neither a `length` column nor `min`, `max` and `count`",
            headers.iter().collect::<Vec<_>>().join(",")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csv_of_lengths_and_a_csv_histogram_read_into_the_data_spec() {
        let spec = from_csv("length\n100\n 2048\n").unwrap();
        assert_eq!(spec.lengths, Some(vec![100, 2048]));
        let spec = from_csv("min,max,count\n1,10,5\n11,20,0\n").unwrap();
        let bins = spec.histogram.unwrap();
        assert_eq!(bins[0], LengthBinSpec { min: 1, max: 10, count: 5 });
        assert_eq!(bins.len(), 2);
    }

    #[test]
    fn a_csv_says_which_row_and_cell_it_cannot_read() {
        let err = from_csv("length\n100\nabc\n").unwrap_err();
        assert!(err.contains("row 3") && err.contains("abc"), "{err}");
        let err = from_csv("tokens\n5\n").unwrap_err();
        assert!(err.contains("`tokens`"), "{err}");
    }
}

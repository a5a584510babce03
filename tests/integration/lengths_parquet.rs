//! `--lengths FILE.parquet` end to end: a Parquet file of lengths or of a histogram prices
//! exactly as the same rows in CSV, and a bad one (negative lengths, nulls, other columns,
//! corrupt bytes) is refused naming the field, with exit code 2 and no panic.

use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, Encoding};
use parquet::data_type::{DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

use crate::support::{json, run};

/// Writes a Parquet file of `schema` whose INT64 columns are `columns` (values, and definition
/// levels for an optional column), `groups` times over as row groups, compressed with snappy.
fn write_parquet(path: &Path, schema: &str, columns: &[(&[i64], Option<&[i16]>)], groups: usize) {
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let properties =
        Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, properties).unwrap();
    for _ in 0..groups {
        let mut group = writer.next_row_group().unwrap();
        for (values, levels) in columns {
            let mut column = group.next_column().unwrap().unwrap();
            column.typed::<Int64Type>().write_batch(values, *levels, None).unwrap();
            column.close().unwrap();
        }
        group.close().unwrap();
    }
    writer.close().unwrap();
}

/// `meshplan estimate --format json` of Llama 3.1 8B on 8 GPUs with `--lengths file`, with the
/// file's name (the data's source) taken out.
fn estimate(file: &Path) -> Value {
    let mut value = json(&[
        "estimate",
        "--model",
        "llama3.1-8b",
        "--gpus",
        "16",
        "--tp",
        "8",
        "--seq-len",
        "8192",
        "--global-batch",
        "16",
        "--lengths",
        file.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let source = value["data"]["lengths"].take();
    assert!(source.as_str().unwrap().ends_with(file.file_name().unwrap().to_str().unwrap()));
    value
}

/// The refusal `meshplan estimate --lengths file` prints (exit code 2).
fn refusal(file: &Path) -> String {
    let output = run(&["estimate", "--model", "llama3.1-8b", "--lengths", file.to_str().unwrap()]);
    assert_eq!(output.code, 2, "{}", output.stderr);
    output.stderr
}

#[test]
fn a_parquet_file_of_lengths_prices_exactly_as_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let lengths: Vec<i64> = (0..300).map(|i| 64 + i * 977 % 20_000).collect();
    let csv = dir.path().join("lengths.csv");
    let rows: Vec<String> = lengths.iter().chain(&lengths).map(i64::to_string).collect();
    std::fs::write(&csv, format!("length\n{}\n", rows.join("\n"))).unwrap();
    let parquet = dir.path().join("lengths.parquet");
    // Optional (as pandas writes it), in two row groups: the CSV holds the lengths twice.
    let all = vec![1; lengths.len()];
    write_parquet(&parquet, "message m { optional int64 length; }", &[(&lengths, Some(&all))], 2);
    let expected = estimate(&csv);
    assert_eq!(estimate(&parquet), expected);
    assert!(expected["data"]["imbalance_s"].as_f64().unwrap() > 0.0, "{expected}");
    // A Parquet file is known by its bytes too, whatever its name.
    let unnamed = dir.path().join("lengths.bin");
    std::fs::copy(&parquet, &unnamed).unwrap();
    assert_eq!(estimate(&unnamed), expected);
}

#[test]
fn a_parquet_histogram_prices_exactly_as_the_same_csv() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("histogram.csv");
    std::fs::write(&csv, "min,max,count\n1,1000,500\n1001,8192,120\n8193,40000,9\n").unwrap();
    let parquet = dir.path().join("histogram.parquet");
    let schema = "message m { required int64 min; required int64 max; required int64 count; }";
    let columns: [(&[i64], Option<&[i16]>); 3] =
        [(&[1, 1001, 8193], None), (&[1000, 8192, 40_000], None), (&[500, 120, 9], None)];
    write_parquet(&parquet, schema, &columns, 1);
    assert_eq!(estimate(&parquet), estimate(&csv));
}

#[test]
fn a_bad_parquet_file_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let bad = path("bad.parquet");
    write_parquet(&bad, "message m { required int64 length; }", &[(&[1000, 0, -3], None)], 1);
    let stderr = refusal(&bad);
    assert!(stderr.contains("data.lengths[1] = 0"), "{stderr}");
    assert!(stderr.contains("data.lengths[2] = -3"), "{stderr}");

    let nulls = path("nulls.parquet");
    let schema = "message m { optional int64 length; }";
    write_parquet(&nulls, schema, &[(&[1000, 2000], Some(&[1, 0, 1]))], 1);
    let stderr = refusal(&nulls);
    assert!(stderr.contains("the first row 1 (data.lengths[1])"), "{stderr}");
    assert!(stderr.contains("drop the rows without a `length`"), "{stderr}");

    let other = path("other.parquet");
    write_parquet(&other, "message m { required int64 tokens; }", &[(&[1000], None)], 1);
    let stderr = refusal(&other);
    assert!(stderr.contains("data.lengths = "), "{stderr}");
    assert!(stderr.contains("its columns `tokens` have neither a `length` column"), "{stderr}");

    let doubles = path("doubles.parquet");
    let schema = Arc::new(parse_message_type("message m { required double length; }").unwrap());
    let file = std::fs::File::create(&doubles).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, Default::default()).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut column = group.next_column().unwrap().unwrap();
    column.typed::<DoubleType>().write_batch(&[1000.0], None, None).unwrap();
    column.close().unwrap();
    group.close().unwrap();
    writer.close().unwrap();
    let stderr = refusal(&doubles);
    assert!(stderr.contains("holds DOUBLE values, not integers"), "{stderr}");
    assert!(stderr.contains("INT32 or INT64"), "{stderr}");

    // Corrupt files: cut short, bytes changed, text named .parquet.
    let good = std::fs::read(&bad).unwrap();
    let cut = path("cut.parquet");
    std::fs::write(&cut, &good[..good.len() / 2]).unwrap();
    let mut changed = good.clone();
    for byte in &mut changed[4..good.len() - 8] {
        *byte ^= 0x5a;
    }
    let garbled = path("garbled.parquet");
    std::fs::write(&garbled, changed).unwrap();
    let text = path("text.parquet");
    std::fs::write(&text, "length\n100\n").unwrap();
    for file in [cut, garbled, text] {
        let stderr = refusal(&file);
        assert!(stderr.contains("is not a readable Parquet file"), "{stderr}");
        assert!(stderr.contains("write the file again"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A column encoded BYTE_STREAM_SPLIT is refused before the parquet crate decodes it: its decoder
/// panics on a page whose bytes do not fill its values (the reproducer under
/// `fuzz/regressions/lengths_file`), so no such page is read, valid or not.
#[test]
fn a_byte_stream_split_column_is_refused_before_it_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let split = dir.path().join("split.parquet");
    let schema = Arc::new(parse_message_type("message m { required int64 length; }").unwrap());
    let properties = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::BYTE_STREAM_SPLIT)
        .build();
    let file = std::fs::File::create(&split).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(properties)).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut column = group.next_column().unwrap().unwrap();
    column.typed::<Int64Type>().write_batch(&[1000, 2000], None, None).unwrap();
    column.close().unwrap();
    group.close().unwrap();
    writer.close().unwrap();
    let stderr = refusal(&split);
    assert!(
        stderr.contains("is encoded BYTE_STREAM_SPLIT, which meshplan does not read"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The fuzzer's file: one selector byte, then the Parquet bytes.
    let reproducer = "fuzz/regressions/lengths_file/byte-stream-split-short-page";
    let found = std::fs::read(crate::support::repo_path(reproducer)).unwrap();
    let short = dir.path().join("short.parquet");
    std::fs::write(&short, &found[1..]).unwrap();
    let stderr = refusal(&short);
    assert!(stderr.contains("BYTE_STREAM_SPLIT"), "{stderr}");
}

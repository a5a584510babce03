//! A Parquet lengths file (`--lengths FILE.parquet`): a `length` column (one document per row),
//! or `min`, `max` and `count` columns (a histogram), of integers, read with the parquet crate's
//! column readers into the `[data]` spec, after `parquet_pages` has checked each column chunk's
//! pages. Which lengths are valid is checked by validation, as for CSV.

use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;
use parquet::basic::{Compression, ConvertedType, LogicalType, Type as PhysicalType};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::DataType;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::schema::types::ColumnDescriptor;

use crate::data::{DataSpec, LengthBinSpec};
use crate::limits;

use super::parquet_pages::{self, MAX_DECODED_BYTES};

/// The bytes a Parquet file opens (and ends) with.
pub const MAGIC: &[u8] = b"PAR1";

/// Why a Parquet file is refused, and how to write it instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub message: String,
    pub hint: String,
}

const CORRUPT: &str = "write the file again (pandas `to_parquet`, pyarrow, polars, DuckDB), or \
                       give the lengths as CSV";
const LAYOUT: &str = "give a `length` column (one document per row), or `min`, `max` and `count` \
                      columns (a histogram)";
const INTEGERS: &str = "write the column as integers (INT32 or INT64), e.g. \
                        `df[\"length\"].astype(\"int64\")` in pandas";

fn refuse(message: impl Into<String>, hint: impl Into<String>) -> Refusal {
    Refusal { message: message.into(), hint: hint.into() }
}

fn corrupt(err: impl std::fmt::Display) -> Refusal {
    refuse(format!("is not a readable Parquet file: {err}"), CORRUPT)
}

/// A Parquet file's bytes as the data spec its columns write. The parquet crate's own checks and
/// `parquet_pages` leave no panic known; one that is left is refused as a corrupt file.
pub fn read(bytes: Vec<u8>) -> Result<DataSpec, Refusal> {
    catch_unwind(AssertUnwindSafe(|| read_columns(bytes)))
        .unwrap_or_else(|_| Err(corrupt("the Parquet reader failed on it")))
}

fn read_columns(bytes: Vec<u8>) -> Result<DataSpec, Refusal> {
    let bytes = Bytes::from(bytes);
    let reader = SerializedFileReader::new(bytes.clone()).map_err(corrupt)?;
    let rows = reader.metadata().file_metadata().num_rows();
    let rows = u64::try_from(rows).map_err(|_| corrupt(format!("it states {rows} rows")))?;
    if rows > limits::LENGTH_ENTRIES {
        return Err(refuse(
            format!("has {rows} rows, more than meshplan reads"),
            format!("give at most {} rows, or a histogram of the lengths", limits::LENGTH_ENTRIES),
        ));
    }
    let schema = reader.metadata().file_metadata().schema_descr();
    let column = |name: &str| schema.columns().iter().position(|c| c.path().parts() == [name]);
    let mut file = Columns { reader: &reader, bytes: &bytes, budget: MAX_DECODED_BYTES };
    match (column("length"), column("min"), column("max"), column("count")) {
        (Some(length), ..) => {
            let lengths = file.read(length, &|row| format!("data.lengths[{row}]"))?;
            Ok(DataSpec { lengths: Some(lengths), ..DataSpec::default() })
        }
        (None, Some(min), Some(max), Some(count)) => {
            let field = |name: &'static str| move |row| format!("data.histogram[{row}].{name}");
            let mins = file.read(min, &field("min"))?;
            let maxes = file.read(max, &field("max"))?;
            let counts = file.read(count, &field("count"))?;
            if mins.len() != maxes.len() || mins.len() != counts.len() {
                return Err(corrupt(format!(
                    "its columns `min`, `max` and `count` have {}, {} and {} rows",
                    mins.len(),
                    maxes.len(),
                    counts.len()
                )));
            }
            let bins = (mins.into_iter().zip(maxes).zip(counts))
                .map(|((min, max), count)| LengthBinSpec { min, max, count })
                .collect();
            Ok(DataSpec { histogram: Some(bins), ..DataSpec::default() })
        }
        _ => {
            let names: Vec<String> = schema.columns().iter().map(|c| c.path().string()).collect();
            Err(refuse(
                format!(
                    "its columns `{}` have neither a `length` column nor `min`, `max` and `count`",
                    names.join(", ")
                ),
                LAYOUT,
            ))
        }
    }
}

/// The file's columns as they are read, and what their pages may still decompress to.
struct Columns<'a> {
    reader: &'a SerializedFileReader<Bytes>,
    bytes: &'a [u8],
    budget: u64,
}

/// Rows without a value: how many, and the first.
#[derive(Default)]
struct Nulls {
    count: usize,
    first: Option<usize>,
}

/// Values read per call to the column reader.
const BATCH: usize = 1 << 16;

impl Columns<'_> {
    /// One integer column's values, row groups in order (`field` names a row's entry in the data
    /// spec, for a null).
    fn read(&mut self, index: usize, field: &dyn Fn(usize) -> String) -> Result<Vec<i64>, Refusal> {
        let metadata = self.reader.metadata();
        let descr = metadata.file_metadata().schema_descr().column(index);
        let name = descr.path().string();
        let unsigned = integer_column(&descr, &name)?;
        let width = if descr.physical_type() == PhysicalType::INT32 { 4 } else { 8 };
        let mut values = Vec::new();
        let mut nulls = Nulls::default();
        for group in 0..metadata.num_row_groups() {
            let chunk = metadata.row_group(group).column(index);
            supported_codec(chunk.compression(), &name)?;
            parquet_pages::check_chunk(self.bytes, chunk, width, &mut self.budget)
                .map_err(|err| corrupt(format!("column `{name}`: {err}")))?;
            let row_group = self.reader.get_row_group(group).map_err(corrupt)?;
            let max_def = descr.max_def_level();
            match row_group.get_column_reader(index).map_err(corrupt)? {
                ColumnReader::Int32ColumnReader(column) => {
                    let convert =
                        |v: i32| if unsigned { i64::from(v as u32) } else { i64::from(v) };
                    drain(column, max_def, &mut values, &mut nulls, convert)?;
                }
                ColumnReader::Int64ColumnReader(column) => {
                    // An unsigned value past i64::MAX is no document length either.
                    let convert = |v: i64| if unsigned && v < 0 { i64::MAX } else { v };
                    drain(column, max_def, &mut values, &mut nulls, convert)?;
                }
                _ => return Err(corrupt(format!("column `{name}` changed type"))),
            }
        }
        match nulls.first {
            None => Ok(values),
            Some(first) => Err(refuse(
                format!(
                    "column `{name}` is null in {} row(s), the first row {first} ({})",
                    nulls.count,
                    field(first)
                ),
                format!("drop the rows without a `{name}`, or fill them in"),
            )),
        }
    }
}

/// Whether an integer column is unsigned; a column of anything but integers is refused.
fn integer_column(descr: &ColumnDescriptor, name: &str) -> Result<bool, Refusal> {
    if descr.max_rep_level() > 0 {
        return Err(refuse(
            format!("column `{name}` is a list, not one value per row"),
            "give one value per row",
        ));
    }
    let physical = descr.physical_type();
    if !matches!(physical, PhysicalType::INT32 | PhysicalType::INT64) {
        return Err(refuse(
            format!("column `{name}` holds {physical} values, not integers"),
            INTEGERS,
        ));
    }
    let unsigned_converted = matches!(
        descr.converted_type(),
        ConvertedType::UINT_8
            | ConvertedType::UINT_16
            | ConvertedType::UINT_32
            | ConvertedType::UINT_64
    );
    match descr.logical_type_ref() {
        Some(LogicalType::Integer(int)) => Ok(!int.is_signed),
        None if matches!(
            descr.converted_type(),
            ConvertedType::NONE
                | ConvertedType::INT_8
                | ConvertedType::INT_16
                | ConvertedType::INT_32
                | ConvertedType::INT_64
        ) || unsigned_converted =>
        {
            Ok(unsigned_converted)
        }
        Some(logical) => {
            Err(refuse(format!("column `{name}` holds {logical:?} values, not integers"), INTEGERS))
        }
        None => Err(refuse(
            format!("column `{name}` holds {} values, not integers", descr.converted_type()),
            INTEGERS,
        )),
    }
}

fn supported_codec(codec: Compression, name: &str) -> Result<(), Refusal> {
    match codec {
        Compression::UNCOMPRESSED
        | Compression::SNAPPY
        | Compression::GZIP(_)
        | Compression::LZ4
        | Compression::LZ4_RAW
        | Compression::ZSTD(_) => Ok(()),
        other => Err(refuse(
            format!("column `{name}` is compressed with {other}, which meshplan does not read"),
            "write the file with snappy, zstd, gzip or lz4 compression, or none",
        )),
    }
}

/// Every value of one row group's column into `values` (nulls counted in `nulls`), refusing
/// more rows in all than a lengths file may have.
fn drain<T: DataType>(
    mut column: ColumnReaderImpl<T>,
    max_def: i16,
    values: &mut Vec<i64>,
    nulls: &mut Nulls,
    convert: impl Fn(T::T) -> i64,
) -> Result<(), Refusal>
where
    T::T: Copy,
{
    let (mut levels, mut batch) = (Vec::new(), Vec::new());
    loop {
        levels.clear();
        batch.clear();
        let (records, _, read) =
            column.read_records(BATCH, Some(&mut levels), None, &mut batch).map_err(corrupt)?;
        if records == 0 {
            return Ok(());
        }
        if max_def == 0 {
            values.extend(batch.iter().map(|&value| convert(value)));
        } else {
            let levels = levels.get(..read).ok_or_else(|| corrupt("its levels are cut short"))?;
            let mut batch = batch.iter();
            for &level in levels {
                if level == max_def {
                    let value = batch.next().ok_or_else(|| corrupt("its values are cut short"))?;
                    values.push(convert(*value));
                } else {
                    nulls.first.get_or_insert(values.len() + nulls.count);
                    nulls.count += 1;
                }
            }
        }
        if (values.len() + nulls.count) as u64 > limits::LENGTH_ENTRIES {
            return Err(refuse(
                "has more rows than meshplan reads",
                format!(
                    "give at most {} rows, or a histogram of the lengths",
                    limits::LENGTH_ENTRIES
                ),
            ));
        }
    }
}

/// Parquet files written with the parquet crate's own writer, for tests.
#[cfg(test)]
pub(crate) mod write {
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    /// One column's values (the non-null ones) and, for an optional column, its definition
    /// levels (1: a value, 0: null).
    pub enum Column {
        Int32(Vec<i32>, Option<Vec<i16>>),
        Int64(Vec<i64>, Option<Vec<i16>>),
        Double(Vec<f64>),
        Text(Vec<&'static str>, Option<Vec<i16>>),
    }

    /// A file of `schema` (a Parquet message type) with `columns` in order, written as `groups`
    /// row groups of the same columns, compressed with `codec`.
    pub fn file(schema: &str, columns: &[Column], codec: Compression, groups: usize) -> Vec<u8> {
        let schema = Arc::new(parse_message_type(schema).unwrap());
        let properties = Arc::new(WriterProperties::builder().set_compression(codec).build());
        let mut bytes = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut bytes, schema, properties).unwrap();
        for _ in 0..groups {
            let mut group = writer.next_row_group().unwrap();
            for column in columns {
                let mut writer = group.next_column().unwrap().unwrap();
                match column {
                    Column::Int32(values, levels) => {
                        let levels = levels.as_deref();
                        writer.typed::<Int32Type>().write_batch(values, levels, None).unwrap();
                    }
                    Column::Int64(values, levels) => {
                        let levels = levels.as_deref();
                        writer.typed::<Int64Type>().write_batch(values, levels, None).unwrap();
                    }
                    Column::Double(values) => {
                        writer.typed::<DoubleType>().write_batch(values, None, None).unwrap();
                    }
                    Column::Text(values, levels) => {
                        let values: Vec<ByteArray> =
                            values.iter().map(|&text| text.into()).collect();
                        let levels = levels.as_deref();
                        writer.typed::<ByteArrayType>().write_batch(&values, levels, None).unwrap();
                    }
                }
                writer.close().unwrap();
            }
            group.close().unwrap();
        }
        writer.close().unwrap();
        bytes
    }
}

#[cfg(test)]
mod tests {
    use parquet::basic::{GzipLevel, ZstdLevel};

    use super::write::{Column, file};
    use super::*;

    const LENGTHS: &str = "message m { required int64 length; }";
    const SNAPPY: Compression = Compression::SNAPPY;

    fn lengths(spec: DataSpec) -> Vec<i64> {
        spec.lengths.unwrap()
    }

    #[test]
    fn lengths_are_read_with_every_codec_from_every_row_group() {
        let codecs = [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::GZIP(GzipLevel::default()),
            Compression::LZ4,
            Compression::LZ4_RAW,
            Compression::ZSTD(ZstdLevel::default()),
        ];
        let values: Vec<i64> = (1..=5000).map(|i| i * 7 % 4096 + 1).collect();
        for codec in codecs {
            let bytes = file(LENGTHS, &[Column::Int64(values.clone(), None)], codec, 2);
            let read = lengths(read(bytes).unwrap());
            assert_eq!(read, [values.clone(), values.clone()].concat(), "{codec}");
        }
        // An optional INT32 column (what pandas writes for an int32 Series).
        let schema = "message m { optional int32 length; }";
        let bytes = file(schema, &[Column::Int32(vec![100, 2048], Some(vec![1, 1]))], SNAPPY, 1);
        assert_eq!(lengths(read(bytes).unwrap()), [100, 2048]);
    }

    #[test]
    fn a_histogram_is_read_and_unsigned_values_keep_their_size() {
        let schema = "message m { required int32 min (INTEGER(32, false)); required int64 max; \
                      required int64 count (INTEGER(64, false)); optional binary note (UTF8); }";
        let columns = [
            Column::Int32(vec![1, 11, -1], None),
            Column::Int64(vec![10, 20, 30], None),
            Column::Int64(vec![5, 0, -1], None),
            Column::Text(vec!["web"], Some(vec![1, 0, 0])),
        ];
        let bytes = file(schema, &columns, SNAPPY, 1);
        let bins = read(bytes).unwrap().histogram.unwrap();
        assert_eq!(bins[0], LengthBinSpec { min: 1, max: 10, count: 5 });
        assert_eq!(bins[1], LengthBinSpec { min: 11, max: 20, count: 0 });
        // u32::MAX, and a u64 past i64::MAX: both refused later as no length or count.
        assert_eq!(bins[2], LengthBinSpec { min: u32::MAX.into(), max: 30, count: i64::MAX });
    }

    #[test]
    fn nulls_name_their_row_and_entry() {
        let schema = "message m { optional int64 length; }";
        let column = Column::Int64(vec![100, 200], Some(vec![1, 0, 1, 0]));
        let err = read(file(schema, &[column], SNAPPY, 1)).unwrap_err();
        assert!(
            err.message.contains("null in 2 row(s), the first row 1 (data.lengths[1])"),
            "{err:?}"
        );
        let schema = "message m { required int64 min; required int64 max; optional int64 count; }";
        let columns = [
            Column::Int64(vec![1, 2], None),
            Column::Int64(vec![1, 2], None),
            Column::Int64(vec![3], Some(vec![0, 1])),
        ];
        let err = read(file(schema, &columns, SNAPPY, 1)).unwrap_err();
        assert!(err.message.contains("(data.histogram[0].count)"), "{err:?}");
    }

    #[test]
    fn columns_of_other_names_or_types_are_refused_with_a_fix() {
        let schema = "message m { required int64 tokens; required int64 other; }";
        let columns = [Column::Int64(vec![5], None), Column::Int64(vec![5], None)];
        let err = read(file(schema, &columns, SNAPPY, 1)).unwrap_err();
        assert!(err.message.contains("`tokens, other`"), "{err:?}");
        assert!(err.hint.contains("`length` column"), "{err:?}");
        let schema = "message m { required double length; }";
        let err = read(file(schema, &[Column::Double(vec![1.0])], SNAPPY, 1)).unwrap_err();
        assert!(err.message.contains("`length` holds DOUBLE values, not integers"), "{err:?}");
        assert!(err.hint.contains("astype(\"int64\")"), "{err:?}");
        let schema = "message m { required int32 length (DATE); }";
        let err = read(file(schema, &[Column::Int32(vec![1], None)], SNAPPY, 1)).unwrap_err();
        assert!(err.message.contains("not integers"), "{err:?}");
    }

    #[test]
    fn corrupt_and_cut_files_are_refused() {
        let bytes = file(LENGTHS, &[Column::Int64(vec![100, 200], None)], SNAPPY, 1);
        for cut in [0, 4, 8, bytes.len() / 2, bytes.len() - 1] {
            let err = read(bytes[..cut].to_vec()).unwrap_err();
            assert!(err.message.contains("is not a readable Parquet file"), "{cut}: {err:?}");
        }
        let err = read(b"PAR1 not really".to_vec()).unwrap_err();
        assert!(err.hint.contains("write the file again"), "{err:?}");
    }

    /// Every byte of a small file (dictionary pages, snappy; nulls; a histogram) set in turn to
    /// a few values: the reader returns, without a panic (not caught here) or a huge allocation.
    #[test]
    fn no_byte_of_a_file_changed_makes_the_reader_panic() {
        let optional = "message m { optional int64 length; }";
        let histogram =
            "message m { required int32 min; required int32 max; required int64 count; }";
        let files = [
            file(
                optional,
                &[Column::Int64(vec![100, 200, 100], Some(vec![1, 1, 0, 1]))],
                SNAPPY,
                1,
            ),
            file(
                histogram,
                &[
                    Column::Int32(vec![1, 5], None),
                    Column::Int32(vec![4, 9], None),
                    Column::Int64(vec![3, 3], None),
                ],
                Compression::UNCOMPRESSED,
                2,
            ),
        ];
        for bytes in files {
            for at in 0..bytes.len() {
                for value in [0x00, 0x01, 0x15, 0x7f, 0x80, 0xff] {
                    let mut changed = bytes.clone();
                    changed[at] ^= value;
                    let _ = read_columns(changed);
                }
            }
        }
    }
}

/// The fuzz target's Parquet seeds, `fuzz/corpus/lengths_file/*.parquet` (a byte that picks
/// the text format, unused for Parquet, then the file).
#[cfg(test)]
mod fuzz_seeds {
    use std::path::PathBuf;

    use super::write::{Column, file};
    use super::*;

    fn seeds() -> [(&'static str, Vec<u8>); 2] {
        let lengths = file(
            "message m { optional int64 length; }",
            &[Column::Int64(vec![100, 2048, 100, 70_000], Some(vec![1, 1, 1, 1]))],
            Compression::SNAPPY,
            1,
        );
        let histogram = file(
            "message m { required int32 min; required int32 max; required int64 count; }",
            &[
                Column::Int32(vec![1, 11], None),
                Column::Int32(vec![10, 4096], None),
                Column::Int64(vec![5, 2], None),
            ],
            Compression::UNCOMPRESSED,
            1,
        );
        [("lengths.parquet", lengths), ("histogram.parquet", histogram)]
    }

    fn path(name: &str) -> PathBuf {
        [env!("CARGO_MANIFEST_DIR"), "fuzz", "corpus", "lengths_file", name].iter().collect()
    }

    /// `cargo test --lib write_fuzz_seeds -- --ignored` writes them again.
    #[test]
    #[ignore = "writes the fuzz target's Parquet seeds"]
    fn write_fuzz_seeds() {
        for (name, bytes) in seeds() {
            std::fs::write(path(name), [b"x".as_slice(), &bytes].concat()).unwrap();
        }
    }

    #[test]
    fn the_fuzz_seeds_read_as_their_lengths_and_histogram() {
        for (name, _) in seeds() {
            let bytes = std::fs::read(path(name)).unwrap();
            let spec = read(bytes[1..].to_vec()).unwrap();
            match name {
                "lengths.parquet" => assert_eq!(spec.lengths, Some(vec![100, 2048, 100, 70_000])),
                _ => assert_eq!(spec.histogram.map(|bins| bins.len()), Some(2)),
            }
        }
    }
}

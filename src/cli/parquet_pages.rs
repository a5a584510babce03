//! A Parquet column chunk's page headers checked before the parquet crate reads it: the chunk
//! inside the file, every page header readable (Thrift's compact protocol), the bytes the pages
//! decompress to within a budget, a dictionary's values within its page, and no page encoded
//! BYTE_STREAM_SPLIT, because the crate trusts all of these. It panics on a negative chunk
//! offset, on a dictionary-encoded page without a dictionary and on a BYTE_STREAM_SPLIT page whose
//! bytes do not fill its values (`byte_stream_split_decoder.rs` in parquet 60.1.0, found by the
//! `lengths_file` fuzz target), allocates a page's stated size (up to 2 GiB) before decompressing
//! it, and a dictionary's stated count of values (up to 2^31) before decoding them, so that a
//! corrupt file of a few bytes would abort meshplan or hold gigabytes.

use parquet::file::metadata::ColumnChunkMetaData;

/// The most bytes that the pages of the columns read from one file may decompress to: 512 MiB,
/// more than a file within the limits needs (2^24 rows of three 8-byte columns, written plain).
pub const MAX_DECODED_BYTES: u64 = 512 << 20;

/// Thrift structs nested deeper than this are refused (a page header nests three deep).
const MAX_DEPTH: u32 = 16;

/// Page types and the dictionary encodings, as the Parquet format numbers them.
const DATA_PAGE: i64 = 0;
const DICTIONARY_PAGE: i64 = 2;
const DATA_PAGE_V2: i64 = 3;
const PLAIN_DICTIONARY: i64 = 2;
const RLE_DICTIONARY: i64 = 8;
/// The encoding that splits each value's bytes into streams (Parquet format 2.8 for floats, 2.11
/// for integers); pandas, pyarrow, polars and DuckDB write integers without it by default.
const BYTE_STREAM_SPLIT: i64 = 9;

/// Checks the pages of one column chunk of `file` whose values are `width` bytes each, taking
/// what they decompress to from `budget`.
pub fn check_chunk(
    file: &[u8],
    chunk: &ColumnChunkMetaData,
    width: u64,
    budget: &mut u64,
) -> Result<(), String> {
    let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
    let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(chunk.compressed_size()))
    else {
        return Err("a column chunk has a negative offset or size".to_owned());
    };
    let end = start.checked_add(len).filter(|&end| end <= file.len() as u64).ok_or_else(|| {
        format!("a column chunk ({len} bytes at {start}) ends past the file's {} bytes", file.len())
    })?;
    let (mut at, end) = (start as usize, end as usize);
    let mut dictionary = false;
    while at < end {
        let mut reader = Compact { bytes: &file[at..end], at: 0 };
        let header = PageHeader::read(&mut reader)?;
        let (Some(compressed), Some(decompressed)) = (header.compressed, header.decompressed)
        else {
            return Err(format!("the page header at byte {at} gives no page sizes"));
        };
        at += reader.at;
        if compressed > (end - at) as u64 {
            return Err(format!("the page at byte {at} runs past its column chunk"));
        }
        at += compressed as usize;
        *budget = budget.checked_sub(decompressed).ok_or_else(|| {
            format!("its pages decompress to more than the {MAX_DECODED_BYTES} bytes read at most")
        })?;
        match header.kind {
            DICTIONARY_PAGE if dictionary => {
                return Err("a column chunk has two dictionary pages".to_owned());
            }
            DICTIONARY_PAGE => {
                dictionary = true;
                if header.values.is_some_and(|values| values.saturating_mul(width) > decompressed) {
                    return Err(format!(
                        "a dictionary page states more values than its bytes hold (before byte {at})"
                    ));
                }
            }
            DATA_PAGE | DATA_PAGE_V2
                if !dictionary
                    && matches!(header.encoding, Some(PLAIN_DICTIONARY | RLE_DICTIONARY)) =>
            {
                return Err(format!(
                    "a dictionary-encoded page has no dictionary page before it (before byte {at})"
                ));
            }
            DATA_PAGE | DATA_PAGE_V2 if header.encoding == Some(BYTE_STREAM_SPLIT) => {
                return Err(format!(
                    "a page is encoded BYTE_STREAM_SPLIT, which meshplan does not read (before \
                     byte {at}); write the column with the default encoding"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the check needs of a page header.
#[derive(Debug, Default)]
struct PageHeader {
    kind: i64,
    decompressed: Option<u64>,
    compressed: Option<u64>,
    /// A dictionary page's count of values.
    values: Option<u64>,
    /// A data page's encoding of its values.
    encoding: Option<i64>,
}

impl PageHeader {
    /// The header at the reader's position (fields 1-3: type, uncompressed and compressed size;
    /// 5 and 8: the data page headers, whose encoding is their field 2 and 4; 7: the dictionary
    /// page header, whose count of values is its field 1).
    fn read(reader: &mut Compact) -> Result<PageHeader, String> {
        let mut header = PageHeader::default();
        reader.read_struct(0, &mut |reader, id, kind| {
            match (id, kind) {
                (1, I32) => header.kind = reader.i32()?,
                (2, I32) => header.decompressed = Some(reader.size()?),
                (3, I32) => header.compressed = Some(reader.size()?),
                (5 | 8, STRUCT) => {
                    let encoding_field = if id == 5 { 2 } else { 4 };
                    reader.read_struct(1, &mut |reader, id, kind| {
                        Ok(if (id, kind) == (encoding_field, I32) {
                            header.encoding = Some(reader.i32()?);
                            true
                        } else {
                            false
                        })
                    })?;
                }
                (7, STRUCT) => reader.read_struct(1, &mut |reader, id, kind| {
                    Ok(if (id, kind) == (1, I32) {
                        header.values = Some(reader.size()?);
                        true
                    } else {
                        false
                    })
                })?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(header)
    }
}

/// Thrift compact protocol types.
const I32: u8 = 5;
const STRUCT: u8 = 12;

/// A reader of Thrift's compact protocol over a page header's bytes.
struct Compact<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// What a struct's reader does with one field (`id`, compact type): `true` when it read the
/// value, `false` to skip it.
type Field<'f> = dyn FnMut(&mut Compact, i64, u8) -> Result<bool, String> + 'f;

impl Compact<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let byte = *self.bytes.get(self.at).ok_or("a page header is cut short")?;
        self.at += 1;
        Ok(byte)
    }

    fn advance(&mut self, bytes: u64) -> Result<(), String> {
        let left = (self.bytes.len() - self.at) as u64;
        if bytes > left {
            return Err("a page header is cut short".to_owned());
        }
        self.at += bytes as usize;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a page header has a number of more than 10 bytes".to_owned())
    }

    fn zigzag(&mut self) -> Result<i64, String> {
        let raw = self.varint()?;
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    /// A 32-bit integer (the crate refuses or truncates a larger one: neither is trusted).
    fn i32(&mut self) -> Result<i64, String> {
        let value = self.zigzag()?;
        i32::try_from(value)
            .map_err(|_| format!("a page header has {value}, not a 32-bit number"))?;
        Ok(value)
    }

    /// A size or count: a 32-bit integer that is not negative.
    fn size(&mut self) -> Result<u64, String> {
        let value = self.i32()?;
        u64::try_from(value).map_err(|_| format!("a page header has a negative size ({value})"))
    }

    /// A struct's fields up to its stop byte, each given to `field`, skipped when it declines.
    fn read_struct(&mut self, depth: u32, field: &mut Field) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("a page header nests too deep".to_owned());
        }
        let mut id = 0i64;
        loop {
            let header = self.byte()?;
            if header == 0 {
                return Ok(());
            }
            let (kind, delta) = (header & 0x0f, header >> 4);
            id = if delta == 0 { self.zigzag()? } else { id + i64::from(delta) };
            if !field(self, id, kind)? {
                self.skip(kind, depth + 1)?;
            }
        }
    }

    /// Skips one value of compact type `kind` (every value takes at least one byte, so a stated
    /// count of elements larger than the bytes left fails instead of looping).
    fn skip(&mut self, kind: u8, depth: u32) -> Result<(), String> {
        match kind {
            1 | 2 => Ok(()), // a boolean field: its value is its type
            3 => self.advance(1),
            4..=6 => self.varint().map(drop),
            7 => self.advance(8),
            8 => {
                let len = self.varint()?;
                self.advance(len)
            }
            9 | 10 => {
                let header = self.byte()?;
                let count = match header >> 4 {
                    15 => self.varint()?,
                    count => u64::from(count),
                };
                for _ in 0..count {
                    self.skip_element(header & 0x0f, depth)?;
                }
                Ok(())
            }
            11 => {
                let count = self.varint()?;
                if count > 0 {
                    let kinds = self.byte()?;
                    for _ in 0..count {
                        self.skip_element(kinds >> 4, depth)?;
                        self.skip_element(kinds & 0x0f, depth)?;
                    }
                }
                Ok(())
            }
            STRUCT => self.read_struct(depth, &mut |_, _, _| Ok(false)),
            13 => self.advance(16), // a UUID
            _ => Err(format!("a page header has a value of unknown type {kind}")),
        }
    }

    /// Skips one element of a list, set or map (a boolean element is a byte of its own).
    fn skip_element(&mut self, kind: u8, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("a page header nests too deep".to_owned());
        }
        match kind {
            1 | 2 => self.advance(1),
            kind => self.skip(kind, depth + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(bytes: &[u8]) -> Result<PageHeader, String> {
        PageHeader::read(&mut Compact { bytes, at: 0 })
    }

    #[test]
    fn a_page_header_gives_its_type_sizes_and_encoding() {
        // type = DATA_PAGE (0), uncompressed 100 (zigzag 200), compressed 60 (zigzag 120), a
        // boolean field 4 (skipped), data page header { num_values 7, encoding 8 } and stop.
        let bytes = [
            0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x78, 0x11, 0x1c, 0x15, 0x0e, 0x15, 0x10, 0x00,
            0x00,
        ];
        let header = header(&bytes).unwrap();
        assert_eq!(header.kind, DATA_PAGE);
        assert_eq!((header.decompressed, header.compressed), (Some(100), Some(60)));
        assert_eq!(header.encoding, Some(RLE_DICTIONARY));
    }

    #[test]
    fn a_cut_nested_or_oversized_header_is_refused() {
        assert!(header(&[0x15, 0x00]).unwrap_err().contains("cut short"));
        // uncompressed size 2^31 (zigzag 2^32): not a 32-bit number.
        let err = header(&[0x25, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00]).unwrap_err();
        assert!(err.contains("not a 32-bit number"), "{err}");
        // a list that states 2^20 elements in three bytes.
        assert!(header(&[0x19, 0xf5, 0x80, 0x80, 0x40, 0x00]).unwrap_err().contains("cut short"));
        // structs nested 100 deep.
        let mut deep = vec![0x1c; 100];
        deep.extend([0x00; 101]);
        assert!(header(&deep).unwrap_err().contains("too deep"));
    }
}

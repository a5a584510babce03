//! Reading a user's file whole, refused past a size bound, so that a device or a huge file is
//! never read into memory.

use std::path::Path;

/// The largest model, GPU or plan file read, in bytes.
pub const MAX_INPUT_FILE_BYTES: u64 = 1 << 20;

/// A file's text, refused past `limit` bytes ([`MAX_INPUT_FILE_BYTES`], 1 MiB, for a model, GPU
/// or plan file: a few KiB, a Hugging Face config.json tens of KiB) so that a device or a huge file
/// is not read into memory.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_bounded_bytes(path, limit)?)
        .map_err(|_| format!("cannot read {}: stream did not contain valid UTF-8", path.display()))
}

/// A file's bytes (a binary file: Parquet), refused past `limit` bytes as [`read_bounded`] is.
pub fn read_bounded_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read {shown}: {err}"))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{shown} is larger than the {limit} bytes read at most"));
    }
    Ok(bytes)
}

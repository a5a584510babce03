//! Reading a user's file whole, refused past a size bound, so that a device or a huge file is
//! never read into memory.

use std::path::Path;

/// The largest model, GPU or plan file read, in bytes.
pub const MAX_INPUT_FILE_BYTES: u64 = 1 << 20;

/// A file's text, refused past [`MAX_INPUT_FILE_BYTES`] (1 MiB: a model, GPU or plan file is a
/// few KiB, a Hugging Face config.json tens of KiB) so that a device or a huge file is not read
/// into memory.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use std::io::Read as _;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read {shown}: {err}"))?;
    let mut text = String::new();
    file.take(limit.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(|err| format!("cannot read {shown}: {err}"))?;
    if text.len() as u64 > limit {
        return Err(format!("{shown} is larger than the {limit} bytes read at most"));
    }
    Ok(text)
}

//! Which source a rerun of `floe ingest` on a file or stdin continues.
//!
//! An input's lines are positions of one source, and the ledger commits
//! each position once. Whether a rerun reads the same source again is
//! decided here, from a checkpoint per input under
//! `<warehouse>/_floe/inputs/`: the bytes the last run read and their hash.
//! When the input still starts with exactly those bytes (it was read again
//! or grew at its end) the rerun continues that source, and only its new
//! lines commit; otherwise (rewritten, truncated, another export on stdin)
//! it is a new source whose name chains the previous one, so even content
//! that shares a long prefix with it commits in full.
//!
//! The checkpoint names a source; it never says what was committed (the
//! ledger does), so a run that dies anywhere leaves it at worst naming the
//! source the rerun must continue: it is saved before the first batch of a
//! new source leaves, and again once the input is read.

use std::io::{Read, Seek};

use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// The directory under the warehouse that holds the checkpoints.
pub const DIR: &str = "_floe/inputs";

/// Bytes of a first read that name its source, with its path.
pub const NAME_PREFIX: usize = 64 * 1024;

/// Input bytes a stdin rerun keeps in memory while it compares them with
/// the checkpoint; beyond, they go to a temporary file.
const SPILL_IN_MEMORY: usize = 64 << 20;

/// What a run read of one input, for the next run to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The input (`file:/abs/path`, `stdin`).
    pub input: String,
    /// The source its lines were positions of (`file:/abs/path@…`).
    pub source: String,
    /// Bytes read, through the last complete line.
    pub bytes: u64,
    /// xxh3 of those bytes.
    pub hash: u64,
}

/// Why a checkpoint could not be read or saved.
#[derive(Debug, thiserror::Error)]
#[error("input checkpoint {path}: {reason}")]
pub struct CheckpointError {
    /// The checkpoint file.
    pub path: String,
    /// What failed.
    pub reason: String,
}

/// The checkpoints of one warehouse.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    file_io: FileIO,
    dir: String,
}

impl Checkpoints {
    /// The checkpoints under warehouse URI `warehouse`.
    pub fn new(file_io: FileIO, warehouse: &str) -> Self {
        Self {
            file_io,
            dir: format!("{}/{DIR}", warehouse.trim_end_matches('/')),
        }
    }

    fn path(&self, input: &str) -> String {
        format!("{}/{:016x}.json", self.dir, xxh3_64(input.as_bytes()))
    }

    /// The last run's checkpoint of `input`, if any.
    pub async fn load(&self, input: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let path = self.path(input);
        let err = |reason: String| CheckpointError {
            path: path.clone(),
            reason,
        };
        if !self
            .file_io
            .exists(&path)
            .await
            .map_err(|e| err(e.to_string()))?
        {
            return Ok(None);
        }
        let bytes = self
            .file_io
            .new_input(&path)
            .map_err(|e| err(e.to_string()))?
            .read()
            .await
            .map_err(|e| err(e.to_string()))?;
        let ck: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
        // Two inputs whose names share a hash: neither's checkpoint counts.
        Ok((ck.input == input).then_some(ck))
    }

    /// Saves `ck` as its input's checkpoint.
    pub async fn save(&self, ck: &Checkpoint) -> Result<(), CheckpointError> {
        let path = self.path(&ck.input);
        let err = |reason: String| CheckpointError {
            path: path.clone(),
            reason,
        };
        let body = serde_json::to_vec(ck).map_err(|e| err(e.to_string()))?;
        self.file_io
            .new_output(&path)
            .map_err(|e| err(e.to_string()))?
            .write(body.into())
            .await
            .map_err(|e| err(e.to_string()))
    }
}

/// Whether an input still starts with the bytes `ck` describes: the input
/// to read from its start (with what the comparison consumed put back), and
/// the answer. A file is compared through a second handle; stdin through
/// a spill of the compared bytes.
pub fn continues(
    reader: Box<dyn Read + Send>,
    path: Option<&std::path::Path>,
    ck: &Checkpoint,
) -> std::io::Result<(Box<dyn Read + Send>, bool)> {
    if let Some(path) = path {
        let mut again = std::fs::File::open(path)?;
        let same = hash_of(&mut again, ck.bytes)? == Some(ck.hash);
        return Ok((reader, same));
    }
    let mut reader = reader;
    let mut spill = tempfile::SpooledTempFile::new(SPILL_IN_MEMORY);
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut left = ck.bytes;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let n = reader.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        std::io::Write::write_all(&mut spill, &buf[..n])?;
        left -= n as u64;
    }
    let same = left == 0 && hasher.digest() == ck.hash;
    spill.rewind()?;
    Ok((Box::new(spill.chain(reader)), same))
}

/// xxh3 of the first `bytes` bytes of `r`; `None` when it is shorter.
fn hash_of(r: &mut impl Read, bytes: u64) -> std::io::Result<Option<u64>> {
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut left = bytes;
    while left > 0 {
        let want = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        let n = r.read(&mut buf[..want])?;
        if n == 0 {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(Some(hasher.digest()))
}

/// The source a new read of `input` starts, from its first bytes `prefix`
/// (up to [`NAME_PREFIX`]): named by them alone on a first read, as
/// earlier releases named every read; chained to the source `before` read
/// when there was one, so a rewrite that starts as it did is new.
pub fn new_source(input: &str, prefix: &[u8], before: Option<&Checkpoint>) -> String {
    let hash = match before {
        None => xxh3_64(prefix),
        Some(ck) => {
            let mut h = Xxh3::new();
            h.update(prefix);
            h.update(ck.source.as_bytes());
            h.update(&ck.hash.to_le_bytes());
            h.digest()
        }
    };
    format!("{input}@{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(text: &[u8]) -> Checkpoint {
        Checkpoint {
            input: "stdin".into(),
            source: "stdin@1".into(),
            bytes: text.len() as u64,
            hash: xxh3_64(text),
        }
    }

    fn read_all(mut r: Box<dyn Read + Send>) -> Vec<u8> {
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn stdin_that_grew_continues_and_is_read_whole() {
        let (r, same) = continues(Box::new(&b"a\nb\nc\n"[..]), None, &ck(b"a\nb\n")).unwrap();
        assert!(same);
        assert_eq!(read_all(r), b"a\nb\nc\n");
    }

    #[test]
    fn rewritten_or_shorter_input_does_not_continue() {
        let (r, same) = continues(Box::new(&b"a\nX\nc\n"[..]), None, &ck(b"a\nb\n")).unwrap();
        assert!(!same);
        assert_eq!(read_all(r), b"a\nX\nc\n");
        let (r, same) = continues(Box::new(&b"a\n"[..]), None, &ck(b"a\nb\n")).unwrap();
        assert!(!same);
        assert_eq!(read_all(r), b"a\n");
    }

    #[test]
    fn a_file_is_compared_through_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.ndjson");
        std::fs::write(&path, b"a\nb\nmore\n").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let (r, same) = continues(Box::new(file), Some(&path), &ck(b"a\nb\n")).unwrap();
        assert!(same);
        assert_eq!(read_all(r), b"a\nb\nmore\n");
    }

    #[test]
    fn a_new_source_after_another_differs_from_it_even_with_the_same_start() {
        let first = new_source("stdin", b"a\n", None);
        let before = Checkpoint {
            source: first.clone(),
            ..ck(b"a\nb\n")
        };
        let second = new_source("stdin", b"a\n", Some(&before));
        assert_ne!(first, second);
        assert_eq!(second, new_source("stdin", b"a\n", Some(&before)));
        assert!(second.starts_with("stdin@"));
    }
}

//! Which source a rerun of `floe ingest` on a file or stdin continues.
//!
//! An input's lines are positions of one source, and the ledger commits
//! each position once. Whether a rerun reads the same source again is
//! decided here, from a checkpoint per input under
//! `<warehouse>/_floe/inputs/`: for each of the input's last [`KEPT`]
//! versions, its source and the bytes a run read of it, with their hash.
//! When the input still starts with exactly the bytes of one of them (it was
//! read again, grew at its end, or is a retry of an earlier version after
//! another ran) the rerun continues that source, and only its new lines
//! commit; otherwise (rewritten, truncated, another export on stdin) it is a
//! new source whose name chains the newest one, so even content that shares
//! a long prefix with it commits in full.
//!
//! The checkpoint names a source; it never says what was committed (the
//! ledger does), so a run that dies anywhere leaves it at worst naming the
//! source the rerun must continue: it is saved before the first batch of a
//! new source leaves, and again once the input is read.

use std::io::{Read, Seek};

use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use crate::error::{Classify, ErrorKind};

/// The directory under the warehouse that holds the checkpoints.
pub const DIR: &str = "_floe/inputs";

/// Bytes of a first read that name its source, with its path.
pub const NAME_PREFIX: usize = 64 * 1024;

/// Versions of one input a checkpoint remembers.
pub const KEPT: usize = 16;

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
#[error("input checkpoint {path}: {source}")]
pub struct CheckpointError {
    /// The checkpoint file.
    pub path: String,
    /// The storage's error.
    pub source: Box<iceberg::Error>,
}

/// Storage failed; reading the input again can pass.
impl Classify for CheckpointError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Service
    }
}

/// The versions of one input runs read, newest first, as saved.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Versions {
    /// How many saves came before: the newer of the two slots wins.
    pub seq: u64,
    /// The versions.
    pub list: Vec<Checkpoint>,
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

    /// Saves alternate between two files, so a save a crash cuts short
    /// (a local file is not replaced atomically) leaves the one before.
    fn path(&self, input: &str, seq: u64) -> String {
        let slot = if seq.is_multiple_of(2) { 'a' } else { 'b' };
        format!(
            "{}/{:016x}.{slot}.json",
            self.dir,
            xxh3_64(input.as_bytes())
        )
    }

    /// The versions of `input` runs read. On a local warehouse under the
    /// input's lock, shared: a save rewrites its slot in place, so two saves
    /// in a row could show a reader between them both slots empty, and the
    /// run would take its input for a new one and commit it again.
    pub async fn load(&self, input: &str) -> Result<Versions, CheckpointError> {
        let _lock = self.lock(input, Lock::Shared)?;
        self.read_slots(input).await
    }

    /// The newer of the two slots that parses; the caller holds the lock.
    async fn read_slots(&self, input: &str) -> Result<Versions, CheckpointError> {
        let mut newest = Versions::default();
        for slot in 0..2 {
            let path = self.path(input, slot);
            let err = |source| CheckpointError {
                path: path.clone(),
                source: Box::new(source),
            };
            let io = &self.file_io;
            if !io.exists(&path).await.map_err(err)? {
                continue;
            }
            let input_file = io.new_input(&path).map_err(err)?;
            let bytes = input_file.read().await.map_err(err)?;
            // A save cut short is not JSON; the other slot holds the one before.
            let Ok(mut saved) = serde_json::from_slice::<Versions>(&bytes) else {
                continue;
            };
            // Two inputs whose names share a hash: neither's versions count.
            saved.list.retain(|v| v.input == input);
            if saved.seq >= newest.seq {
                newest = saved;
            }
        }
        Ok(newest)
    }

    /// Saves `ck` as its input's newest version, before the others of
    /// `versions` and of what another run saved meanwhile (its source's
    /// earlier read among them is dropped), and makes `versions` what was
    /// saved. Two runs reading the same input (stdin into two tables, or
    /// one file twice) save in turn, each keeping the other's versions: on
    /// a local warehouse under a file lock, elsewhere read again just
    /// before the write.
    pub async fn save(
        &self,
        ck: &Checkpoint,
        versions: &mut Versions,
    ) -> Result<(), CheckpointError> {
        let _lock = self.lock(&ck.input, Lock::Exclusive)?;
        let stored = self.read_slots(&ck.input).await?;
        let mut seen = std::collections::HashSet::from([ck.source.as_str()]);
        // What is stored goes before this run's older copy of it, so a full
        // list drops the oldest versions, never one another run just saved.
        let list: Vec<Checkpoint> = std::iter::once(ck)
            .chain(
                stored
                    .list
                    .iter()
                    .chain(&versions.list)
                    .filter(|v| seen.insert(v.source.as_str())),
            )
            .take(KEPT)
            .cloned()
            .collect();
        let next = Versions {
            seq: versions.seq.max(stored.seq) + 1,
            list,
        };
        let path = self.path(&ck.input, next.seq);
        let err = |source| CheckpointError {
            path: path.clone(),
            source: Box::new(source),
        };
        // Serialising a plain structure into memory cannot fail.
        let body = serde_json::to_vec(&next).unwrap_or_default();
        self.file_io
            .new_output(&path)
            .map_err(err)?
            .write(body.into())
            .await
            .map_err(err)?;
        *versions = next;
        Ok(())
    }

    /// The input's lock on a local warehouse (elsewhere a write replaces
    /// an object whole, and there is none), held until it is dropped.
    fn lock(&self, input: &str, how: Lock) -> Result<Option<std::fs::File>, CheckpointError> {
        let Some(path) = self.lock_path(input) else {
            return Ok(None);
        };
        lock_file(&path, how)
            .map(Some)
            .map_err(|e| CheckpointError {
                path: path.display().to_string(),
                source: Box::new(
                    iceberg::Error::new(
                        iceberg::ErrorKind::Unexpected,
                        "locking the input's checkpoint",
                    )
                    .with_source(e),
                ),
            })
    }

    /// The lock file beside an input's checkpoint, on a local warehouse.
    fn lock_path(&self, input: &str) -> Option<std::path::PathBuf> {
        let dir = match self.dir.strip_prefix("file://") {
            Some(rest) => rest,
            None if self.dir.starts_with('/') => &self.dir,
            None => return None,
        };
        Some(std::path::Path::new(dir).join(format!("{:016x}.lock", xxh3_64(input.as_bytes()))))
    }
}

/// How a run holds an input's lock: readers share it, a save excludes all.
#[derive(Debug, Clone, Copy)]
enum Lock {
    Shared,
    Exclusive,
}

/// A lock on `path` (created), held until the file is dropped.
fn lock_file(path: &std::path::Path, how: Lock) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    match how {
        Lock::Shared => file.lock_shared()?,
        Lock::Exclusive => file.lock()?,
    }
    Ok(file)
}

/// Which of `versions` the input still starts with (the longest, since a
/// version read only in part names fewer bytes): the input to read from its
/// start (with what the comparison consumed put back), and that version's
/// index. A file is compared through a second handle; stdin through a
/// spill of the compared bytes. One pass, as long as the longest version.
pub fn continues(
    reader: Box<dyn Read + Send>,
    path: Option<&std::path::Path>,
    versions: &[Checkpoint],
) -> std::io::Result<(Box<dyn Read + Send>, Option<usize>)> {
    if versions.is_empty() {
        return Ok((reader, None));
    }
    if let Some(path) = path {
        let found = matching(
            &mut std::fs::File::open(path)?,
            versions,
            &mut std::io::sink(),
        )?;
        return Ok((reader, found));
    }
    let mut reader = reader;
    let mut spill = tempfile::SpooledTempFile::new(SPILL_IN_MEMORY);
    let found = matching(&mut reader, versions, &mut spill)?;
    spill.rewind()?;
    Ok((Box::new(spill.chain(reader)), found))
}

/// Reads `r` as far as the longest of `versions` (copying what it read to
/// `copy`), and finds the longest version whose bytes `r` starts with.
fn matching(
    r: &mut impl Read,
    versions: &[Checkpoint],
    copy: &mut impl std::io::Write,
) -> std::io::Result<Option<usize>> {
    let mut ends: Vec<u64> = versions.iter().map(|v| v.bytes).collect();
    ends.sort_unstable();
    ends.dedup();
    let mut hashes = std::collections::HashMap::new();
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut at = 0u64;
    for end in ends {
        while at < end {
            let want = usize::try_from((end - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let n = r.read(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            copy.write_all(&buf[..n])?;
            at += n as u64;
        }
        if at < end {
            break;
        }
        hashes.insert(end, hasher.digest());
    }
    Ok(versions
        .iter()
        .enumerate()
        .filter(|(_, v)| hashes.get(&v.bytes) == Some(&v.hash))
        .max_by_key(|(i, v)| (v.bytes, std::cmp::Reverse(*i)))
        .map(|(i, _)| i))
}

/// The source a new read of `input` starts, from its first bytes `prefix`
/// (up to [`NAME_PREFIX`]): named by them alone on a first read, as
/// earlier releases named every read; chained to the newest version
/// `before` when there was one, so a rewrite that starts as it did is new.
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
        let (r, found) = continues(Box::new(&b"a\nb\nc\n"[..]), None, &[ck(b"a\nb\n")]).unwrap();
        assert_eq!(found, Some(0));
        assert_eq!(read_all(r), b"a\nb\nc\n");
    }

    #[test]
    fn rewritten_or_shorter_input_does_not_continue() {
        let (r, found) = continues(Box::new(&b"a\nX\nc\n"[..]), None, &[ck(b"a\nb\n")]).unwrap();
        assert_eq!(found, None);
        assert_eq!(read_all(r), b"a\nX\nc\n");
        let (r, found) = continues(Box::new(&b"a\n"[..]), None, &[ck(b"a\nb\n")]).unwrap();
        assert_eq!(found, None);
        assert_eq!(read_all(r), b"a\n");
    }

    #[test]
    fn an_earlier_version_is_found_behind_a_later_one() {
        let versions = [ck(b"B\nB\nB\n"), ck(b"a\n"), ck(b"a\nb\n")];
        let (r, found) = continues(Box::new(&b"a\nb\nmore\n"[..]), None, &versions).unwrap();
        assert_eq!(found, Some(2), "the longest that matches");
        assert_eq!(read_all(r), b"a\nb\nmore\n");
    }

    #[tokio::test]
    async fn a_save_cut_short_leaves_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let warehouse = format!("file://{}", dir.path().display());
        let cps = Checkpoints::new(FileIO::new_with_fs(), &warehouse);
        let mut versions = cps.load("stdin").await.unwrap();
        let first = ck(b"a\n");
        cps.save(&first, &mut versions).await.unwrap();
        let second = Checkpoint {
            source: "stdin@2".into(),
            ..ck(b"b\n")
        };
        cps.save(&second, &mut versions).await.unwrap();
        assert_eq!(
            cps.load("stdin").await.unwrap().list,
            vec![second, first.clone()]
        );
        // The second save's file, as a crash mid-write leaves it.
        let torn = cps
            .path("stdin", 2)
            .trim_start_matches("file://")
            .to_string();
        std::fs::write(&torn, b"{\"seq\":2,\"list\":[{\"inp").unwrap();
        assert_eq!(cps.load("stdin").await.unwrap().list, vec![first]);
    }

    #[test]
    fn a_file_is_compared_through_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.ndjson");
        std::fs::write(&path, b"a\nb\nmore\n").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let (r, found) = continues(Box::new(file), Some(&path), &[ck(b"a\nb\n")]).unwrap();
        assert_eq!(found, Some(0));
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

    /// Two runs of one input (stdin into two tables) load the same
    /// versions and save in turn: the second keeps the first's.
    #[tokio::test]
    async fn interleaved_saves_keep_each_others_versions() {
        let dir = tempfile::tempdir().unwrap();
        let io = FileIO::new_with_fs();
        let cks = Checkpoints::new(io, &format!("file://{}", dir.path().display()));
        let (mut a, mut b) = (
            cks.load("stdin").await.unwrap(),
            cks.load("stdin").await.unwrap(),
        );
        cks.save(&version("stdin@a"), &mut a).await.unwrap();
        cks.save(&version("stdin@b"), &mut b).await.unwrap();
        let saved = cks.load("stdin").await.unwrap();
        let sources: Vec<&str> = saved.list.iter().map(|v| v.source.as_str()).collect();
        assert_eq!(sources, ["stdin@b", "stdin@a"]);
    }

    fn version(source: &str) -> Checkpoint {
        Checkpoint {
            input: "stdin".into(),
            source: source.into(),
            bytes: 3,
            hash: 7,
        }
    }

    /// A run that loaded a full list saves after another run saved: the
    /// oldest version leaves, not the other run's, whose rerun would
    /// otherwise read as a new input and commit again.
    #[tokio::test]
    async fn a_full_list_drops_the_oldest_not_another_runs_newest() {
        let dir = tempfile::tempdir().unwrap();
        let cks = Checkpoints::new(
            FileIO::new_with_fs(),
            &format!("file://{}", dir.path().display()),
        );
        let mut setup = cks.load("stdin").await.unwrap();
        for i in 0..KEPT {
            cks.save(&version(&format!("stdin@old{i}")), &mut setup)
                .await
                .unwrap();
        }
        let (mut a, mut b) = (
            cks.load("stdin").await.unwrap(),
            cks.load("stdin").await.unwrap(),
        );
        cks.save(&version("stdin@b"), &mut b).await.unwrap();
        cks.save(&version("stdin@a"), &mut a).await.unwrap();
        let saved = cks.load("stdin").await.unwrap();
        let sources: Vec<&str> = saved.list.iter().map(|v| v.source.as_str()).collect();
        assert_eq!(sources.len(), KEPT);
        assert_eq!(sources[..3], ["stdin@a", "stdin@b", "stdin@old15"]);
        assert!(!sources.contains(&"stdin@old1"), "{sources:?}");
    }

    /// A load waits for a save in progress: a save rewrites its slot in
    /// place, and between two saves a reader could find both slots empty
    /// (as this test leaves them while it holds the lock), take the input
    /// for a new one and commit it again.
    #[test]
    fn a_load_waits_for_a_save_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let cks = Checkpoints::new(
            FileIO::new_with_fs(),
            &format!("file://{}", dir.path().display()),
        );
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
        };
        runtime().block_on(async {
            let mut versions = cks.load("stdin").await.unwrap();
            for source in ["stdin@t0", "stdin@t3"] {
                cks.save(&version(source), &mut versions).await.unwrap();
            }
        });
        let slots: Vec<String> = (0..2)
            .map(|seq| {
                cks.path("stdin", seq)
                    .trim_start_matches("file://")
                    .to_string()
            })
            .collect();
        let kept: Vec<Vec<u8>> = slots.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let held = lock_file(&cks.lock_path("stdin").unwrap(), Lock::Exclusive).unwrap();
        for path in &slots {
            std::fs::write(path, b"").unwrap();
        }
        let loader = {
            let cks = cks.clone();
            std::thread::spawn(move || runtime().block_on(cks.load("stdin")))
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        for (path, bytes) in slots.iter().zip(&kept) {
            std::fs::write(path, bytes).unwrap();
        }
        drop(held);
        let loaded = loader.join().unwrap().unwrap();
        let sources: Vec<&str> = loaded.list.iter().map(|v| v.source.as_str()).collect();
        assert_eq!(sources, ["stdin@t3", "stdin@t0"]);
    }
}

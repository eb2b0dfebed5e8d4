//! Reads and writes ledger files through the table's FileIO, keeping what it
//! read: heads, segments and key files never change once written, so a warm
//! committer reads each once and a commit of fresh requests reads nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use iceberg::io::FileIO;

use super::LedgerError;
use super::head::{self, Archived, Head, Segment};
use super::index::Index;
use super::keyfile::{KeyFile, LastChange};
use super::marks::Page;
use crate::lru::Lru;

/// Heads kept in memory.
const HEADS: usize = 16;
/// Segments kept in memory.
const SEGMENTS: usize = 256;
/// Key files kept in memory.
const KEY_FILES: usize = 1024;
/// Keys of the key files kept in memory, all told: about 50 MB, several
/// commits' worth of a busy stream. A key file is as large as its request
/// (50,000 keys for a Postgres batch), and a committer reads one per
/// request, so a count alone let a steady stream hold 1,024 of them (1.6 GB
/// after two minutes at 60,000 changes/s); a million keys was still the
/// largest live allocation a heap profile of such a stream found. One
/// dropped is read again if a late request asks.
const KEY_FILE_KEYS: usize = 1 << 18;
/// Pages of spilled runs kept in memory.
const PAGES: usize = 256;
/// Archive buckets kept in memory (every bucket).
const BUCKETS: usize = super::archive::BUCKETS as usize;

/// What one key file holds.
#[derive(Debug, Clone, Default)]
pub struct KeyChanges {
    /// Every key's last change, for keys whose source has an order.
    pub changes: HashMap<u128, LastChange>,
    /// Every key the request changes, ordered or not.
    pub all: Vec<u128>,
}

/// Ledger file I/O with a bounded cache of what was read or written.
#[derive(Debug)]
pub struct LedgerStore {
    file_io: FileIO,
    heads: Mutex<Lru<Head>>,
    segments: Mutex<Lru<Index>>,
    key_files: Mutex<Lru<KeyChanges>>,
    pages: Mutex<Lru<Page>>,
    buckets: Mutex<Lru<Archived>>,
}

impl LedgerStore {
    /// A store over `file_io`.
    pub fn new(file_io: FileIO) -> Self {
        Self {
            file_io,
            heads: Mutex::new(Lru::new(HEADS)),
            segments: Mutex::new(Lru::new(SEGMENTS)),
            key_files: Mutex::new(Lru::weighed(KEY_FILES, KEY_FILE_KEYS)),
            pages: Mutex::new(Lru::new(PAGES)),
            buckets: Mutex::new(Lru::new(BUCKETS)),
        }
    }

    /// The FileIO it reads and writes through.
    pub fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// The head at `path`.
    pub async fn head(&self, path: &str) -> Result<Arc<Head>, LedgerError> {
        self.cached(&self.heads, path).await
    }

    /// The page of spilled runs at `path`.
    pub async fn page(&self, path: &str) -> Result<Arc<Page>, LedgerError> {
        self.cached(&self.pages, path).await
    }

    /// The archive bucket at `path`.
    pub async fn archived(&self, path: &str) -> Result<Arc<Archived>, LedgerError> {
        self.cached(&self.buckets, path).await
    }

    /// A file from the cache, else read, decoded and kept.
    async fn cached<T>(&self, cache: &Mutex<Lru<T>>, path: &str) -> Result<Arc<T>, LedgerError>
    where
        T: serde::de::DeserializeOwned + head::Versioned,
    {
        if let Some(v) = lock(cache).get(path) {
            return Ok(v);
        }
        let bytes = self.read(path).await?;
        let value: T = head::decode(&bytes).map_err(|source| LedgerError::Format {
            path: path.to_string(),
            source,
        })?;
        let value = Arc::new(value);
        lock(cache).put(path, value.clone());
        Ok(value)
    }

    /// The entries of the segment at `path`, indexed.
    pub async fn segment(&self, path: &str) -> Result<Arc<Index>, LedgerError> {
        if let Some(s) = lock(&self.segments).get(path) {
            return Ok(s);
        }
        let bytes = self.read(path).await?;
        let segment: Segment = head::decode(&bytes).map_err(|source| LedgerError::Format {
            path: path.to_string(),
            source,
        })?;
        let index = Index::new(segment.entries).map_err(|source| LedgerError::Format {
            path: path.to_string(),
            source,
        })?;
        let index = Arc::new(index);
        lock(&self.segments).put(path, index.clone());
        Ok(index)
    }

    /// The key changes of the key file at `path`; `None` once it is gone.
    pub async fn key_file(&self, path: &str) -> Result<Option<Arc<KeyChanges>>, LedgerError> {
        if let Some(k) = lock(&self.key_files).get(path) {
            return Ok(Some(k));
        }
        let exists = self
            .file_io
            .exists(path)
            .await
            .map_err(|e| storage(path, e))?;
        if !exists {
            return Ok(None);
        }
        let bytes = self.read(path).await?;
        let format = |source| LedgerError::Format {
            path: path.to_string(),
            source,
        };
        let file: KeyFile = head::decode(&bytes).map_err(format)?;
        let changes = Arc::new(KeyChanges {
            changes: file.changes().map_err(format)?,
            all: file.digests().map_err(format)?,
        });
        let keys = changes.all.len();
        lock(&self.key_files).put_weighed(path, changes.clone(), keys);
        Ok(Some(changes))
    }

    /// Writes a head and keeps it.
    pub async fn put_head(&self, path: &str, head: Arc<Head>) -> Result<(), LedgerError> {
        self.write(path, head::encode(head.as_ref())).await?;
        lock(&self.heads).put(path, head);
        Ok(())
    }

    /// Writes a segment and keeps its index.
    pub async fn put_segment(&self, path: &str, segment: &Segment) -> Result<(), LedgerError> {
        let index = Index::new(segment.entries.clone()).map_err(|source| LedgerError::Format {
            path: path.to_string(),
            source,
        })?;
        self.write(path, head::encode(segment)).await?;
        let index = Arc::new(index);
        lock(&self.segments).put(path, index);
        Ok(())
    }

    /// Writes a page of spilled runs and keeps it.
    pub async fn put_page(&self, path: &str, page: Page) -> Result<(), LedgerError> {
        self.write(path, head::encode(&page)).await?;
        lock(&self.pages).put(path, Arc::new(page));
        Ok(())
    }

    /// Writes an archive bucket and keeps it.
    pub async fn put_archived(&self, path: &str, bucket: Archived) -> Result<(), LedgerError> {
        self.write(path, head::encode(&bucket)).await?;
        lock(&self.buckets).put(path, Arc::new(bucket));
        Ok(())
    }

    /// Writes a key file.
    pub async fn put_key_file(&self, path: &str, file: &KeyFile) -> Result<(), LedgerError> {
        self.write(path, head::encode(file)).await
    }

    /// Deletes ledger files no head refers to any more; a failure leaves an
    /// orphan for maintenance.
    pub async fn forget(&self, paths: &[String]) {
        for p in paths {
            let _ = self.file_io.delete(p).await;
        }
    }

    async fn read(&self, path: &str) -> Result<Bytes, LedgerError> {
        let read = match self.file_io.new_input(path) {
            Ok(input) => input.read().await,
            Err(e) => Err(e),
        };
        match read {
            Ok(bytes) => Ok(bytes),
            // Told apart only on failure: a read that works costs no lookup.
            Err(e) => match self.file_io.exists(path).await {
                Ok(false) => Err(LedgerError::Missing {
                    path: path.to_string(),
                }),
                _ => Err(storage(path, e)),
            },
        }
    }

    async fn write(&self, path: &str, bytes: Bytes) -> Result<(), LedgerError> {
        self.file_io
            .new_output(path)
            .map_err(|e| storage(path, e))?
            .write(bytes)
            .await
            .map_err(|e| storage(path, e))
    }
}

fn storage(path: &str, source: iceberg::Error) -> LedgerError {
    LedgerError::Storage {
        path: path.to_string(),
        source: Box::new(source),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves a cache, never a half-made file.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Position;

    /// A key file of `n` keys from `first`, each changed at its own position.
    fn key_file(first: u128, n: u128) -> KeyFile {
        let keys: Vec<(u128, u16, Option<Position>)> = (first..first + n)
            .map(|d| (d, 0, Position::parse(&(d + 1).to_string())))
            .collect();
        KeyFile::new(vec!["kafka:t/0".into()], &keys)
    }

    /// A late request asks for key files long after they were read: past
    /// the bound the oldest are dropped, and one asked again is read back
    /// from storage whole.
    #[tokio::test]
    async fn a_key_file_dropped_past_the_bound_is_read_again_whole() {
        let store = LedgerStore::new(FileIO::new_with_memory());
        let n = (KEY_FILE_KEYS / 2) as u128;
        let paths: Vec<String> = (0..3).map(|i| format!("memory://t/keys-{i}")).collect();
        for (i, p) in paths.iter().enumerate() {
            store
                .put_key_file(p, &key_file(i as u128 * n, n))
                .await
                .unwrap();
        }
        let mut first_read = None;
        for p in &paths {
            let read = store.key_file(p).await.unwrap().unwrap();
            first_read.get_or_insert(read);
        }
        let first_read = first_read.unwrap();
        assert!(
            lock(&store.key_files).get(&paths[0]).is_none(),
            "three halves of the bound: the first is dropped"
        );
        let again = store.key_file(&paths[0]).await.unwrap().unwrap();
        assert_eq!(again.all, first_read.all);
        assert_eq!(again.changes, first_read.changes);
        assert_eq!(again.all.len(), n as usize);
        assert_eq!(
            Some(&again.changes[&7]),
            Some(("kafka:t/0".to_string(), Position::parse("8").unwrap())).as_ref(),
            "each key keeps its source and position"
        );
    }
}

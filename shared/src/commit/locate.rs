//! Where each key of a keyed table lives: for every data file, its rows' key
//! digests (by typed value, see [`crate::rowkey`]) sorted for lookup, and for
//! every position-delete file, the rows it deletes. Files never change once
//! written, so each is read once and kept (bounded): a warm committer resolves
//! a batch's keys to the rows they replace without reading the table again,
//! only the files new since its last commit. Nothing is persisted beside the
//! table, so the answer is always the table's own, whoever wrote it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, SchemaRef};

use super::read::read_file;
use crate::rowkey;
use crate::write::position;

/// Rows per cache (keys of data files plus deleted positions) before the
/// least recently used files are dropped: about 1 GiB at 20 bytes a row.
const MAX_CACHED_ROWS: usize = 48 * 1024 * 1024;

/// The keys of one data file's rows, sorted by digest. Digests and rows sit
/// in two arrays (20 bytes a row; a `(u128, u32)` pair pads to 32), so a
/// 10,000,000-key table's keys take 200 MB.
#[derive(Debug, Default)]
pub struct FileKeys {
    sorted: Vec<u128>,
    rows: Vec<u32>,
}

impl FileKeys {
    /// The keys of `digests`, row `i` having `digests[i]`.
    pub fn of(digests: &[u128]) -> Self {
        let mut pairs: Vec<(u128, u32)> = digests
            .iter()
            .enumerate()
            .map(|(i, d)| (*d, i as u32))
            .collect();
        pairs.sort_unstable();
        Self {
            sorted: pairs.iter().map(|(d, _)| *d).collect(),
            rows: pairs.iter().map(|(_, r)| *r).collect(),
        }
    }

    /// The rows holding `digest`.
    pub fn rows(&self, digest: u128) -> impl Iterator<Item = u32> + '_ {
        let start = self.sorted.partition_point(|d| *d < digest);
        self.sorted[start..]
            .iter()
            .zip(&self.rows[start..])
            .take_while(move |(d, _)| **d == digest)
            .map(|(_, r)| *r)
    }

    /// Rows in the file.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True for a file with no rows.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Every row's digest, by row.
    pub fn digests(&self) -> Vec<u128> {
        let mut out = vec![0u128; self.sorted.len()];
        for (d, r) in self.sorted.iter().zip(&self.rows) {
            out[*r as usize] = *d;
        }
        out
    }
}

/// The rows a position-delete file deletes, by data file path.
pub type DeletedRows = HashMap<String, Vec<u32>>;

/// The cache of what the table's files hold.
#[derive(Debug, Default)]
pub struct Locator {
    keys: Mutex<Cache<FileKeys>>,
    deleted: Mutex<Cache<DeletedRows>>,
}

impl Locator {
    /// The key digests of a data (or equality-delete) file's rows, whose key
    /// columns are `key_names` of `schema`.
    pub async fn keys(
        &self,
        file_io: &FileIO,
        schema: &SchemaRef,
        key_names: &[String],
        file: &DataFile,
    ) -> iceberg::Result<Arc<FileKeys>> {
        let path = file.file_path();
        if let Some(k) = lock(&self.keys).get(path) {
            return Ok(k);
        }
        let ids: Vec<i32> = key_names
            .iter()
            .filter_map(|n| schema.field_by_name(n).map(|f| f.id))
            .collect();
        let batches = read_file(file_io, schema.clone(), ids, file).await?;
        let mut digests = Vec::with_capacity(file.record_count() as usize);
        for b in &batches {
            digests.extend(digests_of(b, key_names)?);
        }
        let keys = Arc::new(FileKeys::of(&digests));
        lock(&self.keys).put(path, keys.clone(), keys.len());
        Ok(keys)
    }

    /// The rows a position-delete file deletes.
    pub async fn deleted(
        &self,
        file_io: &FileIO,
        file: &DataFile,
    ) -> iceberg::Result<Arc<DeletedRows>> {
        let path = file.file_path();
        if let Some(d) = lock(&self.deleted).get(path) {
            return Ok(d);
        }
        let schema = Arc::new(position::schema()?);
        let batches = read_file(
            file_io,
            schema,
            vec![position::FILE_PATH_FIELD_ID, position::POS_FIELD_ID],
            file,
        )
        .await?;
        let mut rows: DeletedRows = HashMap::new();
        let mut n = 0;
        for b in &batches {
            let paths = b.column(0).as_string::<i32>();
            let positions = b.column(1).as_primitive::<Int64Type>();
            for i in 0..b.num_rows() {
                if paths.is_null(i) || positions.is_null(i) {
                    continue;
                }
                let pos = u32::try_from(positions.value(i)).map_err(|_| {
                    iceberg::Error::new(
                        iceberg::ErrorKind::DataInvalid,
                        format!("{path}: position {} out of range", positions.value(i)),
                    )
                })?;
                rows.entry(paths.value(i).to_string())
                    .or_default()
                    .push(pos);
                n += 1;
            }
        }
        let rows = Arc::new(rows);
        lock(&self.deleted).put(path, rows.clone(), n);
        Ok(rows)
    }
}

/// The key digests of `batch`'s rows.
pub fn digests_of(batch: &RecordBatch, key_names: &[String]) -> iceberg::Result<Vec<u128>> {
    let invalid = |what: String| iceberg::Error::new(iceberg::ErrorKind::DataInvalid, what);
    let columns = rowkey::columns(batch, key_names).ok_or_else(|| {
        invalid(format!(
            "a keyed table's file lacks its key columns {key_names:?}"
        ))
    })?;
    rowkey::digests(batch, &columns).map_err(|e| invalid(e.to_string()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves a cache, never a half-made entry.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A least-recently-used map of shared values, bounded by the rows they hold.
#[derive(Debug)]
struct Cache<T> {
    tick: u64,
    rows: usize,
    map: HashMap<String, (u64, usize, Arc<T>)>,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self {
            tick: 0,
            rows: 0,
            map: HashMap::new(),
        }
    }
}

impl<T> Cache<T> {
    fn get(&mut self, key: &str) -> Option<Arc<T>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(t, _, v)| {
            *t = tick;
            v.clone()
        })
    }

    fn put(&mut self, key: &str, value: Arc<T>, rows: usize) {
        self.tick += 1;
        if let Some((_, old, _)) = self.map.insert(key.to_string(), (self.tick, rows, value)) {
            self.rows -= old;
        }
        self.rows += rows;
        while self.rows > MAX_CACHED_ROWS && self.map.len() > 1 {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (t, _, _))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, n, _)) = self.map.remove(&oldest) {
                self.rows -= n;
            }
        }
    }
}

//! What a warm committer knows of a keyed table's live rows between
//! commits: for each live data file, the rows the table's position deletes
//! remove and the keys of the rest. Delete files never change, so each is
//! folded in once, when it first appears: a commit pays for the deletes new
//! since the last one, not for every delete the table has gathered, and a
//! file whose rows are mostly gone keeps only its live rows' keys. Memory
//! follows the table's live rows, not its history: a stream that never
//! compacts keeps adding files whose rows die, and a dead row costs a bit.
//!
//! Nothing here is trusted past what the table says: a delete file folded in
//! that the table no longer holds (a rollback, a rewrite of its deletes)
//! starts the table over, and a file's deletion vector is taken whole each
//! time it changes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, SchemaRef};
use roaring::RoaringBitmap;
use tracing::warn;
use uuid::Uuid;

use super::live::{LiveFile, LiveFiles};
use super::locate::{FileKeys, Locator, lock, read_keys};
use crate::lru::Lru;
use crate::write::vector::{file_key, is_vector};

/// Environment variable: megabytes of known rows a committer keeps for all
/// its keyed tables (default 256; keys at 21 bytes a live row, the rest
/// bitmaps). Past it the least recently committed table is dropped, and a
/// table alone larger keeps part of its files, reading the others again
/// each commit: slower, never wrong.
pub const KEY_CACHE_MB_ENV: &str = "FLOE_KEY_CACHE_MB";

/// The bound [`KEY_CACHE_MB_ENV`] sets, in bytes.
pub(super) fn max_known_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let mb = match std::env::var(KEY_CACHE_MB_ENV) {
            Ok(v) => v.trim().parse::<usize>().unwrap_or_else(|_| {
                warn!(
                    value = %v,
                    "{KEY_CACHE_MB_ENV} is not a whole number of megabytes; using 256"
                );
                256
            }),
            Err(_) => 256,
        };
        mb.saturating_mul(1024 * 1024)
    })
}

/// Fewest keys a file keeps before it is worth pruning its dead rows'.
const PRUNE_MIN_KEYS: u64 = 1024;

/// What a commit looks a live data file's keys up in.
#[derive(Debug)]
pub struct LiveRows {
    /// The keys of its live rows (and perhaps some dead ones).
    pub keys: Arc<FileKeys>,
    /// Rows the table's deletes remove.
    pub gone: RoaringBitmap,
    /// The deletion vector it has, by its key: a new one replaces it.
    pub vector: Option<String>,
}

/// One live data file's rows, as the table's deletes leave them.
#[derive(Clone, Debug)]
struct FileRows {
    /// Keys of every row but `pruned`'s.
    keys: Arc<FileKeys>,
    /// Rows deleted by the table's position-delete files and its vector.
    gone: RoaringBitmap,
    /// Rows left out of `keys`: all were gone when they were left out.
    pruned: RoaringBitmap,
    /// Rows the folded position-delete files (not vectors) delete.
    by_files: RoaringBitmap,
    /// The deletion vector folded into `gone`, by its key.
    vector: Option<String>,
    rows: u64,
}

impl FileRows {
    fn new(keys: Arc<FileKeys>, rows: u64) -> Self {
        Self {
            keys,
            gone: RoaringBitmap::new(),
            pruned: RoaringBitmap::new(),
            by_files: RoaringBitmap::new(),
            vector: None,
            rows,
        }
    }

    /// What a commit looks its keys up in; `None` when every row is
    /// deleted: no key can be found in it.
    fn live(&self) -> Option<LiveRows> {
        // Deleted rows are u32 positions: a file with more rows than that
        // always has some left, so it stays a target rather than skipped.
        let all_gone = u32::try_from(self.rows)
            .is_ok_and(|rows| self.gone.range_cardinality(..rows) >= self.rows);
        (!all_gone).then(|| LiveRows {
            keys: self.keys.clone(),
            gone: self.gone.clone(),
            vector: self.vector.clone(),
        })
    }

    fn bytes(&self) -> usize {
        let bits = self.gone.serialized_size() + self.pruned.serialized_size();
        self.keys.len() * 21 + bits + self.by_files.serialized_size()
    }

    /// Keeps only the live rows' keys once a quarter of those kept are
    /// dead, or (`eager`, for a table over its bound) once any is.
    fn prune(&mut self, eager: bool) {
        // `pruned` is within `gone`: what is gone and still kept is dead.
        let held = self.keys.len() as u64;
        let dead = self.gone.len().saturating_sub(self.pruned.len());
        let worth = if eager { dead > 0 } else { dead * 4 > held };
        if held >= PRUNE_MIN_KEYS && worth {
            self.keys = Arc::new(self.keys.without(&self.gone));
            self.pruned = self.gone.clone();
        }
    }
}

/// The known rows of one table's live data files.
#[derive(Clone, Debug, Default)]
pub(super) struct TableRows {
    files: HashMap<String, FileRows>,
    /// Position-delete files (not vectors) folded into `files`, with their
    /// sequence numbers.
    folded: HashMap<String, i64>,
}

impl TableRows {
    fn bytes(&self) -> usize {
        let folded: usize = self.folded.keys().map(|k| k.len() + 32).sum();
        self.files.values().map(FileRows::bytes).sum::<usize>() + folded
    }
}

/// Each keyed table's live rows, by table uuid, bounded by
/// [`KEY_CACHE_MB_ENV`]; read through a [`Locator`].
#[derive(Debug)]
pub struct KnownRows {
    tables: Mutex<Lru<TableRows>>,
}

impl Default for KnownRows {
    fn default() -> Self {
        Self {
            tables: Mutex::new(Lru::weighed(usize::MAX, max_known_bytes())),
        }
    }
}

impl KnownRows {
    /// Each of `live.data`'s rows as the table's position deletes and
    /// vectors leave them, in `live.data`'s order (`None` for a file whose
    /// every row is deleted). `table` is the table's uuid: a table dropped
    /// and created again under its name starts over.
    pub async fn live_rows(
        &self,
        locator: &Locator,
        file_io: &FileIO,
        table: Uuid,
        schema: &SchemaRef,
        key_names: &[String],
        live: &LiveFiles,
    ) -> iceberg::Result<Vec<Option<LiveRows>>> {
        let id = table.to_string();
        // Taken out while it is brought up to date: an error on the way
        // leaves nothing half-folded behind.
        let mut known = lock(&self.tables)
            .take(&id)
            .map(Arc::unwrap_or_clone)
            .unwrap_or_default();
        let positions: Vec<&LiveFile> = live
            .deletes
            .iter()
            .filter(|d| d.file.content_type() == DataContentType::PositionDeletes)
            .collect();
        let live_files: HashSet<&str> = positions
            .iter()
            .filter(|d| !is_vector(&d.file))
            .map(|d| d.file.file_path())
            .collect();
        if known
            .folded
            .keys()
            .any(|k| !live_files.contains(k.as_str()))
        {
            known = TableRows::default();
        }
        let paths: HashSet<&str> = live.data.iter().map(|f| f.file.file_path()).collect();
        known.files.retain(|p, _| paths.contains(p.as_str()));
        let refold = new_files(locator, file_io, schema, key_names, live, &mut known).await?;
        fold_files(locator, file_io, &positions, &refold, &mut known).await?;
        fold_vectors(
            locator, file_io, schema, key_names, live, &positions, &mut known,
        )
        .await?;
        let mut out = Vec::with_capacity(live.data.len());
        for f in &live.data {
            let path = f.file.file_path();
            let Some(rows) = known.files.get_mut(path) else {
                return Err(iceberg::Error::new(
                    iceberg::ErrorKind::Unexpected,
                    format!("{path}: its rows were not read"),
                ));
            };
            rows.prune(false);
            out.push(rows.live());
        }
        let bytes = trim(&mut known);
        lock(&self.tables).put_weighed(&id, Arc::new(known), bytes);
        Ok(out)
    }
}

/// Reads the keys of the live data files `known` does not hold yet;
/// returns those older than a delete file already folded (a file
/// dropped from `known` to bound it, or live again after a rollback),
/// with their sequence numbers: those deletes must be read again for
/// them.
async fn new_files(
    locator: &Locator,
    file_io: &FileIO,
    schema: &SchemaRef,
    key_names: &[String],
    live: &LiveFiles,
    known: &mut TableRows,
) -> iceberg::Result<HashMap<String, i64>> {
    let newest_folded = known.folded.values().max().copied();
    let mut refold = HashMap::new();
    for f in &live.data {
        let path = f.file.file_path();
        if known.files.contains_key(path) {
            continue;
        }
        let keys = locator.keys(file_io, schema, key_names, &f.file).await?;
        locator.forget_keys(path);
        known
            .files
            .insert(path.to_string(), FileRows::new(keys, f.file.record_count()));
        if newest_folded.is_some_and(|n| f.sequence_number <= n) {
            refold.insert(path.to_string(), f.sequence_number);
        }
    }
    Ok(refold)
}

/// Folds in the position-delete files not folded yet, and the folded
/// ones again for the files in `refold` they may name.
async fn fold_files(
    locator: &Locator,
    file_io: &FileIO,
    positions: &[&LiveFile],
    refold: &HashMap<String, i64>,
    known: &mut TableRows,
) -> iceberg::Result<()> {
    let oldest_refold = refold.values().min().copied();
    for d in positions.iter().filter(|d| !is_vector(&d.file)) {
        let path = d.file.file_path();
        let first_time = !known.folded.contains_key(path);
        // A delete applies to data files no newer than itself.
        if !first_time && oldest_refold.is_none_or(|o| d.sequence_number < o) {
            continue;
        }
        let deleted = locator.deleted(file_io, &d.file).await?;
        for (target, rows) in deleted.iter() {
            if !first_time && !refold.contains_key(target) {
                continue;
            }
            if let Some(file) = known.files.get_mut(target) {
                for row in rows {
                    file.by_files.insert(*row);
                    file.gone.insert(*row);
                }
            }
        }
        known.folded.insert(path.to_string(), d.sequence_number);
    }
    Ok(())
}

/// Takes each file's deletion vector whole when it is not the one
/// folded: a vector replaces its file's earlier one, and one taken back
/// (a rollback) may hold fewer rows.
async fn fold_vectors(
    locator: &Locator,
    file_io: &FileIO,
    schema: &SchemaRef,
    key_names: &[String],
    live: &LiveFiles,
    positions: &[&LiveFile],
    known: &mut TableRows,
) -> iceberg::Result<()> {
    let data: HashMap<&str, &LiveFile> =
        live.data.iter().map(|f| (f.file.file_path(), f)).collect();
    let mut vectors: HashMap<String, &LiveFile> = HashMap::new();
    for d in positions.iter().filter(|d| is_vector(&d.file)) {
        if let Some(target) = d.file.referenced_data_file() {
            vectors.insert(target, d);
        }
    }
    for (path, file) in known.files.iter_mut() {
        let now = vectors.get(path.as_str());
        let key = now.map(|d| file_key(&d.file));
        if file.vector.as_deref() == key.as_deref() {
            continue;
        }
        let mut gone = file.by_files.clone();
        if let Some(d) = now {
            for rows in locator.deleted(file_io, &d.file).await?.values() {
                gone.extend(rows.iter().copied());
            }
        }
        if !file.pruned.is_subset(&gone) {
            // Rows left out of its keys are live again: read them all.
            // (Every file known is live: `live_rows` kept no other.)
            if let Some(f) = data.get(path.as_str()) {
                file.keys = Arc::new(read_keys(file_io, schema, key_names, &f.file).await?);
                file.pruned.clear();
            }
        }
        file.gone = gone;
        file.vector = key.map(|k| k.into_owned());
    }
    Ok(())
}

/// Prunes every file, then drops files' rows until the table weighs no more
/// than [`max_known_bytes`]; a file dropped is read again when next asked.
/// Returns what the table then weighs.
fn trim(known: &mut TableRows) -> usize {
    let max = max_known_bytes();
    let bytes = known.bytes();
    if bytes <= max {
        return bytes;
    }
    // Dead rows' keys go before any file does.
    for file in known.files.values_mut() {
        file.prune(true);
    }
    let mut bytes = known.bytes();
    if bytes <= max {
        return bytes;
    }
    let paths: Vec<String> = known.files.keys().cloned().collect();
    for path in paths {
        if bytes <= max {
            break;
        }
        if let Some(file) = known.files.remove(&path) {
            bytes = bytes.saturating_sub(file.bytes());
        }
    }
    bytes
}

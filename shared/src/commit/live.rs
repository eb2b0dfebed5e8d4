//! The files a table's current snapshot holds: what copy-on-write commits and
//! compaction read and replace.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, ManifestContentType, ManifestFile, ManifestList, TableMetadata};
use uuid::Uuid;

/// Live entries a manifest cache holds, over every table, before it starts
/// over: a data file's entry with its column stats takes about a kilobyte.
const MAX_CACHED_ENTRIES: usize = 256 * 1024;

/// A live data file of the current snapshot.
#[derive(Debug, Clone)]
pub struct LiveFile {
    /// The file.
    pub file: DataFile,
    /// Its partition spec.
    pub spec_id: i32,
    /// Its data sequence number: an equality delete applies to it only when
    /// its own is higher.
    pub sequence_number: i64,
    /// The row id of its first row (format v3), written or inherited.
    pub first_row_id: Option<i64>,
}

/// The live files of the current snapshot.
#[derive(Debug, Clone, Default)]
pub struct LiveFiles {
    /// Data files.
    pub data: Vec<LiveFile>,
    /// Delete files (position and equality).
    pub deletes: Vec<LiveFile>,
}

/// The live entries of one manifest, each with its own sequence number.
type Entries = Arc<Vec<(DataFile, Option<i64>)>>;

/// Manifests already read, per table. A manifest never changes once written
/// and a snapshot carries most of its parent's, so a committer that keeps
/// this reads only the manifests new since its last commit: without it a
/// keyed table's N-th commit read all N manifests before it (a 100-chunk
/// Postgres copy spent a third of its CPU there). Each table keeps only the
/// manifests of the snapshot it last read.
#[derive(Debug, Default)]
pub struct ManifestCache {
    tables: Mutex<HashMap<Uuid, HashMap<String, Entries>>>,
}

impl ManifestCache {
    fn get(&self, table: Uuid, path: &str) -> Option<Entries> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.get(&table)?.get(path).cloned()
    }

    /// Keeps `read` as the table's manifests, dropping what it no longer lists.
    fn keep(&self, table: Uuid, read: HashMap<String, Entries>) {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.insert(table, read);
        let held: usize = tables
            .values()
            .flat_map(|t| t.values())
            .map(|e| e.len())
            .sum();
        if held > MAX_CACHED_ENTRIES {
            tables.retain(|t, _| *t == table);
        }
    }
}

impl LiveFiles {
    /// Reads every manifest of the table's current snapshot.
    pub async fn load(file_io: &FileIO, metadata: &TableMetadata) -> iceberg::Result<Self> {
        Self::load_cached(file_io, metadata, &ManifestCache::default()).await
    }

    /// [`LiveFiles::load`], reading only the manifests `cache` does not hold.
    pub async fn load_cached(
        file_io: &FileIO,
        metadata: &TableMetadata,
        cache: &ManifestCache,
    ) -> iceberg::Result<Self> {
        let mut live = LiveFiles::default();
        let Some(snapshot) = metadata.current_snapshot() else {
            return Ok(live);
        };
        let bytes = file_io.new_input(snapshot.manifest_list())?.read().await?;
        let list = ManifestList::parse_with_version(&bytes, metadata.format_version())?;
        let table = metadata.uuid();
        let mut read = HashMap::with_capacity(list.entries().len());
        for m in list.entries() {
            let entries = match cache.get(table, &m.manifest_path) {
                Some(entries) => entries,
                None => alive(m, file_io).await?,
            };
            let into = match m.content {
                ManifestContentType::Data => &mut live.data,
                ManifestContentType::Deletes => &mut live.deletes,
            };
            // Rows inherit ids in entry order from the manifest's first.
            let mut next = m
                .first_row_id
                .and_then(|id| i64::try_from(id).ok())
                .filter(|_| m.content == ManifestContentType::Data);
            into.extend(entries.iter().map(|(file, seq)| {
                let first_row_id = file.first_row_id().or_else(|| {
                    let id = next?;
                    next = id.checked_add(file.record_count() as i64);
                    Some(id)
                });
                LiveFile {
                    file: file.clone(),
                    spec_id: m.partition_spec_id,
                    sequence_number: seq.unwrap_or(m.sequence_number),
                    first_row_id,
                }
            }));
            read.insert(m.manifest_path.clone(), entries);
        }
        cache.keep(table, read);
        Ok(live)
    }
}

/// The live entries of manifest `m`, read from storage.
async fn alive(m: &ManifestFile, file_io: &FileIO) -> iceberg::Result<Entries> {
    let manifest = m.load_manifest(file_io).await?;
    Ok(Arc::new(
        manifest
            .entries()
            .iter()
            .filter(|e| e.is_alive())
            .map(|e| (e.data_file().clone(), e.sequence_number()))
            .collect(),
    ))
}

//! The files a table's current snapshot holds: what copy-on-write commits and
//! compaction read and replace.

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, ManifestContentType, ManifestList, TableMetadata};

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
}

/// The live files of the current snapshot.
#[derive(Debug, Clone, Default)]
pub struct LiveFiles {
    /// Data files.
    pub data: Vec<LiveFile>,
    /// Delete files (position and equality).
    pub deletes: Vec<LiveFile>,
}

impl LiveFiles {
    /// Reads every manifest of the table's current snapshot.
    pub async fn load(file_io: &FileIO, metadata: &TableMetadata) -> iceberg::Result<Self> {
        let mut live = LiveFiles::default();
        let Some(snapshot) = metadata.current_snapshot() else {
            return Ok(live);
        };
        let bytes = file_io.new_input(snapshot.manifest_list())?.read().await?;
        let list = ManifestList::parse_with_version(&bytes, metadata.format_version())?;
        for m in list.entries() {
            let manifest = m.load_manifest(file_io).await?;
            let into = match m.content {
                ManifestContentType::Data => &mut live.data,
                ManifestContentType::Deletes => &mut live.deletes,
            };
            for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                into.push(LiveFile {
                    file: e.data_file().clone(),
                    spec_id: m.partition_spec_id,
                    sequence_number: e.sequence_number().unwrap_or(m.sequence_number),
                });
            }
        }
        Ok(live)
    }
}

//! CommitRequest v2: what a writer hands the committer through the commit queue.
//!
//! ```json
//! {
//!   "version": 2,
//!   "table": {"namespace": ["bronze"], "name": "events"},
//!   "batch_id": "5f0c…",                      // deterministic, from the source positions
//!   "sources": [{"source": "kafka:orders/3",
//!                "positions": {"kind": "range", "first": "100", "last": "199"},
//!                "stream": true}],
//!   "schema_id": 0, "spec_id": 0,              // the table schema / partition spec the files were written with
//!   "data_files": [ { … } ],                  // iceberg DataFile JSON (see `data_files`)
//!   "delete_files": [], "keyed": false,     // "truncate": true when the batch emptied the table first
//!   "record_count": 100, "rejected_count": 0,
//!   "created_at_ms": 1764496800000,
//!   "oldest_record_ms": 1764496799250,         // optional: the oldest record's arrival at its source
//!   "key_file": "s3://…/metadata/floe-ledger/keys/….json.zst"  // keyed: each key's last change
//! }
//! ```
//!
//! Version 2 makes idempotency per record: each span names every record of
//! the batch (a range claims every record of an ordered source between its
//! first and last position, ids name an unordered source's records), data
//! files carry each row's record in their Parquet footer (`floe.rows`), and a
//! keyed request names its key file. Version 1 requests are still read and
//! committed by batch id alone.
//!
//! Files are encoded with iceberg-rust's `serialize_data_file_to_json` (the
//! manifest-entry shape: bounds as binary single-value serialisation), bound to
//! the request's `spec_id` (partition type) and `schema_id`. A reader that does
//! not know `version` must refuse the request rather than guess.

use iceberg::TableIdent;
use iceberg::spec::{DataFile, FormatVersion, TableMetadata};
use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorKind};
use crate::ident::display;
use crate::source::SourceSpan;

/// The wire format version this build writes.
pub const VERSION: u32 = 2;
/// The oldest wire format version this build reads.
pub const OLDEST_VERSION: u32 = 1;

/// A request to commit the files of one writer batch to one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRequest {
    /// Wire format version, always [`VERSION`].
    pub version: u32,
    /// The target table.
    pub table: TableIdent,
    /// Deterministic id of the source batch; the committer's idempotency key.
    pub batch_id: String,
    /// The source positions the batch covers.
    pub sources: Vec<SourceSpan>,
    /// The uuid of the table the files were written for: a table of the same
    /// name created since (dropped, created again) is another table, whose
    /// schema ids name other fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_uuid: Option<String>,
    /// Schema id the files were written with.
    pub schema_id: i32,
    /// Partition spec id the files were written with.
    pub spec_id: i32,
    /// Data files, as iceberg DataFile JSON.
    pub data_files: Vec<serde_json::Value>,
    /// Delete files, as iceberg DataFile JSON.
    #[serde(default)]
    pub delete_files: Vec<serde_json::Value>,
    /// A keyed (upsert/delete) batch: committed as its own snapshot, in source order.
    #[serde(default)]
    pub keyed: bool,
    /// The batch truncated the table: every row committed before it is removed
    /// first (a keyed batch holding a TRUNCATE).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncate: bool,
    /// Where in its source that TRUNCATE is, so a redelivery of a batch whose
    /// TRUNCATE the table already applied does not apply it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate_at: Option<crate::source::Position>,
    /// Source state to record in the snapshot summary as `floe.state.<key>`
    /// (e.g. a Postgres snapshot's progress), committed atomically with the files.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub state: std::collections::BTreeMap<String, String>,
    /// Records written to the data files.
    pub record_count: u64,
    /// Records of the batch sent to the dead-letter location.
    #[serde(default)]
    pub rejected_count: u64,
    /// When the writer created the request (ms since epoch).
    pub created_at_ms: i64,
    /// When the batch's oldest record reached its source (ms since epoch),
    /// when the source says; the committer reports freshness from it, and
    /// looks no further back for records it may already hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_record_ms: Option<i64>,
    /// A keyed request's key file (see [`crate::ledger::KeyFile`]): every
    /// key it changes with the position of the key's last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
    /// Spans of other sources the request's changes first came from (a
    /// replay of dead letters): not claimed by it, but its keyed changes
    /// are ordered after the later changes those sources committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<SourceSpan>,
}

/// A request that cannot be encoded, decoded or bound to its table.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Not JSON of the expected shape.
    #[error("commit request is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A version this build does not read.
    #[error(
        "commit request version {found} is not supported (this build reads {OLDEST_VERSION} to {VERSION})"
    )]
    Version {
        /// The version found.
        found: u32,
    },
    /// The request names a schema or spec the table does not have.
    #[error("commit request {batch_id} for {table}: {reason}")]
    Unbound {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// What is missing.
        reason: String,
    },
    /// iceberg-rust could not encode or decode a file entry.
    #[error("commit request {batch_id} for {table}: data file: {source}")]
    File {
        /// The table.
        table: String,
        /// The batch.
        batch_id: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
}

/// A request floe cannot read or bind fails the same way each time it comes.
impl Classify for RequestError {
    fn kind(&self) -> ErrorKind {
        match self {
            RequestError::Version { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::Input,
        }
    }
}

impl CommitRequest {
    /// The request of batch `batch_id` for `table`, covering `sources`,
    /// created now, with no files yet: the writer adds them with
    /// [`Self::with_files`] and the rest through the other `with_` methods.
    pub fn new(table: TableIdent, batch_id: String, sources: Vec<SourceSpan>) -> Self {
        Self {
            version: VERSION,
            table,
            batch_id,
            sources,
            table_uuid: None,
            schema_id: 0,
            spec_id: 0,
            data_files: Vec::new(),
            delete_files: Vec::new(),
            keyed: false,
            truncate: false,
            truncate_at: None,
            state: Default::default(),
            record_count: 0,
            rejected_count: 0,
            created_at_ms: crate::clock::now_ms(),
            oldest_record_ms: None,
            key_file: None,
            order: Vec::new(),
        }
    }

    /// The data and delete files written with schema `schema_id` and spec
    /// `spec_id` of `metadata`, and the records the data files hold.
    pub fn with_files(
        mut self,
        metadata: &TableMetadata,
        (schema_id, spec_id): (i32, i32),
        data: Vec<DataFile>,
        deletes: Vec<DataFile>,
        records: u64,
    ) -> Result<Self, RequestError> {
        let ctx = (&self.table, self.batch_id.as_str());
        self.data_files = Self::encode_files(metadata, spec_id, data, ctx)?;
        self.delete_files = Self::encode_files(metadata, spec_id, deletes, ctx)?;
        self.table_uuid = Some(metadata.uuid().to_string());
        self.schema_id = schema_id;
        self.spec_id = spec_id;
        self.record_count = records;
        Ok(self)
    }

    /// A keyed batch (committed as its own snapshot), which may truncate
    /// the table first and names the keys it changes in `key_file`.
    pub fn keyed(mut self, truncate: bool, key_file: Option<String>) -> Self {
        self.keyed = true;
        self.truncate = truncate;
        self.key_file = key_file;
        self
    }

    /// The source state committed with the files, the records the batch
    /// dead-lettered and when its oldest record reached the source.
    pub fn with_source(
        mut self,
        state: std::collections::BTreeMap<String, String>,
        rejected: u64,
        oldest_ms: Option<i64>,
    ) -> Self {
        self.state = state;
        self.rejected_count = rejected;
        self.oldest_record_ms = oldest_ms;
        self
    }

    /// The spans of the sources its changes first came from (see
    /// [`Self::order`]).
    pub fn ordered_after(mut self, order: Vec<SourceSpan>) -> Self {
        self.order = order;
        self
    }

    /// Encodes files of a table with the given spec into request entries.
    pub fn encode_files(
        metadata: &TableMetadata,
        spec_id: i32,
        files: Vec<DataFile>,
        ctx: (&TableIdent, &str),
    ) -> Result<Vec<serde_json::Value>, RequestError> {
        let partition_type = partition_type(metadata, spec_id, ctx)?;
        let version = metadata.format_version().max(FormatVersion::V2);
        files
            .into_iter()
            .map(|f| {
                let json = iceberg::spec::serialize_data_file_to_json(f, &partition_type, version)
                    .map_err(|source| file_err(ctx, source))?;
                Ok(serde_json::from_str(&json)?)
            })
            .collect()
    }

    /// Decodes the data files against the table's metadata.
    pub fn data_files(&self, metadata: &TableMetadata) -> Result<Vec<DataFile>, RequestError> {
        self.decode(metadata, &self.data_files)
    }

    /// Decodes the delete files against the table's metadata.
    pub fn delete_files(&self, metadata: &TableMetadata) -> Result<Vec<DataFile>, RequestError> {
        self.decode(metadata, &self.delete_files)
    }

    fn decode(
        &self,
        metadata: &TableMetadata,
        files: &[serde_json::Value],
    ) -> Result<Vec<DataFile>, RequestError> {
        let ctx = (&self.table, self.batch_id.as_str());
        let uuid = metadata.uuid().to_string();
        if let Some(written) = self.table_uuid.as_ref().filter(|w| **w != uuid) {
            return Err(RequestError::Unbound {
                table: display(&self.table),
                batch_id: self.batch_id.clone(),
                reason: format!(
                    "its files were written for table uuid {written}, dropped since; the table of this name now is {uuid}, so nothing of it is committed there (replay the source to write it anew)"
                ),
            });
        }
        let partition_type = partition_type(metadata, self.spec_id, ctx)?;
        let schema =
            metadata
                .schema_by_id(self.schema_id)
                .ok_or_else(|| RequestError::Unbound {
                    table: display(&self.table),
                    batch_id: self.batch_id.clone(),
                    reason: format!("table has no schema {}", self.schema_id),
                })?;
        files
            .iter()
            .map(|v| {
                iceberg::spec::deserialize_data_file_from_json(
                    &v.to_string(),
                    self.spec_id,
                    &partition_type,
                    schema,
                )
                .map_err(|source| file_err(ctx, source))
            })
            .collect()
    }

    /// The earliest commit time at which records of this request may
    /// already have been committed: nothing holding one of its records was
    /// made before the record reached its source (`oldest_record_ms`), and a
    /// later delivery was made after this request. Unknown arrival: no bound.
    pub fn lookback_ms(&self) -> i64 {
        let made = self.created_at_ms;
        match self.oldest_record_ms {
            Some(oldest) => oldest.min(made).saturating_sub(crate::clock::SKEW_MS),
            None => i64::MIN,
        }
    }

    /// When this request or its records were first seen: its creation, or
    /// its oldest record's arrival when earlier (a retried HTTP key carries
    /// its first receipt). A redelivery cannot move it later.
    pub fn first_seen_ms(&self) -> i64 {
        self.oldest_record_ms
            .map_or(self.created_at_ms, |o| o.min(self.created_at_ms))
    }

    /// True for requests of version 2 and later, whose records the ledger
    /// tracks one by one.
    pub fn per_record(&self) -> bool {
        self.version >= 2
    }

    /// Every file the request names: data files, delete files, its key file.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.data_files
            .iter()
            .chain(&self.delete_files)
            .filter_map(|f| f.get("file_path").and_then(serde_json::Value::as_str))
            .chain(self.key_file.as_deref())
    }

    /// Why the request cannot be trusted with a table at `location` whose
    /// ledger is in `ledger_dir`: a data or delete file outside the table,
    /// a key file outside both, or a file entry without a path.
    pub fn foreign_file(&self, location: &str, ledger_dir: &str) -> Option<String> {
        let named = self.data_files.len() + self.delete_files.len();
        let with_path = self
            .data_files
            .iter()
            .chain(&self.delete_files)
            .filter(|f| {
                f.get("file_path")
                    .and_then(serde_json::Value::as_str)
                    .is_some()
            })
            .count();
        if with_path != named {
            return Some(format!(
                "{} of its file entries have no file_path",
                named - with_path
            ));
        }
        if let Some(p) = self
            .key_file
            .as_deref()
            .filter(|p| !crate::uri::within(p, location) && !crate::uri::within(p, ledger_dir))
        {
            return Some(format!(
                "its key file {p} is neither under the table's location {location} nor in its ledger {ledger_dir}"
            ));
        }
        self.data_files
            .iter()
            .chain(&self.delete_files)
            .filter_map(|f| f.get("file_path").and_then(serde_json::Value::as_str))
            .find(|p| !crate::uri::within(p, location))
            .map(|p| format!("it names {p}, which is not under the table's location {location}"))
    }

    /// Serialises the request for the queue.
    pub fn to_bytes(&self) -> Result<Vec<u8>, RequestError> {
        Ok(serde_json::to_vec(self)?)
    }

    /// Parses a request from the queue, refusing versions this build does not read.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RequestError> {
        #[derive(Deserialize)]
        struct Probe {
            version: u32,
        }
        let probe: Probe = serde_json::from_slice(bytes)?;
        if !(OLDEST_VERSION..=VERSION).contains(&probe.version) {
            return Err(RequestError::Version {
                found: probe.version,
            });
        }
        Ok(serde_json::from_slice(bytes)?)
    }
}

fn partition_type(
    metadata: &TableMetadata,
    spec_id: i32,
    (table, batch_id): (&TableIdent, &str),
) -> Result<iceberg::spec::StructType, RequestError> {
    let unbound = |reason: String| RequestError::Unbound {
        table: display(table),
        batch_id: batch_id.to_string(),
        reason,
    };
    let spec = metadata
        .partition_spec_by_id(spec_id)
        .ok_or_else(|| unbound(format!("table has no partition spec {spec_id}")))?;
    spec.partition_type(metadata.current_schema())
        .map_err(|e| unbound(e.to_string()))
}

fn file_err((table, batch_id): (&TableIdent, &str), source: iceberg::Error) -> RequestError {
    RequestError::File {
        table: display(table),
        batch_id: batch_id.to_string(),
        source: Box::new(source),
    }
}

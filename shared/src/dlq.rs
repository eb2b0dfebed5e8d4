//! The dead-letter location: records that can never be written go here, with
//! the table, batch, source position, field and reason, as NDJSON. A writer
//! puts them here before it enqueues its commit request, so a batch is only
//! acknowledged once every record is either in a data file or dead-lettered.

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::TableIdent;
use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};

use crate::ident::display;

/// One rejected record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// The table it was meant for.
    pub table: String,
    /// The batch it came in.
    pub batch_id: String,
    /// Its source.
    pub source: String,
    /// Its position in the source (e.g. line number, offset).
    pub position: String,
    /// The field at fault; empty when the whole record is.
    pub field: String,
    /// Why it was rejected.
    pub reason: String,
    /// The record as received (lossy UTF-8).
    pub record: String,
}

/// Why dead-lettering failed (the batch must then fail, not be acknowledged).
#[derive(Debug, thiserror::Error)]
#[error("dead-letter write for {table} batch {batch_id} to {location}: {source}")]
pub struct DlqError {
    /// The table.
    pub table: String,
    /// The batch.
    pub batch_id: String,
    /// Where it tried to write.
    pub location: String,
    /// The storage error.
    pub source: Box<iceberg::Error>,
}

/// A commit request the committer would not commit, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedRequest {
    /// The table it names (`ns.table`), empty when unreadable.
    pub table: String,
    /// Its batch id, or the queue message's id when unreadable.
    pub id: String,
    /// Why it was not committed.
    pub reason: String,
    /// The message body as received (lossy UTF-8).
    pub body: String,
}

/// Where rejected records and refused commit requests go.
#[async_trait]
pub trait DeadLetters: std::fmt::Debug + Send + Sync {
    /// Stores the rejected records of one batch durably; returns their location.
    async fn put(
        &self,
        table: &TableIdent,
        batch_id: &str,
        records: &[Rejected],
    ) -> Result<String, DlqError>;

    /// Stores a refused commit request durably; returns its location.
    async fn put_request(&self, refused: &RefusedRequest) -> Result<String, DlqError>;
}

/// Dead letters as NDJSON objects under a storage prefix:
/// `<prefix>/<namespace>/<table>/<batch id>.ndjson`, one file per batch, so a
/// redelivered batch overwrites rather than duplicates its dead letters.
#[derive(Debug, Clone)]
pub struct StorageDeadLetters {
    file_io: FileIO,
    prefix: String,
}

impl StorageDeadLetters {
    /// Dead letters under `prefix` (e.g. `file:///w/_floe/dlq`, `s3://b/_floe/dlq`).
    pub fn new(file_io: FileIO, prefix: impl Into<String>) -> Self {
        Self {
            file_io,
            prefix: prefix.into().trim_end_matches('/').to_string(),
        }
    }

    /// Writes `body` at `location`, whose failure names `table` and `batch_id`.
    async fn write(
        &self,
        table: String,
        batch_id: String,
        location: String,
        body: Vec<u8>,
    ) -> Result<String, DlqError> {
        let err = |source| DlqError {
            table: table.clone(),
            batch_id: batch_id.clone(),
            location: location.clone(),
            source: Box::new(source),
        };
        self.file_io
            .new_output(&location)
            .map_err(err)?
            .write(Bytes::from(body))
            .await
            .map_err(err)?;
        Ok(location)
    }
}

#[async_trait]
impl DeadLetters for StorageDeadLetters {
    async fn put(
        &self,
        table: &TableIdent,
        batch_id: &str,
        records: &[Rejected],
    ) -> Result<String, DlqError> {
        let location = format!(
            "{}/{}/{}/{batch_id}.ndjson",
            self.prefix,
            table.namespace().join("."),
            table.name()
        );
        let mut body = Vec::new();
        for r in records {
            // Serialising plain strings cannot fail.
            if serde_json::to_writer(&mut body, r).is_ok() {
                body.push(b'\n');
            }
        }
        self.write(display(table), batch_id.to_string(), location, body)
            .await
    }

    async fn put_request(&self, refused: &RefusedRequest) -> Result<String, DlqError> {
        // Outside every table's directory, so record replays never read them.
        let table = if refused.table.is_empty() {
            "_unreadable"
        } else {
            refused.table.as_str()
        };
        let location = format!("{}/_requests/{table}/{}.json", self.prefix, refused.id);
        let body = serde_json::to_vec(refused).unwrap_or_default();
        self.write(refused.table.clone(), refused.id.clone(), location, body)
            .await
    }
}

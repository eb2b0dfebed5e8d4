//! The dead-letter location: records that can never be written go here, with
//! the table, batch, source position, field and reason, as NDJSON. A writer
//! puts them here before it enqueues its commit request, so a batch is only
//! acknowledged once every record is either in a data file or dead-lettered.

mod filter;
mod fix;

pub use filter::{Filter, parse_age};
pub use fix::{Conversion, Fix};

use std::collections::HashMap;

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use iceberg::TableIdent;
use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorKind};
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
    /// The record as received, as text: exact when it is UTF-8, else a
    /// readable preview (invalid bytes replaced) beside `record_base64`.
    pub record: String,
    /// The record's exact bytes in base64, when they are not UTF-8 (older
    /// dead letters never have it: their `record` is all there is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_base64: Option<String>,
    /// How many replays rejected the record again before this one (`source`
    /// and `position` stay those of its first delivery).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replays: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Rejected {
    /// The text and, when the bytes are not UTF-8, base64 fields that keep
    /// `record` exactly.
    pub fn encode_record(record: &[u8]) -> (String, Option<String>) {
        match std::str::from_utf8(record) {
            Ok(text) => (text.to_string(), None),
            Err(_) => (
                String::from_utf8_lossy(record).into_owned(),
                Some(base64::engine::general_purpose::STANDARD.encode(record)),
            ),
        }
    }

    /// The record's bytes exactly as received; `None` when its base64 is
    /// damaged (replaying the preview instead would change the record).
    pub fn bytes(&self) -> Option<Bytes> {
        match &self.record_base64 {
            None => Some(Bytes::from(self.record.clone())),
            Some(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .ok()
                .map(Bytes::from),
        }
    }

    /// The record's id in a replay batch: its first source and position, so
    /// two dead letters of one record (a batch delivered twice) replay
    /// once, and each later replay round is a record of its own.
    pub fn replay_id(&self) -> String {
        match self.replays {
            0 => format!("{}|{}", self.source, self.position),
            n => format!("{}|{}|replay {n}", self.source, self.position),
        }
    }

    /// The reason with the record's own values taken out (`expected a JSON
    /// integer (long), got the string <value>`): what groups a thousand
    /// rejections of one problem into one line.
    pub fn reason_class(&self) -> String {
        crate::redact::redact(&self.reason, self.record.as_bytes())
    }

    /// Where the record first came from, for replaying it.
    pub fn origin(&self) -> Origin {
        Origin {
            source: self.source.clone(),
            position: self.position.clone(),
            replays: self.replays,
        }
    }
}

/// Where a replayed record first came from: the source and position its
/// dead letter names, and the replays that rejected it since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The source, as its spans name it (`file:/p@…`, `kafka:t/0`).
    pub source: String,
    /// Its position there, as dead letters write it (`line 5`, an offset).
    pub position: String,
    /// Replays that rejected it again.
    pub replays: u32,
}

/// The records of a dead-letter replay, each with its id in the replay
/// batch and its origin, so a keyed replay is ordered by its records'
/// original positions and a record rejected again keeps its origin.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    records: Vec<(String, Bytes)>,
    origins: Vec<Origin>,
    index: HashMap<String, usize>,
}

impl Replayed {
    /// Adds a record under `id`; a second record with an id already taken
    /// (two dead letters of one record) is left out.
    pub fn push(&mut self, id: String, bytes: Bytes, origin: Origin) {
        if self.index.contains_key(&id) {
            return;
        }
        self.index.insert(id.clone(), self.records.len());
        self.records.push((id, bytes));
        self.origins.push(origin);
    }

    /// The records with their ids, in replay order.
    pub fn records(&self) -> &[(String, Bytes)] {
        &self.records
    }

    /// The origins, one per record, in the same order.
    pub fn origins(&self) -> &[Origin] {
        &self.origins
    }

    /// Where the record with replay id `id` came from.
    pub fn origin(&self, id: &str) -> Option<&Origin> {
        self.index.get(id).map(|i| &self.origins[*i])
    }
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

/// Storage failed; the batch fails and its records come again.
impl Classify for DlqError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Service
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(record: &[u8]) -> Rejected {
        let (text, base64) = Rejected::encode_record(record);
        Rejected {
            table: "t.a".into(),
            batch_id: "b".into(),
            source: "file:/in.ndjson@00aa".into(),
            position: "line 3".into(),
            field: String::new(),
            reason: "bad".into(),
            record: text,
            record_base64: base64,
            replays: 0,
        }
    }

    #[test]
    fn records_keep_their_exact_bytes_and_utf8_stays_plain_text() {
        let latin1 = rejected(b"{\"s\":\"caf\xe9\"}");
        assert_eq!(latin1.record, "{\"s\":\"caf\u{fffd}\"}");
        let line = serde_json::to_string(&latin1).unwrap();
        let back: Rejected = serde_json::from_str(&line).unwrap();
        assert_eq!(back.bytes().unwrap(), &b"{\"s\":\"caf\xe9\"}"[..]);

        let plain = rejected("{\"s\":\"café\"}".as_bytes());
        let line = serde_json::to_string(&plain).unwrap();
        assert!(!line.contains("record_base64") && !line.contains("replays"));
        assert_eq!(plain.bytes().unwrap(), "{\"s\":\"café\"}".as_bytes());
    }

    #[test]
    fn dead_letters_written_before_bytes_were_kept_still_read() {
        let old = r#"{"table":"t.a","batch_id":"b","source":"s","position":"line 1","field":"","reason":"r","record":"{}"}"#;
        let e: Rejected = serde_json::from_str(old).unwrap();
        assert_eq!(e.bytes().unwrap(), &b"{}"[..]);
        assert_eq!(e.replay_id(), "s|line 1");
        let mut damaged = e.clone();
        damaged.record_base64 = Some("not base64!".into());
        assert!(damaged.bytes().is_none());
    }

    #[test]
    fn each_replay_round_is_a_record_of_its_own_and_copies_replay_once() {
        let mut e = rejected(b"{}");
        let first = e.replay_id();
        e.replays = 1;
        assert_ne!(e.replay_id(), first);
        let mut r = Replayed::default();
        r.push(first.clone(), Bytes::from_static(b"{}"), e.origin());
        r.push(first.clone(), Bytes::from_static(b"{}"), e.origin());
        assert_eq!(r.records().len(), 1);
        assert_eq!(r.origin(&first).unwrap().position, "line 3");
    }
}

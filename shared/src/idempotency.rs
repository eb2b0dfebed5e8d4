//! HTTP idempotency keys bound to their body: the first POST with a key
//! records the hash of its body and, once written, its answer; a retry with
//! the same key and body gets that answer again, the same key with another
//! body gets 422. Records live beside the warehouse (`_floe/http-keys/`),
//! one small object per key and table uuid (a table dropped and created
//! again starts with none), for the key window from the key's first
//! receipt; the commit itself is kept exactly-once by the table's ledger (the
//! batch id derives from key and body), so a first POST that crashed halfway
//! is simply written again. Every retry is dated by the key's first receipt,
//! not its own: the ledger looks for the batch from then on, however long
//! the client took to retry. The window bounds how long the first answer
//! is replayed without asking the table: after it, a retry is answered the
//! same while the ledger holds its batch, and otherwise written again as at
//! its first receipt. Only another body frees a key whose window passed.

use bytes::Bytes;
use iceberg::io::FileIO;
use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorKind};
use crate::source::Position;

/// What a key's record holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The body's hash (xxh3-128, hex).
    pub body_hash: String,
    /// The batch the body became.
    pub batch_id: String,
    /// When the key was first used (ms since epoch).
    pub created_ms: i64,
    /// Where its first receipt stands in the order of receipts
    /// ([`crate::http::order`]); `None` in records of earlier builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Position>,
    /// The first answer, once the records were written: status and body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<(u16, serde_json::Value)>,
}

/// Whose a key is: the table, by name and uuid (a table dropped and
/// created again has a new one), and the key as the client sent it.
#[derive(Debug, Clone, Copy)]
pub struct KeyOf<'a> {
    /// The table's name.
    pub table: &'a str,
    /// The table's uuid.
    pub uuid: &'a str,
    /// The Idempotency-Key.
    pub key: &'a str,
}

/// When a request was received, and where it stands in the order of
/// receipts.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// Ms since epoch.
    pub ms: i64,
    /// Its place in the order ([`crate::http::order`]).
    pub order: Position,
}

/// What a POST with an idempotency key may do.
#[derive(Debug, Clone, PartialEq)]
pub enum Use {
    /// Write the records (a first use, or a retry of one that did not finish).
    Write {
        /// The key's first receipt (this one, for a first use): the
        /// batch's records are dated and ordered by it.
        first: Receipt,
    },
    /// Answer as the first time.
    Replay {
        /// The first answer's status.
        status: u16,
        /// The first answer's body.
        answer: serde_json::Value,
        /// When the key was first received.
        first_ms: i64,
    },
    /// The key's window has passed since its first answer: answered as
    /// then while the table's ledger holds its batch, and otherwise written
    /// again as at its first receipt (so a retry never reorders it after
    /// changes received since, nor leaves a second request that commits it
    /// anew after another engine's rollback).
    Lapsed {
        /// The first answer's status.
        status: u16,
        /// The first answer's body.
        answer: serde_json::Value,
        /// The key's first receipt.
        first: Receipt,
    },
    /// The key was used for another body: refuse.
    Conflict {
        /// When the key was first used.
        first_ms: i64,
    },
}

/// Why a key record could not be read or written; a retry may help.
#[derive(Debug, thiserror::Error)]
#[error("idempotency record {path}: {source}")]
pub struct KeyError {
    /// The record.
    pub path: String,
    /// The storage error.
    pub source: Box<iceberg::Error>,
}

/// Storage failed; the request can be sent again.
impl Classify for KeyError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Service
    }
}

/// The idempotency records of one deployment.
#[derive(Debug, Clone)]
pub struct HttpKeys {
    file_io: FileIO,
    prefix: String,
    window_ms: i64,
}

impl HttpKeys {
    /// Records under `prefix`, honoured for `window_ms` after first use.
    pub fn new(file_io: FileIO, prefix: impl Into<String>, window_ms: i64) -> Self {
        Self {
            file_io,
            prefix: prefix.into().trim_end_matches('/').to_string(),
            window_ms,
        }
    }

    /// The hash that binds a key to a body.
    pub fn body_hash(body: &[u8]) -> String {
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body))
    }

    fn path(&self, at: &KeyOf<'_>) -> String {
        let name = xxhash_rust::xxh3::xxh3_128(at.key.as_bytes());
        format!("{}/{}/{}/{name:032x}.json", self.prefix, at.table, at.uuid)
    }

    /// Decides what a POST of `body_hash` with key `at`, received as
    /// `now`, may do, and records the key's first use.
    pub async fn begin(
        &self,
        at: &KeyOf<'_>,
        body_hash: &str,
        batch_id: &str,
        now: &Receipt,
    ) -> Result<Use, KeyError> {
        let path = self.path(at);
        if let Some(record) = self.read(&path).await? {
            let lapsed = record.created_ms < now.ms - self.window_ms;
            let first = Receipt {
                ms: record.created_ms,
                // A record of an earlier build: ordered as received now.
                order: record.order.unwrap_or_else(|| now.order.clone()),
            };
            match (record.body_hash == body_hash, record.answer) {
                // Another body once the window passed: the key is free again.
                (false, _) if lapsed => {}
                (false, _) => return Ok(Use::Conflict { first_ms: first.ms }),
                (true, Some((status, answer))) if lapsed => {
                    return Ok(Use::Lapsed {
                        status,
                        answer,
                        first,
                    });
                }
                (true, Some((status, answer))) => {
                    return Ok(Use::Replay {
                        status,
                        answer,
                        first_ms: first.ms,
                    });
                }
                (true, None) => return Ok(Use::Write { first }),
            }
        }
        let record = KeyRecord {
            body_hash: body_hash.to_string(),
            batch_id: batch_id.to_string(),
            created_ms: now.ms,
            order: Some(now.order.clone()),
            answer: None,
        };
        self.write(&path, &record).await?;
        Ok(Use::Write { first: now.clone() })
    }

    /// Records the answer a key's first POST got.
    pub async fn finish(
        &self,
        at: &KeyOf<'_>,
        body_hash: &str,
        batch_id: &str,
        first: &Receipt,
        answer: (u16, serde_json::Value),
    ) -> Result<(), KeyError> {
        let record = KeyRecord {
            body_hash: body_hash.to_string(),
            batch_id: batch_id.to_string(),
            created_ms: first.ms,
            order: Some(first.order.clone()),
            answer: Some(answer),
        };
        self.write(&self.path(at), &record).await
    }

    async fn read(&self, path: &str) -> Result<Option<KeyRecord>, KeyError> {
        let err = |source| KeyError {
            path: path.to_string(),
            source: Box::new(source),
        };
        if !self.file_io.exists(path).await.map_err(err)? {
            return Ok(None);
        }
        let bytes = self
            .file_io
            .new_input(path)
            .map_err(err)?
            .read()
            .await
            .map_err(err)?;
        // A record this build cannot read counts as none: the key is used anew.
        Ok(serde_json::from_slice(&bytes).ok())
    }

    async fn write(&self, path: &str, record: &KeyRecord) -> Result<(), KeyError> {
        let err = |source| KeyError {
            path: path.to_string(),
            source: Box::new(source),
        };
        let body = serde_json::to_vec(record).map_err(|e| {
            err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!("encoding the record: {e}"),
            ))
        })?;
        self.file_io
            .new_output(path)
            .map_err(err)?
            .write(Bytes::from(body))
            .await
            .map_err(err)
    }
}

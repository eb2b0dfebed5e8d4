//! Payloads opened to the records inside, before routing: compressed
//! records (gzip, zstd), AWS envelopes (SNS notifications, EventBridge
//! events, S3 event notifications, CloudWatch Logs subscription data) and
//! schema-registry Avro, each configured per source (`[sources."name"]`) or
//! recognised by its shape.
//!
//! Positions stay exact: a payload that holds several records becomes
//! records named `<id>#<n>` on an unordered source (SQS message ids, so a
//! redelivered message names the same records, and one delivered twice in
//! one batch is opened once), or sharing the payload's position on an
//! ordered one (a Kinesis sequence number, a Kafka offset: its records
//! commit together or not at all). An object an S3 notification names is
//! a source of its own, `s3://bucket/key@version-or-etag`, whose records
//! are its lines.

pub mod avro;
pub mod compress;
pub mod object;
#[cfg(feature = "aws")]
pub mod s3;
mod unwrap;

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use crate::config::EnvelopeKind;
use crate::config::{Config, SourceConfig};
use crate::error::{BoxError, Classify, ErrorKind, Failure, RecordError};
use crate::source::Positions;
use crate::source::{Records, SourceBatch};
pub use object::ObjectRef;

/// What one payload holds once opened.
#[derive(Debug, Clone, PartialEq)]
pub enum Opened {
    /// Records, in order (none for an S3 test event or a CloudWatch Logs
    /// control message).
    Records(Vec<Bytes>),
    /// Objects whose contents are the records.
    Objects(Vec<ObjectRef>),
}

/// Opens one payload as `kind` says: decompressed by magic bytes, then
/// unwrapped (an SNS notification first, whatever is inside it).
pub fn open(payload: &[u8], kind: EnvelopeKind) -> Result<Opened, RecordError> {
    let bytes =
        compress::decompress(payload).map_err(|e| RecordError::envelope("", e.to_string()))?;
    if kind == EnvelopeKind::None {
        return Ok(Opened::Records(vec![Bytes::copy_from_slice(&bytes)]));
    }
    unwrap::open(&bytes, kind)
}

/// A record that could not be opened, carried to the writer step as a
/// marker record so it is dead-lettered there with its position and reason
/// (and claimed by the ledger like any other record of the batch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Undecodable {
    /// The field at fault.
    pub field: String,
    /// Why, and what to do.
    pub reason: String,
    /// The payload as it came, base64.
    pub record: String,
}

/// The marker record's only field.
const UNDECODABLE: &str = "__floe_undecodable";

impl Undecodable {
    /// The marker record for `payload`, rejected for `error`.
    pub fn record(payload: &[u8], error: &RecordError) -> Bytes {
        let marker = serde_json::json!({ UNDECODABLE: Undecodable {
            field: error.field.clone(),
            reason: error.reason.clone(),
            record: BASE64.encode(payload),
        }});
        Bytes::from(marker.to_string())
    }

    /// The rejection a marker record carries; `None` for any other record.
    pub fn of(record: &[u8]) -> Option<Undecodable> {
        if !record.starts_with(b"{\"__floe_undecodable\":") {
            return None;
        }
        let mut v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(record).ok()?;
        serde_json::from_value(v.remove(UNDECODABLE)?).ok()
    }

    /// The payload as dead-letter text: itself when it is UTF-8, else
    /// `base64:` and its base64.
    pub fn record_text(&self) -> String {
        match BASE64.decode(&self.record) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => format!("base64:{}", self.record),
            },
            Err(_) => self.record.clone(),
        }
    }
}

/// A source batch opened: its records unwrapped, and the objects its
/// notifications name (each read as a source batch of its own).
#[derive(Debug)]
pub struct OpenedBatch {
    /// The batch with its records opened and renamed.
    pub batch: SourceBatch,
    /// Objects to read, each with the position of the record naming it.
    pub objects: Vec<(String, ObjectRef)>,
}

/// Why a batch could not be opened now: a schema registry or an object
/// that did not answer, nothing about its records. The batch fails whole
/// and its source delivers it again.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    /// A schema registry did not answer, or refused floe's credentials.
    #[error("source {source_name}: {source}")]
    Registry {
        /// The source.
        source_name: String,
        /// The registry's failure.
        source: Failure,
    },
    /// An object an S3 notification names could not be read.
    #[error("object {object}: {context}: {source}")]
    Object {
        /// The object's source name.
        object: String,
        /// What was being done.
        context: &'static str,
        /// The storage's error.
        source: BoxError,
    },
}

/// Nothing here is about the records: the batch comes again.
impl Classify for EnvelopeError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Service
    }
}

/// Opens source batches by their sources' settings.
pub struct Opener {
    config: Arc<Config>,
    schemas: avro::Schemas,
}

impl Opener {
    /// An opener for `config`'s `[sources]`, decoding Avro with `schemas`.
    pub fn new(config: Arc<Config>, schemas: avro::Schemas) -> Self {
        Self { config, schemas }
    }

    /// The settings of source `name`.
    pub fn settings(&self, name: &str) -> SourceConfig {
        self.config.source(name)
    }

    /// Opens every record of `batch` (which must hold separate records, as
    /// Lambda events give them; NDJSON passes unopened). Records that
    /// cannot be opened become [`Undecodable`] markers at their position.
    pub async fn open(&self, batch: SourceBatch) -> Result<OpenedBatch, EnvelopeError> {
        let SourceBatch {
            source,
            table,
            batch_id: _,
            mut spans,
            records,
            state,
            oldest_ms,
            avro: _,
        } = batch;
        // The batch again with other records, its id derived anew.
        let rebuild = |source, spans, records| {
            SourceBatch::new(source, spans, records)
                .to_table(table)
                .with_state(state)
                .oldest(oldest_ms)
        };
        let items = match records {
            Records::Items(items) => items,
            // NDJSON, dead letters replayed (opened when first received) and
            // changes their source decoded.
            whole @ (Records::Ndjson(_)
            | Records::Replayed(_)
            | Records::Changes(_)
            | Records::ChangesThenReads(..)) => {
                return Ok(OpenedBatch {
                    batch: rebuild(source, spans, whole),
                    objects: Vec::new(),
                });
            }
        };
        let settings = self.settings(&source.name);
        // Unordered spans name each record: several records of one payload
        // need ids of their own.
        let unordered = matches!(
            spans.first().map(|s| &s.positions),
            Some(Positions::Ids { .. })
        );
        let mut out: Vec<(String, Bytes)> = Vec::with_capacity(items.len());
        let mut objects = Vec::new();
        let mut registered = avro::Registered::default();
        let items = if unordered { once_each(items) } else { items };
        for (pos, payload) in items {
            let records = match open(&payload, settings.envelope) {
                Ok(Opened::Records(records)) => records,
                Ok(Opened::Objects(found)) => {
                    objects.extend(found.into_iter().map(|o| (pos.clone(), o)));
                    continue;
                }
                Err(e) => {
                    out.push((pos, Undecodable::record(&payload, &e)));
                    continue;
                }
            };
            let records = self
                .decode(records, &settings, &mut registered)
                .await
                .map_err(|e| EnvelopeError::Registry {
                    source_name: source.name.clone(),
                    source: e,
                })?;
            out.extend(positioned(&pos, records, unordered));
        }
        if unordered && let Some(span) = spans.first_mut() {
            span.positions = Positions::Ids {
                ids: out.iter().map(|(id, _)| id.clone()).collect(),
            };
        }
        Ok(OpenedBatch {
            batch: rebuild(source, spans, Records::Items(out)).with_avro(
                registered
                    .declared()
                    .is_some()
                    .then(|| Arc::new(registered)),
            ),
            objects,
        })
    }

    /// One payload's records through the schema registry, in order: framed
    /// Avro decoded (its schema noted in `registered`), anything else as it
    /// came, a datum that does not decode as its dead-letter marker. `Err`
    /// is a registry that did not answer.
    async fn decode(
        &self,
        records: Vec<Bytes>,
        settings: &SourceConfig,
        registered: &mut avro::Registered,
    ) -> Result<Vec<Bytes>, Failure> {
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            out.push(match self.schemas.decode(&record, settings).await {
                Ok(Some(decoded)) => {
                    registered.add(&decoded);
                    decoded.record
                }
                Ok(None) => record,
                Err(avro::AvroError::Record(e)) => Undecodable::record(&record, &e),
                Err(avro::AvroError::Registry(e)) => return Err(e),
            });
        }
        Ok(out)
    }
}

/// The payloads of an unordered span, each id once: the span is a set, so
/// a payload delivered twice in one event (SQS delivers at least once,
/// within one batch too) is one payload, its records written once.
fn once_each(items: Vec<(String, Bytes)>) -> Vec<(String, Bytes)> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|(pos, _)| seen.insert(pos.clone()))
        .collect()
}

/// Each of one payload's records at the payload's position, or at
/// `<position>#<n>` when unordered spans must tell several apart.
fn positioned<'p>(
    pos: &'p str,
    records: Vec<Bytes>,
    unordered: bool,
) -> impl Iterator<Item = (String, Bytes)> + 'p {
    let numbered = unordered && records.len() > 1;
    records
        .into_iter()
        .enumerate()
        .map(move |(n, record)| match numbered {
            true => (format!("{pos}#{}", n + 1), record),
            false => (pos.to_string(), record),
        })
}

/// `text` borrowed when it needs no unescaping.
pub(crate) fn cow_bytes(text: Cow<'_, str>) -> Bytes {
    match text {
        Cow::Borrowed(s) => Bytes::copy_from_slice(s.as_bytes()),
        Cow::Owned(s) => Bytes::from(s.into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceKind;
    use crate::source::SourceSpan;
    use std::io::Write as _;

    fn batch(kind: SourceKind, positions: Positions, items: Vec<(&str, Vec<u8>)>) -> SourceBatch {
        let spans = vec![SourceSpan {
            source: "q".into(),
            positions,
            stream: false,
        }];
        let items = items
            .into_iter()
            .map(|(p, r)| (p.to_string(), Bytes::from(r)))
            .collect();
        SourceBatch::new(
            crate::source::Source::new(kind, "q"),
            spans,
            Records::Items(items),
        )
    }

    fn logs(events: usize) -> Vec<u8> {
        let events: Vec<serde_json::Value> = (0..events)
            .map(|i| serde_json::json!({"id": i.to_string(), "timestamp": 1, "message": "m"}))
            .collect();
        let data = serde_json::json!({"messageType": "DATA_MESSAGE", "logGroup": "g",
            "logStream": "s", "owner": "1", "logEvents": events});
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data.to_string().as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    fn positions(b: &SourceBatch) -> Vec<String> {
        b.records.iter().map(|(p, _)| p.to_string()).collect()
    }

    #[tokio::test]
    async fn several_records_of_one_payload_keep_exact_positions() {
        let opener = Opener::new(Arc::new(Config::default()), avro::Schemas::default());
        // SQS: each record of a payload gets an id of its own, and the
        // batch's span (and so its id) names them, the same on every delivery.
        let ids = |v: &[&str]| Positions::Ids {
            ids: v.iter().map(|s| s.to_string()).collect(),
        };
        let sqs = || {
            batch(
                SourceKind::Sqs,
                ids(&["m-1", "m-2", "m-3"]),
                vec![
                    ("m-1", logs(2)),
                    ("m-2", br#"{"a":1}"#.to_vec()),
                    ("m-3", vec![0x1f, 0x8b, 0, 1]),
                ],
            )
        };
        let opened = opener.open(sqs()).await.unwrap();
        let b = &opened.batch;
        assert_eq!(positions(b), ["m-1#1", "m-1#2", "m-2", "m-3"]);
        assert_eq!(b.spans[0].positions, ids(&["m-1#1", "m-1#2", "m-2", "m-3"]));
        assert_eq!(b.batch_id, opener.open(sqs()).await.unwrap().batch.batch_id);
        // A message delivered twice in one event is opened once: the same
        // records, the same batch.
        let twice = batch(
            SourceKind::Sqs,
            ids(&["m-1", "m-2", "m-2", "m-3"]),
            vec![
                ("m-1", logs(2)),
                ("m-2", br#"{"a":1}"#.to_vec()),
                ("m-2", br#"{"a":1}"#.to_vec()),
                ("m-3", vec![0x1f, 0x8b, 0, 1]),
            ],
        );
        let twice = opener.open(twice).await.unwrap().batch;
        assert_eq!(positions(&twice), positions(b));
        assert_eq!(twice.batch_id, b.batch_id);
        // The broken gzip stays at its position, marked with why.
        let Records::Items(items) = &b.records else {
            panic!()
        };
        let bad = Undecodable::of(&items[3].1).unwrap();
        assert!(bad.reason.contains("gzip"), "{bad:?}");
        assert!(Undecodable::of(&items[2].1).is_none());
        // Kinesis: the payload's records share its sequence number.
        let range = Positions::Range {
            first: 7u64.into(),
            last: 8u64.into(),
        };
        let kinesis = batch(
            SourceKind::Kinesis,
            range.clone(),
            vec![("7", logs(3)), ("8", br#"{"a":2}"#.to_vec())],
        );
        let opened = opener.open(kinesis).await.unwrap();
        assert_eq!(positions(&opened.batch), ["7", "7", "7", "8"]);
        assert_eq!(opened.batch.spans[0].positions, range);
    }
}

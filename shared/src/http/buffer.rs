//! Where accepted POSTs wait for the writer, so a request's size does not
//! decide a file's: the HTTP API appends each POST's body, behind a header
//! naming its table and receipt, to a buffer (a Kinesis stream on AWS, a
//! spool under the warehouse for `floe serve`) and answers 200 once the
//! buffer holds it; the writer drains the buffer in windows, one batch per
//! table however many POSTs a window holds.
//!
//! Every record of a buffered POST is named by the POST's receipt, its id
//! and its place in the body, so the same record is named alike however
//! often the buffer delivers it and in whatever window: the table's ledger
//! accounts for each record by that name, as for an SQS message's, and a
//! keyed table orders changes by the receipt the name begins with. A POST
//! with an `Idempotency-Key` is not buffered: a client's retry is a new
//! request the buffer cannot tell from the first, while the direct path's
//! batch id (key and body) can; its key records cost more than the file
//! anyway (see docs/cost.md).
//!
//! A buffer that refuses a POST outright (a Kinesis shard over its write
//! limit) surely does not hold it, so the API writes that POST directly,
//! as without a buffer: a table's rate beyond what the stream takes costs
//! what it did before, rather than failing.

use std::collections::{BTreeMap, HashSet};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::error::{BoxError, Classify, ErrorKind};
use crate::idempotency::Receipt;
use crate::ident::parse_table;
use crate::queue::{CommitQueue, SpoolQueue};
use crate::source::{Position, Positions, Records, Source, SourceBatch, SourceKind, SourceSpan};

/// Largest buffered POST, header included (a Kinesis record takes 1 MiB).
/// A larger body is written at once, as without a buffer: its file is
/// worth its requests already (about 2,000 records of 130 B), and it
/// would take a quarter of a shard's second, which smaller POSTs save more
/// with.
pub const MAX_POST_BYTES: usize = 256 * 1024;

/// Why a POST could not be buffered; another try may succeed.
#[derive(Debug, thiserror::Error)]
#[error("the HTTP buffer {buffer}: {source}")]
pub struct BufferError {
    /// The stream or spool.
    pub buffer: String,
    /// The buffer answered that it did not take the POST (throttled), on
    /// every try: writing it directly cannot make it twice. Otherwise a
    /// try may have landed unanswered.
    pub refused: bool,
    /// What failed.
    pub source: BoxError,
}

/// The buffer's service failed: the client retries.
impl Classify for BufferError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Service
    }
}

/// Where accepted POSTs wait for the writer.
#[async_trait]
pub trait Buffer: std::fmt::Debug + Send + Sync {
    /// Appends one POST (from [`encode`]); returns once the buffer holds
    /// it durably.
    async fn append(&self, post: Bytes) -> Result<(), BufferError>;
}

/// `floe serve`'s buffer: a spool under the warehouse, drained by
/// [`super::drain`].
#[async_trait]
impl Buffer for SpoolQueue {
    async fn append(&self, post: Bytes) -> Result<(), BufferError> {
        self.send(post).await.map_err(|e| BufferError {
            buffer: self.location(),
            refused: false,
            source: Box::new(e),
        })
    }
}

/// The Lambda function's buffer: a Kinesis stream the writer function
/// drains through its event source mapping. POSTs spread over the
/// stream's shards by a random partition key: a keyed table orders changes
/// by receipt, not by shard, so a table's rate is the stream's, not one
/// shard's.
#[cfg(feature = "aws")]
#[derive(Debug, Clone)]
pub struct KinesisBuffer {
    client: aws_sdk_kinesis::Client,
    stream: String,
}

/// A failed `PutRecord`.
#[cfg(feature = "aws")]
type PutError =
    aws_sdk_kinesis::error::SdkError<aws_sdk_kinesis::operation::put_record::PutRecordError>;

/// Tries of one put; the SDK's own retries are off, because a throttled
/// last try after an unanswered one is no proof the POST is not there.
#[cfg(feature = "aws")]
const PUT_TRIES: u32 = 3;

#[cfg(feature = "aws")]
impl KinesisBuffer {
    /// The buffer on stream `stream` (its name).
    pub fn new(client: aws_sdk_kinesis::Client, stream: impl Into<String>) -> Self {
        Self {
            client,
            stream: stream.into(),
        }
    }

    /// One try, without the SDK's retries.
    async fn put(
        &self,
        key: &str,
        post: &aws_sdk_kinesis::primitives::Blob,
    ) -> Result<(), PutError> {
        let once = aws_sdk_kinesis::config::Builder::default()
            .retry_config(aws_sdk_kinesis::config::retry::RetryConfig::disabled());
        self.client
            .put_record()
            .stream_name(&self.stream)
            .partition_key(key)
            .data(post.clone())
            .customize()
            .config_override(once)
            .send()
            .await
            .map(|_| ())
    }
}

/// The stream answered that it did not take the record.
#[cfg(feature = "aws")]
fn throttled(e: &PutError) -> bool {
    use aws_sdk_kinesis::operation::put_record::PutRecordError as E;
    matches!(
        e.as_service_error(),
        Some(E::ProvisionedThroughputExceededException(_) | E::KmsThrottlingException(_))
    )
}

#[cfg(feature = "aws")]
#[async_trait]
impl Buffer for KinesisBuffer {
    async fn append(&self, post: Bytes) -> Result<(), BufferError> {
        let key = uuid::Uuid::new_v4().simple().to_string();
        let post = aws_sdk_kinesis::primitives::Blob::new(post.to_vec());
        let mut refused = true;
        let mut tries = 0;
        loop {
            tries += 1;
            let e = match self.put(&key, &post).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            // A throttled put is not retried: the direct path takes the
            // POST at once. Any other failure may have landed, so the
            // same record is put again (the writer takes it once).
            refused &= throttled(&e);
            if refused || tries == PUT_TRIES {
                return Err(BufferError {
                    buffer: format!("Kinesis stream {}", self.stream),
                    refused,
                    source: Box::new(crate::aws::AwsError::new(e)),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(50 << tries)).await;
        }
    }
}

/// What a buffered POST's first line says of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The format's version; its name marks the line as floe's.
    #[serde(rename = "floe.http")]
    pub version: u8,
    /// The table, `namespace.name`: the table of that name when the
    /// writer drains the POST gets its records, as a source's records go
    /// to the table their route names then.
    pub table: String,
    /// The POST's own id, fresh for each.
    pub post: String,
    /// When it was received, ms since epoch.
    pub received_ms: i64,
    /// Its place in the order of receipts.
    pub order: Position,
}

/// A POST as the buffer holds it: its header line, then its body as sent.
pub fn encode(table: &str, post: &str, receipt: &Receipt, body: &[u8]) -> Bytes {
    let header = Header {
        version: 1,
        table: table.to_string(),
        post: post.to_string(),
        received_ms: receipt.ms,
        order: receipt.order.clone(),
    };
    let line = serde_json::to_vec(&header).expect("a header of strings and numbers serializes");
    let mut out = BytesMut::with_capacity(line.len() + 1 + body.len());
    out.extend_from_slice(&line);
    out.extend_from_slice(b"\n");
    out.extend_from_slice(body);
    out.freeze()
}

/// The header and body of a buffered POST; `None` for anything else.
pub fn decode(post: &Bytes) -> Option<(Header, Bytes)> {
    let end = memchr::memchr(b'\n', post)?;
    let header: Header = serde_json::from_slice(&post[..end]).ok()?;
    (header.version == 1).then(|| (header, post.slice(end + 1..)))
}

/// The name of record `n` of the POST `header` describes
/// ([`crate::source::receipt_record`]).
pub fn record_id(header: &Header, n: &str) -> String {
    crate::source::receipt_record(&header.order, &header.post, n)
}

/// The span source of `table`'s HTTP records, buffered or not.
pub fn source_of(table: &str) -> String {
    format!("http:{table}")
}

/// What one window of a buffer becomes; `P` is where an item sits in the
/// buffer.
#[derive(Debug)]
pub struct Window<P> {
    /// One batch per table, its records in the order of receipts.
    pub batches: Vec<SourceBatch>,
    /// Items that are no buffered POST, where they sat.
    pub others: Vec<(P, Bytes)>,
}

/// The writer's batches of one window of buffered POSTs (`items`: each
/// with its place in the buffer). A POST that came twice is taken once.
pub fn window<P>(items: Vec<(P, Bytes)>) -> Window<P> {
    let mut posts: BTreeMap<String, Vec<(Header, Bytes)>> = BTreeMap::new();
    let mut seen = HashSet::new();
    let mut out = Window {
        batches: Vec::new(),
        others: Vec::new(),
    };
    for (at, item) in items {
        let Some((header, body)) = decode(&item).filter(|(h, _)| parse_table(&h.table).is_ok())
        else {
            out.others.push((at, item));
            continue;
        };
        if seen.insert((header.table.clone(), header.post.clone())) {
            posts
                .entry(header.table.clone())
                .or_default()
                .push((header, body));
        }
    }
    for (table, mut posts) in posts {
        posts.sort_by(|a, b| (&a.0.order, &a.0.post).cmp(&(&b.0.order, &b.0.post)));
        out.batches.push(table_batch(&table, posts));
    }
    out
}

/// One table's POSTs of a window as one batch.
fn table_batch(table: &str, posts: Vec<(Header, Bytes)>) -> SourceBatch {
    let first_ms = posts.iter().map(|(h, _)| h.received_ms).min();
    let mut items = Vec::new();
    for (header, body) in posts {
        // The body was read as records before it was buffered; should it
        // not read now, it goes on whole and is dead-lettered as one record.
        match super::body::records(&body) {
            Ok(records) => items.extend(
                records
                    .into_iter()
                    .map(|(pos, r)| (record_id(&header, place(&pos)), r)),
            ),
            Err(_) => items.push((record_id(&header, "body"), body)),
        }
    }
    let spans = vec![SourceSpan {
        source: source_of(table),
        positions: Positions::Ids {
            ids: items.iter().map(|(id, _)| id.clone()).collect(),
        },
        stream: false,
    }];
    SourceBatch::new(
        Source::new(SourceKind::Http, "http"),
        spans,
        Records::Items(items),
    )
    .to_table(parse_table(table).ok())
    .oldest(first_ms)
}

/// The number in a body position (`record 3`, `line 4`).
fn place(pos: &str) -> &str {
    pos.rsplit(' ').next().unwrap_or(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(table: &str, id: &str, order: u64, body: &str) -> Bytes {
        let receipt = Receipt {
            ms: 1_000,
            order: Position::from(order),
        };
        encode(table, id, &receipt, body.as_bytes())
    }

    #[test]
    fn a_window_is_one_batch_per_table_in_the_order_of_receipts_each_post_once() {
        let items: Vec<(String, Bytes)> = vec![
            ("s1".into(), post("raw.a", "k2", 20, r#"[{"id":3}]"#)),
            (
                "s2".into(),
                post("raw.b", "k1", 10, "{\"id\":1}\n{\"id\":2}"),
            ),
            (
                "s3".into(),
                post("raw.a", "k1", 10, r#"[{"id":1},{"id":2}]"#),
            ),
            // The same POST again: the buffer delivering it twice.
            ("s4".into(), post("raw.a", "k2", 20, r#"[{"id":3}]"#)),
            ("s5".into(), Bytes::from_static(b"{\"not\":\"a post\"}")),
        ];
        let w = window(items);
        assert_eq!(w.others.len(), 1);
        assert_eq!(w.batches.len(), 2);
        let a = &w.batches[0];
        assert_eq!(
            a.table.as_ref().map(crate::ident::display).as_deref(),
            Some("raw.a")
        );
        let Records::Items(records) = &a.records else {
            panic!("items")
        };
        let ids: Vec<&str> = records.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["10-k1-0", "10-k1-1", "20-k2-0"]);
        assert_eq!(
            crate::source::receipt_of(ids[2]),
            Some(Position::from(20u64))
        );
        let Records::Items(lines) = &w.batches[1].records else {
            panic!("items")
        };
        assert_eq!(lines[1].0, "10-k1-2");
        // Another window holding the same POSTs names their records alike.
        let again = window(vec![("s9", post("raw.a", "k2", 20, r#"[{"id":3}]"#))]);
        assert_eq!(
            again.batches[0].spans[0].positions,
            Positions::Ids {
                ids: vec![ids[2].to_string()]
            }
        );
    }
}

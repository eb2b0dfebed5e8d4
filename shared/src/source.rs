//! Source batches: the records of one invocation, where in their source they
//! came from, and the deterministic batch id derived from that, so a
//! redelivered batch is recognised as the same. Every entry point builds its
//! batches here ([`SourceBatch::new`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use iceberg::TableIdent;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::avro::Registered;
use crate::change::Change;
use crate::dlq::Replayed;
use crate::ndjson::Chunk;

/// The kind of source a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// An SQS queue.
    Sqs,
    /// A Kinesis data stream.
    Kinesis,
    /// A Kafka topic.
    Kafka,
    /// A DynamoDB stream (named by its table).
    DynamoDb,
    /// An HTTP endpoint.
    Http,
    /// A local file.
    File,
    /// A Postgres table.
    Postgres,
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sqs => "SQS queue",
            Self::Kinesis => "Kinesis stream",
            Self::Kafka => "Kafka topic",
            Self::DynamoDb => "DynamoDB stream",
            Self::Http => "HTTP endpoint",
            Self::File => "file",
            Self::Postgres => "Postgres table",
        })
    }
}

/// The records of a source batch.
#[derive(Debug, Clone)]
pub enum Records {
    /// NDJSON lines; a record's position is its line number.
    Ndjson(Chunk),
    /// Separate records, each with its source position (offset, sequence number, message id).
    Items(Vec<(String, Bytes)>),
    /// Dead letters replayed, each with its replay id as position and
    /// where it first came from.
    Replayed(std::sync::Arc<Replayed>),
    /// Changes a source decoded itself (Postgres), each with its position:
    /// a keyed table folds them as they are, with no text to parse. Each
    /// record's text is its row; a dead letter shows the change's flat
    /// `_op` form ([`crate::change::flat_line`]).
    Changes(Vec<Change>),
    /// Changes a source decoded itself, as [`Records::Changes`], then rows
    /// it read into columns itself (a Postgres snapshot chunk), which a
    /// keyed table applies after them with no text between source and file.
    ChangesThenReads(Vec<Change>, Reads),
}

/// Rows a source read into Arrow columns itself: each the state of its key
/// as read at `position`, newer than every change of the batch before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reads {
    /// The rows, their columns named and typed as the table's (by
    /// `iceberg::arrow::schema_to_arrow_schema`); a column of the table they
    /// lack is null, a column they have must be the table's.
    pub rows: RecordBatch,
    /// Where in the source they were read (for Postgres an LSN), every row's
    /// position: the files' footers and the key file name it as a change's.
    pub position: String,
    /// The source vouches that the table holds no row with any of these
    /// keys (an initial copy's next chunk, while the table holds only its
    /// earlier chunks): they replace nothing, so they are appended with no
    /// key lookups, no deletes and no key file. They still replace the
    /// batch's own changes to the same keys.
    pub appends: bool,
}

/// Where a record sits in its source, for dead letters.
#[derive(Debug, Clone, Copy)]
pub enum Pos<'a> {
    /// A line number.
    Line(u64),
    /// A source-specific position.
    Item(&'a str),
    /// A change decoded by its source, at its own position.
    Change(&'a Change),
}

impl fmt::Display for Pos<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pos::Line(n) => write!(f, "line {n}"),
            Pos::Item(p) => f.write_str(p),
            Pos::Change(c) => f.write_str(c.position.as_deref().unwrap_or_default()),
        }
    }
}

impl<'a> Pos<'a> {
    /// The position alone: a decoded change's as a source-specific one.
    pub fn plain(self) -> Pos<'a> {
        match self {
            Pos::Change(c) => Pos::Item(c.position.as_deref().unwrap_or_default()),
            other => other,
        }
    }

    /// The decoded change at this position, when its source decoded it.
    pub fn change(self) -> Option<&'a Change> {
        match self {
            Pos::Change(c) => Some(c),
            _ => None,
        }
    }
}

impl Records {
    /// The records with their positions, in source order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (Pos<'_>, &[u8])> + '_> {
        match self {
            Records::Ndjson(chunk) => Box::new(chunk.records().map(|(n, r)| (Pos::Line(n), r))),
            Records::Items(items) => Box::new(items.iter().map(|(p, r)| (Pos::Item(p), &r[..]))),
            Records::Replayed(r) => {
                Box::new(r.records().iter().map(|(p, r)| (Pos::Item(p), &r[..])))
            }
            Records::Changes(changes) | Records::ChangesThenReads(changes, _) => {
                Box::new(changes.iter().map(|c| (Pos::Change(c), c.row.as_bytes())))
            }
        }
    }

    /// The rows read into columns that follow the changes, when there are.
    pub fn reads(&self) -> Option<&Reads> {
        match self {
            Records::ChangesThenReads(_, reads) => Some(reads),
            _ => None,
        }
    }

    /// The replayed dead letters, when the records are.
    pub fn replayed(&self) -> Option<&Replayed> {
        match self {
            Records::Replayed(r) => Some(r),
            _ => None,
        }
    }
}

/// The source a batch came from.
#[derive(Debug, Clone)]
pub struct Source {
    /// Its kind.
    pub kind: SourceKind,
    /// Queue, stream, topic or file name.
    pub name: String,
}

/// One invocation's worth of records.
#[derive(Debug, Clone)]
pub struct SourceBatch {
    /// The source.
    pub source: Source,
    /// The target table; `None` routes each record by the configured rules.
    pub table: Option<TableIdent>,
    /// Deterministic id derived from `spans` (see [`crate::source::batch_id`]).
    pub batch_id: String,
    /// The source positions the batch covers.
    pub spans: Vec<SourceSpan>,
    /// The records.
    pub records: Records,
    /// Source state to record with the commit of `table` (see
    /// [`crate::request::CommitRequest::state`]); a batch with state but no records still
    /// commits, so the state is kept.
    pub state: BTreeMap<String, String>,
    /// When the oldest record reached its source (ms since epoch: SQS
    /// `SentTimestamp`, Kinesis arrival, Kafka timestamp), for freshness.
    pub oldest_ms: Option<i64>,
    /// The registry schemas of its Avro records, which stay binary until
    /// the shredder reads them; `None` when it has none.
    pub avro: Option<Arc<Registered>>,
}

impl Source {
    /// The source of `kind` named `name`.
    pub fn new(kind: SourceKind, name: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
        }
    }
}

impl SourceBatch {
    /// The batch of `records` covering `spans` of `source`, routed record by
    /// record, with the id the spans derive ([`batch_id`]).
    pub fn new(source: Source, spans: Vec<SourceSpan>, records: Records) -> Self {
        Self {
            batch_id: batch_id(&spans, None),
            source,
            table: None,
            spans,
            records,
            state: BTreeMap::new(),
            oldest_ms: None,
            avro: None,
        }
    }

    /// The id also takes `content`'s digest: for sources whose positions do
    /// not pin what they hold (lines of a file can be edited in place).
    pub fn pinned_to(mut self, content: &[u8]) -> Self {
        self.batch_id = batch_id(&self.spans, Some(content));
        self
    }

    /// The id is `id`: the part of a larger batch (one transaction's
    /// changes to one of its tables) takes its id from the whole.
    pub fn with_id(mut self, id: String) -> Self {
        self.batch_id = id;
        self
    }

    /// Every record goes to `table` (`None`: routed by the configured rules).
    pub fn to_table(mut self, table: Option<TableIdent>) -> Self {
        self.table = table;
        self
    }

    /// Source state committed with the batch (see [`SourceBatch::state`]).
    pub fn with_state(mut self, state: BTreeMap<String, String>) -> Self {
        self.state = state;
        self
    }

    /// When the oldest record reached its source, for freshness.
    pub fn oldest(mut self, ms: Option<i64>) -> Self {
        self.oldest_ms = ms;
        self
    }

    /// The registry schemas its Avro records were written with.
    pub fn with_avro(mut self, avro: Option<Arc<Registered>>) -> Self {
        self.avro = avro;
        self
    }
}

/// Whether `source` is the ledger's name of a table's change order
/// (`config::ChangeOrder::source`): no real source's name starts so.
pub fn is_order_source(source: &str) -> bool {
    source.starts_with("order:")
}

/// A position in an ordered source: a non-negative decimal integer of any size
/// (Kafka offsets, Kinesis sequence numbers, Postgres LSNs as integers, line numbers).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Position(String);

impl Position {
    /// A position from a decimal string; `None` unless it is all ASCII digits.
    pub fn parse(s: &str) -> Option<Self> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = s.trim_start_matches('0');
        Some(Self(
            if trimmed.is_empty() { "0" } else { trimmed }.to_string(),
        ))
    }

    /// The decimal text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The position right after this one, so runs of consecutive positions
    /// (Kafka offsets, line numbers) merge into one.
    pub fn next(&self) -> Self {
        let mut digits = self.0.clone().into_bytes();
        for d in digits.iter_mut().rev() {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                // Only ASCII digits were changed.
                return Self(String::from_utf8(digits).unwrap_or_default());
            }
        }
        digits.insert(0, b'1');
        Self(String::from_utf8(digits).unwrap_or_default())
    }
}

impl From<u64> for Position {
    fn from(v: u64) -> Self {
        Self(v.to_string())
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        // Normalised decimals compare numerically by length, then digit by digit.
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which records of one source a batch holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Positions {
    /// A contiguous, inclusive range of an ordered source (file records, Kafka
    /// offsets, Kinesis sequence numbers, LSNs).
    Range {
        /// First position in the batch.
        first: Position,
        /// Last position in the batch.
        last: Position,
    },
    /// Message ids of an unordered source (SQS), identified as a set.
    Ids {
        /// The ids, in any order.
        ids: Vec<String>,
    },
    /// A caller-chosen idempotency key (HTTP `Idempotency-Key`).
    Key {
        /// The key.
        key: String,
        /// Where the request stands in the order its source received
        /// requests in (its key's first receipt): a keyed table applies
        /// changes from HTTP in this order. Not part of the batch id, so a
        /// retry is the same batch. `None` from writers before it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<Position>,
    },
}

/// The name of record `n` of the request `post` received at `order` (a
/// buffered HTTP POST's): the same however often the request is
/// delivered, and in the order of receipts by its first part.
pub fn receipt_record(order: &Position, post: &str, n: &str) -> String {
    format!("{order}-{post}-{n}")
}

/// Where the record named `id` ([`receipt_record`]) stands in the order of
/// receipts.
pub fn receipt_of(id: &str) -> Option<Position> {
    Position::parse(id.split_once('-')?.0)
}

/// The part of one source a batch holds, e.g. `kafka:orders/3` offsets 100..=199.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSpan {
    /// The source: `file:/path`, `kafka:topic/partition`, `kinesis:stream/shard`, `sqs:queue`, `http`, `pg:slot`.
    pub source: String,
    /// The records of that source in the batch.
    pub positions: Positions,
    /// The positions are durable stream positions (Kafka offsets, Kinesis
    /// sequence numbers, LSNs): a lower one is always older data. Line numbers
    /// of a file or stdin are not: they restart with every run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
}

impl SourceSpan {
    /// The last position when the source is ordered.
    pub fn last(&self) -> Option<&Position> {
        match &self.positions {
            Positions::Range { last, .. } => Some(last),
            _ => None,
        }
    }
}

/// Derives the batch id from the spans (and, for sources whose positions do not
/// pin the content, such as a file that can be edited in place, a content digest).
pub fn batch_id(spans: &[SourceSpan], content: Option<&[u8]>) -> String {
    let mut h = Xxh3::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for span in spans {
        field(span.source.as_bytes());
        match &span.positions {
            Positions::Range { first, last } => {
                field(b"range");
                field(first.as_str().as_bytes());
                field(last.as_str().as_bytes());
            }
            Positions::Ids { ids } => {
                field(b"ids");
                let mut sorted: Vec<&String> = ids.iter().collect();
                sorted.sort();
                for id in sorted {
                    field(id.as_bytes());
                }
            }
            Positions::Key { key, .. } => {
                field(b"key");
                field(key.as_bytes());
            }
        }
    }
    if let Some(content) = content {
        field(b"content");
        field(content);
    }
    format!("{:032x}", h.digest128())
}

/// The id of the part of batch `batch_id` that goes to `table`, when one
/// source batch is routed to several tables.
pub fn sub_batch_id(batch_id: &str, table: &str) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(format!("{batch_id}/{table}").as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(source: &str, first: u64, last: u64) -> SourceSpan {
        SourceSpan {
            source: source.into(),
            positions: Positions::Range {
                first: first.into(),
                last: last.into(),
            },
            stream: true,
        }
    }

    #[test]
    fn positions_order_numerically_at_any_size() {
        let big =
            Position::parse("49590338271490256608559692538361571095921575989136588898").unwrap();
        let bigger =
            Position::parse("49590338271490256608559692538361571095921575989136588899").unwrap();
        assert!(big < bigger);
        assert!(Position::from(9) < Position::from(10));
        assert_eq!(Position::parse("007").unwrap(), Position::from(7));
        assert!(Position::parse("-1").is_none());
        assert!(Position::parse("").is_none());
    }

    #[test]
    fn batch_id_is_deterministic_and_position_sensitive() {
        let a = batch_id(&[range("kafka:t/0", 0, 99)], None);
        assert_eq!(a, batch_id(&[range("kafka:t/0", 0, 99)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/0", 0, 100)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/1", 0, 99)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/0", 0, 99)], Some(b"x")));
        let ids = |v: &[&str]| SourceSpan {
            source: "sqs:q".into(),
            positions: Positions::Ids {
                ids: v.iter().map(|s| s.to_string()).collect(),
            },
            stream: false,
        };
        assert_eq!(
            batch_id(&[ids(&["m1", "m2"])], None),
            batch_id(&[ids(&["m2", "m1"])], None)
        );
    }
}

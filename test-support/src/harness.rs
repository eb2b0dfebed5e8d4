//! The adversarial delivery harness: a generated source stream (records for
//! append tables, changes for keyed ones) delivered through the real writer
//! and committer steps under a seeded schedule that mixes what real sources
//! and queues do: redeliveries with other batch boundaries, writers failing
//! before and after their enqueue (also halfway through a routed batch),
//! several writers on one shard, commit requests duplicated, reordered and
//! held back past snapshot expiry and compaction, committers failing at every
//! fault point and releasing their messages. The table, read back, must hold
//! every record exactly once (append) or, per key, the last change in source
//! order (keyed). A failure names the seed and prints the schedule.
//!
//! The harness owns the clock ([`floe_core::clock::shift`]): between steps
//! it moves seconds to days, so every table's small ledger windows and seal
//! threshold are crossed (seals, settled runs, archived sources, expired
//! segments), within what the contract promises: records of sources
//! deduplicated by id come again only within the key window, a commit
//! request is received only within the request window. Ordered sources are
//! rewound (a consumer reset, a rerun) at any time, however long after;
//! another engine's orphan cleanup (every file under a table's location that
//! its metadata does not name, whatever its age) runs between deliveries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use async_trait::async_trait;
use bytes::Bytes;
use floe_core::catalog::{Catalog, CatalogRef, SqliteCatalog, TableCommit};
use floe_core::clock;
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::dlq::{DeadLetters, StorageDeadLetters};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::http::buffer;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::spec::{SnapshotReference, SnapshotRetention, TableMetadataBuilder};
use floe_core::ident::parse_table;
use floe_core::maintain::{self, MaintainOptions};
use floe_core::metrics::Counters;
use floe_core::pipeline::Committer;
use floe_core::queue::{CommitQueue, Delivery, QueueError, QueueRef};
use floe_core::storage::LocalWarehouse;
use floe_core::tabledef;

/// The request window of the harness's tables: commit requests older than
/// this are never received (the queue and its DLQ would have dropped them).
pub const REQUEST_WINDOW_MS: i64 = 6 * HOUR_MS;
/// The key window of the harness's tables: records of sources deduplicated
/// by id come again only within it.
pub const KEY_WINDOW_MS: i64 = 2 * HOUR_MS;
/// How long after its start a schedule of a source deduplicated by id may
/// still deliver (its records all reached the source at its start).
const ID_SPAN_MS: i64 = 90 * 60 * 1000;
/// The oldest a commit request may get before it is received.
const QUEUE_AGE_MS: i64 = 5 * HOUR_MS;
const HOUR_MS: i64 = 60 * 60 * 1000;

/// A small deterministic generator (xorshift), so a seed replays its schedule.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// The source a schedule delivers from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An SQS queue: unordered, regrouped on every redelivery, a message
    /// now and then twice in one event.
    Sqs,
    /// A Kinesis shard read by one invocation at a time.
    Kinesis,
    /// A Kinesis shard read by several at once (parallelization factor 3).
    KinesisParallel,
    /// A Kafka partition.
    Kafka,
    /// A DynamoDB stream of two shards.
    DynamoDb,
    /// HTTP posts with idempotency keys, retried by their clients.
    Http,
    /// HTTP posts without a key, buffered as the HTTP function buffers
    /// them and drained in windows: regrouped, delivered again, taken twice
    /// in one window.
    HttpBuffered,
    /// A Postgres slot (LSN ranges).
    Postgres,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 8] = [
        Kind::Sqs,
        Kind::Kinesis,
        Kind::KinesisParallel,
        Kind::Kafka,
        Kind::DynamoDb,
        Kind::Http,
        Kind::Postgres,
        Kind::HttpBuffered,
    ];

    /// True when the source orders changes per key, so it can feed a keyed table.
    pub fn orders_keys(self) -> bool {
        !matches!(self, Kind::Sqs | Kind::Http)
    }

    /// True when records of this kind can feed an append table (a DynamoDB
    /// stream record is a change, not a row).
    pub fn appends(self) -> bool {
        self != Kind::DynamoDb
    }

    /// True when the ledger knows its records by id (or an HTTP key) within
    /// the key window, rather than by position with no time bound.
    pub fn by_id(self) -> bool {
        matches!(
            self,
            Kind::Sqs | Kind::Http | Kind::HttpBuffered | Kind::KinesisParallel | Kind::DynamoDb
        )
    }
}

/// One source record (append) or change (keyed).
#[derive(Debug, Clone)]
pub struct Record {
    /// Its index in the stream, which is source order.
    pub ordinal: usize,
    /// Its position (offset, sequence number, LSN) or id (message id, event id).
    pub pos: String,
    /// The key it changes (keyed) or its id (append).
    pub key: i64,
    /// A keyed delete.
    pub delete: bool,
    /// The lane (shard, parallel reader) it belongs to.
    pub lane: usize,
    /// The second table it is routed to, when the schedule routes.
    pub routed_b: bool,
    /// When it reached its source (ms since epoch).
    pub arrived_ms: i64,
}

impl Record {
    /// The value a keyed change leaves, or an append record carries.
    pub fn value(&self) -> String {
        format!("p{}", self.ordinal)
    }
}

/// A schedule's setup.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The seed.
    pub seed: u64,
    /// The source.
    pub kind: Kind,
    /// Keyed table (else append).
    pub keyed: bool,
    /// Records routed to two tables by a field.
    pub routed: bool,
    /// The stream.
    pub records: Vec<Record>,
    /// Lanes of the source (shards, parallel readers).
    pub lanes: usize,
    /// A keyed table's `floe.keyed.deletes` / copy-on-write properties.
    pub mode: &'static str,
    /// The tables' ledger seal threshold (`floe.ledger.seal-entries`).
    pub seal_entries: usize,
    /// The tables' Iceberg format version: 3 brings row lineage and, for
    /// position-delete tables, deletion vectors merged by the committer.
    pub format_version: u8,
}

/// One writer invocation: records of the stream, and how it ends.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The records, in source order within their lane.
    pub records: Vec<Record>,
    /// Fail after the data files are written, before enqueueing.
    pub fail_before_enqueue: bool,
    /// Fail after enqueueing (for a routed batch: after its first table).
    pub fail_after_enqueue: bool,
    /// The HTTP posts it is (each with its fixed records): one for
    /// [`Kind::Http`], a window's for [`Kind::HttpBuffered`].
    pub posts: Vec<usize>,
}

impl Invocation {
    /// The fault its writer fails at, if the schedule makes it fail.
    pub fn faults(&self) -> Faults {
        if self.fail_before_enqueue {
            Faults::at(FaultPoint::AfterUpload, FaultMode::Error, 1)
        } else if self.fail_after_enqueue {
            Faults::at(FaultPoint::AfterEnqueue, FaultMode::Error, 1)
        } else {
            Faults::none()
        }
    }
}

/// What delivers an invocation to a writer: the core writer step or a Lambda handler.
#[async_trait]
pub trait Driver: Send + Sync {
    /// Writes the invocation, enqueueing into `queue`; `true` when the
    /// writer acknowledged it.
    async fn write(
        &self,
        harness: &Harness,
        setup: &Setup,
        tables: &Tables,
        queue: QueueRef,
        inv: &Invocation,
    ) -> bool;
}

/// The tables a schedule writes.
#[derive(Debug, Clone)]
pub struct Tables {
    /// The table, or with routing the one records without `t = "b"` go to.
    pub a: TableIdent,
    /// The routed second table.
    pub b: Option<TableIdent>,
}

/// Generates a schedule's setup from its seed.
pub fn setup(seed: u64, kinds: &[Kind]) -> Setup {
    let mut rng = Rng::new(seed);
    let kind = kinds[rng.below(kinds.len())];
    let keyed = match (kind.orders_keys(), kind.appends()) {
        (true, true) => rng.chance(50),
        (k, _) => k,
    };
    // An HTTP post names its table; the others route by a field.
    let routed = !keyed && !matches!(kind, Kind::Http | Kind::HttpBuffered) && rng.chance(30);
    // Keyed tables in each way floe applies changes: position deletes (the
    // default), equality deletes, copy-on-write.
    let mode = match (keyed, rng.below(4)) {
        (false, _) => "append",
        (true, 0) => "equality",
        (true, 1) => "copy-on-write",
        (true, _) => "position",
    };
    let lanes = match kind {
        Kind::KinesisParallel => 3,
        Kind::DynamoDb => 2,
        _ => 1,
    };
    // Mostly short streams; one in five long enough for hundreds of requests.
    let n = if rng.chance(20) {
        100 + rng.below(200)
    } else {
        12 + rng.below(30)
    };
    let seal_entries = 2 + rng.below(7);
    let keys = if keyed { 3 + rng.below(8) as i64 } else { 0 };
    let shape = Shape {
        seed,
        kind,
        keyed,
        keys,
        lanes,
        routed,
    };
    let mut records = records(&mut rng, &shape, n);
    if kind == Kind::HttpBuffered {
        // Each record is named as the writer names a buffered POST's.
        for (p, range) in cut(seed, n).into_iter().enumerate() {
            let header = buffered_header(seed, p, "", &records[range.clone()]);
            for (i, r) in records[range].iter_mut().enumerate() {
                r.pos = buffer::record_id(&header, &(i + 1).to_string());
            }
        }
    }
    // From its own stream, so the schedule of a seed stays what it was
    // before v3 tables joined: a third of the schedules run on v3 tables.
    let format_version = if Rng::new(seed ^ 0x0003_F0A7).chance(33) {
        3
    } else {
        2
    };
    Setup {
        seed,
        kind,
        keyed,
        routed,
        records,
        lanes,
        mode,
        seal_entries,
        format_version,
    }
}

/// What a schedule's records are drawn by.
#[derive(Clone, Copy)]
struct Shape {
    seed: u64,
    kind: Kind,
    keyed: bool,
    keys: i64,
    lanes: usize,
    routed: bool,
}

/// The `n` records of a schedule's source, in source order.
fn records(rng: &mut Rng, shape: &Shape, n: usize) -> Vec<Record> {
    let Shape {
        seed,
        kind,
        keyed,
        keys,
        lanes,
        routed,
    } = *shape;
    // Arrival times are from the schedule's start (see [`run`]).
    let base = 0i64;
    let mut pos: u128 = match kind {
        Kind::Kinesis | Kind::KinesisParallel => 49_590_338_271_490_256_608_559_692_538_361_571_095,
        _ => 100,
    };
    let mut records = Vec::with_capacity(n);
    for ordinal in 0..n {
        pos += match kind {
            // Offsets mostly consecutive, with compaction's gaps.
            Kind::Kafka => 1 + u128::from(rng.chance(15)) * (1 + rng.below(3) as u128),
            Kind::Kinesis | Kind::KinesisParallel => 1 + rng.below(1 << 20) as u128,
            _ => 1 + rng.below(100) as u128,
        };
        let key = if keyed {
            rng.below(keys as usize) as i64
        } else {
            ordinal as i64
        };
        let lane = match kind {
            // A partition key per record key keeps each key in one lane.
            Kind::KinesisParallel | Kind::DynamoDb => (key as usize) % lanes,
            _ => 0,
        };
        let pos = match kind {
            Kind::Sqs => format!("m-{seed}-{ordinal}"),
            Kind::DynamoDb => format!("{:032x}", u128::from(seed) << 64 | ordinal as u128),
            Kind::Http => format!("{ordinal}"),
            _ => pos.to_string(),
        };
        records.push(Record {
            ordinal,
            pos,
            key,
            delete: keyed && rng.chance(25),
            lane,
            routed_b: routed && rng.chance(50),
            arrived_ms: base + ordinal as i64 * 10,
        });
    }
    records
}

/// The commit queue of a schedule: at-least-once like SQS, and worse: it
/// delivers in random order, sometimes twice, and holds some messages back
/// until after maintenance ran.
#[derive(Debug)]
pub struct ChaosQueue {
    state: Mutex<ChaosState>,
}

#[derive(Debug)]
struct ChaosState {
    rng: Rng,
    next_id: u64,
    /// Body, visible, held back, receive count, when sent.
    messages: BTreeMap<u64, (Bytes, bool, bool, u32, i64)>,
    receipts: HashMap<String, u64>,
}

impl ChaosQueue {
    /// A queue whose chaos follows `seed`.
    pub fn new(seed: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(ChaosState {
                rng: Rng::new(seed ^ 0xC0FFEE),
                next_id: 0,
                messages: BTreeMap::new(),
                receipts: HashMap::new(),
            }),
        })
    }

    /// Messages held back are delivered from now on.
    pub fn release_held(&self) {
        let mut s = self.state.lock().unwrap();
        for m in s.messages.values_mut() {
            m.2 = false;
        }
    }

    /// True when every message is acknowledged.
    pub fn is_empty(&self) -> bool {
        self.state.lock().unwrap().messages.is_empty()
    }

    /// When the oldest message still queued was sent.
    pub fn oldest_sent_ms(&self) -> Option<i64> {
        self.state
            .lock()
            .unwrap()
            .messages
            .values()
            .map(|m| m.4)
            .min()
    }
}

#[async_trait]
impl CommitQueue for ChaosQueue {
    async fn send(&self, body: Bytes) -> Result<(), QueueError> {
        let mut s = self.state.lock().unwrap();
        // Standard queues deliver at least once: sometimes a message is there twice.
        let copies = if s.rng.chance(10) { 2 } else { 1 };
        for _ in 0..copies {
            let held = s.rng.chance(12);
            let id = s.next_id;
            s.next_id += 1;
            s.messages
                .insert(id, (body.clone(), true, held, 0, clock::now_ms()));
        }
        Ok(())
    }

    async fn receive(&self, max: usize, _wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let mut s = self.state.lock().unwrap();
        let visible: Vec<u64> = s
            .messages
            .iter()
            .filter(|(_, m)| m.1 && !m.2)
            .map(|(id, _)| *id)
            .collect();
        let mut chosen = visible;
        // Any order, any subset.
        for i in (1..chosen.len()).rev() {
            let j = s.rng.below(i + 1);
            chosen.swap(i, j);
        }
        let take = 1 + s.rng.below(chosen.len().clamp(1, max));
        chosen.truncate(take.min(chosen.len()));
        let mut out = Vec::new();
        for id in chosen {
            let m = s.messages.get_mut(&id).unwrap();
            m.1 = false;
            m.3 += 1;
            let (body, count) = (m.0.clone(), m.3);
            let receipt = format!("{id}/{count}");
            s.receipts.insert(receipt.clone(), id);
            out.push(Delivery {
                receipt,
                body,
                receive_count: count,
            });
        }
        Ok(out)
    }

    async fn ack(&self, receipts: &[String]) -> Result<(), QueueError> {
        let mut s = self.state.lock().unwrap();
        for r in receipts {
            if let Some(id) = s.receipts.remove(r) {
                s.messages.remove(&id);
            }
        }
        Ok(())
    }

    async fn release(&self, receipts: &[String]) -> Result<(), QueueError> {
        let mut s = self.state.lock().unwrap();
        for r in receipts {
            if let Some(id) = s.receipts.remove(r)
                && let Some(m) = s.messages.get_mut(&id)
            {
                m.1 = true;
            }
        }
        Ok(())
    }
}

/// What one schedule found wrong.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Records (or keys) the table should hold and does not.
    pub lost: usize,
    /// Records (or keys) it holds more than once.
    pub doubled: usize,
    /// Keys whose value is not their last change's.
    pub out_of_order: usize,
    /// Rows it holds that no record explains.
    pub foreign: usize,
    /// Commit requests dead-lettered (none should be).
    pub dead_lettered: u64,
}

impl Verdict {
    /// True when the table equals the model.
    pub fn clean(&self) -> bool {
        *self == Verdict::default()
    }
}

/// The shared warehouse of a harness run (`FLOE_HARNESS_KEEP` keeps it).
pub struct Harness {
    /// The warehouse.
    pub warehouse: LocalWarehouse,
    /// Its directory.
    pub dir: std::path::PathBuf,
    _cleanup: Option<tempfile::TempDir>,
    /// Where dead letters go.
    pub dead_letters: Arc<dyn DeadLetters>,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A fresh warehouse.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let cleanup = if std::env::var("FLOE_HARNESS_KEEP").is_ok() {
            println!("warehouse kept at {}", tmp.keep().display());
            None
        } else {
            Some(tmp)
        };
        let warehouse = LocalWarehouse::open(&dir).unwrap();
        let dead_letters = Arc::new(StorageDeadLetters::new(
            warehouse.file_io(),
            format!("{}/_floe/dlq", warehouse.uri()),
        ));
        Self {
            warehouse,
            dir,
            _cleanup: cleanup,
            dead_letters,
        }
    }

    /// A catalog on the warehouse, failing at `faults`.
    pub fn catalog(&self, faults: Faults) -> CatalogRef {
        Arc::new(
            SqliteCatalog::open(
                floe_core::embedded::CATALOG_NAME,
                &self.warehouse.catalog_db(),
                &self.warehouse.uri(),
                self.warehouse.file_io(),
                faults,
            )
            .unwrap(),
        )
    }

    /// Creates the schedule's tables.
    pub async fn tables(&self, setup: &Setup) -> Tables {
        let catalog = self.catalog(Faults::none());
        let schema = if setup.keyed {
            r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"v","required":false,"type":"string"}]}"#
        } else {
            r#"{"type":"struct","schema-id":0,"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"v","required":false,"type":"string"},
              {"id":3,"name":"t","required":false,"type":"string"}]}"#
        };
        let mut made = Vec::new();
        let names: &[&str] = if setup.routed { &["a", "b"] } else { &["a"] };
        for suffix in names {
            let name = format!("s{}_{suffix}", setup.seed);
            let ident = parse_table(&format!("h.{name}")).unwrap();
            let schema = tabledef::parse_schema(schema).unwrap();
            let mut properties: std::collections::HashMap<String, String> = match setup.mode {
                "equality" => [("floe.keyed.deletes".into(), "equality".into())].into(),
                "copy-on-write" => [("write.update.mode".into(), "copy-on-write".into())].into(),
                _ => Default::default(),
            };
            properties.extend([
                (
                    floe_core::ledger::SEAL_ENTRIES_PROPERTY.to_string(),
                    setup.seal_entries.to_string(),
                ),
                (
                    floe_core::ledger::REQUEST_WINDOW.to_string(),
                    REQUEST_WINDOW_MS.to_string(),
                ),
                (
                    floe_core::ledger::KEY_WINDOW.to_string(),
                    KEY_WINDOW_MS.to_string(),
                ),
            ]);
            let mut creation = tabledef::creation(&name, schema, Default::default(), properties);
            if setup.format_version == 3 {
                creation.format_version = floe_core::iceberg::spec::FormatVersion::V3;
            }
            catalog.create_table(&ident, creation).await.unwrap();
            made.push(ident);
        }
        Tables {
            a: made[0].clone(),
            b: made.get(1).cloned(),
        }
    }
}

/// The JSON body of a record as its source carries it.
pub fn body(setup: &Setup, r: &Record) -> String {
    if setup.keyed && setup.kind == Kind::DynamoDb {
        let keys = format!(r#"{{"id":{{"N":"{}"}}}}"#, r.key);
        let seq = 1000 + r.ordinal;
        let created = r.arrived_ms / 1000;
        return if r.delete {
            format!(
                r#"{{"eventID":"{}","eventName":"REMOVE","eventSource":"aws:dynamodb","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/h/stream/2024","dynamodb":{{"Keys":{keys},"OldImage":{keys},"SequenceNumber":"{seq}","ApproximateCreationDateTime":{created}}}}}"#,
                r.pos
            )
        } else {
            format!(
                r#"{{"eventID":"{}","eventName":"MODIFY","eventSource":"aws:dynamodb","eventSourceARN":"arn:aws:dynamodb:us-east-1:1:table/h/stream/2024","dynamodb":{{"Keys":{keys},"NewImage":{{"id":{{"N":"{}"}},"v":{{"S":"{}"}}}},"SequenceNumber":"{seq}","ApproximateCreationDateTime":{created}}}}}"#,
                r.pos,
                r.key,
                r.value()
            )
        };
    }
    if setup.keyed {
        return if r.delete {
            format!(r#"{{"_op":"d","id":{}}}"#, r.key)
        } else {
            format!(r#"{{"_op":"u","id":{},"v":"{}"}}"#, r.key, r.value())
        };
    }
    let t = if r.routed_b { "b" } else { "a" };
    format!(r#"{{"id":{},"v":"{}","t":"{t}"}}"#, r.key, r.value())
}

/// HTTP posts: the stream cut into fixed posts, each with its key.
pub fn posts(setup: &Setup) -> Vec<Vec<Record>> {
    cut(setup.seed, setup.records.len())
        .into_iter()
        .map(|r| setup.records[r].to_vec())
        .collect()
}

/// Where a schedule's `n` records are cut into posts.
fn cut(seed: u64, n: usize) -> Vec<std::ops::Range<usize>> {
    let mut rng = Rng::new(seed ^ 0x5057);
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let len = 1 + rng.below(6);
        out.push(i..(i + len).min(n));
        i += len;
    }
    out
}

/// The header the HTTP API gives post `p` of a buffered schedule, bound
/// for `table`: received in post order, when its first record reached it.
fn buffered_header(seed: u64, p: usize, table: &str, records: &[Record]) -> buffer::Header {
    buffer::Header {
        version: 1,
        table: table.to_string(),
        post: format!("s{seed}p{p}"),
        received_ms: records.iter().map(|r| r.arrived_ms).min().unwrap_or(0),
        order: floe_core::source::Position::from(1_000 + p as u64),
    }
}

/// Post `p` of a buffered schedule as the HTTP API appends it to the
/// buffer, bound for `table`: an NDJSON body behind its header.
pub fn buffered_post(setup: &Setup, table: &str, p: usize, records: &[Record]) -> Bytes {
    let header = buffered_header(setup.seed, p, table, records);
    let body: String = records.iter().map(|r| body(setup, r) + "\n").collect();
    let receipt = floe_core::idempotency::Receipt {
        ms: header.received_ms,
        order: header.order,
    };
    buffer::encode(table, &header.post, &receipt, body.as_bytes())
}

/// What a schedule covered beyond its verdict.
#[derive(Debug, Default, Clone, Copy)]
pub struct Covered {
    /// Simulated time the schedule spanned (ms).
    pub simulated_ms: i64,
    /// Ledger segments its tables sealed and still hold, merged ones counted once.
    pub segments: usize,
    /// Tables whose ledger sealed at least once.
    pub sealed_tables: usize,
    /// Ordered sources whose old runs settled, or that went to the archive.
    pub settled: usize,
    /// Deliveries of records long acknowledged (rewinds, duplicate sends, retries).
    pub rewinds: usize,
    /// Orphan cleanups of another engine run between deliveries.
    pub cleanups: usize,
}

/// Where each lane's or message's acknowledged records stand.
struct Progress {
    cursors: Vec<usize>,
    lanes: Vec<Vec<Record>>,
    sqs_acked: HashSet<usize>,
    posts: Vec<Vec<Record>>,
    posts_acked: HashSet<usize>,
}

impl Progress {
    fn new(setup: &Setup) -> Self {
        Self {
            cursors: vec![0usize; setup.lanes],
            lanes: (0..setup.lanes)
                .map(|l| {
                    setup
                        .records
                        .iter()
                        .filter(|r| r.lane == l)
                        .cloned()
                        .collect()
                })
                .collect(),
            sqs_acked: HashSet::new(),
            posts: posts(setup),
            posts_acked: HashSet::new(),
        }
    }

    fn done(&self, setup: &Setup) -> bool {
        match setup.kind {
            Kind::Sqs => self.sqs_acked.len() == setup.records.len(),
            Kind::Http | Kind::HttpBuffered => self.posts_acked.len() == self.posts.len(),
            _ => self
                .cursors
                .iter()
                .zip(&self.lanes)
                .all(|(c, l)| *c >= l.len()),
        }
    }

    /// The next records a source delivers; with `rewind`, records it
    /// delivered and had acknowledged long ago, from where a rerun or a
    /// consumer reset starts (`None` when nothing is acknowledged yet).
    fn pick(
        &self,
        setup: &Setup,
        rng: &mut Rng,
        rewind: bool,
    ) -> Option<(Vec<Record>, Vec<usize>)> {
        match setup.kind {
            Kind::Sqs => {
                let pool: Vec<&Record> = setup
                    .records
                    .iter()
                    .filter(|r| self.sqs_acked.contains(&r.ordinal) == rewind)
                    .collect();
                if pool.is_empty() {
                    return None;
                }
                let most = 1 + rng.below(10);
                let mut picked: Vec<Record> = pool
                    .iter()
                    .filter(|_| rng.chance(60))
                    .take(most)
                    .map(|r| (*r).clone())
                    .collect();
                if picked.is_empty() {
                    picked.push(pool[0].clone());
                }
                Some((picked, Vec::new()))
            }
            Kind::Http => {
                let open: Vec<usize> = (0..self.posts.len())
                    .filter(|p| self.posts_acked.contains(p) == rewind)
                    .collect();
                if open.is_empty() {
                    return None;
                }
                let p = open[rng.below(open.len())];
                Some((self.posts[p].clone(), vec![p]))
            }
            Kind::HttpBuffered => self.window(rng, rewind),
            _ => {
                let open: Vec<usize> = (0..setup.lanes)
                    .filter(|l| {
                        if rewind {
                            self.cursors[*l] > 0
                        } else {
                            self.cursors[*l] < self.lanes[*l].len()
                        }
                    })
                    .collect();
                if open.is_empty() {
                    return None;
                }
                let lane = open[rng.below(open.len())];
                let start = if rewind {
                    rng.below(self.cursors[lane])
                } else {
                    self.cursors[lane]
                };
                let end = (start + 1 + rng.below(8)).min(self.lanes[lane].len());
                Some((self.lanes[lane][start..end].to_vec(), Vec::new()))
            }
        }
    }

    /// A window of the HTTP buffer: some of the posts waiting (or, with
    /// `rewind`, acknowledged), in the buffer's order, now and then one of
    /// them twice.
    fn window(&self, rng: &mut Rng, rewind: bool) -> Option<(Vec<Record>, Vec<usize>)> {
        let open: Vec<usize> = (0..self.posts.len())
            .filter(|p| self.posts_acked.contains(p) == rewind)
            .collect();
        if open.is_empty() {
            return None;
        }
        let most = 1 + rng.below(6);
        let mut picked: Vec<usize> = open
            .iter()
            .copied()
            .filter(|_| rng.chance(50))
            .take(most)
            .collect();
        if picked.is_empty() {
            picked.push(open[rng.below(open.len())]);
        }
        if rng.chance(15) {
            picked.push(picked[rng.below(picked.len())]);
        }
        let records = picked.iter().flat_map(|p| self.posts[*p].clone()).collect();
        Some((records, picked))
    }

    fn ack(&mut self, setup: &Setup, inv: &Invocation) {
        match setup.kind {
            Kind::Sqs => self.sqs_acked.extend(inv.records.iter().map(|r| r.ordinal)),
            Kind::Http | Kind::HttpBuffered => {
                self.posts_acked.extend(inv.posts.iter().copied());
            }
            _ => {
                let lane = inv.records[0].lane;
                let last = inv.records[inv.records.len() - 1].ordinal;
                let end = self.lanes[lane]
                    .iter()
                    .position(|r| r.ordinal == last)
                    .map_or(0, |i| i + 1);
                self.cursors[lane] = self.cursors[lane].max(end);
            }
        }
    }
}

/// Moves the clock forward, seconds mostly, hours or days sometimes, as
/// far as the contract lets the schedule's deliveries be apart; returns the
/// step taken.
fn advance(rng: &mut Rng, setup: &Setup, queue: &ChaosQueue, start: i64) -> i64 {
    let want = match rng.below(100) {
        0..=49 => rng.below(10_000) as i64,
        50..=79 => 10_000 + rng.below(290_000) as i64,
        80..=94 => 300_000 + rng.below(3_300_000) as i64,
        _ => HOUR_MS + rng.below(3 * 24 * HOUR_MS as usize) as i64,
    };
    let now = clock::now_ms();
    let mut room = i64::MAX;
    if setup.kind.by_id() {
        room = room.min(start + ID_SPAN_MS - now);
    }
    if let Some(oldest) = queue.oldest_sent_ms() {
        room = room.min(oldest + QUEUE_AGE_MS - now);
    }
    let step = want.min(room.max(0));
    if step > 0 {
        clock::shift(step);
    }
    step
}

/// Points `table`'s main at snapshot `id`, as another engine's
/// `rollback_to_snapshot` does (no requirement: it wins any race).
pub async fn roll_back(catalog: &dyn Catalog, table: &TableIdent, id: i64) {
    let base = catalog.load_table(table).await.unwrap();
    let retention = SnapshotRetention::Branch {
        min_snapshots_to_keep: None,
        max_snapshot_age_ms: None,
        max_ref_age_ms: None,
    };
    let built = TableMetadataBuilder::new_from_metadata(
        (*base.metadata).clone(),
        Some(base.metadata_location.clone()),
    )
    .set_ref("main", SnapshotReference::new(id, retention))
    .unwrap()
    .build()
    .unwrap();
    catalog
        .commit(TableCommit {
            updates: built.changes,
            metadata: built.metadata,
            requirements: Vec::new(),
            base,
        })
        .await
        .landed()
        .unwrap();
}

/// Another engine's orphan cleanup: deletes every file under the table's
/// location that its metadata does not name (Iceberg Java's
/// `remove_orphan_files` with no age limit, S3 Tables' unreferenced file
/// removal). Run when no commit request is queued, as such cleanups must
/// be; returns how many files it deleted.
pub async fn foreign_cleanup(catalog: &dyn Catalog, table: &TableIdent) -> usize {
    let loaded = catalog.load_table(table).await.unwrap();
    let meta = &loaded.metadata;
    let file_io = catalog.file_io();
    let norm = |p: &str| floe_core::uri::normalize(p).unwrap_or_else(|| p.to_string());
    let mut named: HashSet<String> = HashSet::new();
    named.insert(norm(&loaded.metadata_location));
    for l in meta.metadata_log() {
        named.insert(norm(&l.metadata_file));
    }
    for f in meta.statistics_iter() {
        named.insert(norm(&f.statistics_path));
    }
    for snapshot in meta.snapshots() {
        named.insert(norm(snapshot.manifest_list()));
        let bytes = file_io
            .new_input(snapshot.manifest_list())
            .unwrap()
            .read()
            .await
            .unwrap();
        let list = floe_core::iceberg::spec::ManifestList::parse_with_version(
            &bytes,
            meta.format_version(),
        )
        .unwrap();
        for m in list.entries() {
            named.insert(norm(&m.manifest_path));
            let manifest = m.load_manifest(file_io).await.unwrap();
            for e in manifest.entries() {
                named.insert(norm(e.data_file().file_path()));
            }
        }
    }
    let root = norm(meta.location());
    let dir = std::path::PathBuf::from(root.trim_start_matches("file://"));
    let mut files = Vec::new();
    walk_files(&dir, &mut files);
    let mut deleted = 0;
    for f in files {
        let uri = format!("file://{}", f.display());
        if !named.contains(&norm(&uri)) {
            std::fs::remove_file(&f).unwrap();
            deleted += 1;
        }
    }
    deleted
}

fn walk_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            walk_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Runs one schedule through `driver`; returns what it found, what it
/// covered and the schedule's trace.
pub async fn run(
    harness: &Harness,
    seed: u64,
    kinds: &[Kind],
    driver: &dyn Driver,
) -> (Setup, Verdict, Covered, Vec<String>) {
    let mut setup = setup(seed, kinds);
    if std::env::var("FLOE_HARNESS_PROGRESS").is_ok() {
        eprintln!("seed {seed}: {:?}, keyed {}", setup.kind, setup.keyed);
    }
    // Every record is in the source when the schedule starts.
    let start = clock::now_ms();
    for r in &mut setup.records {
        r.arrived_ms += start;
    }
    let tables = harness.tables(&setup).await;
    let queue = ChaosQueue::new(seed);
    let mut rng = Rng::new(seed ^ 0xD1CE);
    let mut covered = Covered::default();
    let mut trace = vec![format!(
        "seed {seed}: {:?} {} v{} table, {} records, {} lane(s), ledger seals every {} commits{}",
        setup.kind,
        setup.mode,
        setup.format_version,
        setup.records.len(),
        setup.lanes,
        setup.seal_entries,
        if setup.routed {
            ", routed to two tables"
        } else {
            ""
        }
    )];
    let counters = Arc::new(Counters::default());
    let mut progress = Progress::new(&setup);
    let mut steps = 0;
    while !progress.done(&setup) || !queue.is_empty() {
        steps += 1;
        assert!(
            steps < 20_000,
            "seed {seed}: the schedule does not converge\n{}",
            trace.join("\n")
        );
        let step = advance(&mut rng, &setup, &queue, start);
        if step >= HOUR_MS {
            trace.push(format!("clock +{:.1} h", step as f64 / HOUR_MS as f64));
        }
        let writing = !progress.done(&setup);
        let roll = rng.below(100);
        let at = Place {
            harness,
            setup: &setup,
            tables: &tables,
            queue: &queue,
        };
        if roll < 6 && queue.is_empty() {
            covered.cleanups += 1;
            trace.push(cleanup_step(&at).await);
        } else if (writing && (roll < 55 || queue.is_empty())) || (92..96).contains(&roll) {
            let rewind = !writing || roll >= 92 || rng.chance(8);
            if let Some(line) = write_step(&at, driver, &mut rng, &mut progress, rewind).await {
                covered.rewinds += usize::from(rewind);
                trace.push(line);
            }
        } else if roll < 92 || !writing {
            trace.push(commit_step(harness, &queue, &mut rng, &counters).await);
        } else {
            trace.push(maintain_step(&at).await);
        }
    }
    let catalog = harness.catalog(Faults::none());
    let mut verdict = check(&setup, &tables, catalog.as_ref()).await;
    verdict.dead_lettered = Counters::get(&counters.requests_dead_lettered);
    covered.simulated_ms = clock::now_ms() - start;
    for t in std::iter::once(&tables.a).chain(tables.b.as_ref()) {
        ledger_coverage(catalog.as_ref(), t, &mut covered).await;
    }
    (setup, verdict, covered, trace)
}

/// Where a schedule's steps run: its harness, setup, tables and queue.
struct Place<'a> {
    harness: &'a Harness,
    setup: &'a Setup,
    tables: &'a Tables,
    queue: &'a Arc<ChaosQueue>,
}

/// A writer invocation of records picked from the source (`rewind`: ones
/// delivered before), failing before or after its enqueue now and then;
/// its trace line, or `None` when there was nothing to pick.
async fn write_step(
    at: &Place<'_>,
    driver: &dyn Driver,
    rng: &mut Rng,
    progress: &mut Progress,
    rewind: bool,
) -> Option<String> {
    let (mut records, posts) = progress
        .pick(at.setup, rng, rewind)
        .or_else(|| progress.pick(at.setup, rng, !rewind))?;
    // SQS delivers at least once, within one event too.
    if at.setup.kind == Kind::Sqs && !records.is_empty() && rng.chance(15) {
        let i = rng.below(records.len());
        records.insert(i + 1, records[i].clone());
    }
    let fail_before = rng.chance(10);
    let fail_after = !fail_before && rng.chance(20);
    let inv = Invocation {
        records,
        fail_before_enqueue: fail_before,
        fail_after_enqueue: fail_after,
        posts,
    };
    let acked = driver
        .write(at.harness, at.setup, at.tables, at.queue.clone(), &inv)
        .await;
    let line = format!(
        "{} {:?}{}{} -> {}",
        if rewind { "redeliver" } else { "write" },
        inv.records.iter().map(|r| r.ordinal).collect::<Vec<_>>(),
        if fail_before {
            " (fails before enqueue)"
        } else {
            ""
        },
        if fail_after {
            " (fails after enqueue)"
        } else {
            ""
        },
        if acked { "acked" } else { "redelivered later" }
    );
    if acked {
        progress.ack(at.setup, &inv);
    }
    Some(line)
}

/// Another engine's orphan cleanup of the schedule's tables; its trace line.
async fn cleanup_step(at: &Place<'_>) -> String {
    let catalog = at.harness.catalog(Faults::none());
    let mut deleted = 0;
    for t in std::iter::once(&at.tables.a).chain(at.tables.b.as_ref()) {
        deleted += foreign_cleanup(catalog.as_ref(), t).await;
    }
    format!("another engine's orphan cleanup deleted {deleted} unreferenced file(s)")
}

/// Maintenance: every snapshot but the current one expires, small files
/// compact; then the held-back requests arrive. Its own orphan cleanup
/// waits longer than any schedule lasts. Its trace line.
async fn maintain_step(at: &Place<'_>) -> String {
    let catalog = at.harness.catalog(Faults::none());
    let opts = MaintainOptions {
        max_snapshot_age_ms: Some(0),
        orphan_window_ms: 1_000 * 24 * HOUR_MS,
        ..Default::default()
    };
    for t in std::iter::once(&at.tables.a).chain(at.tables.b.as_ref()) {
        maintain::maintain(&catalog, t, &opts).await.unwrap();
    }
    at.queue.release_held();
    "maintenance (expire all, compact), then held-back requests released".into()
}

/// A committer run over what the queue holds; sometimes it fails and
/// releases its messages. Its trace line.
async fn commit_step(
    harness: &Harness,
    queue: &ChaosQueue,
    rng: &mut Rng,
    counters: &Arc<Counters>,
) -> String {
    let (catalog_faults, committer_faults, label) = match rng.below(10) {
        0 => (
            Faults::at(FaultPoint::CatalogSwap, FaultMode::Error, 1),
            Faults::none(),
            " (catalog fails)",
        ),
        1 => (
            Faults::at(FaultPoint::CatalogAmbiguous, FaultMode::Error, 1),
            Faults::none(),
            " (catalog answer lost)",
        ),
        2 => (
            Faults::none(),
            Faults::at(FaultPoint::AfterCommit, FaultMode::Error, 1),
            " (fails after commit)",
        ),
        _ => (Faults::none(), Faults::none(), ""),
    };
    let committer = Committer::new(
        CommitEngine::new(harness.catalog(catalog_faults), fast_retry()),
        harness.dead_letters.clone(),
        committer_faults,
        counters.clone(),
    );
    let deliveries = queue.receive(100, Duration::ZERO).await.unwrap();
    if deliveries.is_empty() {
        // Everything left is held back: let it go.
        queue.release_held();
        return "held-back requests released".into();
    }
    let report = committer.commit(deliveries.clone()).await;
    queue.ack(&report.done()).await.unwrap();
    queue.release(&report.failed()).await.unwrap();
    format!(
        "commit {} request(s){label}: {} done, {} released",
        deliveries.len(),
        report.done().len(),
        report.failed().len()
    )
}

/// Adds what the table's ledger went through to `covered`.
async fn ledger_coverage(catalog: &dyn Catalog, table: &TableIdent, covered: &mut Covered) {
    let loaded = catalog.load_table(table).await.unwrap();
    let store = Arc::new(floe_core::ledger::LedgerStore::new(
        catalog.file_io().clone(),
    ));
    let ledger = floe_core::ledger::Ledger::open(store, &loaded.metadata)
        .await
        .unwrap();
    let head = ledger.head();
    covered.segments += head.segments.len();
    if !head.segments.is_empty() || head.recent.len() < head.seq as usize {
        covered.sealed_tables += 1;
    }
    covered.settled += head
        .sources
        .values()
        .filter(|m| m.settled.is_some())
        .count()
        + head.archive.iter().map(|a| a.sources).sum::<usize>();
}

/// Commits retry quickly in the harness.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        total_timeout: None,
    }
}

/// What the table should hold: per table, id → value.
pub fn expected(setup: &Setup, tables: &Tables) -> BTreeMap<TableIdent, BTreeMap<i64, String>> {
    let mut out: BTreeMap<TableIdent, BTreeMap<i64, String>> = BTreeMap::new();
    out.insert(tables.a.clone(), BTreeMap::new());
    if let Some(b) = &tables.b {
        out.insert(b.clone(), BTreeMap::new());
    }
    for r in &setup.records {
        let table = match (&tables.b, r.routed_b) {
            (Some(b), true) => b,
            _ => &tables.a,
        };
        let rows = out.get_mut(table).unwrap();
        if r.delete {
            rows.remove(&r.key);
        } else {
            rows.insert(r.key, r.value());
        }
    }
    out
}

/// The rows of a table: (id, value).
pub fn rows_of(batches: &[RecordBatch]) -> Vec<(i64, Option<String>)> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let v = b.column_by_name("v").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((id.value(i), v.is_valid(i).then(|| v.value(i).to_string())));
        }
    }
    out
}

/// Compares `rows` with `want`.
pub fn compare(
    want: &BTreeMap<i64, String>,
    rows: &[(i64, Option<String>)],
    keyed: bool,
) -> Verdict {
    let mut v = Verdict::default();
    let mut seen: BTreeMap<i64, Vec<Option<String>>> = BTreeMap::new();
    for (id, value) in rows {
        seen.entry(*id).or_default().push(value.clone());
    }
    for (id, values) in &seen {
        match want.get(id) {
            None => v.foreign += 1,
            Some(w) => {
                if values.len() > 1 {
                    v.doubled += 1;
                }
                if keyed && values.iter().any(|x| x.as_deref() != Some(w.as_str())) {
                    v.out_of_order += 1;
                }
            }
        }
    }
    v.lost = want.keys().filter(|k| !seen.contains_key(k)).count();
    v
}

async fn check(setup: &Setup, tables: &Tables, catalog: &dyn Catalog) -> Verdict {
    let mut total = Verdict::default();
    // iceberg-rust 0.10 reads no deletion vectors: such tables are checked
    // by DuckDB and pyiceberg, which do, with every table in `run_all`.
    if setup.format_version == 3 && setup.mode == "position" {
        return total;
    }
    for (table, want) in expected(setup, tables) {
        let rows = rows_of(&crate::scan(catalog, &table).await);
        let v = compare(&want, &rows, setup.keyed);
        if std::env::var("FLOE_HARNESS_SEED").is_ok() {
            println!("iceberg-rust reads {rows:?}, the model {want:?}");
        }
        total.lost += v.lost;
        total.doubled += v.doubled;
        total.out_of_order += v.out_of_order;
        total.foreign += v.foreign;
    }
    total
}

/// The seeds a run replays: `FLOE_HARNESS_SEED` alone, else
/// `FLOE_HARNESS_SCHEDULES` (default `count`) from `FLOE_HARNESS_FIRST`
/// (default `first`).
pub fn seeds(first: u64, count: u64) -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse().ok());
    if let Some(seed) = var("FLOE_HARNESS_SEED") {
        return vec![seed];
    }
    let first = var("FLOE_HARNESS_FIRST").unwrap_or(first);
    (first..first + var("FLOE_HARNESS_SCHEDULES").unwrap_or(count)).collect()
}

/// Runs every seed through `driver`, fails naming each schedule that differs
/// from the model (with its trace), has the independent readers check the
/// tables, and reports the totals under `label` for the suite's closing line.
pub async fn run_all(label: &str, seeds: &[u64], kinds: &[Kind], driver: &dyn Driver) {
    // `FLOE_HARNESS_KINDS=HttpBuffered,Sqs` keeps a long run on those kinds.
    let kinds: Vec<Kind> = match std::env::var("FLOE_HARNESS_KINDS") {
        Ok(names) => kinds
            .iter()
            .copied()
            .filter(|k| names.split(',').any(|n| n.trim() == format!("{k:?}")))
            .collect(),
        Err(_) => kinds.to_vec(),
    };
    assert!(
        !kinds.is_empty(),
        "FLOE_HARNESS_KINDS names none of {label}'s kinds"
    );
    let kinds = &kinds[..];
    let h = Harness::new();
    let mut failures = Vec::new();
    let mut by_kind = BTreeMap::new();
    let mut total = Verdict::default();
    let mut checked = Vec::new();
    let mut covered = Covered::default();
    for seed in seeds {
        let (setup, verdict, c, trace) = run(&h, *seed, kinds, driver).await;
        covered.simulated_ms += c.simulated_ms;
        covered.segments += c.segments;
        covered.sealed_tables += c.sealed_tables;
        covered.settled += c.settled;
        covered.rewinds += c.rewinds;
        covered.cleanups += c.cleanups;
        *by_kind.entry(format!("{:?}", setup.kind)).or_insert(0) += 1;
        total.lost += verdict.lost;
        total.doubled += verdict.doubled;
        total.out_of_order += verdict.out_of_order;
        total.foreign += verdict.foreign;
        total.dead_lettered += verdict.dead_lettered;
        if !verdict.clean() {
            failures.push(format!("{verdict:?}\n{}", trace.join("\n")));
        }
        if std::env::var("FLOE_HARNESS_SEED").is_ok() {
            println!("{}", trace.join("\n"));
        }
        checked.push(setup);
    }
    assert!(
        failures.is_empty(),
        "{} of {} schedules differ from the model (replay one with FLOE_HARNESS_SEED):\n\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
    let readers = independent(&h, &checked).await;
    let v3 = checked.iter().filter(|s| s.format_version == 3).count();
    report(&format!(
        "{label}: {} schedules ({by_kind:?}; {v3} on v3 tables) over {:.0} simulated days, {} tables sealed their ledger ({} segments), {} sources settled, {} late redeliveries, {} foreign orphan cleanups; {} lost, {} doubled, {} out of order, {} foreign, {} requests dead-lettered; independent readers: {readers}",
        seeds.len(),
        covered.simulated_ms as f64 / (24 * HOUR_MS) as f64,
        covered.sealed_tables,
        covered.segments,
        covered.settled,
        covered.rewinds,
        covered.cleanups,
        total.lost,
        total.doubled,
        total.out_of_order,
        total.foreign,
        total.dead_lettered
    ));
}

/// Appends the run's closing line to `FLOE_HARNESS_REPORT` (the test script
/// prints it with its own), and to the test's output.
pub fn report(line: &str) {
    println!("{line}");
    if let Ok(path) = std::env::var("FLOE_HARNESS_REPORT") {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Reads every schedule's tables again with DuckDB and pyiceberg (see
/// `read_tables.py`) and compares them with the model; returns a summary
/// and panics on a difference.
pub async fn independent(harness: &Harness, setups: &[Setup]) -> String {
    let catalog = harness.catalog(Faults::none());
    let mut wanted = Vec::new();
    for setup in setups {
        let tables = Tables {
            a: parse_table(&format!("h.s{}_a", setup.seed)).unwrap(),
            b: setup
                .routed
                .then(|| parse_table(&format!("h.s{}_b", setup.seed)).unwrap()),
        };
        for (table, want) in expected(setup, &tables) {
            let loaded = catalog.load_table(&table).await.unwrap();
            let path = loaded
                .metadata_location
                .trim_start_matches("file://")
                .to_string();
            wanted.push((setup.seed, setup.keyed, path, want));
        }
    }
    let list = harness.dir.join("tables.json");
    let paths: Vec<&String> = wanted.iter().map(|(_, _, p, _)| p).collect();
    std::fs::write(&list, serde_json::to_vec(&paths).unwrap()).unwrap();
    let read =
        crate::services::python_json("shared/tests/read_tables.py", &[list.to_str().unwrap()]);
    let (mut duck, mut py) = (0, 0);
    for (seed, keyed, path, want) in &wanted {
        let got = &read[path.as_str()];
        let rows = |v: &serde_json::Value| -> Vec<(i64, Option<String>)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().map(str::to_string)))
                .collect()
        };
        let d = compare(want, &rows(&got["duckdb"]), *keyed);
        assert!(
            d.clean(),
            "seed {seed}: DuckDB reads {path} as {d:?}: {:?}, the model {want:?}",
            rows(&got["duckdb"])
        );
        duck += 1;
        if !got["pyiceberg"].is_null() {
            let p = compare(want, &rows(&got["pyiceberg"]), *keyed);
            assert!(
                p.clean(),
                "seed {seed}: pyiceberg reads {path} as {p:?}: {:?}, the model {want:?}",
                rows(&got["pyiceberg"])
            );
            py += 1;
        }
    }
    format!("{duck} tables equal the model in DuckDB, {py} in pyiceberg")
}

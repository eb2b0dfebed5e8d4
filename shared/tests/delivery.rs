//! The adversarial delivery harness (see `floe_test_support::harness`)
//! through the core writer step: each source kind's batches built as the
//! Lambda events and the embedded sources build them (every other Kafka
//! schedule's records as registry-framed Avro, opened as the writer
//! function opens them).
//! `FLOE_HARNESS_SCHEDULES` sets how many seeded schedules run (default 200,
//! from `FLOE_HARNESS_FIRST`, 1); `FLOE_HARNESS_SEED` replays one and prints
//! its schedule.
//! Every table is then read again by DuckDB (and pyiceberg where it has no
//! equality deletes), independent readers, and compared with the model.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use floe_core::change::{self, Change, ChangeFormat};
use floe_core::config::Config;
use floe_core::envelope::Opener;
use floe_core::envelope::avro::Schemas;
use floe_core::faults::Faults;
use floe_core::metrics::Counters;
use floe_core::pipeline::{Writer, WriterParts};
use floe_core::queue::QueueRef;
use floe_core::source::SourceKind;
use floe_core::source::{Position, Positions, SourceSpan, batch_id};
use floe_core::source::{Records, Source, SourceBatch};
use floe_test_support::harness::{self, Driver, Harness, Invocation, Kind, Setup, Tables};

/// The writer step, fed batches shaped like each source's.
struct Core;

#[async_trait]
impl Driver for Core {
    async fn write(
        &self,
        harness: &Harness,
        setup: &Setup,
        tables: &Tables,
        queue: QueueRef,
        inv: &Invocation,
    ) -> bool {
        let faults = inv.faults();
        let mut toml = String::new();
        if setup.routed {
            toml += &format!(
                "[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"h.s{}_{{value}}\"\n",
                setup.seed
            );
        }
        let avro = registry_avro(setup);
        if avro {
            toml += &format!("[sources.h]\nregistry = \"{REGISTRY}\"\n");
        }
        let config =
            Arc::new(Config::from_toml_str(&toml, std::path::Path::new("."), &|_| None).unwrap());
        let writer = Writer::new(WriterParts {
            catalog: harness.catalog(Faults::none()),
            queue,
            dead_letters: harness.dead_letters.clone(),
            faults,
            counters: Arc::new(Counters::default()),
            config: config.clone(),
        })
        .unwrap();
        let mut batch = match setup.kind {
            Kind::HttpBuffered => buffered(setup, tables, inv),
            _ => batch(setup, inv),
        };
        // Opened as the writer function opens its event: an SQS message
        // delivered twice taken once; a Kafka event's datums checked
        // against their writer's schema and kept binary.
        let schemas = Schemas::default();
        if avro {
            schemas
                .preload(REGISTRY, SCHEMA_ID, &avro_schema(setup))
                .unwrap();
        }
        batch = Opener::new(config, schemas)
            .open(batch)
            .await
            .unwrap()
            .batch;
        assert_eq!(
            batch.avro.is_some(),
            avro,
            "the batch opened as registry Avro"
        );
        if !setup.routed {
            batch.table = Some(tables.a.clone());
        }
        writer.write(batch).await.is_ok()
    }
}

/// The registry the Avro schedules' schema comes from (preloaded: no server).
const REGISTRY: &str = "http://registry";
/// The Confluent schema id their records are framed with.
const SCHEMA_ID: u32 = 7;

/// Every other Kafka schedule sends its records as Confluent-framed Avro,
/// so the binary path (checked at open, read straight into columns, read
/// as JSON by keyed tables, routing and dead letters) meets the same
/// adversarial delivery as JSON.
fn registry_avro(setup: &Setup) -> bool {
    setup.kind == Kind::Kafka && setup.seed.is_multiple_of(2)
}

/// Whether a schedule's batches carry changes their source decoded, each at
/// its record's position, as the Postgres source hands them over: every
/// other keyed Postgres schedule (the others send the same changes as
/// `_op` lines).
fn decoded_changes(setup: &Setup) -> bool {
    setup.kind == Kind::Postgres && setup.keyed && setup.seed.is_multiple_of(2)
}

/// `items` as the changes their source decoded; `None` when one is not a change.
fn changes_of(items: &[(String, Bytes)]) -> Option<Vec<Change>> {
    items
        .iter()
        .map(|(pos, body)| {
            let mut change = change::decode(body, ChangeFormat::Auto).ok()?;
            change.position = Some(pos.clone());
            Some(change)
        })
        .collect()
}

/// The writer's schema of a schedule's records: keyed `_op` changes, or
/// append records with their routing field.
fn avro_schema(setup: &Setup) -> String {
    let fields = match setup.keyed {
        true => {
            r#"{"name":"_op","type":"string"},{"name":"id","type":"long"},{"name":"v","type":["null","string"],"default":null}"#
        }
        false => {
            r#"{"name":"id","type":"long"},{"name":"v","type":"string"},{"name":"t","type":"string"}"#
        }
    };
    format!(r#"{{"type":"record","name":"R","fields":[{fields}]}}"#)
}

/// `body` (the record's JSON) as its Avro datum, Confluent-framed.
fn framed(setup: &Setup, body: &str) -> Bytes {
    use apache_avro::types::Value as AvroValue;
    let schema = apache_avro::Schema::parse_str(&avro_schema(setup)).unwrap();
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    let text = |k: &str| json[k].as_str().map(|s| AvroValue::String(s.into()));
    let id = AvroValue::Long(json["id"].as_i64().unwrap());
    let fields = match setup.keyed {
        true => vec![
            ("_op".to_string(), text("_op").unwrap()),
            ("id".to_string(), id),
            (
                "v".to_string(),
                match text("v") {
                    Some(v) => AvroValue::Union(1, Box::new(v)),
                    None => AvroValue::Union(0, Box::new(AvroValue::Null)),
                },
            ),
        ],
        false => vec![
            ("id".to_string(), id),
            ("v".to_string(), text("v").unwrap()),
            ("t".to_string(), text("t").unwrap()),
        ],
    };
    let mut out = vec![0];
    out.extend(SCHEMA_ID.to_be_bytes());
    out.extend(apache_avro::to_avro_datum(&schema, AvroValue::Record(fields)).unwrap());
    Bytes::from(out)
}

/// The batch the writer makes of a window of the HTTP buffer holding the
/// posts of `inv`.
fn buffered(setup: &Setup, tables: &Tables, inv: &Invocation) -> SourceBatch {
    let posts = harness::posts(setup);
    let table = floe_core::ident::display(&tables.a);
    let items = inv
        .posts
        .iter()
        .map(|p| {
            let post = harness::buffered_post(setup, &table, *p, &posts[*p]);
            (format!("b{p}"), post)
        })
        .collect();
    let mut window = floe_core::http::buffer::window(items);
    assert_eq!(window.batches.len(), 1, "one table's posts make one batch");
    window.batches.remove(0)
}

/// The batch a source hands the writer for `inv`.
fn batch(setup: &Setup, inv: &Invocation) -> SourceBatch {
    let items: Vec<(String, Bytes)> = inv
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let pos = match setup.kind {
                Kind::Http => format!("record {i}"),
                _ => r.pos.clone(),
            };
            let body = harness::body(setup, r);
            let record = match registry_avro(setup) {
                true => framed(setup, &body),
                false => Bytes::from(body),
            };
            (pos, record)
        })
        .collect();
    let range = |source: &str| {
        let first = Position::parse(&inv.records[0].pos).unwrap();
        let last = Position::parse(&inv.records[inv.records.len() - 1].pos).unwrap();
        SourceSpan {
            source: source.into(),
            positions: Positions::Range { first, last },
            stream: true,
        }
    };
    let ids = |source: &str| SourceSpan {
        source: source.into(),
        positions: Positions::Ids {
            ids: inv.records.iter().map(|r| r.pos.clone()).collect(),
        },
        stream: false,
    };
    let (kind, span) = match setup.kind {
        Kind::Kafka => (SourceKind::Kafka, range("kafka:h/0")),
        Kind::Kinesis => (SourceKind::Kinesis, range("kinesis:h/shardId-0")),
        Kind::Postgres => (SourceKind::Postgres, range("pg:h")),
        Kind::KinesisParallel => (SourceKind::Kinesis, ids("kinesis:h/shardId-0")),
        Kind::DynamoDb => (SourceKind::DynamoDb, ids("dynamodb:h/2024")),
        Kind::Sqs => (SourceKind::Sqs, ids("sqs:h")),
        Kind::HttpBuffered => unreachable!("built by `buffered`"),
        Kind::Http => {
            let body: Vec<u8> = items
                .iter()
                .flat_map(|(_, b)| b.iter().copied().chain([b'\n']))
                .collect();
            let key = format!(
                "k{}#{}",
                inv.posts.first().copied().unwrap_or(0),
                floe_core::idempotency::HttpKeys::body_hash(&body)
            );
            (
                SourceKind::Http,
                SourceSpan {
                    source: "http:h".into(),
                    positions: Positions::Key { key, order: None },
                    stream: false,
                },
            )
        }
    };
    let spans = vec![span];
    SourceBatch {
        source: Source {
            kind,
            name: "h".into(),
        },
        table: None,
        batch_id: batch_id(&spans, None),
        spans,
        records: match decoded_changes(setup) {
            true => Records::Changes(
                changes_of(&items).expect("a keyed schedule's records are changes"),
            ),
            false => Records::Items(items),
        },
        state: Default::default(),
        oldest_ms: inv.records.iter().map(|r| r.arrived_ms).min(),
        avro: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_source_under_adversarial_delivery_equals_the_model() {
    harness::run_all("harness", &harness::seeds(1, 200), &Kind::ALL, &Core).await;
}

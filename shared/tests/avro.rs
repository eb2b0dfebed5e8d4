//! Registry Avro through the writer on a local warehouse, two ways: opened
//! as the writer function opens it (checked, kept binary, read straight
//! into columns), and as the JSON path did it (each datum decoded to JSON
//! text, the schema's declared types beside the batch). The tables each
//! way makes (types, evolution, rows) and the dead letters (field, reason,
//! record) must be the same, for an append-only table and a keyed one.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{RecordBatch, UInt32Array};
use bytes::Bytes;
use floe_core::config::Config;
use floe_core::dlq::Rejected;
use floe_core::embedded::{Embedded, IngestOptions};
use floe_core::envelope::avro::{self, Decoded, Decoder, Registered, Schemas};
use floe_core::envelope::{Opener, Undecodable};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::source::{Positions, Records, Source, SourceBatch, SourceKind, SourceSpan};

const REGISTRY: &str = "http://registry";

/// The producer's first version.
const V1: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
    {"name":"order_id","type":"long"},
    {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"attrs","type":{"type":"map","values":["null","double"]}},
    {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
    {"name":"ship","type":{"type":"record","name":"Ship","fields":[
        {"name":"city","type":"string"},
        {"name":"by","type":["null","int","string"]}]}}
]}"#;

/// The second version: `coupon` added, `day` now optional.
fn v2() -> String {
    V1.replace(
        r#"{"name":"day","type":{"type":"int","logicalType":"date"}},"#,
        r#"{"name":"day","type":["null",{"type":"int","logicalType":"date"}]},
           {"name":"coupon","type":["null","string"],"default":null},"#,
    )
}

fn zig(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push(0x80 | (z & 0x7f) as u8);
        z >>= 7;
    }
    out.push(z as u8);
}

fn text(s: &str, out: &mut Vec<u8>) {
    zig(s.len() as i64, out);
    out.extend_from_slice(s.as_bytes());
}

/// An order datum; `v2` writes the second version's fields.
fn order(id: i64, cents: i64, day: i64, v2: bool) -> Vec<u8> {
    let mut out = Vec::new();
    zig(id, &mut out);
    let unscaled = cents.to_be_bytes();
    let first = unscaled
        .iter()
        .position(|&b| b != 0 && b != 0xff)
        .unwrap_or(7);
    text_bytes(&unscaled[first.saturating_sub(1)..], &mut out);
    if v2 {
        zig(1, &mut out);
    }
    zig(day, &mut out);
    if v2 {
        match id % 2 {
            0 => zig(0, &mut out),
            _ => {
                zig(1, &mut out);
                text("SAVE5", &mut out);
            }
        }
    }
    zig(1_767_225_600_123 + id, &mut out);
    text(
        &uuid::Uuid::from_u128(0x0e8f6c1a_0003_4c0f_9d3a_000000000000 + id as u128).to_string(),
        &mut out,
    );
    match id % 3 {
        0 => zig(0, &mut out),
        _ => {
            zig(1, &mut out);
            text(&format!("note \"{id}\""), &mut out);
        }
    }
    zig(2, &mut out);
    text("a", &mut out);
    text("b", &mut out);
    zig(0, &mut out);
    zig(3, &mut out);
    for (k, v) in [("z", Some(1.5)), ("a", None), ("z", Some(id as f64))] {
        text(k, &mut out);
        match v {
            None => zig(0, &mut out),
            Some(v) => {
                zig(1, &mut out);
                out.extend_from_slice(&f64::to_le_bytes(v));
            }
        }
    }
    zig(0, &mut out);
    zig(id % 2, &mut out);
    text("Oslo", &mut out);
    zig(id % 3, &mut out);
    match id % 3 {
        1 => zig(id, &mut out),
        2 => text("van", &mut out),
        _ => {}
    }
    out
}

fn text_bytes(b: &[u8], out: &mut Vec<u8>) {
    zig(b.len() as i64, out);
    out.extend_from_slice(b);
}

fn framed(id: u32, datum: Vec<u8>) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend(datum);
    out
}

/// Two batches: version 1 with a datum cut short, a date past year 9999
/// and a total past decimal(10,2) (which widens the column); then both
/// versions mixed.
fn batches() -> [Vec<Vec<u8>>; 2] {
    let mut first: Vec<Vec<u8>> = (1..=20)
        .map(|i| framed(1, order(i, i * 1234 - 5000, 20_454, false)))
        .collect();
    let mut short = framed(1, order(21, 1, 1, false));
    short.truncate(short.len() - 3);
    first.push(short);
    first.push(framed(1, order(22, 1, 3_000_000, false)));
    first.push(framed(1, order(23, 10_000_000_000, 1, false)));
    let second = (24..=40)
        .map(|i| framed(1 + (i % 2) as u32, order(i, i, 20_455, i % 2 == 1)))
        .collect();
    [first, second]
}

fn source_batch(records: &[Vec<u8>], first: u64, table: &TableIdent) -> SourceBatch {
    let items: Vec<(String, Bytes)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| ((first + i as u64).to_string(), Bytes::from(r.clone())))
        .collect();
    let spans = vec![SourceSpan {
        source: "kafka:orders".into(),
        positions: Positions::Range {
            first: first.into(),
            last: (first + records.len() as u64 - 1).into(),
        },
        stream: false,
    }];
    SourceBatch::new(
        Source::new(SourceKind::Kafka, "orders"),
        spans,
        Records::Items(items),
    )
    .to_table(Some(table.clone()))
}

/// The JSON path: every datum decoded to JSON text (an undecodable one
/// marked with why), the declared types beside the batch.
fn json_batch(records: &[Vec<u8>], first: u64, table: &TableIdent) -> SourceBatch {
    let decoders = [
        Arc::new(Decoder::new("schema id 1".into(), V1).unwrap()),
        Arc::new(Decoder::new("schema id 2".into(), &v2()).unwrap()),
    ];
    let mut registered = Registered::default();
    let json: Vec<Vec<u8>> = records
        .iter()
        .map(|r| {
            let (framing, datum) = avro::framing(r).unwrap();
            let avro::Framing::Confluent(id) = framing else {
                unreachable!()
            };
            let decoder = &decoders[id as usize - 1];
            match decoder.json(datum) {
                Ok(json) => {
                    registered.add(&Decoded {
                        record: json.clone(),
                        decoder: decoder.clone(),
                        binary: false,
                    });
                    json.to_vec()
                }
                Err(e) => Undecodable::record(r, &e).to_vec(),
            }
        })
        .collect();
    source_batch(&json, first, table).with_avro(Some(Arc::new(registered)))
}

fn config(dir: &std::path::Path) -> Config {
    let text = format!(
        "[sources.orders]\nregistry = \"{REGISTRY}\"\n\
         [tables.\"shop.keyed_direct\"]\nidentifier_fields = [\"order_id\"]\n\
         [tables.\"shop.keyed_json\"]\nidentifier_fields = [\"order_id\"]\n"
    );
    Config::from_toml_str(&text, dir, &|_| None).unwrap()
}

/// What a dead letter says, without the table and batch it names.
fn said(r: &[Rejected]) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = r
        .iter()
        .map(|r| {
            (
                r.position.clone(),
                r.field.clone(),
                r.reason.clone(),
                r.record.clone(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Every row, ordered by `order_id` (file order differs).
fn rows(batches: &[RecordBatch]) -> RecordBatch {
    let all = arrow_select::concat::concat_batches(&batches[0].schema(), batches).unwrap();
    let ids = all.column(0).as_primitive::<Int64Type>();
    let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
    order.sort_by_key(|&i| ids.value(i as usize));
    arrow_select::take::take_record_batch(&all, &UInt32Array::from(order)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_avro_lands_as_the_json_path_lands_it() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::with_config(dir.path(), config(dir.path()), Faults::none()).unwrap();
    let schemas = Schemas::default();
    schemas.preload(REGISTRY, 1, V1).unwrap();
    schemas.preload(REGISTRY, 2, &v2()).unwrap();
    let opener = Opener::new(Arc::new(floe.config().clone()), schemas);
    let opts = IngestOptions {
        writers: 1,
        commit_window: std::time::Duration::ZERO,
        ..IngestOptions::default()
    };
    for (direct, json) in [
        ("shop.direct", "shop.json"),
        ("shop.keyed_direct", "shop.keyed_json"),
    ] {
        let (direct, json) = (parse_table(direct).unwrap(), parse_table(json).unwrap());
        let mut rejected = (Vec::new(), Vec::new());
        let mut first = 100;
        for records in batches() {
            let opened = opener
                .open(source_batch(&records, first, &direct))
                .await
                .unwrap();
            assert!(opened.batch.avro.is_some());
            let a = floe
                .ingest_batches(vec![opened.batch], &opts)
                .await
                .unwrap();
            let b = floe
                .ingest_batches(vec![json_batch(&records, first, &json)], &opts)
                .await
                .unwrap();
            assert_eq!(a.records_committed, b.records_committed);
            rejected.0.extend(a.rejected);
            rejected.1.extend(b.rejected);
            first += records.len() as u64;
        }
        let dead = said(&rejected.0);

        assert_eq!(dead, said(&rejected.1));
        let fields: Vec<&str> = dead.iter().map(|d| d.1.as_str()).collect();
        assert_eq!(fields, ["ship.city", "day"], "{dead:?}");
        assert!(
            dead[0].2.contains("does not decode with schema id 1"),
            "{dead:?}"
        );
        let catalog = floe.catalog();
        let (a, b) = (
            catalog.load_table(&direct).await.unwrap(),
            catalog.load_table(&json).await.unwrap(),
        );
        let (sa, sb) = (a.metadata.current_schema(), b.metadata.current_schema());
        assert_eq!(sa.as_struct(), sb.as_struct());
        // A column the second version added; a total past decimal(10,2)
        // widened the column rather than failing.
        assert!(sa.field_by_name("coupon").is_some(), "{sa:?}");
        let total = sa.field_by_name("total").unwrap();
        assert_eq!(total.field_type.to_string(), "decimal(11, 2)");
        let (ra, rb) = (
            rows(&floe_test_support::scan(catalog.as_ref(), &direct).await),
            rows(&floe_test_support::scan(catalog.as_ref(), &json).await),
        );
        assert_eq!(ra.num_rows(), 38);
        assert_eq!(ra, rb);
    }
}

//! The payloads AWS users have, through the writer function's handler on
//! moto (S3, SQS, Glue): DynamoDB Streams items into a plain table, SNS and
//! EventBridge envelopes in SQS bodies, compressed records, CloudWatch Logs
//! subscription data on Kinesis, S3 event notifications naming NDJSON.gz
//! objects, and Avro framed for Glue's Schema Registry and for a
//! Confluent-compatible one. Every event is delivered twice (as Lambda or S3
//! may), the commit requests go through the committer handler, and the table
//! is read back by pyiceberg and DuckDB: rows and values, each once.

mod moto;

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_test_support::services;
use floe_writer::{WriterEvent, WriterFunction, WriterResponse};
use serde_json::{Value, json};

use moto::{kinesis_event, unique, writer_event};

/// One deployment on moto: a bucket, a commit queue, a table (created by
/// the writer on first write) in a Glue database, and `[sources]` settings.
struct Env {
    clients: AwsClients,
    bucket: String,
    queue_url: String,
    ident: TableIdent,
    sources: String,
}

impl Env {
    async fn new(sources: &str) -> Env {
        let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
        let (bucket, queue_url) = moto::bucket_and_queue(&clients).await;
        Env {
            clients,
            bucket,
            queue_url,
            ident: parse_table(&format!("{}.items", unique("pl"))).unwrap(),
            sources: sources.to_string(),
        }
    }

    async fn deployment(&self) -> Deployment {
        let text = format!(
            r#"
[warehouse]
uri = "s3://{bucket}/warehouse"
[aws]
region = "us-east-1"
endpoint = "{endpoint}"
[catalog]
type = "glue"
[queue]
url = "{queue}"
[routing]
table = "{table}"
{sources}
"#,
            bucket = self.bucket,
            endpoint = services::moto(),
            queue = self.queue_url,
            table = floe_core::ident::display(&self.ident),
            sources = self.sources,
        );
        let config = Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap();
        Deployment::from_config(config, Faults::none(), Role::Writer)
            .await
            .unwrap()
    }

    /// Hands `event` to a writer handler, then the commit queue to a
    /// committer handler, until it is empty; the writer's answer.
    async fn deliver(&self, event: &WriterEvent) -> WriterResponse {
        let writer = WriterFunction::new(&self.deployment().await).unwrap();
        let answer = writer.handle(event.clone()).await.unwrap();
        assert_eq!(
            serde_json::to_value(&answer).unwrap()["batchItemFailures"],
            json!([]),
            "the writer failed a batch"
        );
        self.drain().await;
        answer
    }

    async fn drain(&self) {
        let committer = CommitterFunction::new(&self.deployment().await).unwrap();
        let answers = moto::drain(&self.clients, &self.queue_url, &committer, 10).await;
        assert!(
            answers.iter().all(|a| moto::failures(a).is_empty()),
            "{answers:?}"
        );
    }

    /// The table's rows as pyiceberg and DuckDB read them (which must agree),
    /// sorted by `by`, values as JSON (decimals, dates and timestamps as text).
    async fn rows(&self, by: &str) -> Vec<Value> {
        let d = self.deployment().await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let v = services::python_json(
            "shared/tests/read_s3.py",
            &[services::moto(), &loaded.metadata_location],
        );
        let sorted = |rows: &Value| {
            let mut rows = rows.as_array().unwrap().clone();
            rows.sort_by_key(|r| r[by].to_string());
            rows
        };
        let (py, duck) = (sorted(&v["pyiceberg"]), sorted(&v["duckdb"]));
        assert_eq!(py.len(), duck.len(), "pyiceberg and DuckDB disagree");
        py
    }

    /// The current snapshot's `total-data-files` and the number of snapshots.
    async fn files_and_snapshots(&self) -> (String, usize) {
        let d = self.deployment().await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let meta = &loaded.metadata;
        let files = meta
            .current_snapshot()
            .and_then(|s| {
                s.summary()
                    .additional_properties
                    .get("total-data-files")
                    .cloned()
            })
            .unwrap_or_default();
        (files, meta.snapshots().count())
    }

    /// The table's columns as `name:type`.
    async fn column_types(&self) -> Vec<String> {
        let d = self.deployment().await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let schema = loaded.metadata.current_schema().clone();
        schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| format!("{}:{}", f.name, f.field_type))
            .collect()
    }

    /// Exactly one record was dead-lettered, at `position`, for a reason
    /// that says `why`.
    async fn assert_one_dead_letter(&self, position: &str, why: &str) {
        let letters = self.dead_letters().await;
        assert_eq!(letters.len(), 1, "{letters:?}");
        assert_eq!(letters[0]["position"], position);
        let reason = letters[0]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{reason}");
    }

    /// Every dead letter the deployment wrote, each record one JSON object.
    async fn dead_letters(&self) -> Vec<Value> {
        let out = self
            .clients
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix("warehouse/_floe/dlq/")
            .send()
            .await
            .unwrap();
        let mut letters = Vec::new();
        for o in out.contents() {
            let body = self
                .clients
                .s3
                .get_object()
                .bucket(&self.bucket)
                .key(o.key().unwrap())
                .send()
                .await
                .unwrap()
                .body
                .collect()
                .await
                .unwrap()
                .to_vec();
            for line in String::from_utf8(body).unwrap().lines() {
                letters.push(serde_json::from_str(line).unwrap());
            }
        }
        letters
    }
}

/// Only the named columns of each row.
fn pick(rows: &[Value], columns: &[&str]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            Value::Object(
                columns
                    .iter()
                    .map(|c| (c.to_string(), r[c].clone()))
                    .collect(),
            )
        })
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// An SQS event of `(message id, body)` messages from queue `orders`, sent at `sent_ms`.
fn sqs_event(messages: &[(&str, String)], sent_ms: i64) -> WriterEvent {
    moto::sqs_event(messages, sent_ms, 1)
}

/// An MSK event of one partition of topic `topic`: `(offset, value)`.
fn msk_event(topic: &str, records: &[(i64, Vec<u8>)]) -> WriterEvent {
    let records: Vec<Value> = records
        .iter()
        .map(|(offset, value)| {
            json!({"topic": topic, "partition": 0, "offset": offset,
                   "timestamp": 1_700_000_000_000i64, "timestampType": "CREATE_TIME",
                   "value": BASE64.encode(value), "headers": []})
        })
        .collect();
    writer_event(json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/abc",
        "records": { format!("{topic}-0"): records },
    }))
}

fn ddb_record(n: u32, name: &str, keys: Value, new: Option<Value>, old: Option<Value>) -> Value {
    let mut ddb = json!({
        "ApproximateCreationDateTime": 1_700_000_000 + n,
        "Keys": keys,
        "SequenceNumber": format!("10000000000000000000{n}"),
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    });
    if let Some(new) = new {
        ddb["NewImage"] = new;
    }
    if let Some(old) = old {
        ddb["OldImage"] = old;
    }
    json!({
        "eventID": format!("ev{n}"), "eventName": name, "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "dynamodb": ddb,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2024-01-01T00:00:00.000",
    })
}

fn ddb_event() -> WriterEvent {
    let item = |id: &str, status: &str, qty: &str| {
        json!({
            "order_id": {"N": id},
            "status": {"S": status},
            "paid": {"BOOL": true},
            "total": {"N": qty},
            "note": {"NULL": true},
            "shipping": {"M": {"city": {"S": "Oslo"}, "zip": {"N": "150"}}},
            "lines": {"L": [{"M": {"sku": {"S": "a-1"}, "qty": {"N": "2"}}}]},
            "tags": {"SS": ["gift", "rush"]},
            "sizes": {"NS": ["1", "3"]},
            "blobs": {"BS": ["AQI="]},
        })
    };
    let key = |id: &str| json!({"order_id": {"N": id}});
    writer_event(json!({"Records": [
        ddb_record(1, "INSERT", key("1"), Some(item("1", "new", "10.5")), None),
        ddb_record(2, "INSERT", key("2"), Some(item("2", "new", "20")), None),
        ddb_record(3, "MODIFY", key("1"), Some(item("1", "paid", "10.5")), Some(item("1", "new", "10.5"))),
        ddb_record(4, "REMOVE", key("2"), None, Some(item("2", "new", "20"))),
    ]}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_items_land_as_the_columns_of_a_plain_table() {
    let env = Env::new("").await;
    for _ in 0..2 {
        env.deliver(&ddb_event()).await;
    }
    let rows = env.rows("status").await;
    // INSERT 1, INSERT 2, MODIFY 1 are items as put; the REMOVE is skipped.
    assert_eq!(
        pick(&rows, &["order_id", "status"]),
        vec![
            json!({"order_id": 1, "status": "new"}),
            json!({"order_id": 2, "status": "new"}),
            json!({"order_id": 1, "status": "paid"}),
        ],
        "{rows:?}"
    );
    let first = &rows[0];
    assert!(
        first.get("eventID").is_none() && first.get("dynamodb").is_none(),
        "{first}"
    );
    assert_eq!(first["paid"], json!(true));
    assert_eq!(first["total"], json!(10.5));
    assert_eq!(first["note"], Value::Null);
    assert_eq!(first["shipping"], json!({"city": "Oslo", "zip": 150}));
    assert_eq!(first["lines"], json!([{"sku": "a-1", "qty": 2}]));
    assert_eq!(first["tags"], json!(["gift", "rush"]));
    assert_eq!(first["sizes"], json!([1, 3]));
    assert_eq!(
        env.files_and_snapshots().await.0,
        "1",
        "one data file, delivered twice"
    );

    // Kept removes and metadata columns, when configured.
    let env = Env::new("[sources.orders]\nremoves = \"keep\"\nmetadata = true").await;
    env.deliver(&ddb_event()).await;
    let rows = env.rows("_sequence_number").await;
    assert_eq!(
        pick(
            &rows,
            &["_event_name", "order_id", "status", "_sequence_number"]
        ),
        vec![
            json!({"_event_name": "INSERT", "order_id": 1, "status": "new", "_sequence_number": "100000000000000000001"}),
            json!({"_event_name": "INSERT", "order_id": 2, "status": "new", "_sequence_number": "100000000000000000002"}),
            json!({"_event_name": "MODIFY", "order_id": 1, "status": "paid", "_sequence_number": "100000000000000000003"}),
            json!({"_event_name": "REMOVE", "order_id": 2, "status": "new", "_sequence_number": "100000000000000000004"}),
        ]
    );
    assert!(
        rows[0]["_approximate_creation_time"]
            .as_str()
            .unwrap()
            .starts_with("2023-11-14 22:13:21"),
        "{}",
        rows[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_eventbridge_and_compressed_sqs_bodies_open_to_their_records() {
    let env = Env::new("").await;
    let sns = |message: &str| {
        json!({"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
               "Message": message, "Timestamp": "2026-01-01T00:00:00.000Z", "SignatureVersion": "1"})
        .to_string()
    };
    let eventbridge = |id: i64, item: &str| {
        json!({"version": "0", "id": "e-1", "detail-type": "OrderPlaced", "source": "shop",
            "account": "123456789012", "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": {"order_id": id, "item": item}})
        .to_string()
    };
    let gz = BASE64.encode(gzip(br#"{"order_id":4,"item":"ink"}"#));
    let messages = [
        ("m-1", sns(r#"{"order_id":1,"item":"cup"}"#)),
        ("m-2", eventbridge(2, "pen")),
        ("m-3", r#"{"order_id":3,"item":"mug"}"#.to_string()),
        ("m-4", gz),
        // EventBridge through SNS.
        ("m-5", sns(&eventbridge(5, "pad"))),
        // An SNS notification whose Message is not a record.
        ("m-6", sns("not json at all")),
        // Base64 of a gzip header and then no deflate stream.
        (
            "m-7",
            BASE64.encode([0x1f, 0x8b, 0x08, 0x00, 0x01, 0x02, 0x03]),
        ),
    ];
    for _ in 0..2 {
        env.deliver(&sqs_event(&messages, 1_700_000_000_000)).await;
    }
    let rows = env.rows("order_id").await;
    assert_eq!(
        pick(&rows, &["order_id", "item"]),
        vec![
            json!({"order_id": 1, "item": "cup"}),
            json!({"order_id": 2, "item": "pen"}),
            json!({"order_id": 3, "item": "mug"}),
            json!({"order_id": 4, "item": "ink"}),
            json!({"order_id": 5, "item": "pad"}),
        ]
    );
    assert!(rows[0].get("TopicArn").is_none() && rows[0].get("detail").is_none());
    // The bad ones: dead-lettered once each, with their message id, the
    // table and why; the one the shredder refused and the one that did not
    // decompress share the batch's dead-letter file.
    let mut letters = env.dead_letters().await;
    letters.sort_by_key(|l| l["position"].to_string());
    assert_eq!(letters.len(), 2, "{letters:?}");
    assert_eq!(letters[0]["position"], "m-6");
    assert_eq!(letters[0]["record"], "not json at all");
    assert_eq!(letters[1]["position"], "m-7");
    let reason = letters[1]["reason"].as_str().unwrap();
    assert!(
        reason.contains("starts like gzip but does not decompress"),
        "{reason}"
    );
    for l in &letters {
        assert!(l["table"].as_str().unwrap().ends_with(".items"), "{l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudwatch_logs_gzip_and_zstd_kinesis_records_land_one_row_per_record() {
    let env = Env::new("").await;
    let data = |events: Value| {
        gzip(
            json!({"messageType": "DATA_MESSAGE", "owner": "123456789012", "logGroup": "/aws/lambda/shop",
                   "logStream": "2026/01/01/[$LATEST]abc", "subscriptionFilters": ["all"], "logEvents": events})
            .to_string()
            .as_bytes(),
        )
    };
    let control = gzip(
        json!({"messageType": "CONTROL_MESSAGE", "owner": "CloudwatchLogs", "logGroup": "", "logStream": "",
               "subscriptionFilters": [], "logEvents": [{"id": "", "timestamp": 1_700_000_000_000i64,
               "message": "CWL CONTROL MESSAGE: Checking health of destination Kinesis stream."}]})
        .to_string()
        .as_bytes(),
    );
    let event = kinesis_event(
        "logs",
        &[
            ("100", control),
            (
                "101",
                data(json!([
                    {"id": "e1", "timestamp": 1_700_000_000_001i64, "message": "START RequestId: r1"},
                    {"id": "e2", "timestamp": 1_700_000_000_002i64, "message": "{\"level\":\"info\"}"},
                ])),
            ),
            (
                "102",
                data(
                    json!([{"id": "e3", "timestamp": 1_700_000_000_003i64, "message": "END RequestId: r1"}]),
                ),
            ),
            // A Firehose-style zstd record on the same stream.
            (
                "103",
                zstd::bulk::compress(
                    br#"{"id":"e4","message":"zstd","log_group":"/aws/lambda/shop"}"#,
                    3,
                )
                .unwrap(),
            ),
        ],
    );
    for _ in 0..2 {
        env.deliver(&event).await;
    }
    let rows = env.rows("id").await;
    assert_eq!(
        pick(&rows, &["id", "message", "log_group"]),
        vec![
            json!({"id": "e1", "message": "START RequestId: r1", "log_group": "/aws/lambda/shop"}),
            json!({"id": "e2", "message": "{\"level\":\"info\"}", "log_group": "/aws/lambda/shop"}),
            json!({"id": "e3", "message": "END RequestId: r1", "log_group": "/aws/lambda/shop"}),
            json!({"id": "e4", "message": "zstd", "log_group": "/aws/lambda/shop"}),
        ]
    );
    assert_eq!(rows[1]["log_stream"], "2026/01/01/[$LATEST]abc");
    assert_eq!(rows[1]["timestamp"], "2023-11-14 22:13:20.002000+00:00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_notification_of_100000_ndjson_gz_records_lands_once() {
    let env = Env::new("").await;
    const N: u64 = 100_000;
    let mut text = Vec::with_capacity(N as usize * 48);
    for i in 1..=N {
        writeln!(
            text,
            r#"{{"id":{i},"sku":"sku-{}","qty":{}}}"#,
            i % 977,
            i % 7
        )
        .unwrap();
    }
    let key = "drops/day=2026-01-01/batch 1.json.gz";
    let put = env
        .clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(key)
        .body(gzip(&text).into())
        .send()
        .await
        .unwrap();
    let etag = put.e_tag().unwrap().trim_matches('"').to_string();
    let notification = json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-01-01T00:00:00.000Z", "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "drops",
               "bucket": {"name": env.bucket, "arn": format!("arn:aws:s3:::{}", env.bucket)},
               // Keys arrive URL-encoded, spaces as `+`.
               "object": {"key": "drops/day%3D2026-01-01/batch+1.json.gz", "size": 1, "eTag": etag}}}]})
    .to_string();
    env.deliver(&sqs_event(
        &[("n-1", notification.clone())],
        1_700_000_000_000,
    ))
    .await;
    let (files, snapshots) = env.files_and_snapshots().await;
    assert_eq!(files, "1", "one Parquet file for the object");
    // S3 delivers the notification again, as a new message much later.
    let now = floe_core::clock::now_ms();
    env.deliver(&sqs_event(&[("n-2", notification)], now)).await;
    assert_eq!(
        env.files_and_snapshots().await,
        (files, snapshots),
        "nothing committed twice"
    );
    let rows = env.rows("id").await;
    assert_eq!(rows.len() as u64, N);
    let ids: HashSet<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len() as u64, N);
    assert_eq!(ids.iter().sum::<u64>(), N * (N + 1) / 2);
    let last = rows.iter().find(|r| r["id"] == json!(N)).unwrap();
    assert_eq!(last["sku"], format!("sku-{}", N % 977));
    assert_eq!(last["qty"], json!(N % 7));
}

/// Avro test records: the order schema, and a second version adding a field.
const ORDER_V1: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
    {"name":"order_id","type":"long"},
    {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"placed_us","type":{"type":"long","logicalType":"timestamp-micros"}},
    {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
    {"name":"note","type":["null","string"],"default":null}
]}"#;

fn order_v2() -> String {
    ORDER_V1.replace(
        r#"{"name":"note","type":["null","string"],"default":null}"#,
        r#"{"name":"note","type":["null","string"],"default":null},
           {"name":"coupon","type":["null","string"],"default":null}"#,
    )
}

/// An order datum of `schema`; `coupon` only when the schema has it.
fn order_datum(schema: &str, id: i64, cents: i64, coupon: Option<&str>) -> Vec<u8> {
    use apache_avro::types::{Record, Value as Avro};
    let schema = apache_avro::Schema::parse_str(schema).unwrap();
    let mut r = Record::new(&schema).unwrap();
    r.put("order_id", id);
    let unscaled = cents.to_be_bytes().to_vec();
    r.put("total", Avro::Decimal(apache_avro::Decimal::from(unscaled)));
    r.put("day", Avro::Date(20_454));
    r.put("placed", Avro::TimestampMillis(1_767_225_600_123 + id));
    r.put("placed_us", Avro::TimestampMicros(1_767_225_600_123_456));
    let reference = uuid::Uuid::from_u128(0x0e8f6c1a_0003_4c0f_9d3a_000000000000 + id as u128);
    r.put("ref", Avro::Uuid(reference));
    r.put("note", Avro::Union(0, Box::new(Avro::Null)));
    if let Some(c) = coupon {
        r.put("coupon", Avro::Union(1, Box::new(Avro::String(c.into()))));
    }
    apache_avro::to_avro_datum(&schema, r).unwrap()
}

/// The table the order schema's two versions make: the declared types.
const ORDER_COLUMNS: [&str; 8] = [
    "order_id:long",
    "total:decimal(10, 2)",
    "day:date",
    "placed:timestamptz",
    "placed_us:timestamptz",
    "ref:uuid",
    "note:string",
    "coupon:string",
];

/// What both Avro tests read back: exact decimals, dates, timestamps, uuids.
fn assert_orders(rows: &[Value]) {
    assert_eq!(
        pick(rows, &["order_id", "total", "day", "coupon"]),
        vec![
            json!({"order_id": 1, "total": "12.34", "day": "2026-01-01", "coupon": null}),
            json!({"order_id": 2, "total": "-0.05", "day": "2026-01-01", "coupon": null}),
            json!({"order_id": 3, "total": "99999999.99", "day": "2026-01-01", "coupon": "SAVE5"}),
        ],
        "{rows:?}"
    );
    assert_eq!(rows[0]["placed"], "2026-01-01 00:00:00.124000+00:00");
    assert_eq!(rows[0]["placed_us"], "2026-01-01 00:00:00.123456+00:00");
    assert_eq!(rows[0]["ref"], "0e8f6c1a-0003-4c0f-9d3a-000000000001");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_framed_for_the_glue_schema_registry_lands_and_evolves_the_table() {
    let env = Env::new("").await;
    let glue = &env.clients.glue;
    // One registry for every run: moto allows ten per account, and its
    // server outlives a test run on a developer's machine.
    let registry = "floe-tests";
    let schema = unique("orders");
    let id = aws_sdk_glue::types::RegistryId::builder()
        .registry_name(registry)
        .build();
    if glue.get_registry().registry_id(id).send().await.is_err() {
        glue.create_registry()
            .registry_name(registry)
            .send()
            .await
            .unwrap();
    }
    let registry_id = aws_sdk_glue::types::RegistryId::builder()
        .registry_name(registry)
        .build();
    let created = glue
        .create_schema()
        .registry_id(registry_id.clone())
        .schema_name(&schema)
        .data_format(aws_sdk_glue::types::DataFormat::Avro)
        .compatibility(aws_sdk_glue::types::Compatibility::Backward)
        .schema_definition(ORDER_V1)
        .send()
        .await
        .unwrap();
    let v1 = uuid::Uuid::parse_str(created.schema_version_id().unwrap()).unwrap();
    // Glue's framing: version 3, compression (0 none, 5 zlib), the version id.
    let frame = |version: uuid::Uuid, zlib: bool, datum: Vec<u8>| {
        let mut out = vec![3u8, if zlib { 5 } else { 0 }];
        out.extend_from_slice(version.as_bytes());
        if zlib {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&datum).unwrap();
            out.extend(z.finish().unwrap());
        } else {
            out.extend(datum);
        }
        out
    };
    let unknown = uuid::Uuid::new_v4();
    let first = msk_event(
        "orders",
        &[
            (10, frame(v1, false, order_datum(ORDER_V1, 1, 1234, None))),
            (11, frame(v1, true, order_datum(ORDER_V1, 2, -5, None))),
            (12, frame(unknown, false, order_datum(ORDER_V1, 9, 1, None))),
        ],
    );
    for _ in 0..2 {
        env.deliver(&first).await;
    }
    // A new version adds `coupon`: the table gains the column.
    let v2 = glue
        .register_schema_version()
        .schema_id(
            aws_sdk_glue::types::SchemaId::builder()
                .registry_name(registry)
                .schema_name(&schema)
                .build(),
        )
        .schema_definition(order_v2())
        .send()
        .await
        .unwrap();
    let v2 = uuid::Uuid::parse_str(v2.schema_version_id().unwrap()).unwrap();
    let second = msk_event(
        "orders",
        &[(
            13,
            frame(
                v2,
                false,
                order_datum(&order_v2(), 3, 9_999_999_999, Some("SAVE5")),
            ),
        )],
    );
    for _ in 0..2 {
        env.deliver(&second).await;
    }
    assert_orders(&env.rows("order_id").await);
    assert_eq!(env.column_types().await, ORDER_COLUMNS);
    let why = format!("{unknown} is not in the Glue Schema Registry");
    env.assert_one_dead_letter("12", &why).await;
}

/// The test registry (functions/tests/registry.py), killed when dropped.
struct Registry {
    child: std::process::Child,
    url: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(user: &str, password: &str) -> Registry {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(services::python())
            .arg(services::repo().join("functions/tests/registry.py"))
            .args([user, password])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        Registry {
            child,
            url: format!("http://127.0.0.1:{}", port.trim()),
        }
    }

    async fn register(&self, subject: &str, schema: &str) -> u32 {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/subjects/{subject}/versions", self.url))
            .basic_auth("floe", Some("s3cret"))
            .json(&json!({ "schema": schema }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["id"].as_u64().unwrap() as u32
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_framed_avro_against_a_registry_lands_and_evolves_the_table() {
    let registry = Registry::start("floe", "s3cret");
    let env = Env::new(&format!(
        "[sources.orders]\nregistry = \"{}\"\nregistry_username = \"floe\"\nregistry_password = \"s3cret\"",
        registry.url
    ))
    .await;
    let v1 = registry.register("orders-value", ORDER_V1).await;
    // Confluent's framing: magic 0, the schema id big-endian, the datum.
    let frame = |id: u32, datum: Vec<u8>| {
        let mut out = vec![0u8];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend(datum);
        out
    };
    let first = kinesis_event(
        "orders",
        &[
            ("500", frame(v1, order_datum(ORDER_V1, 1, 1234, None))),
            ("501", frame(v1, order_datum(ORDER_V1, 2, -5, None))),
            ("502", frame(4242, order_datum(ORDER_V1, 9, 1, None))),
        ],
    );
    for _ in 0..2 {
        env.deliver(&first).await;
    }
    let v2 = registry.register("orders-value", &order_v2()).await;
    assert_ne!(v1, v2);
    let second = kinesis_event(
        "orders",
        &[(
            "503",
            frame(
                v2,
                order_datum(&order_v2(), 3, 9_999_999_999, Some("SAVE5")),
            ),
        )],
    );
    for _ in 0..2 {
        env.deliver(&second).await;
    }
    assert_orders(&env.rows("order_id").await);
    assert_eq!(env.column_types().await, ORDER_COLUMNS);
    env.assert_one_dead_letter("502", "schema id 4242 is not in the registry")
        .await;
}

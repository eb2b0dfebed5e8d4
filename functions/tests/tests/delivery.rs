//! The adversarial delivery harness (`floe_test_support::harness`)
//! through the Lambda handlers: each invocation is a real-shaped SQS,
//! Kinesis, MSK, DynamoDB Streams or HTTP event handed to the writer or
//! HTTP function over an embedded deployment, whose commit queue is the
//! harness's chaotic one; the committer step drains it. A batch counts as
//! acknowledged only when the handler names no failure. `FLOE_HARNESS_SCHEDULES`
//! (default 60) and `FLOE_HARNESS_SEED` as in the core harness.

use std::path::Path;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::queue::QueueRef;
use floe_ingest_http::HttpFunction;
use floe_test_support::harness::{self, Driver, Harness, Invocation, Kind, Setup, Tables};
use floe_writer::events::DecodeOptions;
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::{Value, json};

const TOKEN: &str = "harness-token";

/// The writer and HTTP functions, fed Lambda events.
struct Handlers;

impl Handlers {
    async fn deployment(
        harness: &Harness,
        setup: &Setup,
        tables: &Tables,
        queue: QueueRef,
        faults: Faults,
    ) -> Deployment {
        let routing = if setup.routed {
            format!(
                "mode = \"field\"\nfield = \"t\"\ntemplate = \"h.s{}_{{value}}\"",
                setup.seed
            )
        } else {
            format!("table = \"{}\"", floe_core::ident::display(&tables.a))
        };
        let text = format!(
            "[warehouse]\npath = \"{}\"\n[routing]\n{routing}\n[http]\ntoken = \"{TOKEN}\"\n",
            harness.dir.display()
        );
        let config = Config::from_toml_str(&text, Path::new("."), &|_| None).unwrap();
        let mut d = Deployment::from_config(config, faults, Role::Writer)
            .await
            .unwrap();
        d.queue = queue;
        d
    }
}

#[async_trait]
impl Driver for Handlers {
    async fn write(
        &self,
        harness: &Harness,
        setup: &Setup,
        tables: &Tables,
        queue: QueueRef,
        inv: &Invocation,
    ) -> bool {
        let faults = inv.faults();
        let d = Self::deployment(harness, setup, tables, queue, faults).await;
        if setup.kind == Kind::Http {
            let http = HttpFunction::new(&d).unwrap();
            let status = http.handle(http_request(setup, tables, inv)).await.status();
            return status.is_success();
        }
        let decode = DecodeOptions {
            kinesis_per_record: setup.kind == Kind::KinesisParallel,
            buffer_stream: Some(BUFFER_STREAM.into()),
        };
        let writer = WriterFunction::with_options(&d, decode).unwrap();
        let event = WriterEvent::try_from(event(setup, tables, inv)).unwrap();
        let answer = writer.handle(event).await.unwrap();
        serde_json::to_value(&answer).unwrap()["batchItemFailures"]
            .as_array()
            .is_some_and(|f| f.is_empty())
    }
}

/// The stream the HTTP function buffers POSTs in.
const BUFFER_STREAM: &str = "hbuf";

/// The Lambda event a source mapping hands the writer for `inv`.
fn event(setup: &Setup, tables: &Tables, inv: &Invocation) -> Value {
    let body = |r: &harness::Record| harness::body(setup, r);
    match setup.kind {
        Kind::Sqs => {
            let records: Vec<Value> = inv
                .records
                .iter()
                .map(|r| {
                    json!({
                        "messageId": r.pos,
                        "receiptHandle": format!("rh-{}", r.pos),
                        "body": body(r),
                        "attributes": {"ApproximateReceiveCount": "1",
                                       "SentTimestamp": r.arrived_ms.to_string()},
                        "messageAttributes": {},
                        "md5OfBody": "",
                        "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:h",
                        "awsRegion": "us-east-1",
                    })
                })
                .collect();
            json!({ "Records": records })
        }
        Kind::Kinesis | Kind::KinesisParallel => {
            let records: Vec<Value> = inv
                .records
                .iter()
                .map(|r| {
                    json!({
                        "kinesis": {
                            "kinesisSchemaVersion": "1.0",
                            "partitionKey": format!("pk{}", r.key),
                            "sequenceNumber": r.pos,
                            "data": BASE64.encode(body(r)),
                            "approximateArrivalTimestamp": r.arrived_ms as f64 / 1000.0
                        },
                        "eventSource": "aws:kinesis",
                        "eventID": format!("shardId-000000000000:{}", r.pos),
                        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/h",
                    })
                })
                .collect();
            json!({ "Records": records })
        }
        Kind::Kafka => {
            let records: Vec<Value> = inv
                .records
                .iter()
                .map(|r| {
                    json!({
                        "topic": "h", "partition": 0,
                        "offset": r.pos.parse::<i64>().unwrap(),
                        "timestamp": r.arrived_ms, "timestampType": "CREATE_TIME",
                        "key": BASE64.encode(r.key.to_string()),
                        "value": BASE64.encode(body(r)), "headers": []
                    })
                })
                .collect();
            json!({
                "eventSource": "aws:kafka",
                "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/h/1",
                "records": {"h-0": records}
            })
        }
        Kind::DynamoDb => {
            let records: Vec<Value> = inv
                .records
                .iter()
                .map(|r| serde_json::from_str(&body(r)).unwrap())
                .collect();
            json!({ "Records": records })
        }
        Kind::HttpBuffered => {
            // Each post at the place the HTTP function's PutRecord gave it.
            let posts = harness::posts(setup);
            let table = floe_core::ident::display(&tables.a);
            let records: Vec<Value> = inv
                .posts
                .iter()
                .map(|p| {
                    let seq = format!("4959033827149025660855969253836157{:04}", p);
                    let post = harness::buffered_post(setup, &table, *p, &posts[*p]);
                    json!({
                        "kinesis": {
                            "kinesisSchemaVersion": "1.0",
                            "partitionKey": table,
                            "sequenceNumber": seq,
                            "data": BASE64.encode(&post),
                            "approximateArrivalTimestamp": posts[*p][0].arrived_ms as f64 / 1000.0
                        },
                        "eventSource": "aws:kinesis",
                        "eventID": format!("shardId-000000000000:{seq}"),
                        "eventSourceARN": format!("arn:aws:kinesis:us-east-1:123456789012:stream/{BUFFER_STREAM}"),
                    })
                })
                .collect();
            json!({ "Records": records })
        }
        Kind::Http | Kind::Postgres => unreachable!("not a writer function event"),
    }
}

/// The POST a client retries for its post of `inv`.
fn http_request(setup: &Setup, tables: &Tables, inv: &Invocation) -> lambda_http::Request {
    let body: String = inv
        .records
        .iter()
        .map(|r| harness::body(setup, r) + "\n")
        .collect();
    let path = format!("/v1/tables/h/{}/records", tables.a.name());
    let event = json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
        "headers": {"content-type": "application/x-ndjson",
                    "authorization": format!("Bearer {TOKEN}"),
                    "idempotency-key": format!("post-{}", inv.posts.first().copied().unwrap_or(0))},
        "requestContext": {"accountId": "1", "apiId": "h", "domainName": "h", "domainPrefix": "h",
            "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "harness"},
            "requestId": "r", "routeKey": "$default", "stage": "$default",
            "time": "14/Nov/2023:22:13:20 +0000", "timeEpoch": 1_700_000_000_000i64},
        "isBase64Encoded": false,
        "body": body
    });
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_handlers_under_adversarial_delivery_equal_the_model() {
    // Postgres has no Lambda event: its slot is read by `floe pg sync`.
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| *k != Kind::Postgres)
        .collect();
    let seeds = harness::seeds(10_001, 60);
    harness::run_all("harness (Lambda handlers)", &seeds, &kinds, &Handlers).await;
}

//! The Lambda handlers end to end on moto's S3, SQS and Glue (started by
//! `local-dev/aws.sh`): real-shaped events from `functions/fixtures/` into the
//! writer handler, the commit requests it enqueued received from SQS and handed
//! to the committer handler as an SQS event, and the table read back by
//! iceberg-rust's scan and by pyiceberg's Glue catalog. Each fault point fires
//! once and the event is delivered again, as Lambda would: every row lands once.

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::tabledef;
use floe_ingest_http::HttpFunction;
use floe_writer::WriterFunction;
use futures::TryStreamExt;
use serde_json::{Value, json};

/// moto's endpoint, after starting it once per test binary.
fn endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../local-dev/aws.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .output()
            .expect("run local-dev/aws.sh");
        assert!(
            out.status.success(),
            "local-dev/aws.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // SAFETY: every test calls `endpoint()` before building a client, and
        // the OnceLock holds the others back until these are set.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_SESSION_TOKEN", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("aws.sh prints the endpoint")
            .trim()
            .to_string()
    })
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// The lakana REST catalog of local-dev/rest.sh: (base URI, bearer token).
fn rest_catalog() -> &'static (String, String) {
    static REST: OnceLock<(String, String)> = OnceLock::new();
    REST.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../local-dev/rest.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .output()
            .expect("run local-dev/rest.sh");
        assert!(
            out.status.success(),
            "local-dev/rest.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let port = base.rsplit(':').next().unwrap_or("8181").to_string();
        let token = std::fs::read_to_string(format!("/tmp/floe-lakana-{port}.token"))
            .expect("rest.sh wrote the token")
            .trim()
            .to_string();
        (base, token)
    })
}

/// One deployment's resources on moto: a bucket, a commit queue, a Glue
/// database (or a table in the REST catalog).
struct Env {
    clients: AwsClients,
    bucket: String,
    queue_url: String,
    ident: TableIdent,
    rest: bool,
}

const TOKEN: &str = "t0ken-for-tests";

impl Env {
    /// The same resources with the table in lakana's REST catalog.
    async fn rest() -> Env {
        let mut env = Env::new().await;
        rest_catalog();
        env.ident = parse_table(&format!("bronze.{}", unique("events"))).unwrap();
        env.rest = true;
        env
    }

    async fn new() -> Env {
        let clients = AwsClients::new(AwsSettings::local(endpoint(), "us-east-1")).await;
        let bucket = unique("floe").replace('_', "-");
        clients
            .s3
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap();
        let queue_url = clients
            .sqs
            .create_queue()
            .queue_name(unique("floe-commits"))
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_string();
        let ident = parse_table(&format!("{}.events", unique("fn"))).unwrap();
        Env {
            clients,
            bucket,
            queue_url,
            ident,
            rest: false,
        }
    }

    fn table(&self) -> String {
        floe_core::ident::display(&self.ident)
    }

    /// The config every function of this deployment reads.
    fn config(&self) -> Config {
        let catalog = if self.rest {
            let (uri, token) = rest_catalog();
            format!("type = \"rest\"\nuri = \"{uri}\"\nprefix = \"floe\"\ntoken = \"{token}\"")
        } else {
            "type = \"glue\"".to_string()
        };
        let text = format!(
            r#"
[warehouse]
uri = "s3://{bucket}/warehouse"
[aws]
region = "us-east-1"
endpoint = "{endpoint}"
[catalog]
{catalog}
[queue]
url = "{queue}"
[routing]
table = "{table}"
[http]
token = "{TOKEN}"
max_body_bytes = 4096
wait_seconds = 20
"#,
            bucket = self.bucket,
            endpoint = endpoint(),
            queue = self.queue_url,
            table = self.table(),
        );
        Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap()
    }

    async fn deployment(&self, faults: Faults) -> Deployment {
        Deployment::from_config(self.config(), faults)
            .await
            .unwrap()
    }

    /// Creates the table: `id` (the key when `keyed`) and `name`.
    async fn create_table(&self, keyed: bool) {
        let ids = if keyed {
            r#","identifier-field-ids":[1]"#
        } else {
            ""
        };
        let schema = tabledef::parse_schema(&format!(
            r#"{{"type":"struct","schema-id":0{ids},"fields":[
              {{"id":1,"name":"id","required":true,"type":"long"}},
              {{"id":2,"name":"name","required":false,"type":"string"}}]}}"#
        ))
        .unwrap();
        let d = self.deployment(Faults::none()).await;
        d.catalog
            .create_table(
                &self.ident,
                tabledef::creation("events", schema, Default::default(), Default::default()),
            )
            .await
            .unwrap();
    }

    /// Runs the committer handler on what is in the queue, as Lambda's SQS
    /// event source would: messages it names as failed come back, the others
    /// are deleted. Returns the handler's answers.
    async fn drain(&self, committer: &CommitterFunction) -> Vec<Value> {
        let mut answers = Vec::new();
        for _ in 0..20 {
            let out = self
                .clients
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap();
            let messages = out.messages();
            if messages.is_empty() {
                return answers;
            }
            let records: Vec<Value> = messages
                .iter()
                .map(|m| {
                    let count = m
                        .attributes()
                        .and_then(|a| {
                            a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                        })
                        .cloned()
                        .unwrap_or_else(|| "1".into());
                    json!({
                        "messageId": m.message_id(),
                        "receiptHandle": m.receipt_handle(),
                        "body": m.body(),
                        "attributes": {"ApproximateReceiveCount": count},
                        "messageAttributes": {},
                        "md5OfBody": m.md5_of_body(),
                        "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-commits",
                        "awsRegion": "us-east-1",
                    })
                })
                .collect();
            let answer = committer
                .handle(json!({ "Records": records }))
                .await
                .unwrap();
            let failed: HashSet<String> = failures(&answer).into_iter().collect();
            for m in messages {
                let handle = m.receipt_handle().unwrap();
                if failed.contains(m.message_id().unwrap()) {
                    self.clients
                        .sqs
                        .change_message_visibility()
                        .queue_url(&self.queue_url)
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .send()
                        .await
                        .unwrap();
                } else {
                    self.clients
                        .sqs
                        .delete_message()
                        .queue_url(&self.queue_url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .unwrap();
                }
            }
            answers.push(answer);
        }
        panic!("the committer did not empty the queue in 20 rounds: {answers:?}");
    }

    /// Every row of the table, by iceberg-rust's scan (which applies deletes).
    async fn rows(&self) -> Vec<(i64, Option<String>)> {
        let d = self.deployment(Faults::none()).await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let table = loaded.to_table(d.file_io.clone()).unwrap();
        let batches: Vec<RecordBatch> = table
            .scan()
            .select_all()
            .with_concurrency_limit(4096)
            .build()
            .unwrap()
            .to_arrow()
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut rows = Vec::new();
        for b in &batches {
            let ids = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let names = b
                .column_by_name("name")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for i in 0..b.num_rows() {
                rows.push((
                    ids.value(i),
                    (!names.is_null(i)).then(|| names.value(i).to_string()),
                ));
            }
        }
        rows.sort();
        rows
    }

    /// The table's rows as pyiceberg's GlueCatalog reads them.
    fn pyiceberg_rows(&self) -> Vec<(i64, Option<String>)> {
        let python = std::env::var("FLOE_PYTHON").unwrap_or_else(|_| {
            let venv = std::env::var("FLOE_VENV").unwrap_or_else(|_| {
                format!(
                    "{}/.cache/floe-venv",
                    std::env::var("HOME").unwrap_or_default()
                )
            });
            format!("{venv}/bin/python")
        });
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/tests/read_glue.py"
        );
        let out = std::process::Command::new(&python)
            .args([script, endpoint(), &self.table()])
            .output()
            .unwrap_or_else(|e| panic!("running {python}: {e}"));
        assert!(
            out.status.success(),
            "pyiceberg read failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["name"].as_str().map(str::to_string),
                )
            })
            .collect()
    }

    async fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self
            .clients
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .unwrap();
        out.contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect()
    }

    async fn object(&self, key: &str) -> Vec<u8> {
        self.clients
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .unwrap()
            .body
            .collect()
            .await
            .unwrap()
            .to_vec()
    }
}

fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn failures(answer: &Value) -> Vec<String> {
    answer["batchItemFailures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap().to_string())
        .collect()
}

fn want(rows: &[(i64, Option<&str>)]) -> Vec<(i64, Option<String>)> {
    rows.iter()
        .map(|(i, n)| (*i, n.map(str::to_string)))
        .collect()
}

/// Delivers `event` to the writer with `fault` armed (the writer's points fail
/// its first attempt; Lambda then redelivers the same event), drains the queue
/// through the committer (whose point fails its first commit), delivers the
/// event once more (a late duplicate) and drains again; returns the first
/// writer answer and the env, whose table must then hold every row once.
async fn deliver(fixture_name: &str, keyed: bool, fault: Option<FaultPoint>) -> (Env, Value) {
    deliver_to(Env::new().await, fixture_name, keyed, fault).await
}

async fn deliver_to(
    env: Env,
    fixture_name: &str,
    keyed: bool,
    fault: Option<FaultPoint>,
) -> (Env, Value) {
    env.create_table(keyed).await;
    let armed = |points: &[FaultPoint]| match fault {
        Some(p) if points.contains(&p) => Faults::at(p, FaultMode::Error, 1),
        _ => Faults::none(),
    };
    let writer_faults = armed(&[FaultPoint::AfterUpload, FaultPoint::AfterEnqueue]);
    let writer = WriterFunction::new(&env.deployment(writer_faults.clone()).await).unwrap();
    let committer =
        CommitterFunction::new(&env.deployment(armed(&[FaultPoint::AfterCommit])).await).unwrap();
    let event: Value = serde_json::from_str(&fixture(fixture_name)).unwrap();

    let first = writer.handle(event.clone()).await.unwrap();
    if matches!(
        fault,
        Some(FaultPoint::AfterUpload | FaultPoint::AfterEnqueue)
    ) {
        assert!(
            !failures(&first).is_empty(),
            "{fault:?}: the failed batch is named for redelivery: {first}"
        );
        let again = writer.handle(event.clone()).await.unwrap();
        assert!(failures(&again).is_empty(), "{again}");
    } else {
        assert!(failures(&first).is_empty(), "{first}");
    }
    let answers = env.drain(&committer).await;
    if fault == Some(FaultPoint::AfterCommit) {
        assert!(
            !failures(&answers[0]).is_empty(),
            "the committed-but-unacknowledged messages are named: {answers:?}"
        );
    }
    // A late duplicate of the whole event is found in the table's ledger.
    let dup = writer.handle(event).await.unwrap();
    assert!(failures(&dup).is_empty(), "{dup}");
    let answers = env.drain(&committer).await;
    assert!(
        answers.iter().all(|a| failures(a).is_empty()),
        "{answers:?}"
    );
    (env, first)
}

const FAULTS: [Option<FaultPoint>; 4] = [
    None,
    Some(FaultPoint::AfterUpload),
    Some(FaultPoint::AfterEnqueue),
    Some(FaultPoint::AfterCommit),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_records_land_once_and_a_bad_one_is_dead_lettered() {
    let expected = want(&[(1, Some("ada")), (2, Some("grace")), (4, None)]);
    for fault in FAULTS {
        let (env, first) = deliver("sqs.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "{fault:?}");
        if fault == Some(FaultPoint::AfterUpload) {
            // SQS names every message of the failed batch.
            assert_eq!(failures(&first).len(), 4, "{first}");
        }
        // One dead-letter file per batch id, however often it was delivered.
        let dead = env.keys("warehouse/_floe/dlq/").await;
        assert_eq!(dead.len(), 1, "{dead:?}");
        let letter: Value = serde_json::from_slice(&env.object(&dead[0]).await).unwrap();
        assert_eq!(letter["position"], "0e8f6c1a-0003-4c0f-9d3a-000000000003");
        assert_eq!(letter["field"], "id");
        assert_eq!(letter["record"], r#"{"id":"three","name":"bad"}"#);
        if fault.is_none() {
            assert_eq!(env.pyiceberg_rows(), expected);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_records_land_once_through_the_rest_catalog() {
    let expected = want(&[(1, Some("ada")), (2, Some("grace")), (4, None)]);
    for fault in FAULTS {
        let (env, _) = deliver_to(Env::rest().await, "sqs.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "REST catalog, {fault:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_records_land_once() {
    let expected = want(&[(21, Some("kim")), (22, Some("lee")), (23, Some("max"))]);
    for fault in FAULTS {
        let (env, first) = deliver("kinesis.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "{fault:?}");
        if fault == Some(FaultPoint::AfterUpload) {
            // Lambda checkpoints before the first failed sequence number.
            assert_eq!(
                failures(&first),
                vec!["49590338271490256608559692538361571095921575989136588898".to_string()]
            );
        }
        if fault.is_none() {
            assert_eq!(env.pyiceberg_rows(), expected);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_partitions_land_once() {
    let expected = want(&[(31, Some("ann")), (32, Some("bob")), (33, Some("cy"))]);
    for fault in FAULTS {
        let (env, first) = deliver("msk.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "{fault:?}");
        if fault == Some(FaultPoint::AfterUpload) {
            // The fault fires once: one partition failed, named by its first offset.
            let f = failures(&first);
            assert!(
                f == vec!["15".to_string()] || f == vec!["3".to_string()],
                "{f:?}"
            );
        }
        if fault.is_none() {
            assert_eq!(env.pyiceberg_rows(), expected);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_changes_fold_into_a_keyed_table_once() {
    // INSERT 41, INSERT 42, MODIFY 41, REMOVE 42, INSERT 43.
    let expected = want(&[(41, Some("a2")), (43, Some("c"))]);
    for fault in FAULTS {
        let (env, _) = deliver("dynamodb.json", true, fault).await;
        assert_eq!(env.rows().await, expected, "{fault:?}");
    }
}

fn http_event(name: &str, env: &Env, edit: impl FnOnce(&mut Value)) -> lambda_http::Request {
    let text = fixture(name)
        .replace("__NS__", &env.ident.namespace().join("."))
        .replace("__TOKEN__", TOKEN);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    lambda_http::request::from_str(&v.to_string()).unwrap()
}

async fn call(f: &HttpFunction, req: lambda_http::Request) -> (u16, Value) {
    let resp = f.handle(req).await;
    let status = resp.status().as_u16();
    let body: &[u8] = resp.body().as_ref();
    (status, serde_json::from_slice(body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ingest_is_idempotent_names_bad_records_and_checks_the_token() {
    let env = Env::new().await;
    env.create_table(false).await;
    let http = HttpFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();

    // The same Idempotency-Key three times (a retried POST): one batch.
    let mut ids = HashSet::new();
    for _ in 0..3 {
        let (status, body) = call(&http, http_event("http_post.json", &env, |_| {})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["records"], 2);
        ids.insert(body["batch_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 1);

    // A bad record: 400 naming its line and field; the good one is written.
    let (status, body) = call(
        &http,
        http_event("http_post.json", &env, |v| {
            v["body"] = json!("{\"id\":53,\"name\":\"wes\"}\n{\"id\":\"x\",\"name\":\"bad\"}\n");
            v["headers"]["idempotency-key"] = json!("order-batch-0002");
        }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["records"], 1);
    assert_eq!(body["rejected"][0]["position"], "line 2");
    assert_eq!(body["rejected"][0]["field"], "id");
    assert!(
        body["error"].as_str().unwrap().contains("line 2, field id"),
        "{body}"
    );

    // No token: 401. A wrong one: 403. Too large: 413.
    let (status, _) = call(
        &http,
        http_event("http_post.json", &env, |v| {
            v["headers"]
                .as_object_mut()
                .unwrap()
                .remove("authorization");
        }),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = call(
        &http,
        http_event("http_post.json", &env, |v| {
            v["headers"]["authorization"] = json!("Bearer not-the-token");
        }),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &http,
        http_event("http_post.json", &env, |v| {
            v["body"] = json!(format!("{{\"id\":60,\"name\":\"{}\"}}\n", "x".repeat(5000)));
        }),
    )
    .await;
    assert_eq!(status, 413);

    env.drain(&committer).await;
    assert_eq!(
        env.rows().await,
        want(&[(51, Some("una")), (52, Some("vic")), (53, Some("wes"))])
    );

    // ?wait=commit answers once the committer (running meanwhile) has landed it.
    let drainer = async {
        for _ in 0..20 {
            if !env.drain(&committer).await.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let waited = call(
        &http,
        http_event("http_post.json", &env, |v| {
            v["body"] = json!("[{\"id\":54,\"name\":\"xia\"}]");
            v["rawQueryString"] = json!("wait=commit");
            v["queryStringParameters"] = json!({"wait": "commit"});
            v["headers"]["idempotency-key"] = json!("order-batch-0003");
        }),
    );
    let ((status, body), _) = tokio::join!(waited, drainer);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["committed"], true);

    let (status, body) = call(&http, http_event("http_get.json", &env, |_| {})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_records"], 4);
    assert!(body["snapshot_id"].is_i64(), "{body}");
    assert!(body["freshness_ms"].as_i64().unwrap() >= 0);
    assert_eq!(
        env.pyiceberg_rows(),
        want(&[
            (51, Some("una")),
            (52, Some("vic")),
            (53, Some("wes")),
            (54, Some("xia"))
        ])
    );
}

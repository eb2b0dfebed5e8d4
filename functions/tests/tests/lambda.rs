//! The Lambda handlers end to end on moto's S3, SQS and Glue (started by
//! `local-dev/aws.sh`): real-shaped events from `functions/fixtures/` into the
//! writer handler, the commit requests it enqueued received from SQS and handed
//! to the committer handler as an SQS event, and the table read back by
//! iceberg-rust's scan and by pyiceberg's Glue catalog. Each fault point fires
//! once and the event is delivered again, as Lambda would: every row lands once.

mod moto;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use arrow_array::{Array, Int64Array, StringArray};
use aws_lambda_events::event::sqs::SqsBatchResponse;
use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::maintain::MaintainOptions;
use floe_core::tabledef;
use floe_ingest_http::HttpFunction;
use floe_maintenance::MaintenanceFunction;
use floe_test_support::events::sqs_message;
use floe_test_support::{scan, services};
use floe_writer::{WriterEvent, WriterFunction, WriterResponse};
use serde_json::{Value, json};

use moto::{commit_event, failures, unique, writer_event};

/// The catalog a test deployment commits through.
enum Catalog {
    /// Glue on moto.
    Glue,
    /// lakana's REST catalog; its bearer token is read from Secrets Manager.
    Rest,
    /// A SQLite file on this machine (local emulation), tables on moto's S3.
    Sqlite(tempfile::TempDir),
}

/// One deployment's resources on moto: a bucket, a commit queue, a Glue
/// database (or a table in the REST or SQLite catalog).
struct Env {
    clients: AwsClients,
    bucket: String,
    queue_url: String,
    ident: TableIdent,
    catalog: Catalog,
    /// `[routing] allow`, when set.
    allow: Option<String>,
    /// `[maintenance] tables`, when set.
    maintain: Option<String>,
    /// `routing.partition` of the table `create_table` makes.
    partition: Vec<String>,
    /// `http.buffer_stream`, when set.
    buffer: Option<String>,
}

const TOKEN: &str = "t0ken-for-tests";

impl Env {
    /// The same resources with the table in lakana's REST catalog.
    async fn rest() -> Env {
        let mut env = Env::new().await;
        services::lakana();
        env.ident = parse_table(&format!("bronze.{}", unique("events"))).unwrap();
        env.catalog = Catalog::Rest;
        env
    }

    /// The same resources with the catalog in a local SQLite file.
    async fn sqlite() -> Env {
        let mut env = Env::new().await;
        env.catalog = Catalog::Sqlite(tempfile::tempdir().unwrap());
        env
    }

    /// The tables the deployment's catalog lists.
    async fn listed(&self) -> Vec<TableIdent> {
        let d = self.deployment(Faults::none()).await;
        d.catalog.list_tables().await.unwrap()
    }

    /// A Secrets Manager secret (on moto) holding `value`; its ARN.
    async fn secret(&self, value: &str) -> String {
        self.clients
            .secrets
            .create_secret()
            .name(unique("floe-token"))
            .secret_string(value)
            .send()
            .await
            .unwrap()
            .arn()
            .unwrap()
            .to_string()
    }

    async fn new() -> Env {
        let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
        let (bucket, queue_url) = moto::bucket_and_queue(&clients).await;
        let ident = parse_table(&format!("{}.events", unique("fn"))).unwrap();
        Env {
            clients,
            bucket,
            queue_url,
            ident,
            catalog: Catalog::Glue,
            allow: None,
            maintain: None,
            partition: Vec::new(),
            buffer: None,
        }
    }

    fn table(&self) -> String {
        floe_core::ident::display(&self.ident)
    }

    /// The config every function of this deployment reads.
    async fn config(&self) -> Config {
        let catalog = match &self.catalog {
            Catalog::Rest => {
                let (uri, token) = services::lakana();
                let arn = self.secret(token).await;
                format!("type = \"rest\"\nuri = \"{uri}\"\nprefix = \"floe\"\ntoken = \"{arn}\"")
            }
            Catalog::Glue => "type = \"glue\"".to_string(),
            Catalog::Sqlite(dir) => format!(
                "type = \"sqlite\"\npath = \"{}\"",
                dir.path().join("catalog.db").display()
            ),
        };
        let allow = self
            .allow
            .as_ref()
            .map(|a| format!("allow = [\"{a}\"]"))
            .unwrap_or_default();
        let maintain = self
            .maintain
            .as_ref()
            .map(|t| format!("[maintenance]\ntables = [\"{t}\"]"))
            .unwrap_or_default();
        let buffer = self
            .buffer
            .as_ref()
            .map(|b| format!("buffer_stream = \"{b}\""))
            .unwrap_or_default();
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
{allow}
{maintain}
[http]
token = "{TOKEN}"
max_body_bytes = 4096
wait_seconds = 20
{buffer}
"#,
            bucket = self.bucket,
            endpoint = services::moto(),
            queue = self.queue_url,
            table = self.table(),
        );
        Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap()
    }

    async fn deployment(&self, faults: Faults) -> Deployment {
        Deployment::from_config(self.config().await, faults, Role::Writer)
            .await
            .unwrap()
    }

    /// Creates a Kinesis stream of one shard as `http.buffer_stream`; its name.
    async fn buffer_stream(&mut self) -> String {
        let stream = unique("floe-http-buffer").replace('_', "-");
        self.clients
            .kinesis
            .create_stream()
            .stream_name(&stream)
            .shard_count(1)
            .send()
            .await
            .unwrap();
        self.buffer = Some(stream.clone());
        stream
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
        let partition = tabledef::parse_partition(&schema, &self.partition).unwrap();
        let d = self.deployment(Faults::none()).await;
        d.catalog
            .create_table(
                &self.ident,
                tabledef::creation("events", schema, partition, Default::default()),
            )
            .await
            .unwrap();
    }

    /// Runs the committer handler on what is in the queue, as Lambda's SQS
    /// event source would: messages it names as failed come back, the others
    /// are deleted. Returns the handler's answers.
    async fn drain(&self, committer: &CommitterFunction) -> Vec<SqsBatchResponse> {
        self.drain_window(committer, 10).await
    }

    /// [`Env::drain`] with up to `batch` messages per invocation, as an event
    /// source mapping with a batching window gathers them (SQS hands out 10
    /// per receive; Lambda polls until the batch or the window is full).
    async fn drain_window(
        &self,
        committer: &CommitterFunction,
        batch: usize,
    ) -> Vec<SqsBatchResponse> {
        moto::drain(&self.clients, &self.queue_url, committer, batch).await
    }

    /// [`Env::drain`], failing unless the committer took every message.
    async fn drain_all_committed(&self, committer: &CommitterFunction) {
        let answers = self.drain(committer).await;
        assert!(
            answers.iter().all(|a| failures(a).is_empty()),
            "{answers:?}"
        );
    }

    /// Every row of the table, by iceberg-rust's scan (which applies deletes).
    async fn rows(&self) -> Vec<(i64, Option<String>)> {
        let d = self.deployment(Faults::none()).await;
        let batches = scan(d.catalog.as_ref(), &self.ident).await;
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
        let v = services::python_json(
            "shared/tests/read_glue.py",
            &[services::moto(), &self.table()],
        );
        pairs(&v["rows"])
    }

    /// The table's rows as pyiceberg and DuckDB read them from its current
    /// metadata file, whatever the catalog; both must agree with `expected`.
    async fn assert_readers_see(&self, expected: &[(i64, Option<String>)]) {
        let d = self.deployment(Faults::none()).await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let v = services::python_json(
            "shared/tests/read_s3.py",
            &[services::moto(), &loaded.metadata_location],
        );
        assert_eq!(pairs(&v["pyiceberg"]), expected, "pyiceberg");
        assert_eq!(pairs(&v["duckdb"]), expected, "DuckDB");
    }

    /// DuckDB alone, for keyed tables with equality deletes (pyiceberg 0.12
    /// refuses them).
    async fn assert_duckdb_sees(&self, expected: &[(i64, Option<String>)]) {
        let d = self.deployment(Faults::none()).await;
        let loaded = d.catalog.load_table(&self.ident).await.unwrap();
        let v = services::python_json(
            "shared/tests/read_s3.py",
            &[services::moto(), &loaded.metadata_location, "--duckdb-only"],
        );
        assert_eq!(pairs(&v["duckdb"]), expected, "DuckDB");
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

/// `[{"id":…,"name":…}]` as sorted pairs.
fn pairs(rows: &Value) -> Vec<(i64, Option<String>)> {
    let mut out: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["name"].as_str().map(str::to_string),
            )
        })
        .collect();
    out.sort();
    out
}

fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
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
async fn deliver(
    fixture_name: &str,
    keyed: bool,
    fault: Option<FaultPoint>,
) -> (Env, WriterResponse) {
    deliver_to(Env::new().await, fixture_name, keyed, fault).await
}

async fn deliver_to(
    env: Env,
    fixture_name: &str,
    keyed: bool,
    fault: Option<FaultPoint>,
) -> (Env, WriterResponse) {
    env.create_table(keyed).await;
    let armed = |points: &[FaultPoint]| match fault {
        Some(p) if points.contains(&p) => Faults::at(p, FaultMode::Error, 1),
        _ => Faults::none(),
    };
    let writer_faults = armed(&[FaultPoint::AfterUpload, FaultPoint::AfterEnqueue]);
    let writer = WriterFunction::new(&env.deployment(writer_faults.clone()).await).unwrap();
    let committer =
        CommitterFunction::new(&env.deployment(armed(&[FaultPoint::AfterCommit])).await).unwrap();
    let event: WriterEvent = serde_json::from_str(&fixture(fixture_name)).unwrap();

    let first = writer.handle(event.clone()).await.unwrap();
    if matches!(
        fault,
        Some(FaultPoint::AfterUpload | FaultPoint::AfterEnqueue)
    ) {
        assert!(
            !failures(&first).is_empty(),
            "{fault:?}: the failed batch is named for redelivery: {first:?}"
        );
        let again = writer.handle(event.clone()).await.unwrap();
        assert!(failures(&again).is_empty(), "{again:?}");
    } else {
        assert!(failures(&first).is_empty(), "{first:?}");
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
    assert!(failures(&dup).is_empty(), "{dup:?}");
    env.drain_all_committed(&committer).await;
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
            assert_eq!(failures(&first).len(), 4, "{first:?}");
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
            env.assert_readers_see(&expected).await;
        }
    }
}

/// An SQS event of messages `m{i}` for each `i` of `messages`, each body
/// NDJSON of 50 records (ids `50 i ..`), as a producer packing records
/// into messages sends them; record 8 of message 1 has a string id.
fn ndjson_sqs_event(messages: &[i64]) -> WriterEvent {
    let records: Vec<Value> = messages
        .iter()
        .map(|&m| {
            let body: String = (0..50)
                .map(|i| {
                    let id = m * 50 + i;
                    match (m, i) {
                        (1, 7) => format!("{{\"id\":\"x{id}\",\"name\":\"bad\"}}\n"),
                        _ => format!("{{\"id\":{id},\"name\":\"n{id}\"}}\n"),
                    }
                })
                .collect();
            sqs_message(&format!("m{m}"), body)
        })
        .collect();
    writer_event(json!({ "Records": records }))
}

/// Messages carrying many records each (NDJSON bodies) land line by line,
/// each once, at every fault point and when SQS redelivers a message in
/// another batch or twice in one; the bad line is dead-lettered at
/// `<message id>#<line>` and its 49 neighbours commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndjson_sqs_bodies_land_line_by_line_once_through_faults_and_regrouping() {
    let expected: Vec<(i64, Option<String>)> = (0..200)
        .filter(|&id| id != 57)
        .map(|id| (id, Some(format!("n{id}"))))
        .collect();
    for fault in FAULTS {
        let env = Env::new().await;
        env.create_table(false).await;
        let armed = |points: &[FaultPoint]| match fault {
            Some(p) if points.contains(&p) => Faults::at(p, FaultMode::Error, 1),
            _ => Faults::none(),
        };
        let writer = WriterFunction::new(
            &env.deployment(armed(&[FaultPoint::AfterUpload, FaultPoint::AfterEnqueue]))
                .await,
        )
        .unwrap();
        let committer =
            CommitterFunction::new(&env.deployment(armed(&[FaultPoint::AfterCommit])).await)
                .unwrap();
        let first = writer.handle(ndjson_sqs_event(&[0, 1])).await.unwrap();
        if !failures(&first).is_empty() {
            assert_eq!(failures(&first), ["m0", "m1"], "{fault:?}: whole messages");
            writer.handle(ndjson_sqs_event(&[0, 1])).await.unwrap();
        }
        env.drain(&committer).await;
        // Message 1 again, beside one never seen.
        let again = writer.handle(ndjson_sqs_event(&[1, 2])).await.unwrap();
        assert!(failures(&again).is_empty(), "{fault:?}: {again:?}");
        // A message SQS delivered twice within one event (at least once
        // means that too).
        let twice = writer.handle(ndjson_sqs_event(&[3, 3])).await.unwrap();
        assert!(failures(&twice).is_empty(), "{fault:?}: {twice:?}");
        env.drain(&committer).await;
        assert_eq!(env.rows().await, expected, "{fault:?}");
        let dead = env.keys("warehouse/_floe/dlq/").await;
        assert!(!dead.is_empty(), "{fault:?}");
        for key in dead {
            let letter: Value = serde_json::from_slice(&env.object(&key).await).unwrap();
            assert_eq!(letter["position"], "m1#8", "{fault:?}: {letter}");
            assert_eq!(letter["field"], "id", "{fault:?}");
            assert_eq!(letter["record"], r#"{"id":"x57","name":"bad"}"#);
        }
    }
}

/// A batch reads its table from the catalog once: each read is a Glue
/// GetTable, the largest request count a small batch pays. Five batches
/// of a warm writer function are five reads, not ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_reads_its_table_from_glue_once() {
    let env = Env::new().await;
    env.create_table(false).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let glue = floe_test_support::glue::GlueFaults::new(&env.ident);
    writer.handle(sqs_event("warm", 0, 3)).await.unwrap();
    let before = glue.seen().gets;
    for b in 1..=5 {
        let answer = writer
            .handle(sqs_event(&format!("b{b}"), b * 10, 3))
            .await
            .unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    assert_eq!(glue.seen().gets - before, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_records_land_once_through_the_rest_catalog() {
    let expected = want(&[(1, Some("ada")), (2, Some("grace")), (4, None)]);
    for fault in FAULTS {
        let (env, _) = deliver_to(Env::rest().await, "sqs.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "REST catalog, {fault:?}");
        if fault.is_none() {
            env.assert_readers_see(&expected).await;
            let listed = env.listed().await;
            assert!(listed.contains(&env.ident), "{listed:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_records_land_once_through_a_sqlite_catalog_on_s3() {
    let expected = want(&[(1, Some("ada")), (2, Some("grace")), (4, None)]);
    for fault in FAULTS {
        let (env, _) = deliver_to(Env::sqlite().await, "sqs.json", false, fault).await;
        assert_eq!(env.rows().await, expected, "SQLite catalog, {fault:?}");
        if fault.is_none() {
            env.assert_readers_see(&expected).await;
            let listed = env.listed().await;
            assert_eq!(listed, vec![env.ident.clone()]);
        }
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
            env.assert_readers_see(&expected).await;
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
            env.assert_readers_see(&expected).await;
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
        if fault.is_none() {
            env.assert_duckdb_sees(&expected).await;
        }
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

/// An SQS event of `n` messages, `{"id": first + i, "name": "n<i>"}` each,
/// with message ids unique to `tag`.
fn sqs_event(tag: &str, first: i64, n: usize) -> WriterEvent {
    let records: Vec<Value> = (0..n)
        .map(|i| {
            let id = first + i as i64;
            let body = json!({"id": id, "name": format!("n{id}")}).to_string();
            sqs_message(&format!("{tag}-{i:05}"), body)
        })
        .collect();
    writer_event(json!({ "Records": records }))
}

/// The table's snapshots: (count, each one's `added-records` and `floe.requests`).
async fn snapshots(env: &Env) -> Vec<(String, String)> {
    let d = env.deployment(Faults::none()).await;
    let loaded = d.catalog.load_table(&env.ident).await.unwrap();
    let mut out: Vec<_> = loaded
        .metadata
        .snapshots()
        .map(|s| {
            let p = &s.summary().additional_properties;
            (
                p.get("added-records").cloned().unwrap_or_default(),
                p.get("floe.requests").cloned().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_in_flight_make_one_snapshot_through_a_batching_window() {
    let env = Env::new().await;
    env.create_table(false).await;
    let d = env.deployment(Faults::none()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let committer = CommitterFunction::new(&d).unwrap();
    // 16 invocations at once, as 16 concurrent pollers of a source queue.
    let answers = futures::future::join_all(
        (0..16).map(|w| writer.handle(sqs_event(&format!("w{w}"), w * 1000, 50))),
    )
    .await;
    for a in answers {
        assert!(failures(&a.unwrap()).is_empty());
    }
    // Each request carries its oldest record's SentTimestamp, for freshness.
    let peek = env
        .clients
        .sqs
        .receive_message()
        .queue_url(&env.queue_url)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let request: Value = serde_json::from_str(peek.messages()[0].body().unwrap()).unwrap();
    assert_eq!(request["oldest_record_ms"], 1_700_000_000_000i64);
    // One committer invocation gathers all 16 requests (batch size 10,000
    // with a window): they coalesce into one snapshot.
    let answers = env.drain_window(&committer, 10_000).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        snapshots(&env).await,
        vec![("800".to_string(), "16".to_string())]
    );
    let rows = env.rows().await;
    assert_eq!(rows.len(), 800);
    let ids: HashSet<i64> = rows.iter().map(|r| r.0).collect();
    assert_eq!(ids.len(), 800);
    assert!(ids.contains(&15_049) && ids.contains(&0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_sqs_limit_goes_by_claim_check_through_both_functions() {
    // One file per id: 700 files make a commit request of several hundred KiB.
    let mut env = Env::new().await;
    env.partition = vec!["identity(id)".into()];
    env.create_table(false).await;
    let d = env.deployment(Faults::none()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let committer = CommitterFunction::new(&d).unwrap();
    let event = sqs_event("big", 0, 700);
    assert!(failures(&writer.handle(event.clone()).await.unwrap()).is_empty());
    let claims = env.keys("warehouse/_floe/claims/").await;
    assert_eq!(claims.len(), 1, "the request went by reference: {claims:?}");
    let body = env.object(&claims[0]).await;
    assert!(body.len() > 240 * 1024, "{} bytes", body.len());

    // Committed, the claim object goes; a redelivered event is a duplicate.
    env.drain_all_committed(&committer).await;
    assert!(env.keys("warehouse/_floe/claims/").await.is_empty());
    assert!(failures(&writer.handle(event).await.unwrap()).is_empty());
    env.drain(&committer).await;
    let rows = env.rows().await;
    assert_eq!(rows.len(), 700);
    assert_eq!(rows[699], (699, Some("n699".to_string())));
    assert_eq!(snapshots(&env).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_function_compacts_expires_and_removes_s3_orphans() {
    let mut env = Env::new().await;
    env.maintain = Some(env.table());
    env.create_table(false).await;
    let d = env.deployment(Faults::none()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let committer = CommitterFunction::new(&d).unwrap();
    for b in 0..6 {
        writer
            .handle(sqs_event(&format!("b{b}"), b * 10, 10))
            .await
            .unwrap();
        env.drain(&committer).await;
    }
    assert_eq!(snapshots(&env).await.len(), 6);
    // A crashed writer's file: under the table, referenced by nothing.
    let loaded = d.catalog.load_table(&env.ident).await.unwrap();
    let location = loaded.metadata.location().to_string();
    let prefix = location.trim_start_matches(&format!("s3://{}/", env.bucket));
    let orphan = format!("{prefix}/data/orphan-from-a-crash.parquet");
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(&orphan)
        .body(b"not referenced".to_vec().into())
        .send()
        .await
        .unwrap();
    let expected = env.rows().await;
    assert_eq!(expected.len(), 60);

    let deployment = Deployment::from_config(env.config().await, Faults::none(), Role::Maintenance)
        .await
        .unwrap();
    let function = MaintenanceFunction::new(&deployment);
    // Past the orphan window (16 days, longer than the queue's and DLQ's
    // retention), with every snapshot but the current one past its age.
    let opts = MaintainOptions {
        now_ms: floe_core::clock::now_ms() + 17 * 24 * 3600 * 1000,
        max_snapshot_age_ms: Some(0),
        lister: deployment.lister.clone(),
        ..MaintainOptions::default()
    };
    let answer = function.run(&opts).await.unwrap();
    let report = &answer["tables"][0];
    assert_eq!(report["table"], env.table(), "{answer}");
    assert_eq!(report["data_files_before"], 6, "{answer}");
    assert_eq!(report["data_files_after"], 1, "{answer}");
    assert_eq!(report["snapshots_after"], 1, "{answer}");
    assert_eq!(report["orphans"], 1, "{answer}");
    assert!(!env.keys(prefix).await.contains(&orphan));
    assert_eq!(env.rows().await, expected);
    env.assert_readers_see(&expected).await;
    // Every data file left is the one live file.
    let data: Vec<String> = env
        .keys(&format!("{prefix}/data/"))
        .await
        .into_iter()
        .filter(|k| k.ends_with(".parquet"))
        .collect();
    assert_eq!(data.len(), 1, "{data:?}");
}

/// The records of `stream`'s only shard on moto, from its start:
/// (sequence number, data), as the HTTP function's PutRecord left them.
async fn stream_records(env: &Env, stream: &str) -> Vec<(String, Vec<u8>)> {
    let kinesis = &env.clients.kinesis;
    let shards = kinesis
        .list_shards()
        .stream_name(stream)
        .send()
        .await
        .unwrap();
    let shard = shards.shards()[0].shard_id().to_string();
    let mut iterator = kinesis
        .get_shard_iterator()
        .stream_name(stream)
        .shard_id(shard)
        .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap()
        .shard_iterator()
        .map(str::to_string);
    let mut out = Vec::new();
    while let Some(it) = iterator {
        let got = kinesis
            .get_records()
            .shard_iterator(it)
            .send()
            .await
            .unwrap();
        if got.records().is_empty() {
            break;
        }
        out.extend(
            got.records()
                .iter()
                .map(|r| (r.sequence_number().to_string(), r.data().as_ref().to_vec())),
        );
        iterator = got.next_shard_iterator().map(str::to_string);
    }
    out
}

/// The writer's event of `records` read from the buffer stream `stream`,
/// as its mapping hands a window over.
fn window_event(stream: &str, records: &[(String, Vec<u8>)]) -> WriterEvent {
    let window: Vec<(&str, Vec<u8>)> = records
        .iter()
        .map(|(seq, data)| (seq.as_str(), data.clone()))
        .collect();
    moto::kinesis_event(stream, &window)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_buffered_in_kinesis_land_once_a_file_per_window_through_faults() {
    let mut env = Env::new().await;
    let stream = env.buffer_stream().await;
    env.create_table(false).await;
    let http = HttpFunction::new(&env.deployment(Faults::none()).await).unwrap();
    // Five POSTs without a key: each answered from the stream.
    let mut expected = Vec::new();
    for i in 0..5i64 {
        let body = format!(
            "{{\"id\":{},\"name\":\"p{i}\"}}\n{{\"id\":{},\"name\":\"q{i}\"}}\n",
            100 + 2 * i,
            101 + 2 * i
        );
        let (status, answer) = call(
            &http,
            http_event("http_post.json", &env, |v| {
                v["headers"]
                    .as_object_mut()
                    .unwrap()
                    .remove("idempotency-key");
                v["body"] = json!(body);
            }),
        )
        .await;
        assert_eq!(
            (status, &answer["buffered"]),
            (200, &json!(true)),
            "{answer}"
        );
        expected.push((100 + 2 * i, Some(format!("p{i}"))));
        expected.push((101 + 2 * i, Some(format!("q{i}"))));
    }
    // A keyed POST is written at once, as before.
    let (status, answer) = call(&http, http_event("http_post.json", &env, |_| {})).await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["buffered"].is_null() && answer["batch_id"].is_string(),
        "{answer}"
    );
    expected.extend([(51, Some("una".to_string())), (52, Some("vic".to_string()))]);
    expected.sort();

    let records = stream_records(&env, &stream).await;
    assert_eq!(records.len(), 5, "one stream record per POST");
    let event = |range: std::ops::Range<usize>| window_event(&stream, &records[range]);
    // The writer fails after its upload; Lambda hands the shard again from
    // the failed window's start, now with more records; a late duplicate of
    // the first window follows.
    let failing = Faults::at(FaultPoint::AfterUpload, FaultMode::Error, 1);
    let writer = WriterFunction::new(&env.deployment(failing).await).unwrap();
    let first = writer.handle(event(0..3)).await.unwrap();
    assert_eq!(failures(&first), vec![records[0].0.clone()]);
    let again = writer.handle(event(0..5)).await.unwrap();
    assert!(failures(&again).is_empty(), "{again:?}");
    let late = writer.handle(event(0..3)).await.unwrap();
    assert!(failures(&late).is_empty(), "{late:?}");
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    env.drain_all_committed(&committer).await;

    assert_eq!(env.rows().await, expected);
    env.assert_readers_see(&expected).await;
    // The keyed POST's file and the window's: the late window committed
    // nothing, and the failed one's file was never committed.
    let d = env.deployment(Faults::none()).await;
    let loaded = d.catalog.load_table(&env.ident).await.unwrap();
    let summary = &loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(
        summary.get("total-data-files").map(String::as_str),
        Some("2"),
        "{summary:?}"
    );
}

/// A POST of `n` records from id `first`, 153 bytes each.
fn wide_post(first: i64, n: i64) -> (String, Vec<(i64, Option<String>)>) {
    let name = |id: i64| format!("{id:0>130}");
    let body = (first..first + n)
        .map(|id| format!("{{\"id\":{id},\"name\":\"{}\"}}\n", name(id)))
        .collect();
    (
        body,
        (first..first + n).map(|id| (id, Some(name(id)))).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_a_throttled_shard_refuses_are_written_directly_and_land_once() {
    let mut env = Env::new().await;
    let stream = env.buffer_stream().await;
    // A shard's 1 MiB, over ten minutes rather than a second: the test
    // fills it at its own pace.
    floe_test_support::glue::kinesis_limits(&stream, 600_000, 1 << 20, 0);
    env.create_table(false).await;
    let mut config = env.config().await;
    config.http.max_body_bytes = Some(4 << 20);
    let d = Deployment::from_config(config, Faults::none(), Role::Ingest)
        .await
        .unwrap();
    let http = HttpFunction::new(&d).unwrap();
    let post = |body: String| {
        let event = http_event("http_post.json", &env, |v| {
            v["headers"]
                .as_object_mut()
                .unwrap()
                .remove("idempotency-key");
            v["body"] = json!(body);
        });
        call(&http, event)
    };
    // Seven POSTs of about 199 KB: the shard takes five, then refuses.
    let mut expected = Vec::new();
    let mut ways = Vec::new();
    for i in 0..7 {
        let (body, rows) = wide_post(10_000 * (i + 1), 1_300);
        let (status, answer) = post(body).await;
        assert_eq!(status, 200, "{answer}");
        ways.push(match answer["buffered"] == json!(true) {
            true => "buffered",
            false if answer["batch_id"].is_string() => "direct",
            false => panic!("{answer}"),
        });
        expected.extend(rows);
    }
    assert_eq!(ways[..5], ["buffered"; 5]);
    assert_eq!(ways[5..], ["direct"; 2]);
    // The next put lands unanswered and every retry is refused: the POST
    // may be in the stream, so it is not written directly but answered 503.
    floe_test_support::glue::kinesis_limits(&stream, 600_000, 300_000, 1);
    let (body, rows) = wide_post(90_000, 1_500);
    let (status, answer) = post(body).await;
    assert_eq!(status, 503, "{answer}");
    expected.extend(rows);
    expected.sort();

    let records = stream_records(&env, &stream).await;
    assert_eq!(
        records.len(),
        6,
        "five buffered POSTs and the unanswered one"
    );
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let written = writer
        .handle(window_event(&stream, &records))
        .await
        .unwrap();
    assert!(failures(&written).is_empty(), "{written:?}");
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    env.drain_all_committed(&committer).await;
    assert_eq!(env.rows().await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_takes_iam_callers_a_token_from_secrets_manager_and_only_allowed_tables() {
    let mut env = Env::new().await;
    env.allow = Some(format!("{}.*", env.ident.namespace().join(".")));
    env.create_table(false).await;
    let arn = env.secret("from-secrets-manager").await;
    let mut config = env.config().await;
    config.http.token = Some(arn.as_str().into());
    let d = Deployment::from_config(config, Faults::none(), Role::Ingest)
        .await
        .unwrap();
    assert_eq!(
        d.config.http.token.as_ref().map(|t| t.expose().to_string()),
        Some("from-secrets-manager".to_string())
    );
    let http = HttpFunction::new(&d).unwrap();
    let post = |edit: &dyn Fn(&mut Value)| {
        http_event("http_post.json", &env, |v| {
            v["headers"]["authorization"] = json!("Bearer from-secrets-manager");
            edit(v);
        })
    };
    let (status, body) = call(&http, post(&|_| {})).await;
    assert_eq!(status, 200, "{body}");

    // A caller the Function URL's AWS_IAM auth let in needs no token.
    let (status, body) = call(
        &http,
        post(&|v| {
            v["headers"]
                .as_object_mut()
                .unwrap()
                .remove("authorization");
            v["headers"]["idempotency-key"] = json!("iam-1");
            v["body"] = json!("{\"id\":55,\"name\":\"iam\"}\n");
            v["requestContext"]["authorizer"] = json!({"iam": {
                "accessKey": "AKIA…", "accountId": "123456789012", "callerId": "AIDA…",
                "userArn": "arn:aws:iam::123456789012:user/loader", "userId": "AIDA…"}});
        }),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // A table outside routing.allow: 403 naming the rule, nothing written.
    let (status, body) = call(
        &http,
        post(&|v| {
            let path = "/v1/tables/elsewhere/events/records";
            v["rawPath"] = json!(path);
            v["requestContext"]["http"]["path"] = json!(path);
        }),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("routing.allow"),
        "{body}"
    );
    let committer = CommitterFunction::new(&d).unwrap();
    env.drain(&committer).await;
    assert_eq!(
        env.rows().await,
        want(&[(51, Some("una")), (52, Some("vic")), (55, Some("iam"))])
    );
}

/// A Kinesis event of one shard: `(sequence number, record)` each.
fn kinesis_event(records: &[(&str, Value)]) -> WriterEvent {
    let data: Vec<(&str, Vec<u8>)> = records
        .iter()
        .map(|(seq, r)| (*seq, r.to_string().into_bytes()))
        .collect();
    moto::kinesis_event("orders", &data)
}

/// An SQS event of `(message id, record)` messages, received `receives` times.
fn sqs_messages(messages: &[(&str, Value)], receives: u32) -> WriterEvent {
    let bodies: Vec<(&str, String)> = messages
        .iter()
        .map(|(id, body)| (*id, body.to_string()))
        .collect();
    moto::sqs_event(&bodies, 1_700_000_000_000, receives)
}

/// The commit requests waiting in the queue, received (and so in flight).
async fn receive_all(env: &Env) -> Vec<aws_sdk_sqs::types::Message> {
    let mut out = Vec::new();
    for _ in 0..5 {
        let got = env
            .clients
            .sqs
            .receive_message()
            .queue_url(&env.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        if got.messages().is_empty() {
            break;
        }
        out.extend(got.messages().iter().cloned());
    }
    out
}

/// Hands `messages` to the committer handler as one SQS event and deletes
/// those it did not name as failed, as Lambda does.
async fn commit_messages(
    env: &Env,
    committer: &CommitterFunction,
    messages: &[&aws_sdk_sqs::types::Message],
) -> SqsBatchResponse {
    commit_messages_by(env, committer, messages, None).await
}

/// [`commit_messages`] in an invocation that ends at `deadline`.
async fn commit_messages_by(
    env: &Env,
    committer: &CommitterFunction,
    messages: &[&aws_sdk_sqs::types::Message],
    deadline: Option<std::time::Instant>,
) -> SqsBatchResponse {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "messageId": m.message_id(),
                "receiptHandle": m.receipt_handle(),
                "body": m.body(),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": m.md5_of_body(),
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-commits",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    let answer = committer
        .handle(commit_event(json!({ "Records": records })), deadline)
        .await;
    let failed: HashSet<String> = failures(&answer).into_iter().collect();
    for m in messages {
        if !failed.contains(m.message_id().unwrap()) {
            env.clients
                .sqs
                .delete_message()
                .queue_url(&env.queue_url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_redelivered_in_other_groupings_commits_every_message_once() {
    let env = Env::new().await;
    env.create_table(false).await;
    let row = |i: i64| json!({"id": i, "name": format!("n{i}")});
    let failing = WriterFunction::new(
        &env.deployment(Faults::at(FaultPoint::AfterEnqueue, FaultMode::Error, 1))
            .await,
    )
    .unwrap();
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    // The first delivery's request is enqueued, then the writer fails, so
    // Lambda hands the messages out again, grouped otherwise.
    let first = failing
        .handle(sqs_messages(
            &[
                ("m0", row(0)),
                ("m1", row(1)),
                ("m2", row(2)),
                ("m3", row(3)),
            ],
            1,
        ))
        .await
        .unwrap();
    assert_eq!(failures(&first).len(), 4, "{first:?}");
    for (event, receives) in [
        (vec![("m2", row(2)), ("m3", row(3)), ("m4", row(4))], 2),
        (vec![("m0", row(0)), ("m1", row(1))], 2),
    ] {
        let answer = writer.handle(sqs_messages(&event, receives)).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    env.drain(&committer).await;
    let expected: Vec<(i64, Option<String>)> = (0..5).map(|i| (i, Some(format!("n{i}")))).collect();
    assert_eq!(env.rows().await, expected);
    env.assert_readers_see(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinesis_retry_that_ends_elsewhere_commits_every_record_once() {
    let env = Env::new().await;
    env.create_table(false).await;
    let seqs: Vec<String> = (0..6)
        .map(|i| format!("4959033827149025660855969253836157109592157598913658{i:04}"))
        .collect();
    let records: Vec<(&str, Value)> = seqs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), json!({"id": i, "name": format!("k{i}")})))
        .collect();
    let failing = WriterFunction::new(
        &env.deployment(Faults::at(FaultPoint::AfterEnqueue, FaultMode::Error, 1))
            .await,
    )
    .unwrap();
    let first = failing.handle(kinesis_event(&records[..4])).await.unwrap();
    assert_eq!(failures(&first), vec![seqs[0].clone()]);
    // Lambda retries from the same record; the batch now ends later.
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let again = writer.handle(kinesis_event(&records)).await.unwrap();
    assert!(failures(&again).is_empty(), "{again:?}");
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    env.drain(&committer).await;
    let expected: Vec<(i64, Option<String>)> = (0..6).map(|i| (i, Some(format!("k{i}")))).collect();
    assert_eq!(env.rows().await, expected);
    env.assert_readers_see(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_keyed_request_lands_only_the_keys_no_later_change_touched() {
    let env = Env::new().await;
    env.create_table(true).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let older = kinesis_event(&[
        ("100", json!({"id": 1, "name": "a"})),
        ("101", json!({"id": 2, "name": "b"})),
    ]);
    let newer = kinesis_event(&[
        ("102", json!({"_op": "u", "id": 1, "name": "c"})),
        ("103", json!({"id": 3, "name": "d"})),
    ]);
    for event in [older, newer] {
        let answer = writer.handle(event).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    // The newer request commits first (the older one's commit failed and its
    // message came back after the visibility timeout).
    let messages = receive_all(&env).await;
    assert_eq!(messages.len(), 2);
    let (first, second): (Vec<_>, Vec<_>) = messages
        .iter()
        .partition(|m| m.body().unwrap().contains("\"first\":\"102\""));
    for m in [first, second] {
        let answer = commit_messages(&env, &committer, &m).await;
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    let expected = want(&[(1, Some("c")), (2, Some("b")), (3, Some("d"))]);
    assert_eq!(env.rows().await, expected);
    env.assert_duckdb_sees(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_dynamodb_change_does_not_undo_a_newer_one() {
    let env = Env::new().await;
    env.create_table(true).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let change = |id: &str, name: &str, key: i64, value: &str, seq: u64| {
        json!({
            "eventID": id, "eventName": name, "eventSource": "aws:dynamodb",
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2024-01-01T00:00:00.000",
            "dynamodb": {"Keys": {"id": {"N": key.to_string()}},
                         "NewImage": {"id": {"N": key.to_string()}, "name": {"S": value}},
                         "SequenceNumber": seq.to_string(), "ApproximateCreationDateTime": 1_700_000_000}
        })
    };
    // Two shards' batches: the first sets 1 and 2, the second (newer) 1 again.
    let older = writer_event(
        json!({"Records": [change("e1", "INSERT", 1, "a", 10), change("e2", "INSERT", 2, "b", 11)]}),
    );
    let newer = writer_event(json!({"Records": [change("e3", "MODIFY", 1, "c", 12)]}));
    for event in [older, newer] {
        let answer = writer.handle(event).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    let messages = receive_all(&env).await;
    assert_eq!(messages.len(), 2);
    let (first, second): (Vec<_>, Vec<_>) = messages
        .iter()
        .partition(|m| m.body().unwrap().contains("\"e3\""));
    for m in [first, second] {
        let answer = commit_messages(&env, &committer, &m).await;
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    let expected = want(&[(1, Some("c")), (2, Some("b"))]);
    assert_eq!(env.rows().await, expected);
    env.assert_duckdb_sees(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_with_a_bad_value_is_dead_lettered_and_keeps_the_row() {
    let env = Env::new().await;
    env.create_table(true).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    for event in [
        kinesis_event(&[
            ("200", json!({"id": 1, "name": "a1"})),
            ("201", json!({"id": 2, "name": "b1"})),
        ]),
        kinesis_event(&[(
            "202",
            json!({"_op": "u", "id": 1, "name": {"not": "a string"}}),
        )]),
    ] {
        let answer = writer.handle(event).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
        env.drain(&committer).await;
    }
    let expected = want(&[(1, Some("a1")), (2, Some("b1"))]);
    assert_eq!(env.rows().await, expected);
    env.assert_duckdb_sees(&expected).await;
    let dead: Vec<String> = env
        .keys("warehouse/_floe/dlq/")
        .await
        .into_iter()
        .filter(|k| k.ends_with(".ndjson"))
        .collect();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let letter: Value = serde_json::from_slice(&env.object(&dead[0]).await).unwrap();
    assert_eq!(letter["position"], "202");
    assert_eq!(letter["field"], "name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_is_bound_to_its_body() {
    let env = Env::new().await;
    env.create_table(false).await;
    let http = HttpFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let post = |body: &'static str| {
        http_event("http_post.json", &env, move |v| {
            v["body"] = json!(body);
            v["headers"]["idempotency-key"] = json!("batch-7");
        })
    };
    let (status, first) = call(&http, post("{\"id\":71,\"name\":\"a\"}\n")).await;
    assert_eq!(status, 200, "{first}");
    // The same key and body: the first answer again.
    let (status, again) = call(&http, post("{\"id\":71,\"name\":\"a\"}\n")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["batch_id"], first["batch_id"]);
    assert_eq!(again["records"], 1);
    // The same key with another body: refused, and nothing of it is written.
    let (status, other) = call(&http, post("{\"id\":72,\"name\":\"b\"}\n")).await;
    assert_eq!(status, 422, "{other}");
    assert!(
        other["error"].as_str().unwrap().contains("batch-7"),
        "{other}"
    );
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    env.drain(&committer).await;
    assert_eq!(env.rows().await, want(&[(71, Some("a"))]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committer_dead_letters_foreign_and_malformed_messages_and_deletes_nothing() {
    let env = Env::new().await;
    env.create_table(false).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let answer = writer
        .handle(sqs_messages(&[("g1", json!({"id": 1, "name": "good"}))], 1))
        .await
        .unwrap();
    assert!(failures(&answer).is_empty(), "{answer:?}");
    // A request forged from the real one but naming a file of another bucket
    // path, and a message that is no request at all.
    let messages = receive_all(&env).await;
    assert_eq!(messages.len(), 1);
    env.clients
        .sqs
        .change_message_visibility()
        .queue_url(&env.queue_url)
        .receipt_handle(messages[0].receipt_handle().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let mut forged: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    let real = forged["data_files"][0]["file_path"]
        .as_str()
        .unwrap()
        .to_string();
    let outside = format!("s3://{}/elsewhere/stolen.parquet", env.bucket);
    forged["data_files"][0]["file_path"] = json!(outside);
    forged["batch_id"] = json!("forged0000000000000000000000000");
    forged["sources"][0]["positions"]["ids"] = json!(["forged-1"]);
    for body in [forged.to_string(), "{\"not\": \"a request\"}".to_string()] {
        env.clients
            .sqs
            .send_message()
            .queue_url(&env.queue_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let messages = receive_all(&env).await;
    assert_eq!(messages.len(), 3);
    let refs: Vec<&aws_sdk_sqs::types::Message> = messages.iter().collect();
    let answer = commit_messages(&env, &committer, &refs).await;
    assert!(
        failures(&answer).is_empty(),
        "dead-lettered, then acknowledged: {answer:?}"
    );
    assert!(receive_all(&env).await.is_empty());
    assert_eq!(env.rows().await, want(&[(1, Some("good"))]));
    let refused = env.keys("warehouse/_floe/dlq/_requests/").await;
    assert_eq!(refused.len(), 2, "{refused:?}");
    let forged_letter = refused
        .iter()
        .find(|k| k.contains("forged"))
        .expect("the forged request is dead-lettered under its batch id");
    let letter: Value = serde_json::from_slice(&env.object(forged_letter).await).unwrap();
    assert!(
        letter["reason"]
            .as_str()
            .unwrap()
            .contains("not under the table's location"),
        "{letter}"
    );
    // The real data file the forged request copied is still there.
    let key = real.trim_start_matches(&format!("s3://{}/", env.bucket));
    assert!(!env.object(key).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_keyed_table_moves_a_key_between_partitions() {
    let mut env = Env::new().await;
    env.partition = vec!["name".into()];
    env.create_table(true).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    for event in [
        kinesis_event(&[
            ("300", json!({"id": 1, "name": "a"})),
            ("301", json!({"id": 2, "name": "b"})),
        ]),
        // id 1 moves from partition name=a to name=b.
        kinesis_event(&[("302", json!({"_op": "u", "id": 1, "name": "b"}))]),
    ] {
        let answer = writer.handle(event).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
        env.drain(&committer).await;
    }
    let expected = want(&[(1, Some("b")), (2, Some("b"))]);
    assert_eq!(env.rows().await, expected);
    // Position deletes: pyiceberg reads the table as well as DuckDB.
    env.assert_readers_see(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_tombstones_delete_their_keys() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let env = Env::new().await;
    env.create_table(true).await;
    let writer = WriterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let committer = CommitterFunction::new(&env.deployment(Faults::none()).await).unwrap();
    let record = |offset: i64, key: &str, value: Option<&str>| {
        json!({"topic": "users", "partition": 0, "offset": offset,
               "timestamp": 1_700_000_000_000i64, "timestampType": "CREATE_TIME",
               "key": b64(key), "value": value.map(b64), "headers": []})
    };
    let event = |records: Vec<Value>| {
        writer_event(json!({"eventSource": "aws:kafka",
               "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/c/1",
               "records": {"users-0": records}}))
    };
    for e in [
        event(vec![
            record(1, "{\"id\":1}", Some("{\"id\":1,\"name\":\"x\"}")),
            record(2, "{\"id\":2}", Some("{\"id\":2,\"name\":\"y\"}")),
            record(3, "3", Some("{\"id\":3,\"name\":\"z\"}")),
        ]),
        // An upsert topic deletes by tombstone: a key object, and a bare key.
        event(vec![record(4, "{\"id\":1}", None), record(5, "3", None)]),
    ] {
        let answer = writer.handle(e).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
        env.drain(&committer).await;
    }
    let expected = want(&[(2, Some("y"))]);
    assert_eq!(env.rows().await, expected);
    env.assert_readers_see(&expected).await;
}

/// A database `name` on the local Postgres cluster (local-dev/pg.sh), fresh,
/// and a session on it.
async fn postgres_db(name: &str) -> (String, tokio_postgres::Client) {
    let base = services::run("pg.sh");
    let connect = |conninfo: String| async move {
        let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
    };
    let admin = connect(base.clone()).await;
    admin
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    let conninfo = base.replace("dbname=postgres", &format!("dbname={name}"));
    let db = connect(conninfo.clone()).await;
    (conninfo, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_sync_copies_then_streams_a_table_within_its_deadline() {
    if std::env::var("FLOE_PG_SKIP").as_deref() == Ok("1") {
        eprintln!("!!! FLOE_PG_SKIP=1: SKIPPING the pg-sync function test !!!");
        return;
    }
    let env = Env::new().await;
    let name = unique("floe_fn_pg");
    let (conninfo, db) = postgres_db(&name).await;
    db.batch_execute(
        "CREATE TABLE events (id bigint PRIMARY KEY, name text);
         INSERT INTO events SELECT g, 'row ' || g FROM generate_series(1, 120) g;",
    )
    .await
    .unwrap();
    // The login comes from Secrets Manager as RDS writes it (the local
    // cluster trusts local users, so any password passes), with the port
    // pg.sh chose.
    let port = conninfo
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .expect("pg.sh names the port");
    let login = env
        .secret(&format!(
            r#"{{"engine":"postgres","username":"postgres","password":"unused","port":{port}}}"#
        ))
        .await;
    let mut config = env.config().await;
    let pg = &mut config.postgres;
    pg.conninfo = Some(conninfo.as_str().into());
    pg.secret = Some(login);
    pg.slot = Some(name.clone());
    pg.publication = Some(name.clone());
    pg.tables = vec!["public.events".into()];
    pg.namespace = Some(env.ident.namespace().join("."));
    pg.chunk_rows = Some(50);
    let d = Deployment::from_config(config, Faults::none(), Role::PgSync)
        .await
        .unwrap();
    let source = floe_postgres::PgConfig::new(
        conninfo.as_str(),
        name.as_str(),
        name.as_str(),
        vec!["public.events".into()],
    );
    floe_postgres::setup(&source).await.unwrap();
    let function = floe_pg_sync::PgSyncFunction::new(&d).unwrap();

    // An invocation out of time starts no batch and fails nothing.
    let answer = function
        .handle(json!({}), Some(std::time::Instant::now()))
        .await
        .unwrap();
    assert_eq!(
        (answer["batches"].as_u64(), answer["stop"].as_str()),
        (Some(0), Some("deadline")),
        "{answer}"
    );

    // The EventBridge event is ignored; 120 rows in 50-row chunks.
    let scheduled = json!({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}});
    let deadline = || Some(std::time::Instant::now() + Duration::from_secs(120));
    let answer = function
        .handle(scheduled.clone(), deadline())
        .await
        .unwrap();
    assert_eq!(answer["snapshot_done"], true, "{answer}");
    assert_eq!(answer["snapshot_rows"], 120, "{answer}");
    assert_eq!(answer["rejected"], 0, "{answer}");
    let expected: Vec<(i64, Option<String>)> =
        (1..=120).map(|i| (i, Some(format!("row {i}")))).collect();
    assert_eq!(env.rows().await, expected);

    db.batch_execute(
        "UPDATE events SET name = 'changed' WHERE id = 7;
         DELETE FROM events WHERE id > 100;
         INSERT INTO events VALUES (500, 'new');",
    )
    .await
    .unwrap();
    let answer = function.handle(scheduled, deadline()).await.unwrap();
    assert_eq!(answer["stop"], "caught_up", "{answer}");
    assert_eq!(answer["oldest_uncommitted_change_age_ms"], 0, "{answer}");
    assert!(answer["slot_lag_bytes"].as_u64().is_some(), "{answer}");
    let mut expected: Vec<(i64, Option<String>)> = (1..=100)
        .map(|i| {
            (
                i,
                Some(if i == 7 {
                    "changed".into()
                } else {
                    format!("row {i}")
                }),
            )
        })
        .collect();
    expected.push((500, Some("new".into())));
    assert_eq!(env.rows().await, expected);
    env.assert_duckdb_sees(&expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_the_invocation_deadline_cuts_short_names_its_messages_for_redelivery() {
    let env = Env::sqlite().await;
    env.create_table(false).await;
    let d = env.deployment(Faults::none()).await;
    let writer = WriterFunction::new(&d).unwrap();
    for b in 0..2 {
        let answer = writer
            .handle(sqs_event(&format!("d{b}"), b * 10, 3))
            .await
            .unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }
    // A catalog that takes a minute per commit, in an invocation with two
    // seconds left: the handler answers in time, naming every message.
    let mut slow = env.deployment(Faults::none()).await;
    slow.catalog = std::sync::Arc::new(floe_core::delayed::Delayed::new(
        slow.catalog.clone(),
        Duration::from_secs(60),
    ));
    let stuck = CommitterFunction::new(&slow).unwrap();
    let messages = receive_all(&env).await;
    assert_eq!(messages.len(), 2);
    let refs: Vec<&aws_sdk_sqs::types::Message> = messages.iter().collect();
    let started = std::time::Instant::now();
    let answer = commit_messages_by(
        &env,
        &stuck,
        &refs,
        Some(std::time::Instant::now() + Duration::from_secs(2)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(30), "{answer:?}");
    let mut named = failures(&answer);
    named.sort();
    let mut ids: Vec<String> = messages
        .iter()
        .map(|m| m.message_id().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(named, ids, "{answer:?}");
    assert!(env.rows().await.is_empty());
    // Handed to an invocation with time, they commit.
    let committer = CommitterFunction::new(&d).unwrap();
    let answer = commit_messages(&env, &committer, &refs).await;
    assert!(failures(&answer).is_empty(), "{answer:?}");
    let got: Vec<i64> = env.rows().await.into_iter().map(|(id, _)| id).collect();
    assert_eq!(got, [0, 1, 2, 10, 11, 12]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_function_skips_tables_another_engine_created() {
    let env = Env::sqlite().await;
    env.create_table(false).await;
    let d = env.deployment(Faults::none()).await;
    // Created the way another engine would: no floe property, no floe commit.
    let foreign = parse_table(&format!("{}.theirs", env.ident.namespace().join("."))).unwrap();
    let schema = tabledef::parse_schema(
        r#"{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":false,"type":"long"}]}"#,
    )
    .unwrap();
    d.catalog
        .create_table(
            &foreign,
            floe_core::iceberg::TableCreation::builder()
                .name("theirs".to_string())
                .schema(schema)
                .build(),
        )
        .await
        .unwrap();
    let writer = WriterFunction::new(&d).unwrap();
    let committer = CommitterFunction::new(&d).unwrap();
    writer.handle(sqs_event("m0", 0, 3)).await.unwrap();
    env.drain(&committer).await;

    let deployment = Deployment::from_config(env.config().await, Faults::none(), Role::Maintenance)
        .await
        .unwrap();
    let answer = MaintenanceFunction::new(&deployment)
        .run(&MaintainOptions {
            lister: deployment.lister.clone(),
            ..MaintainOptions::default()
        })
        .await
        .unwrap();
    let maintained: Vec<&str> = answer["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(maintained, [env.table().as_str()], "{answer}");
    assert_eq!(
        answer["skipped"],
        json!([floe_core::ident::display(&foreign)]),
        "{answer}"
    );
}

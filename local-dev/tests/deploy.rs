//! The `floe` binary on deployments, with the config the functions read:
//! Glue and SQLite-on-S3 on moto, and lakana's REST catalog. Each run:
//! `table create` (applying the config's table section), `ingest` (committed
//! here), `ingest --via-queue` (enqueued; `status` counts it on the queue),
//! the writer function's dead letters on S3, `dlq list`, `table alter`,
//! `dlq replay` exactly once (again after a "crash" that left the file),
//! `status` numbers matched against what was sent, and the table read back
//! by pyiceberg.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_test_support::services;
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::{Value, json};

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

enum Catalog {
    Glue,
    Sqlite,
    Rest,
}

/// A bucket and a commit queue on moto, a config file naming them, and a
/// table name in the catalog's namespace.
struct Stack {
    clients: AwsClients,
    bucket: String,
    queue_url: String,
    dir: tempfile::TempDir,
    table: String,
    config: PathBuf,
}

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"},
  {"id":3,"name":"n","required":false,"type":"int"}]}"#;

impl Stack {
    async fn new(catalog: Catalog) -> Stack {
        let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
        let bucket = unique("floe-cli").replace('_', "-");
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
            .queue_name(unique("floe-cli-commits"))
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_string();
        let dir = tempfile::tempdir().unwrap();
        let (catalog_toml, ns) = match catalog {
            Catalog::Glue => ("type = \"glue\"".to_string(), unique("cli")),
            Catalog::Sqlite => (
                format!(
                    "type = \"sqlite\"\npath = \"{}\"",
                    dir.path().join("catalog.db").display()
                ),
                unique("cli"),
            ),
            Catalog::Rest => {
                let (uri, token) = services::lakana();
                (
                    format!(
                        "type = \"rest\"\nuri = \"{uri}\"\nprefix = \"floe\"\ntoken = \"{token}\""
                    ),
                    // lakana takes only its own top-level namespaces.
                    "bronze".to_string(),
                )
            }
        };
        let table = format!("{ns}.{}", unique("events"));
        std::fs::write(dir.path().join("events.schema.json"), SCHEMA).unwrap();
        // `widen_types = false`: a value too large for `n` is dead-lettered
        // until `table alter --widen`; copy-on-write and the sort order show
        // that `table create` applied this section.
        let text = format!(
            r#"
[warehouse]
uri = "s3://{bucket}/warehouse"
[aws]
region = "us-east-1"
endpoint = "{endpoint}"
[catalog]
{catalog_toml}
[queue]
url = "{queue_url}"
[routing]
table = "{table}"
[tables."{table}"]
schema = "events.schema.json"
sort = ["id"]
merge_strategy = "copy-on-write"
widen_types = false
properties = {{ "floe.test" = "from-config" }}
"#,
            endpoint = services::moto(),
        );
        let config = dir.path().join("floe.toml");
        std::fs::write(&config, text).unwrap();
        Stack {
            clients,
            bucket,
            queue_url,
            dir,
            table,
            config,
        }
    }

    /// Runs `floe --config <the stack's config> ARGS`, asserting success.
    fn floe(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_floe"))
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_FAULT")
            .output()
            .expect("run floe");
        assert!(
            out.status.success(),
            "floe {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn floe_json(&self, args: &[&str]) -> Value {
        let out = self.floe(args);
        // `dlq replay` prints a line before its report.
        let start = out.find(['{', '[']).unwrap_or(0);
        serde_json::from_str(out[start..].trim())
            .unwrap_or_else(|e| panic!("floe {args:?} printed no JSON ({e}): {out}"))
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    async fn deployment(&self, role: Role) -> Deployment {
        let config = Config::load(Some(&self.config)).unwrap();
        Deployment::from_config(config, Faults::none(), role)
            .await
            .unwrap()
    }

    /// Commits what is on the queue with the committer step until it is empty.
    async fn commit_queue(&self) {
        let d = self.deployment(Role::Committer).await;
        let committer = d.committer();
        for _ in 0..20 {
            let (report, deliveries) = committer
                .drain_once(
                    d.queue.as_ref(),
                    100,
                    Duration::from_millis(500),
                    Duration::from_secs(1),
                )
                .await
                .unwrap()
                .unwrap();
            assert!(report.failed().is_empty(), "{report:?}");
            if deliveries.is_empty() {
                return;
            }
        }
        panic!("the commit queue did not empty");
    }

    /// The dead-letter objects on S3.
    async fn dead_letter_keys(&self) -> Vec<String> {
        let out = self
            .clients
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix("warehouse/_floe/dlq/")
            .send()
            .await
            .unwrap();
        out.contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .filter(|k| k.ends_with(".ndjson"))
            .collect()
    }
}

/// An SQS event of the writer function: `(message id, body)` each.
fn sqs_event(messages: &[(&str, Value)]) -> WriterEvent {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, body)| floe_test_support::events::sqs_message(id, body.to_string()))
        .collect();
    WriterEvent::try_from(json!({ "Records": records })).unwrap()
}

async fn scenario(catalog: Catalog) {
    let s = Stack::new(catalog).await;
    let t = s.table.as_str();

    // The config's table section applies: sort order and copy-on-write.
    s.floe(&["table", "create", t]);
    let shown = s.floe_json(&["table", "show", t, "--json"]);
    assert_eq!(shown["properties"]["floe.test"], "from-config", "{shown}");
    assert_eq!(
        shown["properties"]["write.update.mode"], "copy-on-write",
        "{shown}"
    );
    assert_eq!(shown["sort_order"]["fields"][0]["source-id"], 1, "{shown}");

    // Written and committed here.
    let first: String = (1..=5)
        .map(|i| format!("{{\"id\":{i},\"name\":\"a{i}\",\"n\":{i}}}\n"))
        .collect();
    let r = s.floe_json(&["ingest", t, &s.file("first.ndjson", &first), "--json"]);
    assert_eq!(r["records_committed"], 5, "{r}");
    assert_eq!(r["commits"], 1, "{r}");

    // Written here, committed by the deployment's committer: on the queue meanwhile.
    let second: String = (6..=8)
        .map(|i| format!("{{\"id\":{i},\"name\":\"b{i}\",\"n\":{i}}}\n"))
        .collect();
    let r = s.floe_json(&[
        "ingest",
        t,
        &s.file("second.ndjson", &second),
        "--via-queue",
        "--json",
    ]);
    assert_eq!(r["requests"], 1, "{r}");
    assert_eq!(r["records_committed"], 0, "{r}");
    // Counted as queued, not as "committed 0".
    assert_eq!(r["queued"], true, "{r}");
    assert_eq!(r["records_written"], 3, "{r}");
    let status = s.floe_json(&["status", "--table", t, "--json"]);
    let q = &status["queue"];
    assert_eq!(q["url"], s.queue_url.as_str(), "{status}");
    assert_eq!(
        q["visible"].as_u64().unwrap() + q["in_flight"].as_u64().unwrap(),
        1,
        "{status}"
    );
    assert_eq!(status["tables"][0]["total_records"], 5, "{status}");
    // With a commit queue, orphan cleanup waits as long as a request can
    // wait there and in its DLQ: the request just queued names files no
    // table holds yet. (A local warehouse has no queue: tests/newcomer.rs.)
    let refused = Command::new(env!("CARGO_BIN_EXE_floe"))
        .arg("--config")
        .arg(&s.config)
        .args(["maintain", t, "--orphan-window-ms", "259200000"])
        .env_remove("FLOE_WAREHOUSE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("259200 s is shorter than queue.dlq_retention_seconds (1209600 s)"),
        "{stderr}"
    );

    // The writer function: two good records and one whose `n` does not fit
    // an int (dead-lettered on S3 while types may not widen).
    let writer = WriterFunction::new(&s.deployment(Role::Writer).await).unwrap();
    let answer = writer
        .handle(sqs_event(&[
            ("m-9", json!({"id": 9, "name": "c9", "n": 9})),
            (
                "m-10",
                json!({"id": 10, "name": "c10", "n": 3_000_000_000u64}),
            ),
            ("m-11", json!({"id": 11, "name": "c11", "n": 11})),
        ]))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&answer).unwrap()["batchItemFailures"],
        json!([]),
        "{answer:?}"
    );
    assert_eq!(s.dead_letter_keys().await.len(), 1);
    s.commit_queue().await;

    let status = s.floe_json(&["status", "--table", t, "--json"]);
    let line = &status["tables"][0];
    assert_eq!(line["total_records"], 10, "{status}");
    assert_eq!(line["records"], 10, "{status}");
    let commits = line["commits"].as_u64().unwrap();
    assert!((2..=3).contains(&commits), "{status}");
    assert_eq!(
        line["records_per_commit"].as_f64().unwrap(),
        10.0 / commits as f64,
        "{status}"
    );
    assert_eq!(status["queue"]["visible"], 0, "{status}");
    let reasons = status["dead_letters"][t].as_object().unwrap();
    assert_eq!(
        reasons.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
        1
    );
    let (reason, _) = reasons.iter().next().unwrap();
    assert!(
        reason.starts_with("n: ") && reason.contains("out of range"),
        "{reason}"
    );

    let listed = s.floe_json(&["dlq", "list", "--table", t, "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["records"][0]["position"], "m-10", "{listed}");
    let path = listed[0]["path"].as_str().unwrap().to_string();
    let key = path
        .strip_prefix(&format!("s3://{}/", s.bucket))
        .unwrap()
        .to_string();
    let content = s
        .clients
        .s3
        .get_object()
        .bucket(&s.bucket)
        .key(&key)
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();

    // Fix the table, then replay: the record lands, its file goes.
    s.floe(&["table", "alter", t, "--widen", "n=long"]);
    let r = s.floe_json(&["dlq", "replay", "--table", t, "--json"]);
    assert_eq!(r["records_committed"], 1, "{r}");
    assert!(s.dead_letter_keys().await.is_empty());
    // A replay that crashed after its commit left the file behind: running
    // it again commits nothing twice.
    s.clients
        .s3
        .put_object()
        .bucket(&s.bucket)
        .key(&key)
        .body(content.into())
        .send()
        .await
        .unwrap();
    let r = s.floe_json(&["dlq", "replay", "--table", t, "--json"]);
    assert_eq!(r["records_committed"], 0, "{r}");
    assert_eq!(r["duplicates"], 1, "{r}");

    let shown = s.floe_json(&["table", "show", t, "--json"]);
    assert_eq!(shown["records"], 11, "{shown}");
    let status = s.floe_json(&["status", "--table", t, "--json"]);
    assert_eq!(status["dead_letters"], json!({}), "{status}");

    // pyiceberg reads every row once, the replayed value widened to long.
    let v = services::python_json(
        "shared/tests/read_s3.py",
        &[
            services::moto(),
            shown["metadata_location"].as_str().unwrap(),
        ],
    );
    let rows = v["pyiceberg"].as_array().unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=11).collect::<Vec<_>>(), "{v}");
    assert_eq!(rows[9]["n"], 3_000_000_000u64, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_on_glue() {
    scenario(Catalog::Glue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_on_sqlite_on_s3() {
    scenario(Catalog::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_on_lakana_rest() {
    scenario(Catalog::Rest).await;
}

//! The HTTP function's batches over time, through its Lambda handler on a
//! local warehouse whose ledger seals every four entries: a retried
//! `Idempotency-Key` is found from its first receipt however late it comes
//! (past the key window too, as long as the ledger holds its batch), and a
//! POST without a key is always a new batch. Its own binary, since it
//! moves the process clock (`floe_core::clock::shift`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::{FaultMode, FaultPoint, Faults};
use floe_core::ident::parse_table;
use floe_core::queue::{MemoryQueue, QueueRef};
use floe_core::tabledef;
use floe_ingest_http::HttpFunction;
use serde_json::{Value, json};

const TOKEN: &str = "retry-token";

/// The warehouse, its queue and table.
struct Env {
    dir: tempfile::TempDir,
    queue: Arc<MemoryQueue>,
}

impl Env {
    async fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
            queue: Arc::new(MemoryQueue::new()),
        };
        let schema = tabledef::parse_schema(
            r#"{"type":"struct","schema-id":0,"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"v","required":false,"type":"string"}]}"#,
        )
        .unwrap();
        let partition = tabledef::parse_partition(&schema, &[]).unwrap();
        let properties = HashMap::from([("floe.ledger.seal-entries".into(), "4".into())]);
        env.deployment(Faults::none())
            .await
            .catalog
            .create_table(
                &parse_table("h.events").unwrap(),
                tabledef::creation("events", schema, partition, properties),
            )
            .await
            .unwrap();
        env
    }

    async fn deployment(&self, faults: Faults) -> Deployment {
        let text = format!(
            "[warehouse]\npath = \"{}\"\n[http]\ntoken = \"{TOKEN}\"\nwait_seconds = 1\n",
            self.dir.path().display()
        );
        let config = Config::from_toml_str(&text, Path::new("."), &|_| None).unwrap();
        let mut d = Deployment::from_config(config, faults, Role::Writer)
            .await
            .unwrap();
        d.queue = self.queue.clone() as QueueRef;
        d
    }

    /// POSTs `body` (with `key`) through a fresh function instance.
    async fn post(
        &self,
        faults: Faults,
        key: Option<&str>,
        body: &str,
        wait: bool,
    ) -> (u16, Value) {
        let f = HttpFunction::new(&self.deployment(faults).await).unwrap();
        let path = "/v1/tables/h/events/records";
        let mut headers = json!({"authorization": format!("Bearer {TOKEN}")});
        if let Some(k) = key {
            headers["idempotency-key"] = json!(k);
        }
        let event = json!({
            "version": "2.0", "routeKey": "$default", "rawPath": path,
            "rawQueryString": if wait { "wait=commit" } else { "" },
            "headers": headers,
            "requestContext": {"accountId": "1", "apiId": "h", "domainName": "h", "domainPrefix": "h",
                "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "test"},
                "requestId": "r", "routeKey": "$default", "stage": "$default",
                "time": "14/Nov/2023:22:13:20 +0000", "timeEpoch": 1_700_000_000_000i64},
            "isBase64Encoded": false,
            "body": body
        });
        let resp = f
            .handle(lambda_http::request::from_str(&event.to_string()).unwrap())
            .await;
        let status = resp.status().as_u16();
        let answer = serde_json::from_slice(resp.body().as_ref()).unwrap_or(Value::Null);
        (status, answer)
    }

    /// Commits what the queue holds, as the committer function would.
    async fn commit(&self) {
        let committer = self.deployment(Faults::none()).await.committer();
        let window = Duration::ZERO;
        while let Some((report, _)) = committer
            .drain_once(self.queue.as_ref(), 100, window, Duration::from_millis(10))
            .await
            .unwrap()
        {
            assert!(report.failed().is_empty(), "{report:?}");
            if report.tables.is_empty() {
                break;
            }
        }
    }

    /// The table's `id` column as DuckDB and pyiceberg read it, sorted.
    async fn ids(&self) -> Vec<i64> {
        let catalog = self.deployment(Faults::none()).await.catalog;
        let loaded = catalog
            .load_table(&parse_table("h.events").unwrap())
            .await
            .unwrap();
        let metadata = loaded.metadata_location.trim_start_matches("file://");
        let list = self.dir.path().join("tables.json");
        std::fs::write(&list, serde_json::to_vec(&[metadata]).unwrap()).unwrap();
        let read = floe_test_support::services::python_json(
            "shared/tests/read_tables.py",
            &[list.to_str().unwrap()],
        );
        let ids = |reader: &str| -> Vec<i64> {
            let mut ids: Vec<i64> = read[metadata][reader]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r[0].as_i64().unwrap())
                .collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(ids("duckdb"), ids("pyiceberg"));
        ids("duckdb")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_retry_is_found_from_its_first_receipt_and_keyless_posts_are_each_new() {
    let env = Env::new().await;
    let (one, two) = ("{\"id\":1,\"v\":\"a\"}", "{\"id\":2,\"v\":\"b\"}");
    // k-1's request is enqueued, then the function fails before it saved
    // its answer: the client gets a 503 and will retry.
    let enqueued = Faults::at(FaultPoint::AfterEnqueue, FaultMode::Error, 1);
    let (status, answer) = env.post(enqueued, Some("k-1"), one, false).await;
    assert_eq!(status, 503, "{answer}");
    let (status, answer) = env.post(Faults::none(), Some("k-2"), two, false).await;
    assert_eq!(status, 200, "{answer}");
    env.commit().await;
    // Twelve more commits seal the ledger three times.
    for i in 0..12 {
        let body = format!("{{\"id\":{},\"v\":\"f\"}}", 100 + i);
        env.post(Faults::none(), Some(&format!("f-{i}")), &body, false)
            .await;
        env.commit().await;
    }
    // The same body twice without a key: two batches.
    let same = "{\"id\":50,\"v\":\"same\"}";
    let (_, a) = env.post(Faults::none(), None, same, false).await;
    let (_, b) = env.post(Faults::none(), None, same, false).await;
    assert_ne!(a["batch_id"], b["batch_id"]);
    env.commit().await;

    // 130 s later, past the ledger's two minutes of clock skew.
    floe_core::clock::shift(130_000);
    for (key, body) in [("k-1", one), ("k-2", two)] {
        let (status, answer) = env.post(Faults::none(), Some(key), body, false).await;
        assert_eq!(status, 200, "{key}: {answer}");
        env.commit().await;
        // The batch committed long ago is found, from the key's first receipt.
        let (status, answer) = env.post(Faults::none(), Some(key), body, true).await;
        assert_eq!(
            (status, &answer["committed"]),
            (200, &json!(true)),
            "{key}: {answer}"
        );
    }
    let mut want = vec![1, 2, 50, 50];
    want.extend(100..112);
    assert_eq!(env.ids().await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_key_window_is_its_first_batch_and_leaves_nothing_to_commit() {
    let env = Env::new().await;
    let table = parse_table("h.events").unwrap();
    let (zero, one) = ("{\"id\":0,\"v\":\"a\"}", "{\"id\":1,\"v\":\"b\"}");
    env.post(Faults::none(), Some("k-0"), zero, false).await;
    env.commit().await;
    let catalog = env.deployment(Faults::none()).await.catalog;
    let before = catalog.load_table(&table).await.unwrap();
    let before = before.metadata.current_snapshot_id().unwrap();
    let (status, first) = env.post(Faults::none(), Some("k-1"), one, false).await;
    assert_eq!(status, 200, "{first}");
    env.commit().await;

    // A day and a minute later the key's window has passed; its batch is
    // still in the table, so the retry is answered as the first time.
    floe_core::clock::shift(floe_core::ledger::DEFAULT_KEY_WINDOW_MS + 60_000);
    let (status, again) = env.post(Faults::none(), Some("k-1"), one, false).await;
    assert_eq!((status, &again), (200, &first));
    // Another engine rolls k-1 back. Had the retry been written again, its
    // request would now commit the rolled-back record anew.
    floe_test_support::harness::roll_back(catalog.as_ref(), &table, before).await;
    env.commit().await;
    assert_eq!(env.ids().await, vec![0]);

    // Once the ledger no longer holds it, the retry is its batch again, at
    // its first receipt: it commits once however often it comes.
    for _ in 0..2 {
        let (status, answer) = env.post(Faults::none(), Some("k-1"), one, false).await;
        assert_eq!((status, &answer), (200, &first));
    }
    env.commit().await;
    assert_eq!(env.ids().await, vec![0, 1]);
    let (status, answer) = env.post(Faults::none(), Some("k-1"), one, true).await;
    assert_eq!(
        (status, &answer["committed"]),
        (200, &json!(true)),
        "{answer}"
    );
}

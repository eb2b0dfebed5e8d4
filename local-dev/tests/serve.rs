//! `floe serve` over a socket: real HTTP requests to the running binary on
//! the embedded warehouse — the token, idempotency replay and conflict, 413
//! for bodies and records, 404 for a missing table, the column cap, a 400
//! that names record and field without the value, `?wait=commit`, `GET` —
//! then SIGTERM, which must commit what was acknowledged, and pyiceberg
//! reads the table.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::Warehouse;
use serde_json::{Value, json};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

/// The running server and its base URL.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(wh: &Warehouse, config: &str) -> Server {
        let config = wh.file("serve.toml", config);
        let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
            .arg("--config")
            .arg(&config)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--commit-window-ms",
                "100",
            ])
            .env("FLOE_WAREHOUSE", wh.path())
            .env_remove("FLOE_FAULT")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start floe serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().expect("a first line").expect("readable");
        let base = first
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        // Keep reading so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Server { child, base }
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "floe serve exited with {exit}");
    }
}

/// A failed assertion must not leave the server running beside later tests.
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// POSTs `body` to `path`; status, JSON answer and its raw text.
async fn post(
    client: &reqwest::Client,
    url: String,
    token: Option<&str>,
    key: Option<&str>,
    body: impl Into<String>,
) -> (u16, Value, String) {
    let mut req = client.post(url).body(body.into());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, json, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_serve_answers_over_http_and_commits_what_it_acknowledged() {
    let wh = Warehouse::new();
    wh.create_table("web.events", SCHEMA, &[]);
    let server = Server::start(
        &wh,
        r#"
[http]
token = "s3cret"
max_body_bytes = 2048
max_record_bytes = 300
max_new_columns = 2
redact_values = true
wait_seconds = 20
"#,
    );
    let client = reqwest::Client::new();
    let records = format!("{}/v1/tables/web/events/records", server.base);
    let tok = Some("s3cret");
    let call =
        |token, key, body: &str| post(&client, records.clone(), token, key, body.to_string());

    // Who may call.
    assert_eq!(call(None, None, "{\"id\":1}").await.0, 401);
    assert_eq!(call(Some("nope"), None, "{\"id\":1}").await.0, 403);

    // A missing table is not created over HTTP.
    let other = format!("{}/v1/tables/web/other/records", server.base);
    let (status, body, _) = post(&client, other, tok, None, "{\"id\":1}").await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("web.other"),
        "{body}"
    );

    // Written once per key; the same key with another body is refused.
    let ndjson = "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n";
    let (status, first, _) = call(tok, Some("k-1"), ndjson).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["records"], 2);
    let (status, again, _) = call(tok, Some("k-1"), ndjson).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["batch_id"], first["batch_id"]);
    let (status, conflict, _) = call(tok, Some("k-1"), "{\"id\":3,\"name\":\"c\"}").await;
    assert_eq!(status, 422, "{conflict}");

    // Too large: the body, or one record (named).
    let big = format!("{{\"id\":9,\"name\":\"{}\"}}", "x".repeat(3000));
    let (status, body, _) = call(tok, None, &big).await;
    assert_eq!(status, 413, "{body}");
    let wide = format!(
        "{{\"id\":3,\"name\":\"ok\"}}\n{{\"id\":4,\"name\":\"{}\"}}\n",
        "y".repeat(400)
    );
    let (status, body, _) = call(tok, None, &wide).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].as_str().unwrap().contains("line 2"), "{body}");

    // More new columns than allowed: refused whole.
    let (status, body, _) = call(tok, None, "{\"id\":5,\"c1\":1,\"c2\":2,\"c3\":3}").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["new_columns"], json!(["c1", "c2", "c3"]), "{body}");

    // A bad record: named by line and field, its value never echoed.
    let (status, body, text) = call(
        tok,
        Some("k-2"),
        "{\"id\":6,\"name\":\"f\"}\n{\"id\":\"top-secret-42\",\"name\":\"g\"}\n",
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["records"], 1);
    assert_eq!(body["rejected"][0]["position"], "line 2");
    assert_eq!(body["rejected"][0]["field"], "id");
    assert!(!text.contains("top-secret-42"), "{text}");

    // ?wait=commit answers once the in-process committer has it.
    let waited = format!("{records}?wait=commit");
    let array = "[{\"id\":7,\"name\":\"h\"},{\"id\":8,\"name\":\"i\"}]";
    let (status, body, _) = post(&client, waited, tok, Some("k-3"), array).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["committed"], true, "{body}");

    let table_status: Value = client
        .get(format!("{}/v1/tables/web/events", server.base))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(table_status["total_records"], 5, "{table_status}");

    // Acknowledged, maybe not committed yet, then SIGTERM: committed on the way out.
    let (status, body, _) = call(tok, Some("k-4"), "{\"id\":9,\"name\":\"j\"}").await;
    assert_eq!(status, 200, "{body}");
    server.stop();

    let table = wh.read("web.events", Some("id"));
    assert_eq!(common::ids(&table), vec![1, 2, 6, 7, 8, 9], "{table}");
}

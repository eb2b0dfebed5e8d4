//! `floe serve` over a socket: real HTTP requests to the running binary on
//! the embedded warehouse — the token, idempotency replay and conflict, 413
//! for bodies and records, 404 for a missing table, the column cap, a 400
//! that names record and field without the value, `?wait=commit`, `GET` —
//! then SIGTERM, which must commit what was acknowledged, and pyiceberg
//! reads the table.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::Warehouse;
use serde_json::{Value, json};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

/// The running server, its base URL and what it printed.
struct Server {
    child: Child,
    base: String,
    out: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(wh: &Warehouse, config: &str) -> Server {
        Self::launch(wh, config, 100, &[])
    }

    /// `floe serve` with a commit window of `window_ms` and `env` set
    /// (`FLOE_FAULT`, `FLOE_CLOCK_SHIFT_MS`).
    fn launch(wh: &Warehouse, config: &str, window_ms: u64, env: &[(&str, &str)]) -> Server {
        Self::launch_with(wh, config, window_ms, env, &[])
    }

    /// [`Server::launch`] with more command-line arguments.
    fn launch_with(
        wh: &Warehouse,
        config: &str,
        window_ms: u64,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Server {
        let config = wh.file("serve.toml", config);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
        cmd.arg("--config")
            .arg(&config)
            .args(["serve", "--addr", "127.0.0.1:0", "--commit-window-ms"])
            .arg(window_ms.to_string())
            .args(args)
            .env_remove("FLOE_HTTP_TOKEN")
            .env_remove("FLOE_METRICS")
            .env("FLOE_WAREHOUSE", wh.path())
            .env_remove("FLOE_FAULT")
            .env_remove("FLOE_CLOCK_SHIFT_MS")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start floe serve");
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
        let out = Arc::new(Mutex::new(vec![first]));
        let sink = out.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server { child, base, out }
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(self) -> Vec<String> {
        let (exit, out) = self.terminate();
        assert!(exit.success(), "floe serve exited with {exit}: {out:?}");
        out
    }

    /// Sends SIGTERM; the exit status and every line printed.
    fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        signal(&self.child, "-TERM");
        let exit = self.child.wait().unwrap();
        // The reader thread ends with the pipe; give it the last lines.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let out = self.out.lock().unwrap().clone();
        (exit, out)
    }

    /// `kill -9`: nothing of the process runs again.
    fn kill(mut self) {
        signal(&self.child, "-KILL");
        let _ = self.child.wait();
    }

    /// Waits until the process ended on its own (an injected crash).
    fn crashed(mut self) {
        let exit = self.child.wait().unwrap();
        assert!(!exit.success(), "floe serve was meant to crash");
    }

    fn records(&self, table: &str) -> String {
        let (ns, name) = table.split_once('.').unwrap();
        format!("{}/v1/tables/{ns}/{name}/records", self.base)
    }
}

fn signal(child: &Child, sig: &str) {
    let pid = child.id().to_string();
    let status = Command::new("kill").args([sig, &pid]).status().unwrap();
    assert!(status.success());
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
    let out = server.stop();
    // Metrics go where --metrics says (off by default), not into the log.
    assert!(
        out.iter().all(|l| !l.contains("\"_aws\"")),
        "EMF on stdout: {out:?}"
    );

    let table = wh.read("web.events", Some("id"));
    assert_eq!(common::ids(&table), vec![1, 2, 6, 7, 8, 9], "{table}");
}

/// The server of the durability tests: one token, short waits.
const CONFIG: &str = "[http]\ntoken = \"t\"\nwait_seconds = 5\n";

/// A client's POST: status and answer, `None` when the connection broke
/// before an answer came (the server died).
async fn send(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &str,
) -> Option<(u16, Value)> {
    let mut req = client.post(url).bearer_auth("t").body(body.to_string());
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.ok()?;
    let status = resp.status().as_u16();
    let text = resp.text().await.ok()?;
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// `send` with `?wait=commit`, asserting the batch is in the table.
async fn committed(client: &reqwest::Client, url: &str, key: Option<&str>, body: &str) -> Value {
    let (status, answer) = send(client, &format!("{url}?wait=commit"), key, body)
        .await
        .expect("an answer");
    assert_eq!(status, 200, "{key:?}: {answer}");
    assert_eq!(answer["committed"], true, "{key:?}: {answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_record_survives_kill_9_at_every_point_exactly_once() {
    let wh = Warehouse::new();
    wh.create_table("web.events", SCHEMA, &[]);
    let client = reqwest::Client::new();
    // Where in a request's life the process dies: an injected crash (abort)
    // at a step, or SIGKILL once the 200 is out and the commit window (a
    // minute) has not ended.
    let points: [(&str, Option<&str>, u64); 6] = [
        ("written, not enqueued", Some("after_upload:crash"), 100),
        ("enqueued, not answered", Some("after_enqueue:crash"), 100),
        ("answered, not committed", None, 60_000),
        (
            "metadata written, catalog not swapped",
            Some("catalog_swap:crash"),
            100,
        ),
        (
            "catalog swapped, its answer lost",
            Some("catalog_ambiguous:crash"),
            100,
        ),
        ("committed, still queued", Some("after_commit:crash"), 100),
    ];
    let mut expected = Vec::new();
    for (i, (point, fault, window)) in points.into_iter().enumerate() {
        let key = format!("k-{i}");
        let ids = [i as u64 * 10 + 1, i as u64 * 10 + 2];
        let body: String = ids
            .iter()
            .map(|id| format!("{{\"id\":{id},\"name\":\"{point}\"}}\n"))
            .collect();
        expected.extend(ids);
        let env: Vec<(&str, &str)> = fault.iter().map(|f| ("FLOE_FAULT", *f)).collect();
        let server = Server::launch(&wh, CONFIG, window, &env);
        let first = send(&client, &server.records("web.events"), Some(&key), &body).await;
        if fault.is_some() {
            server.crashed();
        } else {
            assert_eq!(first.as_ref().map(|a| a.0), Some(200), "{point}: {first:?}");
            server.kill();
        }
        // Started again; the client retries what got no answer, and asks
        // for the commit of what did.
        let server = Server::start(&wh, CONFIG);
        let answer = committed(&client, &server.records("web.events"), Some(&key), &body).await;
        if let Some((200, first)) = &first {
            assert_eq!(first["batch_id"], answer["batch_id"], "{point}");
        }
        server.stop();
    }
    let table = wh.read("web.events", Some("id"));
    assert_eq!(common::ids(&table), expected, "{table}");
    let spool = wh.path().join("_floe/commit-queue");
    assert_eq!(std::fs::read_dir(spool).unwrap().count(), 0);
}

/// The durability tests' server buffering POSTs without a key.
const BUFFERED: &str = "[http]\ntoken = \"t\"\nwait_seconds = 5\nbuffer_window_ms = 200\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_buffered_post_survives_kill_9_at_every_point_exactly_once() {
    let wh = Warehouse::new();
    wh.create_table("web.events", SCHEMA, &[]);
    let client = reqwest::Client::new();
    // Each point gets two POSTs answered 200 from the buffer, then the
    // process dies where the window's write or its commit stands: an
    // injected crash (abort), or SIGKILL before the window (a minute) ends.
    let points: [(&str, Option<&str>, u64); 6] = [
        ("buffered, not written", None, 60_000),
        ("written, not enqueued", Some("after_upload:crash"), 200),
        (
            "enqueued, not taken from the buffer",
            Some("after_enqueue:crash"),
            200,
        ),
        (
            "metadata written, catalog not swapped",
            Some("catalog_swap:crash"),
            200,
        ),
        (
            "catalog swapped, its answer lost",
            Some("catalog_ambiguous:crash"),
            200,
        ),
        ("committed, still queued", Some("after_commit:crash"), 200),
    ];
    let mut expected = Vec::new();
    for (i, (point, fault, window)) in points.into_iter().enumerate() {
        let mut env: Vec<(&str, &str)> = fault.iter().map(|f| ("FLOE_FAULT", *f)).collect();
        let window_ms = window.to_string();
        env.push(("FLOE_HTTP_BUFFER_WINDOW_MS", &window_ms));
        let server = Server::launch(&wh, BUFFERED, 100, &env);
        for post in 0..2u64 {
            let id = i as u64 * 10 + post;
            let body = format!("{{\"id\":{id},\"name\":\"{point}\"}}\n");
            let answer = send(&client, &server.records("web.events"), None, &body).await;
            let Some((200, answer)) = answer else {
                panic!("{point}: {answer:?}");
            };
            assert_eq!(answer["buffered"], true, "{point}: {answer}");
            expected.push(id);
        }
        match fault {
            Some(_) => server.crashed(),
            None => server.kill(),
        }
        // Started again: what the buffer and the spool hold is written and
        // committed, once; SIGTERM waits for both.
        let out = Server::start(&wh, BUFFERED).stop();
        assert!(
            out.iter().any(|l| l.contains("buffered")),
            "{point}: {out:?}"
        );
    }
    let table = wh.read("web.events", Some("id"));
    assert_eq!(common::ids(&table), expected, "{table}");
    for dir in ["_floe/commit-queue", "_floe/http-buffer"] {
        assert_eq!(
            std::fs::read_dir(wh.path().join(dir)).unwrap().count(),
            0,
            "{dir}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_that_cannot_commit_never_stops_the_others() {
    let wh = Warehouse::new();
    wh.create_table("web.good", SCHEMA, &[]);
    wh.create_table("web.bad", SCHEMA, &[]);
    // web.bad's ledger directory (beside the table, named by its uuid) is a
    // file: each of its commits fails with a storage error, which a retry
    // may cure.
    let metadata = std::fs::read_dir(wh.path().join("web/bad/metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".metadata.json"))
        .unwrap();
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(metadata).unwrap()).unwrap();
    let uuid = metadata["table-uuid"].as_str().unwrap().replace('-', "");
    let ledger = wh.path().join("web/_floe/ledger").join(&uuid);
    std::fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    std::fs::write(&ledger, "in the way").unwrap();
    let client = reqwest::Client::new();
    let server = Server::start(&wh, CONFIG);
    let (good, bad) = (server.records("web.good"), server.records("web.bad"));

    // Accepted (its request is on disk), then not committed, and said why.
    let (status, answer) = send(&client, &bad, Some("b-0"), "{\"id\":1}")
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    let waited = format!("{bad}?wait=commit");
    let (status, answer) = send(&client, &waited, Some("b-1"), "{\"id\":2}")
        .await
        .unwrap();
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["committed"], false, "{answer}");
    let why = answer["commit_error"].as_str().unwrap_or_default();
    assert!(why.contains(&uuid), "{answer}");

    // The healthy table commits, however often the other fails meanwhile.
    for i in 0..6 {
        let body = format!("{{\"id\":{}}}", 100 + i);
        committed(&client, &good, Some(&format!("g-{i}")), &body).await;
        let body = format!("{{\"id\":{}}}", 3 + i);
        let (status, answer) = send(&client, &bad, Some(&format!("b-{}", 2 + i)), &body)
            .await
            .unwrap();
        assert_eq!(status, 200, "{answer}");
        let why = answer["commit_error"].as_str().unwrap_or_default();
        assert!(why.contains("web.bad are failing"), "{answer}");
    }

    // Stopped: nothing acknowledged is lost (web.bad's requests stay in the
    // spool), so it exits 0 and says what is left.
    let (exit, out) = server.terminate();
    assert!(exit.success(), "{exit}: {out:?}");
    let said = out.join("\n");
    assert!(said.contains("8 accepted request(s) stay queued"), "{said}");
    assert!(said.contains("commits to web.bad are failing"), "{said}");
    let table = wh.read("web.good", Some("id"));
    assert_eq!(
        common::ids(&table),
        (100..106).collect::<Vec<_>>(),
        "{table}"
    );

    // Repaired, the next start commits what was kept, once.
    std::fs::remove_file(&ledger).unwrap();
    let server = Server::start(&wh, CONFIG);
    let bad = server.records("web.bad");
    for i in 0..8 {
        committed(
            &client,
            &bad,
            Some(&format!("b-{i}")),
            &format!("{{\"id\":{}}}", i + 1),
        )
        .await;
    }
    server.stop();
    let table = wh.read("web.bad", Some("id"));
    assert_eq!(common::ids(&table), (1..9).collect::<Vec<_>>(), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_no_retry_can_commit_is_dead_lettered_and_the_wait_says_why() {
    let wh = Warehouse::new();
    wh.create_table("web.lost", SCHEMA, &[]);
    let client = reqwest::Client::new();
    // A long window: the data file can go before the commit runs.
    let server = Server::launch(&wh, CONFIG, 3_000, &[]);
    let url = server.records("web.lost");
    let (status, answer) = send(&client, &url, Some("l-1"), "{\"id\":1}")
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    for f in std::fs::read_dir(wh.path().join("web/lost/data")).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let waited = format!("{url}?wait=commit");
    let (status, answer) = send(&client, &waited, Some("l-1"), "{\"id\":1}")
        .await
        .unwrap();
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["committed"], false, "{answer}");
    let why = answer["commit_error"].as_str().unwrap_or_default();
    assert!(why.contains("dead-lettered"), "{answer}");
    let out = server.stop().join("\n");
    assert!(!out.contains("stay queued"), "{out}");
    let refused = wh.path().join("_floe/dlq/_requests");
    assert_eq!(std::fs::read_dir(refused).unwrap().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_ledger_sealed_and_minutes_passed_finds_its_first_commit() {
    let wh = Warehouse::new();
    // Four entries per ledger segment: a few POSTs seal it.
    wh.create_table(
        "web.events",
        SCHEMA,
        &["--property", "floe.ledger.seal-entries=4"],
    );
    let client = reqwest::Client::new();
    let (one, two) = ("{\"id\":1,\"name\":\"a\"}", "{\"id\":2,\"name\":\"b\"}");

    // k-1 is written and enqueued; the process dies before it saved the
    // answer, and the next start commits it from the spool.
    let server = Server::launch(&wh, CONFIG, 100, &[("FLOE_FAULT", "after_enqueue:crash")]);
    assert!(
        send(&client, &server.records("web.events"), Some("k-1"), one)
            .await
            .is_none()
    );
    server.crashed();
    let server = Server::start(&wh, CONFIG);
    let url = server.records("web.events");
    committed(&client, &url, Some("k-2"), two).await;
    for i in 0..12 {
        let body = format!("{{\"id\":{},\"name\":\"f\"}}", 100 + i);
        committed(&client, &url, Some(&format!("f-{i}")), &body).await;
    }
    // Without a key every POST is new: the same body twice is two rows.
    let same = "{\"id\":50,\"name\":\"same\"}";
    let a = committed(&client, &url, None, same).await;
    let b = committed(&client, &url, None, same).await;
    assert_ne!(a["batch_id"], b["batch_id"]);
    server.stop();

    // 130 s later, past the two minutes of clock skew the ledger allows:
    // k-1 is written again (its answer was never saved) and must be found
    // in the table, k-2 replays its answer and must be found committed.
    let server = Server::launch(&wh, CONFIG, 100, &[("FLOE_CLOCK_SHIFT_MS", "130000")]);
    let url = server.records("web.events");
    committed(&client, &url, Some("k-1"), one).await;
    committed(&client, &url, Some("k-2"), two).await;
    server.stop();

    let table = wh.read("web.events", Some("id"));
    let mut want = vec![1, 2, 50, 50];
    want.extend(100..112);
    assert_eq!(common::ids(&table), want, "{table}");
}

/// `--token` instead of a config, the warning when no token is set at all
/// (every request would be refused), and the EMF lines in the file
/// `--metrics` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_token_from_the_command_line_and_warns_without_one() {
    let wh = Warehouse::new();
    wh.create_table("web.events", SCHEMA, &[]);
    let mut bare = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("FLOE_WAREHOUSE", wh.path())
        .env_remove("FLOE_HTTP_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start floe serve");
    let mut warning = String::new();
    BufReader::new(bare.stderr.take().expect("stderr"))
        .read_line(&mut warning)
        .expect("a line on stderr");
    let _ = bare.kill();
    let _ = bare.wait();
    assert!(
        warning.contains("no token configured") && warning.contains("401"),
        "{warning}"
    );

    let metrics = wh.path().join("metrics.jsonl");
    let metrics_arg = metrics.display().to_string();
    let server = Server::launch_with(
        &wh,
        "",
        100,
        &[],
        &["--token", "cli-token", "--metrics", &metrics_arg],
    );
    let client = reqwest::Client::new();
    let url = format!("{}?wait=commit", server.records("web.events"));
    let body = r#"{"id":1,"name":"a"}"#;
    let (status, _, text) = post(&client, url.clone(), Some("wrong"), None, body).await;
    assert_eq!(status, 403, "{text}");
    let (status, answer, text) = post(&client, url, Some("cli-token"), None, body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(answer["committed"], true, "{text}");
    let out = server.stop();
    assert!(out.iter().all(|l| !l.contains("\"_aws\"")), "{out:?}");
    let emf = std::fs::read_to_string(&metrics).expect("the metrics file");
    let line: Value = serde_json::from_str(emf.lines().next().expect("an EMF line")).unwrap();
    assert_eq!(
        line["_aws"]["CloudWatchMetrics"][0]["Namespace"], "floe",
        "{emf}"
    );
    assert_eq!(
        wh.read("web.events", Some("id"))["rows"],
        json!([{"id": 1, "name": "a"}])
    );
}

/// Idempotency records belong to the table's uuid: after the table is
/// dropped (kept files or purged) and created again under the running
/// server, the same keys and bodies are first uses, written and committed,
/// where they used to replay the old table's 200 and write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_dropped_and_created_again_takes_the_same_keys_anew() {
    let wh = Warehouse::new();
    wh.create_table("web.events", SCHEMA, &[]);
    let server = Server::start(&wh, CONFIG);
    let url = server.records("web.events");
    let client = reqwest::Client::new();
    let body = "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}";
    committed(&client, &url, Some("k-1"), body).await;
    // A retry on the same table replays.
    let again = committed(&client, &url, Some("k-1"), body).await;
    assert_eq!(again["records"], 2, "{again}");
    assert_eq!(common::ids(&wh.read("web.events", Some("id"))), [1, 2]);
    for purge in [false, true] {
        let mut drop = vec!["table", "drop", "web.events"];
        if purge {
            drop.push("--purge");
        }
        wh.floe(&drop);
        wh.create_table("web.events", SCHEMA, &[]);
        let answer = committed(&client, &url, Some("k-1"), body).await;
        assert_eq!(answer["records"], 2, "purge {purge}: {answer}");
        let table = wh.read("web.events", Some("id"));
        assert_eq!(common::ids(&table), [1, 2], "purge {purge}: {table}");
    }
    server.stop();
}

const KEYED: &str = r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

/// The names the keyed table `web.kv` holds, by id.
fn names(wh: &Warehouse) -> Vec<(u64, String)> {
    let table = wh.read("web.kv", Some("id"));
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A keyed change from HTTP that was acknowledged but could not commit
/// (its request held back in the spool) must not overwrite a change of the
/// same key received and committed after it: HTTP requests are ordered by
/// their receipt, and a late one goes through the late check as any
/// source's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_http_change_that_commits_late_never_overwrites_a_newer_one() {
    let wh = Warehouse::new();
    wh.create_table("web.kv", KEYED, &[]);
    let client = reqwest::Client::new();
    // "old" is acknowledged (in the spool), then the process dies before
    // its commit window ends.
    let server = Server::launch(&wh, CONFIG, 60_000, &[]);
    let url = server.records("web.kv");
    let (status, answer) = send(&client, &url, Some("old"), "{\"id\":1,\"name\":\"old\"}")
        .await
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    server.kill();
    // Its request is held back while "new" is received and committed.
    let spool = wh.path().join("_floe/commit-queue");
    let held = wh.path().join("held");
    std::fs::rename(&spool, &held).unwrap();
    let server = Server::start(&wh, CONFIG);
    let url = server.records("web.kv");
    committed(&client, &url, Some("new"), "{\"id\":1,\"name\":\"new\"}").await;
    server.stop();
    assert_eq!(names(&wh), [(1, "new".to_string())]);
    // Then "old" comes back and commits: late, it changes nothing newer.
    std::fs::remove_dir_all(&spool).unwrap();
    std::fs::rename(&held, &spool).unwrap();
    let server = Server::start(&wh, CONFIG);
    let url = server.records("web.kv");
    committed(&client, &url, Some("other"), "{\"id\":2,\"name\":\"x\"}").await;
    server.stop();
    assert_eq!(names(&wh), [(1, "new".to_string()), (2, "x".to_string())]);
}

/// Keyed requests committed together are applied in the order they were
/// received, not by the writer's wall clock: a restart with the clock set
/// back 30 s must not put the newer change first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_http_changes_keep_their_order_across_a_restart_with_the_clock_set_back() {
    let wh = Warehouse::new();
    wh.create_table("web.kv", KEYED, &[]);
    let client = reqwest::Client::new();
    let server = Server::launch(&wh, CONFIG, 60_000, &[]);
    let (status, answer) = send(
        &client,
        &server.records("web.kv"),
        Some("old"),
        "{\"id\":1,\"name\":\"old\"}",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    server.kill();
    // Both requests wait in the spool and commit together on the stop.
    let server = Server::launch(&wh, CONFIG, 60_000, &[("FLOE_CLOCK_SHIFT_MS", "-30000")]);
    let (status, answer) = send(
        &client,
        &server.records("web.kv"),
        Some("new"),
        "{\"id\":1,\"name\":\"new\"}",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    server.stop();
    assert_eq!(names(&wh), [(1, "new".to_string())]);
}

/// A standard Debezium 2.7 event.
fn debezium(op: &str, lsn: u64, before: Value, after: Value) -> String {
    json!({
        "before": before,
        "after": after,
        "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "pg",
                   "ts_ms": 1_767_225_600_000u64 + lsn, "snapshot": "false", "db": "app",
                   "sequence": "[null,\"1\"]", "schema": "public", "table": "kv",
                   "txId": 700 + lsn, "lsn": lsn, "xmin": null},
        "op": op,
        "ts_ms": 1_767_225_600_100u64 + lsn,
        "transaction": null
    })
    .to_string()
}

/// Debezium envelopes over HTTP to a keyed table are changes, as through
/// `floe ingest`: the new-columns guard counts the columns of the rows they
/// carry (`balance`), not the envelope's fields (`after`, `source.*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_envelopes_over_http_change_a_keyed_table() {
    let wh = Warehouse::new();
    wh.create_table("web.kv", KEYED, &[]);
    let server = Server::start(&wh, "[http]\ntoken = \"t\"\nmax_new_columns = 2\n");
    let url = server.records("web.kv");
    let client = reqwest::Client::new();
    let row = |id: u64, name: &str| json!({"id": id, "name": name, "balance": "10.50"});
    let body = [
        debezium("c", 10, Value::Null, row(1, "a")),
        debezium("c", 11, Value::Null, row(2, "b")),
        debezium("u", 12, row(1, "a"), row(1, "a2")),
        debezium("d", 13, row(2, "b"), Value::Null),
    ]
    .join("\n");
    committed(&client, &url, Some("dbz-1"), &body).await;
    // The guard still holds for the rows: three new columns are too many.
    let wide = debezium(
        "c",
        14,
        Value::Null,
        json!({"id": 3, "name": "c", "x1": 1, "x2": 2, "x3": 3}),
    );
    let (status, answer) = send(&client, &url, None, &wide).await.unwrap();
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["new_columns"], json!(["x1", "x2", "x3"]), "{answer}");
    server.stop();
    let table = wh.read("web.kv", Some("id"));
    assert_eq!(
        table["rows"],
        json!([{"id": 1, "name": "a2", "balance": "10.50"}]),
        "{table}"
    );
}

//! `floe local` end to end, as a user runs it: one command on moto, records
//! POSTed over HTTP and sent to the source queue, both tables read back by
//! pyiceberg, `floe status` on the stack's config, and a commit request for
//! a table that does not exist dead-lettered by the committer with its
//! reason and acknowledged (not failed run after run until SQS redrives it),
//! while good requests beside it commit.
//! The same scenario runs with S3 on s3s-fs (SQS and Glue on moto), so the
//! S3 path is not moto's alone. A Kafka topic on a Kafka-compatible broker
//! (local-dev/kafka.sh) feeds the writer as MSK does, through a restart;
//! POSTs without a key go through the HTTP buffer stream, also through a
//! restart, and keyed ones are written at once.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use floe_core::aws::{AwsClients, AwsSettings};
use floe_test_support::services;
use serde_json::{Value, json};

struct Stack {
    child: Child,
    http: String,
    /// The stack's state directory (its floe.toml).
    state: std::path::PathBuf,
    /// Where S3 is (moto's endpoint, or s3s-fs's).
    s3: String,
    /// The endpoint variables every `floe` run on the stack needs.
    env: Vec<(&'static str, String)>,
}

impl Stack {
    /// Starts `floe local` with `routing.table = source_table`, keeping
    /// its state under `dir`; S3 on `s3` when given (through
    /// `AWS_ENDPOINT_URL_S3`), else all on moto; the topic on `kafka`'s
    /// broker when given; `args` after the stack's own.
    fn start(
        name: &str,
        source_table: &str,
        s3: Option<&str>,
        kafka: Option<&str>,
        dir: &std::path::Path,
        args: &[&str],
    ) -> Stack {
        let moto = services::moto();
        let config = dir.join("user.toml");
        std::fs::write(&config, format!("[routing]\ntable = \"{source_table}\"\n")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_floe"));
        cmd.arg("--config")
            .arg(&config)
            .args(["local", "--name", name, "--http", "127.0.0.1:0"])
            .arg("--state-dir")
            .arg(dir.join("stack"))
            .args(["--batching-window-ms", "300", "--visibility-timeout-s", "1"])
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_FAULT")
            .env_remove("FLOE_LOCAL_KAFKA")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdout(Stdio::piped());
        let env = match s3 {
            Some(s3) => vec![
                ("AWS_ENDPOINT_URL", moto.to_string()),
                ("AWS_ENDPOINT_URL_S3", s3.to_string()),
            ],
            None => {
                cmd.args(["--endpoint", moto]);
                Vec::new()
            }
        };
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(kafka) = kafka {
            cmd.args(["--kafka", kafka]);
        }
        cmd.args(args);
        let mut child = cmd.spawn().expect("start floe local");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a first line").unwrap();
        let http = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_string();
        std::thread::spawn(move || lines.for_each(drop));
        Stack {
            child,
            http,
            state: dir.join("stack"),
            s3: s3.unwrap_or(moto).to_string(),
            env,
        }
    }

    /// `floe --config <the stack's floe.toml> ARGS`.
    fn floe(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_floe"))
            .arg("--config")
            .arg(self.config())
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("FLOE_WAREHOUSE")
            .output()
            .unwrap()
    }

    fn config(&self) -> std::path::PathBuf {
        self.state.join("floe.toml")
    }

    /// `floe --config <the stack's floe.toml> ARGS --json`.
    /// Waits until `table` holds `records` records.
    fn await_records(&self, table: &str, records: u64, what: &str) {
        eventually(what, || {
            let out = self.floe(&["table", "show", table, "--json"]);
            out.status.success()
                && serde_json::from_slice::<Value>(&out.stdout)
                    .is_ok_and(|v| v["records"] == records)
        });
    }

    fn floe_json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.floe(&args);
        assert!(
            out.status.success(),
            "floe {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The table's rows as pyiceberg reads them from its metadata file.
    fn pyiceberg_ids(&self, table: &str) -> Vec<i64> {
        let shown = self.floe_json(&["table", "show", table]);
        let v = services::python_json(
            "shared/tests/read_s3.py",
            &[&self.s3, shown["metadata_location"].as_str().unwrap()],
        );
        v["pyiceberg"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    }

    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "floe local exited with {exit}");
    }
}

/// A failed assertion must not leave the stack running beside later tests.
impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a Python script in the test venv: boto3 or kafka-python calls, as
/// a producer would send records.
fn run_python(script: &str) {
    let out = std::process::Command::new(services::python())
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits up to a minute for `ok`.
fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

async fn scenario(s3: Option<&str>) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("fl-{}", &id[..20]);
    let (http_table, source_table) = (format!("local.http_{id}"), format!("local.src_{id}"));
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::start(&name, &source_table, s3, None, dir.path(), &[]);
    let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
    let queue_url = |suffix: &str| {
        let sqs = clients.sqs.clone();
        let queue = format!("{name}-{suffix}");
        async move {
            sqs.get_queue_url()
                .queue_name(queue)
                .send()
                .await
                .unwrap()
                .queue_url()
                .unwrap()
                .to_string()
        }
    };

    // A request for a table that does not exist can never commit: the
    // committer dead-letters it with the reason instead of failing it until
    // SQS redrives it without one.
    let poison = json!({
        "version": 2,
        "table": {"namespace": ["local"], "name": format!("missing_{id}")},
        "batch_id": format!("poison{id}"),
        "sources": [],
        "schema_id": 0,
        "spec_id": 0,
        "data_files": [],
        "delete_files": [],
        "keyed": false,
        "record_count": 0,
        "rejected_count": 0,
        "created_at_ms": 1_700_000_000_000i64,
    });
    clients
        .sqs
        .send_message()
        .queue_url(queue_url("commits").await)
        .message_body(poison.to_string())
        .send()
        .await
        .unwrap();

    // HTTP: the table is created (routing.allow = local.* in the stack) and
    // the answer comes once it is committed.
    let client = reqwest::Client::new();
    let resp = client
        .post(format!(
            "{}/v1/tables/local/http_{id}/records?wait=commit",
            stack.http
        ))
        .bearer_auth("local")
        .header("Idempotency-Key", "first")
        .body("{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n{\"id\":3,\"name\":\"c\"}\n")
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["committed"], true, "{body}");

    // Signed with SigV4 by the stack's credentials, as a Function URL with
    // AWS_IAM auth takes it (curl's own signer); other keys are refused.
    let signed = |user: &str| {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--aws-sigv4",
                "aws:amz:us-east-1:lambda",
                "--user",
                user,
            ])
            .args(["-H", "content-type: application/x-ndjson"])
            .args(["--data-binary", "{\"id\":4,\"name\":\"d\"}"])
            .arg(format!(
                "{}/v1/tables/local/http_{id}/records?wait=commit",
                stack.http
            ))
            .output()
            .expect("run curl");
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    let answer = signed("testing:testing");
    assert_eq!(answer["committed"], true, "{answer}");
    let answer = signed("testing:other-secret");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("signature does not match")),
        "{answer}"
    );

    // The source queue feeds the writer function.
    let source = queue_url("source").await;
    for i in 10..14 {
        clients
            .sqs
            .send_message()
            .queue_url(&source)
            .message_body(json!({"id": i, "name": format!("s{i}")}).to_string())
            .send()
            .await
            .unwrap();
    }
    stack.await_records(
        &source_table,
        4,
        "the source queue's records in their table",
    );
    assert_eq!(stack.pyiceberg_ids(&http_table), vec![1, 2, 3, 4]);
    assert_eq!(stack.pyiceberg_ids(&source_table), vec![10, 11, 12, 13]);

    // On moto, an object put under incoming/ is announced to the source
    // queue by the bucket's notification, and its records reach the table
    // once, however often it is announced.
    if s3.is_none() {
        let body = "{\"id\":20,\"name\":\"o\"}\n{\"id\":21,\"name\":\"p\"}\n";
        for _ in 0..2 {
            clients
                .s3
                .put_object()
                .bucket(&name)
                .key("incoming/part-1.ndjson")
                .body(body.as_bytes().to_vec().into())
                .send()
                .await
                .unwrap();
        }
        stack.await_records(
            &source_table,
            6,
            "the uploaded object's records in their table",
        );
        assert_eq!(
            stack.pyiceberg_ids(&source_table),
            vec![10, 11, 12, 13, 20, 21]
        );

        // boto3, as a producer would, puts records to the stack's stream;
        // each shard's mapping invokes the writer with Lambda's Kinesis event.
        let script = format!(
            "import boto3, json\n\
             k = boto3.client('kinesis', endpoint_url='{}', region_name='us-east-1',\n\
                 aws_access_key_id='testing', aws_secret_access_key='testing')\n\
             k.put_records(StreamName='{name}-stream', Records=[\n\
                 {{'Data': json.dumps({{'id': i, 'name': 'k%d' % i}}).encode(), 'PartitionKey': str(i)}}\n\
                 for i in range(30, 40)])\n",
            services::moto()
        );
        run_python(&script);
        stack.await_records(&source_table, 16, "the stream's records in their table");
        let ids = stack.pyiceberg_ids(&source_table);
        assert_eq!(ids[6..], (30..40).collect::<Vec<_>>(), "{ids:?}");

        // A DynamoDB table's stream: each new image is a row of the
        // append-only table (a MODIFY too); a REMOVE is skipped.
        let script = format!(
            "import boto3\n\
             d = boto3.client('dynamodb', endpoint_url='{}', region_name='us-east-1',\n\
                 aws_access_key_id='testing', aws_secret_access_key='testing')\n\
             t = '{name}-items'\n\
             d.put_item(TableName=t, Item={{'id': {{'N': '50'}}, 'name': {{'S': 'd50'}}}})\n\
             d.put_item(TableName=t, Item={{'id': {{'N': '51'}}, 'name': {{'S': 'd51'}}}})\n\
             d.put_item(TableName=t, Item={{'id': {{'N': '50'}}, 'name': {{'S': 'd50b'}}}})\n\
             d.delete_item(TableName=t, Key={{'id': {{'N': '51'}}}})\n",
            services::moto()
        );
        run_python(&script);
        stack.await_records(
            &source_table,
            19,
            "the DynamoDB stream's items in their table",
        );
        let ids = stack.pyiceberg_ids(&source_table);
        assert_eq!(ids[16..], [50, 50, 51], "{ids:?}");
    }

    let config = floe_core::config::Config::load(Some(&stack.config())).unwrap();
    let floe_core::config::Location::Uri(dlq) = config.dead_letter_location() else {
        panic!("the stack's dead letters are on S3");
    };
    let (bucket, prefix) = dlq.trim_start_matches("s3://").split_once('/').unwrap();
    let key = format!("{prefix}/_requests/local.missing_{id}/poison{id}.json");
    let storage = AwsClients::new(AwsSettings::local(&stack.s3, "us-east-1")).await;
    let mut letter = None;
    for _ in 0..120 {
        if let Ok(o) = storage
            .s3
            .get_object()
            .bucket(bucket)
            .key(&key)
            .send()
            .await
        {
            letter = Some(o.body.collect().await.unwrap().to_vec());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let letter: Value =
        serde_json::from_slice(&letter.expect("the poison request dead-lettered")).unwrap();
    assert!(
        letter["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{letter}"
    );
    let s = stack.floe_json(&["status", "--table", &http_table]);
    assert_eq!(s["queue"]["visible"], 0, "{s}");
    assert_eq!(
        s["queue"]["dead_letter_queue"]["visible"], 0,
        "not redriven: {s}"
    );
    assert_eq!(s["tables"][0]["total_records"], 4, "{s}");
    stack.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_local_on_moto() {
    scenario(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_local_with_s3_on_s3s_fs() {
    let s3 = services::s3s();
    scenario(Some(s3)).await;
}

/// Produces `ids` to `topic` with kafka-python, as an application would:
/// JSON values keyed by id with a header (not ASCII: Lambda's event carries
/// it as signed bytes), even ids to partition 0 and odd to 1, batches
/// compressed with `compression` (kafka-python's name, `None` for none);
/// `extra` more values to partition 0 after them.
fn produce(kafka: &str, topic: &str, ids: std::ops::Range<i64>, compression: &str, extra: &[&str]) {
    let script = format!(
        "import json\n\
         from kafka import KafkaProducer\n\
         p = KafkaProducer(bootstrap_servers='{kafka}', compression_type={compression})\n\
         for i in range({}, {}):\n\
         \x20   p.send('{topic}', key=str(i).encode(), partition=i % 2,\n\
         \x20          headers=[('origin', 'café'.encode())],\n\
         \x20          value=json.dumps({{'id': i, 'name': 'm%d' % i}}).encode())\n\
         for v in {extra:?}:\n\
         \x20   p.send('{topic}', key=b'extra', partition=0, value=v.encode())\n\
         p.flush()\n",
        ids.start, ids.end
    );
    run_python(&script);
}

/// MSK's event source mapping on the stack, with a real producer: records
/// reach the table once; a value that is not JSON is dead-lettered with its
/// partition and offset, the rest of its batch committed; after a restart
/// the mapping reads the topic from its start again (as a new consumer
/// group would), and the ledger drops every record committed before, so
/// only the new ones add rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_local_reads_a_kafka_topic_as_msk_does() {
    let kafka = services::kafka();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("fk-{}", &id[..20]);
    let (table, topic) = (format!("local.kafka_{id}"), format!("{name}-topic"));
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::start(&name, &table, None, Some(kafka), dir.path(), &[]);
    produce(kafka, &topic, 0..20, "None", &["not json"]);
    stack.await_records(&table, 20, "the topic's records in their table");
    let mut ids = stack.pyiceberg_ids(&table);
    ids.sort();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    let out = stack.floe(&["dlq", "export", "--table", &table]);
    let letters: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0]["source"], format!("kafka:{topic}/0"));
    // Partition 0 held the 10 even ids at offsets 0..10 before it.
    assert_eq!(letters[0]["position"], "10");
    assert_eq!(letters[0]["record"], "not json");
    stack.stop();

    let stack = Stack::start(&name, &table, None, Some(kafka), dir.path(), &[]);
    produce(kafka, &topic, 20..26, "'gzip'", &[]);
    stack.await_records(&table, 26, "the records produced after the restart");
    // Partition 0's new records follow its old ones, so once they are in,
    // every old one was read again and recognised.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut ids = stack.pyiceberg_ids(&table);
    ids.sort();
    assert_eq!(ids, (0..26).collect::<Vec<_>>());
    stack.stop();
}

/// POSTs `body` to `table` (`ns.name`) on the stack's HTTP function, with
/// `key` as its Idempotency-Key; its 200's answer.
async fn post(stack: &Stack, table: &str, body: &str, key: Option<&str>) -> Value {
    let (ns, name) = table.split_once('.').unwrap();
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/tables/{ns}/{name}/records", stack.http))
        .bearer_auth("local")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The stack's HTTP function appends a POST without a key to the buffer
/// stream (`NAME-http-buffer`) and the writer writes a window of them: the
/// records land once, also when a window holds more than one Lambda event
/// takes, and once only after a restarted stack has read the stream from
/// its start again. A POST with an Idempotency-Key is written at once, as
/// without the buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floe_local_buffers_posts_without_a_key() {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("fb-{}", &id[..20]);
    let (table, wide) = (format!("local.buf_{id}"), format!("local.wide_{id}"));
    let dir = tempfile::tempdir().unwrap();
    let window = ["--http-buffer-window-ms", "3000"];
    let stack = Stack::start(&name, "local.events", None, None, dir.path(), &window);
    for body in ["{\"id\":1}\n{\"id\":2}\n", "{\"id\":3}\n{\"id\":4}\n"] {
        let answer = post(&stack, &table, body, None).await;
        assert_eq!(answer["buffered"], true, "{answer}");
        assert_eq!(answer["records"], 2, "{answer}");
    }
    stack.await_records(&table, 4, "the buffered POSTs' records in their table");
    let answer = post(&stack, &table, "{\"id\":5}", Some("direct-1")).await;
    assert!(answer.get("buffered").is_none(), "{answer}");
    assert!(answer["batch_id"].is_string(), "{answer}");
    stack.await_records(&table, 5, "the keyed POST's record in its table");
    let mut ids = stack.pyiceberg_ids(&table);
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4, 5]);

    // Thirty-two POSTs of 200 KB (a buffered POST is at most 256 KiB) are
    // more than Lambda's 6 MB event once in base64: the mapping hands them
    // to the writer in two events, the second from the first record the
    // first one left.
    let pad = "x".repeat(180);
    for p in 0..32 {
        let body: String = (p * 1_000..(p + 1) * 1_000)
            .map(|i| format!("{{\"id\":{i},\"pad\":\"{pad}\"}}\n"))
            .collect();
        let answer = post(&stack, &wide, &body, None).await;
        assert_eq!(answer["buffered"], true, "{answer}");
    }
    stack.await_records(&wide, 32_000, "the large POSTs' records in their table");
    let shown = stack.floe_json(&["table", "show", &wide]);
    assert!(shown["data_files"].as_u64() >= Some(2), "{shown}");
    stack.stop();

    let stack = Stack::start(&name, "local.events", None, None, dir.path(), &window);
    let answer = post(&stack, &table, "{\"id\":6}", None).await;
    assert_eq!(answer["buffered"], true, "{answer}");
    stack.await_records(&table, 6, "the POST buffered after the restart");
    // The new POST follows the old ones in the stream's one shard, so once
    // it is in, every old one was read again and recognised.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut ids = stack.pyiceberg_ids(&table);
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    let mut ids = stack.pyiceberg_ids(&wide);
    ids.sort();
    assert_eq!(ids, (0..32_000).collect::<Vec<_>>());
    stack.stop();
}

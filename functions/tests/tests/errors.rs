//! Which failures come back and which are dead-lettered: an error no retry
//! can cure (a table definition floe cannot create, a table that is gone)
//! is dead-lettered once with its reason and acknowledged, so it never
//! blocks the shard or queue behind it; a storage outage is handed back and
//! lands once when storage returns. Through the writer and committer
//! functions' handlers on an embedded deployment (SQLite catalog, local
//! warehouse, in-process queue), as Lambda would call them.

mod moto;

use std::path::Path;
use std::time::Duration;

use arrow_array::{Array, Int64Array};
use aws_lambda_events::event::sqs::SqsEvent;
use floe_committer::CommitterFunction;
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_core::request::CommitRequest;
use floe_test_support::scan;
use floe_writer::WriterFunction;
use moto::{failures, writer_event};
use serde_json::{Value, json};

async fn deployment(dir: &Path) -> Deployment {
    let text = format!(
        r#"
[warehouse]
path = "{wh}"
[routing]
mode = "field"
field = "kind"
template = "raw.{{value}}"
create = true
[tables."raw.bad"]
partition = ["day(name)"]
"#,
        wh = dir.display()
    );
    let config = Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap();
    Deployment::from_config(config, Faults::none(), Role::Writer)
        .await
        .unwrap()
}

/// An SQS event of one message per record, `{tag}-{i}` (SQS message ids
/// are unique, and the ledger takes them as the records' identity).
fn sqs_event(tag: &str, records: &[Value]) -> floe_writer::WriterEvent {
    let messages: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "messageId": format!("{tag}-{i}"),
                "receiptHandle": format!("r-{tag}-{i}"),
                "body": r.to_string(),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    writer_event(json!({ "Records": messages }))
}

/// An SQS event of these deliveries, as Lambda hands the committer them.
fn commit_event(deliveries: &[floe_core::queue::Delivery]) -> SqsEvent {
    let records: Vec<Value> = deliveries
        .iter()
        .map(|d| {
            json!({
                "messageId": d.receipt,
                "receiptHandle": d.receipt,
                "body": String::from_utf8_lossy(&d.body),
                "attributes": {"ApproximateReceiveCount": d.receive_count.to_string()},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-commits",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    moto::commit_event(json!({ "Records": records }))
}

/// The committer function's handler on what the queue holds, as Lambda's
/// SQS event source runs it: the messages it names come back, the others
/// are deleted. Returns (deleted, named).
async fn commit(d: &Deployment) -> (usize, usize) {
    let deliveries = d
        .queue
        .receive(100, Duration::from_millis(10))
        .await
        .unwrap();
    let answer = CommitterFunction::new(d)
        .unwrap()
        .handle(commit_event(&deliveries), None)
        .await;
    let named = failures(&answer);
    let (back, done): (Vec<String>, Vec<String>) = deliveries
        .into_iter()
        .map(|d| d.receipt)
        .partition(|r| named.contains(r));
    d.queue.ack(&done).await.unwrap();
    d.queue.release(&back).await.unwrap();
    (done.len(), back.len())
}

async fn ids(d: &Deployment, table: &str) -> Vec<i64> {
    let ident = parse_table(table).unwrap();
    let mut out: Vec<i64> = scan(d.catalog.as_ref(), &ident)
        .await
        .iter()
        .flat_map(|b| {
            let col = b.column_by_name("id").unwrap();
            let ids = col.as_any().downcast_ref::<Int64Array>().unwrap();
            (0..ids.len()).map(|i| ids.value(i)).collect::<Vec<_>>()
        })
        .collect();
    out.sort_unstable();
    out
}

/// Every dead letter under the warehouse's dead-letter prefix.
fn dead_letters(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("_floe/dlq")];
    while let Some(p) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in entries.map(Result::unwrap) {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let text = std::fs::read_to_string(e.path()).unwrap();
                out.extend(
                    text.lines()
                        .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                );
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_floe_cannot_create_is_dead_lettered_once_and_the_other_tables_land() {
    let dir = tempfile::tempdir().unwrap();
    let d = deployment(dir.path()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let event = sqs_event(
        "m",
        &[
            json!({"kind": "good", "id": 1, "name": "ada"}),
            json!({"kind": "bad", "id": 2, "name": "grace"}),
            json!({"kind": "good", "id": 3, "name": "edsger"}),
            json!({"kind": "bad", "id": 4, "name": "barbara"}),
        ],
    );
    // Twice, as Lambda redelivers: neither time is anything named for
    // redelivery, and the dead letters are written once.
    for _ in 0..2 {
        let answer = writer.handle(event.clone()).await.unwrap();
        assert_eq!(failures(&answer), Vec::<String>::new(), "{answer:?}");
    }
    assert_eq!(commit(&d).await, (2, 0));
    assert_eq!(ids(&d, "raw.good").await, vec![1, 3]);
    assert!(
        d.catalog
            .load_table(&parse_table("raw.bad").unwrap())
            .await
            .is_err(),
        "the table that cannot be created is not"
    );
    let letters = dead_letters(dir.path());
    let mut bad: Vec<(String, String)> = letters
        .iter()
        .map(|l| {
            (
                l["table"].as_str().unwrap().to_string(),
                l["record"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    bad.sort();
    assert_eq!(
        bad,
        vec![
            (
                "raw.bad".to_string(),
                json!({"kind": "bad", "id": 2, "name": "grace"}).to_string()
            ),
            (
                "raw.bad".to_string(),
                json!({"kind": "bad", "id": 4, "name": "barbara"}).to_string()
            ),
        ]
    );
    // The reason iceberg-rust gives for the partition field, with the table.
    let reason = letters[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("raw.bad") && reason.contains("'string' for transform"),
        "{reason}"
    );
    assert!(
        letters
            .iter()
            .all(|l| !l["position"].as_str().unwrap().is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_outage_is_handed_back_to_both_functions_and_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = deployment(dir.path()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let first = sqs_event("a", &[json!({"kind": "good", "id": 1})]);
    assert!(failures(&writer.handle(first).await.unwrap()).is_empty());
    assert_eq!(commit(&d).await, (1, 0));

    // The writer cannot write data files: every message comes back.
    let data = dir.path().join("raw/good/data");
    let moved = dir.path().join("data-away");
    std::fs::rename(&data, &moved).unwrap();
    std::fs::write(&data, b"not a directory").unwrap();
    let event = sqs_event(
        "b",
        &[
            json!({"kind": "good", "id": 2}),
            json!({"kind": "good", "id": 3}),
        ],
    );
    let answer = writer.handle(event.clone()).await.unwrap();
    assert_eq!(failures(&answer), vec!["b-0", "b-1"], "{answer:?}");
    std::fs::remove_file(&data).unwrap();
    std::fs::rename(&moved, &data).unwrap();
    assert!(failures(&writer.handle(event.clone()).await.unwrap()).is_empty());

    // The committer cannot write manifests: its messages go back.
    let metadata = dir.path().join("raw/good/metadata");
    let moved = dir.path().join("metadata-away");
    std::fs::rename(&metadata, &moved).unwrap();
    std::fs::write(&metadata, b"not a directory").unwrap();
    assert_eq!(commit(&d).await, (0, 1));
    std::fs::remove_file(&metadata).unwrap();
    std::fs::rename(&moved, &metadata).unwrap();
    assert_eq!(commit(&d).await, (1, 0));
    // A late duplicate of the event changes nothing.
    assert!(failures(&writer.handle(event).await.unwrap()).is_empty());
    commit(&d).await;
    assert_eq!(ids(&d, "raw.good").await, vec![1, 2, 3]);
    assert!(dead_letters(dir.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_table_that_is_gone_is_dead_lettered_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = deployment(dir.path()).await;
    let writer = WriterFunction::new(&d).unwrap();
    let event = sqs_event("m", &[json!({"kind": "good", "id": 1})]);
    assert!(failures(&writer.handle(event).await.unwrap()).is_empty());
    // The request as it would be if its table were dropped meanwhile.
    let mut deliveries = d
        .queue
        .receive(10, Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    let mut request = CommitRequest::from_bytes(&deliveries[0].body).unwrap();
    request.table = parse_table("raw.gone").unwrap();
    deliveries[0].body = request.to_bytes().unwrap().into();
    let answer = CommitterFunction::new(&d)
        .unwrap()
        .handle(commit_event(&deliveries), None)
        .await;
    assert_eq!(
        failures(&answer),
        Vec::<String>::new(),
        "not handed back: {answer:?}"
    );
    let letters = dead_letters(dir.path());
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0]["id"], request.batch_id.as_str());
    assert!(
        letters[0]["reason"]
            .as_str()
            .unwrap()
            .contains("table raw.gone does not exist"),
        "{letters:?}"
    );
}

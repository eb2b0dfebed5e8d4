//! The committer function's handler as Lambda's SQS event source calls it,
//! on an embedded deployment (SQLite catalog, local warehouse, in-process
//! queue) with a `lambda_runtime::Context` and no AWS: the requests the
//! writer step enqueued land once, a redelivery adds nothing, and a body
//! that is no request is dead-lettered rather than handed back forever.

use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow_array::{Array, Int64Array};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use bytes::Bytes;
use floe_committer::{CommitterFunction, deadline_of};
use floe_core::clock::now_ms;
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::dlq::RefusedRequest;
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_core::source::{Positions, SourceSpan};
use floe_core::source::{Records, Source, SourceBatch, SourceKind};
use floe_test_support::scan;

const TABLE: &str = "raw.events";

async fn deployment(dir: &Path) -> Deployment {
    let text = format!(
        r#"
[warehouse]
path = "{wh}"
[routing]
table = "{TABLE}"
create = true
"#,
        wh = dir.display()
    );
    let config = Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap();
    Deployment::from_config(config, Faults::none(), Role::Committer)
        .await
        .unwrap()
}

/// Writes `ids` through floe's writer step as one SQS-sourced batch and
/// returns the commit request it enqueued.
async fn write(d: &Deployment, tag: &str, ids: &[i64]) -> Bytes {
    let items: Vec<(String, Bytes)> = ids
        .iter()
        .map(|id| {
            let record = format!(r#"{{"id":{id},"name":"n{id}"}}"#);
            (format!("{tag}-{id}"), Bytes::from(record))
        })
        .collect();
    let spans = vec![SourceSpan {
        source: "sqs:ingest".into(),
        positions: Positions::Ids {
            ids: items.iter().map(|(id, _)| id.clone()).collect(),
        },
        stream: false,
    }];
    let report = d
        .writer()
        .unwrap()
        .write(SourceBatch::new(
            Source::new(SourceKind::Sqs, "ingest"),
            spans,
            Records::Items(items),
        ))
        .await
        .unwrap();
    assert_eq!(report.records, ids.len() as u64);
    let mut queued = d
        .queue
        .receive(10, Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(queued.len(), 1, "one commit request per batch");
    let request = queued.remove(0);
    d.queue.ack(&[request.receipt]).await.unwrap();
    request.body
}

/// The SQS event Lambda hands the committer: `(message id, body)`.
fn event(messages: &[(&str, &[u8])]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (id, body) in messages {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.to_string());
        m.receipt_handle = Some(format!("rh-{id}"));
        m.body = Some(String::from_utf8(body.to_vec()).unwrap());
        m.attributes
            .insert("ApproximateReceiveCount".into(), "1".into());
        m.event_source = Some("aws:sqs".into());
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:floe-commits".into());
        event.records.push(m);
    }
    event
}

/// The invocation's context as Lambda's runtime makes it, a minute to go.
fn context() -> lambda_runtime::Context {
    let mut context = lambda_runtime::Context::default();
    context.request_id = "test-invocation".into();
    context.deadline = u64::try_from(now_ms() + 60_000).unwrap();
    context
}

async fn handle(function: &CommitterFunction, event: SqsEvent) -> Vec<String> {
    function
        .handle(event, deadline_of(&context()))
        .await
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier)
        .collect()
}

/// The table's current snapshot: its id, and its summary's added and
/// total records.
async fn snapshot(d: &Deployment) -> (i64, u64, u64) {
    let loaded = d
        .catalog
        .load_table(&parse_table(TABLE).unwrap())
        .await
        .unwrap();
    let snapshot = loaded.metadata.current_snapshot().unwrap();
    let summary = &snapshot.summary().additional_properties;
    let count = |key: &str| summary[key].parse::<u64>().unwrap();
    (
        snapshot.snapshot_id(),
        count("added-records"),
        count("total-records"),
    )
}

/// The ids the table holds, read by a scan.
async fn ids(d: &Deployment) -> Vec<i64> {
    let ident = parse_table(TABLE).unwrap();
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

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in entries.map(Result::unwrap) {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_land_once_and_a_body_that_is_no_request_is_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let d = deployment(dir.path()).await;
    let function = CommitterFunction::new(&d).unwrap();
    let first = write(&d, "a", &[1, 2, 3]).await;
    let second = write(&d, "b", &[4, 5]).await;

    // Both requests land in one snapshot, and no message is handed back.
    let failed = handle(&function, event(&[("m-0", &first), ("m-1", &second)])).await;
    assert_eq!(failed, Vec::<String>::new());
    let (committed, added, total) = snapshot(&d).await;
    assert_eq!((added, total), (5, 5));
    assert_eq!(ids(&d).await, vec![1, 2, 3, 4, 5]);

    // SQS delivers at least once: the same bodies under other message ids
    // are found in the table by its ledger, acknowledged, and add nothing.
    let failed = handle(&function, event(&[("m-2", &first), ("m-3", &second)])).await;
    assert_eq!(failed, Vec::<String>::new());
    assert_eq!(snapshot(&d).await, (committed, 5, 5));
    assert_eq!(ids(&d).await, vec![1, 2, 3, 4, 5]);

    // No retry can read a body that is not a request: it is dead-lettered
    // with why and acknowledged, not named, while the request beside it lands.
    let third = write(&d, "c", &[6]).await;
    let failed = handle(
        &function,
        event(&[("m-4", b"not a commit request"), ("m-5", &third)]),
    )
    .await;
    assert_eq!(failed, Vec::<String>::new());
    let (_, added, total) = snapshot(&d).await;
    assert_eq!((added, total), (1, 6));
    assert_eq!(ids(&d).await, vec![1, 2, 3, 4, 5, 6]);
    let letters: Vec<RefusedRequest> = files(&dir.path().join("_floe/dlq/_requests"))
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].body, "not a commit request");
    assert_eq!(letters[0].table, "");
    assert!(!letters[0].reason.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_storage_cannot_take_names_its_messages_for_redelivery() {
    let dir = tempfile::tempdir().unwrap();
    let d = deployment(dir.path()).await;
    let function = CommitterFunction::new(&d).unwrap();
    let first = write(&d, "a", &[1]).await;
    assert!(
        handle(&function, event(&[("m-0", &first)]))
            .await
            .is_empty()
    );
    let (committed, _, _) = snapshot(&d).await;

    // Manifests cannot be written: a transient failure, so the message comes back.
    let second = write(&d, "b", &[2, 3]).await;
    let metadata = dir.path().join("raw/events/metadata");
    let moved = dir.path().join("metadata-away");
    std::fs::rename(&metadata, &moved).unwrap();
    std::fs::write(&metadata, b"not a directory").unwrap();
    let failed = handle(&function, event(&[("m-1", &second)])).await;
    assert_eq!(failed, vec!["m-1".to_string()]);
    std::fs::remove_file(&metadata).unwrap();
    std::fs::rename(&moved, &metadata).unwrap();
    assert_eq!(snapshot(&d).await, (committed, 1, 1));

    // Redelivered, it lands.
    assert!(
        handle(&function, event(&[("m-1", &second)]))
            .await
            .is_empty()
    );
    let (_, added, total) = snapshot(&d).await;
    assert_eq!((added, total), (2, 3));
    assert_eq!(ids(&d).await, vec![1, 2, 3]);
}

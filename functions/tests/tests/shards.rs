//! A deployment with two commit queue shards on moto's SQS, S3 and Glue, as
//! the Terraform module sets it up: the writer function (FLOE_QUEUE_URLS,
//! no FLOE_QUEUE_URL) routes an SQS event's records to eight tables and
//! sends each table's requests to its shard's queue; one committer function
//! per shard (FLOE_QUEUE_URL its own) commits what its queue holds. Every row
//! lands once although the event is delivered twice, and each queue holds
//! only its own tables' requests.

mod moto;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use arrow_array::Int64Array;
use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::ident::{display, parse_table};
use floe_core::queue::shard_of;
use floe_core::request::CommitRequest;
use floe_test_support::{scan, services};
use floe_writer::WriterFunction;
use moto::{commit_event, failures, unique, writer_event};
use serde_json::{Value, json};

const TABLES: u64 = 8;
const RECORDS: u64 = 40;

/// The deployment's config; `own` is the shard a committer reads.
fn config(bucket: &str, ns: &str, urls: &[String], own: Option<&str>) -> Config {
    let own = own.map(|u| format!("url = \"{u}\"\n")).unwrap_or_default();
    let text = format!(
        r#"
[warehouse]
uri = "s3://{bucket}/warehouse"
[aws]
region = "us-east-1"
endpoint = "{endpoint}"
[catalog]
type = "glue"
[queue]
urls = [{urls}]
{own}
[routing]
mode = "field"
field = "t"
template = "{ns}.t_{{value}}"
allow = ["{ns}.*"]
"#,
        endpoint = services::moto(),
        urls = urls
            .iter()
            .map(|u| format!("\"{u}\""))
            .collect::<Vec<_>>()
            .join(", "),
    );
    Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap()
}

/// Every message on `url`, received once (a long visibility timeout keeps
/// the ones received hidden while the rest are read).
async fn receive_all(clients: &AwsClients, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let got = clients
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(300)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_table_goes_to_its_shard_and_its_committer_lands_it_once() {
    let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
    let bucket = unique("floe").replace('_', "-");
    clients
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let mut urls = Vec::new();
    for i in 0..2 {
        let url = clients
            .sqs
            .create_queue()
            .queue_name(unique(&format!("floe-commits-{i}")))
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_string();
        urls.push(url);
    }
    let ns = unique("sh");

    let writer_deployment = Deployment::from_config(
        config(&bucket, &ns, &urls, None),
        Faults::none(),
        Role::Writer,
    )
    .await
    .unwrap();
    let writer = WriterFunction::new(&writer_deployment).unwrap();
    let records: Vec<Value> = (0..RECORDS)
        .map(|id| {
            json!({
                "messageId": format!("m-{id}"),
                "receiptHandle": format!("rh-{id}"),
                "body": json!({"t": (id % TABLES).to_string(), "id": id}).to_string(),
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
                "messageAttributes": {},
                "md5OfBody": "00000000000000000000000000000000",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    let event = writer_event(json!({ "Records": records }));
    // Twice, as Lambda redelivers an event whose answer was lost.
    for _ in 0..2 {
        let answer = writer.handle(event.clone()).await.unwrap();
        assert!(failures(&answer).is_empty(), "{answer:?}");
    }

    let mut tables_by_shard: Vec<BTreeSet<String>> = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let messages = receive_all(&clients, url).await;
        let mut tables = BTreeSet::new();
        for m in &messages {
            let request = CommitRequest::from_bytes(m.body().unwrap().as_bytes()).unwrap();
            assert_eq!(
                shard_of(&request.table, urls.len()),
                i,
                "{} on shard {i}",
                display(&request.table)
            );
            tables.insert(display(&request.table));
        }
        // Its own committer function: FLOE_QUEUE_URL names this shard.
        let deployment = Deployment::from_config(
            config(&bucket, &ns, &urls, Some(url)),
            Faults::none(),
            Role::Committer,
        )
        .await
        .unwrap();
        assert_eq!(deployment.sqs.as_ref().map(|q| q.url()), Some(url.as_str()));
        let committer = CommitterFunction::new(&deployment).unwrap();
        let event_records: Vec<Value> = messages
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
                    "eventSourceARN": format!("arn:aws:sqs:us-east-1:123456789012:floe-commits-{i}"),
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let answer = committer
            .handle(commit_event(json!({ "Records": event_records })), None)
            .await;
        let failed: HashSet<String> = failures(&answer).into_iter().collect();
        assert!(failed.is_empty(), "shard {i}: {answer:?}");
        tables_by_shard.push(tables);
    }
    // Each table on one shard, every table on some shard, both shards used.
    let all: Vec<&String> = tables_by_shard.iter().flatten().collect();
    assert_eq!(all.len(), TABLES as usize, "{tables_by_shard:?}");
    assert!(
        tables_by_shard.iter().all(|t| !t.is_empty()),
        "{tables_by_shard:?}"
    );

    let mut want: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for id in 0..RECORDS {
        want.entry(id % TABLES).or_default().push(id as i64);
    }
    for (t, want) in want {
        let ident = parse_table(&format!("{ns}.t_{t}")).unwrap();
        let mut ids: Vec<i64> = scan(writer_deployment.catalog.as_ref(), &ident)
            .await
            .iter()
            .flat_map(|b| {
                b.column_by_name("id")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        ids.sort();
        assert_eq!(ids, want, "{}: every row once", display(&ident));
    }
}

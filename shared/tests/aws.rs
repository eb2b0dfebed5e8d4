//! S3 storage, the SQS commit queue and the Glue catalog against a real moto
//! server (started by `local-dev/aws.sh`). Every test makes its own bucket,
//! queue and database, so they run in parallel on one server.
#![cfg(feature = "aws")]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int64Array, StringArray};
use bytes::Bytes;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::catalog::glue::{METADATA_LOCATION, PREVIOUS_METADATA_LOCATION, TABLE_TYPE};
use floe_core::catalog::{Catalog, CatalogError, Committed, GlueCatalog, TableCommit};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::spec::TableMetadataBuilder;
use floe_core::ident::parse_table;
use floe_core::queue::{CommitQueue, Delivery, SqsQueue};
use floe_core::request::CommitRequest;
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::storage::s3::{PART_SIZE, S3StorageFactory};
use floe_core::tabledef;
use floe_test_support::{requests, scan, services};

async fn clients() -> AwsClients {
    AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await
}

/// A name no other test (or earlier run) uses.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

async fn bucket(clients: &AwsClients) -> String {
    let name = unique("floe");
    clients
        .s3
        .create_bucket()
        .bucket(&name)
        .send()
        .await
        .unwrap();
    name
}

async fn keys(clients: &AwsClients, bucket: &str, prefix: &str) -> Vec<String> {
    let out = clients
        .s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .send()
        .await
        .unwrap();
    out.contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect()
}

/// Deterministic bytes that differ at every offset of a part.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 13)) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_io_round_trips_small_and_multipart_objects() {
    let clients = clients().await;
    let bucket = bucket(&clients).await;
    let io = S3StorageFactory::file_io(&clients);
    let small = format!("s3://{bucket}/t/metadata/small.json");

    assert!(!io.exists(&small).await.unwrap());
    io.new_output(&small)
        .unwrap()
        .write(Bytes::from_static(b"{\"hello\":\"s3\"}"))
        .await
        .unwrap();
    assert!(io.exists(&small).await.unwrap());
    let input = io.new_input(&small).unwrap();
    assert_eq!(input.metadata().await.unwrap().size, 14);
    assert_eq!(&input.read().await.unwrap()[..], b"{\"hello\":\"s3\"}");
    let reader = input.reader().await.unwrap();
    assert_eq!(&reader.read(2..7).await.unwrap()[..], b"hello");

    // > 20 MiB through the streaming writer, in odd-sized chunks: three parts.
    let big = format!("s3://{bucket}/t/data/big.bin");
    let data = pattern(21 * 1024 * 1024 + 12345);
    let mut writer = io.new_output(&big).unwrap().writer().await.unwrap();
    for chunk in data.chunks(3 * 1024 * 1024 + 7) {
        writer.write(Bytes::copy_from_slice(chunk)).await.unwrap();
    }
    writer.close().await.unwrap();
    let head = clients
        .s3
        .head_object()
        .bucket(&bucket)
        .key("t/data/big.bin")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(data.len() as i64));
    let parts = data.len().div_ceil(PART_SIZE);
    assert!(
        head.e_tag().unwrap().ends_with(&format!("-{parts}\"")),
        "a multipart ETag names its {parts} parts: {:?}",
        head.e_tag()
    );
    let input = io.new_input(&big).unwrap();
    assert_eq!(input.read().await.unwrap(), Bytes::from(data.clone()));
    // A ranged read across a part boundary.
    let reader = input.reader().await.unwrap();
    let (from, to) = (PART_SIZE as u64 - 100, PART_SIZE as u64 + 100);
    assert_eq!(
        &reader.read(from..to).await.unwrap()[..],
        &data[from as usize..to as usize]
    );
    let uploads = clients
        .s3
        .list_multipart_uploads()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    assert!(uploads.uploads().is_empty(), "no upload left open");

    // A writer dropped mid-upload (a cancelled task) aborts its upload.
    let dropped_path = format!("s3://{bucket}/t/data/dropped.bin");
    let mut dropped = io
        .new_output(&dropped_path)
        .unwrap()
        .writer()
        .await
        .unwrap();
    dropped
        .write(Bytes::from(pattern(PART_SIZE + 1)))
        .await
        .unwrap();
    assert_eq!(
        open_uploads(&clients, &bucket).await,
        1,
        "a part is on its way"
    );
    drop(dropped);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while open_uploads(&clients, &bucket).await > 0 {
        assert!(tokio::time::Instant::now() < deadline, "upload not aborted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!io.exists(&dropped_path).await.unwrap());

    io.delete(&big).await.unwrap();
    assert!(!io.exists(&big).await.unwrap());
    // `t` goes as a directory; a sibling `t2` stays.
    let sibling = format!("s3://{bucket}/t2/x");
    io.new_output(&sibling)
        .unwrap()
        .write(Bytes::from_static(b"x"))
        .await
        .unwrap();
    io.delete_prefix(format!("s3://{bucket}/t")).await.unwrap();
    assert_eq!(keys(&clients, &bucket, "").await, vec!["t2/x".to_string()]);
}

async fn open_uploads(clients: &AwsClients, bucket: &str) -> usize {
    clients
        .s3
        .list_multipart_uploads()
        .bucket(bucket)
        .send()
        .await
        .unwrap()
        .uploads()
        .len()
}

async fn queue(clients: &AwsClients, fifo: bool) -> String {
    let mut name = unique("floe-commits");
    let mut req = clients.sqs.create_queue().attributes(
        aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
        "30",
    );
    if fifo {
        name.push_str(".fifo");
        req = req.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    req.queue_name(name)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string()
}

/// Receives until `n` messages arrived (SQS may answer with fewer per call).
async fn receive_n(q: &SqsQueue, n: usize) -> Vec<Delivery> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while got.len() < n && tokio::time::Instant::now() < deadline {
        got.extend(
            q.receive(n - got.len(), Duration::from_secs(1))
                .await
                .unwrap(),
        );
    }
    got
}

fn bodies(ds: &[Delivery]) -> HashSet<Bytes> {
    ds.iter().map(|d| d.body.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_queue_sends_receives_acks_and_releases() {
    let clients = clients().await;
    let bucket = bucket(&clients).await;
    let url = queue(&clients, false).await;
    let q = SqsQueue::new(&clients, &url, &format!("s3://{bucket}/claims")).unwrap();

    let sent: Vec<Bytes> = (0..13)
        .map(|i| Bytes::from(format!("{{\"request\":{i}}}")))
        .collect();
    q.send_batch(sent.clone()).await.unwrap();
    let first = receive_n(&q, 13).await;
    assert_eq!(bodies(&first), sent.iter().cloned().collect());
    assert!(first.iter().all(|d| d.receive_count == 1));

    // Released messages come back at once, counted again; acked ones never.
    let (release, ack) = first.split_at(5);
    let receipts = |ds: &[Delivery]| ds.iter().map(|d| d.receipt.clone()).collect::<Vec<_>>();
    q.ack(&receipts(ack)).await.unwrap();
    q.release(&receipts(release)).await.unwrap();
    let again = receive_n(&q, 5).await;
    assert_eq!(bodies(&again), bodies(release));
    assert!(again.iter().all(|d| d.receive_count == 2), "{again:?}");
    q.ack(&receipts(&again)).await.unwrap();
    assert!(
        q.receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );

    // A 1 MiB body goes through the claim check and its object goes with the ack.
    let large = Bytes::from(
        pattern(1024 * 1024)
            .into_iter()
            .map(|b| b'a' + b % 26)
            .collect::<Vec<u8>>(),
    );
    q.send(large.clone()).await.unwrap();
    assert_eq!(keys(&clients, &bucket, "claims/").await.len(), 1);
    let got = receive_n(&q, 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, large);
    q.ack(&[got[0].receipt.clone()]).await.unwrap();
    assert!(keys(&clients, &bucket, "claims/").await.is_empty());
    assert!(
        q.receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );

    // A duplicate of an acked claim-check message (standard queues may deliver
    // one) finds its object gone: it is deleted, not handed to the committer.
    q.send(large.clone()).await.unwrap();
    let got = receive_n(&q, 1).await;
    let claim = keys(&clients, &bucket, "claims/").await;
    assert_eq!(claim.len(), 1);
    clients
        .s3
        .delete_object()
        .bucket(&bucket)
        .key(&claim[0])
        .send()
        .await
        .unwrap();
    q.release(&[got[0].receipt.clone()]).await.unwrap();
    assert!(
        q.receive(10, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );
    let attrs = clients
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attrs = attrs.attributes().unwrap();
    for name in [
        aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages,
        aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ] {
        assert_eq!(attrs[&name], "0", "{name:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_queue_drops_a_resent_request() {
    let clients = clients().await;
    let bucket = bucket(&clients).await;
    let url = queue(&clients, true).await;
    let q = SqsQueue::new(&clients, &url, &format!("s3://{bucket}/claims")).unwrap();
    let body = Bytes::from_static(br#"{"version":1,"table":{"namespace":["bronze"],"name":"t"}}"#);
    q.send(body.clone()).await.unwrap();
    q.send(body.clone()).await.unwrap();
    let got = q.receive(10, Duration::from_secs(1)).await.unwrap();
    assert_eq!(got.len(), 1, "the second send is deduplicated");
    assert_eq!(got[0].body, body);
    q.ack(&[got[0].receipt.clone()]).await.unwrap();
}

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

struct Glue {
    clients: AwsClients,
    bucket: String,
    catalog: Arc<GlueCatalog>,
    ident: TableIdent,
}

async fn glue_table() -> Glue {
    let clients = clients().await;
    let bucket = bucket(&clients).await;
    let catalog = GlueCatalog::new(
        &clients,
        None,
        &format!("s3://{bucket}/warehouse"),
        S3StorageFactory::file_io(&clients),
        Faults::none(),
    );
    // Glue database names: lowercase letters, digits and underscores.
    let db = unique("bronze").replace('-', "_");
    let ident = parse_table(&format!("{db}.events")).unwrap();
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    catalog
        .create_table(
            &ident,
            tabledef::creation("events", schema, Default::default(), Default::default()),
        )
        .await
        .unwrap();
    Glue {
        clients,
        bucket,
        catalog: Arc::new(catalog),
        ident,
    }
}

async fn glue_parameters(g: &Glue) -> HashMap<String, String> {
    g.clients
        .glue
        .get_table()
        .database_name(&g.ident.namespace().as_ref()[0])
        .name(g.ident.name())
        .send()
        .await
        .unwrap()
        .table()
        .unwrap()
        .parameters()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_catalog_creates_loads_commits_and_refuses_a_stale_base() {
    let g = glue_table().await;
    let loaded = g.catalog.load_table(&g.ident).await.unwrap();
    let params = glue_parameters(&g).await;
    assert_eq!(params[TABLE_TYPE], "ICEBERG");
    assert_eq!(params[METADATA_LOCATION], loaded.metadata_location);
    let prefix = format!(
        "s3://{}/warehouse/{}.db/events/metadata/",
        g.bucket,
        g.ident.namespace().as_ref()[0]
    );
    assert!(
        loaded.metadata_location.starts_with(&prefix),
        "{}",
        loaded.metadata_location
    );
    assert!(
        g.catalog
            .file_io()
            .exists(&loaded.metadata_location)
            .await
            .unwrap()
    );
    assert_eq!(
        loaded.metadata.current_schema().as_struct().fields().len(),
        2
    );
    let glue = g
        .clients
        .glue
        .get_table()
        .database_name(&g.ident.namespace().as_ref()[0])
        .name(g.ident.name())
        .send()
        .await
        .unwrap();
    let sd = glue.table().unwrap().storage_descriptor().unwrap();
    let columns: Vec<(&str, Option<&str>, &str)> = sd
        .columns()
        .iter()
        .map(|c| {
            (
                c.name(),
                c.r#type(),
                c.parameters().unwrap()["iceberg.field.id"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        columns,
        vec![("id", Some("bigint"), "1"), ("name", Some("string"), "2")]
    );
    assert_eq!(sd.location(), Some(loaded.metadata.location()));

    let with_prop = |base: &floe_core::catalog::LoadedTable, v: &str| {
        TableMetadataBuilder::new_from_metadata(
            (*base.metadata).clone(),
            Some(base.metadata_location.clone()),
        )
        .set_properties(HashMap::from([("floe.test".to_string(), v.to_string())]))
        .unwrap()
        .build()
        .unwrap()
        .metadata
    };
    let committed = g
        .catalog
        .commit(TableCommit {
            base: loaded.clone(),
            metadata: with_prop(&loaded, "one"),
            updates: vec![],
            requirements: vec![],
        })
        .await
        .landed()
        .unwrap();
    let params = glue_parameters(&g).await;
    assert_eq!(params[METADATA_LOCATION], committed.metadata_location);
    assert_eq!(params[PREVIOUS_METADATA_LOCATION], loaded.metadata_location);
    let reloaded = g.catalog.load_table(&g.ident).await.unwrap();
    assert_eq!(reloaded.metadata_location, committed.metadata_location);
    assert_eq!(reloaded.metadata.properties()["floe.test"], "one");

    // Planned on the first load, after another commit landed: refused, and its
    // metadata file is not left behind.
    let before = keys(&g.clients, &g.bucket, "warehouse/").await.len();
    let stale = g
        .catalog
        .commit(TableCommit {
            base: loaded.clone(),
            metadata: with_prop(&loaded, "two"),
            updates: vec![],
            requirements: vec![],
        })
        .await;
    assert!(
        matches!(stale, Committed::NotApplied(CatalogError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(
        keys(&g.clients, &g.bucket, "warehouse/").await.len(),
        before
    );
    let now = g.catalog.load_table(&g.ident).await.unwrap();
    assert_eq!(now.metadata_location, committed.metadata_location);
    assert_eq!(now.metadata.properties()["floe.test"], "one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_on_s3_through_sqs_commits_via_glue_and_reads_back() {
    let g = glue_table().await;
    let url = queue(&g.clients, false).await;
    let q = SqsQueue::new(&g.clients, &url, &format!("s3://{}/claims", g.bucket)).unwrap();

    // Two writers' batches, enqueued as commit requests.
    let a =
        requests::write_request(g.catalog.as_ref(), &g.ident, &[(1, "ada"), (2, "grace")]).await;
    let b = requests::write_request(
        g.catalog.as_ref(),
        &g.ident,
        &[(3, "edsger"), (4, "barbara"), (5, "ken")],
    )
    .await;
    q.send_batch(vec![
        Bytes::from(a.to_bytes().unwrap()),
        Bytes::from(b.to_bytes().unwrap()),
    ])
    .await
    .unwrap();

    // The committer: drain, commit as one snapshot, then ack.
    let deliveries = receive_n(&q, 2).await;
    let requests: Vec<CommitRequest> = deliveries
        .iter()
        .map(|d| CommitRequest::from_bytes(&d.body).unwrap())
        .collect();
    let engine = CommitEngine::new(g.catalog.clone(), RetryPolicy::default());
    let out = engine.append(&g.ident, requests).await.unwrap();
    assert_eq!(out.committed.len(), 2);
    assert_eq!(out.snapshot_ids.len(), 1);
    q.ack(
        &deliveries
            .iter()
            .map(|d| d.receipt.clone())
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();

    // A redelivered request is found in the table and not committed again.
    let again = engine.append(&g.ident, vec![a.clone()]).await.unwrap();
    assert!(again.committed.is_empty());

    let mut rows: Vec<(i64, String)> = scan(g.catalog.as_ref(), &g.ident)
        .await
        .iter()
        .flat_map(|batch| {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..batch.num_rows())
                .map(|i| (ids.value(i), names.value(i).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    let want: Vec<(i64, String)> = [
        (1, "ada"),
        (2, "grace"),
        (3, "edsger"),
        (4, "barbara"),
        (5, "ken"),
    ]
    .into_iter()
    .map(|(i, n)| (i, n.to_string()))
    .collect();
    assert_eq!(rows, want);

    // pyiceberg's GlueCatalog finds the table by the same convention and reads
    // the same rows from the Parquet files on S3.
    let loaded = g.catalog.load_table(&g.ident).await.unwrap();
    let py = pyiceberg_read(&g.ident);
    assert_eq!(py["metadata_location"], loaded.metadata_location.as_str());
    let py_rows: Vec<(i64, String)> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(py_rows, want);

    let data: Vec<String> = keys(&g.clients, &g.bucket, "warehouse/")
        .await
        .into_iter()
        .filter(|k| k.ends_with(".parquet"))
        .collect();
    assert_eq!(data.len(), 2, "{data:?}");
}

/// The table as pyiceberg's GlueCatalog reads it (`tests/read_glue.py`).
fn pyiceberg_read(ident: &TableIdent) -> serde_json::Value {
    let table = format!("{}.{}", ident.namespace().join("."), ident.name());
    services::python_json("shared/tests/read_glue.py", &[services::moto(), &table])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_writer_and_committer_run_on_s3_sqs_and_glue() {
    use floe_core::commit::CommitEngine;
    use floe_core::config::Config;
    use floe_core::dlq::StorageDeadLetters;
    use floe_core::metrics::Counters;
    use floe_core::pipeline::committer::Committer;
    use floe_core::pipeline::writer::{Writer, WriterParts};
    use floe_core::source::SourceKind;
    use floe_core::source::{Records, Source, SourceBatch};

    let g = glue_table().await;
    let url = queue(&g.clients, false).await;
    let queue =
        Arc::new(SqsQueue::new(&g.clients, &url, &format!("s3://{}/claims", g.bucket)).unwrap());
    let counters = Arc::new(Counters::default());
    let dlq = format!("s3://{}/_floe/dlq", g.bucket);
    let writer = Writer::new(WriterParts {
        catalog: g.catalog.clone(),
        queue: queue.clone(),
        dead_letters: Arc::new(StorageDeadLetters::new(
            g.catalog.file_io().clone(),
            dlq.clone(),
        )),
        faults: Faults::none(),
        counters: counters.clone(),
        config: Arc::new(Config::default()),
    })
    .unwrap();

    // One SQS-sourced batch: three good records and one that cannot be a long.
    let items: Vec<(String, Bytes)> = [
        ("m-1", r#"{"id":10,"name":"ten"}"#),
        ("m-2", r#"{"id":11,"name":"eleven"}"#),
        ("m-3", r#"{"id":"twelve","name":"bad"}"#),
        ("m-4", r#"{"id":13}"#),
    ]
    .into_iter()
    .map(|(id, r)| (id.to_string(), Bytes::from_static(r.as_bytes())))
    .collect();
    let spans = vec![SourceSpan {
        source: "sqs:ingest".into(),
        positions: Positions::Ids {
            ids: items.iter().map(|(id, _)| id.clone()).collect(),
        },
        stream: false,
    }];
    let id = batch_id(&spans, None);
    let report = writer
        .write(SourceBatch {
            source: Source {
                kind: SourceKind::Sqs,
                name: "ingest".into(),
            },
            table: Some(g.ident.clone()),
            batch_id: id.clone(),
            spans,
            records: Records::Items(items),
            state: Default::default(),
            oldest_ms: None,
            avro: None,
        })
        .await
        .unwrap();
    assert_eq!(report.records, 3);
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].position, "m-3");

    // The dead letter is on S3, with its position and the record as received.
    let dead = g
        .catalog
        .file_io()
        .new_input(&report.dead_letter_locations[0])
        .unwrap()
        .read()
        .await
        .unwrap();
    let dead: serde_json::Value = serde_json::from_slice(&dead).unwrap();
    assert_eq!(dead["position"], "m-3");
    assert_eq!(dead["record"], r#"{"id":"twelve","name":"bad"}"#);
    assert!(report.dead_letter_locations[0].starts_with(&dlq));

    let committer = Committer::new(
        CommitEngine::new(g.catalog.clone(), RetryPolicy::default()),
        Arc::new(StorageDeadLetters::new(
            g.catalog.file_io().clone(),
            dlq.clone(),
        )),
        Faults::none(),
        counters,
    );
    let (done, delivered) = committer
        .drain_once(
            queue.as_ref(),
            100,
            Duration::from_secs(1),
            Duration::from_secs(5),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(delivered.len(), 1);
    assert!(done.failed().is_empty(), "{done:?}");
    assert!(q_is_empty(queue.as_ref()).await);

    let mut rows: Vec<(i64, Option<String>)> = scan(g.catalog.as_ref(), &g.ident)
        .await
        .iter()
        .flat_map(|batch| {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..batch.num_rows())
                .map(|i| {
                    let name = (!names.is_null(i)).then(|| names.value(i).to_string());
                    (ids.value(i), name)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            (10, Some("ten".to_string())),
            (11, Some("eleven".to_string())),
            (13, None)
        ]
    );
    let loaded = g.catalog.load_table(&g.ident).await.unwrap();
    let summary = &loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(summary["added-records"], "3");
}

async fn q_is_empty(q: &SqsQueue) -> bool {
    q.receive(10, Duration::from_secs(1))
        .await
        .unwrap()
        .is_empty()
}

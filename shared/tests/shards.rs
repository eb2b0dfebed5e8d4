//! The commit queue sharded by table, end to end on the in-process queue:
//! the writer step routes records to many tables and sends each table's
//! requests to its shard; two committers, each draining only its own shard
//! with its own engine (as two committer functions would), commit at once to
//! one catalog. Every row lands exactly once (each batch is written twice, as
//! a writer retried after a lost answer), and no committer ever sees another
//! shard's table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use floe_core::catalog::{CatalogRef, SqliteCatalog};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::config::Config;
use floe_core::dlq::StorageDeadLetters;
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::io::FileIO;
use floe_core::ident::{display, parse_table};
use floe_core::metrics::Counters;
use floe_core::pipeline::{Committer, Writer, WriterParts};
use floe_core::queue::{MemoryQueue, QueueRef, ShardedQueue, shard_of};
use floe_core::request::CommitRequest;
use floe_core::source::SourceKind;
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::source::{Records, Source, SourceBatch};
use floe_test_support::scan;

const TABLES: u64 = 12;
const BATCHES: u64 = 20;
const PER_BATCH: u64 = 30;

/// Batch `b`: records `b*PER_BATCH..`, record `id` routed to table `id % TABLES`.
fn batch(b: u64) -> SourceBatch {
    let items: Vec<(String, Bytes)> = (b * PER_BATCH..(b + 1) * PER_BATCH)
        .map(|id| {
            (
                format!("m{id}"),
                Bytes::from(format!(r#"{{"t":"{}","id":{id}}}"#, id % TABLES)),
            )
        })
        .collect();
    let spans = vec![SourceSpan {
        source: "sqs:shards".into(),
        positions: Positions::Ids {
            ids: items.iter().map(|(p, _)| p.clone()).collect(),
        },
        stream: false,
    }];
    SourceBatch {
        source: Source {
            kind: SourceKind::Sqs,
            name: "shards".into(),
        },
        table: None,
        batch_id: batch_id(&spans, None),
        spans,
        records: Records::Items(items),
        state: Default::default(),
        oldest_ms: None,
        avro: None,
    }
}

fn table(t: u64) -> TableIdent {
    parse_table(&format!("sh.t_{t}")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_two_committers_every_row_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let catalog: CatalogRef = Arc::new(
        SqliteCatalog::open(
            "floe",
            &dir.path().join("catalog.db"),
            &format!("file://{}", dir.path().display()),
            FileIO::new_with_fs(),
            Faults::none(),
        )
        .unwrap(),
    );
    let dead_letters = Arc::new(StorageDeadLetters::new(
        catalog.file_io().clone(),
        format!("file://{}/_floe/dlq", dir.path().display()),
    ));
    let shards: Vec<Arc<MemoryQueue>> = (0..2).map(|_| Arc::new(MemoryQueue::new())).collect();
    let queue: QueueRef = Arc::new(
        ShardedQueue::new(shards.iter().map(|q| q.clone() as QueueRef).collect()).unwrap(),
    );
    let config = Config::from_toml_str(
        "[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"sh.t_{value}\"\n",
        std::path::Path::new("."),
        &|_| None,
    )
    .unwrap();
    let writer = Writer::new(WriterParts {
        catalog: catalog.clone(),
        queue,
        dead_letters: dead_letters.clone(),
        faults: Faults::none(),
        counters: Arc::new(Counters::default()),
        config: Arc::new(config),
    })
    .unwrap();
    for b in 0..BATCHES {
        // Twice: a writer retried after its answer was lost sends the same
        // requests again; the table's committer drops the second.
        for _ in 0..2 {
            let report = writer.write(batch(b)).await.unwrap();
            assert_eq!(report.records, PER_BATCH);
        }
    }
    for q in &shards {
        q.close();
    }

    // Two committers, as two functions: their own engines, their own shard.
    let committers = shards.iter().enumerate().map(|(i, q)| {
        let committer = Committer::new(
            CommitEngine::new(catalog.clone(), RetryPolicy::default()),
            dead_letters.clone(),
            Faults::none(),
            Arc::new(Counters::default()),
        );
        let q = q.clone();
        async move {
            let mut tables = BTreeSet::new();
            let mut requests = 0;
            while let Some((report, deliveries)) = committer
                .drain_once(q.as_ref(), 50, Duration::from_millis(20), Duration::ZERO)
                .await
                .unwrap()
            {
                assert!(report.failed().is_empty(), "shard {i}: {report:?}");
                for d in &deliveries {
                    let req = CommitRequest::from_bytes(&d.body).unwrap();
                    assert_eq!(shard_of(&req.table, 2), i, "{}", display(&req.table));
                    tables.insert(display(&req.table));
                    requests += 1;
                }
            }
            (tables, requests)
        }
    });
    let seen = futures::future::join_all(committers).await;

    // Each table went to exactly one shard, and both shards had tables.
    let all: Vec<String> = seen.iter().flat_map(|(t, _)| t.iter().cloned()).collect();
    assert_eq!(all.len(), TABLES as usize, "{seen:?}");
    assert!(seen.iter().all(|(t, _)| !t.is_empty()), "{seen:?}");
    let want: BTreeSet<String> = (0..TABLES).map(|t| display(&table(t))).collect();
    assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), want);
    // One request per table and batch, each sent twice.
    let requests: usize = seen.iter().map(|(_, n)| n).sum();
    assert_eq!(requests as u64, 2 * BATCHES * TABLES.min(PER_BATCH));

    let mut expected: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for id in 0..BATCHES * PER_BATCH {
        expected.entry(id % TABLES).or_default().push(id as i64);
    }
    for (t, want) in expected {
        let mut ids: Vec<i64> = scan(catalog.as_ref(), &table(t))
            .await
            .iter()
            .flat_map(|b| {
                b.column_by_name("id")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<arrow_array::Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        ids.sort();
        assert_eq!(ids, want, "table {t}: every row exactly once");
    }
}

//! Requests the writer step wrote, committed by the engine in other
//! orders than they were written: late keyed changes masked by key or
//! superseded whole, and redeliveries cut at other boundaries masked by
//! position. On the in-memory catalog and storage
//! ([`crate::catalog::memory`]): real Parquet, no I/O.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iceberg::TableIdent;

use crate::catalog::Catalog;
use crate::catalog::memory::{Answer, MemoryCatalog};
use crate::commit::CommitOutcome;
use crate::commit::row_delta::RowDelta;
use crate::commit::tests::engine;
use crate::queue::{CommitQueue as _, MemoryQueue};
use crate::request::CommitRequest;
use crate::source::{Position, Positions, SourceSpan};

/// A table `t.rows` on `catalog`, keyed on `id` or not, and the writer
/// step that turns records into the commit requests the tests order.
struct Rig {
    catalog: Arc<MemoryCatalog>,
    ident: TableIdent,
    keyed: bool,
    queue: Arc<MemoryQueue>,
    writer: super::Writer,
}

impl Rig {
    async fn new(catalog: Arc<MemoryCatalog>, keyed: bool) -> Self {
        let ident = TableIdent::from_strs(["t", "rows"]).unwrap();
        let key = if keyed {
            r#""identifier-field-ids":[1],"#
        } else {
            ""
        };
        let schema = crate::tabledef::parse_schema(&format!(
            r#"{{"type":"struct","schema-id":0,{key}"fields":[
              {{"id":1,"name":"id","required":true,"type":"long"}},
              {{"id":2,"name":"v","required":false,"type":"string"}}]}}"#
        ))
        .unwrap();
        let creation =
            crate::tabledef::creation("rows", schema, Default::default(), HashMap::new());
        catalog.create_table(&ident, creation).await.unwrap();
        let queue = Arc::new(MemoryQueue::new());
        let dead_letters = crate::dlq::StorageDeadLetters::new(
            catalog.file_io().clone(),
            "memory://warehouse/_dead_letters",
        );
        let writer = super::Writer::new(super::WriterParts {
            catalog: catalog.clone(),
            queue: queue.clone(),
            dead_letters: Arc::new(dead_letters),
            faults: crate::faults::Faults::none(),
            counters: Arc::default(),
            config: Arc::default(),
        })
        .unwrap();
        Self {
            catalog,
            ident,
            keyed,
            queue,
            writer,
        }
    }

    /// The request of records `changes` (id, value; upserts when keyed) at
    /// positions `first..` of the ordered source `source`.
    async fn request(&self, source: &str, first: u64, changes: &[(i64, &str)]) -> CommitRequest {
        let items = changes
            .iter()
            .enumerate()
            .map(|(i, (id, v))| {
                let op = if self.keyed { r#""_op":"u","# } else { "" };
                let line = format!(r#"{{{op}"id":{id},"v":"{v}"}}"#);
                ((first + i as u64).to_string(), bytes::Bytes::from(line))
            })
            .collect();
        let at = |n: u64| Position::parse(&n.to_string()).unwrap();
        let span = SourceSpan {
            source: source.into(),
            positions: Positions::Range {
                first: at(first),
                last: at(first + changes.len() as u64 - 1),
            },
            stream: true,
        };
        let mut batch = crate::source::SourceBatch::new(
            crate::source::Source::new(crate::source::SourceKind::Kafka, "t"),
            vec![span],
            crate::source::Records::Items(items),
        );
        batch.table = Some(self.ident.clone());
        self.writer.write(batch).await.unwrap();
        let queued = self.queue.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(queued.len(), 1);
        let receipts: Vec<String> = queued.iter().map(|d| d.receipt.clone()).collect();
        self.queue.ack(&receipts).await.unwrap();
        CommitRequest::from_bytes(&queued[0].body).unwrap()
    }

    async fn commit(&self, requests: Vec<CommitRequest>) -> CommitOutcome {
        let engine = engine(&self.catalog, 4);
        let out = if self.keyed {
            engine.commit(&self.ident, requests, &RowDelta).await
        } else {
            engine.append(&self.ident, requests).await
        };
        out.unwrap()
    }
}

#[tokio::test]
async fn a_late_keyed_request_applies_only_the_keys_no_newer_change_touched() {
    let keyed = Rig::new(Arc::new(MemoryCatalog::new()), true).await;
    let old = keyed
        .request("kafka:t/0", 1, &[(1, "old"), (2, "old")])
        .await;
    let new = keyed.request("kafka:t/0", 3, &[(1, "new")]).await;
    // The newer change commits first; the older request comes back after.
    let out = keyed.commit(vec![new]).await;
    assert_eq!(out.records, 1);
    let out = keyed.commit(vec![old.clone()]).await;
    // Key 1's old value is masked out of its file; key 2 is applied.
    assert_eq!(out.committed, vec![old.batch_id.clone()]);
    assert_eq!((out.rows_dropped, out.records), (1, 1));
    assert!(out.superseded.is_empty());
}

#[tokio::test]
async fn a_late_keyed_request_every_key_of_which_is_newer_in_the_table_is_superseded() {
    let keyed = Rig::new(Arc::new(MemoryCatalog::new()), true).await;
    let old = keyed.request("kafka:t/0", 1, &[(1, "old")]).await;
    let new = keyed.request("kafka:t/0", 2, &[(1, "new")]).await;
    keyed.commit(vec![new]).await;
    let out = keyed.commit(vec![old.clone()]).await;
    assert_eq!(out.superseded, vec![old.batch_id.clone()]);
    assert_eq!((out.rows_dropped, out.records), (1, 0));
}

#[tokio::test]
async fn a_redelivery_at_other_boundaries_commits_only_its_new_records() {
    // Lines 1-3 committed (the answer lost); a redelivery of lines 2-5
    // brings two new ones. Unkeyed, the rows of lines 2-3 are masked out of
    // its file by their positions; keyed, by their keys' last changes.
    for keyed in [false, true] {
        let rig = Rig::new(Arc::new(MemoryCatalog::scripted([Answer::Lose])), keyed).await;
        let first = rig
            .request("kafka:t/0", 1, &[(1, "a"), (2, "a"), (3, "a")])
            .await;
        let again = rig
            .request("kafka:t/0", 2, &[(2, "a"), (3, "a"), (4, "a"), (5, "a")])
            .await;
        assert_eq!(rig.commit(vec![first]).await.records, 3, "keyed {keyed}");
        let out = rig.commit(vec![again.clone()]).await;
        assert_eq!(out.committed, vec![again.batch_id.clone()], "keyed {keyed}");
        assert_eq!((out.rows_dropped, out.records), (2, 2), "keyed {keyed}");
    }
}

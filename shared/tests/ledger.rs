//! The ledger across hours, weeks and other engines' maintenance, through
//! the real writer and committer steps on a local warehouse: reruns and
//! redeliveries long after the ledger sealed, keyed reruns that must not
//! undo newer changes or apply a TRUNCATE twice, sources idle for weeks,
//! Kinesis-like sources whose runs spill into pages, another engine's
//! orphan cleanup, and the repair of a ledger that cleanup destroyed.
//!
//! Every test moves the process's clock ([`floe_core::clock::shift`]), so
//! they run one at a time in this binary.

use std::sync::Arc;

use bytes::Bytes;
use floe_core::catalog::CatalogRef;
use floe_core::clock;
use floe_core::commit::{CommitEngine, CommitError};
use floe_core::config::Config;
use floe_core::error::Classify;
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::ident::parse_table;
use floe_core::ledger::{self, Ledger, LedgerStore};
use floe_core::maintain::{MaintainOptions, maintain};
use floe_core::metrics::Counters;
use floe_core::pipeline::{Committer, Writer, WriterParts};
use floe_core::queue::{CommitQueue, MemoryQueue, QueueRef};
use floe_core::source::{
    Position, Positions, Records, Source, SourceBatch, SourceKind, SourceSpan, batch_id,
};
use floe_core::tabledef;
use floe_test_support::harness::{self, Harness, fast_retry};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The clock is the process's: one test at a time.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A table on a local warehouse with the writer and committer steps.
struct Rig {
    harness: Harness,
    table: TableIdent,
    queue: Arc<MemoryQueue>,
    counters: Arc<Counters>,
}

impl Rig {
    /// A table `t.{name}`, keyed on `id` or not, with `properties`.
    async fn new(name: &str, keyed: bool, properties: &[(&str, &str)]) -> Self {
        let harness = Harness::new();
        let table = parse_table(&format!("t.{name}")).unwrap();
        let schema = if keyed {
            r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"v","required":false,"type":"string"}]}"#
        } else {
            r#"{"type":"struct","schema-id":0,"fields":[
              {"id":1,"name":"id","required":true,"type":"long"},
              {"id":2,"name":"v","required":false,"type":"string"}]}"#
        };
        let mut props: std::collections::HashMap<String, String> = properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        props
            .entry(ledger::SEAL_ENTRIES_PROPERTY.into())
            .or_insert_with(|| "2".into());
        harness
            .catalog(Faults::none())
            .create_table(
                &table,
                tabledef::creation(
                    name,
                    tabledef::parse_schema(schema).unwrap(),
                    Default::default(),
                    props,
                ),
            )
            .await
            .unwrap();
        Self {
            harness,
            table,
            queue: Arc::new(MemoryQueue::new()),
            counters: Arc::new(Counters::default()),
        }
    }

    fn catalog(&self) -> CatalogRef {
        self.harness.catalog(Faults::none())
    }

    /// Writes `lines` as records `first..` of ordered source `source`
    /// (a Kafka partition, a file) and commits what is queued.
    async fn deliver(&self, source: &str, first: u64, lines: &[&str]) -> u64 {
        let items: Vec<(String, Bytes)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| ((first + i as u64).to_string(), Bytes::from(l.to_string())))
            .collect();
        let spans = vec![SourceSpan {
            source: source.into(),
            positions: Positions::Range {
                first: Position::from(first),
                last: Position::from(first + lines.len() as u64 - 1),
            },
            stream: true,
        }];
        self.write(spans, items, SourceKind::Kafka).await;
        self.commit().await
    }

    async fn write(&self, spans: Vec<SourceSpan>, items: Vec<(String, Bytes)>, kind: SourceKind) {
        let queue: QueueRef = self.queue.clone();
        let writer = Writer::new(WriterParts {
            catalog: self.catalog(),
            queue,
            dead_letters: self.harness.dead_letters.clone(),
            faults: Faults::none(),
            counters: Arc::new(Counters::default()),
            config: Arc::new(Config::default()),
        })
        .unwrap();
        let batch = SourceBatch {
            source: Source {
                kind,
                name: "t".into(),
            },
            table: Some(self.table.clone()),
            batch_id: batch_id(&spans, None),
            spans,
            records: Records::Items(items),
            state: Default::default(),
            oldest_ms: None,
            avro: None,
        };
        writer.write(batch).await.unwrap();
    }

    /// Commits every queued request; returns the records committed.
    async fn commit(&self) -> u64 {
        let committer = Committer::new(
            CommitEngine::new(self.catalog(), fast_retry()),
            self.harness.dead_letters.clone(),
            Faults::none(),
            self.counters.clone(),
        );
        let mut records = 0;
        loop {
            let deliveries = self
                .queue
                .receive(100, std::time::Duration::ZERO)
                .await
                .unwrap();
            if deliveries.is_empty() {
                return records;
            }
            let report = committer.commit(deliveries).await;
            for t in &report.tables {
                match &t.result {
                    Ok(o) => records += o.records,
                    Err(e) => panic!("commit of {} failed: {e}", t.table),
                }
            }
            self.queue.ack(&report.done()).await.unwrap();
        }
    }

    /// The ids of the table's rows, sorted.
    async fn ids(&self) -> Vec<i64> {
        self.rows().await.into_iter().map(|(id, _)| id).collect()
    }

    /// Maintenance that expires every snapshot but the current one.
    async fn expire_all(&self) -> floe_core::maintain::MaintainReport {
        let expire = MaintainOptions {
            max_snapshot_age_ms: Some(0),
            now_ms: clock::now_ms() + 1,
            ..MaintainOptions::default()
        };
        maintain(&self.catalog(), &self.table, &expire)
            .await
            .unwrap()
    }

    /// The first commit request queued, left in the queue.
    async fn queued(&self) -> floe_core::request::CommitRequest {
        let deliveries = self
            .queue
            .receive(10, std::time::Duration::ZERO)
            .await
            .unwrap();
        floe_core::request::CommitRequest::from_bytes(&deliveries[0].body).unwrap()
    }

    /// The table's rows, sorted.
    async fn rows(&self) -> Vec<(i64, Option<String>)> {
        let mut rows =
            harness::rows_of(&floe_test_support::scan(self.catalog().as_ref(), &self.table).await);
        rows.sort();
        rows
    }

    async fn ledger(&self) -> Ledger {
        let catalog = self.catalog();
        let loaded = catalog.load_table(&self.table).await.unwrap();
        let store = Arc::new(LedgerStore::new(catalog.file_io().clone()));
        Ledger::open(store, &loaded.metadata).await.unwrap()
    }
}

fn upsert(id: i64, v: &str) -> String {
    format!(r#"{{"_op":"u","id":{id},"v":"{v}"}}"#)
}

fn row(id: i64, v: &str) -> String {
    format!(r#"{{"id":{id},"v":"{v}"}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_rerun_long_after_applies_only_its_new_changes() {
    let _serial = serial().await;
    let rig = Rig::new("rerun", true, &[]).await;
    let f: Vec<String> = (1..=5).map(|id| upsert(id, "f")).collect();
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    assert_eq!(rig.deliver("file:f", 1, &f).await, 5);
    assert_eq!(rig.deliver("file:g", 1, &[&upsert(1, "g")]).await, 1);
    // Minutes pass and other commits seal the ledger.
    clock::shift(130_000);
    for i in 0..6 {
        rig.deliver("file:h", 1 + i, &[&upsert(100 + i as i64, "h")])
            .await;
        clock::shift(20_000);
    }
    assert!(
        !rig.ledger().await.head().segments.is_empty(),
        "the ledger sealed"
    );
    // F grew by one line and runs again, cut at other boundaries.
    let mut grown = f.clone();
    let line6 = upsert(6, "f6");
    grown.push(&line6);
    rig.deliver("file:f", 1, &grown).await;
    let got = rig.rows().await;
    let by_id: std::collections::BTreeMap<i64, Option<String>> = got.into_iter().collect();
    assert_eq!(
        by_id[&1].as_deref(),
        Some("g"),
        "G's later change of id 1 stays"
    );
    assert_eq!(by_id[&6].as_deref(), Some("f6"), "the new line is applied");
    assert_eq!(by_id.len(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_the_table_applied_is_not_applied_again_by_a_rerun() {
    let _serial = serial().await;
    let rig = Rig::new("truncate", true, &[]).await;
    let f = [upsert(1, "f"), r#"{"_op":"t"}"#.to_string(), upsert(2, "f")];
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    rig.deliver("file:f", 1, &f).await;
    rig.deliver("file:g", 1, &[&upsert(3, "g")]).await;
    clock::shift(3 * DAY_MS);
    for i in 0..5 {
        rig.deliver("file:h", 1 + i, &[&upsert(100 + i as i64, "h")])
            .await;
    }
    let mut grown = f.clone();
    let line4 = upsert(4, "f4");
    grown.push(&line4);
    rig.deliver("file:f", 1, &grown).await;
    let ids = rig.ids().await;
    assert_eq!(
        ids,
        vec![2, 3, 4, 100, 101, 102, 103, 104],
        "G's row and the rest survive the rerun; its TRUNCATE was applied once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_source_idle_for_weeks_is_remembered() {
    let _serial = serial().await;
    let rig = Rig::new(
        "idle",
        false,
        &[(ledger::REQUEST_WINDOW, &(2 * DAY_MS).to_string())],
    )
    .await;
    let s: Vec<String> = (0..10).map(|i| row(i, "s")).collect();
    let s: Vec<&str> = s.iter().map(String::as_str).collect();
    assert_eq!(rig.deliver("kafka:s/0", 0, &s).await, 10);
    // Forty days of other sources' commits: the idle source settles and
    // leaves the head for the archive.
    for day in 0..40 {
        clock::shift(DAY_MS);
        rig.deliver("kafka:other/0", day, &[&row(1000 + day as i64, "o")])
            .await;
    }
    let ledger = rig.ledger().await;
    assert!(
        !ledger.head().sources.contains_key("kafka:s/0") && !ledger.head().archive.is_empty(),
        "the idle source is archived: {:?}",
        ledger.head().sources.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        ledger.high_water_mark("kafka:s/0").await.unwrap(),
        Some(Position::from(9))
    );
    // The consumer is reset to the start: only what is new commits.
    let more: Vec<String> = (0..13).map(|i| row(i, "s")).collect();
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    assert_eq!(rig.deliver("kafka:s/0", 0, &more).await, 3);
    let ids = rig.ids().await;
    assert_eq!(ids.iter().filter(|id| **id < 1000).count(), 13);
    assert_eq!(ids.len(), 53, "no row twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_runs_spill_into_pages_and_a_late_request_in_a_gap_still_commits() {
    let _serial = serial().await;
    let rig = Rig::new("pages", false, &[]).await;
    // Sequence numbers far apart: every request is a run of its own.
    let seq = |i: u64| 1_000_000 + i * 1_000;
    let mut late = None;
    for i in 0..100u64 {
        let line = row(i as i64, "k");
        if i == 7 {
            // Held back in the queue: written now, committed last.
            late = Some(line);
            continue;
        }
        rig.deliver("kinesis:s/shard-0", seq(i), &[&line]).await;
        clock::shift(1_000);
    }
    let ledger = rig.ledger().await;
    let marks = ledger.marks("kinesis:s/shard-0").await.unwrap().unwrap();
    assert!(!marks.pages.is_empty(), "lower runs spilled into pages");
    // Early records again, cut otherwise: nothing commits.
    assert_eq!(
        rig.deliver("kinesis:s/shard-0", seq(3), &[&row(3, "k")])
            .await,
        0
    );
    // The late one, in a gap below the head's runs, commits.
    assert_eq!(
        rig.deliver("kinesis:s/shard-0", seq(7), &[late.as_deref().unwrap()])
            .await,
        1
    );
    let ids = rig.ids().await;
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_engines_orphan_cleanup_leaves_the_ledger_whole() {
    let _serial = serial().await;
    let rig = Rig::new("cleanup", false, &[]).await;
    let first: Vec<String> = (0..6).map(|i| row(i, "a")).collect();
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    rig.deliver("kafka:c/0", 0, &first[..3]).await;
    rig.deliver("kafka:c/0", 3, &first[3..]).await;
    harness::foreign_cleanup(rig.catalog().as_ref(), &rig.table).await;
    let loaded = rig.catalog().load_table(&rig.table).await.unwrap();
    assert!(
        !ledger::place::exposed(&loaded.metadata),
        "the ledger is beside the table, not under its location"
    );
    // Redeliveries and new input after the cleanup: exact.
    assert_eq!(rig.deliver("kafka:c/0", 0, &first).await, 0);
    assert_eq!(
        rig.deliver("kafka:c/0", 4, &[&row(4, "a"), &row(5, "a"), &row(6, "a")])
            .await,
        1
    );
    let ids = rig.ids().await;
    assert_eq!(ids, (0..7).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_destroyed_by_cleanup_is_a_clear_error_and_repair_restores_exactly_once() {
    let _serial = serial().await;
    // A ledger kept under the table's location, as earlier builds kept it.
    let rig = Rig::new("repair", false, &[]).await;
    let location = {
        let loaded = rig.catalog().load_table(&rig.table).await.unwrap();
        loaded.metadata.location().to_string()
    };
    let exposed = format!("{location}/metadata/ledger");
    set_property(&rig, ledger::place::LOCATION_PROPERTY, &exposed).await;
    let lines: Vec<String> = (0..9).map(|i| row(i, "r")).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    for chunk in 0..3u64 {
        let at = (chunk * 3) as usize;
        rig.deliver("kafka:r/0", chunk * 3, &lines[at..at + 3])
            .await;
    }
    let deleted = harness::foreign_cleanup(rig.catalog().as_ref(), &rig.table).await;
    assert!(deleted > 0, "the cleanup deleted the ledger");

    // The next commit names the repair instead of committing blind.
    rig.write(
        vec![span("kafka:r/0", 0, 9)],
        (0..10)
            .map(|i| (i.to_string(), Bytes::from(row(i, "r"))))
            .collect(),
        SourceKind::Kafka,
    )
    .await;
    let engine = CommitEngine::new(rig.catalog(), fast_retry());
    let request = rig.queued().await;
    let err = engine
        .append(&rig.table, vec![request.clone()])
        .await
        .unwrap_err();
    assert!(matches!(err, CommitError::LedgerMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("floe ledger repair t.repair"),
        "{err}"
    );
    assert!(err.is_transient(), "the requests stay queued");

    let rebuilt = engine.repair_ledger(&rig.table).await.unwrap();
    assert!(rebuilt.base.is_none());
    assert!(rebuilt.snapshots >= 3);
    let outcome = engine.append(&rig.table, vec![request]).await.unwrap();
    assert_eq!(outcome.records, 1, "only position 9 is new");
    let ids = rig.ids().await;
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_starts_from_the_newest_head_that_survives() {
    let _serial = serial().await;
    let rig = Rig::new("survivor", false, &[]).await;
    for i in 0..4u64 {
        rig.deliver(
            "kafka:v/0",
            i * 2,
            &[&row(i as i64 * 2, "v"), &row(i as i64 * 2 + 1, "v")],
        )
        .await;
    }
    let catalog = rig.catalog();
    let ledger = rig.ledger().await;
    let current = ledger.head_path().unwrap().to_string();
    // Only the current head is lost; the retired ones are still there.
    std::fs::remove_file(current.trim_start_matches("file://")).unwrap();
    let engine = CommitEngine::new(catalog, fast_retry());
    let rebuilt = engine.repair_ledger(&rig.table).await.unwrap();
    assert!(rebuilt.base.is_some(), "an older head survived");
    assert_eq!(
        rig.deliver("kafka:v/0", 0, &[&row(0, "v"), &row(1, "v")])
            .await,
        0
    );
    assert_eq!(
        rig.deliver("kafka:v/0", 6, &[&row(6, "v"), &row(7, "v"), &row(8, "v")])
            .await,
        1
    );
    let ids = rig.ids().await;
    assert_eq!(ids, (0..9).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_head_stays_while_a_snapshot_names_it() {
    let _serial = serial().await;
    let rig = Rig::new("retired", false, &[]).await;
    rig.deliver("kafka:w/0", 0, &[&row(0, "w")]).await;
    let catalog = rig.catalog();
    let before = catalog.load_table(&rig.table).await.unwrap();
    for i in 1..5u64 {
        rig.deliver("kafka:w/0", i, &[&row(i as i64, "w")]).await;
    }
    let opens = |metadata| {
        let store = Arc::new(LedgerStore::new(catalog.file_io().clone()));
        async move { Ledger::open(store, metadata).await }
    };
    assert!(
        opens(&before.metadata).await.is_ok(),
        "a head four commits old still reads for who loaded before"
    );
    // Past the grace period its snapshot still names it: another engine
    // may roll the table back to that snapshot, and a repair starts there.
    clock::shift(ledger::RETIRE_GRACE_MS + 1);
    rig.deliver("kafka:w/0", 5, &[&row(5, "w")]).await;
    assert!(opens(&before.metadata).await.is_ok());
    // Once expiry took the snapshot, orphan cleanup deletes it (past the
    // request window and the orphan window, as any ledger file).
    let report = rig.expire_all().await;
    assert!(report.expired_snapshots >= 5, "{report:?}");
    assert!(
        opens(&before.metadata).await.is_ok(),
        "not before its window"
    );
    let later = MaintainOptions {
        now_ms: clock::now_ms()
            + ledger::Windows::of(&before.metadata).request_ms
            + MaintainOptions::default().orphan_window_ms
            + 1,
        ..MaintainOptions::default()
    };
    let report = maintain(&catalog, &rig.table, &later).await.unwrap();
    assert!(!report.orphans.is_empty(), "{report:?}");
    assert!(matches!(
        opens(&before.metadata).await,
        Err(ledger::LedgerError::Missing { .. })
    ));
    assert_eq!(rig.ids().await, (0..6).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_long_after_keeps_what_the_snapshot_holds() {
    let _serial = serial().await;
    let rig = Rig::new("late_rollback", false, &[]).await;
    for i in 0..3u64 {
        rig.deliver("kafka:r/0", i, &[&row(i as i64, "r")]).await;
    }
    // Expiry leaves the target without ancestors: only its head knows
    // what the three commits before it held.
    rig.expire_all().await;
    let loaded = rig.catalog().load_table(&rig.table).await.unwrap();
    let target = loaded.metadata.current_snapshot_id().unwrap();
    assert_eq!(loaded.metadata.snapshots().count(), 1);
    // Two commits, each past the grace period, retire its head for good
    // under a rule that forgets heads by age alone.
    for i in 3..5u64 {
        clock::shift(ledger::RETIRE_GRACE_MS + 1);
        rig.deliver("kafka:r/0", i, &[&row(i as i64, "r")]).await;
    }
    harness::roll_back(rig.catalog().as_ref(), &rig.table, target).await;
    let again: Vec<String> = (0..5).map(|i| row(i, "r")).collect();
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    assert_eq!(
        rig.deliver("kafka:r/0", 0, &again).await,
        2,
        "only what the rollback undid commits again"
    );
    let ids = rig.ids().await;
    assert_eq!(ids, (0..5).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_a_head_deleted_outside_floe_waits_for_repair() {
    let _serial = serial().await;
    let rig = Rig::new("gone_rollback", false, &[]).await;
    for i in 0..3u64 {
        rig.deliver("kafka:g/0", i, &[&row(i as i64, "g")]).await;
    }
    rig.expire_all().await;
    let loaded = rig.catalog().load_table(&rig.table).await.unwrap();
    let target = loaded.metadata.current_snapshot().unwrap();
    let head = target.summary().additional_properties[ledger::PROPERTY].clone();
    let target = target.snapshot_id();
    rig.deliver("kafka:g/0", 3, &[&row(3, "g")]).await;
    harness::roll_back(rig.catalog().as_ref(), &rig.table, target).await;
    std::fs::remove_file(head.trim_start_matches("file://")).unwrap();

    // Rebuilt from the summaries alone, the ledger would not know 0..=2.
    rig.write(
        vec![span("kafka:g/0", 0, 3)],
        (0..4)
            .map(|i| (i.to_string(), Bytes::from(row(i, "g"))))
            .collect(),
        SourceKind::Kafka,
    )
    .await;
    let request = rig.queued().await;
    let engine = CommitEngine::new(rig.catalog(), fast_retry());
    let err = engine
        .append(&rig.table, vec![request.clone()])
        .await
        .unwrap_err();
    assert!(matches!(err, CommitError::LedgerMissing { .. }), "{err}");
    assert!(err.is_transient(), "the requests stay queued");
    let err = maintain(&rig.catalog(), &rig.table, &MaintainOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("floe ledger repair"), "{err}");

    // The operator's repair goes on, and says what it cannot know.
    let rebuilt = engine.repair_ledger(&rig.table).await.unwrap();
    assert_eq!(rebuilt.gap.as_deref(), Some(head.as_str()));
    assert!(rebuilt.base.is_none());
}

fn span(source: &str, first: u64, last: u64) -> SourceSpan {
    SourceSpan {
        source: source.into(),
        positions: Positions::Range {
            first: Position::from(first),
            last: Position::from(last),
        },
        stream: true,
    }
}

async fn set_property(rig: &Rig, key: &str, value: &str) {
    let catalog = rig.catalog();
    let loaded = catalog.load_table(&rig.table).await.unwrap();
    let result = floe_core::iceberg::spec::TableMetadataBuilder::new_from_metadata(
        (*loaded.metadata).clone(),
        Some(loaded.metadata_location.clone()),
    )
    .set_properties([(key.to_string(), value.to_string())].into())
    .unwrap()
    .build()
    .unwrap();
    catalog
        .commit(floe_core::catalog::TableCommit {
            base: loaded,
            metadata: result.metadata,
            updates: result.changes,
            requirements: Vec::new(),
        })
        .await
        .landed()
        .unwrap();
}

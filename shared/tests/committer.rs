//! The committer over many tables in one run: tables commit concurrently up
//! to the configured limit, and a run with a deadline hands back the messages
//! of the tables a slow catalog keeps from finishing (or starting) in time,
//! while the others are committed. Real SQLite catalog, real Parquet files;
//! the slowness is a latency the wrapper adds before the real commit.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use floe_core::catalog::{
    Catalog, CatalogError, CatalogRef, Committed, LoadedTable, SqliteCatalog, TableCommit,
};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::dlq::StorageDeadLetters;
use floe_core::faults::Faults;
use floe_core::iceberg::io::FileIO;
use floe_core::iceberg::{NamespaceIdent, TableCreation, TableIdent};
use floe_core::ident::{display, parse_table};
use floe_core::metrics::Counters;
use floe_core::pipeline::{Committer, PipelineError};
use floe_core::queue::Delivery;
use floe_core::tabledef;
use floe_test_support::{requests, scan};

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"v","required":false,"type":"string"}]}"#;

/// The real catalog, with `latency` before each commit of a table in `slow`
/// (all tables when `slow` is empty), counting commits in flight.
#[derive(Debug)]
struct Slow {
    inner: CatalogRef,
    slow: HashSet<String>,
    latency: Duration,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Slow {
    fn new(inner: CatalogRef, slow: &[&str], latency: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            slow: slow.iter().map(|s| s.to_string()).collect(),
            latency,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        })
    }
}

/// Decrements the in-flight count however the commit ends (a deadline drops it).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Catalog for Slow {
    fn file_io(&self) -> &FileIO {
        self.inner.file_io()
    }
    fn default_location(&self, ident: &TableIdent) -> String {
        self.inner.default_location(ident)
    }
    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        self.inner.ensure_namespace(namespace).await
    }
    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        self.inner.create_table(ident, creation).await
    }
    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        self.inner.load_table(ident).await
    }
    async fn commit(&self, commit: TableCommit) -> Committed {
        let n = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let _guard = InFlight(&self.in_flight);
        self.most_in_flight.fetch_max(n, Ordering::SeqCst);
        let table = display(&commit.base.ident);
        if self.slow.is_empty() || self.slow.contains(&table) {
            tokio::time::sleep(self.latency).await;
        }
        self.inner.commit(commit).await
    }
    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        self.inner.list_tables().await
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    catalog: CatalogRef,
    tables: Vec<TableIdent>,
}

async fn setup(names: &[&str]) -> Setup {
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
    let mut tables = Vec::new();
    for name in names {
        let ident = parse_table(name).unwrap();
        catalog.ensure_namespace(ident.namespace()).await.unwrap();
        let schema = tabledef::parse_schema(SCHEMA).unwrap();
        catalog
            .create_table(
                &ident,
                tabledef::creation(ident.name(), schema, Default::default(), Default::default()),
            )
            .await
            .unwrap();
        tables.push(ident);
    }
    Setup {
        _dir: dir,
        catalog,
        tables,
    }
}

fn committer(catalog: CatalogRef, concurrency: usize) -> Committer {
    let dead_letters = Arc::new(StorageDeadLetters::new(
        catalog.file_io().clone(),
        "file:///nonexistent-dlq",
    ));
    Committer::new(
        CommitEngine::new(catalog, RetryPolicy::default()),
        dead_letters,
        Faults::none(),
        Arc::new(Counters::default()),
    )
    .with_table_concurrency(concurrency)
}

/// Two requests per table (ids 10t..10t+2 and 10t+2..10t+4), as messages
/// whose receipt is `<table>#<n>`.
async fn deliveries(s: &Setup) -> Vec<Delivery> {
    let mut out = Vec::new();
    for (t, ident) in s.tables.iter().enumerate() {
        for n in 0..2i64 {
            let base = t as i64 * 10 + n * 2;
            let req =
                requests::write_request(s.catalog.as_ref(), ident, &[(base, "x"), (base + 1, "x")])
                    .await;
            out.push(Delivery {
                receipt: format!("{}#{n}", display(ident)),
                body: req.to_bytes().unwrap().into(),
                receive_count: 1,
            });
        }
    }
    out
}

async fn ids(catalog: &CatalogRef, ident: &TableIdent) -> Vec<i64> {
    let mut out: Vec<i64> = scan(catalog.as_ref(), ident)
        .await
        .iter()
        .flat_map(|b| {
            let col = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow_array::Int64Array>()
                .unwrap()
                .clone();
            col.values().to_vec()
        })
        .collect();
    out.sort();
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_one_run_commit_concurrently_up_to_the_limit() {
    let names = ["a.t0", "a.t1", "a.t2", "a.t3", "a.t4", "a.t5"];
    let s = setup(&names).await;
    let slow = Slow::new(s.catalog.clone(), &[], Duration::from_secs(1));
    let report = committer(slow.clone(), 3)
        .commit(deliveries(&s).await)
        .await;
    assert!(report.failed().is_empty(), "{:?}", report.tables);
    assert_eq!(report.done().len(), 12);
    let most = slow.most_in_flight.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&most),
        "{most} commits were in flight at once; the limit is 3"
    );
    for (t, ident) in s.tables.iter().enumerate() {
        let base = t as i64 * 10;
        assert_eq!(
            ids(&s.catalog, ident).await,
            (base..base + 4).collect::<Vec<_>>()
        );
    }
    // The report lists tables in name order whatever order they finished in.
    let order: Vec<&str> = report.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(order, names);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_the_deadline_cuts_short_are_released_and_the_rest_committed() {
    let s = setup(&["a.fast1", "a.slow1", "a.fast2", "a.slow2", "a.fast3"]).await;
    let stuck = Slow::new(
        s.catalog.clone(),
        &["a.slow1", "a.slow2"],
        Duration::from_secs(60),
    );
    let all = deliveries(&s).await;
    let started = Instant::now();
    let report = committer(stuck, 8)
        .commit_by(all.clone(), Some(Instant::now() + Duration::from_secs(10)))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run ended at its deadline, not after the slow catalog"
    );
    assert_eq!(
        sorted(report.failed()),
        ["a.slow1#0", "a.slow1#1", "a.slow2#0", "a.slow2#1"]
    );
    assert_eq!(
        sorted(report.done()),
        [
            "a.fast1#0",
            "a.fast1#1",
            "a.fast2#0",
            "a.fast2#1",
            "a.fast3#0",
            "a.fast3#1"
        ]
    );
    for t in report.tables.iter().filter(|t| t.table.contains("slow")) {
        assert!(
            matches!(&t.result, Err(PipelineError::Deadline { started: true, table }) if *table == t.table),
            "{:?}",
            t.result
        );
    }
    let by_name = |n: &str| s.tables.iter().find(|t| display(t) == n).unwrap().clone();
    assert_eq!(ids(&s.catalog, &by_name("a.fast1")).await, [0, 1, 2, 3]);
    assert_eq!(ids(&s.catalog, &by_name("a.fast2")).await, [20, 21, 22, 23]);
    assert_eq!(ids(&s.catalog, &by_name("a.fast3")).await, [40, 41, 42, 43]);
    assert!(ids(&s.catalog, &by_name("a.slow1")).await.is_empty());
    assert!(ids(&s.catalog, &by_name("a.slow2")).await.is_empty());

    // Redelivered (all of them, as SQS may regroup), on a catalog that
    // answers: the released tables commit, the committed ones are found in
    // their ledgers and commit nothing twice.
    let again = committer(s.catalog.clone(), 8)
        .commit_by(all, Some(Instant::now() + Duration::from_secs(60)))
        .await;
    assert!(again.failed().is_empty(), "{:?}", again.tables);
    for t in &again.tables {
        let outcome = t.result.as_ref().unwrap();
        if t.table.contains("slow") {
            assert_eq!(outcome.committed.len(), 2, "{}", t.table);
        } else {
            assert_eq!(outcome.duplicates.len(), 2, "{}", t.table);
            assert!(outcome.committed.is_empty(), "{}", t.table);
        }
    }
    assert_eq!(ids(&s.catalog, &by_name("a.slow1")).await, [10, 11, 12, 13]);
    assert_eq!(ids(&s.catalog, &by_name("a.slow2")).await, [30, 31, 32, 33]);
    assert_eq!(ids(&s.catalog, &by_name("a.fast1")).await, [0, 1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_waiting_for_a_slot_past_the_deadline_never_start() {
    // One at a time, the stuck table first (tables go in name order).
    let s = setup(&["a.a_stuck", "a.b", "a.c"]).await;
    let stuck = Slow::new(s.catalog.clone(), &["a.a_stuck"], Duration::from_secs(60));
    let report = committer(stuck.clone(), 1)
        .commit_by(
            deliveries(&s).await,
            Some(Instant::now() + Duration::from_secs(2)),
        )
        .await;
    assert_eq!(report.failed().len(), 6, "{:?}", report.tables);
    let started: Vec<(&str, bool)> = report
        .tables
        .iter()
        .map(|t| match &t.result {
            Err(PipelineError::Deadline { started, .. }) => (t.table.as_str(), *started),
            other => panic!("{}: {other:?}", t.table),
        })
        .collect();
    assert_eq!(
        started,
        [("a.a_stuck", true), ("a.b", false), ("a.c", false)]
    );
    assert_eq!(stuck.most_in_flight.load(Ordering::SeqCst), 1);
    for ident in &s.tables {
        assert!(
            ids(&s.catalog, ident).await.is_empty(),
            "{}",
            display(ident)
        );
    }
}

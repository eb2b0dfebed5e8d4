//! The pitfalls of Postgres CDC the seed guide lists, each through the whole
//! path: a real slot, `sync` into an embedded warehouse, and the Iceberg
//! table read back by iceberg-rust's scan and compared value by value.

use std::collections::BTreeMap;
use std::time::Duration;

use arrow_cast::display::array_value_to_string;
use floe_core::change::{ChangeFormat, ChangeOp, decode};
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use floe_core::iceberg::NamespaceIdent;
use floe_core::iceberg::spec::Type;
use floe_postgres::sync::{Stop, SyncError, SyncOptions, SyncReport, open, sync};
use floe_postgres::{PgConfig, setup};

use super::{client, config, fresh_db};

/// A fresh database `name` with `ddl` run and its publication and slot set
/// up for `tables`; `None` when Postgres tests are skipped.
pub(super) async fn prepared(name: &str, ddl: &str, tables: &[&str]) -> Option<(String, PgConfig)> {
    let conninfo = fresh_db(name).await?;
    client(&conninfo).await.batch_execute(ddl).await.unwrap();
    let mut cfg = config(&conninfo, name, tables);
    cfg.chunk_rows = 1000;
    setup(&cfg).await.unwrap();
    Some((conninfo, cfg))
}

pub(super) fn options() -> SyncOptions {
    SyncOptions::new(NamespaceIdent::new("raw".into()))
}

async fn run(floe: &Embedded, cfg: &PgConfig) -> Result<SyncReport, SyncError> {
    let opts = options();
    let mut source = open(floe, cfg, &opts.namespace).await?;
    sync(floe, &mut source, cfg, &opts).await
}

pub(super) fn warehouse() -> (tempfile::TempDir, Embedded) {
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    (dir, floe)
}

/// Row by `id` (as text), column → value as Arrow prints it (`NULL` for null).
pub(super) type Rows = BTreeMap<String, BTreeMap<String, String>>;

pub(super) async fn iceberg_rows(floe: &Embedded, table: &str) -> Rows {
    let ident = floe_core::ident::parse_table(table).unwrap();
    let mut rows = Rows::new();
    for batch in floe_test_support::scan(floe.catalog().as_ref(), &ident).await {
        let schema = batch.schema();
        for i in 0..batch.num_rows() {
            let mut row = BTreeMap::new();
            for (f, col) in schema.fields().iter().zip(batch.columns()) {
                let text = if col.is_null(i) {
                    "NULL".to_string()
                } else {
                    array_value_to_string(col, i).unwrap()
                };
                row.insert(f.name().clone(), text);
            }
            let id = row["id"].clone();
            assert!(rows.insert(id.clone(), row).is_none(), "id {id} twice");
        }
    }
    rows
}

async fn column_type(floe: &Embedded, table: &str, column: &str) -> String {
    let ident = floe_core::ident::parse_table(table).unwrap();
    let loaded = floe.catalog().load_table(&ident).await.unwrap();
    let schema = loaded.metadata.current_schema();
    match schema.field_by_name(column) {
        Some(f) => match f.field_type.as_ref() {
            Type::Primitive(p) => p.to_string(),
            other => other.to_string(),
        },
        None => "missing".into(),
    }
}

fn get<'a>(rows: &'a Rows, id: &str, column: &str) -> &'a str {
    rows.get(id)
        .unwrap_or_else(|| panic!("no row {id} in {rows:?}"))
        .get(column)
        .unwrap_or_else(|| panic!("no column {column} in row {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_on_conflict_update_of_an_existing_key_leaves_one_row() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_upsert",
        "CREATE TABLE orders (id bigint PRIMARY KEY, status text, amount numeric(10,2));
         INSERT INTO orders VALUES (1, 'new', 10.00), (2, 'new', 20.00);",
        &["public.orders"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    let db = client(&conninfo).await;
    db.batch_execute(
        "INSERT INTO orders VALUES (1, 'paid', 11.50)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status, amount = excluded.amount;
         INSERT INTO orders VALUES (3, 'new', 30.00)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status;
         INSERT INTO orders VALUES (1, 'shipped', 11.50)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status;",
    )
    .await
    .unwrap();
    run(&floe, &cfg).await.unwrap();
    let rows = iceberg_rows(&floe, "raw.orders").await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(get(&rows, "1", "status"), "shipped");
    assert_eq!(get(&rows, "1", "amount"), "11.50");
    assert_eq!(get(&rows, "2", "status"), "new");
    assert_eq!(get(&rows, "3", "amount"), "30.00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_empties_the_table_and_later_rows_land() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_truncate",
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 50) g;",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(iceberg_rows(&floe, "raw.t").await.len(), 50);
    let db = client(&conninfo).await;
    // Rows before the truncate in the same batch go too; rows after stay.
    db.batch_execute(
        "INSERT INTO t VALUES (51, 'gone');
         TRUNCATE t;
         INSERT INTO t VALUES (100, 'after'), (101, 'after too');
         UPDATE t SET v = 'updated' WHERE id = 101;",
    )
    .await
    .unwrap();
    run(&floe, &cfg).await.unwrap();
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["100", "101"]);
    assert_eq!(get(&rows, "101", "v"), "updated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_column_stays_in_iceberg_and_is_null_for_new_rows() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_dropcol",
        "CREATE TABLE t (id int PRIMARY KEY, a text, b text);
         INSERT INTO t VALUES (1, 'a1', 'b1');",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    let db = client(&conninfo).await;
    // A change before the drop and changes after it in one batch.
    db.batch_execute(
        "INSERT INTO t VALUES (2, 'a2', 'b2');
         ALTER TABLE t DROP COLUMN b;
         INSERT INTO t VALUES (3, 'a3');
         UPDATE t SET a = 'a1 again' WHERE id = 1;",
    )
    .await
    .unwrap();
    let report = run(&floe, &cfg).await.unwrap();
    assert!(
        report.ingest.rejected.is_empty(),
        "{:?}",
        report.ingest.rejected
    );
    assert_eq!(column_type(&floe, "raw.t", "b").await, "string");
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(get(&rows, "2", "b"), "b2", "written before the drop");
    assert_eq!(get(&rows, "3", "b"), "NULL");
    assert_eq!(get(&rows, "3", "a"), "a3");
    // The update is the whole row as Postgres has it now: no b.
    assert_eq!(get(&rows, "1", "a"), "a1 again");
    assert_eq!(get(&rows, "1", "b"), "NULL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn widened_column_types_widen_in_iceberg_and_a_narrowing_is_refused() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_widen",
        "CREATE TABLE t (id int PRIMARY KEY, n int, f real, d numeric(10,2), v varchar(5));
         INSERT INTO t VALUES (1, 7, 1.5, 12345678.91, 'short');",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(column_type(&floe, "raw.t", "n").await, "int");
    let db = client(&conninfo).await;
    db.batch_execute(
        "ALTER TABLE t ALTER COLUMN n TYPE bigint, ALTER COLUMN f TYPE double precision,
                       ALTER COLUMN d TYPE numeric(14,2), ALTER COLUMN v TYPE varchar(50);
         INSERT INTO t VALUES (2, 9000000000, 1e300, 123456789012.34, 'longer than five');
         UPDATE t SET n = n + 5000000000 WHERE id = 1;",
    )
    .await
    .unwrap();
    let report = run(&floe, &cfg).await.unwrap();
    assert!(
        report.ingest.rejected.is_empty(),
        "{:?}",
        report.ingest.rejected
    );
    assert_eq!(column_type(&floe, "raw.t", "n").await, "long");
    assert_eq!(column_type(&floe, "raw.t", "f").await, "double");
    assert_eq!(column_type(&floe, "raw.t", "d").await, "decimal(14, 2)");
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(get(&rows, "2", "n"), "9000000000");
    assert_eq!(get(&rows, "2", "d"), "123456789012.34");
    assert_eq!(get(&rows, "2", "v"), "longer than five");
    assert_eq!(get(&rows, "1", "n"), "5000000007");
    assert_eq!(get(&rows, "1", "d"), "12345678.91");

    // decimal → string is no promotion Iceberg has: an error naming the column.
    db.batch_execute(
        "ALTER TABLE t ALTER COLUMN d TYPE text; INSERT INTO t VALUES (3, 1, 1, 'x', 'x');",
    )
    .await
    .unwrap();
    let e = run(&floe, &cfg).await.unwrap_err().to_string();
    assert!(
        e.contains("raw.t") && e.contains(r#"column "d""#) && e.contains("floe pg resync"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_keep_their_instants_whatever_the_server_time_zone() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_tz",
        "ALTER DATABASE floe_pit_tz SET timezone TO 'America/New_York';
         CREATE TABLE t (id int PRIMARY KEY, at timestamptz, local timestamp);",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    // Written by a client in yet another zone, before (snapshot) and after (stream) the first sync.
    let writer = client(&conninfo).await;
    let insert = |id: i32| {
        format!(
            "SET timezone TO 'Asia/Shanghai';
             INSERT INTO t VALUES ({id}, '2024-03-10 02:30:00.123456+08', '2024-03-10 02:30:00.123456'),
                                  ({}, '2024-07-01 00:00:00+05:30', '1999-12-31 23:59:59')",
            id + 1
        )
    };
    writer.batch_execute(&insert(1)).await.unwrap();
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    writer.batch_execute(&insert(11)).await.unwrap();
    run(&floe, &cfg).await.unwrap();
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 4);
    for first in ["1", "11"] {
        assert_eq!(get(&rows, first, "at"), "2024-03-09T18:30:00.123456Z");
        assert_eq!(get(&rows, first, "local"), "2024-03-10T02:30:00.123456");
    }
    for second in ["2", "12"] {
        assert_eq!(get(&rows, second, "at"), "2024-06-30T18:30:00Z");
        assert_eq!(get(&rows, second, "local"), "1999-12-31T23:59:59");
    }
}

/// A change the table cannot take (a `NaN` for a decimal column) is
/// dead-lettered alone, named by table and field, in the flat `_op` form
/// that replays as the same change; the rest of its batch lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_table_cannot_take_is_dead_lettered_as_a_replayable_line() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_dead",
        "CREATE TABLE t (id int PRIMARY KEY, price numeric(10,2), note text);",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute("INSERT INTO t VALUES (1, 1.50, 'a'), (2, 'NaN', 'b'), (3, 2.25, 'c')")
        .await
        .unwrap();
    let (_dir, floe) = warehouse();
    let copied = run(&floe, &cfg).await.unwrap();
    db.batch_execute("INSERT INTO t VALUES (4, 'NaN', 'd'); UPDATE t SET note = 'z' WHERE id = 1")
        .await
        .unwrap();
    let streamed = run(&floe, &cfg).await.unwrap();
    // The copy's run also streams the insert made after the slot was
    // created: row 2 comes as an insert and as a snapshot read.
    for (report, ops, id) in [
        (&copied, &[ChangeOp::Insert, ChangeOp::Read][..], 2),
        (&streamed, &[ChangeOp::Insert][..], 4),
    ] {
        let rejected = &report.ingest.rejected;
        assert_eq!(rejected.len(), ops.len(), "{rejected:?}");
        for r in rejected {
            assert_eq!(
                (r.table.as_str(), r.field.as_str()),
                ("raw.t", "price"),
                "{r:?}"
            );
            let change = decode(r.record.as_bytes(), ChangeFormat::Auto).unwrap();
            assert!(ops.contains(&change.op), "{}", r.record);
            assert_eq!(change.position.as_deref(), Some(r.position.as_str()));
            assert_eq!(change.row.get("id"), Some(id.to_string().as_bytes()));
            assert_eq!(change.row.get("price"), Some(&b"\"NaN\""[..]));
        }
    }
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(get(&rows, "1", "note"), "z");
    assert_eq!(get(&rows, "3", "price"), "2.25");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numerics_stay_exact_with_and_without_a_declared_precision() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_numeric",
        "CREATE TABLE t (id int PRIMARY KEY, price numeric(10,2), wide numeric(38,10), free numeric);",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let values = "(1, 12345678.91, 1234567890123456789012345678.0123456789,
                   3.14159265358979323846264338327950288419716939937510),
                  (2, -0.01, -0.0000000001, 123456789012345678901234567890),
                  (3, 0, 0, 0.000000000000000000000000000001),
                  (4, NULL, NULL, 'NaN')";
    let db = client(&conninfo).await;
    db.batch_execute(&format!("INSERT INTO t VALUES {values}"))
        .await
        .unwrap();
    let (_dir, floe) = warehouse();
    let report = run(&floe, &cfg).await.unwrap();
    assert!(
        report.ingest.rejected.is_empty(),
        "{:?}",
        report.ingest.rejected
    );
    db.batch_execute(&format!(
        "INSERT INTO t SELECT id + 10, price, wide, free FROM (VALUES {values}) v(id, price, wide, free)"
    ))
    .await
    .unwrap();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(column_type(&floe, "raw.t", "price").await, "decimal(10, 2)");
    assert_eq!(column_type(&floe, "raw.t", "wide").await, "decimal(38, 10)");
    assert_eq!(column_type(&floe, "raw.t", "free").await, "string");
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 8);
    for base in [0, 10] {
        let id = |n: i32| (n + base).to_string();
        assert_eq!(get(&rows, &id(1), "price"), "12345678.91");
        assert_eq!(
            get(&rows, &id(1), "wide"),
            "1234567890123456789012345678.0123456789"
        );
        assert_eq!(
            get(&rows, &id(1), "free"),
            "3.14159265358979323846264338327950288419716939937510"
        );
        assert_eq!(get(&rows, &id(2), "price"), "-0.01");
        assert_eq!(get(&rows, &id(2), "wide"), "-0.0000000001");
        assert_eq!(get(&rows, &id(2), "free"), "123456789012345678901234567890");
        assert_eq!(
            get(&rows, &id(3), "free"),
            "0.000000000000000000000000000001"
        );
        assert_eq!(get(&rows, &id(4), "free"), "NaN");
        assert_eq!(get(&rows, &id(4), "price"), "NULL");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_added_to_the_publication_later_is_copied_then_streamed() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_addtable",
        "CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'a');",
        &["public.a"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    let db = client(&conninfo).await;
    // Rows written before the table joins the publication reach floe only
    // through its snapshot; the ones after, through the stream as well.
    db.batch_execute(
        "CREATE TABLE b (id int PRIMARY KEY, v text);
         INSERT INTO b SELECT g, 'before' FROM generate_series(1, 2500) g;
         INSERT INTO a VALUES (2, 'a');
         ALTER PUBLICATION floe_pit_addtable_pub ADD TABLE b;
         INSERT INTO b VALUES (5000, 'after');
         UPDATE b SET v = 'updated after' WHERE id = 7;
         DELETE FROM b WHERE id = 8;",
    )
    .await
    .unwrap();
    let mut both = cfg.clone();
    both.tables.push("public.b".into());
    let report = run(&floe, &both).await.unwrap();
    assert!(report.snapshot_done);
    db.batch_execute("INSERT INTO b VALUES (5001, 'streamed'); UPDATE a SET v = 'a2' WHERE id = 1")
        .await
        .unwrap();
    run(&floe, &both).await.unwrap();
    let b = iceberg_rows(&floe, "raw.b").await;
    assert_eq!(b.len(), 2500 - 1 + 2);
    assert_eq!(get(&b, "7", "v"), "updated after");
    assert!(!b.contains_key("8"));
    assert_eq!(get(&b, "5001", "v"), "streamed");
    let a = iceberg_rows(&floe, "raw.a").await;
    assert_eq!(a.len(), 2);
    assert_eq!(get(&a, "1", "v"), "a2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_in_transaction_timeout_on_the_server_does_not_break_a_long_snapshot() {
    let Some((conninfo, mut cfg)) = prepared(
        "floe_pit_idle",
        "ALTER DATABASE floe_pit_idle SET idle_in_transaction_session_timeout = '200ms';
         ALTER DATABASE floe_pit_idle SET idle_session_timeout = '300ms';
         CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 6000) g;",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    cfg.chunk_rows = 1000;
    // Every commit takes longer than both timeouts: a sync that held a
    // transaction (or its session) idle across chunks would be cut off.
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none())
        .unwrap()
        .with_commit_latency(Duration::from_millis(600));
    let report = run(&floe, &cfg).await.unwrap();
    assert!(report.snapshot_done && report.batches >= 6, "{report:?}");
    // This test's own session would not outlive idle_session_timeout.
    let db = client(&conninfo).await;
    assert!(
        matches!(report.stop, Stop::CaughtUp | Stop::Empty),
        "{report:?}"
    );
    db.batch_execute("DELETE FROM t WHERE id <= 10")
        .await
        .unwrap();
    let md5: String = db
        .query_one("SELECT md5('6000')", &[])
        .await
        .unwrap()
        .get(0);
    run(&floe, &cfg).await.unwrap();
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 5990);
    assert_eq!(get(&rows, "6000", "v"), md5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_copy_is_compacted_once_it_finishes_and_streaming_goes_on() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_copy_compacted",
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 6500) g;",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    let live = || async {
        let ident = floe_core::ident::parse_table("raw.t").unwrap();
        let loaded = floe.catalog().load_table(&ident).await.unwrap();
        floe_core::commit::live::LiveFiles::load(floe.catalog().file_io(), &loaded.metadata)
            .await
            .unwrap()
    };
    let report = run(&floe, &cfg).await.unwrap();
    assert!(report.snapshot_done, "{report:?}");
    // Seven 1,000-row chunks, one file each, became one.
    let after_copy = live().await;
    assert_eq!(after_copy.data.len(), 1, "{:?}", after_copy.data.len());
    assert_eq!(after_copy.data[0].file.record_count(), 6500);
    let db = client(&conninfo).await;
    db.batch_execute(
        "UPDATE t SET v = 'changed' WHERE id IN (1, 3000, 6500);
         DELETE FROM t WHERE id = 2;
         INSERT INTO t VALUES (7000, 'new');",
    )
    .await
    .unwrap();
    // A later run streams; the copy is not compacted again.
    run(&floe, &cfg).await.unwrap();
    let streamed = live().await;
    assert_eq!(
        streamed.data.len(),
        2,
        "the stream's own file beside the copy's"
    );
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 6500);
    assert!(!rows.contains_key("2"));
    for id in ["1", "3000", "6500"] {
        assert_eq!(get(&rows, id, "v"), "changed");
    }
    assert_eq!(get(&rows, "7000", "v"), "new");
    assert_eq!(get(&rows, "4", "v"), "v4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_runs_stop_before_the_deadline_and_the_snapshot_spans_runs() {
    let Some((conninfo, mut cfg)) = prepared(
        "floe_pit_bounded",
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 4000) g;",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    cfg.chunk_rows = 500;
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none())
        .unwrap()
        .with_commit_latency(Duration::from_millis(300));
    // A writer that never stops, as in production.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, db) = (stop.clone(), client(&conninfo).await);
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                db.execute(
                    "UPDATE t SET v = 'w' || $1::int WHERE id = $1",
                    &[&(i % 4000 + 1)],
                )
                .await
                .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs < 40, "the snapshot never finished");
        let mut opts = options();
        let budget = Duration::from_millis(1500);
        let started = std::time::Instant::now();
        opts.deadline = Some(started + budget);
        let mut source = open(&floe, &cfg, &opts.namespace).await.unwrap();
        let report = sync(&floe, &mut source, &cfg, &opts).await.unwrap();
        // A run ends within its budget plus the one batch it was in.
        assert!(
            started.elapsed() < budget + report.longest_batch + Duration::from_millis(500),
            "{:?} for a {budget:?} budget: {report:?}",
            started.elapsed()
        );
        if report.snapshot_done {
            // Beside a steady writer the run still ends: caught up, or out of time.
            assert!(
                matches!(report.stop, Stop::CaughtUp | Stop::Deadline),
                "{report:?}"
            );
            break;
        }
        assert_eq!(report.stop, Stop::Deadline, "{report:?}");
    }
    assert!(
        runs >= 2,
        "the snapshot fit in one run: nothing was bounded"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    run(&floe, &cfg).await.unwrap();
    let rows = iceberg_rows(&floe, "raw.t").await;
    let db = client(&conninfo).await;
    let expected: Vec<(i32, String)> = db
        .query("SELECT id, v FROM t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows.len(), expected.len());
    for (id, v) in expected {
        assert_eq!(get(&rows, &id.to_string(), "v"), v, "row {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_leaves_a_toasted_value_unchanged_keeps_it() {
    let Some((conninfo, cfg)) = prepared(
        "floe_pit_toast",
        "CREATE TABLE t (id int PRIMARY KEY, status text, note text);
         ALTER TABLE t ALTER COLUMN note SET STORAGE EXTERNAL;
         INSERT INTO t SELECT g, 'new', repeat(md5(g::text), 200) FROM generate_series(1, 3000) g;",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let db = client(&conninfo).await;
    let (_dir, floe) = warehouse();
    // Before the copy reaches them, then after: REPLICA IDENTITY DEFAULT
    // sends neither the old row nor the unchanged note.
    db.batch_execute("UPDATE t SET status = 'early' WHERE id IN (5, 2999)")
        .await
        .unwrap();
    let report = run(&floe, &cfg).await.unwrap();
    assert!(
        report.ingest.rejected.is_empty(),
        "{:?}",
        report.ingest.rejected
    );
    db.batch_execute(
        "UPDATE t SET status = 'paid' WHERE id IN (1, 2, 3);
         UPDATE t SET status = 'gone soon' WHERE id = 4;
         DELETE FROM t WHERE id = 4;
         UPDATE t SET note = 'short now' WHERE id = 6;
         UPDATE t SET status = 'after the note changed' WHERE id = 6;",
    )
    .await
    .unwrap();
    let report = run(&floe, &cfg).await.unwrap();
    assert!(
        report.ingest.rejected.is_empty(),
        "{:?}",
        report.ingest.rejected
    );
    let rows = iceberg_rows(&floe, "raw.t").await;
    assert_eq!(rows.len(), 2999);
    let note = |id: i32| get(&rows, &id.to_string(), "note").to_string();
    for (id, status) in [(1, "paid"), (3, "paid"), (5, "early"), (2999, "early")] {
        assert_eq!(get(&rows, &id.to_string(), "status"), status, "row {id}");
        let want: String = db
            .query_one("SELECT note FROM t WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
        assert_eq!(note(id), want, "row {id}'s note");
        assert_eq!(want.len(), 6400);
    }
    assert!(!rows.contains_key("4"));
    assert_eq!(get(&rows, "6", "note"), "short now");
    assert_eq!(get(&rows, "6", "status"), "after the note changed");
}

/// A run draining a backlog of many batches reads each next batch while it
/// writes the one before (its peek reads past the batch still held in the
/// slot): every batch is committed once and the run ends caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_reading_ahead_commits_every_batch_once() {
    let Some((conninfo, mut cfg)) = prepared(
        "floe_drain",
        "CREATE TABLE t (id int PRIMARY KEY, v int, note text)",
        &["public.t"],
    )
    .await
    else {
        return;
    };
    let (_dir, floe) = warehouse();
    run(&floe, &cfg).await.unwrap();
    let db = client(&conninfo).await;
    for round in 0..20 {
        db.batch_execute(&format!(
            "INSERT INTO t SELECT g, g, 'n' || g FROM generate_series({0} * 100 + 1, {0} * 100 + 100) g;
             UPDATE t SET v = v + 1000 WHERE id % 7 = {1};
             DELETE FROM t WHERE id = {0} * 50 + 3;",
            round,
            round % 7
        ))
        .await
        .unwrap();
    }
    cfg.max_changes = 250;
    let report = run(&floe, &cfg).await.unwrap();
    // Empty when the last batch ended exactly at the stream's end.
    assert!(
        matches!(report.stop, Stop::CaughtUp | Stop::Empty),
        "{:?}",
        report.stop
    );
    assert!(report.batches >= 8, "{} batches", report.batches);
    let rows = iceberg_rows(&floe, "raw.t").await;
    let want = db
        .query("SELECT id::text, v::text, note FROM t ORDER BY id", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), want.len());
    for r in &want {
        let id: String = r.get(0);
        let row = &rows[&id];
        assert_eq!(row["v"], r.get::<_, String>(1), "id {id}");
        assert_eq!(row["note"], r.get::<_, String>(2), "id {id}");
    }
}

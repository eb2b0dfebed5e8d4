//! A slot that loses changes (dropped, dropped and created again, or
//! invalidated by Postgres with `wal_status = lost`) stops the sync with an
//! error naming `floe pg resync`, and after the resync the tables equal
//! Postgres again: never a silent gap.

use std::sync::OnceLock;

use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use floe_core::iceberg::NamespaceIdent;
use floe_postgres::status::status;
use floe_postgres::sync::{SyncError, SyncOptions, open, resync, sync};
use floe_postgres::{PgConfig, setup};
use tokio_postgres::Client;

use super::{client, config, fresh_db};

fn options() -> SyncOptions {
    SyncOptions::new(NamespaceIdent::new("raw".into()))
}

async fn run(floe: &Embedded, cfg: &PgConfig) -> Result<(), SyncError> {
    let opts = options();
    let mut source = open(floe, cfg, &opts.namespace).await?;
    sync(floe, &mut source, cfg, &opts).await.map(|_| ())
}

/// `id:v` of every row of the Iceberg table, in key order.
async fn iceberg_ids(floe: &Embedded) -> Vec<String> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    let ident = floe_core::ident::parse_table("raw.t").unwrap();
    let mut out = Vec::new();
    for b in floe_test_support::scan(floe.catalog().as_ref(), &ident).await {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int32Type>();
        let v = b.column_by_name("v").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push(format!("{}:{}", id.value(i), v.value(i)));
        }
    }
    out.sort_by_key(|s| s.split(':').next().and_then(|n| n.parse::<i32>().ok()));
    out
}

async fn postgres_ids(db: &Client) -> Vec<String> {
    db.query("SELECT id || ':' || v FROM t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn assert_lost(floe: &Embedded, cfg: &PgConfig, how: &str) {
    let e = run(floe, cfg).await.unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, SyncError::SlotLost { .. })
            && text.contains(how)
            && text.contains("floe pg resync")
            && text.contains("public.t"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_slot_is_an_error_naming_resync_and_resync_repairs_the_table() {
    let Some(conninfo) = fresh_db("floe_slot_drop").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_slot_drop", &["public.t"]);
    setup(&cfg).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    run(&floe, &cfg).await.unwrap();

    // Changes while no slot exists are never decoded.
    db.batch_execute(
        "SELECT pg_drop_replication_slot('floe_slot_drop');
         DELETE FROM t WHERE id <= 5; UPDATE t SET v = 'gap' WHERE id = 50;
         INSERT INTO t VALUES (1000, 'gap');",
    )
    .await
    .unwrap();
    assert_lost(&floe, &cfg, "dropped").await;
    let s = status(&floe, &cfg, &options().namespace, 0).await.unwrap();
    assert!(s.health.is_none() && s.slot_lost());
    assert_eq!(s.tables[0].snapshot, "done");

    // `floe pg setup` makes a new slot, which starts after the gap.
    setup(&cfg).await.unwrap();
    db.batch_execute("INSERT INTO t VALUES (1001, 'after the new slot')")
        .await
        .unwrap();
    assert_lost(&floe, &cfg, "created again").await;

    resync(&floe, &cfg, &options()).await.unwrap();
    db.batch_execute("UPDATE t SET v = 'during the copy' WHERE id = 60")
        .await
        .unwrap();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(iceberg_ids(&floe).await, postgres_ids(&db).await);
    // And it streams on from the new slot.
    db.batch_execute("DELETE FROM t WHERE id = 1000")
        .await
        .unwrap();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(iceberg_ids(&floe).await, postgres_ids(&db).await);
}

/// A cluster whose slots Postgres invalidates after 1 MB of unread WAL
/// (1 MB segments), so a test can lose one in seconds; its conninfo. Its own
/// data directory (pg.sh names it by FLOE_PG_PORT), on the port pg.sh chose.
fn small_wal_cluster() -> Option<&'static str> {
    static CLUSTER: OnceLock<Option<String>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            super::cluster()?;
            let script = floe_test_support::services::repo().join("local-dev/pg.sh");
            let out = std::process::Command::new("bash")
                .arg(&script)
                .env("FLOE_PG_PORT", "15434")
                .env("FLOE_PG_INITDB_OPTS", "--wal-segsize=1")
                .env(
                    "FLOE_PG_OPTS",
                    "-c max_slot_wal_keep_size=1MB -c min_wal_size=2MB -c max_wal_size=4MB -c wal_keep_size=0",
                )
                .output()
                .expect("running local-dev/pg.sh");
            assert!(
                out.status.success(),
                "pg.sh (FLOE_PG_PORT=15434) failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout)
                .ok()
                .and_then(|t| t.lines().last().map(str::to_string))
        })
        .as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_slot_is_an_error_naming_resync_never_a_silent_gap() {
    let Some(base) = small_wal_cluster() else {
        return;
    };
    let admin = client(base).await;
    admin
        .batch_execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'floe_slot_lost'",
        )
        .await
        .unwrap();
    for sql in [
        "DROP DATABASE IF EXISTS floe_slot_lost WITH (FORCE)",
        "CREATE DATABASE floe_slot_lost",
    ] {
        admin.batch_execute(sql).await.unwrap();
    }
    let conninfo = format!("{base} dbname=floe_slot_lost");
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, v text);
         CREATE TABLE filler (id int, pad text);
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 20) g;",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_slot_lost", &["public.t"]);
    setup(&cfg).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    run(&floe, &cfg).await.unwrap();

    // A change floe never reads, then WAL past max_slot_wal_keep_size and
    // checkpoints until Postgres gives the slot up.
    db.batch_execute("DELETE FROM t WHERE id = 3; INSERT INTO t VALUES (99, 'lost change')")
        .await
        .unwrap();
    let mut status = String::new();
    for _ in 0..30 {
        db.batch_execute(
            "INSERT INTO filler SELECT g, repeat('x', 400) FROM generate_series(1, 5000) g;
             SELECT pg_switch_wal(); CHECKPOINT;",
        )
        .await
        .unwrap();
        status = db
            .query_one(
                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'floe_slot_lost'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, Option<String>>(0)
            .unwrap_or_default();
        if status == "lost" {
            break;
        }
    }
    assert_eq!(status, "lost", "Postgres did not invalidate the slot");
    assert_lost(&floe, &cfg, "wal_status = lost").await;

    resync(&floe, &cfg, &options()).await.unwrap();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(iceberg_ids(&floe).await, postgres_ids(&db).await);
    assert!(
        iceberg_ids(&floe)
            .await
            .contains(&"99:lost change".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_left_holding_the_slot_is_waited_for_then_ended() {
    let Some(conninfo) = fresh_db("floe_slot_held").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'one')",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_slot_held", &["public.t"]);
    setup(&cfg).await.unwrap();
    // A stand-in for a killed run whose server session still decodes: a
    // streaming reader that keeps the slot active until it is ended.
    let bin = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|d| format!("{}/pg_recvlogical", d.trim()))
        .unwrap_or_else(|| "pg_recvlogical".into());
    let mut holder = std::process::Command::new(bin)
        .args([
            "-d",
            &conninfo,
            "-S",
            "floe_slot_held",
            "--start",
            "--no-loop",
            "-f",
            "/dev/null",
        ])
        .args([
            "-o",
            "proto_version=1",
            "-o",
            "publication_names=floe_slot_held_pub",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("pg_recvlogical");
    let active = || async {
        db.query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = 'floe_slot_held'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, bool>(0)
    };
    let mut held = false;
    for _ in 0..50 {
        if active().await {
            held = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(held, "pg_recvlogical never took the slot");
    let dir = tempfile::tempdir().unwrap();
    let floe = Embedded::open(dir.path(), Faults::none()).unwrap();
    run(&floe, &cfg).await.unwrap();
    assert_eq!(iceberg_ids(&floe).await, ["1:one"]);
    let status = holder.wait().unwrap();
    assert!(!status.success(), "the holder's session was ended");
}

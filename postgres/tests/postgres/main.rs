//! The Postgres source against a real Postgres (started by local-dev/pg.sh).
//! Each test has its own database, slot and publication, so they run in parallel.
//! Set FLOE_PG_SKIP=1 to skip them where no Postgres can run.

mod binary_copy;
mod binary_stream;
mod copy_appends;
mod pitfalls;
mod slots;
mod stream;
mod tls;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use floe_postgres::{PgBatch, PgConfig, PgError, PgSource, SourceState, TableProgress, setup};
use serde_json::{Map, Value};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// Conninfo of the test cluster, or `None` when FLOE_PG_SKIP=1.
fn cluster() -> Option<String> {
    static CONNINFO: OnceLock<Option<String>> = OnceLock::new();
    CONNINFO
        .get_or_init(|| {
            if std::env::var("FLOE_PG_SKIP").as_deref() == Ok("1") {
                eprintln!("!!! FLOE_PG_SKIP=1: SKIPPING the Postgres source tests !!!");
                return None;
            }
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../local-dev/pg.sh");
            let out = std::process::Command::new("bash")
                .arg(script)
                .output()
                .expect("running local-dev/pg.sh");
            assert!(
                out.status.success(),
                "local-dev/pg.sh failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).expect("conninfo is UTF-8");
            Some(
                text.lines()
                    .last()
                    .expect("pg.sh printed a conninfo")
                    .to_string(),
            )
        })
        .clone()
}

async fn client(conninfo: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A fresh database `name` (its slot `name` dropped first); returns its conninfo.
async fn fresh_db(name: &str) -> Option<String> {
    let base = cluster()?;
    let admin = client(&base).await;
    admin
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .unwrap();
    // Each on its own: neither may run inside a (multi-statement) transaction.
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    Some(format!("{base} dbname={name}"))
}

fn config(conninfo: &str, name: &str, tables: &[&str]) -> PgConfig {
    PgConfig::new(
        conninfo,
        name,
        format!("{name}_pub"),
        tables.iter().map(|t| t.to_string()).collect(),
    )
}

fn done(tables: &[&str]) -> SourceState {
    let mut state = SourceState::default();
    for t in tables {
        state
            .snapshot
            .tables
            .insert(t.to_string(), TableProgress::Done);
    }
    state
}

fn parse(line: &str) -> Map<String, Value> {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad line {line}: {e}"))
}

/// The table's changes in the flat `_op` form, as the writer would read them.
fn lines(batch: &PgBatch, table: &str) -> Vec<String> {
    batch
        .tables
        .iter()
        .filter(|t| t.table == table)
        .flat_map(|t| t.lines())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decodes_inserts_updates_deletes_truncates() {
    let Some(conninfo) = fresh_db("floe_decode").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int8 PRIMARY KEY, amount numeric(40,9), at timestamptz,
                         note text, big text, flag bool, raw bytea, doc jsonb, f float8);
         ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL;
         CREATE TABLE other (id int PRIMARY KEY);",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_decode", &["public.t"]);
    setup(&cfg).await.unwrap();
    setup(&cfg).await.unwrap(); // idempotent
    // One transaction per statement.
    for sql in [
        "INSERT INTO t VALUES (1, 12345678901234567890.123456789,
                               '2024-01-02 03:04:05.123456+00', 'one', NULL, true,
                               '\\x00ff10', '{\"a\": [1, 2]}', 'NaN')",
        "INSERT INTO t (id) VALUES (2)",
        "INSERT INTO other VALUES (7)",
        "INSERT INTO t (id, big) SELECT 3, string_agg(md5(i::text), '') FROM generate_series(1, 200) i",
        "UPDATE t SET note = 'changed' WHERE id = 3",
        "UPDATE t SET note = 'two' WHERE id = 2",
        "DELETE FROM t WHERE id = 1",
        "TRUNCATE t",
    ] {
        db.batch_execute(sql).await.unwrap();
    }
    let mut source = PgSource::connect(cfg).await.unwrap();
    let batch = source.read_batch(&done(&["public.t"])).await.unwrap();
    assert_eq!(batch.tables.len(), 1, "the unconfigured table is skipped");
    let got = lines(&batch, "public.t");
    let ops: Vec<String> = got
        .iter()
        .map(|l| parse(l)["_op"].as_str().unwrap().to_string())
        .collect();
    // The update of 3 left its TOASTed value out, and row 3 was gone (the
    // truncate) when floe read the value back: the update is dropped, its
    // row's removal comes later in the stream anyway.
    assert_eq!(ops, ["c", "c", "c", "u", "d", "truncate"]);

    // Numeric digits survive verbatim: checked on the raw text, not through
    // f64. numeric(40,9) is wider than Iceberg's decimals, so a string.
    assert!(
        got[0].contains(r#""amount":"12345678901234567890.123456789""#),
        "{}",
        got[0]
    );
    let first = parse(&got[0]);
    assert_eq!(first["at"], "2024-01-02T03:04:05.123456+00:00");
    assert_eq!(first["note"], "one");
    assert_eq!(first["big"], Value::Null);
    assert_eq!(first["flag"], true);
    assert_eq!(first["raw"], "AP8Q");
    assert_eq!(first["doc"], r#"{"a": [1, 2]}"#);
    assert_eq!(first["f"], "NaN");
    assert_eq!(first["id"], 1);
    assert!(first["_ts"].as_i64().unwrap() > 1_600_000_000_000);

    let nulls = parse(&got[1]);
    assert_eq!(nulls["amount"], Value::Null);
    assert_eq!(nulls["note"], Value::Null);

    assert_eq!(parse(&got[2])["big"].as_str().unwrap().len(), 6400);
    assert_eq!(parse(&got[3])["note"], "two");

    let delete = parse(&got[4]);
    assert_eq!(delete["id"], 1);
    assert!(
        !delete.contains_key("note"),
        "a default-identity delete carries the key only"
    );

    // Positions: one commit per statement, increasing, ending at last_lsn.
    let lsns: Vec<u64> = got
        .iter()
        .map(|l| parse(l)["_pos"].as_u64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    assert!(*lsns.last().unwrap() <= batch.last_lsn);
    assert!(batch.first_lsn <= lsns[0]);

    // Nothing moved the slot; after the caller's commit and advance, nothing is left.
    let before = source.confirmed_flush_lsn().await.unwrap();
    assert!(before < batch.first_lsn);
    source.advance(batch.last_lsn).await.unwrap();
    assert_eq!(source.confirmed_flush_lsn().await.unwrap(), batch.last_lsn);
    let mut state = done(&["public.t"]);
    state.committed_lsn = Some(batch.last_lsn);
    let again = source.read_batch(&state).await.unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_identity_fills_unchanged_toast() {
    let Some(conninfo) = fresh_db("floe_full").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, note text, big text);
         ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL;
         ALTER TABLE t REPLICA IDENTITY FULL;",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_full", &["t"]);
    setup(&cfg).await.unwrap();
    db.batch_execute(
        "INSERT INTO t SELECT 1, 'a', string_agg(md5(i::text), '') FROM generate_series(1, 200) i;
         UPDATE t SET note = 'b';
         DELETE FROM t;",
    )
    .await
    .unwrap();
    let mut source = PgSource::connect(cfg).await.unwrap();
    let batch = source.read_batch(&done(&["public.t"])).await.unwrap();
    let got = lines(&batch, "public.t");
    assert_eq!(got.len(), 3, "{batch:?}");
    let update = parse(&got[1]);
    assert_eq!(update["note"], "b");
    assert_eq!(update["big"].as_str().unwrap().len(), 6400);
    let delete = parse(&got[2]);
    assert_eq!(
        (delete["_op"].as_str(), delete["note"].as_str()),
        (Some("d"), Some("b"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_errors_name_the_fix() {
    let Some(conninfo) = fresh_db("floe_preflight").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE nokey (v int);
         DROP ROLE IF EXISTS floe_norepl; CREATE ROLE floe_norepl LOGIN;",
    )
    .await
    .unwrap();
    let cfg = config(&conninfo, "floe_preflight", &["public.t"]);
    let err = |e: PgError| e.to_string();

    // No slot.
    db.batch_execute("CREATE PUBLICATION floe_preflight_pub FOR TABLE t")
        .await
        .unwrap();
    let e = err(PgSource::connect(cfg.clone()).await.err().unwrap());
    assert!(
        e.contains("SELECT pg_create_logical_replication_slot('floe_preflight', 'pgoutput')"),
        "{e}"
    );

    // No publication.
    db.batch_execute("DROP PUBLICATION floe_preflight_pub")
        .await
        .unwrap();
    db.batch_execute("SELECT pg_create_logical_replication_slot('floe_preflight', 'pgoutput')")
        .await
        .unwrap();
    let e = err(PgSource::connect(cfg.clone()).await.err().unwrap());
    assert!(
        e.contains(r#"CREATE PUBLICATION "floe_preflight_pub" FOR TABLE "public"."t""#),
        "{e}"
    );

    // A table not in the publication, and one without a primary key.
    db.batch_execute("CREATE PUBLICATION floe_preflight_pub FOR TABLE nokey")
        .await
        .unwrap();
    let e = err(PgSource::connect(cfg.clone()).await.err().unwrap());
    assert!(
        e.contains(r#"ALTER PUBLICATION "floe_preflight_pub" ADD TABLE "public"."t""#),
        "{e}"
    );
    let mut nokey = cfg.clone();
    nokey.tables = vec!["public.nokey".into()];
    let e = err(PgSource::connect(nokey).await.err().unwrap());
    assert!(
        e.contains("has no primary key") && e.contains("ADD PRIMARY KEY"),
        "{e}"
    );

    // A role without REPLICATION.
    let mut norepl = cfg.clone();
    norepl.conninfo = format!("{conninfo} user=floe_norepl");
    let e = err(PgSource::connect(norepl).await.err().unwrap());
    assert!(
        e.contains(r#"ALTER ROLE "floe_norepl" WITH REPLICATION;"#),
        "{e}"
    );

    // wal_level cannot change without a restart: its message is checked as text.
    let e = PgError::WalLevel {
        actual: "replica".into(),
    }
    .to_string();
    assert!(e.contains("ALTER SYSTEM SET wal_level = logical;") && e.contains("restart"));

    // setup() repairs the publication and then everything passes.
    setup(&cfg).await.unwrap();
    PgSource::connect(cfg).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_column_shows_in_schema_and_lines() {
    let Some(conninfo) = fresh_db("floe_addcol").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute("CREATE TABLE t (id int PRIMARY KEY, a text)")
        .await
        .unwrap();
    let cfg = config(&conninfo, "floe_addcol", &["public.t"]);
    setup(&cfg).await.unwrap();
    let mut source = PgSource::connect(cfg).await.unwrap();
    let schema = source.table_schema("public.t").await.unwrap();
    assert_eq!(schema.primary_key, ["id"]);
    db.batch_execute(
        "INSERT INTO t VALUES (1, 'x');
         ALTER TABLE t ADD COLUMN price numeric(10,2);
         INSERT INTO t VALUES (2, 'y', 3.50);",
    )
    .await
    .unwrap();
    let batch = source.read_batch(&done(&["public.t"])).await.unwrap();
    let t = &batch.tables[0];
    let names: Vec<&str> = t.relation.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["id", "a", "price"]);
    assert_eq!(t.relation.columns[2].type_name, "numeric(10,2)");
    let iceberg = t.relation.iceberg_schema().unwrap();
    assert_eq!(
        iceberg
            .field_by_name("price")
            .unwrap()
            .field_type
            .to_string(),
        "decimal(10, 2)"
    );
    let t = t.lines();
    assert!(!parse(&t[0]).contains_key("price"));
    assert!(t[1].contains(r#""price":3.50"#), "{}", t[1]);
}

/// Key → row without the `_op` fields.
type Model = BTreeMap<i64, Map<String, Value>>;

fn apply(model: &mut Model, batch: &PgBatch, table: &str) {
    for line in lines(batch, table) {
        let mut row = parse(&line);
        let op = row.remove("_op").unwrap();
        row.remove("_ts");
        row.remove("_pos");
        match op.as_str().unwrap() {
            "truncate" => model.clear(),
            "d" => {
                model.remove(&row["id"].as_i64().unwrap());
            }
            _ => {
                model.insert(row["id"].as_i64().unwrap(), row);
            }
        }
    }
}

async fn table_rows(db: &Client, source: &PgSource) -> Model {
    let schema = source.table_schema("public.t").await.unwrap();
    let mut model = Model::new();
    for m in db.simple_query("SELECT * FROM t").await.unwrap() {
        if let SimpleQueryMessage::Row(row) = m {
            let mut obj = Map::new();
            for (i, c) in schema.columns.iter().enumerate() {
                let value = match row.get(i) {
                    Some(text) => {
                        let mut json = String::new();
                        c.push_json(&mut json, text);
                        serde_json::from_str(&json).unwrap()
                    }
                    None => Value::Null,
                };
                obj.insert(c.name.clone(), value);
            }
            model.insert(obj["id"].as_i64().unwrap(), obj);
        }
    }
    model
}

fn max_lsn(batch: &PgBatch) -> Option<u64> {
    batch
        .tables
        .iter()
        .flat_map(|t| t.lines())
        .map(|l| parse(&l)["_pos"].as_u64().unwrap())
        .max()
}

fn stream_lines(batch: &PgBatch) -> Vec<String> {
    lines(batch, "public.t")
        .into_iter()
        .filter(|l| parse(l)["_op"] != "r")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_merges_with_concurrent_changes() {
    snapshot_merges("floe_snap", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_merges_with_concurrent_changes_peeked() {
    snapshot_merges("floe_snap_peek", false).await;
}

/// Copies a table in chunks while a writer changes it, reading changes
/// over a replication session (`stream`) or by peeks, sometimes reading a
/// batch twice (a crash before commit) and sometimes not advancing.
async fn snapshot_merges(slot: &str, stream: bool) {
    let Some(conninfo) = fresh_db(slot).await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE t (id int8 PRIMARY KEY, v text, n numeric(20,4));
         INSERT INTO t SELECT i, 'v' || i, i / 7.0 FROM generate_series(1, 20000) i;",
    )
    .await
    .unwrap();
    let mut cfg = config(&conninfo, slot, &["public.t"]);
    cfg.chunk_rows = 3_000;
    cfg.stream = stream;
    setup(&cfg).await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let writer_db = client(&conninfo).await;
        tokio::spawn(async move {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) || ops < 300 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = (x % 24_000) as i64 + 1;
                let sql = match x % 5 {
                    0 => format!("DELETE FROM t WHERE id = {id}"),
                    1 | 2 => format!(
                        "INSERT INTO t VALUES ({id}, 'w{ops}', {ops}.5)
                         ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n"
                    ),
                    3 => format!("UPDATE t SET n = n + 1 WHERE id = {id}"),
                    // Several statements in one transaction.
                    _ => format!(
                        "BEGIN; UPDATE t SET v = 'x{ops}' WHERE id = {id};
                         DELETE FROM t WHERE id = {};
                         INSERT INTO t VALUES ({}, 'y{ops}', NULL) ON CONFLICT DO NOTHING; COMMIT",
                        id + 1,
                        id + 2
                    ),
                };
                writer_db.batch_execute(&sql).await.unwrap();
                ops += 1;
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            ops
        })
    };

    let mut source = PgSource::connect(cfg.clone()).await.unwrap();
    let mut model = Model::new();
    let mut state = SourceState::default();
    let mut round = 0;
    let mut writer_ops = None;
    // Bounded in time, not rounds: on a loaded machine the writer's 300
    // changes outlast many quick rounds.
    let started = std::time::Instant::now();
    loop {
        round += 1;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(180),
            "no convergence in {round} rounds"
        );
        let mut batch = source.read_batch(&state).await.unwrap();
        if round == 3 {
            // A crash before commit: the same state reads the same stream
            // changes again (and more), nothing lost.
            let retry = source.read_batch(&state).await.unwrap();
            let (first, second) = (stream_lines(&batch), stream_lines(&retry));
            assert!(second.len() >= first.len());
            assert_eq!(first, second[..first.len()]);
            batch = retry;
        }
        let confirmed = source.confirmed_flush_lsn().await.unwrap();
        if let Some(committed) = state.committed_lsn {
            assert!(confirmed <= committed, "slot passed the committed LSN");
            // Nothing already committed comes again.
            if let Some(lsn) = batch
                .tables
                .iter()
                .flat_map(|t| t.lines())
                .map(|l| parse(&l)["_pos"].as_u64().unwrap())
                .min()
            {
                assert!(lsn > committed);
            }
        }
        if let Some(max) = max_lsn(&batch) {
            assert!(max <= batch.last_lsn);
        }
        apply(&mut model, &batch, "public.t");
        let empty = batch.is_empty();
        state = SourceState {
            committed_lsn: Some(batch.last_lsn),
            snapshot: batch.snapshot.clone(),
        };
        // Only sometimes does the caller advance: read_batch must catch up itself.
        if round % 2 == 0 {
            source.advance(batch.last_lsn).await.unwrap();
        }
        if state.snapshot.is_done(&cfg.tables) {
            stop.store(true, Ordering::Relaxed);
            if writer_ops.is_none() && writer.is_finished() {
                writer_ops = Some(0);
                continue;
            }
            if writer_ops.is_some() && empty {
                break;
            }
        }
    }
    let ops = writer.await.unwrap();
    eprintln!("snapshot test: {round} batches, {ops} concurrent writes");
    assert!(ops >= 300);
    assert!(round >= 8, "7 chunks at least, got {round} rounds");
    let expected = table_rows(&db, &source).await;
    assert_eq!(model.len(), expected.len());
    for (id, row) in &expected {
        assert_eq!(model.get(id), Some(row), "row {id}");
    }
    assert_eq!(model, expected);
}

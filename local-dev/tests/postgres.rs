//! `floe pg sync` end to end against a real Postgres (local-dev/pg.sh starts
//! one with wal_level=logical): a 200,000-row table copied while another
//! session keeps inserting, updating and deleting, the sync process killed
//! (SIGKILL) mid-batch several times and rerun, then caught up. The Iceberg
//! table, read by iceberg-rust's scan, must equal the Postgres table by row
//! count and by an order-independent content hash (and pyiceberg must count
//! the same rows), and the slot must never be confirmed past what the table
//! holds. The table is copy-on-write: iceberg-rust's debug-build scan applies
//! 200,000 keys' worth of equality deletes too slowly for a test, and pyiceberg
//! reads no equality deletes at all. FLOE_PG_SKIP=1 skips it.

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use common::{Warehouse, psql};
use floe_core::catalog::{Catalog, SqliteCatalog};
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_core::ledger::{Ledger, LedgerStore};
use futures::TryStreamExt;

const DB: &str = "floe_cli_e2e";
const SLOT: &str = "floe_cli_e2e";

fn sync_args<'a>(conninfo: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "pg",
        "sync",
        "--conninfo",
        conninfo,
        "--slot",
        SLOT,
        "--publication",
        SLOT,
        "--table",
        "public.accounts",
        "--namespace",
        "raw",
        "--chunk-rows",
        "20000",
        "--max-changes",
        "5000",
    ];
    args.extend(extra);
    args
}

fn spawn_sync(wh: &Warehouse, conninfo: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_floe"))
        .arg("--config")
        .arg(wh.path().join("_inputs/floe.toml"))
        .args(sync_args(conninfo, &[]))
        .env("FLOE_WAREHOUSE", wh.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn floe pg sync")
}

/// The slot's confirmed LSN and the table's high-water mark for it.
fn positions(wh: &Warehouse, conninfo: &str, rt: &tokio::runtime::Runtime) -> (u64, Option<u64>) {
    let confirmed = psql(
        conninfo,
        &format!(
            "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots WHERE slot_name = '{SLOT}'"
        ),
    );
    let confirmed: u64 = confirmed.trim().parse().expect("slot LSN");
    let mark = rt.block_on(async {
        let catalog = catalog(wh);
        match catalog
            .load_table(&parse_table("raw.accounts").unwrap())
            .await
        {
            Ok(t) => {
                let store = std::sync::Arc::new(LedgerStore::new(catalog.file_io().clone()));
                Ledger::open(store, &t.metadata)
                    .await
                    .expect("ledger")
                    .high_water_mark(&format!("pg:{SLOT}"))
                    .await
                    .expect("ledger")
                    .and_then(|p| p.as_str().parse().ok())
            }
            Err(_) => None,
        }
    });
    (confirmed, mark)
}

fn catalog(wh: &Warehouse) -> SqliteCatalog {
    let dir = wh.path();
    SqliteCatalog::open(
        "floe",
        &dir.join("catalog.db"),
        &format!("file://{}", dir.display()),
        floe_core::iceberg::io::FileIO::new_with_fs(),
        Faults::none(),
    )
    .expect("open the catalog")
}

/// Canonical rows: id -> `v|amount|ts_micros`, NULL as `\N`, amounts at the column's scale.
type Rows = BTreeMap<i64, String>;

fn postgres_rows(conninfo: &str) -> Rows {
    let text = psql(
        conninfo,
        "COPY (SELECT id, v, amount::text, (extract(epoch FROM ts) * 1000000)::bigint FROM accounts) TO STDOUT",
    );
    text.lines()
        .map(|l| {
            let mut cols = l.splitn(2, '\t');
            let id = cols.next().unwrap().parse().unwrap();
            (id, cols.next().unwrap_or_default().replace('\t', "|"))
        })
        .collect()
}

async fn iceberg_rows(wh: &Warehouse) -> Rows {
    let catalog = catalog(wh);
    let loaded = catalog
        .load_table(&parse_table("raw.accounts").unwrap())
        .await
        .unwrap();
    let table = loaded.to_table(catalog.file_io().clone()).unwrap();
    let scan = table
        .scan()
        .select_all()
        .with_concurrency_limit(4096)
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = tokio::time::timeout(Duration::from_secs(300), async {
        scan.to_arrow().await.unwrap().try_collect().await.unwrap()
    })
    .await
    .expect("scan within 300 s");
    let mut rows = Rows::new();
    for b in &batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let v = b.column_by_name("v").unwrap().as_string::<i32>();
        let amount = b
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<Decimal128Type>();
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<TimestampMicrosecondType>();
        for i in 0..b.num_rows() {
            let text = |valid: bool, s: String| if valid { s } else { "\\N".to_string() };
            let row = format!(
                "{}|{}|{}",
                text(v.is_valid(i), v.value(i).to_string()),
                text(amount.is_valid(i), amount.value_as_string(i)),
                text(ts.is_valid(i), ts.value(i).to_string()),
            );
            let prev = rows.insert(id.value(i), row);
            assert!(prev.is_none(), "id {} twice in the table", id.value(i));
        }
    }
    rows
}

/// Sum of per-row hashes: equal for equal sets of rows in any order.
fn content_hash(rows: &Rows) -> u64 {
    rows.iter().fold(0u64, |acc, (id, row)| {
        acc.wrapping_add(xxhash_rust::xxh3::xxh3_64(format!("{id}|{row}").as_bytes()))
    })
}

#[test]
fn snapshot_while_writing_killed_mid_batch_then_streamed_equals_the_source() {
    let Some(base) = common::pg_cluster() else {
        return;
    };
    let _ = psql(
        &base,
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{SLOT}'"
        ),
    );
    psql(&base, &format!("DROP DATABASE IF EXISTS {DB}"));
    psql(&base, &format!("CREATE DATABASE {DB}"));
    let conninfo = base.replace("dbname=postgres", &format!("dbname={DB}"));
    psql(
        &conninfo,
        "CREATE TABLE accounts (id bigint PRIMARY KEY, v text, amount numeric(20, 6), ts timestamptz);
         INSERT INTO accounts SELECT g, 'v' || g, g * 1.000001, '2026-01-01T00:00:00Z'::timestamptz + g * interval '1.5 ms'
         FROM generate_series(1, 200000) g;",
    );
    let wh = Warehouse::new();
    let config = wh.file(
        "floe.toml",
        "[defaults]\nmerge_strategy = \"copy-on-write\"\n",
    );
    let cfg = config.to_str().unwrap();
    let sync_with = |extra: &[&str]| {
        let mut args = vec!["--config", cfg];
        args.extend(sync_args(&conninfo, extra));
        wh.floe(&args)
    };
    let mut setup = sync_args(&conninfo, &[]);
    setup[1] = "setup";
    setup.truncate(10);
    wh.floe(&setup);
    let rt = tokio::runtime::Runtime::new().unwrap();

    // Inserts, updates (exact numerics, NULLs) and deletes, one transaction
    // each, while the snapshot is being copied and the sync is being killed.
    let writer = Command::new("psql")
        .args([
            conninfo.as_str(),
            "-v",
            "ON_ERROR_STOP=1",
            "-qc",
            "DO $$ DECLARE i int; k bigint; BEGIN
               FOR i IN 1..6000 LOOP
                 k := 1 + floor(random() * 210000)::bigint;
                 IF i % 5 = 0 THEN DELETE FROM accounts WHERE id = k;
                 ELSIF i % 5 = 1 THEN INSERT INTO accounts VALUES (200000 + i, 'new' || i, 12345678901234.123456, now())
                                      ON CONFLICT (id) DO UPDATE SET v = 'upserted' || i;
                 ELSIF i % 7 = 0 THEN UPDATE accounts SET v = NULL, amount = NULL WHERE id = k;
                 ELSE UPDATE accounts SET v = 'u' || i, amount = amount + 0.000001, ts = ts + interval '1 s' WHERE id = k;
                 END IF;
                 COMMIT;
                 IF i % 50 = 0 THEN PERFORM pg_sleep(0.01); END IF;
               END LOOP; END $$;",
        ])
        .spawn()
        .expect("spawn the writer");

    // Kill the sync mid-batch a few times; after each kill the slot is never
    // confirmed past what the table holds.
    let (start, _) = positions(&wh, &conninfo, &rt);
    for (round, wait_ms) in [700u64, 1300, 1900, 1100].into_iter().enumerate() {
        let mut child = spawn_sync(&wh, &conninfo);
        std::thread::sleep(Duration::from_millis(wait_ms));
        let _ = child.kill();
        let _ = child.wait();
        let (confirmed, mark) = positions(&wh, &conninfo, &rt);
        match mark {
            Some(m) => assert!(
                confirmed <= m,
                "round {round}: slot confirmed at {confirmed}, past the table's {m}"
            ),
            None => assert_eq!(
                confirmed, start,
                "round {round}: slot moved with nothing committed"
            ),
        }
    }
    let status = { writer }.wait().expect("writer");
    assert!(status.success(), "the writer session failed");

    // Catch up, then a second run finds nothing new.
    let out = sync_with(&["--json"]);
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["snapshot_done"], true, "{report}");
    assert_eq!(report["rejected"], 0, "{report}");
    let again: serde_json::Value = serde_json::from_str(sync_with(&["--json"]).trim()).unwrap();
    assert_eq!(again["batches"], 0, "{again}");
    let (confirmed, mark) = positions(&wh, &conninfo, &rt);
    assert!(mark.is_some_and(|m| confirmed <= m));

    let source = postgres_rows(&conninfo);
    let table = rt.block_on(iceberg_rows(&wh));
    assert!(source.len() > 190_000, "{} rows", source.len());
    let diff: Vec<_> = source
        .iter()
        .filter(|(id, row)| table.get(id) != Some(row))
        .take(5)
        .map(|(id, row)| format!("{id}: postgres {row:?}, iceberg {:?}", table.get(id)))
        .chain(
            table
                .keys()
                .filter(|id| !source.contains_key(id))
                .take(5)
                .map(|id| format!("{id}: only in iceberg")),
        )
        .collect();
    assert!(diff.is_empty(), "tables differ: {diff:#?}");
    assert_eq!(table.len(), source.len());
    assert_eq!(content_hash(&table), content_hash(&source));
    let independent = wh.read("raw.accounts", None);
    assert_eq!(independent["count"], source.len());
    assert_eq!(independent["delete_files"], 0);
}

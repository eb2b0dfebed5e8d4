//! `floe pg` as a least-privilege role against a real Postgres (local-dev/pg.sh):
//! the tables' owner pipes `floe pg setup --print-sql` to psql, then a role
//! holding only what that grants (LOGIN, REPLICATION, SELECT; no CREATE, no
//! ownership) runs `floe pg setup` and `floe pg sync`, and the Iceberg tables
//! hold Postgres's rows. Each missing grant fails with an error naming it,
//! and a failed setup leaves no slot behind. FLOE_PG_SKIP=1 skips.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::{Warehouse, psql};
use serde_json::{Value, json};

/// A fresh database owned by the superuser, its conninfo as the superuser,
/// and `role` created with LOGIN alone. Slot, database and role names are
/// per test: tests share the cluster.
fn fresh(base: &str, db: &str, role: &str, slot: &str) -> String {
    psql(
        base,
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ),
    );
    psql(base, &format!("DROP DATABASE IF EXISTS {db}"));
    psql(base, &format!("DROP ROLE IF EXISTS {role}"));
    psql(base, &format!("CREATE DATABASE {db}"));
    psql(base, &format!("CREATE ROLE {role} LOGIN"));
    base.replace("dbname=postgres", &format!("dbname={db}"))
}

/// `conninfo` with another user.
fn as_role(conninfo: &str, role: &str) -> String {
    conninfo.replace("user=postgres", &format!("user={role}"))
}

fn pg_args<'a>(
    command: &'a str,
    conninfo: &'a str,
    slot: &'a str,
    tables: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "pg",
        command,
        "--conninfo",
        conninfo,
        "--slot",
        slot,
        "--publication",
        slot,
    ];
    for table in tables {
        args.extend(["--table", table]);
    }
    args
}

/// Runs `floe pg setup`, expecting it to fail; returns its stderr.
fn setup_fails(wh: &Warehouse, conninfo: &str, slot: &str, tables: &[&str]) -> String {
    let out = wh.floe_env(&pg_args("setup", conninfo, slot, tables), &[]);
    failure(out)
}

fn failure(out: Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn slot_exists(base: &str, slot: &str) -> bool {
    psql(
        base,
        &format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    )
    .trim()
        == "1"
}

/// Pipes `sql` to psql, stopping at the first error.
fn psql_script(conninfo: &str, sql: &str) {
    let mut child = Command::new("psql")
        .args([conninfo, "-v", "ON_ERROR_STOP=1", "-q", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql");
    child
        .stdin
        .take()
        .expect("psql's stdin")
        .write_all(sql.as_bytes())
        .expect("write the script");
    let out = child.wait_with_output().expect("psql");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "psql -f - failed on:\n{sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn least_privilege_role_sets_up_and_syncs_after_the_owner_runs_print_sql() {
    let Some(base) = common::pg_cluster() else {
        return;
    };
    let (db, role, slot) = ("floe_lp_ok", "floe_lp_ok", "floe_lp_ok");
    let owner = fresh(&base, db, role, slot);
    psql(
        &owner,
        "CREATE TABLE orders (id bigint PRIMARY KEY, item text, qty int);
         INSERT INTO orders SELECT g, 'item' || g, g FROM generate_series(1, 50) g;
         CREATE SCHEMA shop;
         CREATE TABLE shop.items (sku text PRIMARY KEY, price numeric(10, 2));
         INSERT INTO shop.items VALUES ('a', 1.50), ('b', 2.25);",
    );
    let floe = as_role(&owner, role);
    let tables = ["public.orders", "shop.items"];
    let wh = Warehouse::new();

    // The role comes from the conninfo's user; stdout is the SQL alone.
    let mut print = pg_args("setup", &floe, slot, &tables);
    print.push("--print-sql");
    let sql = wh.floe(&print);
    assert!(sql.starts_with("-- "), "{sql}");
    psql_script(&owner, &sql);

    // Exactly what the docs list: REPLICATION, USAGE on shop, SELECT on
    // the tables; no superuser, no CREATE anywhere, nothing owned.
    let grants = psql(
        &owner,
        &format!(
            "SELECT rolsuper, rolreplication,
                    has_database_privilege('{role}', current_database(), 'CREATE'),
                    has_schema_privilege('{role}', 'shop', 'USAGE'),
                    has_schema_privilege('{role}', 'public', 'CREATE'),
                    has_table_privilege('{role}', 'orders', 'SELECT'),
                    has_table_privilege('{role}', 'shop.items', 'SELECT'),
                    has_table_privilege('{role}', 'orders', 'INSERT'),
                    (SELECT count(*) FROM pg_class WHERE relowner = '{role}'::regrole)
               FROM pg_roles WHERE rolname = '{role}'"
        ),
    );
    assert_eq!(grants.trim(), "f|t|f|t|f|t|t|f|0");
    let published = "SELECT string_agg(schemaname || '.' || tablename, ',' ORDER BY 1)
                       FROM pg_publication_tables WHERE pubname = 'floe_lp_ok'";
    assert_eq!(psql(&owner, published).trim(), "public.orders,shop.items");

    let out = wh.floe(&pg_args("setup", &floe, slot, &tables));
    assert!(out.contains("are ready"), "{out}");
    assert!(slot_exists(&base, slot));
    // The publication was checked, not recreated or altered.
    assert_eq!(psql(&owner, published).trim(), "public.orders,shop.items");

    let config = wh.file(
        "floe.toml",
        "[defaults]\nmerge_strategy = \"copy-on-write\"\n",
    );
    let sync = |wh: &Warehouse| {
        let mut args = vec!["--config", config.to_str().expect("UTF-8 path")];
        args.extend(pg_args("sync", &floe, slot, &tables));
        args.extend(["--namespace", "raw", "--json"]);
        let report: Value = serde_json::from_str(wh.floe(&args).trim()).expect("report");
        assert_eq!(report["rejected"], 0, "{report}");
        assert_eq!(report["snapshot_done"], true, "{report}");
    };
    sync(&wh);
    // Then changes through the slot, which the role reads without SELECT
    // on anything but the tables.
    psql(
        &owner,
        "UPDATE orders SET qty = qty * 10 WHERE id <= 5;
         DELETE FROM orders WHERE id > 45;
         INSERT INTO orders VALUES (100, 'late', 7);
         UPDATE shop.items SET price = 3.00 WHERE sku = 'b';",
    );
    sync(&wh);

    let orders = wh.read("raw.orders", Some("id"));
    let mut want: Vec<Value> = (1..=45)
        .map(|i| json!({"id": i, "item": format!("item{i}"), "qty": if i <= 5 { i * 10 } else { i }}))
        .collect();
    want.push(json!({"id": 100, "item": "late", "qty": 7}));
    let got: Vec<Value> = orders["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| json!({"id": r["id"], "item": r["item"], "qty": r["qty"]}))
        .collect();
    assert_eq!(got, want);
    let items = wh.read("raw.shop_items", Some("sku"));
    let got: Vec<Value> = items["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| json!([r["sku"], r["price"]]))
        .collect();
    assert_eq!(got, [json!(["a", "1.50"]), json!(["b", "3.00"])]);
}

#[test]
fn each_missing_grant_fails_naming_its_fix() {
    let Some(base) = common::pg_cluster() else {
        return;
    };
    let (db, role, slot) = ("floe_lp_denied", "floe_lp_denied", "floe_lp_denied");
    let owner = fresh(&base, db, role, slot);
    psql(
        &owner,
        "CREATE TABLE orders (id bigint PRIMARY KEY, item text);
         INSERT INTO orders VALUES (1, 'a');
         CREATE TABLE items (id bigint PRIMARY KEY);
         CREATE SCHEMA hidden;
         CREATE TABLE hidden.t (id bigint PRIMARY KEY);
         CREATE PUBLICATION floe_lp_denied FOR TABLE orders;",
    );
    let floe = as_role(&owner, role);
    let wh = Warehouse::new();
    let orders = ["public.orders"];

    // SELECT granted, REPLICATION not.
    psql(&owner, &format!("GRANT SELECT ON orders TO {role}"));
    let err = setup_fails(&wh, &floe, slot, &orders);
    assert!(
        err.contains(&format!(
            "role \"{role}\" has neither REPLICATION nor superuser"
        )) && err.contains(&format!("ALTER ROLE \"{role}\" WITH REPLICATION;")),
        "{err}"
    );
    assert!(!slot_exists(&base, slot));

    // REPLICATION granted, SELECT not.
    psql(&base, &format!("ALTER ROLE {role} WITH REPLICATION"));
    psql(&owner, &format!("REVOKE SELECT ON orders FROM {role}"));
    let err = setup_fails(&wh, &floe, slot, &orders);
    assert!(
        err.contains("may not read table public.orders")
            && err.contains(&format!(
                "GRANT SELECT ON \"public\".\"orders\" TO \"{role}\";"
            )),
        "{err}"
    );
    assert!(!slot_exists(&base, slot));

    // A schema the role may not use.
    let err = setup_fails(&wh, &floe, slot, &["hidden.t"]);
    assert!(
        err.contains(&format!("GRANT USAGE ON SCHEMA \"hidden\" TO \"{role}\";")),
        "{err}"
    );

    // No publication, and neither CREATE on the database nor the table.
    psql(&owner, &format!("GRANT SELECT ON orders, items TO {role}"));
    psql(&owner, "DROP PUBLICATION floe_lp_denied");
    let err = setup_fails(&wh, &floe, slot, &orders);
    assert!(
        err.contains(&format!(
            "may not create publication \"{slot}\" in database {db}"
        )) && err.contains(&format!(
            "lacks CREATE on database {db} and ownership of public.orders"
        )) && err.contains(&format!(
            "floe pg setup --print-sql --role {role} --publication {slot} \
                 --table public.orders | psql -d {db}"
        )),
        "{err}"
    );
    assert!(!slot_exists(&base, slot));

    // A publication without one of the tables, owned by someone else.
    psql(&owner, "CREATE PUBLICATION floe_lp_denied FOR TABLE orders");
    let err = setup_fails(&wh, &floe, slot, &["public.orders", "public.items"]);
    assert!(
        err.contains("may not add public.items to publication")
            && err.contains("ownership of publication floe_lp_denied (owned by postgres)")
            && err.contains("ALTER PUBLICATION \"floe_lp_denied\" ADD TABLE \"public\".\"items\";"),
        "{err}"
    );
    assert!(!slot_exists(&base, slot));

    // With the grants the docs list, setup passes; a SELECT revoked later
    // stops the sync before it reads, naming the grant again.
    wh.floe(&pg_args("setup", &floe, slot, &orders));
    assert!(slot_exists(&base, slot));
    psql(&owner, &format!("REVOKE SELECT ON orders FROM {role}"));
    let mut sync = pg_args("sync", &floe, slot, &orders);
    sync.extend(["--namespace", "raw"]);
    let err = failure(wh.floe_env(&sync, &[]));
    assert!(
        err.contains(&format!(
            "GRANT SELECT ON \"public\".\"orders\" TO \"{role}\";"
        )),
        "{err}"
    );
}

//! TLS and passwords against a real cluster that only takes TLS with a
//! password (local-dev/pg-tls.sh: a throwaway CA, a certificate for
//! `floe-db.test`), and the plain test cluster for "require refuses a server
//! without TLS". The login secret comes from moto's Secrets Manager.

use std::path::PathBuf;
use std::sync::OnceLock;

use floe_core::aws::{AwsClients, AwsSettings};
use floe_postgres::{ConnSettings, PgError, PgSource, conn, setup};
use floe_test_support::services;
use tokio_postgres::Client;

const PASSWORD: &str = "floe-tls-test";

/// `port=… user=postgres dbname=postgres` of the TLS cluster and its certificate directory.
fn tls_cluster() -> Option<&'static (String, PathBuf)> {
    static CLUSTER: OnceLock<Option<(String, PathBuf)>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            if std::env::var("FLOE_PG_SKIP").as_deref() == Ok("1") {
                eprintln!("!!! FLOE_PG_SKIP=1: SKIPPING the Postgres TLS tests !!!");
                return None;
            }
            let script = services::repo().join("local-dev/pg-tls.sh");
            let out = std::process::Command::new("bash")
                .arg(&script)
                .output()
                .expect("running local-dev/pg-tls.sh");
            assert!(
                out.status.success(),
                "pg-tls.sh failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).expect("UTF-8 output");
            let mut lines = text.lines().rev();
            let certs = PathBuf::from(lines.next().expect("the certificate directory"));
            let conninfo = lines.next().expect("the conninfo");
            // Keep the port, user and dbname; each test picks host and TLS.
            let base = conninfo.replace("host=127.0.0.1 ", "");
            Some((base, certs))
        })
        .as_ref()
}

fn ca(name: &str) -> String {
    let (_, certs) = tls_cluster().expect("cluster");
    certs.join(name).display().to_string()
}

async fn connect(conninfo: &str) -> Result<Client, PgError> {
    ConnSettings::resolve(conninfo, None)?.connect().await
}

/// Whether this session is encrypted, by the server's own account.
async fn encrypted(client: &Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_ca_replicates_over_tls() {
    let Some((base, _)) = tls_cluster() else {
        return;
    };
    let full = format!(
        "host=floe-db.test hostaddr=127.0.0.1 {base} password={PASSWORD} \
         sslmode=verify-full sslrootcert={}",
        ca("ca.crt")
    );
    replicates_over_tls(&full, "floe_tls").await;
}

/// libpq's `allow` tries a plain session first: this server refuses it, so
/// every session, the replication session included, is asked for again
/// over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_asks_again_over_tls_when_the_plain_login_is_refused() {
    let Some((base, _)) = tls_cluster() else {
        return;
    };
    let allow = format!("host=127.0.0.1 {base} password={PASSWORD} sslmode=allow");
    replicates_over_tls(&allow, "floe_tls_allow").await;
}

/// Creates database `db` through `conninfo` (encrypted, by the server's
/// account), and reads a row inserted there through a slot of that name
/// over a replication session.
async fn replicates_over_tls(conninfo: &str, db: &str) {
    let admin = connect(conninfo).await.unwrap();
    assert!(encrypted(&admin).await);
    admin
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
            &[&db],
        )
        .await
        .unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        format!("CREATE DATABASE {db}"),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    let conninfo = conninfo.replace("dbname=postgres", &format!("dbname={db}"));
    let client = connect(&conninfo).await.unwrap();
    client
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        .await
        .unwrap();
    let mut cfg = floe_postgres::PgConfig::new(
        conninfo.as_str(),
        db,
        format!("{db}_pub"),
        vec!["public.t".into()],
    );
    cfg.chunk_rows = 100;
    setup(&cfg).await.unwrap();
    client
        .batch_execute("INSERT INTO t VALUES (1, 'over tls'), (2, 'also')")
        .await
        .unwrap();
    let mut source = PgSource::connect(cfg).await.unwrap();
    let batch = source
        .read_batch(&floe_postgres::SourceState::default())
        .await
        .unwrap();
    // The slot is held by the replication session, itself encrypted.
    let session_ssl: bool = client
        .query_one(
            "SELECT s.ssl FROM pg_replication_slots r JOIN pg_stat_ssl s ON s.pid = r.active_pid \
             WHERE r.slot_name = $1",
            &[&db],
        )
        .await
        .unwrap()
        .get(0);
    assert!(session_ssl, "the replication session is encrypted");
    let lines: Vec<String> = batch.tables.iter().flat_map(|t| t.lines()).collect();
    assert!(
        lines.iter().any(|l| l.contains(r#""v":"over tls""#)),
        "{lines:?}"
    );
    source.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_wrong_host_name_that_verify_ca_accepts() {
    let Some((base, _)) = tls_cluster() else {
        return;
    };
    let at = |mode: &str| {
        format!(
            "host=localhost hostaddr=127.0.0.1 {base} password={PASSWORD} sslmode={mode} sslrootcert={}",
            ca("ca.crt")
        )
    };
    let e = connect(&at("verify-full")).await.unwrap_err().to_string();
    assert!(
        e.contains(r#"not issued for host "localhost""#) && e.contains("sslmode=verify-ca"),
        "{e}"
    );
    let client = connect(&at("verify-ca")).await.unwrap();
    assert!(encrypted(&client).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_certificate_without_its_ca() {
    let Some((base, _)) = tls_cluster() else {
        return;
    };
    let other = format!(
        "host=floe-db.test hostaddr=127.0.0.1 {base} password={PASSWORD} sslmode=verify-full sslrootcert={}",
        ca("other-ca.crt")
    );
    let e = connect(&other).await.unwrap_err().to_string();
    assert!(
        e.contains("not signed by a CA in") && e.contains("other-ca.crt"),
        "{e}"
    );
    // No root certificate at all: refused before connecting, naming the key.
    let none = format!(
        "host=floe-db.test hostaddr=127.0.0.1 {base} password={PASSWORD} sslmode=verify-full"
    );
    if !std::path::Path::new(&format!(
        "{}/.postgresql/root.crt",
        std::env::var("HOME").unwrap_or_default()
    ))
    .exists()
    {
        let e = connect(&none).await.unwrap_err().to_string();
        assert!(
            e.contains("sslrootcert=") && e.contains("needs trusted roots"),
            "{e}"
        );
    }
    // require checks nothing (libpq's meaning) but still encrypts.
    let require =
        format!("host=localhost hostaddr=127.0.0.1 {base} password={PASSWORD} sslmode=require");
    if !std::path::Path::new(&format!(
        "{}/.postgresql/root.crt",
        std::env::var("HOME").unwrap_or_default()
    ))
    .exists()
    {
        assert!(encrypted(&connect(&require).await.unwrap()).await);
    }
    // disable: this server takes no plain TCP.
    let e = connect(&format!(
        "host=127.0.0.1 {base} password={PASSWORD} sslmode=disable"
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("no encryption"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_refuses_a_server_without_tls_and_prefer_falls_back() {
    if tls_cluster().is_none() {
        return;
    }
    // The plain test cluster of local-dev/pg.sh has ssl off.
    let plain = services::run("pg.sh");
    let e = connect(&format!("{plain} sslmode=require"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not accept TLS") && e.contains("sslmode=require"),
        "{e}"
    );
    let client = connect(&format!("{plain} sslmode=prefer")).await.unwrap();
    assert!(!encrypted(&client).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_come_from_a_passfile_or_a_secrets_manager_secret() {
    let Some((base, _)) = tls_cluster() else {
        return;
    };
    let tls = format!(
        "host=floe-db.test hostaddr=127.0.0.1 {base} sslmode=verify-full sslrootcert={}",
        ca("ca.crt")
    );
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    let port = base
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("port="))
        .unwrap();
    let write = |password: &str| {
        std::fs::write(
            &passfile,
            format!("floe-db.test:{port}:postgres:postgres:{password}\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    write(PASSWORD);
    let with_file = format!("{tls} passfile={}", passfile.display());
    assert!(encrypted(&connect(&with_file).await.unwrap()).await);
    write("wrong");
    let e = connect(&with_file).await.unwrap_err().to_string();
    assert!(
        e.contains("the password from the passfile was refused"),
        "{e}"
    );

    // The JSON an RDS rotation writes, port as a number.
    let clients = AwsClients::new(AwsSettings::local(services::moto(), "us-east-1")).await;
    let arn = clients
        .secrets
        .create_secret()
        .name(format!("floe-pg-{}", uuid::Uuid::new_v4()))
        .secret_string(format!(
            r#"{{"engine":"postgres","username":"postgres","password":"{PASSWORD}","host":"db.internal","port":{port},"dbname":"postgres"}}"#
        ))
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_string();
    let login = conn::read_login(&clients, &arn).await.unwrap();
    assert_eq!(login.username, "postgres");
    // The conninfo's host wins over the secret's (which does not resolve here).
    let client = ConnSettings::resolve(&with_file, Some(&login))
        .unwrap()
        .connect()
        .await
        .unwrap();
    assert!(encrypted(&client).await);
    let missing = conn::read_login(&clients, &format!("{arn}-gone"))
        .await
        .unwrap_err()
        .to_string();
    assert!(missing.contains("postgres.secret"), "{missing}");
}

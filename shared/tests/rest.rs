//! The REST catalog client against a real Iceberg REST server: lakana-server on
//! a local Postgres with its warehouse on moto's S3 (started once per test
//! binary by `local-dev/rest.sh`), plus tiny in-test HTTP stubs for what lakana
//! does not do (an OAuth2 token endpoint) or should not (failing a commit).
#![cfg(feature = "rest")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arrow_array::{Int64Array, StringArray};
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::catalog::rest::{RestAuth, RestConfig};
use floe_core::catalog::{Catalog, CatalogError, Committed, RestCatalog, TableCommit};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::iceberg::spec::TableMetadataBuilder;
use floe_core::iceberg::{NamespaceIdent, TableCreation, TableIdent, TableRequirement};
use floe_core::ident::parse_table;
use floe_core::tabledef;
use floe_test_support::{racing::Racing, requests, scan, services};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The lakana environment `local-dev/rest.sh` sets up: the REST prefix.
const ENVIRONMENT: &str = "floe";
/// Where that environment keeps table files.
const STORAGE: &str = "s3://floe-lakana/floe";

struct Server {
    uri: String,
    token: String,
    moto: String,
}

/// lakana and moto, started once per test binary.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let (uri, token) = services::lakana().clone();
        Server {
            uri,
            token,
            moto: services::moto().to_string(),
        }
    })
}

async fn clients() -> AwsClients {
    AwsClients::new(AwsSettings::local(&server().moto, "us-east-1")).await
}

fn config(uri: &str, auth: RestAuth) -> RestConfig {
    RestConfig {
        prefix: Some(ENVIRONMENT.into()),
        auth,
        storage_root: Some(STORAGE.into()),
        ..RestConfig::new(uri)
    }
}

async fn catalog() -> Arc<RestCatalog> {
    let s = server();
    let cfg = config(&s.uri, RestAuth::Token(s.token.clone()));
    Arc::new(
        RestCatalog::connect(cfg, Some(&clients().await))
            .await
            .unwrap(),
    )
}

const SCHEMA: &str = r#"{"type":"struct","schema-id":0,"fields":[
  {"id":1,"name":"id","required":true,"type":"long"},
  {"id":2,"name":"name","required":false,"type":"string"}]}"#;

fn creation(name: &str) -> TableCreation {
    let schema = tabledef::parse_schema(SCHEMA).unwrap();
    tabledef::creation(name, schema, Default::default(), Default::default())
}

/// A new table in `bronze` (lakana's namespaces are bronze, silver and gold).
async fn new_table(catalog: &RestCatalog) -> TableIdent {
    let name = format!("events_{}", uuid::Uuid::new_v4().simple());
    let ident = parse_table(&format!("bronze.{name}")).unwrap();
    catalog
        .ensure_namespace(&NamespaceIdent::new("bronze".into()))
        .await
        .unwrap();
    catalog.create_table(&ident, creation(&name)).await.unwrap();
    ident
}

async fn rows(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<(i64, String)> {
    let mut rows: Vec<(i64, String)> = scan(catalog, ident)
        .await
        .iter()
        .flat_map(|batch| {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let names = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            (0..batch.num_rows())
                .map(|i| (ids.value(i), names.value(i).to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

fn owned(rows: &[(i64, &str)]) -> Vec<(i64, String)> {
    rows.iter().map(|(i, n)| (*i, n.to_string())).collect()
}

/// The table as pyiceberg's RestCatalog reads it (`tests/read_rest.py`).
fn pyiceberg_read(ident: &TableIdent) -> serde_json::Value {
    let s = server();
    let table = format!("{}.{}", ident.namespace().join("."), ident.name());
    services::python_json(
        "shared/tests/read_rest.py",
        &[&s.uri, ENVIRONMENT, &s.token, &s.moto, &table],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_loads_commits_once_and_pyiceberg_reads_the_same_rows() {
    let catalog = catalog().await;
    // lakana creates `bronze` with the environment: 409, which is success here.
    catalog
        .ensure_namespace(&NamespaceIdent::new("bronze".into()))
        .await
        .unwrap();
    let ident = new_table(&catalog).await;
    let loaded = catalog.load_table(&ident).await.unwrap();
    assert_eq!(
        loaded.metadata.current_schema().as_struct(),
        tabledef::parse_schema(SCHEMA).unwrap().as_struct()
    );
    assert!(
        loaded.metadata_location.starts_with(STORAGE),
        "{}",
        loaded.metadata_location
    );
    assert!(loaded.metadata.current_snapshot().is_none());
    let again = catalog.create_table(&ident, creation(ident.name())).await;
    assert!(
        matches!(again, Err(CatalogError::TableExists { .. })),
        "{again:?}"
    );
    let missing = parse_table("bronze.no_such_table_here").unwrap();
    let missing = catalog.load_table(&missing).await;
    assert!(
        matches!(missing, Err(CatalogError::NoSuchTable { .. })),
        "{missing:?}"
    );

    let a = requests::write_request(catalog.as_ref(), &ident, &[(1, "ada"), (2, "grace")]).await;
    let b = requests::write_request(catalog.as_ref(), &ident, &[(3, "edsger"), (4, "ken")]).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let out = engine.append(&ident, vec![a.clone(), b]).await.unwrap();
    assert_eq!(out.committed.len(), 2);
    assert_eq!(out.snapshot_ids.len(), 1);
    assert_eq!(out.attempts, 1);

    // Redelivered: found in the table's ledger, not committed again.
    let redelivered = engine.append(&ident, vec![a]).await.unwrap();
    assert!(redelivered.committed.is_empty());
    assert_eq!(redelivered.duplicates.len(), 1);

    let want = owned(&[(1, "ada"), (2, "grace"), (3, "edsger"), (4, "ken")]);
    assert_eq!(rows(catalog.as_ref(), &ident).await, want);
    let now = catalog.load_table(&ident).await.unwrap();
    assert_eq!(now.metadata.snapshots().count(), 1);
    assert_eq!(
        now.metadata.current_snapshot().map(|s| s.snapshot_id()),
        Some(out.snapshot_ids[0])
    );

    let py = pyiceberg_read(&ident);
    assert_eq!(py["metadata_location"], now.metadata_location.as_str());
    let py_rows: Vec<(i64, String)> = py["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(py_rows, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_base_conflicts_and_the_engine_retry_lands_both_appends() {
    let catalog = catalog().await;
    let ident = new_table(&catalog).await;
    let empty = catalog.load_table(&ident).await.unwrap();

    // A raw commit planned on the empty table after a snapshot landed: 409.
    let first = requests::write_request(catalog.as_ref(), &ident, &[(1, "ada")]).await;
    CommitEngine::new(catalog.clone(), RetryPolicy::default())
        .append(&ident, vec![first])
        .await
        .unwrap();
    let result = TableMetadataBuilder::new_from_metadata(
        (*empty.metadata).clone(),
        Some(empty.metadata_location.clone()),
    )
    .set_properties(HashMap::from([("floe.test".into(), "stale".into())]))
    .unwrap()
    .build()
    .unwrap();
    let stale = catalog
        .commit(TableCommit {
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: empty.metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: None,
                },
            ],
            updates: result.changes,
            metadata: result.metadata,
            base: empty,
        })
        .await;
    assert!(
        matches!(stale, Committed::NotApplied(CatalogError::Conflict { .. })),
        "{stale:?}"
    );

    // The engine: its first attempt loses to a rival committer, its retry lands.
    let rival = requests::write_request(catalog.as_ref(), &ident, &[(2, "grace")]).await;
    let mine = requests::write_request(catalog.as_ref(), &ident, &[(3, "edsger")]).await;
    let racing = Racing::new(catalog.clone(), rival);
    let engine = CommitEngine::new(racing.clone(), RetryPolicy::default());
    let out = engine.append(&ident, vec![mine.clone()]).await.unwrap();
    assert!(racing.raced());
    assert_eq!(racing.conflicts(), 1);
    assert_eq!(out.attempts, 2);
    assert_eq!(out.committed, vec![mine.batch_id]);
    assert_eq!(
        rows(catalog.as_ref(), &ident).await,
        owned(&[(1, "ada"), (2, "grace"), (3, "edsger")])
    );
    let now = catalog.load_table(&ident).await.unwrap();
    assert_eq!(now.metadata.snapshots().count(), 3);
    assert!(!now.metadata.properties().contains_key("floe.test"));
}

/// What a stub saw: method, path and body of each request.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// A one-route-per-closure HTTP/1.1 server on 127.0.0.1: `answer` gets the
/// method, path and body and returns status and body, or `None` to never answer.
async fn stub<F>(answer: F) -> (String, Seen)
where
    F: Fn(&str, &str, &str) -> Option<(u16, String)> + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let answer = Arc::new(answer);
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head_end, length) = loop {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    let n = conn.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut first = head.split_whitespace();
                let method = first.next().unwrap_or_default().to_string();
                let path = first.next().unwrap_or_default().to_string();
                let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).to_string();
                log.lock()
                    .unwrap()
                    .push((method.clone(), path.clone(), body.clone()));
                match answer(&method, &path, &body) {
                    Some((status, body)) => {
                        let reply = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = conn.write_all(reply.as_bytes()).await;
                        let _ = conn.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(300)).await,
                }
            });
        }
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth2_tokens_are_fetched_refreshed_on_401_and_before_expiry() {
    let s = server();
    // lakana takes only its own tokens and has no token endpoint: the stub
    // hands out a revoked one first, then lakana's, the second one short-lived.
    let token = s.token.clone();
    let issued = Arc::new(AtomicUsize::new(0));
    let count = issued.clone();
    let (token_uri, seen) = stub(move |_, _, _| {
        let (value, expires_in) = match count.fetch_add(1, Ordering::SeqCst) {
            0 => ("lakana_pat_0000000000000000_revoked".to_string(), 3600),
            1 => (token.clone(), 1),
            _ => (token.clone(), 3600),
        };
        Some((
            200,
            serde_json::json!({"access_token": value, "token_type": "bearer",
                "expires_in": expires_in, "issued_token_type":
                "urn:ietf:params:oauth:token-type:access_token"})
            .to_string(),
        ))
    })
    .await;
    let auth = RestAuth::OAuth2 {
        server_uri: Some(format!("{token_uri}/oauth/tokens")),
        client_id: "floe".into(),
        client_secret: "s3cret".into(),
        scope: Some("PRINCIPAL_ROLE:ALL".into()),
    };
    // lakana answers `/v1/config` without sign-in: one token fetched so far.
    let catalog = RestCatalog::connect(config(&s.uri, auth), Some(&clients().await))
        .await
        .unwrap();
    assert_eq!(issued.load(Ordering::SeqCst), 1);
    // The revoked token is refused with 401; a new one is fetched and the call
    // made once more.
    let ident = new_table(&catalog).await;
    assert_eq!(issued.load(Ordering::SeqCst), 2);
    {
        let seen = seen.lock().unwrap();
        let (method, path, body) = &seen[0];
        assert_eq!((method.as_str(), path.as_str()), ("POST", "/oauth/tokens"));
        for field in [
            "grant_type=client_credentials",
            "client_id=floe",
            "client_secret=s3cret",
            "scope=PRINCIPAL_ROLE%3AALL",
        ] {
            assert!(body.contains(field), "{field} missing from {body}");
        }
    }
    // The second token lives one second: the next call fetches a third first.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    catalog.load_table(&ident).await.unwrap();
    assert_eq!(issued.load(Ordering::SeqCst), 3);
    catalog.load_table(&ident).await.unwrap();
    assert_eq!(issued.load(Ordering::SeqCst), 3, "a valid token is reused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_failures_map_to_conflict_ambiguous_or_refused() {
    let real = catalog().await;
    let ident = new_table(&real).await;
    let base = real.load_table(&ident).await.unwrap();
    let commit = || {
        let result = TableMetadataBuilder::new_from_metadata(
            (*base.metadata).clone(),
            Some(base.metadata_location.clone()),
        )
        .set_properties(HashMap::from([("k".into(), "v".into())]))
        .unwrap()
        .build()
        .unwrap();
        TableCommit {
            base: base.clone(),
            metadata: result.metadata,
            updates: result.changes,
            requirements: vec![],
        }
    };
    // A fake catalog whose commit answers are chosen by the table name.
    let (uri, _) = stub(|method, path, _| match (method, path) {
        ("GET", p) if p.starts_with("/v1/config") => {
            Some((200, r#"{"defaults":{},"overrides":{"prefix":"p"}}"#.into()))
        }
        ("POST", p) if p.ends_with("/conflict") => Some((
            409,
            r#"{"error":{"message":"branch main changed","type":"CommitFailedException","code":409}}"#.into(),
        )),
        ("POST", p) if p.ends_with("/gateway") => Some((502, "bad gateway".into())),
        ("POST", p) if p.ends_with("/bad") => Some((
            400,
            r#"{"error":{"message":"unknown action","type":"BadRequestException","code":400}}"#.into(),
        )),
        ("POST", p) if p.ends_with("/hangs") => None,
        _ => Some((404, "{}".into())),
    })
    .await;
    let cfg = RestConfig {
        timeout: Duration::from_secs(1),
        ..config(&uri, RestAuth::Token("t".into()))
    };
    let fake = RestCatalog::connect(cfg, Some(&clients().await))
        .await
        .unwrap();
    let on = |name: &str| {
        let mut c = commit();
        c.base.ident = TableIdent::new(NamespaceIdent::new("bronze".into()), name.into());
        c
    };
    let r = fake.commit(on("conflict")).await;
    assert!(
        matches!(r, Committed::NotApplied(CatalogError::Conflict { .. })),
        "{r:?}"
    );
    let r = fake.commit(on("gateway")).await;
    assert!(
        matches!(&r, Committed::Unknown(CatalogError::Ambiguous { reason, .. }) if reason.contains("502")),
        "{r:?}"
    );
    let r = fake.commit(on("hangs")).await;
    assert!(
        matches!(&r, Committed::Unknown(CatalogError::Ambiguous { reason, .. }) if reason.contains("timed out")),
        "{r:?}"
    );
    let r = fake.commit(on("bad")).await;
    assert!(
        matches!(&r, Committed::NotApplied(CatalogError::NotApplied { reason: m, .. }) if m.contains("unknown action") && m.contains("400") && m.contains("/v1/p/namespaces/bronze/tables/bad")),
        "{r:?}"
    );
    let r = fake.commit(on("gone")).await;
    assert!(
        matches!(r, Committed::NotApplied(CatalogError::NoSuchTable { .. })),
        "{r:?}"
    );

    // The real table is untouched by all that.
    let now = real.load_table(&ident).await.unwrap();
    assert_eq!(now.metadata_location, base.metadata_location);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_are_retried_on_5xx_and_a_static_token_s_401_is_final() {
    let calls = Arc::new(AtomicUsize::new(0));
    let count = calls.clone();
    let (uri, seen) = stub(move |method, path, _| match (method, path) {
        ("GET", "/v1/config") => match count.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Some((503, "busy".into())),
            _ => Some((200, r#"{"defaults":{"prefix":"d"},"overrides":{}}"#.into())),
        },
        ("GET", _) => Some((
            401,
            r#"{"error":{"message":"token expired","type":"NotAuthorizedException","code":401}}"#
                .into(),
        )),
        _ => Some((500, "{}".into())),
    })
    .await;
    let cfg = RestConfig {
        prefix: None,
        ..config(&uri, RestAuth::Token("t".into()))
    };
    let fake = RestCatalog::connect(cfg, Some(&clients().await))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(fake.properties()["prefix"], "d");
    let r = fake.load_table(&parse_table("bronze.t").unwrap()).await;
    assert!(
        matches!(&r, Err(e @ CatalogError::Store { .. }) if e.to_string().contains("401") && e.to_string().contains("token expired")),
        "{r:?}"
    );
    let loads: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, p, _)| p.contains("/tables/"))
        .map(|(_, p, _)| p.clone())
        .collect();
    // Once, at the server's prefix: a static token cannot be refreshed.
    assert_eq!(loads, vec!["/v1/d/namespaces/bronze/tables/t".to_string()]);
}

/// What the lossy proxy does with the next commit (a POST to a table) once
/// lakana has applied it.
#[derive(Debug, Clone, Copy)]
enum Lose {
    /// Close the connection without an answer.
    Drop,
    /// Answer this status instead of lakana's.
    Status(u16),
    /// Answer lakana's, after the client has given up.
    Late,
    /// Close the connection without an answer, and answer the next read
    /// of the table 503, so the client cannot read back what landed.
    Blind,
}

/// An HTTP/1.1 proxy to lakana that forwards every request and, for the
/// commits `faults` lists (in turn), loses lakana's answer after it applied:
/// the commit failures a gateway or a network shows a REST client.
async fn lossy_proxy(faults: Vec<Lose>) -> String {
    let upstream = server().uri.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let faults = Arc::new(Mutex::new(faults));
    let blind = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = reqwest::Client::new();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let (faults, client, upstream) = (faults.clone(), client.clone(), upstream.clone());
            let blind = blind.clone();
            tokio::spawn(async move {
                let Some((method, path, head, body)) = read_request(&mut conn).await else {
                    return;
                };
                let load = method == "GET" && path.contains("/tables/");
                if load && blind.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    let reply = "HTTP/1.1 503 X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    let _ = conn.write_all(reply.as_bytes()).await;
                    return;
                }
                let mut call = client.request(
                    reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                    format!("{upstream}{path}"),
                );
                for line in head.lines().skip(1) {
                    if let Some((k, v)) = line.split_once(':')
                        && ["authorization", "content-type"].contains(&k.to_lowercase().as_str())
                    {
                        call = call.header(k.trim(), v.trim());
                    }
                }
                let answer = call.body(body).send().await.unwrap();
                let status = answer.status().as_u16();
                let answer = answer.bytes().await.unwrap();
                // A commit: POST …/tables/<name> (a creation posts to …/tables).
                let commit =
                    method == "POST" && !path.ends_with("/tables") && path.contains("/tables/");
                let fault = if commit && status == 200 {
                    let mut f = faults.lock().unwrap();
                    (!f.is_empty()).then(|| f.remove(0))
                } else {
                    None
                };
                let (status, answer) = match fault {
                    None => (status, answer.to_vec()),
                    Some(Lose::Drop) => return,
                    Some(Lose::Blind) => {
                        blind.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    Some(Lose::Status(s)) => (
                        s,
                        b"{\"error\":{\"message\":\"lost\",\"type\":\"ServerError\",\"code\":500}}"
                            .to_vec(),
                    ),
                    Some(Lose::Late) => {
                        tokio::time::sleep(Duration::from_secs(6)).await;
                        (status, answer.to_vec())
                    }
                };
                let mut reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    answer.len()
                )
                .into_bytes();
                reply.extend_from_slice(&answer);
                let _ = conn.write_all(&reply).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

/// One HTTP/1.1 request off `conn`: method, path, head, body.
async fn read_request(
    conn: &mut tokio::net::TcpStream,
) -> Option<(String, String, String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut first = head.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    Some((
        method,
        path,
        head,
        buf[head_end..head_end + length].to_vec(),
    ))
}

/// The table holds exactly `want` for iceberg-rust, pyiceberg (through
/// lakana) and DuckDB (from the metadata file), and every file its metadata
/// or metadata log names is there.
async fn assert_table(catalog: &dyn Catalog, ident: &TableIdent, want: &[(i64, &str)]) {
    let missing = floe_test_support::whole::missing_files(catalog, ident).await;
    assert!(
        missing.is_empty(),
        "files the table names are gone: {missing:?}"
    );
    let want = owned(want);
    assert_eq!(rows(catalog, ident).await, want, "iceberg-rust");
    let pairs = |v: &serde_json::Value| -> Vec<(i64, String)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(pairs(&pyiceberg_read(ident)["rows"]), want, "pyiceberg");
    let loaded = catalog.load_table(ident).await.unwrap();
    let v = services::python_json(
        "shared/tests/read_s3.py",
        &[&server().moto, &loaded.metadata_location, "--duckdb-only"],
    );
    assert_eq!(pairs(&v["duckdb"]), want, "DuckDB");
}

/// Each way a commit's answer is lost after lakana applied it (the
/// connection dropped, a 500, 502 or 504 from a gateway, an answer after the
/// client's timeout), with another writer committing on top before the
/// committer reloads: the catalog reads the table back and finds the
/// commit's snapshot, or, when that read fails too, the engine's next load
/// finds its batch in the ledger. Its batch counts as committed, its files
/// stay, and redeliveries change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_then_lost_answers_keep_the_commit_also_when_overtaken() {
    let direct = catalog().await;
    for lose in [
        Lose::Drop,
        Lose::Status(500),
        Lose::Status(502),
        Lose::Status(504),
        Lose::Late,
        Lose::Blind,
    ] {
        let ident = new_table(&direct).await;
        let a_req =
            requests::write_request(direct.as_ref(), &ident, &[(1, "ada"), (2, "grace")]).await;
        let b_req = requests::write_request(direct.as_ref(), &ident, &[(3, "edsger")]).await;
        let s = server();
        let cfg = RestConfig {
            timeout: Duration::from_secs(3),
            // One 503 is the read back's answer, not a pause to retry through.
            get_attempts: 1,
            ..config(
                &lossy_proxy(vec![lose]).await,
                RestAuth::Token(s.token.clone()),
            )
        };
        let lossy: Arc<RestCatalog> = Arc::new(
            RestCatalog::connect(cfg, Some(&clients().await))
                .await
                .unwrap(),
        );
        let overtaking = Arc::new(floe_test_support::overtaking::Overtaking::new(
            lossy,
            direct.clone(),
            b_req.clone(),
        ));
        let a = CommitEngine::new(overtaking.clone(), RetryPolicy::default())
            .append(&ident, vec![a_req.clone()])
            .await
            .unwrap();
        let read_back = !matches!(lose, Lose::Blind);
        assert!(
            overtaking.answer().is_some_and(|a| if read_back {
                a == "ok"
            } else {
                a.contains("unknown outcome")
            }),
            "{lose:?}: {:?}",
            overtaking.answer()
        );
        assert_eq!(a.committed, vec![a_req.batch_id.clone()], "{lose:?}");
        let again = CommitEngine::new(direct.clone(), RetryPolicy::default())
            .append(&ident, vec![a_req, b_req])
            .await
            .unwrap();
        assert!(again.committed.is_empty(), "{lose:?}: {again:?}");
        assert_eq!(again.duplicates.len(), 2, "{lose:?}");
        assert_table(
            direct.as_ref(),
            &ident,
            &[(1, "ada"), (2, "grace"), (3, "edsger")],
        )
        .await;
    }
}

/// A request whose records were all rejected commits only its ledger
/// entries. Racing another writer, it must be as safe as a data commit:
/// whichever lands second sees the first (REST checks requirements, not the
/// whole table), so neither's ledger entries are lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_only_commit_racing_another_writer_keeps_its_entries() {
    let catalog = catalog().await;
    let ident = new_table(&catalog).await;
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let first = requests::write_request(catalog.as_ref(), &ident, &[(1, "ada")]).await;
    engine.append(&ident, vec![first]).await.unwrap();
    let rejected = |id: i64| {
        let catalog = catalog.clone();
        let ident = ident.clone();
        async move {
            let mut r = requests::write_request(catalog.as_ref(), &ident, &[(id, "bad")]).await;
            r.data_files.clear();
            r.rejected_count = r.record_count;
            r.record_count = 0;
            r
        }
    };

    // A ledger-only rival lands just before a data commit planned before it,
    // then another ledger-only rival before a ledger-only commit.
    let cases = [
        (
            rejected(10).await,
            requests::write_request(catalog.as_ref(), &ident, &[(2, "grace")]).await,
        ),
        (rejected(11).await, rejected(12).await),
    ];
    for (rival, mine) in cases {
        let racing = Racing::new(catalog.clone(), rival.clone());
        let out = CommitEngine::new(racing.clone(), RetryPolicy::default())
            .append(&ident, vec![mine.clone()])
            .await
            .unwrap();
        assert!(racing.raced());
        assert_eq!(racing.conflicts(), 1, "the second commit saw the first");
        assert_eq!(out.committed, vec![mine.batch_id.clone()]);
        let again = engine
            .append(&ident, vec![rival.clone(), mine.clone()])
            .await
            .unwrap();
        assert!(
            again.committed.is_empty(),
            "a ledger entry was lost: {again:?}"
        );
        assert_eq!(again.duplicates.len(), 2);
    }
    assert_table(catalog.as_ref(), &ident, &[(1, "ada"), (2, "grace")]).await;
}

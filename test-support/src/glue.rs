//! The Glue stand-in's fault controls (`local-dev/moto_glue.py`, the server
//! `services::moto()` starts): per table, what each `UpdateTable` meets
//! (applied then the connection dropped, a 500, a conflict; refused without
//! applying; held until released; answered late) and how long each
//! `GetTable` waits, plus what the table's requests met so far; and a
//! Kinesis stream's write limit per shard, which moto itself lacks.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use floe_core::iceberg::TableIdent;
use serde_json::{Value, json};

use crate::services;

/// The faults of one Glue table.
#[derive(Debug, Clone)]
pub struct GlueFaults {
    table: String,
}

/// What a table's Glue requests met so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// UpdateTables applied.
    pub applied: u64,
    /// UpdateTables refused as stale (their VersionId was not current).
    pub stale: u64,
    /// UpdateTables refused by a rule, without applying.
    pub refused: u64,
    /// UpdateTables held right now.
    pub held: u64,
    /// Rules not taken yet.
    pub rules_left: u64,
    /// GetTables served.
    pub gets: u64,
    /// Applied UpdateTables that kept an archived table version (no
    /// `SkipArchive`).
    pub archived: u64,
}

impl GlueFaults {
    /// The faults of `ident` (a Glue database and table).
    pub fn new(ident: &TableIdent) -> Self {
        Self {
            table: format!("{}.{}", ident.namespace().join("."), ident.name()),
        }
    }

    /// Replaces the table's faults: `update` is the list of rules the next
    /// UpdateTables take in turn (see moto_glue.py), `get_latency_ms`
    /// delays every GetTable.
    pub fn set(&self, update: Value, get_latency_ms: u64) {
        call(
            "POST",
            "/floe-glue/faults",
            &json!({"table": self.table, "update": update, "get_latency_ms": get_latency_ms}),
        );
    }

    /// Lets every held UpdateTable of the table go on.
    pub fn release(&self) {
        call("POST", "/floe-glue/release", &json!({"table": self.table}));
    }

    /// What the table's requests met so far.
    pub fn seen(&self) -> Seen {
        let v = call(
            "GET",
            &format!("/floe-glue/faults?table={}", self.table),
            &Value::Null,
        );
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        Seen {
            applied: n("applied"),
            stale: n("stale"),
            refused: n("refused"),
            held: n("held"),
            rules_left: n("rules_left"),
            gets: n("gets"),
            archived: n("archived"),
        }
    }

    /// Waits until `n` UpdateTables are held (at most 60 s).
    pub async fn wait_held(&self, n: u64) {
        for _ in 0..1200 {
            if self.seen().held >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{}: {n} UpdateTables never held: {:?}",
            self.table,
            self.seen()
        );
    }
}

/// Gives Kinesis stream `stream` a write limit per shard of `bytes` and
/// 1,000 records per `window_ms` (AWS: 1 MiB per second), and stores its
/// next `drop_puts` PutRecords without answering them.
pub fn kinesis_limits(stream: &str, window_ms: u64, bytes: u64, drop_puts: u32) {
    let limits = json!({"stream": stream, "limits": true, "window_ms": window_ms,
        "bytes": bytes, "drop_puts": drop_puts});
    call("POST", "/floe-glue/kinesis", &limits);
}

/// One HTTP/1.1 call to the stand-in's control path; its JSON answer.
fn call(method: &str, path: &str, body: &Value) -> Value {
    let endpoint = services::moto();
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut conn = TcpStream::connect(host).unwrap_or_else(|e| panic!("{endpoint}: {e}"));
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, text) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {path}: no answer"));
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{method} {path}: {head}; local-dev/aws.sh must run moto_glue.py"
    );
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
}

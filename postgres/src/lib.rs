//! floe-postgres, the Postgres logical-replication source: reads one
//! micro-batch of changes per call from a `pgoutput` slot through its SQL
//! interface and returns them as floe's flat `_op` NDJSON lines, per table.
//! Nothing lives in the process between calls: the caller passes in what its
//! Iceberg table says is committed ([`SourceState`]) and records what the
//! batch returns.
//!
//! Its own crate, above floe-core and below its two entry points (`floe pg`
//! in the CLI, the pg-sync function): [`sync`] writes through floe-core's
//! embedded writer, commit engine and catalogs, and floe-core knows nothing
//! of Postgres. What does not read Postgres (the other functions, floe-core's
//! own tests) gets no tokio-postgres compiled into its floe-core, even in a
//! workspace build, and a change here rebuilds this crate and those two, not
//! floe-core and everything on it (docs/architecture.md). The `aws` feature
//! adds the login secret read from Secrets Manager (`conn::read_login`).
//!
//! # Reading
//!
//! Changes stream over a replication session (`START_REPLICATION`,
//! `stream.rs` over `wire.rs`), which the server decodes once, as they
//! commit, beside floe's writing; or, with [`PgConfig::stream`] off, are
//! peeked with `pg_logical_slot_peek_binary_changes`, which never moves the
//! slot. Either way on Postgres 14+ in pgoutput's binary mode
//! ([`PgConfig::binary`]). The slot only moves in two ways:
//! [`PgSource::read_batch`] first advances it to the caller's
//! `committed_lsn` when it lags (never beyond), and the caller calls
//! [`PgSource::advance`] after a batch is durably committed (a session
//! reports it as its flush position: the server never hears of more). A
//! crash between commit and advance is harmless: the next call advances the
//! slot itself; a crash before commit re-reads the same transactions.
//! Batches hold whole transactions, and every line carries the end LSN of
//! its transaction's commit as `_pos`, floe's own position field (not a
//! column).
//!
//! # Initial snapshot
//!
//! An exported snapshot dies with its session, so tables are copied in
//! primary-key chunks, one chunk per call, merged into the stream with
//! watermarks (the DBLog / Flink-CDC scheme):
//!
//! 1. emit a LOW watermark (`pg_logical_emit_message`, its own transaction);
//! 2. in one REPEATABLE READ transaction, record `pg_current_snapshot()` and
//!    SELECT the next `chunk_rows` rows after the cursor in key order;
//! 3. emit a HIGH watermark;
//! 4. peek the stream up to and including the HIGH watermark's transaction.
//!
//! Every stream transaction before HIGH whose change touches a chunk key,
//! and which either commits after LOW or is invisible to the chunk's
//! snapshot, removes that key from the chunk; a truncate in that window
//! clears the chunk. The chunk rows left are emitted as `r` lines at HIGH's
//! commit LSN, after every stream line before it, and the batch ends there.
//!
//! Why snapshot rows never overwrite stream changes: a chunk row is the
//! key's state at the SELECT. Transactions visible to that snapshot are
//! already in the row. One invisible to it commits after the SELECT began;
//! if it commits before HIGH it is in this batch, before the `r` line would
//! be, and its key was dropped from the chunk, so its own line (a full new
//! row, or a delete) stands. If it commits after HIGH it is in a later batch
//! and applies after the `r` line. Checking visibility, not only the LOW
//! position, also covers a transaction whose commit record precedes LOW's
//! but which became visible only after the SELECT's snapshot was taken.
//! Stream changes to keys past the cursor of a table still being copied are
//! emitted as usual; the later chunk reads those keys afresh, at least as new
//! as those changes. Watermarks of other attempts (a call that crashed
//! before its batch was committed) are ignored by id.
//!
//! Appending: while a table holds only its copy's earlier chunks (it was
//! empty when the copy began, and no stream change has inserted or updated
//! a row of it since), a chunk's keys all lie after every row the table
//! holds, so its rows replace nothing and are handed over as appends
//! ([`floe_core::source::Reads::appends`]): no key lookups, no deletes. They
//! still replace the batch's own changes to their keys, so the order above
//! holds. The flag is in the table's snapshot progress, committed with its
//! rows ([`TableProgress::Pending`]).
//!
//! Unchanged TOASTed values: under REPLICA IDENTITY DEFAULT an update that
//! leaves a large value alone sends neither it nor the old row. The batch
//! reads such values back from the table (one query per table per batch);
//! a value read later than its update can only be as new as a change that
//! follows in the stream, so the table ends equal to Postgres. An update of a
//! row deleted since is dropped, since its delete follows.

pub mod conn;
mod copy_binary;
mod error;
pub mod lsn;
pub mod pgoutput;
mod preflight;
mod privileges;
pub mod schema;
mod send;
mod snapshot;
mod source;
pub mod status;
mod stream;
pub mod sync;
mod tls;
mod txn;
pub mod values;
mod wire;

use std::fmt;

pub use conn::{ConnSettings, SecretLogin, SslMode};
pub use copy_binary::CopyError;
pub use error::PgError;
pub use lsn::{format_lsn, parse_lsn};
pub use preflight::setup;
pub use privileges::setup_sql;
pub use schema::{PgColumn, TableSchema};
pub use snapshot::{SnapshotState, TableProgress};
pub use source::{PgBatch, PgSource, SlotHealth, TableChanges};

/// Where to read from and what.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// libpq connection string (`host=... user=... dbname=... sslmode=...`
    /// or a `postgresql://` URI); see [`conn`] for what is read from where.
    pub conninfo: String,
    /// A login read from a Secrets Manager secret, which wins over the
    /// conninfo's user and password.
    pub secret: Option<SecretLogin>,
    /// Logical replication slot (plugin `pgoutput`).
    pub slot: String,
    /// Publication naming the tables.
    pub publication: String,
    /// Tables to capture, as `schema.table` (a bare name means `public`).
    pub tables: Vec<String>,
    /// Rows per initial-snapshot chunk, at most.
    pub chunk_rows: usize,
    /// Bytes per initial-snapshot chunk, roughly: after a table's first
    /// chunk (at most 10,000 rows), a chunk holds no more rows than fit in
    /// this many bytes at the previous chunk's bytes per row, so memory
    /// stays bounded whatever `chunk_rows` and the rows' width.
    pub chunk_bytes: usize,
    /// Stream rows per batch, roughly: whole transactions are never split.
    pub max_changes: usize,
    /// Whether changes are read in pgoutput's binary mode on Postgres 14+
    /// (values in their send form, decoded here; a peek whose tables hold a
    /// type floe cannot take in binary is read as text). False reads every
    /// value as text, as older servers send it.
    pub binary: bool,
    /// Whether changes stream over a replication session
    /// (`START_REPLICATION`), decoded once by the server as they commit.
    /// False peeks each batch with `pg_logical_slot_peek_binary_changes`,
    /// which decodes again from the slot's `restart_lsn` every time, for a
    /// connection path that cannot carry a replication session (a pooler
    /// in transaction mode).
    pub stream: bool,
}

impl PgConfig {
    /// A config with the default chunk (up to 1,000,000 rows, about 16 MiB
    /// after the first 10,000) and batch (50,000 changes) sizes.
    pub fn new(
        conninfo: impl Into<String>,
        slot: impl Into<String>,
        publication: impl Into<String>,
        tables: Vec<String>,
    ) -> Self {
        Self {
            conninfo: conninfo.into(),
            secret: None,
            slot: slot.into(),
            publication: publication.into(),
            tables,
            chunk_rows: 1_000_000,
            chunk_bytes: 16 << 20,
            max_changes: 50_000,
            binary: true,
            stream: true,
        }
    }

    /// `self` with the `[postgres]` settings that tune reading
    /// (`chunk_rows`, `max_changes`, `peek`); the CLI and the pg-sync
    /// function read the rest their own ways.
    pub fn tuned_by(mut self, pg: &floe_core::config::PostgresConfig) -> Self {
        // Both are bounded to 10,000,000 by the config's checks.
        if let Some(n) = pg.chunk_rows {
            self.chunk_rows = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = pg.max_changes {
            self.max_changes = usize::try_from(n).unwrap_or(usize::MAX);
        }
        self.stream = !pg.peek.unwrap_or(false);
        self
    }

    pub(crate) fn table_names(&self) -> Vec<TableName> {
        self.tables.iter().map(|t| TableName::parse(t)).collect()
    }
}

/// What the caller's Iceberg table says about the source.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourceState {
    /// End LSN of the last transaction durably committed, `None` before the first.
    pub committed_lsn: Option<u64>,
    /// Progress of the initial snapshot, committed together with `committed_lsn`.
    pub snapshot: SnapshotState,
}

/// A `schema.table` name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TableName {
    pub schema: String,
    pub name: String,
}

impl TableName {
    /// Splits at the first dot; no dot means schema `public`.
    pub fn parse(text: &str) -> Self {
        match text.split_once('.') {
            Some((schema, name)) => Self {
                schema: schema.to_string(),
                name: name.to_string(),
            },
            None => Self {
                schema: "public".to_string(),
                name: text.to_string(),
            },
        }
    }

    /// `"schema"."table"`, safe to splice into SQL.
    pub fn quoted(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.schema, self.name)
    }
}

/// Quotes an SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes an SQL string literal (with `standard_conforming_strings`, which
/// floe sets on its sessions).
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

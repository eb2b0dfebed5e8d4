//! The source itself: one call, one micro-batch of whole transactions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arrow_array::BooleanArray;
use arrow_select::filter::filter_record_batch;

use tokio::time::Instant;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;
use tracing::Instrument as _;

use crate::conn::ConnSettings;
use crate::error::Context as _;
use crate::pgoutput::{Datum, Message, OldTuple, Relation, Tuple};
use crate::schema::{PgColumn, TableSchema, table_schema};
use crate::snapshot::{self, Chunk, ChunkRows, TableProgress, WATERMARK_PREFIX, Watermark};
use crate::stream::{self, ChangeStream};
use crate::txn::{Gather, Txn};
use crate::{
    PgConfig, PgError, SnapshotState, SourceState, TableName, format_lsn, parse_lsn, preflight,
    quote_ident, send,
};
use floe_core::change::{Change, ChangeOp};
use floe_core::error::Classify as _;
use floe_core::row::{Row, RowWriter};
use floe_core::source::Reads;

/// Most rows of a table's first chunk, before its rows' size is known.
const FIRST_CHUNK_ROWS: usize = 10_000;

/// How long a read from the replication session waits for the server to
/// decode what was committed when it began. Only a server far behind (a
/// large backlog before the slot's position) takes long; a read given up
/// on ends its batch early, and the next read continues.
const TAKE_WAIT: Duration = Duration::from_secs(60);

/// One table's share of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct TableChanges {
    /// `schema.table`.
    pub table: String,
    /// The table's columns as last seen in this batch (so an added column
    /// shows up here as soon as a change carries it).
    pub relation: TableSchema,
    /// Its changes, in commit order, decoded here: the writer folds them
    /// as they are.
    pub changes: Vec<Change>,
    /// Snapshot rows read through binary COPY, after every change: the
    /// chunk's rows the stream did not replace, at its high watermark.
    pub reads: Option<Reads>,
}

impl TableChanges {
    /// The changes in floe's flat `_op` form, as a dead letter shows them.
    pub fn lines(&self) -> Vec<String> {
        self.changes
            .iter()
            .map(|c| String::from_utf8_lossy(&floe_core::change::flat_line(c)).into_owned())
            .collect()
    }
}

/// One micro-batch.
#[derive(Debug, Clone, PartialEq)]
pub struct PgBatch {
    /// Tables with lines, in configuration order.
    pub tables: Vec<TableChanges>,
    /// End LSN of the first transaction included (equals `last_lsn` when none is).
    pub first_lsn: u64,
    /// End LSN of the last transaction included: what the caller records as
    /// committed with the batch and then passes to [`PgSource::advance`].
    pub last_lsn: u64,
    /// Snapshot progress to record with the batch.
    pub snapshot: SnapshotState,
    /// Whether the read reached the end of the stream as it stood (a batch
    /// cut at `max_changes` or at a chunk's watermark did not).
    pub caught_up: bool,
    /// Commit time (ms since the epoch) of the first transaction included.
    pub first_commit_ms: Option<i64>,
    /// Commit time (ms since the epoch) of the last transaction included.
    pub last_commit_ms: Option<i64>,
    /// Whether anything changed relative to the state passed in.
    progressed: bool,
}

impl PgBatch {
    /// True when there is nothing to commit: no lines, no snapshot progress.
    pub fn is_empty(&self) -> bool {
        !self.progressed
    }

    /// Lines across all tables, snapshot rows read into columns included.
    pub fn line_count(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.changes.len() + t.reads.as_ref().map_or(0, |r| r.rows.num_rows()))
            .sum()
    }
}

/// A slot's position and WAL retention, from `pg_replication_slots`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlotHealth {
    /// What floe last confirmed (`None` for a slot invalidated on an old server).
    pub confirmed_flush_lsn: Option<u64>,
    /// The oldest WAL the slot keeps.
    pub restart_lsn: Option<u64>,
    /// `pg_current_wal_lsn()`.
    pub current_lsn: u64,
    /// `reserved`, `extended`, `unreserved` or `lost` (Postgres 13+).
    pub wal_status: Option<String>,
    /// Bytes the slot may still fall behind before it is lost (with `max_slot_wal_keep_size`).
    pub safe_wal_size: Option<i64>,
    /// Whether a session is reading it now.
    pub active: bool,
}

impl SlotHealth {
    /// WAL written since the position floe confirmed.
    pub fn lag_bytes(&self) -> u64 {
        self.current_lsn
            .saturating_sub(self.confirmed_flush_lsn.unwrap_or(self.current_lsn))
    }

    /// WAL the server keeps for the slot.
    pub fn retained_bytes(&self) -> u64 {
        self.current_lsn
            .saturating_sub(self.restart_lsn.unwrap_or(self.current_lsn))
    }

    /// Whether Postgres removed WAL the slot still needed.
    pub fn is_lost(&self) -> bool {
        self.wal_status.as_deref() == Some("lost")
    }
}

/// A connected, preflighted reader of one slot.
pub struct PgSource {
    client: Client,
    config: PgConfig,
    tables: Vec<TableName>,
    /// Decoded relation messages and the table followed for each, so a
    /// batch only asks the catalog when a table's shape changed.
    relations: HashMap<u32, (Relation, Arc<Followed>)>,
    /// Whether peeks ask for binary mode: the config's wish on Postgres
    /// 14+, turned off for good once a table holds a type floe cannot
    /// read in binary.
    binary: AtomicBool,
    /// Tables whose snapshot chunks are read into columns.
    columnar: HashSet<TableName>,
    /// Bytes per row of each table's last snapshot chunk, which sizes the next.
    row_bytes: HashMap<TableName, usize>,
    /// The replication session changes stream over ([`PgConfig::stream`]),
    /// open from the first read to [`PgSource::finish`].
    stream: Option<ChangeStream>,
}

/// A snapshot chunk and the ids of the watermarks around its SELECT.
struct ChunkRead {
    table: TableName,
    chunk: Chunk,
    /// The most rows it could hold: fewer mean the table is copied.
    limit: usize,
    /// The table holds no row with any of its keys ([`Reads::appends`]).
    appends: bool,
    low: String,
    high: String,
}

/// An update whose unchanged TOASTed columns are still to fill.
struct Toasted {
    table: TableName,
    /// Its index in the table's changes.
    change: usize,
    /// The row's key, as Postgres prints it.
    key: Vec<String>,
    /// The columns to fill.
    columns: Vec<String>,
}

/// A configured table as a relation message shows it.
struct Followed {
    name: TableName,
    /// Its columns in the relation's order, typed from the catalog.
    schema: TableSchema,
    /// The type oid each column's values are sent as: the relation's,
    /// which is what binary values are in even when the catalog has
    /// changed a column's type since.
    wire: Vec<u32>,
}

impl PgSource {
    /// Connects and checks the server, role, slot, publication and tables;
    /// a misconfiguration comes back as a [`PgError`] naming its fix.
    pub async fn connect(config: PgConfig) -> Result<Self, PgError> {
        let span = tracing::info_span!("pg_connect", slot = %config.slot);
        async {
            let (client, version) = preflight::connect(&config).await?;
            preflight::preflight(&client, &config).await?;
            preflight::claim_slot(&client, &config.slot).await?;
            Ok(Self::new(client, version, config))
        }
        .instrument(span)
        .await
    }

    /// Reads the snapshot chunks of `tables` (`schema.table`) through
    /// binary COPY into columns, handed over as [`TableChanges::reads`]
    /// with no text between: for a writer that takes them (a keyed table
    /// without a changelog). Other tables, and a chunk binary COPY cannot
    /// carry, are read as text into changes.
    pub fn read_in_columns(&mut self, tables: &[String]) {
        self.columnar = tables.iter().map(|t| TableName::parse(t)).collect();
    }

    /// Whether the next peek asks for pgoutput's binary mode.
    pub fn reads_binary(&self) -> bool {
        self.binary.load(Ordering::Relaxed)
    }

    /// Connects without checking the setup, for monitoring a slot that may
    /// be broken (`floe pg status`).
    pub async fn attach(config: PgConfig) -> Result<Self, PgError> {
        let (client, version) = preflight::connect(&config).await?;
        Ok(Self::new(client, version, config))
    }

    /// The source over `client`, a server of `version` (`server_version_num`).
    fn new(client: Client, version: i32, config: PgConfig) -> Self {
        let binary = config.binary && version >= 140_000;
        Self {
            client,
            tables: config.table_names(),
            config,
            relations: HashMap::new(),
            binary: AtomicBool::new(binary),
            columnar: HashSet::new(),
            row_bytes: HashMap::new(),
            stream: None,
        }
    }

    /// The columns and primary key of `table` (`schema.table`) from the catalog.
    pub async fn table_schema(&self, table: &str) -> Result<TableSchema, PgError> {
        table_schema(&self.client, &TableName::parse(table)).await
    }

    /// Where the slot stands against the server's WAL; `None` when it does not exist.
    pub async fn slot_health(&self) -> Result<Option<SlotHealth>, PgError> {
        let row = self
            .client
            .query_opt(
                "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::int8,
                        (restart_lsn - '0/0'::pg_lsn)::int8,
                        (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8,
                        wal_status, safe_wal_size::int8, active
                   FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.config.slot],
            )
            .await
            .context(|| format!("reading slot {}", self.config.slot))?;
        let lsn = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        Ok(row.map(|r| SlotHealth {
            confirmed_flush_lsn: lsn(r.get(0)),
            restart_lsn: lsn(r.get(1)),
            current_lsn: lsn(r.get(2)).unwrap_or_default(),
            wal_status: r.get(3),
            safe_wal_size: r.get(4),
            active: r.get(5),
        }))
    }

    /// Commit time (ms since the epoch) of the oldest change of a configured
    /// table still in the slot, `None` when it holds none. Decodes whole
    /// transactions, so a huge first transaction makes this slow.
    pub async fn oldest_pending_commit_ms(&self) -> Result<Option<i64>, PgError> {
        let (txns, _) = self.peek(100).await?;
        Ok(txns
            .iter()
            .find(|t| {
                t.messages.iter().any(|m| {
                    matches!(
                        m,
                        Message::Insert { .. }
                            | Message::Update { .. }
                            | Message::Delete { .. }
                            | Message::Truncate { .. }
                    )
                })
            })
            .map(|t| t.ts_ms))
    }

    /// The slot's `confirmed_flush_lsn`: where reading resumes.
    pub async fn confirmed_flush_lsn(&self) -> Result<u64, PgError> {
        let row = self
            .client
            .query_one(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.config.slot],
            )
            .await
            .context(|| format!("reading slot {}", self.config.slot))?;
        let text: Option<String> = row.get(0);
        parse_lsn(&text.unwrap_or_else(|| "0/0".into()))
    }

    /// Moves the slot to `lsn` (a batch's `last_lsn`, once durably committed),
    /// letting Postgres recycle the WAL before it. Never moves it back.
    pub async fn advance(&self, lsn: u64) -> Result<(), PgError> {
        if let Some(stream) = &self.stream {
            // The session holds the slot: it moves by what the session reports.
            stream.flushed(lsn);
            return self.flush_taken(lsn).await;
        }
        if self.confirmed_flush_lsn().await? >= lsn {
            return Ok(());
        }
        let target = format_lsn(lsn);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&self.config.slot, &target];
        let advance = || {
            self.client.execute(
                "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)",
                &params,
            )
        };
        match advance().await {
            Err(e) if in_use(&e) => {
                preflight::claim_slot(&self.client, &self.config.slot).await?;
                advance().await
            }
            other => other,
        }
        .context(|| format!("advancing slot {} to {target}", self.config.slot))?;
        Ok(())
    }

    /// Waits, briefly, for the server to take the flush position `lsn`
    /// reported over the replication session, so the slot shows it as
    /// [`Self::advance`] promises. A server slow to take it (decoding a
    /// large transaction) takes it later; nothing depends on it but WAL
    /// recycling, since the tables hold what was committed.
    async fn flush_taken(&self, lsn: u64) -> Result<(), PgError> {
        let mut pause = Duration::from_millis(1);
        let give_up = Instant::now() + Duration::from_secs(10);
        while self.confirmed_flush_lsn().await? < lsn {
            if Instant::now() >= give_up {
                tracing::warn!(slot = %self.config.slot, lsn = %format_lsn(lsn), "the server has not yet taken the flush position");
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Ends the replication session, if one is open, after reporting its
    /// last flush position: the slot is free for other readers after.
    pub async fn finish(&mut self) -> Result<(), PgError> {
        if let Some(stream) = self.stream.take() {
            stream.close().await;
            preflight::claim_slot(&self.client, &self.config.slot).await?;
        }
        Ok(())
    }

    /// Reads one micro-batch after `state.committed_lsn`, copying one
    /// snapshot chunk when a table's initial snapshot is unfinished and the
    /// stream backlog is below `max_changes`.
    pub async fn read_batch(&mut self, state: &SourceState) -> Result<PgBatch, PgError> {
        let span = tracing::info_span!(
            "pg_read_batch",
            slot = %self.config.slot,
            committed = ?state.committed_lsn.map(format_lsn)
        );
        async {
            let start = self.sync_slot(state.committed_lsn).await?;
            self.read_from(state, start, 0).await
        }
        .instrument(span)
        .await
    }

    /// Reads the micro-batch after `after`, the last LSN of a batch still
    /// being committed, as [`Self::read_batch`] would once that batch is
    /// in (`state` then holds its snapshot progress). The slot is not
    /// touched: it still holds that batch, whose transactions are skipped;
    /// `held` is about how many changes it has, which the peek reads past.
    /// Should that batch not commit, this one is dropped unused; its
    /// watermarks are then ignored by id like any lost attempt's.
    pub async fn read_batch_after(
        &mut self,
        state: &SourceState,
        after: u64,
        held: usize,
    ) -> Result<PgBatch, PgError> {
        let span = tracing::info_span!(
            "pg_read_batch",
            slot = %self.config.slot,
            after = %format_lsn(after)
        );
        self.read_from(state, after, held).instrument(span).await
    }

    /// One micro-batch of the transactions that end after `start`, past
    /// about `held` changes before it still in the slot.
    async fn read_from(
        &mut self,
        state: &SourceState,
        start: u64,
        held: usize,
    ) -> Result<PgBatch, PgError> {
        let max = self.config.max_changes.max(1);
        let (txns, full) = self.changes(start, max, held).await?;
        let pending =
            self.tables
                .iter()
                .find_map(|t| match state.snapshot.progress(&t.to_string()) {
                    TableProgress::Pending {
                        after,
                        restart,
                        appends,
                    } => Some((t.clone(), after, restart, appends)),
                    TableProgress::Done => None,
                });
        let Some((table, after, restart, appends)) = pending.filter(|_| !full) else {
            // Catch up on the stream first: a chunk would wait for all of it.
            let mut batch = self
                .assemble(txns, start, None, state.snapshot.clone(), false)
                .await?;
            batch.caught_up = !full;
            return Ok(batch);
        };
        let span = tracing::info_span!("pg_snapshot_chunk", table = %table);
        // A re-snapshot's first batch truncates the table first: its
        // chunk, too, replaces nothing.
        let appends = appends || restart;
        let read = self
            .read_chunk(&table, after.as_deref(), appends)
            .instrument(span)
            .await?;
        let txns = self.changes_through(&read.high, start, max).await?;
        let chunk = &read.chunk;
        if let Some(per_row) = chunk.bytes.checked_div(chunk.len()) {
            self.row_bytes.insert(table.clone(), per_row.max(1));
        }
        let mut snapshot = state.snapshot.clone();
        let progress = match (&chunk.last_key, chunk.len() < read.limit) {
            // The stream's rows of this batch may end it (`assemble`).
            (Some(key), false) => TableProgress::Pending {
                after: Some(key.clone()),
                restart: false,
                appends,
            },
            _ => TableProgress::Done,
        };
        tracing::info!(
            rows = chunk.len(),
            columns = matches!(chunk.rows, ChunkRows::Columns(_)),
            appends,
            done = progress == TableProgress::Done,
            last_key = chunk
                .last_key
                .as_ref()
                .map(|k| k.join(","))
                .unwrap_or_default(),
            "snapshot chunk"
        );
        snapshot.tables.insert(table.to_string(), progress);
        let schema = read.chunk.schema.clone();
        let mut batch = self
            .assemble(txns, start, Some(read), snapshot, true)
            .await?;
        if restart {
            truncate_first(&mut batch, &table, schema);
        }
        Ok(batch)
    }

    /// Brings the slot up to `committed`, never past it, and returns where
    /// reading starts.
    async fn sync_slot(&self, committed: Option<u64>) -> Result<u64, PgError> {
        // A flush position reported but not yet taken is committed all the same.
        let reported = self.stream.as_ref().map_or(0, ChangeStream::flush_position);
        let confirmed = self.confirmed_flush_lsn().await?.max(reported);
        match committed {
            Some(c) if confirmed < c => {
                self.advance(c).await?;
                Ok(c)
            }
            Some(c) if confirmed > c => Err(PgError::SlotAhead {
                slot: self.config.slot.clone(),
                confirmed: format_lsn(confirmed),
                committed: format_lsn(c),
            }),
            _ => Ok(confirmed),
        }
    }

    /// The transactions after `start`, about `upto` messages of them (true:
    /// more may wait), streamed or peeked as [`PgConfig::stream`] says; a
    /// peek reads past about `held` messages before `start` still in the slot.
    async fn changes(
        &mut self,
        start: u64,
        upto: usize,
        held: usize,
    ) -> Result<(Vec<Txn>, bool), PgError> {
        if self.config.stream {
            self.streamed(start, upto).await
        } else {
            self.peek(upto.saturating_add(held)).await
        }
    }

    /// [`Self::changes`] from the replication session, opened (again) at
    /// `start` unless it continues there.
    async fn streamed(&mut self, start: u64, upto: usize) -> Result<(Vec<Txn>, bool), PgError> {
        let mut retried = false;
        loop {
            let binary = self.reads_binary();
            let stream = match self.stream.take() {
                Some(s) if s.next == start && s.binary == binary => s,
                old => {
                    if let Some(old) = old {
                        old.close().await;
                    }
                    self.open_stream(start, binary).await?
                }
            };
            let stream = self.stream.insert(stream);
            let target = wal_flushed(&self.client).await?;
            let (txns, full) = match stream.take(upto, target, TAKE_WAIT).await {
                Ok(read) => read,
                Err(e) => {
                    // A session that failed is never read again; a broken
                    // connection gets one new session from the same place.
                    self.stream = None;
                    if retried || !e.is_transient() {
                        return Err(e);
                    }
                    tracing::warn!(slot = %self.config.slot, error = %e, "the replication session broke; opening another");
                    retried = true;
                    continue;
                }
            };
            if binary && self.falls_back_to_text(&txns) {
                // Read again as text, from the same place.
                self.stream = None;
                continue;
            }
            return Ok((txns, full));
        }
    }

    /// A replication session on the slot from `start`; a session still
    /// holding the slot (this process's last, a killed run's) is waited
    /// for or ended, once.
    async fn open_stream(&self, start: u64, binary: bool) -> Result<ChangeStream, PgError> {
        let settings = ConnSettings::resolve(&self.config.conninfo, self.config.secret.as_ref())?
            .with_default_application_name("floe");
        let c = &self.config;
        let open = || {
            ChangeStream::open(
                &settings,
                &c.slot,
                &c.publication,
                start,
                binary,
                c.max_changes.max(1),
            )
        };
        match open().await {
            Err(PgError::Stream {
                code: Some(code), ..
            }) if code == SqlState::OBJECT_IN_USE.code() => {
                preflight::claim_slot(&self.client, &c.slot).await?;
                open().await
            }
            other => other,
        }
        .map_err(stream::with_peek_hint)
    }

    /// Peeks up to about `upto` rows; true when the limit was reached (more may wait).
    async fn peek(&self, upto: usize) -> Result<(Vec<Txn>, bool), PgError> {
        if self.binary.load(Ordering::Relaxed) {
            let (txns, full) = self.peek_as(upto, true).await?;
            if !self.falls_back_to_text(&txns) {
                return Ok((txns, full));
            }
        }
        self.peek_as(upto, false).await
    }

    /// Turns binary mode off for good when a relation message in `txns`
    /// shows a configured table with a type floe cannot read in binary.
    fn falls_back_to_text(&self, txns: &[Txn]) -> bool {
        let Some((table, column)) = self.unreadable(txns) else {
            return false;
        };
        tracing::info!(
            slot = %self.config.slot,
            table = %table,
            column = %column,
            "a column's type has no binary reader in floe: reading changes as text from now on"
        );
        self.binary.store(false, Ordering::Relaxed);
        true
    }

    /// A configured table and its column, in a relation message of `txns`,
    /// whose type binary mode cannot read.
    fn unreadable(&self, txns: &[Txn]) -> Option<(TableName, String)> {
        txns.iter().flat_map(|t| &t.messages).find_map(|m| match m {
            Message::Relation(rel) => {
                let name = relation_name(rel);
                let column = rel.columns.iter().find(|c| !send::readable(c.type_oid))?;
                self.tables
                    .contains(&name)
                    .then(|| (name, column.name.clone()))
            }
            _ => None,
        })
    }

    /// [`Self::peek`] in binary mode or as text.
    async fn peek_as(&self, upto: usize, binary: bool) -> Result<(Vec<Txn>, bool), PgError> {
        let upto_i32 = i32::try_from(upto).unwrap_or(i32::MAX);
        let publication = quote_ident(&self.config.publication);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&self.config.slot, &upto_i32, &publication];
        let sql = if binary {
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(
                $1, NULL, $2, 'proto_version', '1', 'publication_names', $3,
                'messages', 'true', 'binary', 'true')"
        } else {
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(
                $1, NULL, $2, 'proto_version', '1', 'publication_names', $3,
                'messages', 'true')"
        };
        let query = || self.client.query(sql, &params);
        let rows = match query().await {
            // Another session is in the slot (a killed run's backend still
            // decoding, `floe pg status`): wait for it, or end it, once.
            Err(e) if in_use(&e) => {
                preflight::claim_slot(&self.client, &self.config.slot).await?;
                query().await
            }
            other => other,
        }
        .context(|| format!("peeking slot {}", self.config.slot))?;
        let full = rows.len() >= upto;
        let mut txns = Vec::new();
        let mut gather = Gather::default();
        for row in &rows {
            let data: &[u8] = row.get(1);
            if let Some(txn) = gather.push(data, &|| row.get::<_, String>(0))? {
                txns.push(txn);
            }
        }
        Ok((txns, full))
    }

    /// The transactions after `start` through that of watermark `id`,
    /// `upto` messages at a time: from the session (what it read past the
    /// watermark is given back), or peeked with a growing limit.
    async fn changes_through(
        &mut self,
        id: &str,
        start: u64,
        upto: usize,
    ) -> Result<Vec<Txn>, PgError> {
        if !self.config.stream {
            return self.peek_through(id, upto).await;
        }
        let mut got: Vec<Txn> = Vec::new();
        loop {
            let from = got.last().map_or(start, |t| t.end_lsn);
            let (txns, full) = self.streamed(from, upto).await?;
            got.extend(txns);
            if let Some(at) = got.iter().position(|t| is_watermark(t, id)) {
                let rest = got.split_off(at + 1);
                let next = got.last().map_or(start, |t| t.end_lsn);
                if let Some(stream) = self.stream.as_mut() {
                    stream.give_back(rest, next);
                }
                return Ok(got);
            }
            if !full {
                return Err(PgError::WatermarkLost {
                    slot: self.config.slot.clone(),
                    id: id.to_string(),
                });
            }
        }
    }

    /// Peeks until the transaction of watermark `id` is in, growing the limit.
    async fn peek_through(&self, id: &str, start: usize) -> Result<Vec<Txn>, PgError> {
        let mut upto = start;
        loop {
            let (mut txns, full) = self.peek(upto).await?;
            if let Some(at) = txns.iter().position(|t| is_watermark(t, id)) {
                txns.truncate(at + 1);
                return Ok(txns);
            }
            if !full {
                return Err(PgError::WatermarkLost {
                    slot: self.config.slot.clone(),
                    id: id.to_string(),
                });
            }
            upto = upto.saturating_mul(2);
        }
    }

    /// LOW watermark, chunk SELECT, HIGH watermark.
    async fn read_chunk(
        &self,
        table: &TableName,
        after: Option<&[String]>,
        appends: bool,
    ) -> Result<ChunkRead, PgError> {
        let schema = table_schema(&self.client, table).await?;
        let mark = |kind: &str| Watermark {
            kind: kind.to_string(),
            id: uuid::Uuid::new_v4().to_string(),
            table: table.to_string(),
        };
        let (low, high) = (mark("low"), mark("high"));
        let limit = self.chunk_limit(table);
        snapshot::emit_watermark(&self.client, &low).await?;
        let chunk = snapshot::read_chunk(
            &self.client,
            table,
            schema,
            after,
            limit,
            self.columnar.contains(table),
        )
        .await?;
        snapshot::emit_watermark(&self.client, &high).await?;
        Ok(ChunkRead {
            table: table.clone(),
            chunk,
            limit,
            appends,
            low: low.id,
            high: high.id,
        })
    }

    /// Whether `table`'s (`schema.table`) copy left files worth compacting
    /// once it finishes: its chunks stopped at `chunk_rows` well before
    /// `chunk_bytes` (a small `chunk_rows`, a narrow table), so it wrote
    /// many small files. Chunks bounded by bytes make files of about
    /// `chunk_bytes` of rows each, which compaction would only rewrite.
    pub fn copy_wants_compaction(&self, table: &str) -> bool {
        let Some(per_row) = self.row_bytes.get(&TableName::parse(table)) else {
            // Never chunked in this process: nothing known, nothing to say.
            return false;
        };
        let rows_fit = self.config.chunk_bytes / per_row;
        self.config.chunk_rows.saturating_mul(2) <= rows_fit
    }

    /// Rows of `table`'s next chunk: `chunk_rows` at most, and no more than
    /// fit in `chunk_bytes` at its last chunk's size per row.
    fn chunk_limit(&self, table: &TableName) -> usize {
        let most = self.config.chunk_rows.max(1);
        match self.row_bytes.get(table) {
            Some(per_row) => most.min((self.config.chunk_bytes / per_row).max(1)),
            None => most.min(FIRST_CHUNK_ROWS),
        }
    }

    /// Turns decoded transactions into lines, merging a snapshot chunk.
    async fn assemble(
        &mut self,
        txns: Vec<Txn>,
        start: u64,
        chunk: Option<ChunkRead>,
        mut snapshot: SnapshotState,
        snapshot_moved: bool,
    ) -> Result<PgBatch, PgError> {
        let mut a = Assembly::new(chunk);
        let mut first_lsn = None;
        let mut last_lsn = start;
        let mut after_low = false;
        let mut last_commit_ms = None;
        let mut first_commit_ms = None;
        for txn in txns.into_iter().filter(|t| t.end_lsn > start) {
            first_lsn.get_or_insert(txn.end_lsn);
            last_lsn = txn.end_lsn;
            last_commit_ms = Some(txn.ts_ms);
            first_commit_ms.get_or_insert(txn.ts_ms);
            let at = At {
                ts_ms: txn.ts_ms,
                lsn: txn.end_lsn,
            };
            let (low, high) = match (watermark_of(&txn), &a.chunk) {
                (Some(m), Some(read)) => (m.id == read.low, m.id == read.high),
                _ => (false, false),
            };
            after_low |= low;
            if high {
                a.chunk_done(at)?;
                continue;
            }
            let in_window = a
                .chunk
                .as_ref()
                .is_some_and(|r| after_low || !r.chunk.visibility.sees(txn.xid));
            for message in txn.messages {
                if let Message::Relation(rel) = &message {
                    self.follow_relation(&mut a, rel).await?;
                } else {
                    a.change(message, |id| self.known(id), at, in_window)?;
                }
            }
        }
        if let Some(read) = a.chunk {
            // peek_through stops at the high watermark, so it is always met.
            return Err(PgError::WatermarkLost {
                slot: format!("{} ({})", self.config.slot, read.table),
                id: read.high,
            });
        }
        let mut out = a.out;
        self.fill_unchanged(&mut out, a.toasted).await?;
        for t in out.iter().filter(|t| adds_rows(t)) {
            snapshot.stop_appending(&t.table);
        }
        let order = |t: &TableChanges| self.tables.iter().position(|n| n.to_string() == t.table);
        out.sort_by_key(order);
        out.retain(|t| !t.changes.is_empty() || t.reads.is_some());
        Ok(PgBatch {
            progressed: snapshot_moved || !out.is_empty(),
            tables: out,
            first_lsn: first_lsn.unwrap_or(last_lsn),
            last_lsn,
            snapshot,
            caught_up: false,
            first_commit_ms,
            last_commit_ms,
        })
    }

    /// A relation message of a configured table: its schema as the stream
    /// now shows it, for the lines that follow.
    async fn follow_relation(&mut self, a: &mut Assembly, rel: &Relation) -> Result<(), PgError> {
        let name = relation_name(rel);
        if self.tables.contains(&name) {
            let followed = self.relation_schema(name, rel).await?;
            let changes = entry(&mut a.out, &followed.name, || followed.schema.clone());
            changes.relation = followed.schema.clone();
        }
        Ok(())
    }

    /// Replaces the placeholders of unchanged TOASTed values (updates under
    /// REPLICA IDENTITY DEFAULT, which send no old row) with the values the
    /// rows hold now, read in one query per table. A value read now may be
    /// newer than the update; any later change to it comes later in the
    /// stream and lands after, so the table ends equal to Postgres. An update
    /// of a row deleted since is dropped: its delete comes later too. Without
    /// this the writer could only dead-letter such updates.
    async fn fill_unchanged(
        &self,
        out: &mut [TableChanges],
        toasted: Vec<Toasted>,
    ) -> Result<(), PgError> {
        if toasted.is_empty() {
            return Ok(());
        }
        let mut by_table: HashMap<TableName, Vec<Toasted>> = HashMap::new();
        for t in toasted {
            by_table.entry(t.table.clone()).or_default().push(t);
        }
        for (table, items) in by_table {
            let schema = table_schema(&self.client, &table).await?;
            let mut columns: Vec<String> = items
                .iter()
                .flat_map(|t| t.columns.iter().cloned())
                .filter(|c| schema.column(c).is_some())
                .collect();
            columns.sort();
            columns.dedup();
            let mut keys: Vec<Vec<String>> = items.iter().map(|t| t.key.clone()).collect();
            keys.sort();
            keys.dedup();
            let current =
                snapshot::read_columns(&self.client, &table, &schema, &keys, &columns).await?;
            tracing::debug!(table = %table, updates = items.len(), "filled unchanged TOAST values");
            let Some(changes) = out.iter_mut().find(|c| c.table == table.to_string()) else {
                continue;
            };
            let mut dropped = Vec::new();
            for item in &items {
                let Some(change) = changes.changes.get_mut(item.change) else {
                    continue;
                };
                let Some(row) = current.get(&item.key) else {
                    dropped.push(item.change);
                    continue;
                };
                let mut filled = RowWriter::with_capacity(change.row.as_bytes().len() + 64);
                filled.copy(&change.row, |_| true);
                let mut text = String::new();
                for name in item.columns.iter().filter(|c| change.unchanged.contains(c)) {
                    let value = row.get(name).cloned().flatten();
                    match schema.column(name) {
                        Some(column) => put(&mut filled, &mut text, column, value.as_deref()),
                        // A column dropped since.
                        None => filled.raw(name, b"null"),
                    }
                }
                change.unchanged.retain(|c| !item.columns.contains(c));
                change.row = filled.finish();
            }
            dropped.sort_unstable();
            for i in dropped.into_iter().rev() {
                changes.changes.remove(i);
            }
        }
        Ok(())
    }

    /// The configured table relation `id` is, if it is one of ours.
    fn known(&self, id: u32) -> Option<Arc<Followed>> {
        self.relations
            .get(&id)
            .map(|(_, followed)| followed.clone())
    }

    /// The table `name` as relation message `rel` shows it: its columns in
    /// order, typed from the catalog where the catalog still has them.
    async fn relation_schema(
        &mut self,
        name: TableName,
        rel: &Relation,
    ) -> Result<Arc<Followed>, PgError> {
        if let Some((cached, followed)) = self.relations.get(&rel.id)
            && cached == rel
        {
            return Ok(followed.clone());
        }
        let catalog = table_schema(&self.client, &name).await?;
        let mut columns = Vec::with_capacity(rel.columns.len());
        for c in &rel.columns {
            columns.push(match catalog.column(&c.name) {
                Some(known) => known.clone(),
                // Dropped since: the relation message is all there is.
                None => PgColumn {
                    name: c.name.clone(),
                    type_oid: c.type_oid,
                    typmod: c.typmod,
                    type_name: format!("oid {}", c.type_oid),
                    nullable: true,
                },
            });
        }
        let followed = Arc::new(Followed {
            schema: TableSchema {
                table: name.to_string(),
                columns,
                primary_key: catalog.primary_key,
            },
            name,
            wire: rel.columns.iter().map(|c| c.type_oid).collect(),
        });
        self.relations
            .insert(rel.id, (rel.clone(), followed.clone()));
        Ok(followed)
    }
}

/// Puts a truncate of `table` before its lines in `batch`: the first chunk of
/// a re-snapshot clears what the table held, and every line after it (stream
/// changes at or after the batch's first transaction, then the chunk's rows)
/// applies on the empty table.
fn truncate_first(batch: &mut PgBatch, table: &TableName, schema: TableSchema) {
    let at = At {
        ts_ms: batch.last_commit_ms.unwrap_or_default(),
        lsn: batch.first_lsn,
    };
    // An empty table's chunk leaves no entry to put the truncate in.
    let changes = entry(&mut batch.tables, table, || schema);
    changes
        .changes
        .insert(0, at.change(ChangeOp::Truncate, Row::default()));
}

/// Where a change sits in the stream: its transaction's commit time and end LSN.
#[derive(Clone, Copy)]
struct At {
    ts_ms: i64,
    lsn: u64,
}

impl At {
    /// The change `op` of `row` here.
    fn change(self, op: ChangeOp, row: Row) -> Change {
        Change {
            op,
            row,
            position: Some(self.lsn.to_string()),
            ts_ms: Some(self.ts_ms),
            unchanged: Vec::new(),
        }
    }
}

/// A micro-batch being assembled from transactions: each table's lines,
/// and what the stream did to the rows of the snapshot chunk being read.
struct Assembly {
    out: Vec<TableChanges>,
    /// The chunk whose high watermark is still to come.
    chunk: Option<ChunkRead>,
    /// Rows of the chunk that changes inside its window replaced or removed.
    removed: Vec<bool>,
    /// Updates whose unchanged TOASTed columns are still to fill.
    toasted: Vec<Toasted>,
}

impl Assembly {
    fn new(chunk: Option<ChunkRead>) -> Self {
        Self {
            out: Vec::new(),
            removed: vec![false; chunk.as_ref().map_or(0, |c| c.chunk.len())],
            chunk,
            toasted: Vec::new(),
        }
    }

    /// The chunk's high watermark: its rows the stream did not replace go
    /// in here, as snapshot reads.
    fn chunk_done(&mut self, at: At) -> Result<(), PgError> {
        let Some(read) = self.chunk.take() else {
            return Ok(());
        };
        let changes = entry(&mut self.out, &read.table, || read.chunk.schema.clone());
        match &read.chunk.rows {
            ChunkRows::Text(rows) => changes.changes.extend(snapshot_changes(
                &read.chunk.schema,
                rows,
                &self.removed,
                at,
            )),
            ChunkRows::Columns(rows) => {
                let kept = BooleanArray::from(self.removed.iter().map(|r| !r).collect::<Vec<_>>());
                let rows = filter_record_batch(rows, &kept).map_err(|e| {
                    PgError::Decode(format!("{}: filtering a snapshot chunk: {e}", read.table))
                })?;
                if rows.num_rows() > 0 {
                    changes.reads = Some(Reads {
                        rows,
                        position: at.lsn.to_string(),
                        appends: read.appends,
                    });
                }
            }
        }
        Ok(())
    }

    /// A row change or truncate, as changes of its table (`known`
    /// names the configured tables' relations; others are skipped).
    fn change(
        &mut self,
        message: Message,
        known: impl Fn(u32) -> Option<Arc<Followed>>,
        at: At,
        in_window: bool,
    ) -> Result<(), PgError> {
        match message {
            Message::Insert { relation, new } => {
                let Some(t) = known(relation) else {
                    return Ok(());
                };
                self.touch(in_window, &t, &new)?;
                let change = row_change(ChangeOp::Insert, at, &t, &new, None, false)?;
                t.entry(&mut self.out).changes.push(change);
            }
            Message::Update { relation, old, new } => {
                let Some(t) = known(relation) else {
                    return Ok(());
                };
                self.update(at, in_window, &t, old, &new)?;
            }
            Message::Delete { relation, old } => {
                let Some(t) = known(relation) else {
                    return Ok(());
                };
                self.touch(in_window, &t, old.tuple())?;
                let key_only = matches!(old, OldTuple::Key(_));
                let change = row_change(ChangeOp::Delete, at, &t, old.tuple(), None, key_only)?;
                t.entry(&mut self.out).changes.push(change);
            }
            Message::Truncate { relations, .. } => {
                for t in relations.into_iter().filter_map(&known) {
                    if in_window && self.chunk.as_ref().is_some_and(|r| r.table == t.name) {
                        self.removed.iter_mut().for_each(|r| *r = true);
                    }
                    t.entry(&mut self.out)
                        .changes
                        .push(at.change(ChangeOp::Truncate, Row::default()));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An update's changes: a delete of the old row first when the key
    /// changed, then the new row, noted for filling when it left TOASTed
    /// values out.
    fn update(
        &mut self,
        at: At,
        in_window: bool,
        t: &Followed,
        old: Option<OldTuple>,
        new: &Tuple,
    ) -> Result<(), PgError> {
        self.touch(in_window, t, new)?;
        if let Some(old) = &old {
            self.touch(in_window, t, old.tuple())?;
        }
        let changes = t.entry(&mut self.out);
        if let Some(old) = &old
            && t.key_of(old.tuple())? != t.key_of(new)?
        {
            let delete = row_change(ChangeOp::Delete, at, t, old.tuple(), None, true)?;
            changes.changes.push(delete);
        }
        let update = row_change(ChangeOp::Update, at, t, new, old.as_ref(), false)?;
        changes.changes.push(update);
        let unchanged = unresolved(new, old.as_ref());
        if !unchanged.is_empty()
            && let Some(key) = t.key_of(new)?
        {
            self.toasted.push(Toasted {
                table: t.name.clone(),
                change: changes.changes.len() - 1,
                key,
                columns: unchanged
                    .iter()
                    .map(|&i| t.schema.columns[i].name.clone())
                    .collect(),
            });
        }
        Ok(())
    }

    /// Drops the tuple's key from the chunk when a change in the window touches it.
    fn touch(&mut self, in_window: bool, t: &Followed, tuple: &Tuple) -> Result<(), PgError> {
        let Some(read) = self.chunk.as_ref() else {
            return Ok(());
        };
        if !in_window || read.table != t.name {
            return Ok(());
        }
        if let Some(i) = t.key_of(tuple)?.and_then(|k| read.chunk.keys.find(&k)) {
            self.removed[i] = true;
        }
        Ok(())
    }
}

/// Whether `txn` is the transaction of watermark `id`.
fn is_watermark(txn: &Txn, id: &str) -> bool {
    watermark_of(txn).is_some_and(|w| w.id == id)
}

/// The parsed floe watermark a transaction carries, if any.
fn watermark_of(txn: &Txn) -> Option<Watermark> {
    txn.messages.iter().find_map(|m| match m {
        Message::Message {
            prefix, content, ..
        } if prefix == WATERMARK_PREFIX => serde_json::from_slice(content).ok(),
        _ => None,
    })
}

/// The table's entry in the batch, created with `schema` on first use.
fn entry<'a>(
    out: &'a mut Vec<TableChanges>,
    table: &TableName,
    schema: impl FnOnce() -> TableSchema,
) -> &'a mut TableChanges {
    let name = table.to_string();
    match out.iter().position(|t| t.table == name) {
        Some(i) => &mut out[i],
        None => {
            out.push(TableChanges {
                table: name,
                relation: schema(),
                changes: Vec::new(),
                reads: None,
            });
            let last = out.len() - 1;
            &mut out[last]
        }
    }
}

/// Whether the stream inserts or updates a row of the table in this batch:
/// a row whose key a later snapshot chunk may hold (snapshot reads are the
/// chunk's own, and deletes or truncates add nothing).
fn adds_rows(t: &TableChanges) -> bool {
    t.changes
        .iter()
        .any(|c| matches!(c.op, ChangeOp::Insert | ChangeOp::Update))
}

impl Followed {
    /// The table's entry in the batch, created on first use.
    fn entry<'a>(&self, out: &'a mut Vec<TableChanges>) -> &'a mut TableChanges {
        entry(out, &self.name, || self.schema.clone())
    }

    /// The primary key values of a tuple as Postgres prints them; `None`
    /// when the tuple lacks one (a null or unchanged key column).
    fn key_of(&self, tuple: &Tuple) -> Result<Option<Vec<String>>, PgError> {
        let mut key = Vec::with_capacity(self.schema.primary_key.len());
        for k in &self.schema.primary_key {
            let Some(i) = self.schema.columns.iter().position(|c| &c.name == k) else {
                return Ok(None);
            };
            key.push(match tuple.get(i) {
                Some(Datum::Text(t)) => t.clone(),
                Some(Datum::Binary(v)) => {
                    send::text(self.wire[i], v).map_err(|reason| self.malformed(i, &reason))?
                }
                _ => return Ok(None),
            });
        }
        Ok(Some(key))
    }

    /// The error for column `i`'s binary value that does not read as its type.
    fn malformed(&self, i: usize, reason: &str) -> PgError {
        let column = self.schema.columns.get(i).map_or("?", |c| c.name.as_str());
        PgError::Decode(format!(
            "{}.{column}: binary value of type oid {}: {reason}",
            self.name,
            self.wire.get(i).copied().unwrap_or_default()
        ))
    }
}

/// The configured table a relation message names (an empty namespace is `pg_catalog`).
fn relation_name(rel: &Relation) -> TableName {
    TableName {
        schema: if rel.namespace.is_empty() {
            "pg_catalog".into()
        } else {
            rel.namespace.clone()
        },
        name: rel.name.clone(),
    }
}

/// The WAL the server has flushed: every transaction committed by now ends
/// at or before it.
async fn wal_flushed(client: &Client) -> Result<u64, PgError> {
    let row = client
        .query_one("SELECT pg_current_wal_flush_lsn()::text", &[])
        .await
        .context(|| "reading the server's flushed WAL position".to_string())?;
    parse_lsn(&row.get::<_, String>(0))
}

/// Whether the slot was busy: another session is reading it (a killed run's
/// backend still decoding, or `floe pg status`).
fn in_use(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::OBJECT_IN_USE)
}

/// Columns of `new` left out as unchanged that no full old row supplies.
fn unresolved(new: &Tuple, old: Option<&OldTuple>) -> Vec<usize> {
    new.iter()
        .enumerate()
        .filter(|(i, d)| {
            **d == Datum::Unchanged
                && !matches!(old, Some(OldTuple::Full(o)) if matches!(o.get(*i), Some(Datum::Text(_) | Datum::Binary(_) | Datum::Null)))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The change `op` of a decoded row: its columns' JSON values (only the
/// key's when `key_only`). A TOASTed value left out as unchanged, which no
/// full old row supplies, is named in the change's `unchanged` instead.
fn row_change(
    op: ChangeOp,
    at: At,
    t: &Followed,
    tuple: &Tuple,
    old: Option<&OldTuple>,
    key_only: bool,
) -> Result<Change, PgError> {
    let schema = &t.schema;
    if tuple.len() != schema.columns.len() {
        return Err(PgError::Decode(format!(
            "{}: tuple has {} values, relation has {} columns",
            schema.table,
            tuple.len(),
            schema.columns.len()
        )));
    }
    let mut row = RowWriter::with_capacity(tuple.len() * 16);
    let mut text = String::new();
    let mut unchanged = Vec::new();
    for (i, (column, datum)) in schema.columns.iter().zip(tuple).enumerate() {
        if key_only && !schema.primary_key.contains(&column.name) {
            continue;
        }
        let datum = match (datum, old) {
            // REPLICA IDENTITY FULL sends the old row: its value is the value.
            (Datum::Unchanged, Some(OldTuple::Full(old))) => old.get(i).unwrap_or(datum),
            _ => datum,
        };
        match datum {
            Datum::Null => row.raw(&column.name, b"null"),
            Datum::Text(value) => put(&mut row, &mut text, column, Some(value.as_str())),
            Datum::Binary(value) => {
                text.clear();
                let wire = t.wire.get(i).copied().unwrap_or(column.type_oid);
                if wire == column.type_oid {
                    send::push_json(&mut text, column, value)
                } else {
                    // The catalog changed the column's type since: print the
                    // value as its own type, then read that text as the text
                    // path would.
                    send::text(wire, value).map(|printed| column.push_json(&mut text, &printed))
                }
                .map_err(|reason| t.malformed(i, &reason))?;
                row.raw(&column.name, text.as_bytes());
            }
            Datum::Unchanged => unchanged.push(column.name.clone()),
        }
    }
    let mut change = at.change(op, row.finish());
    change.unchanged = unchanged;
    Ok(change)
}

/// Writes `column`'s member: the JSON form of its Postgres text `value`
/// (`text` is scratch space), or null.
fn put(row: &mut RowWriter, text: &mut String, column: &PgColumn, value: Option<&str>) {
    match value {
        Some(value) => {
            text.clear();
            column.push_json(text, value);
            row.raw(&column.name, text.as_bytes());
        }
        None => row.raw(&column.name, b"null"),
    }
}

/// The snapshot reads of a chunk's text rows still standing at the high watermark.
fn snapshot_changes(
    schema: &TableSchema,
    rows: &[Vec<Option<String>>],
    removed: &[bool],
    at: At,
) -> Vec<Change> {
    let mut text = String::new();
    rows.iter()
        .zip(removed)
        .filter(|(_, gone)| !**gone)
        .map(|(values, _)| {
            let mut row = RowWriter::with_capacity(values.len() * 16);
            for (column, value) in schema.columns.iter().zip(values) {
                put(&mut row, &mut text, column, value.as_deref());
            }
            at.change(ChangeOp::Read, row.finish())
        })
        .collect()
}

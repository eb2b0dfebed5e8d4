//! Incremental initial snapshot: progress state, watermarks and chunk reads.
//! The merge with the stream lives in `source.rs`; the module doc of
//! `postgres` explains why it is safe.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use arrow_array::{RecordBatch, StringArray};
use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::copy_binary::{CopyDecoder, CopyError, KeyColumn};
use crate::error::Context as _;
use crate::schema::TableSchema;
use crate::{PgError, TableName, quote_ident, quote_literal};

/// Bytes a value read as text holds beyond its own, roughly: a `String`
/// and its allocation, and its member in the change's JSON row.
const TEXT_VALUE_BYTES: usize = 48;

/// Message prefix of floe's watermarks in the WAL.
pub(crate) const WATERMARK_PREFIX: &str = "floe.watermark";

/// Initial-snapshot progress of every configured table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotState {
    /// Per `schema.table`; a table without an entry has not started.
    pub tables: BTreeMap<String, TableProgress>,
}

/// How far one table's initial snapshot has come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TableProgress {
    /// Rows with keys after `after` (all rows when `None`) are still to copy.
    Pending {
        /// Primary key of the last row copied, as Postgres prints each column.
        after: Option<Vec<String>>,
        /// A re-snapshot (`floe pg resync`): the first chunk's batch starts by
        /// truncating the table, so rows deleted while changes were lost go too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restart: bool,
        /// The table holds only this copy's earlier chunks (rows with keys
        /// up to `after`): no stream change has added a row since it was
        /// empty. The next chunk's keys all come after `after`, so its rows
        /// replace nothing and are appended with no key lookups. Off for
        /// good once the stream inserts or updates a row of the table, whose
        /// key may lie ahead of the cursor (a later chunk reads it again and
        /// must replace it); a delete adds no row and leaves it on.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        appends: bool,
    },
    /// Every row has been copied.
    Done,
}

impl SnapshotState {
    /// Progress of `table` (`schema.table`).
    pub fn progress(&self, table: &str) -> TableProgress {
        self.tables
            .get(table)
            .cloned()
            .unwrap_or(TableProgress::Pending {
                after: None,
                restart: false,
                appends: false,
            })
    }

    /// Marks `table` (`schema.table`), not started and found empty, as
    /// appending: its copy's first chunk replaces nothing.
    pub(crate) fn empty_table(&mut self, table: &str) {
        if !self.tables.contains_key(table) {
            self.tables.insert(
                table.to_string(),
                TableProgress::Pending {
                    after: None,
                    restart: false,
                    appends: true,
                },
            );
        }
    }

    /// Ends appending for `table` (`schema.table`): a stream change added a
    /// row the copy's later chunks may read again.
    pub(crate) fn stop_appending(&mut self, table: &str) {
        if let Some(TableProgress::Pending { appends, .. }) = self.tables.get_mut(table) {
            *appends = false;
        }
    }

    /// Whether every one of `tables` is copied.
    pub fn is_done(&self, tables: &[String]) -> bool {
        tables
            .iter()
            .all(|t| self.progress(&crate::TableName::parse(t).to_string()) == TableProgress::Done)
    }
}

/// A watermark's content, JSON in the WAL message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Watermark {
    pub kind: String,
    pub id: String,
    pub table: String,
}

/// Writes a watermark in its own committed transaction.
pub(crate) async fn emit_watermark(client: &Client, mark: &Watermark) -> Result<(), PgError> {
    let content = serde_json::to_string(mark).unwrap_or_default();
    client
        .execute(
            "SELECT pg_logical_emit_message(true, $1, $2::text)",
            &[&WATERMARK_PREFIX, &content],
        )
        .await
        .context(|| format!("emitting the {} watermark for {}", mark.kind, mark.table))?;
    Ok(())
}

/// Which transactions a snapshot sees, from `pg_current_snapshot()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Visibility {
    xmin: u64,
    xmax: u64,
    in_progress: Vec<u64>,
}

impl Visibility {
    /// Parses `xmin:xmax:xip,xip,...`.
    pub fn parse(text: &str) -> Result<Self, PgError> {
        let bad = || PgError::Decode(format!("bad pg_current_snapshot() value {text:?}"));
        let mut parts = text.split(':');
        let mut next = || parts.next().ok_or_else(bad);
        let xmin = next()?.parse().map_err(|_| bad())?;
        let xmax = next()?.parse().map_err(|_| bad())?;
        let in_progress = next()?
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            xmin,
            xmax,
            in_progress,
        })
    }

    /// Whether the 32-bit `xid` of a decoded transaction committed before
    /// the snapshot. The epoch is taken from `xmax`: decoded transactions
    /// are within 2^31 of it.
    pub fn sees(&self, xid: u32) -> bool {
        let mut full = (self.xmax & !0xFFFF_FFFF) | u64::from(xid);
        if full > self.xmax + (1 << 31) {
            full = full.saturating_sub(1 << 32);
        }
        full < self.xmin || (full < self.xmax && !self.in_progress.contains(&full))
    }
}

/// One chunk of a table read in key order.
#[derive(Debug)]
pub(crate) struct Chunk {
    /// The columns the rows hold.
    pub schema: TableSchema,
    /// Rows in key order.
    pub rows: ChunkRows,
    /// Each row's key.
    pub keys: ChunkKeys,
    /// Key of the last row, the next cursor.
    pub last_key: Option<Vec<String>>,
    /// What the SELECT saw.
    pub visibility: Visibility,
    /// Its size as read: binary COPY's bytes, or its text's.
    pub bytes: usize,
}

/// A chunk's rows, as the path that read them left them.
#[derive(Debug)]
pub(crate) enum ChunkRows {
    /// Through the simple protocol: each value as Postgres prints it.
    Text(Vec<Vec<Option<String>>>),
    /// Through binary COPY, in the Arrow form of the table's Iceberg schema.
    Columns(RecordBatch),
}

/// Each row's primary key as Postgres prints it (the stream's tuples print
/// keys so), found by value only when a change asks.
#[derive(Debug)]
pub(crate) struct ChunkKeys {
    /// Per key column, each row's value, printed when asked.
    columns: Vec<KeyColumn>,
    /// Key to row, built on the first lookup: a copy beside no writer
    /// never makes one.
    index: OnceLock<HashMap<Vec<String>, usize>>,
}

impl ChunkKeys {
    fn new(columns: Vec<KeyColumn>) -> Self {
        Self {
            columns,
            index: OnceLock::new(),
        }
    }

    fn len(&self) -> usize {
        self.columns.first().map_or(0, |c| c.len())
    }

    fn row(&self, i: usize) -> Vec<String> {
        self.columns.iter().map(|c| c.text(i)).collect()
    }

    /// The last row's key, the next cursor.
    pub fn last(&self) -> Option<Vec<String>> {
        self.len().checked_sub(1).map(|i| self.row(i))
    }

    /// The row whose key is `key`.
    pub fn find(&self, key: &[String]) -> Option<usize> {
        let index = self
            .index
            .get_or_init(|| (0..self.len()).map(|i| (self.row(i), i)).collect());
        index.get(key).copied()
    }
}

impl Chunk {
    /// How many rows it holds.
    pub fn len(&self) -> usize {
        match &self.rows {
            ChunkRows::Text(rows) => rows.len(),
            ChunkRows::Columns(rows) => rows.num_rows(),
        }
    }
}

/// Reads the `limit` rows after `after` in primary key order, with the
/// snapshot they were read in. With `columnar`, through binary COPY into
/// columns where every column has a binary decoder and every value fits
/// its Iceberg type; else, and for the chunk whose values do not, through
/// the simple protocol, so values print exactly as in pgoutput tuples.
pub(crate) async fn read_chunk(
    client: &Client,
    table: &TableName,
    schema: TableSchema,
    after: Option<&[String]>,
    limit: usize,
    columnar: bool,
) -> Result<Chunk, PgError> {
    let ctx = || format!("reading a snapshot chunk of {table}");
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .context(ctx)?;
    let result = async {
        let snapshot = simple_rows(client, "SELECT pg_current_snapshot()::text").await?;
        let visibility = snapshot
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .ok_or_else(|| PgError::Decode("pg_current_snapshot() returned nothing".into()))
            .and_then(|s| Visibility::parse(&s))?;
        let read = read_rows(client, table, &schema, after, limit, columnar).await?;
        Ok::<_, PgError>((visibility, read))
    }
    .await;
    // Read-only: ending it either way loses nothing.
    client.batch_execute("COMMIT").await.context(ctx)?;
    let (visibility, (rows, row_keys, bytes)) = result.map_err(|e| match e {
        PgError::Query { source, .. } => PgError::Query {
            context: ctx(),
            source,
        },
        other => other,
    })?;
    let keys = ChunkKeys::new(row_keys);
    let last_key = keys.last();
    Ok(Chunk {
        schema,
        rows,
        keys,
        last_key,
        visibility,
        bytes,
    })
}

/// The chunk's rows and each one's key as Postgres prints it, in key
/// order, and their size as read.
async fn read_rows(
    client: &Client,
    table: &TableName,
    schema: &TableSchema,
    after: Option<&[String]>,
    limit: usize,
    columnar: bool,
) -> Result<(ChunkRows, Vec<KeyColumn>, usize), PgError> {
    let key_columns: Vec<usize> = schema
        .primary_key
        .iter()
        .filter_map(|k| schema.columns.iter().position(|c| &c.name == k))
        .collect();
    if columnar {
        match CopyDecoder::new(schema) {
            Ok(decoder) => {
                let select = chunk_select(
                    table,
                    schema,
                    &key_columns,
                    after,
                    limit,
                    &decoder.select_list(),
                )?;
                match copy_out(client, &select, decoder).await? {
                    (Ok(d), bytes) => return Ok((ChunkRows::Columns(d.rows), d.keys, bytes)),
                    (Err(e @ CopyError::Unrepresentable { .. }), _) => {
                        tracing::info!(error = %e, "reading this chunk as text");
                    }
                    (Err(e), _) => return Err(e.into()),
                }
            }
            Err(e) => tracing::debug!(error = %e, "reading the table as text"),
        }
    }
    let columns: Vec<String> = schema
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let select = chunk_select(table, schema, &key_columns, after, limit, &columns)?;
    let rows = simple_rows(client, &select).await?;
    // A primary key column is never NULL, so the default stands for nothing.
    let keys = key_columns
        .iter()
        .map(|&c| {
            KeyColumn::Text(StringArray::from_iter_values(
                rows.iter()
                    .map(|row| row.get(c).and_then(|v| v.as_deref()).unwrap_or_default()),
            ))
        })
        .collect();
    // What a text value costs in memory until it is written, not on the
    // wire: its String, then its JSON in the change's row.
    let bytes = rows
        .iter()
        .flatten()
        .map(|v| TEXT_VALUE_BYTES + 2 * v.as_ref().map_or(0, String::len))
        .sum();
    Ok((ChunkRows::Text(rows), keys, bytes))
}

/// The binary COPY of `select` decoded as it arrives, so decoding keeps
/// pace with Postgres sending, with its size on the wire. A value the
/// decoder cannot take ends decoding, not reading: the rest of the stream
/// is read to its end, so the session is free for the text path.
async fn copy_out(
    client: &Client,
    select: &str,
    mut decoder: CopyDecoder,
) -> Result<(Result<crate::copy_binary::Decoded, CopyError>, usize), PgError> {
    let sql = format!("COPY ({select}) TO STDOUT (FORMAT binary)");
    let ctx = || sql.chars().take(200).collect::<String>();
    let stream = client.copy_out(&sql).await.context(ctx)?;
    let mut stream = std::pin::pin!(stream);
    let mut bytes = 0;
    let mut failed = None;
    while let Some(part) = stream.next().await {
        let part = part.context(ctx)?;
        bytes += part.len();
        if failed.is_none()
            && let Err(e) = decoder.push(&part)
        {
            failed = Some(e);
        }
    }
    let decoded = match failed {
        Some(e) => Err(e),
        None => decoder.finish(),
    };
    Ok((decoded, bytes))
}

/// The SELECT of one chunk: the next `limit` rows in primary-key order
/// after the key `after` (the previous chunk's last), each key value cast
/// to its column's type, selecting `columns_sql`.
fn chunk_select(
    table: &TableName,
    schema: &TableSchema,
    key_columns: &[usize],
    after: Option<&[String]>,
    limit: usize,
    columns_sql: &[String],
) -> Result<String, PgError> {
    let keys_sql: Vec<String> = schema.primary_key.iter().map(|k| quote_ident(k)).collect();
    let filter = match after {
        None => String::new(),
        Some(values) => {
            if values.len() != key_columns.len() {
                return Err(PgError::BadCursor {
                    table: table.to_string(),
                    got: values.len(),
                    want: key_columns.len(),
                });
            }
            let literals: Vec<String> = values
                .iter()
                .zip(key_columns)
                .map(|(v, &i)| format!("{}::{}", quote_literal(v), schema.columns[i].type_name))
                .collect();
            format!(
                " WHERE ({}) > ({})",
                keys_sql.join(", "),
                literals.join(", ")
            )
        }
    };
    let select = format!(
        "SELECT {} FROM {}{filter} ORDER BY {} LIMIT {limit}",
        columns_sql.join(", "),
        table.quoted(),
        keys_sql.join(", ")
    );
    Ok(select)
}

/// The current text values of `columns` of the rows with these primary keys
/// (each as Postgres prints it), by key; rows that no longer exist are absent.
pub(crate) async fn read_columns(
    client: &Client,
    table: &TableName,
    schema: &TableSchema,
    keys: &[Vec<String>],
    columns: &[String],
) -> Result<HashMap<Vec<String>, HashMap<String, Option<String>>>, PgError> {
    let key_columns: Vec<&crate::PgColumn> = schema
        .primary_key
        .iter()
        .filter_map(|k| schema.column(k))
        .collect();
    let mut out = HashMap::new();
    if key_columns.is_empty() {
        return Ok(out);
    }
    let keys_sql: Vec<String> = key_columns.iter().map(|c| quote_ident(&c.name)).collect();
    let mut select: Vec<String> = keys_sql.clone();
    select.extend(columns.iter().map(|c| quote_ident(c)));
    for part in keys.chunks(1000) {
        let tuples: Vec<String> = part
            .iter()
            .filter(|k| k.len() == key_columns.len())
            .map(|k| {
                let values: Vec<String> = k
                    .iter()
                    .zip(&key_columns)
                    .map(|(v, c)| format!("{}::{}", quote_literal(v), c.type_name))
                    .collect();
                format!("({})", values.join(", "))
            })
            .collect();
        if tuples.is_empty() {
            continue;
        }
        let sql = format!(
            "SELECT {} FROM {} WHERE ({}) IN ({})",
            select.join(", "),
            table.quoted(),
            keys_sql.join(", "),
            tuples.join(", ")
        );
        for row in simple_rows(client, &sql).await? {
            let key: Vec<String> = row[..key_columns.len()]
                .iter()
                .map(|v| v.clone().unwrap_or_default())
                .collect();
            let values = columns
                .iter()
                .cloned()
                .zip(row[key_columns.len()..].iter().cloned())
                .collect();
            out.insert(key, values);
        }
    }
    Ok(out)
}

async fn simple_rows(client: &Client, sql: &str) -> Result<Vec<Vec<Option<String>>>, PgError> {
    let messages = client
        .simple_query(sql)
        .await
        .context(|| sql.chars().take(200).collect())?;
    Ok(messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility() {
        let v = Visibility::parse("100:105:101,103").unwrap();
        assert!(v.sees(99));
        assert!(v.sees(100));
        assert!(!v.sees(101));
        assert!(v.sees(102));
        assert!(!v.sees(103));
        assert!(!v.sees(105));
        assert!(!v.sees(200));
        // Epoch 1: xids just below the wrap belong to epoch 0.
        let v = Visibility::parse(&format!("{}:{}:", (1u64 << 32) + 5, (1u64 << 32) + 10)).unwrap();
        assert!(v.sees(u32::MAX));
        assert!(!v.sees(10));
        assert!(v.sees(4));
        assert!(Visibility::parse("1:2").is_err());
    }
}

//! Postgres into Iceberg: each Postgres table into a keyed Iceberg table of
//! the same name in one namespace, one micro-batch at a time, exactly once.
//!
//! Every table's commit records, in its snapshot summary, the slot's position
//! it holds (`floe.hwm.pg:<slot>`) and its initial-snapshot progress
//! (`floe.state.pg.snapshot`), atomically with its files. The slot advances
//! only after every table of a batch has committed, so its confirmed LSN never
//! passes what a table holds. After a crash anywhere in between, the slot
//! re-delivers from where it stood and each table skips the changes at or
//! below its own high-water mark: nothing is lost, nothing applied twice.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use iceberg::spec::{NestedField, Schema, TableMetadata};
use iceberg::{NamespaceIdent, TableIdent};
use tracing::{info, instrument};

use super::{PgConfig, PgError, PgSource, SnapshotState, SourceState, TableName, TableProgress};
use crate::catalog::CatalogError;
use crate::catalog::LoadedTable;
use crate::commit::{CommitEngine, CommitError, RetryPolicy};
use crate::embedded::{Embedded, EmbeddedError, IngestOptions, IngestReport};
use crate::ident::display;
use crate::ledger::Ledger;
use crate::pipeline::writer::{Records, Source, SourceBatch};
use crate::route::SourceKind;
use crate::source::{Position, Positions, SourceSpan, batch_id, sub_batch_id};
use crate::tabledef;

/// The state key of a table's initial-snapshot progress.
pub const SNAPSHOT_STATE: &str = "pg.snapshot";

/// Why a sync stopped.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The source failed.
    #[error(transparent)]
    Source(#[from] PgError),
    /// Writing or committing failed; the slot was not advanced.
    #[error(transparent)]
    Pipeline(#[from] EmbeddedError),
    /// The catalog failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A schema change could not be committed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// The table's ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    /// A table cannot be created or evolved.
    #[error("table {table}: {reason}")]
    Table {
        /// The Iceberg table.
        table: String,
        /// Why.
        reason: String,
    },
}

/// How a sync runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Namespace of the Iceberg tables.
    pub namespace: NamespaceIdent,
    /// Stop after this many batches (`None`: until caught up).
    pub max_batches: Option<usize>,
    /// Keep polling after catching up, waiting this long between empty reads.
    pub follow: Option<Duration>,
    /// The embedded pipeline's settings.
    pub ingest: IngestOptions,
}

/// What a sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// Micro-batches committed.
    pub batches: usize,
    /// Change lines read (snapshot rows included).
    pub lines: usize,
    /// Change lines skipped because their table already held them.
    pub skipped: usize,
    /// Where the slot stands now.
    pub confirmed_lsn: Option<u64>,
    /// Every table's initial snapshot is done.
    pub snapshot_done: bool,
    /// What the pipeline did, summed.
    pub ingest: IngestReport,
}

/// The Iceberg table a Postgres table goes to: its name in `namespace`,
/// prefixed by its schema outside `public`.
pub fn iceberg_table(namespace: &NamespaceIdent, table: &str) -> TableIdent {
    let t = TableName::parse(table);
    let name = if t.schema == "public" {
        t.name
    } else {
        format!("{}_{}", t.schema, t.name)
    };
    TableIdent::new(namespace.clone(), name)
}

/// What a table holds of the slot: its metadata, the highest LSN committed
/// and its snapshot progress, from its ledger.
async fn table_marks(
    floe: &Embedded,
    ident: &TableIdent,
    source: &str,
) -> Result<(LoadedTable, Option<u64>, Option<TableProgress>), SyncError> {
    let loaded = floe.catalog().load_table(ident).await?;
    let ledger = Ledger::open(floe.ledger_store(), &loaded.metadata).await?;
    let mark = ledger
        .high_water_mark(source)
        .and_then(|p| p.as_str().parse::<u64>().ok());
    let progress = ledger
        .state(SNAPSHOT_STATE)
        .and_then(|text| serde_json::from_str::<TableProgress>(text).ok());
    Ok((loaded, mark, progress))
}

/// Runs micro-batches until the source is caught up (or `max_batches`).
#[instrument(skip_all, fields(slot = %config.slot))]
pub async fn sync(
    floe: &Embedded,
    source: &mut PgSource,
    config: &PgConfig,
    opts: &SyncOptions,
) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport::default();
    let span_source = format!("pg:{}", config.slot);
    let tables: Vec<(String, TableIdent)> = config
        .tables
        .iter()
        .map(|t| {
            (
                TableName::parse(t).to_string(),
                iceberg_table(&opts.namespace, t),
            )
        })
        .collect();
    for (pg, ident) in &tables {
        let schema = source.table_schema(pg).await?.iceberg_schema()?;
        ensure_table(floe, ident, schema).await?;
    }
    loop {
        if opts.max_batches.is_some_and(|m| report.batches >= m) {
            break;
        }
        // What each table holds: its slot position and snapshot progress.
        let mut marks = BTreeMap::new();
        let mut schemas = BTreeMap::new();
        let mut snapshot = SnapshotState::default();
        for (pg, ident) in &tables {
            let (loaded, mark, progress) = table_marks(floe, ident, &span_source).await?;
            marks.insert(pg.clone(), mark);
            schemas.insert(pg.clone(), loaded.metadata.clone());
            if let Some(p) = progress {
                snapshot.tables.insert(pg.clone(), p);
            }
        }
        let state = SourceState {
            committed_lsn: None,
            snapshot: snapshot.clone(),
        };
        let batch = source.read_batch(&state).await?;
        report.snapshot_done = batch.snapshot.is_done(&config.tables);
        if batch.is_empty() {
            if let Some(wait) = opts.follow {
                tokio::time::sleep(wait).await;
                continue;
            }
            break;
        }
        let mut batches = Vec::new();
        let whole = SourceSpan {
            source: span_source.clone(),
            positions: Positions::Range {
                first: Position::from(batch.first_lsn),
                last: Position::from(batch.last_lsn),
            },
            stream: true,
        };
        let id = batch_id(std::slice::from_ref(&whole), None);
        for (pg, ident) in &tables {
            let mark = marks.get(pg).copied().flatten();
            if mark.is_some_and(|m| m >= batch.last_lsn) {
                continue;
            }
            let changes = batch.tables.iter().find(|c| &c.table == pg);
            if let Some(c) = changes {
                let relation = c.relation.iceberg_schema()?;
                // Only a relation that gained columns costs a schema commit.
                if schemas
                    .get(pg)
                    .is_some_and(|m| with_added_columns(m, &relation).is_some())
                {
                    evolve(floe, ident, &relation).await?;
                }
            }
            let mut items = Vec::new();
            for line in changes.map(|c| c.lines.as_slice()).unwrap_or_default() {
                report.lines += 1;
                let lsn = line_lsn(line).unwrap_or(batch.last_lsn);
                if mark.is_some_and(|m| lsn <= m) {
                    report.skipped += 1;
                    continue;
                }
                items.push((lsn.to_string(), Bytes::from(line.clone().into_bytes())));
            }
            let mut state = BTreeMap::new();
            let progress = batch.snapshot.tables.get(pg);
            if progress.is_some() && progress != snapshot.tables.get(pg) {
                let text = serde_json::to_string(&progress).unwrap_or_default();
                state.insert(SNAPSHOT_STATE.to_string(), text);
            }
            if items.is_empty() && state.is_empty() {
                continue;
            }
            let first = items
                .first()
                .and_then(|(lsn, _)| lsn.parse().ok())
                .unwrap_or(batch.last_lsn);
            let spans = vec![SourceSpan {
                positions: Positions::Range {
                    first: Position::from(first),
                    last: Position::from(batch.last_lsn),
                },
                ..whole.clone()
            }];
            batches.push(SourceBatch {
                source: Source {
                    kind: SourceKind::Postgres,
                    name: config.slot.clone(),
                },
                table: Some(ident.clone()),
                batch_id: sub_batch_id(&id, &display(ident)),
                spans,
                records: Records::Items(items),
                state,
                oldest_ms: None,
            });
        }
        let ingested = floe.ingest_batches(batches, &opts.ingest).await?;
        add(&mut report.ingest, ingested);
        // Every table of the batch holds it now: the slot may forget it.
        source.advance(batch.last_lsn).await?;
        report.batches += 1;
        report.confirmed_lsn = Some(batch.last_lsn);
        info!(
            batch = report.batches,
            lines = batch.line_count(),
            lsn = %super::format_lsn(batch.last_lsn),
            "batch committed; slot advanced"
        );
    }
    if report.confirmed_lsn.is_none() {
        report.confirmed_lsn = Some(source.confirmed_flush_lsn().await?);
    }
    Ok(report)
}

/// Creates the Iceberg table from the Postgres table's schema (primary key as
/// identifier fields) and the table's config section, unless it exists.
async fn ensure_table(
    floe: &Embedded,
    ident: &TableIdent,
    schema: Schema,
) -> Result<(), SyncError> {
    let catalog = floe.catalog();
    match catalog.load_table(ident).await {
        Ok(_) => return Ok(()),
        Err(CatalogError::NoSuchTable { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let name = display(ident);
    let settings = floe.config().table(&name);
    let creation = tabledef::configured_creation(ident.name(), schema, &settings).map_err(|e| {
        SyncError::Table {
            table: name.clone(),
            reason: e.to_string(),
        }
    })?;
    catalog.ensure_namespace(ident.namespace()).await?;
    match catalog.create_table(ident, creation).await {
        Ok(_) => {
            info!(table = %name, "created from the Postgres table");
            Ok(())
        }
        Err(CatalogError::TableExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Adds the columns the Postgres table gained (ALTER TABLE … ADD COLUMN) with
/// their mapped types, before rows carrying them are written.
async fn evolve(floe: &Embedded, ident: &TableIdent, pg: &Schema) -> Result<(), SyncError> {
    CommitEngine::new(floe.catalog(), RetryPolicy::default())
        .update_schema(ident, |meta| with_added_columns(meta, pg))
        .await?;
    Ok(())
}

/// The table's schema plus, as optional columns, those of `pg` it lacks;
/// `None` when it lacks none.
fn with_added_columns(meta: &TableMetadata, pg: &Schema) -> Option<Schema> {
    let current = meta.current_schema();
    let mut next_id = meta.last_column_id();
    let added: Vec<_> = pg
        .as_struct()
        .fields()
        .iter()
        .filter(|f| current.field_by_name(&f.name).is_none())
        .map(|f| {
            next_id += 1;
            NestedField::optional(next_id, &f.name, (*f.field_type).clone()).into()
        })
        .collect();
    if added.is_empty() {
        return None;
    }
    let mut fields = current.as_struct().fields().to_vec();
    fields.extend(added);
    Schema::builder()
        .with_schema_id(current.schema_id())
        .with_identifier_field_ids(current.identifier_field_ids())
        .with_fields(fields)
        .build()
        .ok()
}

/// The `_pos` of a change line.
fn line_lsn(line: &str) -> Option<u64> {
    let at = line.find("\"_pos\":")? + "\"_pos\":".len();
    let digits: String = line[at..]
        .chars()
        .skip_while(|c| *c == ' ' || *c == '"')
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn add(sum: &mut IngestReport, r: IngestReport) {
    sum.records_in += r.records_in;
    sum.records_written += r.records_written;
    sum.records_committed += r.records_committed;
    sum.rejected.extend(r.rejected);
    sum.dead_letter_locations.extend(r.dead_letter_locations);
    sum.data_files += r.data_files;
    sum.requests += r.requests;
    sum.commits += r.commits;
    sum.snapshots += r.snapshots;
    sum.duplicates += r.duplicates;
    sum.created.extend(r.created);
    sum.evolved.extend(r.evolved);
    sum.elapsed += r.elapsed;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_of_a_line_and_table_names() {
        assert_eq!(
            line_lsn(r#"{"_op":"u","_ts":1,"_pos":123456,"id":1}"#),
            Some(123456)
        );
        assert_eq!(line_lsn(r#"{"_op":"u"}"#), None);
        let ns = NamespaceIdent::new("raw".into());
        assert_eq!(display(&iceberg_table(&ns, "orders")), "raw.orders");
        assert_eq!(
            display(&iceberg_table(&ns, "sales.orders")),
            "raw.sales_orders"
        );
    }
}

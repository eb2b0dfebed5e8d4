//! The writer step: one source batch in; records routed to their tables
//! (created on first write, evolved as records need), data files durable in
//! storage, bad records dead-lettered, one commit request per table enqueued —
//! and only then success.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use bytes::Bytes;
use iceberg::spec::{Schema, StructType};
use iceberg::{NamespaceIdent, TableIdent};
use tracing::{debug, info, instrument, warn};
use uuid::Uuid;

use super::PipelineError;
use super::classify::{Classified, Shape, classify};
use super::scope::Scope;
use super::{changelog, keyed};
use crate::catalog::{CatalogError, CatalogRef, LoadedTable};
use crate::change::{self, Change, ChangeFormat};
use crate::commit::CommitEngine;
use crate::config::{Changelog, Config, ResolvedTable, UnknownFields as ConfigUnknown};
use crate::dlq::{DeadLetters, Rejected};
use crate::evolve::{self, InferOptions};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;
use crate::ledger::{self, KeyFile};
use crate::metrics::Counters;
use crate::metrics::emf::{Emf, Unit};
use crate::queue::QueueRef;
use crate::request::CommitRequest;
use crate::route::{Router, SourceInfo};
use crate::rowkey;
use crate::shred::{RecordErrorKind, ShredError, ShredOptions, Shredder, UnknownFields};
use crate::source::{Pos, Position, Positions, SourceBatch, SourceKind, SourceSpan, sub_batch_id};
use crate::tabledef;
use crate::write::TableWriter;
use crate::write::rows::{At, RowId};

/// Records sampled to infer the schema of a table created on first write.
const INFER_SAMPLE: usize = 1_000;
/// Schema changes one batch may make before the rest of its misfits are dead-lettered.
const MAX_EVOLUTIONS: usize = 3;

/// What the writer step did with a batch.
#[derive(Debug, Clone, Default)]
pub struct WriteReport {
    /// Records written to data files.
    pub records: u64,
    /// Data files written.
    pub files: usize,
    /// Bytes of data files written.
    pub bytes: u64,
    /// Records dead-lettered.
    pub rejected: Vec<Rejected>,
    /// Where they were dead-lettered.
    pub dead_letter_locations: Vec<String>,
    /// Tables created for this batch.
    pub created: Vec<String>,
    /// Schema changes made for this batch.
    pub evolved: Vec<String>,
}

impl WriteReport {
    /// Adds `other`'s records, files and dead letters to this report (one
    /// source batch written as several, like the objects an S3
    /// notification names).
    pub fn add(&mut self, other: WriteReport) {
        self.records += other.records;
        self.files += other.files;
        self.bytes += other.bytes;
        self.rejected.extend(other.rejected);
        self.dead_letter_locations
            .extend(other.dead_letter_locations);
        self.created.extend(other.created);
        self.evolved.extend(other.evolved);
    }

    /// The report's metrics (records, bytes, files, dead-lettered records)
    /// for `function`'s EMF line; callers add what names the batch.
    pub fn emf(&self, function: &str) -> Emf {
        Emf::new()
            .dimension("function", function)
            .metric("records", Unit::Count, self.records as f64)
            .metric("bytes", Unit::Bytes, self.bytes as f64)
            .metric("files", Unit::Count, self.files as f64)
            .metric(
                "dead_lettered_records",
                Unit::Count,
                self.rejected.len() as f64,
            )
    }
}

struct TableContext {
    loaded: LoadedTable,
    writer: TableWriter,
    settings: ResolvedTable,
}

/// The parts a writer step works with.
pub struct WriterParts {
    /// The catalog.
    pub catalog: CatalogRef,
    /// The commit queue.
    pub queue: QueueRef,
    /// The dead-letter location.
    pub dead_letters: Arc<dyn DeadLetters>,
    /// Fault injection.
    pub faults: Faults,
    /// Counters.
    pub counters: Arc<Counters>,
    /// Settings: routing, table defaults and per-table sections.
    pub config: Arc<Config>,
}

/// The writer step, shared by concurrent tasks.
pub struct Writer {
    parts: WriterParts,
    engine: CommitEngine,
    router: Option<Router>,
    /// Tables loaded so far; locked only to look one up or keep it, never
    /// across a catalog call, so concurrent parts of a batch load in parallel.
    tables: std::sync::Mutex<Tables>,
    /// Whether a table's records that no retry can write are dead-lettered
    /// (the batch then succeeds) rather than failing the batch.
    dead_letter_unwritable: bool,
}

/// A group of records bound for one table.
struct Group<'a> {
    records: Vec<(Pos<'a>, Cow<'a, [u8]>)>,
    /// How DynamoDB stream records among them become their items on an
    /// append-only table; `None` when the source sends none.
    items: Option<change::ItemRow>,
    /// The types a schema registry declares for the records (Avro), which
    /// a new column takes instead of one inferred from a value.
    declared: Option<Arc<StructType>>,
    /// Records of the batch that could not be opened (an envelope, a
    /// codec or a registry refused them), dead-lettered with the table's
    /// own rejections, in one file per batch id.
    rejected: Vec<Rejected>,
}

impl<'a> Group<'a> {
    fn new(records: Vec<(Pos<'a>, Cow<'a, [u8]>)>, declared: Option<Arc<StructType>>) -> Self {
        Self {
            records,
            items: None,
            declared,
            rejected: Vec::new(),
        }
    }
}

/// Rows shredded against the table as it is after any evolution.
struct Shredded {
    ctx: Arc<TableContext>,
    data: RecordBatch,
    /// Indices of the rows in `data`, in its order.
    accepted: Vec<usize>,
    /// Rows that do not fit: index, field, reason.
    failed: Vec<(usize, String, String)>,
}

/// The changes of a keyed batch with the records they came from.
struct KeyedBatch<'a, 'b> {
    changes: &'b [(Pos<'a>, Change)],
    records: &'b [Cow<'a, [u8]>],
    key_names: &'b [String],
    /// The types a schema registry declares for the records.
    declared: Option<&'b Arc<StructType>>,
}

/// A keyed batch ready to write.
struct KeyedWrite {
    ctx: Arc<TableContext>,
    data: RecordBatch,
    /// For each row of `data`, the change whose state it is.
    changes: Vec<usize>,
    keys: KeyedFiles,
}

/// The writer's loaded tables, with a count of schema changes it made, so a
/// load that began before one is not kept after it.
#[derive(Default)]
struct Tables {
    map: HashMap<TableIdent, Arc<TableContext>>,
    generation: u64,
}

impl Tables {
    /// Drops `ident`'s table after a schema change, and any load in flight with it.
    fn forget(&mut self, ident: &TableIdent) {
        self.map.remove(ident);
        self.generation += 1;
    }
}

/// A table's part of a batch, shredded and ready for its files.
struct Output {
    ctx: Arc<TableContext>,
    data: RecordBatch,
    /// The record each row of `data` came from, when the batch names them.
    row_ids: Vec<Option<RowId>>,
    keys: Option<KeyedFiles>,
    /// Records of the part dead-lettered.
    rejected: u64,
}

/// What a keyed batch deletes and records in its key file.
struct KeyedFiles {
    /// Every touched key as a JSON object of its key columns (the equality deletes).
    keys: Vec<Vec<u8>>,
    /// Every touched key's digest, source and the position of its change.
    file: Vec<(u128, u16, Option<Position>)>,
    truncate: bool,
}

/// Which record of its batch's span a row came from, for the data files'
/// footers and key files.
struct Identity<'a> {
    span: Option<&'a SourceSpan>,
    ids: HashMap<&'a str, u32>,
    /// The ids are the records' positions in their shard (a Kinesis shard
    /// read in parallel), so they order its changes.
    ids_ordered: bool,
}

impl<'a> Identity<'a> {
    fn of(batch: &'a SourceBatch) -> Self {
        let span = batch.spans.first();
        let ids = match span.map(|s| &s.positions) {
            Some(Positions::Ids { ids }) => ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i as u32))
                .collect(),
            _ => HashMap::new(),
        };
        Self {
            span,
            ids,
            ids_ordered: batch.source.kind == SourceKind::Kinesis,
        }
    }

    /// The row's record; `None` when the span names no records (an HTTP key).
    fn row(&self, pos: Pos<'_>) -> Option<RowId> {
        let at = match (pos, self.span.map(|s| &s.positions)) {
            (Pos::Line(n), Some(Positions::Range { .. })) => At::Num(n),
            (Pos::Item(p), Some(Positions::Range { .. })) => At::position(p),
            (Pos::Item(p), Some(Positions::Ids { .. })) => At::Index(*self.ids.get(p)?),
            _ => return None,
        };
        Some(RowId { span: 0, at })
    }

    /// Where a key's change sits in its source's order: the record's
    /// position on an ordered span (or on a Kinesis shard read in parallel,
    /// whose ids are positions), else the change's own (a DynamoDB sequence
    /// number, ordered per key).
    fn key_position(&self, pos: Pos<'_>, change: &Change) -> Option<Position> {
        match (pos, self.span.map(|s| &s.positions)) {
            (Pos::Line(n), Some(Positions::Range { .. })) => Some(Position::from(n)),
            (Pos::Item(p), Some(Positions::Range { .. })) => Position::parse(p),
            (Pos::Item(p), Some(Positions::Ids { .. })) if self.ids_ordered => Position::parse(p),
            _ => change.position.as_deref().and_then(Position::parse),
        }
    }
}

fn shred_err(table: &str, batch_id: &str, source: ShredError) -> PipelineError {
    PipelineError::Shred {
        table: table.to_string(),
        batch_id: batch_id.to_string(),
        source: Box::new(source),
    }
}

impl Writer {
    /// A writer step; routes records when the config's routing names a table or a rule.
    pub fn new(parts: WriterParts) -> Result<Self, PipelineError> {
        let routing = &parts.config.routing;
        let router = if routing.table.is_some() || routing.template.is_some() {
            Some(Router::new(routing).map_err(|e| PipelineError::Config(e.to_string()))?)
        } else {
            None
        };
        Ok(Self {
            engine: CommitEngine::new(parts.catalog.clone(), Default::default()),
            parts,
            router,
            tables: std::sync::Mutex::new(Tables::default()),
            dead_letter_unwritable: false,
        })
    }

    /// Dead-letters a table's records, with the reason, when writing them
    /// fails in a way no retry cures ([`PipelineError::is_transient`] false:
    /// a table definition floe cannot create, a schema it cannot write), so
    /// the batch succeeds with its other tables written. For redelivering
    /// sources (SQS, Kinesis, Kafka, DynamoDB Streams), where a failed batch
    /// comes back forever and holds back its shard or partition. Without it
    /// (the CLI, HTTP, Postgres) such a batch fails and the caller decides.
    pub fn dead_letter_unwritable(mut self) -> Self {
        self.dead_letter_unwritable = true;
        self
    }

    /// Runs the step for one batch; success means every record is durable in a
    /// data file or the dead-letter location, and the commit requests are enqueued.
    pub async fn write(&self, batch: SourceBatch) -> Result<WriteReport, PipelineError> {
        self.write_declared(batch, None).await
    }

    /// [`Self::write`] for records whose types a schema registry declares
    /// (Avro decoded to JSON): a table created or evolved for them takes
    /// `declared`'s types for its new columns.
    #[instrument(skip_all, fields(source = %batch.source.name, batch_id = %batch.batch_id))]
    pub async fn write_declared(
        &self,
        batch: SourceBatch,
        declared: Option<Arc<StructType>>,
    ) -> Result<WriteReport, PipelineError> {
        let mut report = WriteReport::default();
        let source = SourceInfo::new(batch.source.kind, &batch.source.name);
        let mut groups: BTreeMap<String, (TableIdent, Group<'_>)> = BTreeMap::new();
        let mut unrouted = Vec::new();
        let fixed = batch
            .table
            .clone()
            .or_else(|| self.router.as_ref().and_then(|r| r.fixed().cloned()));
        let mut seen = 0u64;
        // DynamoDB stream records, straight from the stream or through
        // Kinesis Data Streams, are items to append-only tables.
        let items = matches!(
            batch.source.kind,
            SourceKind::DynamoDb | SourceKind::Kinesis
        )
        .then(|| self.item_row(&batch.source.name));
        let new_group = || Group {
            items,
            ..Group::new(Vec::new(), declared.clone())
        };
        for (pos, record) in batch.records.iter() {
            seen += 1;
            // A record its envelope or registry could not open is dead-lettered
            // with the reason, with the table it would have gone to (it
            // cannot be routed by a field it does not show).
            if let Some(bad) = crate::envelope::Undecodable::of(record) {
                let table = fixed.as_ref().map(display).unwrap_or_default();
                let raw = bad.record_text();
                let rejected = Scope::new(&table, &batch.batch_id, &batch).reject(
                    pos,
                    &bad.field,
                    &bad.reason,
                    raw.as_bytes(),
                );
                match &fixed {
                    Some(t) => group_of(&mut groups, t.clone(), new_group)
                        .rejected
                        .push(rejected),
                    None => unrouted.push(rejected),
                }
                continue;
            }
            let table = match (&fixed, &self.router) {
                (Some(t), _) => Ok(t.clone()),
                (None, Some(router)) => router.route(record, &source),
                (None, None) => {
                    return Err(PipelineError::Config(
                        "no target table: give one, or configure [routing]".into(),
                    ));
                }
            };
            match table {
                Ok(t) => group_of(&mut groups, t, new_group)
                    .records
                    .push((pos, Cow::Borrowed(record))),
                // A tombstone names only a key: it cannot be routed by a
                // record field, and goes nowhere rather than to dead letters.
                Err(_) if change::tombstone_key(record).is_some() => {}
                Err(e) => unrouted.push(
                    Scope::new("", &batch.batch_id, &batch).reject(
                        pos,
                        self.parts
                            .config
                            .routing
                            .field
                            .as_deref()
                            .unwrap_or_default(),
                        &e.to_string(),
                        record,
                    ),
                ),
            }
        }
        Counters::add(&self.parts.counters.records_in, seen);
        if let Some(t) = &fixed
            && !batch.state.is_empty()
        {
            group_of(&mut groups, t.clone(), new_group);
        }
        if !unrouted.is_empty() {
            let ident = TableIdent::new(NamespaceIdent::new("_unrouted".into()), "records".into());
            self.dead_letter(&ident, &batch.batch_id, unrouted, &mut report)
                .await?;
        }
        let single = groups.len() == 1;
        for (name, (ident, group)) in groups {
            let batch_id = if single {
                batch.batch_id.clone()
            } else {
                sub_batch_id(&batch.batch_id, &name)
            };
            // What only a fix can cure would fail every redelivery: see
            // `dead_letter_unwritable`.
            let (records, unopened) = if self.dead_letter_unwritable {
                (group.records.clone(), group.rejected.clone())
            } else {
                Default::default()
            };
            match self
                .write_table(&ident, &batch_id, &batch, group, &mut report)
                .await
            {
                Ok(()) => {}
                Err(e) if e.is_transient() || !self.dead_letter_unwritable => return Err(e),
                Err(e) => {
                    warn!(table = %name, %batch_id, error = %e, "no retry can write this batch to its table; dead-lettering its records");
                    Counters::add(&self.parts.counters.batches_dead_lettered, 1);
                    let reason = e.to_string();
                    // In the batch's one dead-letter file, beside the records
                    // that could not be opened, which keep their own reasons.
                    let rejected = unopened
                        .into_iter()
                        .chain(records.iter().map(|(pos, r)| {
                            Scope::new(&name, &batch_id, &batch).reject(*pos, "", &reason, r)
                        }))
                        .collect();
                    self.dead_letter(&ident, &batch_id, rejected, &mut report)
                        .await?;
                }
            }
        }
        Ok(report)
    }

    #[instrument(skip_all, fields(table = %display(ident), batch_id = %batch_id))]
    async fn write_table<'a>(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        mut group: Group<'a>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let table = display(ident);
        let scope = Scope::new(&table, batch_id, batch);
        let declared = group.declared.clone();
        let mut rejected = std::mem::take(&mut group.rejected);
        if group.records.is_empty() && batch.state.is_empty() {
            // Only records that could not be opened: nothing to write, and
            // no table to create from them.
            return match rejected.is_empty() {
                true => Ok(()),
                false => self.dead_letter(ident, batch_id, rejected, report).await,
            };
        }
        let Some(first) = self.context(ident, &group, report).await? else {
            // The table is missing and routing may not create it.
            let reason = format!("table {table} does not exist and routing.create is false");
            rejected.extend(
                group
                    .records
                    .iter()
                    .map(|(pos, r)| scope.reject(*pos, "", &reason, r)),
            );
            return self.dead_letter(ident, batch_id, rejected, report).await;
        };
        // A keyed table takes changes: fold them per key. A changelog takes
        // them unfolded, one row per change.
        let schema = first.loaded.metadata.current_schema().clone();
        let changelog = first.settings.changelog;
        let key_names: Vec<String> = schema
            .identifier_field_ids()
            .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
            .collect();
        let keyed = !key_names.is_empty() && changelog != Changelog::Only;
        let shape = Shape {
            keyed,
            changelog,
            key_names: &key_names,
            items: group.items,
        };
        let Classified {
            rows,
            changes,
            change_records,
            log_rows,
        } = classify(group.records, &shape, &scope, &mut rejected);
        if !log_rows.is_empty() {
            self.write_changelog(ident, &schema, batch_id, batch, log_rows, report)
                .await?;
        }
        let identity = Identity::of(batch);
        let (ctx, data, row_ids, keys) = if keyed {
            let keyed = KeyedBatch {
                changes: &changes,
                records: &change_records,
                key_names: &key_names,
                declared: declared.as_ref(),
            };
            let written = self
                .shred_keyed(ident, batch_id, batch, keyed, &mut rejected, report)
                .await?;
            let ids: Vec<Option<RowId>> = written
                .changes
                .iter()
                .map(|i| identity.row(changes[*i].0))
                .collect();
            (written.ctx, written.data, ids, Some(written.keys))
        } else {
            let shredded = self
                .shred_evolving(ident, batch_id, &rows, declared.as_ref(), report)
                .await?;
            for (i, field, reason) in &shredded.failed {
                let (pos, record) = &rows[*i];
                rejected.push(scope.reject(*pos, field, reason, record));
            }
            let ids: Vec<Option<RowId>> = shredded
                .accepted
                .iter()
                .map(|i| identity.row(rows[*i].0))
                .collect();
            (shredded.ctx, shredded.data, ids, None)
        };
        let rejected_count = rejected.len() as u64;
        if !rejected.is_empty() {
            self.dead_letter(ident, batch_id, rejected, report).await?;
        }
        let output = Output {
            ctx,
            data,
            row_ids,
            keys,
            rejected: rejected_count,
        };
        self.write_files(ident, batch_id, batch, output, report)
            .await
    }

    /// Writes a table's part of a batch: data files, its deletes and key
    /// file, then the commit request enqueued.
    async fn write_files(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        output: Output,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let table = display(ident);
        let Output {
            ctx,
            data,
            row_ids,
            keys,
            rejected: rejected_count,
        } = output;
        let truncate = keys.as_ref().is_some_and(|k| k.truncate);
        let name = format!(
            "{}-{}",
            batch_id.get(..16).unwrap_or(batch_id),
            Uuid::now_v7().simple()
        );
        // With position deletes the committer finds the rows a batch replaces
        // from its key file; only equality-delete and copy-on-write tables
        // take the keys as a file of key rows.
        let key_rows = !matches!(
            crate::commit::KeyedMode::of(&ctx.loaded.metadata),
            crate::commit::KeyedMode::Positions
        );
        let deletes = match &keys {
            Some(k) if key_rows && !k.keys.is_empty() => {
                self.write_deletes(&ctx, &table, batch_id, &k.keys, &name)
                    .await?
            }
            _ => Vec::new(),
        };
        // A keyed batch of deletes only has no files with position deletes,
        // but its key file says what goes.
        let touches = keys.as_ref().is_some_and(|k| !k.file.is_empty());
        let nothing = data.num_rows() == 0 && deletes.is_empty() && !truncate && !touches;
        // A batch whose every record was rejected still says so to the
        // ledger, so a redelivery that would now accept them adds nothing the
        // dead-letter location already holds.
        if nothing && batch.state.is_empty() && (rejected_count == 0 || batch.spans.is_empty()) {
            return Ok(());
        }
        let row_ids: Option<Vec<RowId>> = row_ids.into_iter().collect();
        let files = ctx
            .writer
            .write_rows(&data, row_ids.as_deref(), &name)
            .await
            .map_err(|source| PipelineError::Write {
                batch_id: batch_id.to_string(),
                source,
            })?;
        let key_file = match &keys {
            Some(k) if !k.file.is_empty() => {
                Some(self.write_key_file(&ctx, batch, k, &name, batch_id).await?)
            }
            _ => None,
        };
        let records = data.num_rows() as u64;
        let bytes: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
        report.records += records;
        report.files += files.len();
        report.bytes += bytes;
        let c = &self.parts.counters;
        Counters::add(&c.data_files, files.len() as u64);
        Counters::add(&c.data_bytes, bytes);
        Counters::add(&c.records_written, records);
        self.fault(FaultPoint::AfterUpload, &table, batch_id)?;

        let mut request =
            CommitRequest::new(ident.clone(), batch_id.to_string(), batch.spans.clone())
                .with_files(
                    &ctx.loaded.metadata,
                    (ctx.writer.schema_id(), ctx.writer.spec_id()),
                    files,
                    deletes,
                    records,
                )?
                .with_source(batch.state.clone(), rejected_count, batch.oldest_ms);
        if let Some(k) = &keys {
            request = request.keyed(k.truncate, key_file);
        }
        self.parts
            .queue
            .send_to(ident, Bytes::from(request.to_bytes()?))
            .await
            .map_err(|source| PipelineError::Queue {
                table: table.clone(),
                batch_id: batch_id.to_string(),
                source,
            })?;
        Counters::add(&c.requests, 1);
        self.fault(FaultPoint::AfterEnqueue, &table, batch_id)?;
        debug!(records, "batch written");
        Ok(())
    }

    /// Shreds `rows` against the table's schema, evolving the schema for
    /// misfits (new fields, wider types) up to [`MAX_EVOLUTIONS`] times.
    async fn shred_evolving(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        rows: &[(Pos<'_>, Cow<'_, [u8]>)],
        declared: Option<&Arc<StructType>>,
        report: &mut WriteReport,
    ) -> Result<Shredded, PipelineError> {
        let table = display(ident);
        let group = Group::new(rows.to_vec(), declared.cloned());
        let mut evolutions = 0;
        loop {
            let Some(ctx) = self.context(ident, &group, report).await? else {
                return Err(CatalogError::NoSuchTable {
                    table: table.clone(),
                }
                .into());
            };
            let settings = &ctx.settings;
            let mut shredder = Shredder::new(
                ctx.loaded.metadata.current_schema(),
                shred_options(settings),
            )
            .map_err(|source| shred_err(&table, batch_id, source))?;
            let mut failed = Vec::new();
            let mut accepted = Vec::with_capacity(rows.len());
            let mut misfits = HashSet::new();
            for (ordinal, (_, record)) in rows.iter().enumerate() {
                match shredder.push(record) {
                    Ok(()) => accepted.push(ordinal),
                    Err(e) => {
                        let evolvable = match e.kind {
                            RecordErrorKind::OutOfRange => settings.widen_types,
                            RecordErrorKind::MissingRequired | RecordErrorKind::NullRequired => {
                                true
                            }
                            _ => false,
                        };
                        if evolvable {
                            misfits.insert(ordinal);
                        }
                        failed.push((ordinal, e.field, e.reason));
                    }
                }
            }
            misfits.extend(shredder.take_unknown().records);
            let data = shredder
                .finish()
                .map_err(|source| shred_err(&table, batch_id, source))?;
            if !settings.evolution || misfits.is_empty() || evolutions == MAX_EVOLUTIONS {
                return Ok(Shredded {
                    ctx,
                    data,
                    accepted,
                    failed,
                });
            }
            let values: Vec<serde_json::Value> = misfits
                .iter()
                .filter_map(|i| rows.get(*i))
                .filter_map(|(_, r)| serde_json::from_slice(r).ok())
                .collect();
            let opts = InferOptions {
                declared: declared.cloned(),
                ..infer_options(settings)
            };
            let meta = &ctx.loaded.metadata;
            let Some(evolution) =
                evolve::evolve(meta.current_schema(), meta.last_column_id(), &values, &opts)
            else {
                return Ok(Shredded {
                    ctx,
                    data,
                    accepted,
                    failed,
                });
            };
            self.engine
                .update_schema(ident, |m| {
                    evolve::evolve(m.current_schema(), m.last_column_id(), &values, &opts)
                        .map(|e| e.schema)
                })
                .await?;
            info!(changes = ?evolution.changes, "evolved the table schema");
            report
                .evolved
                .extend(evolution.changes.iter().map(|c| format!("{table}: {c}")));
            self.cached_tables().forget(ident);
            evolutions += 1;
        }
    }

    /// Folds a keyed batch per key (keys compared by typed value) and shreds
    /// each key's newest state; a state that does not fit is dead-lettered
    /// and the key falls back to its state before, so a rejected change never
    /// deletes a row.
    async fn shred_keyed(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        keyed: KeyedBatch<'_, '_>,
        rejected: &mut Vec<Rejected>,
        report: &mut WriteReport,
    ) -> Result<KeyedWrite, PipelineError> {
        let table = display(ident);
        let KeyedBatch {
            changes,
            records,
            key_names,
            declared,
        } = keyed;
        let scope = Scope::new(&table, batch_id, batch);
        let reject = |i: usize, field: &str, reason: &str| {
            scope.reject(changes[i].0, field, reason, &records[i])
        };
        // Each change's key, shredded by the key columns' types, to a digest.
        let mut parsed = Vec::with_capacity(changes.len());
        for (i, p) in keyed::parse(changes, key_names).into_iter().enumerate() {
            match p {
                Ok(p) => parsed.push(p),
                Err(e) => {
                    rejected.push(reject(i, &e.field, &e.reason));
                    parsed.push(None);
                }
            }
        }
        let first = self
            .context(ident, &Group::new(Vec::new(), None), report)
            .await?
            .ok_or_else(|| CatalogError::NoSuchTable {
                table: table.clone(),
            })?;
        let digests = self.key_digests(&first, &table, batch_id, &mut parsed, &mut |i, f, r| {
            rejected.push(reject(i, f, r))
        })?;
        let (mut folded, errors) = keyed::fold(changes, parsed, &digests);
        for (i, e) in errors {
            rejected.push(reject(i, &e.field, &e.reason));
        }
        // Newest states first; keys whose newest state is rejected fall back.
        let mut chosen: Vec<Option<usize>> = folded
            .keys
            .iter()
            .map(|k| k.states.len().checked_sub(1))
            .collect();
        let upserts = |chosen: &[Option<usize>], only: Option<&HashSet<usize>>| {
            let mut rows = Vec::new();
            let mut owners = Vec::new();
            for (k, c) in chosen.iter().enumerate() {
                if only.is_some_and(|o| !o.contains(&k)) {
                    continue;
                }
                let Some(state) = c.map(|c| &folded.keys[k].states[c]) else {
                    continue;
                };
                if let Some(row) = &state.row {
                    rows.push((changes[state.change].0, Cow::Owned(row.clone())));
                    owners.push(k);
                }
            }
            (rows, owners)
        };
        let (rows, owners) = upserts(&chosen, None);
        let shredded = self
            .shred_evolving(ident, batch_id, &rows, declared, report)
            .await?;
        let mut parts = vec![shredded.data];
        let mut written: Vec<usize> = shredded.accepted.iter().map(|i| owners[*i]).collect();
        let mut failed: Vec<(usize, String, String)> = shredded
            .failed
            .into_iter()
            .map(|(i, f, r)| (owners[i], f, r))
            .collect();
        let ctx = shredded.ctx;
        while !failed.is_empty() {
            let mut retry = HashSet::new();
            for (k, field, reason) in failed.drain(..) {
                if let Some(c) = chosen[k] {
                    rejected.push(reject(folded.keys[k].states[c].change, &field, &reason));
                    chosen[k] = c.checked_sub(1);
                    retry.insert(k);
                }
            }
            let (rows, owners) = upserts(&chosen, Some(&retry));
            if rows.is_empty() {
                break;
            }
            let mut shredder = Shredder::new(
                ctx.loaded.metadata.current_schema(),
                shred_options(&ctx.settings),
            )
            .map_err(|source| shred_err(&table, batch_id, source))?;
            for (i, (_, row)) in rows.iter().enumerate() {
                match shredder.push(row) {
                    Ok(()) => written.push(owners[i]),
                    Err(e) => failed.push((owners[i], e.field, e.reason)),
                }
            }
            parts.push(
                shredder
                    .finish()
                    .map_err(|source| shred_err(&table, batch_id, source))?,
            );
        }
        let data = concat_batches(&parts[0].schema(), &parts)
            .map_err(|e| shred_err(&table, batch_id, ShredError::from(e)))?;
        // Every key with a state left is touched: deleted, then re-added if
        // its state is a row; keys with none left are not touched at all.
        let identity = Identity::of(batch);
        let mut keys = Vec::new();
        let mut file = Vec::new();
        for (k, c) in chosen.iter().enumerate() {
            let Some(c) = c else { continue };
            let key = &folded.keys[k];
            let change = key.states[*c].change;
            keys.push(std::mem::take(&mut folded.keys[k].key));
            file.push((
                folded.keys[k].digest,
                0u16,
                identity.key_position(changes[change].0, &changes[change].1),
            ));
        }
        Ok(KeyedWrite {
            ctx,
            data,
            changes: written
                .into_iter()
                .filter_map(|k| chosen[k].map(|c| folded.keys[k].states[c].change))
                .collect(),
            keys: KeyedFiles {
                keys,
                file,
                truncate: folded.truncate,
            },
        })
    }

    /// The digest of each parsed change's key, shredded by the key columns'
    /// types; a key that does not fit is reported through `reject` and its
    /// change dropped from `parsed`.
    fn key_digests(
        &self,
        ctx: &TableContext,
        table: &str,
        batch_id: &str,
        parsed: &mut [Option<keyed::Parsed>],
        reject: &mut dyn FnMut(usize, &str, &str),
    ) -> Result<Vec<Option<u128>>, PipelineError> {
        let write_err = |source| PipelineError::Write {
            batch_id: batch_id.to_string(),
            source,
        };
        let mut digests = vec![None; parsed.len()];
        let Some(key_schema) = ctx.writer.key_schema().map_err(write_err)? else {
            return Ok(digests);
        };
        let mut options = shred_options(&ctx.settings);
        options.unknown_fields = UnknownFields::Ignore;
        let mut shredder =
            Shredder::new(&key_schema, options).map_err(|s| shred_err(table, batch_id, s))?;
        let mut rows = Vec::new();
        for (i, p) in parsed.iter_mut().enumerate() {
            let Some(key) = p.as_ref().map(|p| &p.key) else {
                continue;
            };
            match shredder.push(key) {
                Ok(()) => rows.push(i),
                Err(e) => {
                    reject(i, &e.field, &e.reason);
                    *p = None;
                }
            }
        }
        let keys = shredder
            .finish()
            .map_err(|s| shred_err(table, batch_id, s))?;
        let all: Vec<usize> = (0..keys.num_columns()).collect();
        let computed = rowkey::digests(&keys, &all).map_err(|e| PipelineError::TableDef {
            table: table.to_string(),
            reason: e.to_string(),
        })?;
        for (row, i) in rows.into_iter().enumerate() {
            digests[i] = computed.get(row).copied();
        }
        Ok(digests)
    }

    /// Writes the key file of a keyed batch beside the table's ledger.
    async fn write_key_file(
        &self,
        ctx: &TableContext,
        batch: &SourceBatch,
        keys: &KeyedFiles,
        name: &str,
        batch_id: &str,
    ) -> Result<String, PipelineError> {
        let path = format!(
            "{}/{}/{name}.json.zst",
            ctx.loaded.metadata.location().trim_end_matches('/'),
            ledger::keyfile::DIR
        );
        let sources = batch.spans.iter().map(|s| s.source.clone()).collect();
        let file = KeyFile::new(sources, &keys.file);
        let write_err = |source| PipelineError::Write {
            batch_id: batch_id.to_string(),
            source: crate::write::WriteError::Iceberg {
                table: display(&ctx.loaded.ident),
                source: Box::new(source),
            },
        };
        self.parts
            .catalog
            .file_io()
            .new_output(&path)
            .map_err(write_err)?
            .write(file.to_bytes())
            .await
            .map_err(write_err)?;
        Ok(path)
    }

    /// Writes the equality deletes of a keyed batch: one key row per touched key.
    async fn write_deletes(
        &self,
        ctx: &TableContext,
        table: &str,
        batch_id: &str,
        keys: &[Vec<u8>],
        name: &str,
    ) -> Result<Vec<iceberg::spec::DataFile>, PipelineError> {
        let write_err = |source| PipelineError::Write {
            batch_id: batch_id.to_string(),
            source,
        };
        let Some(key_schema) = ctx.writer.key_schema().map_err(write_err)? else {
            return Ok(Vec::new());
        };
        let mut shredder = Shredder::new(&key_schema, shred_options(&ctx.settings))
            .map_err(|s| shred_err(table, batch_id, s))?;
        for k in keys {
            // Only keys that shredded once reach here.
            let _ = shredder.push(k);
        }
        let keys = shredder
            .finish()
            .map_err(|s| shred_err(table, batch_id, s))?;
        ctx.writer
            .write_deletes(&keys, name)
            .await
            .map_err(write_err)
    }

    /// The table's writer context: cached, loaded, or created on first write.
    /// `None` when the table is missing and may not be created.
    /// Appends a batch's changes to the changelog table beside `ident`,
    /// creating it from the keyed table's schema on first use.
    async fn write_changelog(
        &self,
        ident: &TableIdent,
        main_schema: &Schema,
        batch_id: &str,
        batch: &SourceBatch,
        rows: Vec<(Pos<'_>, Cow<'_, [u8]>)>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let log = changelog::table_of(ident);
        let name = display(&log);
        if let Err(CatalogError::NoSuchTable { .. }) = self.parts.catalog.load_table(&log).await {
            let def_err = |reason: String| PipelineError::TableDef {
                table: name.clone(),
                reason,
            };
            let schema = changelog::schema(main_schema).map_err(|e| def_err(e.to_string()))?;
            let settings = self.parts.config.table(&name);
            let creation = tabledef::configured_creation(log.name(), schema, &settings)
                .map_err(|e| def_err(e.to_string()))?;
            match self.parts.catalog.create_table(&log, creation).await {
                Ok(_) => report.created.push(name.clone()),
                // Another writer created it first.
                Err(CatalogError::TableExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let log_batch = sub_batch_id(batch_id, &name);
        Box::pin(self.write_table(&log, &log_batch, batch, Group::new(rows, None), report)).await
    }

    async fn context(
        &self,
        ident: &TableIdent,
        group: &Group<'_>,
        report: &mut WriteReport,
    ) -> Result<Option<Arc<TableContext>>, PipelineError> {
        let (cached, generation) = {
            let tables = self.cached_tables();
            (tables.map.get(ident).cloned(), tables.generation)
        };
        if let Some(ctx) = cached {
            return Ok(Some(ctx));
        }
        let table = display(ident);
        let settings = self.parts.config.table(&table);
        let loaded = match self.parts.catalog.load_table(ident).await {
            Ok(loaded) => loaded,
            Err(CatalogError::NoSuchTable { .. }) if self.parts.config.routing.create => {
                let loaded = self.create(ident, &settings, group).await?;
                report.created.push(table.clone());
                loaded
            }
            Err(CatalogError::NoSuchTable { .. }) if self.router.is_some() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let writer = TableWriter::new(
            ident,
            &loaded.metadata,
            self.parts.catalog.file_io().clone(),
        )
        .map_err(|source| PipelineError::Write {
            batch_id: String::new(),
            source,
        })?;
        let ctx = Arc::new(TableContext {
            loaded,
            writer,
            settings,
        });
        // Another part of the batch may have loaded it meanwhile (either copy
        // serves), but a schema change since this load began makes this one stale.
        let mut tables = self.cached_tables();
        if tables.generation == generation {
            tables.map.insert(ident.clone(), ctx.clone());
        }
        Ok(Some(ctx))
    }

    fn cached_tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        // The map holds whole values only: a panic elsewhere leaves it usable.
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn create(
        &self,
        ident: &TableIdent,
        settings: &ResolvedTable,
        group: &Group<'_>,
    ) -> Result<LoadedTable, PipelineError> {
        let table = display(ident);
        let def_err = |reason: String| PipelineError::TableDef {
            table: table.clone(),
            reason,
        };
        let schema: Schema = match &settings.schema {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| def_err(format!("schema file {}: {e}", path.display())))?;
                tabledef::parse_schema(&text).map_err(|e| def_err(e.to_string()))?
            }
            None => {
                // Change records describe rows: infer from the rows they carry.
                let changes =
                    !settings.identifier_fields.is_empty() || settings.changelog == Changelog::Only;
                let sample: Vec<serde_json::Value> = group
                    .records
                    .iter()
                    .filter_map(|(pos, r)| {
                        if !changes {
                            return match group.items.filter(|_| change::is_dynamodb_record(r)) {
                                Some(opts) => {
                                    serde_json::from_slice(&change::dynamodb_item(r, opts).ok()??)
                                        .ok()
                                }
                                None => serde_json::from_slice(r).ok(),
                            };
                        }
                        let c = change::decode(r, ChangeFormat::Auto).ok()?;
                        let row = match settings.changelog {
                            Changelog::Only => changelog::row(&c, *pos),
                            _ => c.row,
                        };
                        serde_json::from_slice(&row).ok()
                    })
                    .take(INFER_SAMPLE)
                    .collect();
                let opts = InferOptions {
                    declared: group.declared.clone(),
                    ..infer_options(settings)
                };
                evolve::infer_schema(&sample, &opts).ok_or_else(|| {
                    def_err(
                        "cannot infer a schema: no record in the batch has a non-null field".into(),
                    )
                })?
            }
        };
        let creation = tabledef::configured_creation(ident.name(), schema, settings)
            .map_err(|e| def_err(e.to_string()))?;
        match self.parts.catalog.create_table(ident, creation).await {
            Ok(loaded) => {
                info!(table = %table, "created table on first write");
                Ok(loaded)
            }
            // Another writer created it first.
            Err(CatalogError::TableExists { .. }) => {
                Ok(self.parts.catalog.load_table(ident).await?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// How source `name`'s DynamoDB stream records become append-only rows.
    fn item_row(&self, name: &str) -> change::ItemRow {
        let source = self.parts.config.source(name);
        change::ItemRow {
            keep_removes: source.removes == crate::config::Removes::Keep,
            metadata: source.metadata,
        }
    }

    async fn dead_letter(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        rejected: Vec<Rejected>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let location = self
            .parts
            .dead_letters
            .put(ident, batch_id, &rejected)
            .await?;
        Counters::add(&self.parts.counters.records_rejected, rejected.len() as u64);
        report.dead_letter_locations.push(location);
        report.rejected.extend(rejected);
        Ok(())
    }

    fn fault(&self, point: FaultPoint, table: &str, batch_id: &str) -> Result<(), PipelineError> {
        self.parts
            .faults
            .hit(point)
            .map_err(|source| PipelineError::Fault {
                table: table.to_string(),
                batch_id: batch_id.to_string(),
                source,
            })
    }
}

/// The group of table `t` in `groups`, made by `new` on its first record.
fn group_of<'g, 'a>(
    groups: &'g mut BTreeMap<String, (TableIdent, Group<'a>)>,
    t: TableIdent,
    new: impl FnOnce() -> Group<'a>,
) -> &'g mut Group<'a> {
    &mut groups.entry(display(&t)).or_insert_with(|| (t, new())).1
}

fn shred_options(t: &ResolvedTable) -> ShredOptions {
    ShredOptions {
        case_insensitive: t.case_insensitive,
        epoch_unit: t.epoch_unit,
        unknown_fields: match (t.evolution, t.unknown_fields) {
            (true, _) => UnknownFields::Collect,
            (false, ConfigUnknown::Ignore) => UnknownFields::Ignore,
            (false, ConfigUnknown::Reject) => UnknownFields::Reject,
        },
    }
}

fn infer_options(t: &ResolvedTable) -> InferOptions {
    InferOptions {
        decimal_scale: t.infer_decimal_scale.map(u32::from),
        timestamps: t.infer_timestamps,
        case_insensitive: t.case_insensitive,
        widen: t.widen_types,
        declared: None,
    }
}

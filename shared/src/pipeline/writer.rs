//! The writer step: one source batch in; records routed to their tables
//! (created on first write, evolved as records need), data files durable in
//! storage, bad records dead-lettered, one commit request per table enqueued —
//! and only then success.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::Schema;
use iceberg::{NamespaceIdent, TableIdent};
use tracing::{info, instrument, warn};

use super::PipelineError;
use super::changelog;
use super::classify::{Row, Shape, as_json, classify};
use super::identity::Identity;
use super::part::{Group, Groups, Output, Part, TableContext, infer_options};
use super::scope::Scope;
use crate::avro::json_of;
use crate::catalog::{CatalogError, CatalogRef, LoadedTable};
use crate::change::{self, ChangeFormat};
use crate::commit::CommitEngine;
use crate::config::{Changelog, Config, ResolvedTable};
use crate::dlq::{DeadLetters, Rejected};
use crate::evolve::{self, InferOptions};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;
use crate::metrics::Counters;
use crate::metrics::emf::{Emf, Unit};
use crate::queue::QueueRef;
use crate::route::Router;
use crate::source::{SourceBatch, sub_batch_id};
use crate::tabledef;
use crate::write::TableWriter;

/// Records sampled to infer the schema of a table created on first write.
const INFER_SAMPLE: usize = 1_000;

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
    pub(super) parts: WriterParts,
    pub(super) engine: CommitEngine,
    pub(super) router: Option<Router>,
    /// Tables loaded so far; locked only to look one up or keep it, never
    /// across a catalog call, so concurrent parts of a batch load in parallel.
    tables: std::sync::Mutex<Tables>,
    /// Whether a table's records that no retry can write are dead-lettered
    /// (the batch then succeeds) rather than failing the batch.
    dead_letter_unwritable: bool,
}

/// The writer's loaded tables, with a count of schema changes it made, so a
/// load that began before one is not kept after it.
#[derive(Default)]
pub(super) struct Tables {
    map: HashMap<TableIdent, Arc<TableContext>>,
    generation: u64,
}

impl Tables {
    /// Drops `ident`'s table after a schema change, and any load in flight with it.
    pub(super) fn forget(&mut self, ident: &TableIdent) {
        self.map.remove(ident);
        self.generation += 1;
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
    ///
    /// Records from a schema registry (`batch.avro`) shape a table created
    /// or evolved for them with their declared types, and those that stayed
    /// binary are read straight into columns.
    #[instrument(skip_all, fields(source = %batch.source.name, batch_id = %batch.batch_id))]
    pub async fn write(&self, batch: SourceBatch) -> Result<WriteReport, PipelineError> {
        let mut report = WriteReport::default();
        let declared = batch.avro.as_ref().and_then(|a| a.declared().cloned());
        let Groups { tables, unrouted } = self.group(&batch, declared)?;
        if !unrouted.is_empty() {
            let ident = TableIdent::new(NamespaceIdent::new("_unrouted".into()), "records".into());
            self.dead_letter(&ident, &batch.batch_id, unrouted, &mut report)
                .await?;
        }
        let single = tables.len() == 1;
        for (name, (ident, group)) in tables {
            let batch_id = if single {
                batch.batch_id.clone()
            } else {
                sub_batch_id(&batch.batch_id, &name)
            };
            self.write_group(&ident, &batch_id, &batch, group, &mut report)
                .await?;
        }
        Ok(report)
    }

    /// Writes one table's group; what only a fix can cure would fail every
    /// redelivery, so with [`Self::dead_letter_unwritable`] the group's
    /// records are dead-lettered with the reason instead.
    async fn write_group(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        group: Group<'_>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let (records, unopened) = if self.dead_letter_unwritable {
            (group.records.clone(), group.rejected.clone())
        } else {
            Default::default()
        };
        match self
            .write_table(ident, batch_id, batch, group, report)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.is_transient() || !self.dead_letter_unwritable => Err(e),
            Err(e) => {
                let name = display(ident);
                warn!(table = %name, %batch_id, error = %e, "no retry can write this batch to its table; dead-lettering its records");
                Counters::add(&self.parts.counters.batches_dead_lettered, 1);
                let reason = e.to_string();
                let scope = Scope::new(&name, batch_id, batch);
                // In the batch's one dead-letter file, beside the records
                // that could not be opened, which keep their own reasons.
                let rejected = unopened
                    .into_iter()
                    .chain(
                        records
                            .iter()
                            .map(|(pos, r)| scope.reject(*pos, "", &reason, r)),
                    )
                    .collect();
                self.dead_letter(ident, batch_id, rejected, report).await
            }
        }
    }

    #[instrument(skip_all, fields(table = %display(ident), batch_id = %batch_id))]
    async fn write_table(
        &self,
        ident: &TableIdent,
        batch_id: &str,
        batch: &SourceBatch,
        mut group: Group<'_>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let table = display(ident);
        let scope = Scope::new(&table, batch_id, batch);
        let mut rejected = std::mem::take(&mut group.rejected);
        let opened = match group.records.is_empty() && batch.state.is_empty() {
            // Only records that could not be opened: nothing to write, and
            // no table to create from them.
            true => None,
            false => self.context(ident, &group, report).await?,
        };
        let Some(first) = opened else {
            if !group.records.is_empty() {
                // The table is missing and routing may not create it.
                let reason = format!("table {table} does not exist and routing.create is false");
                rejected.extend(
                    group
                        .records
                        .iter()
                        .map(|(pos, r)| scope.reject(*pos, "", &reason, r)),
                );
            }
            return match rejected.is_empty() {
                true => Ok(()),
                false => self.dead_letter(ident, batch_id, rejected, report).await,
            };
        };
        // A keyed table takes changes: fold them per key. A changelog takes
        // them unfolded, one row per change.
        let schema = first.loaded.metadata.current_schema().clone();
        let key_names: Vec<String> = schema
            .identifier_field_ids()
            .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
            .collect();
        let changelog = first.settings.changelog;
        let shape = Shape {
            keyed: !key_names.is_empty() && changelog != Changelog::Only,
            changelog,
            key_names: &key_names,
            items: group.items,
        };
        let declared = group.declared.clone();
        let avro = group.avro.clone();
        // Changes are JSON documents: a keyed table and a changelog read
        // registry Avro as the JSON text the registry path writes.
        let records = match shape.keyed || changelog != Changelog::Off {
            true => as_json(group.records, avro.as_deref(), &scope, &mut rejected),
            false => group.records,
        };
        let mut classified = classify(records, &shape, avro.as_deref(), &scope, &mut rejected);
        let log_rows = std::mem::take(&mut classified.log_rows);
        if !log_rows.is_empty() {
            self.write_changelog(ident, &schema, batch_id, batch, log_rows, report)
                .await?;
        }
        let part = Part {
            ident,
            table: &table,
            batch_id,
            batch,
            declared: declared.as_ref(),
            avro: avro.as_ref(),
        };
        let mut output = if shape.keyed {
            self.upsert(&part, &scope, classified, &key_names, &mut rejected, report)
                .await?
        } else {
            self.append(&part, &scope, classified.rows, &mut rejected, report)
                .await?
        };
        output.rejected = rejected.len() as u64;
        if !rejected.is_empty() {
            self.dead_letter(ident, batch_id, rejected, report).await?;
        }
        self.write_files(ident, batch_id, batch, output, report)
            .await
    }

    /// Shreds an append-only table's rows, each as it came.
    async fn append(
        &self,
        part: &Part<'_>,
        scope: &Scope<'_>,
        rows: Vec<Row<'_>>,
        rejected: &mut Vec<Rejected>,
        report: &mut WriteReport,
    ) -> Result<Output, PipelineError> {
        let shredded = self.shred_evolving(part, &rows, report).await?;
        for (i, field, reason) in &shredded.failed {
            let (pos, record) = &rows[*i];
            rejected.push(scope.reject(*pos, field, reason, record));
        }
        let identity = Identity::of(part.batch);
        Ok(Output {
            row_ids: shredded
                .accepted
                .iter()
                .map(|i| identity.row(rows[*i].0))
                .collect(),
            ctx: shredded.ctx,
            data: shredded.data,
            keys: None,
            rejected: 0,
        })
    }

    /// Appends a batch's changes to the changelog table beside `ident`,
    /// creating it from the keyed table's schema on first use.
    async fn write_changelog(
        &self,
        ident: &TableIdent,
        main_schema: &Schema,
        batch_id: &str,
        batch: &SourceBatch,
        rows: Vec<Row<'_>>,
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

    /// The table's writer context: cached, loaded, or created on first write.
    /// `None` when the table is missing and may not be created.
    pub(super) async fn context(
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

    pub(super) fn cached_tables(&self) -> std::sync::MutexGuard<'_, Tables> {
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
                        let r = &json_of(group.avro.as_deref(), r).ok()?;
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
                            _ => c.row.into_bytes(),
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
    pub(super) fn item_row(&self, name: &str) -> change::ItemRow {
        let source = self.parts.config.source(name);
        change::ItemRow {
            keep_removes: source.removes == crate::config::Removes::Keep,
            metadata: source.metadata,
        }
    }

    pub(super) async fn dead_letter(
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

    pub(super) fn fault(
        &self,
        point: FaultPoint,
        table: &str,
        batch_id: &str,
    ) -> Result<(), PipelineError> {
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

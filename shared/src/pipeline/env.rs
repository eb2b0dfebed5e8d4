//! What every stage of the writer step reaches: the parts it was given
//! (catalog, queue, dead-letter location, faults, counters, settings), the
//! commit engine that changes a table's schema, and the tables loaded so
//! far, loaded or created on first write. Below the stages, so that none of
//! them imports the orchestrator.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::TableIdent;
use iceberg::spec::Schema;
use tracing::info;

use super::PipelineError;
use super::changelog;
use super::part::{Sample, TableContext, infer_options};
use super::report::WriteReport;
use crate::avro::json_of;
use crate::catalog::{CatalogError, CatalogRef, LoadedTable};
use crate::change::{self, ChangeFormat};
use crate::commit::CommitEngine;
use crate::config::{Changelog, Config, ResolvedTable};
use crate::dlq::{DeadLetters, Rejected};
use crate::error::BoxError;
use crate::evolve::{self, InferOptions};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;
use crate::metrics::Counters;
use crate::queue::QueueRef;
use crate::tabledef::{self, TableDefError};
use crate::write::TableWriter;

/// Records sampled to infer the schema of a table created on first write.
const INFER_SAMPLE: usize = 1_000;

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

/// The writer step's surroundings, shared by its concurrent tasks.
pub(super) struct Env {
    pub parts: WriterParts,
    /// Changes a table's schema when records need it.
    pub engine: CommitEngine,
    /// Whether routing places records (a missing table is then dead-lettered
    /// rather than an error).
    routed: bool,
    /// Tables loaded so far; locked only to look one up or keep it, never
    /// across a catalog call, so concurrent parts of a batch load in parallel.
    tables: std::sync::Mutex<Tables>,
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

impl Env {
    pub(super) fn new(parts: WriterParts, routed: bool) -> Self {
        Self {
            engine: CommitEngine::new(parts.catalog.clone(), Default::default()),
            parts,
            routed,
            tables: std::sync::Mutex::new(Tables::default()),
        }
    }

    /// Drops `ident`'s loaded table after a schema change, and any load in
    /// flight with it.
    pub(super) fn forget(&self, ident: &TableIdent) {
        self.cached_tables().forget(ident);
    }

    /// The table's writer context: cached, loaded, or created on first write.
    /// `None` when the table is missing and may not be created.
    pub(super) async fn context(
        &self,
        ident: &TableIdent,
        sample: &Sample<'_, '_>,
        report: &mut WriteReport,
    ) -> Result<Option<Arc<TableContext>>, PipelineError> {
        let (cached, generation) = {
            let tables = self.cached_tables();
            (tables.map.get(ident).cloned(), tables.generation)
        };
        let table = display(ident);
        let settings = self.parts.config.table(&table);
        // Every batch asks the catalog (a pointer read: catalogs keep the
        // parsed metadata of a location): a warm process must not write for
        // a table dropped and created again since, nor with a schema or spec
        // another writer has moved on from.
        let loaded = match self.parts.catalog.load_table(ident).await {
            Ok(loaded) => match cached {
                Some(ctx) if ctx.describes(&loaded.metadata) => return Ok(Some(ctx)),
                _ => loaded,
            },
            Err(CatalogError::NoSuchTable { .. }) if self.parts.config.routing.create => {
                let loaded = self.create(ident, &settings, sample).await?;
                report.created.push(table.clone());
                loaded
            }
            Err(CatalogError::NoSuchTable { .. }) if self.routed => return Ok(None),
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
        sample: &Sample<'_, '_>,
    ) -> Result<LoadedTable, PipelineError> {
        let table = display(ident);
        let def_err = |source: BoxError| PipelineError::TableDef {
            table: table.clone(),
            source,
        };
        let schema: Schema = match &settings.schema {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| {
                    def_err(
                        TableDefError::SchemaFile {
                            path: path.clone(),
                            source,
                        }
                        .into(),
                    )
                })?;
                tabledef::parse_schema(&text).map_err(|e| def_err(e.into()))?
            }
            None => {
                // Change records describe rows: infer from the rows they carry.
                let changes =
                    !settings.identifier_fields.is_empty() || settings.changelog == Changelog::Only;
                let values: Vec<serde_json::Value> = sample
                    .records
                    .iter()
                    // Only the schema is inferred here: a record that does
                    // not parse is left out of the sample, and shredding
                    // dead-letters it with its reason, so nothing is lost.
                    .filter_map(|(pos, r)| {
                        let r = &json_of(sample.avro, r).ok()?;
                        if !changes {
                            return match sample.items.filter(|_| change::is_dynamodb_record(r)) {
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
                    declared: sample.declared.cloned(),
                    ..infer_options(settings)
                };
                evolve::infer_schema(&values, &opts)
                    .map_err(|e| def_err(Box::new(e)))?
                    .ok_or_else(|| def_err(TableDefError::Uninferable.into()))?
            }
        };
        let creation = tabledef::configured_creation(ident.name(), schema, settings)
            .map_err(|e| def_err(e.into()))?;
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

//! The writer step: one source batch in; records routed to their tables
//! (created on first write, evolved as records need), data files durable in
//! storage, bad records dead-lettered, one commit request per table enqueued —
//! and only then success. This module orchestrates; each stage is a
//! function of its own module below it, taking the table's [`Part`].

use iceberg::spec::Schema;
use iceberg::{NamespaceIdent, TableIdent};
use tracing::{instrument, warn};

use super::PipelineError;
use super::changelog;
use super::classify::{Row, Shape, as_json, classify};
use super::env::Env;
use super::evolving::shred_evolving;
use super::files::write_files;
use super::group::group;
use super::identity::Identity;
use super::part::{Group, Groups, Output, Part};
use super::scope::Scope;
use super::upsert::upsert;
use crate::catalog::CatalogError;
use crate::config::Changelog;
use crate::dlq::Rejected;
use crate::error::{BoxError, Classify};
use crate::ident::display;
use crate::metrics::Counters;
use crate::route::Router;
use crate::source::{SourceBatch, sub_batch_id};
use crate::tabledef;

pub use super::env::WriterParts;
pub use super::report::WriteReport;

/// The writer step, shared by concurrent tasks.
pub struct Writer {
    env: Env,
    router: Option<Router>,
    /// Whether a table's records that no retry can write are dead-lettered
    /// (the batch then succeeds) rather than failing the batch.
    dead_letter_unwritable: bool,
}

impl Writer {
    /// A writer step; routes records when the config's routing names a table or a rule.
    pub fn new(parts: WriterParts) -> Result<Self, PipelineError> {
        let routing = &parts.config.routing;
        let router = if routing.table.is_some() || routing.template.is_some() {
            Some(Router::new(routing)?)
        } else {
            None
        };
        Ok(Self {
            env: Env::new(parts, router.is_some()),
            router,
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
        let Groups { tables, unrouted } = group(&self.env, self.router.as_ref(), &batch, declared)?;
        if !unrouted.is_empty() {
            let ident = TableIdent::new(NamespaceIdent::new("_unrouted".into()), "records".into());
            self.env
                .dead_letter(&ident, &batch.batch_id, unrouted, &mut report)
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
                Counters::add(&self.env.parts.counters.batches_dead_lettered, 1);
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
                self.env
                    .dead_letter(ident, batch_id, rejected, report)
                    .await
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
        let env = &self.env;
        let mut rejected = std::mem::take(&mut group.rejected);
        let reads = batch.records.reads().map(|r| r.rows.num_rows());
        let opened = match group.records.is_empty() && batch.state.is_empty() && reads.is_none() {
            // Only records that could not be opened: nothing to write, and
            // no table to create from them.
            true => None,
            false => env.context(ident, &group.sample(), report).await?,
        };
        let Some(ctx) = opened else {
            if let Some(rows) = reads {
                return Err(missing_for_reads(ident, batch_id, rows));
            }
            if !group.records.is_empty() {
                // The table is missing and routing may not create it.
                let table = display(ident);
                let reason = format!("table {table} does not exist and routing.create is false");
                let scope = Scope::new(&table, batch_id, batch);
                rejected.extend(
                    group
                        .records
                        .iter()
                        .map(|(pos, r)| scope.reject(*pos, "", &reason, r)),
                );
            }
            return match rejected.is_empty() {
                true => Ok(()),
                false => env.dead_letter(ident, batch_id, rejected, report).await,
            };
        };
        let part = Part::new(ident, batch_id, batch, &group, ctx);
        // A keyed table takes changes: fold them per key. A changelog takes
        // them unfolded, one row per change.
        let changelog = part.ctx.settings.changelog;
        let shape = Shape {
            keyed: !part.key_names.is_empty() && changelog != Changelog::Only,
            changelog,
            key_names: &part.key_names,
            items: group.items,
        };
        if reads.is_some() {
            takes_reads(&part, &shape)?;
        }
        // Changes are JSON documents: a keyed table and a changelog read
        // registry Avro as the JSON text the registry path writes.
        let records = match shape.keyed || changelog != Changelog::Off {
            true => as_json(group.records, &part, &mut rejected),
            false => group.records,
        };
        let mut classified = classify(records, &shape, &part, &mut rejected);
        let log_rows = std::mem::take(&mut classified.log_rows);
        if !log_rows.is_empty() {
            let schema = part.ctx.loaded.metadata.current_schema().clone();
            self.write_changelog(&part, &schema, log_rows, report)
                .await?;
        }
        let mut output = match shape.keyed {
            true => upsert(env, &part, classified, &mut rejected, report).await?,
            false => append(env, &part, classified.rows, &mut rejected, report).await?,
        };
        output.rejected = rejected.len() as u64;
        if !rejected.is_empty() {
            env.dead_letter(ident, batch_id, rejected, report).await?;
        }
        write_files(env, &part, output, report).await
    }

    /// Appends a batch's changes to the changelog table beside the part's
    /// table, creating it from the keyed table's schema on first use.
    async fn write_changelog(
        &self,
        part: &Part<'_>,
        main_schema: &Schema,
        rows: Vec<Row<'_>>,
        report: &mut WriteReport,
    ) -> Result<(), PipelineError> {
        let parts = &self.env.parts;
        let log = changelog::table_of(part.ident);
        let name = display(&log);
        if let Err(CatalogError::NoSuchTable { .. }) = parts.catalog.load_table(&log).await {
            let def_err = |source: BoxError| PipelineError::TableDef {
                table: name.clone(),
                source,
            };
            let schema = changelog::schema(main_schema).map_err(|e| def_err(e.into()))?;
            let settings = parts.config.table(&name);
            let creation = tabledef::configured_creation(log.name(), schema, &settings)
                .map_err(|e| def_err(e.into()))?;
            match parts.catalog.create_table(&log, creation).await {
                Ok(_) => report.created.push(name.clone()),
                // Another writer created it first.
                Err(CatalogError::TableExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let log_batch = sub_batch_id(part.batch_id, &name);
        let group = Group::new(rows, None);
        Box::pin(self.write_table(&log, &log_batch, part.batch, group, report)).await
    }
}

/// Rows read into columns for a table that does not exist and may not be
/// created from them: an error, never rows dropped.
fn missing_for_reads(ident: &TableIdent, batch_id: &str, rows: usize) -> PipelineError {
    PipelineError::Reads {
        table: display(ident),
        batch_id: batch_id.to_string(),
        reason: format!("{rows} rows for a table that does not exist and routing.create is false"),
    }
}

/// Rows read into columns apply as changes only on a keyed table: a
/// changelog wants each change's row, `order_changes_by` each change's own
/// place in the order.
fn takes_reads(part: &Part<'_>, shape: &Shape<'_>) -> Result<(), PipelineError> {
    let changes_only = shape.changelog == Changelog::Off;
    if shape.keyed && changes_only && part.ctx.settings.order_changes_by.is_none() {
        return Ok(());
    }
    Err(PipelineError::Reads {
        table: part.table.clone(),
        batch_id: part.batch_id.to_string(),
        reason: "only a keyed table without a changelog or order_changes_by takes them".into(),
    })
}

/// Shreds an append-only table's rows, each as it came.
async fn append(
    env: &Env,
    part: &Part<'_>,
    rows: Vec<Row<'_>>,
    rejected: &mut Vec<Rejected>,
    report: &mut WriteReport,
) -> Result<Output, PipelineError> {
    let shredded = shred_evolving(env, part, &rows, report).await?;
    for (i, field, reason) in &shredded.failed {
        let (pos, record) = &rows[*i];
        rejected.push(part.reject(*pos, field, reason, record));
    }
    // Plain rows carry no change order.
    let identity = Identity::of(part.batch, None);
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

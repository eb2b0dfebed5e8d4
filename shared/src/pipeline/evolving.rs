//! Shredding a table's rows, evolving its schema for the misfits (new
//! fields, wider types, optional columns a record leaves out) and shredding
//! again, up to [`MAX_EVOLUTIONS`] times a batch.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::RecordBatch;
use tracing::info;

use super::PipelineError;
use super::env::Env;
use super::part::{Part, Sample, TableContext, infer_options, shred_options};
use super::report::WriteReport;
use crate::avro::json_of;
use crate::catalog::CatalogError;
use crate::error::RecordErrorKind;
use crate::evolve::{self, InferOptions};
use crate::shred::Shredder;
use crate::source::Pos;

/// Schema changes one batch may make before the rest of its misfits are dead-lettered.
const MAX_EVOLUTIONS: usize = 3;

/// Rows shredded against the table as it is after any evolution.
pub(super) struct Shredded {
    pub ctx: Arc<TableContext>,
    pub data: RecordBatch,
    /// Indices of the rows in `data`, in its order.
    pub accepted: Vec<usize>,
    /// Rows that do not fit: index, field, reason.
    pub failed: Vec<(usize, String, String)>,
}

/// Shreds `rows` against the table's schema, evolving the schema for
/// misfits up to [`MAX_EVOLUTIONS`] times.
pub(super) async fn shred_evolving(
    env: &Env,
    part: &Part<'_>,
    rows: &[(Pos<'_>, Cow<'_, [u8]>)],
    report: &mut WriteReport,
) -> Result<Shredded, PipelineError> {
    let avro = part.avro.as_deref();
    // The rows themselves, borrowed, should the table have to be created again.
    let sample = Sample {
        records: rows,
        items: None,
        declared: part.declared.as_ref(),
        avro,
    };
    let mut evolutions = 0;
    loop {
        let Some(ctx) = env.context(part.ident, &sample, report).await? else {
            return Err(CatalogError::NoSuchTable {
                table: part.table.clone(),
            }
            .into());
        };
        let (shredded, misfits) = shred_once(ctx, part, rows)?;
        let settings = &shredded.ctx.settings;
        if !settings.evolution || misfits.is_empty() || evolutions == MAX_EVOLUTIONS {
            return Ok(shredded);
        }
        let values: Vec<serde_json::Value> = misfits
            .iter()
            .filter_map(|i| rows.get(*i))
            .filter_map(|(_, r)| serde_json::from_slice(&json_of(avro, r).ok()?).ok())
            .collect();
        let opts = InferOptions {
            declared: part.declared.clone(),
            ..infer_options(settings)
        };
        if !evolve(env, part, &shredded.ctx, &values, &opts, report).await? {
            return Ok(shredded);
        }
        evolutions += 1;
    }
}

/// Evolves the table's schema so `values` fit; false when no change
/// makes them fit.
async fn evolve(
    env: &Env,
    part: &Part<'_>,
    ctx: &TableContext,
    values: &[serde_json::Value],
    opts: &InferOptions,
    report: &mut WriteReport,
) -> Result<bool, PipelineError> {
    let meta = &ctx.loaded.metadata;
    let Some(evolution) =
        evolve::evolve(meta.current_schema(), meta.last_column_id(), values, opts)
    else {
        return Ok(false);
    };
    env.engine
        .update_schema(part.ident, |m| {
            evolve::evolve(m.current_schema(), m.last_column_id(), values, opts).map(|e| e.schema)
        })
        .await?;
    info!(changes = ?evolution.changes, "evolved the table schema");
    report.evolved.extend(
        evolution
            .changes
            .iter()
            .map(|c| format!("{}: {c}", part.table)),
    );
    env.forget(part.ident);
    Ok(true)
}

/// One pass of the shredder over `rows`: what fits, what does not, and the
/// misfits a schema change could make fit.
fn shred_once(
    ctx: Arc<TableContext>,
    part: &Part<'_>,
    rows: &[(Pos<'_>, Cow<'_, [u8]>)],
) -> Result<(Shredded, HashSet<usize>), PipelineError> {
    let avro = part.avro.as_deref();
    let settings = &ctx.settings;
    let mut shredder = Shredder::new(
        ctx.loaded.metadata.current_schema(),
        shred_options(settings),
    )
    .map_err(|source| part.shred_err(source))?;
    let mut failed = Vec::new();
    let mut accepted = Vec::with_capacity(rows.len());
    let mut misfits = HashSet::new();
    for (ordinal, (_, record)) in rows.iter().enumerate() {
        let pushed = match avro.and_then(|a| a.binary(record)) {
            Some((decoder, datum)) => shredder.push_avro(decoder, datum),
            None => shredder.push(record),
        };
        match pushed {
            Ok(()) => accepted.push(ordinal),
            Err(e) => {
                let evolvable = match e.kind {
                    RecordErrorKind::OutOfRange => settings.widen_types,
                    RecordErrorKind::MissingRequired | RecordErrorKind::NullRequired => true,
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
    let data = shredder.finish().map_err(|source| part.shred_err(source))?;
    Ok((
        Shredded {
            ctx,
            data,
            accepted,
            failed,
        },
        misfits,
    ))
}

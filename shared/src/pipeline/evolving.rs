//! Shredding a table's rows, evolving its schema for the misfits (new
//! fields, wider types, optional columns a record leaves out) and shredding
//! again, up to [`MAX_EVOLUTIONS`] times a batch.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
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
use crate::evolve::{self, Evolution, InferOptions};
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
/// misfits up to [`MAX_EVOLUTIONS`] times. A record whose new fields the
/// schema cannot take (a colliding name), or could only take with more
/// changes than a batch makes, is failed naming them: never accepted
/// without its fields.
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
    let mut refused = BTreeMap::new();
    let mut evolutions = 0;
    // The part's table as the batch loaded it, read again (a catalog
    // request, on Glue a GetTable) only after the batch evolved it.
    let mut current = Some(part.ctx.clone());
    loop {
        let ctx = match current.take() {
            Some(ctx) => ctx,
            None => reloaded(env, part, &sample, report).await?,
        };
        let (shredded, misfits) = shred_once(ctx, part, rows, &refused)?;
        let settings = &shredded.ctx.settings;
        if !settings.evolution || misfits.is_empty() {
            return Ok(shredded);
        }
        let (ordinals, values) = misfit_values(rows, misfits, avro);
        let opts = InferOptions {
            declared: part.declared.clone(),
            ..infer_options(settings)
        };
        let meta = &shredded.ctx.loaded.metadata;
        let evolution =
            evolve::evolve(meta.current_schema(), meta.last_column_id(), &values, &opts)
                .map_err(|source| part.evolve_err(source))?;
        let Some(evolution) = evolution else {
            return Ok(shredded);
        };
        for r in &evolution.refused {
            refused.insert(ordinals[r.record], (r.field.clone(), r.reason.clone()));
        }
        if evolution.changes.is_empty() {
            // Only refusals: shred once more without those records, on
            // the same table.
            current = Some(shredded.ctx.clone());
            continue;
        }
        if evolutions == MAX_EVOLUTIONS {
            // The records still needing a change are failed, not written
            // without the fields they bring.
            for (ordinal, value) in ordinals.iter().zip(&values) {
                let one = std::slice::from_ref(value);
                let needs =
                    evolve::evolve(meta.current_schema(), meta.last_column_id(), one, &opts)
                        .map_err(|source| part.evolve_err(source))?
                        .map(|e| e.changes)
                        .unwrap_or_default();
                if let Some(first) = needs.first() {
                    let reason = format!(
                        "needs schema changes ({}) beyond the {MAX_EVOLUTIONS} one batch \
                         makes; send it again and the next batch evolves the table further",
                        needs.join(", ")
                    );
                    refused.entry(*ordinal).or_insert((first.clone(), reason));
                }
            }
            let (shredded, _) = shred_once(shredded.ctx.clone(), part, rows, &refused)?;
            return Ok(shredded);
        }
        apply(env, part, &values, &opts, &evolution, report).await?;
        evolutions += 1;
    }
}

/// The part's table after this batch changed it.
async fn reloaded(
    env: &Env,
    part: &Part<'_>,
    sample: &Sample<'_, '_>,
    report: &mut WriteReport,
) -> Result<Arc<TableContext>, PipelineError> {
    env.context(part.ident, sample, report)
        .await?
        .ok_or_else(|| {
            CatalogError::NoSuchTable {
                table: part.table.clone(),
            }
            .into()
        })
}

/// The misfits as JSON values, with their ordinals.
fn misfit_values(
    rows: &[(Pos<'_>, Cow<'_, [u8]>)],
    misfits: HashSet<usize>,
    avro: Option<&crate::avro::Registered>,
) -> (Vec<usize>, Vec<serde_json::Value>) {
    let mut ordinals = Vec::with_capacity(misfits.len());
    let mut values = Vec::with_capacity(misfits.len());
    for i in misfits {
        let Some((_, r)) = rows.get(i) else { continue };
        // A record that does not decode is one the shredder failed
        // already (it is in `failed`): nothing of it was accepted.
        if let Some(v) = json_of(avro, r)
            .ok()
            .and_then(|j| serde_json::from_slice::<serde_json::Value>(&j).ok())
        {
            ordinals.push(i);
            values.push(v);
        }
    }
    (ordinals, values)
}

/// Commits `evolution` (as the table is then: another writer may have
/// evolved it first) and forgets the loaded table.
async fn apply(
    env: &Env,
    part: &Part<'_>,
    values: &[serde_json::Value],
    opts: &InferOptions,
    evolution: &Evolution,
    report: &mut WriteReport,
) -> Result<(), PipelineError> {
    // The changes of the attempt that committed: none when another writer
    // made them first, so two writers never both report one change.
    let applied = std::sync::Mutex::new(Vec::new());
    env.engine
        .update_schema(part.ident, |m| {
            // Iceberg refused no schema for these records a moment ago;
            // should it now, the table changed under us and the next pass
            // evolves again from what it is.
            let e = evolve::evolve(m.current_schema(), m.last_column_id(), values, opts)
                .ok()
                .flatten()
                .filter(|e| !e.changes.is_empty());
            if let Ok(mut a) = applied.lock() {
                *a = e.as_ref().map(|e| e.changes.clone()).unwrap_or_default();
            }
            e.map(|e| e.schema)
        })
        .await?;
    let applied = applied.into_inner().unwrap_or_default();
    info!(changes = ?applied, planned = ?evolution.changes, "evolved the table schema");
    report
        .evolved
        .extend(applied.iter().map(|c| format!("{}: {c}", part.table)));
    env.forget(part.ident);
    Ok(())
}

/// One pass of the shredder over `rows`: what fits, what does not, and the
/// misfits a schema change could make fit.
fn shred_once(
    ctx: Arc<TableContext>,
    part: &Part<'_>,
    rows: &[(Pos<'_>, Cow<'_, [u8]>)],
    refused: &BTreeMap<usize, (String, String)>,
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
        if let Some((field, reason)) = refused.get(&ordinal) {
            failed.push((ordinal, field.clone(), reason.clone()));
            continue;
        }
        let pushed = match avro.and_then(|a| a.binary(record)) {
            Some((decoder, datum)) => shredder.push_avro(decoder, datum),
            None => shredder.push(record),
        };
        match pushed {
            Ok(()) => accepted.push(ordinal),
            Err(e) => {
                let evolvable = match e.kind {
                    RecordErrorKind::OutOfRange => settings.widen_types,
                    RecordErrorKind::MissingRequired | RecordErrorKind::NullRequired => {
                        settings.relax_required
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

//! Rows a source read into columns itself ([`Reads`]) on a keyed table:
//! aligned to the table's columns, newer than every change of their batch
//! to the same key, and written beside the changes' rows with no JSON text
//! between the source and the file.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, new_null_array};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_schema::SchemaRef;
use arrow_select::concat::concat_batches;

use super::PipelineError;
use super::identity::Identity;
use super::keyed::Folded;
use super::part::{KeyedFiles, Part};
use crate::change::{Change, ChangeOp};
use crate::rowkey;
use crate::source::{Pos, Reads};
use crate::write::rows::RowId;

/// A batch's reads as its table takes them, with each row's key digest
/// where something asks for it.
pub(super) struct Aligned<'r> {
    reads: &'r Reads,
    rows: RecordBatch,
    /// Empty for reads appended to a batch with no changes: nothing looks
    /// their keys up.
    digests: Vec<u128>,
}

impl<'r> Aligned<'r> {
    /// `reads` in the columns of the part's table as loaded, keyed by the
    /// digests the key shredder would give the same key values. Reads that
    /// append ([`Reads::appends`]) to a batch whose changes touched no key
    /// (`changed` false) need no digests: no key file, no lookup, no
    /// change to supersede.
    pub(super) fn of(
        part: &Part<'_>,
        reads: &'r Reads,
        changed: bool,
    ) -> Result<Self, PipelineError> {
        let schema =
            iceberg::arrow::schema_to_arrow_schema(part.ctx.loaded.metadata.current_schema())
                .map_err(|e| reads_err(part, e.to_string()))?;
        let rows = align(part, &reads.rows, &Arc::new(schema))?;
        let columns = rowkey::columns(&rows, &part.key_names)
            .ok_or_else(|| reads_err(part, "the rows lack a key column".into()))?;
        let digests = match reads.appends && !changed {
            true => Vec::new(),
            false => {
                rowkey::digests(&rows, &columns).map_err(|e| reads_err(part, e.to_string()))?
            }
        };
        Ok(Self {
            reads,
            rows,
            digests,
        })
    }

    /// Whether the reads append, looking no key up.
    pub(super) fn appends(&self) -> bool {
        self.reads.appends
    }

    /// Keys the reads hold give up every state the batch's changes left:
    /// the read is newer, and its own touch deletes what the table holds.
    pub(super) fn supersede(&self, folded: &Folded, chosen: &mut [Option<usize>]) {
        if folded.keys.is_empty() {
            return;
        }
        let read: HashSet<u128> = self.digests.iter().copied().collect();
        for (k, key) in folded.keys.iter().enumerate() {
            if read.contains(&key.digest) {
                chosen[k] = None;
            }
        }
    }

    /// The changes' rows `data` with the reads after them (in `data`'s
    /// columns: the table may have evolved while the changes were shredded),
    /// each read's record in `row_ids` and, unless they append, its key
    /// touched in `keys`.
    pub(super) fn append(
        self,
        part: &Part<'_>,
        data: RecordBatch,
        row_ids: &mut Vec<Option<RowId>>,
        keys: &mut KeyedFiles,
        identity: &Identity<'_>,
    ) -> Result<RecordBatch, PipelineError> {
        let rows = match self.rows.schema() == data.schema() {
            true => self.rows,
            false => align(part, &self.rows, &data.schema())?,
        };
        let pos = Pos::Item(&self.reads.position);
        if !self.reads.appends {
            // The key file places a read as it would a change at its position.
            let read = Change {
                op: ChangeOp::Read,
                row: Default::default(),
                position: Some(self.reads.position.clone()),
                ts_ms: None,
                unchanged: Vec::new(),
            };
            let (src, at) = identity.key_change(pos, &read);
            keys.file
                .extend(self.digests.iter().map(|d| (*d, src, at.clone())));
            keys.reads = Some(rows.clone());
        }
        let id = identity.row(pos);
        row_ids.extend(std::iter::repeat_n(id, rows.num_rows()));
        if data.num_rows() == 0 {
            // Nothing to put them after: no copy of a chunk's every column.
            return Ok(rows);
        }
        concat_batches(&data.schema(), [&data, &rows]).map_err(|e| reads_err(part, e.to_string()))
    }
}

/// `rows` in the columns of `to`, matched by name: a column the rows lack is
/// null, one of another type is cast exactly (a type the table widened),
/// and a column the table lacks, or a value the cast cannot carry, is an
/// error rather than a row written without it.
fn align(
    part: &Part<'_>,
    rows: &RecordBatch,
    to: &SchemaRef,
) -> Result<RecordBatch, PipelineError> {
    let from = rows.schema();
    if let Some(extra) = from
        .fields()
        .iter()
        .find(|f| to.field_with_name(f.name()).is_err())
    {
        return Err(reads_err(
            part,
            format!("column {} is not in the table", extra.name()),
        ));
    }
    let exact = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(to.fields().len());
    for field in to.fields() {
        let column = match from.index_of(field.name()) {
            Ok(i) if rows.column(i).data_type() == field.data_type() => rows.column(i).clone(),
            Ok(i) => cast_with_options(rows.column(i), field.data_type(), &exact)
                .map_err(|e| reads_err(part, format!("column {}: {e}", field.name())))?,
            Err(_) => new_null_array(field.data_type(), rows.num_rows()),
        };
        columns.push(column);
    }
    RecordBatch::try_new(to.clone(), columns).map_err(|e| reads_err(part, e.to_string()))
}

fn reads_err(part: &Part<'_>, reason: String) -> PipelineError {
    PipelineError::Reads {
        table: part.table.clone(),
        batch_id: part.batch_id.to_string(),
        reason,
    }
}

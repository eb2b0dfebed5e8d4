//! Copy-on-write for keyed tables whose readers apply no delete files
//! (`write.update.mode = copy-on-write`): instead of committing a batch's
//! equality deletes, the committer rewrites every live data file holding one of
//! the batch's keys without those rows, and the snapshot replaces the old files
//! with the rewritten ones plus the batch's new rows. The table never holds a
//! delete file, so every reader sees exactly one row per key.
//!
//! Requests of one commit apply in source order against a running set of
//! files, so a later request rewrites an earlier one's new rows too. The cost
//! is written to the summary: `floe.cow.rows-rewritten` / `floe.cow.rows-changed`
//! is the per-row write amplification, `floe.cow.write-amplification` the bytes
//! rewritten per byte of new data.

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use iceberg::spec::{DataFile, Datum, Operation, SchemaRef};
use tracing::{info, warn};
use uuid::Uuid;

use super::error::CommitError;
use super::lineage;
use super::live::LiveFiles;
use super::plan::PlanContext;
use super::read::read_file;
use super::snapshot::SnapshotPlan;
use crate::ledger;
use crate::request::CommitRequest;
use crate::write::TableWriter;

/// Summary key: data files rewritten.
pub const REWRITTEN_FILES: &str = "floe.cow.files-rewritten";
/// Summary key: rows copied into rewritten files.
pub const ROWS_REWRITTEN: &str = "floe.cow.rows-rewritten";
/// Summary key: keys the batches touched.
pub const ROWS_CHANGED: &str = "floe.cow.rows-changed";
/// Summary key: bytes of rewritten files.
pub const BYTES_REWRITTEN: &str = "floe.cow.bytes-rewritten";
/// Summary key: bytes of the batches' new data files.
pub const BYTES_CHANGED: &str = "floe.cow.bytes-changed";
/// Summary key: bytes rewritten per byte of new data.
pub const WRITE_AMPLIFICATION: &str = "floe.cow.write-amplification";

#[derive(Debug, Default)]
struct Amplification {
    files: u64,
    rows_rewritten: u64,
    rows_changed: u64,
    bytes_rewritten: u64,
    bytes_changed: u64,
}

impl Amplification {
    fn entries(&self) -> Vec<(String, String)> {
        let ratio = self.bytes_rewritten as f64 / self.bytes_changed.max(1) as f64;
        vec![
            (REWRITTEN_FILES.into(), self.files.to_string()),
            (ROWS_REWRITTEN.into(), self.rows_rewritten.to_string()),
            (ROWS_CHANGED.into(), self.rows_changed.to_string()),
            (BYTES_REWRITTEN.into(), self.bytes_rewritten.to_string()),
            (BYTES_CHANGED.into(), self.bytes_changed.to_string()),
            (WRITE_AMPLIFICATION.into(), format!("{ratio:.2}")),
        ]
    }
}

/// A file of the running set: live in the table (`base`), or new in this commit.
struct Candidate {
    file: DataFile,
    spec_id: i32,
    base: bool,
    /// A table file's `first_row_id` and data sequence number, which its
    /// rows' lineage inherits; `None` for a file of this plan, whose moved
    /// rows have theirs written out and whose new rows have none yet.
    inherits: Option<(Option<i64>, i64)>,
}

/// Plans ONE snapshot applying `ordered` (source order) by rewriting files;
/// `None` when the table holds delete files (another engine's, or from
/// before the mode was set), which a rewrite would wrongly drop, so the
/// caller falls back to position deletes.
pub async fn plan(
    ctx: &PlanContext<'_>,
    ordered: &[&CommitRequest],
) -> Result<Option<SnapshotPlan>, CommitError> {
    let meta = ctx.metadata();
    let live = LiveFiles::load_cached(ctx.file_io, meta, ctx.manifests)
        .await
        .map_err(|e| ctx.build_err(e))?;
    if !live.deletes.is_empty() {
        warn!(
            delete_files = live.deletes.len(),
            "copy-on-write table holds delete files (another engine's, or from before the mode was set): this commit writes position deletes; `floe maintain` compacts them away"
        );
        return Ok(None);
    }
    let (schema, lineage) = lineage::rewrite_schema(meta).map_err(|e| ctx.build_err(e))?;
    let key_ids: Vec<i32> = schema.identifier_field_ids().collect();
    let writer =
        TableWriter::with_schema(&ctx.table.ident, meta, schema.clone(), ctx.file_io.clone())?;

    let mut pass = Pass::new(ctx, &schema, lineage, live, writer);
    for r in ordered {
        let key_files = r.delete_files(meta)?;
        let keys = KeySet::read(ctx, &schema, &key_ids, &key_files).await?;
        pass.amp.rows_changed += keys.len() as u64;
        pass.plan
            .obsolete
            .extend(key_files.iter().map(|f| f.file_path().to_string()));
        if r.truncate {
            for c in std::mem::take(&mut pass.files) {
                pass.drop(c);
            }
        }
        if !keys.is_empty() {
            pass.rewrite(&keys).await?;
        }
        for f in r.data_files(meta)? {
            pass.amp.bytes_changed += f.file_size_in_bytes();
            pass.files.push(Candidate {
                file: f,
                spec_id: r.spec_id,
                base: false,
                inherits: None,
            });
        }
    }
    let Pass {
        files,
        mut plan,
        amp,
        ..
    } = pass;
    // A file written by this plan and rewritten again by a later request in it
    // is in `written` and `obsolete`: gone whether the attempt wins or loses.
    plan.added_data = files
        .into_iter()
        .filter(|c| !c.base)
        .map(|c| (c.spec_id, c.file))
        .collect();
    plan.properties = ledger::summary_entries(ordered.iter().copied());
    plan.properties.extend(amp.entries());
    info!(
        files_rewritten = amp.files,
        rows_rewritten = amp.rows_rewritten,
        rows_changed = amp.rows_changed,
        "copy-on-write planned"
    );
    Ok(Some(plan))
}

/// One plan's running set of files and what it has done to them so far.
struct Pass<'p> {
    ctx: &'p PlanContext<'p>,
    schema: &'p SchemaRef,
    /// Every column, for reading a file whole.
    all_ids: Vec<i32>,
    /// Whether rows carry their lineage (format v3; `schema` has its columns).
    lineage: bool,
    writer: TableWriter,
    files: Vec<Candidate>,
    plan: SnapshotPlan,
    amp: Amplification,
}

impl<'p> Pass<'p> {
    /// A pass over the table's live data files, planning one overwrite.
    fn new(
        ctx: &'p PlanContext<'p>,
        schema: &'p SchemaRef,
        lineage: bool,
        live: LiveFiles,
        writer: TableWriter,
    ) -> Self {
        Self {
            ctx,
            schema,
            all_ids: schema.as_struct().fields().iter().map(|f| f.id).collect(),
            lineage,
            writer,
            files: live
                .data
                .into_iter()
                .map(|l| Candidate {
                    file: l.file,
                    spec_id: l.spec_id,
                    base: true,
                    inherits: Some((l.first_row_id, l.sequence_number)),
                })
                .collect(),
            plan: SnapshotPlan {
                operation: Operation::Overwrite,
                ..Default::default()
            },
            amp: Amplification::default(),
        }
    }

    /// Takes `c` out of the table: removed if the table holds it, else (a
    /// file of this plan) obsolete.
    fn drop(&mut self, c: Candidate) {
        let path = c.file.file_path().to_string();
        if c.base {
            self.plan.removed_data.push(path);
        } else {
            self.plan.obsolete.push(path);
        }
    }

    /// Rewrites every running file holding one of `keys` without those rows.
    async fn rewrite(&mut self, keys: &KeySet) -> Result<(), CommitError> {
        let mut next = Vec::with_capacity(self.files.len());
        for c in std::mem::take(&mut self.files) {
            if !keys.may_hold(&c.file) {
                next.push(c);
                continue;
            }
            let ctx = self.ctx;
            let batches = read_file(
                ctx.file_io,
                self.schema.clone(),
                self.all_ids.clone(),
                &c.file,
            )
            .await
            .map_err(|e| ctx.build_err(e))?;
            let batches = match self.lineage {
                true => lineage::lined(ctx.file_io, &c.file, batches, c.inherits)
                    .await
                    .map_err(|e| ctx.build_err(e))?,
                false => batches,
            };
            let Some(kept) = keys.without_keys(&batches)? else {
                next.push(c);
                continue;
            };
            self.drop(c);
            self.amp.files += 1;
            self.amp.rows_rewritten += kept.num_rows() as u64;
            let name = format!("cow-{}", Uuid::now_v7().simple());
            for f in self.writer.write(&kept, &name).await? {
                self.amp.bytes_rewritten += f.file_size_in_bytes();
                self.plan.written.push(f.file_path().to_string());
                next.push(Candidate {
                    file: f,
                    spec_id: self.writer.spec_id(),
                    base: false,
                    inherits: None,
                });
            }
        }
        self.files = next;
        Ok(())
    }
}

/// The keys one batch touched, from its equality-delete files.
struct KeySet {
    table: String,
    keys: HashSet<String>,
    key_names: Vec<String>,
    /// The first key column's values, sorted, to skip files by their bounds.
    first: Option<(i32, Vec<Datum>)>,
}

impl KeySet {
    async fn read(
        ctx: &PlanContext<'_>,
        schema: &SchemaRef,
        key_ids: &[i32],
        delete_files: &[DataFile],
    ) -> Result<Self, CommitError> {
        let key_names: Vec<String> = key_ids
            .iter()
            .filter_map(|id| schema.field_by_id(*id).map(|f| f.name.clone()))
            .collect();
        let mut set = KeySet {
            table: ctx.table_name(),
            keys: HashSet::new(),
            key_names,
            first: key_ids.first().map(|id| (*id, Vec::new())),
        };
        for f in delete_files {
            let batches = read_file(ctx.file_io, schema.clone(), key_ids.to_vec(), f)
                .await
                .map_err(|e| ctx.build_err(e))?;
            for b in &batches {
                let columns = set.columns(b)?;
                set.keys
                    .extend(encode(&columns).map_err(|e| arrow_err(&set.table, e))?);
                if let (Some((_, datums)), Some(col)) = (&mut set.first, columns.first()) {
                    match datums_of(col) {
                        Some(mut d) => datums.append(&mut d),
                        None => set.first = None,
                    }
                }
            }
        }
        if let Some((_, datums)) = &mut set.first {
            datums.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        }
        Ok(set)
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// False only when the file's bounds on the first key column exclude every key.
    fn may_hold(&self, file: &DataFile) -> bool {
        let Some((id, datums)) = &self.first else {
            return true;
        };
        let (Some(lower), Some(upper)) = (file.lower_bounds().get(id), file.upper_bounds().get(id))
        else {
            return true;
        };
        if datums.first().map(|d| d.data_type()) != Some(lower.data_type()) {
            return true;
        }
        let at = datums.partition_point(|d| d < lower);
        datums.get(at).is_some_and(|d| d <= upper)
    }

    /// The rows of `batches` whose key is not in the set, or `None` when no
    /// row has one (the file stays as it is).
    fn without_keys(&self, batches: &[RecordBatch]) -> Result<Option<RecordBatch>, CommitError> {
        let Some(first) = batches.first() else {
            return Ok(None);
        };
        let mut kept = Vec::with_capacity(batches.len());
        let mut dropped = 0;
        for b in batches {
            let mask: BooleanArray = encode(&self.columns(b)?)
                .map_err(|e| arrow_err(&self.table, e))?
                .into_iter()
                .map(|k| Some(!self.keys.contains(&k)))
                .collect();
            let filtered = filter_record_batch(b, &mask).map_err(|e| arrow_err(&self.table, e))?;
            dropped += b.num_rows() - filtered.num_rows();
            kept.push(filtered);
        }
        if dropped == 0 {
            return Ok(None);
        }
        concat_batches(&first.schema(), &kept)
            .map(Some)
            .map_err(|e| arrow_err(&self.table, e))
    }

    fn columns(&self, batch: &RecordBatch) -> Result<Vec<ArrayRef>, CommitError> {
        self.key_names
            .iter()
            .map(|n| {
                batch.column_by_name(n).cloned().ok_or_else(|| {
                    arrow_err(
                        &self.table,
                        arrow_schema::ArrowError::SchemaError(format!(
                            "key column {n} missing from a file read back"
                        )),
                    )
                })
            })
            .collect()
    }
}

/// One text per row joining the key columns' values; files and delete files
/// are read through the same schema, so equal keys give equal texts.
fn encode(columns: &[ArrayRef]) -> Result<Vec<String>, arrow_schema::ArrowError> {
    let rows = columns.first().map_or(0, |c| c.len());
    let options = FormatOptions::default().with_null("\u{0}");
    let formatters = columns
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((0..rows)
        .map(|i| {
            let mut key = String::new();
            for (n, f) in formatters.iter().enumerate() {
                if n > 0 {
                    key.push('\u{1f}');
                }
                key.push_str(&f.value(i).to_string());
            }
            key
        })
        .collect())
}

/// The column's values as Iceberg datums, for the key types whose bounds
/// floe compares; `None` for other types (no file skipping then).
fn datums_of(col: &ArrayRef) -> Option<Vec<Datum>> {
    match col.data_type() {
        DataType::Int32 => Some(
            col.as_primitive::<Int32Type>()
                .iter()
                .flatten()
                .map(Datum::int)
                .collect(),
        ),
        DataType::Int64 => Some(
            col.as_primitive::<Int64Type>()
                .iter()
                .flatten()
                .map(Datum::long)
                .collect(),
        ),
        DataType::Utf8 => Some(
            col.as_string::<i32>()
                .iter()
                .flatten()
                .map(Datum::string)
                .collect(),
        ),
        DataType::LargeUtf8 => Some(
            col.as_string::<i64>()
                .iter()
                .flatten()
                .map(Datum::string)
                .collect(),
        ),
        _ => None,
    }
}

fn arrow_err(table: &str, e: arrow_schema::ArrowError) -> CommitError {
    CommitError::Build {
        table: table.to_string(),
        source: Box::new(iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("copy-on-write rewrite: {e}"),
        )),
    }
}

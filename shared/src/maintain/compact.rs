//! Compaction: small data files of a partition bin-packed into files near
//! `write.target-file-size-bytes`, and files that deletes reach rewritten
//! without their deleted rows, so the delete files can go.
//!
//! Deletes are applied in one pass, in time linear in the data plus the
//! deletes: every position-delete file is read once into the rows it removes
//! per data file, every equality-delete file once into each key's highest
//! delete sequence number; then each data file is streamed through the two
//! (never every delete file against every data file, as iceberg-rust's
//! reader does). Memory is bounded by one output chunk and the delete sets.
//! A large backlog is compacted in steps of bounded input, each its own
//! `replace` commit, so a run can stop before a deadline and the next one
//! goes on.
//!
//! The rewritten files take the data sequence number of the snapshot the
//! compaction read, as Iceberg's rewrite does: an equality delete committed
//! meanwhile has a higher number, so it still applies. A position delete
//! committed meanwhile names the old file: the commit translates it to the
//! row's new place, so a change the committer made during compaction is
//! never undone. The commit goes through only while every input file is
//! still live; otherwise it fails cleanly and the next run compacts the new
//! state.

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::{BooleanArray, RecordBatch};
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use async_trait::async_trait;
use iceberg::spec::{DataContentType, DataFile, Operation, SchemaRef, TableMetadata};
use tracing::info;
use uuid::Uuid;

use crate::catalog::LoadedTable;
use crate::commit::lineage;
use crate::commit::live::{LiveFile, LiveFiles};
use crate::commit::locate::digests_of;
use crate::commit::read::read_file;
use crate::commit::snapshot::SnapshotPlan;
use crate::commit::{Action, CommitError, PlanContext};
use crate::request::CommitRequest;
use crate::write::vector::file_key;
use crate::write::{FileDeletes, FileSettings, TableWriter};

/// A file is small below this share of the target size.
const SMALL: f64 = 0.75;
/// A file with at least this share of its rows deleted is rewritten.
const DELETED_SHARE: f64 = 0.1;
/// Input bytes one step reads at most (the first file of a step always goes).
const STEP_BYTES: u64 = 1 << 30;
/// Arrow bytes of kept rows gathered, all partitions together, before the
/// largest partition's are written out. Writing copies a partition's rows
/// into one batch first, so a step's peak is about twice this plus the
/// Parquet encoder's: at 256 MiB, compacting nested GitHub-shaped events
/// peaked at 755 MB, over the 600 MB every path keeps to (docs/benchmarks.md).
const CHUNK_BYTES: usize = 128 << 20;

/// What one compaction step read and wrote.
#[derive(Debug, Default, Clone)]
pub struct Rewrite {
    /// Data files replaced.
    pub removed_data: Vec<String>,
    /// Delete files that no longer apply to anything.
    pub removed_deletes: Vec<String>,
    /// The new files.
    pub added: Vec<(i32, DataFile)>,
    /// Data sequence number of the snapshot read.
    pub sequence_number: i64,
    /// Rows written.
    pub rows: u64,
    /// Rows dropped because deletes removed them.
    pub dropped: u64,
    /// Files worth compacting left for the next step.
    pub remaining: usize,
    /// Where each input file's kept rows went, to translate position deletes
    /// committed meanwhile.
    moved: HashMap<String, Moved>,
    /// The delete files live when the step read the table.
    seen_deletes: HashSet<String>,
}

/// Where one input file's kept rows went.
#[derive(Debug, Default, Clone)]
struct Moved {
    /// The kept rows' old positions, in order.
    kept: Vec<u32>,
    /// Runs of them: (first index into `kept`, output file, its first row).
    runs: Vec<(u32, usize, u32)>,
}

/// What deletes remove, read once.
struct Deleted {
    /// Rows removed per data file by position deletes.
    positions: HashMap<String, HashSet<u32>>,
    /// Each deleted key's highest equality-delete sequence number.
    equality: HashMap<u128, i64>,
    /// The highest equality-delete sequence number.
    newest_equality: Option<i64>,
}

/// The data files worth compacting, in the order a step takes them: files
/// equality deletes may reach, files position deletes took a tenth of, and
/// the small files of each partition that holds at least two.
fn select(
    live: &LiveFiles,
    meta: &TableMetadata,
    deleted_rows: &HashMap<String, usize>,
) -> Vec<String> {
    let target = FileSettings::from_properties(meta.properties())
        .map(|s| s.target_file_size)
        .unwrap_or(512 * 1024 * 1024);
    let newest_equality = live
        .deletes
        .iter()
        .filter(|d| d.file.content_type() == DataContentType::EqualityDeletes)
        .map(|d| d.sequence_number)
        .max();
    let has_positions = live
        .deletes
        .iter()
        .any(|d| d.file.content_type() == DataContentType::PositionDeletes);
    let mut out = Vec::new();
    let mut small: BTreeMap<String, Vec<&LiveFile>> = BTreeMap::new();
    for f in &live.data {
        let path = f.file.file_path();
        let equality = newest_equality.is_some_and(|s| s > f.sequence_number);
        let deleted = deleted_rows.get(path).copied().unwrap_or(0) as f64;
        let positions =
            has_positions && deleted >= f.file.record_count().max(1) as f64 * DELETED_SHARE;
        if equality || positions {
            out.push(path.to_string());
        } else if (f.file.file_size_in_bytes() as f64) < target as f64 * SMALL {
            small
                .entry(format!("{}/{:?}", f.spec_id, f.file.partition()))
                .or_default()
                .push(f);
        }
    }
    for files in small.into_values().filter(|f| f.len() > 1) {
        out.extend(files.into_iter().map(|f| f.file.file_path().to_string()));
    }
    out
}

/// What compaction would take, without writing: the files the run selects
/// (read with the same deletes), their rows less the rows position deletes
/// remove, and whether equality deletes may remove more (then the rows are
/// an upper bound: which keys they hit shows only when the files are read).
pub async fn preview(ctx: &PlanContext<'_>) -> Result<Preview, CommitError> {
    let Candidates {
        live,
        deleted,
        counts,
        selected,
    } = candidates(ctx).await?;
    let selected: HashSet<String> = selected.into_iter().collect();
    let mut preview = Preview::default();
    for f in live
        .data
        .iter()
        .filter(|f| selected.contains(f.file.file_path()))
    {
        let removed = counts.get(f.file.file_path()).copied().unwrap_or(0) as u64;
        preview.files += 1;
        preview.rows += f.file.record_count().saturating_sub(removed);
        preview.dropped += removed;
        preview.rows_at_most |= deleted
            .newest_equality
            .is_some_and(|s| s > f.sequence_number);
    }
    Ok(preview)
}

/// The table's live files, what their deletes remove, and the data files
/// worth compacting: what a run and its dry run both start from.
struct Candidates {
    live: LiveFiles,
    deleted: Deleted,
    /// Rows position deletes remove, per data file.
    counts: HashMap<String, usize>,
    /// In the order a step takes them.
    selected: Vec<String>,
}

async fn candidates(ctx: &PlanContext<'_>) -> Result<Candidates, CommitError> {
    let live = LiveFiles::load(ctx.file_io, ctx.metadata())
        .await
        .map_err(|e| ctx.build_err(e))?;
    let deleted = read_deletes(ctx, &live).await?;
    let counts: HashMap<String, usize> = deleted
        .positions
        .iter()
        .map(|(p, rows)| (p.clone(), rows.len()))
        .collect();
    let selected = select(&live, ctx.metadata(), &counts);
    Ok(Candidates {
        live,
        deleted,
        counts,
        selected,
    })
}

/// What [`preview`] found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Preview {
    /// Data files the run would replace.
    pub files: usize,
    /// Rows it would write.
    pub rows: u64,
    /// Rows it would drop because position deletes removed them.
    pub dropped: u64,
    /// True when equality deletes may drop some of `rows`.
    pub rows_at_most: bool,
}

/// Reads and rewrites the next step of files worth compacting; `None` when
/// nothing is.
pub async fn rewrite(
    ctx: &PlanContext<'_>,
    loaded: &LoadedTable,
) -> Result<Option<Rewrite>, CommitError> {
    let meta = ctx.metadata();
    let Some(current) = meta.current_snapshot() else {
        return Ok(None);
    };
    let Candidates {
        live,
        deleted,
        selected,
        ..
    } = candidates(ctx).await?;
    if selected.is_empty() {
        return Ok(None);
    }
    let by_path: HashMap<&str, &LiveFile> =
        live.data.iter().map(|f| (f.file.file_path(), f)).collect();
    let step = next_step(&selected, &by_path);
    let remaining = selected.len() - step.len();

    let (schema, lineage) = lineage::rewrite_schema(meta).map_err(|e| ctx.build_err(e))?;
    let key_names: Vec<String> = schema
        .identifier_field_ids()
        .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
        .collect();
    let all_ids: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let writer =
        TableWriter::with_schema(&loaded.ident, meta, schema.clone(), ctx.file_io.clone())?;
    let mut out = Rewrite {
        sequence_number: current.sequence_number(),
        remaining,
        seen_deletes: live
            .deletes
            .iter()
            .map(|d| file_key(&d.file).into_owned())
            .collect(),
        ..Default::default()
    };
    let read = Read {
        schema: &schema,
        ids: &all_ids,
        key_names: &key_names,
        lineage,
    };
    rewrite_files(ctx, &writer, &step, &read, &deleted, &mut out).await?;
    out.removed_deletes = unneeded_deletes(ctx, &live, &out.removed_data, &by_path).await?;
    info!(
        files_in = out.removed_data.len(),
        files_out = out.added.len(),
        rows = out.rows,
        dropped = out.dropped,
        deletes_dropped = out.removed_deletes.len(),
        remaining,
        "compaction step rewrote files"
    );
    Ok(Some(out))
}

/// Reads each file of `step` without its deleted rows and writes the kept
/// rows partition by partition, the largest partition's whenever all of
/// them together have gathered [`CHUNK_BYTES`]; what it read and wrote goes
/// into `out`.
async fn rewrite_files(
    ctx: &PlanContext<'_>,
    writer: &TableWriter,
    step: &[&LiveFile],
    read: &Read<'_>,
    deleted: &Deleted,
    out: &mut Rewrite,
) -> Result<(), CommitError> {
    // Per partition: the kept rows gathered so far, with the inputs they came from.
    let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
    for f in step {
        let kept = read_kept(ctx, f, read, deleted).await?;
        out.dropped += kept.dropped;
        let group = pending
            .entry(format!("{}/{:?}", f.spec_id, f.file.partition()))
            .or_default();
        for b in kept.batches {
            group.gather(b);
        }
        let same_spec = f.spec_id == writer.spec_id();
        group
            .inputs
            .push((f.file.file_path().to_string(), kept.rows, same_spec));
        out.removed_data.push(f.file.file_path().to_string());
        // A bound per partition alone would let a table of many partitions
        // gather many times it.
        while let Some(key) = largest_over(&pending, CHUNK_BYTES) {
            if let Some(group) = pending.remove(&key) {
                flush(ctx, writer, group, out).await?;
            }
        }
    }
    for (_, group) in pending {
        flush(ctx, writer, group, out).await?;
    }
    Ok(())
}

/// One step: the selected files in order, up to the step's input bytes
/// (and at least one file, however large).
fn next_step<'a>(selected: &[String], by_path: &HashMap<&str, &'a LiveFile>) -> Vec<&'a LiveFile> {
    let mut step: Vec<&LiveFile> = Vec::new();
    let mut bytes = 0u64;
    for path in selected {
        let Some(f) = by_path.get(path.as_str()) else {
            continue;
        };
        if !step.is_empty() && bytes + f.file.file_size_in_bytes() > STEP_BYTES {
            break;
        }
        bytes += f.file.file_size_in_bytes();
        step.push(f);
    }
    step
}

/// How the files of one compaction step are read.
struct Read<'r> {
    /// The table's schema, with the lineage columns when `lineage`.
    schema: &'r SchemaRef,
    /// Every field id of `schema`.
    ids: &'r [i32],
    /// The identifier fields, which equality deletes match on.
    key_names: &'r [String],
    /// Whether rows carry their lineage (format v3).
    lineage: bool,
}

/// The rows of one input file that no delete removed.
struct Kept {
    batches: Vec<RecordBatch>,
    /// Their positions in the input file.
    rows: Vec<u32>,
    /// Rows deletes removed.
    dropped: u64,
}

/// Reads data file `f` and keeps the rows that neither a position delete
/// nor a newer equality delete removed.
async fn read_kept(
    ctx: &PlanContext<'_>,
    f: &LiveFile,
    read: &Read<'_>,
    deleted: &Deleted,
) -> Result<Kept, CommitError> {
    let key_names = read.key_names;
    let batches = read_file(ctx.file_io, read.schema.clone(), read.ids.to_vec(), &f.file)
        .await
        .map_err(|e| ctx.build_err(e))?;
    let batches = match read.lineage {
        true => {
            let inherits = Some((f.first_row_id, f.sequence_number));
            lineage::lined(ctx.file_io, &f.file, batches, inherits)
                .await
                .map_err(|e| ctx.build_err(e))?
        }
        false => batches,
    };
    let gone = deleted.positions.get(f.file.file_path());
    let mut out = Kept {
        batches: Vec::with_capacity(batches.len()),
        rows: Vec::new(),
        dropped: 0,
    };
    let mut row = 0u32;
    for b in &batches {
        let digests = match deleted.newest_equality {
            Some(s) if s > f.sequence_number => {
                Some(digests_of(b, key_names).map_err(|e| ctx.build_err(e))?)
            }
            _ => None,
        };
        let mut keep = Vec::with_capacity(b.num_rows());
        for i in 0..b.num_rows() {
            let pos = row + i as u32;
            let by_position = gone.is_some_and(|g| g.contains(&pos));
            let by_equality = digests.as_ref().is_some_and(|d| {
                deleted
                    .equality
                    .get(&d[i])
                    .is_some_and(|s| *s > f.sequence_number)
            });
            let k = !(by_position || by_equality);
            if k {
                out.rows.push(pos);
            }
            keep.push(k);
        }
        row += b.num_rows() as u32;
        out.dropped += keep.iter().filter(|k| !**k).count() as u64;
        let kept = filter_record_batch(b, &BooleanArray::from(keep)).map_err(|e| {
            ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                e.to_string(),
            ))
        })?;
        out.batches.push(kept);
    }
    Ok(out)
}

/// Delete files nothing left needs once `removed` data files are gone: a
/// position-delete file whose data files all went, an equality-delete file
/// older than every data file left.
async fn unneeded_deletes(
    ctx: &PlanContext<'_>,
    live: &LiveFiles,
    removed: &[String],
    by_path: &HashMap<&str, &LiveFile>,
) -> Result<Vec<String>, CommitError> {
    let removed: HashSet<&str> = removed.iter().map(String::as_str).collect();
    let left: Vec<&LiveFile> = live
        .data
        .iter()
        .filter(|f| !removed.contains(f.file.file_path()))
        .collect();
    let mut unneeded = Vec::new();
    for d in &live.deletes {
        let needed = match d.file.content_type() {
            DataContentType::PositionDeletes => {
                let rows = ctx
                    .locator
                    .deleted(ctx.file_io, &d.file)
                    .await
                    .map_err(|e| ctx.build_err(e))?;
                rows.keys()
                    .any(|p| !removed.contains(p.as_str()) && by_path.contains_key(p.as_str()))
            }
            _ => left.iter().any(|f| f.sequence_number < d.sequence_number),
        };
        if !needed {
            unneeded.push(file_key(&d.file).into_owned());
        }
    }
    Ok(unneeded)
}

/// Kept rows of one partition waiting to be written.
#[derive(Debug, Default)]
struct Pending {
    batches: Vec<RecordBatch>,
    bytes: usize,
    /// Inputs in order: path, kept old positions, written with the current spec.
    inputs: Vec<(String, Vec<u32>, bool)>,
}

impl Pending {
    fn gather(&mut self, batch: RecordBatch) {
        self.bytes += batch.get_array_memory_size();
        self.batches.push(batch);
    }
}

/// The partition to write out now: the one holding the most when all of
/// `pending` together hold `bound` bytes or more.
fn largest_over(pending: &BTreeMap<String, Pending>, bound: usize) -> Option<String> {
    let total: usize = pending.values().map(|p| p.bytes).sum();
    if total < bound {
        return None;
    }
    pending
        .iter()
        .max_by_key(|(_, p)| p.bytes)
        .map(|(key, _)| key.clone())
}

/// Writes a partition's gathered rows and records where each input's rows went.
async fn flush(
    ctx: &PlanContext<'_>,
    writer: &TableWriter,
    group: Pending,
    out: &mut Rewrite,
) -> Result<(), CommitError> {
    let rows: usize = group.batches.iter().map(RecordBatch::num_rows).sum();
    let first_out = out.added.len();
    if rows > 0 {
        let all = concat_batches(&group.batches[0].schema(), &group.batches).map_err(|e| {
            ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("compaction: {e}"),
            ))
        })?;
        let name = format!("compact-{}", Uuid::now_v7().simple());
        for f in writer.write(&all, &name).await? {
            out.added.push((writer.spec_id(), f));
        }
        out.rows += rows as u64;
    }
    // Output file k holds the concatenated rows [start_k, start_k + count_k).
    let mut starts = Vec::new();
    let mut at = 0u64;
    for (_, f) in &out.added[first_out..] {
        starts.push(at);
        at += f.record_count();
    }
    let mut offset = 0u64;
    for (path, kept, same_spec) in group.inputs {
        let mut moved = Moved {
            kept,
            runs: Vec::new(),
        };
        // Rows of an input written with another spec may have been split
        // across partitions: their new places are not tracked.
        if same_spec {
            let n = moved.kept.len() as u64;
            for (k, start) in starts.iter().enumerate() {
                let end = starts.get(k + 1).copied().unwrap_or(at);
                let (lo, hi) = (offset.max(*start), (offset + n).min(end));
                if lo < hi {
                    moved
                        .runs
                        .push(((lo - offset) as u32, first_out + k, (lo - start) as u32));
                }
            }
        }
        offset += moved.kept.len() as u64;
        out.moved.insert(path, moved);
    }
    Ok(())
}

async fn read_deletes(ctx: &PlanContext<'_>, live: &LiveFiles) -> Result<Deleted, CommitError> {
    let schema = ctx.metadata().current_schema().clone();
    let key_names: Vec<String> = schema
        .identifier_field_ids()
        .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
        .collect();
    let mut deleted = Deleted {
        positions: HashMap::new(),
        equality: HashMap::new(),
        newest_equality: None,
    };
    for d in &live.deletes {
        match d.file.content_type() {
            DataContentType::PositionDeletes => {
                let rows = ctx
                    .locator
                    .deleted(ctx.file_io, &d.file)
                    .await
                    .map_err(|e| ctx.build_err(e))?;
                for (path, r) in rows.iter() {
                    deleted
                        .positions
                        .entry(path.clone())
                        .or_default()
                        .extend(r.iter().copied());
                }
            }
            _ => {
                let keys = ctx
                    .locator
                    .keys(ctx.file_io, &schema, &key_names, &d.file)
                    .await
                    .map_err(|e| ctx.build_err(e))?;
                for digest in keys.digests() {
                    let s = deleted.equality.entry(digest).or_insert(d.sequence_number);
                    *s = (*s).max(d.sequence_number);
                }
                deleted.newest_equality = deleted.newest_equality.max(Some(d.sequence_number));
            }
        }
    }
    Ok(deleted)
}

/// Commits a [`Rewrite`] (or, with none, only merges the manifests). The
/// ledger is the table property's, which a rewrite leaves as it is, so a
/// compaction retried after a concurrent commit restates nothing stale.
#[derive(Debug)]
pub struct Compact {
    /// The rewrite to commit.
    pub rewrite: Option<Rewrite>,
}

#[async_trait]
impl Action for Compact {
    async fn plan(
        &self,
        ctx: &PlanContext<'_>,
        _requests: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        let mut plan = SnapshotPlan {
            operation: Operation::Replace,
            merge_manifests: true,
            ..Default::default()
        };
        if let Some(r) = &self.rewrite {
            let live = LiveFiles::load(ctx.file_io, ctx.metadata())
                .await
                .map_err(|e| ctx.build_err(e))?;
            let data: HashSet<&str> = live.data.iter().map(|f| f.file.file_path()).collect();
            let deletes: HashSet<String> = live
                .deletes
                .iter()
                .map(|f| file_key(&f.file).into_owned())
                .collect();
            if let Some(gone) = r.removed_data.iter().find(|p| !data.contains(p.as_str())) {
                return Err(CommitError::Superseded {
                    table: ctx.table_name(),
                    reason: format!("compaction input {gone} was removed meanwhile"),
                });
            }
            let translated = translate(ctx, r, &live).await?;
            plan.written
                .extend(translated.iter().map(|(_, f)| f.file_path().to_string()));
            plan.added_deletes = translated;
            plan.added_data = r.added.clone();
            plan.data_sequence_number = Some(r.sequence_number);
            // A delete file removed meanwhile needs no removing: on v3, a
            // newer vector replaced it, and goes with its data file.
            plan.removed_data = r
                .removed_data
                .iter()
                .chain(r.removed_deletes.iter().filter(|k| deletes.contains(*k)))
                .cloned()
                .collect();
        }
        Ok(vec![plan])
    }
}

fn refused(ctx: &PlanContext<'_>, why: String) -> CommitError {
    CommitError::Build {
        table: ctx.table_name(),
        source: Box::new(iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("{why}; nothing was committed, the next run compacts the new state"),
        )),
    }
}

/// Position deletes committed since the step read the table that name rows
/// of its inputs, moved to the rows' new places in its outputs.
async fn translate(
    ctx: &PlanContext<'_>,
    r: &Rewrite,
    live: &LiveFiles,
) -> Result<Vec<(i32, DataFile)>, CommitError> {
    let mut moved_deletes: HashMap<&str, FileDeletes> = HashMap::new();
    for d in live.deletes.iter().filter(|d| {
        d.file.content_type() == DataContentType::PositionDeletes
            && !r.seen_deletes.contains(&*file_key(&d.file))
    }) {
        let rows = ctx
            .locator
            .deleted(ctx.file_io, &d.file)
            .await
            .map_err(|e| ctx.build_err(e))?;
        for (path, positions) in rows.iter() {
            let Some(moved) = r.moved.get(path) else {
                continue;
            };
            for pos in positions {
                // A row the step had already dropped needs nothing.
                let Ok(i) = moved.kept.binary_search(pos) else {
                    continue;
                };
                let i = i as u32;
                let Some((first, file, start)) =
                    moved.runs.iter().rev().find(|(first, _, _)| *first <= i)
                else {
                    return Err(refused(
                        ctx,
                        format!(
                            "a row of {path} was deleted meanwhile and its new place is not known"
                        ),
                    ));
                };
                let (spec_id, out) = &r.added[*file];
                moved_deletes
                    .entry(out.file_path())
                    .or_insert_with(|| FileDeletes {
                        data_file: out.file_path().to_string(),
                        spec_id: *spec_id,
                        partition: out.partition().clone(),
                        rows: Vec::new(),
                    })
                    .rows
                    .push(start + (i - first));
            }
        }
    }
    let writer = TableWriter::new(&ctx.table.ident, ctx.metadata(), ctx.file_io.clone())?;
    let mut deletes: Vec<FileDeletes> = moved_deletes.into_values().collect();
    for d in &mut deletes {
        // Two concurrent commits may have deleted the same row.
        d.rows.sort_unstable();
        d.rows.dedup();
    }
    let name = format!("moved-{}", Uuid::now_v7().simple());
    Ok(writer.write_row_deletes(deletes, &name).await?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, StringArray};

    use super::*;

    fn rows(n: usize, width: usize) -> RecordBatch {
        let text: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("{i:0width$}")),
        ));
        RecordBatch::try_from_iter([("payload", text)]).unwrap()
    }

    #[test]
    fn gathered_rows_are_bounded_across_partitions_not_each() {
        let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
        let one = rows(1_000, 200).get_array_memory_size();
        // Three partitions, each under the bound, together over it.
        for (key, batches) in [("a", 2), ("b", 3), ("c", 1)] {
            let group = pending.entry(key.to_string()).or_default();
            for _ in 0..batches {
                group.gather(rows(1_000, 200));
            }
        }
        assert_eq!(pending["b"].bytes, 3 * one);
        assert_eq!(largest_over(&pending, 4 * one), Some("b".to_string()));
        pending.remove("b");
        // What is left is under the bound: it keeps gathering.
        assert_eq!(largest_over(&pending, 4 * one), None);
        assert_eq!(largest_over(&BTreeMap::new(), 0), None);
    }
}

//! A request's files without the rows the table already holds: a redelivery
//! with other batch boundaries overlaps records an earlier request
//! committed (found by the ledger, row by row through each data file's
//! `floe.rows` footer), and a late keyed request holds keys that later
//! committed changes superseded. The files are rewritten as they were
//! written (same schema, same partition spec) with only the other rows; the
//! originals are dropped once the commit lands.

use std::collections::HashSet;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use iceberg::spec::{DataFile, SchemaRef};
use uuid::Uuid;

use super::error::CommitError;
use super::plan::PlanContext;
use super::read::read_file;
use crate::ledger::{Claims, KeyFile};
use crate::request::CommitRequest;
use crate::rowkey;
use crate::write::TableWriter;
use crate::write::rows::{self, At};

/// A request with some rows dropped from its files.
#[derive(Debug, Clone)]
pub struct Masked {
    /// The request naming the files to commit.
    pub request: CommitRequest,
    /// Files written for it: gone again if the attempt loses.
    pub written: Vec<String>,
    /// Its original files it no longer names: deleted once the commit lands.
    pub obsolete: Vec<String>,
    /// Rows dropped.
    pub dropped: u64,
}

/// Drops the rows of records `claims` says the table holds. `Ok(Err(reason))`
/// when the request's files do not say which row is which record.
pub async fn drop_claimed(
    ctx: &PlanContext<'_>,
    request: &CommitRequest,
    claims: &Claims,
) -> Result<Result<Masked, String>, CommitError> {
    let meta = ctx.metadata();
    let mut masked = start(request);
    let mut kept_files = Vec::new();
    for file in request.data_files(meta)? {
        let path = file.file_path().to_string();
        let Some(ids) = rows::read(ctx.file_io, &path, file.file_size_in_bytes())
            .await
            .map_err(|e| ctx.build_err(e))?
            .filter(|ids| ids.len() as u64 == file.record_count())
        else {
            return Ok(Err(format!(
                "it overlaps records the table already holds, and its data file {path} does not say which row is which record (no floe.rows footer)"
            )));
        };
        let keep: Vec<bool> = ids
            .iter()
            .map(|id| !claimed(claims, request, id.span, &id.at))
            .collect();
        match rewrite(ctx, request, &file, &keep, &mut masked).await? {
            Some(files) => kept_files.extend(files),
            None => kept_files.push(file),
        }
    }
    finish(ctx, masked, kept_files, None).map(Ok)
}

/// Drops every row and delete of the keys `superseded` from a keyed request.
pub async fn drop_keys(
    ctx: &PlanContext<'_>,
    request: &CommitRequest,
    superseded: &HashSet<u128>,
) -> Result<Masked, CommitError> {
    let meta = ctx.metadata();
    let schema = schema_of(ctx, request)?;
    let key_names: Vec<String> = schema
        .identifier_field_ids()
        .filter_map(|id| schema.field_by_id(id).map(|f| f.name.clone()))
        .collect();
    let mut masked = start(request);
    let mut data = Vec::new();
    for file in request.data_files(meta)? {
        let batch = read_all(ctx, &schema, &file).await?;
        let keep = keep_other_keys(&batch, &key_names, superseded)?;
        match rewrite_batch(ctx, request, &file, &batch, &keep, false, &mut masked).await? {
            Some(files) => data.extend(files),
            None => data.push(file),
        }
    }
    let mut deletes = Vec::new();
    for file in request.delete_files(meta)? {
        let batch = read_all(ctx, &schema, &file).await?;
        let keep = keep_other_keys(&batch, &key_names, superseded)?;
        match rewrite_batch(ctx, request, &file, &batch, &keep, true, &mut masked).await? {
            Some(files) => deletes.extend(files),
            None => deletes.push(file),
        }
    }
    // The key file names only the keys the request still changes: the
    // committer deletes the current rows of every key it names.
    if let Some(path) = &request.key_file {
        let Some(keys) = ctx.ledger.key_file(path).await? else {
            return Err(ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("request {}: its key file {path} is gone", request.batch_id),
            )));
        };
        let mut sources: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        for digest in keys.all.iter().filter(|d| !superseded.contains(d)) {
            let (src, pos) = match keys.changes.get(digest) {
                Some((source, pos)) => {
                    let i = sources.iter().position(|s| s == source).unwrap_or_else(|| {
                        sources.push(source.clone());
                        sources.len() - 1
                    });
                    (i as u16, Some(pos.clone()))
                }
                None => (0, None),
            };
            rows.push((*digest, src, pos));
        }
        if sources.is_empty() {
            sources = request.sources.iter().map(|s| s.source.clone()).collect();
        }
        let new_path = format!(
            "{}.masked-{}.json.zst",
            path.trim_end_matches(".json.zst"),
            Uuid::now_v7().simple()
        );
        ctx.ledger
            .put_key_file(&new_path, &KeyFile::new(sources, &rows))
            .await?;
        masked.written.push(new_path.clone());
        masked.request.key_file = Some(new_path);
    }
    finish(ctx, masked, data, Some(deletes))
}

fn start(request: &CommitRequest) -> Masked {
    Masked {
        request: request.clone(),
        written: Vec::new(),
        obsolete: Vec::new(),
        dropped: 0,
    }
}

fn finish(
    ctx: &PlanContext<'_>,
    mut masked: Masked,
    data: Vec<DataFile>,
    deletes: Option<Vec<DataFile>>,
) -> Result<Masked, CommitError> {
    let meta = ctx.metadata();
    let r = &mut masked.request;
    let at = (&ctx.table.ident, r.batch_id.as_str());
    let records: u64 = data.iter().map(|f| f.record_count()).sum();
    r.data_files = CommitRequest::encode_files(meta, r.spec_id, data, at)?;
    if let Some(deletes) = deletes {
        r.delete_files = CommitRequest::encode_files(meta, r.spec_id, deletes, at)?;
    }
    r.record_count = records;
    Ok(masked)
}

fn claimed(claims: &Claims, request: &CommitRequest, span: u16, at: &At) -> bool {
    let span = usize::from(span);
    match at {
        At::Num(n) => claims.claims(request, span, &n.to_string()),
        At::Big(b) => claims.claims(request, span, b),
        At::Index(i) => match request.sources.get(span).map(|s| &s.positions) {
            Some(crate::source::Positions::Ids { ids }) => ids
                .get(*i as usize)
                .is_some_and(|id| claims.claims(request, span, id)),
            _ => false,
        },
    }
}

fn schema_of(ctx: &PlanContext<'_>, request: &CommitRequest) -> Result<SchemaRef, CommitError> {
    ctx.metadata()
        .schema_by_id(request.schema_id)
        .cloned()
        .ok_or_else(|| {
            ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!(
                    "request {} names schema {}, which the table lacks",
                    request.batch_id, request.schema_id
                ),
            ))
        })
}

async fn read_all(
    ctx: &PlanContext<'_>,
    schema: &SchemaRef,
    file: &DataFile,
) -> Result<RecordBatch, CommitError> {
    let ids: Vec<i32> = match file.equality_ids() {
        Some(ids) if !ids.is_empty() => ids,
        _ => schema.as_struct().fields().iter().map(|f| f.id).collect(),
    };
    let batches = read_file(ctx.file_io, schema.clone(), ids, file)
        .await
        .map_err(|e| ctx.build_err(e))?;
    match batches.first() {
        Some(first) => concat_batches(&first.schema(), &batches).map_err(|e| {
            ctx.build_err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                e.to_string(),
            ))
        }),
        None => Ok(RecordBatch::new_empty(std::sync::Arc::new(
            iceberg::arrow::schema_to_arrow_schema(schema).map_err(|e| ctx.build_err(e))?,
        ))),
    }
}

fn keep_other_keys(
    batch: &RecordBatch,
    key_names: &[String],
    superseded: &HashSet<u128>,
) -> Result<Vec<bool>, CommitError> {
    let columns = rowkey::columns(batch, key_names).ok_or_else(|| CommitError::Build {
        table: String::new(),
        source: Box::new(iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            format!("a keyed request's file lacks its key columns {key_names:?}"),
        )),
    })?;
    let digests = rowkey::digests(batch, &columns).map_err(|e| CommitError::Build {
        table: String::new(),
        source: Box::new(iceberg::Error::new(
            iceberg::ErrorKind::DataInvalid,
            e.to_string(),
        )),
    })?;
    Ok(digests.iter().map(|d| !superseded.contains(d)).collect())
}

/// `None` when every row stays (the file is committed as it is).
async fn rewrite(
    ctx: &PlanContext<'_>,
    request: &CommitRequest,
    file: &DataFile,
    keep: &[bool],
    masked: &mut Masked,
) -> Result<Option<Vec<DataFile>>, CommitError> {
    if keep.iter().all(|k| *k) {
        return Ok(None);
    }
    let schema = schema_of(ctx, request)?;
    let batch = read_all(ctx, &schema, file).await?;
    rewrite_batch(ctx, request, file, &batch, keep, false, masked).await
}

async fn rewrite_batch(
    ctx: &PlanContext<'_>,
    request: &CommitRequest,
    file: &DataFile,
    batch: &RecordBatch,
    keep: &[bool],
    deletes: bool,
    masked: &mut Masked,
) -> Result<Option<Vec<DataFile>>, CommitError> {
    if keep.iter().all(|k| *k) {
        return Ok(None);
    }
    masked.obsolete.push(file.file_path().to_string());
    let dropped = keep.iter().filter(|k| !**k).count() as u64;
    if !deletes {
        masked.dropped += dropped;
    }
    if dropped == batch.num_rows() as u64 {
        return Ok(Some(Vec::new()));
    }
    let kept = filter_record_batch(batch, &BooleanArray::from(keep.to_vec())).map_err(|e| {
        ctx.build_err(iceberg::Error::new(
            iceberg::ErrorKind::Unexpected,
            e.to_string(),
        ))
    })?;
    let writer = TableWriter::for_ids(
        &ctx.table.ident,
        ctx.metadata(),
        request.schema_id,
        request.spec_id,
        ctx.file_io.clone(),
    )?;
    let name = format!("masked-{}", Uuid::now_v7().simple());
    let files = if deletes {
        writer.write_deletes(&kept, &name).await?
    } else {
        writer.write(&kept, &name).await?
    };
    masked
        .written
        .extend(files.iter().map(|f| f.file_path().to_string()));
    Ok(Some(files))
}

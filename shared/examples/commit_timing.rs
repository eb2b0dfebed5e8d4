//! Times the committer's own work for one commit of many files: decode the
//! requests, check the ledger, write the manifest and manifest list, build the
//! metadata — and the embedded catalog's swap, which is a local SQLite update.
//!
//! Run with `cargo run --release -p floe-core --example commit_timing [FILES] [COMMITS]`.

mod common;

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use floe_core::catalog::Catalog;
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::request::{CommitRequest, VERSION};
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::write::TableWriter;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let files: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let commits: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let (_dir, catalog, ident) = common::one_table().await?;
    let loaded = catalog.load_table(&ident).await?;
    // One real Parquet file; every request names a hard link to it under
    // the table's location (the committer checks each file is there with its
    // size, and reads no data).
    let writer = TableWriter::new(&ident, &loaded.metadata, catalog.file_io().clone())?;
    let arrow = Arc::new(floe_core::iceberg::arrow::schema_to_arrow_schema(
        loaded.metadata.current_schema(),
    )?);
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..100));
    let file = writer
        .write(&RecordBatch::try_new(arrow, vec![ids])?, "seed")
        .await?;
    let entry = CommitRequest::encode_files(&loaded.metadata, 0, file, (&ident, "seed"))?
        .pop()
        .ok_or("no file written")?;
    let seed = entry["file_path"]
        .as_str()
        .and_then(|p| p.strip_prefix("file://"))
        .ok_or("the seed file is not local")?
        .to_string();
    let data_dir = std::path::Path::new(&seed)
        .parent()
        .ok_or("the seed file has no directory")?
        .to_path_buf();
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let mut times = Vec::new();
    for c in 0..commits {
        let mut requests = Vec::with_capacity(files);
        for i in 0..files {
            let n = (c * files + i) as u64;
            let copy = data_dir.join(format!("bench-{n}.parquet"));
            std::fs::hard_link(&seed, &copy)?;
            let spans = vec![SourceSpan {
                source: "bench".into(),
                positions: Positions::Range {
                    first: n.into(),
                    last: n.into(),
                },
                stream: true,
            }];
            let mut e = entry.clone();
            e["file_path"] = format!("file://{}", copy.display()).into();
            requests.push(CommitRequest {
                version: VERSION,
                table_uuid: None,
                table: ident.clone(),
                batch_id: batch_id(&spans, None),
                sources: spans,
                schema_id: 0,
                spec_id: 0,
                data_files: vec![e],
                delete_files: vec![],
                keyed: false,
                truncate: false,
                truncate_at: None,
                state: Default::default(),
                record_count: 100,
                rejected_count: 0,
                created_at_ms: 0,
                oldest_record_ms: None,
                key_file: None,
                order: Vec::new(),
            });
        }
        let started = Instant::now();
        let out = engine.append(&ident, requests).await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(out.committed.len(), files);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{files} files per commit, {commits} commits: median {:.1} ms, min {:.1} ms, max {:.1} ms (includes the SQLite swap and metadata write)",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}

//! Times the committer's own work for one commit of many files: decode the
//! requests, check the ledger, write the manifest and manifest list, build the
//! metadata — and the embedded catalog's swap, which is a local SQLite update.
//!
//! Run with `cargo run --release -p floe-core --example commit_timing [FILES] [COMMITS]`.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use floe_core::catalog::{Catalog, SqliteCatalog};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::faults::Faults;
use floe_core::iceberg::io::FileIO;
use floe_core::ident::parse_table;
use floe_core::request::{CommitRequest, VERSION};
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::tabledef;
use floe_core::write::TableWriter;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let files: usize = args.next().map_or(Ok(1000), |a| a.parse())?;
    let commits: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let catalog = Arc::new(SqliteCatalog::open(
        "floe",
        &dir.path().join("catalog.db"),
        &format!("file://{}", dir.path().display()),
        FileIO::new_with_fs(),
        Faults::none(),
    )?);
    let ident = parse_table("bench.t")?;
    let schema = tabledef::parse_schema(
        r#"{"type":"struct","fields":[{"id":1,"name":"id","required":true,"type":"long"}]}"#,
    )?;
    catalog
        .create_table(
            &ident,
            tabledef::creation("t", schema, Default::default(), Default::default()),
        )
        .await?;
    let loaded = catalog.load_table(&ident).await?;
    // One real Parquet file; every request names a copy of its entry under
    // another path, since a commit reads metadata only, never data files.
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
    let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
    let mut times = Vec::new();
    for c in 0..commits {
        let requests: Vec<CommitRequest> = (0..files)
            .map(|i| {
                let n = (c * files + i) as u64;
                let spans = vec![SourceSpan {
                    source: "bench".into(),
                    positions: Positions::Range {
                        first: n.into(),
                        last: n.into(),
                    },
                    stream: true,
                }];
                let mut e = entry.clone();
                e["file_path"] = format!("file:///bench/{n}.parquet").into();
                CommitRequest {
                    version: VERSION,
                    table: ident.clone(),
                    batch_id: batch_id(&spans, None),
                    sources: spans,
                    schema_id: 0,
                    spec_id: 0,
                    data_files: vec![e],
                    delete_files: vec![],
                    keyed: false,
                    truncate: false,
                    state: Default::default(),
                    record_count: 100,
                    rejected_count: 0,
                    created_at_ms: 0,
                    oldest_record_ms: None,
                    key_file: None,
                }
            })
            .collect();
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

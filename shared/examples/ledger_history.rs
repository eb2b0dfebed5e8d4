//! Times one commit of a fresh request, and the recognition of a redelivered
//! old one, on tables whose ledger already holds 10, 1,000 or 100,000
//! committed requests (each with a Kinesis-like span whose runs never merge
//! and ten SQS-like record ids, so the ledger grows as it would in use).
//! The committer's own work (ledger, manifests, metadata) must not grow with
//! history; the embedded catalog's swap is a local SQLite update.
//!
//! Run with `cargo run --release -p floe-core --example ledger_history [HISTORIES…]`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use floe_core::catalog::Catalog;
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::request::{CommitRequest, VERSION};
use floe_core::source::{Position, Positions, SourceSpan, batch_id};
use floe_core::write::TableWriter;

/// Requests per history-building commit.
const PER_COMMIT: usize = 1_000;
/// Timed commits per history size.
const SAMPLES: usize = 20;

fn request(ident: &floe_core::iceberg::TableIdent, n: u64, created_at_ms: i64) -> CommitRequest {
    let spans = vec![
        SourceSpan {
            source: "kinesis:s/shardId-0".into(),
            positions: Positions::Range {
                first: Position::from(1_000 * n),
                last: Position::from(1_000 * n + 500),
            },
            stream: true,
        },
        SourceSpan {
            source: "sqs:q".into(),
            positions: Positions::Ids {
                ids: (0..10).map(|i| format!("m-{n}-{i}")).collect(),
            },
            stream: false,
        },
    ];
    CommitRequest {
        version: VERSION,
        table_uuid: None,
        table: ident.clone(),
        batch_id: batch_id(&spans, None),
        sources: spans,
        schema_id: 0,
        spec_id: 0,
        data_files: Vec::new(),
        delete_files: Vec::new(),
        keyed: false,
        truncate: false,
        truncate_at: None,
        state: Default::default(),
        record_count: 0,
        rejected_count: 0,
        created_at_ms,
        oldest_record_ms: Some(created_at_ms),
        key_file: None,
        order: Vec::new(),
    }
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let histories: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let histories = if histories.is_empty() {
        vec![10, 1_000, 100_000]
    } else {
        histories
    };
    println!(
        "| requests of history | ledger head | segments | commit of a fresh request (median of {SAMPLES}) | a redelivered first request recognised |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for history in histories {
        let (_dir, catalog, ident) = common::one_table().await?;
        let engine = CommitEngine::new(catalog.clone(), RetryPolicy::default());
        let start = floe_core::clock::now_ms() - 3_600_000;
        let first = request(&ident, 0, start);
        let mut n = 0u64;
        while n < history {
            let batch: Vec<CommitRequest> = (n..(n + PER_COMMIT as u64).min(history))
                .map(|i| request(&ident, i, start + i as i64))
                .collect();
            n += batch.len() as u64;
            engine.append(&ident, batch).await?;
        }
        // Fresh requests, each with one real data file written beforehand.
        let loaded = catalog.load_table(&ident).await?;
        let writer = TableWriter::new(&ident, &loaded.metadata, catalog.file_io().clone())?;
        let arrow = Arc::new(floe_core::iceberg::arrow::schema_to_arrow_schema(
            loaded.metadata.current_schema(),
        )?);
        let mut fresh = Vec::new();
        for s in 0..SAMPLES as u64 {
            let mut r = request(&ident, history + s, floe_core::clock::now_ms());
            let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..10));
            let batch = RecordBatch::try_new(arrow.clone(), vec![ids])?;
            let files = writer.write(&batch, &r.batch_id).await?;
            r.data_files =
                CommitRequest::encode_files(&loaded.metadata, 0, files, (&ident, &r.batch_id))?;
            r.record_count = 10;
            fresh.push(r);
        }
        let mut times = Vec::new();
        for r in fresh {
            let t = Instant::now();
            let outcome = engine.append(&ident, vec![r]).await?;
            times.push(t.elapsed());
            assert_eq!(outcome.committed.len(), 1);
        }
        let t = Instant::now();
        let outcome = engine.append(&ident, vec![first]).await?;
        let redelivered = t.elapsed();
        assert_eq!(
            outcome.duplicates.len(),
            1,
            "the first request is recognised"
        );
        let ledger = engine.ledger(&ident).await?;
        let head = catalog.load_table(&ident).await?;
        let head_path = head.metadata.properties()[floe_core::ledger::PROPERTY].clone();
        let head_bytes = std::fs::metadata(head_path.trim_start_matches("file://"))?.len();
        println!(
            "| {history} | {:.1} KiB | {} | {:.1} ms | {:.1} ms |",
            head_bytes as f64 / 1024.0,
            ledger.head().segments.len(),
            median(times).as_secs_f64() * 1e3,
            redelivered.as_secs_f64() * 1e3,
        );
    }
    Ok(())
}

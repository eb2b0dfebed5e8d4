//! `floe demo`: Redpanda Connect's Iceberg benchmark event, generated and ingested.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use floe_core::catalog::CatalogError;
use floe_core::embedded::{Embedded, EmbeddedError, Input};
use floe_core::ident;
use floe_core::tabledef;

use crate::ingest::Tuning;
use crate::out::outln;
use crate::progress::Progress;
use crate::report::{self, Delivery};

/// The benchmark event: id, user_id, event_type, value, info, ts.
const EVENT_SCHEMA: &str = include_str!("../bench/events.schema.json");

const EVENT_TYPES: [&str; 5] = ["click", "view", "purchase", "scroll", "hover"];

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Concurrent writer tasks (default: number of CPUs).
    #[arg(long)]
    writers: Option<usize>,
    /// Target table (created when missing).
    #[arg(long, default_value = "demo.events")]
    table: String,
    #[command(flatten)]
    pub tuning: Tuning,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(floe: &Embedded, args: DemoArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let schema = tabledef::parse_schema(EVENT_SCHEMA)?;
    let creation = tabledef::creation(ident.name(), schema, Default::default(), Default::default());
    match floe.create_table(&ident, creation).await {
        Ok(_) | Err(EmbeddedError::Catalog(CatalogError::TableExists { .. })) => {}
        Err(e) => return Err(e.into()),
    }
    let data = generate(0..args.records);
    let total = data.len() as u64;
    // Every run is new data: a run id in the source name gives new batch ids.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let inputs = vec![Input {
        source: format!("demo:{run}"),
        kind: floe_core::source::SourceKind::File,
        reader: Box::new(std::io::Cursor::new(data)),
        path: None,
    }];
    // The micro-batch regime of the benchmark: 10k-record batches by default.
    let opts = args.tuning.options(args.writers, 10_000);
    if !args.json {
        outln!(
            "demo: {} events ({:.1} MB NDJSON), {} writers, batches of {} into {}",
            args.records,
            total as f64 / 1e6,
            opts.writers,
            opts.batch_records,
            ident::display(&ident)
        );
    }
    let progress = Progress::start(floe.counters.clone(), total);
    let result = floe.ingest(Some(&ident), inputs, &opts).await;
    progress.finish();
    let r = result?;
    report::print(&ident::display(&ident), &r, Delivery::Committed, args.json);
    if !args.json {
        outln!(
            "  {:.1} MB/s of JSON; warehouse {}",
            total as f64 / 1e6 / r.elapsed.as_secs_f64().max(1e-9),
            floe.location()
        );
    }
    Ok(())
}

/// The events of Redpanda Connect's benchmark (as `local-dev/bench/peers/gen_events.py`).
pub fn generate(ids: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.end.saturating_sub(ids.start) as usize * 140);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in ids {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let _ = writeln!(
            out,
            r#"{{"id":{i},"user_id":{},"event_type":"{}","value":{},"info":"event info for record {i}","ts":"2026-11-30T10:00:00Z"}}"#,
            i % 10_000 + 1,
            EVENT_TYPES[(i % 5) as usize],
            i % 1000 + rng % 100,
        );
    }
    out
}

//! `floe ingest NS.TABLE FILE...`

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use floe_core::catalog::CatalogError;
use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::embedded::{Embedded, EmbeddedError, IngestOptions, Input};
use floe_core::ident;
use floe_core::queue::QueueRef;
use floe_core::shred::EpochUnit;

use crate::progress::Progress;
use crate::report;

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// NAMESPACE.TABLE, then NDJSON files (`-` reads stdin); with --routed, only files.
    #[arg(required = true, value_name = "TABLE] [FILE")]
    args: Vec<String>,
    /// Route each record by the config's [routing] rules instead of naming one table.
    #[arg(long)]
    routed: bool,
    /// Concurrent writer tasks (default: number of CPUs).
    #[arg(long)]
    writers: Option<usize>,
    /// Only write: send the commit requests to the deployment's commit
    /// queue (`queue.url`) for its committer, as the writer function does,
    /// instead of committing them here.
    #[arg(long)]
    via_queue: bool,
    #[command(flatten)]
    pub tuning: Tuning,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Batch and commit tuning shared by `ingest` and `demo`.
#[derive(Debug, Args)]
pub struct Tuning {
    /// Records per source batch, one writer invocation and one commit request
    /// [default: 100000 for ingest, 10000 for demo].
    #[arg(long)]
    pub batch_size: Option<u64>,
    /// Milliseconds the committer gathers requests after the first arrives.
    #[arg(long, default_value_t = 500)]
    pub commit_window_ms: u64,
    /// Match JSON keys to columns ignoring ASCII case.
    #[arg(long)]
    pub case_insensitive: bool,
    /// Unit of JSON numbers given for timestamp and time columns [default: ms, or the config's].
    #[arg(long, value_enum)]
    pub epoch_unit: Option<EpochArg>,
}

/// `--epoch-unit` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum EpochArg {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

impl From<EpochArg> for EpochUnit {
    fn from(a: EpochArg) -> Self {
        match a {
            EpochArg::S => EpochUnit::Seconds,
            EpochArg::Ms => EpochUnit::Milliseconds,
            EpochArg::Us => EpochUnit::Microseconds,
            EpochArg::Ns => EpochUnit::Nanoseconds,
        }
    }
}

impl Tuning {
    /// The ingest options these flags give.
    pub fn options(&self, writers: Option<usize>, default_batch: u64) -> IngestOptions {
        IngestOptions {
            writers: writers.unwrap_or_else(default_writers),
            batch_records: self.batch_size.unwrap_or(default_batch),
            commit_window: Duration::from_millis(self.commit_window_ms),
            ..IngestOptions::default()
        }
    }

    /// Applies the JSON-matching flags over the config's table defaults.
    pub fn apply(&self, config: &mut Config) {
        if self.case_insensitive {
            config.defaults.case_insensitive = true;
        }
        if let Some(unit) = self.epoch_unit {
            config.defaults.epoch_unit = unit.into();
        }
    }
}

pub fn default_writers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub async fn run(floe: &Embedded, deployment: &Deployment, args: IngestArgs) -> Result<()> {
    // The deployment's queue sends each table's requests to its shard, as
    // the writer function's does.
    let queue: Option<QueueRef> = match (deployment.queue_urls().is_empty(), args.via_queue) {
        (false, true) => Some(deployment.queue.clone()),
        (true, true) => anyhow::bail!(
            "--via-queue sends to the deployment's SQS commit queue: set queue.url (FLOE_QUEUE_URL), or its shards in queue.urls"
        ),
        (_, false) => None,
    };
    let (table, files) = if args.routed {
        (None, &args.args[..])
    } else {
        let (t, rest) = args
            .args
            .split_first()
            .context("name the table (NAMESPACE.TABLE), or pass --routed")?;
        (Some(ident::parse_table(t)?), rest)
    };
    anyhow::ensure!(
        !files.is_empty(),
        "give at least one NDJSON file (or - for stdin)"
    );
    let mut inputs = Vec::new();
    let mut total = 0;
    for path in files {
        if path == "-" {
            inputs.push(Input::stdin());
            continue;
        }
        let input = Input::file(Path::new(path)).with_context(|| format!("opening {path}"))?;
        total += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        inputs.push(input);
    }
    let opts = args.tuning.options(args.writers, 100_000);
    let progress = Progress::start(floe.counters.clone(), total);
    let result = floe.ingest_to(table.as_ref(), inputs, &opts, queue).await;
    progress.finish();
    let name = table
        .as_ref()
        .map_or_else(|| "routed".to_string(), ident::display);
    let report = result.map_err(|e| match &e {
        EmbeddedError::Catalog(CatalogError::NoSuchTable { table }) => {
            anyhow::anyhow!("{e}; create it with `floe table create {table} --schema FILE`")
        }
        _ => e.into(),
    })?;
    report::print(&name, &report, args.json);
    Ok(())
}

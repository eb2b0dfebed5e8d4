//! `floe ingest NS.TABLE FILE...`

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
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
use crate::report::{self, Delivery};

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The table (NAMESPACE.TABLE); with --routed, the first file instead.
    #[arg(value_name = "NS.TABLE", required = true)]
    table: String,
    /// NDJSON files (`-` reads stdin).
    #[arg(value_name = "FILE")]
    files: Vec<String>,
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
    /// Exit 0 when some records were rejected (dead-lettered) and the rest
    /// committed, instead of 3.
    #[arg(long)]
    allow_partial: bool,
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
    /// Input bytes per source batch, whichever of this and --batch-size
    /// comes first: what bounds a writer's memory [default: 16 MiB].
    #[arg(long)]
    pub batch_bytes: Option<u64>,
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
            batch_bytes: self
                .batch_bytes
                .unwrap_or(floe_core::embedded::DEFAULT_BATCH_BYTES),
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

/// Ingests the files; the exit code says whether every record is in the
/// table (README, "Exit codes").
pub async fn run(floe: &Embedded, deployment: &Deployment, args: IngestArgs) -> Result<ExitCode> {
    // The deployment's queue sends each table's requests to its shard, as
    // the writer function's does.
    let queue: Option<QueueRef> = match (deployment.queue_urls().is_empty(), args.via_queue) {
        (false, true) => Some(deployment.queue.clone()),
        (true, true) => anyhow::bail!(
            "--via-queue sends to the deployment's SQS commit queue: set queue.url (FLOE_QUEUE_URL), or its shards in queue.urls"
        ),
        (_, false) => None,
    };
    // With --routed every positional is a file: clap put the first in `table`.
    let (table, files) = if args.routed {
        let mut files = vec![args.table.clone()];
        files.extend(args.files.iter().cloned());
        (None, files)
    } else {
        (Some(ident::parse_table(&args.table)?), args.files.clone())
    };
    anyhow::ensure!(
        !files.is_empty(),
        "give at least one NDJSON file (or - for stdin)"
    );
    let mut inputs = Vec::new();
    let mut total = 0;
    for path in &files {
        if path == "-" {
            inputs.push(Input::stdin());
            continue;
        }
        refuse_json_array(Path::new(path))?;
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
    let delivery = match args.via_queue {
        true => Delivery::Queued,
        false => Delivery::Committed,
    };
    report::print(&name, &report, delivery, args.json);
    Ok(report::exit_code(&report, args.allow_partial))
}

/// A file that holds one JSON array would be read line by line, each line
/// a broken record: say what the CLI reads instead.
fn refuse_json_array(path: &Path) -> Result<()> {
    let mut head = [0u8; 512];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .with_context(|| format!("opening {}", path.display()))?;
    if head[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        anyhow::bail!(
            "{} holds a JSON array: `floe ingest` reads NDJSON, one record per line \
             (convert it with `jq -c '.[]' {0} > records.ndjson`; `floe serve` takes arrays as they are)",
            path.display()
        );
    }
    Ok(())
}

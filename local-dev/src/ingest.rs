//! `floe ingest NS.TABLE FILE...`

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::ident;
use floe_core::shred::{EpochUnit, ShredOptions};

use crate::progress::Progress;
use crate::report;

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// NDJSON files; `-` reads stdin.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Concurrent writer tasks (default: number of CPUs).
    #[arg(long)]
    writers: Option<usize>,
    #[command(flatten)]
    tuning: Tuning,
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
    /// Unit of JSON numbers given for timestamp and time columns.
    #[arg(long, value_enum, default_value_t = EpochArg::Ms)]
    pub epoch_unit: EpochArg,
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
            shred: ShredOptions {
                case_insensitive: self.case_insensitive,
                epoch_unit: self.epoch_unit.into(),
            },
            ..IngestOptions::default()
        }
    }
}

pub fn default_writers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub async fn run(floe: &Embedded, args: IngestArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let mut inputs = Vec::new();
    let mut total = 0;
    for path in &args.files {
        if path.as_os_str() == "-" {
            inputs.push(Input {
                source: "stdin".into(),
                reader: Box::new(std::io::stdin()),
            });
            continue;
        }
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        total += file.metadata().map(|m| m.len()).unwrap_or(0);
        let abs = path.canonicalize().unwrap_or_else(|_| path.clone());
        inputs.push(Input {
            source: format!("file:{}", abs.display()),
            reader: Box::new(file),
        });
    }
    let opts = args.tuning.options(args.writers, 100_000);
    let progress = Progress::start(floe.counters.clone(), total);
    let result = floe.ingest(&ident, inputs, &opts).await;
    progress.finish();
    report::print(&ident::display(&ident), &result?, args.json);
    Ok(())
}

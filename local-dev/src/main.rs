//! `floe`: the embedded Iceberg micro-batch writer on one machine.

mod bench;
mod demo;
mod dlq;
mod ingest;
mod maintain;
mod pg;
mod progress;
mod report;
mod table;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use floe_core::config::Config;
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use tracing_subscriber::EnvFilter;

/// floe: JSON records into Apache Iceberg tables, exactly once.
#[derive(Debug, Parser)]
#[command(name = "floe", version, about)]
struct Cli {
    /// Warehouse directory (tables, metadata and the SQLite catalog)
    /// [default: warehouse.path of the config, else ./warehouse].
    #[arg(long, global = true, env = "FLOE_WAREHOUSE")]
    warehouse: Option<PathBuf>,
    /// Config file (TOML; see docs/config.md). Also FLOE_CONFIG or FLOE_CONFIG_TOML.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create and inspect tables.
    #[command(subcommand)]
    Table(table::TableCommand),
    /// Ingest NDJSON files (or `-` for stdin) into a table.
    Ingest(ingest::IngestArgs),
    /// List and replay dead-lettered records.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// Generate the Redpanda Connect benchmark's events and ingest them.
    Demo(demo::DemoArgs),
    /// Benchmark inputs and runs (see local-dev/bench/sweep.sh).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compact, merge manifests, expire snapshots and remove orphan files.
    Maintain(maintain::MaintainArgs),
    /// Replicate Postgres tables through a logical replication slot.
    #[command(subcommand)]
    Pg(pg::PgCommand),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("FLOE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let faults = Faults::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut config = Config::load(cli.config.as_deref())?;
    match &cli.command {
        Command::Ingest(args) => args.tuning.apply(&mut config),
        Command::Demo(args) => args.tuning.apply(&mut config),
        _ => {}
    }
    let warehouse = cli.warehouse.clone().unwrap_or_else(|| {
        config
            .warehouse
            .path
            .as_deref()
            .map(|p| config.resolve(p))
            .unwrap_or_else(|| PathBuf::from("./warehouse"))
    });
    runtime.block_on(async move {
        let floe = Embedded::with_config(&warehouse, config, faults)?;
        match cli.command {
            Command::Table(cmd) => table::run(&floe, cmd).await,
            Command::Ingest(args) => ingest::run(&floe, args).await,
            Command::Dlq(cmd) => dlq::run(&floe, cmd).await,
            Command::Demo(args) => demo::run(&floe, args).await,
            Command::Pg(cmd) => pg::run(&floe, cmd).await,
            Command::Maintain(args) => maintain::run(&floe, args).await,
            Command::Bench(cmd) => bench::run(&floe, cmd).await,
        }
    })
}

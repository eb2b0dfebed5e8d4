//! `floe`: JSON records into Apache Iceberg tables, exactly once, on one
//! machine or on any deployment the functions' config describes.

mod bench;
mod demo;
mod dlq;
mod ingest;
mod ledger;
#[cfg(feature = "aws")]
mod local;
mod maintain;
#[cfg(feature = "postgres")]
mod pg;
mod progress;
mod report;
mod serve;
mod status;
mod table;
mod unbuilt;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use tracing_subscriber::EnvFilter;

/// floe: JSON records into Apache Iceberg tables, exactly once.
#[derive(Debug, Parser)]
#[command(name = "floe", version, about)]
struct Cli {
    /// Warehouse directory (tables, metadata and the SQLite catalog)
    /// [default: the config's warehouse, else ./warehouse].
    #[arg(long, global = true, env = "FLOE_WAREHOUSE")]
    warehouse: Option<PathBuf>,
    /// Config file (TOML; see docs/config.md): the same file the functions
    /// read, so `--config aws.toml` works on a Glue, REST or SQLite-on-S3
    /// deployment. Also FLOE_CONFIG or FLOE_CONFIG_TOML.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create, inspect and alter tables.
    #[command(subcommand)]
    Table(table::TableCommand),
    /// Ingest NDJSON files (or `-` for stdin) into a table.
    Ingest(ingest::IngestArgs),
    /// List and replay dead-lettered records (local or on S3).
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// Per table: last commit, records per commit, freshness; the commit
    /// queue's depth and its dead-letter queue's; dead letters by reason.
    Status(status::StatusArgs),
    /// The HTTP ingestion API (the ingest function's) on a local address.
    Serve(serve::ServeArgs),
    /// The four functions on local stand-ins of S3, SQS and Glue, fed by
    /// emulated event source mappings.
    #[cfg(feature = "aws")]
    Local(local::LocalArgs),
    /// The four functions on local stand-ins of S3, SQS and Glue (needs
    /// the full build: `--features full`).
    #[cfg(not(feature = "aws"))]
    Local(unbuilt::Unbuilt),
    /// Generate the Redpanda Connect benchmark's events and ingest them.
    Demo(demo::DemoArgs),
    /// Benchmark inputs and runs (see local-dev/bench/sweep.sh).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compact, merge manifests, expire snapshots and remove orphan files.
    Maintain(maintain::MaintainArgs),
    /// Replicate Postgres tables through a logical replication slot.
    #[cfg(feature = "postgres")]
    #[command(subcommand)]
    Pg(pg::PgCommand),
    /// Replicate Postgres tables through a logical replication slot (needs
    /// the full build: `--features full`).
    #[cfg(not(feature = "postgres"))]
    Pg(unbuilt::Unbuilt),
    /// Show or repair a table's idempotency ledger.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
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
    if let Some(dir) = &cli.warehouse {
        // Relative to where floe runs, not to the config file.
        config.warehouse.path = Some(std::path::absolute(dir).unwrap_or_else(|_| dir.clone()));
        config.warehouse.uri = None;
    }
    runtime.block_on(async move {
        match cli.command {
            #[cfg(feature = "aws")]
            Command::Local(args) => local::run(config, args).await,
            #[cfg(not(feature = "aws"))]
            Command::Local(_) => Err(unbuilt::command("local", "aws")),
            Command::Serve(args) => serve::run(open(config, faults).await?.0, args).await,
            Command::Table(cmd) => table::run(&open(config, faults).await?.1, cmd).await,
            Command::Ingest(args) => {
                let (deployment, floe) = open(config, faults).await?;
                ingest::run(&floe, &deployment, args).await
            }
            Command::Dlq(cmd) => dlq::run(&open(config, faults).await?.1, cmd).await,
            Command::Status(args) => {
                let (deployment, floe) = open(config, faults).await?;
                status::run(&floe, &deployment, args).await
            }
            Command::Maintain(args) => {
                let (deployment, floe) = open(config, faults).await?;
                maintain::run(&floe, &deployment, args).await
            }
            Command::Demo(args) => demo::run(&open(config, faults).await?.1, args).await,
            Command::Ledger(cmd) => {
                let (deployment, floe) = open(config, faults).await?;
                ledger::run(&floe, &deployment, cmd).await
            }
            #[cfg(feature = "postgres")]
            Command::Pg(cmd) => pg::run(config, faults, cmd).await,
            #[cfg(not(feature = "postgres"))]
            Command::Pg(_) => Err(unbuilt::command("pg", "postgres")),
            Command::Bench(cmd) => bench::run(&open(config, faults).await?.1, cmd).await,
        }
    })
}

/// The deployment the config describes (the embedded warehouse by default),
/// and the in-process pipeline on it.
async fn open(config: Config, faults: Faults) -> Result<(Deployment, Embedded)> {
    let deployment = match Deployment::from_config(config, faults, Role::Cli).await {
        Ok(deployment) => deployment,
        Err(e) => match unbuilt::deployment(&e) {
            Some(unbuilt) => return Err(unbuilt),
            None => return Err(e).context("cannot open the deployment the config describes"),
        },
    };
    let floe = Embedded::from_deployment(&deployment);
    Ok((deployment, floe))
}

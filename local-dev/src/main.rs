//! `floe`: JSON records into Apache Iceberg tables, exactly once, on one
//! machine or on any deployment the functions' config describes.

mod bench;
mod demo;
mod dlq;
mod failure;
mod ingest;
mod ledger;
#[cfg(feature = "aws")]
mod local;
mod maintain;
mod out;
#[cfg(feature = "postgres")]
mod pg;
mod progress;
mod report;
mod rows;
mod serve;
mod status;
mod table;
mod unbuilt;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use floe_core::metrics::emf::Sink;
use tracing_subscriber::EnvFilter;

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

/// The version with the commit it was built from (build.rs), so a bug
/// report names the code.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FLOE_COMMIT"), ")");

/// What `ingest` and `dlq replay` exit with, for scripts.
const EXIT_CODES: &str = "\
Exit codes:
  0  done: every record read is in the table (now or from an earlier run)
  1  error: see the message; nothing was acknowledged that is not in the table
  2  usage error
  3  ingest, dlq replay: some records were rejected (dead-lettered), the rest
     committed; --allow-partial exits 0 instead
  4  ingest, dlq replay: every record read was rejected; nothing committed";

/// floe: JSON records into Apache Iceberg tables, exactly once.
#[derive(Debug, Parser)]
#[command(name = "floe", version = VERSION, about, after_help = EXIT_CODES)]
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
    /// Where the functions' CloudWatch EMF metric lines go: `off`,
    /// `stderr`, `stdout` or a file to append to.
    #[arg(long, global = true, env = "FLOE_METRICS", default_value = "off", value_parser = metrics_sink)]
    metrics: Sink,
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
    /// Print a shell completion script: `floe completions bash > /etc/bash_completion.d/floe`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", failure::describe(&e));
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    if let Command::Completions { shell } = cli.command {
        // clap_complete panics on a write error: generate, then print.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "floe", &mut script);
        out::bytes(&script);
        return Ok(ExitCode::SUCCESS);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("FLOE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: stderr redirected to a file or
        // a log collector would keep the escapes.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    floe_core::metrics::emf::set_sink(cli.metrics.clone());
    let faults = Faults::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut config = Config::load(cli.config.as_deref())?;
    match &cli.command {
        Command::Ingest(args) => args.tuning.apply(&mut config),
        Command::Demo(args) => args.tuning.apply(&mut config),
        Command::Serve(serve::ServeArgs {
            token: Some(token), ..
        }) => config.http.token = Some(token.as_str().into()),
        _ => {}
    }
    if let Some(dir) = &cli.warehouse {
        // Relative to where floe runs, not to the config file.
        config.warehouse.path = Some(std::path::absolute(dir).unwrap_or_else(|_| dir.clone()));
        config.warehouse.uri = None;
    }
    runtime.block_on(async move {
        let done = match cli.command {
            Command::Ingest(args) => {
                let (deployment, floe) = open(config, faults).await?;
                return ingest::run(&floe, &deployment, args).await;
            }
            Command::Dlq(cmd) => {
                let floe = open(config, faults).await?.1;
                return hint(&floe, dlq::run(&floe, cmd).await).await;
            }
            #[cfg(feature = "aws")]
            Command::Local(args) => local::run(config, args).await,
            #[cfg(not(feature = "aws"))]
            Command::Local(_) => Err(unbuilt::command("local", "aws")),
            Command::Serve(args) => serve::run(open(config, faults).await?.0, args).await,
            Command::Table(cmd) => {
                let floe = open(config, faults).await?.1;
                hint(&floe, table::run(&floe, cmd).await).await
            }
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
                let floe = open(config, faults).await?.1;
                hint(&floe, ledger::run(&floe, cmd).await).await
            }
            #[cfg(feature = "postgres")]
            Command::Pg(cmd) => pg::run(config, faults, cmd).await,
            #[cfg(not(feature = "postgres"))]
            Command::Pg(_) => Err(unbuilt::command("pg", "postgres")),
            Command::Bench(cmd) => bench::run(&open(config, faults).await?.1, cmd).await,
            Command::Completions { .. } => Ok(()),
        };
        done.map(|()| ExitCode::SUCCESS)
    })
}

/// `done`, its error naming the table nearest to one it found missing.
async fn hint<T>(floe: &Embedded, done: Result<T>) -> Result<T> {
    match done {
        Ok(v) => Ok(v),
        Err(e) => Err(failure::suggest_table(floe, e).await),
    }
}

/// `--metrics`: the CLI's stdout is for people, so EMF goes there only when asked.
fn metrics_sink(value: &str) -> Result<Sink, String> {
    Ok(match value {
        "off" => Sink::Off,
        "stdout" => Sink::Stdout,
        "stderr" => Sink::Stderr,
        "" => return Err("give off, stderr, stdout or a file".into()),
        path => Sink::File(PathBuf::from(path)),
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

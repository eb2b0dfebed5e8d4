//! `floe dlq list|replay|purge`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use floe_core::catalog::CatalogError;
use floe_core::embedded::{DeadLetterFile, Embedded, IngestOptions};
use floe_core::iceberg::TableIdent;
use floe_core::ident;

use crate::out::outln;
use crate::report::{self, Delivery};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead-lettered records by table and reason (the local warehouse's,
    /// or the deployment's on S3 that the functions wrote).
    List(ListArgs),
    /// Re-ingest dead-lettered records, exactly once, after fixing the table
    /// or the data: committed here, straight to the deployment's catalog.
    Replay(ReplayArgs),
    /// Delete dead-lettered records no fix will make fit, without replaying them.
    Purge(PurgeArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this table (NAMESPACE.TABLE).
    #[arg(long)]
    table: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Only this table (NAMESPACE.TABLE).
    #[arg(long)]
    table: Option<String>,
    /// Exit 0 when some records were rejected again and the rest
    /// committed, instead of 3.
    #[arg(long)]
    allow_partial: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Only this table's dead letters (NAMESPACE.TABLE).
    #[arg(long, required_unless_present = "all")]
    table: Option<String>,
    /// Every table's dead letters, unroutable records too.
    #[arg(long, conflicts_with = "table")]
    all: bool,
}

/// Runs the command; a replay's exit code says whether every record is in
/// its table (README, "Exit codes").
pub async fn run(floe: &Embedded, cmd: DlqCommand) -> Result<ExitCode> {
    match cmd {
        DlqCommand::List(args) => list(floe, args).await?,
        DlqCommand::Replay(args) => return replay(floe, args).await,
        DlqCommand::Purge(args) => purge(floe, args).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `--table`, refused when it names neither a table of the catalog nor one
/// with dead letters: a typo would otherwise replay or purge nothing and
/// succeed.
async fn table_arg(floe: &Embedded, table: Option<&str>) -> Result<Option<TableIdent>> {
    let Some(table) = table.map(ident::parse_table).transpose()? else {
        return Ok(None);
    };
    match floe.catalog().load_table(&table).await {
        Err(e @ CatalogError::NoSuchTable { .. }) => {
            if floe.dead_letter_files(Some(&table)).await?.is_empty() {
                return Err(e.into());
            }
        }
        Err(e) => return Err(e.into()),
        Ok(_) => {}
    }
    Ok(Some(table))
}

async fn list(floe: &Embedded, args: ListArgs) -> Result<()> {
    let table = table_arg(floe, args.table.as_deref()).await?;
    let files = floe.dead_letter_files(table.as_ref()).await?;
    if args.json {
        let out: Vec<_> = files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "path": f.path, "table": f.table, "records": f.entries,
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let by_table = by_reason(&files);
    if by_table.is_empty() {
        outln!("{}", none_message(floe, table.as_ref()).await?);
    }
    print_by_reason(&by_table, "");
    Ok(())
}

/// Prints [`by_reason`]'s counts, each table's line after `prefix`.
pub fn print_by_reason(by_table: &BTreeMap<&str, BTreeMap<String, u64>>, prefix: &str) {
    for (table, reasons) in by_table {
        let name = if table.is_empty() {
            "(unroutable)"
        } else {
            table
        };
        outln!("{prefix}{name}: {} records", reasons.values().sum::<u64>());
        for (reason, count) in reasons {
            outln!("  {count:>6}  {reason}");
        }
    }
}

/// Dead-lettered records per table, then per `field: reason`.
pub fn by_reason(files: &[DeadLetterFile]) -> BTreeMap<&str, BTreeMap<String, u64>> {
    let mut by_table: BTreeMap<&str, BTreeMap<String, u64>> = BTreeMap::new();
    for f in files {
        let reasons = by_table.entry(f.table.as_str()).or_default();
        for e in &f.entries {
            let field = if e.field.is_empty() {
                "(record)"
            } else {
                &e.field
            };
            *reasons.entry(format!("{field}: {}", e.reason)).or_default() += 1;
        }
    }
    by_table
}

/// "No dead letters", saying whether other tables have some, so a filter
/// that matched nothing is not read as an empty dead-letter location.
pub async fn none_message(floe: &Embedded, table: Option<&TableIdent>) -> Result<String> {
    let prefix = floe.dead_letter_prefix();
    let Some(table) = table else {
        return Ok(format!("no dead letters under {prefix}"));
    };
    let others: usize = floe
        .dead_letter_files(None)
        .await?
        .iter()
        .map(|f| f.entries.len())
        .sum();
    let name = ident::display(table);
    Ok(match others {
        0 => format!("no dead letters under {prefix}"),
        n => format!(
            "no dead letters of {name} ({n} of other tables under {prefix}: `floe dlq list`)"
        ),
    })
}

async fn replay(floe: &Embedded, args: ReplayArgs) -> Result<ExitCode> {
    let table = table_arg(floe, args.table.as_deref()).await?;
    let (r, replayed) = floe
        .replay_dead_letters(table.as_ref(), &IngestOptions::default())
        .await?;
    if !args.json {
        outln!("replayed {} dead-letter files", replayed.len());
    }
    let name = args.table.as_deref().unwrap_or("dead letters");
    report::print(name, &r, Delivery::Committed, args.json);
    Ok(report::exit_code(&r, args.allow_partial))
}

async fn purge(floe: &Embedded, args: PurgeArgs) -> Result<()> {
    let table = table_arg(floe, args.table.as_deref()).await?;
    let purged = floe.purge_dead_letters(table.as_ref()).await?;
    let records: usize = purged.iter().map(|(_, n)| n).sum();
    for (path, n) in &purged {
        outln!("deleted {path} ({n} records)");
    }
    outln!(
        "purged {records} dead-lettered records in {} files",
        purged.len()
    );
    Ok(())
}

//! `floe dlq list|replay|purge`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use floe_core::catalog::CatalogError;
use floe_core::dlq::{self, Filter, Fix};
use floe_core::embedded::{DeadLetterFile, Embedded, IngestOptions};
use floe_core::iceberg::TableIdent;
use floe_core::ident;

use crate::out::outln;
use crate::report::{self, Delivery};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead-lettered records by table, field and kind of problem (the
    /// local warehouse's, or the deployment's on S3 that the functions wrote).
    List(ListArgs),
    /// Re-ingest dead-lettered records, exactly once, after fixing the table
    /// or the data (`--fix`): committed here, straight to the deployment's catalog.
    Replay(ReplayArgs),
    /// Delete dead-lettered records no fix will make fit, without replaying them.
    Purge(PurgeArgs),
    /// Print dead-lettered records as NDJSON, to fix or inspect elsewhere.
    Export(ExportArgs),
}

/// Which dead letters a command takes; every option narrows the selection.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this table (NAMESPACE.TABLE).
    #[arg(long)]
    table: Option<String>,
    /// Only records rejected at this field (`repo.id`; `(record)` for records rejected whole).
    #[arg(long)]
    field: Option<String>,
    /// Only records whose reason contains this text.
    #[arg(long)]
    reason: Option<String>,
    /// Only records whose source contains this text (a file path, `kafka:orders/3`).
    #[arg(long)]
    source: Option<String>,
    /// Only dead letters at least this old (`30m`, `2h`, `7d`).
    #[arg(long, value_parser = dlq::parse_age)]
    older_than: Option<i64>,
    /// Only dead letters at most this old (`30m`, `2h`, `7d`).
    #[arg(long, value_parser = dlq::parse_age)]
    newer_than: Option<i64>,
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter {
            field: self.field.clone(),
            reason: self.reason.clone(),
            source: self.source.clone(),
            older_than_ms: self.older_than,
            newer_than_ms: self.newer_than,
        }
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    select: FilterArgs,
    /// Print JSON: each file with the records selected in it.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    select: FilterArgs,
    /// Convert a field of every replayed record first: `FIELD=number` (a
    /// numeric string), `=string`, `=null` or `=drop`; repeatable.
    #[arg(long = "fix", value_parser = clap::value_parser!(Fix))]
    fixes: Vec<Fix>,
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
    #[command(flatten)]
    select: FilterArgs,
    /// Every table's dead letters, unroutable records too (without
    /// `--table`, a purge needs it).
    #[arg(long, conflicts_with = "table")]
    all: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    select: FilterArgs,
    /// Print only the records as received, one per line (ready for
    /// `floe ingest` once fixed), not the dead-letter entries with their reasons.
    #[arg(long)]
    records: bool,
}

/// Runs the command; a replay's exit code says whether every record is in
/// its table (README, "Exit codes").
pub async fn run(floe: &Embedded, cmd: DlqCommand) -> Result<ExitCode> {
    match cmd {
        DlqCommand::List(args) => list(floe, args).await?,
        DlqCommand::Replay(args) => return replay(floe, args).await,
        DlqCommand::Purge(args) => purge(floe, args).await?,
        DlqCommand::Export(args) => export(floe, args).await?,
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
    let table = table_arg(floe, args.select.table.as_deref()).await?;
    let filter = args.select.filter();
    let files = floe.dead_letters(table.as_ref(), &filter).await?;
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
        outln!("{}", none_message(floe, table.as_ref(), &filter).await?);
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

/// Dead-lettered records per table, then per `field: reason` with the
/// records' values taken out of the reason, so one problem is one line.
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
            *reasons
                .entry(format!("{field}: {}", e.reason_class()))
                .or_default() += 1;
        }
    }
    by_table
}

/// "No dead letters", saying whether other tables have some, so a filter
/// that matched nothing is not read as an empty dead-letter location.
pub async fn none_message(
    floe: &Embedded,
    table: Option<&TableIdent>,
    filter: &Filter,
) -> Result<String> {
    let prefix = floe.dead_letter_prefix();
    if !filter.is_all() {
        let all: usize = floe
            .dead_letter_files(table)
            .await?
            .iter()
            .map(|f| f.entries.len())
            .sum();
        if all > 0 {
            return Ok(format!(
                "no dead letters match ({all} others under {prefix}: `floe dlq list`)"
            ));
        }
    }
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
    let table = table_arg(floe, args.select.table.as_deref()).await?;
    let replay = floe
        .replay_dead_letters(
            table.as_ref(),
            &args.select.filter(),
            &args.fixes,
            &IngestOptions::default(),
        )
        .await?;
    if !args.json {
        outln!("replayed {} dead-letter files", replay.files.len());
        if !args.fixes.is_empty() {
            outln!("fixed {} records", replay.fixed);
        }
        for why in replay.unfixable.iter().take(UNFIXABLE_SHOWN) {
            outln!("  not fixed: {why}");
        }
        if replay.unfixable.len() > UNFIXABLE_SHOWN {
            outln!(
                "  … and {} more not fixed",
                replay.unfixable.len() - UNFIXABLE_SHOWN
            );
        }
    }
    let name = args.select.table.as_deref().unwrap_or("dead letters");
    report::print(name, &replay.report, Delivery::Committed, args.json);
    Ok(report::exit_code(&replay.report, args.allow_partial))
}

/// Records a fix could not apply to, listed before "and N more".
const UNFIXABLE_SHOWN: usize = 10;

async fn purge(floe: &Embedded, args: PurgeArgs) -> Result<()> {
    if args.select.table.is_none() && !args.all {
        bail!("name the table (--table NAMESPACE.TABLE), or purge every table's with --all");
    }
    let table = table_arg(floe, args.select.table.as_deref()).await?;
    let purged = floe
        .purge_dead_letters(table.as_ref(), &args.select.filter())
        .await?;
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

async fn export(floe: &Embedded, args: ExportArgs) -> Result<()> {
    let table = table_arg(floe, args.select.table.as_deref()).await?;
    let files = floe
        .dead_letters(table.as_ref(), &args.select.filter())
        .await?;
    for e in files.iter().flat_map(|f| &f.entries) {
        if args.records {
            outln!("{}", e.record);
        } else {
            outln!("{}", serde_json::to_string(e)?);
        }
    }
    Ok(())
}

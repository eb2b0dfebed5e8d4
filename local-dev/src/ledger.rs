//! `floe ledger show|repair NS.TABLE`: where a table's idempotency ledger
//! is and what it holds, and rebuilding it when its head is gone (deleted
//! by hand, or by an orphan cleanup of a ledger that an earlier build kept
//! under the table's location).

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Subcommand;
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::embedded::Embedded;
use floe_core::ident;
use floe_core::ledger::{self, Ledger, LedgerStore};

use crate::out::outln;

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Where the table's ledger is, its ordered sources with their
    /// high-water marks, and its sealed segments.
    Show {
        /// The table (NAMESPACE.TABLE).
        table: String,
    },
    /// Rebuild the ledger from the newest head that survives and what the
    /// table's snapshots record, and make it the table's ledger.
    Repair {
        /// The table (NAMESPACE.TABLE).
        table: String,
    },
}

pub async fn run(floe: &Embedded, cmd: LedgerCommand) -> Result<()> {
    match cmd {
        LedgerCommand::Show { table } => show(floe, &table).await,
        LedgerCommand::Repair { table } => repair(floe, &table).await,
    }
}

async fn show(floe: &Embedded, table: &str) -> Result<()> {
    let ident = ident::parse_table(table)?;
    let catalog = floe.catalog();
    let loaded = catalog.load_table(&ident).await?;
    let store = Arc::new(LedgerStore::new(catalog.file_io().clone()));
    outln!("directory: {}", ledger::place::dir(&loaded.metadata));
    if ledger::place::exposed(&loaded.metadata) {
        outln!(
            "warning: it is under the table's location, where other engines' orphan cleanup deletes it; set the table property {} to a directory outside",
            ledger::place::LOCATION_PROPERTY
        );
    }
    let ledger = Ledger::open(store, &loaded.metadata)
        .await
        .with_context(|| {
            format!("{table}: its ledger cannot be read; `floe ledger repair {table}` rebuilds it")
        })?;
    outln!("head: {}", ledger.head_path().unwrap_or("(none yet)"));
    let head = ledger.head();
    outln!(
        "commits since the last seal: {}; sealed segments: {}; archived source buckets: {}",
        head.recent.len(),
        head.segments.len(),
        head.archive.len()
    );
    for (source, marks) in &head.sources {
        outln!(
            "  {source}: high-water mark {}, {} runs, {} pages{}",
            marks
                .high_water_mark()
                .map_or("-".to_string(), |p| p.to_string()),
            marks.runs.len(),
            marks.pages.len(),
            marks
                .settled
                .as_ref()
                .map_or(String::new(), |(lo, hi)| format!(", settled {lo}..={hi}"))
        );
    }
    Ok(())
}

async fn repair(floe: &Embedded, table: &str) -> Result<()> {
    let ident = ident::parse_table(table)?;
    let catalog = floe.catalog();
    let engine = CommitEngine::new(catalog, RetryPolicy::default());
    let rebuilt = engine.repair_ledger(&ident).await?;
    match &rebuilt.base {
        Some(base) => outln!("{table}: rebuilt from {base}"),
        None => outln!("{table}: no ledger head survived; rebuilt from the table's snapshots"),
    }
    if let Some(head) = &rebuilt.gap {
        outln!(
            "  warning: {head} is gone and expiry took the snapshots before the table's \
             history; records committed before it commit again if sent again"
        );
    }
    for path in &rebuilt.missing {
        outln!("  missing, dropped: {path}");
    }
    outln!(
        "  read {} snapshot summaries; {} ordered sources, {} commits since the last seal",
        rebuilt.snapshots,
        rebuilt.head.sources.len(),
        rebuilt.head.recent.len()
    );
    Ok(())
}

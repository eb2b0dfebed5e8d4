//! `floe dlq list|replay`.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::{Args, Subcommand};
use floe_core::embedded::{Embedded, IngestOptions};
use floe_core::ident;

use crate::report;

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead-lettered records by table and reason (the local warehouse's,
    /// or the deployment's on S3 that the functions wrote).
    List(DlqArgs),
    /// Re-ingest dead-lettered records, exactly once, after fixing the table
    /// or the data: committed here, straight to the deployment's catalog.
    Replay(DlqArgs),
}

#[derive(Debug, Args)]
pub struct DlqArgs {
    /// Only this table (NAMESPACE.TABLE).
    #[arg(long)]
    table: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(floe: &Embedded, cmd: DlqCommand) -> Result<()> {
    match cmd {
        DlqCommand::List(args) => {
            let table = args.table.as_deref().map(ident::parse_table).transpose()?;
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
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            let mut by_table: BTreeMap<&str, (usize, BTreeMap<String, usize>)> = BTreeMap::new();
            for f in &files {
                let t = by_table.entry(f.table.as_str()).or_default();
                for e in &f.entries {
                    t.0 += 1;
                    let field = if e.field.is_empty() {
                        "(record)"
                    } else {
                        &e.field
                    };
                    *t.1.entry(format!("{field}: {}", e.reason)).or_default() += 1;
                }
            }
            if by_table.is_empty() {
                println!("no dead letters under {}", floe.dead_letter_prefix());
            }
            for (table, (n, reasons)) in by_table {
                let name = if table.is_empty() {
                    "(unroutable)"
                } else {
                    table
                };
                println!("{name}: {n} records");
                for (reason, count) in reasons {
                    println!("  {count:>6}  {reason}");
                }
            }
            Ok(())
        }
        DlqCommand::Replay(args) => {
            let table = args.table.as_deref().map(ident::parse_table).transpose()?;
            let (r, replayed) = floe
                .replay_dead_letters(table.as_ref(), &IngestOptions::default())
                .await?;
            if !args.json {
                println!("replayed {} dead-letter files", replayed.len());
            }
            report::print(
                args.table.as_deref().unwrap_or("dead letters"),
                &r,
                args.json,
            );
            Ok(())
        }
    }
}

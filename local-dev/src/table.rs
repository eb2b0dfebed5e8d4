//! `floe table create|show|alter`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::embedded::Embedded;
use floe_core::iceberg::spec::{FormatVersion, PrimitiveType, TableMetadata};
use floe_core::{evolve, ident, ledger, tabledef};
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Create a table from an Iceberg schema JSON file, with its config
    /// section's (`[tables."ns.t"]`) partitioning, sort order, identifier
    /// fields, merge strategy and properties.
    Create(CreateArgs),
    /// Show a table's schema, partitioning and snapshots.
    Show(ShowArgs),
    /// Change a table: promote column types, upgrade its format version.
    Alter(AlterArgs),
}

#[derive(Debug, Args)]
pub struct AlterArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// Promote a column: `COLUMN=TYPE` (int→long, float→double, decimal(p,s)→decimal(P,s)); repeatable.
    #[arg(long = "widen", required_unless_present = "format_version")]
    widen: Vec<String>,
    /// Upgrade the table's Iceberg format version in place (2 or 3; 3 brings
    /// row lineage and deletion vectors, and is not read by Athena).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    format_version: Option<u8>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// Iceberg schema JSON (`{"type":"struct","fields":[...]}`)
    /// [default: the table's `schema` in the config].
    #[arg(long)]
    schema: Option<PathBuf>,
    /// Partition field: `col`, `day(ts)`, `bucket(16, id)`, `truncate(4, s)`…
    /// (repeatable; replaces the config section's `partition`).
    #[arg(long = "partition")]
    partitions: Vec<String>,
    /// Table property KEY=VALUE (repeatable; over the config's properties).
    #[arg(long = "property")]
    properties: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(floe: &Embedded, cmd: TableCommand) -> Result<()> {
    match cmd {
        TableCommand::Create(args) => create(floe, args).await,
        TableCommand::Show(args) => show(floe, args).await,
        TableCommand::Alter(args) => alter(floe, args).await,
    }
}

async fn alter(floe: &Embedded, args: AlterArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let mut changes = Vec::new();
    for w in &args.widen {
        let (column, ty) = w
            .split_once('=')
            .with_context(|| format!("--widen {w}: expected COLUMN=TYPE"))?;
        let ty: PrimitiveType =
            serde_json::from_value(serde_json::Value::String(ty.trim().to_string()))
                .with_context(|| format!("--widen {w}: `{ty}` is not an Iceberg primitive type"))?;
        changes.push((column.trim().to_string(), ty));
    }
    let engine = CommitEngine::new(floe.catalog(), RetryPolicy::default());
    let loaded = floe.catalog().load_table(&ident).await?;
    let version = args.format_version.map(|v| match v {
        3 => FormatVersion::V3,
        _ => FormatVersion::V2,
    });
    if let Some(version) = version.filter(|v| *v < loaded.metadata.format_version()) {
        bail!(
            "{} is at format v{}, not v{}: a table is never downgraded",
            ident::display(&ident),
            loaded.metadata.format_version() as u8,
            version as u8
        );
    }
    // Check every promotion up front so a bad one changes nothing.
    let mut schema = (**loaded.metadata.current_schema()).clone();
    for (column, ty) in &changes {
        schema = evolve::widen_column(&schema, column, ty).map_err(anyhow::Error::msg)?;
    }
    if let Some(version) = version {
        let loaded = engine.upgrade_format_version(&ident, version).await?;
        println!(
            "{} now at format v{}",
            ident::display(&ident),
            loaded.metadata.format_version() as u8
        );
    }
    if changes.is_empty() {
        return Ok(());
    }
    let loaded = engine
        .update_schema(&ident, |m| {
            let mut s = (**m.current_schema()).clone();
            for (column, ty) in &changes {
                s = evolve::widen_column(&s, column, ty).ok()?;
            }
            (s.as_struct() != m.current_schema().as_struct()).then_some(s)
        })
        .await?;
    println!(
        "{} now at schema {}",
        ident::display(&ident),
        loaded.metadata.current_schema_id()
    );
    Ok(())
}

async fn create(floe: &Embedded, args: CreateArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let name = ident::display(&ident);
    // The same settings a writer applies when it creates the table on first write.
    let mut settings = floe.config().table(&name);
    let path = args
        .schema
        .clone()
        .or_else(|| settings.schema.clone())
        .with_context(|| {
            format!("give --schema FILE, or set schema in the config's [tables.\"{name}\"] section")
        })?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading schema file {}", path.display()))?;
    let schema =
        tabledef::parse_schema(&text).with_context(|| format!("schema file {}", path.display()))?;
    if !args.partitions.is_empty() {
        settings.partition = args.partitions.clone();
    }
    settings
        .properties
        .extend(tabledef::parse_properties(&args.properties)?);
    let creation = tabledef::configured_creation(ident.name(), schema, &settings)
        .with_context(|| format!("table {name}"))?;
    let loaded = floe.create_table(&ident, creation).await?;
    println!("created {name} at {}", loaded.metadata.location());
    Ok(())
}

async fn show(floe: &Embedded, args: ShowArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let loaded = floe.catalog().load_table(&ident).await?;
    let m: &TableMetadata = &loaded.metadata;
    let snapshots = snapshots_json(m);
    let data_files = total(m, "total-data-files");
    let records = total(m, "total-records");
    if args.json {
        let out = json!({
            "table": ident::display(&ident),
            "location": m.location(),
            "metadata_location": loaded.metadata_location,
            "format_version": m.format_version() as u8,
            "schema": m.current_schema(),
            "partition_spec": m.default_partition_spec(),
            "sort_order": m.default_sort_order(),
            "properties": m.properties(),
            "current_snapshot_id": m.current_snapshot_id(),
            "data_files": data_files,
            "records": records,
            "snapshots": snapshots,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("table     {}", ident::display(&ident));
    println!("location  {}", m.location());
    println!("format    v{}", m.format_version() as u8);
    println!("schema    (id {})", m.current_schema_id());
    for f in m.current_schema().as_struct().fields() {
        let req = if f.required { "required" } else { "optional" };
        println!("  {:>4}  {:<24} {:<10} {}", f.id, f.name, req, f.field_type);
    }
    let spec = m.default_partition_spec();
    if spec.is_unpartitioned() {
        println!("partition unpartitioned");
    } else {
        for f in spec.fields() {
            println!(
                "partition {} = {}(field {})",
                f.name, f.transform, f.source_id
            );
        }
    }
    let mut props: Vec<_> = m.properties().iter().collect();
    props.sort();
    for (k, v) in props {
        println!("property  {k}={v}");
    }
    println!("files     {data_files}");
    println!("records   {records}");
    println!("snapshots {}", m.snapshots().len());
    for s in &snapshots {
        println!(
            "  {} seq {} {} +{} records, +{} files, {} requests",
            s["snapshot_id"],
            s["sequence_number"],
            s["operation"].as_str().unwrap_or(""),
            s["summary"]["added-records"].as_str().unwrap_or("0"),
            s["summary"]["added-data-files"].as_str().unwrap_or("0"),
            s["summary"][ledger::REQUESTS].as_str().unwrap_or("-"),
        );
    }
    Ok(())
}

fn total(m: &TableMetadata, key: &str) -> u64 {
    m.current_snapshot()
        .and_then(|s| s.summary().additional_properties.get(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn snapshots_json(m: &TableMetadata) -> Vec<serde_json::Value> {
    let mut snaps: Vec<_> = m.snapshots().collect();
    snaps.sort_by_key(|s| s.sequence_number());
    snaps
        .into_iter()
        .map(|s| {
            let mut summary = serde_json::Map::new();
            summary.insert("operation".into(), json!(s.summary().operation.as_str()));
            for (k, v) in &s.summary().additional_properties {
                summary.insert(k.clone(), json!(v));
            }
            json!({
                "snapshot_id": s.snapshot_id(),
                "parent_snapshot_id": s.parent_snapshot_id(),
                "sequence_number": s.sequence_number(),
                "timestamp_ms": s.timestamp_ms(),
                "operation": s.summary().operation.as_str(),
                "summary": summary,
            })
        })
        .collect()
}

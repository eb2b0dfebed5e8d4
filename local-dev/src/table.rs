//! `floe table create|list|show|alter|drop`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::config::ResolvedTable;
use floe_core::embedded::Embedded;
use floe_core::iceberg::spec::{FormatVersion, PrimitiveType, Schema, TableMetadata};
use floe_core::pipeline::infer_options;
use floe_core::type_text::type_text;
use floe_core::{evolve, ident, ledger, tabledef};
use serde_json::json;

use crate::out::outln;
use crate::rows::Rows;

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Create a table from an Iceberg schema JSON file, with its config
    /// section's (`[tables."ns.t"]`) partitioning, sort order, identifier
    /// fields, merge strategy and properties.
    Create(CreateArgs),
    /// Show a table's schema, partitioning and snapshots.
    Show(ShowArgs),
    /// Change a table: promote column types, make columns optional, upgrade its format version.
    Alter(AlterArgs),
    /// List the catalog's tables with their rows and last commit.
    List(ListArgs),
    /// Remove a table from the catalog (`--purge`: and delete its files and ledger).
    Drop(DropArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tables of this namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct DropArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// Also delete everything under the table's location (data, metadata)
    /// and its ledger directory. Without it the files stay, so a table
    /// dropped by mistake can be registered again from its metadata file.
    #[arg(long)]
    purge: bool,
}

#[derive(Debug, Args)]
pub struct AlterArgs {
    /// NAMESPACE.TABLE
    table: String,
    /// Promote a column: `COLUMN=TYPE` (int→long, float→double, decimal(p,s)→decimal(P,s)); repeatable.
    #[arg(long = "widen", required_unless_present_any = ["format_version", "optional"])]
    widen: Vec<String>,
    /// Make a required column optional (`a.b` inside a struct), so records
    /// without it are taken; repeatable.
    #[arg(long = "optional")]
    optional: Vec<String>,
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
    #[arg(long, conflicts_with = "infer")]
    schema: Option<PathBuf>,
    /// Infer the schema from the records of an NDJSON file (its first
    /// 1,000), as a first write would with the table's settings.
    #[arg(long)]
    infer: Option<PathBuf>,
    /// Identifier field (keyed table: upserts and deletes); repeatable,
    /// over the config section's `identifier_fields`.
    #[arg(long = "key")]
    keys: Vec<String>,
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
        TableCommand::List(args) => list(floe, args).await,
        TableCommand::Drop(args) => drop(floe, args).await,
    }
}

async fn list(floe: &Embedded, args: ListArgs) -> Result<()> {
    let catalog = floe.catalog();
    let mut out = Vec::new();
    for ident in catalog.list_tables().await? {
        let name = ident::display(&ident);
        if let Some(ns) = &args.namespace
            && ident.namespace().join(".") != *ns
        {
            continue;
        }
        let loaded = catalog.load_table(&ident).await?;
        let m = &loaded.metadata;
        let rows = Rows::of(m);
        out.push(json!({
            "table": name,
            "rows": rows.live(),
            "rows_exact": rows.exact(),
            "format_version": m.format_version() as u8,
            "snapshots": m.snapshots().len(),
            "last_commit_ms": m.current_snapshot().map(|s| s.timestamp_ms()),
            "metadata_location": loaded.metadata_location,
        }));
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if out.is_empty() {
        outln!("no tables in {}", floe.location());
    }
    for t in &out {
        let rows = match t["rows_exact"].as_bool() {
            Some(false) => format!("≤{}", t["rows"]),
            _ => t["rows"].to_string(),
        };
        outln!(
            "{:<32} {:>12} rows  v{}  {} snapshots",
            t["table"].as_str().unwrap_or_default(),
            rows,
            t["format_version"],
            t["snapshots"]
        );
    }
    Ok(())
}

async fn drop(floe: &Embedded, args: DropArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let name = ident::display(&ident);
    let loaded = floe.catalog().load_table(&ident).await?;
    floe.catalog().drop_table(&ident).await?;
    outln!("dropped {name} from the catalog");
    if !args.purge {
        outln!(
            "  its files stay at {} (last metadata {}); `--purge` deletes them",
            loaded.metadata.location(),
            loaded.metadata_location
        );
        return Ok(());
    }
    let file_io = floe.catalog().file_io().clone();
    for dir in [
        format!("{}/", loaded.metadata.location().trim_end_matches('/')),
        format!("{}/", ledger::place::dir(&loaded.metadata)),
    ] {
        file_io.delete_prefix(&dir).await.with_context(|| {
            format!("{name} is dropped, but deleting {dir} failed; delete it by hand")
        })?;
        outln!("  deleted {dir}");
    }
    Ok(())
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
    // Check every change up front so a bad one changes nothing.
    let apply = |mut s: Schema| -> Result<Schema, String> {
        for (column, ty) in &changes {
            s = evolve::widen_column(&s, column, ty)?;
        }
        for column in &args.optional {
            s = evolve::relax_column(&s, column)?;
        }
        Ok(s)
    };
    apply((**loaded.metadata.current_schema()).clone()).map_err(anyhow::Error::msg)?;
    if let Some(version) = version {
        let loaded = engine.upgrade_format_version(&ident, version).await?;
        outln!(
            "{} now at format v{}",
            ident::display(&ident),
            loaded.metadata.format_version() as u8
        );
    }
    if changes.is_empty() && args.optional.is_empty() {
        return Ok(());
    }
    let loaded = engine
        .update_schema(&ident, |m| {
            // Checked above; should the table have changed since so that a
            // change no longer applies, the schema is left as it is and the
            // message below names the schema the table is at.
            let s = apply((**m.current_schema()).clone()).ok()?;
            (s.as_struct() != m.current_schema().as_struct()).then_some(s)
        })
        .await?;
    outln!(
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
    if !args.keys.is_empty() {
        settings.identifier_fields = args.keys.clone();
    }
    let schema = match &args.infer {
        Some(sample) => infer(sample, &settings)?,
        None => {
            let path = args
                .schema
                .clone()
                .or_else(|| settings.schema.clone())
                .with_context(|| {
                    format!("give --schema FILE or --infer RECORDS.ndjson, or set schema in the config's [tables.\"{name}\"] section")
                })?;
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading schema file {}", path.display()))?;
            tabledef::parse_schema(&text)
                .with_context(|| format!("schema file {}", path.display()))?
        }
    };
    if !args.partitions.is_empty() {
        settings.partition = args.partitions.clone();
    }
    settings
        .properties
        .extend(tabledef::parse_properties(&args.properties)?);
    let creation = tabledef::configured_creation(ident.name(), schema, &settings)
        .with_context(|| format!("table {name}"))?;
    let loaded = floe.create_table(&ident, creation).await?;
    outln!("created {name} at {}", loaded.metadata.location());
    Ok(())
}

/// Records `--infer` reads, as many as a first write samples.
const INFER_SAMPLE: usize = 1_000;

/// The schema the first records of `sample` give under `settings`.
fn infer(sample: &std::path::Path, settings: &ResolvedTable) -> Result<Schema> {
    let file = std::fs::File::open(sample)
        .with_context(|| format!("reading records file {}", sample.display()))?;
    let mut values = Vec::new();
    for (n, line) in std::io::BufRead::lines(std::io::BufReader::new(file)).enumerate() {
        let line = line.with_context(|| format!("reading {}", sample.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}: not a JSON record", sample.display(), n + 1))?;
        values.push(value);
        if values.len() == INFER_SAMPLE {
            break;
        }
    }
    evolve::infer_schema(&values, &infer_options(settings))?.with_context(|| {
        format!(
            "{}: no field has a type yet (no records, or every value null)",
            sample.display()
        )
    })
}

async fn show(floe: &Embedded, args: ShowArgs) -> Result<()> {
    let ident = ident::parse_table(&args.table)?;
    let loaded = floe.catalog().load_table(&ident).await?;
    let m: &TableMetadata = &loaded.metadata;
    let snapshots = snapshots_json(m);
    let data_files = total(m, "total-data-files");
    let rows = Rows::of(m);
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
            // Rows in data files; `rows` is what a reader sees (null while
            // equality deletes wait for compaction).
            "records": rows.written,
            "rows": rows.exact().then(|| rows.live()),
            "deleted_rows": rows.deleted,
            "equality_deletes": rows.equality_deletes,
            "snapshots": snapshots,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    outln!("table     {}", ident::display(&ident));
    outln!("location  {}", m.location());
    outln!("format    v{}", m.format_version() as u8);
    outln!("schema    (id {})", m.current_schema_id());
    for f in m.current_schema().as_struct().fields() {
        let req = if f.required { "required" } else { "optional" };
        outln!(
            "  {:>4}  {:<24} {:<10} {}",
            f.id,
            f.name,
            req,
            type_text(&f.field_type)
        );
    }
    let spec = m.default_partition_spec();
    if spec.is_unpartitioned() {
        outln!("partition unpartitioned");
    } else {
        for f in spec.fields() {
            outln!(
                "partition {} = {}(field {})",
                f.name,
                f.transform,
                f.source_id
            );
        }
    }
    let mut props: Vec<_> = m.properties().iter().collect();
    props.sort();
    for (k, v) in props {
        outln!("property  {k}={v}");
    }
    outln!("files     {data_files}");
    outln!("contents  {}", rows.describe());
    outln!("snapshots {}", m.snapshots().len());
    for s in &snapshots {
        outln!(
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

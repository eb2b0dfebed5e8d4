//! `floe bench`: the inputs and runs behind docs/benchmarks.md's tables
//! (local-dev/bench/sweep.sh and tables.sh drive them): benchmark data of
//! either shape, the commit regime under a slow catalog, many tables over a
//! sharded commit queue, copy-on-write amplification, keyed commits and
//! commits against long snapshot histories.

use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use floe_core::commit::copy_on_write;
use floe_core::embedded::{Embedded, IngestOptions, Input};
use floe_core::ident;
use floe_core::source::SourceKind;
use floe_core::tabledef;

use crate::demo;
use crate::out::outln;

mod history;
mod tables;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Write benchmark records as NDJSON.
    Gen(GenArgs),
    /// Print the Iceberg schema JSON of a shape.
    Schema {
        /// The shape.
        #[arg(long, value_enum, default_value_t = Shape::Event)]
        shape: Shape,
    },
    /// Writers submitting to one committer whose catalog commits take `--latency-ms`.
    Commit(CommitArgs),
    /// Requests for `--tables` tables at `--rate` a second, committed by
    /// `--shards` committers (one per commit queue shard) on a catalog whose
    /// commits take `--latency-ms`.
    Tables(tables::TablesArgs),
    /// Copy-on-write: touch `--keys` keys of a table of `--rows` rows in `--files` files.
    Cow(CowArgs),
    /// Position deletes: commits of `--changes` changes on a keyed table of `--keys` keys.
    Keyed(KeyedArgs),
    /// Commits on a table that already holds `--snapshots` snapshots.
    History(history::HistoryArgs),
}

/// Record shape.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shape {
    /// Redpanda Connect's 6-field event (id, user_id, event_type, value, info, ts).
    Event,
    /// 50 columns: longs, doubles, strings, booleans, timestamps.
    Wide,
    /// A GitHub event of about 840 bytes: actor, repo and org structs, a
    /// payload with a list of commit structs.
    Github,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    #[arg(long, value_enum, default_value_t = Shape::Event)]
    shape: Shape,
    /// Random text and values instead of the benchmark's repetitive ones.
    #[arg(long)]
    high_entropy: bool,
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// The first record's `id` (the next file of a series starts where the
    /// last ended, so their rows differ).
    #[arg(long, default_value_t = 0)]
    first_id: u64,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    #[arg(long)]
    latency_ms: u64,
    #[arg(long)]
    writers: usize,
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    /// Records per writer batch (one commit request each).
    #[arg(long, default_value_t = 1_000)]
    batch: u64,
}

#[derive(Debug, Args)]
pub struct CowArgs {
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    #[arg(long, default_value_t = 10)]
    files: u64,
    #[arg(long)]
    keys: u64,
}

#[derive(Debug, Args)]
pub struct KeyedArgs {
    #[arg(long, default_value_t = 10_000_000)]
    keys: u64,
    /// Keys per loading batch (one data file each).
    #[arg(long, default_value_t = 1_000_000)]
    load_batch: u64,
    /// Changes per timed batch (updates of random keys, a tenth deletes).
    #[arg(long, default_value_t = 10_000)]
    changes: u64,
    /// Timed batches, each committed on its own.
    #[arg(long, default_value_t = 5)]
    batches: u64,
    /// Only load the table (`--batches` are not run).
    #[arg(long, conflicts_with = "changes_only")]
    load_only: bool,
    /// Only the timed batches, on a table an earlier `--load-only` run left
    /// in the same warehouse: a fresh process, whose memory is the changes'
    /// own (a cold committer reads every file's keys once).
    #[arg(long)]
    changes_only: bool,
}

pub async fn run(floe: &Embedded, cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Gen(a) => {
            let data = generate(a.shape, a.high_entropy, a.first_id..a.first_id + a.records);
            std::fs::write(&a.out, data).with_context(|| a.out.display().to_string())
        }
        BenchCommand::Schema { shape } => {
            outln!("{}", schema_json(shape));
            Ok(())
        }
        BenchCommand::Commit(a) => commit_regime(floe, a).await,
        BenchCommand::Tables(a) => tables::run(floe, a).await,
        BenchCommand::Cow(a) => cow(floe, a).await,
        BenchCommand::Keyed(a) => keyed(floe, a).await,
        BenchCommand::History(a) => history::run(floe, a).await,
    }
}

/// NDJSON records of `shape`, one per id.
pub fn generate(shape: Shape, high_entropy: bool, ids: Range<u64>) -> Vec<u8> {
    let n = ids.end.saturating_sub(ids.start);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    match (shape, high_entropy) {
        (Shape::Event, false) => demo::generate(ids),
        (Shape::Event, true) => {
            let mut out = Vec::with_capacity(n as usize * 160);
            for i in ids {
                let _ = writeln!(
                    out,
                    r#"{{"id":{i},"user_id":{},"event_type":"{:016x}","value":{},"info":"{:016x}{:016x}{:016x}","ts":"2026-11-30T10:{:02}:{:02}.{:06}Z"}}"#,
                    rng.next() >> 20,
                    rng.next(),
                    rng.next() >> 1,
                    rng.next(),
                    rng.next(),
                    rng.next(),
                    rng.next() % 60,
                    rng.next() % 60,
                    rng.next() % 1_000_000,
                );
            }
            out
        }
        (Shape::Github, _) => github(ids, &mut rng),
        (Shape::Wide, entropy) => {
            let mut out = Vec::with_capacity(n as usize * 1500);
            for r in ids {
                out.push(b'{');
                for i in 0..50u64 {
                    if i > 0 {
                        out.push(b',');
                    }
                    let x = if entropy { rng.next() } else { r * 31 + i };
                    let _ = match i % 5 {
                        0 => write!(out, "\"col_{i}\":{}", x >> 1),
                        1 => write!(out, "\"col_{i}\":{}.{}", x % 100_000, i),
                        2 if entropy => write!(out, "\"col_{i}\":\"{x:016x}{:016x}\"", rng.next()),
                        2 => write!(out, "\"col_{i}\":\"value {} of column {i}\"", r % 100),
                        3 => write!(out, "\"col_{i}\":{}", x % 2 == 0),
                        _ => write!(
                            out,
                            "\"col_{i}\":\"2026-11-30T10:{:02}:{:02}.{:03}Z\"",
                            i % 60,
                            x % 60,
                            x % 1000
                        ),
                    };
                }
                out.extend_from_slice(b"}\n");
            }
            out
        }
    }
}

/// GitHub push events of about 850 bytes, nested as the API sends them.
fn github(ids: Range<u64>, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.end.saturating_sub(ids.start) as usize * 860);
    for i in ids {
        let (actor, repo) = (rng.next() % 1_000_000, rng.next() % 5_000_000);
        let _ = writeln!(
            out,
            concat!(
                r#"{{"id":"{i}","type":"PushEvent","public":true,"created_at":"2026-11-30T10:{:02}:{:02}Z","#,
                r#""actor":{{"id":{actor},"login":"user{actor}","display_login":"user{actor}","gravatar_id":"","#,
                r#""url":"https://api.github.com/users/user{actor}","avatar_url":"https://avatars.githubusercontent.com/u/{actor}?"}},"#,
                r#""repo":{{"id":{repo},"name":"org{}/repo{repo}","url":"https://api.github.com/repos/org{}/repo{repo}"}},"#,
                r#""org":{{"id":{},"login":"org{}"}},"#,
                r#""payload":{{"push_id":{},"size":1,"distinct_size":1,"ref":"refs/heads/main","head":"{:016x}{:016x}","before":"{:016x}{:016x}","#,
                r#""commits":[{{"sha":"{:016x}{:016x}","author":{{"email":"user{actor}@example.com","name":"User {actor}"}},"#,
                r#""message":"Change {i} of the project","distinct":true,"url":"https://api.github.com/repos/org{}/repo{repo}/commits/{:016x}"}}]}}}}"#
            ),
            i % 60,
            (i / 60) % 60,
            repo % 1000,
            repo % 1000,
            repo % 1000,
            repo % 1000,
            rng.next() >> 12,
            rng.next(),
            rng.next(),
            rng.next(),
            rng.next(),
            rng.next(),
            rng.next(),
            repo % 1000,
            rng.next(),
            i = i,
            actor = actor,
            repo = repo,
        );
    }
    out
}

/// The Iceberg schema of `shape`.
pub fn schema_json(shape: Shape) -> String {
    match shape {
        Shape::Event => include_str!("../bench/events.schema.json").to_string(),
        // The schema a first write of the events infers.
        Shape::Github => {
            let sample = generate(Shape::Github, false, 0..1);
            let record: serde_json::Value =
                serde_json::from_slice(&sample).unwrap_or(serde_json::Value::Null);
            let opts = floe_core::evolve::InferOptions {
                timestamps: true,
                ..Default::default()
            };
            match floe_core::evolve::infer_schema([&record], &opts) {
                Ok(Some(schema)) => serde_json::to_string(&schema).unwrap_or_default(),
                _ => String::new(),
            }
        }
        Shape::Wide => {
            let fields: Vec<String> = (0..50)
                .map(|i| {
                    let t = ["long", "double", "string", "boolean", "timestamptz"][i % 5];
                    format!(
                        r#"{{"id":{},"name":"col_{i}","required":false,"type":"{t}"}}"#,
                        i + 1
                    )
                })
                .collect();
            format!(
                r#"{{"type":"struct","schema-id":0,"fields":[{}]}}"#,
                fields.join(",")
            )
        }
    }
}

async fn commit_regime(floe: &Embedded, a: CommitArgs) -> Result<()> {
    let floe = floe
        .clone()
        .with_commit_latency(Duration::from_millis(a.latency_ms));
    let ident = ident::parse_table("bench.commit")?;
    let schema = tabledef::parse_schema(&schema_json(Shape::Event))?;
    floe.create_table(
        &ident,
        tabledef::creation(ident.name(), schema, Default::default(), Default::default()),
    )
    .await?;
    // One input per writer, as independent producers submitting at once.
    let per = a.records / a.writers.max(1) as u64;
    let data = demo::generate(0..per);
    let inputs = (0..a.writers)
        .map(|w| Input {
            source: format!("bench:w{w}"),
            kind: SourceKind::File,
            reader: Box::new(std::io::Cursor::new(data.clone())),
            path: None,
        })
        .collect();
    let opts = IngestOptions {
        writers: a.writers.max(1),
        batch_records: a.batch,
        // The committer takes whatever is queued when it is free: no extra wait.
        commit_window: Duration::ZERO,
        ..IngestOptions::default()
    };
    let r = floe.ingest(Some(&ident), inputs, &opts).await?;
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    outln!(
        "{}",
        serde_json::json!({
            "latency_ms": a.latency_ms, "writers": a.writers, "records": r.records_committed,
            "requests": r.requests, "commits": r.commits,
            "records_per_commit": r.records_committed as f64 / r.commits.max(1) as f64,
            "requests_per_commit": r.requests as f64 / r.commits.max(1) as f64,
            "records_per_second": r.records_committed as f64 / secs,
        })
    );
    Ok(())
}

async fn cow(floe: &Embedded, a: CowArgs) -> Result<()> {
    let ident = ident::parse_table("bench.cow")?;
    let schema = tabledef::parse_schema(
        r#"{"type":"struct","schema-id":0,"identifier-field-ids":[1],"fields":[
          {"id":1,"name":"id","required":true,"type":"long"},
          {"id":2,"name":"v","required":false,"type":"string"}]}"#,
    )?;
    let properties = floe_core::keyed_mode::MODE_PROPERTIES
        .iter()
        .map(|p| (p.to_string(), "copy-on-write".to_string()))
        .collect();
    floe.create_table(
        &ident,
        tabledef::creation(ident.name(), schema, Default::default(), properties),
    )
    .await?;
    // M files of contiguous keys, one batch (and file) each.
    let per = a.rows / a.files.max(1);
    let mut text = Vec::with_capacity(a.rows as usize * 40);
    for id in 0..per * a.files {
        let _ = writeln!(text, r#"{{"id":{id},"v":"original value of row {id}"}}"#);
    }
    let opts = IngestOptions {
        writers: 1,
        batch_records: per,
        commit_window: Duration::ZERO,
        ..IngestOptions::default()
    };
    let input = |name: &str, text: Vec<u8>| Input {
        source: format!("bench:{name}"),
        kind: SourceKind::File,
        reader: Box::new(std::io::Cursor::new(text)),
        path: None,
    };
    floe.ingest(Some(&ident), vec![input("load", text)], &opts)
        .await?;
    // K keys spread evenly over the key range.
    let mut update = Vec::new();
    let step = (per * a.files / a.keys.max(1)).max(1);
    for k in 0..a.keys {
        let _ = writeln!(update, r#"{{"_op":"u","id":{},"v":"updated"}}"#, k * step);
    }
    let r = floe
        .ingest(Some(&ident), vec![input("update", update)], &opts)
        .await?;
    let loaded = floe.catalog().load_table(&ident).await?;
    let summary = &loaded
        .metadata
        .current_snapshot()
        .context("no snapshot")?
        .summary()
        .additional_properties;
    let num = |k: &str| -> f64 { summary.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    let rewritten = num(copy_on_write::ROWS_REWRITTEN);
    let changed = num(copy_on_write::ROWS_CHANGED);
    outln!(
        "{}",
        serde_json::json!({
            "rows": per * a.files, "files": a.files, "keys": a.keys,
            "files_rewritten": num(copy_on_write::REWRITTEN_FILES),
            "table_rewritten_pct": 100.0 * rewritten / (per * a.files) as f64,
            "rows_per_changed_row": rewritten / changed.max(1.0),
            "bytes_amplification": num(copy_on_write::WRITE_AMPLIFICATION),
            "update_seconds": r.elapsed.as_secs_f64(),
        })
    );
    Ok(())
}

/// Loads a keyed table in large batches, then times batches of random
/// updates and deletes, each resolved to position deletes at commit; prints
/// one JSON line per timed batch and the process's peak resident memory.
async fn keyed(floe: &Embedded, a: KeyedArgs) -> Result<()> {
    let ident = ident::parse_table("bench.keyed")?;
    let schema = id_v_n(true)?;
    if !a.changes_only {
        floe.create_table(
            &ident,
            tabledef::creation(ident.name(), schema, Default::default(), Default::default()),
        )
        .await?;
    }
    let opts = |batch_records| immediate(2, batch_records);
    let input = kafka_input;
    let started = std::time::Instant::now();
    let mut first = if a.changes_only { a.keys } else { 0 };
    while first < a.keys {
        let last = (first + a.load_batch).min(a.keys);
        let mut text = Vec::with_capacity((last - first) as usize * 40);
        for id in first..last {
            let _ = writeln!(text, r#"{{"id":{id},"v":"value {id}","n":{id}}}"#);
        }
        floe.ingest(
            Some(&ident),
            vec![input(format!("load{first}"), text)],
            &opts(a.load_batch),
        )
        .await?;
        first = last;
    }
    let load_seconds = started.elapsed().as_secs_f64();
    if a.load_only {
        outln!(
            "{}",
            serde_json::json!({"keys": a.keys, "load_seconds": load_seconds})
        );
        return Ok(());
    }
    let mut rng = Rng(0x5EED);
    for b in 0..a.batches {
        let mut text = Vec::with_capacity(a.changes as usize * 50);
        for i in 0..a.changes {
            let id = rng.next() % a.keys;
            if i % 10 == 9 {
                let _ = writeln!(text, r#"{{"_op":"d","id":{id}}}"#);
            } else {
                let _ = writeln!(
                    text,
                    r#"{{"_op":"u","id":{id},"v":"changed in {b}","n":{i}}}"#
                );
            }
        }
        let r = floe
            .ingest(
                Some(&ident),
                // Another run's changes on the same table are not a redelivery.
                vec![input(format!("change-{}-{b}", std::process::id()), text)],
                &opts(a.changes),
            )
            .await?;
        outln!(
            "{}",
            serde_json::json!({
                "keys": a.keys, "changes": a.changes, "batch": b,
                "seconds": r.elapsed.as_secs_f64(), "snapshots": r.snapshots,
                "load_seconds": load_seconds, "peak_rss_mib": peak_rss_mib(),
            })
        );
    }
    Ok(())
}

/// The keyed benchmarks' table: `id` long (the identifier when `keyed`),
/// `v` string, `n` long.
fn id_v_n(keyed: bool) -> Result<floe_core::iceberg::spec::Schema> {
    let identifier = if keyed {
        r#""identifier-field-ids":[1],"#
    } else {
        ""
    };
    Ok(tabledef::parse_schema(&format!(
        r#"{{"type":"struct","schema-id":0,{identifier}"fields":[
          {{"id":1,"name":"id","required":true,"type":"long"}},
          {{"id":2,"name":"v","required":false,"type":"string"}},
          {{"id":3,"name":"n","required":false,"type":"long"}}]}}"#
    ))?)
}

/// Options that commit each batch as soon as it is written.
fn immediate(writers: usize, batch_records: u64) -> IngestOptions {
    IngestOptions {
        writers,
        batch_records,
        commit_window: Duration::ZERO,
        ..IngestOptions::default()
    }
}

/// NDJSON `text` as the Kafka-like source `bench:{name}`: ordered positions,
/// so keyed changes apply in the order written.
fn kafka_input(name: String, text: Vec<u8>) -> Input {
    Input {
        source: format!("bench:{name}"),
        kind: SourceKind::Kafka,
        reader: Box::new(std::io::Cursor::new(text)),
        path: None,
    }
}

/// The process's peak resident memory (Linux `VmHWM`), MiB.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// xorshift64: reproducible data without a dependency.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

//! `floe pg setup|sync|resync|status`: a Postgres logical replication slot
//! into keyed Iceberg tables.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use floe_core::config::Config;
use floe_core::embedded::Embedded;
use floe_core::faults::Faults;
use floe_core::iceberg::NamespaceIdent;
use floe_postgres::status::status;
use floe_postgres::sync::{SyncOptions, open, resync, sync};
use floe_postgres::{PgConfig, conn, format_lsn, setup, setup_sql};

use crate::out::{self, outln};

#[derive(Debug, Subcommand)]
pub enum PgCommand {
    /// Check the role's privileges and the publication, creating the
    /// publication (or adding tables to it) only when it lacks the tables,
    /// and create the slot (pgoutput) when missing; or, with --print-sql,
    /// print the SQL the tables' owner runs once for floe's role.
    Setup(SetupArgs),
    /// Copy the tables (an initial snapshot, chunk by chunk) and stream their
    /// changes into NAMESPACE.<table>, exactly once, until caught up with
    /// the stream (or --max-seconds, or --max-batches).
    Sync(SyncArgs),
    /// After a slot was dropped or invalidated: recreate it and copy every
    /// table again (the next sync replaces the tables' rows).
    Resync(Target),
    /// Slot lag (bytes and seconds), WAL retained, the oldest change not yet
    /// in Iceberg, and each table's position and snapshot progress.
    Status(StatusArgs),
}

/// Where to read from; each flag falls back to `[postgres]` of the config.
#[derive(Debug, Args)]
pub struct Source {
    /// libpq connection string or postgresql:// URI (sslmode, sslrootcert…).
    #[arg(long, env = "FLOE_PG_CONNINFO")]
    conninfo: Option<String>,
    /// Secrets Manager ARN of the login (JSON with username and password, as RDS writes it).
    #[arg(long, env = "FLOE_PG_SECRET_ARN")]
    secret_arn: Option<String>,
    /// Logical replication slot [default: floe].
    #[arg(long)]
    slot: Option<String>,
    /// Publication [default: floe].
    #[arg(long)]
    publication: Option<String>,
    /// A table to replicate, `schema.table` (repeatable).
    #[arg(long = "table")]
    tables: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    #[command(flatten)]
    source: Source,
    /// Print, and run nothing, the least-privilege SQL the tables' owner (or
    /// a superuser) runs once: REPLICATION and SELECT grants for floe's role
    /// and the publication (`… --print-sql | psql`). --conninfo is optional.
    #[arg(long)]
    print_sql: bool,
    /// With --print-sql: the role floe connects as [default: the conninfo's
    /// user, else floe].
    #[arg(long, requires = "print_sql")]
    role: Option<String>,
}

/// A source and the namespace of its Iceberg tables.
#[derive(Debug, Args)]
pub struct Target {
    #[command(flatten)]
    source: Source,
    /// Namespace of the Iceberg tables [default: raw].
    #[arg(long)]
    namespace: Option<String>,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    #[command(flatten)]
    target: Target,
    /// Most rows per snapshot chunk; chunks after a table's first also
    /// stop near 16 MiB [default: 1000000].
    #[arg(long)]
    chunk_rows: Option<usize>,
    /// Most changes per micro-batch [default: 50000].
    #[arg(long)]
    max_changes: Option<usize>,
    /// Stop after this many micro-batches.
    #[arg(long)]
    max_batches: Option<usize>,
    /// Start no batch after this many seconds (the longest batch so far is
    /// the estimate), so the run ends cleanly; the next run continues.
    #[arg(long)]
    max_seconds: Option<u64>,
    /// Keep polling after catching up, every this many milliseconds.
    #[arg(long)]
    follow_ms: Option<u64>,
    /// While following, commit each table at most once per this many
    /// milliseconds unless a read fills `--max-changes` (default 15000).
    #[arg(long)]
    commit_interval_ms: Option<u64>,
    /// Read the initial snapshot as text through the simple protocol, the
    /// path changes take, instead of binary COPY into columns.
    #[arg(long)]
    snapshot_text: bool,
    /// Read changes as text, as servers before Postgres 14 send them,
    /// instead of in pgoutput's binary mode.
    #[arg(long)]
    changes_text: bool,
    /// Peek each batch (`pg_logical_slot_peek_binary_changes`) instead of
    /// streaming over a replication session (`postgres.peek`).
    #[arg(long)]
    peek: bool,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    target: Target,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl Source {
    async fn config(&self, config: &Config) -> Result<PgConfig> {
        let pg = &config.postgres;
        let conninfo = self
            .conninfo(config)
            .context("no Postgres to read: pass --conninfo (or FLOE_PG_CONNINFO, or postgres.conninfo in the config)")?;
        let mut out = PgConfig::new(
            conninfo,
            self.slot(config),
            self.publication(config),
            self.tables(config)?,
        )
        .tuned_by(pg);
        if let Some(arn) = self.secret_arn(config) {
            out.secret = Some(conn::login_for(config, arn).await?);
        }
        Ok(out)
    }

    fn conninfo(&self, config: &Config) -> Option<String> {
        self.conninfo.clone().or_else(|| {
            let conninfo = config.postgres.conninfo.as_ref();
            conninfo.map(|c| c.expose().to_string())
        })
    }

    fn secret_arn<'a>(&'a self, config: &'a Config) -> Option<&'a String> {
        self.secret_arn.as_ref().or(config.postgres.secret.as_ref())
    }

    fn slot(&self, config: &Config) -> String {
        let slot = self.slot.clone().or_else(|| config.postgres.slot.clone());
        slot.unwrap_or_else(|| "floe".into())
    }

    fn publication(&self, config: &Config) -> String {
        let publication = self.publication.clone();
        let publication = publication.or_else(|| config.postgres.publication.clone());
        publication.unwrap_or_else(|| "floe".into())
    }

    fn tables(&self, config: &Config) -> Result<Vec<String>> {
        let tables = if self.tables.is_empty() {
            config.postgres.tables.clone()
        } else {
            self.tables.clone()
        };
        anyhow::ensure!(
            !tables.is_empty(),
            "no tables to replicate: pass --table schema.table (or postgres.tables in the config)"
        );
        Ok(tables)
    }

    /// The role `--print-sql` grants to: `role`, else the conninfo's user,
    /// else floe. Never the environment's PGUSER: the owner running the
    /// script is not floe.
    fn role(&self, config: &Config, role: Option<&String>) -> Result<String> {
        if let Some(role) = role {
            return Ok(role.clone());
        }
        anyhow::ensure!(
            self.secret_arn(config).is_none(),
            "the login floe connects as is in the secret: pass --role with its username"
        );
        let Some(conninfo) = self.conninfo(config) else {
            return Ok("floe".into());
        };
        let mut params = conn::parse_conninfo(&conninfo)?;
        Ok(params.remove("user").unwrap_or_else(|| "floe".into()))
    }
}

impl Target {
    fn namespace(&self, config: &Config) -> Result<NamespaceIdent> {
        let name = self
            .namespace
            .clone()
            .or_else(|| config.postgres.namespace.clone())
            .unwrap_or_else(|| "raw".into());
        Ok(NamespaceIdent::from_strs(name.split('.'))?)
    }
}

/// Runs `cmd`; `setup` opens no deployment, since it writes no table.
pub async fn run(config: Config, faults: Faults, cmd: PgCommand) -> Result<()> {
    let open = async |config, faults| Ok::<_, anyhow::Error>(crate::open(config, faults).await?.1);
    match cmd {
        PgCommand::Setup(args) => setup_command(&config, args).await,
        PgCommand::Sync(args) => sync_command(&open(config, faults).await?, args).await,
        PgCommand::Resync(target) => resync_command(&open(config, faults).await?, target).await,
        PgCommand::Status(args) => status_command(&open(config, faults).await?, args).await,
    }
}

async fn setup_command(config: &Config, args: SetupArgs) -> Result<()> {
    let source = &args.source;
    if args.print_sql {
        // Only the SQL on stdout: it is piped to psql.
        let sql = setup_sql(
            &source.role(config, args.role.as_ref())?,
            &source.publication(config),
            &source.slot(config),
            &source.tables(config)?,
        );
        out::bytes(sql.as_bytes());
        return Ok(());
    }
    let pg = source.config(config).await?;
    setup(&pg).await?;
    outln!(
        "publication {} and slot {} are ready",
        pg.publication,
        pg.slot
    );
    Ok(())
}

async fn resync_command(floe: &Embedded, target: Target) -> Result<()> {
    let config = floe.config();
    let pg = target.source.config(config).await?;
    let opts = SyncOptions::new(target.namespace(config)?);
    resync(floe, &pg, &opts).await?;
    outln!(
        "slot {} recreated; the next `floe pg sync` copies {} again",
        pg.slot,
        pg.tables.join(", ")
    );
    Ok(())
}

async fn status_command(floe: &Embedded, args: StatusArgs) -> Result<()> {
    let config = floe.config();
    let pg = args.target.source.config(config).await?;
    let ns = args.target.namespace(config)?;
    let s = status(floe, &pg, &ns, floe_core::clock::now_ms()).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    match &s.health {
        None => outln!(
            "slot {}: MISSING (run `floe pg resync` if it held changes)",
            s.slot
        ),
        Some(h) => outln!(
            "slot {}: confirmed {}, server at {}, wal_status {}{}",
            s.slot,
            h.confirmed_flush_lsn.map(format_lsn).unwrap_or_default(),
            format_lsn(h.current_lsn),
            h.wal_status.as_deref().unwrap_or("?"),
            if h.is_lost() {
                " (LOST: run `floe pg resync`)"
            } else {
                ""
            }
        ),
    }
    let num = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let secs = |v: Option<f64>| v.map(|v| format!("{v:.1} s")).unwrap_or_else(|| "-".into());
    outln!(
        "slot lag {} bytes, {}; WAL retained {} bytes; oldest change not in Iceberg {}",
        num(s.slot_lag_bytes),
        secs(s.slot_lag_seconds),
        num(s.wal_retained_bytes),
        secs(s.oldest_uncommitted_change_age_seconds)
    );
    for t in &s.tables {
        outln!(
            "  {} -> {}: at {}, snapshot {}",
            t.table,
            t.iceberg,
            t.lsn.as_deref().unwrap_or("-"),
            t.snapshot
        );
    }
    Ok(())
}

impl SyncArgs {
    /// `pg` as this run's flags change how it reads.
    fn reading(&self, mut pg: PgConfig) -> PgConfig {
        if let Some(n) = self.chunk_rows {
            pg.chunk_rows = n;
        }
        if let Some(n) = self.max_changes {
            pg.max_changes = n;
        }
        pg.binary = !self.changes_text;
        pg.stream &= !self.peek;
        pg
    }
}

async fn sync_command(floe: &Embedded, args: SyncArgs) -> Result<()> {
    let started = Instant::now();
    let config = floe.config();
    let pg = args.reading(args.target.source.config(config).await?);
    let mut opts = SyncOptions::new(args.target.namespace(config)?);
    opts.max_batches = args.max_batches;
    opts.snapshot_columns = !args.snapshot_text;
    opts.follow = args.follow_ms.map(Duration::from_millis);
    if let Some(ms) = args.commit_interval_ms {
        opts.commit_interval = Duration::from_millis(ms);
    }
    opts.deadline = args
        .max_seconds
        .or(config.postgres.max_seconds)
        .map(|s| started + Duration::from_secs(s));
    let mut source = open(floe, &pg, &opts.namespace).await?;
    let r = sync(floe, &mut source, &pg, &opts).await?;
    let lsn = r.confirmed_lsn.map(format_lsn).unwrap_or_default();
    let rate = |n: usize, t: Duration| {
        if t.is_zero() {
            0.0
        } else {
            n as f64 / t.as_secs_f64()
        }
    };
    let snapshot_rate = rate(r.snapshot_rows, r.snapshot_time);
    let stream_rate = rate(
        r.lines - r.snapshot_rows - r.skipped.min(r.lines - r.snapshot_rows),
        r.stream_time,
    );
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "batches": r.batches, "lines": r.lines, "skipped": r.skipped,
                "snapshot_rows": r.snapshot_rows, "columnar_rows": r.columnar_rows,
                "confirmed_lsn": lsn, "snapshot_done": r.snapshot_done,
                "stop": r.stop,
                "records_committed": r.ingest.records_committed,
                "rejected": r.ingest.rejected.len(), "commits": r.ingest.commits,
                "snapshot_seconds": r.snapshot_time.as_secs_f64(),
                "stream_seconds": r.stream_time.as_secs_f64(),
                "snapshot_rows_per_second": snapshot_rate,
                "stream_changes_per_second": stream_rate,
                "lag_ms": r.lag.map(|l| l.as_millis() as u64),
                "elapsed_seconds": started.elapsed().as_secs_f64(),
            })
        );
    } else {
        outln!(
            "{} batches, {} changes ({} already held), slot at {lsn}, snapshot {}, stopped: {:?}",
            r.batches,
            r.lines,
            r.skipped,
            if r.snapshot_done {
                "done"
            } else {
                "in progress"
            },
            r.stop
        );
        for rej in &r.ingest.rejected {
            outln!(
                "rejected: {} at {} (LSN): `{}`: {}",
                rej.table,
                rej.position,
                rej.field,
                rej.reason
            );
        }
    }
    Ok(())
}

//! floe's Postgres function: on a schedule (an EventBridge rule; the event
//! itself is ignored), one bounded run of `floe pg sync` with `[postgres]`
//! of the config: the initial snapshot chunk by chunk, then the stream,
//! committed straight to the catalog and the slot advanced after each batch.
//! A run stops cleanly before the function's deadline, after the batch it is
//! in commits; the next invocation continues, so a snapshot of any size
//! spans as many invocations as it needs. Reserved concurrency 1 keeps one
//! reader on the slot.
//!
//! Each run emits the slot's lag (bytes), the WAL it keeps, the replication
//! lag of the last batch, and the age of the oldest change not yet in
//! Iceberg, which the Terraform module alarms on.

use std::time::{Duration, Instant};

use floe_core::deploy::Deployment;
use floe_core::iceberg::NamespaceIdent;
use floe_core::metrics::emf::{Emf, Unit};
use floe_postgres::sync::{Stop, SyncError, SyncOptions, SyncReport, open, sync};
use floe_postgres::{PgConfig, PgError, SlotHealth, conn, format_lsn};
use serde_json::{Value, json};
use tracing::{error, info};

/// Why the function cannot start or a run failed.
#[derive(Debug, thiserror::Error)]
pub enum PgSyncError {
    /// `[postgres]` lacks what the function needs.
    #[error("config key {key}: {message}")]
    Config {
        /// The key at fault.
        key: &'static str,
        /// What to set.
        message: String,
    },
    /// The source (connection, secret, slot).
    #[error(transparent)]
    Source(#[from] PgError),
    /// The run (boxed: a sync error carries its table, position and source).
    #[error(transparent)]
    Sync(Box<SyncError>),
}

impl From<SyncError> for PgSyncError {
    fn from(e: SyncError) -> Self {
        Self::Sync(Box::new(e))
    }
}

/// The most a run keeps back from its deadline for the batch in flight.
const MARGIN: Duration = Duration::from_secs(30);

/// When a run that must be done by `deadline_ms` (the invocation's deadline,
/// ms since the epoch) starts no more batches: the deadline less a margin
/// for the batch in flight, 30 s or a quarter of the time left when that is
/// less, so even a short timeout makes progress.
pub fn run_deadline(deadline_ms: u64, now_ms: i64) -> Instant {
    let left = Duration::from_millis(deadline_ms.saturating_sub(now_ms.max(0) as u64));
    Instant::now() + left - MARGIN.min(left / 4)
}

/// The function's settings, read once at start.
pub struct PgSyncFunction {
    deployment: Deployment,
    namespace: NamespaceIdent,
    max_seconds: Option<u64>,
}

impl PgSyncFunction {
    /// The function over a deployment; fails at start when `[postgres]`
    /// names no Postgres or no tables.
    pub fn new(deployment: &Deployment) -> Result<Self, PgSyncError> {
        let pg = &deployment.config.postgres;
        if pg.conninfo.is_none() {
            return Err(PgSyncError::Config {
                key: "postgres.conninfo",
                message: "the Postgres to read (FLOE_POSTGRES_CONNINFO), e.g. \
                          host=… dbname=… sslmode=verify-full sslrootcert=system"
                    .into(),
            });
        }
        if pg.tables.is_empty() {
            return Err(PgSyncError::Config {
                key: "postgres.tables",
                message: "the schema.table names to replicate (FLOE_POSTGRES_TABLES)".into(),
            });
        }
        let ns = pg.namespace.clone().unwrap_or_else(|| "raw".into());
        let namespace =
            NamespaceIdent::from_strs(ns.split('.')).map_err(|e| PgSyncError::Config {
                key: "postgres.namespace",
                message: e.to_string(),
            })?;
        Ok(Self {
            deployment: deployment.clone(),
            namespace,
            max_seconds: pg.max_seconds,
        })
    }

    /// The source settings, the login re-read from its secret on every run
    /// so that a rotation is picked up.
    async fn source_config(&self) -> Result<PgConfig, PgSyncError> {
        let pg = &self.deployment.config.postgres;
        let conninfo = pg
            .conninfo
            .as_ref()
            .map(|c| c.expose().to_string())
            .unwrap_or_default();
        let mut config = PgConfig::new(
            conninfo,
            pg.slot.clone().unwrap_or_else(|| "floe".into()),
            pg.publication.clone().unwrap_or_else(|| "floe".into()),
            pg.tables.clone(),
        )
        .tuned_by(pg);
        if let Some(arn) = &pg.secret {
            config.secret = Some(conn::login_for(&self.deployment.config, arn).await?);
        }
        Ok(config)
    }

    /// One bounded run: no batch starts that would likely end after
    /// `deadline` (or `postgres.max_seconds` from now). Answers what it did.
    pub async fn handle(
        &self,
        _event: Value,
        deadline: Option<Instant>,
    ) -> Result<Value, PgSyncError> {
        let started = Instant::now();
        let budget = self.max_seconds.map(|s| started + Duration::from_secs(s));
        let deadline = match (deadline, budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let config = self.source_config().await;
        let slot = self
            .deployment
            .config
            .postgres
            .slot
            .clone()
            .unwrap_or_else(|| "floe".into());
        let result = match config {
            Ok(config) => self.run(&config, deadline).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(answer) => Ok(answer),
            Err(e) => {
                error!(%slot, error = %e, "pg sync failed; the slot stays where it was");
                Emf::new()
                    .dimension("function", "pg-sync")
                    .metric("pg_sync_failures", Unit::Count, 1.0)
                    .property("slot", slot.as_str())
                    .property("error", e.to_string())
                    .emit();
                Err(e)
            }
        }
    }

    async fn run(
        &self,
        config: &PgConfig,
        deadline: Option<Instant>,
    ) -> Result<Value, PgSyncError> {
        let mut opts = SyncOptions::new(self.namespace.clone());
        opts.deadline = deadline;
        let mut source = open(&self.deployment, config, &self.namespace).await?;
        let report = sync(&self.deployment, &mut source, config, &opts).await?;
        let health = source.slot_health().await?;
        // Caught up means nothing older than this run waits; otherwise ask
        // the slot how old its first waiting change is.
        let oldest_ms = match report.stop {
            Stop::Empty | Stop::CaughtUp => None,
            Stop::Deadline | Stop::MaxBatches => source.oldest_pending_commit_ms().await?,
        };
        let now = floe_core::clock::now_ms();
        let oldest_age_ms = oldest_ms.map_or(0, |ms| (now - ms).max(0));
        emit(&config.slot, &report, health.as_ref(), oldest_age_ms);
        info!(
            slot = %config.slot,
            batches = report.batches,
            lines = report.lines,
            stop = ?report.stop,
            "pg sync run done"
        );
        Ok(json!({
            "slot": config.slot,
            "batches": report.batches,
            "lines": report.lines,
            "snapshot_rows": report.snapshot_rows,
            "skipped": report.skipped,
            "snapshot_done": report.snapshot_done,
            "stop": report.stop,
            "confirmed_lsn": report.confirmed_lsn.map(format_lsn),
            "records_committed": report.ingest.records_committed,
            "rejected": report.ingest.rejected.len(),
            "slot_lag_bytes": health.as_ref().map(SlotHealth::lag_bytes),
            "wal_retained_bytes": health.as_ref().map(SlotHealth::retained_bytes),
            "lag_ms": report.lag.map(|l| l.as_millis() as u64),
            "oldest_uncommitted_change_age_ms": oldest_age_ms,
        }))
    }
}

/// The run's EMF line: what the module's alarms read.
fn emit(slot: &str, r: &SyncReport, health: Option<&SlotHealth>, oldest_age_ms: i64) {
    let mut emf = Emf::new()
        .dimension("function", "pg-sync")
        .metric("pg_batches", Unit::Count, r.batches as f64)
        .metric("pg_snapshot_rows", Unit::Count, r.snapshot_rows as f64)
        .metric(
            "pg_changes",
            Unit::Count,
            (r.lines - r.snapshot_rows - r.skipped.min(r.lines - r.snapshot_rows)) as f64,
        )
        .metric("pg_rejected", Unit::Count, r.ingest.rejected.len() as f64)
        .metric(
            "pg_oldest_uncommitted_change_age",
            Unit::Milliseconds,
            oldest_age_ms as f64,
        )
        .property("slot", slot)
        .property("stop", serde_json::to_value(r.stop).unwrap_or_default());
    if let Some(h) = health {
        emf = emf
            .metric("pg_slot_lag", Unit::Bytes, h.lag_bytes() as f64)
            .metric("pg_wal_retained", Unit::Bytes, h.retained_bytes() as f64);
    }
    if let Some(lag) = r.lag {
        emf = emf.metric("pg_lag", Unit::Milliseconds, lag.as_millis() as f64);
    }
    emf.emit();
}

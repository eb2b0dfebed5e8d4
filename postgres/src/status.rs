//! Where replication stands, for `floe pg status` and the pg-sync function's
//! metrics: the slot's lag in bytes and the WAL it keeps, the replication lag
//! in seconds, the age of the oldest change not yet in Iceberg, and each
//! table's position and snapshot progress.

use floe_core::ident::display;
use iceberg::NamespaceIdent;
use serde::Serialize;

use crate::sync::{SyncError, SyncTarget, TableMarks, iceberg_table, marks};
use crate::{PgConfig, PgSource, SlotHealth, TableProgress, format_lsn};

/// One table's share of [`PgStatus`].
#[derive(Debug, Clone, Serialize)]
pub struct TableReplication {
    /// `schema.table` in Postgres.
    pub table: String,
    /// The Iceberg table.
    pub iceberg: String,
    /// The slot position it holds, as Postgres prints LSNs.
    pub lsn: Option<String>,
    /// `done`, `pending` (with the key copied last) or `not started`.
    pub snapshot: String,
    /// Commit time in Postgres of the last transaction it holds (ms since the epoch).
    pub source_commit_ms: Option<i64>,
}

/// Where one slot's replication stands.
#[derive(Debug, Clone, Serialize)]
pub struct PgStatus {
    /// The slot.
    pub slot: String,
    /// `pg_replication_slots` for it; `None` when it does not exist.
    pub health: Option<SlotHealth>,
    /// WAL written since floe's confirmed position.
    pub slot_lag_bytes: Option<u64>,
    /// WAL the server keeps for the slot.
    pub wal_retained_bytes: Option<u64>,
    /// Seconds from the newest change the tables hold being committed in
    /// Postgres to now, when changes are waiting (0 when caught up): how far
    /// behind the source the tables are in time.
    pub slot_lag_seconds: Option<f64>,
    /// Seconds since the oldest change not yet in Iceberg was committed in
    /// Postgres; 0 when every change is in; `None` while a sync holds the
    /// slot (status does not compete with it for the slot).
    pub oldest_uncommitted_change_age_seconds: Option<f64>,
    /// Per table.
    pub tables: Vec<TableReplication>,
}

impl PgStatus {
    /// Whether the slot lost changes or is gone (the sync will refuse to run).
    pub fn slot_lost(&self) -> bool {
        self.health.as_ref().is_none_or(SlotHealth::is_lost)
    }
}

/// Reads the status of `config`'s slot and tables at `now_ms`.
pub async fn status(
    target: &dyn SyncTarget,
    config: &PgConfig,
    namespace: &NamespaceIdent,
    now_ms: i64,
) -> Result<PgStatus, SyncError> {
    let source = PgSource::attach(config.clone()).await?;
    let health = source.slot_health().await?;
    // Peeking makes status a reader of the slot: not while a sync reads it.
    let oldest = match &health {
        Some(h) if !h.is_lost() && !h.active => source.oldest_pending_commit_ms().await?,
        _ => None,
    };
    let held = marks(target, config, namespace).await?;
    let newest_held = held.values().filter_map(|m| m.source_commit_ms).max();
    let seconds = |ms: i64| (now_ms - ms).max(0) as f64 / 1000.0;
    let caught_up = health
        .as_ref()
        .is_some_and(|h| !h.active && !h.is_lost() && oldest.is_none());
    let tables = held
        .iter()
        .map(|(pg, m)| table_replication(pg, m, namespace))
        .collect();
    Ok(PgStatus {
        slot: config.slot.clone(),
        slot_lag_bytes: health.as_ref().map(SlotHealth::lag_bytes),
        wal_retained_bytes: health.as_ref().map(SlotHealth::retained_bytes),
        slot_lag_seconds: if caught_up {
            Some(0.0)
        } else {
            newest_held.or(oldest).map(seconds)
        },
        oldest_uncommitted_change_age_seconds: if caught_up {
            Some(0.0)
        } else {
            oldest.map(seconds)
        },
        health,
        tables,
    })
}

fn table_replication(pg: &str, m: &TableMarks, namespace: &NamespaceIdent) -> TableReplication {
    TableReplication {
        table: pg.to_string(),
        iceberg: display(&iceberg_table(namespace, pg)),
        lsn: m.mark.map(format_lsn),
        snapshot: match &m.progress {
            Some(TableProgress::Done) => "done".into(),
            Some(TableProgress::Pending {
                after: Some(key), ..
            }) => format!("pending (copied up to key {})", key.join(",")),
            Some(TableProgress::Pending { after: None, .. }) | None => "not started".into(),
        },
        source_commit_ms: m.source_commit_ms,
    }
}

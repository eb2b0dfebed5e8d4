//! What a table holds now, read from its metadata: the last snapshot, total
//! records, freshness, and whether a given batch is in it yet (for callers that
//! wait for their commit, such as the HTTP function's `?wait=commit`).

use std::time::{Duration, Instant};

use iceberg::TableIdent;
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError};
use crate::ledger::{Ledger, LedgerStore};

/// A table's current state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableStatus {
    /// `namespace.table`.
    pub table: String,
    /// The current snapshot, if any.
    pub snapshot_id: Option<i64>,
    /// When it was committed (ms since the epoch).
    pub snapshot_timestamp_ms: Option<i64>,
    /// Rows in the current snapshot (its summary's `total-records`).
    pub total_records: Option<u64>,
    /// Milliseconds from the last commit to `now`.
    pub freshness_ms: Option<i64>,
}

/// The status of `ident` as seen at `now_ms`.
pub async fn table_status(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    now_ms: i64,
) -> Result<TableStatus, CatalogError> {
    let loaded = catalog.load_table(ident).await?;
    let snapshot = loaded.metadata.current_snapshot();
    let ts = snapshot.map(|s| s.timestamp_ms());
    Ok(TableStatus {
        table: crate::ident::display(ident),
        snapshot_id: snapshot.map(|s| s.snapshot_id()),
        snapshot_timestamp_ms: ts,
        total_records: snapshot.and_then(|s| {
            s.summary()
                .additional_properties
                .get("total-records")
                .and_then(|v| v.parse().ok())
        }),
        freshness_ms: ts.map(|t| (now_ms - t).max(0)),
    })
}

/// Polls the table until batch `batch_id`, made at `made_ms`, is in it
/// (`Ok(true)`) or `timeout` passes (`Ok(false)`); reading the ledger is the
/// only way to know, since the committer that lands it runs elsewhere.
pub async fn wait_for_batch(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    batch_id: &str,
    made_ms: i64,
    timeout: Duration,
) -> Result<bool, CatalogError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(100);
    let store = std::sync::Arc::new(LedgerStore::new(catalog.file_io().clone()));
    loop {
        match catalog.load_table(ident).await {
            Ok(loaded) => {
                let ledger = Ledger::open(store.clone(), &loaded.metadata)
                    .await
                    .map_err(|e| CatalogError::store("opening the ledger", e))?;
                let landed = ledger
                    .has_batch(batch_id, made_ms.saturating_sub(crate::clock::SKEW_MS))
                    .await
                    .map_err(|e| CatalogError::store("reading the ledger", e))?;
                if landed {
                    return Ok(true);
                }
            }
            Err(CatalogError::NoSuchTable { .. }) => {}
            Err(e) => return Err(e),
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Ok(false);
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

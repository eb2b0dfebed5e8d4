//! floe's maintenance function: on a schedule (an EventBridge rule; the event
//! itself is ignored), `floe maintain` on each table of `maintenance.tables`,
//! or on every table of the catalog that floe writes (tables other engines
//! created are skipped unless named): compaction and manifest merging in one
//! snapshot, snapshot expiry, orphan cleanup. A table that fails does not stop
//! the others; the invocation fails afterwards so the failure is counted and
//! alarmed on.

use floe_core::catalog::{CatalogError, CatalogRef};
use floe_core::deploy::Deployment;
use floe_core::ident::{display, parse_table};
use floe_core::maintain::orphans::Lister;
use floe_core::maintain::owned::select;
use floe_core::maintain::{MaintainOptions, MaintainReport, maintain};
use floe_core::metrics::emf::{Emf, Unit};
use serde_json::{Value, json};
use tracing::{error, info};

/// Why an invocation failed.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// The catalog could not list its tables.
    #[error("listing the catalog's tables: {0}")]
    List(#[from] CatalogError),
    /// Some tables could not be maintained (the others were).
    #[error("maintenance failed for {}", listed(.0))]
    Tables(Vec<(String, String)>),
}

fn listed(failures: &[(String, String)]) -> String {
    let each: Vec<String> = failures.iter().map(|(t, e)| format!("{t} ({e})")).collect();
    each.join("; ")
}

/// The maintenance function's state, kept across invocations of one instance.
pub struct MaintenanceFunction {
    catalog: CatalogRef,
    tables: Vec<String>,
    lister: Lister,
    orphan_window_ms: i64,
}

/// When compaction steps must stop starting: the invocation's deadline less
/// the time a step (1 GiB of input at most) may take to finish and commit.
pub fn deadline_of(context: &lambda_runtime::Context) -> Option<std::time::Instant> {
    const STEP_MARGIN_MS: u64 = 3 * 60 * 1000;
    let now = floe_core::clock::now_ms();
    let left = u64::try_from(i64::try_from(context.deadline).ok()? - now).ok()?;
    Some(
        std::time::Instant::now()
            + std::time::Duration::from_millis(left.saturating_sub(STEP_MARGIN_MS)),
    )
}

impl MaintenanceFunction {
    /// The function over a deployment.
    pub fn new(deployment: &Deployment) -> Self {
        Self {
            catalog: deployment.catalog.clone(),
            tables: deployment.config.maintenance.tables.clone(),
            lister: deployment.lister.clone(),
            // Checked against the queue's and DLQ's retention when the config loaded.
            orphan_window_ms: deployment.config.maintenance.orphan_window_ms(),
        }
    }

    /// Maintains every configured table (or every table the catalog lists)
    /// with the tables' own expiry properties and the configured orphan window;
    /// no compaction step starts after `deadline`, so a large backlog drains
    /// over several scheduled runs instead of timing one out. Answers one
    /// report per table.
    pub async fn handle(
        &self,
        _event: Value,
        deadline: Option<std::time::Instant>,
    ) -> Result<Value, MaintenanceError> {
        self.run(&MaintainOptions {
            lister: self.lister.clone(),
            deadline,
            orphan_window_ms: self.orphan_window_ms,
            ..MaintainOptions::default()
        })
        .await
    }

    /// [`MaintenanceFunction::handle`] with explicit options (tests move "now").
    pub async fn run(&self, opts: &MaintainOptions) -> Result<Value, MaintenanceError> {
        // Names were checked when the config was loaded.
        let named = self
            .tables
            .iter()
            .filter_map(|t| parse_table(t).ok())
            .collect();
        let selection = select(&self.catalog, named).await?;
        let mut reports = Vec::new();
        let mut failed = selection.failed;
        for ident in &selection.tables {
            let table = display(ident);
            match maintain(&self.catalog, ident, opts).await {
                Ok(report) => {
                    info!(
                        %table,
                        compacted_files = report.compacted_files,
                        expired_snapshots = report.expired_snapshots,
                        deleted_files = report.deleted_files.len(),
                        orphans = report.orphans.len(),
                        "table maintained"
                    );
                    emit(&report);
                    reports.push(summary(&report));
                }
                Err(e) => {
                    error!(%table, error = %e, "maintenance failed; the other tables go on");
                    failed.push((table, e.to_string()));
                }
            }
        }
        if !failed.is_empty() {
            Emf::new()
                .dimension("function", "maintenance")
                .metric("maintenance_failures", Unit::Count, failed.len() as f64)
                .emit();
            return Err(MaintenanceError::Tables(failed));
        }
        Ok(json!({ "tables": reports, "skipped": selection.skipped }))
    }
}

fn summary(r: &MaintainReport) -> Value {
    json!({
        "table": r.table,
        "data_files_before": r.before.data_files,
        "data_files_after": r.after.data_files,
        "snapshots_before": r.before.snapshots,
        "snapshots_after": r.after.snapshots,
        "compacted_files": r.compacted_files,
        "expired_snapshots": r.expired_snapshots,
        "deleted_files": r.deleted_files.len(),
        "orphans": r.orphans.len(),
    })
}

fn emit(r: &MaintainReport) {
    Emf::new()
        .dimension("function", "maintenance")
        .metric("compacted_files", Unit::Count, r.compacted_files as f64)
        .metric("expired_snapshots", Unit::Count, r.expired_snapshots as f64)
        .metric("deleted_files", Unit::Count, r.deleted_files.len() as f64)
        .metric("orphans_deleted", Unit::Count, r.orphans.len() as f64)
        .metric("data_files", Unit::Count, r.after.data_files as f64)
        .property("table", r.table.as_str())
        .emit();
}

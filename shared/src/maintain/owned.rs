//! Which tables maintenance looks after when none are named: the ones floe
//! writes. A table another engine created and writes (pyiceberg, Spark) has
//! its own retention, its own orphan rules and files floe cannot tell from
//! orphans, so it is maintained only when the config names it.

use iceberg::TableIdent;
use iceberg::spec::TableMetadata;
use tracing::{info, warn};

use crate::catalog::CatalogRef;
use crate::ident::display;

/// True when floe writes this table: it was created by floe (the
/// [`crate::tabledef::MANAGED`] property), or floe committed to it (its
/// ledger property, or floe's summary in a snapshot, for tables of builds
/// older than the property).
pub fn floe_writes(metadata: &TableMetadata) -> bool {
    let props = metadata.properties();
    props
        .get(crate::tabledef::MANAGED)
        .is_some_and(|v| v == "true")
        || props.contains_key(crate::ledger::PROPERTY)
        || metadata.snapshots().any(|s| {
            s.summary()
                .additional_properties
                .contains_key(crate::ledger::BATCH_IDS)
        })
}

/// The tables a maintenance run covers.
#[derive(Debug, Default)]
pub struct Selection {
    /// To maintain.
    pub tables: Vec<TableIdent>,
    /// Listed by the catalog but written by another engine: left alone.
    pub skipped: Vec<String>,
    /// Could not be loaded to tell (name, why); a later run tries again.
    pub failed: Vec<(String, String)>,
}

/// `named` when it is not empty (naming a table is consent to maintain it,
/// whoever writes it), else every table of the catalog that floe writes.
pub async fn select(
    catalog: &CatalogRef,
    named: Vec<TableIdent>,
) -> Result<Selection, crate::catalog::CatalogError> {
    if !named.is_empty() {
        return Ok(Selection {
            tables: named,
            ..Selection::default()
        });
    }
    let mut out = Selection::default();
    for ident in catalog.list_tables().await? {
        let table = display(&ident);
        match catalog.load_table(&ident).await {
            Ok(loaded) if floe_writes(&loaded.metadata) => out.tables.push(ident),
            Ok(_) => {
                info!(%table, "another engine writes this table; not maintained unless maintenance.tables names it");
                out.skipped.push(table);
            }
            Err(e) => {
                warn!(%table, error = %e, "could not load the table to tell who writes it");
                out.failed.push((table, e.to_string()));
            }
        }
    }
    Ok(out)
}

//! The build stage: planned snapshots made into a catalog commit (manifests,
//! manifest list and metadata written, requirements chosen), not yet
//! handed to the catalog.

use std::collections::HashMap;

use iceberg::io::FileIO;

use super::error::CommitError;
use super::snapshot::{SnapshotPlan, SnapshotProducer, Written};
use crate::catalog::{LoadedTable, TableCommit};

/// Table property: delete metadata files that fall out of the metadata log.
pub const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";

/// A commit built on one loaded table.
pub(super) struct Built {
    pub commit: TableCommit,
    /// The files written for it: discarded if the catalog refuses it.
    pub written: Written,
    /// The snapshots it adds, in order.
    pub snapshot_ids: Vec<i64>,
    /// Metadata files it drops from the log, deleted once it lands.
    pub versions: Vec<String>,
}

/// Builds `plans` (and `properties`, when given) on top of `base`.
pub(super) async fn build(
    file_io: &FileIO,
    table: &str,
    base: &LoadedTable,
    plans: Vec<SnapshotPlan>,
    properties: Option<HashMap<String, String>>,
) -> Result<Built, CommitError> {
    let build_err = |source| CommitError::Build {
        table: table.to_string(),
        source: Box::new(source),
    };
    let mut producer = SnapshotProducer::new(file_io, base)
        .await
        .map_err(build_err)?;
    for plan in plans {
        producer.add(plan).await.map_err(build_err)?;
    }
    if let Some(properties) = properties {
        producer.set_properties(properties).map_err(build_err)?;
    }
    let (result, requirements, written, snapshot_ids) = producer.finish().map_err(build_err)?;
    let versions = expired_versions(&result);
    Ok(Built {
        commit: TableCommit {
            base: base.clone(),
            metadata: result.metadata,
            updates: result.changes,
            requirements,
        },
        written,
        snapshot_ids,
        versions,
    })
}

/// Metadata files dropped from the log by this build, when the table asks for
/// them to be deleted (`write.metadata.delete-after-commit.enabled`, on for
/// tables floe creates): without it, every commit's metadata file stays.
pub(super) fn expired_versions(result: &iceberg::spec::TableMetadataBuildResult) -> Vec<String> {
    let enabled = result
        .metadata
        .properties()
        .get(DELETE_AFTER_COMMIT)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !enabled {
        return Vec::new();
    }
    result
        .expired_metadata_logs
        .iter()
        .map(|l| l.metadata_file.clone())
        .collect()
}

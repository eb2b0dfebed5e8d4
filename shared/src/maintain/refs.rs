//! A table's refs (branches and tags), which other engines create beside
//! floe's `main`: pyiceberg's `manage_snapshots().create_tag(…)`, Spark's
//! `ALTER TABLE … CREATE BRANCH`, write-audit-publish branches. Maintenance
//! must see every one of them to keep what they reference.

use std::collections::BTreeMap;

use iceberg::spec::{SnapshotReference, TableMetadata};
use iceberg::{Error, ErrorKind};

/// Every ref of `metadata` by name, `main` included.
///
/// iceberg 0.10.1 keeps the map crate-private (only `snapshot_for_ref` by a
/// known name is public), so the refs are read back from the spec's JSON form,
/// which the crate serialises from that same map.
pub fn of(metadata: &TableMetadata) -> iceberg::Result<BTreeMap<String, SnapshotReference>> {
    let json = serde_json::to_value(metadata)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, "table metadata").with_source(e))?;
    match json.get("refs") {
        None | Some(serde_json::Value::Null) => Ok(BTreeMap::new()),
        Some(refs) => serde_json::from_value(refs.clone())
            .map_err(|e| Error::new(ErrorKind::DataInvalid, "table refs").with_source(e)),
    }
}

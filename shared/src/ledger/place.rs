//! Where a table's ledger files live: beside the table, never under its
//! location. Every engine's orphan cleanup (Iceberg Java's
//! `remove_orphan_files`, S3 Tables' unreferenced file removal, Athena's
//! VACUUM) deletes each file under the table location that table metadata
//! does not name, and ledger files are named only by a table property; one
//! level up, in `<parent>/_floe/ledger/<table uuid>/`, none of them looks.
//! A table whose location has no parent (a bucket of its own, as S3 Tables
//! gives) names a root with the table property `floe.ledger.location`.

use iceberg::spec::TableMetadata;

/// Table property: the directory under which the table's ledger directory
/// (named by the table's uuid) is made, instead of beside the table.
pub const LOCATION_PROPERTY: &str = "floe.ledger.location";

/// The ledger directory below a table's parent directory.
const BESIDE: &str = "_floe/ledger";

/// Inside the table's location, for a table that has no parent: the one
/// place left, which orphan cleanup can reach (`floe ledger repair` rebuilds).
const INSIDE: &str = "_floe-ledger";

/// The directory new ledger files of the table go to.
pub fn dir(metadata: &TableMetadata) -> String {
    let uuid = metadata.uuid().simple();
    if let Some(root) = metadata
        .properties()
        .get(LOCATION_PROPERTY)
        .map(|r| r.trim().trim_end_matches('/'))
        .filter(|r| !r.is_empty())
    {
        return format!("{root}/{uuid}");
    }
    let location = metadata.location().trim_end_matches('/');
    match parent(location) {
        Some(parent) => format!("{parent}/{BESIDE}/{uuid}"),
        None => format!("{location}/{INSIDE}/{uuid}"),
    }
}

/// The directory of key files of the table's keyed requests.
pub fn keys_dir(metadata: &TableMetadata) -> String {
    format!("{}/keys", dir(metadata))
}

/// True when the ledger directory is under the table's location, where
/// another engine's orphan cleanup deletes it.
pub fn exposed(metadata: &TableMetadata) -> bool {
    crate::uri::within(&dir(metadata), metadata.location())
}

/// The parent directory of a location (`s3://b/wh/t` → `s3://b/wh`,
/// `s3://b/t` → `s3://b`, `/w/t` → `/w`); `None` for a bucket or a
/// filesystem root.
fn parent(location: &str) -> Option<&str> {
    let (authority_end, authority) = match location.find("://") {
        Some(i) => {
            let start = i + 3;
            let end = start + location[start..].find('/')?;
            (end, &location[start..end])
        }
        None => (0, ""),
    };
    let cut = location.rfind('/')?;
    // At the path's first slash the parent is the authority itself: a
    // bucket is a directory, an empty authority (`file:///t`) or none is not.
    if cut == authority_end && authority.is_empty() {
        return None;
    }
    Some(&location[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_of_a_table_location() {
        assert_eq!(parent("s3://b/wh/ns/t"), Some("s3://b/wh/ns"));
        assert_eq!(parent("s3://b/t"), Some("s3://b"));
        assert_eq!(parent("s3://b"), None);
        assert_eq!(parent("file:///tmp/wh/t"), Some("file:///tmp/wh"));
        assert_eq!(parent("/tmp/wh/t"), Some("/tmp/wh"));
        assert_eq!(parent("/t"), None);
    }
}

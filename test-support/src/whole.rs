//! Checks that a table is whole: every file its metadata or metadata log
//! names is there, so no reader can meet a missing file.

use floe_core::catalog::Catalog;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::spec::{ManifestList, TableMetadata};

/// Every file the table's current metadata, its metadata log, its snapshots'
/// manifest lists and manifests, and its ledger head name that does not
/// exist; empty when the table is whole.
pub async fn missing_files(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<String> {
    let io = catalog.file_io();
    let loaded = catalog.load_table(ident).await.unwrap();
    let meta: &TableMetadata = &loaded.metadata;
    let mut named: Vec<String> = vec![loaded.metadata_location.clone()];
    named.extend(meta.metadata_log().iter().map(|l| l.metadata_file.clone()));
    if let Some(head) = meta.properties().get(floe_core::ledger::PROPERTY) {
        named.push(head.clone());
    }
    let mut missing = Vec::new();
    for snapshot in meta.snapshots() {
        let list = snapshot.manifest_list().to_string();
        let Ok(bytes) = async { io.new_input(&list)?.read().await }.await else {
            missing.push(list);
            continue;
        };
        let manifests = ManifestList::parse_with_version(&bytes, meta.format_version()).unwrap();
        for m in manifests.entries() {
            let Ok(manifest) = m.load_manifest(io).await else {
                missing.push(m.manifest_path.clone());
                continue;
            };
            named.extend(
                manifest
                    .entries()
                    .iter()
                    .filter(|e| e.is_alive())
                    .map(|e| e.file_path().to_string()),
            );
        }
    }
    named.sort();
    named.dedup();
    for path in named {
        if !io.exists(&path).await.unwrap_or(false) {
            missing.push(path);
        }
    }
    missing
}

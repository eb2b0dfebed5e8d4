//! Maintenance's commits on an in-memory catalog whose answers a script
//! decides ([`crate::catalog::memory`]): no I/O.

use std::sync::Arc;

use super::expire::ExpiryRule;
use crate::catalog::Catalog;
use crate::catalog::memory::{Answer, MemoryCatalog};
use crate::clock::now_ms;
use crate::commit::tests::{Marker, engine, table};

/// Keeps the newest snapshot only.
const NEWEST: ExpiryRule = ExpiryRule {
    max_age_ms: 0,
    min_keep: 1,
    max_ref_age_ms: None,
    max_snapshots: None,
};

#[tokio::test]
async fn an_expiry_whose_answer_was_lost_is_found_and_still_deletes_its_files() {
    for lost in [Answer::Lose, Answer::Late] {
        let catalog = Arc::new(MemoryCatalog::new());
        let ident = table(&catalog).await;
        let engine = engine(&catalog, 4);
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.extend(engine.rewrite(&ident, &Marker::default()).await.unwrap());
        }
        let before = catalog.load_table(&ident).await.unwrap();
        let list = |id: i64| {
            let snapshot = before.metadata.snapshot_by_id(id).unwrap();
            snapshot.manifest_list().to_string()
        };
        catalog.then([lost]);
        let catalog_ref: crate::catalog::CatalogRef = catalog.clone();
        // Commits keep snapshot times increasing, so three quick rewrites
        // can stamp times past the clock: expire as of just after the newest.
        let newest = before.metadata.snapshots().map(|s| s.timestamp_ms()).max();
        let now = newest.map_or_else(now_ms, |t| t.max(now_ms()) + 1);
        let (expiry, files) = super::expire(&catalog_ref, &ident, NEWEST, now)
            .await
            .unwrap();
        assert_eq!(catalog.applied(), 4, "{lost:?}: three rewrites, one expiry");
        assert_eq!(expiry.snapshots, ids[..2].to_vec(), "{lost:?}");
        let after = catalog.load_table(&ident).await.unwrap();
        let left: Vec<i64> = after
            .metadata
            .snapshots()
            .map(|s| s.snapshot_id())
            .collect();
        assert_eq!(left, ids[2..].to_vec(), "{lost:?}");
        // The manifest lists of the two expired snapshots are the
        // expiry's to delete, the kept one's is not.
        for (n, id) in ids.iter().enumerate() {
            let list = list(*id);
            assert_eq!(
                files.contains(&list),
                n < 2,
                "{lost:?}: {list} in {files:?}"
            );
        }
    }
}

//! Helpers shared by the integration tests.

use arrow_array::RecordBatch;
use floe_core::catalog::Catalog;
use floe_core::iceberg::TableIdent;
use futures::TryStreamExt;

/// Every row of the table's current snapshot, read by iceberg-rust's scan
/// (which applies equality and position deletes).
///
/// iceberg-rust 0.10.1 plans data entries only once the delete-file index is
/// complete, and that waits for the manifest loader, which blocks on a data
/// channel as small as the concurrency limit (the CPU count): with many small
/// manifests and delete files it can wait forever. A generous limit keeps the
/// channels from filling; the timeout turns any remaining hang into a failure.
pub async fn scan(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<RecordBatch> {
    let loaded = catalog.load_table(ident).await.unwrap();
    let table = loaded.to_table(catalog.file_io().clone()).unwrap();
    let read = async {
        table
            .scan()
            .select_all()
            .with_concurrency_limit(4096)
            .build()
            .unwrap()
            .to_arrow()
            .await
            .unwrap()
            .try_collect::<Vec<RecordBatch>>()
            .await
            .unwrap()
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), read)
        .await
        .expect("iceberg-rust scan did not finish within 120 s")
}

//! Helpers shared by the integration tests.

use arrow_array::RecordBatch;
use floe_core::catalog::Catalog;
use floe_core::iceberg::TableIdent;
use futures::TryStreamExt;

/// Every row of the table's current snapshot, read by iceberg-rust's scan
/// (which applies equality and position deletes).
pub async fn scan(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<RecordBatch> {
    let loaded = catalog.load_table(ident).await.unwrap();
    loaded
        .to_table(catalog.file_io().clone())
        .unwrap()
        .scan()
        .select_all()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

//! What floe's integration tests share, in floe-core's test binaries and
//! in the functions' and the CLI's: a table's rows read back by
//! iceberg-rust ([`scan`]), the adversarial delivery harness, a catalog
//! that loses a race on purpose, commit requests made as a writer makes
//! them, Lambda events as the functions take them, and the local servers and Python readers the tests run against.

pub mod events;
pub mod glue;
pub mod harness;
pub mod overtaking;
pub mod product;
pub mod racing;
pub mod requests;
pub mod services;
pub mod whole;

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
/// channels from filling. Its equality-delete loader also loses a wake-up now
/// and then (a reader starts waiting on a `Notify` just after the loader
/// signalled it: apache/iceberg-rust#2873), which hangs that one scan; a
/// fresh scan reads the same files, so a scan that does not finish in 30 s is
/// started again, up to four times.
pub async fn scan(catalog: &dyn Catalog, ident: &TableIdent) -> Vec<RecordBatch> {
    let loaded = catalog.load_table(ident).await.unwrap();
    let table = loaded.to_table(catalog.file_io().clone()).unwrap();
    for _ in 0..4 {
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
        if let Ok(batches) = tokio::time::timeout(std::time::Duration::from_secs(30), read).await {
            return batches;
        }
    }
    panic!("iceberg-rust's scan of {ident} did not finish in four tries of 30 s")
}

//! A catalog whose commits take longer: the slow catalogs of the commit-regime
//! benchmark (Redpanda Connect's sweep injects 50 ms to 5 s per commit), to
//! measure how many requests the committer coalesces while one commit is out.
//! It can also note when each table's commits land, so a benchmark measures
//! freshness at the moment data became visible, not when the committer's
//! run (all its tables) ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};

use super::{Catalog, CatalogError, CatalogRef, LoadedTable, TableCommit};
use crate::clock::now_ms;
use crate::ident::display;

/// When each table's latest commit landed, ms since epoch, by `ns.table`.
pub type Landed = Arc<Mutex<HashMap<String, i64>>>;

/// `inner`, with `latency` added to every commit.
#[derive(Debug)]
pub struct Delayed {
    inner: CatalogRef,
    latency: Duration,
    landed: Option<Landed>,
}

impl Delayed {
    /// Wraps `inner`.
    pub fn new(inner: CatalogRef, latency: Duration) -> Self {
        Self {
            inner,
            latency,
            landed: None,
        }
    }

    /// Notes in `landed` when each successful commit of a table returned.
    pub fn noting(mut self, landed: Landed) -> Self {
        self.landed = Some(landed);
        self
    }
}

#[async_trait]
impl Catalog for Delayed {
    fn file_io(&self) -> &FileIO {
        self.inner.file_io()
    }

    fn default_location(&self, ident: &TableIdent) -> String {
        self.inner.default_location(ident)
    }

    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        self.inner.ensure_namespace(namespace).await
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        self.inner.create_table(ident, creation).await
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        self.inner.load_table(ident).await
    }

    async fn commit(&self, commit: TableCommit) -> Result<LoadedTable, CatalogError> {
        tokio::time::sleep(self.latency).await;
        let table = self.landed.as_ref().map(|_| display(&commit.base.ident));
        let loaded = self.inner.commit(commit).await?;
        if let (Some(landed), Some(table)) = (&self.landed, table)
            && let Ok(mut map) = landed.lock()
        {
            map.insert(table, now_ms());
        }
        Ok(loaded)
    }

    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        self.inner.list_tables().await
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        self.inner.drop_table(ident).await
    }

    fn swaps_pointer(&self) -> bool {
        self.inner.swaps_pointer()
    }
}

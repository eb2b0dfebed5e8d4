//! A catalog whose commits take longer: the slow catalogs of the commit-regime
//! benchmark (Redpanda Connect's sweep injects 50 ms to 5 s per commit), to
//! measure how many requests the committer coalesces while one commit is out.

use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};

use super::{Catalog, CatalogError, CatalogRef, LoadedTable, TableCommit};

/// `inner`, with `latency` added to every commit.
#[derive(Debug)]
pub struct Delayed {
    inner: CatalogRef,
    latency: Duration,
}

impl Delayed {
    /// Wraps `inner`.
    pub fn new(inner: CatalogRef, latency: Duration) -> Self {
        Self { inner, latency }
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
        self.inner.commit(commit).await
    }

    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        self.inner.list_tables().await
    }
}

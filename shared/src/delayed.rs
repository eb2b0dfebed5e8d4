//! A benchmark's catalog, kept apart from the production ones: commits that
//! take longer, as the slow catalogs of the commit-regime
//! benchmark (Redpanda Connect's sweep injects 50 ms to 5 s per commit), to
//! measure how many requests the committer coalesces while one commit is out.
//! It can also note when each table's commits land, so a benchmark measures
//! freshness at the moment data became visible, not when the committer's
//! run (all its tables) ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::catalog::{CatalogRef, Committed, TableCommit, Wrapping};
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
impl Wrapping for Delayed {
    fn inner(&self) -> &CatalogRef {
        &self.inner
    }

    async fn around_commit(&self, commit: TableCommit) -> Committed {
        tokio::time::sleep(self.latency).await;
        let table = self.landed.as_ref().map(|_| display(&commit.base.ident));
        let committed = self.inner.commit(commit).await;
        if let (Committed::Landed(_), Some(landed), Some(table)) = (&committed, &self.landed, table)
            && let Ok(mut map) = landed.lock()
        {
            map.insert(table, now_ms());
        }
        committed
    }
}

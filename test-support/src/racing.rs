//! A catalog that loses a race on purpose: just before the first commit it
//! forwards, a rival request lands through the engine on the inner catalog,
//! so the commit it was asked for is planned on a stale base and must be
//! refused by the real catalog (SQLite's compare-and-swap, a REST 409).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use floe_core::catalog::{CatalogError, CatalogRef, Committed, TableCommit, Wrapping};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::request::CommitRequest;

/// The racing catalog; see the module doc.
#[derive(Debug)]
pub struct Racing {
    inner: CatalogRef,
    rival: Mutex<Option<CommitRequest>>,
    raced: AtomicBool,
    conflicts: AtomicUsize,
}

impl Racing {
    /// `inner`, with `rival` landing before the first commit.
    pub fn new(inner: CatalogRef, rival: CommitRequest) -> Arc<Self> {
        Arc::new(Self {
            inner,
            rival: Mutex::new(Some(rival)),
            raced: AtomicBool::new(false),
            conflicts: AtomicUsize::new(0),
        })
    }

    /// Whether the rival has landed.
    pub fn raced(&self) -> bool {
        self.raced.load(Ordering::SeqCst)
    }

    /// Commits the inner catalog refused as conflicting.
    pub fn conflicts(&self) -> usize {
        self.conflicts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Wrapping for Racing {
    fn inner(&self) -> &CatalogRef {
        &self.inner
    }

    async fn around_commit(&self, commit: TableCommit) -> Committed {
        let rival = self.rival.lock().unwrap().take();
        if let Some(rival) = rival {
            let engine = CommitEngine::new(self.inner.clone(), RetryPolicy::default());
            let out = engine
                .append(&commit.base.ident, vec![rival])
                .await
                .unwrap();
            assert_eq!(out.committed.len(), 1, "the rival landed");
            self.raced.store(true, Ordering::SeqCst);
        }
        let result = self.inner.commit(commit).await;
        if matches!(result, Committed::NotApplied(CatalogError::Conflict { .. })) {
            self.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

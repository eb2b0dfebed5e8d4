//! A catalog whose first commit is overtaken before its committer learns the
//! outcome: once the inner catalog has answered that commit (applied and
//! then failed, through a fault or a proxy that loses answers), a rival's
//! request lands through another catalog on the same table, and only then
//! is the answer handed back. The committer then finds the table moved on.

use std::sync::Mutex;

use async_trait::async_trait;
use floe_core::catalog::{CatalogRef, Committed, TableCommit, Wrapping};
use floe_core::commit::{CommitEngine, RetryPolicy};
use floe_core::request::CommitRequest;

/// The overtaking catalog; see the module doc.
#[derive(Debug)]
pub struct Overtaking {
    inner: CatalogRef,
    rival_catalog: CatalogRef,
    rival: Mutex<Option<CommitRequest>>,
    answer: Mutex<Option<String>>,
}

impl Overtaking {
    /// `inner`, whose first commit `rival` overtakes through `rival_catalog`.
    pub fn new(inner: CatalogRef, rival_catalog: CatalogRef, rival: CommitRequest) -> Self {
        Self {
            inner,
            rival_catalog,
            rival: Mutex::new(Some(rival)),
            answer: Mutex::new(None),
        }
    }

    /// What the inner catalog answered the overtaken commit, once it has.
    pub fn answer(&self) -> Option<String> {
        self.answer.lock().unwrap().clone()
    }
}

#[async_trait]
impl Wrapping for Overtaking {
    fn inner(&self) -> &CatalogRef {
        &self.inner
    }

    async fn around_commit(&self, commit: TableCommit) -> Committed {
        let ident = commit.base.ident.clone();
        let result = self.inner.commit(commit).await;
        let rival = self.rival.lock().unwrap().take();
        if let Some(rival) = rival {
            *self.answer.lock().unwrap() = Some(match &result {
                Committed::Landed(_) => "ok".to_string(),
                Committed::NotApplied(e) | Committed::Unknown(e) => e.to_string(),
            });
            let engine = CommitEngine::new(self.rival_catalog.clone(), RetryPolicy::default());
            let out = engine.append(&ident, vec![rival]).await.unwrap();
            assert_eq!(out.committed.len(), 1, "the rival landed: {out:?}");
        }
        result
    }
}

//! What an in-process committer (`floe serve`'s) last saw of each table and
//! batch, so the HTTP answers can say why a batch is not in its table yet:
//! a table whose commits fail, a request dead-lettered with its reason. The
//! Lambda function has no such view (its committer runs elsewhere) and
//! answers without it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::Notify;

/// Batches whose failure is remembered; older ones are forgotten first.
const MAX_BATCHES: usize = 10_000;

#[derive(Debug, Default)]
struct State {
    /// Bumped on every failure, so a waiter sees only failures after it began.
    generation: u64,
    /// Tables whose last commit failed, with why.
    failing: HashMap<String, String>,
    /// Batches that failed to commit: when (generation) and why.
    batches: HashMap<String, (u64, String)>,
    order: VecDeque<String>,
}

/// The committer's view of failing tables and batches.
#[derive(Debug, Default)]
pub struct CommitWatch {
    state: Mutex<State>,
    changed: Notify,
}

/// Where a wait began: only failures recorded after it count.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark(u64);

impl CommitWatch {
    /// A watch that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Why `table`'s last commit failed, until one succeeds.
    pub fn failing(&self, table: &str) -> Option<String> {
        self.state.lock().ok()?.failing.get(table).cloned()
    }

    /// Every failing table with why, by name.
    pub fn failing_tables(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .state
            .lock()
            .map(|s| s.failing.clone().into_iter().collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Now, for [`CommitWatch::failure_since`].
    pub fn mark(&self) -> Mark {
        Mark(self.state.lock().map(|s| s.generation).unwrap_or(0))
    }

    /// Resolves with the reason once batch `batch_id` fails to commit (or is
    /// dead-lettered) after `mark`; pending while it does not.
    pub async fn failure_since(&self, batch_id: &str, mark: Mark) -> String {
        loop {
            let changed = self.changed.notified();
            if let Ok(s) = self.state.lock()
                && let Some((generation, reason)) = s.batches.get(batch_id)
                && *generation > mark.0
            {
                return reason.clone();
            }
            changed.await;
        }
    }

    /// `table` committed: it is not failing any more.
    pub fn committed(&self, table: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.failing.remove(table);
        }
    }

    /// `table`'s commit of `batch_ids` failed for `reason`; they stay queued.
    pub fn table_failed<'a>(
        &self,
        table: &str,
        batch_ids: impl IntoIterator<Item = &'a str>,
        reason: &str,
    ) {
        if let Ok(mut s) = self.state.lock() {
            s.failing.insert(table.to_string(), reason.to_string());
            let why = format!(
                "commits to {table} are failing: {reason}; the request stays queued and is retried"
            );
            s.record(batch_ids, &why);
        }
        self.changed.notify_waiters();
    }

    /// Batch `batch_id` was dead-lettered for `reason`: it will never commit.
    pub fn dead_lettered(&self, batch_id: &str, reason: &str) {
        if let Ok(mut s) = self.state.lock() {
            let why = format!("the commit request was dead-lettered: {reason}");
            s.record([batch_id], &why);
        }
        self.changed.notify_waiters();
    }
}

impl State {
    fn record<'a>(&mut self, batch_ids: impl IntoIterator<Item = &'a str>, why: &str) {
        self.generation += 1;
        for id in batch_ids {
            if self
                .batches
                .insert(id.to_string(), (self.generation, why.to_string()))
                .is_none()
            {
                self.order.push_back(id.to_string());
            }
        }
        while self.order.len() > MAX_BATCHES {
            if let Some(old) = self.order.pop_front() {
                self.batches.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_sees_only_failures_after_it_began() {
        let watch = CommitWatch::new();
        watch.table_failed("a.t", ["b1"], "disk gone");
        assert!(watch.failing("a.t").unwrap().contains("disk gone"));
        let mark = watch.mark();
        let pending = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            watch.failure_since("b1", mark),
        )
        .await;
        assert!(pending.is_err(), "an earlier failure must not end the wait");
        watch.dead_lettered("b1", "table dropped");
        let why = watch.failure_since("b1", mark).await;
        assert!(why.contains("dead-lettered: table dropped"), "{why}");
        watch.committed("a.t");
        assert_eq!(watch.failing("a.t"), None);
    }
}

//! The attempts of one optimistic commit, shared by every loop that commits
//! (requests, maintenance rewrites, schema updates): how many, how long to
//! wait between them, and when to stop, from the engine's policy or the
//! table's own `commit.retry.*` properties (Iceberg's names, which Spark and
//! pyiceberg read too).

use std::time::Duration;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use tokio::time::Instant;

use crate::catalog::{CatalogError, LoadedTable};

/// Table property: retries after the first attempt.
pub const NUM_RETRIES: &str = "commit.retry.num-retries";
/// Table property: the first wait between attempts, ms.
pub const MIN_WAIT_MS: &str = "commit.retry.min-wait-ms";
/// Table property: the longest wait between attempts, ms.
pub const MAX_WAIT_MS: &str = "commit.retry.max-wait-ms";
/// Table property: no attempt starts this long after the first, ms.
pub const TOTAL_TIMEOUT_MS: &str = "commit.retry.total-timeout-ms";

/// Bounds on retrying a commit.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts before giving up (the batch then returns to its queue).
    pub max_attempts: u32,
    /// First backoff; doubles per attempt.
    pub initial_backoff: Duration,
    /// Longest single backoff.
    pub max_backoff: Duration,
    /// No attempt starts this long after the first; `None`: attempts alone bound it.
    pub total_timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(25),
            max_backoff: Duration::from_secs(2),
            total_timeout: None,
        }
    }
}

impl RetryPolicy {
    /// This policy with what the table's properties set instead (a property
    /// that does not parse is ignored).
    pub fn for_table(&self, metadata: &TableMetadata) -> Self {
        let get = |k: &str| {
            metadata
                .properties()
                .get(k)
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let mut p = self.clone();
        if let Some(n) = get(NUM_RETRIES) {
            p.max_attempts = u32::try_from(n.saturating_add(1)).unwrap_or(u32::MAX);
        }
        if let Some(ms) = get(MIN_WAIT_MS) {
            p.initial_backoff = Duration::from_millis(ms);
        }
        if let Some(ms) = get(MAX_WAIT_MS) {
            p.max_backoff = Duration::from_millis(ms);
        }
        if let Some(ms) = get(TOTAL_TIMEOUT_MS) {
            p.total_timeout = Some(Duration::from_millis(ms));
        }
        p
    }
}

/// What one attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    /// It landed, or there was nothing left to do.
    Done(T),
    /// Go round again on the table as it is then: the catalog answered a
    /// conflict or nothing (the error), or what the attempt read was
    /// replaced meanwhile (`None`).
    Again(Option<CatalogError>),
}

/// How a driven commit ended.
#[derive(Debug)]
pub(crate) enum Driven<T> {
    /// An attempt was done.
    Done(T),
    /// Every attempt the policy allowed went round again.
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The catalog's last answer, if any.
        last: Option<CatalogError>,
    },
}

/// A commit the driver retries: how it loads the table, and one attempt on
/// the table as loaded. Whether an earlier attempt whose answer was lost
/// landed is the plan's to decide, on the table as the next load finds it.
#[async_trait]
pub(crate) trait Plan: Send {
    /// What a done attempt gives.
    type Done: Send;
    /// Why the commit fails.
    type Error: Send;

    /// The table an attempt plans against.
    async fn load(&mut self) -> Result<LoadedTable, Self::Error>;

    /// Attempt number `attempt` (from 1) on `base`.
    async fn attempt(
        &mut self,
        base: LoadedTable,
        attempt: u32,
    ) -> Result<Attempt<Self::Done>, Self::Error>;
}

/// The commit path's one retry loop: runs `plan`'s attempts, each on the
/// table as loaded then, until one is done or the policy allows no more
/// (the first load's `commit.retry.*` properties bound the rest).
pub(crate) async fn drive<P: Plan>(
    policy: &RetryPolicy,
    plan: &mut P,
) -> Result<Driven<P::Done>, P::Error> {
    let mut attempts = Attempts::new(policy);
    let mut last = None;
    while let Some(n) = attempts.next().await {
        let base = plan.load().await?;
        attempts.adopt(&base.metadata);
        match plan.attempt(base, n).await? {
            Attempt::Done(done) => return Ok(Driven::Done(done)),
            Attempt::Again(e) => last = e.or(last),
        }
    }
    Ok(Driven::Exhausted {
        attempts: attempts.made(),
        last,
    })
}

/// Counts the attempts of one commit and waits between them.
#[derive(Debug)]
struct Attempts {
    policy: RetryPolicy,
    /// Whether the table's properties have been read into `policy`.
    adopted: bool,
    made: u32,
    next_wait: Duration,
    started: Instant,
}

impl Attempts {
    fn new(policy: &RetryPolicy) -> Self {
        Self {
            policy: policy.clone(),
            adopted: false,
            made: 0,
            next_wait: policy.initial_backoff,
            started: Instant::now(),
        }
    }

    /// The next attempt's number (from 1), after the wait since the last;
    /// `None` when the policy allows no more.
    async fn next(&mut self) -> Option<u32> {
        if self.made >= self.policy.max_attempts.max(1) {
            return None;
        }
        if self.made > 0 {
            if let Some(total) = self.policy.total_timeout
                && self.started.elapsed() + self.next_wait > total
            {
                return None;
            }
            tokio::time::sleep(self.next_wait).await;
            self.next_wait = (self.next_wait * 2).min(self.policy.max_backoff);
        }
        self.made += 1;
        Some(self.made)
    }

    /// Takes the table's `commit.retry.*` properties, once: the first load
    /// of the table is where they are known.
    fn adopt(&mut self, metadata: &TableMetadata) {
        if !self.adopted {
            self.adopted = true;
            self.policy = self.policy.for_table(metadata);
            if self.made <= 1 {
                self.next_wait = self.policy.initial_backoff;
            }
        }
    }

    /// Attempts made so far.
    fn made(&self) -> u32 {
        self.made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(props: &[(&str, &str)]) -> TableMetadata {
        let schema = iceberg::spec::Schema::builder().build().unwrap();
        let creation = iceberg::TableCreation::builder()
            .name("t".into())
            .location("file:///t".into())
            .schema(schema)
            .properties(
                props
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<std::collections::HashMap<_, _>>(),
            )
            .build();
        iceberg::spec::TableMetadataBuilder::from_table_creation(creation)
            .unwrap()
            .build()
            .unwrap()
            .metadata
    }

    async fn count(policy: &RetryPolicy, meta: &TableMetadata) -> u32 {
        let mut a = Attempts::new(policy);
        while a.next().await.is_some() {
            a.adopt(meta);
        }
        a.made()
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_properties_set_the_attempts_and_their_waits() {
        let engine = RetryPolicy::default();
        assert_eq!(count(&engine, &metadata(&[])).await, 10);
        let two = metadata(&[(NUM_RETRIES, "1"), (MIN_WAIT_MS, "500")]);
        let started = tokio::time::Instant::now();
        assert_eq!(count(&engine, &two).await, 2);
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        // Waits double up to the most; past the total timeout none starts.
        let timed = metadata(&[
            (NUM_RETRIES, "100"),
            (MIN_WAIT_MS, "100"),
            (MAX_WAIT_MS, "400"),
            (TOTAL_TIMEOUT_MS, "1000"),
        ]);
        // Waits 100, 200, 400 (700 ms in), then 400 more would pass 1,000.
        assert_eq!(count(&engine, &timed).await, 4);
        assert_eq!(count(&engine, &metadata(&[(NUM_RETRIES, "0")])).await, 1);
        // A value that does not parse keeps the engine's.
        assert_eq!(
            count(&engine, &metadata(&[(NUM_RETRIES, "many")])).await,
            10
        );
    }
}

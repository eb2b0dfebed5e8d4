//! Room for the other writers of a table. A Spark job's DELETE or MERGE on
//! a file floe keeps updating fails whenever floe commits a deletion vector
//! for that file while the job runs (Iceberg Java's check for concurrently
//! added vectors, which no retry passes): beside a busy floe it lands only
//! in a gap between floe's commits. Two table properties make gaps:
//! [`MIN_INTERVAL`] spaces floe's commits, for writers that do not
//! coordinate; [`PAUSED_UNTIL`] holds them, for a job that sets it before
//! its statements and unsets it after. Held requests stay queued.

use std::time::Duration;

use iceberg::spec::TableMetadata;

use crate::error::ConfigError;

/// `floe.commit.min-interval-ms`: at least this long between floe's commits
/// of the table (unset: none).
pub const MIN_INTERVAL: &str = "floe.commit.min-interval-ms";
/// `floe.commit.paused-until`: no floe commit of the table before this
/// instant (epoch milliseconds or RFC 3339).
pub const PAUSED_UNTIL: &str = "floe.commit.paused-until";
/// The longest a commit waits for room; past it the commit fails as
/// contended (its requests stay queued) rather than hold a committer's run.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often a waiting commit looks at the table again, so a pause that
/// the job lifts early (or a new one) takes effect within it.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Why floe does not commit the table now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Its last commit was too recent; room in this long.
    Spacing(Duration),
    /// Paused until this instant (epoch milliseconds).
    Paused(i64),
}

impl Hold {
    /// How long from `now_ms` until floe may commit.
    pub fn wait(self, now_ms: i64) -> Duration {
        match self {
            Hold::Spacing(d) => d,
            Hold::Paused(until) => {
                Duration::from_millis(until.saturating_sub(now_ms).max(0) as u64)
            }
        }
    }
}

/// What holds floe's next commit of the table at `now_ms` (wall clock, as
/// snapshot timestamps are), if anything; the longer hold when both do.
pub fn hold(metadata: &TableMetadata, now_ms: i64) -> Result<Option<Hold>, ConfigError> {
    let props = metadata.properties();
    let paused = match props.get(PAUSED_UNTIL) {
        Some(v) => Some(instant(v).ok_or_else(|| ConfigError::Property {
            key: PAUSED_UNTIL.into(),
            value: v.clone(),
            reason: "not epoch milliseconds or an RFC 3339 instant".into(),
        })?),
        None => None,
    }
    .filter(|until| *until > now_ms)
    .map(Hold::Paused);
    let interval = match props.get(MIN_INTERVAL) {
        Some(v) => Some(v.trim().parse::<u64>().map_err(|_| ConfigError::Property {
            key: MIN_INTERVAL.into(),
            value: v.clone(),
            reason: "not a number of milliseconds".into(),
        })?),
        None => None,
    };
    // Spacing counts from floe's own last commit, also when another
    // engine committed since: committing right after the other writer's
    // commit would meet its next statement.
    let spacing = interval
        .and_then(|ms| Some(last_floe_commit(metadata)?.saturating_add(ms as i64) - now_ms))
        .filter(|left| *left > 0)
        .map(|left| Hold::Spacing(Duration::from_millis(left as u64)));
    Ok(match (paused, spacing) {
        (Some(p), Some(s)) if s.wait(now_ms) > p.wait(now_ms) => Some(s),
        (Some(p), _) => Some(p),
        (None, s) => s,
    })
}

/// When floe last committed on main: the newest snapshot of its history
/// whose summary names a ledger head.
fn last_floe_commit(metadata: &TableMetadata) -> Option<i64> {
    let mut next = metadata.current_snapshot();
    while let Some(s) = next {
        if s.summary()
            .additional_properties
            .contains_key(crate::ledger::PROPERTY)
        {
            return Some(s.timestamp_ms());
        }
        next = s
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p));
    }
    None
}

fn instant(v: &str) -> Option<i64> {
    let v = v.trim();
    v.parse::<i64>()
        .ok()
        .or_else(|| crate::change::parse_timestamp_ms(v))
}

//! The idempotency ledger: what a table holds, per record, for as long as a
//! record or a commit request can come again.
//!
//! It lives in ledger files beside the table, never under its location
//! ([`place`]: no engine's orphan cleanup reaches them), named by the table
//! property `floe.ledger`, which every floe commit moves to the head it
//! wrote in the same catalog commit; so the ledger changes exactly when the
//! table does, and snapshot expiry, compaction, another engine's commits or
//! its maintenance leave it whole. A head that is gone anyway (deleted by
//! hand) is a clear error naming `floe ledger repair`, which rebuilds it
//! from what survives and what the table's snapshots record ([`repair`]).
//!
//! The head holds, per ordered source (a Kafka partition, a Kinesis shard,
//! a file, a Postgres slot), its committed positions ([`marks`]: runs,
//! pages of older runs, a settled range; idle sources in [`archive`]
//! buckets), decided with no time bound; and the entries of the latest
//! commits: batch id, ordered spans, digests of unordered records (SQS
//! message ids, DynamoDB event ids), a keyed request's key file. Older
//! entries are sealed into segments, and segments merge in tiers, so the
//! head stays small.
//!
//! Every look-back is anchored on a fact a redelivery cannot move: ordered
//! positions need none (the marks decide them whenever they come); a batch
//! id is looked for from when its request, or its records, were first seen;
//! unordered records from when their source received them; later changes
//! of a keyed request's keys from when its source first committed a
//! position at or above the request's own. Records are "accounted for" once
//! committed, whether in the table or in the dead-letter location (rejected
//! records are claimed too), so a redelivery that now accepts a rejected
//! record does not add it twice.

mod archive;
mod claims;
mod digest;
mod head;
mod index;
pub mod keyfile;
mod legacy;
mod marks;
mod next;
pub mod place;
pub mod repair;
mod runs;
mod store;

use std::borrow::Cow;
use std::collections::HashSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use iceberg::spec::TableMetadata;

pub use claims::{Claims, SpanClaim, Taken};
pub use digest::record as record_digest;
pub use head::{ArchiveRef, Archived, Entry, FormatError, Head, Retired, Segment, SegmentRef};
use index::Index;
pub use keyfile::{KeyFile, LastChange};
pub use marks::{Marks, Page, PageRef, Run};
pub use next::Next;
pub use runs::Runs;
pub use store::{KeyChanges, LedgerStore};

use crate::error::{Classify, ErrorKind};
use crate::request::CommitRequest;
use crate::source::{Position, Positions, SourceSpan, is_order_source};

/// Snapshot summary key listing the batch ids a snapshot contains, comma-separated.
pub const BATCH_IDS: &str = "floe.batch-ids";
/// Snapshot summary key prefix for per-source high-water marks (`floe.hwm.<source>`).
pub const HWM_PREFIX: &str = "floe.hwm.";
/// Snapshot summary key prefix for the ordered spans a snapshot holds per
/// source (`floe.spans.<source>` = `first-last,…`), which `floe ledger
/// repair` reads back.
pub const SPANS_PREFIX: &str = "floe.spans.";
/// Snapshot summary key: number of commit requests coalesced into the snapshot.
pub const REQUESTS: &str = "floe.requests";
/// Snapshot summary key prefix for source state recorded with a commit
/// (`floe.state.<key>`, e.g. a Postgres snapshot's progress); the latest wins.
pub const STATE_PREFIX: &str = "floe.state.";
/// Table property (and snapshot summary key) naming the ledger head.
pub const PROPERTY: &str = "floe.ledger";
/// Table property: how long commit requests and key files are remembered,
/// ms; at least the commit queue's plus its DLQ's retention. Ordered
/// positions are remembered for good; older than this, their gaps count
/// as accounted for.
pub const REQUEST_WINDOW: &str = "floe.ledger.request-window-ms";
/// Table property: how long records of unordered sources (SQS message ids,
/// DynamoDB event ids) are remembered, ms; at least how long the source can
/// deliver a record again.
pub const KEY_WINDOW: &str = "floe.ledger.key-window-ms";
/// Table property: entries after which the head's recent entries are sealed
/// into a segment (default 256). Lower it to see seals in small tests.
pub const SEAL_ENTRIES_PROPERTY: &str = "floe.ledger.seal-entries";
/// Default request window: the module's commit queue (2 days) and DLQ (14 days).
pub const DEFAULT_REQUEST_WINDOW_MS: i64 = 16 * DAY_MS;
/// Default key window: a day, the retention of DynamoDB Streams and more than
/// an SQS source's visibility timeout times its maxReceiveCount in the module.
pub const DEFAULT_KEY_WINDOW_MS: i64 = DAY_MS;
pub use crate::clock::SKEW_MS;
/// Where format-1 ledgers kept their files, under the table's location.
pub const LEGACY_DIR: &str = "metadata/floe-ledger";
/// How long a ledger file the head stopped naming stays readable, for a
/// process that loaded the table just before the commit that retired it.
pub const RETIRE_GRACE_MS: i64 = 15 * 60 * 1000;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Entries after which the head's recent entries are sealed into a segment.
const SEAL_ENTRIES: usize = 256;

/// Why the ledger cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Storage failed; a retry may succeed.
    #[error("ledger file {path}: {source}")]
    Storage {
        /// The file.
        path: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
    /// A ledger file is not one this build reads; a retry will not help.
    #[error("ledger file {path}: {source}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        source: FormatError,
    },
    /// A ledger file the table names is gone. After a reload the table may
    /// name a newer one; if not, `floe ledger repair` rebuilds the ledger.
    #[error("ledger file {path} is missing")]
    Missing {
        /// The file.
        path: String,
    },
}

/// A missing file is one to repair: once repaired, the same requests
/// commit, so until then they stay queued, never dead-lettered.
impl Classify for LedgerError {
    fn kind(&self) -> ErrorKind {
        match self {
            LedgerError::Storage { .. } => ErrorKind::Service,
            LedgerError::Format { .. } => ErrorKind::Damaged,
            LedgerError::Missing { .. } => ErrorKind::Repair,
        }
    }
}

/// How long the ledger remembers, from a table's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// Commit requests, key files; ordered gaps settle after it.
    pub request_ms: i64,
    /// Records of unordered sources.
    pub key_ms: i64,
    /// Entries after which the head is sealed.
    pub seal_entries: usize,
}

impl Windows {
    /// The windows a table's properties set, else the defaults.
    pub fn of(metadata: &TableMetadata) -> Self {
        let get = |key: &str, default: i64| {
            metadata
                .properties()
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let request_ms = get(REQUEST_WINDOW, DEFAULT_REQUEST_WINDOW_MS);
        Self {
            request_ms,
            key_ms: get(KEY_WINDOW, DEFAULT_KEY_WINDOW_MS).min(request_ms),
            seal_entries: get(SEAL_ENTRIES_PROPERTY, SEAL_ENTRIES as i64) as usize,
        }
    }
}

/// The ledger as one commit attempt read it.
#[derive(Debug, Clone)]
pub struct Ledger {
    store: Arc<LedgerStore>,
    dir: String,
    head: Arc<Head>,
    head_path: Option<String>,
    /// The retired heads (and its own) that a snapshot of the table names:
    /// another engine may roll the table back to any of them, and a repair
    /// then starts from its head, so no commit deletes them.
    named: Arc<BTreeSet<String>>,
    recent: Arc<Index>,
    windows: Windows,
}

impl Ledger {
    /// The ledger of a table as its metadata names it (or, for a table whose
    /// ledger is still in its snapshot summaries, as those describe it).
    /// After another engine rolled the table back past floe's last commit,
    /// the ledger main's history names instead ([`repair::rolled_back`]):
    /// records the rollback undid are not in the table, so they commit
    /// again when sent again.
    pub async fn open(
        store: Arc<LedgerStore>,
        metadata: &TableMetadata,
    ) -> Result<Self, LedgerError> {
        let head_path = metadata.properties().get(PROPERTY).cloned();
        let head = match &head_path {
            Some(_) if repair::rolled_back(metadata) => {
                let rebuilt = repair::rebuild(&store, metadata).await?;
                // Rebuilt without the rollback target's head, the ledger
                // would forget what the table holds from before its
                // history; an operator's repair decides to go on without.
                if let Some(path) = rebuilt.gap {
                    return Err(LedgerError::Missing { path });
                }
                Arc::new(rebuilt.head)
            }
            Some(path) => {
                let head = store.head(path).await?;
                if head.version < head::FORMAT {
                    Arc::new(upgrade(&store, &head).await?)
                } else {
                    head
                }
            }
            None => Arc::new(legacy::head(metadata)),
        };
        // Only heads this ledger may retire or delete are looked up, so a
        // commit pays for its own retired list, not for the whole history.
        let candidates: HashSet<&str> = head
            .retired
            .iter()
            .map(|r| r.path.as_str())
            .chain(head_path.as_deref())
            .collect();
        let named = snapshot_heads(metadata)
            .filter(|p| candidates.contains(p.as_str()))
            .cloned()
            .collect();
        let recent = Index::new(head.recent.clone()).map_err(|source| LedgerError::Format {
            path: head_path
                .clone()
                .unwrap_or_else(|| "the ledger in the snapshot summaries".into()),
            source,
        })?;
        Ok(Self {
            recent: Arc::new(recent),
            store,
            dir: place::dir(metadata),
            head,
            head_path,
            named: Arc::new(named),
            windows: Windows::of(metadata),
        })
    }

    /// Whether a snapshot the table still holds names the head at `path`.
    fn names(&self, path: &str) -> bool {
        self.named.contains(path)
    }

    /// The head.
    pub fn head(&self) -> &Head {
        &self.head
    }

    /// The head's path, when the table names one.
    pub fn head_path(&self) -> Option<&str> {
        self.head_path.as_deref()
    }

    /// The windows it keeps.
    pub fn windows(&self) -> Windows {
        self.windows
    }

    /// The directory its new files go to.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The committed positions of an ordered source, from the head or,
    /// for a source idle long enough to have left it, from its archive
    /// bucket; `None` for a source that never committed.
    pub async fn marks(&self, source: &str) -> Result<Option<Cow<'_, Marks>>, LedgerError> {
        if let Some(m) = self.head.sources.get(source) {
            return Ok(Some(Cow::Borrowed(m)));
        }
        let bucket = archive::bucket(source);
        let Some(r) = self.head.archive.iter().find(|r| r.bucket == bucket) else {
            return Ok(None);
        };
        let archived = self.store.archived(&r.path).await?;
        Ok(archived.sources.get(source).cloned().map(Cow::Owned))
    }

    /// The highest committed position of an ordered source.
    pub async fn high_water_mark(&self, source: &str) -> Result<Option<Position>, LedgerError> {
        Ok(self
            .marks(source)
            .await?
            .and_then(|m| m.high_water_mark().cloned()))
    }

    /// Source state `key` as the latest commit recorded it.
    pub fn state(&self, key: &str) -> Option<&str> {
        self.head.state.get(key).map(String::as_str)
    }

    /// True when batch `batch_id` was committed at `since_ms` or later.
    pub async fn has_batch(&self, batch_id: &str, since_ms: i64) -> Result<bool, LedgerError> {
        if self.recent.has_batch(batch_id) {
            return Ok(true);
        }
        for segment in self.segments_since(since_ms) {
            if self.store.segment(&segment.path).await?.has_batch(batch_id) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// True when the request's batch is in the table, looked for as far
    /// back as it (or its records) can have been committed. Requests of
    /// ordered spans only are decided by their positions ([`Self::claims`]):
    /// their batch id is looked for among the latest commits alone.
    pub async fn holds_batch(&self, request: &CommitRequest) -> Result<bool, LedgerError> {
        let ordered = request.per_record()
            && !request.sources.is_empty()
            && request
                .sources
                .iter()
                .all(|s| matches!(s.positions, Positions::Range { .. }));
        let since = if ordered {
            i64::MAX
        } else {
            request.first_seen_ms().saturating_sub(SKEW_MS)
        };
        self.has_batch(&request.batch_id, since).await
    }

    /// Which of the request's records are already accounted for.
    pub async fn claims(&self, request: &CommitRequest) -> Result<Claims, LedgerError> {
        let since = request.lookback_ms();
        let mut spans = Vec::with_capacity(request.sources.len());
        for span in &request.sources {
            spans.push(match &span.positions {
                Positions::Range { first, last } => {
                    SpanClaim::Runs(self.claim_range(&span.source, first, last).await?)
                }
                Positions::Ids { ids } => SpanClaim::Keys(self.claim_keys(span, ids, since).await?),
                Positions::Key { .. } => SpanClaim::Nothing,
            });
        }
        Ok(Claims { spans })
    }

    async fn claim_range(
        &self,
        source: &str,
        first: &Position,
        last: &Position,
    ) -> Result<Runs, LedgerError> {
        let Some(marks) = self.marks(source).await? else {
            return Ok(Runs::new());
        };
        let mut claimed = marks.claim_head(first, last);
        for page in marks.pages_overlapping(first, last) {
            for r in &self.store.page(&page.path).await?.runs {
                if &r.first <= last && first <= &r.last {
                    claimed.insert(
                        r.first.clone().max(first.clone()),
                        r.last.clone().min(last.clone()),
                    );
                }
            }
        }
        Ok(claimed)
    }

    async fn claim_keys(
        &self,
        span: &SourceSpan,
        ids: &[String],
        since: i64,
    ) -> Result<HashSet<u128>, LedgerError> {
        let mut open: Vec<u128> = ids
            .iter()
            .map(|id| record_digest(&span.source, id))
            .collect();
        let mut claimed = HashSet::new();
        let mut take = |index: &Index, open: &mut Vec<u128>| {
            open.retain(|d| {
                let found = index.has_key(&span.source, *d);
                if found {
                    claimed.insert(*d);
                }
                !found
            });
        };
        take(&self.recent, &mut open);
        for segment in self.segments_since(since) {
            if open.is_empty() {
                break;
            }
            let index = self.store.segment(&segment.path).await?;
            take(&index, &mut open);
        }
        Ok(claimed)
    }

    /// The key files of committed keyed requests that may hold later changes
    /// of keys `request` changes where `claims` does not already account
    /// for them. On an ordered span, the commits of its source at or above
    /// its lowest open position, made since its source first committed
    /// such a position (none at all when it never did); on an unordered
    /// span, the commits of its source since its records reached it; on
    /// an HTTP span, those of requests received after it (committed after
    /// it was received); for
    /// the sources a replay's records first came from (`request.order`), the
    /// commits at or above their first position there; for the table's
    /// change order, every commit at or above its first change there.
    pub async fn later_key_files(
        &self,
        request: &CommitRequest,
        claims: &Claims,
    ) -> Result<Vec<String>, LedgerError> {
        let mut lookups: Vec<(&str, Option<Position>, i64)> = Vec::new();
        for (i, span) in request.sources.iter().enumerate() {
            match &span.positions {
                Positions::Range { .. } => {
                    let Some(open) = claims.first_open(request, i) else {
                        continue;
                    };
                    let anchor = match self.marks(&span.source).await? {
                        Some(marks) => marks.anchor(&open),
                        None => None,
                    };
                    if let Some(anchor) = anchor {
                        lookups.push((&span.source, Some(open), anchor.saturating_sub(SKEW_MS)));
                    }
                }
                Positions::Ids { .. } => {
                    let since = request.lookback_ms().min(request.first_seen_ms() - SKEW_MS);
                    lookups.push((&span.source, None, since));
                }
                Positions::Key { order: Some(o), .. } => {
                    lookups.push((
                        &span.source,
                        Some(o.next()),
                        request.first_seen_ms() - SKEW_MS,
                    ));
                }
                Positions::Key { order: None, .. } => {}
            }
        }
        self.order_lookups(request, &mut lookups).await?;
        let Some(oldest) = lookups.iter().map(|(_, _, since)| *since).min() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut take = |index: &Index| {
            for (source, from, since) in &lookups {
                for e in index.touching(source, from.as_ref()) {
                    if e.ms >= *since
                        && e.id != request.batch_id
                        && let Some(kf) = &e.kf
                        && seen.insert(kf.clone())
                    {
                        out.push(kf.clone());
                    }
                }
            }
        };
        take(&self.recent);
        for segment in self.segments_since(oldest) {
            take(&*self.store.segment(&segment.path).await?);
        }
        Ok(out)
    }

    /// [`Self::later_key_files`]'s lookups for the spans a request is
    /// ordered after (`request.order`).
    async fn order_lookups<'r>(
        &self,
        request: &'r CommitRequest,
        lookups: &mut Vec<(&'r str, Option<Position>, i64)>,
    ) -> Result<(), LedgerError> {
        // A replay of dead letters: the changes its records' first sources
        // committed after them, however long before the replay. The table's
        // change order: the changes of any source at or after its first.
        for span in &request.order {
            match &span.positions {
                Positions::Range { first, .. } if is_order_source(&span.source) => {
                    lookups.push((&span.source, Some(first.clone()), i64::MIN));
                }
                Positions::Range { first, .. } => {
                    if let Some(anchor) = self
                        .marks(&span.source)
                        .await?
                        .and_then(|m| m.anchor(first))
                    {
                        lookups.push((
                            &span.source,
                            Some(first.clone()),
                            anchor.saturating_sub(SKEW_MS),
                        ));
                    }
                }
                Positions::Ids { .. } => lookups.push((&span.source, None, i64::MIN)),
                Positions::Key { .. } => {}
            }
        }
        Ok(())
    }

    /// The key changes of a key file; `None` once it is gone.
    pub async fn key_changes(&self, path: &str) -> Result<Option<Arc<KeyChanges>>, LedgerError> {
        self.store.key_file(path).await
    }

    /// Every ledger file the head names, directly or through its entries
    /// (key files), and the retired ones still kept; normalised URIs. Reads
    /// every segment: for maintenance, not for commits.
    pub async fn named_files(&self) -> Result<HashSet<String>, LedgerError> {
        let mut out: Vec<String> = self.head_path.iter().cloned().collect();
        out.extend(self.head.retired.iter().map(|r| r.path.clone()));
        out.extend(self.head.archive.iter().map(|r| r.path.clone()));
        for marks in self.head.sources.values() {
            out.extend(marks.pages.iter().map(|p| p.path.clone()));
        }
        out.extend(self.head.recent.iter().filter_map(|e| e.kf.clone()));
        for s in &self.head.segments {
            out.push(s.path.clone());
            let index = self.store.segment(&s.path).await?;
            out.extend(index.entries().iter().filter_map(|e| e.kf.clone()));
        }
        Ok(out
            .iter()
            .filter_map(|p| crate::uri::normalize(p))
            .collect())
    }

    fn segments_since(&self, since: i64) -> impl Iterator<Item = &SegmentRef> {
        self.head
            .segments
            .iter()
            .rev()
            .filter(move |s| s.to_ms >= since)
    }

    /// Writes what `next` holds; returns the paths written (for an attempt
    /// that loses, to remove again).
    pub async fn write(&self, next: &Next) -> Result<Vec<String>, LedgerError> {
        next.write(&self.store).await
    }
}

/// A format-1 head as this build keeps it: runs below a source's floor,
/// which format 1 left to its sealed segments, brought back from them (the
/// last time those segments are read for positions), and runs without
/// commit times given their source's last.
async fn upgrade(store: &LedgerStore, old: &Head) -> Result<Head, LedgerError> {
    let mut head = old.clone();
    for marks in head.sources.values_mut() {
        for r in marks.runs.iter_mut().filter(|r| r.to_ms == 0) {
            r.from_ms = marks.ms;
            r.to_ms = marks.ms;
        }
    }
    if head.sources.values().any(|m| m.floor.is_some()) {
        let mut entries: Vec<Entry> = head.recent.clone();
        for s in &head.segments {
            entries.extend(store.segment(&s.path).await?.entries().iter().cloned());
        }
        for e in &entries {
            for (source, first, last) in &e.spans {
                let Some(marks) = head.sources.get_mut(source) else {
                    continue;
                };
                if let Some(floor) = marks.floor.clone().filter(|f| first <= f) {
                    marks.insert(first.clone(), last.clone().min(floor), e.ms);
                }
            }
        }
    }
    for marks in head.sources.values_mut() {
        marks.floor = None;
    }
    head.version = head::FORMAT;
    Ok(head)
}

/// The entry recording a committed request.
fn entry(r: &CommitRequest, now_ms: i64) -> Entry {
    let mut spans = Vec::new();
    let mut keys = BTreeMap::new();
    for span in &r.sources {
        match &span.positions {
            Positions::Range { first, last } => {
                spans.push((span.source.clone(), first.clone(), last.clone()));
            }
            Positions::Ids { ids } => {
                let mut digests: Vec<u128> = ids
                    .iter()
                    .map(|id| record_digest(&span.source, id))
                    .collect();
                digests.sort_unstable();
                digests.dedup();
                keys.insert(span.source.clone(), digest::pack(&digests));
            }
            // The request's place in the order of receipts, as a span of
            // one: what a late request of the source looks for.
            Positions::Key { order: Some(o), .. } => {
                spans.push((span.source.clone(), o.clone(), o.clone()));
            }
            Positions::Key { order: None, .. } => {}
        }
    }
    // Its place in the table's change order, which later requests of any
    // source look for.
    for span in r.order.iter().filter(|s| is_order_source(&s.source)) {
        if let Positions::Range { first, last } = &span.positions {
            spans.push((span.source.clone(), first.clone(), last.clone()));
        }
    }
    Entry {
        ms: now_ms,
        id: r.batch_id.clone(),
        at: r.created_at_ms,
        spans,
        keys,
        kf: r.key_file.clone(),
    }
}

/// The ledger's source state as the table's metadata names it.
pub async fn state(
    store: Arc<LedgerStore>,
    metadata: &TableMetadata,
) -> Result<BTreeMap<String, String>, LedgerError> {
    Ok(Ledger::open(store, metadata).await?.head.state.clone())
}

/// The ledger heads the table's snapshots name (each commit's, and each
/// compaction's): what a rollback to one of them repairs from.
pub fn snapshot_heads(metadata: &TableMetadata) -> impl Iterator<Item = &String> {
    metadata
        .snapshots()
        .filter_map(|s| s.summary().additional_properties.get(PROPERTY))
}

/// The ledger entries of one snapshot holding these requests, with the source
/// state they record (a later request's value for a key wins).
pub fn summary_entries<'a>(
    requests: impl IntoIterator<Item = &'a CommitRequest>,
) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    let mut spans: BTreeMap<&str, Runs> = BTreeMap::new();
    let mut states = BTreeMap::new();
    for r in requests {
        ids.push(r.batch_id.as_str());
        states.extend(r.state.iter());
        for span in &r.sources {
            if let Positions::Range { first, last } = &span.positions {
                spans
                    .entry(&span.source)
                    .or_default()
                    .insert(first.clone(), last.clone());
            }
        }
    }
    let mut out = vec![
        (BATCH_IDS.to_string(), ids.join(",")),
        (REQUESTS.to_string(), ids.len().to_string()),
    ];
    for (source, runs) in spans {
        if let Some(hwm) = runs.last() {
            out.push((format!("{HWM_PREFIX}{source}"), hwm.to_string()));
        }
        let text: Vec<String> = runs.iter().map(|(f, l)| format!("{f}-{l}")).collect();
        out.push((format!("{SPANS_PREFIX}{source}"), text.join(",")));
    }
    out.extend(
        states
            .into_iter()
            .map(|(k, v)| (format!("{STATE_PREFIX}{k}"), v.clone())),
    );
    out
}

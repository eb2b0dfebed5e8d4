//! The idempotency ledger: what a table holds, per record, for as long as a
//! record or a commit request can come again.
//!
//! It lives in ledger files beside the table (`metadata/floe-ledger/`), named
//! by the table property `floe.ledger`, which every floe commit moves to the
//! head it wrote in the same catalog commit; so the ledger changes exactly
//! when the table does, and snapshot expiry, compaction or another engine's
//! commits leave it whole. The head holds, per ordered source (a Kafka
//! partition, a Kinesis shard, a file, a Postgres slot), the highest runs of
//! committed positions, and the entries of the latest commits: batch id,
//! ordered spans, digests of unordered records (SQS message ids, DynamoDB
//! event ids), a keyed request's key file. Older entries are sealed into
//! segments, and segments merge in tiers, so the head stays small.
//!
//! Every lookup is bounded by time, not by history: nothing can have been
//! committed before the request naming it was made, nor before its oldest
//! record reached its source, so a lookup reads only the segments committed
//! since ([`CommitRequest::lookback_ms`]); for a fresh request, none.
//! Records are "accounted for" once committed, whether in the table or in
//! the dead-letter location (rejected records are claimed too), so a
//! redelivery that now accepts a rejected record does not add it twice.

mod digest;
mod head;
mod index;
pub mod keyfile;
mod legacy;
mod runs;
mod store;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use uuid::Uuid;

pub use digest::record as record_digest;
pub use head::{Entry, FormatError, Head, Marks, Segment, SegmentRef};
use index::Index;
pub use keyfile::{KeyFile, LastChange};
pub use runs::Runs;
pub use store::{KeyChanges, LedgerStore};

use crate::request::CommitRequest;
use crate::source::{Position, Positions, SourceSpan};

/// Snapshot summary key listing the batch ids a snapshot contains, comma-separated.
pub const BATCH_IDS: &str = "floe.batch-ids";
/// Snapshot summary key prefix for per-source high-water marks (`floe.hwm.<source>`).
pub const HWM_PREFIX: &str = "floe.hwm.";
/// Snapshot summary key: number of commit requests coalesced into the snapshot.
pub const REQUESTS: &str = "floe.requests";
/// Snapshot summary key prefix for source state recorded with a commit
/// (`floe.state.<key>`, e.g. a Postgres snapshot's progress); the latest wins.
pub const STATE_PREFIX: &str = "floe.state.";
/// Table property (and snapshot summary key) naming the ledger head.
pub const PROPERTY: &str = "floe.ledger";
/// Table property: how long commit requests, ordered spans and key files
/// are remembered, ms; at least the commit queue's plus its DLQ's retention.
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
/// The directory of ledger files under a table's location.
pub const DIR: &str = "metadata/floe-ledger";

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// Runs per ordered source the head keeps; lower ones live in segments.
pub const MAX_HEAD_RUNS: usize = 32;
/// Entries after which the head's recent entries are sealed into a segment.
const SEAL_ENTRIES: usize = 256;
/// Record digests after which the head's recent entries are sealed.
const SEAL_KEYS: usize = 32 * 1024;
/// Segments of one tier merged into one of the next.
const FANIN: usize = 16;
/// The highest tier merges produce.
const MAX_TIER: u8 = 2;

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
}

impl LedgerError {
    /// True when trying again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, LedgerError::Storage { .. })
    }
}

/// How long the ledger remembers, from a table's properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// Commit requests, ordered spans, key files.
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

/// Which records of one span of a request are already accounted for.
#[derive(Debug, Clone, PartialEq)]
pub enum SpanClaim {
    /// None of them (or the span names no records: an HTTP key).
    Nothing,
    /// Positions of an ordered span.
    Runs(Runs),
    /// Digests of an unordered span's records.
    Keys(HashSet<u128>),
}

/// Which records of a request are already accounted for, span by span.
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    /// One per span of the request, in its order.
    pub spans: Vec<SpanClaim>,
}

impl Claims {
    /// True when none of the request's records is accounted for.
    pub fn is_empty(&self) -> bool {
        self.spans.iter().all(|s| match s {
            SpanClaim::Nothing => true,
            SpanClaim::Runs(r) => r.is_empty(),
            SpanClaim::Keys(k) => k.is_empty(),
        })
    }

    /// True when every record of the request is accounted for.
    pub fn covers(&self, request: &CommitRequest) -> bool {
        if request.sources.is_empty() {
            return false;
        }
        request
            .sources
            .iter()
            .zip(&self.spans)
            .all(|(span, claim)| match (&span.positions, claim) {
                (Positions::Range { first, last }, SpanClaim::Runs(r)) => r.covers(first, last),
                (Positions::Ids { ids }, SpanClaim::Keys(k)) => ids
                    .iter()
                    .all(|id| k.contains(&record_digest(&span.source, id))),
                _ => false,
            })
    }

    /// True when the record at `value` (a position or an id) of span `span`
    /// is accounted for.
    pub fn claims(&self, request: &CommitRequest, span: usize, value: &str) -> bool {
        match (self.spans.get(span), request.sources.get(span)) {
            (Some(SpanClaim::Runs(r)), _) => Position::parse(value).is_some_and(|p| r.contains(&p)),
            (Some(SpanClaim::Keys(k)), Some(s)) => k.contains(&record_digest(&s.source, value)),
            _ => false,
        }
    }
}

impl Claims {
    /// The records either claims.
    pub fn union(self, other: Claims) -> Claims {
        let spans = self
            .spans
            .into_iter()
            .zip(other.spans)
            .map(|(a, b)| match (a, b) {
                (SpanClaim::Runs(mut a), SpanClaim::Runs(b)) => {
                    a.extend(&b);
                    SpanClaim::Runs(a)
                }
                (SpanClaim::Keys(mut a), SpanClaim::Keys(b)) => {
                    a.extend(b);
                    SpanClaim::Keys(a)
                }
                (SpanClaim::Nothing, b) => b,
                (a, _) => a,
            })
            .collect();
        Claims { spans }
    }
}

/// The records of the requests one commit attempt has taken so far, so a
/// request that overlaps one of them (two deliveries of a record, regrouped,
/// in one receive) commits only its other records.
#[derive(Debug, Default)]
pub struct Taken {
    runs: HashMap<String, Runs>,
    keys: HashMap<String, HashSet<u128>>,
}

impl Taken {
    /// Which of the request's records the taken requests hold.
    pub fn claims(&self, request: &CommitRequest) -> Claims {
        let spans = request
            .sources
            .iter()
            .map(|span| match &span.positions {
                Positions::Range { first, last } => SpanClaim::Runs(
                    self.runs
                        .get(&span.source)
                        .map(|r| r.within(first, last))
                        .unwrap_or_default(),
                ),
                Positions::Ids { ids } => {
                    let taken = self.keys.get(&span.source);
                    SpanClaim::Keys(
                        ids.iter()
                            .map(|id| record_digest(&span.source, id))
                            .filter(|d| taken.is_some_and(|t| t.contains(d)))
                            .collect(),
                    )
                }
                Positions::Key { .. } => SpanClaim::Nothing,
            })
            .collect();
        Claims { spans }
    }

    /// Takes the request's records.
    pub fn take(&mut self, request: &CommitRequest) {
        for span in &request.sources {
            match &span.positions {
                Positions::Range { first, last } => self
                    .runs
                    .entry(span.source.clone())
                    .or_default()
                    .insert(first.clone(), last.clone()),
                Positions::Ids { ids } => self
                    .keys
                    .entry(span.source.clone())
                    .or_default()
                    .extend(ids.iter().map(|id| record_digest(&span.source, id))),
                Positions::Key { .. } => {}
            }
        }
    }
}

/// The ledger as one commit attempt read it.
#[derive(Debug, Clone)]
pub struct Ledger {
    store: Arc<LedgerStore>,
    location: String,
    head: Arc<Head>,
    head_path: Option<String>,
    recent: Arc<Index>,
    windows: Windows,
}

/// What a commit writes for the ledger and what it leaves behind.
#[derive(Debug)]
pub struct Next {
    /// The new head.
    pub head: Arc<Head>,
    /// Where it goes; the table property names it.
    pub path: String,
    /// Segments sealed or merged for it.
    pub segments: Vec<(String, Segment)>,
    /// Ledger files the new head no longer needs, to delete once it landed.
    pub obsolete: Vec<String>,
}

impl Ledger {
    /// The ledger of a table as its metadata names it (or, for a table whose
    /// ledger is still in its snapshot summaries, as those describe it).
    pub async fn open(
        store: Arc<LedgerStore>,
        metadata: &TableMetadata,
    ) -> Result<Self, LedgerError> {
        let head_path = metadata.properties().get(PROPERTY).cloned();
        let head = match &head_path {
            Some(path) => store.head(path).await?,
            None => Arc::new(legacy::head(metadata)),
        };
        Ok(Self {
            recent: Arc::new(Index::new(head.recent.clone())),
            store,
            location: metadata.location().trim_end_matches('/').to_string(),
            head,
            head_path,
            windows: Windows::of(metadata),
        })
    }

    /// The head.
    pub fn head(&self) -> &Head {
        &self.head
    }

    /// The windows it keeps.
    pub fn windows(&self) -> Windows {
        self.windows
    }

    /// The highest committed position of an ordered source.
    pub fn high_water_mark(&self, source: &str) -> Option<&Position> {
        self.head.sources.get(source)?.high_water_mark()
    }

    /// Source state `key` as the latest commit recorded it.
    pub fn state(&self, key: &str) -> Option<&str> {
        self.head.state.get(key).map(String::as_str)
    }

    /// True when batch `batch_id`, made at `made_ms` or later, is in the table.
    pub async fn has_batch(&self, batch_id: &str, made_ms: i64) -> Result<bool, LedgerError> {
        if self.recent.has_batch(batch_id) {
            return Ok(true);
        }
        for segment in self.segments_since(made_ms.saturating_sub(SKEW_MS)) {
            if self.store.segment(&segment.path).await?.has_batch(batch_id) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Which of the request's records are already accounted for.
    pub async fn claims(&self, request: &CommitRequest) -> Result<Claims, LedgerError> {
        let since = request.lookback_ms();
        let mut spans = Vec::with_capacity(request.sources.len());
        for span in &request.sources {
            spans.push(match &span.positions {
                Positions::Range { first, last } => {
                    SpanClaim::Runs(self.claim_range(&span.source, first, last, since).await?)
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
        since: i64,
    ) -> Result<Runs, LedgerError> {
        let Some(marks) = self.head.sources.get(source) else {
            return Ok(Runs::new());
        };
        let mut claimed = marks.runs.within(first, last);
        // Below the floor the head dropped runs: the entries that had them decide.
        if let Some(floor) = marks.floor.as_ref().filter(|f| first <= *f) {
            let upto = last.min(floor);
            self.recent.claim_range(source, first, upto, &mut claimed);
            for segment in self.segments_since(since) {
                let index = self.store.segment(&segment.path).await?;
                index.claim_range(source, first, upto, &mut claimed);
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
    /// of keys `request` changes: of its sources, committed since it was
    /// made (a change of its source newer than one of its own was read after
    /// it), reaching its first position on ordered spans.
    pub async fn later_key_files(
        &self,
        request: &CommitRequest,
    ) -> Result<Vec<String>, LedgerError> {
        let since = request.created_at_ms.saturating_sub(SKEW_MS);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut take = |index: &Index| {
            for span in &request.sources {
                let from = match &span.positions {
                    Positions::Range { first, .. } => Some(first),
                    _ => None,
                };
                for e in index.touching(&span.source, from) {
                    if e.ms >= since
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
        for segment in self.segments_since(since) {
            take(&*self.store.segment(&segment.path).await?);
        }
        Ok(out)
    }

    /// The key changes of a key file; `None` once it is gone.
    pub async fn key_changes(&self, path: &str) -> Result<Option<Arc<KeyChanges>>, LedgerError> {
        self.store.key_file(path).await
    }

    /// True when an ordered source has committed anything at or after `pos`.
    pub fn reaches(&self, source: &str, pos: &Position) -> bool {
        self.high_water_mark(source).is_some_and(|h| h >= pos)
    }

    fn segments_since(&self, since: i64) -> impl Iterator<Item = &SegmentRef> {
        self.head
            .segments
            .iter()
            .rev()
            .filter(move |s| s.to_ms >= since)
    }

    /// The head after committing `requests` at `now_ms`: their entries and
    /// runs added, sealed and merged as the tiers fill, what left the windows
    /// dropped. Nothing is written yet.
    pub async fn next(
        &self,
        requests: &[&CommitRequest],
        now_ms: i64,
    ) -> Result<Next, LedgerError> {
        let mut head = (*self.head).clone();
        head.version = head::FORMAT;
        head.seq += 1;
        let mut obsolete: Vec<String> = self.head_path.iter().cloned().collect();
        for r in requests {
            head.recent.push(entry(r, now_ms));
            head.state
                .extend(r.state.iter().map(|(k, v)| (k.clone(), v.clone())));
            for span in &r.sources {
                let Positions::Range { first, last } = &span.positions else {
                    continue;
                };
                let marks = head.sources.entry(span.source.clone()).or_default();
                marks.runs.insert(first.clone(), last.clone());
                marks.ms = now_ms;
                if let Some(dropped) = marks.runs.keep_highest(MAX_HEAD_RUNS)
                    && marks.floor.as_ref().is_none_or(|f| *f < dropped)
                {
                    marks.floor = Some(dropped);
                }
            }
        }
        let oldest = now_ms.saturating_sub(self.windows.request_ms);
        head.sources.retain(|_, m| m.ms >= oldest);

        let mut segments = Vec::new();
        let keys: usize = head.recent.iter().map(Entry::key_count).sum();
        if head.recent.len() >= self.windows.seal_entries || keys >= SEAL_KEYS {
            let entries = std::mem::take(&mut head.recent);
            let (path, r) = self.segment_ref(0, &entries);
            segments.push((
                path,
                Segment {
                    version: head::FORMAT,
                    entries,
                },
            ));
            head.segments.push(r);
        }
        for tier in 0..MAX_TIER {
            loop {
                let of_tier: Vec<usize> = (0..head.segments.len())
                    .filter(|i| head.segments[*i].tier == tier)
                    .collect();
                if of_tier.len() < FANIN {
                    break;
                }
                let merged: Vec<SegmentRef> = of_tier[..FANIN]
                    .iter()
                    .map(|i| head.segments[*i].clone())
                    .collect();
                let mut entries = Vec::new();
                for s in &merged {
                    entries.extend(self.segment_entries(s, &segments).await?);
                }
                entries.sort_by_key(|e| e.ms);
                let (kept, dropped) = self.prune(entries, now_ms);
                obsolete.extend(dropped);
                obsolete.extend(merged.iter().map(|s| s.path.clone()));
                head.segments.retain(|s| !merged.contains(s));
                segments.retain(|(p, _)| !merged.iter().any(|m| &m.path == p));
                if !kept.is_empty() {
                    let (path, r) = self.segment_ref(tier + 1, &kept);
                    segments.push((
                        path,
                        Segment {
                            version: head::FORMAT,
                            entries: kept,
                        },
                    ));
                    head.segments.push(r);
                }
                head.segments.sort_by_key(|s| s.from_ms);
            }
        }
        // Segments wholly out of the request window go, with their key files.
        let (expired, kept): (Vec<_>, Vec<_>) =
            head.segments.into_iter().partition(|s| s.to_ms < oldest);
        head.segments = kept;
        for s in expired {
            for e in self.segment_entries(&s, &segments).await? {
                obsolete.extend(e.kf);
            }
            obsolete.push(s.path);
        }
        // A segment written by this commit and merged again by it never existed.
        obsolete.retain(|p| !segments.iter().any(|(s, _)| s == p));
        let path = format!(
            "{}/{DIR}/head-{:012}-{}.json.zst",
            self.location,
            head.seq,
            Uuid::now_v7().simple()
        );
        Ok(Next {
            head: Arc::new(head),
            path,
            segments,
            obsolete,
        })
    }

    /// Entries older than the request window dropped (returning their key
    /// files), and record digests older than the key window stripped.
    fn prune(&self, entries: Vec<Entry>, now_ms: i64) -> (Vec<Entry>, Vec<String>) {
        let requests_from = now_ms.saturating_sub(self.windows.request_ms);
        let keys_from = now_ms.saturating_sub(self.windows.key_ms);
        let mut dropped = Vec::new();
        let kept = entries
            .into_iter()
            .filter_map(|mut e| {
                if e.ms < requests_from {
                    dropped.extend(e.kf.take());
                    return None;
                }
                if e.ms < keys_from {
                    e.keys.clear();
                }
                Some(e)
            })
            .collect();
        (kept, dropped)
    }

    async fn segment_entries(
        &self,
        s: &SegmentRef,
        fresh: &[(String, Segment)],
    ) -> Result<Vec<Entry>, LedgerError> {
        if let Some((_, seg)) = fresh.iter().find(|(p, _)| p == &s.path) {
            return Ok(seg.entries.clone());
        }
        Ok(self.store.segment(&s.path).await?.entries().to_vec())
    }

    fn segment_ref(&self, tier: u8, entries: &[Entry]) -> (String, SegmentRef) {
        let path = format!(
            "{}/{DIR}/seg-{tier}-{}.json.zst",
            self.location,
            Uuid::now_v7().simple()
        );
        let r = SegmentRef {
            path: path.clone(),
            tier,
            from_ms: entries.iter().map(|e| e.ms).min().unwrap_or(0),
            to_ms: entries.iter().map(|e| e.ms).max().unwrap_or(0),
            entries: entries.len(),
        };
        (path, r)
    }

    /// Writes what `next` holds; returns the paths written (for an attempt
    /// that loses, to remove again).
    pub async fn write(&self, next: &Next) -> Result<Vec<String>, LedgerError> {
        let mut written = Vec::new();
        for (path, segment) in &next.segments {
            self.store.put_segment(path, segment).await?;
            written.push(path.clone());
        }
        self.store.put_head(&next.path, next.head.clone()).await?;
        written.push(next.path.clone());
        Ok(written)
    }
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
            Positions::Key { .. } => {}
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

/// The ledger entries of one snapshot holding these requests, with the source
/// state they record (a later request's value for a key wins).
pub fn summary_entries<'a>(
    requests: impl IntoIterator<Item = &'a CommitRequest>,
) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    let mut marks: HashMap<&str, &Position> = HashMap::new();
    let mut states = std::collections::BTreeMap::new();
    for r in requests {
        ids.push(r.batch_id.as_str());
        states.extend(r.state.iter());
        let spans: &[SourceSpan] = &r.sources;
        for span in spans {
            if let Some(last) = span.last() {
                let mark = marks.entry(&span.source).or_insert(last);
                if *mark < last {
                    *mark = last;
                }
            }
        }
    }
    let mut out = vec![
        (BATCH_IDS.to_string(), ids.join(",")),
        (REQUESTS.to_string(), ids.len().to_string()),
    ];
    let mut marks: Vec<_> = marks.into_iter().collect();
    marks.sort();
    out.extend(
        marks
            .into_iter()
            .map(|(source, pos)| (format!("{HWM_PREFIX}{source}"), pos.to_string())),
    );
    out.extend(
        states
            .into_iter()
            .map(|(k, v)| (format!("{STATE_PREFIX}{k}"), v.clone())),
    );
    out
}

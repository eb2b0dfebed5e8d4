//! The head after a commit: the committed requests' entries and positions
//! added; runs spilled into pages, pages merged, old runs settled; the
//! recent entries sealed into a segment and segments merged in tiers as
//! they fill; idle sources moved to their archive buckets; what left the
//! windows dropped. Files the new head stops naming are retired, not
//! deleted: a process that loaded the table just before this commit may
//! still read them, so they go only once [`RETIRE_GRACE_MS`] has passed.

use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use super::archive;
use super::head::{self, ArchiveRef, Archived, Entry, Head, Retired, Segment, SegmentRef};
use super::marks::{MAX_PAGES, Page, PageRef, Run};
use super::{Ledger, LedgerError, LedgerStore, RETIRE_GRACE_MS, entry};
use crate::request::CommitRequest;
use crate::source::Positions;

/// Record digests after which the head's recent entries are sealed.
const SEAL_KEYS: usize = 32 * 1024;
/// Segments of one tier merged into one of the next.
const FANIN: usize = 16;
/// The highest tier merges produce.
const MAX_TIER: u8 = 2;
/// Retired files the head lists at most; past it the oldest go at once.
const MAX_RETIRED: usize = 64;

/// What a commit writes for the ledger and what it leaves behind.
#[derive(Debug)]
pub struct Next {
    /// The new head.
    pub head: Arc<Head>,
    /// Where it goes; the table property names it.
    pub path: String,
    /// Segments sealed or merged for it.
    pub segments: Vec<(String, Segment)>,
    /// Pages of spilled runs written for it.
    pub pages: Vec<(String, Page)>,
    /// Archive buckets written for it.
    pub buckets: Vec<(String, Archived)>,
    /// Ledger files retired long enough ago, to delete once it landed.
    pub obsolete: Vec<String>,
}

impl Next {
    /// Writes its files, the head last; returns the paths written.
    pub(super) async fn write(&self, store: &LedgerStore) -> Result<Vec<String>, LedgerError> {
        let mut written = Vec::new();
        for (path, segment) in &self.segments {
            store.put_segment(path, segment).await?;
            written.push(path.clone());
        }
        for (path, page) in &self.pages {
            store.put_page(path, page.clone()).await?;
            written.push(path.clone());
        }
        for (path, bucket) in &self.buckets {
            store.put_archived(path, bucket.clone()).await?;
            written.push(path.clone());
        }
        store.put_head(&self.path, self.head.clone()).await?;
        written.push(self.path.clone());
        Ok(written)
    }
}

/// The head being built, with the files made for it and those it retires.
struct Draft<'a> {
    ledger: &'a Ledger,
    head: Head,
    now_ms: i64,
    segments: Vec<(String, Segment)>,
    pages: Vec<(String, Page)>,
    buckets: Vec<(String, Archived)>,
    retire: Vec<String>,
}

impl Ledger {
    /// The head after committing `requests` at `now_ms`. Nothing is written yet.
    pub async fn next(
        &self,
        requests: &[&CommitRequest],
        now_ms: i64,
    ) -> Result<Next, LedgerError> {
        let mut d = Draft {
            ledger: self,
            head: (*self.head).clone(),
            now_ms,
            segments: Vec::new(),
            pages: Vec::new(),
            buckets: Vec::new(),
            retire: self.head_path.iter().cloned().collect(),
        };
        d.head.version = head::FORMAT;
        d.head.seq += 1;
        let touched = d.add(requests).await?;
        let cutoff = now_ms.saturating_sub(self.windows.request_ms);
        for source in &touched {
            d.tidy(source, cutoff).await?;
        }
        if d.seal() {
            // Once per seal, not per commit: every source settles and the
            // idle ones leave for the archive.
            let all: Vec<String> = d.head.sources.keys().cloned().collect();
            for source in &all {
                d.tidy(source, cutoff).await?;
            }
            d.archive_idle(cutoff).await?;
        }
        d.merge_tiers().await?;
        d.expire_segments(cutoff).await?;
        d.migrate_segments().await?;
        Ok(d.finish())
    }
}

impl Draft<'_> {
    /// The requests' entries, state and ordered positions; returns the
    /// ordered sources they touched.
    async fn add(&mut self, requests: &[&CommitRequest]) -> Result<BTreeSet<String>, LedgerError> {
        let mut touched = BTreeSet::new();
        for r in requests {
            self.head.recent.push(entry(r, self.now_ms));
            self.head
                .state
                .extend(r.state.iter().map(|(k, v)| (k.clone(), v.clone())));
            for span in &r.sources {
                let Positions::Range { first, last } = &span.positions else {
                    continue;
                };
                if !self.head.sources.contains_key(&span.source) {
                    // An archived source commits again: back into the head.
                    if let Some(m) = self.ledger.marks(&span.source).await? {
                        let m = m.into_owned();
                        self.head.sources.insert(span.source.clone(), m);
                    }
                }
                let marks = self.head.sources.entry(span.source.clone()).or_default();
                marks.insert(first.clone(), last.clone(), self.now_ms);
                touched.insert(span.source.clone());
            }
        }
        Ok(touched)
    }

    /// Spills a source's lower runs into a page, merges its lowest pages
    /// when it has too many, and settles what left the request window.
    async fn tidy(&mut self, source: &str, cutoff: i64) -> Result<(), LedgerError> {
        let Some(marks) = self.head.sources.get_mut(source) else {
            return Ok(());
        };
        if let Some(runs) = marks.spill() {
            let path = self.ledger.file("page");
            if let Some(r) = PageRef::of(path.clone(), &runs) {
                marks.pages.push(r);
                marks.pages.sort_by(|a, b| a.lo.cmp(&b.lo));
                self.pages.push((path, page(runs)));
            }
        }
        let merge: Vec<PageRef> = if marks.pages.len() > MAX_PAGES {
            marks
                .pages
                .drain(..marks.pages.len() - MAX_PAGES / 2)
                .collect()
        } else {
            Vec::new()
        };
        if !merge.is_empty() {
            let mut runs: Vec<Run> = Vec::new();
            for p in &merge {
                runs.extend(self.page_runs(p).await?);
                self.retire.push(p.path.clone());
            }
            runs.sort_by(|a, b| a.first.cmp(&b.first));
            let path = self.ledger.file("page");
            if let Some(marks) = self.head.sources.get_mut(source)
                && let Some(r) = PageRef::of(path.clone(), &runs)
            {
                marks.pages.push(r);
                marks.pages.sort_by(|a, b| a.lo.cmp(&b.lo));
                self.pages.push((path, page(runs)));
            }
        }
        if let Some(marks) = self.head.sources.get_mut(source) {
            let settled = marks.settle(cutoff);
            self.retire.extend(settled);
        }
        Ok(())
    }

    /// The runs of a page, written by this commit or read.
    async fn page_runs(&self, p: &PageRef) -> Result<Vec<Run>, LedgerError> {
        if let Some((_, page)) = self.pages.iter().find(|(path, _)| path == &p.path) {
            return Ok(page.runs.clone());
        }
        Ok(self.ledger.store.page(&p.path).await?.runs.clone())
    }

    /// Seals the recent entries into a segment when there are enough;
    /// true when it did.
    fn seal(&mut self) -> bool {
        let keys: usize = self.head.recent.iter().map(Entry::key_count).sum();
        if self.head.recent.len() < self.ledger.windows.seal_entries && keys < SEAL_KEYS {
            return false;
        }
        let entries = std::mem::take(&mut self.head.recent);
        let (path, r) = self.segment_ref(0, &entries);
        self.segments.push((
            path,
            Segment {
                version: head::FORMAT,
                entries,
            },
        ));
        self.head.segments.push(r);
        true
    }

    /// Moves sources idle since before `cutoff` into their archive buckets.
    async fn archive_idle(&mut self, cutoff: i64) -> Result<(), LedgerError> {
        let idle: Vec<String> = self
            .head
            .sources
            .iter()
            .filter(|(_, m)| m.idle(cutoff))
            .map(|(s, _)| s.clone())
            .collect();
        let mut by_bucket: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
        for s in idle {
            by_bucket.entry(archive::bucket(&s)).or_default().push(s);
        }
        for (bucket, sources) in by_bucket {
            let old = self.head.archive.iter().position(|r| r.bucket == bucket);
            let mut body = match old {
                Some(i) => {
                    let path = self.head.archive[i].path.clone();
                    (*self.ledger.store.archived(&path).await?).clone()
                }
                None => Archived::default(),
            };
            body.version = head::FORMAT;
            for s in sources {
                if let Some(m) = self.head.sources.remove(&s) {
                    body.sources.insert(s, m);
                }
            }
            let path = self.ledger.file("archive");
            let r = ArchiveRef {
                bucket,
                path: path.clone(),
                sources: body.sources.len(),
            };
            match old {
                Some(i) => {
                    let replaced = std::mem::replace(&mut self.head.archive[i], r);
                    self.retire.push(replaced.path);
                }
                None => self.head.archive.push(r),
            }
            self.buckets.push((path, body));
        }
        Ok(())
    }

    /// Merges segments of a tier into one of the next while a tier is full,
    /// dropping entries that left the windows.
    async fn merge_tiers(&mut self) -> Result<(), LedgerError> {
        for tier in 0..MAX_TIER {
            loop {
                let of_tier: Vec<usize> = (0..self.head.segments.len())
                    .filter(|i| self.head.segments[*i].tier == tier)
                    .collect();
                if of_tier.len() < FANIN {
                    break;
                }
                let merged: Vec<SegmentRef> = of_tier[..FANIN]
                    .iter()
                    .map(|i| self.head.segments[*i].clone())
                    .collect();
                let mut entries = Vec::new();
                for s in &merged {
                    entries.extend(self.segment_entries(s).await?);
                }
                entries.sort_by_key(|e| e.ms);
                let kept = self.prune(entries);
                self.retire.extend(merged.iter().map(|s| s.path.clone()));
                self.head.segments.retain(|s| !merged.contains(s));
                self.segments
                    .retain(|(p, _)| !merged.iter().any(|m| &m.path == p));
                if !kept.is_empty() {
                    let (path, r) = self.segment_ref(tier + 1, &kept);
                    self.segments.push((
                        path,
                        Segment {
                            version: head::FORMAT,
                            entries: kept,
                        },
                    ));
                    self.head.segments.push(r);
                }
                self.head.segments.sort_by_key(|s| s.from_ms);
            }
        }
        Ok(())
    }

    /// Segments wholly out of the request window go, with their key files.
    async fn expire_segments(&mut self, cutoff: i64) -> Result<(), LedgerError> {
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.head.segments)
            .into_iter()
            .partition(|s| s.to_ms < cutoff);
        self.head.segments = kept;
        for s in expired {
            for e in self.segment_entries(&s).await? {
                self.retire.extend(e.kf);
            }
            self.retire.push(s.path);
        }
        Ok(())
    }

    /// Segments a format-1 ledger kept under the table's location move
    /// beside it, out of reach of other engines' orphan cleanup.
    async fn migrate_segments(&mut self) -> Result<(), LedgerError> {
        let dir = self.ledger.dir.clone();
        for i in 0..self.head.segments.len() {
            let old = self.head.segments[i].clone();
            if crate::uri::within(&old.path, &dir) {
                continue;
            }
            let entries = self.segment_entries(&old).await?;
            let path = self.ledger.file(&format!("seg-{}", old.tier));
            self.segments.push((
                path.clone(),
                Segment {
                    version: head::FORMAT,
                    entries,
                },
            ));
            self.head.segments[i].path = path;
            self.retire.push(old.path);
        }
        Ok(())
    }

    /// Entries older than the request window dropped (their key files
    /// retired), and record digests older than the key window stripped.
    fn prune(&mut self, entries: Vec<Entry>) -> Vec<Entry> {
        let windows = self.ledger.windows;
        let requests_from = self.now_ms.saturating_sub(windows.request_ms);
        let keys_from = self.now_ms.saturating_sub(windows.key_ms);
        let mut kept = Vec::with_capacity(entries.len());
        for mut e in entries {
            if e.ms < requests_from {
                self.retire.extend(e.kf.take());
                continue;
            }
            if e.ms < keys_from {
                e.keys.clear();
            }
            kept.push(e);
        }
        kept
    }

    async fn segment_entries(&self, s: &SegmentRef) -> Result<Vec<Entry>, LedgerError> {
        if let Some((_, seg)) = self.segments.iter().find(|(p, _)| p == &s.path) {
            return Ok(seg.entries.clone());
        }
        Ok(self.ledger.store.segment(&s.path).await?.entries().to_vec())
    }

    fn segment_ref(&self, tier: u8, entries: &[Entry]) -> (String, SegmentRef) {
        let path = self.ledger.file(&format!("seg-{tier}"));
        let r = SegmentRef {
            path: path.clone(),
            tier,
            from_ms: entries.iter().map(|e| e.ms).min().unwrap_or(0),
            to_ms: entries.iter().map(|e| e.ms).max().unwrap_or(0),
            entries: entries.len(),
        };
        (path, r)
    }

    /// The head with its retired list brought up to date, and its path.
    fn finish(mut self) -> Next {
        let made: BTreeSet<&String> = self
            .segments
            .iter()
            .map(|(p, _)| p)
            .chain(self.pages.iter().map(|(p, _)| p))
            .chain(self.buckets.iter().map(|(p, _)| p))
            .collect();
        // A file written by this commit and retired by it never existed.
        let retired_now: Vec<Retired> = std::mem::take(&mut self.retire)
            .into_iter()
            .filter(|p| !made.contains(p))
            .map(|path| Retired {
                path,
                ms: self.now_ms,
            })
            .collect();
        let grace = self.now_ms.saturating_sub(RETIRE_GRACE_MS);
        let mut retired = std::mem::take(&mut self.head.retired);
        retired.extend(retired_now);
        let over = retired.len().saturating_sub(MAX_RETIRED);
        let mut obsolete = Vec::new();
        let mut kept = Vec::new();
        for (i, r) in retired.into_iter().enumerate() {
            if i >= over && r.ms >= grace {
                kept.push(r);
            } else if !self.ledger.names(&r.path) {
                obsolete.push(r.path);
            }
            // A head a snapshot still names is left in place, off the list:
            // a rollback to that snapshot repairs from it, and orphan
            // cleanup keeps it while the snapshot is in the table.
        }
        self.head.retired = kept;
        let path = format!(
            "{}/head-{:012}-{}.json.zst",
            self.ledger.dir,
            self.head.seq,
            Uuid::now_v7().simple()
        );
        Next {
            head: Arc::new(self.head),
            path,
            segments: self.segments,
            pages: self.pages,
            buckets: self.buckets,
            obsolete,
        }
    }
}

impl Ledger {
    /// A new file's path in the ledger's directory.
    fn file(&self, kind: &str) -> String {
        format!("{}/{kind}-{}.json.zst", self.dir, Uuid::now_v7().simple())
    }
}

fn page(runs: Vec<Run>) -> Page {
    Page {
        version: head::FORMAT,
        runs,
    }
}

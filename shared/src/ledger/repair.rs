//! Rebuilding a ledger whose head is gone (`floe ledger repair`), or that
//! names commits the table no longer has (another engine rolled the table
//! back), from what the table's history names.
//!
//! Only heads the table names are trusted: the one its `floe.ledger`
//! property names and those the snapshots of main's history recorded when
//! they committed. A head file that no commit named (one written by a
//! commit that crashed before the catalog swap) says nothing about the
//! table: trusting it would count its records as committed. The newest
//! trusted head that still reads is the base: heads are retired, not
//! deleted, for a while, so after a cleanup that took only the current one
//! an older head is there. Every snapshot of main's history then adds what
//! its summary records: its batch ids, its ordered spans per source
//! (`floe.spans.*`; snapshots of older builds only their high-water marks,
//! below which everything counts as committed) and its source state.
//! Snapshots a rollback left off main's history add nothing. Files the
//! base head names that are gone too are dropped from it; a missing page's
//! positions count as committed, so a redelivery of them is never
//! committed twice.

use std::collections::HashSet;

use iceberg::spec::{SnapshotRef, TableMetadata};

use super::head::{self, Head};
use super::marks::Marks;
use super::{
    BATCH_IDS, HWM_PREFIX, LedgerError, LedgerStore, PROPERTY, SPANS_PREFIX, STATE_PREFIX, archive,
};
use crate::source::Position;

/// What a repair rebuilt from.
#[derive(Debug, Clone, Default)]
pub struct Rebuilt {
    /// The rebuilt head.
    pub head: Head,
    /// The surviving head it started from, if any.
    pub base: Option<String>,
    /// Files the base named that are gone.
    pub missing: Vec<String>,
    /// Snapshots whose summaries were read.
    pub snapshots: usize,
    /// When no head the table names reads and expiry took the start of
    /// main's history: the newest head named (what the commits before that
    /// history held is unknown, so their records would commit again).
    pub gap: Option<String>,
}

/// Rebuilds the head of the table `metadata` describes.
pub async fn rebuild(
    store: &LedgerStore,
    metadata: &TableMetadata,
) -> Result<Rebuilt, LedgerError> {
    let mut out = Rebuilt::default();
    let history = main_history(metadata);
    let named = named_heads(metadata, &history);
    let (mut head, base) = newest_head(store, &named).await?;
    let truncated = history
        .first()
        .is_some_and(|s| s.parent_snapshot_id().is_some());
    if base.is_none() && truncated {
        out.gap = Some(
            named
                .first()
                .map_or_else(|| "(no head named)".to_string(), |p| p.to_string()),
        );
    }
    out.base = base;
    out.missing = drop_missing(store, &mut head).await?;
    let newest_entry = head
        .recent
        .iter()
        .map(|e| e.ms)
        .chain(head.segments.iter().map(|s| s.to_ms))
        .max()
        .unwrap_or(i64::MIN);
    for snapshot in history {
        out.snapshots += 1;
        let ms = snapshot.timestamp_ms();
        let props = &snapshot.summary().additional_properties;
        if let Some(ids) = props.get(BATCH_IDS) {
            head.recent.extend(super::legacy::batch_entries(ids, ms));
        }
        for (key, value) in props {
            if let Some(k) = key.strip_prefix(STATE_PREFIX)
                && ms > newest_entry
            {
                head.state.insert(k.to_string(), value.clone());
            }
            if let Some(source) = key.strip_prefix(SPANS_PREFIX) {
                let marks = marks_of(store, &mut head, source).await?;
                for (first, last) in parse_spans(value) {
                    marks.insert(first, last, ms);
                }
            } else if let Some(source) = key.strip_prefix(HWM_PREFIX)
                && !props.contains_key(&format!("{SPANS_PREFIX}{source}"))
                && let Some(pos) = Position::parse(value)
            {
                let marks = marks_of(store, &mut head, source).await?;
                settle_upto(marks, pos, ms);
            }
        }
    }
    head.recent.sort_by_key(|e| e.ms);
    head.version = head::FORMAT;
    head.seq += 1;
    out.head = head;
    Ok(out)
}

/// Whether the head the table's property names was written by a commit
/// that main's history no longer holds (another engine rolled the table
/// back past it): that ledger counts records the table does not have, and
/// [`rebuild`] gives the one that matches the table. Decided while the
/// rolled-back snapshot is still in the metadata (until it expires).
pub fn rolled_back(metadata: &TableMetadata) -> bool {
    let Some(named) = metadata.properties().get(PROPERTY) else {
        return false;
    };
    let names = |s: &SnapshotRef| s.summary().additional_properties.get(PROPERTY) == Some(named);
    if metadata.current_snapshot().is_some_and(names) {
        return false;
    }
    // The snapshots that name it: the commit that wrote it, and rewrites
    // (compactions) made while it was current. A repair's commit names a
    // head with no snapshot of its own; its file name carries the snapshot
    // it was rebuilt against.
    let mut writers: Vec<i64> = metadata
        .snapshots()
        .filter(|s| names(s))
        .map(|s| s.snapshot_id())
        .collect();
    if writers.is_empty() {
        writers.extend(repaired_at(named).filter(|id| metadata.snapshot_by_id(*id).is_some()));
    }
    if writers.is_empty() {
        return false;
    }
    !main_history(metadata)
        .iter()
        .any(|s| writers.contains(&s.snapshot_id()))
}

/// The snapshot a repaired head was rebuilt against (`head-…-s<id>.json.zst`).
fn repaired_at(path: &str) -> Option<i64> {
    let name = path.rsplit('/').next()?;
    name.strip_suffix(".json.zst")?
        .rsplit_once("-s")?
        .1
        .parse()
        .ok()
}

/// Main's snapshots, oldest first: the current one and its ancestors that
/// the metadata still holds.
fn main_history(metadata: &TableMetadata) -> Vec<&SnapshotRef> {
    let mut history = Vec::new();
    let mut next = metadata.current_snapshot();
    while let Some(s) = next {
        history.push(s);
        next = s
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p));
    }
    history.reverse();
    history
}

/// The heads the table names, newest first: its property's (unless a
/// rollback left it ahead of the table), and those `history`'s snapshots
/// recorded.
fn named_heads<'m>(metadata: &'m TableMetadata, history: &[&'m SnapshotRef]) -> Vec<&'m String> {
    let property = metadata
        .properties()
        .get(PROPERTY)
        .filter(|_| !rolled_back(metadata));
    let recorded = history
        .iter()
        .filter_map(|s| s.summary().additional_properties.get(PROPERTY));
    let mut seen = HashSet::new();
    let mut heads: Vec<&String> = property
        .into_iter()
        .chain(recorded)
        .filter(|p| seen.insert(p.as_str()))
        .collect();
    heads.sort_by_key(|p| std::cmp::Reverse(head_seq(p)));
    heads
}

/// The newest of the `named` heads that reads, else one started from the
/// table's summaries alone.
async fn newest_head(
    store: &LedgerStore,
    named: &[&String],
) -> Result<(Head, Option<String>), LedgerError> {
    for path in named {
        match store.head(path).await {
            Ok(h) => return Ok(((*h).clone(), Some((*path).clone()))),
            Err(LedgerError::Missing { .. } | LedgerError::Format { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok((
        Head {
            version: head::FORMAT,
            ..Default::default()
        },
        None,
    ))
}

/// The sequence number in a head file's name (`head-000000000042-….json.zst`).
fn head_seq(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next()?;
    name.strip_prefix("head-")?.split('-').next()?.parse().ok()
}

/// Drops what the head names that is gone; returns those paths.
async fn drop_missing(store: &LedgerStore, head: &mut Head) -> Result<Vec<String>, LedgerError> {
    let mut missing = Vec::new();
    let mut segments = Vec::new();
    for s in std::mem::take(&mut head.segments) {
        match store.segment(&s.path).await {
            Ok(_) => segments.push(s),
            Err(LedgerError::Missing { path }) => missing.push(path),
            Err(e) => return Err(e),
        }
    }
    head.segments = segments;
    let mut archive = Vec::new();
    for a in std::mem::take(&mut head.archive) {
        match store.archived(&a.path).await {
            Ok(_) => archive.push(a),
            Err(LedgerError::Missing { path }) => missing.push(path),
            Err(e) => return Err(e),
        }
    }
    head.archive = archive;
    for marks in head.sources.values_mut() {
        let mut pages = Vec::new();
        for p in std::mem::take(&mut marks.pages) {
            match store.page(&p.path).await {
                Ok(_) => pages.push(p),
                Err(LedgerError::Missing { path }) => {
                    missing.push(path);
                    // Its runs are lost: count the whole range as committed.
                    let settled = match marks.settled.take() {
                        Some((lo, hi)) => (lo.min(p.lo.clone()), hi.max(p.hi.clone())),
                        None => (p.lo.clone(), p.hi.clone()),
                    };
                    marks.settled = Some(settled);
                }
                Err(e) => return Err(e),
            }
        }
        marks.pages = pages;
    }
    head.retired.clear();
    Ok(missing)
}

/// The head's marks of `source`, brought in from its archive bucket first.
async fn marks_of<'h>(
    store: &LedgerStore,
    head: &'h mut Head,
    source: &str,
) -> Result<&'h mut Marks, LedgerError> {
    if !head.sources.contains_key(source) {
        let bucket = archive::bucket(source);
        let mut marks = Marks::default();
        if let Some(r) = head.archive.iter().find(|r| r.bucket == bucket)
            && let Some(m) = store.archived(&r.path).await?.sources.get(source)
        {
            marks = m.clone();
        }
        head.sources.insert(source.to_string(), marks);
    }
    Ok(head.sources.entry(source.to_string()).or_default())
}

/// Everything at or below `pos` counts as committed (a summary of an older
/// build recorded only the highest position).
fn settle_upto(marks: &mut Marks, pos: Position, ms: i64) {
    let hi = match marks.settled.take() {
        Some((_, hi)) => hi.max(pos),
        None => pos,
    };
    marks.settled = Some((Position::from(0), hi));
    marks.ms = marks.ms.max(ms);
}

/// `first-last,…` as positions.
fn parse_spans(text: &str) -> Vec<(Position, Position)> {
    text.split(',')
        .filter_map(|run| {
            let (f, l) = run.split_once('-')?;
            Some((Position::parse(f)?, Position::parse(l)?))
        })
        .collect()
}

/// Where a rebuilt head goes: the table's ledger directory, with the
/// sequence number it carries and the snapshot it matches (no snapshot
/// names a repaired head, and [`rolled_back`] needs to know which one it
/// describes).
pub fn head_path(metadata: &TableMetadata, head: &Head) -> String {
    let at = metadata
        .current_snapshot_id()
        .map(|id| format!("-s{id}"))
        .unwrap_or_default();
    format!(
        "{}/head-{:012}-{}{at}.json.zst",
        super::place::dir(metadata),
        head.seq,
        uuid::Uuid::now_v7().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_names_and_spans_parse() {
        assert_eq!(
            head_seq("s3://b/w/_floe/ledger/u/head-000000000042-0190abc-s-17.json.zst"),
            Some(42)
        );
        assert_eq!(
            head_seq("s3://b/w/_floe/ledger/u/seg-0-0190abc.json.zst"),
            None
        );
        assert_eq!(
            repaired_at("s3://b/w/_floe/ledger/u/head-000000000042-0190abc-s-17.json.zst"),
            Some(-17)
        );
        assert_eq!(
            repaired_at("file:///w/_floe/ledger/u/head-000000000042-0190abc-s8123.json.zst"),
            Some(8123)
        );
        assert_eq!(
            repaired_at("s3://b/w/_floe/ledger/u/head-000000000042-0190abc.json.zst"),
            None
        );
        assert_eq!(
            parse_spans("1-5,9-12,x-3"),
            vec![
                (Position::from(1), Position::from(5)),
                (Position::from(9), Position::from(12))
            ]
        );
    }
}

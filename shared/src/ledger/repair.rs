//! Rebuilding a ledger whose head is gone (`floe ledger repair`), from what
//! survives and what the table itself records.
//!
//! The newest head that still reads is the base: heads are retired, not
//! deleted, for a while, so after a cleanup that took only the current one
//! an older head is there. Every snapshot the table still has then adds what
//! its summary records: its batch ids, its ordered spans per source
//! (`floe.spans.*`; snapshots of older builds only their high-water marks,
//! below which everything counts as committed) and its source state. Files
//! the base head names that are gone too are dropped from it; a missing
//! page's positions count as committed, so a redelivery of them is never
//! committed twice.

use iceberg::spec::TableMetadata;

use super::head::{self, Head};
use super::marks::Marks;
use super::{BATCH_IDS, HWM_PREFIX, LedgerError, LedgerStore, SPANS_PREFIX, STATE_PREFIX, archive};
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
}

/// Rebuilds the head of the table `metadata` describes; `candidates` are
/// the files found in its ledger directories (heads among them are tried,
/// newest first).
pub async fn rebuild(
    store: &LedgerStore,
    metadata: &TableMetadata,
    candidates: &[String],
) -> Result<Rebuilt, LedgerError> {
    let mut out = Rebuilt::default();
    let (mut head, base) = newest_head(store, candidates).await?;
    out.base = base;
    out.missing = drop_missing(store, &mut head).await?;
    let newest_entry = head
        .recent
        .iter()
        .map(|e| e.ms)
        .chain(head.segments.iter().map(|s| s.to_ms))
        .max()
        .unwrap_or(i64::MIN);
    let mut snapshots: Vec<_> = metadata.snapshots().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    for snapshot in snapshots {
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

/// The newest head among `candidates` that reads, else one started from
/// the table's summaries alone.
async fn newest_head(
    store: &LedgerStore,
    candidates: &[String],
) -> Result<(Head, Option<String>), LedgerError> {
    let mut heads: Vec<(u64, &String)> = candidates
        .iter()
        .filter_map(|p| Some((head_seq(p)?, p)))
        .collect();
    heads.sort_by_key(|h| std::cmp::Reverse(h.0));
    for (_, path) in heads {
        match store.head(path).await {
            Ok(h) => return Ok(((*h).clone(), Some(path.clone()))),
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
/// sequence number it carries.
pub fn head_path(metadata: &TableMetadata, head: &Head) -> String {
    format!(
        "{}/head-{:012}-{}.json.zst",
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
            head_seq("s3://b/w/_floe/ledger/u/head-000000000042-0190abc.json.zst"),
            Some(42)
        );
        assert_eq!(
            head_seq("s3://b/w/_floe/ledger/u/seg-0-0190abc.json.zst"),
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

//! Entries of the head or of one sealed segment, indexed for the lookups a
//! commit makes: by batch id, by record digest per source, by ordered span.

use std::collections::{HashMap, HashSet};

use super::digest;
use super::head::{Entry, FormatError};
use super::runs::Runs;
use crate::source::Position;

/// Indexed entries.
#[derive(Debug, Default)]
pub struct Index {
    entries: Vec<Entry>,
    batch_ids: HashSet<String>,
    keys: HashMap<String, HashSet<u128>>,
    by_key_source: HashMap<String, Vec<usize>>,
    spans: HashMap<String, Vec<(Position, Position, usize)>>,
}

impl Index {
    /// Indexes `entries`. Digests that do not unpack fail it: indexed
    /// without them, the records they claim would read as never committed.
    pub fn new(entries: Vec<Entry>) -> Result<Self, FormatError> {
        let mut index = Index::default();
        for (i, e) in entries.iter().enumerate() {
            index.batch_ids.insert(e.id.clone());
            for (source, packed) in &e.keys {
                let digests = digest::unpack(packed).ok_or(FormatError::Digests)?;
                index
                    .keys
                    .entry(source.clone())
                    .or_default()
                    .extend(digests);
                index
                    .by_key_source
                    .entry(source.clone())
                    .or_default()
                    .push(i);
            }
            for (source, first, last) in &e.spans {
                index.spans.entry(source.clone()).or_default().push((
                    first.clone(),
                    last.clone(),
                    i,
                ));
            }
        }
        index.entries = entries;
        Ok(index)
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// True when the batch is among the entries.
    pub fn has_batch(&self, batch_id: &str) -> bool {
        self.batch_ids.contains(batch_id)
    }

    /// True when record `digest` of `source` is among the entries.
    pub fn has_key(&self, source: &str, digest: u128) -> bool {
        self.keys.get(source).is_some_and(|s| s.contains(&digest))
    }

    /// Adds to `into` the committed runs of `source` inside `[first, last]`.
    pub fn claim_range(&self, source: &str, first: &Position, last: &Position, into: &mut Runs) {
        for (f, l, _) in self.spans.get(source).into_iter().flatten() {
            if f <= last && first <= l {
                into.insert(f.max(first).clone(), l.min(last).clone());
            }
        }
    }

    /// Entries with an ordered span of `source` reaching `from` or beyond, or
    /// with records of `source` when it is unordered.
    pub fn touching<'a>(
        &'a self,
        source: &'a str,
        from: Option<&'a Position>,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        let by_span = self
            .spans
            .get(source)
            .into_iter()
            .flatten()
            .filter(move |(_, l, _)| from.is_none_or(|f| l >= f))
            .map(|(_, _, i)| *i);
        let by_key = self
            .by_key_source
            .get(source)
            .into_iter()
            .flatten()
            .copied();
        let mut seen = HashSet::new();
        by_span
            .chain(by_key)
            .filter(move |i| seen.insert(*i))
            .filter_map(|i| self.entries.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(keys: &str) -> Entry {
        Entry {
            ms: 1,
            id: "b".into(),
            at: 1,
            spans: Vec::new(),
            keys: [("sqs:q".to_string(), keys.to_string())].into(),
            kf: None,
        }
    }

    /// Digests that do not unpack fail the index instead of leaving the
    /// records they claim to read as never committed.
    #[test]
    fn digests_that_do_not_unpack_fail_the_index() {
        let packed = digest::pack(&[7, 9]);
        let index = Index::new(vec![entry(&packed)]).unwrap();
        assert_eq!(index.keys["sqs:q"], HashSet::from([7, 9]));
        assert!(matches!(
            Index::new(vec![entry("not base64!")]),
            Err(FormatError::Digests)
        ));
    }
}

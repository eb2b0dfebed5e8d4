//! Which records of a request a table already accounts for, span by span,
//! and which the requests taken earlier in the same commit attempt hold.

use std::collections::{HashMap, HashSet};

use super::digest::record as record_digest;
use super::runs::Runs;
use crate::request::CommitRequest;
use crate::source::{Position, Positions};

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
    /// The lowest position of ordered span `span` that is not accounted
    /// for; `None` when every one is, or the span is not ordered.
    pub fn first_open(&self, request: &CommitRequest, span: usize) -> Option<Position> {
        let Positions::Range { first, last } = &request.sources.get(span)?.positions else {
            return None;
        };
        match self.spans.get(span) {
            Some(SpanClaim::Runs(r)) => r.first_gap(first, last),
            _ => Some(first.clone()),
        }
    }

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

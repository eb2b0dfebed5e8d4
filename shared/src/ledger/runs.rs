//! Sets of committed positions of one ordered source, as sorted disjoint
//! inclusive runs: a run `[first, last]` says every record of the source
//! between the two (both included) is accounted for, in the table or in the
//! dead-letter location. Runs of consecutive positions merge into one, so a
//! Kafka partition or a file committed in any order stays a handful of runs.

use serde::{Deserialize, Serialize};

use crate::source::Position;

/// Sorted, disjoint, non-adjacent inclusive runs of positions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Runs(Vec<(Position, Position)>);

impl Runs {
    /// No positions.
    pub fn new() -> Self {
        Self::default()
    }

    /// One run.
    pub fn of(first: Position, last: Position) -> Self {
        let (first, last) = if first <= last {
            (first, last)
        } else {
            (last, first)
        };
        Self(vec![(first, last)])
    }

    /// True when no position is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The runs, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = &(Position, Position)> {
        self.0.iter()
    }

    /// How many runs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The highest position in the set.
    pub fn last(&self) -> Option<&Position> {
        self.0.last().map(|(_, l)| l)
    }

    /// The lowest position in the set.
    pub fn first(&self) -> Option<&Position> {
        self.0.first().map(|(f, _)| f)
    }

    /// Adds `[first, last]`, merging it with the runs it overlaps or touches.
    pub fn insert(&mut self, first: Position, last: Position) {
        let (mut first, mut last) = if first <= last {
            (first, last)
        } else {
            (last, first)
        };
        // Runs entirely before the new one that do not touch it stay.
        let start = self.0.partition_point(|(_, l)| l.next() < first);
        let mut end = start;
        while end < self.0.len() && self.0[end].0 <= last.next() {
            if self.0[end].0 < first {
                first = self.0[end].0.clone();
            }
            if self.0[end].1 > last {
                last = self.0[end].1.clone();
            }
            end += 1;
        }
        self.0.splice(start..end, [(first, last)]);
    }

    /// Adds every run of `other`.
    pub fn extend(&mut self, other: &Runs) {
        for (f, l) in other.iter() {
            self.insert(f.clone(), l.clone());
        }
    }

    /// True when `pos` is in the set.
    pub fn contains(&self, pos: &Position) -> bool {
        let i = self.0.partition_point(|(_, l)| l < pos);
        self.0.get(i).is_some_and(|(f, _)| f <= pos)
    }

    /// True when every position of `[first, last]` is in the set.
    pub fn covers(&self, first: &Position, last: &Position) -> bool {
        let i = self.0.partition_point(|(_, l)| l < first);
        self.0.get(i).is_some_and(|(f, l)| f <= first && last <= l)
    }

    /// The part of the set inside `[first, last]`.
    pub fn within(&self, first: &Position, last: &Position) -> Runs {
        let i = self.0.partition_point(|(_, l)| l < first);
        Runs(
            self.0[i..]
                .iter()
                .take_while(|(f, _)| f <= last)
                .map(|(f, l)| (f.max(first).clone(), l.min(last).clone()))
                .collect(),
        )
    }

    /// The lowest position of `[first, last]` not in the set.
    pub fn first_gap(&self, first: &Position, last: &Position) -> Option<Position> {
        let i = self.0.partition_point(|(_, l)| l < first);
        let gap = match self.0.get(i) {
            Some((f, l)) if f <= first => l.next(),
            _ => first.clone(),
        };
        (gap <= *last).then_some(gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u64) -> Position {
        Position::from(n)
    }

    fn runs(r: &Runs) -> Vec<(u64, u64)> {
        r.iter()
            .map(|(f, l)| (f.as_str().parse().unwrap(), l.as_str().parse().unwrap()))
            .collect()
    }

    #[test]
    fn adjacent_and_overlapping_runs_merge_in_any_order() {
        let mut r = Runs::new();
        r.insert(p(10), p(19));
        r.insert(p(30), p(39));
        r.insert(p(0), p(4));
        assert_eq!(runs(&r), vec![(0, 4), (10, 19), (30, 39)]);
        r.insert(p(20), p(29));
        assert_eq!(runs(&r), vec![(0, 4), (10, 39)]);
        r.insert(p(3), p(12));
        assert_eq!(runs(&r), vec![(0, 39)]);
        r.insert(p(99), p(99));
        assert!(r.contains(&p(39)) && !r.contains(&p(40)) && r.contains(&p(99)));
        assert!(r.covers(&p(5), &p(39)) && !r.covers(&p(5), &p(40)));
        assert_eq!(runs(&r.within(&p(35), &p(100))), vec![(35, 39), (99, 99)]);
        assert_eq!(r.first_gap(&p(5), &p(100)), Some(p(40)));
        assert_eq!(r.first_gap(&p(50), &p(100)), Some(p(50)));
        assert_eq!(r.first_gap(&p(5), &p(39)), None);
    }

    #[test]
    fn positions_beyond_u64_merge_too() {
        let a =
            Position::parse("49590338271490256608559692538361571095921575989136588898").unwrap();
        let b = a.next();
        assert_eq!(
            b.as_str(),
            "49590338271490256608559692538361571095921575989136588899"
        );
        assert_eq!(Position::from(99).next(), Position::from(100));
        let mut r = Runs::new();
        r.insert(b.clone(), b.clone());
        r.insert(a.clone(), a.clone());
        assert_eq!(r.len(), 1);
    }
}

//! One ordered source's committed positions, decided with no time bound: a
//! Kafka partition, a Kinesis shard, a file or a Postgres slot keeps every
//! position it ever committed accounted for, however late a redelivery
//! comes.
//!
//! Three tiers keep that flat in history. The head holds the highest runs,
//! each with the commit times it spans; lower runs spill into immutable
//! pages the head lists by position range, so a lookup below the head's
//! runs reads only the pages that overlap it; runs and pages whose last
//! commit left the request window fold into one settled range, inside which
//! every position counts as accounted for: a hole there is older than any
//! commit request can be (the queue and its DLQ keep none longer), so
//! nothing can still fill it. Positions below the settled range (a consumer
//! reset to earlier offsets than were ever committed) stay open.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::runs::Runs;
use crate::source::Position;

/// Runs a source keeps in the head after a spill.
pub const HEAD_RUNS: usize = 32;
/// Runs in the head that make it spill the lower ones into a page.
pub const SPILL_AT: usize = 2 * HEAD_RUNS;
/// Pages a source keeps before the lowest are merged into one.
pub const MAX_PAGES: usize = 16;

/// Committed positions `[first, last]` and when commits added them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its lowest position.
    pub first: Position,
    /// Its highest position.
    pub last: Position,
    /// The earliest commit that added positions of it (ms since epoch).
    pub from_ms: i64,
    /// The latest commit that added positions of it.
    pub to_ms: i64,
}

// A run is `[first, last, from_ms, to_ms]` in ledger files; format-1 heads
// wrote `[first, last]` (their times come from the source's last commit).
impl Serialize for Run {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&self.first, &self.last, self.from_ms, self.to_ms).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Run {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Timed(Position, Position, i64, i64),
            Bare(Position, Position),
        }
        Ok(match Wire::deserialize(d)? {
            Wire::Timed(first, last, from_ms, to_ms) => Run {
                first,
                last,
                from_ms,
                to_ms,
            },
            Wire::Bare(first, last) => Run {
                first,
                last,
                from_ms: 0,
                to_ms: 0,
            },
        })
    }
}

/// A page of spilled runs, as the head lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageRef {
    /// Where the page is.
    pub path: String,
    /// Its lowest position.
    pub lo: Position,
    /// Its highest position.
    pub hi: Position,
    /// The earliest commit of its runs.
    pub from_ms: i64,
    /// The latest commit of its runs.
    pub to_ms: i64,
    /// Runs it holds.
    pub runs: usize,
}

impl PageRef {
    /// The reference to a page holding `runs` (sorted, not empty).
    pub fn of(path: String, runs: &[Run]) -> Option<Self> {
        Some(Self {
            lo: runs.first()?.first.clone(),
            hi: runs.iter().map(|r| &r.last).max()?.clone(),
            from_ms: runs.iter().map(|r| r.from_ms).min()?,
            to_ms: runs.iter().map(|r| r.to_ms).max()?,
            runs: runs.len(),
            path,
        })
    }
}

/// The body of a page file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Page {
    /// Format version.
    pub version: u32,
    /// Its runs, lowest first.
    pub runs: Vec<Run>,
}

/// The committed positions of one ordered source.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Marks {
    /// The highest runs, lowest first: sorted, disjoint, not adjacent.
    #[serde(default)]
    pub runs: Vec<Run>,
    /// Pages of lower runs, by lowest position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<PageRef>,
    /// Every position in `[lo, hi]` is accounted for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<(Position, Position)>,
    /// Format 1 only: the highest position of runs dropped from the head,
    /// which its sealed segments hold; converted when the head is opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Position>,
    /// When the source last committed (ms since epoch).
    pub ms: i64,
}

impl Marks {
    /// The highest committed position.
    pub fn high_water_mark(&self) -> Option<&Position> {
        let runs = self.runs.last().map(|r| &r.last);
        let pages = self.pages.iter().map(|p| &p.hi).max();
        let settled = self.settled.as_ref().map(|(_, hi)| hi);
        [runs, pages, settled].into_iter().flatten().max()
    }

    /// Records positions `[first, last]` as committed at `ms`.
    pub fn insert(&mut self, first: Position, last: Position, ms: i64) {
        let (mut first, mut last) = if first <= last {
            (first, last)
        } else {
            (last, first)
        };
        let (mut from_ms, mut to_ms) = (ms, ms);
        let start = self.runs.partition_point(|r| r.last.next() < first);
        let mut end = start;
        while end < self.runs.len() && self.runs[end].first <= last.next() {
            let r = &self.runs[end];
            first = first.min(r.first.clone());
            last = last.max(r.last.clone());
            from_ms = from_ms.min(r.from_ms);
            to_ms = to_ms.max(r.to_ms);
            end += 1;
        }
        let run = Run {
            first,
            last,
            from_ms,
            to_ms,
        };
        self.runs.splice(start..end, [run]);
        self.ms = self.ms.max(ms);
    }

    /// What the head itself accounts for inside `[first, last]`: the settled
    /// range and the runs (pages are read separately).
    pub fn claim_head(&self, first: &Position, last: &Position) -> Runs {
        let mut out = Runs::new();
        if let Some((lo, hi)) = &self.settled
            && lo <= last
            && first <= hi
        {
            out.insert(lo.max(first).clone(), hi.min(last).clone());
        }
        for r in &self.runs {
            if &r.first <= last && first <= &r.last {
                out.insert(
                    r.first.clone().max(first.clone()),
                    r.last.clone().min(last.clone()),
                );
            }
        }
        out
    }

    /// The pages holding runs that may overlap `[first, last]`.
    pub fn pages_overlapping<'a>(
        &'a self,
        first: &'a Position,
        last: &'a Position,
    ) -> impl Iterator<Item = &'a PageRef> + 'a {
        self.pages
            .iter()
            .filter(move |p| &p.lo <= last && first <= &p.hi)
    }

    /// The earliest commit that added a position at or above `pos`, which
    /// is not itself accounted for: a commit holding a newer change than
    /// one at `pos` was made no earlier. `None` when nothing at or above it
    /// was ever committed.
    pub fn anchor(&self, pos: &Position) -> Option<i64> {
        let runs = self
            .runs
            .iter()
            .filter(|r| &r.last >= pos)
            .map(|r| r.from_ms);
        let pages = self
            .pages
            .iter()
            .filter(|p| &p.hi >= pos)
            .map(|p| p.from_ms);
        let settled = self
            .settled
            .as_ref()
            .filter(|(_, hi)| hi >= pos)
            .map(|_| i64::MIN);
        runs.chain(pages).chain(settled).min()
    }

    /// The lower runs to spill into a page, once the head holds too many.
    pub fn spill(&mut self) -> Option<Vec<Run>> {
        if self.runs.len() <= SPILL_AT {
            return None;
        }
        Some(self.runs.drain(..self.runs.len() - HEAD_RUNS).collect())
    }

    /// Folds runs and pages whose last commit is before `cutoff` into the
    /// settled range, lowest first, stopping at the first that is not;
    /// returns the paths of the pages folded (no longer needed).
    pub fn settle(&mut self, cutoff: i64) -> Vec<String> {
        let mut retired = Vec::new();
        loop {
            let page =
                (0..self.pages.len()).min_by(|a, b| self.pages[*a].lo.cmp(&self.pages[*b].lo));
            let take_page = match (page, self.runs.first()) {
                (Some(i), Some(r)) => self.pages[i].lo <= r.first,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let (lo, hi, to_ms) = match page.filter(|_| take_page) {
                Some(i) => {
                    let p = &self.pages[i];
                    (p.lo.clone(), p.hi.clone(), p.to_ms)
                }
                None => {
                    let r = &self.runs[0];
                    (r.first.clone(), r.last.clone(), r.to_ms)
                }
            };
            if to_ms >= cutoff {
                break;
            }
            match page.filter(|_| take_page) {
                Some(i) => retired.push(self.pages.remove(i).path),
                None => {
                    self.runs.remove(0);
                }
            }
            self.settled = Some(match self.settled.take() {
                Some((slo, shi)) => (slo.min(lo), shi.max(hi)),
                None => (lo, hi),
            });
        }
        retired
    }

    /// True when nothing but the settled range is left and the source last
    /// committed before `cutoff`: it can leave the head for the archive.
    pub fn idle(&self, cutoff: i64) -> bool {
        self.runs.is_empty() && self.pages.is_empty() && self.floor.is_none() && self.ms < cutoff
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
    fn runs_merge_and_keep_their_commit_times() {
        let mut m = Marks::default();
        m.insert(p(10), p(19), 100);
        m.insert(p(30), p(39), 200);
        m.insert(p(20), p(29), 300);
        assert_eq!(m.runs.len(), 1);
        assert_eq!((m.runs[0].from_ms, m.runs[0].to_ms), (100, 300));
        assert_eq!(m.high_water_mark(), Some(&p(39)));
        assert_eq!(runs(&m.claim_head(&p(0), &p(25))), vec![(10, 25)]);
        assert_eq!(m.anchor(&p(35)), Some(100));
        assert_eq!(m.anchor(&p(40)), None);
    }

    #[test]
    fn spilled_runs_leave_the_head_and_old_ones_settle_from_the_bottom() {
        let mut m = Marks::default();
        // Kinesis-like: positions never adjacent, one run per commit.
        for i in 0..(SPILL_AT as u64 + 1) {
            m.insert(p(i * 10), p(i * 10 + 5), i as i64);
        }
        let spilled = m.spill().unwrap();
        assert_eq!(m.runs.len(), HEAD_RUNS);
        assert_eq!(spilled.len(), SPILL_AT + 1 - HEAD_RUNS);
        m.pages
            .push(PageRef::of("page-1".into(), &spilled).unwrap());
        assert_eq!(m.pages_overlapping(&p(0), &p(3)).count(), 1);
        assert_eq!(m.pages_overlapping(&p(1000), &p(2000)).count(), 0);
        // Everything committed before ms 40 settles: the page (to 32) and
        // the runs committed at 33..39; a hole inside counts as accounted.
        let retired = m.settle(40);
        assert_eq!(retired, vec!["page-1".to_string()]);
        assert_eq!(m.settled, Some((p(0), p(395))));
        assert_eq!(runs(&m.claim_head(&p(7), &p(9))), vec![(7, 9)]);
        // A hole above the settled range stays open.
        assert!(m.claim_head(&p(396), &p(399)).is_empty());
        assert_eq!(m.anchor(&p(396)), Some(40));
        assert_eq!(m.anchor(&p(100)), Some(i64::MIN));
    }

    #[test]
    fn a_recent_low_run_stops_settling() {
        let mut m = Marks::default();
        m.insert(p(100), p(199), 10);
        m.insert(p(0), p(49), 1000);
        assert!(m.settle(500).is_empty());
        assert_eq!(m.settled, None);
        assert!(!m.idle(2000));
        m.settle(2000);
        assert_eq!(m.settled, Some((p(0), p(199))));
        assert!(m.idle(2000));
    }

    #[test]
    fn format_1_runs_read_without_times() {
        let m: Marks = serde_json::from_str(r#"{"runs":[["1","5"]],"floor":"0","ms":7}"#).unwrap();
        assert_eq!(m.runs[0].first, p(1));
        assert_eq!(m.floor, Some(p(0)));
        let back = serde_json::to_string(&m).unwrap();
        assert!(back.contains(r#"["1","5",0,0]"#), "{back}");
    }
}

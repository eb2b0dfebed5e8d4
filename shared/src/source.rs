//! Source positions: where a batch of records came from, and the deterministic
//! batch id derived from them, so a redelivered batch is recognised as the same.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

/// A position in an ordered source: a non-negative decimal integer of any size
/// (Kafka offsets, Kinesis sequence numbers, Postgres LSNs as integers, line numbers).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Position(String);

impl Position {
    /// A position from a decimal string; `None` unless it is all ASCII digits.
    pub fn parse(s: &str) -> Option<Self> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let trimmed = s.trim_start_matches('0');
        Some(Self(
            if trimmed.is_empty() { "0" } else { trimmed }.to_string(),
        ))
    }

    /// The decimal text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The position right after this one, so runs of consecutive positions
    /// (Kafka offsets, line numbers) merge into one.
    pub fn next(&self) -> Self {
        let mut digits = self.0.clone().into_bytes();
        for d in digits.iter_mut().rev() {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                // Only ASCII digits were changed.
                return Self(String::from_utf8(digits).unwrap_or_default());
            }
        }
        digits.insert(0, b'1');
        Self(String::from_utf8(digits).unwrap_or_default())
    }
}

impl From<u64> for Position {
    fn from(v: u64) -> Self {
        Self(v.to_string())
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        // Normalised decimals compare numerically by length, then digit by digit.
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which records of one source a batch holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Positions {
    /// A contiguous, inclusive range of an ordered source (file records, Kafka
    /// offsets, Kinesis sequence numbers, LSNs).
    Range {
        /// First position in the batch.
        first: Position,
        /// Last position in the batch.
        last: Position,
    },
    /// Message ids of an unordered source (SQS), identified as a set.
    Ids {
        /// The ids, in any order.
        ids: Vec<String>,
    },
    /// A caller-chosen idempotency key (HTTP `Idempotency-Key`).
    Key {
        /// The key.
        key: String,
    },
}

/// The part of one source a batch holds, e.g. `kafka:orders/3` offsets 100..=199.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSpan {
    /// The source: `file:/path`, `kafka:topic/partition`, `kinesis:stream/shard`, `sqs:queue`, `http`, `pg:slot`.
    pub source: String,
    /// The records of that source in the batch.
    pub positions: Positions,
    /// The positions are durable stream positions (Kafka offsets, Kinesis
    /// sequence numbers, LSNs): a lower one is always older data. Line numbers
    /// of a file or stdin are not: they restart with every run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
}

impl SourceSpan {
    /// The last position when the source is ordered.
    pub fn last(&self) -> Option<&Position> {
        match &self.positions {
            Positions::Range { last, .. } => Some(last),
            _ => None,
        }
    }
}

/// Derives the batch id from the spans (and, for sources whose positions do not
/// pin the content, such as a file that can be edited in place, a content digest).
pub fn batch_id(spans: &[SourceSpan], content: Option<&[u8]>) -> String {
    let mut h = Xxh3::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for span in spans {
        field(span.source.as_bytes());
        match &span.positions {
            Positions::Range { first, last } => {
                field(b"range");
                field(first.as_str().as_bytes());
                field(last.as_str().as_bytes());
            }
            Positions::Ids { ids } => {
                field(b"ids");
                let mut sorted: Vec<&String> = ids.iter().collect();
                sorted.sort();
                for id in sorted {
                    field(id.as_bytes());
                }
            }
            Positions::Key { key } => {
                field(b"key");
                field(key.as_bytes());
            }
        }
    }
    if let Some(content) = content {
        field(b"content");
        field(content);
    }
    format!("{:032x}", h.digest128())
}

/// The id of the part of batch `batch_id` that goes to `table`, when one
/// source batch is routed to several tables.
pub fn sub_batch_id(batch_id: &str, table: &str) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(format!("{batch_id}/{table}").as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(source: &str, first: u64, last: u64) -> SourceSpan {
        SourceSpan {
            source: source.into(),
            positions: Positions::Range {
                first: first.into(),
                last: last.into(),
            },
            stream: true,
        }
    }

    #[test]
    fn positions_order_numerically_at_any_size() {
        let big =
            Position::parse("49590338271490256608559692538361571095921575989136588898").unwrap();
        let bigger =
            Position::parse("49590338271490256608559692538361571095921575989136588899").unwrap();
        assert!(big < bigger);
        assert!(Position::from(9) < Position::from(10));
        assert_eq!(Position::parse("007").unwrap(), Position::from(7));
        assert!(Position::parse("-1").is_none());
        assert!(Position::parse("").is_none());
    }

    #[test]
    fn batch_id_is_deterministic_and_position_sensitive() {
        let a = batch_id(&[range("kafka:t/0", 0, 99)], None);
        assert_eq!(a, batch_id(&[range("kafka:t/0", 0, 99)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/0", 0, 100)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/1", 0, 99)], None));
        assert_ne!(a, batch_id(&[range("kafka:t/0", 0, 99)], Some(b"x")));
        let ids = |v: &[&str]| SourceSpan {
            source: "sqs:q".into(),
            positions: Positions::Ids {
                ids: v.iter().map(|s| s.to_string()).collect(),
            },
            stream: false,
        };
        assert_eq!(
            batch_id(&[ids(&["m1", "m2"])], None),
            batch_id(&[ids(&["m2", "m1"])], None)
        );
    }
}

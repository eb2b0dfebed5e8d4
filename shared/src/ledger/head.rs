//! The ledger's files: the head (what every commit rewrites: per-source runs,
//! the entries since the last seal, the index of sealed segments, source
//! state) and sealed segments (immutable entries of older commits). Both are
//! zstd-compressed JSON, so `zstd -dc head-….json.zst | jq` reads them.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::runs::Runs;
use crate::source::Position;

/// The format version of head and segment files this build writes and reads.
pub const FORMAT: u32 = 1;

/// What the table holds, as of one commit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Head {
    /// Format version, [`FORMAT`].
    pub version: u32,
    /// Increments with every commit that rewrites the head.
    pub seq: u64,
    /// Per ordered source: the highest committed runs.
    #[serde(default)]
    pub sources: BTreeMap<String, Marks>,
    /// Entries of the commits since the last seal, oldest first.
    #[serde(default)]
    pub recent: Vec<Entry>,
    /// Sealed segments, oldest first.
    #[serde(default)]
    pub segments: Vec<SegmentRef>,
    /// Source state recorded with commits (`floe.state.*`; the latest wins).
    #[serde(default)]
    pub state: BTreeMap<String, String>,
}

/// The committed positions of one ordered source the head keeps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Marks {
    /// The highest runs, at most [`super::MAX_HEAD_RUNS`].
    pub runs: Runs,
    /// The highest position of runs dropped from the head: at or below it,
    /// the sealed segments hold the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Position>,
    /// When the source last committed (ms since epoch).
    pub ms: i64,
}

impl Marks {
    /// The highest committed position.
    pub fn high_water_mark(&self) -> Option<&Position> {
        match (self.runs.last(), self.floor.as_ref()) {
            (Some(r), Some(f)) => Some(r.max(f)),
            (r, f) => r.or(f),
        }
    }
}

/// One committed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When it was committed (ms since epoch).
    pub ms: i64,
    /// Its batch id.
    pub id: String,
    /// When its writer created it (ms since epoch).
    pub at: i64,
    /// Its ordered spans: source, first and last position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<(String, Position, Position)>,
    /// Its unordered records per source, as packed digests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, String>,
    /// A keyed request's key file: the position of every key's last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kf: Option<String>,
}

impl Entry {
    /// How many record digests it holds.
    pub fn key_count(&self) -> usize {
        // 16 bytes per digest in unpadded base64: 4 characters per 3 bytes.
        self.keys.values().map(|k| k.len() * 3 / 4 / 16).sum()
    }
}

/// A sealed segment the head lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentRef {
    /// Where it is.
    pub path: String,
    /// 0 for a sealed head, n + 1 for a merge of tier-n segments.
    pub tier: u8,
    /// Commit time of its oldest entry.
    pub from_ms: i64,
    /// Commit time of its newest entry.
    pub to_ms: i64,
    /// Entries it holds.
    pub entries: usize,
}

/// The body of a segment file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Segment {
    /// Format version, [`FORMAT`].
    pub version: u32,
    /// Its entries, oldest first.
    pub entries: Vec<Entry>,
}

/// Why a ledger file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not zstd, not JSON of the expected shape.
    #[error("{0}")]
    Corrupt(String),
    /// A version this build does not read.
    #[error("ledger format {0} is newer than this build reads ({FORMAT})")]
    Version(u32),
}

/// Compressed JSON of `value`.
pub fn encode<T: Serialize>(value: &T) -> Bytes {
    // Serialising these plain structures cannot fail, nor can compressing
    // into memory.
    let json = serde_json::to_vec(value).unwrap_or_default();
    Bytes::from(zstd::bulk::compress(&json, 3).unwrap_or(json))
}

/// A value from [`encode`]'s bytes.
pub fn decode<T: DeserializeOwned + Versioned>(bytes: &[u8]) -> Result<T, FormatError> {
    let json = zstd::stream::decode_all(bytes).map_err(|e| FormatError::Corrupt(e.to_string()))?;
    let value: T =
        serde_json::from_slice(&json).map_err(|e| FormatError::Corrupt(e.to_string()))?;
    if value.version() > FORMAT {
        return Err(FormatError::Version(value.version()));
    }
    Ok(value)
}

/// Ledger files that carry their format version.
pub trait Versioned {
    /// The version the file was written with.
    fn version(&self) -> u32;
}

impl Versioned for Head {
    fn version(&self) -> u32 {
        self.version
    }
}

impl Versioned for Segment {
    fn version(&self) -> u32 {
        self.version
    }
}

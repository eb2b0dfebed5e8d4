//! The ledger's files: the head (what every commit rewrites: per-source
//! marks, the entries since the last seal, the index of sealed segments and
//! archive buckets, source state, files retired but still readable), sealed
//! segments (immutable entries of older commits), pages of spilled runs and
//! archive buckets of idle sources. All are zstd-compressed JSON, so
//! `zstd -dc head-….json.zst | jq` reads them.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::marks::{Marks, Page};
use crate::source::Position;

/// The format version of ledger files this build writes; it reads this and
/// every earlier one (format 1 had no pages, settled ranges or archive).
pub const FORMAT: u32 = 2;

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
    /// Archive buckets of ordered sources idle for longer than the request
    /// window, by bucket number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archive: Vec<ArchiveRef>,
    /// Ledger files no longer named, kept a while for readers that loaded
    /// the table before the commit that retired them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<Retired>,
}

/// An archive bucket the head lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRef {
    /// Which bucket (see [`super::archive::bucket`]).
    pub bucket: u16,
    /// Where it is.
    pub path: String,
    /// Sources it holds.
    pub sources: usize,
}

/// A ledger file the head no longer names, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    /// The file.
    pub path: String,
    /// When the commit that stopped naming it was made (ms since epoch).
    pub ms: i64,
}

/// The body of an archive bucket: idle sources with their settled ranges.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Archived {
    /// Format version.
    pub version: u32,
    /// The sources of the bucket.
    pub sources: BTreeMap<String, Marks>,
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
    /// Not zstd.
    #[error("not zstd: {0}")]
    Compression(#[source] std::io::Error),
    /// Not JSON of the expected shape.
    #[error("not a ledger file's JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A key file whose columns do not fit together.
    #[error("key file: {0}")]
    KeyFile(&'static str),
    /// An entry's record digests that are not packed digests.
    #[error("an entry's record digests are not packed digests")]
    Digests,
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
    let json = zstd::stream::decode_all(bytes).map_err(FormatError::Compression)?;
    let value: T = serde_json::from_slice(&json)?;
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

impl Versioned for Page {
    fn version(&self) -> u32 {
        self.version
    }
}

impl Versioned for Archived {
    fn version(&self) -> u32 {
        self.version
    }
}

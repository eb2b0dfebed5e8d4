//! Key files: for one keyed request, every key it changed (as the digest of
//! the key's typed value) with the source position of the key's last change.
//! The writer writes one in the ledger's directory; the ledger keeps it for the
//! request window, so a keyed request that arrives late can be applied per
//! key: only the keys no later committed change of its source touched.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::digest;
use super::head::{FormatError, Versioned};
use crate::source::Position;

/// The keys of one keyed request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KeyFile {
    /// Format version.
    pub version: u32,
    /// The request's sources; `src` indexes them.
    pub sources: Vec<String>,
    /// The key digests, packed.
    pub keys: String,
    /// Per key, its source's index (empty when every key has source 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub src: Vec<u16>,
    /// Per key, the position of its last change (`None` for sources with no
    /// order, such as an SQS queue).
    pub pos: Vec<Option<Position>>,
}

impl Versioned for KeyFile {
    fn version(&self) -> u32 {
        self.version
    }
}

/// A key's last change in one request: its source and position.
pub type LastChange = (String, Position);

impl KeyFile {
    /// A key file of `keys` (digest, source index, position), in any order.
    pub fn new(sources: Vec<String>, keys: &[(u128, u16, Option<Position>)]) -> Self {
        let digests: Vec<u128> = keys.iter().map(|(d, _, _)| *d).collect();
        let src: Vec<u16> = keys.iter().map(|(_, s, _)| *s).collect();
        Self {
            version: super::head::FORMAT,
            sources,
            keys: digest::pack(&digests),
            src: if src.iter().all(|s| *s == 0) {
                Vec::new()
            } else {
                src
            },
            pos: keys.iter().map(|(_, _, p)| p.clone()).collect(),
        }
    }

    /// The file's bytes, as the ledger stores it.
    pub fn to_bytes(&self) -> bytes::Bytes {
        super::head::encode(self)
    }

    /// Every key's digest.
    pub fn digests(&self) -> Result<Vec<u128>, FormatError> {
        digest::unpack(&self.keys).ok_or(FormatError::KeyFile("keys are not packed digests"))
    }

    /// Each key's last change, for the keys whose source has an order.
    pub fn changes(&self) -> Result<HashMap<u128, LastChange>, FormatError> {
        let digests = self.digests()?;
        if self.pos.len() != digests.len()
            || (!self.src.is_empty() && self.src.len() != digests.len())
        {
            return Err(FormatError::KeyFile(
                "keys, sources and positions differ in length",
            ));
        }
        let mut out = HashMap::with_capacity(digests.len());
        for (i, d) in digests.into_iter().enumerate() {
            let s = self.src.get(i).copied().unwrap_or(0) as usize;
            let (Some(source), Some(Some(pos))) = (self.sources.get(s), self.pos.get(i)) else {
                continue;
            };
            out.insert(d, (source.clone(), pos.clone()));
        }
        Ok(out)
    }
}

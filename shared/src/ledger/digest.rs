//! 128-bit digests that name records of unordered sources (an SQS message id,
//! a DynamoDB Streams event id) and keys of keyed tables in the ledger, packed
//! 16 bytes each so a window of them stays small.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use xxhash_rust::xxh3::Xxh3;

/// The digest of record `key` of `source`.
pub fn record(source: &str, key: &str) -> u128 {
    let mut h = Xxh3::new();
    h.update(&(source.len() as u64).to_le_bytes());
    h.update(source.as_bytes());
    h.update(key.as_bytes());
    h.digest128()
}

/// Digests as one base64 text, 16 bytes each, in the order given.
pub fn pack(digests: &[u128]) -> String {
    let mut bytes = Vec::with_capacity(digests.len() * 16);
    for d in digests {
        bytes.extend_from_slice(&d.to_le_bytes());
    }
    B64.encode(bytes)
}

/// The digests of a [`pack`]ed text; `None` when it is not one, which
/// every caller reports as a ledger format error (no digest is dropped).
pub fn unpack(text: &str) -> Option<Vec<u128>> {
    let bytes = B64.decode(text).ok()?;
    if bytes.len() % 16 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                u128::from_le_bytes(b)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_round_trip_and_sources_keep_keys_apart() {
        let a = record("sqs:q", "m1");
        assert_ne!(a, record("sqs:r", "m1"));
        assert_ne!(record("sqs:q", "1m"), record("sqs:q1", "m"));
        let packed = pack(&[a, 7, u128::MAX]);
        assert_eq!(unpack(&packed), Some(vec![a, 7, u128::MAX]));
        assert_eq!(unpack("not base64!"), None);
    }
}

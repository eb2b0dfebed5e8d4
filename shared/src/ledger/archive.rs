//! Ordered sources idle for longer than the request window leave the head
//! for one of a fixed number of archive buckets, so a head's size follows
//! the sources that are active, not every file or partition a table ever
//! took. Their positions are not forgotten: a source the head does not
//! hold is looked up in its bucket (one read, cached), and one that commits
//! again comes back into the head with its settled range.

use xxhash_rust::xxh3::xxh3_64;

/// How many buckets idle sources spread over.
pub const BUCKETS: u16 = 64;

/// The bucket of `source`.
pub fn bucket(source: &str) -> u16 {
    (xxh3_64(source.as_bytes()) % u64::from(BUCKETS)) as u16
}

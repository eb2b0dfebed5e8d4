//! Where each key of a keyed table lives: for every data file, its rows' key
//! digests (by typed value, see [`crate::rowkey`]) sorted for lookup, and for
//! every position-delete file and deletion vector, the rows it deletes. Files never change once
//! written, so each is read once and kept (bounded): a warm committer resolves
//! a batch's keys to the rows they replace without reading the table again,
//! only the files new since its last commit. Nothing is persisted beside the
//! table, so the answer is always the table's own, whoever wrote it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, SchemaRef};
use roaring::RoaringBitmap;

use super::read::read_file;
use crate::lru::Lru;
use crate::rowkey;
use crate::write::{position, vector};

/// Rows per cache (keys of files read outside [`super::rows`], deleted
/// positions) before the least recently used files are dropped: about
/// 170 MB of keys at 21 bytes a row. What a commit keeps of the table's
/// live files between commits is [`super::rows`]'s, bounded apart.
const MAX_CACHED_ROWS: usize = 8 * 1024 * 1024;

/// Filter bits per row: with two probes, one in 20 absent keys passes.
const FILTER_BITS_PER_ROW: usize = 8;
/// [`FileKeys::rows_of_sorted`] asks the filter for each digest while they
/// number less than a file's rows over this: a probe costs about as much
/// as walking this many rows in order.
const FILTER_WINS_BELOW: usize = 8;

/// The keys of one data file's rows, sorted by digest, behind a small
/// filter. A commit asks every live file for every changed key, so most
/// questions are about keys a file does not hold: the filter answers those
/// with two bit reads instead of a binary search. Digests and rows sit in two
/// arrays (20 bytes a row; a `(u128, u32)` pair pads to 32), the filter is
/// one byte a row, so a 10,000,000-key table's keys take 210 MB.
#[derive(Debug)]
pub struct FileKeys {
    sorted: Vec<u128>,
    rows: Vec<u32>,
    /// A two-probe Bloom filter over the digests; its length a power of two.
    filter: Vec<u64>,
}

impl FileKeys {
    /// The keys of `digests`, row `i` having `digests[i]`.
    pub fn of(digests: &[u128]) -> Self {
        let mut pairs: Vec<(u128, u32)> = digests
            .iter()
            .enumerate()
            .map(|(i, d)| (*d, i as u32))
            .collect();
        pairs.sort_unstable();
        Self::of_sorted(&pairs)
    }

    fn of_sorted(pairs: &[(u128, u32)]) -> Self {
        let words = (pairs.len() * FILTER_BITS_PER_ROW)
            .div_ceil(64)
            .next_power_of_two();
        let mut filter = vec![0u64; words];
        for (d, _) in pairs {
            for bit in probes(*d, words) {
                filter[bit / 64] |= 1 << (bit % 64);
            }
        }
        Self {
            sorted: pairs.iter().map(|(d, _)| *d).collect(),
            rows: pairs.iter().map(|(_, r)| *r).collect(),
            filter,
        }
    }

    /// False when no row holds `digest`; true when one may.
    fn may_hold(&self, digest: u128) -> bool {
        probes(digest, self.filter.len())
            .iter()
            .all(|bit| self.filter[bit / 64] & (1 << (bit % 64)) != 0)
    }

    /// The rows holding `digest`.
    pub fn rows(&self, digest: u128) -> impl Iterator<Item = u32> + '_ {
        let start = if self.may_hold(digest) {
            self.sorted.partition_point(|d| *d < digest)
        } else {
            self.sorted.len()
        };
        self.sorted[start..]
            .iter()
            .zip(&self.rows[start..])
            .take_while(move |(d, _)| **d == digest)
            .map(|(_, r)| *r)
    }

    /// Every row holding one of `digests` (ascending), with its digest,
    /// once however often the digest is asked. Few digests against a large
    /// file ask the filter for each; otherwise the two sorted lists are
    /// walked together, each read once in order instead of the filter
    /// probed at random for every digest.
    pub fn rows_of_sorted(&self, digests: &[u128]) -> Vec<(u128, u32)> {
        let mut out = Vec::new();
        if digests.len() * FILTER_WINS_BELOW < self.sorted.len() {
            let mut last = None;
            for d in digests {
                if last.replace(d) != Some(d) {
                    out.extend(self.rows(*d).map(|r| (*d, r)));
                }
            }
            return out;
        }
        let (mut i, mut j) = (0, 0);
        while let (Some(d), Some(held)) = (digests.get(i), self.sorted.get(j)) {
            match d.cmp(held) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    // Every row of the key; a repeat then finds it passed.
                    while self.sorted.get(j) == Some(d) {
                        out.push((*d, self.rows[j]));
                        j += 1;
                    }
                    i += 1;
                }
            }
        }
        out
    }

    /// The keys of every row but `gone`'s.
    pub fn without(&self, gone: &RoaringBitmap) -> Self {
        let pairs: Vec<(u128, u32)> = self
            .sorted
            .iter()
            .zip(&self.rows)
            .filter(|(_, r)| !gone.contains(**r))
            .map(|(d, r)| (*d, *r))
            .collect();
        Self::of_sorted(&pairs)
    }

    /// Keys (rows) held, pruned ones not counted.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True for a file with no rows.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Every row's digest, by row.
    pub fn digests(&self) -> Vec<u128> {
        let mut out = vec![0u128; self.sorted.len()];
        for (d, r) in self.sorted.iter().zip(&self.rows) {
            out[*r as usize] = *d;
        }
        out
    }
}

/// The filter bits of `digest` in a filter of `words` 64-bit words (a power
/// of two): two independent slices of the digest, which is already a hash.
fn probes(digest: u128, words: usize) -> [usize; 2] {
    let mask = words * 64 - 1;
    [digest as usize & mask, (digest >> 64) as usize & mask]
}

/// The rows a position-delete file deletes, by data file path.
pub type DeletedRows = HashMap<String, Vec<u32>>;

/// The cache of what the table's files hold.
#[derive(Debug)]
pub struct Locator {
    keys: Mutex<Lru<FileKeys>>,
    deleted: Mutex<Lru<DeletedRows>>,
}

impl Default for Locator {
    fn default() -> Self {
        Self {
            keys: Mutex::new(Lru::weighed(usize::MAX, MAX_CACHED_ROWS)),
            deleted: Mutex::new(Lru::weighed(usize::MAX, MAX_CACHED_ROWS)),
        }
    }
}

impl Locator {
    /// The key digests of a data (or equality-delete) file's rows, whose key
    /// columns are `key_names` of `schema`.
    pub async fn keys(
        &self,
        file_io: &FileIO,
        schema: &SchemaRef,
        key_names: &[String],
        file: &DataFile,
    ) -> iceberg::Result<Arc<FileKeys>> {
        let path = file.file_path();
        if let Some(k) = lock(&self.keys).get(path) {
            return Ok(k);
        }
        let keys = Arc::new(read_keys(file_io, schema, key_names, file).await?);
        lock(&self.keys).put_weighed(path, keys.clone(), keys.len());
        Ok(keys)
    }

    /// Drops the keys of the data file at `path`: their holder keeps them
    /// from now on.
    pub(super) fn forget_keys(&self, path: &str) {
        lock(&self.keys).take(path);
    }

    /// The rows a position-delete file or deletion vector deletes.
    pub async fn deleted(
        &self,
        file_io: &FileIO,
        file: &DataFile,
    ) -> iceberg::Result<Arc<DeletedRows>> {
        let key = vector::file_key(file);
        if let Some(d) = lock(&self.deleted).get(&key) {
            return Ok(d);
        }
        if vector::is_vector(file) {
            let (target, rows) = vector::read(file_io, file).await?;
            let positions = rows
                .iter()
                .map(|r| {
                    u32::try_from(r).map_err(|_| {
                        iceberg::Error::new(
                            iceberg::ErrorKind::DataInvalid,
                            format!("{key}: position {r} out of range"),
                        )
                    })
                })
                .collect::<iceberg::Result<Vec<u32>>>()?;
            let n = positions.len();
            let rows = Arc::new(HashMap::from([(target, positions)]));
            lock(&self.deleted).put_weighed(&key, rows.clone(), n);
            return Ok(rows);
        }
        let path = file.file_path();
        let schema = Arc::new(position::schema()?);
        let batches = read_file(
            file_io,
            schema,
            vec![position::FILE_PATH_FIELD_ID, position::POS_FIELD_ID],
            file,
        )
        .await?;
        let mut rows: DeletedRows = HashMap::new();
        let mut n = 0;
        for b in &batches {
            let paths = b.column(0).as_string::<i32>();
            let positions = b.column(1).as_primitive::<Int64Type>();
            for i in 0..b.num_rows() {
                if paths.is_null(i) || positions.is_null(i) {
                    continue;
                }
                let pos = u32::try_from(positions.value(i)).map_err(|_| {
                    iceberg::Error::new(
                        iceberg::ErrorKind::DataInvalid,
                        format!("{path}: position {} out of range", positions.value(i)),
                    )
                })?;
                rows.entry(paths.value(i).to_string())
                    .or_default()
                    .push(pos);
                n += 1;
            }
        }
        let rows = Arc::new(rows);
        lock(&self.deleted).put_weighed(&key, rows.clone(), n);
        Ok(rows)
    }
}

/// The keys of a data (or equality-delete) file's rows, read from it.
pub(super) async fn read_keys(
    file_io: &FileIO,
    schema: &SchemaRef,
    key_names: &[String],
    file: &DataFile,
) -> iceberg::Result<FileKeys> {
    let ids: Vec<i32> = key_names
        .iter()
        .filter_map(|n| schema.field_by_name(n).map(|f| f.id))
        .collect();
    let batches = read_file(file_io, schema.clone(), ids, file).await?;
    let mut digests = Vec::with_capacity(file.record_count() as usize);
    for b in &batches {
        digests.extend(digests_of(b, key_names)?);
    }
    Ok(FileKeys::of(&digests))
}

/// The key digests of `batch`'s rows.
pub fn digests_of(batch: &RecordBatch, key_names: &[String]) -> iceberg::Result<Vec<u128>> {
    let invalid = |what: String| iceberg::Error::new(iceberg::ErrorKind::DataInvalid, what);
    let columns = rowkey::columns(batch, key_names).ok_or_else(|| {
        invalid(format!(
            "a keyed table's file lacks its key columns {key_names:?}"
        ))
    })?;
    rowkey::digests(batch, &columns).map_err(|e| invalid("the file's keys".into()).with_source(e))
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves a cache, never a half-made entry.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digests as a hash spreads them (the filter relies on that).
    fn digests(keys: std::ops::Range<u64>) -> Vec<u128> {
        keys.map(|i| xxhash_rust::xxh3::xxh3_128(&i.to_le_bytes()))
            .collect()
    }

    #[test]
    fn finds_every_row_of_a_key_and_few_absent_keys_pass_the_filter() {
        let mut held = digests(0..5_000);
        // A key on two rows (a file may hold a key twice before compaction).
        held.push(held[7]);
        let keys = FileKeys::of(&held);
        assert_eq!(keys.len(), 5_001);
        assert_eq!(keys.rows(held[7]).collect::<Vec<_>>(), vec![7, 5_000]);
        for (row, d) in held.iter().enumerate().take(5_000).skip(8) {
            assert_eq!(keys.rows(*d).collect::<Vec<_>>(), vec![row as u32]);
        }
        assert_eq!(keys.digests(), held);
        let absent = digests(1_000_000..1_020_000);
        assert!(absent.iter().all(|d| keys.rows(*d).next().is_none()));
        let passed = absent.iter().filter(|d| keys.may_hold(**d)).count();
        assert!(passed < 2_000, "{passed} of 20,000 absent keys passed");
    }

    /// Both ways of asking for many digests at once find what asking for
    /// each does: few digests (the filter), as many as the file's rows and
    /// more (the walk), with absent digests, repeats (both ways) and a key
    /// on two rows.
    #[test]
    fn rows_of_sorted_digests_are_each_digests_rows() {
        let mut held = digests(0..20_000);
        held.push(held[11]);
        let keys = FileKeys::of(&held);
        for asked in [
            digests(19_990..20_010),
            digests(0..40_000),
            digests(10_000..60_000),
            [digests(5..6), digests(5..6), digests(11..12)].concat(),
            [digests(0..5_000), digests(0..5_000), digests(11..12)].concat(),
            Vec::new(),
        ] {
            let mut asked = asked;
            asked.sort_unstable();
            let mut want: Vec<(u128, u32)> = Vec::new();
            let mut unique = asked.clone();
            unique.dedup();
            for d in &unique {
                want.extend(keys.rows(*d).map(|r| (*d, r)));
            }
            let mut got = keys.rows_of_sorted(&asked);
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{} digests asked", asked.len());
        }
        let both = keys.rows_of_sorted(&[held[11]]);
        assert_eq!(both, vec![(held[11], 11), (held[11], 20_000)]);
    }

    #[test]
    fn an_empty_file_holds_nothing() {
        let keys = FileKeys::of(&[]);
        assert!(keys.is_empty());
        assert_eq!(keys.rows(42).next(), None);
    }
}

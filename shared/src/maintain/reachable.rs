//! Which files a set of snapshots still needs: their manifest lists, the
//! manifests those list, and the data and delete files live in them. A file a
//! snapshot marks deleted is needed only by that snapshot's parent, which
//! references it live if it is kept.
//!
//! Paths are compared by what they name ([`crate::uri::normalize`]): metadata
//! other engines wrote may spell the table's files `file:/…` or `s3a://…`
//! where a listing says `file:///…` or `s3://…`, and a string comparison
//! would call a referenced file an orphan.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestList, Snapshot, TableMetadata};

/// Paths by their canonical spelling, each with the spelling metadata used.
#[derive(Debug, Default, Clone)]
pub struct Paths(HashMap<String, String>);

impl Paths {
    /// Adds `path`; false when a spelling of it was there already.
    pub fn insert(&mut self, path: &str) -> bool {
        match self.0.entry(canonical(path)) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(path.to_string());
                true
            }
        }
    }

    /// True when some spelling of `path` is here.
    pub fn contains(&self, path: &str) -> bool {
        self.0.contains_key(&canonical(path))
    }

    /// How many paths.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The paths as metadata spells them.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.values()
    }
}

/// The canonical spelling of `path`, or `path` itself when it has none (a
/// relative path, a `..` segment): such a path then only equals itself.
pub fn canonical(path: &str) -> String {
    crate::uri::normalize(path).unwrap_or_else(|| path.to_string())
}

/// Files referenced by snapshots.
#[derive(Debug, Default, Clone)]
pub struct Reachable {
    /// Manifest lists.
    pub lists: Paths,
    /// Manifests.
    pub manifests: Paths,
    /// Data and delete files.
    pub files: Paths,
}

impl Reachable {
    /// Everything `snapshots` reference.
    pub async fn of<'a>(
        file_io: &FileIO,
        metadata: &TableMetadata,
        snapshots: impl IntoIterator<Item = &'a Snapshot>,
    ) -> iceberg::Result<Self> {
        let mut r = Reachable::default();
        for s in snapshots {
            if !r.lists.insert(s.manifest_list()) {
                continue;
            }
            let bytes = file_io.new_input(s.manifest_list())?.read().await?;
            let list = ManifestList::parse_with_version(&bytes, metadata.format_version())?;
            for m in list.entries() {
                if !r.manifests.insert(&m.manifest_path) {
                    continue;
                }
                let manifest = m.load_manifest(file_io).await?;
                for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                    r.files.insert(e.file_path());
                }
            }
        }
        Ok(r)
    }

    /// True when `path`, however spelled, is referenced.
    pub fn contains(&self, path: &str) -> bool {
        self.lists.contains(path) || self.manifests.contains(path) || self.files.contains(path)
    }

    /// Paths in `self` that `keep` does not reference, as metadata spells them.
    pub fn minus(&self, keep: &Reachable) -> Vec<String> {
        let mut out: Vec<String> = self
            .lists
            .iter()
            .chain(self.manifests.iter())
            .chain(self.files.iter())
            .filter(|p| !keep.contains(p))
            .cloned()
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_spelled_two_ways_is_one_path() {
        let mut p = Paths::default();
        assert!(p.insert("file:/w/t/data/a.parquet"));
        assert!(!p.insert("file:///w/t/data/a.parquet"));
        assert!(p.contains("file:///w/t/data/a.parquet"));
        assert!(p.contains("/w/t/data/a.parquet"));
        assert!(!p.contains("file:///w/t/data/b.parquet"));
        assert!(p.insert("s3a://b/t/data/x.parquet"));
        assert!(p.contains("s3://b/t/data/x.parquet"));
        assert!(p.contains("s3n://b/t//data/x.parquet"));
        assert!(!p.contains("s3://other/t/data/x.parquet"));
        assert_eq!(p.len(), 2);
        // The spelling metadata used is what a delete is given.
        let mut spelled: Vec<&String> = p.iter().collect();
        spelled.sort();
        assert_eq!(
            spelled,
            ["file:/w/t/data/a.parquet", "s3a://b/t/data/x.parquet"]
        );
    }

    #[test]
    fn a_path_without_a_canonical_form_equals_only_itself() {
        let mut p = Paths::default();
        p.insert("relative/a.parquet");
        assert!(p.contains("relative/a.parquet"));
        assert!(!p.contains("/relative/a.parquet"));
    }
}

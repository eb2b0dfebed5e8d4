//! Which files a set of snapshots still needs: their manifest lists, the
//! manifests those list, and the data and delete files live in them. A file a
//! snapshot marks deleted is needed only by that snapshot's parent, which
//! references it live if it is kept.

use std::collections::HashSet;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestList, Snapshot, TableMetadata};

/// Files referenced by snapshots, by path.
#[derive(Debug, Default, Clone)]
pub struct Reachable {
    /// Manifest lists.
    pub lists: HashSet<String>,
    /// Manifests.
    pub manifests: HashSet<String>,
    /// Data and delete files.
    pub files: HashSet<String>,
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
            if !r.lists.insert(s.manifest_list().to_string()) {
                continue;
            }
            let bytes = file_io.new_input(s.manifest_list())?.read().await?;
            let list = ManifestList::parse_with_version(&bytes, metadata.format_version())?;
            for m in list.entries() {
                if !r.manifests.insert(m.manifest_path.clone()) {
                    continue;
                }
                let manifest = m.load_manifest(file_io).await?;
                for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                    r.files.insert(e.file_path().to_string());
                }
            }
        }
        Ok(r)
    }

    /// True when `path` is referenced.
    pub fn contains(&self, path: &str) -> bool {
        self.lists.contains(path) || self.manifests.contains(path) || self.files.contains(path)
    }

    /// Paths in `self` that `keep` does not reference.
    pub fn minus(&self, keep: &Reachable) -> Vec<String> {
        let mut out: Vec<String> = self
            .lists
            .iter()
            .chain(&self.manifests)
            .chain(&self.files)
            .filter(|p| !keep.contains(p))
            .cloned()
            .collect();
        out.sort();
        out
    }
}

//! Orphan files: files under a table's location that no metadata references,
//! such as the Parquet files of a writer that crashed before enqueueing its
//! request. Only files older than a safety window go, so a writer's files are
//! never removed between its upload and its commit.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::storage::StorageError;

/// Default safety window: 16 days, the default commit queue's and DLQ's
/// retention one after the other (`maintenance.orphan_window_seconds`).
pub const DEFAULT_WINDOW_MS: i64 = crate::config::DEFAULT_ORPHAN_WINDOW_SECONDS as i64 * 1000;

/// A file found under a table location.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its `file://` URI, as metadata names it.
    pub uri: String,
    /// Last modification, ms since the epoch.
    pub modified_ms: i64,
}

/// Lists the files under a table location; FileIO cannot, so maintenance
/// gets one beside its catalog.
#[derive(Debug, Clone, Default)]
pub enum Lister {
    /// The local filesystem (`file://` or plain paths).
    #[default]
    Local,
    /// An S3 bucket through this client.
    #[cfg(feature = "aws")]
    S3(aws_sdk_s3::Client),
}

impl Lister {
    /// Every file under `location`.
    pub async fn list(&self, location: &str) -> Result<Vec<Listed>, StorageError> {
        match self {
            #[cfg(feature = "aws")]
            Self::S3(client) if !is_local(location) => {
                Ok(crate::storage::s3::list_files(client, location)
                    .await?
                    .into_iter()
                    .map(|(uri, modified_ms)| Listed { uri, modified_ms })
                    .collect())
            }
            // The local filesystem, under an S3 lister too: a deployment's
            // catalog may keep tables on a local disk (a REST catalog over
            // a file:// warehouse).
            _ => {
                // Another engine may spell the location `file:/w/t`.
                let canonical = crate::uri::normalize(location);
                let location = canonical.as_deref().unwrap_or(location);
                let dir = match location.strip_prefix("file://") {
                    Some(p) => PathBuf::from(p),
                    None if !location.contains("://") => PathBuf::from(location),
                    None => {
                        return Err(StorageError::Unlistable {
                            location: location.to_string(),
                            reason: "a local lister reads file:// locations only",
                        });
                    }
                };
                let mut out = Vec::new();
                walk(&dir, &mut out)?;
                Ok(out)
            }
        }
    }
}

/// A `file:` URI or a plain path.
#[cfg(feature = "aws")]
fn is_local(location: &str) -> bool {
    location.starts_with("file:") || !location.contains("://")
}

fn walk(dir: &Path, out: &mut Vec<Listed>) -> Result<(), StorageError> {
    let io = |source| StorageError::List {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io)?;
        let meta = entry.metadata().map_err(io)?;
        let path = entry.path();
        if meta.is_dir() {
            walk(&path, out)?;
        } else {
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            out.push(Listed {
                uri: format!("file://{}", path.display()),
                modified_ms,
            });
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "aws"))]
mod tests {
    use super::*;

    /// Maintenance on a REST catalog over a file:// warehouse failed after
    /// its compaction landed: the deployment's S3 lister refused the
    /// table's location ("… is not an s3://bucket/key location").
    #[tokio::test]
    async fn an_s3_lister_lists_a_table_on_a_local_disk() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("data")).expect("mkdir");
        std::fs::write(dir.path().join("data/a.parquet"), b"x").expect("write");
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .build();
        let lister = Lister::S3(aws_sdk_s3::Client::from_conf(conf));
        let location = format!("file://{}", dir.path().display());
        let listed = lister.list(&location).await.expect("listed");
        let uris: Vec<&str> = listed.iter().map(|l| l.uri.as_str()).collect();
        assert_eq!(uris, [format!("{location}/data/a.parquet")]);
    }
}

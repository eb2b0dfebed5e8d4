//! Where a warehouse lives and the `FileIO` that reaches it.

#[cfg(feature = "aws")]
pub mod s3;

use std::path::{Path, PathBuf};

use iceberg::io::FileIO;

/// A storage location that cannot be used as a warehouse.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The warehouse directory could not be created or resolved.
    #[error("warehouse directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A local warehouse: a directory holding table data, metadata and the SQLite catalog.
#[derive(Debug, Clone)]
pub struct LocalWarehouse {
    root: PathBuf,
}

impl LocalWarehouse {
    /// Opens (creating if needed) the warehouse directory.
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir).map_err(|source| StorageError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let root = dir.canonicalize().map_err(|source| StorageError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self { root })
    }

    /// The directory on disk.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The warehouse as a `file://` URI, as pyiceberg's `SqlCatalog` expects it.
    pub fn uri(&self) -> String {
        format!("file://{}", self.root.display())
    }

    /// The SQLite catalog database inside the warehouse.
    pub fn catalog_db(&self) -> PathBuf {
        self.root.join("catalog.db")
    }

    /// The FileIO for this warehouse.
    pub fn file_io(&self) -> FileIO {
        FileIO::new_with_fs()
    }
}

//! Where a warehouse lives and the `FileIO` that reaches it.

#[cfg(feature = "aws")]
pub mod s3;

use std::path::{Path, PathBuf};

use iceberg::io::FileIO;

use crate::error::{Classify, ErrorKind};

/// Why the warehouse's storage could not be used: a local directory, a
/// listing, an S3 call. (Reads and writes of table files go through
/// iceberg-rust's FileIO, whose errors are its own.)
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
    /// A directory could not be listed.
    #[error("listing {path}: {source}")]
    List {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A location this lister cannot list.
    #[error("listing {location}: {reason}")]
    Unlistable {
        /// The location.
        location: String,
        /// Why.
        reason: &'static str,
    },
    /// The location is not an `s3://bucket/key` URI.
    #[cfg(feature = "aws")]
    #[error("{uri} is not an s3://bucket/key location")]
    BadUri {
        /// The location.
        uri: String,
    },
    /// S3 answered with an error, or could not be reached.
    #[cfg(feature = "aws")]
    #[error("S3 {op} s3://{bucket}/{key}: {source}")]
    Request {
        /// The S3 operation.
        op: &'static str,
        /// The bucket.
        bucket: String,
        /// The key (or prefix).
        key: String,
        /// The HTTP status, when S3 answered.
        status: Option<u16>,
        /// The SDK's error, shown with its causes.
        source: crate::aws::AwsError,
    },
    /// S3 answered, but without something the protocol promises.
    #[cfg(feature = "aws")]
    #[error("S3 {op} s3://{bucket}/{key}: {reason}")]
    Protocol {
        /// The S3 operation.
        op: &'static str,
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// What was missing.
        reason: String,
    },
}

/// An S3 answer, a listing or the disk may pass; a location floe cannot
/// list, or one that is not an S3 URI, stays so.
impl Classify for StorageError {
    fn kind(&self) -> ErrorKind {
        match self {
            StorageError::Dir { .. } | StorageError::List { .. } => ErrorKind::Service,
            StorageError::Unlistable { .. } => ErrorKind::Config,
            #[cfg(feature = "aws")]
            StorageError::BadUri { .. } => ErrorKind::Config,
            #[cfg(feature = "aws")]
            StorageError::Request { .. } | StorageError::Protocol { .. } => ErrorKind::Service,
        }
    }
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

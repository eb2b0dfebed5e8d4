//! The catalogs floe commits to, behind one small trait the commit engine uses.
//!
//! A commit hands the catalog the base metadata it was planned on and the new
//! metadata; the catalog swaps atomically or answers [`CatalogError::Conflict`]
//! (someone else committed first) or [`CatalogError::Ambiguous`] (the answer was
//! lost: the commit may or may not have landed, so the engine must re-read).
//!
//! Every catalog answers a commit with one [`Committed`]: landed, not
//! applied, or unknown. One rule decides it after any answer but a clean
//! success: it landed if its metadata file is the table's current one or in
//! the current metadata's log, or a snapshot it added is in the table
//! (Iceberg Java's rule; see [`Landing`]); it did not land only when that is
//! provable (the table moved past the version every attempt was planned on,
//! or the catalog refused before applying); otherwise the outcome is
//! unknown. A catalog deletes the files of a commit only when it did not
//! land, and callers do the same: only [`Committed::NotApplied`] lets them
//! discard what they wrote.

#[cfg(feature = "aws")]
pub mod glue;
pub mod memory;
#[cfg(feature = "rest")]
pub mod rest;
mod sqlite;

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
#[cfg(feature = "aws")]
pub use glue::GlueCatalog;
use iceberg::io::FileIO;
use iceberg::spec::{TableMetadata, TableMetadataRef};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableCreation, TableIdent, TableRequirement, TableUpdate};
#[cfg(feature = "rest")]
pub use rest::RestCatalog;
pub use sqlite::SqliteCatalog;

use crate::error::{BoxError, Classify, ErrorKind, cause};
use crate::ident::display;

/// A table as the catalog holds it now.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    /// Its name.
    pub ident: TableIdent,
    /// Its current metadata.
    pub metadata: TableMetadataRef,
    /// Where that metadata is stored.
    pub metadata_location: String,
}

impl LoadedTable {
    /// The table as iceberg-rust's `Table`, for scans; call inside a tokio runtime.
    pub fn to_table(&self, file_io: FileIO) -> Result<Table, CatalogError> {
        let runtime = iceberg::Runtime::try_current().map_err(|source| CatalogError::Iceberg {
            table: display(&self.ident),
            source: Box::new(source),
        })?;
        Table::builder()
            .runtime(runtime)
            .identifier(self.ident.clone())
            .metadata(self.metadata.clone())
            .metadata_location(self.metadata_location.clone())
            .file_io(file_io)
            .readonly(true)
            .build()
            .map_err(|source| CatalogError::Iceberg {
                table: display(&self.ident),
                source: Box::new(source),
            })
    }
}

/// One optimistic commit: the new metadata planned on `base`.
#[derive(Debug)]
pub struct TableCommit {
    /// The table as it was loaded when the change was planned.
    pub base: LoadedTable,
    /// The metadata the table should have after the commit.
    pub metadata: TableMetadata,
    /// The changes from `base` to `metadata`, for catalogs that take updates.
    pub updates: Vec<TableUpdate>,
    /// What must still hold for the changes to apply, for catalogs that check.
    pub requirements: Vec<TableRequirement>,
}

impl TableCommit {
    /// The snapshots this commit adds to its base.
    pub fn added_snapshots(&self) -> Vec<i64> {
        self.metadata
            .snapshots()
            .map(|s| s.snapshot_id())
            .filter(|id| self.base.metadata.snapshot_by_id(*id).is_none())
            .collect()
    }
}

/// Why a catalog call failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The table does not exist.
    #[error("table {table} does not exist")]
    NoSuchTable {
        /// The table.
        table: String,
    },
    /// The table already exists.
    #[error("table {table} already exists")]
    TableExists {
        /// The table.
        table: String,
    },
    /// Another writer committed first; reload and retry.
    #[error("commit to {table} conflicted with a concurrent commit")]
    Conflict {
        /// The table.
        table: String,
    },
    /// The commit may or may not have been applied; reload to find out.
    #[error("commit to {table} has an unknown outcome: {reason}")]
    Ambiguous {
        /// The table.
        table: String,
        /// What was seen.
        reason: String,
    },
    /// The catalog refused the commit, or it never reached the catalog: it
    /// was not applied and no copy of it can apply later.
    #[error("commit to {table} was not applied: {reason}")]
    NotApplied {
        /// The table.
        table: String,
        /// Why.
        reason: String,
    },
    /// iceberg-rust refused or failed an operation.
    #[error("table {table}: {source}")]
    Iceberg {
        /// The table.
        table: String,
        /// The error.
        source: Box<iceberg::Error>,
    },
    /// The catalog's own store failed or refused the call: SQLite, Glue,
    /// the REST service.
    #[error("catalog store: {context}{}", cause(.source))]
    Store {
        /// What was being done, and where; for a refusal, the store's answer.
        context: String,
        /// The HTTP status the store refused the call with, if it answered.
        status: Option<u16>,
        /// The store's own error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
}

impl CatalogError {
    /// The store failed doing `context`, with its error `source`.
    pub fn store(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        CatalogError::Store {
            context: context.into(),
            status: None,
            source: Some(source.into()),
        }
    }

    /// The store failed for the reason `context` gives, with no error to keep.
    pub fn failed(context: impl Into<String>) -> Self {
        CatalogError::Store {
            context: context.into(),
            status: None,
            source: None,
        }
    }

    /// The store answered the call `context` describes with HTTP `status`.
    pub fn refused(context: impl Into<String>, status: u16) -> Self {
        CatalogError::Store {
            context: context.into(),
            status: Some(status),
            source: None,
        }
    }

    /// True when reloading the table and trying again can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CatalogError::Conflict { .. } | CatalogError::Ambiguous { .. }
        )
    }

    /// True when a failed commit provably did not change the table, now or
    /// later: the files written for it may be deleted. Any other error of a
    /// commit leaves its outcome open, and its files must stay.
    fn unapplied(&self) -> bool {
        matches!(
            self,
            CatalogError::Conflict { .. }
                | CatalogError::NotApplied { .. }
                | CatalogError::NoSuchTable { .. }
        )
    }
}

/// Contention, an unknown outcome and the catalog's store failing may pass;
/// a missing table, or one already there, stays so until someone changes it.
impl Classify for CatalogError {
    fn kind(&self) -> ErrorKind {
        match self {
            CatalogError::NoSuchTable { .. } | CatalogError::TableExists { .. } => ErrorKind::Table,
            CatalogError::Iceberg { source, .. } => Classify::kind(source.as_ref()),
            CatalogError::Conflict { .. }
            | CatalogError::Ambiguous { .. }
            | CatalogError::NotApplied { .. } => ErrorKind::Contention,
            // Even a refusal (a 401 or 403 until someone fixes a grant) is
            // a service's: a batch that met it is redelivered, not dead-lettered.
            CatalogError::Store { .. } => ErrorKind::Service,
        }
    }
}

/// What became of one commit, in every catalog's answer.
#[derive(Debug)]
pub enum Committed {
    /// The table points at the commit's metadata, or at a later one built
    /// on it: the table as the catalog then held it.
    Landed(LoadedTable),
    /// It did not apply, and no copy of it can apply later: another commit
    /// landed first ([`CatalogError::Conflict`]: reload and try again), or
    /// the catalog refused it. Its files may be deleted.
    NotApplied(CatalogError),
    /// It may have applied, or may yet: its files stay, and the next load
    /// decides ([`CatalogError::Ambiguous`]: reload and find out; any other
    /// error: the catalog's store failed, the call fails, and its batches
    /// come again).
    Unknown(CatalogError),
}

impl Committed {
    /// The answer a catalog's swap came to: the one place an error of a
    /// commit is read as not applied or unknown.
    pub fn of(swap: Result<LoadedTable, CatalogError>) -> Self {
        match swap {
            Ok(table) => Committed::Landed(table),
            Err(e) if e.unapplied() => Committed::NotApplied(e),
            Err(e) => Committed::Unknown(e),
        }
    }

    /// The table it landed as, or why not (either kind), for callers that
    /// stop at any failure and keep the files either way.
    pub fn landed(self) -> Result<LoadedTable, CatalogError> {
        match self {
            Committed::Landed(table) => Ok(table),
            Committed::NotApplied(e) | Committed::Unknown(e) => Err(e),
        }
    }

    /// An unknown answer settled where the table read back shows the
    /// commit (its metadata `file`, or a snapshot it `added`): landed as
    /// the table now is; otherwise unknown still, since an answer that was
    /// lost may be a request that has not reached the table yet.
    pub async fn settled(
        self,
        catalog: &dyn Catalog,
        ident: &TableIdent,
        file: Option<&str>,
        added: &[i64],
    ) -> Self {
        let Committed::Unknown(e) = self else {
            return self;
        };
        match catalog.load_table(ident).await {
            Ok(now) if Landing::of(&now, file, added) == Landing::Landed => {
                tracing::warn!(error = %e, "the commit's answer was lost, and it landed");
                Committed::Landed(now)
            }
            _ => Committed::Unknown(e),
        }
    }
}

/// Where a commit stands in a table's history, read after an answer that
/// was not a clean success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// The commit's metadata file is the current metadata, or the current
    /// metadata's log names it, or a snapshot it added is in the table: the
    /// commit landed (later commits may have been built on it).
    Landed,
    /// The table's history does not name it.
    Absent,
}

impl Landing {
    /// Where the commit that wrote `file` (when the catalog, not the
    /// server, names it) and added the snapshots `added` stands in `table`'s
    /// history. A snapshot of its own still in the table counts too: the
    /// metadata log is capped, its snapshots are not.
    pub fn of(table: &LoadedTable, file: Option<&str>, added: &[i64]) -> Self {
        let named = file.is_some_and(|file| {
            table.metadata_location == file
                || table
                    .metadata
                    .metadata_log()
                    .iter()
                    .any(|entry| entry.metadata_file == file)
        });
        let kept = added
            .iter()
            .any(|id| table.metadata.snapshot_by_id(*id).is_some());
        if named || kept {
            Landing::Landed
        } else {
            Landing::Absent
        }
    }
}

/// A catalog the commit engine can load from and commit to.
#[async_trait]
pub trait Catalog: Debug + Send + Sync {
    /// The FileIO for the tables of this catalog.
    fn file_io(&self) -> &FileIO;

    /// Where a new table's files go when its creation names no location.
    fn default_location(&self, ident: &TableIdent) -> String;

    /// Creates the namespace unless it exists.
    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError>;

    /// Creates a table (and its first metadata file).
    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError>;

    /// Loads the current metadata of a table.
    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError>;

    /// Atomically replaces `commit.base` with `commit.metadata`, and says
    /// whether that landed, did not, or may have.
    async fn commit(&self, commit: TableCommit) -> Committed;

    /// True when a commit fails whenever anything changed the table since
    /// its base, because the catalog swaps the metadata pointer (SQLite,
    /// Glue); false when it checks only the commit's requirements (REST),
    /// so two commits that change only properties would both apply.
    fn swaps_pointer(&self) -> bool {
        true
    }

    /// Every Iceberg table of the catalog, sorted (scheduled maintenance
    /// without a table list maintains them all).
    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        Err(CatalogError::failed(format!(
            "{self:?} cannot list its tables; name them (maintenance.tables)"
        )))
    }

    /// Removes the table from the catalog; its files stay where they are.
    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        Err(CatalogError::failed(format!(
            "{self:?} cannot drop {}",
            crate::ident::display(ident)
        )))
    }
}

/// A shared catalog handle.
pub type CatalogRef = Arc<dyn Catalog>;

/// A catalog that is another one with different commits (a benchmark's
/// latency, a test's lost race): every other [`Catalog`] method goes to
/// [`Self::inner`], so a wrapper writes only what it changes.
#[async_trait]
pub trait Wrapping: Debug + Send + Sync {
    /// The catalog it wraps.
    fn inner(&self) -> &CatalogRef;

    /// Its commit, in place of the inner catalog's.
    async fn around_commit(&self, commit: TableCommit) -> Committed;
}

#[async_trait]
impl<W: Wrapping> Catalog for W {
    fn file_io(&self) -> &FileIO {
        self.inner().file_io()
    }

    fn default_location(&self, ident: &TableIdent) -> String {
        self.inner().default_location(ident)
    }

    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        self.inner().ensure_namespace(namespace).await
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        self.inner().create_table(ident, creation).await
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        self.inner().load_table(ident).await
    }

    async fn commit(&self, commit: TableCommit) -> Committed {
        self.around_commit(commit).await
    }

    fn swaps_pointer(&self) -> bool {
        self.inner().swaps_pointer()
    }

    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        self.inner().list_tables().await
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        self.inner().drop_table(ident).await
    }
}

/// Writes a table's metadata file, for the catalogs whose commits floe
/// writes itself (SQLite, Glue).
/// A new table's first metadata, from `creation` (at the catalog's
/// default location unless it names one), written where `catalog` will
/// point.
async fn write_first_metadata(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    mut creation: TableCreation,
) -> Result<(TableMetadata, iceberg::MetadataLocation), CatalogError> {
    let location = match creation.location.take() {
        Some(location) => location,
        None => catalog.default_location(ident),
    };
    creation.location = Some(location.clone());
    let metadata = iceberg::spec::TableMetadataBuilder::from_table_creation(creation)
        .and_then(|b| b.build())
        .map_err(|source| CatalogError::Iceberg {
            table: display(ident),
            source: Box::new(source),
        })?
        .metadata;
    let metadata_location = iceberg::MetadataLocation::new_with_metadata(&location, &metadata);
    write_metadata(catalog.file_io(), ident, &metadata, &metadata_location).await?;
    Ok((metadata, metadata_location))
}

/// Where `commit`'s metadata file goes, for the catalogs that write it:
/// the version after its base's, under the same directory.
fn next_location(commit: &TableCommit) -> Result<iceberg::MetadataLocation, CatalogError> {
    let base: iceberg::MetadataLocation =
        commit
            .base
            .metadata_location
            .parse()
            .map_err(|source: iceberg::Error| CatalogError::Iceberg {
                table: display(&commit.base.ident),
                source: Box::new(source),
            })?;
    Ok(base.with_next_version().with_new_metadata(&commit.metadata))
}

async fn write_metadata(
    file_io: &FileIO,
    ident: &TableIdent,
    metadata: &TableMetadata,
    location: &iceberg::MetadataLocation,
) -> Result<(), CatalogError> {
    metadata
        .write_to(file_io, location)
        .await
        .map_err(|source| CatalogError::Iceberg {
            table: display(ident),
            source: Box::new(source),
        })
}

/// `e`, the failure to parse the metadata file at `location`, as
/// unsupported when a schema in it is why (a type floe cannot read, such as
/// v3's variant another engine added), naming the schema and field.
async fn diagnosed(file_io: &FileIO, location: &str, e: iceberg::Error) -> iceberg::Error {
    if e.kind() != iceberg::ErrorKind::DataInvalid {
        return e;
    }
    let Ok(bytes) = async { file_io.new_input(location)?.read().await }.await else {
        return e;
    };
    serde_json::from_slice(&bytes)
        .ok()
        .and_then(|json| crate::schema_json::unsupported(location, &json))
        .unwrap_or(e)
}

/// The metadata file each table was last loaded from or committed to, parsed.
/// A metadata file never changes once written, so a load that finds the
/// table still at that location reuses it: on a table with a long history,
/// reading and parsing the file is most of what a commit costs.
#[derive(Debug, Default)]
struct MetadataCache(std::sync::Mutex<std::collections::HashMap<TableIdent, LoadedTable>>);

impl MetadataCache {
    /// The table at `location`, from the cache or read from the file.
    async fn load(
        &self,
        file_io: &FileIO,
        ident: &TableIdent,
        location: String,
    ) -> Result<LoadedTable, CatalogError> {
        if let Some(hit) = self
            .lock()
            .get(ident)
            .filter(|t| t.metadata_location == location)
        {
            return Ok(hit.clone());
        }
        let metadata = match TableMetadata::read_from(file_io, &location).await {
            Ok(metadata) => metadata,
            Err(e) => {
                return Err(CatalogError::Iceberg {
                    table: display(ident),
                    source: Box::new(diagnosed(file_io, &location, e).await),
                });
            }
        };
        Ok(self.keep(LoadedTable {
            ident: ident.clone(),
            metadata: Arc::new(metadata),
            metadata_location: location,
        }))
    }

    /// Remembers `table` (just loaded, created or committed) and returns it.
    fn keep(&self, table: LoadedTable) -> LoadedTable {
        self.lock().insert(table.ident.clone(), table.clone());
        table
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<TableIdent, LoadedTable>> {
        // The map holds no invariant a panicking holder could break.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

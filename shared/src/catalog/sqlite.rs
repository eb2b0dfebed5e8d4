//! The embedded catalog: a SQLite database with the same tables as pyiceberg's
//! `SqlCatalog` (and Java's `JdbcCatalog`), so either can open a floe warehouse.
//!
//! A commit writes the next metadata file, then swaps the pointer with a
//! compare-and-swap `UPDATE … WHERE metadata_location = <base>`; zero rows
//! updated means another writer won and the engine must retry. A statement
//! that fails has either committed or rolled back by the time it returns, so
//! the pointer read back afterwards tells which: nothing stays in flight.
//!
//! The database runs in WAL mode: readers (pyiceberg, a Java JdbcCatalog,
//! the sqlite3 shell) holding a statement open never block a commit, and a
//! commit never blocks them.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Catalog, CatalogError, Committed, LoadedTable, TableCommit};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// The SQLite catalog of an embedded warehouse.
#[derive(Debug, Clone)]
pub struct SqliteCatalog {
    name: String,
    warehouse_uri: String,
    conn: Arc<Mutex<Connection>>,
    file_io: FileIO,
    faults: Faults,
    metadata: Arc<super::MetadataCache>,
}

/// Whether SQLite refused to write because the database file or its
/// directory is read-only to this process: plain `SQLITE_READONLY` (the file
/// opened read-only for want of permission) or `SQLITE_READONLY_DIRECTORY`.
/// Its other read-only codes (recovery, locks, a moved file) pass with time
/// or another process, so they stay errors rather than stale reads.
fn read_only(e: &rusqlite::Error) -> bool {
    const READONLY_DIRECTORY: i32 = rusqlite::ffi::SQLITE_READONLY | (6 << 8);
    e.sqlite_error().is_some_and(|f| {
        f.code == rusqlite::ErrorCode::ReadOnly
            && (f.extended_code == rusqlite::ffi::SQLITE_READONLY
                || f.extended_code == READONLY_DIRECTORY)
    })
}

fn store_err(e: rusqlite::Error) -> CatalogError {
    CatalogError::store("SQLite catalog", e)
}

impl SqliteCatalog {
    /// Opens (creating if needed) the catalog database at `db`, for tables under `warehouse_uri`.
    pub fn open(
        name: &str,
        db: &Path,
        warehouse_uri: &str,
        file_io: FileIO,
        faults: Faults,
    ) -> Result<Self, CatalogError> {
        let conn = match Self::writable(db) {
            Ok(conn) => conn,
            Err(e) if read_only(&e) && db.exists() => Self::read_only(db, e)?,
            Err(e) => return Err(store_err(e)),
        };
        Ok(Self {
            name: name.to_string(),
            warehouse_uri: warehouse_uri.trim_end_matches('/').to_string(),
            conn: Arc::new(Mutex::new(conn)),
            file_io,
            faults,
            metadata: Default::default(),
        })
    }

    /// The database opened for reading and writing, created if missing.
    fn writable(db: &Path) -> rusqlite::Result<Connection> {
        let conn = Connection::open(db)?;
        // Several floe processes (or pyiceberg) may share one warehouse.
        conn.busy_timeout(Duration::from_secs(30))?;
        // The mode is kept in the file, so every later connection (floe's or
        // another engine's) uses it too. Switching needs the database to
        // itself: while another process holds it, floe runs in the old mode
        // and switches on a later open.
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if read_only(&e) => return Err(e),
            Err(e) => {
                tracing::warn!(db = %db.display(), error = %e, "catalog database stays in its journal mode for now");
            }
            Ok(()) => {}
        }
        conn.execute_batch(SCHEMA)?;
        Ok(conn)
    }

    /// The database of a warehouse this process may only read (a read-only
    /// mount, another user's files). SQLite cannot open a WAL database for
    /// reading without writing its shared-memory file beside it, so it is
    /// read as immutable: as of its last checkpoint, which is all of it once
    /// every writer has closed it. Commands that write fail on it, naming
    /// SQLite's read-only error.
    fn read_only(db: &Path, writing: rusqlite::Error) -> Result<Connection, CatalogError> {
        let path = db.to_string_lossy();
        let escaped = path
            .replace('%', "%25")
            .replace('?', "%3f")
            .replace('#', "%23");
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(format!("file:{escaped}?immutable=1"), flags)
            .map_err(store_err)?;
        tracing::warn!(db = %db.display(), error = %writing, "catalog database is read-only here: reading it as of its last checkpoint");
        Ok(conn)
    }

    fn with_conn<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, CatalogError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| CatalogError::failed("SQLite catalog: connection poisoned by a panic"))?;
        f(&conn).map_err(store_err)
    }

    fn current_location(&self, ident: &TableIdent) -> Result<Option<String>, CatalogError> {
        let ns = ident.namespace().join(".");
        self.with_conn(|c| {
            c.query_row(
                "SELECT metadata_location FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, ns, ident.name()],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()
            .map(Option::flatten)
        })
    }
}

impl SqliteCatalog {
    /// The swap's statement failed (the database busy past the timeout, the
    /// disk): it committed or rolled back as a whole, so the pointer read
    /// back now decides, by the catalog rule.
    async fn after_failed_swap(
        &self,
        commit: &TableCommit,
        next: String,
        err: CatalogError,
    ) -> Result<LoadedTable, CatalogError> {
        let ident = &commit.base.ident;
        let table = display(ident);
        let now = match self.load_table(ident).await {
            Ok(now) => now,
            Err(read) => {
                return Err(CatalogError::Ambiguous {
                    table,
                    reason: format!("{err}; reading the table back: {read}"),
                });
            }
        };
        if super::Landing::of(&now, Some(&next), &commit.added_snapshots())
            == super::Landing::Landed
        {
            return Ok(self.metadata.keep(LoadedTable {
                ident: ident.clone(),
                metadata: Arc::new(commit.metadata.clone()),
                metadata_location: next,
            }));
        }
        let _ = self.file_io.delete(&next).await;
        if now.metadata_location != commit.base.metadata_location {
            return Err(CatalogError::Conflict { table });
        }
        Err(CatalogError::NotApplied {
            table,
            reason: err.to_string(),
        })
    }

    /// Points the table at `commit`'s metadata if it still points at its
    /// base: one conditional UPDATE.
    async fn swap(&self, commit: TableCommit) -> Result<LoadedTable, CatalogError> {
        let ident = commit.base.ident.clone();
        let table = display(&ident);
        let next = super::next_location(&commit)?;
        // Nothing points at the file yet, so failing to write it changes nothing.
        super::write_metadata(&self.file_io, &ident, &commit.metadata, &next)
            .await
            .map_err(|e| CatalogError::NotApplied {
                table: table.clone(),
                reason: e.to_string(),
            })?;
        let next = next.to_string();
        if let Err(fault) = self.faults.hit(FaultPoint::CatalogSwap) {
            let _ = self.file_io.delete(&next).await;
            return Err(CatalogError::NotApplied {
                table,
                reason: fault.to_string(),
            });
        }
        let ns = ident.namespace().join(".");
        let swapped =
            self.with_conn(|c| {
                c.execute(
                "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
                 WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5
                   AND metadata_location = ?2",
                params![next, commit.base.metadata_location, self.name, ns, ident.name()],
            )
            });
        let swapped = match swapped {
            Ok(n) => n,
            Err(e) => return self.after_failed_swap(&commit, next, e).await,
        };
        if swapped == 0 {
            // The losing metadata file is never referenced; removing it keeps the
            // metadata directory to what the table history names.
            let _ = self.file_io.delete(&next).await;
            return Err(CatalogError::Conflict { table });
        }
        if let Err(fault) = self.faults.hit(FaultPoint::CatalogAmbiguous) {
            return Err(CatalogError::Ambiguous {
                table,
                reason: fault.to_string(),
            });
        }
        Ok(self.metadata.keep(LoadedTable {
            ident,
            metadata: Arc::new(commit.metadata),
            metadata_location: next,
        }))
    }
}

#[async_trait]
impl Catalog for SqliteCatalog {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn default_location(&self, ident: &TableIdent) -> String {
        format!(
            "{}/{}/{}",
            self.warehouse_uri,
            ident.namespace().join("."),
            ident.name()
        )
    }

    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        let ns = namespace.join(".");
        self.with_conn(|c| {
            c.execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties
                 (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                params![self.name, ns],
            )
            .map(|_| ())
        })
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        let table = display(ident);
        if self.current_location(ident)?.is_some() {
            return Err(CatalogError::TableExists { table });
        }
        self.ensure_namespace(ident.namespace()).await?;
        let (metadata, metadata_location) =
            super::write_first_metadata(self, ident, creation).await?;
        let ns = ident.namespace().join(".");
        let loc = metadata_location.to_string();
        let inserted = self.with_conn(|c| {
            c.execute(
                "INSERT OR IGNORE INTO iceberg_tables
                 (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
                 VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
                params![self.name, ns, ident.name(), loc],
            )
        })?;
        if inserted == 0 {
            return Err(CatalogError::TableExists { table });
        }
        Ok(LoadedTable {
            ident: ident.clone(),
            metadata: Arc::new(metadata),
            metadata_location: loc,
        })
    }

    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        let rows = self.with_conn(|c| {
            let mut stmt = c.prepare(
                "SELECT table_namespace, table_name FROM iceberg_tables
                 WHERE catalog_name = ?1 ORDER BY table_namespace, table_name",
            )?;
            let rows = stmt
                .query_map(params![self.name], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })?;
        rows.into_iter()
            .map(|(ns, name)| {
                let ns = NamespaceIdent::from_strs(ns.split('.'))
                    .map_err(|e| CatalogError::store(format!("namespace {ns:?}"), e))?;
                Ok(TableIdent::new(ns, name))
            })
            .collect()
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        let ns = ident.namespace().join(".");
        let deleted = self.with_conn(|c| {
            c.execute(
                "DELETE FROM iceberg_tables
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                params![self.name, ns, ident.name()],
            )
        })?;
        match deleted {
            0 => Err(CatalogError::NoSuchTable {
                table: display(ident),
            }),
            _ => Ok(()),
        }
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        let location = self
            .current_location(ident)?
            .ok_or_else(|| CatalogError::NoSuchTable {
                table: display(ident),
            })?;
        self.metadata.load(&self.file_io, ident, location).await
    }

    async fn commit(&self, commit: TableCommit) -> Committed {
        Committed::of(self.swap(commit).await)
    }
}

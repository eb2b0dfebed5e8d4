//! The AWS Glue Data Catalog, with Iceberg tables as Java's and pyiceberg's
//! `GlueCatalog` keep them: a Glue table of type `EXTERNAL_TABLE` whose
//! parameters hold `table_type = ICEBERG`, `metadata_location` and
//! `previous_metadata_location`; Glue databases are namespaces (one level).
//!
//! A commit checks that the table still points at the base's metadata file,
//! writes the next metadata file to S3 itself, then swaps the pointer with
//! `UpdateTable` carrying the `VersionId` it read: Glue refuses a stale
//! version with `ConcurrentModificationException`.
//!
//! The SDK retries a timed-out or dropped `UpdateTable`; if the first attempt
//! had landed, the retry is refused as stale, and by then another writer may
//! have committed on top. So after any answer but a clean success the commit
//! reads the table back and applies the catalog rule (see [`super::Landing`]):
//! landed if the current metadata is the new file or logs it; not landed
//! only once the table's version moved past the one sent; unknown otherwise.

mod columns;

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_glue::config::http::HttpResponse;
use aws_sdk_glue::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_glue::operation::update_table::UpdateTableError;
use aws_sdk_glue::types::{DatabaseInput, StorageDescriptor, TableInput};
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};
use tracing::Instrument;

use super::{Catalog, CatalogError, Committed, Landing, LoadedTable, TableCommit};
use crate::aws::{AwsClients, AwsError};
use crate::faults::{FaultPoint, Faults};
use crate::ident::display;

/// Glue table parameter naming the table format.
pub const TABLE_TYPE: &str = "table_type";
/// Its value for Iceberg tables.
pub const ICEBERG: &str = "ICEBERG";
/// Glue table parameter holding the current metadata file.
pub const METADATA_LOCATION: &str = "metadata_location";
/// Glue table parameter holding the metadata file before the last commit.
pub const PREVIOUS_METADATA_LOCATION: &str = "previous_metadata_location";

/// Where a commit stands after an answer that was not a clean success.
#[derive(Debug)]
enum Outcome {
    /// The table's history names its metadata file.
    Landed,
    /// It did not land and cannot any more.
    Absent,
    /// Neither is provable yet; why.
    Unknown(String),
}

/// What Glue holds for a table right now.
#[derive(Debug, Clone)]
struct GlueTable {
    metadata_location: String,
    version_id: Option<String>,
    input: TableInput,
}

/// A [`Catalog`] on AWS Glue, with table files on S3.
#[derive(Debug, Clone)]
pub struct GlueCatalog {
    glue: aws_sdk_glue::Client,
    catalog_id: Option<String>,
    warehouse: String,
    file_io: FileIO,
    faults: Faults,
    metadata: Arc<super::MetadataCache>,
}

fn store<E, R>(op: &str, table: &str, err: SdkError<E, R>) -> CatalogError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    CatalogError::store(format!("Glue {op} {table}"), AwsError::new(err))
}

impl GlueCatalog {
    /// The Glue catalog of the account (or `catalog_id`), with new tables under
    /// `warehouse` (`s3://bucket/prefix`) and files reached through `file_io`.
    pub fn new(
        clients: &AwsClients,
        catalog_id: Option<String>,
        warehouse: &str,
        file_io: FileIO,
        faults: Faults,
    ) -> Self {
        Self {
            glue: clients.glue.clone(),
            catalog_id,
            warehouse: warehouse.trim_end_matches('/').to_string(),
            file_io,
            faults,
            metadata: Arc::default(),
        }
    }

    fn database(ident: &NamespaceIdent) -> Result<String, CatalogError> {
        match ident.as_ref().as_slice() {
            [db] => Ok(db.clone()),
            _ => Err(CatalogError::failed(format!(
                "Glue namespaces have one level; `{}` has {}",
                ident.join("."),
                ident.len()
            ))),
        }
    }

    /// Reads the Glue table; `None` when it does not exist.
    async fn get(&self, ident: &TableIdent) -> Result<Option<GlueTable>, CatalogError> {
        let table = display(ident);
        let db = Self::database(ident.namespace())?;
        let out = self
            .glue
            .get_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&db)
            .name(ident.name())
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_entity_not_found_exception()) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(store("GetTable", &table, e)),
        };
        let Some(t) = out.table() else {
            return Err(CatalogError::failed(format!(
                "Glue GetTable {table}: no table in the answer"
            )));
        };
        let params = t.parameters().cloned().unwrap_or_default();
        if !params
            .get(TABLE_TYPE)
            .is_some_and(|v| v.eq_ignore_ascii_case(ICEBERG))
        {
            return Err(CatalogError::failed(format!(
                "Glue table {table} is not an Iceberg table (parameter {TABLE_TYPE} is {:?})",
                params.get(TABLE_TYPE)
            )));
        }
        let Some(metadata_location) = params.get(METADATA_LOCATION).cloned() else {
            return Err(CatalogError::failed(format!(
                "Glue table {table} has no {METADATA_LOCATION} parameter"
            )));
        };
        // UpdateTable replaces the whole definition: carry what others set.
        let input = TableInput::builder()
            .name(t.name())
            .set_description(t.description().map(str::to_string))
            .set_owner(t.owner().map(str::to_string))
            .set_table_type(t.table_type().map(str::to_string))
            .set_storage_descriptor(t.storage_descriptor().cloned())
            .set_parameters(Some(params))
            .build()
            .map_err(|e| CatalogError::store(format!("Glue table {table}"), e))?;
        Ok(Some(GlueTable {
            metadata_location,
            version_id: t.version_id().map(str::to_string),
            input,
        }))
    }

    /// After any `UpdateTable` answer but a clean success: where the commit
    /// that wrote `next` stands. It landed if the table's current metadata
    /// is `next` or names it in its log (a commit of another writer may have
    /// been built on it meanwhile). It provably did not land only once the
    /// table's version moved past `sent`: the SDK's attempts all carry
    /// `sent`, so none of them can land after that. A table still at `sent`
    /// leaves the outcome open: an earlier attempt may still be in flight.
    async fn outcome(
        &self,
        ident: &TableIdent,
        next: &str,
        added: &[i64],
        sent: Option<&str>,
    ) -> Outcome {
        let now = match self.get(ident).await {
            Ok(Some(now)) => now,
            Ok(None) => return Outcome::Unknown("the table is gone".into()),
            Err(e) => return Outcome::Unknown(format!("re-reading the table: {e}")),
        };
        let current = match self
            .metadata
            .load(&self.file_io, ident, now.metadata_location.clone())
            .await
        {
            Ok(current) => current,
            Err(e) => return Outcome::Unknown(format!("reading its current metadata: {e}")),
        };
        if Landing::of(&current, Some(next), added) == Landing::Landed {
            return Outcome::Landed;
        }
        let moved_on = match (sent, now.version_id.as_deref()) {
            (Some(sent), Some(now)) => sent != now,
            _ => false,
        };
        if moved_on {
            Outcome::Absent
        } else {
            Outcome::Unknown(format!(
                "the table is still at version {}, which an earlier attempt may yet change",
                now.version_id.as_deref().unwrap_or("?")
            ))
        }
    }

    /// Where a commit stands after an `UpdateTable` answer `e` that was not
    /// a clean success: landed, refused, or not provably either (its
    /// [`Outcome`]); a metadata file `next` nothing can reference any more
    /// is deleted.
    async fn unclean(
        &self,
        commit: TableCommit,
        next: String,
        version: Option<&str>,
        e: SdkError<UpdateTableError, HttpResponse>,
    ) -> Result<LoadedTable, CatalogError> {
        let ident = commit.base.ident.clone();
        let table = display(&ident);
        let added = commit.added_snapshots();
        let outcome = self.outcome(&ident, &next, &added, version).await;
        tracing::warn!(error = %DisplayErrorContext(&e), ?outcome, "UpdateTable did not answer cleanly");
        match outcome {
            Outcome::Landed => Ok(self.loaded(ident, commit.metadata, next)),
            Outcome::Absent => {
                // Never referenced, and no attempt can land on it any more.
                let _ = self.file_io.delete(&next).await;
                if definitely_refused(&e) {
                    Err(CatalogError::NotApplied {
                        table,
                        reason: format!("UpdateTable: {}", DisplayErrorContext(&e)),
                    })
                } else {
                    Err(CatalogError::Conflict { table })
                }
            }
            // Glue refused this attempt itself; an earlier one of the
            // SDK's may still land, so its files stay, but retrying
            // the same commit cannot help.
            Outcome::Unknown(_) if definitely_refused(&e) => Err(store("UpdateTable", &table, e)),
            Outcome::Unknown(why) => Err(CatalogError::Ambiguous {
                table,
                reason: format!("UpdateTable: {}; {why}", DisplayErrorContext(&e)),
            }),
        }
    }

    /// Moves the Glue table from the commit's base metadata to its new
    /// metadata, through an `UpdateTable` conditional on the version read.
    async fn swap(&self, commit: TableCommit) -> Result<LoadedTable, CatalogError> {
        let ident = commit.base.ident.clone();
        let table = display(&ident);
        let db = Self::database(ident.namespace())?;
        let base = commit.base.metadata_location.clone();
        // Nothing is written before the pointer is known to be the base: a
        // stale commit costs one GetTable, not a metadata file.
        let name = table.clone();
        let not_applied = move |e: CatalogError| match e {
            e @ (CatalogError::NoSuchTable { .. } | CatalogError::Conflict { .. }) => e,
            e => CatalogError::NotApplied {
                table: name.clone(),
                reason: e.to_string(),
            },
        };
        let current = self
            .get(&ident)
            .await
            .map_err(&not_applied)?
            .ok_or_else(|| CatalogError::NoSuchTable {
                table: table.clone(),
            })?;
        if current.metadata_location != base {
            return Err(CatalogError::Conflict { table });
        }
        // The version whose definition `input` below carries over: Glue
        // refuses the update if anything changed the table since.
        let version = current.version_id.clone();

        let next = super::next_location(&commit)?;
        super::write_metadata(&self.file_io, &ident, &commit.metadata, &next)
            .await
            .map_err(&not_applied)?;
        let next = next.to_string();
        if let Err(fault) = self.faults.hit(FaultPoint::CatalogSwap) {
            return Err(not_applied(CatalogError::store("Glue UpdateTable", fault)));
        }

        let input = moved_input(&current.input, &commit.metadata, &base, &next);
        let sent = self
            .glue
            .update_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&db)
            .table_input(input)
            .set_version_id(version.clone())
            // Else a table version per commit, against a quota (docs/aws.md).
            .skip_archive(true)
            .send()
            .await;
        let err = match sent {
            Ok(_) => None,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_entity_not_found_exception()) =>
            {
                let _ = self.file_io.delete(&next).await;
                return Err(CatalogError::NoSuchTable { table });
            }
            Err(e) => Some(e),
        };
        if let Some(e) = err {
            return self.unclean(commit, next, version.as_deref(), e).await;
        }
        if let Err(fault) = self.faults.hit(FaultPoint::CatalogAmbiguous) {
            return Err(CatalogError::Ambiguous {
                table,
                reason: fault.to_string(),
            });
        }
        Ok(self.loaded(ident, commit.metadata, next))
    }

    /// The table after a commit that landed. Its new VersionId is not fetched:
    /// the next commit's pre-check reads it with the pointer, saving a round trip.
    fn loaded(&self, ident: TableIdent, metadata: TableMetadata, location: String) -> LoadedTable {
        self.metadata.keep(LoadedTable {
            ident,
            metadata: Arc::new(metadata),
            metadata_location: location,
        })
    }
}

/// The table's Glue input with its pointer moved from `base` to `next`,
/// and its location and columns those of `metadata`: schema evolution shows
/// in Glue's columns too.
fn moved_input(
    current: &TableInput,
    metadata: &TableMetadata,
    base: &str,
    next: &str,
) -> TableInput {
    let mut params = current.parameters().cloned().unwrap_or_default();
    params.insert(TABLE_TYPE.into(), ICEBERG.into());
    params.insert(METADATA_LOCATION.into(), next.to_string());
    params.insert(PREVIOUS_METADATA_LOCATION.into(), base.to_string());
    let mut input = current.clone();
    input.parameters = Some(params);
    let sd = input
        .storage_descriptor
        .get_or_insert_with(|| StorageDescriptor::builder().build());
    sd.location = Some(metadata.location().to_string());
    sd.columns = Some(columns::columns(metadata.current_schema()));
    input
}

/// True when Glue refused the request itself (a client error other than a
/// conflict or throttling): retrying the same commit cannot help, so it is not
/// reported as ambiguous. Throttling and stale versions are left to the
/// engine, which reloads and retries.
fn definitely_refused<E, R>(err: &SdkError<E, R>) -> bool
where
    E: ProvideErrorMetadata,
    R: std::fmt::Debug + std::borrow::Borrow<aws_sdk_glue::config::http::HttpResponse>,
{
    match err {
        SdkError::ConstructionFailure(_) => true,
        SdkError::ServiceError(service) => {
            let retried = service.err().code().is_some_and(|c| {
                c.contains("Throttl")
                    || c.contains("TooManyRequests")
                    || c == "ConcurrentModificationException"
            });
            !retried
                && err
                    .raw_response()
                    .is_some_and(|r| r.borrow().status().is_client_error())
        }
        _ => false,
    }
}

#[async_trait]
impl Catalog for GlueCatalog {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// `<warehouse>/<database>.db/<table>`, as Java's and pyiceberg's Glue catalogs lay it out.
    fn default_location(&self, ident: &TableIdent) -> String {
        format!(
            "{}/{}.db/{}",
            self.warehouse,
            ident.namespace().join("."),
            ident.name()
        )
    }

    async fn ensure_namespace(&self, namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        let db = Self::database(namespace)?;
        let input = DatabaseInput::builder()
            .name(&db)
            .build()
            .map_err(|e| CatalogError::store(format!("Glue database {db}"), e))?;
        let out = self
            .glue
            .create_database()
            .set_catalog_id(self.catalog_id.clone())
            .database_input(input)
            .send()
            .instrument(tracing::debug_span!("glue.create_database", database = %db))
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_already_exists_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(store("CreateDatabase", &db, e)),
        }
    }

    async fn list_tables(&self) -> Result<Vec<TableIdent>, CatalogError> {
        let mut databases = Vec::new();
        let mut pages = self
            .glue
            .get_databases()
            .set_catalog_id(self.catalog_id.clone())
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| store("GetDatabases", "*", e))?;
            databases.extend(page.database_list.into_iter().map(|d| d.name));
        }
        let mut out = Vec::new();
        for db in databases {
            let mut pages = self
                .glue
                .get_tables()
                .set_catalog_id(self.catalog_id.clone())
                .database_name(&db)
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = match page {
                    Ok(p) => p,
                    // GetDatabases may list databases this role was not
                    // granted; they are not this deployment's tables.
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(|s| s.meta().code() == Some("AccessDeniedException")) =>
                    {
                        tracing::warn!(database = %db, "no access to its tables; skipped");
                        break;
                    }
                    Err(e) => return Err(store("GetTables", &db, e)),
                };
                for t in page.table_list.unwrap_or_default() {
                    let iceberg = t
                        .parameters
                        .as_ref()
                        .and_then(|p| p.get(TABLE_TYPE))
                        .is_some_and(|v| v.eq_ignore_ascii_case(ICEBERG));
                    if iceberg {
                        out.push(TableIdent::new(NamespaceIdent::new(db.clone()), t.name));
                    }
                }
            }
        }
        out.sort_by_key(display);
        Ok(out)
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        let table = display(ident);
        let span = tracing::info_span!("glue.create_table", table = %table);
        async {
            let db = Self::database(ident.namespace())?;
            if self.get(ident).await?.is_some() {
                return Err(CatalogError::TableExists {
                    table: table.clone(),
                });
            }
            self.ensure_namespace(ident.namespace()).await?;
            let (metadata, metadata_location) =
                super::write_first_metadata(self, ident, creation).await?;
            let loc = metadata_location.to_string();
            let input = TableInput::builder()
                .name(ident.name())
                .table_type("EXTERNAL_TABLE")
                .parameters(TABLE_TYPE, ICEBERG)
                .parameters(METADATA_LOCATION, &loc)
                .storage_descriptor(
                    StorageDescriptor::builder()
                        .location(metadata.location())
                        .set_columns(Some(columns::columns(metadata.current_schema())))
                        .build(),
                )
                .build()
                .map_err(|e| CatalogError::store(format!("Glue table {table}"), e))?;
            let out = self
                .glue
                .create_table()
                .set_catalog_id(self.catalog_id.clone())
                .database_name(&db)
                .table_input(input)
                .send()
                .await;
            if let Err(e) = out {
                let _ = self.file_io.delete(&loc).await;
                return Err(
                    if e.as_service_error()
                        .is_some_and(|e| e.is_already_exists_exception())
                    {
                        CatalogError::TableExists {
                            table: table.clone(),
                        }
                    } else {
                        store("CreateTable", &table, e)
                    },
                );
            }
            Ok(LoadedTable {
                ident: ident.clone(),
                metadata: Arc::new(metadata),
                metadata_location: loc,
            })
        }
        .instrument(span)
        .await
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        let span = tracing::debug_span!("glue.load_table", table = %display(ident));
        async {
            let glue = self
                .get(ident)
                .await?
                .ok_or_else(|| CatalogError::NoSuchTable {
                    table: display(ident),
                })?;
            self.metadata
                .load(&self.file_io, ident, glue.metadata_location)
                .await
        }
        .instrument(span)
        .await
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        let table = display(ident);
        let db = Self::database(ident.namespace())?;
        let sent = self
            .glue
            .delete_table()
            .set_catalog_id(self.catalog_id.clone())
            .database_name(&db)
            .name(ident.name())
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_entity_not_found_exception()) =>
            {
                Err(CatalogError::NoSuchTable { table })
            }
            Err(e) => Err(store("DeleteTable", &table, e)),
        }
    }

    async fn commit(&self, commit: TableCommit) -> Committed {
        let span = tracing::info_span!("glue.commit", table = %display(&commit.base.ident));
        Committed::of(self.swap(commit).instrument(span).await)
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_glue::error::ErrorMetadata;
    use aws_sdk_glue::operation::update_table::UpdateTableError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;

    use super::*;

    type HttpResponse = aws_sdk_glue::config::http::HttpResponse;

    fn answer(status: u16, code: &str) -> SdkError<UpdateTableError, HttpResponse> {
        let status = StatusCode::try_from(status).expect("a valid status");
        SdkError::service_error(
            UpdateTableError::generic(ErrorMetadata::builder().code(code).build()),
            HttpResponse::new(status, SdkBody::empty()),
        )
    }

    #[test]
    fn only_client_errors_are_definite_refusals() {
        assert!(definitely_refused(&answer(400, "InvalidInputException")));
        assert!(definitely_refused(&SdkError::<
            UpdateTableError,
            HttpResponse,
        >::construction_failure(
            "bad input"
        )));
        // The request may have been applied: the engine must re-read the table.
        assert!(!definitely_refused(&answer(
            500,
            "InternalServiceException"
        )));
        assert!(!definitely_refused(&answer(400, "ThrottlingException")));
        assert!(!definitely_refused(&SdkError::<
            UpdateTableError,
            HttpResponse,
        >::timeout_error("timed out")));
        assert!(!definitely_refused(&SdkError::<
            UpdateTableError,
            HttpResponse,
        >::response_error(
            "truncated answer",
            HttpResponse::new(StatusCode::try_from(200).expect("200"), SdkBody::empty()),
        )));
    }
}

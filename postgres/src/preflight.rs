//! Connecting, checking that the server and its objects are set up for
//! logical replication, and setting them up.

use tokio_postgres::Client;
use tracing::Instrument as _;

use crate::conn::ConnSettings;
use crate::error::Context as _;
use crate::privileges::{Role, add_denied, check_select, create_denied, denied};
use crate::schema::table_schema;
use crate::{PgConfig, PgError, TableName, quote_ident};

/// Connects (TLS and password as the conninfo says) and pins the session
/// settings that decide how values print; also returns the server's
/// `server_version_num` (150004 for 15.4), which decides what it can send.
pub(crate) async fn connect(config: &PgConfig) -> Result<(Client, i32), PgError> {
    let settings = ConnSettings::resolve(&config.conninfo, config.secret.as_ref())?
        .with_default_application_name("floe");
    let span = tracing::info_span!("pg_connection", slot = %config.slot, host = %settings.host());
    let client = settings.connect_in(span).await?;
    // Decoding only reads flushed WAL: the watermarks floe commits must be
    // flushed when the commit returns, whatever the server's default. The
    // timeouts are off for this session only, as pg_dump does: a DBA's
    // idle_in_transaction_session_timeout or statement_timeout meant for
    // applications would otherwise cut a long chunk or peek short.
    client
        .batch_execute(
            "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET bytea_output = 'hex';
             SET extra_float_digits = 3; SET standard_conforming_strings = on;
             SET IntervalStyle = 'iso_8601';
             SET synchronous_commit = on;
             SET statement_timeout = 0; SET lock_timeout = 0;
             SET idle_in_transaction_session_timeout = 0",
        )
        .await
        .context(|| "setting session parameters".to_string())?;
    // Postgres 14+ also closes sessions idle between transactions, which a
    // sync is while it writes a large batch to Iceberg.
    let version = server_version(&client).await?;
    if version >= 140_000 {
        client
            .batch_execute("SET idle_session_timeout = 0")
            .await
            .context(|| "setting idle_session_timeout".to_string())?;
    }
    Ok((client, version))
}

async fn server_version(client: &Client) -> Result<i32, PgError> {
    Ok(client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .context(|| "reading server_version_num".to_string())?
        .get(0))
}

/// Checks everything floe needs before reading; each error names its fix.
pub(crate) async fn preflight(client: &Client, config: &PgConfig) -> Result<(), PgError> {
    check_wal_level(client).await?;
    let role = Role::current(client).await?;
    role.require_replication()?;
    check_slot(client, config, role.database).await?;

    let tables = config.table_names();
    let publication = client
        .query_opt(
            "SELECT puballtables FROM pg_publication WHERE pubname = $1",
            &[&config.publication],
        )
        .await
        .context(|| format!("looking up publication {}", config.publication))?;
    if publication.is_none() {
        return Err(PgError::PublicationMissing {
            publication: config.publication.clone(),
            publication_ident: quote_ident(&config.publication),
            tables: tables
                .iter()
                .map(TableName::quoted)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let published = published_tables(client, &config.publication).await?;
    for table in &tables {
        // A missing table is reported as missing, not as unpublished.
        let schema = table_schema(client, table).await?;
        check_select(client, table).await?;
        if !published.contains(table) {
            return Err(PgError::TableNotPublished {
                table: table.to_string(),
                table_ident: table.quoted(),
                publication: config.publication.clone(),
                publication_ident: quote_ident(&config.publication),
            });
        }
        if schema.primary_key.is_empty() {
            return Err(PgError::NoPrimaryKey {
                table: table.to_string(),
                table_ident: table.quoted(),
            });
        }
    }
    Ok(())
}

/// Errs unless the slot exists and is a pgoutput logical slot of `database`.
async fn check_slot(client: &Client, config: &PgConfig, database: String) -> Result<(), PgError> {
    let slot = client
        .query_opt(
            "SELECT plugin::text, slot_type, database::text FROM pg_replication_slots
              WHERE slot_name = $1",
            &[&config.slot],
        )
        .await
        .context(|| format!("looking up slot {}", config.slot))?;
    let Some(slot) = slot else {
        return Err(PgError::SlotMissing {
            slot: config.slot.clone(),
        });
    };
    let (plugin, kind, slot_db): (Option<String>, String, Option<String>) =
        (slot.get(0), slot.get(1), slot.get(2));
    let problem = if kind != "logical" {
        Some(format!("is a {kind} slot, not a logical one"))
    } else if plugin.as_deref() != Some("pgoutput") {
        Some(format!(
            "uses plugin {}, floe reads pgoutput",
            plugin.unwrap_or_default()
        ))
    } else if slot_db.as_deref() != Some(database.as_str()) {
        Some(format!(
            "belongs to database {}, floe connects to {database}",
            slot_db.unwrap_or_default()
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(PgError::SlotUnusable {
            slot: config.slot.clone(),
            problem,
            database,
        });
    }
    Ok(())
}

/// Errs unless the server decodes WAL logically.
async fn check_wal_level(client: &Client) -> Result<(), PgError> {
    let wal_level: String = client
        .query_one("SELECT current_setting('wal_level')", &[])
        .await
        .context(|| "reading wal_level".to_string())?
        .get(0);
    if wal_level != "logical" {
        return Err(PgError::WalLevel { actual: wal_level });
    }
    Ok(())
}

async fn published_tables(client: &Client, publication: &str) -> Result<Vec<TableName>, PgError> {
    Ok(client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&publication],
        )
        .await
        .context(|| format!("listing the tables of publication {publication}"))?
        .iter()
        .map(|r| TableName {
            schema: r.get(0),
            name: r.get(1),
        })
        .collect())
}

/// Checks the role may read the tables and use slots, makes sure the
/// publication covers the tables and creates the pgoutput slot when missing.
/// A publication is created (FOR TABLE the configured tables), or tables
/// added to it, only when it lacks them: a role with REPLICATION and SELECT
/// alone succeeds once the tables' owner has run [`setup_sql`](crate::setup_sql).
/// Safe to run again.
pub async fn setup(config: &PgConfig) -> Result<(), PgError> {
    let span =
        tracing::info_span!("pg_setup", slot = %config.slot, publication = %config.publication);
    async {
        let (client, _) = connect(config).await?;
        check_wal_level(&client).await?;
        let role = Role::current(&client).await?;
        // Before anything is created: without it the slot cannot be.
        role.require_replication()?;
        for table in &config.table_names() {
            table_schema(&client, table).await?;
            check_select(&client, table).await?;
        }
        ensure_publication(&client, config, &role).await?;
        ensure_slot(&client, config, &role).await
    }
    .instrument(span)
    .await
}

/// Creates the publication, or adds the tables it lacks; touches nothing
/// when it covers them, so that needs no privilege.
async fn ensure_publication(
    client: &Client,
    config: &PgConfig,
    role: &Role,
) -> Result<(), PgError> {
    let tables = config.table_names();
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&config.publication],
        )
        .await
        .context(|| format!("looking up publication {}", config.publication))?
        .is_some();
    let publication = quote_ident(&config.publication);
    if !exists {
        let list: Vec<String> = tables.iter().map(TableName::quoted).collect();
        let created = client
            .batch_execute(&format!(
                "CREATE PUBLICATION {publication} FOR TABLE {}",
                list.join(", ")
            ))
            .await;
        match created {
            Ok(()) => tracing::info!("created publication"),
            Err(e) if denied(&e) => return Err(create_denied(client, config, role, e).await),
            Err(e) => {
                return Err(PgError::Query {
                    context: format!("creating publication {}", config.publication),
                    source: e,
                });
            }
        }
        return Ok(());
    }
    let published = published_tables(client, &config.publication).await?;
    for table in tables.iter().filter(|t| !published.contains(t)) {
        let added = client
            .batch_execute(&format!(
                "ALTER PUBLICATION {publication} ADD TABLE {}",
                table.quoted()
            ))
            .await;
        match added {
            Ok(()) => tracing::info!(table = %table, "added table to publication"),
            Err(e) if denied(&e) => {
                return Err(add_denied(client, config, role, table, e).await);
            }
            Err(e) => {
                return Err(PgError::Query {
                    context: format!("adding {table} to publication {}", config.publication),
                    source: e,
                });
            }
        }
    }
    Ok(())
}

/// Creates the slot when missing.
async fn ensure_slot(client: &Client, config: &PgConfig, role: &Role) -> Result<(), PgError> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1",
            &[&config.slot],
        )
        .await
        .context(|| format!("looking up slot {}", config.slot))?
        .is_some();
    if exists {
        return Ok(());
    }
    match client
        .execute(
            "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&config.slot],
        )
        .await
    {
        Ok(_) => {
            tracing::info!("created slot");
            Ok(())
        }
        Err(e) if denied(&e) => Err(PgError::NoReplicationRole {
            role: quote_ident(&role.name),
        }),
        Err(e) => Err(PgError::Query {
            context: format!("creating slot {}", config.slot),
            source: e,
        }),
    }
}

/// Drops the slot (when it exists) and creates it again at the current WAL
/// position: the repair for a slot that lost changes, once the tables are
/// marked to re-snapshot.
pub(crate) async fn recreate_slot(config: &PgConfig) -> Result<(), PgError> {
    let (client, _) = connect(config).await?;
    // Both slot functions need it: refuse with its fix, not the server's message.
    Role::current(&client).await?.require_replication()?;
    client
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
              WHERE slot_name = $1",
            &[&config.slot],
        )
        .await
        .context(|| {
            format!(
                "dropping slot {} (stop any other reader of it first)",
                config.slot
            )
        })?;
    client
        .execute(
            "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&config.slot],
        )
        .await
        .context(|| format!("creating slot {}", config.slot))?;
    tracing::info!(slot = %config.slot, "recreated slot");
    Ok(())
}

/// Waits for another session reading the slot to let go of it, and ends that
/// session if it does not within a few seconds. A reader killed mid-peek
/// (SIGKILL, a Lambda timeout) leaves its server backend decoding on until it
/// next writes to the dead socket, and the slot refuses every other reader
/// meanwhile. Ending a live reader instead is harmless too: its batch fails
/// before the slot moves, and every table skips what it already holds.
pub(crate) async fn claim_slot(client: &Client, slot: &str) -> Result<(), PgError> {
    let holder = || async {
        client
            .query_opt(
                "SELECT active_pid FROM pg_replication_slots
                  WHERE slot_name = $1 AND active_pid IS NOT NULL AND active_pid <> pg_backend_pid()",
                &[&slot],
            )
            .await
            .context(|| format!("reading who holds slot {slot}"))
            .map(|r| r.map(|r| r.get::<_, i32>(0)))
    };
    for _ in 0..20 {
        if holder().await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let Some(pid) = holder().await? else {
        return Ok(());
    };
    tracing::warn!(slot, pid, "another session still holds the slot; ending it");
    let ended: bool = client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .context(|| {
            format!(
                "ending session {pid}, which holds slot {slot} (fix: stop the other reader, \
                 or GRANT pg_signal_backend to floe's role)"
            )
        })?
        .get(0);
    for _ in 0..20 {
        if !ended || holder().await?.is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    Ok(())
}

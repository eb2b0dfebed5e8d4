//! Errors of the Postgres source. Misconfigurations found before reading say
//! how to fix them, because whoever meets them is setting floe up.

use floe_core::error::{Classify, ErrorKind};

/// What went wrong talking to Postgres or decoding what it sent.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// A query or the connection failed.
    #[error("postgres: {context}: {}", describe(source))]
    Query {
        /// What floe was doing.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The conninfo (or a secret or passfile feeding it) is not usable.
    #[error("postgres conninfo: {message}")]
    Conninfo {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A file or secret the conninfo names could not be read or used: a
    /// passfile, a root certificate, the login secret, the TLS setup.
    #[error("postgres conninfo: {context}: {source}")]
    Setup {
        /// What it names, and where.
        context: String,
        /// The reader's or the TLS library's error.
        #[source]
        source: floe_core::error::BoxError,
    },
    /// Connecting failed in a way with a known fix (TLS, password).
    #[error(
        "postgres: connecting to {host} (sslmode={sslmode}): {fix} ({})",
        describe(source)
    )]
    Connect {
        /// The first host of the conninfo.
        host: String,
        /// The TLS mode in force.
        sslmode: &'static str,
        /// What went wrong and what to do.
        fix: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server does not decode WAL logically.
    #[error(
        "postgres: wal_level is {actual}, logical replication needs logical; fix: \
         ALTER SYSTEM SET wal_level = logical; then restart Postgres"
    )]
    WalLevel {
        /// The server's current `wal_level`.
        actual: String,
    },
    /// The role may not use replication slots.
    #[error(
        "postgres: role {role} has neither REPLICATION nor superuser, and creating, reading and \
         advancing a replication slot needs one; fix: a superuser runs \
         ALTER ROLE {role} WITH REPLICATION;"
    )]
    NoReplicationRole {
        /// The connecting role, quoted as an identifier.
        role: String,
    },
    /// The role may not look up tables in a configured table's schema.
    #[error(
        "postgres: role {role} may not use schema {schema} (permission denied looking up {table}); \
         fix: GRANT USAGE ON SCHEMA {schema_ident} TO {role};"
    )]
    NoSchemaUsage {
        /// The connecting role, quoted as an identifier.
        role: String,
        /// The schema.
        schema: String,
        /// The schema quoted as an identifier.
        schema_ident: String,
        /// The table looked up.
        table: String,
    },
    /// The role may not read a configured table.
    #[error(
        "postgres: role {role} may not read table {table} (the initial copy, and reading back \
         large values an update left unchanged, SELECT from it); fix: \
         GRANT SELECT ON {table_ident} TO {role};"
    )]
    NoSelect {
        /// The connecting role, quoted as an identifier.
        role: String,
        /// The table as configured.
        table: String,
        /// The quoted table.
        table_ident: String,
    },
    /// The role may not create the publication, or add a table to it: that
    /// takes ownership of the tables (and CREATE on the database, or
    /// ownership of the publication), which floe's role needs for nothing
    /// else, so their owner does it.
    #[error(
        "postgres: role {role} may not {action} ({}): that needs {needs}, and the role lacks \
         {lacks}; fix: {fix}",
        describe(source)
    )]
    PublicationDenied {
        /// The connecting role.
        role: String,
        /// What was refused (`create publication "floe" in database app`).
        action: String,
        /// The privileges the action needs.
        needs: &'static str,
        /// Those of them the role does not have.
        lacks: String,
        /// What to run, and as whom.
        fix: String,
        /// The server's refusal.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The configured slot does not exist.
    #[error(
        "postgres: replication slot {slot:?} does not exist; fix: \
         SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput'); (or run `floe pg setup`)"
    )]
    SlotMissing {
        /// The slot name.
        slot: String,
    },
    /// The slot exists but is not a pgoutput logical slot of this database.
    #[error(
        "postgres: replication slot {slot:?} {problem}; fix: drop it with \
         SELECT pg_drop_replication_slot('{slot}'); then \
         SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput'); in database {database}"
    )]
    SlotUnusable {
        /// The slot name.
        slot: String,
        /// What is wrong with it.
        problem: String,
        /// The database floe connects to.
        database: String,
    },
    /// The configured publication does not exist.
    #[error(
        "postgres: publication {publication:?} does not exist; fix: \
         CREATE PUBLICATION {publication_ident} FOR TABLE {tables}; (or run `floe pg setup`)"
    )]
    PublicationMissing {
        /// The publication name.
        publication: String,
        /// The publication name quoted as an identifier.
        publication_ident: String,
        /// The configured tables, quoted and comma separated.
        tables: String,
    },
    /// A configured table does not exist.
    #[error("postgres: table {table} does not exist (tables are configured as schema.table)")]
    TableMissing {
        /// The table as configured.
        table: String,
    },
    /// A configured table is not published, so its changes would never arrive.
    #[error(
        "postgres: table {table} is not in publication {publication:?}; fix: \
         ALTER PUBLICATION {publication_ident} ADD TABLE {table_ident};"
    )]
    TableNotPublished {
        /// The table as configured.
        table: String,
        /// The quoted table.
        table_ident: String,
        /// The publication name.
        publication: String,
        /// The publication quoted as an identifier.
        publication_ident: String,
    },
    /// A configured table has no primary key, so changes cannot be keyed.
    #[error(
        "postgres: table {table} has no primary key, floe needs one to key changes; fix: \
         ALTER TABLE {table_ident} ADD PRIMARY KEY (<columns>);"
    )]
    NoPrimaryKey {
        /// The table as configured.
        table: String,
        /// The quoted table.
        table_ident: String,
    },
    /// The slot was advanced past what the caller says is committed: the
    /// changes in between are gone from the slot and cannot be read again.
    #[error(
        "postgres: slot {slot:?} is at {confirmed} but only {committed} is committed; \
         the changes between were consumed elsewhere and are lost to floe; \
         re-snapshot the tables (clear the snapshot state) to recover"
    )]
    SlotAhead {
        /// The slot name.
        slot: String,
        /// The slot's `confirmed_flush_lsn`.
        confirmed: String,
        /// The committed LSN passed in.
        committed: String,
    },
    /// The replication session streaming changes failed: the server
    /// refused a step, or the connection broke.
    #[error("postgres: {context}: {message}")]
    Stream {
        /// What floe was doing.
        context: String,
        /// The server's message (with its detail and hint), or the I/O error.
        message: String,
        /// The server's SQLSTATE; None when the connection broke.
        code: Option<String>,
    },
    /// A pgoutput message was cut short or malformed.
    #[error("pgoutput: {0}")]
    Decode(String),
    /// A snapshot chunk's binary COPY could not be decoded.
    #[error("postgres: snapshot chunk of {table}, column {column}: {reason}")]
    Copy {
        /// `schema.table`.
        table: String,
        /// The column (empty for the stream's framing).
        column: String,
        /// What was wrong.
        reason: String,
    },
    /// An LSN in the wrong text form.
    #[error("postgres: bad LSN {0:?} (expected X/Y in hex)")]
    BadLsn(String),
    /// Postgres did not produce the high watermark the snapshot waits for.
    #[error("postgres: slot {slot:?}: watermark {id} not found in the stream")]
    WatermarkLost {
        /// The slot name.
        slot: String,
        /// The watermark's id.
        id: String,
    },
    /// Stored snapshot state does not fit the table (wrong number of key values).
    #[error(
        "postgres: snapshot cursor of {table} has {got} key values, the primary key has {want}"
    )]
    BadCursor {
        /// The table.
        table: String,
        /// Values in the cursor.
        got: usize,
        /// Primary key columns.
        want: usize,
    },
    /// A table's schema cannot be expressed in Iceberg.
    #[error("postgres: table {table}: iceberg schema: {source}")]
    Schema {
        /// The table.
        table: String,
        /// Iceberg's error.
        #[source]
        source: Box<iceberg::Error>,
    },
}

/// A dropped connection, a server restarting or short of resources, a slot
/// another session holds, a lost watermark pass with nothing changed. A
/// misconfiguration, a missing privilege or bad data stays until someone
/// fixes it, so retrying those only repeats the error.
impl Classify for PgError {
    fn kind(&self) -> ErrorKind {
        match self {
            PgError::Query { source, .. } if transient(source) => ErrorKind::Service,
            PgError::WatermarkLost { .. } => ErrorKind::Service,
            PgError::Stream { code: None, .. } => ErrorKind::Service,
            PgError::Stream {
                code: Some(code), ..
            } if transient_class(code) => ErrorKind::Service,
            // A SQLSTATE no retry outlives: a privilege, an object, the query.
            PgError::Query { .. }
            | PgError::Conninfo { .. }
            | PgError::Setup { .. }
            | PgError::Connect { .. }
            | PgError::WalLevel { .. }
            | PgError::NoReplicationRole { .. }
            | PgError::NoSchemaUsage { .. }
            | PgError::NoSelect { .. }
            | PgError::PublicationDenied { .. }
            | PgError::SlotMissing { .. }
            | PgError::SlotUnusable { .. }
            | PgError::PublicationMissing { .. }
            | PgError::TableMissing { .. }
            | PgError::TableNotPublished { .. }
            | PgError::NoPrimaryKey { .. }
            | PgError::Stream { .. }
            | PgError::SlotAhead { .. } => ErrorKind::Config,
            PgError::Schema { .. } => ErrorKind::Unsupported,
            PgError::Decode(_)
            | PgError::Copy { .. }
            | PgError::BadLsn(_)
            | PgError::BadCursor { .. } => ErrorKind::Input,
        }
    }
}

/// SQLSTATE classes a retry can outlive: connection exceptions (08),
/// transaction rollbacks such as serialization failures (40), insufficient
/// resources (53), objects in use (55), operator intervention (57) and
/// system errors (58). Without a server error, only a broken connection is.
fn transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(code) => transient_class(code.code()),
        None => {
            e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
        }
    }
}

/// A driver error with what it wraps: tokio-postgres prints only its kind
/// ("db error"), the server's message and the TLS failure sit beneath it.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(" (detail: {detail})"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!(" (hint: {hint})"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Attaches what floe was doing to a driver error.
pub(crate) trait Context<T> {
    /// Wraps the error as [`PgError::Query`] with `context`.
    fn context(self, context: impl FnOnce() -> String) -> Result<T, PgError>;
}

impl<T> Context<T> for Result<T, tokio_postgres::Error> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T, PgError> {
        self.map_err(|source| PgError::Query {
            context: context(),
            source,
        })
    }
}

/// Whether SQLSTATE `code` is of a class [`transient`] names.
fn transient_class(code: &str) -> bool {
    matches!(code.get(..2), Some("08" | "40" | "53" | "55" | "57" | "58"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_grants_are_not_transient_a_lost_watermark_is() {
        let select = PgError::NoSelect {
            role: "\"floe\"".into(),
            table: "public.orders".into(),
            table_ident: "\"public\".\"orders\"".into(),
        };
        assert!(!select.is_transient());
        let replication = PgError::NoReplicationRole {
            role: "\"floe\"".into(),
        };
        assert!(!replication.is_transient());
        let lost = PgError::WatermarkLost {
            slot: "floe".into(),
            id: "1".into(),
        };
        assert!(lost.is_transient());
    }
}

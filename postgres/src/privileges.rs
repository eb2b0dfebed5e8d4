//! What floe's role may do, and the SQL that lets it do no more than that.
//!
//! floe's role needs REPLICATION (for the slot) and SELECT on the tables.
//! A publication FOR TABLE takes ownership of every table it names, so the
//! tables' owner creates it from [`setup_sql`], and `floe pg setup` only
//! checks it. Refusals are recognized by SQLSTATE 42501
//! (insufficient_privilege), never by message text, and come back naming
//! the grant that is missing.

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::error::Context as _;
use crate::{PgConfig, PgError, TableName, quote_ident};

/// True when Postgres refused for lack of a privilege.
pub(crate) fn denied(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE)
}

/// The connecting role and what it may do with slots.
pub(crate) struct Role {
    /// `current_user`.
    pub name: String,
    /// Superuser or REPLICATION: may create, read and advance slots.
    pub replicates: bool,
    /// `current_database()`.
    pub database: String,
}

impl Role {
    /// Reads the session's role and database.
    pub async fn current(client: &Client) -> Result<Self, PgError> {
        let row = client
            .query_one(
                "SELECT current_user::text, rolsuper OR rolreplication, current_database()::text
                   FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .await
            .context(|| "reading the role's attributes".to_string())?;
        Ok(Self {
            name: row.get(0),
            replicates: row.get(1),
            database: row.get(2),
        })
    }

    /// Errs unless the role may use replication slots.
    pub fn require_replication(&self) -> Result<(), PgError> {
        if self.replicates {
            return Ok(());
        }
        Err(PgError::NoReplicationRole {
            role: quote_ident(&self.name),
        })
    }
}

/// Reads nothing from `table` but fails as a read of every column would: a
/// missing SELECT grant (or one on some columns only) surfaces here, naming
/// its fix, not in the middle of the initial copy.
pub(crate) async fn check_select(client: &Client, table: &TableName) -> Result<(), PgError> {
    match client
        .batch_execute(&format!("SELECT * FROM {} WHERE false", table.quoted()))
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if denied(&e) => Err(PgError::NoSelect {
            role: quote_ident(&Role::current(client).await?.name),
            table: table.to_string(),
            table_ident: table.quoted(),
        }),
        Err(e) => Err(PgError::Query {
            context: format!("reading {table}"),
            source: e,
        }),
    }
}

/// The error for a refused lookup of `table`: its schema's USAGE is missing.
pub(crate) async fn schema_denied(client: &Client, table: &TableName) -> PgError {
    let role = match Role::current(client).await {
        Ok(role) => role.name,
        Err(e) => return e,
    };
    PgError::NoSchemaUsage {
        role: quote_ident(&role),
        schema: table.schema.clone(),
        schema_ident: quote_ident(&table.schema),
        table: table.to_string(),
    }
}

/// The error for a refused CREATE PUBLICATION: which of CREATE on the
/// database and ownership of the tables the role lacks, and the script the
/// owner runs instead.
pub(crate) async fn create_denied(
    client: &Client,
    config: &PgConfig,
    role: &Role,
    source: tokio_postgres::Error,
) -> PgError {
    let (may_create, foreign) = match create_privileges(client, config).await {
        Ok(found) => found,
        Err(e) => return e,
    };
    let mut lacks = Vec::new();
    if !may_create {
        lacks.push(format!("CREATE on database {}", role.database));
    }
    if !foreign.is_empty() {
        lacks.push(format!("ownership of {}", foreign.join(", ")));
    }
    let mut fix = format!(
        "have the tables' owner (or a superuser) run `{}` (it grants {} what floe needs and \
         creates the publication), then run `floe pg setup` again",
        print_sql_command(config, role),
        role.name
    );
    if foreign.is_empty() {
        fix.push_str(&format!(
            ", or GRANT CREATE ON DATABASE {} TO {};",
            quote_ident(&role.database),
            quote_ident(&role.name)
        ));
    }
    PgError::PublicationDenied {
        role: role.name.clone(),
        action: format!(
            "create publication {} in database {}",
            quote_ident(&config.publication),
            role.database
        ),
        needs: "CREATE on the database and ownership of every table it publishes",
        lacks: or_unknown(lacks),
        fix,
        source,
    }
}

/// Whether the role may create objects in the database, and the configured
/// tables it does not own.
async fn create_privileges(
    client: &Client,
    config: &PgConfig,
) -> Result<(bool, Vec<String>), PgError> {
    let may_create: bool = client
        .query_one(
            "SELECT has_database_privilege(current_database(), 'CREATE')",
            &[],
        )
        .await
        .context(|| "reading the role's privileges on the database".to_string())?
        .get(0);
    let tables = config.table_names();
    let quoted: Vec<String> = tables.iter().map(TableName::quoted).collect();
    let owned: Vec<bool> = client
        .query(
            "SELECT pg_has_role((SELECT relowner FROM pg_class WHERE oid = t::regclass), 'USAGE')
               FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i",
            &[&quoted],
        )
        .await
        .context(|| "reading who owns the tables".to_string())?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let foreign = tables
        .iter()
        .zip(owned)
        .filter(|(_, owned)| !owned)
        .map(|(t, _)| t.to_string())
        .collect();
    Ok((may_create, foreign))
}

/// The error for a refused ALTER PUBLICATION … ADD TABLE: ownership of the
/// publication or of the table is missing, and its owner adds the table.
pub(crate) async fn add_denied(
    client: &Client,
    config: &PgConfig,
    role: &Role,
    table: &TableName,
    source: tokio_postgres::Error,
) -> PgError {
    let owners = client
        .query_one(
            "SELECT p.pubowner::regrole::text, pg_has_role(p.pubowner, 'USAGE'),
                    pg_has_role((SELECT relowner FROM pg_class WHERE oid = $2::text::regclass), 'USAGE')
               FROM pg_publication p WHERE p.pubname = $1",
            &[&config.publication, &table.quoted()],
        )
        .await
        .context(|| format!("reading who owns publication {}", config.publication));
    let (owner, owns_publication, owns_table): (String, bool, bool) = match owners {
        Ok(row) => (row.get(0), row.get(1), row.get(2)),
        Err(e) => return e,
    };
    let mut lacks = Vec::new();
    if !owns_publication {
        lacks.push(format!(
            "ownership of publication {} (owned by {owner})",
            config.publication
        ));
    }
    if !owns_table {
        lacks.push(format!("ownership of {table}"));
    }
    PgError::PublicationDenied {
        role: role.name.clone(),
        action: format!(
            "add {table} to publication {} in database {}",
            quote_ident(&config.publication),
            role.database
        ),
        needs: "ownership of the publication and of the table",
        lacks: or_unknown(lacks),
        fix: format!(
            "have {owner} (the publication's owner, who must own {table} too) or a superuser \
             run ALTER PUBLICATION {} ADD TABLE {}; then run `floe pg setup` again",
            quote_ident(&config.publication),
            table.quoted()
        ),
        source,
    }
}

/// Privileges are checked by role membership here and by the server's own
/// rules there; should they disagree, say so rather than name nothing.
fn or_unknown(lacks: Vec<String>) -> String {
    if lacks.is_empty() {
        "a privilege floe could not name (see the server's message)".into()
    } else {
        lacks.join(" and ")
    }
}

/// The command that prints the owner's script for `config`, piped to psql.
fn print_sql_command(config: &PgConfig, role: &Role) -> String {
    let mut words = vec![
        "floe pg setup --print-sql".to_string(),
        format!("--role {}", shell_word(&role.name)),
        format!("--publication {}", shell_word(&config.publication)),
    ];
    words.extend(
        config
            .tables
            .iter()
            .map(|t| format!("--table {}", shell_word(t))),
    );
    words.push(format!("| psql -d {}", shell_word(&role.database)));
    words.join(" ")
}

/// `word` as one shell word: bare when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ':' | '='));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The SQL the tables' owner (or a superuser) runs once so that `role` can
/// set up and sync `tables` with the least privilege: REPLICATION, USAGE on
/// the tables' schemas, SELECT on the tables, and the publication, each line
/// with a comment saying why. Nothing in it needs a connection to write.
pub fn setup_sql(role: &str, publication: &str, slot: &str, tables: &[String]) -> String {
    let role_ident = quote_ident(role);
    let tables: Vec<TableName> = tables.iter().map(|t| TableName::parse(t)).collect();
    let listed: Vec<String> = tables.iter().map(TableName::quoted).collect();
    let mut sql = format!(
        "-- floe: least-privilege setup of role {role_ident} for publication {pub_ident}.\n\
         -- Run once as a superuser, or as the tables' owner (a superuser then runs the\n\
         -- ALTER ROLE line), connected to the tables' database. Then floe's role runs\n\
         -- `floe pg setup` (which creates slot {slot_ident}) and `floe pg sync`.\n\
         \n\
         -- A replication slot is created, read and advanced only by a superuser or a\n\
         -- role with REPLICATION, and only a superuser can give that attribute.\n\
         -- A role that does not exist yet: CREATE ROLE {role_ident} LOGIN REPLICATION PASSWORD '…';\n\
         ALTER ROLE {role_ident} WITH REPLICATION;\n",
        pub_ident = quote_ident(publication),
        slot_ident = quote_ident(slot),
    );
    let mut schemas: Vec<&str> = tables.iter().map(|t| t.schema.as_str()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    for schema in schemas.into_iter().filter(|s| *s != "public") {
        sql.push_str(&format!(
            "\n-- Looking a table up needs USAGE on its schema (PUBLIC has it on public).\n\
             GRANT USAGE ON SCHEMA {} TO {role_ident};\n",
            quote_ident(schema)
        ));
    }
    sql.push_str(
        "\n-- The initial copy, and reading back large values an update left unchanged,\n\
         -- SELECT from each table.\n",
    );
    for table in &listed {
        sql.push_str(&format!("GRANT SELECT ON {table} TO {role_ident};\n"));
    }
    sql.push_str(&format!(
        "\n-- The publication names the tables the slot decodes. CREATE PUBLICATION … FOR\n\
         -- TABLE needs CREATE on the database and ownership of every table, which\n\
         -- floe's role needs for nothing else: so their owner creates it, and\n\
         -- `floe pg setup` only checks it covers the tables. If it exists already:\n\
         -- ALTER PUBLICATION {pub_ident} ADD TABLE <each new table>;\n\
         CREATE PUBLICATION {pub_ident} FOR TABLE {};\n\
         \n\
         -- Nothing else: no ownership, no CREATE, no superuser. The slot is created by\n\
         -- `floe pg setup`, as floe's role, once floe is about to read it: a slot keeps\n\
         -- the server's WAL from its creation on.\n",
        listed.join(", "),
        pub_ident = quote_ident(publication),
    ));
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_sql_grants_each_table_and_quotes_every_name() {
        let sql = setup_sql(
            "floe",
            "pub\"x",
            "floe",
            &["orders".into(), "Sales.Items".into(), "sales.b".into()],
        );
        let statements: Vec<&str> = sql
            .lines()
            .filter(|l| !l.starts_with("--") && !l.is_empty())
            .collect();
        assert_eq!(
            statements,
            [
                r#"ALTER ROLE "floe" WITH REPLICATION;"#,
                r#"GRANT USAGE ON SCHEMA "Sales" TO "floe";"#,
                r#"GRANT USAGE ON SCHEMA "sales" TO "floe";"#,
                r#"GRANT SELECT ON "public"."orders" TO "floe";"#,
                r#"GRANT SELECT ON "Sales"."Items" TO "floe";"#,
                r#"GRANT SELECT ON "sales"."b" TO "floe";"#,
                r#"CREATE PUBLICATION "pub""x" FOR TABLE "public"."orders", "Sales"."Items", "sales"."b";"#,
            ]
        );
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("public.orders"), "public.orders");
        assert_eq!(shell_word("my db"), "'my db'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}

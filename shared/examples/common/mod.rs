//! What the commit examples share: one table of one `id` column on an
//! embedded SQLite catalog in a temporary directory.

use std::sync::Arc;

use floe_core::catalog::{Catalog, SqliteCatalog};
use floe_core::faults::Faults;
use floe_core::iceberg::TableIdent;
use floe_core::iceberg::io::FileIO;
use floe_core::ident::parse_table;
use floe_core::tabledef;

/// A new `bench.t` in a new warehouse; the directory lives as long as the guard.
pub async fn one_table()
-> Result<(tempfile::TempDir, Arc<SqliteCatalog>, TableIdent), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let catalog = Arc::new(SqliteCatalog::open(
        "floe",
        &dir.path().join("catalog.db"),
        &format!("file://{}", dir.path().display()),
        FileIO::new_with_fs(),
        Faults::none(),
    )?);
    let ident = parse_table("bench.t")?;
    let schema = tabledef::parse_schema(
        r#"{"type":"struct","fields":[{"id":1,"name":"id","required":true,"type":"long"}]}"#,
    )?;
    catalog
        .create_table(
            &ident,
            tabledef::creation("t", schema, Default::default(), Default::default()),
        )
        .await?;
    Ok((dir, catalog, ident))
}

//! Table schemas as Postgres declares them, and their Iceberg counterparts.

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use tokio_postgres::Client;

use crate::error::Context as _;
use crate::privileges;
use crate::values::oid;
use crate::{PgError, TableName};

/// A Postgres table's columns and primary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    /// `schema.table`.
    pub table: String,
    /// Columns in table order.
    pub columns: Vec<PgColumn>,
    /// Primary key column names in key order.
    pub primary_key: Vec<String>,
}

/// One column of a [`TableSchema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgColumn {
    /// Column name.
    pub name: String,
    /// Type oid; for a domain, the oid of its base type, which decides the value's form.
    pub type_oid: u32,
    /// Type modifier (`-1` when none), e.g. numeric precision and scale.
    pub typmod: i32,
    /// The declared type as `format_type` prints it (`numeric(10,2)`).
    pub type_name: String,
    /// Whether NULL is allowed.
    pub nullable: bool,
}

impl PgColumn {
    /// Precision and scale of a `numeric(p,s)` column; `None` for other
    /// types and for numeric without a declared precision.
    pub fn numeric_precision_scale(&self) -> Option<(u32, i32)> {
        if self.type_oid != oid::NUMERIC || self.typmod < 4 {
            return None;
        }
        let packed = self.typmod - 4;
        let precision = ((packed >> 16) & 0xFFFF) as u32;
        // The scale is an 11-bit two's complement value (Postgres 15 allows negative scales).
        let scale = ((packed & 0x7FF) ^ 0x400) - 0x400;
        Some((precision, scale))
    }
}

impl PgColumn {
    /// Appends the JSON form of one of this column's values (its Postgres
    /// text output) to `out`, as the column's Iceberg type takes it: a
    /// value of a string column (a numeric without a declared precision,
    /// an oid) goes as a string, digit for digit.
    pub fn push_json(&self, out: &mut String, text: &str) {
        if iceberg_type(self) == PrimitiveType::String {
            crate::values::push_str(out, text);
        } else {
            crate::values::push_json(out, self.type_oid, text);
        }
    }
}

impl TableSchema {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<&PgColumn> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The Iceberg schema floe writes this table as, field ids 1.. in column order.
    ///
    /// int2/int4 → int, int8 → long, float4 → float, float8 → double,
    /// numeric(p,s) → decimal(p,s) when Iceberg can hold it (p ≤ 38, 0 ≤ s ≤ p),
    /// else string, as is numeric without a declared precision: its values
    /// can have any scale, which no single decimal type holds exactly.
    /// bool → boolean, date → date, timestamp → timestamp, timestamptz →
    /// timestamptz, time → time, bytea → binary; text, varchar, char, json,
    /// jsonb, uuid and every other type → string.
    ///
    /// Primary key columns are required and the identifier fields; every
    /// other column is optional even when NOT NULL, because a column added
    /// later or a value missing from a delete must still fit.
    pub fn iceberg_schema(&self) -> Result<Schema, PgError> {
        let mut fields = Vec::with_capacity(self.columns.len());
        let mut identifiers = Vec::new();
        for (i, column) in self.columns.iter().enumerate() {
            let id = i as i32 + 1;
            let ty = Type::Primitive(iceberg_type(column));
            let field = if self.primary_key.contains(&column.name) {
                identifiers.push(id);
                NestedField::required(id, &column.name, ty)
            } else {
                NestedField::optional(id, &column.name, ty)
            };
            fields.push(field.into());
        }
        // Identifier ids in key order, which is how the key is compared.
        identifiers.sort_by_key(|id| {
            let name = &self.columns[(*id - 1) as usize].name;
            self.primary_key.iter().position(|k| k == name)
        });
        Schema::builder()
            .with_fields(fields)
            .with_identifier_field_ids(identifiers)
            .build()
            .map_err(|source| PgError::Schema {
                table: self.table.clone(),
                source: Box::new(source),
            })
    }
}

/// The Iceberg type `column`'s values are written as (see [`TableSchema::iceberg_schema`]).
pub(crate) fn iceberg_type(column: &PgColumn) -> PrimitiveType {
    match column.type_oid {
        oid::INT2 | oid::INT4 => PrimitiveType::Int,
        oid::INT8 => PrimitiveType::Long,
        oid::FLOAT4 => PrimitiveType::Float,
        oid::FLOAT8 => PrimitiveType::Double,
        oid::BOOL => PrimitiveType::Boolean,
        oid::DATE => PrimitiveType::Date,
        oid::TIME => PrimitiveType::Time,
        oid::TIMESTAMP => PrimitiveType::Timestamp,
        oid::TIMESTAMPTZ => PrimitiveType::Timestamptz,
        oid::BYTEA => PrimitiveType::Binary,
        oid::NUMERIC => match column.numeric_precision_scale() {
            Some((p, s)) if (1..=38).contains(&p) && s >= 0 && (s as u32) <= p => {
                PrimitiveType::Decimal {
                    precision: p,
                    scale: s as u32,
                }
            }
            _ => PrimitiveType::String,
        },
        _ => PrimitiveType::String,
    }
}

/// Reads `table`'s columns and primary key from the catalog.
pub(crate) async fn table_schema(
    client: &Client,
    table: &TableName,
) -> Result<TableSchema, PgError> {
    let qualified = table.quoted();
    let relid: Option<u32> = match client
        .query_one("SELECT to_regclass($1)::oid", &[&qualified])
        .await
    {
        Ok(row) => row.get(0),
        // Looking up a name in a schema without USAGE on it is refused.
        Err(e) if privileges::denied(&e) => {
            return Err(privileges::schema_denied(client, table).await);
        }
        Err(e) => {
            return Err(PgError::Query {
                context: format!("looking up table {table}"),
                source: e,
            });
        }
    };
    let relid = relid.ok_or_else(|| PgError::TableMissing {
        table: table.to_string(),
    })?;
    let rows = client
        .query(
            "SELECT a.attname::text,
                    COALESCE(NULLIF(t.typbasetype, 0), a.atttypid),
                    a.atttypmod,
                    format_type(a.atttypid, a.atttypmod),
                    NOT a.attnotnull
               FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
              WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
              ORDER BY a.attnum",
            &[&relid],
        )
        .await
        .context(|| format!("reading columns of {table}"))?;
    let columns = rows
        .iter()
        .map(|r| PgColumn {
            name: r.get(0),
            type_oid: r.get(1),
            typmod: r.get(2),
            type_name: r.get(3),
            nullable: r.get(4),
        })
        .collect();
    let primary_key = client
        .query(
            "SELECT a.attname::text
               FROM pg_index i
               CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
              WHERE i.indrelid = $1 AND i.indisprimary
              ORDER BY k.ord",
            &[&relid],
        )
        .await
        .context(|| format!("reading the primary key of {table}"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(TableSchema {
        table: table.to_string(),
        columns,
        primary_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, type_oid: u32, typmod: i32) -> PgColumn {
        PgColumn {
            name: name.into(),
            type_oid,
            typmod,
            type_name: String::new(),
            nullable: true,
        }
    }

    #[test]
    fn maps_to_iceberg() {
        let t = TableSchema {
            table: "public.t".into(),
            columns: vec![
                col("b", oid::INT4, -1),
                col("a", oid::INT8, -1),
                // numeric(10,2): typmod = (10 << 16 | 2) + 4
                col("price", oid::NUMERIC, (10 << 16 | 2) + 4),
                col("any", oid::NUMERIC, -1),
                col("at", oid::TIMESTAMPTZ, -1),
                col("j", oid::JSONB, -1),
            ],
            primary_key: vec!["a".into(), "b".into()],
        };
        let s = t.iceberg_schema().unwrap();
        let ty = |n: &str| s.field_by_name(n).unwrap().field_type.to_string();
        assert_eq!(ty("price"), "decimal(10, 2)");
        assert_eq!(ty("any"), "string");
        assert_eq!(ty("at"), "timestamptz");
        assert_eq!(ty("j"), "string");
        assert!(s.field_by_name("a").unwrap().required);
        assert!(!s.field_by_name("price").unwrap().required);
        let mut ids: Vec<i32> = s.identifier_field_ids().collect();
        ids.sort();
        assert_eq!(ids, vec![1, 2]);
    }

    #[test]
    fn negative_numeric_scale() {
        // numeric(5,-2) in Postgres 15: scale bits hold -2 as 11-bit two's complement.
        let c = col("n", oid::NUMERIC, ((5 << 16) | (-2i32 & 0x7FF)) + 4);
        assert_eq!(c.numeric_precision_scale(), Some((5, -2)));
        assert_eq!(iceberg_type(&c), PrimitiveType::String);
    }
}

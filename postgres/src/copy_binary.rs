//! Binary COPY (`COPY (SELECT …) TO STDOUT (FORMAT binary)`) decoded
//! straight into Arrow columns of the table's Iceberg schema, for the
//! initial snapshot: no text and no JSON between Postgres and the Parquet
//! writer.
//!
//! Each type's binary form is its `send` function's: integers and floats
//! big-endian, numeric as base-10000 digits with a weight, times as
//! microseconds and dates as days since 2000-01-01. A type with no decoder
//! here is written as a string anyway, so it is selected as its output
//! function prints it. A value its Iceberg column cannot hold (an infinite
//! timestamp, a NaN numeric, `24:00:00`) sends the chunk through the text
//! path instead, which treats it as it always did: never a value made up.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, LargeBinaryBuilder, StringBuilder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{Array as _, ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use iceberg::spec::PrimitiveType;

use crate::schema::{TableSchema, iceberg_type};
use crate::values::oid;
use crate::{PgError, quote_ident};

/// Microseconds between the Unix epoch and Postgres' (2000-01-01).
pub(crate) const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// Days between the Unix epoch and Postgres' (2000-01-01).
pub(crate) const PG_EPOCH_DAYS: i32 = 10_957;
/// Microseconds in a day: `time` goes up to and including `24:00:00`, Iceberg's stops before.
const DAY_US: i64 = 86_400_000_000;
/// What every binary COPY stream starts with.
const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// Why a chunk cannot be read through binary COPY.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The column's type has no binary decoder here; the text path reads it.
    #[error("{table}.{column}: type {type_name} has no binary decoder")]
    Unsupported {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// Its declared type.
        type_name: String,
    },
    /// A value the column's Iceberg type cannot hold; the text path reads
    /// the chunk, and the writer refuses that row as it always did.
    #[error("{table}.{column}: {reason}")]
    Unrepresentable {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// The value and why.
        reason: String,
    },
    /// The bytes are not what binary COPY of these columns sends.
    #[error("{table}.{column}: malformed binary COPY data: {reason}")]
    Malformed {
        /// `schema.table`.
        table: String,
        /// The column (empty for the stream's framing).
        column: String,
        /// What was wrong.
        reason: String,
    },
}

/// What the source reports: a chunk that cannot go through the text path
/// either (malformed data) fails its batch, naming the column.
impl From<CopyError> for PgError {
    fn from(e: CopyError) -> Self {
        let reason = e.to_string();
        let (CopyError::Unsupported { table, column, .. }
        | CopyError::Unrepresentable { table, column, .. }
        | CopyError::Malformed { table, column, .. }) = e;
        PgError::Copy {
            table,
            column,
            reason,
        }
    }
}

/// A chunk decoded: its rows in columns, and per primary key column each
/// row's value as Postgres prints it (the stream's tuples name keys so).
#[derive(Debug)]
pub(crate) struct Decoded {
    pub rows: RecordBatch,
    pub keys: Vec<KeyColumn>,
}

/// One primary key column's values, which print as Postgres prints them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KeyColumn {
    /// Printed by Postgres, or a text column's own values.
    Text(StringArray),
    /// A smallint or integer column's values.
    Int(Int32Array),
    /// A bigint column's values.
    Long(Int64Array),
}

impl KeyColumn {
    pub fn len(&self) -> usize {
        match self {
            KeyColumn::Text(a) => a.len(),
            KeyColumn::Int(a) => a.len(),
            KeyColumn::Long(a) => a.len(),
        }
    }

    /// Row `i`'s value as Postgres prints it (`int8out` and Rust print
    /// integers alike).
    pub fn text(&self, i: usize) -> String {
        match self {
            KeyColumn::Text(a) => a.value(i).to_string(),
            KeyColumn::Int(a) => a.value(i).to_string(),
            KeyColumn::Long(a) => a.value(i).to_string(),
        }
    }

    /// The key column of kind `kind` among the decoded `rows`, when its
    /// values print as its text: Postgres need not print them.
    fn of(kind: Kind, column: &ArrayRef) -> Option<Self> {
        use arrow_array::cast::AsArray as _;
        use arrow_array::types::{Int32Type, Int64Type};
        Some(match kind {
            Kind::Int2 | Kind::Int4 => {
                KeyColumn::Int(column.as_primitive_opt::<Int32Type>()?.clone())
            }
            Kind::Int8 => KeyColumn::Long(column.as_primitive_opt::<Int64Type>()?.clone()),
            Kind::Text | Kind::Printed => KeyColumn::Text(column.as_string_opt::<i32>()?.clone()),
            _ => return None,
        })
    }

    /// Whether a key column of kind `kind` prints as its decoded value.
    fn printed_as_decoded(kind: Kind) -> bool {
        matches!(
            kind,
            Kind::Int2 | Kind::Int4 | Kind::Int8 | Kind::Text | Kind::Printed
        )
    }
}

/// How one column's binary values become its Arrow values.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric {
        precision: u8,
        scale: i8,
    },
    /// text, varchar, char and json, whose binary form is their text.
    Text,
    /// jsonb: a version byte, then its text.
    Jsonb,
    /// Any other type written as a string: selected as its output function
    /// prints it (`format('%s', …)`), the text the simple protocol sends.
    Printed,
    Uuid,
    Oid,
    Bytea,
    Date,
    Time,
    Timestamp,
    Timestamptz,
}

impl Kind {
    /// The decoder of a column of Postgres type `type_oid` written as `ty`;
    /// `None` when there is none.
    fn of(type_oid: u32, ty: &PrimitiveType) -> Option<Self> {
        Some(match (type_oid, ty) {
            (oid::BOOL, _) => Kind::Bool,
            (oid::INT2, _) => Kind::Int2,
            (oid::INT4, _) => Kind::Int4,
            (oid::INT8, _) => Kind::Int8,
            (oid::FLOAT4, _) => Kind::Float4,
            (oid::FLOAT8, _) => Kind::Float8,
            (oid::NUMERIC, PrimitiveType::Decimal { precision, scale }) => Kind::Numeric {
                precision: u8::try_from(*precision).ok()?,
                scale: i8::try_from(*scale).ok()?,
            },
            (oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON, _) => Kind::Text,
            (oid::JSONB, _) => Kind::Jsonb,
            (oid::UUID, _) => Kind::Uuid,
            (oid::OID, _) => Kind::Oid,
            (oid::BYTEA, _) => Kind::Bytea,
            (oid::DATE, _) => Kind::Date,
            (oid::TIME, _) => Kind::Time,
            (oid::TIMESTAMP, _) => Kind::Timestamp,
            (oid::TIMESTAMPTZ, _) => Kind::Timestamptz,
            (_, PrimitiveType::String) => Kind::Printed,
            _ => return None,
        })
    }

    /// How the COPY's SELECT names the column `name`.
    fn select(self, name: &str) -> String {
        let column = quote_ident(name);
        match self {
            // format() prints NULL as '': the CASE keeps it NULL.
            Kind::Printed => {
                format!("CASE WHEN {column} IS NULL THEN NULL ELSE format('%s', {column}) END")
            }
            _ => column,
        }
    }

    fn builder(self) -> Builder {
        match self {
            Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            Kind::Int2 | Kind::Int4 => Builder::Int(Int32Builder::new()),
            Kind::Int8 => Builder::Long(Int64Builder::new()),
            Kind::Float4 => Builder::Float(Float32Builder::new()),
            Kind::Float8 => Builder::Double(Float64Builder::new()),
            Kind::Numeric { .. } => Builder::Decimal(Decimal128Builder::new()),
            Kind::Text | Kind::Printed | Kind::Jsonb | Kind::Uuid | Kind::Oid => {
                Builder::String(StringBuilder::new())
            }
            Kind::Bytea => Builder::Binary(LargeBinaryBuilder::new()),
            Kind::Date => Builder::Date(Date32Builder::new()),
            Kind::Time => Builder::Time(Time64MicrosecondBuilder::new()),
            Kind::Timestamp | Kind::Timestamptz => {
                Builder::Timestamp(TimestampMicrosecondBuilder::new())
            }
        }
    }
}

/// One column's values so far.
enum Builder {
    Bool(BooleanBuilder),
    Int(Int32Builder),
    Long(Int64Builder),
    Float(Float32Builder),
    Double(Float64Builder),
    Decimal(Decimal128Builder),
    String(StringBuilder),
    Binary(LargeBinaryBuilder),
    Date(Date32Builder),
    Time(Time64MicrosecondBuilder),
    Timestamp(TimestampMicrosecondBuilder),
}

impl Builder {
    fn append_null(&mut self) {
        match self {
            Builder::Bool(b) => b.append_null(),
            Builder::Int(b) => b.append_null(),
            Builder::Long(b) => b.append_null(),
            Builder::Float(b) => b.append_null(),
            Builder::Double(b) => b.append_null(),
            Builder::Decimal(b) => b.append_null(),
            Builder::String(b) => b.append_null(),
            Builder::Binary(b) => b.append_null(),
            Builder::Date(b) => b.append_null(),
            Builder::Time(b) => b.append_null(),
            Builder::Timestamp(b) => b.append_null(),
        }
    }

    /// The column's array, typed as `field` says (the Arrow types carry
    /// what the builders cannot know: decimal precision, the time zone).
    fn finish(self, ty: &arrow_schema::DataType) -> Result<ArrayRef, arrow_schema::ArrowError> {
        use arrow_schema::DataType;
        Ok(match (self, ty) {
            (Builder::Decimal(mut b), DataType::Decimal128(p, s)) => {
                Arc::new(b.finish().with_precision_and_scale(*p, *s)?)
            }
            (Builder::Timestamp(mut b), DataType::Timestamp(_, zone)) => {
                Arc::new(b.finish().with_timezone_opt(zone.clone()))
            }
            (Builder::Bool(mut b), _) => Arc::new(b.finish()),
            (Builder::Int(mut b), _) => Arc::new(b.finish()),
            (Builder::Long(mut b), _) => Arc::new(b.finish()),
            (Builder::Float(mut b), _) => Arc::new(b.finish()),
            (Builder::Double(mut b), _) => Arc::new(b.finish()),
            (Builder::Decimal(mut b), _) => Arc::new(b.finish()),
            (Builder::String(mut b), _) => Arc::new(b.finish()),
            (Builder::Binary(mut b), _) => Arc::new(b.finish()),
            (Builder::Date(mut b), _) => Arc::new(b.finish()),
            (Builder::Time(mut b), _) => Arc::new(b.finish()),
            (Builder::Timestamp(mut b), _) => Arc::new(b.finish()),
        })
    }
}

/// A decoder of one chunk of a table: its columns in table order, then
/// the primary key columns whose decoded values do not print as Postgres
/// prints them, as text (`format('%s', key)`). Fed the stream as it
/// arrives ([`Self::push`]), so decoding keeps pace with Postgres sending.
pub(crate) struct CopyDecoder {
    table: String,
    schema: SchemaRef,
    names: Vec<String>,
    kinds: Vec<Kind>,
    builders: Vec<Builder>,
    key_names: Vec<String>,
    /// Per key column, the table column whose values print as the key
    /// (integers, text: no `format()` per row in Postgres, a third of a
    /// narrow table's COPY); `None` for those Postgres prints.
    key_columns: Vec<Option<usize>>,
    /// The printed keys so far, one buffer per printed key column.
    printed: Vec<StringBuilder>,
    /// Bytes of an unfinished row (or header) from earlier parts.
    carry: Vec<u8>,
    header: bool,
    ended: bool,
}

impl CopyDecoder {
    /// The decoder of `schema`'s rows in the Arrow form of `schema`'s
    /// Iceberg schema; [`CopyError::Unsupported`] names the first column
    /// it cannot decode.
    pub fn new(schema: &TableSchema) -> Result<Self, CopyError> {
        let arrow = schema
            .iceberg_schema()
            .ok()
            .and_then(|s| iceberg::arrow::schema_to_arrow_schema(&s).ok())
            .ok_or_else(|| CopyError::Unsupported {
                table: schema.table.clone(),
                column: String::new(),
                type_name: "(the table's Iceberg schema has no Arrow form)".into(),
            })?;
        let mut kinds = Vec::with_capacity(schema.columns.len());
        for column in &schema.columns {
            let kind = Kind::of(column.type_oid, &iceberg_type(column)).ok_or_else(|| {
                CopyError::Unsupported {
                    table: schema.table.clone(),
                    column: column.name.clone(),
                    type_name: column.type_name.clone(),
                }
            })?;
            kinds.push(kind);
        }
        let key_columns: Vec<Option<usize>> = schema
            .primary_key
            .iter()
            .map(|k| {
                schema
                    .columns
                    .iter()
                    .position(|c| &c.name == k)
                    .filter(|&c| KeyColumn::printed_as_decoded(kinds[c]))
            })
            .collect();
        Ok(Self {
            table: schema.table.clone(),
            schema: Arc::new(arrow),
            names: schema.columns.iter().map(|c| c.name.clone()).collect(),
            builders: kinds.iter().map(|k| k.builder()).collect(),
            kinds,
            key_names: schema.primary_key.clone(),
            printed: key_columns
                .iter()
                .filter(|c| c.is_none())
                .map(|_| StringBuilder::new())
                .collect(),
            key_columns,
            carry: Vec::new(),
            header: false,
            ended: false,
        })
    }

    /// The select list of the chunk's COPY: the table's columns (in the
    /// forms decoded here), then the primary key columns Postgres must
    /// print as the stream's tuples do, to match changes to rows.
    pub fn select_list(&self) -> Vec<String> {
        let columns = self.names.iter().zip(&self.kinds).map(|(n, k)| k.select(n));
        let keys = self
            .key_names
            .iter()
            .zip(&self.key_columns)
            .filter(|(_, c)| c.is_none())
            .map(|(k, _)| format!("format('%s', {})", quote_ident(k)));
        columns.chain(keys).collect()
    }

    /// Decodes a whole binary COPY stream.
    #[cfg(test)]
    pub fn decode(mut self, data: &[u8]) -> Result<Decoded, CopyError> {
        self.push(data)?;
        self.finish()
    }

    /// Decodes the next part of the stream: every row it completes.
    pub fn push(&mut self, part: &[u8]) -> Result<(), CopyError> {
        if self.carry.is_empty() {
            let used = self.rows(part)?;
            self.carry.extend_from_slice(&part[used..]);
            return Ok(());
        }
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(part);
        let used = self.rows(&data)?;
        data.drain(..used);
        self.carry = data;
        Ok(())
    }

    /// The rows decoded, once the stream has ended.
    pub fn finish(mut self) -> Result<Decoded, CopyError> {
        if !self.ended || !self.carry.is_empty() {
            return Err(malformed(&self.table, "", "stream ends inside a row"));
        }
        let printed: Vec<StringArray> =
            self.printed.iter_mut().map(StringBuilder::finish).collect();
        let key_columns = std::mem::take(&mut self.key_columns);
        let kinds = self.kinds.clone();
        let table = self.table.clone();
        let rows = self.batch()?;
        let mut printed = printed.into_iter();
        let keys = key_columns
            .iter()
            .map(|c| match c {
                Some(c) => KeyColumn::of(kinds[*c], rows.column(*c))
                    .ok_or_else(|| malformed(&table, "", "a key column of another type")),
                None => printed
                    .next()
                    .map(KeyColumn::Text)
                    .ok_or_else(|| malformed(&table, "", "a printed key is missing")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Decoded { rows, keys })
    }

    /// Decodes the header (once) and then every whole row at the start of
    /// `data`; returns how many bytes that took. Nothing may follow the
    /// trailer.
    fn rows(&mut self, data: &[u8]) -> Result<usize, CopyError> {
        let mut r = Reader { data, at: 0 };
        if !self.header {
            let Some(len) = header_len(data).map_err(|reason| self.framing(reason))? else {
                return Ok(0);
            };
            r.at = len;
            self.header = true;
        }
        let width = self.kinds.len() + self.printed.len();
        while r.at < data.len() {
            if self.ended {
                return Err(self.framing("data after the end of the stream"));
            }
            let Some(len) =
                row_len(&data[r.at..], width).map_err(|reason| self.framing(&reason))?
            else {
                break;
            };
            if len == 2 {
                // The trailer: a row of -1 fields.
                self.ended = true;
                r.at += 2;
                continue;
            }
            self.row(&mut r)?;
        }
        Ok(r.at)
    }

    /// Decodes one whole row at `r`.
    fn row(&mut self, r: &mut Reader<'_>) -> Result<(), CopyError> {
        r.i16()
            .ok_or_else(|| self.framing("stream ends inside a row"))?;
        for c in 0..self.kinds.len() {
            let value = r
                .field()
                .ok_or_else(|| malformed(&self.table, &self.names[c], "short value"))?;
            self.push_value(c, value)?;
        }
        for k in 0..self.printed.len() {
            let text = r
                .field()
                .flatten()
                .and_then(|v| std::str::from_utf8(v).ok())
                .ok_or_else(|| self.framing("a key's text is missing or not UTF-8"))?;
            self.printed[k].append_value(text);
        }
        Ok(())
    }

    fn framing(&self, reason: &str) -> CopyError {
        malformed(&self.table, "", reason)
    }

    /// The columns decoded so far, as the table's Arrow schema has them.
    fn batch(self) -> Result<RecordBatch, CopyError> {
        let fields = self.schema.fields().clone();
        let mut arrays = Vec::with_capacity(fields.len());
        for (builder, field) in self.builders.into_iter().zip(fields.iter()) {
            let array = builder
                .finish(field.data_type())
                .map_err(|e| CopyError::Malformed {
                    table: self.table.clone(),
                    column: field.name().clone(),
                    reason: e.to_string(),
                })?;
            arrays.push(array);
        }
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| CopyError::Malformed {
            table: self.table.clone(),
            column: String::new(),
            reason: e.to_string(),
        })
    }

    /// Appends column `c`'s value (`None` for NULL).
    fn push_value(&mut self, c: usize, value: Option<&[u8]>) -> Result<(), CopyError> {
        let Some(v) = value else {
            self.builders[c].append_null();
            return Ok(());
        };
        let kind = self.kinds[c];
        let (table, column) = (&self.table, &self.names[c]);
        let bad = |reason: &str| malformed(table, column, reason);
        let unfit = |reason: String| CopyError::Unrepresentable {
            table: table.clone(),
            column: column.clone(),
            reason,
        };
        match (kind, &mut self.builders[c]) {
            (Kind::Bool, Builder::Bool(b)) => {
                b.append_value(fixed::<1>(v).ok_or_else(|| bad("bool"))?[0] != 0)
            }
            (Kind::Int2, Builder::Int(b)) => {
                b.append_value(i16::from_be_bytes(fixed(v).ok_or_else(|| bad("int2"))?).into())
            }
            (Kind::Int4, Builder::Int(b)) => {
                b.append_value(i32::from_be_bytes(fixed(v).ok_or_else(|| bad("int4"))?))
            }
            (Kind::Int8, Builder::Long(b)) => {
                b.append_value(i64::from_be_bytes(fixed(v).ok_or_else(|| bad("int8"))?))
            }
            (Kind::Float4, Builder::Float(b)) => {
                b.append_value(f32::from_be_bytes(fixed(v).ok_or_else(|| bad("float4"))?))
            }
            (Kind::Float8, Builder::Double(b)) => {
                b.append_value(f64::from_be_bytes(fixed(v).ok_or_else(|| bad("float8"))?))
            }
            (Kind::Numeric { precision, scale }, Builder::Decimal(b)) => {
                let n = Numeric::parse(v).ok_or_else(|| bad("numeric"))?;
                b.append_value(n.unscaled(precision, scale).map_err(unfit)?)
            }
            (Kind::Text | Kind::Printed, Builder::String(b)) => {
                b.append_value(std::str::from_utf8(v).map_err(|_| bad("text is not UTF-8"))?)
            }
            (Kind::Jsonb, Builder::String(b)) => match v.split_first() {
                Some((1, text)) => b.append_value(
                    std::str::from_utf8(text).map_err(|_| bad("jsonb is not UTF-8"))?,
                ),
                _ => return Err(bad("jsonb of an unknown version")),
            },
            (Kind::Uuid, Builder::String(b)) => {
                let id = uuid::Uuid::from_slice(v).map_err(|_| bad("uuid"))?;
                b.append_value(id.hyphenated().to_string())
            }
            (Kind::Oid, Builder::String(b)) => {
                b.append_value(u32::from_be_bytes(fixed(v).ok_or_else(|| bad("oid"))?).to_string())
            }
            (Kind::Bytea, Builder::Binary(b)) => b.append_value(v),
            (Kind::Date, Builder::Date(b)) => {
                let days = i32::from_be_bytes(fixed(v).ok_or_else(|| bad("date"))?);
                let unix = unix_days(days);
                b.append_value(unix.ok_or_else(|| unfit(format!("date {days} (infinity?)")))?)
            }
            (Kind::Time, Builder::Time(b)) => {
                let us = i64::from_be_bytes(fixed(v).ok_or_else(|| bad("time"))?);
                if !(0..DAY_US).contains(&us) {
                    return Err(unfit(format!("time of {us} µs past midnight (24:00:00?)")));
                }
                b.append_value(us)
            }
            (Kind::Timestamp | Kind::Timestamptz, Builder::Timestamp(b)) => {
                let us = i64::from_be_bytes(fixed(v).ok_or_else(|| bad("timestamp"))?);
                b.append_value(
                    unix_micros(us).ok_or_else(|| unfit("an infinite timestamp".into()))?,
                )
            }
            _ => return Err(bad("decoder and column disagree")),
        }
        Ok(())
    }
}

fn malformed(table: &str, column: &str, reason: &str) -> CopyError {
    CopyError::Malformed {
        table: table.to_string(),
        column: column.to_string(),
        reason: reason.to_string(),
    }
}

/// Days since the Unix epoch of a binary `date` (days since 2000-01-01);
/// `None` for ±infinity, which Iceberg has no date for.
fn unix_days(days: i32) -> Option<i32> {
    (days != i32::MAX && days != i32::MIN)
        .then(|| days.checked_add(PG_EPOCH_DAYS))
        .flatten()
}

/// Microseconds since the Unix epoch of a binary timestamp (since
/// 2000-01-01); `None` for ±infinity.
fn unix_micros(us: i64) -> Option<i64> {
    (us != i64::MAX && us != i64::MIN)
        .then(|| us.checked_add(PG_EPOCH_US))
        .flatten()
}

/// The length of the stream's header at the start of `data`; `None` while
/// it is not all there.
fn header_len(data: &[u8]) -> Result<Option<usize>, &'static str> {
    if !(data.starts_with(SIGNATURE) || SIGNATURE.starts_with(data)) {
        return Err("no PGCOPY signature");
    }
    let fixed_len = SIGNATURE.len() + 8;
    if data.len() < fixed_len {
        return Ok(None);
    }
    let at = SIGNATURE.len() + 4;
    let extension = i32::from_be_bytes(fixed(&data[at..at + 4]).ok_or("short header")?);
    let extension = usize::try_from(extension).map_err(|_| "bad header extension")?;
    let len = fixed_len + extension;
    Ok((data.len() >= len).then_some(len))
}

/// The length of the row (or the trailer, 2 bytes) at the start of `data`;
/// `None` while it is not all there. A row of other than `width` fields
/// is an error.
fn row_len(data: &[u8], width: usize) -> Result<Option<usize>, String> {
    let mut r = Reader { data, at: 0 };
    let Some(fields) = r.i16() else {
        return Ok(None);
    };
    if fields == -1 {
        return Ok(Some(2));
    }
    if usize::try_from(fields).ok() != Some(width) {
        return Err(format!("a row of {fields} fields, expected {width}"));
    }
    for _ in 0..width {
        let Some(len) = r.i32() else {
            return Ok(None);
        };
        if len == -1 {
            continue;
        }
        let len = usize::try_from(len).map_err(|_| format!("a value of {len} bytes"))?;
        if r.take(len).is_none() {
            return Ok(None);
        }
    }
    Ok(Some(r.at))
}

/// The value as exactly `N` bytes.
fn fixed<const N: usize>(v: &[u8]) -> Option<[u8; N]> {
    v.try_into().ok()
}

/// A cursor over the stream.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.data.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).and_then(fixed).map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4).and_then(fixed).map(i32::from_be_bytes)
    }

    /// One field: `Some(None)` for NULL, `None` when the stream is short.
    fn field(&mut self) -> Option<Option<&'a [u8]>> {
        match self.i32()? {
            -1 => Some(None),
            n => self.take(usize::try_from(n).ok()?).map(Some),
        }
    }
}

/// A numeric's binary form: base-10000 digits, the first `weight` groups
/// before the point (binary COPY and pgoutput's binary mode send the same).
pub(crate) struct Numeric<'a> {
    pub(crate) weight: i16,
    pub(crate) sign: u16,
    /// Decimal digits shown after the point.
    pub(crate) dscale: u16,
    /// The digit groups, two bytes each.
    pub(crate) digits: &'a [u8],
}

impl<'a> Numeric<'a> {
    pub(crate) const NEGATIVE: u16 = 0x4000;

    /// `None` when `v` is cut short or its digits are not as many as it says.
    pub(crate) fn parse(v: &'a [u8]) -> Option<Self> {
        let ndigits = usize::try_from(i16::from_be_bytes(fixed(v.get(0..2)?)?)).ok()?;
        let weight = i16::from_be_bytes(fixed(v.get(2..4)?)?);
        let sign = u16::from_be_bytes(fixed(v.get(4..6)?)?);
        let dscale = u16::from_be_bytes(fixed(v.get(6..8)?)?);
        let digits = v.get(8..)?;
        (digits.len() == ndigits * 2).then_some(Self {
            weight,
            sign,
            dscale,
            digits,
        })
    }

    /// The value times 10^`scale`, exactly, within `precision` digits.
    fn unscaled(&self, precision: u8, scale: i8) -> Result<i128, String> {
        match self.sign {
            0 | Self::NEGATIVE => {}
            0xC000 => return Err("NaN in a decimal column".into()),
            _ => return Err("an infinite numeric in a decimal column".into()),
        }
        let too_big = || format!("a numeric wider than decimal({precision}, {scale})");
        let mut whole: i128 = 0;
        for pair in self.digits.chunks_exact(2) {
            let d = i16::from_be_bytes([pair[0], pair[1]]);
            whole = whole
                .checked_mul(10_000)
                .and_then(|w| w.checked_add(i128::from(d)))
                .ok_or_else(too_big)?;
        }
        let groups = i32::try_from(self.digits.len() / 2).map_err(|_| too_big())?;
        // The last digit group is worth 10000^(weight - groups + 1).
        let exponent = 4 * (i32::from(self.weight) - groups + 1) + i32::from(scale);
        let ten = |e: i32| u32::try_from(e).ok().and_then(|e| 10i128.checked_pow(e));
        let unscaled = if whole == 0 {
            0
        } else if exponent >= 0 {
            ten(exponent)
                .and_then(|p| whole.checked_mul(p))
                .ok_or_else(too_big)?
        } else {
            let p = ten(-exponent).ok_or_else(too_big)?;
            if whole % p != 0 {
                return Err(format!("a numeric with more than {scale} decimals"));
            }
            whole / p
        };
        let limit = ten(i32::from(precision)).ok_or_else(too_big)?;
        if unscaled >= limit {
            return Err(too_big());
        }
        Ok(if self.sign == Self::NEGATIVE {
            -unscaled
        } else {
            unscaled
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numeric_send's form of digit groups `digits` with `weight` and `sign`.
    fn numeric(weight: i16, sign: u16, digits: &[i16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend((digits.len() as i16).to_be_bytes());
        v.extend(weight.to_be_bytes());
        v.extend(sign.to_be_bytes());
        v.extend(0u16.to_be_bytes());
        for d in digits {
            v.extend(d.to_be_bytes());
        }
        v
    }

    fn unscaled(v: &[u8], p: u8, s: i8) -> Result<i128, String> {
        Numeric::parse(v).unwrap().unscaled(p, s)
    }

    #[test]
    fn numerics_become_exact_decimals() {
        // 1234.5 = [1234, 5000] weight 0.
        assert_eq!(unscaled(&numeric(0, 0, &[1234, 5000]), 10, 2), Ok(123_450));
        // -0.0001 = [1] weight -1.
        assert_eq!(unscaled(&numeric(-1, 0x4000, &[1]), 10, 4), Ok(-1));
        // 10000 = [1] weight 1.
        assert_eq!(unscaled(&numeric(1, 0, &[1]), 10, 2), Ok(1_000_000));
        assert_eq!(unscaled(&numeric(0, 0, &[]), 10, 2), Ok(0));
        // 12345678901234567890.123456789 in numeric(38, 9).
        let big = numeric(4, 0, &[1234, 5678, 9012, 3456, 7890, 1234, 5678, 9000]);
        assert_eq!(
            unscaled(&big, 38, 9),
            Ok(12_345_678_901_234_567_890_123_456_789)
        );
        assert!(unscaled(&numeric(0, 0xC000, &[]), 10, 2).is_err());
        assert!(unscaled(&numeric(0, 0xD000, &[]), 10, 2).is_err());
        // 1.005 has no exact form at scale 2; 100000 is wider than numeric(5, 0).
        assert!(unscaled(&numeric(0, 0, &[1, 50]), 10, 2).is_err());
        assert!(unscaled(&numeric(1, 0, &[10]), 5, 0).is_err());
    }

    #[test]
    fn truncated_streams_are_refused() {
        let schema = TableSchema {
            table: "public.t".into(),
            columns: vec![crate::PgColumn {
                name: "id".into(),
                type_oid: oid::INT8,
                typmod: -1,
                type_name: "bigint".into(),
                nullable: false,
            }],
            primary_key: vec!["id".into()],
        };
        let mut stream = SIGNATURE.to_vec();
        stream.extend(0i32.to_be_bytes());
        stream.extend(0i32.to_be_bytes());
        // A bigint key prints as its decoded value: no text column.
        stream.extend(1i16.to_be_bytes());
        stream.extend(8i32.to_be_bytes());
        stream.extend(7i64.to_be_bytes());
        let whole = [stream.clone(), (-1i16).to_be_bytes().to_vec()].concat();
        let decoded = CopyDecoder::new(&schema).unwrap().decode(&whole).unwrap();
        assert_eq!(decoded.rows.num_rows(), 1);
        assert_eq!(decoded.keys[0].text(0), "7");
        // Fed in parts cut anywhere, as the stream arrives.
        for cut in 1..whole.len() {
            let mut decoder = CopyDecoder::new(&schema).unwrap();
            decoder.push(&whole[..cut]).unwrap();
            decoder.push(&whole[cut..]).unwrap();
            let decoded = decoder.finish().unwrap();
            assert_eq!(decoded.keys[0].text(0), "7", "cut at {cut}");
        }
        for cut in [5, SIGNATURE.len() + 6, stream.len() - 1, stream.len()] {
            let err = CopyDecoder::new(&schema)
                .unwrap()
                .decode(&stream[..cut])
                .unwrap_err();
            assert!(matches!(err, CopyError::Malformed { .. }), "{cut}: {err}");
        }
    }
}

//! Avro records framed for a schema registry: the Confluent wire format
//! (magic byte 0, a 4-byte big-endian schema id, the datum) against a
//! Confluent-compatible registry, and the AWS Glue Schema Registry format
//! (header version 3, a compression byte, the 16-byte schema version UUID,
//! the datum) against Glue.
//!
//! A datum is decoded by `apache-avro` with its writer's schema and written
//! out as the JSON text the shredder takes, in the forms it reads exactly
//! (decimals as their digits, dates and timestamps as ISO text, bytes as
//! base64), so Avro records take the same shredding, evolution and
//! exactly-once path as JSON ones. The schema, mapped to Iceberg types, goes
//! with the batch so a table created or evolved from Avro records gets the
//! declared types (a `decimal(10,2)`, a `date`), not ones guessed from values.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::sync::{Arc, Mutex};

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::{Name, RecordSchema};
use apache_avro::types::Value as AvroValue;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use iceberg::spec::{ListType, MapType, NestedField, PrimitiveType, StructType, Type};

use super::OpenError;
use crate::change::Path;
use crate::config::SourceConfig;
use crate::shred::{format_date, format_utc_micros};

/// Why an Avro record cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum AvroError {
    /// Something about this record (an unknown schema id, a datum that does
    /// not match its schema): dead-letter it with the reason.
    #[error("{0}")]
    Record(OpenError),
    /// The registry did not answer (or refused floe's credentials): the
    /// batch fails and the source delivers it again.
    #[error("{0}")]
    Transient(String),
}

fn bad(field: &str, reason: impl Into<String>) -> AvroError {
    AvroError::Record(OpenError::new(field, reason))
}

/// Why a writer's schema cannot be used (it does not parse, is not a
/// record, or has a shape no Iceberg type holds).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{label}: {reason}")]
pub struct SchemaError {
    /// The schema: `schema id 7`, `Glue schema version <uuid>`.
    pub label: String,
    /// What is wrong.
    pub reason: String,
}

impl From<SchemaError> for AvroError {
    fn from(e: SchemaError) -> Self {
        bad("", e.to_string())
    }
}

/// How a record names its writer's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// Confluent: the registry's schema id.
    Confluent(u32),
    /// Glue Schema Registry: the schema version id, and whether the datum is zlib-compressed.
    Glue(uuid::Uuid, bool),
}

/// Confluent's magic byte.
const CONFLUENT_MAGIC: u8 = 0;
/// Glue's header version byte, then its compression bytes.
const GLUE_VERSION: u8 = 3;
const GLUE_UNCOMPRESSED: u8 = 0;
const GLUE_ZLIB: u8 = 5;

/// The framing `record` starts with and the datum after it; `None` for
/// anything else (a JSON record starts with `{`, `[`, `"` or whitespace,
/// never with byte 0 or 3).
pub fn framing(record: &[u8]) -> Option<(Framing, &[u8])> {
    match record {
        [CONFLUENT_MAGIC, a, b, c, d, datum @ ..] => Some((
            Framing::Confluent(u32::from_be_bytes([*a, *b, *c, *d])),
            datum,
        )),
        [
            GLUE_VERSION,
            compression @ (GLUE_UNCOMPRESSED | GLUE_ZLIB),
            rest @ ..,
        ] if rest.len() >= 16 => {
            let (id, datum) = rest.split_at(16);
            let id = uuid::Uuid::from_slice(id).ok()?;
            Some((Framing::Glue(id, *compression == GLUE_ZLIB), datum))
        }
        _ => None,
    }
}

/// A writer's schema, parsed, with its Iceberg struct.
#[derive(Debug)]
pub struct Decoder {
    /// Names the schema in errors: `schema id 7` or `schema version <uuid>`.
    pub label: String,
    avro: AvroSchema,
    /// Named types the schema defines, for `Ref`s to them.
    names: HashMap<Name, AvroSchema>,
    /// The schema refers to a named type by name somewhere.
    refers: bool,
    /// The record's fields as Iceberg types (field ids from 1; the table
    /// renumbers them when they enter it).
    pub declared: Arc<StructType>,
}

impl Decoder {
    /// Parses a writer's schema (JSON text); `Err` says why it cannot be used.
    pub fn new(label: String, schema: &str) -> Result<Self, SchemaError> {
        let fail = |reason: String| SchemaError {
            label: label.clone(),
            reason,
        };
        let avro = AvroSchema::parse_str(schema)
            .map_err(|e| fail(format!("the Avro schema does not parse: {e}")))?;
        let mut names = HashMap::new();
        collect_names(&avro, &mut names);
        let AvroSchema::Record(record) = &avro else {
            return Err(fail(
                "not an Avro record schema; a table row needs named fields".into(),
            ));
        };
        let mut next_id = 1;
        let declared = Arc::new(record_type(record, &names, &mut next_id, 0).map_err(fail)?);
        let refers = refers(&avro);
        Ok(Self {
            label,
            avro,
            names,
            refers,
            declared,
        })
    }

    /// The datum as one JSON record (text).
    pub fn decode(&self, datum: &[u8]) -> Result<Bytes, OpenError> {
        let mut reader = datum;
        // `from_avro_datum` resolves the schema's names anew for every
        // datum, most of the time it takes; a schema without references to
        // named types needs none, so it decodes against an empty list.
        let value = match self.refers {
            true => apache_avro::from_avro_datum(&self.avro, &mut reader, None),
            false => {
                apache_avro::from_avro_datum_schemata(&self.avro, Vec::new(), &mut reader, None)
            }
        }
        .map_err(|e| {
            OpenError::new(
                "",
                format!("the Avro datum does not decode with {}: {e}", self.label),
            )
        })?;
        if !reader.is_empty() {
            return Err(OpenError::new(
                "",
                format!(
                    "{} bytes follow the Avro datum of {}; is the record framed for another schema?",
                    reader.len(),
                    self.label
                ),
            ));
        }
        let mut out = Vec::with_capacity(datum.len() * 2);
        write_json(&value, &self.avro, &self.names, Path::Root, &mut out)?;
        Ok(Bytes::from(out))
    }
}

fn collect_names(schema: &AvroSchema, names: &mut HashMap<Name, AvroSchema>) {
    match schema {
        AvroSchema::Record(r) => {
            names.insert(r.name.clone(), schema.clone());
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        AvroSchema::Enum(e) => {
            names.insert(e.name.clone(), schema.clone());
        }
        AvroSchema::Fixed(f) => {
            names.insert(f.name.clone(), schema.clone());
        }
        AvroSchema::Array(a) => collect_names(&a.items, names),
        AvroSchema::Map(m) => collect_names(&m.types, names),
        AvroSchema::Union(u) => u.variants().iter().for_each(|v| collect_names(v, names)),
        AvroSchema::Decimal(d) => collect_names(&d.inner, names),
        _ => {}
    }
}

/// True when `schema` names a type it defined elsewhere (`Ref`).
fn refers(schema: &AvroSchema) -> bool {
    match schema {
        AvroSchema::Ref { .. } => true,
        AvroSchema::Record(r) => r.fields.iter().any(|f| refers(&f.schema)),
        AvroSchema::Array(a) => refers(&a.items),
        AvroSchema::Map(m) => refers(&m.types),
        AvroSchema::Union(u) => u.variants().iter().any(refers),
        AvroSchema::Decimal(d) => refers(&d.inner),
        _ => false,
    }
}

/// Nesting deeper than this is a recursive schema (a linked list), which
/// no Iceberg type can hold.
const MAX_DEPTH: usize = 64;

fn resolve<'a>(
    schema: &'a AvroSchema,
    names: &'a HashMap<Name, AvroSchema>,
) -> Result<&'a AvroSchema, String> {
    match schema {
        AvroSchema::Ref { name } => names
            .get(name)
            .ok_or_else(|| format!("the schema refers to {name:?}, which it does not define")),
        s => Ok(s),
    }
}

fn record_type(
    record: &RecordSchema,
    names: &HashMap<Name, AvroSchema>,
    next_id: &mut i32,
    depth: usize,
) -> Result<StructType, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "record {} nests deeper than {MAX_DEPTH} levels (a recursive schema?)",
            record.name
        ));
    }
    let mut fields = Vec::with_capacity(record.fields.len());
    for f in &record.fields {
        let id = *next_id;
        *next_id += 1;
        // A field that is always null has no column.
        if let Some(t) = iceberg_type(&f.schema, names, next_id, depth + 1)? {
            let mut field = NestedField::optional(id, &f.name, t);
            field.doc = f.doc.clone();
            fields.push(Arc::new(field));
        }
    }
    Ok(StructType::new(fields))
}

/// The non-null branch of a `["null", T]` union (either order).
fn nullable(u: &apache_avro::schema::UnionSchema) -> Option<&AvroSchema> {
    match u.variants() {
        [AvroSchema::Null, t] | [t, AvroSchema::Null] => Some(t),
        _ => None,
    }
}

fn primitive(p: PrimitiveType) -> Option<Type> {
    Some(Type::Primitive(p))
}

/// The Iceberg type of an Avro schema; `None` for `null`, which holds nothing.
fn iceberg_type(
    schema: &AvroSchema,
    names: &HashMap<Name, AvroSchema>,
    next_id: &mut i32,
    depth: usize,
) -> Result<Option<Type>, String> {
    let schema = resolve(schema, names)?;
    Ok(match schema {
        AvroSchema::Null => None,
        AvroSchema::Boolean => primitive(PrimitiveType::Boolean),
        AvroSchema::Int => primitive(PrimitiveType::Int),
        AvroSchema::Long => primitive(PrimitiveType::Long),
        AvroSchema::Float => primitive(PrimitiveType::Float),
        AvroSchema::Double => primitive(PrimitiveType::Double),
        AvroSchema::Bytes => primitive(PrimitiveType::Binary),
        AvroSchema::String | AvroSchema::Enum(_) => primitive(PrimitiveType::String),
        AvroSchema::Fixed(f) => primitive(PrimitiveType::Fixed(f.size as u64)),
        // Iceberg decimals hold 38 digits; wider ones keep their digits as text.
        AvroSchema::Decimal(d) if d.precision <= 38 => primitive(PrimitiveType::Decimal {
            precision: d.precision as u32,
            scale: d.scale as u32,
        }),
        AvroSchema::Decimal(_) | AvroSchema::BigDecimal => primitive(PrimitiveType::String),
        AvroSchema::Uuid => primitive(PrimitiveType::Uuid),
        AvroSchema::Date => primitive(PrimitiveType::Date),
        AvroSchema::TimeMillis | AvroSchema::TimeMicros => primitive(PrimitiveType::Time),
        // An instant: Iceberg's timestamptz, microseconds, so millis are exact.
        AvroSchema::TimestampMillis | AvroSchema::TimestampMicros => {
            primitive(PrimitiveType::Timestamptz)
        }
        AvroSchema::LocalTimestampMillis | AvroSchema::LocalTimestampMicros => {
            primitive(PrimitiveType::Timestamp)
        }
        // Nanoseconds do not fit a v2 table's microsecond timestamps
        // exactly: they stay the number they are.
        AvroSchema::TimestampNanos | AvroSchema::LocalTimestampNanos => {
            primitive(PrimitiveType::Long)
        }
        AvroSchema::Duration => {
            let mut part = |name: &str| {
                let id = *next_id;
                *next_id += 1;
                Arc::new(NestedField::optional(
                    id,
                    name,
                    Type::Primitive(PrimitiveType::Long),
                ))
            };
            Some(Type::Struct(StructType::new(vec![
                part("months"),
                part("days"),
                part("millis"),
            ])))
        }
        AvroSchema::Record(r) => Some(Type::Struct(record_type(r, names, next_id, depth)?)),
        AvroSchema::Array(a) => {
            let id = *next_id;
            *next_id += 1;
            iceberg_type(&a.items, names, next_id, depth + 1)?.map(|t| {
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    id, t, false,
                ))))
            })
        }
        AvroSchema::Map(m) => {
            let (key, value) = (*next_id, *next_id + 1);
            *next_id += 2;
            iceberg_type(&m.types, names, next_id, depth + 1)?.map(|t| {
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(
                        key,
                        Type::Primitive(PrimitiveType::String),
                    )),
                    Arc::new(NestedField::map_value_element(value, t, false)),
                ))
            })
        }
        AvroSchema::Union(u) => match nullable(u) {
            Some(t) => iceberg_type(t, names, next_id, depth + 1)?,
            // A union of several types has no one Iceberg type: the value
            // is kept as its JSON text.
            None => primitive(PrimitiveType::String),
        },
        AvroSchema::Ref { .. } => None,
    })
}

/// Writes `value` (of `schema`) as JSON text the shredder reads exactly.
fn write_json(
    value: &AvroValue,
    schema: &AvroSchema,
    names: &HashMap<Name, AvroSchema>,
    path: Path<'_>,
    out: &mut Vec<u8>,
) -> Result<(), OpenError> {
    use std::io::Write as _;
    let schema = resolve(schema, names).map_err(|e| OpenError::new(&path.render(), e))?;
    let mismatch = || {
        OpenError::new(
            &path.render(),
            format!("the Avro value {value:?} does not match its schema"),
        )
    };
    // Writing into a Vec cannot fail: the results of `write!` are dropped.
    match value {
        AvroValue::Null => out.extend_from_slice(b"null"),
        AvroValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        AvroValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        AvroValue::Long(i) => {
            let _ = write!(out, "{i}");
        }
        // `{:?}` is the shortest text that reads back as the same float,
        // with an exponent where one is shorter.
        AvroValue::Float(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        AvroValue::Double(f) if f.is_finite() => {
            let _ = write!(out, "{f:?}");
        }
        AvroValue::Float(f) => string(&special(f64::from(*f)), out),
        AvroValue::Double(f) => string(&special(*f), out),
        AvroValue::String(s) | AvroValue::Enum(_, s) => string(s, out),
        AvroValue::Bytes(b) | AvroValue::Fixed(_, b) => string(&BASE64.encode(b), out),
        AvroValue::Uuid(u) => string(&u.as_hyphenated().to_string(), out),
        AvroValue::Date(days) => string(&format_date(i64::from(*days)), out),
        AvroValue::TimeMillis(ms) => string(&time_of_day(i64::from(*ms) * 1000), out),
        AvroValue::TimeMicros(us) => string(&time_of_day(*us), out),
        AvroValue::TimestampMillis(ms) => string(&timestamp(path, *ms, 1000)?, out),
        AvroValue::TimestampMicros(us) => string(&timestamp(path, *us, 1)?, out),
        AvroValue::LocalTimestampMillis(ms) => {
            let text = timestamp(path, *ms, 1000)?;
            string(text.trim_end_matches('Z'), out)
        }
        AvroValue::LocalTimestampMicros(us) => {
            let text = timestamp(path, *us, 1)?;
            string(text.trim_end_matches('Z'), out)
        }
        AvroValue::TimestampNanos(ns) | AvroValue::LocalTimestampNanos(ns) => {
            let _ = write!(out, "{ns}");
        }
        AvroValue::Duration(d) => {
            let (m, dd, ms) = (
                u32::from(d.months()),
                u32::from(d.days()),
                u32::from(d.millis()),
            );
            out.extend_from_slice(
                format!(r#"{{"months":{m},"days":{dd},"millis":{ms}}}"#).as_bytes(),
            );
        }
        AvroValue::Decimal(d) => {
            let AvroSchema::Decimal(ds) = schema else {
                return Err(mismatch());
            };
            let bytes: Vec<u8> = d.try_into().map_err(|e| {
                OpenError::new(&path.render(), format!("a decimal that does not read: {e}"))
            })?;
            let digits = decimal_text(&bytes, ds.scale).ok_or_else(|| {
                OpenError::new(
                    &path.render(),
                    format!("a decimal of {} bytes, wider than 38 digits", bytes.len()),
                )
            })?;
            if ds.precision <= 38 {
                out.extend_from_slice(digits.as_bytes());
            } else {
                string(&digits, out);
            }
        }
        AvroValue::BigDecimal(d) => string(&d.to_string(), out),
        AvroValue::Union(i, inner) => {
            let AvroSchema::Union(u) = schema else {
                return Err(mismatch());
            };
            let branch = u.variants().get(*i as usize).ok_or_else(mismatch)?;
            if nullable(u).is_some() {
                write_json(inner, branch, names, path, out)?;
            } else if matches!(**inner, AvroValue::Null) {
                out.extend_from_slice(b"null");
            } else {
                // No one Iceberg type: the branch's JSON, as text.
                let mut text = Vec::new();
                write_json(inner, branch, names, path, &mut text)?;
                string(&String::from_utf8_lossy(&text), out);
            }
        }
        AvroValue::Array(items) => {
            let AvroSchema::Array(a) = schema else {
                return Err(mismatch());
            };
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, &a.items, names, path.index(i), out)?;
            }
            out.push(b']');
        }
        AvroValue::Map(map) => {
            let AvroSchema::Map(m) = schema else {
                return Err(mismatch());
            };
            // Sorted, so the same map always writes the same text.
            let sorted: BTreeMap<&String, &AvroValue> = map.iter().collect();
            out.push(b'{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(k, out);
                out.push(b':');
                write_json(v, &m.types, names, path.key(k), out)?;
            }
            out.push(b'}');
        }
        AvroValue::Record(fields) => {
            let AvroSchema::Record(r) = schema else {
                return Err(mismatch());
            };
            out.push(b'{');
            for (i, ((name, v), f)) in fields.iter().zip(&r.fields).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(name, out);
                out.push(b':');
                write_json(v, &f.schema, names, path.key(name), out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn string(s: &str, out: &mut Vec<u8>) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The text the shredder reads as a non-finite float.
fn special(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f > 0.0 {
        "Infinity".into()
    } else {
        "-Infinity".into()
    }
}

fn timestamp(path: Path<'_>, v: i64, to_micros: i64) -> Result<String, OpenError> {
    let us = v.checked_mul(to_micros).ok_or_else(|| {
        OpenError::new(
            &path.render(),
            format!("timestamp {v} is outside the range of microsecond timestamps"),
        )
    })?;
    Ok(format_utc_micros(us))
}

/// `HH:MM:SS.ffffff` of microseconds after midnight.
fn time_of_day(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60,
        us.rem_euclid(1_000_000)
    )
}

/// The decimal text of a big-endian two's-complement unscaled value at
/// `scale`; `None` when it is wider than an i128 (38 digits need 16 bytes).
fn decimal_text(bytes: &[u8], scale: usize) -> Option<String> {
    if bytes.len() > 16 {
        return None;
    }
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = if negative { [0xffu8; 16] } else { [0u8; 16] };
    buf[16 - bytes.len()..].copy_from_slice(bytes);
    let unscaled = i128::from_be_bytes(buf);
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return Some(format!("{sign}{digits}"));
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    Some(format!("{sign}{int}.{frac}"))
}

/// Where a source's registry schemas come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SchemaKey {
    Confluent { registry: String, id: u32 },
    Glue(uuid::Uuid),
}

/// Schemas by id, fetched from their registry once per function instance
/// (a registry's ids are immutable: the schema an id names never changes).
#[derive(Default)]
pub struct Schemas {
    cache: Mutex<HashMap<SchemaKey, Arc<Decoder>>>,
    #[cfg(feature = "rest")]
    http: reqwest::Client,
    #[cfg(feature = "aws")]
    glue: Option<aws_sdk_glue::Client>,
}

/// A record decoded from Avro: its JSON text and its schema's Iceberg struct.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The record as JSON text.
    pub json: Bytes,
    /// Its writer's schema as Iceberg types.
    pub declared: Arc<StructType>,
}

impl Schemas {
    /// Schemas fetched from Glue's schema registry with `glue` (and from
    /// each source's Confluent-compatible `registry`).
    #[cfg(feature = "aws")]
    pub fn with_glue(glue: Option<aws_sdk_glue::Client>) -> Self {
        Self {
            glue,
            ..Self::default()
        }
    }

    /// A schema given directly (tests, benchmarks): `record`s framed for
    /// Confluent schema id `id` decode with it without a registry.
    pub fn preload(&self, registry: &str, id: u32, schema: &str) -> Result<(), SchemaError> {
        let decoder = Decoder::new(format!("schema id {id}"), schema)?;
        self.lock().insert(
            SchemaKey::Confluent {
                registry: registry.to_string(),
                id,
            },
            Arc::new(decoder),
        );
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SchemaKey, Arc<Decoder>>> {
        // A panic while holding the lock leaves a consistent map.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The record decoded when it is registry-framed Avro; `None` when it is
    /// not framed (JSON passes through).
    pub async fn decode(
        &self,
        record: &[u8],
        source: &SourceConfig,
    ) -> Result<Option<Decoded>, AvroError> {
        let Some((framing, datum)) = framing(record) else {
            return Ok(None);
        };
        let key = match framing {
            Framing::Confluent(id) => {
                let Some(registry) = &source.registry else {
                    return Err(bad(
                        "",
                        format!(
                            "the record is Confluent-framed Avro (schema id {id}) but its source has no `registry`; set [sources.\"<name>\"] registry"
                        ),
                    ));
                };
                SchemaKey::Confluent {
                    registry: registry.trim_end_matches('/').to_string(),
                    id,
                }
            }
            Framing::Glue(id, _) => SchemaKey::Glue(id),
        };
        let cached = self.lock().get(&key).cloned();
        let decoder = match cached {
            Some(d) => d,
            None => {
                let d = Arc::new(self.fetch(&key, source).await?);
                self.lock().insert(key, d.clone());
                d
            }
        };
        let inflated;
        let datum = match framing {
            Framing::Glue(_, true) => {
                inflated = inflate(datum).map_err(|e| bad("", e))?;
                &inflated[..]
            }
            _ => datum,
        };
        let json = decoder.decode(datum).map_err(AvroError::Record)?;
        Ok(Some(Decoded {
            json,
            declared: decoder.declared.clone(),
        }))
    }

    async fn fetch(&self, key: &SchemaKey, source: &SourceConfig) -> Result<Decoder, AvroError> {
        match key {
            SchemaKey::Confluent { registry, id } => self.confluent(registry, *id, source).await,
            SchemaKey::Glue(id) => self.glue(*id).await,
        }
    }

    #[cfg(feature = "rest")]
    async fn confluent(
        &self,
        registry: &str,
        id: u32,
        source: &SourceConfig,
    ) -> Result<Decoder, AvroError> {
        let url = format!("{registry}/schemas/ids/{id}");
        let mut get = self
            .http
            .get(&url)
            .header("Accept", "application/vnd.schemaregistry.v1+json");
        if let (Some(user), Some(password)) = (&source.registry_username, &source.registry_password)
        {
            get = get.basic_auth(user, Some(password.expose()));
        }
        let unreachable = |e: String| AvroError::Transient(format!("schema registry {url}: {e}"));
        let answer = get.send().await.map_err(|e| unreachable(e.to_string()))?;
        let status = answer.status();
        let body = answer
            .text()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(bad(
                "",
                format!(
                    "schema id {id} is not in the registry {registry} ({body}); register it, then replay this dead letter"
                ),
            ));
        }
        if !status.is_success() {
            return Err(unreachable(format!("{status}: {body}")));
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            schema: String,
            #[serde(rename = "schemaType", default)]
            schema_type: Option<String>,
        }
        let answer: Answer = serde_json::from_str(&body)
            .map_err(|e| unreachable(format!("not a registry answer ({e}): {body}")))?;
        match answer.schema_type.as_deref() {
            None | Some("AVRO") => {}
            Some(other) => {
                return Err(bad(
                    "",
                    format!(
                        "schema id {id} is a {other} schema; floe decodes Avro from the registry (JSON records need no registry)"
                    ),
                ));
            }
        }
        Ok(Decoder::new(format!("schema id {id}"), &answer.schema)?)
    }

    #[cfg(not(feature = "rest"))]
    async fn confluent(
        &self,
        registry: &str,
        id: u32,
        _source: &SourceConfig,
    ) -> Result<Decoder, AvroError> {
        Err(AvroError::Transient(format!(
            "schema id {id} of registry {registry}: floe-core was built without the `rest` feature (its HTTP client)"
        )))
    }

    #[cfg(feature = "aws")]
    async fn glue(&self, id: uuid::Uuid) -> Result<Decoder, AvroError> {
        use aws_sdk_glue::error::{DisplayErrorContext, ProvideErrorMetadata as _};
        let label = format!("Glue schema version {id}");
        let Some(glue) = &self.glue else {
            return Err(AvroError::Transient(format!(
                "{label}: the record is framed for the Glue Schema Registry, but this deployment has no AWS clients"
            )));
        };
        let out = glue
            .get_schema_version()
            .schema_version_id(id.to_string())
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) if e.code() == Some("EntityNotFoundException") => {
                return Err(bad(
                    "",
                    format!(
                        "{label} is not in the Glue Schema Registry: {}",
                        DisplayErrorContext(&e)
                    ),
                ));
            }
            Err(e) => {
                return Err(AvroError::Transient(format!(
                    "{label}: GetSchemaVersion: {}",
                    DisplayErrorContext(&e)
                )));
            }
        };
        match out.data_format() {
            Some(aws_sdk_glue::types::DataFormat::Avro) | None => {}
            Some(other) => {
                return Err(bad(
                    "",
                    format!(
                        "{label} is a {} schema; floe decodes Avro from the registry",
                        other.as_str()
                    ),
                ));
            }
        }
        let definition = out.schema_definition().ok_or_else(|| {
            AvroError::Transient(format!("{label}: Glue returned no schema definition"))
        })?;
        Ok(Decoder::new(label, definition)?)
    }

    #[cfg(not(feature = "aws"))]
    async fn glue(&self, id: uuid::Uuid) -> Result<Decoder, AvroError> {
        Err(AvroError::Transient(format!(
            "Glue schema version {id}: floe-core was built without the `aws` feature"
        )))
    }
}

/// A Glue datum compressed with zlib, inflated within the record bound.
fn inflate(datum: &[u8]) -> Result<Vec<u8>, String> {
    let limit = super::compress::MAX_RECORD_BYTES;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(datum)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("the Glue record says zlib but does not inflate: {e}"))?;
    if out.len() as u64 > limit {
        return Err(format!(
            "the Glue record inflates to more than {limit} bytes"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Record;

    const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
        {"name":"id","type":"long"},
        {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
        {"name":"day","type":{"type":"int","logicalType":"date"}},
        {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
        {"name":"note","type":["null","string"],"default":null},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
        {"name":"ship","type":{"type":"record","name":"Ship","fields":[{"name":"city","type":"string"}]}},
        {"name":"bill","type":"Ship"}
    ]}"#;

    fn datum() -> Vec<u8> {
        let schema = AvroSchema::parse_str(ORDER).unwrap();
        let mut r = Record::new(&schema).unwrap();
        r.put("id", 7i64);
        r.put(
            "total",
            AvroValue::Decimal(apache_avro::Decimal::from(vec![0xfbu8, 0x2e])),
        );
        r.put("day", AvroValue::Date(20_422));
        r.put("at", AvroValue::TimestampMillis(1_764_511_142_123));
        r.put("at_us", AvroValue::TimestampMicros(1_764_511_142_123_456));
        r.put(
            "ref",
            AvroValue::Uuid(uuid::Uuid::parse_str("0e8f6c1a-0003-4c0f-9d3a-000000000003").unwrap()),
        );
        r.put(
            "note",
            AvroValue::Union(1, Box::new(AvroValue::String("hi \"x\"".into()))),
        );
        r.put(
            "tags",
            AvroValue::Array(vec![
                AvroValue::String("a".into()),
                AvroValue::String("b".into()),
            ]),
        );
        r.put("status", AvroValue::Enum(1, "PAID".into()));
        let ship = AvroValue::Record(vec![("city".into(), AvroValue::String("Oslo".into()))]);
        r.put("ship", ship.clone());
        r.put("bill", ship);
        apache_avro::to_avro_datum(&schema, r).unwrap()
    }

    #[test]
    fn logical_types_come_out_exact() {
        let d = Decoder::new("schema id 1".into(), ORDER).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&d.decode(&datum()).unwrap()).unwrap();
        // 0xfb2e is -1234 unscaled: -12.34 at scale 2.
        assert_eq!(
            json.to_string(),
            r#"{"id":7,"total":-12.34,"day":"2025-11-30","at":"2025-11-30T13:59:02.123000Z","at_us":"2025-11-30T13:59:02.123456Z","ref":"0e8f6c1a-0003-4c0f-9d3a-000000000003","note":"hi \"x\"","tags":["a","b"],"status":"PAID","ship":{"city":"Oslo"},"bill":{"city":"Oslo"}}"#
        );
        let types: Vec<String> = d
            .declared
            .fields()
            .iter()
            .map(|f| format!("{}:{}", f.name, f.field_type))
            .collect();
        assert_eq!(
            types[..6],
            [
                "id:long",
                "total:decimal(10, 2)",
                "day:date",
                "at:timestamptz",
                "at_us:timestamptz",
                "ref:uuid"
            ]
        );
        assert_eq!(types[6], "note:string");
    }

    #[test]
    fn framings_are_told_apart_from_json() {
        let mut confluent = vec![0, 0, 0, 0, 42];
        confluent.extend(datum());
        assert!(matches!(
            framing(&confluent),
            Some((Framing::Confluent(42), _))
        ));
        let id = uuid::Uuid::new_v4();
        let mut glue = vec![3, 0];
        glue.extend_from_slice(id.as_bytes());
        glue.extend(datum());
        assert!(matches!(framing(&glue), Some((Framing::Glue(g, false), _)) if g == id));
        assert!(framing(br#"{"id":1}"#).is_none());
        assert!(framing(&[3, 9, 1, 2]).is_none());
    }

    #[test]
    fn decimals_keep_every_digit() {
        assert_eq!(decimal_text(&[0x04, 0xd2], 2).unwrap(), "12.34");
        assert_eq!(decimal_text(&[0x05], 3).unwrap(), "0.005");
        assert_eq!(decimal_text(&[0xff], 1).unwrap(), "-0.1");
        assert_eq!(decimal_text(&[0x01, 0x00], 0).unwrap(), "256");
        let max = 10i128.pow(38) - 1;
        assert_eq!(
            decimal_text(&max.to_be_bytes(), 10).unwrap(),
            "9999999999999999999999999999.9999999999"
        );
        assert!(decimal_text(&[0; 17], 0).is_none());
    }

    #[tokio::test]
    async fn unknown_confluent_ids_need_a_registry() {
        let schemas = Schemas::default();
        let mut record = vec![0, 0, 0, 0, 9];
        record.extend(datum());
        let e = schemas
            .decode(&record, &SourceConfig::default())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("schema id 9"), "{e}");
        schemas.preload("http://r", 9, ORDER).unwrap();
        let source = SourceConfig {
            registry: Some("http://r/".into()),
            ..SourceConfig::default()
        };
        let d = schemas.decode(&record, &source).await.unwrap().unwrap();
        assert!(d.json.starts_with(br#"{"id":7,"#));
        // Trailing bytes mean the wrong schema.
        record.push(0);
        let e = schemas.decode(&record, &source).await.unwrap_err();
        assert!(e.to_string().contains("follow the Avro datum"), "{e}");
    }
}

//! Avro records framed for a schema registry: the Confluent wire format
//! (magic byte 0, a 4-byte big-endian schema id, the datum) against a
//! Confluent-compatible registry, and the AWS Glue Schema Registry format
//! (header version 3, a compression byte, the 16-byte schema version UUID,
//! the datum) against Glue.
//!
//! A writer's schema is fetched once per id and compiled into a [`plan`]
//! of its binary encoding. An opened record is checked against it
//! ([`check`]) and stays binary: the shredder reads it straight into its
//! columns (`crate::shred`), giving exactly what the JSON path gives.
//! That path, `apache-avro`'s decoding written out as the JSON text the
//! shredder takes ([`json`]), remains for a schema without a plan, for
//! what the writer reads as JSON (routing by a field, keyed tables, dead
//! letters), and for a record the direct path does not take as a whole.
//! The schema, mapped to Iceberg types ([`types`]), goes with the batch so
//! a table created or evolved from Avro records gets the declared types
//! (a `decimal(10,2)`, a `date`), not ones guessed from values.

pub(crate) mod check;
mod json;
pub(crate) mod plan;
pub(crate) mod read;
pub(crate) mod render;
#[cfg(test)]
mod tests;
mod types;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex};

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::Name;
use bytes::Bytes;
use iceberg::spec::StructType;

use super::OpenError;
use crate::change::Path;
use crate::config::SourceConfig;
use plan::Plan;
use read::DecodeError;
use types::{collect_names, record_type, refers};

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

/// A writer's schema, parsed, with its Iceberg struct and its plan.
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
    /// How its datums are read straight into columns; `None` (a
    /// big-decimal somewhere) sends them the JSON path.
    plan: Option<Plan>,
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
        let plan = Plan::compile(&avro, &names).ok();
        Ok(Self {
            label,
            avro,
            names,
            refers,
            declared,
            plan,
        })
    }

    /// The plan the shredder reads datums with; `None` when records of this
    /// schema take the JSON path.
    pub(crate) fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// Whether the datum reads as this schema says, to its last byte; `Err`
    /// is the dead letter's field and reason.
    pub fn check(&self, datum: &[u8]) -> Result<(), OpenError> {
        let Some(plan) = &self.plan else {
            return self.json(datum).map(|_| ());
        };
        match check::check(plan, datum) {
            Ok(0) => Ok(()),
            Ok(left) => Err(self.trailing(left)),
            Err(fault) => Err(self.undecodable(&fault)),
        }
    }

    #[cold]
    fn trailing(&self, left: usize) -> OpenError {
        OpenError::new(
            "",
            format!(
                "{left} bytes follow the Avro datum of {}; is the record framed for another schema?",
                self.label
            ),
        )
    }

    #[cold]
    fn undecodable(&self, fault: &check::Fault) -> OpenError {
        let reason = match &fault.error {
            // A value its type forbids, said as the JSON path says it.
            e @ (DecodeError::Timestamp(_)
            | DecodeError::WideDecimal(_)
            | DecodeError::EmptyDecimal) => e.to_string(),
            e => format!("the Avro datum does not decode with {}: {e}", self.label),
        };
        OpenError::new(&fault.field(), reason)
    }

    /// The datum as one JSON record (text), as the JSON path writes it.
    pub fn json(&self, datum: &[u8]) -> Result<Bytes, OpenError> {
        // `apache-avro` takes a datum that ends at a boolean, a string or a
        // union for one whose missing values are null: the plan's check
        // refuses it first.
        if self.plan.is_some() {
            self.check(datum)?;
        }
        self.apache_json(datum)
    }

    /// The JSON path without the plan's check first, as it was before the
    /// plan (for tests that hold the two apart).
    #[cfg(test)]
    pub(crate) fn json_unchecked(&self, datum: &[u8]) -> Result<Bytes, OpenError> {
        self.apache_json(datum)
    }

    fn apache_json(&self, datum: &[u8]) -> Result<Bytes, OpenError> {
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
            return Err(self.trailing(reader.len()));
        }
        let mut out = Vec::with_capacity(datum.len() * 2);
        json::write_json(&value, &self.avro, &self.names, Path::Root, &mut out)?;
        Ok(Bytes::from(out))
    }
}

/// A registry Avro record opened.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The record: still framed (Glue's zlib inflated) when `binary`, else
    /// its JSON text.
    pub record: Bytes,
    /// Its writer's schema.
    pub decoder: Arc<Decoder>,
    /// The record stays binary, checked, for the shredder to read.
    pub binary: bool,
}

/// The writer's schemas of a batch's registry Avro records, which travel
/// with it: the records that stay binary are read with them, and the
/// Iceberg types they declare shape a table created or evolved for them.
#[derive(Debug, Default)]
pub struct Registered {
    /// The decoders of binary records, by their framing (a batch has few).
    decoders: Vec<(Framing, Arc<Decoder>)>,
    /// Every version's declared types, merged.
    declared: Option<Arc<StructType>>,
}

impl Registered {
    /// Notes a record opened from registry Avro.
    pub fn add(&mut self, decoded: &Decoded) {
        let declared = &decoded.decoder.declared;
        self.declared = Some(match self.declared.take() {
            Some(seen) => merge_declared(&seen, declared),
            None => declared.clone(),
        });
        if decoded.binary
            && let Some((f, _)) = framing(&decoded.record)
            && !self.decoders.iter().any(|(g, _)| *g == f)
        {
            self.decoders.push((f, decoded.decoder.clone()));
        }
    }

    /// The Iceberg types the batch's schemas declare, merged.
    pub fn declared(&self) -> Option<&Arc<StructType>> {
        self.declared.as_ref()
    }

    /// The decoder and datum of a record that stayed binary; `None` for
    /// any other record (JSON, a dead-letter marker).
    #[inline]
    pub fn binary<'r>(&self, record: &'r [u8]) -> Option<(&Arc<Decoder>, &'r [u8])> {
        let (f, datum) = framing(record)?;
        self.decoders
            .iter()
            .find(|(g, _)| *g == f)
            .map(|(_, d)| (d, datum))
    }

    /// `record` as JSON text: itself, unless it stayed binary.
    pub fn json<'r>(&self, record: &'r [u8]) -> Result<Cow<'r, [u8]>, OpenError> {
        match self.binary(record) {
            Some((decoder, datum)) => Ok(Cow::Owned(decoder.json(datum)?.to_vec())),
            None => Ok(Cow::Borrowed(record)),
        }
    }
}

/// The fields of both structs: `a`'s in its order, then those only `b` has
/// (a batch may hold records of two versions of one schema; a field a later
/// version added takes its declared type, one it dropped keeps its own).
fn merge_declared(a: &Arc<StructType>, b: &Arc<StructType>) -> Arc<StructType> {
    if Arc::ptr_eq(a, b) {
        return a.clone();
    }
    let mut fields = a.fields().to_vec();
    for f in b.fields() {
        if a.field_by_name(&f.name).is_none() {
            fields.push(f.clone());
        }
    }
    Arc::new(StructType::new(fields))
}

/// `record` as JSON text, given the batch's registry schemas.
pub fn json_of<'r>(
    avro: Option<&Registered>,
    record: &'r [u8],
) -> Result<Cow<'r, [u8]>, OpenError> {
    match avro {
        Some(a) => a.json(record),
        None => Ok(Cow::Borrowed(record)),
    }
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

    /// The record opened when it is registry-framed Avro: checked and kept
    /// binary when its schema has a plan, else decoded to JSON; `None` when
    /// it is not framed (JSON passes through).
    pub async fn decode(
        &self,
        record: &Bytes,
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
        if decoder.plan().is_none() {
            let json = decoder.json(datum).map_err(AvroError::Record)?;
            return Ok(Some(Decoded {
                record: json,
                decoder,
                binary: false,
            }));
        }
        decoder.check(datum).map_err(AvroError::Record)?;
        let record = match framing {
            // Inflated once: the record goes on framed as uncompressed.
            Framing::Glue(id, true) => {
                let mut framed = Vec::with_capacity(18 + datum.len());
                framed.extend_from_slice(&[GLUE_VERSION, GLUE_UNCOMPRESSED]);
                framed.extend_from_slice(id.as_bytes());
                framed.extend_from_slice(datum);
                Bytes::from(framed)
            }
            _ => record.clone(),
        };
        Ok(Some(Decoded {
            record,
            decoder,
            binary: true,
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

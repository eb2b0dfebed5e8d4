//! Avro's binary encoding, as schema registries frame it: the Confluent
//! wire format (magic byte 0, a 4-byte big-endian schema id, the datum) and
//! the AWS Glue Schema Registry format (header version 3, a compression
//! byte, the 16-byte schema version UUID, the datum). Fetching the schemas
//! is the registry envelope's (`crate::envelope::avro`).
//!
//! A writer's schema is compiled once into a [`plan`] of its binary
//! encoding. A datum is checked against it ([`check`]) and stays binary:
//! the shredder reads it straight into its columns (`crate::shred`),
//! giving exactly what the JSON path gives. That path, `apache-avro`'s
//! decoding written out as the JSON text the shredder takes ([`json`]),
//! remains for a schema without a plan, for what the writer reads as JSON
//! (routing by a field, keyed tables, dead letters), and for a record the
//! direct path does not take as a whole. The schema, mapped to Iceberg
//! types ([`types`]), goes with the batch ([`Registered`]) so a table
//! created or evolved from Avro records gets the declared types (a
//! `decimal(10,2)`, a `date`), not ones guessed from values.

pub(crate) mod check;
mod json;
pub(crate) mod plan;
pub(crate) mod read;
pub(crate) mod render;
#[cfg(test)]
pub(crate) mod tests;
mod types;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::Name;
use bytes::Bytes;
use iceberg::spec::StructType;

use crate::error::RecordError;
use crate::field_path::Path;
use plan::Plan;
use read::DecodeError;
use types::{collect_names, record_type, refers};

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

/// `datum` framed for Glue schema version `id`, uncompressed.
pub fn glue_uncompressed(id: uuid::Uuid, datum: &[u8]) -> Bytes {
    let mut framed = Vec::with_capacity(18 + datum.len());
    framed.extend_from_slice(&[GLUE_VERSION, GLUE_UNCOMPRESSED]);
    framed.extend_from_slice(id.as_bytes());
    framed.extend_from_slice(datum);
    Bytes::from(framed)
}

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
    pub fn check(&self, datum: &[u8]) -> Result<(), RecordError> {
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
    fn trailing(&self, left: usize) -> RecordError {
        RecordError::envelope(
            "",
            format!(
                "{left} bytes follow the Avro datum of {}; is the record framed for another schema?",
                self.label
            ),
        )
    }

    #[cold]
    fn undecodable(&self, fault: &check::Fault) -> RecordError {
        let reason = match &fault.error {
            // A value its type forbids, said as the JSON path says it.
            e @ (DecodeError::Timestamp(_)
            | DecodeError::WideDecimal(_)
            | DecodeError::EmptyDecimal) => e.to_string(),
            e => format!("the Avro datum does not decode with {}: {e}", self.label),
        };
        RecordError::envelope(fault.field(), reason)
    }

    /// The datum as one JSON record (text), as the JSON path writes it.
    pub fn json(&self, datum: &[u8]) -> Result<Bytes, RecordError> {
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
    pub(crate) fn json_unchecked(&self, datum: &[u8]) -> Result<Bytes, RecordError> {
        self.apache_json(datum)
    }

    fn apache_json(&self, datum: &[u8]) -> Result<Bytes, RecordError> {
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
            RecordError::envelope(
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
    pub fn json<'r>(&self, record: &'r [u8]) -> Result<Cow<'r, [u8]>, RecordError> {
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
) -> Result<Cow<'r, [u8]>, RecordError> {
    match avro {
        Some(a) => a.json(record),
        None => Ok(Cow::Borrowed(record)),
    }
}

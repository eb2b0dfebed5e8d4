//! The schema-registry envelope: a framed Avro record's writer's schema
//! fetched once per id from a Confluent-compatible registry or AWS Glue,
//! and the record opened with it (checked and kept binary, or written out
//! as JSON where no plan reads it). The encoding itself is `crate::avro`'s.

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

pub use crate::avro::{
    Decoded, Decoder, Framing, Registered, SchemaError, framing, glue_uncompressed, json_of,
};
use crate::config::SourceConfig;
use crate::error::{Failure, RecordError};

/// Why an Avro record cannot be decoded.
#[derive(Debug, thiserror::Error)]
pub enum AvroError {
    /// Something about this record (an unknown schema id, a datum that does
    /// not match its schema): dead-letter it with the reason.
    #[error("{0}")]
    Record(RecordError),
    /// The registry did not answer (or refused floe's credentials): the
    /// batch fails and the source delivers it again.
    #[error(transparent)]
    Registry(#[from] Failure),
}

fn bad(field: &str, reason: impl Into<String>) -> AvroError {
    AvroError::Record(RecordError::envelope(field, reason))
}

impl From<SchemaError> for AvroError {
    fn from(e: SchemaError) -> Self {
        bad("", e.to_string())
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
            Framing::Glue(id, true) => glue_uncompressed(id, datum),
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
        let unreachable = |e: reqwest::Error| Failure::new(format!("schema registry {url}"), e);
        let answer = get.send().await.map_err(unreachable)?;
        let status = answer.status();
        let body = answer.text().await.map_err(unreachable)?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(bad(
                "",
                format!(
                    "schema id {id} is not in the registry {registry} ({body}); register it, then replay this dead letter"
                ),
            ));
        }
        if !status.is_success() {
            return Err(
                Failure::message(format!("schema registry {url}: {status}: {body}")).into(),
            );
        }
        #[derive(serde::Deserialize)]
        struct Answer {
            schema: String,
            #[serde(rename = "schemaType", default)]
            schema_type: Option<String>,
        }
        let answer: Answer = serde_json::from_str(&body).map_err(|e| {
            Failure::new(
                format!("schema registry {url}: not a registry answer: {body}"),
                e,
            )
        })?;
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
        Err(Failure::message(format!(
            "schema id {id} of registry {registry}: floe-core was built without the `rest` feature (its HTTP client)"
        ))
        .into())
    }

    #[cfg(feature = "aws")]
    async fn glue(&self, id: uuid::Uuid) -> Result<Decoder, AvroError> {
        use aws_sdk_glue::error::{DisplayErrorContext, ProvideErrorMetadata as _};
        let label = format!("Glue schema version {id}");
        let Some(glue) = &self.glue else {
            return Err(Failure::message(format!(
                "{label}: the record is framed for the Glue Schema Registry, but this deployment has no AWS clients"
            ))
            .into());
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
                let e = crate::aws::AwsError::new(e);
                return Err(Failure::new(format!("{label}: GetSchemaVersion"), e).into());
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
            Failure::message(format!("{label}: Glue returned no schema definition"))
        })?;
        Ok(Decoder::new(label, definition)?)
    }

    #[cfg(not(feature = "aws"))]
    async fn glue(&self, id: uuid::Uuid) -> Result<Decoder, AvroError> {
        Err(Failure::message(format!(
            "Glue schema version {id}: floe-core was built without the `aws` feature"
        ))
        .into())
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
    use bytes::Bytes;

    use super::*;
    use crate::avro::tests::{ORDER, datum};

    #[tokio::test]
    async fn unknown_confluent_ids_need_a_registry() {
        let schemas = Schemas::default();
        let mut record = vec![0, 0, 0, 0, 9];
        record.extend(datum());
        let e = schemas
            .decode(&Bytes::from(record.clone()), &SourceConfig::default())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("schema id 9"), "{e}");
        schemas.preload("http://r", 9, ORDER).unwrap();
        let source = SourceConfig {
            registry: Some("http://r/".into()),
            ..SourceConfig::default()
        };
        let d = schemas
            .decode(&Bytes::from(record.clone()), &source)
            .await
            .unwrap()
            .unwrap();
        // Checked and kept binary, for the shredder to read.
        assert!(d.binary);
        assert_eq!(&d.record[..], &record[..]);
        let json = d.decoder.json(&record[5..]).unwrap();
        assert!(json.starts_with(br#"{"id":7,"#));
        // Trailing bytes mean the wrong schema.
        record.push(0);
        let e = schemas
            .decode(&Bytes::from(record.clone()), &source)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("follow the Avro datum"), "{e}");
    }
}

//! Placeholder until the shredder lands.
use std::sync::Arc;
/// Options.
#[derive(Debug, Clone, Default)]
pub struct ShredOptions {
    /// Case.
    pub case_insensitive: bool,
}
/// Shredder.
pub struct Shredder {
    schema: arrow_schema::SchemaRef,
    n: usize,
}
/// Record error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct RecordError {
    /// Field.
    pub field: String,
    /// Reason.
    pub reason: String,
}
/// Shred error.
#[derive(Debug, thiserror::Error)]
#[error("shred")]
pub struct ShredError;
impl Shredder {
    /// New.
    pub fn new(schema: &iceberg::spec::Schema, _o: ShredOptions) -> Result<Self, ShredError> {
        Ok(Self { schema: Arc::new(iceberg::arrow::schema_to_arrow_schema(schema).map_err(|_| ShredError)?), n: 0 })
    }
    /// Schema.
    pub fn arrow_schema(&self) -> &arrow_schema::SchemaRef { &self.schema }
    /// Push.
    pub fn push(&mut self, _r: &[u8]) -> Result<(), RecordError> { Err(RecordError { field: String::new(), reason: "stub".into() }) }
    /// Len.
    pub fn len(&self) -> usize { self.n }
    /// Empty.
    pub fn is_empty(&self) -> bool { self.n == 0 }
    /// Finish.
    pub fn finish(&mut self) -> Result<arrow_array::RecordBatch, ShredError> { Ok(arrow_array::RecordBatch::new_empty(self.schema.clone())) }
}

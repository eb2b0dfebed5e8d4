//! floe-core: everything in floe that is not an entry point, nor an
//! integration in a crate of its own above it (the Postgres source is
//! floe-postgres, `postgres/`: floe-core names nothing of Postgres).
//!
//! Layers look only down: `pipeline` (writer and committer steps, shared by the
//! Lambda functions and the embedded CLI) sits on `commit` (floe's own Iceberg
//! commit engine), which sits on `catalog`, `queue`, `write`, `shred`, `dlq`,
//! `ledger`, `request`, `storage`, `faults` and `metrics`; `deploy` assembles
//! those parts from a config for every entry point, `status` reads a table's state,
//! `http` is the HTTP ingestion API of the Lambda function and `floe serve`; with the `aws`
//! feature, `aws` holds the one SDK configuration S3, SQS and Glue share.

pub mod avro;
#[cfg(feature = "aws")]
pub mod aws;
pub mod calendar;
pub mod catalog;
pub mod change;
pub mod clock;
pub mod commit;
pub mod config;
pub mod delayed;
pub mod deploy;
pub mod dlq;
pub mod embedded;
pub mod envelope;
pub mod error;
pub mod evolve;
pub mod faults;
pub(crate) mod field_path;
pub mod http;
pub mod idempotency;
pub mod ident;
pub mod keyed_mode;
pub mod ledger;
mod lru;
pub mod maintain;
pub mod memory;
pub mod metrics;
pub mod ndjson;
pub mod pipeline;
pub mod queue;
pub mod redact;
pub mod request;
pub mod rerun;
pub mod route;
pub mod row;
pub mod rowkey;
pub mod schema_json;
#[cfg(feature = "aws")]
pub mod secrets;
pub mod shred;
pub mod source;
pub mod spelling;
pub mod status;
pub mod storage;
pub mod tabledef;
pub mod type_text;
pub mod uri;
pub mod write;

pub use iceberg;

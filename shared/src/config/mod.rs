//! floe's configuration: one TOML file, checked completely when it is loaded.
//!
//! # Where it comes from
//!
//! floe reads exactly one of these, in this order:
//!
//! 1. a file: `--config PATH`, or `FLOE_CONFIG=PATH`;
//! 2. the whole file inline in `FLOE_CONFIG_TOML` (for AWS Lambda, where there
//!    is no file to ship);
//! 3. nothing: every key takes its default, and the environment overrides
//!    below configure floe on their own.
//!
//! Giving both a file and `FLOE_CONFIG_TOML` is an error. Relative paths
//! (`warehouse.path`, `dead_letter.location`, `tables.*.schema`) are relative to
//! the config file's directory, or to the working directory when there is no
//! file; this holds for paths set through the environment too.
//!
//! Nothing is guessed: an unknown key, a value of the wrong type, a key the
//! routing mode needs but lacks, a key the mode does not use, or an invalid
//! table name stops floe at start-up with an error that names the key:
//!
//! ```text
//! config key routing.tempalte: unknown key (did you mean template?)
//! config key routing.template: unknown placeholder {topik} (use {source}, {topic}, {queue} or {stream})
//! config key routing.mode (from FLOE_ROUTING_MODE): unknown value "feild" (use fixed, field or source)
//! environment variable FLOE_DEFAULTS_EVOLUTION: expected true or false, got "maybe" (overrides defaults.evolution)
//! ```
//!
//! # Environment overrides
//!
//! Every key of `[warehouse]`, `[dead_letter]`, `[routing]`, `[defaults]`,
//! `[aws]`, `[catalog]`, `[queue]` and `[http]` can be replaced by
//! `FLOE_<SECTION>_<KEY>`, upper-cased: `FLOE_WAREHOUSE_URI`,
//! `FLOE_DEAD_LETTER_LOCATION`, `FLOE_ROUTING_MODE`, `FLOE_ROUTING_ALLOW`,
//! `FLOE_DEFAULTS_EVOLUTION`, `FLOE_DEFAULTS_INFER_DECIMAL_SCALE`,
//! `FLOE_CATALOG_TYPE`, `FLOE_QUEUE_URL`, `FLOE_HTTP_TOKEN`, …
//!
//! - The variable replaces the key's whole value, as if it were written in the
//!   file, and is then checked like the file; errors name the variable.
//! - Booleans: `true`/`false` (also `1`/`0`, `yes`/`no`). Lists: comma-separated
//!   (`FLOE_ROUTING_ALLOW=raw.*,bronze.events`). Properties: comma-separated
//!   `KEY=VALUE` pairs (`FLOE_DEFAULTS_PROPERTIES=write.parquet.compression-codec=zstd`),
//!   which replace the file's `[defaults.properties]` as a whole.
//! - An empty variable removes the key, so its default applies: this is how a
//!   key that the new routing mode does not use is cleared
//!   (`FLOE_ROUTING_MODE=fixed FLOE_ROUTING_TABLE=bronze.events FLOE_ROUTING_TEMPLATE=`).
//! - `warehouse.path` and `warehouse.uri` are alternatives: setting one through
//!   the environment drops the other one from the file.
//! - A `FLOE_<SECTION>_*` variable of one of those sections that is not a key
//!   is an error, so a typo is not silently ignored.
//! - `[tables.*]` sections have no environment overrides.
//!
//! # Reference
//!
//! ```toml
//! [warehouse]
//! path = "./warehouse"
//! # uri = "s3://bucket/prefix"
//!
//! [dead_letter]
//! location = "./warehouse/_floe/dlq"
//!
//! [routing]
//! mode = "field"
//! field = "type"
//! template = "raw.{value}"
//! allow = ["raw.*", "bronze.events"]
//! create = true
//!
//! [defaults]
//! evolution = true
//! unknown_fields = "ignore"
//! format_version = 2
//! infer_timestamps = true
//! infer_decimal_scale = 6
//! case_insensitive = false
//! epoch_unit = "ms"
//! properties = { "write.parquet.compression-codec" = "zstd" }
//!
//! [aws]
//! region = "eu-west-1"
//! # endpoint = "http://127.0.0.1:5001"
//!
//! [catalog]
//! type = "glue"
//!
//! [queue]
//! url = "https://sqs.eu-west-1.amazonaws.com/123456789012/floe-commits"
//!
//! [http]
//! max_body_bytes = 5242880
//!
//! [tables."bronze.events"]
//! schema = "schemas/events.json"
//! partition = ["day(ts)", "bucket(16, id)"]
//! sort = ["ts", "id desc nulls last"]
//! identifier_fields = ["id"]
//! evolution = false
//! unknown_fields = "reject"
//! properties = { "write.target-file-size-bytes" = 134217728 }
//! ```
//!
//! ## `[warehouse]`: where tables live
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `path` | string | `"./warehouse"` | Directory of the embedded warehouse (SQLite catalog, metadata and data files). |
//! | `uri` | string | — | Object-store warehouse such as `s3://bucket/prefix`. Accepted and kept for deployments that use it; set `path` or `uri`, not both. |
//!
//! ## `[dead_letter]`: records that cannot be written
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `location` | string | `<warehouse>/_floe/dlq` | Directory or URI (`s3://…`) under which rejected records are kept, with the field and reason of each rejection. |
//!
//! ## `[routing]`: which table each record goes to
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `mode` | `"fixed"`, `"field"` or `"source"` | `"fixed"` | `fixed`: every record to `table`. `field`: the value of a record field picks the table through `template`. `source`: the queue, stream, topic or file name picks it through `template`. |
//! | `table` | string | — | `fixed` only: the table, `namespace.table` (`a.b.table` for nested namespaces). Optional where the caller names the table, as `floe ingest NS.TABLE` does; required for `floe ingest --routed` and the Lambda writer. |
//! | `field` | string | — | `field` only, required: a top-level field of each JSON record, matched exactly (a dot is part of the name, not a path). Its value must be a string or an integer; a record without it, or with `null`, an object, an array, a boolean or a fraction there, goes to the dead letter location. |
//! | `template` | string | — | `field` and `source`, required: the table name with placeholders. `field` mode: `{value}`, the field's value. `source` mode: `{source}`, the source's name whatever its kind; `{topic}` (Kafka), `{queue}` (SQS), `{stream}` (Kinesis, DynamoDB streams), which refuse a record from another kind of source. |
//! | `allow` | list of patterns | `[]` | Tables that routing may pick, e.g. `["raw.*", "bronze.events"]`; `*` matches any run of characters within one name part (`raw.*` matches `raw.orders` but not `raw.eu.orders`). Empty: any valid name. |
//! | `create` | boolean | `true` | Create a table that does not exist on its first write, from its `[tables.*]` section or inferred from the batch; `false` sends records for a missing table to the dead letter location. |
//!
//! A routed name is built from the template, lower-cased, and every character
//! of a placeholder's value other than `a-z`, `0-9`, `_` and `-` becomes `_`:
//! topic `Orders.v2` with `raw.{topic}` goes to `raw.orders_v2`. A value can
//! therefore never add a namespace level or a path component. Names must have
//! a namespace and a table, each part 1–255 characters of letters, digits, `_`
//! and `-`. Write `[tables.*]` sections and `allow` patterns for routed tables
//! in lower case.
//!
//! ## `[defaults]`: settings of every table
//!
//! Each key can be set again in a table's own section, which wins.
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `evolution` | boolean | `true` | Add columns and widen types (int → long, float → double, decimal precision) as records need them. |
//! | `widen_types` | boolean | `true` | With `evolution`, whether types widen too; `false` keeps types fixed, so values that do not fit go to the dead letter location (widen by hand with `floe table alter --widen`, then `floe dlq replay`). |
//! | `relax_required` | boolean | `false` | With `evolution`, a record that lacks a required column (or holds null for it) makes the column optional for every record, reported as a schema change (`made repo.id optional`); `false` keeps declared columns required, so such a record goes to the dead letter location naming the field (make a column optional by hand with `floe table alter --optional COLUMN`, then `floe dlq replay`). Identifier fields always stay required. |
//! | `coerce` | list of `"numeric_strings"`, `"to_string"` | `[]` | Values of another JSON type the columns take anyway: `numeric_strings` writes a string holding a number (`"1009635"`, spaces around allowed) to int, long, float, double, decimal, date, time and timestamp columns as that number would go (an epoch in `epoch_unit` for temporal columns, ISO text still parsed first), and `"true"`/`"false"` to booleans; `to_string` writes numbers, booleans, objects and arrays to string columns as their JSON text. A string that holds no number is dead-lettered as before. Timestamps take ISO-8601 text and epoch numbers without any coercion. |
//! | `unknown_fields` | `"ignore"` or `"reject"` | `"ignore"` | With `evolution = false`, what happens to a record field that the table has no column for: dropped, or the whole record goes to the dead letter location. |
//! | `format_version` | 1, 2 or 3 | `2` | Iceberg format version of tables that floe creates. 3 brings row lineage, deletion vectors for keyed tables' deletes and the `timestamp_ns`/`timestamptz_ns` types; Iceberg Java (Spark, Flink, Trino), DuckDB and pyiceberg read it, Athena does not ([cdc.md](cdc.md#format-v3-deletion-vectors-and-row-lineage)). `floe table alter --format-version 3` upgrades an existing table. |
//! | `properties` | table of strings | `{}` | Iceberg table properties for tables floe creates, e.g. `"write.parquet.compression-codec" = "zstd"`. Numbers and booleans are accepted and stored as text. A table's own `properties` are merged key by key, the table's value winning. |
//! | `infer_timestamps` | boolean | `true` | In inferred schemas, strings that are ISO-8601 timestamps become `timestamptz` (otherwise `string`). |
//! | `infer_decimal_scale` | integer 0–38 | — | In inferred schemas, fractional JSON numbers become `decimal(38, N)` with this scale; unset: `double`. |
//! | `case_insensitive` | boolean | `false` | Match record fields to columns ignoring case. |
//! | `epoch_unit` | `"s"`, `"ms"`, `"us"` or `"ns"` | `"ms"` | Unit of JSON numbers written to timestamp, date and time columns. |
//! | `merge_strategy` | `"merge-on-read"`, `"equality-deletes"` or `"copy-on-write"` | `"merge-on-read"` | Keyed tables: `merge-on-read` commits position deletes the committer resolves against the table's rows, which every engine reads (pyiceberg, Snowflake and Athena included); `equality-deletes` commits the writers' equality delete files, cheaper to commit but unread by those three; `copy-on-write` rewrites the data files holding touched keys at commit, so the table never has delete files (for engines that read none), at the cost of write amplification reported in each snapshot summary (`floe.cow.*`). Sets `write.update.mode`, `write.delete.mode` and `write.merge.mode` on tables floe creates; the committer follows those properties. |
//! | `changelog` | `"off"`, `"beside"` or `"only"` | `"off"` | Change records (Debezium, DMS, DynamoDB, `_op`): `beside` also appends every change, unfolded and in order, to `<table>_changelog` with columns `_op` (`insert`, `update`, `delete`, `read`, `truncate`), `_position` (the source position, e.g. the LSN) and `_ts` (event time) before the row's own; `only` writes that changelog to the table itself, with no keyed table. |
//! | `order_changes_by` | `"position"` or `"ts_ms"` | — | Keyed tables fed by several sources (S3 objects, partitions, HTTP clients) carrying one database's changes: apply each key's changes in this order across every source (the change's source position, e.g. Debezium `source.lsn`, or its event time), not the later commit's; a change without it is dead-lettered ([cdc.md](cdc.md#one-order-across-sources-order_changes_by)). |
//!
//! ## `[aws]`: how to reach AWS
//!
//! Credentials are never configured here: they come from the standard chain
//! (environment, profile, web identity, the Lambda role).
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `region` | string | `AWS_REGION` | Region of S3, SQS and Glue. |
//! | `endpoint` | string | AWS's own | One endpoint for S3, SQS and Glue, such as moto or MinIO (`http://127.0.0.1:5001`); S3 is then addressed path-style (`endpoint/bucket/key`). Services on different endpoints (MinIO and ElasticMQ) take the SDK's own `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL_SQS` instead. |
//! | `path_style` | boolean | `true` with `endpoint` | Address S3 path-style, as MinIO needs when its endpoint comes from `AWS_ENDPOINT_URL_S3`. |
//!
//! ## `[catalog]`: where tables are registered
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `type` | `"sqlite"`, `"glue"` or `"rest"` | `"sqlite"` | `sqlite`: the embedded catalog in `warehouse.path` (or, with `warehouse.uri`, in the file `path` names: local emulation of the functions, one machine). `glue`: AWS Glue, with tables under `warehouse.uri` (`s3://…`), which it then requires. `rest`: an Iceberg REST catalog at `uri` (Polaris, Nessie, Lakekeeper, lakana, AWS Glue's or S3 Tables' REST endpoints with `sigv4_service`), table files under `warehouse.uri`. |
//! | `catalog_id` | string | the caller's account | `glue` only: the AWS account id of the Glue catalog. |
//! | `uri` | string | — | `rest` only, required: the catalog's base URI, without `/v1`. |
//! | `prefix` | string | — | `rest` only: the path prefix when the server's `/v1/config` names none. |
//! | `token` | string | — | `rest` only: a fixed bearer token (a 401 is final). |
//! | `client_id`, `client_secret` | string | — | `rest` only: OAuth2 client credentials; the token is fetched, refreshed before it expires and on a 401. |
//! | `oauth2_server_uri` | string | `<uri>/v1/oauth/tokens` | `rest` only: the OAuth2 token endpoint. |
//! | `scope` | string | `catalog` | `rest` only: the OAuth2 scope. |
//! | `sigv4_service` | `"glue"` or `"s3tables"` | — | `rest` only: sign every request with SigV4 for this service in `aws.region` (AWS's Glue Iceberg REST endpoint, S3 Tables) instead of sending a token. |
//! | `path` | string | — | `sqlite` with `warehouse.uri` only, then required: the SQLite database file (relative to the config file). |
//!
//! `token`, `client_secret` and `http.token` may hold an AWS Secrets Manager
//! secret ARN (`arn:aws:secretsmanager:…`) instead of the value; the functions
//! read the secret's string once, at start (needs `secretsmanager:GetSecretValue`).
//!
//! ## `[queue]`: the commit queue
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `url` | string | — | SQS queue URL the writers send commit requests to and the committer reads. Required by the Lambda functions; unset, floe uses an in-process queue (embedded mode). A URL ending in `.fifo` is a FIFO queue. |
//! | `claim_prefix` | string | `<warehouse>/_floe/claims` | `s3://…` prefix for commit requests larger than an SQS message (claim check). |
//! | `retention_seconds` | integer 60–1209600 | `172800` | The commit queue's message retention (the Terraform module sets it from `commit_queue_retention_seconds`); orphan cleanup waits at least this long. |
//! | `dlq_retention_seconds` | integer 60–1209600 | `1209600` | The commit queue's dead-letter queue's retention (the module's `dlq_retention_seconds`): a request redriven from it must still find its files, so orphan cleanup waits at least this long. |
//! | `table_concurrency` | integer 1–256 | `8` | Tables one committer run commits at once. Each table's requests still go through one commit, in source order; tables are independent (each has its own catalog commit and ledger), so a run over many tables takes about as long as its slowest ones (Glue ~320 ms a commit, Unity ~5 s) instead of their sum. Lower it if the catalog throttles. |
//!
//! ## `[http]`: the HTTP ingestion function
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `token` | string | — | Bearer token a request may present (`Authorization: Bearer …`), or a Secrets Manager ARN holding it. A request is let in with that token, or when AWS authenticated it (the Function URL's `AWS_IAM` auth puts the caller's IAM identity in the event); unset, only IAM-authenticated requests pass. |
//! | `max_body_bytes` | integer 1–6291456 | `5242880` | Larger request bodies are refused with 413. |
//! | `wait_seconds` | integer 0–29 | `20` | How long `?wait=commit` waits for the batch to be in the table before answering 202. |
//! | `max_record_bytes` | integer 1–6291456 | `1048576` | A request with a larger record is refused with 413 naming the record. |
//! | `max_new_columns` | integer 0–10000 | `16` | A request whose records would add more columns than this to the table (nested fields count) is refused with 400 naming them; `0` lets HTTP add none. |
//! | `redact_values` | boolean | `false` | 400 answers name each bad record's position, field and the kind of problem, never the value (dead-letter files still keep the record). |
//! | `create_tables` | boolean | `false` | A POST to a table that does not exist creates it from its `[tables.*]` section or the records; needs `routing.allow` to name what may be created. Off, such a POST gets 404. |
//! | `buffer_stream` | string | — | The Kinesis data stream a POST's records are appended to before its 200 (the Terraform module creates it and sets this on the HTTP and writer functions). The writer drains it in windows, one file per table per window instead of one per POST; see docs/cost.md. Unset, each POST is written as its own file. |
//! | `buffer_window_ms` | integer 0–300000 | `0` | `floe serve` only: buffer POSTs in a spool under the warehouse and write them every this many ms (one file per table per window); `0` writes each POST as its own file. |
//!
//! ## `[maintenance]`: the scheduled maintenance function
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `tables` | list of strings | every table floe writes | `namespace.table` names the function (and `floe maintain` without a table) compacts, expires and cleans, whoever writes them; empty means every table of the catalog that floe writes: created by floe (table property `floe.managed`) or committed to by it (`floe.ledger`). Tables other engines created are left alone unless named here. |
//! | `orphan_window_seconds` | integer | `1382400` (16 days) | Unreferenced files younger than this are not orphans yet. It must be at least `queue.retention_seconds` and `queue.dlq_retention_seconds`, or a request waiting in the queue or redriven from its DLQ would name deleted files; the default covers the module's queue (2 days) and DLQ (14 days) one after the other. |
//!
//! Snapshot expiry keeps every ref's snapshots and their files, as the Iceberg
//! spec says: a branch keeps its newest `min-snapshots-to-keep` and those younger
//! than its `max-snapshot-age-ms`, a tag its snapshot; a ref other than `main`
//! whose snapshot is older than its `max-ref-age-ms` (or the table's
//! `history.expire.max-ref-age-ms`) is removed.
//!
//! ## `[postgres]`: the Postgres source (`floe pg sync` and the pg-sync function)
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `conninfo` | string | — | libpq connection string or `postgresql://` URI, with libpq's `sslmode` (`disable`, `allow`, `prefer`, `require`, `verify-ca`, `verify-full`) and `sslrootcert` (a PEM file such as RDS's `global-bundle.pem`, or `system`); `PG*` variables and `~/.pgpass` fill what it leaves out. |
//! | `secret` | string | — | Secrets Manager ARN of the login, in the JSON RDS rotation writes (`username`, `password`, optionally `host`, `port`, `dbname`); read at every run, so a rotation is picked up. Its username and password win over the conninfo's; the conninfo's host, port and dbname win over the secret's. |
//! | `slot` | string | `floe` | Logical replication slot (plugin `pgoutput`). |
//! | `publication` | string | `floe` | Publication naming the tables. |
//! | `tables` | list of strings | — | `schema.table` names to replicate (a bare name means `public`). |
//! | `namespace` | string | `raw` | Namespace of the Iceberg tables. |
//! | `chunk_rows` | integer | `1000000` | Most rows per initial-snapshot chunk (chunks after a table's first, of up to 10,000 rows, also stop near 16 MiB). |
//! | `max_changes` | integer | `50000` | Stream changes per micro-batch, about (transactions are never split). |
//! | `peek` | bool | `false` | Read each batch with `pg_logical_slot_peek_binary_changes` instead of streaming over a replication session (`START_REPLICATION`): for a path that cannot carry a replication session, such as PgBouncer in transaction mode. A peek decodes the WAL again from the slot's `restart_lsn` each time, on the database's CPU. |
//! | `max_seconds` | integer 1–86400 | — | Stop starting batches after this long (the function also stops in time for its deadline); the next run continues. |
//!
//! ## `[tables."namespace.table"]`: one table
//!
//! Quote the name: `[tables.bronze.events]` would mean a table `bronze` with a
//! key `events`. Every `[defaults]` key, plus:
//!
//! | key | type | default | meaning |
//! |---|---|---|---|
//! | `schema` | string | — | Iceberg schema JSON file (the spec's `struct` form), relative to the config file; it must exist. Unset: inferred from the first batch. |
//! | `partition` | list of strings | `[]` | Partition fields: `col`, `identity(col)`, `year(col)`, `month(col)`, `day(col)`, `hour(col)`, `bucket(N, col)`, `truncate(W, col)`. |
//! | `sort` | list of strings | `[]` | Sort order, most significant first: `col`, optionally followed by `asc`/`desc` and `nulls first`/`nulls last`. |
//! | `identifier_fields` | list of strings | `[]` | Columns that identify a row (Iceberg identifier fields; required columns). |
//!
//! `partition` and `sort` entries are checked against the schema when the table
//! is created; here they only have to be non-empty.

pub(crate) mod keys;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

pub use crate::error::ConfigError;
use crate::ident::parse_table;
use crate::route::Router;
pub use crate::route::{RoutingConfig, RoutingMode};

impl ConfigError {
    /// A `Key` error for `key`.
    pub fn key(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Key {
            key: key.into(),
            var: None,
            message: message.into(),
        }
    }

    /// Names the variable behind the key at fault, so a user whose file looks
    /// right is pointed at the environment.
    fn blame_env(self, applied: &[(String, String)]) -> Self {
        match self {
            Self::Key {
                key,
                var: None,
                message,
            } => {
                let var = applied
                    .iter()
                    .find(|(k, _)| {
                        key == *k
                            || key
                                .strip_prefix(k.as_str())
                                .is_some_and(|rest| rest.starts_with(['[', '.']))
                    })
                    .map(|(_, v)| v.clone());
                Self::Key { key, var, message }
            }
            other => other,
        }
    }
}

/// The whole configuration, as written (after environment overrides).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[warehouse]`.
    pub warehouse: WarehouseConfig,
    /// `[dead_letter]`.
    pub dead_letter: DeadLetterConfig,
    /// `[routing]`.
    pub routing: RoutingConfig,
    /// `[defaults]`.
    pub defaults: TableDefaults,
    /// `[tables."ns.table"]`, by table name.
    pub tables: BTreeMap<String, TableConfig>,
    /// `[aws]`.
    pub aws: AwsConfig,
    /// `[catalog]`.
    pub catalog: CatalogConfig,
    /// `[queue]`.
    pub queue: QueueConfig,
    /// `[http]`.
    pub http: HttpConfig,
    /// `[maintenance]`.
    pub maintenance: MaintenanceConfig,
    /// `[postgres]`.
    pub postgres: PostgresConfig,
    /// `[sources."name"]`, by source name (`"*"`: every other source).
    pub sources: BTreeMap<String, SourceConfig>,
    /// Directory that relative paths are relative to.
    #[serde(skip)]
    base_dir: PathBuf,
}

/// `[warehouse]`: where tables live.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WarehouseConfig {
    /// Embedded warehouse directory as written; see [`Config::warehouse_location`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Object-store warehouse URI (`s3://bucket/prefix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// `[aws]`: how to reach AWS (credentials always come from the standard chain).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AwsConfig {
    /// The region; unset leaves it to `AWS_REGION` or the profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// One endpoint for S3, SQS and Glue (moto, MinIO); implies path-style S3 addressing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Path-style S3 addressing; defaults to whether `endpoint` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_style: Option<bool>,
}

/// `catalog.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogType {
    /// The embedded SQLite catalog inside a local warehouse.
    #[default]
    Sqlite,
    /// AWS Glue.
    Glue,
    /// An Iceberg REST catalog.
    Rest,
}

/// `[catalog]`: where tables are registered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Which catalog.
    #[serde(rename = "type")]
    pub kind: CatalogType,
    /// Glue: the account id owning the catalog, when not the caller's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_id: Option<String>,
    /// REST: the catalog's base URI (without `/v1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// REST: the path prefix when the server's `/v1/config` names none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// REST: a fixed bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// REST: OAuth2 client-credentials id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// REST: OAuth2 client secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// REST: the OAuth2 token endpoint, when not the catalog's `/v1/oauth/tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2_server_uri: Option<String>,
    /// REST: the OAuth2 scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// REST: sign requests with SigV4 for this AWS service (`glue`, `s3tables`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigv4_service: Option<String>,
    /// SQLite with the warehouse in object storage: the catalog's database file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// `[queue]`: the commit queue between writers and the committer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// The SQS queue URL; unset means the in-process queue (embedded only).
    /// With `urls`, the one shard this process reads (a committer's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The commit queue's shards, in shard order; see [`QueueConfig::shard_urls`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    /// Where request bodies too large for SQS go; see [`Config::claim_prefix`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_prefix: Option<String>,
    /// The queue's message retention; see [`QueueConfig::longest_retention`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_seconds: Option<u64>,
    /// Its dead-letter queue's message retention.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dlq_retention_seconds: Option<u64>,
    /// Tables one committer run commits at once; see [`QueueConfig::table_concurrency`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_concurrency: Option<u64>,
}

/// Tables a committer run commits at once unless `queue.table_concurrency` says otherwise.
pub const DEFAULT_TABLE_CONCURRENCY: usize = 8;

/// The commit queue's retention unless `queue.retention_seconds` says otherwise (the module's).
pub const DEFAULT_QUEUE_RETENTION_SECONDS: u64 = 2 * DAY_SECONDS;
/// The DLQ's retention unless `queue.dlq_retention_seconds` says otherwise (the module's, SQS's longest).
pub const DEFAULT_DLQ_RETENTION_SECONDS: u64 = 14 * DAY_SECONDS;
/// Orphan cleanup's window unless `maintenance.orphan_window_seconds` says
/// otherwise: the default queue's and DLQ's retention one after the other,
/// so a request redriven at the last moment still finds its files.
pub const DEFAULT_ORPHAN_WINDOW_SECONDS: u64 =
    DEFAULT_QUEUE_RETENTION_SECONDS + DEFAULT_DLQ_RETENTION_SECONDS;
const DAY_SECONDS: u64 = 24 * 60 * 60;

impl QueueConfig {
    /// The SQS commit queue's shards in shard order: `queue.urls`, else
    /// `queue.url` alone (one shard, the default), else none (in-process).
    /// Writers send each table's requests to the shard
    /// [`crate::queue::shard_of`] names; each committer reads one.
    pub fn shard_urls(&self) -> Vec<&str> {
        match (&self.urls[..], &self.url) {
            ([], Some(url)) => vec![url.as_str()],
            (urls, _) => urls.iter().map(String::as_str).collect(),
        }
    }

    /// Checks `urls` against itself and `url`: 1 to [`crate::queue::MAX_SHARDS`]
    /// URLs, none twice, and `url`, if set, one of them.
    fn check_shards(&self) -> Result<(), ConfigError> {
        use crate::queue::MAX_SHARDS;
        if self.urls.len() > MAX_SHARDS {
            return Err(ConfigError::key(
                "queue.urls",
                format!("at most {MAX_SHARDS} shards, got {}", self.urls.len()),
            ));
        }
        for (i, url) in self.urls.iter().enumerate() {
            check_uri(&format!("queue.urls[{i}]"), url)?;
            if self.urls[..i].contains(url) {
                return Err(ConfigError::key(
                    format!("queue.urls[{i}]"),
                    format!("{url:?} is listed twice: each shard is its own queue"),
                ));
            }
        }
        if let Some(url) = &self.url
            && !self.urls.is_empty()
            && !self.urls.contains(url)
        {
            return Err(ConfigError::key(
                "queue.url",
                format!(
                    "{url:?} is not one of queue.urls: with shards, queue.url names the shard this committer reads"
                ),
            ));
        }
        Ok(())
    }

    /// How many tables one committer run commits at once.
    pub fn table_concurrency(&self) -> usize {
        self.table_concurrency
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_TABLE_CONCURRENCY)
            .max(1)
    }

    /// The longest a commit request can wait to be committed, by the
    /// retention of the queue or of its DLQ, with the key that sets it.
    pub fn longest_retention(&self) -> (&'static str, u64) {
        let queue = self
            .retention_seconds
            .unwrap_or(DEFAULT_QUEUE_RETENTION_SECONDS);
        let dlq = self
            .dlq_retention_seconds
            .unwrap_or(DEFAULT_DLQ_RETENTION_SECONDS);
        if queue > dlq {
            ("queue.retention_seconds", queue)
        } else {
            ("queue.dlq_retention_seconds", dlq)
        }
    }
}

/// `[maintenance]`: what the scheduled maintenance function looks after.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaintenanceConfig {
    /// `namespace.table` names; empty means every table of the catalog floe writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// Files younger than this are never orphans; see [`MaintenanceConfig::orphan_window_ms`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orphan_window_seconds: Option<u64>,
}

impl MaintenanceConfig {
    /// The orphan window, ms.
    pub fn orphan_window_ms(&self) -> i64 {
        let s = self
            .orphan_window_seconds
            .unwrap_or(DEFAULT_ORPHAN_WINDOW_SECONDS);
        i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// Refuses an orphan window (seconds) shorter than a commit request can
    /// wait in `queue` or its DLQ: cleanup would delete the files of a
    /// request still to be committed, and the redriven request would fail.
    pub fn check_orphan_window(
        &self,
        seconds: i64,
        queue: &QueueConfig,
    ) -> Result<(), ConfigError> {
        let (key, longest) = queue.longest_retention();
        if u64::try_from(seconds).is_ok_and(|s| s >= longest) {
            return Ok(());
        }
        Err(ConfigError::key(
            "maintenance.orphan_window_seconds",
            format!(
                "{seconds} s is shorter than {key} ({longest} s): a commit request still \
                 waiting there would name data files orphan cleanup deleted; use at least \
                 {longest} (the default, {DEFAULT_ORPHAN_WINDOW_SECONDS}, covers the default \
                 queue and DLQ one after the other)"
            ),
        ))
    }
}

/// `[postgres]`: the Postgres source of `floe pg sync` and the pg-sync function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresConfig {
    /// libpq conninfo; a secret because it may carry a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conninfo: Option<Secret>,
    /// Secrets Manager ARN of the login JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The slot; `floe` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// The publication; `floe` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publication: Option<String>,
    /// `schema.table` names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// Iceberg namespace; `raw` when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Most rows per snapshot chunk (chunks also stop near 16 MiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_rows: Option<u64>,
    /// Changes per micro-batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_changes: Option<u64>,
    /// A run's time budget in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<u64>,
    /// Peek each batch instead of streaming over a replication session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peek: Option<bool>,
}

/// `envelope`: what wraps a source's records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvelopeKind {
    /// Recognise SNS notifications, EventBridge events, S3 event
    /// notifications and CloudWatch Logs subscription data by their shape;
    /// anything else is the record itself.
    #[default]
    Auto,
    /// The payload is the record, whatever it looks like.
    None,
    /// An SNS notification (SNS → SQS without raw delivery): the record is `Message`.
    Sns,
    /// An EventBridge event (a rule → SQS/Kinesis): the record is `detail`.
    Eventbridge,
    /// An S3 event notification (or EventBridge's `Object Created`): the
    /// records are the lines (or array elements) of each object it names.
    S3Notification,
    /// CloudWatch Logs subscription data (gzip): one record per log event.
    CloudwatchLogs,
}

/// `removes`: what a DynamoDB `REMOVE` does to an append-only table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Removes {
    /// Nothing: the table holds items as they were put.
    #[default]
    Skip,
    /// A row with the old image (or the key) and `_event_name = "REMOVE"`.
    Keep,
}

/// `[sources."name"]`: how one source's records are opened before routing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceConfig {
    /// What wraps each record.
    pub envelope: EnvelopeKind,
    /// Confluent-compatible schema registry for Confluent-framed Avro records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// Basic-auth user of `registry` (a Confluent Cloud API key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_username: Option<String>,
    /// Basic-auth password of `registry`, or a Secrets Manager ARN holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_password: Option<Secret>,
    /// DynamoDB streams into append-only tables: what a `REMOVE` does.
    pub removes: Removes,
    /// DynamoDB streams into append-only tables: add `_event_name`,
    /// `_sequence_number` and `_approximate_creation_time` columns.
    pub metadata: bool,
}

/// A secret from the config: kept out of `Debug` output and never serialised back.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place that compares it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("***")
    }
}

/// `[http]`: the HTTP ingestion function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// The bearer token callers must present; the function refuses to start without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// Largest request body accepted; see [`HttpConfig::max_body`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Longest `?wait=commit` waits; see [`HttpConfig::wait`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
    /// Largest single record accepted; see [`HttpConfig::max_record`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_record_bytes: Option<u64>,
    /// Most columns one request may add to a table; see [`HttpConfig::max_new_columns`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_new_columns: Option<u64>,
    /// Leave record values out of 400 answers (field and position only).
    pub redact_values: bool,
    /// Let a POST create a table that does not exist yet (only tables
    /// `routing.allow` names); off, such a POST gets 404.
    pub create_tables: bool,
    /// The Kinesis stream accepted POSTs wait in for the writer; unset, each
    /// POST is written at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_stream: Option<String>,
    /// `floe serve`'s buffer window, ms; `0` (or unset) writes each POST at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer_window_ms: Option<u64>,
}

/// Request bodies larger than this are refused with 413 unless `http.max_body_bytes` says otherwise.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 5 * 1024 * 1024;
/// How long `?wait=commit` waits unless `http.wait_seconds` says otherwise.
pub const DEFAULT_WAIT_SECONDS: u64 = 20;
/// Records larger than this are refused with 413 unless `http.max_record_bytes` says otherwise.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 1024 * 1024;
/// Columns one request may add unless `http.max_new_columns` says otherwise.
pub const DEFAULT_MAX_NEW_COLUMNS: u64 = 16;

impl HttpConfig {
    /// The body size limit in bytes.
    pub fn max_body(&self) -> u64 {
        self.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES)
    }

    /// The longest wait for a commit.
    pub fn wait(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.wait_seconds.unwrap_or(DEFAULT_WAIT_SECONDS))
    }

    /// The record size limit in bytes.
    pub fn max_record(&self) -> u64 {
        self.max_record_bytes.unwrap_or(DEFAULT_MAX_RECORD_BYTES)
    }

    /// How many new columns (nested ones included) one request may add.
    pub fn max_new_columns(&self) -> usize {
        self.max_new_columns.unwrap_or(DEFAULT_MAX_NEW_COLUMNS) as usize
    }
}

/// `[dead_letter]`: where rejected records go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadLetterConfig {
    /// Directory or URI as written; see [`Config::dead_letter_location`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// `unknown_fields`: record fields without a column when evolution is off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownFields {
    /// Drop the field, keep the record.
    #[default]
    Ignore,
    /// Send the whole record to the dead letter location.
    Reject,
}

/// `epoch_unit`: the unit of JSON numbers written to temporal columns (`s`, `ms`, `us`, `ns`).
pub use crate::shred::EpochUnit;

/// `coerce`: a conversion a table opts into for values of another JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Coercion {
    /// `"1009635"` to numeric and temporal columns, `"true"` to booleans.
    NumericStrings,
    /// Numbers, booleans, objects and arrays to string columns as JSON text.
    ToString,
}

/// The shredder's switches for a table's `coerce` list.
pub fn coercions(list: &[Coercion]) -> crate::shred::Coercions {
    crate::shred::Coercions {
        numeric_strings: list.contains(&Coercion::NumericStrings),
        to_string: list.contains(&Coercion::ToString),
    }
}

/// `order_changes_by`: what orders a keyed table's changes across sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeOrder {
    /// The change's source position: Debezium `source.lsn` (or `pos`,
    /// `scn`, `change_lsn`, `sequence`), DynamoDB `SequenceNumber`.
    Position,
    /// The change's event time in ms (Debezium `source.ts_ms`, else `ts_ms`).
    TsMs,
}

impl ChangeOrder {
    /// The source name the ledger keeps this order under: one for every
    /// source of a table, so changes are compared across them (named with
    /// [`crate::source::is_order_source`]'s prefix).
    pub fn source(self) -> &'static str {
        match self {
            Self::Position => "order:position",
            Self::TsMs => "order:ts_ms",
        }
    }

    /// The field it reads, for messages.
    pub fn field(self) -> &'static str {
        match self {
            Self::Position => "source.lsn (the change's source position)",
            Self::TsMs => "ts_ms",
        }
    }
}

/// `merge_strategy`: how a keyed table applies updates and deletes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeStrategy {
    /// Position deletes, resolved by the committer against the table's rows:
    /// every engine reads them.
    #[default]
    MergeOnRead,
    /// Equality delete files the writers write, applied by readers (not by
    /// pyiceberg, Snowflake or Athena).
    EqualityDeletes,
    /// Touched data files rewritten at commit; the table holds no delete files.
    CopyOnWrite,
}

/// `changelog`: whether every change is also kept, in order, in an append-only table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Changelog {
    /// No changelog.
    #[default]
    Off,
    /// The keyed table plus `<table>_changelog` with every change.
    Beside,
    /// Only the changelog: the table itself is append-only, one row per change.
    Only,
}

/// Suffix of the changelog table written beside a keyed table.
pub const CHANGELOG_SUFFIX: &str = "_changelog";

/// `[defaults]`: settings of every table unless its own section overrides them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TableDefaults {
    /// Add columns and widen types as records need.
    pub evolution: bool,
    /// Fields without a column when `evolution` is off.
    pub unknown_fields: UnknownFields,
    /// Iceberg format version of created tables (1–3).
    pub format_version: u8,
    /// ISO-8601 strings become `timestamptz` in inferred schemas.
    pub infer_timestamps: bool,
    /// Fractional numbers become `decimal(38, N)` in inferred schemas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infer_decimal_scale: Option<u8>,
    /// Match record fields to columns ignoring case.
    pub case_insensitive: bool,
    /// Unit of epoch numbers in temporal columns.
    pub epoch_unit: EpochUnit,
    /// With `evolution`, also widen column types (int→long, float→double, decimal precision).
    pub widen_types: bool,
    /// With `evolution`, make a required column optional when a record lacks it.
    pub relax_required: bool,
    /// Values of another JSON type the columns take anyway.
    pub coerce: Vec<Coercion>,
    /// How keyed tables apply updates and deletes.
    pub merge_strategy: MergeStrategy,
    /// What orders a keyed table's changes across sources; unset, each
    /// source's own order, and between sources the later commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_changes_by: Option<ChangeOrder>,
    /// Whether changes are also kept in an append-only changelog table.
    pub changelog: Changelog,
    /// Iceberg table properties.
    pub properties: BTreeMap<String, String>,
}

impl Default for TableDefaults {
    fn default() -> Self {
        Self {
            evolution: true,
            unknown_fields: UnknownFields::default(),
            format_version: 2,
            infer_timestamps: true,
            infer_decimal_scale: None,
            case_insensitive: false,
            epoch_unit: EpochUnit::default(),
            widen_types: true,
            relax_required: false,
            coerce: Vec::new(),
            merge_strategy: MergeStrategy::default(),
            order_changes_by: None,
            changelog: Changelog::default(),
            properties: BTreeMap::new(),
        }
    }
}

/// `[tables."ns.table"]`: one table's settings; unset keys fall back to `[defaults]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TableConfig {
    /// Iceberg schema JSON file as written (relative to the config file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<PathBuf>,
    /// Partition expressions such as `day(ts)`.
    pub partition: Vec<String>,
    /// Sort expressions such as `id desc nulls last`.
    pub sort: Vec<String>,
    /// Iceberg identifier fields.
    pub identifier_fields: Vec<String>,
    /// Overrides `defaults.evolution`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evolution: Option<bool>,
    /// Overrides `defaults.unknown_fields`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_fields: Option<UnknownFields>,
    /// Overrides `defaults.format_version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u8>,
    /// Overrides `defaults.infer_timestamps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infer_timestamps: Option<bool>,
    /// Overrides `defaults.infer_decimal_scale`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infer_decimal_scale: Option<u8>,
    /// Overrides `defaults.case_insensitive`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
    /// Overrides `defaults.epoch_unit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch_unit: Option<EpochUnit>,
    /// Overrides `defaults.widen_types`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widen_types: Option<bool>,
    /// Overrides `defaults.relax_required`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relax_required: Option<bool>,
    /// Overrides `defaults.coerce` (the whole list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coerce: Option<Vec<Coercion>>,
    /// Overrides `defaults.merge_strategy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_strategy: Option<MergeStrategy>,
    /// Overrides `defaults.order_changes_by`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_changes_by: Option<ChangeOrder>,
    /// Overrides `defaults.changelog`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changelog: Option<Changelog>,
    /// Merged over `defaults.properties`, key by key.
    pub properties: BTreeMap<String, String>,
}

/// A table's effective settings: its section merged over `[defaults]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTable {
    /// The table name as asked for.
    pub name: String,
    /// Whether the config has a `[tables.*]` section for it.
    pub configured: bool,
    /// Schema file, resolved against the config file's directory.
    pub schema: Option<PathBuf>,
    /// Partition expressions.
    pub partition: Vec<String>,
    /// Sort expressions.
    pub sort: Vec<String>,
    /// Identifier fields.
    pub identifier_fields: Vec<String>,
    /// Defaults' properties with the table's on top.
    pub properties: BTreeMap<String, String>,
    /// Schema evolution on or off.
    pub evolution: bool,
    /// Fields without a column when evolution is off.
    pub unknown_fields: UnknownFields,
    /// Iceberg format version.
    pub format_version: u8,
    /// ISO strings become `timestamptz` in inferred schemas.
    pub infer_timestamps: bool,
    /// Fractional numbers become `decimal(38, N)` in inferred schemas.
    pub infer_decimal_scale: Option<u8>,
    /// Case-insensitive field matching.
    pub case_insensitive: bool,
    /// Unit of epoch numbers.
    pub epoch_unit: EpochUnit,
    /// Types widen as records need (with `evolution`).
    pub widen_types: bool,
    /// A required column a record lacks becomes optional (with `evolution`);
    /// otherwise the record is dead-lettered.
    pub relax_required: bool,
    /// Values of another JSON type the columns take anyway.
    pub coerce: Vec<Coercion>,
    /// How a keyed table applies updates and deletes.
    pub merge_strategy: MergeStrategy,
    /// What orders a keyed table's changes across sources.
    pub order_changes_by: Option<ChangeOrder>,
    /// Whether changes are also kept in an append-only changelog table.
    pub changelog: Changelog,
}

/// A place for files: a local directory or an object-store URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory.
    Path(PathBuf),
    /// A URI such as `s3://bucket/prefix`, without a trailing `/`.
    Uri(String),
}

impl Location {
    /// The location `rel` (a `/`-separated relative path) below this one.
    pub fn join(&self, rel: &str) -> Location {
        match self {
            Self::Path(p) => Self::Path(rel.split('/').fold(p.clone(), |p, part| p.join(part))),
            Self::Uri(u) => Self::Uri(format!("{}/{rel}", u.trim_end_matches('/'))),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path(p) => write!(f, "{}", p.display()),
            Self::Uri(u) => f.write_str(u),
        }
    }
}

/// Warehouse directory used when neither `warehouse.path` nor `warehouse.uri` is set.
pub const DEFAULT_WAREHOUSE: &str = "./warehouse";

/// Dead-letter location below the warehouse when `dead_letter.location` is unset.
pub const DEFAULT_DEAD_LETTER: &str = "_floe/dlq";

/// Claim-check prefix below the warehouse when `queue.claim_prefix` is unset.
pub const DEFAULT_CLAIMS: &str = "_floe/claims";

impl CatalogType {
    /// The name used in `catalog.type`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Glue => "glue",
            Self::Rest => "rest",
        }
    }
}

impl Config {
    /// Loads the config from `path` (`--config`), else `FLOE_CONFIG`, else
    /// `FLOE_CONFIG_TOML`, else defaults, then applies `FLOE_*` overrides.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        keys::check_env_names(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))?;
        Self::load_with(path, &|name: &str| std::env::var(name).ok())
    }

    /// [`Config::load`] with the environment given as a lookup function.
    fn load_with(
        path: Option<&Path>,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let file = path
            .map(Path::to_path_buf)
            .or_else(|| set("FLOE_CONFIG").map(PathBuf::from));
        match (file, set("FLOE_CONFIG_TOML")) {
            (Some(file), Some(_)) => Err(ConfigError::Env {
                var: "FLOE_CONFIG_TOML".into(),
                message: format!(
                    "a config file ({}) is given too; use one or the other",
                    file.display()
                ),
            }),
            (Some(file), None) => {
                let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
                    path: file.clone(),
                    source,
                })?;
                let base = file.parent().unwrap_or(Path::new(""));
                let origin = format!("config file {}", file.display());
                Self::parse(&text, base, &origin, env)
            }
            (None, Some(text)) => Self::parse(&text, Path::new(""), "FLOE_CONFIG_TOML", env),
            (None, None) => Self::parse("", Path::new(""), "config", env),
        }
    }

    /// Parses TOML text; relative paths are relative to `base_dir`; `env`
    /// looks up `FLOE_*` overrides (pass `&|_| None` for none).
    pub fn from_toml_str(
        text: &str,
        base_dir: &Path,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        Self::parse(text, base_dir, "config", env)
    }

    fn parse(
        text: &str,
        base_dir: &Path,
        origin: &str,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut root: Table = text.parse().map_err(|source| ConfigError::Syntax {
            origin: origin.to_string(),
            source,
        })?;
        let applied = apply_env(&mut root, env)?;
        keys::check(&mut root).map_err(|e| e.blame_env(&applied))?;
        // `check` has vetted every key and type, so this only fails on a
        // mismatch between `keys` and the structs, which the tests would catch.
        let mut config: Config = Value::Table(root)
            .try_into()
            .map_err(|e: toml::de::Error| {
                ConfigError::key("(config)", e.to_string().trim_end().replace('\n', " "))
            })?;
        config.base_dir = base_dir.to_path_buf();
        config.finish().map_err(|e| e.blame_env(&applied))?;
        Ok(config)
    }

    /// Fills in defaults that depend on other keys and checks the rules that
    /// span keys, the first broken one as the error.
    fn finish(&mut self) -> Result<(), ConfigError> {
        self.finish_locations()?;
        self.queue.check_shards()?;
        self.check_catalog()?;
        // An HTTP caller names its table in the URL: letting it create any
        // name would let anyone with the token fill the catalog.
        if self.http.create_tables && self.routing.allow.is_empty() {
            return Err(ConfigError::key(
                "http.create_tables",
                "name the tables HTTP may create in routing.allow (e.g. [\"raw.*\"])",
            ));
        }
        let window = self.maintenance.orphan_window_ms() / 1000;
        self.maintenance.check_orphan_window(window, &self.queue)?;
        for (i, name) in self.maintenance.tables.iter().enumerate() {
            parse_table(name)
                .map_err(|e| ConfigError::key(format!("maintenance.tables[{i}]"), e.to_string()))?;
        }
        let c = &self.catalog;
        if c.client_id.is_some() != c.client_secret.is_some() {
            return Err(ConfigError::key(
                "catalog.client_secret",
                "OAuth2 needs both catalog.client_id and catalog.client_secret",
            ));
        }
        // Fixed mode without a table is the CLI's and the tests' case: the caller
        // names the table (`floe ingest NS.TABLE`); only records routed by these
        // rules need them complete.
        if self.routing.mode != RoutingMode::Fixed || self.routing.table.is_some() {
            Router::new(&self.routing)?;
        }
        self.check_sources()?;
        self.check_tables()
    }

    /// Defaults the warehouse to a local directory and checks every URI key.
    fn finish_locations(&mut self) -> Result<(), ConfigError> {
        match (&self.warehouse.path, &self.warehouse.uri) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::key(
                    "warehouse.uri",
                    "set either warehouse.path or warehouse.uri, not both",
                ));
            }
            (None, None) => self.warehouse.path = Some(PathBuf::from(DEFAULT_WAREHOUSE)),
            (None, Some(uri)) => check_uri("warehouse.uri", uri)?,
            (Some(_), None) => {}
        }
        if let Some(location) = &self.dead_letter.location
            && location.contains("://")
        {
            check_uri("dead_letter.location", location)?;
        }
        if let Some(endpoint) = &self.aws.endpoint {
            check_uri("aws.endpoint", endpoint)?;
        }
        if let Some(prefix) = &self.queue.claim_prefix {
            check_uri("queue.claim_prefix", prefix)?;
        }
        Ok(())
    }

    /// Checks that the catalog's keys are those of its type, and that a
    /// catalog keeping tables in object storage has a warehouse URI.
    fn check_catalog(&self) -> Result<(), ConfigError> {
        if self.catalog.kind != CatalogType::Sqlite && self.warehouse.uri.is_none() {
            return Err(ConfigError::key(
                "warehouse.uri",
                format!(
                    "catalog.type = \"{}\" keeps tables in object storage: set warehouse.uri = \"s3://bucket/prefix\"",
                    self.catalog.kind.name()
                ),
            ));
        }
        if self.catalog.catalog_id.is_some() && self.catalog.kind != CatalogType::Glue {
            return Err(ConfigError::key(
                "catalog.catalog_id",
                "only catalog.type = \"glue\" uses it",
            ));
        }
        let c = &self.catalog;
        if c.kind == CatalogType::Rest && c.uri.is_none() {
            return Err(ConfigError::key(
                "catalog.uri",
                "catalog.type = \"rest\" needs the catalog's base URI (FLOE_CATALOG_URI)",
            ));
        }
        let rest_only = [
            ("catalog.uri", c.uri.is_some()),
            ("catalog.prefix", c.prefix.is_some()),
            ("catalog.token", c.token.is_some()),
            ("catalog.client_id", c.client_id.is_some()),
            ("catalog.client_secret", c.client_secret.is_some()),
            ("catalog.oauth2_server_uri", c.oauth2_server_uri.is_some()),
            ("catalog.scope", c.scope.is_some()),
            ("catalog.sigv4_service", c.sigv4_service.is_some()),
        ];
        if let Some((key, _)) = rest_only
            .iter()
            .find(|(_, set)| *set && c.kind != CatalogType::Rest)
        {
            return Err(ConfigError::key(
                *key,
                "only catalog.type = \"rest\" uses it",
            ));
        }
        if c.path.is_some() && c.kind != CatalogType::Sqlite {
            return Err(ConfigError::key(
                "catalog.path",
                "only catalog.type = \"sqlite\" uses it",
            ));
        }
        Ok(())
    }

    /// Checks each source's registry and its credentials.
    fn check_sources(&self) -> Result<(), ConfigError> {
        for (name, source) in &self.sources {
            let at = keys::join(keys::SOURCES, name);
            if let Some(uri) = &source.registry {
                check_uri(&keys::join(&at, "registry"), uri)?;
            }
            if source.registry_username.is_some() != source.registry_password.is_some() {
                return Err(ConfigError::key(
                    keys::join(&at, "registry_password"),
                    "basic auth needs both registry_username and registry_password",
                ));
            }
            if source.registry.is_none() && source.registry_username.is_some() {
                return Err(ConfigError::key(
                    keys::join(&at, "registry_username"),
                    "only a source with a registry uses it",
                ));
            }
        }
        Ok(())
    }

    /// Checks each table's schema file and identifier fields.
    fn check_tables(&self) -> Result<(), ConfigError> {
        for (name, table) in &self.tables {
            let at = keys::join(keys::TABLES, name);
            if let Some(schema) = &table.schema {
                let file = self.resolve(schema);
                if !file.is_file() {
                    return Err(ConfigError::key(
                        keys::join(&at, "schema"),
                        format!("no schema file at {}", file.display()),
                    ));
                }
            }
            let mut seen = BTreeSet::new();
            for (i, field) in table.identifier_fields.iter().enumerate() {
                if !seen.insert(field.trim()) {
                    return Err(ConfigError::key(
                        format!("{at}.identifier_fields[{i}]"),
                        format!("{field:?} is listed twice"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Directory that relative paths in this config are relative to.
    pub fn base_dir(&self) -> &Path {
        &self.base_dir
    }

    /// A path from the config, made relative to the config file's directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            return path.to_path_buf();
        }
        let path = path.strip_prefix(".").unwrap_or(path);
        self.base_dir.join(path)
    }

    /// Where the warehouse is: `warehouse.uri`, else `warehouse.path` resolved.
    pub fn warehouse_location(&self) -> Location {
        match (&self.warehouse.uri, &self.warehouse.path) {
            (Some(uri), _) => Location::Uri(uri.trim_end_matches('/').to_string()),
            (None, Some(path)) => Location::Path(self.resolve(path)),
            (None, None) => Location::Path(self.resolve(Path::new(DEFAULT_WAREHOUSE))),
        }
    }

    /// Where rejected records go: `dead_letter.location`, else `<warehouse>/_floe/dlq`.
    pub fn dead_letter_location(&self) -> Location {
        match &self.dead_letter.location {
            Some(uri) if uri.contains("://") => {
                Location::Uri(uri.trim_end_matches('/').to_string())
            }
            Some(path) => Location::Path(self.resolve(Path::new(path))),
            None => self.warehouse_location().join(DEFAULT_DEAD_LETTER),
        }
    }

    /// Where the commit queue puts request bodies too large for SQS:
    /// `queue.claim_prefix`, else `<warehouse>/_floe/claims`.
    pub fn claim_prefix(&self) -> Location {
        match &self.queue.claim_prefix {
            Some(uri) => Location::Uri(uri.trim_end_matches('/').to_string()),
            None => self.warehouse_location().join(DEFAULT_CLAIMS),
        }
    }

    /// The settings of source `name` (a queue, stream, topic or DynamoDB
    /// table): its `[sources."name"]` section, else `[sources."*"]`, else the defaults.
    pub fn source(&self, name: &str) -> SourceConfig {
        self.sources
            .get(name)
            .or_else(|| self.sources.get("*"))
            .cloned()
            .unwrap_or_default()
    }

    /// The effective settings of table `name`: its section merged over `[defaults]`.
    pub fn table(&self, name: &str) -> ResolvedTable {
        let defaults = &self.defaults;
        let section = self.tables.get(name);
        let own = section.cloned().unwrap_or_default();
        let mut properties = defaults.properties.clone();
        properties.extend(own.properties);
        let merge_strategy = own.merge_strategy.unwrap_or(defaults.merge_strategy);
        // The committer reads the mode from the table, as every engine does;
        // keyed tables floe creates take position deletes unless told otherwise.
        match merge_strategy {
            MergeStrategy::CopyOnWrite => {
                for p in crate::keyed_mode::MODE_PROPERTIES {
                    properties
                        .entry(p.to_string())
                        .or_insert_with(|| "copy-on-write".to_string());
                }
            }
            MergeStrategy::EqualityDeletes => {
                properties
                    .entry(crate::keyed_mode::KEYED_DELETES.to_string())
                    .or_insert_with(|| "equality".to_string());
            }
            MergeStrategy::MergeOnRead => {}
        }
        ResolvedTable {
            name: name.to_string(),
            configured: section.is_some(),
            schema: own.schema.as_deref().map(|p| self.resolve(p)),
            partition: own.partition,
            sort: own.sort,
            identifier_fields: own.identifier_fields,
            properties,
            evolution: own.evolution.unwrap_or(defaults.evolution),
            unknown_fields: own.unknown_fields.unwrap_or(defaults.unknown_fields),
            format_version: own.format_version.unwrap_or(defaults.format_version),
            infer_timestamps: own.infer_timestamps.unwrap_or(defaults.infer_timestamps),
            infer_decimal_scale: own.infer_decimal_scale.or(defaults.infer_decimal_scale),
            case_insensitive: own.case_insensitive.unwrap_or(defaults.case_insensitive),
            epoch_unit: own.epoch_unit.unwrap_or(defaults.epoch_unit),
            widen_types: own.widen_types.unwrap_or(defaults.widen_types),
            relax_required: own.relax_required.unwrap_or(defaults.relax_required),
            coerce: own.coerce.unwrap_or_else(|| defaults.coerce.clone()),
            merge_strategy,
            order_changes_by: own.order_changes_by.or(defaults.order_changes_by),
            changelog: own.changelog.unwrap_or(defaults.changelog),
        }
    }
}

/// The `FLOE_<SECTION>_<KEY>` variable of every key of `section`, as `(key, variable)`.
pub fn env_vars(section: &str) -> Vec<(String, String)> {
    keys::SECTIONS
        .iter()
        .filter(|(s, _)| *s == section)
        .flat_map(|(s, keys)| {
            keys.iter()
                .map(move |k| (format!("{s}.{}", k.name), keys::env_var(s, k.name)))
        })
        .collect()
}

/// Applies `FLOE_<SECTION>_<KEY>` overrides; returns `(key path, variable)` of each.
fn apply_env(
    root: &mut Table,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut applied = Vec::new();
    let mut replaced = Vec::new();
    for (section, section_keys) in keys::SECTIONS {
        for key in *section_keys {
            let var = keys::env_var(section, key.name);
            let Some(text) = env(&var) else {
                continue;
            };
            let path = format!("{section}.{}", key.name);
            let entry = root
                .entry(section.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            let found = keys::type_name(entry);
            let Some(table) = entry.as_table_mut() else {
                return Err(ConfigError::key(
                    *section,
                    format!("expected a table ([{section}]), got {found}"),
                ));
            };
            if text.trim().is_empty() {
                table.remove(key.name);
            } else {
                let value = keys::parse_env(key.kind, &text).map_err(|m| ConfigError::Env {
                    var: var.clone(),
                    message: format!("{m} (overrides {path})"),
                })?;
                table.insert(key.name.to_string(), value);
                replaced.push(path.clone());
            }
            applied.push((path, var));
        }
    }
    // The file's `path` would otherwise clash with an `uri` from the
    // environment: they are two ways of saying one thing.
    let set = |k: &str| replaced.iter().any(|r| r == k);
    if let Some(Value::Table(w)) = root.get_mut("warehouse") {
        if set("warehouse.uri") && !set("warehouse.path") {
            w.remove("path");
        }
        if set("warehouse.path") && !set("warehouse.uri") {
            w.remove("uri");
        }
    }
    Ok(applied)
}

fn check_uri(key: &str, uri: &str) -> Result<(), ConfigError> {
    let ok = uri.split_once("://").is_some_and(|(scheme, rest)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !rest.trim_matches('/').is_empty()
    });
    if ok {
        Ok(())
    } else {
        Err(ConfigError::key(
            key,
            format!("expected a URI like s3://bucket/prefix, got {uri:?}"),
        ))
    }
}

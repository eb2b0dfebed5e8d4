//! floe's HTTP ingestion API, one implementation behind the Lambda function
//! (`functions/ingest-http`, through lambda_http) and `floe serve` (hyper on
//! a local address); both hand [`HttpIngest::handle`] a plain
//! `http::Request<Bytes>`.
//!
//! - `POST /v1/tables/{namespace}/{table}/records`: a JSON array or NDJSON
//!   body, written by floe's writer step and answered once its commit
//!   request is enqueued (durably: SQS, or `floe serve`'s spool). An
//!   `Idempotency-Key` is bound to the body it first came with, for the key
//!   window from its first receipt: a retry with the same key and body gets
//!   the first answer again and commits nothing twice, however late it
//!   comes within the window; the same key with another body gets 422.
//!   Without a key every POST is a new batch, equal bodies too.
//!   With a buffer ([`buffer`]: `http.buffer_stream` on AWS, `floe
//!   serve`'s `http.buffer_window_ms`), a POST without a key or
//!   `?wait=commit` is appended to it instead and answered 200 with
//!   `buffered: true` once the buffer holds it; the writer takes a window
//!   of POSTs as one batch per table, and dead-letters bad records then.
//!   A POST the buffer refuses (a throttled shard) is written directly.
//!   `?wait=commit` answers only once the batch is in the table (or after
//!   `http.wait_seconds`, or when `floe serve`'s committer reports it
//!   failing, with 202, `committed: false` and `commit_error`). Bad
//!   records: 400 naming each one's position and field (without its value
//!   under `http.redact_values`); the good ones are written all the same.
//! - `GET /v1/tables/{namespace}/{table}`: the last snapshot, total records and
//!   freshness.
//!
//! Every request needs `Authorization: Bearer <http.token>` or an IAM identity
//! AWS checked (the Lambda adapter marks such requests with [`IamCaller`]),
//! and a table `routing.allow` permits (403 otherwise). A table must exist
//! (404) unless `http.create_tables` is on; a body over `http.max_body_bytes`
//! or a record over `http.max_record_bytes` gets 413; records that would add
//! more than `http.max_new_columns` columns get 400 and nothing is written.

pub mod auth;
pub mod body;
pub mod buffer;
pub mod drain;
mod guard;
pub mod local;
pub mod order;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use iceberg::TableIdent;
use iceberg::spec::SchemaRef;
use serde_json::{Value, json};
use tracing::{Instrument, error, info, info_span, warn};

use crate::catalog::{CatalogError, CatalogRef};
use crate::clock::now_ms;
use crate::config::{Config, Secret};
use crate::deploy::Deployment;
use crate::error::{Classify, ErrorKind};
use crate::idempotency::{HttpKeys, KeyError, KeyOf, Receipt, Use};
use crate::ident::{display, parse_table};
use crate::pipeline::{PipelineError, Writer, WriterParts};
use crate::route::Allow;
use crate::source::SourceKind;
use crate::source::{Positions, SourceSpan, batch_id};
use crate::source::{Records, Source, SourceBatch};
use crate::status;
use buffer::Buffer;
use order::ReceiptOrder;
use watch::{CommitWatch, Mark};

/// Why the HTTP API could not start, read a body, or stop its committer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// `routing.allow` is not a list of table patterns.
    #[error(transparent)]
    Allow(#[from] crate::config::ConfigError),
    /// The writer step cannot be built.
    #[error(transparent)]
    Writer(#[from] PipelineError),
    /// A body that is not records (answered 400).
    #[error("body: not a JSON array of records: {0}")]
    Body(#[from] serde_json::Error),
    /// `floe serve`'s commit spool could not be opened.
    #[error("opening the commit spool: {0}")]
    Spool(#[from] crate::queue::QueueError),
    /// `floe serve`'s committer task panicked.
    #[error("the committer task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// `http.buffer_stream` names a Kinesis stream this deployment cannot reach.
    #[error("http.buffer_stream: {0}")]
    BufferStream(String),
    /// The order of receipts could not be read or reserved.
    #[error("the HTTP receipt order ({path}): {source}")]
    Order {
        /// Its reservation file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A body that is not records is the caller's to fix (a 400).
impl Classify for HttpError {
    fn kind(&self) -> ErrorKind {
        match self {
            HttpError::Allow(e) => e.kind(),
            HttpError::Writer(e) => e.kind(),
            HttpError::Body(_) => ErrorKind::Input,
            HttpError::Spool(e) => e.kind(),
            HttpError::Task(_) => ErrorKind::Interrupted,
            HttpError::Order { .. } => ErrorKind::Service,
            HttpError::BufferStream(_) => ErrorKind::Config,
        }
    }
}

/// A request extension saying AWS authenticated the caller (a Function URL
/// with `AWS_IAM` auth); callers cannot set it, only the Lambda adapter does.
#[derive(Debug, Clone, Copy)]
pub struct IamCaller;

/// The HTTP API's state, kept across requests (and Lambda invocations).
pub struct HttpIngest {
    writer: Writer,
    keys: HttpKeys,
    catalog: CatalogRef,
    config: Arc<Config>,
    token: Option<Secret>,
    allow: Allow,
    wait: Duration,
    /// Tables seen to exist. A stale schema only makes the column check
    /// reload; a stale uuid (the table dropped and created again) is
    /// checked before a key's record answers for it.
    tables: Mutex<HashMap<TableIdent, Known>>,
    /// The in-process committer's view, when it runs in this process.
    watch: Option<Arc<CommitWatch>>,
    /// The order requests are received in, for keyed tables.
    order: ReceiptOrder,
    /// Where POSTs without a key wait for the writer, when they do.
    buffer: Option<Arc<dyn Buffer>>,
}

/// Where a deployment orders its HTTP receipts: a reservation file under a
/// local warehouse (`_floe/http-order`), else this process's clock.
fn receipt_order(config: &crate::config::Config) -> Result<ReceiptOrder, HttpError> {
    match config.warehouse_location() {
        crate::config::Location::Path(dir) => {
            let path = dir.join("_floe").join("http-order");
            ReceiptOrder::open(path.clone()).map_err(|source| HttpError::Order {
                path: path.display().to_string(),
                source,
            })
        }
        crate::config::Location::Uri(_) => Ok(ReceiptOrder::in_memory()),
    }
}

/// The writer step of HTTP requests (and of the buffer's windows): the
/// deployment's, creating tables only with `http.create_tables`, whatever
/// `routing.create` says.
pub fn writer(deployment: &Deployment) -> Result<Writer, PipelineError> {
    let config = &deployment.config;
    let mut writer_config = (**config).clone();
    writer_config.routing.create = config.http.create_tables;
    Writer::new(WriterParts {
        catalog: deployment.catalog.clone(),
        queue: deployment.queue.clone(),
        dead_letters: deployment.dead_letters.clone(),
        faults: deployment.faults.clone(),
        counters: deployment.counters.clone(),
        config: Arc::new(writer_config),
    })
}

/// The Kinesis stream `http.buffer_stream` names, as a buffer.
fn stream_buffer(deployment: &Deployment) -> Result<Option<Arc<dyn Buffer>>, HttpError> {
    let Some(stream) = &deployment.config.http.buffer_stream else {
        return Ok(None);
    };
    #[cfg(feature = "aws")]
    if let Some(aws) = &deployment.aws {
        return Ok(Some(Arc::new(buffer::KinesisBuffer::new(
            aws.kinesis.clone(),
            stream,
        ))));
    }
    Err(HttpError::BufferStream(format!(
        "the Kinesis stream {stream} needs a deployment on AWS (a warehouse.uri and AWS settings); floe serve buffers with http.buffer_window_ms"
    )))
}

/// The span of a POST to `table` with batch key `key`, at `order` in the
/// order of receipts.
fn http_span(table: &str, key: &str, order: Option<crate::source::Position>) -> SourceSpan {
    SourceSpan {
        source: buffer::source_of(table),
        positions: Positions::Key {
            key: key.to_string(),
            order,
        },
        stream: false,
    }
}

/// The 503 for a request that got no place in the order of receipts.
fn unordered(table: &str, e: &std::io::Error) -> http::Response<Bytes> {
    error!(%table, error = %e, "no place in the order of receipts");
    reply(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": format!("ordering the request: {e}; retry")}),
    )
}

/// A table as the API last loaded it.
#[derive(Debug, Clone)]
struct Known {
    /// Its uuid: idempotency records belong to it.
    uuid: String,
    schema: SchemaRef,
}

/// The request's target: a table and whether it names its records.
enum Route {
    Records(TableIdent),
    Table(TableIdent),
}

impl HttpIngest {
    /// The API over a deployment's parts. Without `http.token` only requests
    /// marked [`IamCaller`] get in. Tables are created on first write only
    /// with `http.create_tables`, whatever `routing.create` says.
    pub fn new(deployment: &Deployment) -> Result<Self, HttpError> {
        let config = &deployment.config;
        Ok(Self {
            token: config.http.token.clone(),
            allow: Allow::of(&config.routing)?,
            wait: config.http.wait(),
            writer: writer(deployment)?,
            buffer: stream_buffer(deployment)?,
            keys: deployment.http_keys(),
            catalog: deployment.catalog.clone(),
            config: config.clone(),
            tables: Mutex::new(HashMap::new()),
            watch: None,
            order: receipt_order(config)?,
        })
    }

    /// Buffers POSTs without an Idempotency-Key in `buffer` (`floe
    /// serve`'s spool, drained by [`drain::LocalDrain`]).
    pub fn with_buffer(mut self, buffer: Arc<dyn Buffer>) -> Self {
        self.buffer = Some(buffer);
        self
    }

    /// Answers with what `watch` knows of failing commits (`floe serve`'s
    /// own committer): a `wait=commit` ends when the batch fails to commit,
    /// and answers for a failing table say why in `commit_error`.
    pub fn with_watch(mut self, watch: Arc<CommitWatch>) -> Self {
        self.watch = Some(watch);
        self
    }

    /// The largest body [`HttpIngest::handle`] takes; a server reading a
    /// request stream stops past it and answers [`HttpIngest::too_large`].
    pub fn max_body(&self) -> u64 {
        self.config.http.max_body()
    }

    /// The 413 for a body over [`HttpIngest::max_body`] (`len` when known).
    pub fn too_large(&self, len: Option<u64>) -> http::Response<Bytes> {
        let size = len.map_or_else(|| "the body".to_string(), |n| format!("body of {n} bytes"));
        reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": format!(
                "{size} is over the limit of {} bytes (http.max_body_bytes); split it",
                self.max_body()
            )}),
        )
    }

    /// Answers one request; every failure is an HTTP answer, never an error.
    pub async fn handle(&self, req: http::Request<Bytes>) -> http::Response<Bytes> {
        let span = info_span!("http", method = %req.method(), path = %req.uri().path());
        self.answer(req).instrument(span).await
    }

    async fn answer(&self, req: http::Request<Bytes>) -> http::Response<Bytes> {
        let header = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let iam = req.extensions().get::<IamCaller>().is_some();
        match auth::check(header, self.token.as_ref().map(Secret::expose), iam) {
            auth::Auth::Valid => {}
            auth::Auth::Missing => {
                let error = match self.token {
                    Some(_) => "missing bearer token: send Authorization: Bearer <token>",
                    None => {
                        "no IAM identity: sign the request with SigV4 for the Function URL (AWS_IAM auth)"
                    }
                };
                return reply(StatusCode::UNAUTHORIZED, json!({ "error": error }));
            }
            auth::Auth::Wrong => {
                return reply(StatusCode::FORBIDDEN, json!({"error": "invalid token"}));
            }
        }
        let route = match route(req.uri().path()) {
            Ok(r) => r,
            Err((status, message)) => return reply(status, json!({"error": message})),
        };
        let (Route::Records(ident) | Route::Table(ident)) = &route;
        if let Err(e) = self.allow.check(ident) {
            return reply(StatusCode::FORBIDDEN, json!({"error": e.to_string()}));
        }
        match (req.method(), route) {
            (&Method::POST, Route::Records(ident)) => self.post(&req, ident).await,
            (&Method::GET, Route::Table(ident)) => self.get(ident).await,
            _ => reply(
                StatusCode::METHOD_NOT_ALLOWED,
                json!({"error": "use POST /v1/tables/{namespace}/{table}/records or GET /v1/tables/{namespace}/{table}"}),
            ),
        }
    }

    /// The table as last loaded (`fresh`: as it is now), `None` when it
    /// does not exist.
    async fn known(&self, ident: &TableIdent, fresh: bool) -> Result<Option<Known>, String> {
        if !fresh && let Some(k) = self.cached(ident) {
            return Ok(Some(k));
        }
        match self.catalog.load_table(ident).await {
            Ok(loaded) => {
                let known = Known {
                    uuid: loaded.metadata.uuid().to_string(),
                    schema: loaded.metadata.current_schema().clone(),
                };
                if let Ok(mut cache) = self.tables.lock() {
                    cache.insert(ident.clone(), known.clone());
                }
                Ok(Some(known))
            }
            Err(CatalogError::NoSuchTable { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn cached(&self, ident: &TableIdent) -> Option<Known> {
        self.tables.lock().ok()?.get(ident).cloned()
    }

    /// The answer refusing the request before anything is written, if any:
    /// a record too large, a missing table, too many new columns.
    async fn refuse(
        &self,
        ident: &TableIdent,
        items: &[(String, Bytes)],
    ) -> Option<http::Response<Bytes>> {
        let table = display(ident);
        let limit = self.config.http.max_record();
        if let Some((pos, r)) = items.iter().find(|(_, r)| r.len() as u64 > limit) {
            return Some(reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": format!(
                    "{pos} is {} bytes, over the limit of {limit} bytes per record (http.max_record_bytes); nothing was written",
                    r.len()
                )}),
            ));
        }
        let schema = match self.known(ident, false).await {
            Ok(Some(k)) => k.schema,
            Ok(None) if self.config.http.create_tables => return None,
            Ok(None) => {
                return Some(reply(
                    StatusCode::NOT_FOUND,
                    json!({"error": format!(
                        "table {table} does not exist; create it, or set http.create_tables = true"
                    )}),
                ));
            }
            Err(e) => {
                error!(%table, error = %e, "cannot load the table");
                return Some(reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"error": format!("{e}; retry")}),
                ));
            }
        };
        let settings = self.config.table(&table);
        if !settings.evolution {
            return None;
        }
        let cap = self.config.http.max_new_columns();
        let keyed = schema.identifier_field_ids().next().is_some();
        let rows = guard::table_rows(items.iter().map(|(_, r)| &r[..]), keyed, settings.changelog);
        let count = |schema: &SchemaRef| {
            guard::new_columns(
                schema,
                rows.iter().map(|r| &r[..]),
                settings.case_insensitive,
                cap,
            )
        };
        let mut new = count(&schema);
        if new.len() > cap {
            // Another request may have added them since the schema was cached.
            if let Ok(Some(fresh)) = self.known(ident, true).await {
                new = count(&fresh.schema);
            }
        }
        if new.len() <= cap {
            return None;
        }
        let names: Vec<&str> = new.iter().map(String::as_str).take(cap + 1).collect();
        Some(reply(
            StatusCode::BAD_REQUEST,
            json!({
                "error": format!(
                    "the records would add more than {cap} columns to {table} (http.max_new_columns): {}; nothing was written. Add them with a table schema change, or raise the limit",
                    names.join(", ")
                ),
                "new_columns": names,
            }),
        ))
    }

    async fn post(&self, req: &http::Request<Bytes>, ident: TableIdent) -> http::Response<Bytes> {
        let wait = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "wait=commit"))
            .then(|| self.mark());
        let body: &[u8] = req.body();
        if body.len() as u64 > self.max_body() {
            return self.too_large(Some(body.len() as u64));
        }
        let items = match body::records(body) {
            Ok(items) => items,
            Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
        };
        if let Some(refused) = self.refuse(&ident, &items).await {
            return refused;
        }
        let table = display(&ident);
        let body_hash = HttpKeys::body_hash(body);
        let header_key = idempotency_key(req);
        let now = match self.order.next() {
            Ok(order) => Receipt {
                ms: now_ms(),
                order,
            },
            Err(e) => return unordered(&table, &e),
        };
        let key = batch_key(header_key.as_deref(), &body_hash);
        if let Some(buffer) = self.buffer_for(header_key.is_some(), wait.is_some(), body) {
            let id = post_id(&key);
            let post = buffer::encode(&table, id, &now, body);
            if let Some(answered) = self.buffered(buffer, &ident, id, post, items.len()).await {
                return answered;
            }
        }
        // The order is not part of the batch id: a retry is the same batch.
        let id = batch_id(&[http_span(&table, &key, None)], None);
        let (first, uuid) = match &header_key {
            None => (now, None),
            Some(k) => match self
                .first_receipt(&ident, k, &body_hash, &id, wait, now)
                .await
            {
                Ok(first) => first,
                Err(answered) => return answered,
            },
        };
        let spans = vec![http_span(&table, &key, Some(first.order.clone()))];
        let first_ms = first.ms;
        let batch = SourceBatch::new(
            Source::new(SourceKind::Http, "http"),
            spans,
            Records::Items(items),
        )
        .to_table(Some(ident.clone()))
        .oldest(Some(first_ms));
        let (status, answer) = match self.write(&table, &id, batch).await {
            Ok(written) => written,
            Err(refused) => return refused,
        };
        if let (Some(key), Some(uuid)) = (&header_key, &uuid) {
            let at = KeyOf {
                table: &table,
                uuid,
                key,
            };
            let answered = (status.as_u16(), answer.clone());
            self.remember(&at, &body_hash, &id, &first, answered).await;
        }
        self.conclude(&ident, &id, first_ms, wait, status, answer)
            .await
    }

    /// Records what a keyed POST's records became: the answer a retry
    /// gets (whether they are committed yet is asked anew each time).
    async fn remember(
        &self,
        at: &KeyOf<'_>,
        body_hash: &str,
        id: &str,
        first: &Receipt,
        answer: (u16, Value),
    ) {
        if let Err(e) = self.keys.finish(at, body_hash, id, first, answer).await {
            error!(table = at.table, error = %e, "idempotency record not written; a retry writes the batch again, which commits it once");
        }
    }

    /// The buffer a POST goes to: one without a key or `?wait=commit`
    /// whose body fits a buffered POST.
    fn buffer_for(&self, keyed: bool, wait: bool, body: &[u8]) -> Option<&dyn Buffer> {
        let buffer = self.buffer.as_deref()?;
        let fits = body.len() + HEADER_ROOM <= buffer::MAX_POST_BYTES;
        (!keyed && !wait && fits).then_some(buffer)
    }

    /// Appends a POST without a key to the buffer; the 200 says it is
    /// durable there, and the writer drains it with the other POSTs of its
    /// window. Its records are checked then: one that is bad is
    /// dead-lettered naming the table, the POST and its place in the body.
    /// `None` when the buffer refused it: the POST is written directly.
    async fn buffered(
        &self,
        buffer: &dyn Buffer,
        ident: &TableIdent,
        post_id: &str,
        post: Bytes,
        records: usize,
    ) -> Option<http::Response<Bytes>> {
        let table = display(ident);
        Some(match buffer.append(post).await {
            Ok(()) => {
                info!(%table, post = post_id, records, "records buffered");
                let mut answer =
                    json!({"table": table, "post": post_id, "records": records, "buffered": true});
                if let Some(why) = self.failing(&table) {
                    answer["commit_error"] = json!(why);
                }
                reply(StatusCode::OK, answer)
            }
            Err(e) if e.refused => {
                warn!(%table, post = post_id, error = %e, "buffer refused the POST; writing it directly");
                return None;
            }
            Err(e) => {
                error!(%table, post = post_id, error = %e, "not buffered");
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    // A lost answer may hide an append that landed: say so.
                    json!({"error": format!("{e}; the POST may or may not be buffered (send an Idempotency-Key to make retries safe)")}),
                )
            }
        })
    }

    /// When key `key` was first received, and the uuid of the table its
    /// record belongs to, for a POST that writes its body; the whole answer
    /// when it must not (a replay, a conflict, a failure). A retry is dated
    /// by its key's first receipt: the ledger looks for its batch from then
    /// on, however late the retry comes. Records belong to the table's
    /// uuid, so a key first used on a table since dropped and created again
    /// is a first use on the new one. A table not created yet keeps no
    /// record: a retry once it exists is a first use there, and its ledger
    /// commits the batch once.
    async fn first_receipt(
        &self,
        ident: &TableIdent,
        key: &str,
        body_hash: &str,
        id: &str,
        wait: Option<Mark>,
        now: Receipt,
    ) -> Result<(Receipt, Option<String>), http::Response<Bytes>> {
        let table = display(ident);
        let unavailable = |e: &dyn std::fmt::Display| {
            reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("{e}; retry with the same Idempotency-Key")}),
            )
        };
        let Some((uuid, used)) = self
            .key_use(ident, key, body_hash, id, &now)
            .await
            .map_err(|e| unavailable(&e))?
        else {
            return Ok((now, None));
        };
        let replay = |status: u16, answer, first_ms| async move {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            Err(self
                .conclude(ident, id, first_ms, wait, status, answer)
                .await)
        };
        match used {
            Ok(Use::Write { first }) => Ok((first, Some(uuid))),
            Ok(Use::Replay {
                status,
                answer,
                first_ms,
            }) => replay(status, answer, first_ms).await,
            Ok(Use::Lapsed {
                status,
                answer,
                first,
            }) => {
                let catalog = self.catalog.as_ref();
                match status::wait_for_batch(catalog, ident, id, first.ms, Duration::ZERO).await {
                    Ok(true) => replay(status, answer, first.ms).await,
                    Ok(false) => Ok((first, Some(uuid))),
                    Err(e) => Err(unavailable(&e)),
                }
            }
            Ok(Use::Conflict { first_ms }) => Err(reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"error": format!(
                    "Idempotency-Key {key:?} was first used at {} for a different body; send new records with a new key",
                    crate::shred::format_utc_millis(first_ms)
                )}),
            )),
            Err(e) => {
                error!(%table, error = %e, "idempotency record unreadable");
                Err(unavailable(&e))
            }
        }
    }

    /// The table's uuid and what its record lets a POST with `key` do;
    /// `None` while the table does not exist.
    async fn key_use(
        &self,
        ident: &TableIdent,
        key: &str,
        body_hash: &str,
        id: &str,
        now: &Receipt,
    ) -> Result<Option<(String, Result<Use, KeyError>)>, String> {
        let table = display(ident);
        let mut fresh = false;
        loop {
            let Some(known) = self.known(ident, fresh).await? else {
                return Ok(None);
            };
            let at = KeyOf {
                table: &table,
                uuid: &known.uuid,
                key,
            };
            match self.keys.begin(&at, body_hash, id, now).await {
                // Answering from a record: make sure it is this table's.
                Ok(Use::Replay { .. } | Use::Lapsed { .. } | Use::Conflict { .. }) if !fresh => {
                    fresh = true
                }
                used => return Ok(Some((known.uuid, used))),
            }
        }
    }

    /// Writes the batch and enqueues its commit request: the answer's status
    /// and body, or the 503 when that failed (nothing is acknowledged).
    async fn write(
        &self,
        table: &str,
        id: &str,
        batch: SourceBatch,
    ) -> Result<(StatusCode, Value), http::Response<Bytes>> {
        let records: HashMap<String, Bytes> = match (&batch.records, self.config.http.redact_values)
        {
            (Records::Items(items), true) => items.iter().cloned().collect(),
            _ => HashMap::new(),
        };
        let report = match self.writer.write(batch).await {
            Ok(r) => r,
            Err(e) => {
                error!(%table, batch_id = %id, error = %e, "write failed");
                let mut answer = json!({"error": format!("{e}; retry with the same Idempotency-Key"), "batch_id": id});
                if let Some(why) = self.failing(table) {
                    answer["commit_error"] = json!(why);
                }
                return Err(reply(StatusCode::SERVICE_UNAVAILABLE, answer));
            }
        };
        info!(%table, batch_id = %id, records = report.records, rejected = report.rejected.len(), "records written and their commit request enqueued");
        report
            .emf("ingest-http")
            .property("table", table)
            .property("batch_id", id)
            .emit();
        let mut answer = json!({
            "table": table,
            "batch_id": id,
            "records": report.records,
        });
        if report.rejected.is_empty() {
            return Ok((StatusCode::OK, answer));
        }
        let reason = |position: &str, reason: &str| match records.get(position) {
            Some(record) => crate::redact::redact(reason, record),
            None => reason.to_string(),
        };
        let rejected: Vec<Value> = report
            .rejected
            .iter()
            .map(|r| json!({"position": r.position, "field": r.field, "reason": reason(&r.position, &r.reason)}))
            .collect();
        let first = &report.rejected[0];
        answer["error"] = json!(format!(
            "{} record(s) rejected, the others written; first: {}{}: {}",
            report.rejected.len(),
            first.position,
            if first.field.is_empty() {
                String::new()
            } else {
                format!(", field {}", first.field)
            },
            reason(&first.position, &first.reason)
        ));
        answer["rejected"] = json!(rejected);
        answer["dead_letters"] = json!(report.dead_letter_locations);
        Ok((StatusCode::BAD_REQUEST, answer))
    }

    /// The answer to a written (or replayed) batch. With `?wait=commit`
    /// (`wait`: failures after this mark count), once it is in the table
    /// (`committed`), or 202 when it is not yet, saying why when known.
    async fn conclude(
        &self,
        ident: &TableIdent,
        id: &str,
        first_ms: i64,
        wait: Option<Mark>,
        mut status: StatusCode,
        mut answer: Value,
    ) -> http::Response<Bytes> {
        let table = display(ident);
        if let Some(mark) = wait {
            let (landed, why) = self.wait_for(ident, id, first_ms, mark).await;
            answer["committed"] = json!(landed);
            if let Some((field, why)) = why {
                answer[field] = json!(why);
            }
            if !landed && status == StatusCode::OK {
                status = StatusCode::ACCEPTED;
            }
        } else if let Some(why) = self.failing(&table) {
            answer["commit_error"] = json!(why);
        }
        reply(status, answer)
    }

    /// Whether batch `id`, first received at `first_ms`, is in the table,
    /// waiting up to `http.wait_seconds`; a failure the committer reports
    /// for it after `mark` ends the wait. Why it is not, as the answer's
    /// field (`commit_error`, `wait_error`) and text.
    async fn wait_for(
        &self,
        ident: &TableIdent,
        id: &str,
        first_ms: i64,
        mark: Mark,
    ) -> (bool, Option<(&'static str, String)>) {
        let catalog = self.catalog.as_ref();
        let landed = async {
            match status::wait_for_batch(catalog, ident, id, first_ms, self.wait).await {
                Ok(landed) => (landed, None),
                Err(e) => (false, Some(("wait_error", e.to_string()))),
            }
        };
        let Some(watch) = &self.watch else {
            return landed.await;
        };
        tokio::select! {
            waited = landed => waited,
            why = watch.failure_since(id, mark) => {
                // A commit whose answer was lost may have landed all the same.
                let landed = status::wait_for_batch(catalog, ident, id, first_ms, Duration::ZERO)
                    .await
                    .unwrap_or(false);
                (landed, (!landed).then_some(("commit_error", why)))
            }
        }
    }

    /// Where a wait begins: only failures the committer reports after it
    /// end the wait (a retry must not see its first try's failure).
    fn mark(&self) -> Mark {
        self.watch.as_ref().map(|w| w.mark()).unwrap_or_default()
    }

    /// Why this process's committer cannot commit `table`, if it knows.
    fn failing(&self, table: &str) -> Option<String> {
        let why = self.watch.as_ref()?.failing(table)?;
        Some(format!(
            "commits to {table} are failing: {why}; accepted requests stay queued and are retried"
        ))
    }

    async fn get(&self, ident: TableIdent) -> http::Response<Bytes> {
        match status::table_status(self.catalog.as_ref(), &ident, now_ms()).await {
            Ok(s) => reply(StatusCode::OK, json!(s)),
            Err(e @ CatalogError::NoSuchTable { .. }) => {
                reply(StatusCode::NOT_FOUND, json!({"error": e.to_string()}))
            }
            Err(e) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": e.to_string()}),
            ),
        }
    }
}

/// Room a buffered POST's header takes beside its body: a table name,
/// an id and a receipt.
const HEADER_ROOM: usize = 1024;

/// The id a POST without a key gets from its batch key (`post-<id>`).
fn post_id(key: &str) -> &str {
    key.strip_prefix("post-").unwrap_or(key)
}

/// The request's `Idempotency-Key`, when it has a non-blank one.
fn idempotency_key(req: &http::Request<Bytes>) -> Option<String> {
    req.headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
}

/// What names a POST's batch. With a key, the key and the body together: a
/// retry is the same batch, and a key reused for another body in a race
/// commits both, never drops one. Without a key, a fresh id: every POST is
/// new, as every message a Firehose or Kafka Connect sink sends is, so two
/// equal bodies are two batches (a client that must retry safely sends a
/// key).
fn batch_key(header_key: Option<&str>, body_hash: &str) -> String {
    match header_key {
        Some(k) => format!("{k}#{body_hash}"),
        None => format!("post-{}", uuid::Uuid::new_v4().simple()),
    }
}

/// The table a path names, and whether it is its `records` resource.
fn route(path: &str) -> Result<Route, (StatusCode, String)> {
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            format!("no such resource {path}; use /v1/tables/{{namespace}}/{{table}}[/records]"),
        )
    };
    // A stage name may precede the API's own path.
    let rest = path
        .split_once("/v1/tables/")
        .map(|(_, r)| r)
        .ok_or_else(not_found)?;
    let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let (ns, table, records) = match parts.as_slice() {
        [ns, table] => (ns, table, false),
        [ns, table, "records"] => (ns, table, true),
        _ => return Err(not_found()),
    };
    let ident = parse_table(&format!("{ns}.{table}"))
        .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
    Ok(if records {
        Route::Records(ident)
    } else {
        Route::Table(ident)
    })
}

fn reply(status: StatusCode, body: Value) -> http::Response<Bytes> {
    let mut resp = http::Response::new(Bytes::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_tables_and_their_records_behind_a_stage() {
        assert!(matches!(
            route("/prod/v1/tables/raw/events/records"),
            Ok(Route::Records(t)) if display(&t) == "raw.events"
        ));
        assert!(matches!(
            route("/v1/tables/raw/events/"),
            Ok(Route::Table(_))
        ));
        assert_eq!(
            route("/v1/other").err().map(|e| e.0),
            Some(StatusCode::NOT_FOUND)
        );
        assert_eq!(
            route("/v1/tables/raw/bad name").err().map(|e| e.0),
            Some(StatusCode::BAD_REQUEST)
        );
    }
}

//! floe's HTTP ingestion function (API Gateway HTTP API or a function URL):
//!
//! - `POST /v1/tables/{namespace}/{table}/records`: a JSON array or NDJSON
//!   body, written by floe's writer step. An `Idempotency-Key` is bound to
//!   the body it first came with: a retry with the same key and body gets the
//!   first answer again (and commits nothing twice), the same key with another
//!   body gets 422. Without a key, the same body to the same table is one
//!   batch. `?wait=commit` answers only once the batch is in the table
//!   (or after `http.wait_seconds`, with 202). Bad records: 400 naming each
//!   one's position and field; the good ones are written all the same.
//! - `GET /v1/tables/{namespace}/{table}`: the last snapshot, total records and
//!   freshness.
//!
//! Every request needs `Authorization: Bearer <http.token>` or an IAM identity
//! AWS checked (Function URL with `AWS_IAM` auth), and a table `routing.allow`
//! permits (403 otherwise).

pub mod auth;
pub mod body;

use std::time::Duration;

use floe_core::catalog::{CatalogError, CatalogRef};
use floe_core::clock::now_ms;
use floe_core::config::Secret;
use floe_core::deploy::Deployment;
use floe_core::iceberg::TableIdent;
use floe_core::idempotency::{HttpKeys, Use};
use floe_core::ident::parse_table;
use floe_core::pipeline::{PipelineError, Records, Source, SourceBatch, Writer};
use floe_core::route::{Allow, SourceKind};
use floe_core::source::{Positions, SourceSpan, batch_id};
use floe_core::status;
use lambda_http::http::{Method, StatusCode};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::{Value, json};
use tracing::{error, info};

/// Why the function cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HttpSetupError {
    /// `routing.allow` is not a list of table patterns.
    #[error(transparent)]
    Allow(#[from] floe_core::config::ConfigError),
    /// The writer step cannot be built.
    #[error(transparent)]
    Writer(#[from] PipelineError),
}

/// The HTTP function's state, kept across invocations of one instance.
pub struct HttpFunction {
    writer: Writer,
    keys: HttpKeys,
    catalog: CatalogRef,
    token: Option<Secret>,
    allow: Allow,
    max_body: u64,
    wait: Duration,
}

/// The request's target: a table and whether it names its records.
enum Route {
    Records(TableIdent),
    Table(TableIdent),
}

impl HttpFunction {
    /// The function over a deployment. Without `http.token` only requests
    /// AWS authenticated (Function URL `AWS_IAM`) get in.
    pub fn new(deployment: &Deployment) -> Result<Self, HttpSetupError> {
        let http = &deployment.config.http;
        Ok(Self {
            token: http.token.clone(),
            allow: Allow::of(&deployment.config.routing)?,
            max_body: http.max_body(),
            wait: http.wait(),
            writer: deployment.writer()?,
            keys: deployment.http_keys(),
            catalog: deployment.catalog.clone(),
        })
    }

    /// Answers one request; every failure is an HTTP answer, never an invocation error.
    pub async fn handle(&self, req: Request) -> Response<Body> {
        let header = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let iam = req
            .request_context_ref()
            .and_then(|c| c.authorizer())
            .is_some_and(|a| a.iam.is_some());
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

    async fn post(&self, req: &Request, ident: TableIdent) -> Response<Body> {
        let body: &[u8] = req.body().as_ref();
        if body.len() as u64 > self.max_body {
            return reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"error": format!("body of {} bytes is over the limit of {} (http.max_body_bytes); split it", body.len(), self.max_body)}),
            );
        }
        let items = match body::records(body) {
            Ok(items) => items,
            Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
        };
        let table = floe_core::ident::display(&ident);
        let body_hash = HttpKeys::body_hash(body);
        let header_key = req
            .headers()
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string);
        // The batch is the key and the body together: a key reused for
        // another body in a race still commits both, never drops one.
        let key = match &header_key {
            Some(k) => format!("{k}#{body_hash}"),
            None => format!("body-{body_hash}"),
        };
        let spans = vec![SourceSpan {
            source: format!("http:{table}"),
            positions: Positions::Key { key },
            stream: false,
        }];
        let id = batch_id(&spans, None);
        let received = now_ms();
        let wait = req
            .query_string_parameters_ref()
            .and_then(|q| q.first("wait"))
            == Some("commit");
        if let Some(k) = &header_key {
            match self.keys.begin(&table, k, &body_hash, &id, received).await {
                Ok(Use::Write) => {}
                Ok(Use::Replay(status, mut answer)) => {
                    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                    if wait && status == StatusCode::OK {
                        answer["committed"] = json!(self.committed(&ident, &id, received).await);
                    }
                    return reply(status, answer);
                }
                Ok(Use::Conflict { first_ms }) => {
                    return reply(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        json!({"error": format!(
                            "Idempotency-Key {k:?} was first used at {} for a different body; send new records with a new key",
                            floe_core::shred::format_utc_millis(first_ms)
                        )}),
                    );
                }
                Err(e) => {
                    error!(%table, error = %e, "idempotency record unreadable");
                    return reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({"error": format!("{e}; retry with the same Idempotency-Key")}),
                    );
                }
            }
        }
        let batch = SourceBatch {
            source: Source {
                kind: SourceKind::Http,
                name: "http".into(),
            },
            table: Some(ident.clone()),
            batch_id: id.clone(),
            spans,
            records: Records::Items(items),
            state: Default::default(),
            oldest_ms: Some(received),
        };
        let report = match self.writer.write(batch).await {
            Ok(r) => r,
            Err(e) => {
                error!(%table, batch_id = %id, error = %e, "write failed");
                return reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"error": format!("{e}; retry with the same Idempotency-Key"), "batch_id": id}),
                );
            }
        };
        info!(%table, batch_id = %id, records = report.records, rejected = report.rejected.len(), "records written and their commit request enqueued");
        report
            .emf("ingest-http")
            .property("table", table.as_str())
            .property("batch_id", id.as_str())
            .emit();
        let mut answer = json!({
            "table": table,
            "batch_id": id,
            "records": report.records,
        });
        let mut status = StatusCode::OK;
        let mut wait_error = None;
        if !report.rejected.is_empty() {
            let rejected: Vec<Value> = report
                .rejected
                .iter()
                .map(|r| json!({"position": r.position, "field": r.field, "reason": r.reason}))
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
                first.reason
            ));
            answer["rejected"] = json!(rejected);
            answer["dead_letters"] = json!(report.dead_letter_locations);
            status = StatusCode::BAD_REQUEST;
        }
        // What the records became is the answer a retry gets; whether they
        // are committed yet is asked anew each time.
        if let Some(k) = &header_key
            && let Err(e) = self
                .keys
                .finish(
                    &table,
                    k,
                    &body_hash,
                    &id,
                    received,
                    (status.as_u16(), answer.clone()),
                )
                .await
        {
            error!(%table, error = %e, "idempotency record not written; a retry writes the batch again, which commits it once");
        }
        if wait {
            match status::wait_for_batch(self.catalog.as_ref(), &ident, &id, received, self.wait)
                .await
            {
                Ok(true) => answer["committed"] = json!(true),
                Ok(false) => answer["committed"] = json!(false),
                Err(e) => {
                    answer["committed"] = json!(false);
                    wait_error = Some(e.to_string());
                }
            }
            if let Some(e) = wait_error {
                answer["wait_error"] = json!(e);
            }
            if answer["committed"] == json!(false) && status == StatusCode::OK {
                status = StatusCode::ACCEPTED;
            }
        }
        reply(status, answer)
    }

    /// Whether batch `id` is in the table, waiting as `?wait=commit` does.
    async fn committed(&self, ident: &TableIdent, id: &str, made_ms: i64) -> bool {
        status::wait_for_batch(self.catalog.as_ref(), ident, id, made_ms, self.wait)
            .await
            .unwrap_or(false)
    }

    async fn get(&self, ident: TableIdent) -> Response<Body> {
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

fn reply(status: StatusCode, body: Value) -> Response<Body> {
    let mut resp = Response::new(Body::Text(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        "content-type",
        lambda_http::http::HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            "www-authenticate",
            lambda_http::http::HeaderValue::from_static("Bearer"),
        );
    }
    resp
}

//! `floe serve`: the ingest function's HTTP API ([`floe_core::http`], the
//! same code the Lambda runs) on a local address, over the deployment the
//! config describes. With the embedded warehouse (or any deployment without
//! `queue.url`) the writers and one committer run in this process, meeting
//! in a spool under the warehouse (`_floe/commit-queue/`): a POST is
//! answered once its commit request is on disk, so a 200 survives `kill -9`
//! and the next start commits it. On shutdown (Ctrl-C, SIGTERM) it stops
//! taking connections, finishes the requests in flight and commits what it
//! can; what it cannot (a table whose commits fail) stays in the spool, and
//! it exits 0, since nothing acknowledged is lost.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use floe_core::deploy::Deployment;
use floe_core::http::HttpIngest;
use floe_core::http::drain::LocalDrain;
use floe_core::http::local::{Leftover, LocalCommits};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::out::outln;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the first line printed names it).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Milliseconds the committer gathers requests after the first arrives.
    #[arg(long, default_value_t = 500)]
    pub commit_window_ms: u64,
    /// Bearer token callers present (`Authorization: Bearer …`) [default:
    /// the config's http.token]; main puts it in the config.
    #[arg(long, env = "FLOE_HTTP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

pub async fn run(mut deployment: Deployment, args: ServeArgs) -> Result<()> {
    if deployment.config.http.token.is_none() {
        // Nothing here puts an IAM identity on a request (a Function URL
        // does), so without a token every POST would be refused.
        eprintln!(
            "floe serve: warning: no token configured (--token, FLOE_HTTP_TOKEN or [http] token): \
             every request will be refused with 401"
        );
    }
    // Without an SQS queue, the writers' requests wait in a spool under the
    // warehouse for the committer here: a POST is answered once its request
    // is on disk, and what a killed process left is committed first.
    let local = if deployment.queue_urls().is_empty() {
        let window = Duration::from_millis(args.commit_window_ms);
        let commits = LocalCommits::start(&deployment, window)
            .await
            .context("cannot open the commit spool")?;
        deployment.queue = commits.queue();
        Some(commits)
    } else {
        None
    };
    let mut api = HttpIngest::new(&deployment).context("cannot start the HTTP API")?;
    if let Some(commits) = &local {
        api = api.with_watch(commits.watch());
    }
    let drain = start_buffer(&deployment).await?;
    if let Some(drain) = &drain {
        api = api.with_buffer(drain.buffer());
    }
    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let addr = listener.local_addr()?;
    let shutdown = shutdown_signal();
    outln!("floe serve: listening on http://{addr}");
    match (&local, &deployment.queue_urls()[..]) {
        (Some(commits), _) => {
            outln!(
                "floe serve: committing in this process; accepted requests wait in {} until committed",
                commits.location()
            );
            if commits.recovered() > 0 {
                outln!(
                    "floe serve: committing {} request(s) a previous run accepted",
                    commits.recovered()
                );
            }
        }
        (None, [url]) => {
            outln!("floe serve: commit requests go to {url} for the deployment's committer")
        }
        (None, urls) => outln!(
            "floe serve: commit requests go to their table's shard of {} for the deployment's committers",
            urls.join(", ")
        ),
    }
    if let Some(drain) = &drain {
        announce_buffer(drain, deployment.config.http.buffer_window_ms.unwrap_or(0));
    }
    serve_http(listener, Arc::new(api), None, shutdown).await;
    if let Some(drain) = drain {
        stop_buffer(drain).await?;
    }
    if let Some(commits) = local {
        outln!("floe serve: stopping; committing what was acknowledged");
        let left = commits
            .stop()
            .await
            .context("committing the acknowledged requests")?;
        report_leftover(&left);
    }
    outln!("floe serve: stopped");
    Ok(())
}

/// With `http.buffer_window_ms`, the buffer POSTs without a key wait in and
/// the task that writes them a window at a time: one file per table per
/// window, however small the POSTs.
async fn start_buffer(deployment: &Deployment) -> Result<Option<LocalDrain>> {
    let Some(ms) = deployment.config.http.buffer_window_ms.filter(|ms| *ms > 0) else {
        return Ok(None);
    };
    let drain = LocalDrain::start(deployment, Duration::from_millis(ms))
        .await
        .context("cannot open the HTTP buffer")?;
    Ok(Some(drain))
}

/// Where POSTs are buffered, once the address is out (the first line).
fn announce_buffer(drain: &LocalDrain, window_ms: u64) {
    outln!(
        "floe serve: POSTs without an Idempotency-Key are buffered in {} and written every {window_ms} ms",
        drain.location()
    );
    if drain.recovered() > 0 {
        outln!(
            "floe serve: writing {} POST(s) a previous run buffered",
            drain.recovered()
        );
    }
}

/// Writes what the buffer holds; what it cannot stays for the next start.
async fn stop_buffer(drain: LocalDrain) -> Result<()> {
    let left = drain.stop().await.context("writing the buffered POSTs")?;
    if left > 0 {
        outln!(
            "floe serve: {left} buffered POST(s) stay in the buffer; the next floe serve on this warehouse writes them"
        );
    }
    Ok(())
}

/// What could not be committed before stopping: durable in the spool, so
/// not an error, but the user should know which tables fail and why.
fn report_leftover(left: &Leftover) {
    if left.queued == 0 {
        return;
    }
    outln!(
        "floe serve: {} accepted request(s) stay queued in {}; the next floe serve on this warehouse commits them",
        left.queued,
        left.location
    );
    for (table, why) in &left.failing {
        outln!("floe serve: commits to {table} are failing: {why}");
    }
}

/// Serves `api` on `listener` until `shutdown` resolves, then stops taking
/// connections and returns once every request in flight has its answer (so
/// every acknowledged batch's commit request is enqueued by then).
pub async fn serve_http(
    listener: TcpListener,
    api: Arc<HttpIngest>,
    iam: Option<SignatureCheck>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        debug!(error = %e, "accept failed");
                        continue;
                    }
                };
                let (api, iam) = (api.clone(), iam.clone());
                let service = hyper::service::service_fn(move |req| {
                    let (api, iam) = (api.clone(), iam.clone());
                    async move { Ok::<_, Infallible>(answer(&api, iam.as_deref(), req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        debug!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    info!("no new connections; finishing the requests in flight");
    graceful.shutdown().await;
}

/// Checks a request's AWS signature before the function sees it, as a
/// Function URL with `AWS_IAM` auth does: `None` when it is not signed.
pub type SignatureCheck = Arc<Check>;

/// What a [`SignatureCheck`] calls.
type Check = dyn Fn(&http::request::Parts, &[u8]) -> Option<Result<(), String>> + Send + Sync;

/// Reads the body (at most the API's limit), checks a signature, and hands
/// the request over.
async fn answer(
    api: &HttpIngest,
    iam: Option<&Check>,
    req: http::Request<Incoming>,
) -> http::Response<Full<Bytes>> {
    let (mut parts, body) = req.into_parts();
    let limit = api.max_body();
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared.filter(|&n| n > limit) {
        return api.too_large(Some(len)).map(Full::new);
    }
    let body = match Limited::new(body, limit as usize).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return api.too_large(None).map(Full::new);
        }
        Err(e) => {
            let mut resp = http::Response::new(Full::new(Bytes::from(
                serde_json::json!({"error": format!("reading the request body: {e}")}).to_string(),
            )));
            *resp.status_mut() = http::StatusCode::BAD_REQUEST;
            return resp;
        }
    };
    match iam.and_then(|check| check(&parts, &body)) {
        Some(Ok(())) => {
            parts.extensions.insert(floe_core::http::IamCaller);
        }
        Some(Err(why)) => {
            let mut resp = http::Response::new(Full::new(Bytes::from(
                serde_json::json!({"error": format!("SigV4: {why}")}).to_string(),
            )));
            *resp.status_mut() = http::StatusCode::FORBIDDEN;
            return resp;
        }
        None => {}
    }
    api.handle(http::Request::from_parts(parts, body))
        .await
        .map(Full::new)
}

/// Ctrl-C or SIGTERM.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    // Registered now, not when first polled: a SIGTERM sent as soon as the
    // address is printed must stop the server, not kill it.
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let term = async {
            match term {
                Ok(mut s) => {
                    s.recv().await;
                }
                // No SIGTERM handler: Ctrl-C still works.
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
}

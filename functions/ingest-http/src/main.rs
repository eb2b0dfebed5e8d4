//! The HTTP ingestion Lambda's entry point: configuration and logging at
//! start-up, then `lambda_http`'s loop around
//! [`floe_ingest_http::HttpFunction::handle`].

use std::sync::Arc;

use anyhow::Context as _;
use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::faults::Faults;
use floe_ingest_http::HttpFunction;
use lambda_http::{Request, service_fn};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging();
    // Bad config fails the init phase, naming the key, before any request is taken.
    let deployment = match start().await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "cannot start");
            return Err(e);
        }
    };
    let function = Arc::new(HttpFunction::new(&deployment).context("cannot start")?);
    lambda_http::run(service_fn(move |req: Request| {
        let function = function.clone();
        async move { Ok::<_, std::convert::Infallible>(function.handle(req).await) }
    }))
    .await
    .map_err(|e| anyhow::anyhow!(e))
}

/// The deployment the config describes; errors name the key at fault.
async fn start() -> anyhow::Result<Deployment> {
    let config = Config::load(None)?;
    Ok(Deployment::from_config(config, Faults::from_env()?).await?)
}

/// JSON lines on stdout, which CloudWatch Logs indexes; `RUST_LOG` filters.
fn init_logging() {
    tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .without_time()
        .init();
}

//! The HTTP ingestion Lambda's entry point: configuration and logging at
//! start-up, then `lambda_http`'s loop around
//! [`floe_ingest_http::HttpFunction::handle`].

use std::sync::Arc;

use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::faults::Faults;
use floe_ingest_http::HttpFunction;
use lambda_http::{Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    init_logging();
    // Bad config fails the init phase, naming the key, before any request is taken.
    let config = Config::load(None)?;
    let deployment = Deployment::from_config(config, Faults::from_env()?).await?;
    let function = Arc::new(HttpFunction::new(&deployment)?);
    lambda_http::run(service_fn(move |req: Request| {
        let function = function.clone();
        async move { Ok::<_, std::convert::Infallible>(function.handle(req).await) }
    }))
    .await
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

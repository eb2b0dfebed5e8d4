//! The committer Lambda's entry point: configuration and logging at start-up,
//! then the runtime loop around [`floe_committer::CommitterFunction::handle`].

use std::sync::Arc;

use anyhow::Context as _;
use floe_committer::CommitterFunction;
use floe_core::config::Config;
use floe_core::deploy::Deployment;
use floe_core::faults::Faults;
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging();
    // Bad config fails the init phase, naming the key, before any event is taken.
    let deployment = match start().await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "cannot start");
            return Err(e);
        }
    };
    let function = Arc::new(CommitterFunction::new(&deployment).context("cannot start")?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let function = function.clone();
        async move {
            function
                .handle(event.payload)
                .await
                .map_err(lambda_runtime::Error::from)
        }
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

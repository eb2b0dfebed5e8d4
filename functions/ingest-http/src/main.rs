//! The HTTP ingestion Lambda's entry point: configuration and logging at
//! start-up, then `lambda_http`'s loop around
//! [`floe_ingest_http::HttpFunction::handle`].

use std::sync::Arc;

use anyhow::Context as _;
use floe_core::deploy::{Deployment, Role};
use floe_ingest_http::HttpFunction;
use lambda_http::{Request, service_fn};

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Deployment::init_logging();
    let deployment = Deployment::from_env(Role::Ingest).await?;
    let function = Arc::new(HttpFunction::new(&deployment).context("cannot start")?);
    lambda_http::run(service_fn(move |req: Request| {
        let function = function.clone();
        async move { Ok::<_, std::convert::Infallible>(function.handle(req).await) }
    }))
    .await
    .map_err(|e| anyhow::anyhow!(e))
}

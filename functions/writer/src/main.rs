//! The writer Lambda's entry point: configuration and logging at start-up,
//! then the runtime loop around [`floe_writer::WriterFunction::handle`].

use std::sync::Arc;

use anyhow::Context as _;
use floe_core::deploy::{Deployment, Role};
use floe_writer::{WriterEvent, WriterFunction};
use lambda_runtime::{LambdaEvent, service_fn};

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Deployment::init_logging();
    let deployment = Deployment::from_env(Role::Writer).await?;
    let function = Arc::new(WriterFunction::new(&deployment).context("cannot start")?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<WriterEvent>| {
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

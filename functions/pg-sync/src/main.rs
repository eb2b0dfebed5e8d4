//! The pg-sync Lambda's entry point: configuration and logging at start-up,
//! then the runtime loop around [`floe_pg_sync::PgSyncFunction::handle`],
//! each invocation bounded by its deadline.

use std::sync::Arc;

use floe_core::deploy::{Deployment, Role};
use floe_pg_sync::{PgSyncFunction, run_deadline};
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Deployment::init_logging();
    let deployment = Deployment::from_env(Role::PgSync).await?;
    let function = Arc::new(PgSyncFunction::new(&deployment)?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let function = function.clone();
        async move {
            let deadline = run_deadline(event.context.deadline, floe_core::clock::now_ms());
            function
                .handle(event.payload, Some(deadline))
                .await
                .map_err(lambda_runtime::Error::from)
        }
    }))
    .await
    .map_err(|e| anyhow::anyhow!(e))
}

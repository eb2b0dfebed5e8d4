//! The maintenance Lambda's entry point: configuration and logging at
//! start-up, then the runtime loop around
//! [`floe_maintenance::MaintenanceFunction::handle`].

use std::sync::Arc;

use floe_core::deploy::{Deployment, Role};
use floe_maintenance::MaintenanceFunction;
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Deployment::init_logging();
    let deployment = Deployment::from_env(Role::Maintenance).await?;
    let function = Arc::new(MaintenanceFunction::new(&deployment));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let function = function.clone();
        async move {
            function
                .handle(event.payload, floe_maintenance::deadline_of(&event.context))
                .await
                .map_err(lambda_runtime::Error::from)
        }
    }))
    .await
    .map_err(|e| anyhow::anyhow!(e))
}

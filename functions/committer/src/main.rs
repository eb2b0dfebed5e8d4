//! The committer Lambda's entry point: configuration and logging at start-up,
//! then the runtime loop around [`floe_committer::CommitterFunction::handle`].

use std::sync::Arc;

use anyhow::Context as _;
use aws_lambda_events::event::sqs::SqsEvent;
use floe_committer::CommitterFunction;
use floe_core::deploy::{Deployment, Role};
use lambda_runtime::{LambdaEvent, service_fn};

/// mimalloc, not the system's malloc: see [`floe_core::memory`].
#[global_allocator]
static ALLOCATOR: floe_core::memory::Allocator = floe_core::memory::Allocator {};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Deployment::init_logging();
    let deployment = Deployment::from_env(Role::Committer).await?;
    let function = Arc::new(CommitterFunction::new(&deployment).context("cannot start")?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let function = function.clone();
        async move {
            let deadline = floe_committer::deadline_of(&event.context);
            Ok::<_, lambda_runtime::Error>(function.handle(event.payload, deadline).await)
        }
    }))
    .await
    .map_err(|e| anyhow::anyhow!(e))
}

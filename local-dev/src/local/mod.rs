//! `floe local`: the four functions' real handlers on local stand-ins of S3,
//! SQS and Glue (moto, or MinIO / s3s-fs / ElasticMQ through the SDK's
//! `AWS_ENDPOINT_URL_<SERVICE>` variables), driven the way AWS drives them:
//!
//! - the commit queue feeds the committer through an emulated SQS event
//!   source mapping: batch size, batching window, reserved concurrency 1
//!   (one invocation at a time), partial batch responses (the messages it
//!   names stay and come back after the visibility timeout), and the
//!   queue's own redrive to its dead-letter queue after `maxReceiveCount`;
//! - a source queue feeds the writer the same way (several pollers), and
//!   the bucket announces objects put under `incoming/` to it;
//! - a Kinesis stream and a DynamoDB table's stream feed the writer shard
//!   by shard ([`streams`]);
//! - the HTTP function appends POSTs without an `Idempotency-Key` or
//!   `?wait=commit` to the HTTP buffer stream (`NAME-http-buffer`, one
//!   shard, as the module creates it), which feeds the writer a window at
//!   a time, shard by shard; `--no-http-buffer` writes each POST as its
//!   own file instead;
//! - with `--kafka`, a topic on a Kafka-compatible broker feeds the writer
//!   partition by partition with MSK's event ([`kafka`]);
//! - the HTTP function answers on a local port, to the bearer token or to
//!   a request SigV4-signed with the stack's credentials ([`iam`]);
//! - the maintenance function runs on a timer.
//!
//! It creates what it needs first (bucket, queues with redrive, the Glue
//! database) and writes `<state>/floe.toml`, the deployment's config, so
//! `floe --config <state>/floe.toml status` (or `table show`, `dlq list`)
//! looks at the same stack.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use clap::Args;
use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::{CatalogType, Config, Secret};
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::http::HttpIngest;
use floe_maintenance::MaintenanceFunction;
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::json;
use tokio::net::TcpListener;
use tracing::{Instrument, info, warn};

use crate::out::outln;

mod iam;
mod kafka;
mod streams;

use streams::{Batching, Kind, Stream};

#[derive(Debug, Args)]
pub struct LocalArgs {
    /// One endpoint for S3, SQS and Glue (moto: `local-dev/aws.sh` prints
    /// it). Unset: the SDK's AWS_ENDPOINT_URL_S3 / _SQS / _GLUE or
    /// AWS_ENDPOINT_URL, for services on different endpoints.
    #[arg(long, env = "FLOE_LOCAL_ENDPOINT")]
    endpoint: Option<String>,
    /// Name of the bucket, the queues (`NAME-commits`, `NAME-source`, each
    /// with a `-dlq`) and the state directory's files.
    #[arg(long, default_value = "floe-local")]
    name: String,
    /// Where the config of the stack (`floe.toml`) and the SQLite catalog go.
    #[arg(long, default_value = "./floe-local")]
    state_dir: PathBuf,
    /// `glue` (on the endpoint) or `sqlite` (a file in the state directory).
    #[arg(long, default_value = "glue")]
    catalog: String,
    /// The HTTP function's address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// Bearer token of the HTTP function [default: http.token, else `local`].
    #[arg(long)]
    token: Option<String>,
    /// Committer event source: most messages per invocation.
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    /// Committer event source: how long it gathers a batch, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    batching_window_ms: u64,
    /// Visibility timeout of both queues, in seconds: how long a message a
    /// function failed stays hidden before it is delivered again.
    #[arg(long, default_value_t = 30)]
    visibility_timeout_s: u32,
    /// The functions' timeout, in seconds: the committer releases the tables
    /// it cannot commit in time (the module's `committer_timeout`).
    #[arg(long, default_value_t = 300)]
    function_timeout_s: u64,
    /// Receives before SQS moves a message to the queue's dead-letter queue.
    #[arg(long, default_value_t = 5)]
    max_receive_count: u32,
    /// Concurrent writer invocations on the source queue.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Source queue event source: most messages per writer invocation (the
    /// module's `sqs_sources` default is 1,000; fewer answer sooner here).
    #[arg(long, default_value_t = 10)]
    source_batch_size: usize,
    /// Source queue event source: how long it gathers a batch, in
    /// milliseconds (the module's default is 10,000). Larger batches make
    /// fewer, larger files: what a record costs follows them.
    #[arg(long, default_value_t = 0)]
    source_batching_window_ms: u64,
    /// HTTP buffer stream event source: most POSTs per writer invocation
    /// (the module's 10,000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    http_buffer_batch_size: usize,
    /// HTTP buffer stream event source: how long it gathers POSTs before it
    /// invokes the writer, in milliseconds (the module's
    /// `http_buffer_window_seconds`, 60). Buffered records reach their
    /// table about this plus the committer's window after their POST.
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(0..=300_000))]
    http_buffer_window_ms: u64,
    /// Shards of the HTTP buffer stream (the module's `http_buffer_shards`,
    /// 1): each takes 1 MB/s of POSTs on AWS, past which a POST is written
    /// directly.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    http_buffer_shards: u32,
    /// No HTTP buffer stream: every POST writes its own file, as the module
    /// does with `http_buffer = false`.
    #[arg(long)]
    no_http_buffer: bool,
    /// Seconds between runs of the maintenance function.
    #[arg(long, default_value_t = 3_600)]
    maintenance_every_s: u64,
    /// A Kafka-compatible broker (`host:port`; `local-dev/kafka.sh` starts
    /// one): the topic `NAME-topic` on it feeds the writer as MSK does.
    #[arg(long, env = "FLOE_LOCAL_KAFKA")]
    kafka: Option<String>,
}

/// An emulated SQS event source mapping of one function.
struct Mapping {
    sqs: aws_sdk_sqs::Client,
    url: String,
    arn: String,
    batch_size: usize,
    window: Duration,
    visibility_timeout: i32,
    timeout: Duration,
}

/// A function an event source mapping invokes with SQS events, answering
/// before `deadline` (its timeout less an answer margin) with the message
/// ids of its partial batch response.
trait SqsHandler: Send + Sync {
    fn invoke(
        &self,
        event: SqsEvent,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Result<Vec<String>, String>> + Send;
}

impl SqsHandler for CommitterFunction {
    async fn invoke(&self, event: SqsEvent, deadline: Instant) -> Result<Vec<String>, String> {
        let answer = self.handle(event, Some(deadline)).await;
        Ok(answer
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect())
    }
}

impl SqsHandler for WriterFunction {
    async fn invoke(&self, event: SqsEvent, _deadline: Instant) -> Result<Vec<String>, String> {
        let answer = self
            .handle(WriterEvent::Sqs(event))
            .await
            .map_err(|e| e.to_string())?;
        Ok(answer.failures().into_iter().map(str::to_string).collect())
    }
}

impl Mapping {
    /// Gathers one batch as Lambda's poller does: waits for a first message,
    /// then keeps receiving until the batch is full or the window is over.
    async fn gather(&self, stop: &AtomicBool) -> Result<Vec<aws_sdk_sqs::types::Message>> {
        let mut messages = Vec::new();
        // The window opens with the first message, as Lambda's does.
        let mut opened: Option<Instant> = None;
        while messages.len() < self.batch_size {
            let left = opened.map(|t| self.window.saturating_sub(t.elapsed()));
            // Waiting for a first message long-polls briefly, so a stop is seen soon.
            let wait = match left {
                None => 1,
                Some(left) => left.as_secs().min(20) as i32,
            };
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages((self.batch_size - messages.len()).min(10) as i32)
                .wait_time_seconds(wait)
                .visibility_timeout(self.visibility_timeout)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .with_context(|| format!("SQS ReceiveMessage {}", self.url))?;
            let got = out.messages().len();
            messages.extend(out.messages().iter().cloned());
            match left {
                None if messages.is_empty() => {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                None => opened = Some(Instant::now()),
                Some(left) if left.is_zero() => break,
                Some(_) if got == 0 => {
                    // Short of the window: poll again shortly.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(_) => {}
            }
            if opened.is_some_and(|t| t.elapsed() >= self.window) {
                break;
            }
        }
        Ok(messages)
    }

    /// The SQS event Lambda would hand the function for these messages.
    fn event(&self, messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
        let mut event = SqsEvent::default();
        event.records = messages
            .iter()
            .map(|m| {
                let mut record = SqsMessage::default();
                record.message_id = m.message_id().map(str::to_string);
                record.receipt_handle = m.receipt_handle().map(str::to_string);
                record.body = m.body().map(str::to_string);
                record.md5_of_body = m.md5_of_body().map(str::to_string);
                record.attributes = m
                    .attributes()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                    .collect();
                record.event_source = Some("aws:sqs".into());
                record.event_source_arn = Some(self.arn.clone());
                record.aws_region = Some("us-east-1".into());
                record
            })
            .collect();
        event
    }

    /// One invocation: the function's partial batch response decides which
    /// messages are deleted; the rest (all of them when it fails outright)
    /// come back after the visibility timeout, and SQS redrives a message to
    /// the dead-letter queue once it was received `maxReceiveCount` times.
    async fn invoke(
        &self,
        function: &impl SqsHandler,
        messages: &[aws_sdk_sqs::types::Message],
    ) -> Result<()> {
        let span = tracing::info_span!("invocation", queue = %self.url, messages = messages.len());
        // Like the function's answer margin, a few seconds before its timeout.
        let deadline = Instant::now() + self.timeout.saturating_sub(Duration::from_secs(3));
        let answer = function
            .invoke(self.event(messages), deadline)
            .instrument(span)
            .await;
        let failed: HashSet<String> = match answer {
            Ok(named) => named.into_iter().collect(),
            Err(e) => {
                warn!(queue = %self.url, error = %e, "invocation failed; the batch comes back after the visibility timeout");
                return Ok(());
            }
        };
        let done: Vec<_> = messages
            .iter()
            .filter(|m| !m.message_id().is_some_and(|id| failed.contains(id)))
            .filter_map(|m| m.receipt_handle())
            .collect();
        for chunk in done.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(*h)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            self.sqs
                .delete_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .with_context(|| format!("SQS DeleteMessageBatch {}", self.url))?;
        }
        info!(queue = %self.url, messages = messages.len(), failed = failed.len(), "invocation done");
        Ok(())
    }

    /// Polls and invokes until `stop`; one loop is one unit of concurrency.
    async fn run(&self, function: &impl SqsHandler, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.gather(stop).await {
                Ok(messages) if messages.is_empty() => {}
                Ok(messages) => {
                    if let Err(e) = self.invoke(function, &messages).await {
                        warn!(queue = %self.url, error = %e, "event source mapping");
                    }
                }
                Err(e) => {
                    warn!(queue = %self.url, error = %e, "polling failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Messages waiting to be received (not those a failed invocation left
    /// hidden for their visibility timeout).
    async fn pending(&self) -> Result<u64> {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .with_context(|| format!("SQS GetQueueAttributes {}", self.url))?;
        Ok(out
            .attributes()
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum())
    }
}

/// A queue with its dead-letter queue and redrive policy; `(url, arn)`.
async fn queue_pair(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    visibility_timeout_s: u32,
    max_receive_count: u32,
) -> Result<(String, String)> {
    let arn_of = |url: String| async move {
        let out = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .with_context(|| format!("SQS GetQueueAttributes {url}"))?;
        let arn = out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .with_context(|| format!("SQS queue {url} has no QueueArn"))?;
        anyhow::Ok((url, arn))
    };
    let dlq = sqs
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        // Dead letters are kept as long as SQS allows, 14 days.
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .send()
        .await
        .with_context(|| format!("SQS CreateQueue {name}-dlq"))?;
    let (_, dlq_arn) = arn_of(dlq.queue_url().unwrap_or_default().to_string()).await?;
    let redrive = json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count});
    let queue = sqs
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_timeout_s.to_string(),
        )
        .send()
        .await
        .with_context(|| format!("SQS CreateQueue {name}"))?;
    let url = queue.queue_url().unwrap_or_default().to_string();
    // Set apart from CreateQueue, so a queue left by an earlier run with
    // other settings takes this run's.
    sqs.set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_timeout_s.to_string(),
        )
        .send()
        .await
        .with_context(|| format!("SQS SetQueueAttributes {name}"))?;
    arn_of(url).await
}

/// What `floe local` creates on the endpoint: the bucket and, for each of
/// the two functions fed by a queue, a queue with its dead-letter queue.
struct Stack {
    bucket: String,
    /// The commit queue's `(url, arn)`.
    commits: (String, String),
    /// The source queue's `(url, arn)`.
    source: (String, String),
    /// Whether the bucket announces uploads to the source queue.
    uploads: bool,
}

impl Stack {
    /// Creates the bucket and the queues, taking over those an earlier run left.
    async fn create(clients: &AwsClients, args: &LocalArgs) -> Result<Stack> {
        let bucket = args.name.clone();
        create_bucket(&clients.s3, &bucket).await?;
        let commits = queue_pair(
            &clients.sqs,
            &format!("{}-commits", args.name),
            args.visibility_timeout_s,
            args.max_receive_count,
        )
        .await?;
        let source = queue_pair(
            &clients.sqs,
            &format!("{}-source", args.name),
            args.visibility_timeout_s,
            args.max_receive_count,
        )
        .await?;
        let uploads = announce_uploads(&clients.s3, &bucket, &source.1).await;
        Ok(Stack {
            bucket,
            commits,
            source,
            uploads,
        })
    }
}

/// Where uploads announce themselves to the source queue, as a bucket
/// notification on AWS does: objects under this prefix of the bucket.
const UPLOADS: &str = "incoming/";

/// Has the bucket announce each object created under [`UPLOADS`] to the
/// source queue; whether it does. An S3 without notifications (s3s-fs)
/// only loses that path, so the stack starts anyway and says so.
async fn announce_uploads(s3: &aws_sdk_s3::Client, bucket: &str, queue_arn: &str) -> bool {
    use aws_sdk_s3::types::{
        Event, FilterRule, FilterRuleName, NotificationConfiguration,
        NotificationConfigurationFilter, QueueConfiguration, S3KeyFilter,
    };
    let prefix = FilterRule::builder()
        .name(FilterRuleName::Prefix)
        .value(UPLOADS)
        .build();
    let filter = NotificationConfigurationFilter::builder()
        .key(S3KeyFilter::builder().filter_rules(prefix).build())
        .build();
    let wired = match QueueConfiguration::builder()
        .queue_arn(queue_arn)
        .events(Event::S3ObjectCreated)
        .filter(filter)
        .build()
    {
        Ok(queue) => s3
            .put_bucket_notification_configuration()
            .bucket(bucket)
            .notification_configuration(
                NotificationConfiguration::builder()
                    .queue_configurations(queue)
                    .build(),
            )
            .send()
            .await
            .map(|_| ())
            .map_err(|e| aws_sdk_s3::error::DisplayErrorContext(&e).to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = &wired {
        warn!(bucket, error = %e, "this S3 has no bucket notifications: uploads under {UPLOADS} are not announced to the source queue");
    }
    wired.is_ok()
}

/// Creates the bucket; one this account already owns is taken as it is.
async fn create_bucket(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<()> {
    match s3.create_bucket().bucket(bucket).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error().is_some_and(|s| {
                s.is_bucket_already_owned_by_you() || s.is_bucket_already_exists()
            }) =>
        {
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!(
            "S3 CreateBucket {bucket}: {}",
            aws_sdk_s3::error::DisplayErrorContext(&e)
        )),
    }
}

/// Creates the Glue database the stack's tables go to, unless it exists.
async fn create_glue_database(glue: &aws_sdk_glue::Client, db: &str) -> Result<()> {
    if let Err(e) = glue
        .create_database()
        .database_input(
            aws_sdk_glue::types::DatabaseInput::builder()
                .name(db)
                .build()
                .context("Glue database input")?,
        )
        .send()
        .await
        && !e
            .as_service_error()
            .is_some_and(|s| s.is_already_exists_exception())
    {
        return Err(anyhow::anyhow!(
            "Glue CreateDatabase {db}: {}",
            aws_sdk_glue::error::DisplayErrorContext(&e)
        ));
    }
    Ok(())
}

/// Points the config's deployment sections at the stack, and returns the
/// HTTP function's bearer token. Routing, tables and defaults stay the
/// user's, but for a default route and allow-list when it has none.
fn deploy_into(
    config: &mut Config,
    args: &LocalArgs,
    stack: &Stack,
    settings: &AwsSettings,
    catalog: CatalogType,
    state: &std::path::Path,
) -> String {
    config.warehouse.path = None;
    config.warehouse.uri = Some(format!("s3://{}/warehouse", stack.bucket));
    config.aws.region = settings.region.clone();
    config.aws.endpoint = settings.endpoint_url.clone();
    config.aws.path_style = Some(true);
    config.catalog.kind = catalog;
    config.catalog.path = (catalog == CatalogType::Sqlite).then(|| state.join("catalog.db"));
    config.queue.url = Some(stack.commits.0.clone());
    if config.routing.table.is_none() && config.routing.template.is_none() {
        // The source queue's records go to `local.events` unless routed otherwise.
        config.routing.table = Some("local.events".into());
    }
    if config.routing.allow.is_empty() {
        config.routing.allow = vec!["local.*".into()];
        config.http.create_tables = true;
    }
    let token = args
        .token
        .clone()
        .or_else(|| config.http.token.as_ref().map(|t| t.expose().to_string()))
        .unwrap_or_else(|| "local".into());
    config.http.token = Some(Secret::from(token.as_str()));
    token
}

/// The four functions, each built from the deployment of its own role.
struct Functions {
    committer: CommitterFunction,
    writer: WriterFunction,
    maintenance: MaintenanceFunction,
    http: HttpIngest,
}

impl Functions {
    async fn new(config: &Config) -> Result<Functions> {
        let deployment = |role| {
            let config = config.clone();
            async move {
                Deployment::from_config(config, Faults::none(), role)
                    .await
                    .with_context(|| format!("the {} function's deployment", role.name()))
            }
        };
        Ok(Functions {
            committer: CommitterFunction::new(&deployment(Role::Committer).await?)?,
            writer: WriterFunction::new(&deployment(Role::Writer).await?)?,
            maintenance: MaintenanceFunction::new(&deployment(Role::Maintenance).await?),
            http: HttpIngest::new(&deployment(Role::Ingest).await?)?,
        })
    }
}

/// Creates the stack, writes its config to the state directory, and runs
/// the four functions on it until interrupted.
pub async fn run(mut config: Config, args: LocalArgs) -> Result<()> {
    let catalog = match args.catalog.as_str() {
        "glue" => CatalogType::Glue,
        "sqlite" => CatalogType::Sqlite,
        other => anyhow::bail!("--catalog {other}: use glue or sqlite"),
    };
    std::fs::create_dir_all(&args.state_dir)
        .with_context(|| format!("creating {}", args.state_dir.display()))?;
    let state = std::path::absolute(&args.state_dir)?;
    // --endpoint, else the config's [aws] endpoint, else the SDK's variables.
    let endpoint = args
        .endpoint
        .clone()
        .or_else(|| config.aws.endpoint.clone());
    let settings = AwsSettings {
        region: Some(
            config
                .aws
                .region
                .clone()
                .unwrap_or_else(|| "us-east-1".into()),
        ),
        endpoint_url: endpoint,
        force_path_style: true,
        max_attempts: 0,
    };
    let clients = AwsClients::new(settings.clone()).await;
    let stack = Stack::create(&clients, &args).await?;
    let token = deploy_into(&mut config, &args, &stack, &settings, catalog, &state);
    if catalog == CatalogType::Glue {
        create_glue_database(&clients.glue, "local").await?;
    }
    let config_file = state.join("floe.toml");
    std::fs::write(&config_file, stack_toml(&config))
        .with_context(|| format!("writing {}", config_file.display()))?;

    let sources = Sources::create(&settings, &args).await?;
    // The stack's HTTP and writer functions buffer in its own stream, or
    // not at all, whatever the user's config names.
    config.http.buffer_stream = sources.buffer.as_ref().map(|s| s.name.clone());
    let functions = Functions::new(&config).await?;
    let listener = TcpListener::bind(args.http)
        .await
        .with_context(|| format!("cannot listen on {}", args.http))?;
    let addr = listener.local_addr()?;
    announce(&args, &stack, addr, &token, &config_file);
    sources.announce(&args);
    serve(&clients, &args, &stack, functions, listener, sources).await
}

/// The HTTP buffer stream (`NAME-http-buffer`, of `--http-buffer-shards`
/// as the module creates it), unless `--no-http-buffer`; `None`, said why,
/// when the endpoint has no Kinesis.
async fn http_buffer(settings: &AwsSettings, args: &LocalArgs) -> Option<Arc<Stream>> {
    if args.no_http_buffer {
        return None;
    }
    let name = format!("{}-http-buffer", args.name);
    let stream = Stream::create_kinesis(settings, &name, args.http_buffer_shards).await;
    if stream.is_none() {
        warn!(stream = %name, "no Kinesis on the endpoint: every POST writes its own file");
    }
    stream.map(Arc::new)
}

/// The stream sources beside the source queue, each mapping one task.
struct Sources {
    streams: Vec<Arc<Stream>>,
    /// The HTTP buffer stream, with its own mapping settings.
    buffer: Option<Arc<Stream>>,
    /// The Kafka topic, and a mapping per partition.
    topic: Option<Arc<kafka::Topic>>,
    partitions: Vec<kafka::PartitionMapping>,
}

impl Sources {
    /// Creates the stack's streams, its HTTP buffer stream and, with
    /// `--kafka`, its topic: those its endpoints have.
    async fn create(settings: &AwsSettings, args: &LocalArgs) -> Result<Sources> {
        let mut streams = Vec::new();
        for (kind, suffix) in [(Kind::Kinesis, "stream"), (Kind::DynamoDb, "items")] {
            let name = format!("{}-{suffix}", args.name);
            streams.extend(Stream::create(settings, kind, &name).await.map(Arc::new));
        }
        let buffer = http_buffer(settings, args).await;
        let (topic, partitions) = match &args.kafka {
            Some(bootstrap) => {
                let name = format!("{}-topic", args.name);
                let topic = Arc::new(kafka::Topic::create(bootstrap, &name).await?);
                let partitions = topic.mappings(args.batch_size).await?;
                (Some(topic), partitions)
            }
            None => (None, Vec::new()),
        };
        Ok(Sources {
            streams,
            buffer,
            topic,
            partitions,
        })
    }

    /// Tells what feeds the writer besides the source queue.
    fn announce(&self, args: &LocalArgs) {
        for s in &self.streams {
            outln!(
                "floe local: {} ({} shards) -> writer (batch {})",
                s.describe(),
                s.shards.len(),
                args.batch_size
            );
        }
        match &self.buffer {
            Some(s) => outln!(
                "floe local: HTTP buffer: POSTs without an Idempotency-Key or ?wait=commit -> {} ({} shard) -> writer (batch {}, window {} ms)",
                s.describe(),
                s.shards.len(),
                args.http_buffer_batch_size,
                args.http_buffer_window_ms
            ),
            None => outln!("floe local: HTTP buffer off: every POST writes its own file"),
        }
        if let Some(topic) = &self.topic {
            outln!(
                "floe local: {} -> writer (batch {})",
                topic.describe(),
                args.batch_size
            );
        }
    }

    /// The writer's tasks until `stop`: `--writers` pollers of the source
    /// `queue`, and one per shard and per partition.
    fn spawn(
        self,
        queue: Arc<Mapping>,
        args: &LocalArgs,
        writer: &Arc<WriterFunction>,
        stop: &Arc<AtomicBool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = Vec::new();
        for _ in 0..args.writers.max(1) {
            let (queue, writer, stop) = (queue.clone(), writer.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                queue.run(writer.as_ref(), &stop).await
            }));
        }
        let source = Batching {
            size: args.batch_size,
            window: Duration::ZERO,
        };
        let buffer = Batching {
            size: args.http_buffer_batch_size,
            window: Duration::from_millis(args.http_buffer_window_ms),
        };
        let mappings = self.streams.iter().flat_map(|s| s.mappings(source));
        for mapping in mappings.chain(self.buffer.iter().flat_map(|s| s.mappings(buffer))) {
            let (writer, stop) = (writer.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                mapping.run(writer.as_ref(), &stop).await
            }));
        }
        for mapping in self.partitions {
            let (writer, stop) = (writer.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                mapping.run(writer.as_ref(), &stop).await
            }));
        }
        tasks
    }
}

/// Tells how to reach the stack: the HTTP function, the queues, the config.
fn announce(
    args: &LocalArgs,
    stack: &Stack,
    addr: SocketAddr,
    token: &str,
    config_file: &std::path::Path,
) {
    let (commit_url, source_url) = (&stack.commits.0, &stack.source.0);
    outln!("floe local: HTTP ingest on http://{addr} (Authorization: Bearer {token})");
    outln!(
        "floe local: source queue {source_url} -> writer ({} pollers, batch {}, window {} ms); commit queue {commit_url} -> committer (batch {}, window {} ms, concurrency 1, visibility {} s, {} receives then {}-commits-dlq)",
        args.writers,
        args.source_batch_size,
        args.source_batching_window_ms,
        args.batch_size,
        args.batching_window_ms,
        args.visibility_timeout_s,
        args.max_receive_count,
        args.name
    );
    if stack.uploads {
        outln!(
            "floe local: objects put under s3://{}/{UPLOADS} -> source queue (bucket notification)",
            stack.bucket
        );
    }
    outln!(
        "floe local: tables under s3://{}/warehouse, catalog {}; config {}",
        stack.bucket,
        args.catalog,
        config_file.display()
    );
    outln!(
        "  curl -H 'Authorization: Bearer {token}' --data-binary '{{\"id\":1}}' 'http://{addr}/v1/tables/local/events/records?wait=commit'"
    );
    outln!("  floe --config {} status", config_file.display());
}

/// Runs the functions until the HTTP server's shutdown signal: the writer
/// pollers and the committer's event source mapping as tasks, maintenance
/// on its timer; then stops them, the committer last.
async fn serve(
    clients: &AwsClients,
    args: &LocalArgs,
    stack: &Stack,
    functions: Functions,
    listener: TcpListener,
    sources: Sources,
) -> Result<()> {
    let mapping = |(url, arn): &(String, String), batch_size: usize, window: Duration| Mapping {
        sqs: clients.sqs.clone(),
        url: url.to_string(),
        arn: arn.to_string(),
        batch_size,
        window,
        visibility_timeout: args.visibility_timeout_s as i32,
        timeout: Duration::from_secs(args.function_timeout_s),
    };
    let commits = Arc::new(mapping(
        &stack.commits,
        args.batch_size,
        Duration::from_millis(args.batching_window_ms),
    ));
    let source = Arc::new(mapping(
        &stack.source,
        args.source_batch_size.max(1),
        Duration::from_millis(args.source_batching_window_ms),
    ));
    let Functions {
        committer,
        writer,
        maintenance,
        http,
    } = functions;

    let stop = Arc::new(AtomicBool::new(false));
    let writer = Arc::new(writer);
    let tasks = sources.spawn(source, args, &writer, &stop);
    // Reserved concurrency 1: one committer loop, one invocation at a time.
    let committer = Arc::new(committer);
    let committer_task = {
        let (commits, committer, stop) = (commits.clone(), committer.clone(), stop.clone());
        tokio::spawn(async move { commits.run(committer.as_ref(), &stop).await })
    };
    // Maintenance's future is not Send (it holds the engine across awaits),
    // so it runs beside the server on this task rather than spawned.
    let every = Duration::from_secs(args.maintenance_every_s.max(1));
    let serving = async {
        let iam = iam::IamCheck::from_env().map(|check| -> crate::serve::SignatureCheck {
            Arc::new(move |parts, body| check.verify(parts, body, std::time::SystemTime::now()))
        });
        crate::serve::serve_http(
            listener,
            Arc::new(http),
            iam,
            crate::serve::shutdown_signal(),
        )
        .await;
        stop.store(true, Ordering::Relaxed);
    };
    tokio::join!(serving, maintain_every(&maintenance, every, &stop));
    outln!("floe local: stopping; the committer drains the commit queue first");
    for t in tasks {
        t.await.context("writer poller")?;
    }
    // What the HTTP function and the writers acknowledged is on the commit
    // queue: give the committer its batches before stopping it.
    let _ = committer_task.await;
    drain(&commits, committer.as_ref()).await?;
    outln!("floe local: stopped");
    Ok(())
}

/// Runs the maintenance function every `every` until `stop`, as its
/// schedule would.
async fn maintain_every(maintenance: &MaintenanceFunction, every: Duration, stop: &AtomicBool) {
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + every;
        // Like the function's 15-minute timeout, but a run also ends
        // before the next tick so runs never overlap.
        let deadline = Instant::now() + every.min(Duration::from_secs(900));
        match maintenance
            .handle(json!({"source": "floe.local"}), Some(deadline))
            .await
        {
            Ok(answer) => info!(%answer, "maintenance ran"),
            Err(e) => warn!(error = %e, "maintenance failed"),
        }
    }
}

/// Hands the committer what is left on the commit queue, for at most 30 s.
async fn drain(commits: &Mapping, committer: &CommitterFunction) -> Result<()> {
    let drain = Duration::from_secs(30);
    let started = Instant::now();
    let idle = AtomicBool::new(true);
    while commits.pending().await? > 0 && started.elapsed() < drain {
        let messages = commits.gather(&idle).await?;
        if !messages.is_empty() {
            commits.invoke(committer, &messages).await?;
        }
    }
    Ok(())
}

/// The stack's config as a file, for `floe --config … status` and friends.
fn stack_toml(config: &Config) -> String {
    let mut out = String::from(
        "# Written by `floe local`: the local stack's deployment. Without\n\
         # [aws] endpoint, run floe with the same AWS_ENDPOINT_URL_* variables.\n",
    );
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    out.push_str(&format!(
        "[warehouse]\nuri = {}\n",
        quote(config.warehouse.uri.as_deref().unwrap_or_default())
    ));
    out.push_str("[aws]\n");
    if let Some(region) = &config.aws.region {
        out.push_str(&format!("region = {}\n", quote(region)));
    }
    if let Some(endpoint) = &config.aws.endpoint {
        out.push_str(&format!("endpoint = {}\n", quote(endpoint)));
    }
    out.push_str("path_style = true\n[catalog]\n");
    out.push_str(&format!("type = {}\n", quote(config.catalog.kind.name())));
    if let Some(path) = &config.catalog.path {
        out.push_str(&format!("path = {}\n", quote(&path.display().to_string())));
    }
    out.push_str(&format!(
        "[queue]\nurl = {}\n",
        quote(config.queue.url.as_deref().unwrap_or_default())
    ));
    out
}

//! The stack's streams and their event source mappings: Kinesis streams
//! (the source stream and the HTTP function's buffer), and a DynamoDB
//! table's stream. One poller per shard reads records with GetRecords and
//! invokes the writer function with the event Lambda would send, in order,
//! gathering a batch as Lambda does ([`Batching`]: its size, its window,
//! its 6 MB payload); a partial batch response restarts the shard at the
//! first failed record, an error retries the batch, as Lambda does without
//! bisecting. A stopping stack hands the writer what each shard holds
//! before it stops, so an acknowledged POST is not left waiting for the
//! next start. Positions are kept in memory: a restarted stack reads each
//! shard again from its start (`TRIM_HORIZON`), and the tables' ledgers drop
//! what was committed.
//!
//! Both APIs are JSON over HTTP (`X-Amz-Target`), so the mappings sign
//! their calls with SigV4 themselves rather than link two more SDKs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use floe_core::aws::AwsSettings;
use floe_core::catalog::rest::sigv4::{SigV4, Signer};
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::{Value, json};
use tracing::warn;

/// Which stream a mapping reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Kinesis data stream.
    Kinesis,
    /// A DynamoDB table's stream.
    DynamoDb,
}

/// A JSON-over-HTTP AWS API on the stack's endpoint.
#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    endpoint: String,
    signer: Arc<Signer>,
    /// The `X-Amz-Target` prefix (`Kinesis_20131202`).
    target: &'static str,
}

impl Api {
    /// The API on the stack's endpoint: `settings`' own, else the SDK's
    /// variable for this service (`endpoint_env`, as the functions' SDK
    /// clients resolve it), else `AWS_ENDPOINT_URL`; `None` without one.
    async fn new(
        settings: &AwsSettings,
        service: &str,
        target: &'static str,
        endpoint_env: &str,
    ) -> Option<Api> {
        let endpoint = settings.endpoint_url.clone().or_else(|| {
            std::env::var(endpoint_env)
                .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
                .ok()
        })?;
        let credentials = settings.sdk_config().await.credentials_provider()?;
        let signer = Signer::new(
            SigV4 {
                service: service.into(),
                region: region(settings),
            },
            credentials,
        );
        Some(Api {
            http: reqwest::Client::new(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            signer: Arc::new(signer),
            target,
        })
    }

    async fn call(&self, op: &str, body: Value) -> Result<Value> {
        let bytes = serde_json::to_vec(&body)?;
        let mut request = self
            .http
            .post(format!("{}/", self.endpoint))
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("{}.{op}", self.target))
            .body(bytes.clone())
            .build()?;
        self.signer
            .sign(&mut request, &bytes)
            .await
            .with_context(|| format!("signing {op}"))?;
        let response = self.http.execute(request).await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("{}.{op}: {status}: {text}", self.target);
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// The SDK's endpoint variables of the services the mappings call.
const KINESIS_ENDPOINT: &str = "AWS_ENDPOINT_URL_KINESIS";
const DYNAMODB_ENDPOINT: &str = "AWS_ENDPOINT_URL_DYNAMODB";
const DYNAMODB_STREAMS_ENDPOINT: &str = "AWS_ENDPOINT_URL_DYNAMODB_STREAMS";

/// Lambda's limit on one invocation's event: a batch stops growing there
/// whatever its size and window say.
const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;

/// How often a mapping reads a shard while it gathers a batch: Lambda
/// reads each shard about once a second.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a stopping stack keeps reading a shard to hand its records to
/// the writer, should producers go on putting them.
const DRAIN: Duration = Duration::from_secs(30);

fn region(settings: &AwsSettings) -> String {
    settings
        .region
        .clone()
        .unwrap_or_else(|| "us-east-1".into())
}

/// A stream of the stack: its kind, name, ARN and shards.
pub struct Stream {
    api: Api,
    kind: Kind,
    /// Its name (the DynamoDB table's, for a table's stream).
    pub name: String,
    arn: String,
    /// Its shards' ids.
    pub shards: Vec<String>,
    region: String,
}

impl Stream {
    /// Creates the stream (a Kinesis stream of two shards, or a DynamoDB
    /// table keyed by `id` with new and old images) unless it exists;
    /// `None` when the endpoint has none of that service (said why when
    /// it failed).
    pub async fn create(settings: &AwsSettings, kind: Kind, name: &str) -> Option<Stream> {
        let created = match kind {
            Kind::Kinesis => Self::kinesis(settings, name, 2).await,
            Kind::DynamoDb => Self::dynamodb(settings, name).await,
        };
        Self::created(name, kind, created)
    }

    /// Creates a Kinesis stream of `shards` shards unless it exists (one
    /// an earlier run left keeps its shards); `None` as [`Stream::create`].
    pub async fn create_kinesis(settings: &AwsSettings, name: &str, shards: u32) -> Option<Stream> {
        let created = Self::kinesis(settings, name, shards).await;
        Self::created(name, Kind::Kinesis, created)
    }

    fn created(name: &str, kind: Kind, created: Result<Option<Stream>>) -> Option<Stream> {
        match created {
            Ok(s) => s,
            Err(e) => {
                warn!(stream = name, error = %e, "no {kind:?} stream: the endpoint has none");
                None
            }
        }
    }

    async fn kinesis(settings: &AwsSettings, name: &str, shards: u32) -> Result<Option<Stream>> {
        let Some(api) = Api::new(settings, "kinesis", "Kinesis_20131202", KINESIS_ENDPOINT).await
        else {
            return Ok(None);
        };
        if let Err(e) = api
            .call(
                "CreateStream",
                json!({"StreamName": name, "ShardCount": shards}),
            )
            .await
            && !e.to_string().contains("ResourceInUseException")
        {
            return Err(e);
        }
        let described = active(&api, json!({"StreamName": name})).await?;
        Ok(Some(Stream {
            arn: described["StreamARN"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            shards: shard_ids(&described),
            api,
            kind: Kind::Kinesis,
            name: name.to_string(),
            region: region(settings),
        }))
    }

    async fn dynamodb(settings: &AwsSettings, name: &str) -> Result<Option<Stream>> {
        let Some(tables) =
            Api::new(settings, "dynamodb", "DynamoDB_20120810", DYNAMODB_ENDPOINT).await
        else {
            return Ok(None);
        };
        let create = json!({
            "TableName": name,
            "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "N"}],
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        });
        if let Err(e) = tables.call("CreateTable", create).await
            && !e.to_string().contains("ResourceInUseException")
        {
            return Err(e);
        }
        let table = tables
            .call("DescribeTable", json!({"TableName": name}))
            .await?;
        let arn = table["Table"]["LatestStreamArn"]
            .as_str()
            .context("the DynamoDB table has no stream")?
            .to_string();
        let Some(api) = Api::new(
            settings,
            "dynamodb",
            "DynamoDBStreams_20120810",
            DYNAMODB_STREAMS_ENDPOINT,
        )
        .await
        else {
            return Ok(None);
        };
        let described = active(&api, json!({"StreamArn": arn})).await?;
        Ok(Some(Stream {
            shards: shard_ids(&described),
            api,
            kind: Kind::DynamoDb,
            name: name.to_string(),
            arn,
            region: region(settings),
        }))
    }

    /// What it is, for the stack's banner.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Kinesis => format!("Kinesis stream {}", self.name),
            Kind::DynamoDb => format!("DynamoDB table {}'s stream", self.name),
        }
    }

    /// An event source mapping per shard.
    pub fn mappings(self: &Arc<Self>, batching: Batching) -> Vec<ShardMapping> {
        self.shards
            .iter()
            .map(|shard| ShardMapping {
                stream: self.clone(),
                shard: shard.clone(),
                batching,
            })
            .collect()
    }

    async fn iterator(&self, shard: &str, at: Option<&str>) -> Result<String> {
        let mut body = match self.kind {
            Kind::Kinesis => json!({"StreamName": self.name, "ShardId": shard}),
            Kind::DynamoDb => json!({"StreamArn": self.arn, "ShardId": shard}),
        };
        match at {
            Some(seq) => {
                body["ShardIteratorType"] = "AT_SEQUENCE_NUMBER".into();
                let key = match self.kind {
                    Kind::Kinesis => "StartingSequenceNumber",
                    Kind::DynamoDb => "SequenceNumber",
                };
                body[key] = seq.into();
            }
            None => body["ShardIteratorType"] = "TRIM_HORIZON".into(),
        }
        let out = self.api.call("GetShardIterator", body).await?;
        out["ShardIterator"]
            .as_str()
            .map(str::to_string)
            .context("GetShardIterator returned no iterator")
    }

    /// Record `r` of `shard` (as GetRecords returned it) as it stands in
    /// the event Lambda sends, and its sequence number.
    fn entry(&self, shard: &str, r: Value) -> (Value, Option<String>) {
        match self.kind {
            Kind::Kinesis => {
                let sequence = r["SequenceNumber"].as_str().map(str::to_string);
                let entry = json!({
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0",
                        "partitionKey": r["PartitionKey"],
                        "sequenceNumber": r["SequenceNumber"],
                        "data": r["Data"],
                        "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"],
                    },
                    "eventSource": "aws:kinesis",
                    "eventVersion": "1.0",
                    "eventID": format!("{shard}:{}", sequence.as_deref().unwrap_or_default()),
                    "eventName": "aws:kinesis:record",
                    "awsRegion": self.region,
                    "eventSourceARN": self.arn,
                });
                (entry, sequence)
            }
            Kind::DynamoDb => {
                let sequence = r["dynamodb"]["SequenceNumber"].as_str().map(str::to_string);
                let mut entry = r;
                entry["eventSourceARN"] = self.arn.clone().into();
                (entry, sequence)
            }
        }
    }
}

/// Describes a stream until it is active: its description.
async fn active(api: &Api, id: Value) -> Result<Value> {
    for _ in 0..60 {
        let d = api.call("DescribeStream", id.clone()).await?;
        let d = &d["StreamDescription"];
        if matches!(d["StreamStatus"].as_str(), Some("ACTIVE" | "ENABLED")) {
            return Ok(d.clone());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("stream {id} did not become active")
}

fn shard_ids(description: &Value) -> Vec<String> {
    description["Shards"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["ShardId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// How a mapping gathers a batch, as Lambda's stream mappings do: it
/// invokes the writer once `size` records are in, once `window` has passed
/// since the first of them, or once one more record would take the event
/// past Lambda's 6 MB, whichever comes first.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Most records per invocation (`BatchSize`).
    pub size: usize,
    /// How long a batch gathers records (`MaximumBatchingWindowInSeconds`);
    /// zero invokes with whatever one read returned.
    pub window: Duration,
}

/// One shard's event source mapping.
pub struct ShardMapping {
    stream: Arc<Stream>,
    shard: String,
    batching: Batching,
}

/// A batch gathered from a shard: its records as the event holds them,
/// and where the shard is read next.
#[derive(Default)]
struct Gathered {
    entries: Vec<Value>,
    /// The first record's sequence number: where a failed batch starts again.
    first: Option<String>,
    /// The iterator after the last record read.
    next: Option<String>,
    /// The first record read but left for the next batch (past the payload).
    next_first: Option<String>,
}

impl ShardMapping {
    /// Polls the shard and invokes `writer` until `stop`, then hands the
    /// writer what the shard still holds.
    pub async fn run(&self, writer: &WriterFunction, stop: &AtomicBool) {
        let mut iterator = None;
        let mut stopping: Option<Instant> = None;
        loop {
            let found = self.poll(writer, &mut iterator, stop).await;
            if stop.load(Ordering::Relaxed) {
                let since = *stopping.get_or_insert_with(Instant::now);
                if matches!(found, Ok(false)) || since.elapsed() >= DRAIN {
                    break;
                }
            }
            match found {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(Duration::from_millis(500)).await,
                Err(e) => {
                    warn!(stream = %self.stream.name, shard = %self.shard, error = %e, "event source mapping; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One batch and its invocation; whether the shard held records.
    /// `iterator` is where the next read starts: after an error, at the
    /// first record not acknowledged.
    async fn poll(
        &self,
        writer: &WriterFunction,
        iterator: &mut Option<String>,
        stop: &AtomicBool,
    ) -> Result<bool> {
        let start = iterator.take();
        let mut batch = Gathered::default();
        if let Err(e) = self.gather(start.clone(), stop, &mut batch).await {
            // Nothing of the batch reached the writer: read it again from
            // its first record, not from the shard's start.
            *iterator = match &batch.first {
                Some(seq) => self
                    .stream
                    .iterator(&self.shard, Some(seq))
                    .await
                    .ok()
                    .or(start),
                None => start,
            };
            return Err(e);
        }
        if batch.entries.is_empty() {
            *iterator = batch.next;
            return Ok(false);
        }
        let again = |seq: Option<String>| async move {
            self.stream.iterator(&self.shard, seq.as_deref()).await
        };
        let event = WriterEvent::try_from(json!({ "Records": batch.entries }))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let answer = match writer.handle(event).await {
            Ok(a) => a,
            Err(e) => {
                // The whole batch comes again, from its first record.
                *iterator = Some(again(batch.first).await?);
                bail!("the writer failed: {e}");
            }
        };
        *iterator = match (answer.failures().first(), batch.next_first) {
            (Some(seq), _) => Some(again(Some(seq.to_string())).await?),
            (None, Some(seq)) => Some(again(Some(seq)).await?),
            (None, None) => batch.next,
        };
        Ok(true)
    }

    /// Reads the shard into `batch` from `iterator` (its start when `None`)
    /// until a batch is gathered ([`Batching`]), the shard has nothing, or
    /// the stack stops.
    async fn gather(
        &self,
        iterator: Option<String>,
        stop: &AtomicBool,
        batch: &mut Gathered,
    ) -> Result<()> {
        let mut it = match iterator {
            Some(i) => Some(i),
            None => Some(self.stream.iterator(&self.shard, None).await?),
        };
        let mut bytes = 0;
        // The window opens with the first record, as for the SQS mappings.
        let mut opened: Option<Instant> = None;
        while let Some(current) = it.take() {
            let limit = self.batching.size - batch.entries.len();
            let mut out = self
                .stream
                .api
                .call(
                    "GetRecords",
                    json!({"ShardIterator": current, "Limit": limit}),
                )
                .await?;
            it = out["NextShardIterator"].as_str().map(str::to_string);
            batch.next = it.clone();
            let records = match out["Records"].take() {
                Value::Array(records) => records,
                _ => Vec::new(),
            };
            for r in records {
                let (entry, sequence) = self.stream.entry(&self.shard, r);
                let size = serde_json::to_vec(&entry).map_or(0, |v| v.len() + 1);
                if !batch.entries.is_empty() && bytes + size > MAX_PAYLOAD_BYTES {
                    batch.next_first = sequence;
                    return Ok(());
                }
                bytes += size;
                if batch.first.is_none() {
                    batch.first = sequence;
                }
                batch.entries.push(entry);
            }
            if batch.entries.is_empty() {
                return Ok(());
            }
            let opened = *opened.get_or_insert_with(Instant::now);
            let remaining = self.batching.window.saturating_sub(opened.elapsed());
            if batch.entries.len() >= self.batching.size
                || remaining.is_zero()
                || stop.load(Ordering::Relaxed)
            {
                break;
            }
            tokio::time::sleep(remaining.min(POLL_INTERVAL)).await;
        }
        Ok(())
    }
}

//! The stack's streams and their event source mappings: a Kinesis stream,
//! and a DynamoDB table's stream. One poller per shard reads records with
//! GetRecords and invokes the writer function with the event Lambda would
//! send, in order, at most `batch_size` records at a time; a partial batch
//! response restarts the shard at the first failed record, an error
//! retries the batch, as Lambda does without bisecting.
//!
//! Both APIs are JSON over HTTP (`X-Amz-Target`), so the mappings sign
//! their calls with SigV4 themselves rather than link two more SDKs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    async fn new(settings: &AwsSettings, service: &str, target: &'static str) -> Option<Api> {
        let endpoint = settings
            .endpoint_url
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())?;
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
    /// `None`, said why, when the endpoint has none of that service.
    pub async fn create(settings: &AwsSettings, kind: Kind, name: &str) -> Option<Stream> {
        let created = match kind {
            Kind::Kinesis => Self::kinesis(settings, name).await,
            Kind::DynamoDb => Self::dynamodb(settings, name).await,
        };
        match created {
            Ok(s) => s,
            Err(e) => {
                warn!(stream = name, error = %e, "no {kind:?} stream: the endpoint has none");
                None
            }
        }
    }

    async fn kinesis(settings: &AwsSettings, name: &str) -> Result<Option<Stream>> {
        let Some(api) = Api::new(settings, "kinesis", "Kinesis_20131202").await else {
            return Ok(None);
        };
        if let Err(e) = api
            .call("CreateStream", json!({"StreamName": name, "ShardCount": 2}))
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
        let Some(tables) = Api::new(settings, "dynamodb", "DynamoDB_20120810").await else {
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
        let Some(api) = Api::new(settings, "dynamodb", "DynamoDBStreams_20120810").await else {
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
    pub fn mappings(self: &Arc<Self>, batch_size: usize) -> Vec<ShardMapping> {
        self.shards
            .iter()
            .map(|shard| ShardMapping {
                stream: self.clone(),
                shard: shard.clone(),
                batch_size,
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

    /// The event Lambda sends for `records` of `shard`, and the first
    /// record's sequence number.
    fn event(&self, shard: &str, records: &[Value]) -> (Value, Option<String>) {
        let sequence = |r: &Value| match self.kind {
            Kind::Kinesis => r["SequenceNumber"].as_str().map(str::to_string),
            Kind::DynamoDb => r["dynamodb"]["SequenceNumber"].as_str().map(str::to_string),
        };
        let records: Vec<Value> = records
            .iter()
            .map(|r| match self.kind {
                Kind::Kinesis => json!({
                    "kinesis": {
                        "kinesisSchemaVersion": "1.0",
                        "partitionKey": r["PartitionKey"],
                        "sequenceNumber": r["SequenceNumber"],
                        "data": r["Data"],
                        "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"],
                    },
                    "eventSource": "aws:kinesis",
                    "eventVersion": "1.0",
                    "eventID": format!("{shard}:{}", sequence(r).unwrap_or_default()),
                    "eventName": "aws:kinesis:record",
                    "awsRegion": self.region,
                    "eventSourceARN": self.arn,
                }),
                Kind::DynamoDb => {
                    let mut r = r.clone();
                    r["eventSourceARN"] = self.arn.clone().into();
                    r
                }
            })
            .collect();
        let first = records.first().and_then(|r| match self.kind {
            Kind::Kinesis => r["kinesis"]["sequenceNumber"].as_str().map(str::to_string),
            Kind::DynamoDb => sequence(r),
        });
        (json!({ "Records": records }), first)
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

/// One shard's event source mapping.
pub struct ShardMapping {
    stream: Arc<Stream>,
    shard: String,
    /// Most records per invocation.
    batch_size: usize,
}

impl ShardMapping {
    /// Polls the shard and invokes `writer` until `stop`.
    pub async fn run(&self, writer: &WriterFunction, stop: &AtomicBool) {
        let mut iterator = None;
        while !stop.load(Ordering::Relaxed) {
            match self.poll(writer, &mut iterator).await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(Duration::from_millis(500)).await,
                Err(e) => {
                    warn!(stream = %self.stream.name, shard = %self.shard, error = %e, "event source mapping; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One GetRecords and its invocation; whether it found records.
    /// `iterator` is where the next read starts: after an error, at the
    /// first record not acknowledged.
    async fn poll(&self, writer: &WriterFunction, iterator: &mut Option<String>) -> Result<bool> {
        let it = match iterator.take() {
            Some(i) => i,
            None => self.stream.iterator(&self.shard, None).await?,
        };
        let out = self
            .stream
            .api
            .call(
                "GetRecords",
                json!({"ShardIterator": it, "Limit": self.batch_size}),
            )
            .await?;
        let next = out["NextShardIterator"].as_str().map(str::to_string);
        let records = out["Records"].as_array().cloned().unwrap_or_default();
        if records.is_empty() {
            *iterator = next;
            return Ok(false);
        }
        let (event, first) = self.stream.event(&self.shard, &records);
        let again = |seq: Option<String>| async move {
            self.stream.iterator(&self.shard, seq.as_deref()).await
        };
        let event = WriterEvent::try_from(event).map_err(|e| anyhow::anyhow!("{e}"))?;
        let answer = match writer.handle(event).await {
            Ok(a) => a,
            Err(e) => {
                // The whole batch comes again, from its first record.
                *iterator = Some(again(first).await?);
                bail!("the writer failed: {e}");
            }
        };
        *iterator = match answer.failures().first() {
            Some(seq) => Some(again(Some(seq.to_string())).await?),
            None => next,
        };
        Ok(true)
    }
}

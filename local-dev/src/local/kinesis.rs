//! The stack's Kinesis stream and its event source mapping: one poller per
//! shard reads records with GetRecords and invokes the writer function with
//! the event Lambda would send, in order, at most `batch_size` records at a
//! time; a partial batch response restarts the shard at the first failed
//! record, an error retries the batch, as `bisect`-less Lambda does.
//!
//! Kinesis speaks JSON over HTTP (`X-Amz-Target: Kinesis_20131202.*`), so
//! the mapping signs its calls with SigV4 itself rather than link another SDK.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use floe_core::aws::AwsSettings;
use floe_core::catalog::rest::sigv4::{SigV4, Signer};
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::{Value, json};
use tracing::warn;

/// The stack's stream: its name, ARN and shards on the endpoint.
pub struct Stream {
    kinesis: Kinesis,
    /// Its name.
    pub name: String,
    arn: String,
    /// Its shards' ids.
    pub shards: Vec<String>,
}

impl Stream {
    /// Creates the stream (two shards) unless it exists; `None`, said why,
    /// when no endpoint is set or the endpoint has no Kinesis.
    pub async fn create(settings: &AwsSettings, name: &str) -> Option<Stream> {
        let endpoint = settings
            .endpoint_url
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_KINESIS").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())?;
        let region = settings
            .region
            .clone()
            .unwrap_or_else(|| "us-east-1".into());
        let signer = Kinesis::signer(settings, &region).await?;
        let kinesis = Kinesis::new(&endpoint, &region, signer);
        match kinesis.create(name, 2).await {
            Ok((arn, shards)) => Some(Stream {
                kinesis,
                name: name.to_string(),
                arn,
                shards,
            }),
            Err(e) => {
                warn!(error = %e, "no Kinesis stream: the endpoint has no Kinesis");
                None
            }
        }
    }

    /// An event source mapping per shard.
    pub fn mappings(&self, batch_size: usize) -> Vec<ShardMapping> {
        self.shards
            .iter()
            .map(|shard| ShardMapping {
                kinesis: self.kinesis.clone(),
                stream: (self.name.clone(), self.arn.clone()),
                shard: shard.clone(),
                batch_size,
            })
            .collect()
    }
}

/// A Kinesis API endpoint with the stack's credentials.
#[derive(Clone)]
struct Kinesis {
    http: reqwest::Client,
    endpoint: String,
    signer: Arc<Signer>,
    region: String,
}

impl Kinesis {
    /// The API at `endpoint`, signing as the SDK's credential chain says.
    fn new(endpoint: &str, region: &str, signer: Signer) -> Self {
        Self {
            http: reqwest::Client::new(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            signer: Arc::new(signer),
            region: region.to_string(),
        }
    }

    /// The signer of a region's Kinesis calls, with the credentials the
    /// SDK's chain finds for `settings`.
    async fn signer(settings: &AwsSettings, region: &str) -> Option<Signer> {
        let credentials = settings.sdk_config().await.credentials_provider()?;
        Some(Signer::new(
            SigV4 {
                service: "kinesis".into(),
                region: region.into(),
            },
            credentials,
        ))
    }

    async fn call(&self, op: &str, body: Value) -> Result<Value> {
        let bytes = serde_json::to_vec(&body)?;
        let mut request = self
            .http
            .post(format!("{}/", self.endpoint))
            .header("content-type", "application/x-amz-json-1.1")
            .header("x-amz-target", format!("Kinesis_20131202.{op}"))
            .body(bytes.clone())
            .build()?;
        self.signer
            .sign(&mut request, &bytes)
            .await
            .with_context(|| format!("signing Kinesis {op}"))?;
        let response = self.http.execute(request).await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("Kinesis {op}: {status}: {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Creates the stream unless it exists; its ARN and shard ids once active.
    async fn create(&self, stream: &str, shards: u32) -> Result<(String, Vec<String>)> {
        if let Err(e) = self
            .call(
                "CreateStream",
                json!({"StreamName": stream, "ShardCount": shards}),
            )
            .await
            && !e.to_string().contains("ResourceInUseException")
        {
            return Err(e);
        }
        for _ in 0..60 {
            let d = self
                .call("DescribeStream", json!({"StreamName": stream}))
                .await?;
            let d = &d["StreamDescription"];
            if d["StreamStatus"] == "ACTIVE" {
                let arn = d["StreamARN"].as_str().unwrap_or_default().to_string();
                let shards = d["Shards"]
                    .as_array()
                    .map(|s| {
                        s.iter()
                            .filter_map(|s| s["ShardId"].as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                return Ok((arn, shards));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        bail!("Kinesis stream {stream} did not become active")
    }

    async fn iterator(&self, stream: &str, shard: &str, after: Option<&str>) -> Result<String> {
        let mut body = json!({"StreamName": stream, "ShardId": shard});
        match after {
            Some(seq) => {
                body["ShardIteratorType"] = "AT_SEQUENCE_NUMBER".into();
                body["StartingSequenceNumber"] = seq.into();
            }
            None => body["ShardIteratorType"] = "TRIM_HORIZON".into(),
        }
        let out = self.call("GetShardIterator", body).await?;
        out["ShardIterator"]
            .as_str()
            .map(str::to_string)
            .context("GetShardIterator returned no iterator")
    }
}

/// One shard's event source mapping.
pub struct ShardMapping {
    kinesis: Kinesis,
    /// The stream's name and ARN.
    stream: (String, String),
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
                    warn!(shard = %self.shard, error = %e, "Kinesis event source mapping; retrying");
                    iterator = None;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One GetRecords and its invocation; whether it found records.
    /// `iterator` holds the shard iterator and the first sequence number
    /// not yet acknowledged, where an error starts again.
    async fn poll(
        &self,
        writer: &WriterFunction,
        iterator: &mut Option<(String, Option<String>)>,
    ) -> Result<bool> {
        let (stream, arn) = &self.stream;
        let (it, resume) = match iterator.take() {
            Some(i) => i,
            None => (
                self.kinesis.iterator(stream, &self.shard, None).await?,
                None,
            ),
        };
        let out = self
            .kinesis
            .call(
                "GetRecords",
                json!({"ShardIterator": it, "Limit": self.batch_size}),
            )
            .await?;
        let next = out["NextShardIterator"].as_str().map(str::to_string);
        let records = out["Records"].as_array().cloned().unwrap_or_default();
        if records.is_empty() {
            *iterator = next.map(|n| (n, resume));
            return Ok(false);
        }
        let event = json!({"Records": records.iter().map(|r| json!({
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": r["PartitionKey"],
                "sequenceNumber": r["SequenceNumber"],
                "data": r["Data"],
                "approximateArrivalTimestamp": r["ApproximateArrivalTimestamp"],
            },
            "eventSource": "aws:kinesis",
            "eventVersion": "1.0",
            "eventID": format!("{}:{}", self.shard, r["SequenceNumber"].as_str().unwrap_or_default()),
            "eventName": "aws:kinesis:record",
            "awsRegion": self.kinesis.region,
            "eventSourceARN": arn,
        })).collect::<Vec<_>>()});
        let first = records[0]["SequenceNumber"].as_str().map(str::to_string);
        let event = WriterEvent::try_from(event).map_err(|e| anyhow::anyhow!("{e}"))?;
        let answer = match writer.handle(event).await {
            Ok(a) => a,
            Err(e) => {
                // The whole batch comes again, from its first record.
                let again = self
                    .kinesis
                    .iterator(stream, &self.shard, first.as_deref())
                    .await?;
                *iterator = Some((again, first));
                bail!("the writer failed: {e}");
            }
        };
        *iterator = match answer.failures().first() {
            Some(seq) => {
                let seq = seq.to_string();
                let again = self
                    .kinesis
                    .iterator(stream, &self.shard, Some(&seq))
                    .await?;
                Some((again, Some(seq)))
            }
            None => next.map(|n| (n, None)),
        };
        Ok(true)
    }
}

//! The stack's Kafka topic and its event source mapping, driving the writer
//! as an MSK (or self-managed Kafka) mapping does on AWS: one poller per
//! partition fetches from the offset last acknowledged, hands the writer the
//! `aws:kafka` event Lambda would send (at most `batch_size` records, keys
//! and values in base64, grouped by `topic-partition`), and moves past a
//! batch only once the writer answered it; a partial batch response
//! restarts the partition at the first failed offset, an error retries the
//! whole batch.
//!
//! Offsets are held in memory from the earliest the broker keeps, as a new
//! consumer group with `StartingPosition: TRIM_HORIZON` reads: a restart of
//! `floe local` reads the topic again, and the ledger (which keeps a Kafka
//! partition's committed offsets for good) recognises every record it
//! committed before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use floe_writer::{WriterEvent, WriterFunction};
use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::RecordAndOffset;
use serde_json::{Value, json};
use tracing::warn;

/// Partitions of a topic the stack creates: two, so ordering per
/// partition and one poller each are both visible.
const PARTITIONS: i32 = 2;

/// Most bytes one fetch asks for: Lambda's invocation payload limit (6 MB)
/// less room for the event's envelope and base64's growth.
const FETCH_BYTES: i32 = 4 << 20;

/// The stack's topic on a Kafka-compatible broker.
pub struct Topic {
    client: Client,
    /// The topic's name.
    pub name: String,
    /// Its partitions (those of a topic that existed before, else the
    /// stack's [`PARTITIONS`]).
    partitions: Vec<i32>,
    /// `host:port` of the broker, as the event's `bootstrapServers`.
    bootstrap: String,
    /// The cluster's ARN as the event names it (a local stand-in).
    arn: String,
}

impl Topic {
    /// Connects to the broker at `bootstrap` and creates the topic (two
    /// partitions) unless it exists.
    pub async fn create(bootstrap: &str, name: &str) -> Result<Topic> {
        let client = ClientBuilder::new(vec![bootstrap.to_string()])
            .build()
            .await
            .with_context(|| format!("connecting to the Kafka broker at {bootstrap}"))?;
        let topics = client
            .list_topics()
            .await
            .with_context(|| format!("listing the topics of the Kafka broker at {bootstrap}"))?;
        // Asked first, so a restart does not log the broker's refusal as an
        // error, and a topic of the user's keeps its partitions.
        let existing = topics.into_iter().find(|t| t.name == name);
        let partitions = match &existing {
            Some(t) => t.partitions.iter().copied().collect(),
            None => (0..PARTITIONS).collect(),
        };
        if existing.is_none() {
            let created = client
                .controller_client()
                .with_context(|| format!("the Kafka broker at {bootstrap} names no controller"))?
                .create_topic(name, PARTITIONS, 1, 5_000)
                .await;
            match created {
                // Another stack created it meanwhile.
                Ok(())
                | Err(KafkaError::ServerError {
                    protocol_error: ProtocolError::TopicAlreadyExists,
                    ..
                }) => {}
                Err(e) => return Err(e).with_context(|| format!("creating Kafka topic {name}")),
            }
        }
        Ok(Topic {
            client,
            name: name.to_string(),
            partitions,
            bootstrap: bootstrap.to_string(),
            arn: format!("arn:aws:kafka:us-east-1:000000000000:cluster/floe-local/{name}"),
        })
    }

    /// What it is, for the stack's banner.
    pub fn describe(&self) -> String {
        format!(
            "Kafka topic {} on {} ({} partitions)",
            self.name,
            self.bootstrap,
            self.partitions.len()
        )
    }

    /// An event source mapping per partition.
    pub async fn mappings(self: &Arc<Self>, batch_size: usize) -> Result<Vec<PartitionMapping>> {
        let mut mappings = Vec::new();
        for &partition in &self.partitions {
            let client = self
                .client
                .partition_client(self.name.clone(), partition, UnknownTopicHandling::Retry)
                .await
                .with_context(|| format!("Kafka partition {}/{partition}", self.name))?;
            mappings.push(PartitionMapping {
                topic: self.clone(),
                partition,
                client,
                batch_size: batch_size.max(1),
            });
        }
        Ok(mappings)
    }

    /// The event Lambda sends for `records` of `partition`.
    fn event(&self, partition: i32, records: &[RecordAndOffset]) -> Value {
        let records: Vec<Value> = records
            .iter()
            .map(|r| {
                // Lambda sends a header's value as Java's signed bytes.
                let headers: Vec<Value> = r
                    .record
                    .headers
                    .iter()
                    .map(|(k, v)| json!({ k: v.iter().map(|b| *b as i8).collect::<Vec<_>>() }))
                    .collect();
                json!({
                    "topic": self.name,
                    "partition": partition,
                    "offset": r.offset,
                    "timestamp": r.record.timestamp.timestamp_millis(),
                    "timestampType": "CREATE_TIME",
                    "key": r.record.key.as_ref().map(|k| BASE64.encode(k)),
                    "value": r.record.value.as_ref().map(|v| BASE64.encode(v)),
                    "headers": headers,
                })
            })
            .collect();
        json!({
            "eventSource": "aws:kafka",
            "eventSourceArn": self.arn,
            "bootstrapServers": self.bootstrap,
            "records": { format!("{}-{partition}", self.name): records },
        })
    }
}

/// One partition's event source mapping.
pub struct PartitionMapping {
    topic: Arc<Topic>,
    partition: i32,
    client: PartitionClient,
    /// Most records per invocation.
    batch_size: usize,
}

impl PartitionMapping {
    /// Polls the partition and invokes `writer` until `stop`.
    pub async fn run(&self, writer: &WriterFunction, stop: &AtomicBool) {
        let mut next = None;
        while !stop.load(Ordering::Relaxed) {
            match self.poll(writer, &mut next).await {
                Ok(true) => {}
                Ok(false) => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => {
                    warn!(topic = %self.topic.name, partition = self.partition, error = %e, "event source mapping; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One fetch and its invocation; whether it found records. `next` is
    /// the first offset not acknowledged (unset: the earliest kept).
    async fn poll(&self, writer: &WriterFunction, next: &mut Option<i64>) -> Result<bool> {
        let from = match *next {
            Some(o) => o,
            None => self.client.get_offset(OffsetAt::Earliest).await?,
        };
        let (fetched, _high_watermark) =
            self.client.fetch_records(from, 1..FETCH_BYTES, 500).await?;
        // A fetch answers whole record batches, which may begin before `from`.
        let records: Vec<RecordAndOffset> = fetched
            .into_iter()
            .filter(|r| r.offset >= from)
            .take(self.batch_size)
            .collect();
        let Some(last) = records.last().map(|r| r.offset) else {
            *next = Some(from);
            return Ok(false);
        };
        let event = self.topic.event(self.partition, &records);
        let event = WriterEvent::try_from(event).map_err(|e| anyhow::anyhow!("{e}"))?;
        let answer = match writer.handle(event).await {
            Ok(a) => a,
            Err(e) => {
                // The whole batch comes again, from its first record.
                *next = Some(from);
                bail!("the writer failed: {e}");
            }
        };
        *next = Some(match answer.failures().first() {
            Some(offset) => offset
                .parse()
                .with_context(|| format!("the writer named {offset:?} as a failed offset"))?,
            None => last + 1,
        });
        Ok(true)
    }
}

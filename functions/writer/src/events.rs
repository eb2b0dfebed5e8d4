//! Lambda event shapes to floe source batches: one batch per source shard or
//! partition, with the positions its batch id and ordering are derived from,
//! and what Lambda must be told if that batch fails.

use std::collections::BTreeMap;

use aws_lambda_events::event::kafka::KafkaEvent;
use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::{
    DynamoDbBatchItemFailure, DynamoDbEventResponse, KinesisEventResponse,
};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use floe_core::source::SourceKind;
use floe_core::source::{Position, Positions, SourceSpan};
use floe_core::source::{Records, Source, SourceBatch};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// An event this function cannot read; Lambda retries it as a whole.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// Not one of the event kinds the writer takes.
    #[error(
        "unrecognised event: expected SQS, Kinesis, Kafka (MSK or self-managed) or DynamoDB Streams records ({0})"
    )]
    Unknown(String),
    /// A recognised event with a field floe needs missing or malformed.
    #[error("{kind} event: {message}")]
    Malformed {
        /// The event kind.
        kind: &'static str,
        /// What is wrong.
        message: String,
    },
}

fn malformed(kind: &'static str, message: impl Into<String>) -> EventError {
    EventError::Malformed {
        kind,
        message: message.into(),
    }
}

/// One source batch of an invocation and the `batchItemFailures` identifiers
/// that make Lambda redeliver exactly it.
#[derive(Debug, Clone)]
pub struct Part {
    /// The batch for the writer step.
    pub batch: SourceBatch,
    /// SQS: every message id of the batch. Ordered sources: the first
    /// sequence number or offset, since Lambda checkpoints before it and
    /// redelivers everything after.
    pub on_failure: Vec<String>,
}

/// How events are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Name each Kinesis record by its sequence number alone, not as part of
    /// a range of its shard: with a parallelization factor above 1, Lambda
    /// hands a shard's records to several invocations at once, so one
    /// batch's first and last position no longer enclose only its own records.
    pub kinesis_per_record: bool,
    /// The Kinesis stream the HTTP function buffers POSTs in
    /// (`http.buffer_stream`): its records are POSTs, a window of a shard
    /// one batch per table.
    pub buffer_stream: Option<String>,
}

/// The environment variable that sets [`DecodeOptions::kinesis_per_record`]
/// (the Terraform module sets it when a Kinesis source has a parallelization
/// factor above 1).
pub const KINESIS_PER_RECORD: &str = "FLOE_KINESIS_PER_RECORD";

impl DecodeOptions {
    /// The options the function's environment sets.
    pub fn from_env() -> Self {
        Self {
            kinesis_per_record: std::env::var(KINESIS_PER_RECORD)
                .is_ok_and(|v| v.eq_ignore_ascii_case("true")),
            buffer_stream: None,
        }
    }
}

/// An event the writer function takes. Lambda's event types default every
/// field, so any of them would read any event: the source is told apart as
/// Lambda marks it, by Kafka's top-level `eventSource`, else by the first
/// record's.
#[derive(Debug, Clone)]
pub enum WriterEvent {
    /// SQS messages, of one queue or several.
    Sqs(SqsEvent),
    /// Kinesis records, with each one's arrival at the stream (ms since
    /// epoch) read from the event's JSON: aws_lambda_events reads the
    /// fraction of `1700000001.25` as 25 ms.
    Kinesis {
        /// The event.
        event: KinesisEvent,
        /// Per record, in the event's order.
        arrived_ms: Vec<Option<i64>>,
    },
    /// Kafka records (MSK or self-managed), by topic-partition.
    Kafka(KafkaEvent),
    /// DynamoDB Streams records.
    DynamoDb(DynamoDbEvent),
}

/// A DynamoDB Streams event whose records stay JSON: each goes whole to
/// floe's change decoder (aws_lambda_events' typed records need
/// serde_dynamo, which floe does not build).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DynamoDbEvent {
    /// The stream records, as Lambda sent them.
    #[serde(rename = "Records", default)]
    pub records: Vec<Value>,
}

impl TryFrom<Value> for WriterEvent {
    type Error = EventError;

    fn try_from(event: Value) -> Result<Self, EventError> {
        if let Some(source) = event.get("eventSource").and_then(Value::as_str)
            && (source == "aws:kafka" || source == "SelfManagedKafka")
        {
            return typed("Kafka", event).map(Self::Kafka);
        }
        let Some(records) = event.get("Records").and_then(Value::as_array) else {
            return Err(EventError::Unknown("no Records array".into()));
        };
        let Some(first) = records.first() else {
            // No records name a source, and none make a batch whatever it is.
            return Ok(Self::Sqs(SqsEvent::default()));
        };
        let source = first
            .get("eventSource")
            .or_else(|| first.get("EventSource"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        match source {
            "aws:sqs" => typed("SQS", event).map(Self::Sqs),
            "aws:kinesis" => {
                let arrived_ms = records
                    .iter()
                    .map(|r| {
                        r.pointer("/kinesis/approximateArrivalTimestamp")
                            .and_then(seconds_to_ms)
                    })
                    .collect();
                let event = typed("Kinesis", event)?;
                Ok(Self::Kinesis { event, arrived_ms })
            }
            "aws:dynamodb" => typed("DynamoDB Streams", event).map(Self::DynamoDb),
            other => Err(EventError::Unknown(format!("eventSource {other:?}"))),
        }
    }
}

impl<'de> Deserialize<'de> for WriterEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::try_from(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    kind: &'static str,
    event: Value,
) -> Result<T, EventError> {
    serde_json::from_value(event).map_err(|e| malformed(kind, e.to_string()))
}

/// Lambda's partial batch response, in the type of the event's source; all
/// serialise as `{"batchItemFailures": [{"itemIdentifier": …}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum WriterResponse {
    /// Message ids of an SQS event.
    Sqs(SqsBatchResponse),
    /// The first sequence number (Kinesis) or offset (Kafka) of each failed
    /// shard or partition, which Lambda resumes from.
    Stream(KinesisEventResponse),
    /// The first sequence number of each failed DynamoDB stream batch.
    DynamoDb(DynamoDbEventResponse),
}

impl WriterResponse {
    /// Nothing to redeliver yet, in the response type of `event`'s source.
    pub(crate) fn for_event(event: &WriterEvent) -> Self {
        match event {
            WriterEvent::Sqs(_) => Self::Sqs(SqsBatchResponse::default()),
            WriterEvent::Kinesis { .. } | WriterEvent::Kafka(_) => {
                Self::Stream(KinesisEventResponse::default())
            }
            WriterEvent::DynamoDb(_) => Self::DynamoDb(DynamoDbEventResponse::default()),
        }
    }

    /// Names every identifier of `part` for redelivery.
    pub(crate) fn fail(&mut self, part: &Part) {
        for id in &part.on_failure {
            self.add_failure(id.clone());
        }
    }

    fn add_failure(&mut self, id: String) {
        match self {
            Self::Sqs(r) => r.add_failure(id),
            Self::Stream(r) => r.add_failure(id),
            Self::DynamoDb(r) => {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some(id);
                r.batch_item_failures.push(failure);
            }
        }
    }

    /// The identifiers Lambda is told to redeliver, in the response's order.
    pub fn failures(&self) -> Vec<&str> {
        match self {
            Self::Sqs(r) => r
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.as_str())
                .collect(),
            Self::Stream(r) => r
                .batch_item_failures
                .iter()
                .filter_map(|f| f.item_identifier.as_deref())
                .collect(),
            Self::DynamoDb(r) => r
                .batch_item_failures
                .iter()
                .filter_map(|f| f.item_identifier.as_deref())
                .collect(),
        }
    }
}

/// Splits an event into source batches, in the order the event holds them.
pub fn decode(event: WriterEvent) -> Result<Vec<Part>, EventError> {
    decode_with(event, DecodeOptions::default())
}

/// [`decode`] with options.
pub fn decode_with(event: WriterEvent, opts: DecodeOptions) -> Result<Vec<Part>, EventError> {
    match event {
        WriterEvent::Sqs(event) => sqs(event),
        WriterEvent::Kinesis { event, arrived_ms } => kinesis(event, &arrived_ms, &opts),
        WriterEvent::Kafka(event) => kafka(event),
        WriterEvent::DynamoDb(event) => dynamodb(&event.records),
    }
}

/// The last `:`-separated part of an ARN, or the part after `marker`.
fn arn_resource<'a>(arn: &'a str, marker: &str) -> &'a str {
    match arn.split_once(marker) {
        Some((_, rest)) => rest,
        None => arn.rsplit(':').next().unwrap_or(arn),
    }
}

/// Epoch seconds, possibly fractional, as ms; `None` unless positive.
fn seconds_to_ms(v: &Value) -> Option<i64> {
    v.as_f64()
        .filter(|s| *s > 0.0)
        .map(|s| (s * 1000.0).round() as i64)
}

/// The earlier of two arrival times, either possibly unknown.
fn oldest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn batch(
    kind: SourceKind,
    name: &str,
    spans: Vec<SourceSpan>,
    items: Vec<(String, Bytes)>,
    oldest_ms: Option<i64>,
) -> SourceBatch {
    SourceBatch::new(Source::new(kind, name), spans, Records::Items(items)).oldest(oldest_ms)
}

fn sqs(event: SqsEvent) -> Result<Vec<Part>, EventError> {
    // Per queue: its messages and the oldest one's SentTimestamp.
    type Queue = (Vec<(String, Bytes)>, Option<i64>);
    let mut queues: BTreeMap<String, Queue> = BTreeMap::new();
    for m in event.records {
        let Some(id) = m.message_id else {
            return Err(malformed("SQS", "a record has no messageId"));
        };
        let queue = m
            .event_source_arn
            .as_deref()
            .and_then(|a| a.rsplit(':').next())
            .map(str::to_string)
            .unwrap_or_default();
        let sent = m
            .attributes
            .get("SentTimestamp")
            .and_then(|t| t.parse().ok());
        let body = Bytes::from(m.body.unwrap_or_default());
        let entry = queues.entry(queue).or_default();
        entry.0.push((id, body));
        entry.1 = oldest(entry.1, sent);
    }
    Ok(queues
        .into_iter()
        .map(|(queue, (items, sent))| {
            let ids: Vec<String> = items.iter().map(|(id, _)| id.clone()).collect();
            // A queue is unordered: the batch is the set of its message ids.
            let spans = vec![SourceSpan {
                source: format!("sqs:{queue}"),
                positions: Positions::Ids { ids: ids.clone() },
                stream: false,
            }];
            Part {
                batch: batch(SourceKind::Sqs, &queue, spans, items, sent),
                on_failure: ids,
            }
        })
        .collect())
}

/// Records of one ordered shard or partition, in source order.
struct Shard {
    kind: SourceKind,
    name: String,
    source: String,
    stream: bool,
    items: Vec<(Position, Bytes)>,
    /// The oldest record's arrival at the source, ms since epoch.
    oldest_ms: Option<i64>,
}

impl Shard {
    /// A batch per table of the HTTP POSTs the shard's records are (the
    /// HTTP function's buffer), leaving it the records that are none. A
    /// failed one restarts the whole shard: what was written of it is then
    /// known to each table's ledger by its records' names.
    fn take_posts(&mut self) -> Vec<Part> {
        let Some(first) = self.items.iter().map(|(p, _)| p).min().cloned() else {
            return Vec::new();
        };
        let window = floe_core::http::buffer::window(std::mem::take(&mut self.items));
        // Only the HTTP function writes the stream; anything else in it
        // goes on as the shard's own records, routed as such.
        self.items = window.others;
        window
            .batches
            .into_iter()
            .map(|batch| Part {
                batch,
                on_failure: vec![first.to_string()],
            })
            .collect()
    }

    /// The batch naming each record by its position alone.
    fn into_ids_part(self) -> Option<Part> {
        let first = self.items.iter().map(|(p, _)| p).min()?.to_string();
        let items: Vec<(String, Bytes)> = self
            .items
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect();
        let spans = vec![SourceSpan {
            source: self.source,
            positions: Positions::Ids {
                ids: items.iter().map(|(p, _)| p.clone()).collect(),
            },
            stream: false,
        }];
        Some(Part {
            batch: batch(self.kind, &self.name, spans, items, self.oldest_ms),
            on_failure: vec![first],
        })
    }

    fn into_part(self) -> Option<Part> {
        let first = self.items.iter().map(|(p, _)| p).min()?.clone();
        let last = self.items.iter().map(|(p, _)| p).max()?.clone();
        let spans = vec![SourceSpan {
            source: self.source,
            positions: Positions::Range {
                first: first.clone(),
                last,
            },
            stream: self.stream,
        }];
        let items = self
            .items
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect();
        Some(Part {
            batch: batch(self.kind, &self.name, spans, items, self.oldest_ms),
            on_failure: vec![first.to_string()],
        })
    }
}

fn position(kind: &'static str, text: &str) -> Result<Position, EventError> {
    Position::parse(text)
        .ok_or_else(|| malformed(kind, format!("position {text:?} is not a decimal number")))
}

fn kinesis(
    event: KinesisEvent,
    arrived_ms: &[Option<i64>],
    opts: &DecodeOptions,
) -> Result<Vec<Part>, EventError> {
    let mut shards: BTreeMap<String, Shard> = BTreeMap::new();
    for (i, r) in event.records.into_iter().enumerate() {
        let stream = r
            .event_source_arn
            .as_deref()
            .map(|a| arn_resource(a, ":stream/"))
            .unwrap_or_default()
            .to_string();
        // eventID is `shardId-000000000000:<sequence number>`.
        let shard = r
            .event_id
            .as_deref()
            .and_then(|id| id.split_once(':'))
            .map(|(s, _)| s.to_string())
            .ok_or_else(|| malformed("Kinesis", "a record's eventID names no shard"))?;
        let pos = position("Kinesis", &r.kinesis.sequence_number)?;
        let arrived = arrived_ms.get(i).copied().flatten();
        let source = format!("kinesis:{stream}/{shard}");
        let shard = shards.entry(source.clone()).or_insert_with(|| Shard {
            kind: SourceKind::Kinesis,
            name: stream,
            source,
            stream: true,
            items: Vec::new(),
            oldest_ms: None,
        });
        shard.items.push((pos, Bytes::from(r.kinesis.data.0)));
        shard.oldest_ms = oldest(shard.oldest_ms, arrived);
    }
    let mut parts = Vec::new();
    for mut shard in shards.into_values() {
        if opts.buffer_stream.as_deref() == Some(shard.name.as_str()) {
            parts.extend(shard.take_posts());
        }
        parts.extend(match opts.kinesis_per_record {
            true => shard.into_ids_part(),
            false => shard.into_part(),
        });
    }
    Ok(parts)
}

fn kafka(event: KafkaEvent) -> Result<Vec<Part>, EventError> {
    let mut parts: BTreeMap<String, Shard> = BTreeMap::new();
    let mut tombstones = 0usize;
    for (key, records) in event.records {
        for r in records {
            // The map key is `topic-partition`; the record names both too.
            let topic = r
                .topic
                .clone()
                .or_else(|| key.rsplit_once('-').map(|(t, _)| t.to_string()))
                .ok_or_else(|| malformed("Kafka", format!("no topic for {key:?}")))?;
            let offset = u64::try_from(r.offset)
                .map_err(|_| malformed("Kafka", format!("negative offset {}", r.offset)))?;
            // A null value is log compaction's tombstone: a delete of its key
            // on an upsert topic, which the writer applies to keyed tables
            // and skips for append ones (Debezium also sends one after each
            // delete event, which is then a no-op). Without a key it says
            // nothing.
            let record = match r.value.filter(|v| !v.is_empty()) {
                Some(value) => {
                    // A value that is not base64 is kept as it came, so the
                    // writer dead-letters it with its offset instead of
                    // failing the batch.
                    BASE64
                        .decode(value.as_bytes())
                        .map(Bytes::from)
                        .unwrap_or_else(|_| Bytes::from(value))
                }
                None => {
                    tombstones += 1;
                    match r.key.as_deref().map(|k| BASE64.decode(k.as_bytes())) {
                        Some(Ok(key)) if !key.is_empty() => {
                            Bytes::from(floe_core::change::tombstone_record(&key))
                        }
                        _ => continue,
                    }
                }
            };
            let source = format!("kafka:{topic}/{}", r.partition);
            let produced = r.timestamp.0.timestamp_millis();
            let part = parts.entry(source.clone()).or_insert_with(|| Shard {
                kind: SourceKind::Kafka,
                name: topic,
                source,
                stream: true,
                items: Vec::new(),
                oldest_ms: None,
            });
            part.items.push((Position::from(offset), record));
            part.oldest_ms = oldest(part.oldest_ms, (produced > 0).then_some(produced));
        }
    }
    if tombstones > 0 {
        tracing::info!(
            tombstones,
            "Kafka tombstones (null values) passed on as deletes of their keys"
        );
    }
    for shard in parts.values_mut() {
        shard.items.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(parts.into_values().filter_map(Shard::into_part).collect())
}

fn dynamodb(records: &[Value]) -> Result<Vec<Part>, EventError> {
    // Lambda's event names the stream, not the shard, and the shards of one
    // stream interleave their sequence numbers: records are named by their
    // event id (unordered idempotency); a keyed table orders each key's
    // changes by sequence number, which DynamoDB keeps increasing per item.
    type Stream = (String, Vec<(String, Bytes)>, Option<i64>);
    let mut streams: BTreeMap<String, Stream> = BTreeMap::new();
    for r in records {
        let arn = r
            .get("eventSourceARN")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // `arn:aws:dynamodb:…:table/orders/stream/2024-01-01T00:00:00.000`.
        let resource = arn_resource(arn, ":table/");
        let (table, label) = resource.split_once("/stream/").unwrap_or((resource, ""));
        let id = r
            .get("eventID")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| malformed("DynamoDB Streams", "a record has no eventID"))?;
        // The sequence number must be there for per-key order.
        let seq = r
            .pointer("/dynamodb/SequenceNumber")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                malformed(
                    "DynamoDB Streams",
                    "a record has no dynamodb.SequenceNumber",
                )
            })?;
        position("DynamoDB Streams", seq)?;
        let source = format!("dynamodb:{table}/{label}");
        let created = r
            .pointer("/dynamodb/ApproximateCreationDateTime")
            .and_then(seconds_to_ms);
        // The record goes whole to floe's DynamoDB change decoder.
        let body =
            serde_json::to_vec(r).map_err(|e| malformed("DynamoDB Streams", e.to_string()))?;
        let stream = streams
            .entry(source)
            .or_insert_with(|| (table.to_string(), Vec::new(), None));
        stream.1.push((id.to_string(), Bytes::from(body)));
        // ApproximateCreationDateTime has whole seconds: the record may have
        // arrived up to a second before it.
        stream.2 = oldest(stream.2, created.map(|c| c - 1000));
    }
    Ok(streams
        .into_iter()
        .map(|(source, (table, items, created))| {
            let ids: Vec<String> = items.iter().map(|(id, _)| id.clone()).collect();
            let spans = vec![SourceSpan {
                source,
                positions: Positions::Ids { ids },
                stream: false,
            }];
            // Lambda retries a DynamoDB batch from its first record.
            let on_failure = items
                .first()
                .and_then(|(_, body)| {
                    serde_json::from_slice::<Value>(body)
                        .ok()?
                        .pointer("/dynamodb/SequenceNumber")?
                        .as_str()
                        .map(str::to_string)
                })
                .into_iter()
                .collect();
            Part {
                batch: batch(SourceKind::DynamoDb, &table, spans, items, created),
                on_failure,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode_json(event: &Value) -> Result<Vec<Part>, EventError> {
        decode(WriterEvent::try_from(event.clone())?)
    }

    #[test]
    fn kinesis_batches_per_shard_with_the_first_sequence_to_retry() {
        let rec = |shard: &str, seq: &str, data: &str, arrived: f64| {
            json!({
                "eventSource": "aws:kinesis",
                "eventID": format!("{shard}:{seq}"),
                "eventSourceARN": "arn:aws:kinesis:us-east-1:1:stream/clicks",
                "kinesis": {"data": BASE64.encode(data), "sequenceNumber": seq,
                    "partitionKey": "k", "kinesisSchemaVersion": "1.0",
                    "approximateArrivalTimestamp": arrived}
            })
        };
        let event = json!({"Records": [
            rec("shardId-1", "100", "{\"a\":1}", 1_700_000_002.5),
            rec("shardId-2", "7", "{\"a\":2}", 1_700_000_009.0),
            rec("shardId-1", "101", "{\"a\":3}", 1_700_000_001.25),
        ]});
        let parts = decode_json(&event).unwrap();
        assert_eq!(parts.len(), 2);
        // Freshness counts from the oldest arrival of each shard's batch.
        assert_eq!(parts[0].batch.oldest_ms, Some(1_700_000_001_250));
        assert_eq!(parts[1].batch.oldest_ms, Some(1_700_000_009_000));
        assert_eq!(parts[0].batch.spans[0].source, "kinesis:clicks/shardId-1");
        assert_eq!(parts[0].on_failure, vec!["100".to_string()]);
        assert!(parts[0].batch.spans[0].stream);
        let again = decode_json(&event).unwrap();
        assert_eq!(parts[0].batch.batch_id, again[0].batch.batch_id);
    }

    #[test]
    fn unknown_events_are_refused() {
        assert!(decode_json(&json!({"foo": 1})).is_err());
        assert!(decode_json(&json!({"Records": [{"eventSource": "aws:s3"}]})).is_err());
        assert!(decode_json(&json!({"Records": []})).unwrap().is_empty());
    }

    #[test]
    fn events_read_as_lambda_sends_them_are_answered_in_its_shape() {
        let sqs = r#"{"Records": [{"messageId": "m1", "body": "{}", "eventSource": "aws:sqs",
            "attributes": {}, "messageAttributes": {}}]}"#;
        let event: WriterEvent = serde_json::from_str(sqs).unwrap();
        assert!(matches!(&event, WriterEvent::Sqs(e) if e.records.len() == 1));
        let mut response = WriterResponse::for_event(&event);
        let parts = decode(event).unwrap();
        response.fail(&parts[0]);
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({"batchItemFailures": [{"itemIdentifier": "m1"}]})
        );

        let kafka: WriterEvent =
            serde_json::from_str(r#"{"eventSource": "SelfManagedKafka", "records": {}}"#).unwrap();
        let mut response = WriterResponse::for_event(&kafka);
        response.add_failure("10".into());
        assert_eq!(response.failures(), vec!["10"]);
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({"batchItemFailures": [{"itemIdentifier": "10"}]})
        );

        let s3 = r#"{"Records": [{"eventSource": "aws:s3"}]}"#;
        let refused = serde_json::from_str::<WriterEvent>(s3).unwrap_err();
        assert!(
            refused.to_string().contains("unrecognised event"),
            "{refused}"
        );
    }

    #[test]
    fn kafka_tombstones_pass_on_as_deletes_of_their_keys() {
        let rec = |offset: i64, key: Option<&str>, value: Value| {
            json!({"topic": "orders", "partition": 0, "offset": offset,
                   "timestamp": 1_700_000_000_000i64, "timestampType": "CREATE_TIME",
                   "key": key.map(|k| BASE64.encode(k)), "value": value, "headers": []})
        };
        let event = json!({
            "eventSource": "aws:kafka",
            "eventSourceArn": "arn:aws:kafka:us-east-1:1:cluster/c/abc",
            "records": {"orders-0": [
                rec(10, Some("{\"id\":7}"), json!(BASE64.encode("{\"op\":\"d\",\"before\":{\"id\":7}}"))),
                rec(11, Some("{\"id\":7}"), Value::Null),
                rec(12, Some("k8"), json!("")),
                rec(13, None, Value::Null),
            ]}
        });
        let parts = decode_json(&event).unwrap();
        assert_eq!(parts.len(), 1);
        let items: Vec<_> = parts[0]
            .batch
            .records
            .iter()
            .map(|(_, r)| r.to_vec())
            .collect();
        assert_eq!(items.len(), 3, "a keyless tombstone says nothing");
        assert_eq!(
            floe_core::change::tombstone_key(&items[1]),
            Some("{\"id\":7}")
        );
        assert_eq!(floe_core::change::tombstone_key(&items[2]), Some("\"k8\""));
        // The range still names every offset, so a redelivery is recognised.
        assert_eq!(
            parts[0].batch.spans[0].positions,
            Positions::Range {
                first: 10u64.into(),
                last: 12u64.into()
            }
        );
    }
}

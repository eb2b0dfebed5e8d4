//! What the function tests build on moto again and again: a bucket and a
//! commit queue, Lambda events of SQS messages and Kinesis records, and the
//! committer handler run on the commit queue as Lambda's SQS event source
//! runs it. Included with `mod moto;` by the test binaries that use it.
#![allow(dead_code)]

use std::collections::HashSet;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use floe_committer::CommitterFunction;
use floe_core::aws::AwsClients;
use floe_writer::{WriterEvent, WriterResponse};
use serde_json::{Value, json};

/// `prefix_<uuid>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// A new bucket and a new commit queue on moto: (bucket, queue URL).
pub async fn bucket_and_queue(clients: &AwsClients) -> (String, String) {
    let bucket = unique("floe").replace('_', "-");
    clients
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let queue_url = clients
        .sqs
        .create_queue()
        .queue_name(unique("floe-commits"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    (bucket, queue_url)
}

/// A partial batch response: the writer's or the committer's.
pub trait Answer {
    /// The identifiers it names for redelivery.
    fn named(&self) -> Vec<String>;
}

impl Answer for WriterResponse {
    fn named(&self) -> Vec<String> {
        self.failures().into_iter().map(str::to_string).collect()
    }
}

impl Answer for SqsBatchResponse {
    fn named(&self) -> Vec<String> {
        self.batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect()
    }
}

/// The identifiers a handler's partial batch response names.
pub fn failures(answer: &impl Answer) -> Vec<String> {
    answer.named()
}

/// A Lambda event's JSON as the writer function takes it.
pub fn writer_event(event: Value) -> WriterEvent {
    WriterEvent::try_from(event).unwrap()
}

/// A Lambda SQS event's JSON as the committer function takes it.
pub fn commit_event(event: Value) -> SqsEvent {
    serde_json::from_value(event).unwrap()
}

/// An SQS event of `(message id, body)` messages from queue `orders`,
/// sent at `sent_ms` and received `receives` times.
pub fn sqs_event(messages: &[(&str, String)], sent_ms: i64, receives: u32) -> WriterEvent {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, body)| {
            json!({
                "messageId": id,
                "receiptHandle": format!("rh-{id}-{receives}"),
                "body": body,
                "attributes": {"ApproximateReceiveCount": receives.to_string(), "SentTimestamp": sent_ms.to_string()},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    writer_event(json!({ "Records": records }))
}

/// A Kinesis event of shard 1 of `stream`: `(sequence number, data)` records.
pub fn kinesis_event(stream: &str, records: &[(&str, Vec<u8>)]) -> WriterEvent {
    let records: Vec<Value> = records
        .iter()
        .map(|(seq, data)| {
            json!({
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "pk",
                    "sequenceNumber": seq,
                    "data": BASE64.encode(data),
                    "approximateArrivalTimestamp": 1_700_000_000.5
                },
                "eventSource": "aws:kinesis",
                "eventID": format!("shardId-000000000001:{seq}"),
                "eventSourceARN": format!("arn:aws:kinesis:us-east-1:123456789012:stream/{stream}"),
            })
        })
        .collect();
    writer_event(json!({ "Records": records }))
}

/// Runs the committer handler on what is in the queue at `queue_url`, as
/// Lambda's SQS event source would, with up to `batch` messages per
/// invocation (SQS hands out 10 per receive; Lambda polls until the batch
/// or its window is full): messages it names as failed come back, the
/// others are deleted. Returns the handler's answers.
pub async fn drain(
    clients: &AwsClients,
    queue_url: &str,
    committer: &CommitterFunction,
    batch: usize,
) -> Vec<SqsBatchResponse> {
    let mut answers = Vec::new();
    for _ in 0..20 {
        let mut messages = Vec::new();
        while messages.len() < batch {
            let out = clients
                .sqs
                .receive_message()
                .queue_url(queue_url)
                .max_number_of_messages((batch - messages.len()).min(10) as i32)
                .wait_time_seconds(1)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap();
            if out.messages().is_empty() {
                break;
            }
            messages.extend(out.messages().iter().cloned());
        }
        if messages.is_empty() {
            return answers;
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let count = m
                    .attributes()
                    .and_then(|a| {
                        a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                    })
                    .cloned()
                    .unwrap_or_else(|| "1".into());
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": {"ApproximateReceiveCount": count},
                    "messageAttributes": {},
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-commits",
                    "awsRegion": "us-east-1",
                })
            })
            .collect();
        let answer = committer
            .handle(commit_event(json!({ "Records": records })), None)
            .await;
        let failed: HashSet<String> = failures(&answer).into_iter().collect();
        for m in &messages {
            let handle = m.receipt_handle().unwrap();
            if failed.contains(m.message_id().unwrap()) {
                clients
                    .sqs
                    .change_message_visibility()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .send()
                    .await
                    .unwrap();
            } else {
                clients
                    .sqs
                    .delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .unwrap();
            }
        }
        answers.push(answer);
    }
    panic!("the committer did not empty the queue in 20 rounds: {answers:?}");
}

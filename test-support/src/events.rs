//! Lambda events as the functions' tests hand them to the handlers.

use serde_json::{Value, json};

/// One message of the source queue `floe-source` in Lambda's SQS event,
/// sent at a fixed time (2023-11-14) and received once.
pub fn sqs_message(id: &str, body: String) -> Value {
    json!({
        "messageId": id,
        "receiptHandle": format!("rh-{id}"),
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:floe-source",
        "awsRegion": "us-east-1",
    })
}

//! The commit queue on Amazon SQS.
//!
//! A standard queue by default: a committer batch takes up to 10,000 requests
//! where FIFO takes 10, and the ledger makes order and duplicates harmless;
//! a queue whose URL ends in `.fifo` gets one message group per table and a
//! deduplication id from the body's hash, so a writer's retried send is
//! dropped by SQS itself.
//!
//! Claim check: SQS takes at most 256 KiB per message, and a commit request for
//! a batch with many files can exceed it. Bodies over [`CLAIM_CHECK_THRESHOLD`]
//! are put to S3 and the message carries a small JSON reference instead;
//! `receive` resolves it, and `ack` deletes the object only after the message is
//! deleted, so a message that can still be redelivered never loses its body.
//! The object's key is the body's hash: a retried send rewrites the same object
//! instead of leaving an orphan.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::{CommitQueue, Delivery, QueueError};
use crate::aws::{AwsClients, AwsError};
use crate::error::{BoxError, Failure};
use crate::storage::StorageError;
use crate::storage::s3::{self, S3Location};

/// Bodies larger than this go to S3; the rest of SQS's 256 KiB is headroom.
pub const CLAIM_CHECK_THRESHOLD: usize = 240 * 1024;

/// SQS's limit on entries per batch call.
const BATCH_ENTRIES: usize = 10;

/// SQS's limit on the summed bodies of one `SendMessageBatch`.
const BATCH_BYTES: usize = 256 * 1024;

/// SQS long polling waits at most this long.
const MAX_WAIT_SECS: u64 = 20;

/// Sends whose entries SQS refused for its own reasons are retried this often.
const SEND_ATTEMPTS: usize = 3;

/// Separates the SQS receipt handle from the claim object in a [`Delivery`]
/// receipt; SQS receipt handles are base64 and never contain it.
const RECEIPT_SEP: char = '\u{1f}';

/// The message body that stands for a body stored in S3.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimRef {
    /// Where the body is: `s3://bucket/key`.
    floe_claim_check: String,
    /// Its length, to check what comes back.
    size: usize,
}

/// What an SQS queue holds, as `floe status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// The queue.
    pub url: String,
    /// Messages waiting to be received.
    pub visible: u64,
    /// Messages received and not yet deleted (a committer is on them).
    pub in_flight: u64,
    /// Messages sent with a delay that has not passed.
    pub delayed: u64,
    /// The redrive policy's dead-letter queue, if any.
    pub dead_letter_arn: Option<String>,
    /// Receives before SQS moves a message there.
    pub max_receive_count: Option<u64>,
}

/// A [`CommitQueue`] on an SQS queue, with claim-check bodies on S3.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    sqs: aws_sdk_sqs::Client,
    s3: aws_sdk_s3::Client,
    url: String,
    fifo: bool,
    claims: S3Location,
}

impl SqsQueue {
    /// The queue at `queue_url`, storing large bodies under `claim_prefix`
    /// (`s3://bucket/prefix`).
    pub fn new(
        clients: &AwsClients,
        queue_url: &str,
        claim_prefix: &str,
    ) -> Result<Self, QueueError> {
        let mut claims = S3Location::parse(claim_prefix).map_err(|e| {
            QueueError::from(Failure::new(
                format!("SQS queue {queue_url}: claim-check prefix"),
                e,
            ))
        })?;
        if !claims.key.is_empty() && !claims.key.ends_with('/') {
            claims.key.push('/');
        }
        Ok(Self {
            sqs: clients.sqs.clone(),
            s3: clients.s3.clone(),
            url: queue_url.to_string(),
            fifo: queue_url.ends_with(".fifo"),
            claims,
        })
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `op` on this queue failed with `source`.
    fn err(&self, op: &str, source: impl Into<BoxError>) -> QueueError {
        Failure::new(format!("SQS {op} {}", self.url), source).into()
    }

    /// `op` on this queue answered what floe cannot go on with.
    fn refused(&self, op: &str, reason: impl std::fmt::Display) -> QueueError {
        Failure::message(format!("SQS {op} {}: {reason}", self.url)).into()
    }

    /// The message body for `body`: itself, or a reference to its S3 copy.
    async fn message_body(&self, body: &Bytes) -> Result<String, QueueError> {
        if body.len() <= CLAIM_CHECK_THRESHOLD
            && let Ok(text) = std::str::from_utf8(body)
        {
            return Ok(text.to_string());
        }
        let loc = S3Location {
            bucket: self.claims.bucket.clone(),
            key: format!("{}{}.json", self.claims.key, body_hash(body)),
        };
        s3::put(&self.s3, &loc, body.clone())
            .await
            .map_err(|e| self.err("claim-check put", e))?;
        let reference = ClaimRef {
            floe_claim_check: loc.uri(),
            size: body.len(),
        };
        serde_json::to_string(&reference).map_err(|e| self.err("claim-check reference", e))
    }

    /// The body a message stands for; `None` when its claim object is gone,
    /// which happens only after the message was acked (a standard queue can
    /// deliver a duplicate of an acked message).
    async fn resolve(&self, text: &str) -> Result<Option<(Bytes, Option<String>)>, QueueError> {
        let reference = match text.starts_with("{\"floe_claim_check\"") {
            true => serde_json::from_str::<ClaimRef>(text).ok(),
            false => None,
        };
        let Some(reference) = reference else {
            return Ok(Some((Bytes::copy_from_slice(text.as_bytes()), None)));
        };
        let loc = S3Location::parse(&reference.floe_claim_check)
            .map_err(|e| self.err("claim-check reference", e))?;
        match s3::get(&self.s3, &loc, None).await {
            Ok(body) if body.len() == reference.size => Ok(Some((body, Some(loc.uri())))),
            Ok(body) => Err(self.refused(
                "claim-check get",
                format!(
                    "{} holds {} bytes, expected {}",
                    loc.uri(),
                    body.len(),
                    reference.size
                ),
            )),
            Err(StorageError::Request {
                status: Some(404), ..
            }) => Ok(None),
            Err(e) => Err(self.err("claim-check get", e)),
        }
    }

    /// A message that a Lambda SQS event source delivered (it receives and
    /// deletes for the function), as a [`Delivery`] whose receipt is the message
    /// id, claim-check body resolved. `None` for a duplicate of a message whose
    /// claim object is gone: that happens only after its request was committed.
    pub async fn event_delivery(
        &self,
        message_id: &str,
        body: &str,
        receive_count: u32,
    ) -> Result<Option<Delivery>, QueueError> {
        Ok(self.resolve(body).await?.map(|(body, claim)| Delivery {
            receipt: match claim {
                Some(c) => format!("{message_id}{RECEIPT_SEP}{c}"),
                None => message_id.to_string(),
            },
            body,
            receive_count,
        }))
    }

    /// The SQS part of a [`Delivery`] receipt: the message id of an
    /// [`SqsQueue::event_delivery`], the receipt handle of a `receive`.
    pub fn message_of(receipt: &str) -> &str {
        split_receipt(receipt).0
    }

    /// Deletes the claim-check objects of event deliveries whose requests are
    /// committed; the event source deletes the messages themselves. A failed
    /// delete only leaves an orphaned body behind, so it is logged, not returned.
    pub async fn forget_claims(&self, receipts: &[String]) {
        for claim in receipts.iter().filter_map(|r| split_receipt(r).1) {
            let deleted = match S3Location::parse(claim) {
                Ok(loc) => s3::delete(&self.s3, &loc).await,
                Err(e) => Err(e),
            };
            if let Err(e) = deleted {
                tracing::warn!(queue = %self.url, claim, error = %e, "claim-check object not deleted");
            }
        }
    }

    /// How many messages the queue holds (SQS's approximate counts) and where
    /// its redrive policy sends the ones that keep failing.
    pub async fn depth(&self) -> Result<QueueDepth, QueueError> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(A::All)
            .send()
            .await
            .map_err(|e| self.err("GetQueueAttributes", AwsError::new(e)))?;
        let attrs = out.attributes();
        let count = |name: A| {
            attrs
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let redrive = attrs
            .and_then(|a| a.get(&A::RedrivePolicy))
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok());
        Ok(QueueDepth {
            url: self.url.clone(),
            visible: count(A::ApproximateNumberOfMessages),
            in_flight: count(A::ApproximateNumberOfMessagesNotVisible),
            delayed: count(A::ApproximateNumberOfMessagesDelayed),
            dead_letter_arn: redrive
                .as_ref()
                .and_then(|p| p["deadLetterTargetArn"].as_str().map(str::to_string)),
            max_receive_count: redrive.as_ref().and_then(|p| match &p["maxReceiveCount"] {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.parse().ok(),
                _ => None,
            }),
        })
    }

    /// FIFO's message group: the table named in the request body, so tables
    /// do not block each other while one table's order is kept.
    fn group_id(body: &Bytes) -> String {
        #[derive(Deserialize)]
        struct Head {
            table: iceberg::TableIdent,
        }
        let Ok(head) = serde_json::from_slice::<Head>(body) else {
            return "floe".to_string();
        };
        let mut name = head.table.namespace().join(".");
        name.push('.');
        name.push_str(head.table.name());
        // MessageGroupId: up to 128 printable ASCII characters.
        name.chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .take(128)
            .collect()
    }

    async fn send_chunk(&self, bodies: &[(Bytes, String)]) -> Result<(), QueueError> {
        let mut pending: Vec<usize> = (0..bodies.len()).collect();
        for attempt in 1..=SEND_ATTEMPTS {
            let mut entries = Vec::with_capacity(pending.len());
            for &i in &pending {
                let (raw, text) = &bodies[i];
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(text);
                if self.fifo {
                    entry = entry
                        .message_group_id(Self::group_id(raw))
                        .message_deduplication_id(body_hash(raw));
                }
                entries.push(entry.build().map_err(|e| self.err("SendMessageBatch", e))?);
            }
            let out = self
                .sqs
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| self.err("SendMessageBatch", AwsError::new(e)))?;
            let failed = out.failed();
            if failed.is_empty() {
                return Ok(());
            }
            if let Some(bad) = failed.iter().find(|f| f.sender_fault()) {
                return Err(self.refused(
                    "SendMessageBatch",
                    format!("{}: {}", bad.code(), bad.message().unwrap_or("refused")),
                ));
            }
            tracing::warn!(queue = %self.url, failed = failed.len(), attempt, "SQS refused some sends; retrying them");
            pending = failed
                .iter()
                .filter_map(|f| f.id().parse::<usize>().ok())
                .collect();
        }
        Err(self.refused(
            "SendMessageBatch",
            format!(
                "{} messages still refused after {SEND_ATTEMPTS} attempts",
                pending.len()
            ),
        ))
    }
}

/// A stable name for a body: FIFO deduplication id and claim-check key.
fn body_hash(body: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(body))
}

/// Splits a [`Delivery`] receipt into the SQS receipt handle and claim object.
fn split_receipt(receipt: &str) -> (&str, Option<&str>) {
    match receipt.split_once(RECEIPT_SEP) {
        Some((handle, claim)) => (handle, Some(claim)),
        None => (receipt, None),
    }
}

#[async_trait]
impl CommitQueue for SqsQueue {
    async fn send(&self, body: Bytes) -> Result<(), QueueError> {
        self.send_batch(vec![body]).await
    }

    async fn send_batch(&self, bodies: Vec<Bytes>) -> Result<(), QueueError> {
        let span = tracing::debug_span!("sqs.send", queue = %self.url, messages = bodies.len());
        async {
            let mut prepared = Vec::with_capacity(bodies.len());
            for body in bodies {
                let text = self.message_body(&body).await?;
                prepared.push((body, text));
            }
            // Greedy chunks within both batch limits.
            let mut start = 0;
            while start < prepared.len() {
                let mut end = start;
                let mut bytes = 0;
                while end < prepared.len()
                    && end - start < BATCH_ENTRIES
                    && (end == start || bytes + prepared[end].1.len() <= BATCH_BYTES)
                {
                    bytes += prepared[end].1.len();
                    end += 1;
                }
                self.send_chunk(&prepared[start..end]).await?;
                start = end;
            }
            Ok(())
        }
        .instrument(span)
        .await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let span = tracing::debug_span!("sqs.receive", queue = %self.url, max);
        async {
            let mut out = Vec::new();
            let mut wait_secs = wait.as_secs().min(MAX_WAIT_SECS);
            while out.len() < max {
                let n = (max - out.len()).min(BATCH_ENTRIES);
                let got = self
                    .sqs
                    .receive_message()
                    .queue_url(&self.url)
                    .max_number_of_messages(n as i32)
                    .wait_time_seconds(wait_secs as i32)
                    .message_system_attribute_names(
                        MessageSystemAttributeName::ApproximateReceiveCount,
                    )
                    .send()
                    .await
                    .map_err(|e| self.err("ReceiveMessage", AwsError::new(e)))?;
                // Only the first call waits: after that, take what is there.
                wait_secs = 0;
                let messages = got.messages();
                if messages.is_empty() {
                    break;
                }
                for m in messages {
                    let (Some(handle), Some(text)) = (m.receipt_handle(), m.body()) else {
                        return Err(self.refused("ReceiveMessage", "message without receipt or body"));
                    };
                    let receive_count = m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                        .and_then(|c| c.parse::<u32>().ok())
                        .unwrap_or(1);
                    match self.resolve(text).await? {
                        Some((body, claim)) => {
                            let receipt = match claim {
                                Some(c) => format!("{handle}{RECEIPT_SEP}{c}"),
                                None => handle.to_string(),
                            };
                            out.push(Delivery {
                                receipt,
                                body,
                                receive_count,
                            });
                        }
                        None => {
                            tracing::info!(queue = %self.url, "dropping a duplicate of an acked claim-check message");
                            self.ack(&[handle.to_string()]).await?;
                        }
                    }
                }
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }

    async fn ack(&self, receipts: &[String]) -> Result<(), QueueError> {
        let span = tracing::debug_span!("sqs.ack", queue = %self.url, messages = receipts.len());
        async {
            let mut errors = Vec::new();
            for chunk in receipts.chunks(BATCH_ENTRIES) {
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(split_receipt(r).0)
                            .build()
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.err("DeleteMessageBatch", e))?;
                let out = self
                    .sqs
                    .delete_message_batch()
                    .queue_url(&self.url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| self.err("DeleteMessageBatch", AwsError::new(e)))?;
                for f in out.failed() {
                    errors.push(format!("{}: {}", f.code(), f.message().unwrap_or("refused")));
                }
                // Claims go only with messages SQS confirms deleted.
                for ok in out.successful() {
                    let claim = ok
                        .id()
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| chunk.get(i))
                        .and_then(|r| split_receipt(r).1);
                    let Some(claim) = claim else { continue };
                    let loc = S3Location::parse(claim).map_err(|e| self.err("claim-check", e))?;
                    if let Err(e) = s3::delete(&self.s3, &loc).await {
                        // The message is gone; an orphaned body is only storage.
                        tracing::warn!(queue = %self.url, claim, error = %e, "claim-check object not deleted");
                    }
                }
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(self.refused("DeleteMessageBatch", errors.join("; ")))
            }
        }
        .instrument(span)
        .await
    }

    async fn release(&self, receipts: &[String]) -> Result<(), QueueError> {
        let span =
            tracing::debug_span!("sqs.release", queue = %self.url, messages = receipts.len());
        async {
            for chunk in receipts.chunks(BATCH_ENTRIES) {
                let entries = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        ChangeMessageVisibilityBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(split_receipt(r).0)
                            .visibility_timeout(0)
                            .build()
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| self.err("ChangeMessageVisibilityBatch", e))?;
                let out = self
                    .sqs
                    .change_message_visibility_batch()
                    .queue_url(&self.url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| self.err("ChangeMessageVisibilityBatch", AwsError::new(e)))?;
                if let Some(f) = out.failed().first() {
                    return Err(self.refused(
                        "ChangeMessageVisibilityBatch",
                        format!("{}: {}", f.code(), f.message().unwrap_or("refused")),
                    ));
                }
            }
            Ok(())
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_carry_their_claim() {
        let r = format!("abc{RECEIPT_SEP}s3://b/claims/x.json");
        assert_eq!(split_receipt(&r), ("abc", Some("s3://b/claims/x.json")));
        assert_eq!(split_receipt("abc"), ("abc", None));
    }

    #[test]
    fn fifo_group_is_the_table() {
        let body = Bytes::from_static(
            br#"{"version":1,"table":{"namespace":["bronze"],"name":"events"}}"#,
        );
        assert_eq!(SqsQueue::group_id(&body), "bronze.events");
        assert_eq!(SqsQueue::group_id(&Bytes::from_static(b"not json")), "floe");
    }
}

//! The AWS envelopes: SNS notifications, EventBridge events, S3 event
//! notifications and CloudWatch Logs subscription data.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::object::{ObjectRef, url_decode};
use super::{EnvelopeKind, Opened, compress, cow_bytes};
use crate::error::RecordError;

/// Opens a decompressed payload by `kind` (never `None`).
pub(super) fn open(bytes: &[u8], kind: EnvelopeKind) -> Result<Opened, RecordError> {
    // SNS wraps whatever its publisher sent, S3 notifications and
    // EventBridge events included: unwrap it first, then look inside.
    let (bytes, from_sns) = match sns(bytes, kind == EnvelopeKind::Sns)? {
        Some(message) => (Cow::Owned(message), true),
        None => (Cow::Borrowed(bytes), false),
    };
    // A message published compressed (base64 text of gzip) opens too.
    let bytes = match compress::decompress(&bytes)
        .map_err(|e| RecordError::envelope("Message", e.to_string()))?
    {
        Cow::Owned(b) => Cow::Owned(b),
        Cow::Borrowed(_) => bytes,
    };
    match kind {
        EnvelopeKind::None => Ok(record(&bytes)),
        EnvelopeKind::Sns => Ok(lines_or_record(&bytes)),
        EnvelopeKind::Eventbridge => match eventbridge(&bytes)? {
            Some(o) => Ok(o),
            None => Err(not_a(
                "an EventBridge event (`detail-type`, `source`, `detail`)",
                from_sns,
            )),
        },
        EnvelopeKind::S3Notification => {
            if let Some(o) = s3_notification(&bytes)? {
                return Ok(o);
            }
            // S3 to EventBridge to a queue carries the same news.
            match eventbridge(&bytes)? {
                Some(o @ Opened::Objects(_)) => Ok(o),
                _ => Err(not_a(
                    "an S3 event notification (`Records[].s3`) or EventBridge `Object Created` event",
                    from_sns,
                )),
            }
        }
        EnvelopeKind::CloudwatchLogs => match cloudwatch_logs(&bytes)? {
            Some(o) => Ok(o),
            None => Err(not_a(
                "CloudWatch Logs subscription data (`messageType`, `logEvents`)",
                from_sns,
            )),
        },
        EnvelopeKind::Auto => {
            if !looks_like_object(&bytes) {
                return Ok(lines_or_record(&bytes));
            }
            let found = if has(&bytes, b"\"logEvents\"") {
                cloudwatch_logs(&bytes).ok().flatten()
            } else if has(&bytes, b"\"detail-type\"") {
                eventbridge(&bytes).ok().flatten()
            } else if has(&bytes, b"\"aws:s3\"") || has(&bytes, b"\"s3:TestEvent\"") {
                s3_notification(&bytes).ok().flatten()
            } else {
                None
            };
            Ok(found.unwrap_or_else(|| lines_or_record(&bytes)))
        }
    }
}

fn not_a(what: &str, from_sns: bool) -> RecordError {
    let inside = if from_sns {
        " inside the SNS Message"
    } else {
        ""
    };
    RecordError::envelope(
        "",
        format!(
            "the payload{inside} is not {what}; fix the source's `envelope` in [sources] (or set it to \"auto\")"
        ),
    )
}

fn record(bytes: &[u8]) -> Opened {
    Opened::Records(vec![Bytes::copy_from_slice(bytes)])
}

/// A payload that is no envelope: its lines when it is NDJSON (a producer
/// that packs many records into one SQS message, Kinesis record or Kafka
/// message, which costs a fraction of one request per record), else the
/// payload as one record. NDJSON is what is not one JSON value but has a
/// line that is an object on its own: a pretty-printed object stays whole,
/// and so does a broken one, dead-lettered as it came rather than as
/// fragments. Each line is then a record of its own, a bad one
/// dead-lettered at its place while the others go on.
fn lines_or_record(bytes: &[u8]) -> Opened {
    let text = bytes.trim_ascii();
    let is_value = |b: &[u8]| serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok();
    if memchr::memchr(b'\n', text).is_none() || is_value(text) {
        return record(bytes);
    }
    let lines = || {
        text.split(|b| *b == b'\n')
            .map(<[u8]>::trim_ascii)
            .filter(|l| !l.is_empty())
    };
    if !lines().any(|l| looks_like_object(l) && is_value(l)) {
        return record(bytes);
    }
    Opened::Records(lines().map(Bytes::copy_from_slice).collect())
}

fn has(bytes: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(bytes, needle).is_some()
}

fn looks_like_object(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().first() == Some(&b'{')
}

fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, RecordError> {
    serde_json::from_slice(bytes).map_err(|e| RecordError::envelope("", format!("not {what}: {e}")))
}

#[derive(Deserialize)]
struct Sns<'a> {
    #[serde(rename = "Type", borrow)]
    kind: Cow<'a, str>,
    #[serde(rename = "TopicArn")]
    topic: Option<&'a RawValue>,
    #[serde(rename = "Message", borrow)]
    message: Option<Cow<'a, str>>,
}

/// The `Message` of an SNS notification; `None` when `bytes` is not one
/// (an error instead when `required`).
fn sns(bytes: &[u8], required: bool) -> Result<Option<Vec<u8>>, RecordError> {
    let candidate = looks_like_object(bytes) && has(bytes, b"\"TopicArn\"");
    if !candidate {
        return match required {
            true => Err(not_a(
                "an SNS notification (`Type`, `TopicArn`, `Message`); with raw message delivery set envelope = \"none\"",
                false,
            )),
            false => Ok(None),
        };
    }
    let parsed: Result<Sns<'_>, _> = serde_json::from_slice(bytes);
    match parsed {
        Ok(n) if n.kind == "Notification" && n.topic.is_some() => match n.message {
            Some(m) => Ok(Some(m.into_owned().into_bytes())),
            None => Err(RecordError::envelope(
                "Message",
                "the SNS notification has no Message",
            )),
        },
        _ if required => Err(not_a(
            "an SNS notification (`Type` \"Notification\", `TopicArn`, `Message`)",
            false,
        )),
        _ => Ok(None),
    }
}

#[derive(Deserialize)]
struct EventBridge<'a> {
    #[serde(rename = "detail-type", borrow)]
    detail_type: Cow<'a, str>,
    #[serde(borrow)]
    source: Cow<'a, str>,
    #[serde(borrow)]
    detail: &'a RawValue,
}

#[derive(Deserialize)]
struct S3Detail<'a> {
    #[serde(borrow)]
    bucket: Named<'a>,
    #[serde(borrow)]
    object: S3DetailObject<'a>,
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

#[derive(Deserialize)]
struct S3DetailObject<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow)]
    etag: Option<Cow<'a, str>>,
    #[serde(rename = "version-id", borrow)]
    version_id: Option<Cow<'a, str>>,
    size: Option<u64>,
}

/// An EventBridge event's `detail` (or, for S3's `Object Created`, the object).
fn eventbridge(bytes: &[u8]) -> Result<Option<Opened>, RecordError> {
    if !looks_like_object(bytes) || !has(bytes, b"\"detail-type\"") {
        return Ok(None);
    }
    let event: EventBridge<'_> = parse(bytes, "an EventBridge event")?;
    if event.source == "aws.s3" {
        if event.detail_type != "Object Created" {
            // Deletions, restores, tag changes: no records.
            return Ok(Some(Opened::Records(Vec::new())));
        }
        let d: S3Detail<'_> = serde_json::from_str(event.detail.get())
            .map_err(|e| RecordError::envelope("detail", format!("not an S3 object event: {e}")))?;
        // EventBridge gives keys as they are (not URL-encoded).
        return Ok(Some(Opened::Objects(vec![ObjectRef {
            bucket: d.bucket.name.into_owned(),
            key: d.object.key.into_owned(),
            etag: d.object.etag.map(|e| e.trim_matches('"').to_string()),
            version: d.object.version_id.map(Cow::into_owned),
            size: d.object.size,
        }])));
    }
    Ok(Some(Opened::Records(vec![Bytes::copy_from_slice(
        event.detail.get().as_bytes(),
    )])))
}

#[derive(Deserialize)]
struct S3Notification<'a> {
    #[serde(rename = "Records", borrow, default)]
    records: Vec<S3Record<'a>>,
    #[serde(rename = "Event", borrow)]
    event: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct S3Record<'a> {
    #[serde(rename = "eventSource", borrow)]
    event_source: Cow<'a, str>,
    #[serde(rename = "eventName", borrow)]
    event_name: Cow<'a, str>,
    #[serde(borrow)]
    s3: S3Entity<'a>,
}

#[derive(Deserialize)]
struct S3Entity<'a> {
    #[serde(borrow)]
    bucket: Named<'a>,
    #[serde(borrow)]
    object: S3Object<'a>,
}

#[derive(Deserialize)]
struct S3Object<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(rename = "eTag", borrow)]
    etag: Option<Cow<'a, str>>,
    #[serde(rename = "versionId", borrow)]
    version_id: Option<Cow<'a, str>>,
    size: Option<u64>,
}

/// The objects an S3 event notification says were created.
fn s3_notification(bytes: &[u8]) -> Result<Option<Opened>, RecordError> {
    if !looks_like_object(bytes) {
        return Ok(None);
    }
    let n: S3Notification<'_> = parse(bytes, "an S3 event notification")?;
    if n.event.as_deref() == Some("s3:TestEvent") {
        // Sent once when the notification is set up: nothing to read.
        return Ok(Some(Opened::Records(Vec::new())));
    }
    if n.records.is_empty() || n.records.iter().any(|r| r.event_source != "aws:s3") {
        return Ok(None);
    }
    let objects = n
        .records
        .into_iter()
        // Removals and restores carry no new records.
        .filter(|r| r.event_name.starts_with("ObjectCreated:"))
        .map(|r| ObjectRef {
            bucket: r.s3.bucket.name.into_owned(),
            // Notification keys are URL-encoded, spaces as `+`.
            key: url_decode(&r.s3.object.key),
            etag: r.s3.object.etag.map(|e| e.trim_matches('"').to_string()),
            version: r.s3.object.version_id.map(Cow::into_owned),
            size: r.s3.object.size,
        })
        .collect();
    Ok(Some(Opened::Objects(objects)))
}

#[derive(Deserialize)]
struct LogsData<'a> {
    #[serde(rename = "messageType", borrow)]
    message_type: Cow<'a, str>,
    #[serde(borrow, default)]
    owner: Option<Cow<'a, str>>,
    #[serde(rename = "logGroup", borrow, default)]
    log_group: Option<Cow<'a, str>>,
    #[serde(rename = "logStream", borrow, default)]
    log_stream: Option<Cow<'a, str>>,
    #[serde(rename = "logEvents", borrow, default)]
    log_events: Vec<LogEvent<'a>>,
}

#[derive(Deserialize)]
struct LogEvent<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    timestamp: i64,
    #[serde(borrow)]
    message: Cow<'a, str>,
}

/// One record per log event of CloudWatch Logs subscription data:
/// `log_group`, `log_stream`, `owner`, `id`, `timestamp` (RFC 3339) and
/// `message` (the line as text).
fn cloudwatch_logs(bytes: &[u8]) -> Result<Option<Opened>, RecordError> {
    if !looks_like_object(bytes) || !has(bytes, b"\"messageType\"") {
        return Ok(None);
    }
    let data: LogsData<'_> = parse(bytes, "CloudWatch Logs subscription data")?;
    if data.message_type != "DATA_MESSAGE" {
        // CONTROL_MESSAGE: CloudWatch checking the destination is reachable.
        return Ok(Some(Opened::Records(Vec::new())));
    }
    let records = data
        .log_events
        .iter()
        .map(|e| {
            let row = serde_json::json!({
                "log_group": data.log_group,
                "log_stream": data.log_stream,
                "owner": data.owner,
                "id": e.id,
                "timestamp": crate::shred::format_utc_millis(e.timestamp),
                "message": e.message,
            });
            cow_bytes(Cow::Owned(row.to_string()))
        })
        .collect();
    Ok(Some(Opened::Records(records)))
}

#[cfg(test)]
mod tests {
    use super::super::open as open_payload;
    use super::*;
    use serde_json::json;

    fn records(o: Opened) -> Vec<String> {
        match o {
            Opened::Records(r) => r
                .iter()
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
                .collect(),
            Opened::Objects(o) => panic!("objects {o:?}"),
        }
    }

    fn sns_of(message: &str) -> String {
        json!({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
               "Message": message, "Timestamp": "2026-01-01T00:00:00.000Z"})
        .to_string()
    }

    #[test]
    fn sns_and_eventbridge_unwrap_to_their_record() {
        let inner = r#"{"id":1,"name":"ada"}"#;
        for kind in [EnvelopeKind::Auto, EnvelopeKind::Sns] {
            let o = open_payload(sns_of(inner).as_bytes(), kind).unwrap();
            assert_eq!(records(o), vec![inner.to_string()]);
        }
        let eb = r#"{"version": "0", "id": "e", "detail-type": "order", "source": "shop",
            "account": "1", "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": {"id": 2, "total": 12.50}}"#;
        for kind in [EnvelopeKind::Auto, EnvelopeKind::Eventbridge] {
            let o = open_payload(eb.as_bytes(), kind).unwrap();
            // The detail's text as it came: 12.50 keeps its digits.
            assert_eq!(records(o), vec![r#"{"id": 2, "total": 12.50}"#.to_string()]);
        }
        // EventBridge through SNS.
        let o = open_payload(sns_of(eb).as_bytes(), EnvelopeKind::Auto).unwrap();
        assert_eq!(records(o).len(), 1);
        // A plain record stays itself under auto, and is refused under sns.
        assert_eq!(
            records(open_payload(inner.as_bytes(), EnvelopeKind::Auto).unwrap()),
            vec![inner.to_string()]
        );
        let e = open_payload(inner.as_bytes(), EnvelopeKind::Sns).unwrap_err();
        assert!(e.reason.contains("not an SNS notification"), "{e}");
    }

    #[test]
    fn s3_notifications_name_created_objects() {
        let n = json!({"Records": [
            {"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
             "s3": {"bucket": {"name": "drops"},
                    "object": {"key": "in/a+b%3D1.json.gz", "size": 10, "eTag": "\"e1\""}}},
            {"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectRemoved:Delete",
             "s3": {"bucket": {"name": "drops"}, "object": {"key": "gone"}}}
        ]})
        .to_string();
        let Opened::Objects(o) = open_payload(n.as_bytes(), EnvelopeKind::Auto).unwrap() else {
            panic!()
        };
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].key, "in/a b=1.json.gz");
        assert_eq!(o[0].etag.as_deref(), Some("e1"));
        // Through SNS, as S3 → SNS → SQS delivers it.
        let through = open_payload(sns_of(&n).as_bytes(), EnvelopeKind::S3Notification).unwrap();
        assert!(matches!(through, Opened::Objects(v) if v.len() == 1));
        let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"drops"}"#;
        assert_eq!(
            open_payload(test.as_bytes(), EnvelopeKind::Auto).unwrap(),
            Opened::Records(Vec::new())
        );
    }

    #[test]
    fn cloudwatch_logs_data_becomes_one_record_per_event() {
        use std::io::Write as _;
        let data =
            json!({"messageType": "DATA_MESSAGE", "owner": "123", "logGroup": "/aws/lambda/f",
            "logStream": "s1", "subscriptionFilters": ["all"], "logEvents": [
                {"id": "1", "timestamp": 1_700_000_000_000i64, "message": "start"},
                {"id": "2", "timestamp": 1_700_000_000_001i64, "message": "{\"level\":\"info\"}"}]})
            .to_string();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let r = records(open_payload(&gz, EnvelopeKind::Auto).unwrap());
        assert_eq!(r.len(), 2);
        let second: serde_json::Value = serde_json::from_str(&r[1]).unwrap();
        assert_eq!(second["message"], "{\"level\":\"info\"}");
        assert_eq!(second["log_group"], "/aws/lambda/f");
        assert_eq!(second["timestamp"], "2023-11-14T22:13:20.001Z");
        let control = json!({"messageType": "CONTROL_MESSAGE", "logEvents": []}).to_string();
        assert_eq!(
            open_payload(control.as_bytes(), EnvelopeKind::CloudwatchLogs).unwrap(),
            Opened::Records(Vec::new())
        );
    }

    #[test]
    fn ndjson_payloads_open_to_their_lines() {
        let ndjson = "{\"id\":1}\n{\"id\":2}\r\n\n{\"id\":\n{\"id\":4}\n";
        for kind in [EnvelopeKind::Auto, EnvelopeKind::Sns] {
            let payload = match kind {
                EnvelopeKind::Sns => sns_of(ndjson),
                _ => ndjson.to_string(),
            };
            let opened = open_payload(payload.as_bytes(), kind).unwrap();
            assert_eq!(
                records(opened),
                ["{\"id\":1}", "{\"id\":2}", "{\"id\":", "{\"id\":4}"],
                "{kind:?}: the broken line is a record of its own"
            );
        }
        // One record however it is laid out, or however broken.
        for whole in [
            "{\"id\":1}\n",
            "{\n  \"id\": 1,\n  \"tags\": {\"a\": 1}\n}",
            "{\n  \"id\": 1,\n  \"tags\": {\"a\": 1},\n}",
            "[\n  {\"id\": 1},\n  {\"id\": 2}\n]",
        ] {
            let opened = open_payload(whole.as_bytes(), EnvelopeKind::Auto).unwrap();
            assert_eq!(records(opened), [whole], "{whole:?}");
        }
        // `none`: the payload is the record, whatever it holds.
        let opened = open_payload(ndjson.as_bytes(), EnvelopeKind::None).unwrap();
        assert_eq!(records(opened), [ndjson]);
    }
}

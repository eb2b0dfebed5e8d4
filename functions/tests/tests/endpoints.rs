//! The functions on two emulators at different endpoints, as the Docker
//! Compose setup runs them (MinIO for S3, ElasticMQ for SQS): no
//! `aws.endpoint`; the SDK's `AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL_SQS`
//! name each service and `aws.path_style` addresses buckets as MinIO needs.
//! Both point at moto here, on purpose through the per-service variables. Its
//! own test binary, since it sets the process environment.

use std::path::Path;

use floe_committer::CommitterFunction;
use floe_core::aws::{AwsClients, AwsSettings};
use floe_core::config::Config;
use floe_core::deploy::{Deployment, Role};
use floe_core::faults::Faults;
use floe_core::ident::parse_table;
use floe_test_support::services;
use floe_writer::{WriterEvent, WriterFunction};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_service_endpoints_reach_s3_and_sqs() {
    let endpoint = services::moto().to_string();
    // SAFETY: set before any client or thread of this test binary reads them.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL_S3", &endpoint);
        std::env::set_var("AWS_ENDPOINT_URL_SQS", &endpoint);
    }
    let setup = AwsClients::new(AwsSettings::local(&endpoint, "us-east-1")).await;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let bucket = format!("floe-endpoints-{id}");
    setup
        .s3
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    let queue = setup
        .sqs
        .create_queue()
        .queue_name(format!("floe-endpoints-{id}"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let table = format!("compose_{id}.events");
    let text = format!(
        r#"
[warehouse]
uri = "s3://{bucket}/warehouse"
[aws]
region = "us-east-1"
path_style = true
[catalog]
type = "sqlite"
path = "{db}"
[queue]
url = "{queue}"
[routing]
table = "{table}"
"#,
        db = dir.path().join("catalog.db").display()
    );
    let config = Config::from_toml_str(&text, Path::new(""), &|_| None).unwrap();
    assert!(config.aws.endpoint.is_none());
    let d = Deployment::from_config(config, Faults::none(), Role::Writer)
        .await
        .unwrap();
    let writer = WriterFunction::new(&d).unwrap();
    let committer = CommitterFunction::new(&d).unwrap();

    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/sqs.json");
    // Read as lambda_runtime reads the invocation's payload.
    let event: WriterEvent =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let answer = writer.handle(event).await.unwrap();
    assert_eq!(
        serde_json::to_value(&answer).unwrap()["batchItemFailures"],
        json!([])
    );

    let got = setup
        .sqs
        .receive_message()
        .queue_url(&queue)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    let records: Vec<Value> = got
        .messages()
        .iter()
        .map(|m| {
            json!({"messageId": m.message_id(), "receiptHandle": m.receipt_handle(),
                   "body": m.body(), "attributes": {"ApproximateReceiveCount": "1"},
                   "messageAttributes": {}, "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:q", "awsRegion": "us-east-1"})
        })
        .collect();
    assert_eq!(records.len(), 1);
    let event = serde_json::from_value(json!({ "Records": records })).unwrap();
    let answer = committer.handle(event, None).await;
    assert_eq!(
        serde_json::to_value(&answer).unwrap()["batchItemFailures"],
        json!([])
    );

    let loaded = d
        .catalog
        .load_table(&parse_table(&table).unwrap())
        .await
        .unwrap();
    let summary = &loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    // The fixture's four messages: three rows, one dead-lettered.
    assert_eq!(summary.get("total-records").map(String::as_str), Some("3"));
    assert!(
        loaded
            .metadata_location
            .starts_with(&format!("s3://{bucket}/warehouse/"))
    );
}

//! floe's writer function: a Lambda event from SQS, Kinesis, Kafka (MSK or
//! self-managed) or DynamoDB Streams in; each shard's or partition's records
//! opened (envelopes, compression, registry Avro, the objects S3
//! notifications name: docs/sources.md) and written by floe's writer step
//! (Parquet on S3, dead letters, the commit request enqueued); a partial
//! batch response out naming what must come again.

pub mod events;

pub use events::{WriterEvent, WriterResponse};

use floe_core::deploy::Deployment;
use floe_core::envelope::s3::ObjectBatches;
use floe_core::envelope::{ObjectRef, Opener, avro};
use floe_core::pipeline::{PipelineError, WriteReport, Writer};
use floe_core::source::{SourceBatch, SourceKind};
use tracing::{error, info};

/// Why the function cannot start or cannot take an event as a whole.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The writer step cannot be built from the config.
    #[error(transparent)]
    Setup(#[from] PipelineError),
    /// The config does not say which table records go to.
    #[error(
        "config: the writer function needs routing.table (FLOE_ROUTING_TABLE) or a routing.template"
    )]
    NoRouting,
    /// The event is not one the function takes.
    #[error(transparent)]
    Event(#[from] events::EventError),
}

/// The writer function's state, kept across invocations of one instance.
pub struct WriterFunction {
    writer: Writer,
    /// Writes the HTTP function's buffered POSTs as it would have: creating
    /// a table only with `http.create_tables`.
    http_writer: Writer,
    decode: events::DecodeOptions,
    /// Opens envelopes, compressed records and registry Avro; caches schemas.
    opener: Opener,
    /// Reads the objects S3 notifications name.
    s3: Option<aws_sdk_s3::Client>,
}

/// Why one part of an event failed; Lambda delivers it again.
#[derive(Debug, thiserror::Error)]
enum PartError {
    #[error(transparent)]
    Write(#[from] PipelineError),
    #[error(transparent)]
    Open(#[from] floe_core::envelope::EnvelopeError),
    #[error(
        "object {0}: an S3 notification names it, but this deployment has no S3 client (aws.endpoint/region)"
    )]
    NoS3(String),
}

impl WriterFunction {
    /// The function over a deployment; refuses a config that routes nowhere.
    pub fn new(deployment: &Deployment) -> Result<Self, WriterError> {
        Self::with_options(deployment, events::DecodeOptions::from_env())
    }

    /// [`Self::new`] reading events with `decode` instead of the environment's options.
    pub fn with_options(
        deployment: &Deployment,
        mut decode: events::DecodeOptions,
    ) -> Result<Self, WriterError> {
        if decode.buffer_stream.is_none() {
            decode.buffer_stream = deployment.config.http.buffer_stream.clone();
        }
        let routing = &deployment.config.routing;
        if routing.table.is_none() && routing.template.is_none() {
            return Err(WriterError::NoRouting);
        }
        let aws = deployment.aws.as_ref();
        Ok(Self {
            // Lambda redelivers a failed batch until the record expires.
            writer: deployment.writer()?.dead_letter_unwritable(),
            http_writer: floe_core::http::writer(deployment)?.dead_letter_unwritable(),
            decode,
            opener: Opener::new(
                deployment.config.clone(),
                avro::Schemas::with_glue(aws.map(|c| c.glue.clone())),
            ),
            s3: aws.map(|c| c.s3.clone()),
        })
    }

    /// Opens one part and writes it: its records, then each object its
    /// notifications name, batch by batch.
    async fn write_part(&self, batch: SourceBatch) -> Result<WriteReport, PartError> {
        let source = batch.source.clone();
        let oldest = batch.oldest_ms;
        let writer = match source.kind {
            SourceKind::Http => &self.http_writer,
            _ => &self.writer,
        };
        let opened = self.opener.open(batch).await?;
        let mut report = writer.write(opened.batch).await?;
        for (at, object) in opened.objects {
            info!(source = %source.name, record = %at, object = %object.source(), "reading the object a notification names");
            self.write_object(object, source.clone(), oldest, &mut report)
                .await?;
        }
        Ok(report)
    }

    /// Writes the records of one object a notification names, batch by
    /// batch as it streams in; nothing when that object version is gone.
    async fn write_object(
        &self,
        object: ObjectRef,
        source: floe_core::source::Source,
        oldest: Option<i64>,
        report: &mut WriteReport,
    ) -> Result<(), PartError> {
        let s3 = self
            .s3
            .as_ref()
            .ok_or_else(|| PartError::NoS3(object.source()))?;
        let Some(mut batches) = ObjectBatches::open(s3, object, source, oldest).await? else {
            return Ok(());
        };
        while let Some(batch) = batches.next_batch().await? {
            report.add(self.writer.write(batch).await?);
        }
        Ok(())
    }

    /// Handles one event: every batch is written (or dead-lettered) and its
    /// commit request enqueued before this returns. The answer is Lambda's
    /// partial batch response; a batch that failed for a transient reason
    /// (storage, catalog, queue) is named in it so Lambda redelivers it, and
    /// the redelivery gets the same batch id, so nothing is committed twice.
    pub async fn handle(&self, event: WriterEvent) -> Result<WriterResponse, WriterError> {
        let mut response = WriterResponse::for_event(&event);
        let parts = events::decode_with(event, self.decode.clone())?;
        let results = futures::future::join_all(parts.iter().map(|p| async {
            let started = std::time::Instant::now();
            let result = self.write_part(p.batch.clone()).await;
            (result, started.elapsed())
        }))
        .await;
        for (part, (result, took)) in parts.iter().zip(results) {
            let b = &part.batch;
            match result {
                Ok(report) => {
                    info!(
                        source = %b.source.name,
                        batch_id = %b.batch_id,
                        records = report.records,
                        rejected = report.rejected.len(),
                        "batch written and its commit request enqueued"
                    );
                    emit(&b.source.name, &b.batch_id, &report, took);
                }
                Err(e) => {
                    error!(source = %b.source.name, batch_id = %b.batch_id, error = %e, "batch failed; Lambda will redeliver it");
                    response.fail(part);
                }
            }
        }
        Ok(response)
    }
}

/// The batch's EMF line; `took` is how long writing it took, what a
/// function's duration (and so its cost) follows.
fn emit(source: &str, batch_id: &str, report: &WriteReport, took: std::time::Duration) {
    report
        .emf("writer")
        .metric(
            "write_latency",
            floe_core::metrics::emf::Unit::Milliseconds,
            took.as_secs_f64() * 1000.0,
        )
        .property("source", source)
        .property("batch_id", batch_id)
        .emit();
}

//! S3 for iceberg-rust's `FileIO`, on `aws-sdk-s3`.
//!
//! Why one client stack: floe already needs the AWS SDK for SQS and Glue, and
//! the SDK resolves credentials (including Lambda's and IRSA's), signs, retries
//! and pools connections. Building iceberg-rust's storage on the same SDK, from
//! the same [`SdkConfig`](aws_config::SdkConfig), means manifests, Parquet files,
//! metadata files and claim-check bodies all go through one connection pool, one
//! credentials cache and one retry policy, configured in one place
//! ([`AwsSettings`]); a second stack (OpenDAL with reqwest) would double the
//! binary's TLS and HTTP code, keep its own credential chain that can disagree
//! with the SDK's, and be configured through a second set of string properties.
//!
//! Large writes go up as multipart uploads of [`PART_SIZE`] parts, a few in
//! flight at once, and are aborted on failure so no invisible parts are billed.
//! Reads are ranged, so a Parquet reader fetches only the footer and the column
//! chunks it needs.

use std::ops::Range;
use std::sync::Arc;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Delete, ObjectIdentifier};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::StorageError;
use crate::aws::{AwsClients, AwsError, AwsSettings};

/// The size of each part of a multipart upload; writes smaller than one part
/// go up in a single `PutObject`.
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// Parts of one upload in flight at once: enough to fill a Lambda's link
/// without holding more than a few parts of memory per open file.
const PARTS_IN_FLIGHT: usize = 4;

/// `DeleteObjects` takes at most this many keys per call.
const DELETE_BATCH: usize = 1000;

impl StorageError {
    pub(crate) fn request<E, R>(op: &'static str, loc: &S3Location, err: SdkError<E, R>) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
        R: std::borrow::Borrow<HttpResponse>,
    {
        StorageError::Request {
            op,
            bucket: loc.bucket.clone(),
            key: loc.key.clone(),
            status: err.raw_response().map(|r| r.borrow().status().as_u16()),
            source: AwsError::new(err),
        }
    }

    pub(crate) fn protocol(op: &'static str, loc: &S3Location, reason: &str) -> Self {
        StorageError::Protocol {
            op,
            bucket: loc.bucket.clone(),
            key: loc.key.clone(),
            reason: reason.to_string(),
        }
    }
}

fn to_iceberg(err: StorageError) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, err.to_string()).with_source(err)
}

/// A bucket and key parsed from `s3://bucket/key` (or `s3a://`, as Hadoop writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key, without a leading slash.
    pub key: String,
}

impl S3Location {
    /// Parses an `s3://bucket/key` URI.
    pub fn parse(uri: &str) -> Result<Self, StorageError> {
        let rest = ["s3://", "s3a://", "s3n://"]
            .iter()
            .find_map(|scheme| uri.strip_prefix(scheme))
            .ok_or_else(|| StorageError::BadUri {
                uri: uri.to_string(),
            })?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(StorageError::BadUri {
                uri: uri.to_string(),
            });
        }
        Ok(Self {
            bucket: bucket.to_string(),
            key: key.trim_start_matches('/').to_string(),
        })
    }

    /// The location as an `s3://` URI.
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }
}

/// Every object under `location` (a directory: `t1` does not take `t10`)
/// as `(URI, last modified ms since the epoch)`, for orphan cleanup, which
/// FileIO cannot do since it does not list.
pub async fn list_files(
    client: &Client,
    location: &str,
) -> Result<Vec<(String, i64)>, StorageError> {
    let loc = S3Location::parse(location)?;
    let bucket = loc.bucket.clone();
    // Metadata names files with the scheme of the table location (s3a://…).
    let scheme = location.split_once("://").map_or("s3", |(s, _)| s);
    Ok(list_dir(client, loc)
        .await?
        .into_iter()
        .map(|(key, modified)| (format!("{scheme}://{bucket}/{key}"), modified))
        .collect())
}

/// The keys and last-modified times (ms) of the objects below `loc` taken as
/// a directory: `t1` names `t1/…`, never `t10/…`.
async fn list_dir(
    client: &Client,
    mut loc: S3Location,
) -> Result<Vec<(String, i64)>, StorageError> {
    if !loc.key.is_empty() && !loc.key.ends_with('/') {
        loc.key.push('/');
    }
    let mut pages = client
        .list_objects_v2()
        .bucket(&loc.bucket)
        .prefix(&loc.key)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| StorageError::request("ListObjectsV2", &loc, e))?;
        for o in page.contents() {
            if let Some(key) = o.key() {
                let modified = o.last_modified().map_or(0, |t| t.to_millis().unwrap_or(0));
                out.push((key.to_string(), modified));
            }
        }
    }
    Ok(out)
}

/// Builds [`S3Storage`] for iceberg-rust's `FileIO`, around floe's S3 client.
///
/// When serialised (iceberg-rust can ship a FileIO across processes) only the
/// [`AwsSettings`] travel; the revived factory builds its client from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3StorageFactory {
    settings: AwsSettings,
    #[serde(skip)]
    client: Option<Client>,
}

impl S3StorageFactory {
    /// A factory handing out storage on the shared S3 client.
    pub fn new(clients: &AwsClients) -> Self {
        Self {
            settings: clients.settings.clone(),
            client: Some(clients.s3.clone()),
        }
    }

    /// A FileIO over S3 on the shared client.
    pub fn file_io(clients: &AwsClients) -> FileIO {
        FileIOBuilder::new(Arc::new(Self::new(clients))).build()
    }
}

#[typetag::serde]
impl StorageFactory for S3StorageFactory {
    /// The `s3.*` properties iceberg-rust's own S3 storage reads are ignored:
    /// the client is configured once, by [`AwsSettings`], for every AWS service.
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        let client = Arc::new(OnceCell::new_with(self.client.clone()));
        Ok(Arc::new(S3Storage {
            settings: self.settings.clone(),
            client,
        }))
    }
}

/// iceberg-rust `Storage` on S3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct S3Storage {
    settings: AwsSettings,
    #[serde(skip)]
    client: Arc<OnceCell<Client>>,
}

impl S3Storage {
    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let sdk = self.settings.sdk_config().await;
                self.settings.s3_client(&sdk)
            })
            .await
    }

    fn location(path: &str) -> iceberg::Result<S3Location> {
        S3Location::parse(path).map_err(to_iceberg)
    }

    async fn head(&self, loc: &S3Location) -> Result<Option<u64>, StorageError> {
        let out = self
            .client()
            .await
            .head_object()
            .bucket(&loc.bucket)
            .key(&loc.key)
            .send()
            .await;
        match out {
            Ok(out) => {
                let len = out
                    .content_length()
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| {
                        StorageError::protocol("HeadObject", loc, "no Content-Length")
                    })?;
                Ok(Some(len))
            }
            Err(err) if err.as_service_error().is_some_and(|e| e.is_not_found()) => Ok(None),
            Err(err) => Err(StorageError::request("HeadObject", loc, err)),
        }
    }

    async fn delete_keys(&self, bucket: &str, keys: Vec<String>) -> Result<(), StorageError> {
        let client = self.client().await;
        for chunk in keys.chunks(DELETE_BATCH) {
            let loc = S3Location {
                bucket: bucket.to_string(),
                key: chunk.first().cloned().unwrap_or_default(),
            };
            let objects = chunk
                .iter()
                .map(|key| ObjectIdentifier::builder().key(key).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StorageError::protocol("DeleteObjects", &loc, &e.to_string()))?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|e| StorageError::protocol("DeleteObjects", &loc, &e.to_string()))?;
            let out = client
                .delete_objects()
                .bucket(bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| StorageError::request("DeleteObjects", &loc, e))?;
            if let Some(failed) = out.errors().first() {
                let loc = S3Location {
                    bucket: bucket.to_string(),
                    key: failed.key().unwrap_or_default().to_string(),
                };
                return Err(StorageError::protocol(
                    "DeleteObjects",
                    &loc,
                    failed.message().unwrap_or("delete refused"),
                ));
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
#[typetag::serde]
impl Storage for S3Storage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        let loc = Self::location(path)?;
        Ok(self.head(&loc).await.map_err(to_iceberg)?.is_some())
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let loc = Self::location(path)?;
        let size = self.head(&loc).await.map_err(to_iceberg)?.ok_or_else(|| {
            to_iceberg(StorageError::protocol("HeadObject", &loc, "no such object"))
        })?;
        Ok(FileMetadata { size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        let loc = Self::location(path)?;
        get(self.client().await, &loc, None)
            .await
            .map_err(to_iceberg)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(S3Reader {
            client: self.client().await.clone(),
            loc: Self::location(path)?,
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        let mut writer = self.writer(path).await?;
        writer.write(bs).await?;
        writer.close().await
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Ok(Box::new(S3Writer::new(
            self.client().await.clone(),
            Self::location(path)?,
        )))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        let loc = Self::location(path)?;
        let span = tracing::debug_span!("s3.delete", bucket = %loc.bucket, key = %loc.key);
        self.client()
            .await
            .delete_object()
            .bucket(&loc.bucket)
            .key(&loc.key)
            .send()
            .instrument(span)
            .await
            .map_err(|e| to_iceberg(StorageError::request("DeleteObject", &loc, e)))?;
        Ok(())
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let loc = Self::location(path)?;
        let bucket = loc.bucket.clone();
        let keys = list_dir(self.client().await, loc)
            .await
            .map_err(to_iceberg)?
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        self.delete_keys(&bucket, keys).await.map_err(to_iceberg)
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        let mut by_bucket: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        while let Some(path) = paths.next().await {
            let loc = Self::location(&path)?;
            by_bucket.entry(loc.bucket).or_default().push(loc.key);
        }
        for (bucket, keys) in by_bucket {
            self.delete_keys(&bucket, keys).await.map_err(to_iceberg)?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Self::location(path)?;
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Self::location(path)?;
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Reads an object, or the byte `range` of it.
pub(crate) async fn get(
    client: &Client,
    loc: &S3Location,
    range: Option<Range<u64>>,
) -> Result<Bytes, StorageError> {
    let mut req = client.get_object().bucket(&loc.bucket).key(&loc.key);
    if let Some(r) = &range {
        if r.start >= r.end {
            return Ok(Bytes::new());
        }
        // HTTP ranges are inclusive at both ends.
        req = req.range(format!("bytes={}-{}", r.start, r.end - 1));
    }
    let span = tracing::debug_span!("s3.get", bucket = %loc.bucket, key = %loc.key, ?range);
    async {
        let out = req
            .send()
            .await
            .map_err(|e| StorageError::request("GetObject", loc, e))?;
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StorageError::protocol("GetObject", loc, &e.to_string()))?;
        Ok(body.into_bytes())
    }
    .instrument(span)
    .await
}

/// Writes a whole object in one `PutObject`.
pub(crate) async fn put(
    client: &Client,
    loc: &S3Location,
    body: Bytes,
) -> Result<(), StorageError> {
    let span =
        tracing::debug_span!("s3.put", bucket = %loc.bucket, key = %loc.key, len = body.len());
    client
        .put_object()
        .bucket(&loc.bucket)
        .key(&loc.key)
        .body(ByteStream::from(body))
        .send()
        .instrument(span)
        .await
        .map_err(|e| StorageError::request("PutObject", loc, e))?;
    Ok(())
}

/// Deletes one object; deleting a missing object succeeds, as in S3 itself.
pub(crate) async fn delete(client: &Client, loc: &S3Location) -> Result<(), StorageError> {
    client
        .delete_object()
        .bucket(&loc.bucket)
        .key(&loc.key)
        .send()
        .await
        .map_err(|e| StorageError::request("DeleteObject", loc, e))?;
    Ok(())
}

/// Ranged reads of one object.
#[derive(Debug)]
struct S3Reader {
    client: Client,
    loc: S3Location,
}

#[async_trait::async_trait]
impl FileRead for S3Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        get(&self.client, &self.loc, Some(range))
            .await
            .map_err(to_iceberg)
    }
}

/// A multipart upload under way.
#[derive(Debug)]
struct Upload {
    id: String,
    next_part: i32,
    in_flight: JoinSet<Result<CompletedPart, StorageError>>,
    done: Vec<CompletedPart>,
}

/// Buffers a write; one `PutObject` if it stays under a part, else a multipart
/// upload that is aborted if any step fails or the writer is dropped unclosed.
#[derive(Debug)]
struct S3Writer {
    client: Client,
    loc: S3Location,
    buf: BytesMut,
    upload: Option<Upload>,
    closed: bool,
}

impl S3Writer {
    fn new(client: Client, loc: S3Location) -> Self {
        Self {
            client,
            loc,
            buf: BytesMut::new(),
            upload: None,
            closed: false,
        }
    }

    async fn start(&mut self) -> Result<(), StorageError> {
        if self.upload.is_some() {
            return Ok(());
        }
        let out = self
            .client
            .create_multipart_upload()
            .bucket(&self.loc.bucket)
            .key(&self.loc.key)
            .send()
            .await
            .map_err(|e| StorageError::request("CreateMultipartUpload", &self.loc, e))?;
        let id = out.upload_id().ok_or_else(|| {
            StorageError::protocol("CreateMultipartUpload", &self.loc, "no UploadId")
        })?;
        tracing::debug!(bucket = %self.loc.bucket, key = %self.loc.key, upload_id = id, "multipart upload started");
        self.upload = Some(Upload {
            id: id.to_string(),
            next_part: 1,
            in_flight: JoinSet::new(),
            done: Vec::new(),
        });
        Ok(())
    }

    /// Sends one part, waiting first for a slot when too many are in flight.
    async fn send_part(&mut self, body: Bytes) -> Result<(), StorageError> {
        self.start().await?;
        let loc = self.loc.clone();
        let client = self.client.clone();
        let Some(upload) = self.upload.as_mut() else {
            return Err(StorageError::protocol(
                "UploadPart",
                &loc,
                "upload not started",
            ));
        };
        while upload.in_flight.len() >= PARTS_IN_FLIGHT {
            join_one(upload, &loc).await?;
        }
        let number = upload.next_part;
        upload.next_part += 1;
        let id = upload.id.clone();
        let span = tracing::debug_span!("s3.upload_part", bucket = %loc.bucket, key = %loc.key, part = number, len = body.len());
        upload.in_flight.spawn(
            async move {
                let out = client
                    .upload_part()
                    .bucket(&loc.bucket)
                    .key(&loc.key)
                    .upload_id(id)
                    .part_number(number)
                    .body(ByteStream::from(body))
                    .send()
                    .await
                    .map_err(|e| StorageError::request("UploadPart", &loc, e))?;
                let etag = out
                    .e_tag()
                    .ok_or_else(|| StorageError::protocol("UploadPart", &loc, "no ETag"))?;
                Ok(CompletedPart::builder()
                    .e_tag(etag)
                    .part_number(number)
                    .build())
            }
            .instrument(span),
        );
        Ok(())
    }

    async fn complete(&mut self) -> Result<(), StorageError> {
        let loc = self.loc.clone();
        let Some(upload) = self.upload.as_mut() else {
            return Err(StorageError::protocol(
                "CompleteMultipartUpload",
                &loc,
                "upload not started",
            ));
        };
        while !upload.in_flight.is_empty() {
            join_one(upload, &loc).await?;
        }
        let mut parts = std::mem::take(&mut upload.done);
        parts.sort_by_key(|p| p.part_number());
        self.client
            .complete_multipart_upload()
            .bucket(&loc.bucket)
            .key(&loc.key)
            .upload_id(&upload.id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| StorageError::request("CompleteMultipartUpload", &loc, e))?;
        self.upload = None;
        Ok(())
    }

    /// Aborts the multipart upload, if any, so S3 keeps no orphaned parts.
    async fn abort(&mut self) {
        let Some(mut upload) = self.upload.take() else {
            return;
        };
        upload.in_flight.abort_all();
        let res = self
            .client
            .abort_multipart_upload()
            .bucket(&self.loc.bucket)
            .key(&self.loc.key)
            .upload_id(&upload.id)
            .send()
            .await;
        if let Err(err) = res {
            // A lifecycle rule (AbortIncompleteMultipartUpload) is the backstop.
            tracing::warn!(bucket = %self.loc.bucket, key = %self.loc.key, error = %DisplayErrorContext(&err), "aborting multipart upload failed");
        }
    }

    async fn write_inner(&mut self, bs: Bytes) -> Result<(), StorageError> {
        self.buf.extend_from_slice(&bs);
        while self.buf.len() >= PART_SIZE {
            let part = self.buf.split_to(PART_SIZE).freeze();
            self.send_part(part).await?;
        }
        Ok(())
    }

    async fn close_inner(&mut self) -> Result<(), StorageError> {
        let rest = std::mem::take(&mut self.buf).freeze();
        if self.upload.is_none() {
            return put(&self.client, &self.loc, rest).await;
        }
        if !rest.is_empty() {
            self.send_part(rest).await?;
        }
        self.complete().await
    }
}

async fn join_one(upload: &mut Upload, loc: &S3Location) -> Result<(), StorageError> {
    match upload.in_flight.join_next().await {
        Some(Ok(part)) => {
            upload.done.push(part?);
            Ok(())
        }
        Some(Err(join)) => Err(StorageError::protocol("UploadPart", loc, &join.to_string())),
        None => Ok(()),
    }
}

#[async_trait::async_trait]
impl FileWrite for S3Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        if self.closed {
            return Err(to_iceberg(StorageError::protocol(
                "write",
                &self.loc,
                "writer already closed",
            )));
        }
        if let Err(err) = self.write_inner(bs).await {
            self.abort().await;
            return Err(to_iceberg(err));
        }
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        if let Err(err) = self.close_inner().await {
            self.abort().await;
            return Err(to_iceberg(err));
        }
        Ok(())
    }
}

impl Drop for S3Writer {
    fn drop(&mut self) {
        // A writer dropped mid-upload (its task cancelled, an error upstream)
        // leaves parts that S3 bills for until aborted.
        let Some(upload) = self.upload.take() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let loc = self.loc.clone();
        handle.spawn(async move {
            let _ = client
                .abort_multipart_upload()
                .bucket(&loc.bucket)
                .key(&loc.key)
                .upload_id(upload.id)
                .send()
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_uris() {
        let loc = S3Location::parse("s3://b/warehouse/t/data/x.parquet").unwrap();
        assert_eq!(loc.bucket, "b");
        assert_eq!(loc.key, "warehouse/t/data/x.parquet");
        assert_eq!(loc.uri(), "s3://b/warehouse/t/data/x.parquet");
        assert_eq!(S3Location::parse("s3a://b").unwrap().key, "");
        assert!(S3Location::parse("file:///tmp/x").is_err());
        assert!(S3Location::parse("s3:///key").is_err());
    }
}

//! Reading the objects S3 notifications name, piece by piece: the body is
//! streamed, decompressed as it comes (gzip or zstd by magic bytes) and cut
//! into source batches of whole records, so an object of any size is never
//! held whole and each batch is a run of its lines.

use aws_sdk_s3::primitives::ByteStream;

use super::compress::Inflater;
use super::object::{ObjectRef, Splitter};
use super::{EnvelopeError, Undecodable};
use crate::aws::AwsError;
use crate::error::{BoxError, RecordError};
use crate::ndjson::Chunk;
use crate::source::{Position, Positions, SourceSpan};
use crate::source::{Records, Source, SourceBatch};

/// Decompressed bytes per source batch of an object, about: a writer holds
/// one batch, and Lambda's memory is the limit.
pub const BATCH_BYTES: usize = 64 * 1024 * 1024;

/// The records of one object, batch by batch.
pub struct ObjectBatches {
    object: ObjectRef,
    source: Source,
    oldest_ms: Option<i64>,
    body: ByteStream,
    inflater: Option<Inflater>,
    splitter: Splitter,
    batch_bytes: usize,
    done: bool,
}

impl ObjectBatches {
    /// Starts reading `object`, the exact version the notification names
    /// (its version id, else its ETag); `None` when that version is gone
    /// (deleted, or overwritten: the new content has a notification of its own).
    pub async fn open(
        s3: &aws_sdk_s3::Client,
        object: ObjectRef,
        source: Source,
        oldest_ms: Option<i64>,
    ) -> Result<Option<Self>, EnvelopeError> {
        let name = object.source();
        let mut get = s3.get_object().bucket(&object.bucket).key(&object.key);
        get = match (&object.version, &object.etag) {
            (Some(v), _) => get.version_id(v),
            (None, Some(etag)) => get.if_match(format!("\"{etag}\"")),
            (None, None) => get,
        };
        let out = match get.send().await {
            Ok(out) => out,
            Err(e) => {
                let status = e.raw_response().map(|r| r.status().as_u16());
                if matches!(status, Some(404 | 412)) {
                    tracing::warn!(object = %name, status, "the notified object version is gone; nothing to read");
                    return Ok(None);
                }
                return Err(EnvelopeError::Object {
                    object: name,
                    context: "GetObject",
                    source: Box::new(AwsError::new(e)),
                });
            }
        };
        // The object's records cannot have been committed before it was
        // written: its LastModified bounds how far back the ledger looks, not
        // the notification's arrival (S3 may send a duplicate notification
        // long after the first, and the first's commit must still be found).
        let modified = out.last_modified().and_then(|t| t.to_millis().ok());
        let oldest_ms = match (modified, oldest_ms) {
            (Some(m), Some(o)) => Some(m.min(o)),
            (m, o) => m.or(o),
        };
        Ok(Some(Self {
            object,
            source,
            oldest_ms,
            body: out.body,
            inflater: None,
            splitter: Splitter::new(),
            batch_bytes: BATCH_BYTES,
            done: false,
        }))
    }

    /// Batches of about `bytes` decompressed bytes instead of [`BATCH_BYTES`].
    pub fn with_batch_bytes(mut self, bytes: usize) -> Self {
        self.batch_bytes = bytes.max(1);
        self
    }

    /// The next batch of the object's records; `None` after the last.
    /// A body that does not decompress or parse ends the object with one
    /// dead-lettered record naming where it broke.
    pub async fn next_batch(&mut self) -> Result<Option<SourceBatch>, EnvelopeError> {
        let mut gathered = Gathered::default();
        let mut out = Vec::new();
        while !self.done && gathered.text.len() < self.batch_bytes {
            out.clear();
            let step = match self.body.next().await {
                Some(Ok(piece)) => self.push_piece(&piece, &mut out)?,
                Some(Err(e)) => {
                    return Err(self.fail("reading the body", e));
                }
                None => {
                    self.done = true;
                    self.finish_body(&mut out)
                }
            };
            match step {
                Ok(Some(chunk)) => gathered.take(chunk),
                Ok(None) => {}
                Err(reason) => {
                    // The records before stay; the break itself is dead-lettered
                    // as the record after them, and nothing after it is read.
                    self.done = true;
                    gathered.take(self.broken(&reason));
                }
            }
        }
        Ok(gathered.chunk().map(|chunk| self.batch_of(chunk)))
    }

    /// Inflates one piece of the body into `out` and splits off the whole
    /// records it completes; `Err` inside is why the object breaks there.
    fn push_piece(
        &mut self,
        piece: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Result<Option<Chunk>, String>, EnvelopeError> {
        let inflater = match &mut self.inflater {
            Some(i) => i,
            None => self
                .inflater
                .insert(Inflater::for_head(piece).map_err(|e| self.fail("opening its codec", e))?),
        };
        Ok(inflater
            .push(piece, out)
            .map_err(|e| format!("it does not decompress: {e}"))
            .and_then(|()| self.splitter.push(out).map_err(|e| e.to_string())))
    }

    /// The records the body's end completes: the inflater's last bytes and
    /// the splitter's unterminated last record, as one chunk.
    fn finish_body(&mut self, out: &mut Vec<u8>) -> Result<Option<Chunk>, String> {
        if let Some(i) = &mut self.inflater {
            i.finish(out)
                .map_err(|e| format!("it does not decompress to its end: {e}"))?;
        }
        let last = self.splitter.push(out).map_err(|e| e.to_string())?;
        let Some(tail) = self.splitter.finish().map_err(|e| e.to_string())? else {
            return Ok(last);
        };
        Ok(Some(match last {
            Some(mut c) => {
                let mut t = c.text.to_vec();
                t.extend_from_slice(&tail.text);
                c.text = t.into();
                c.lines += tail.lines;
                c
            }
            None => tail,
        }))
    }

    /// The one-record chunk that dead-letters the object's break, `reason`,
    /// as the record after the last whole one.
    fn broken(&self, reason: &str) -> Chunk {
        let at = self.splitter.next_position();
        let marker = Undecodable::record(
            self.object.source().as_bytes(),
            &RecordError::envelope(
                "",
                format!(
                    "object {} breaks after record {}: {reason}; fix and upload it again",
                    self.object.source(),
                    at - 1
                ),
            ),
        );
        let mut text = marker.to_vec();
        text.push(b'\n');
        Chunk {
            text: text.into(),
            first_line: at,
            lines: 1,
        }
    }

    /// The source batch of the object's lines in `chunk`.
    fn batch_of(&self, chunk: Chunk) -> SourceBatch {
        let spans = vec![SourceSpan {
            source: self.object.source(),
            positions: Positions::Range {
                first: Position::from(chunk.first_line),
                last: Position::from(chunk.last_line()),
            },
            // Line numbers of one object version: not a stream's positions.
            stream: false,
        }];
        SourceBatch::new(self.source.clone(), spans, Records::Ndjson(chunk)).oldest(self.oldest_ms)
    }

    /// `context` failed with `e`: the object cannot be read now.
    fn fail(&self, context: &'static str, e: impl Into<BoxError>) -> EnvelopeError {
        EnvelopeError::Object {
            object: self.object.source(),
            context,
            source: e.into(),
        }
    }
}

/// Chunks of an object gathered into one batch: their text, first line and
/// line count.
#[derive(Default)]
struct Gathered {
    text: Vec<u8>,
    first: Option<u64>,
    lines: u64,
}

impl Gathered {
    fn take(&mut self, chunk: Chunk) {
        self.first.get_or_insert(chunk.first_line);
        self.lines += chunk.lines;
        self.text.extend_from_slice(&chunk.text);
    }

    /// Everything gathered as one chunk; `None` when nothing was.
    fn chunk(self) -> Option<Chunk> {
        Some(Chunk {
            first_line: self.first?,
            lines: self.lines,
            text: self.text.into(),
        })
    }
}

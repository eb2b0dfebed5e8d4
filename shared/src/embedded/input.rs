//! The inputs of an embedded ingest: files, stdin or a stream's dump, read
//! in batches for the writers, each file or stdin continuing the source its
//! checkpoint ([`crate::rerun`]) names.

use std::io::Read;
use std::path::{Path, PathBuf};

use iceberg::TableIdent;
use tokio::sync::mpsc;

use super::EmbeddedError;
use crate::metrics::Counters;
use crate::ndjson::Chunker;
use crate::rerun::{self, Checkpoint, Checkpoints};
use crate::source::SourceKind;
use crate::source::{Positions, SourceSpan};
use crate::source::{Records, Source, SourceBatch};

/// One input of an ingest.
pub struct Input {
    /// Its source name in positions and dead letters (`file:/abs/path`, `stdin`).
    pub source: String,
    /// Its kind and name for routing templates (`{source}`).
    pub kind: SourceKind,
    /// Its bytes.
    pub reader: Box<dyn Read + Send>,
    /// The file it reads, when it is one: a rerun compares its start with
    /// the last run's through a second handle, and an unterminated last line
    /// waits for a later run (a log still being written).
    pub path: Option<PathBuf>,
}

impl Input {
    /// The file at `path`, named by its canonical path.
    pub fn file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let abs = path.canonicalize()?;
        Ok(Self {
            source: format!("file:{}", abs.display()),
            kind: SourceKind::File,
            reader: Box::new(file),
            path: Some(abs),
        })
    }

    /// Standard input: its last line ends with the input, newline or not.
    pub fn stdin() -> Self {
        Self::new("stdin", SourceKind::File, std::io::stdin())
    }

    /// Input read from `reader`, named `source`.
    pub fn new(source: &str, kind: SourceKind, reader: impl Read + Send + 'static) -> Self {
        Self {
            source: source.to_string(),
            kind,
            reader: Box::new(reader),
            path: None,
        }
    }
}

/// An input's unterminated last line, left for a later run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// The input.
    pub source: String,
    /// Its bytes.
    pub bytes: u64,
}

/// Feeds one input's batches to the writers; what it left unread.
pub(super) type Reader = Box<
    dyn FnOnce(&mpsc::Sender<SourceBatch>, &Counters) -> Result<Option<Unfinished>, EmbeddedError>
        + Send,
>;

/// A reader that hands over one ready batch.
pub(super) fn one_batch(batch: SourceBatch) -> Reader {
    Box::new(move |tx: &mpsc::Sender<SourceBatch>, _: &Counters| {
        // A closed channel means the writers stopped on an error, reported by the caller.
        let _ = tx.blocking_send(batch);
        Ok(None)
    })
}

/// How the inputs of one ingest are read.
pub(super) struct Reading {
    pub(super) table: Option<TableIdent>,
    pub(super) batch_records: u64,
    pub(super) batch_bytes: u64,
    pub(super) checkpoints: Checkpoints,
    /// For the checkpoints, from the reading thread.
    pub(super) runtime: tokio::runtime::Handle,
}

impl Reading {
    /// Sends `input`'s lines to the writers in batches. A file or stdin is
    /// the source [`crate::rerun`] finds it continues (a file grown at its
    /// end commits only its new lines, a rewritten one in full); an input
    /// named as a stream (a Kafka partition's dump) is that stream, its
    /// line numbers its positions.
    pub(super) fn input(
        self,
        input: Input,
        tx: &mpsc::Sender<SourceBatch>,
        counters: &Counters,
    ) -> Result<Option<Unfinished>, EmbeddedError> {
        let io_err = |error| EmbeddedError::Input {
            source_name: input.source.clone(),
            error,
        };
        let ck_err = |source| EmbeddedError::Checkpoint {
            source_name: input.source.clone(),
            source,
        };
        let stream = matches!(
            input.kind,
            SourceKind::Kafka | SourceKind::Kinesis | SourceKind::DynamoDb | SourceKind::Postgres
        );
        let mut versions = if stream {
            rerun::Versions::default()
        } else {
            self.runtime
                .block_on(self.checkpoints.load(&input.source))
                .map_err(ck_err)?
        };
        let (mut reader, found) =
            rerun::continues(input.reader, input.path.as_deref(), &versions.list)
                .map_err(io_err)?;
        let mut prefix = Vec::with_capacity(rerun::NAME_PREFIX);
        (&mut reader)
            .take(rerun::NAME_PREFIX as u64)
            .read_to_end(&mut prefix)
            .map_err(io_err)?;
        let source = match found {
            _ if stream => input.source.clone(),
            Some(i) => versions.list[i].source.clone(),
            None => self
                .new_source(&input.source, &prefix, &mut versions)
                .map_err(ck_err)?,
        };
        let file = input.path.is_some();
        let mut chunker = self.chunker(std::io::Cursor::new(prefix).chain(reader), file);
        let origin = Origin {
            source: source.clone(),
            kind: input.kind,
            stream,
            name: input
                .source
                .rsplit(['/', ':'])
                .next()
                .unwrap_or(&input.source)
                .to_string(),
        };
        let Some((bytes, hash)) = self
            .send_chunks(&mut chunker, &origin, tx, counters)
            .map_err(io_err)?
        else {
            // Writers stopped on an error, which the caller reports.
            return Ok(None);
        };
        if !stream && bytes > 0 {
            let ck = Checkpoint {
                input: input.source.clone(),
                source,
                bytes,
                hash,
            };
            self.save(&ck, &mut versions).map_err(ck_err)?;
        }
        let left = chunker.unfinished() as u64;
        Ok((left > 0).then(|| Unfinished {
            source: input.source.clone(),
            bytes: left,
        }))
    }

    /// Batches of `reader` as this reading cuts them; a `file`'s unfinished
    /// last line is held back.
    fn chunker<R: Read>(&self, reader: R, file: bool) -> Chunker<R> {
        let chunker = Chunker::new(reader, self.batch_records).with_max_bytes(self.batch_bytes);
        if file {
            chunker.holding_unfinished()
        } else {
            chunker
        }
    }

    /// A new source for `input`, which continues none of its earlier
    /// versions, saved before any batch of it leaves so that a rerun after a
    /// crash continues it.
    fn new_source(
        &self,
        input: &str,
        prefix: &[u8],
        versions: &mut rerun::Versions,
    ) -> Result<String, rerun::CheckpointError> {
        let source = rerun::new_source(input, prefix, versions.list.first());
        let ck = Checkpoint {
            input: input.to_string(),
            source: source.clone(),
            bytes: prefix.len() as u64,
            hash: xxhash_rust::xxh3::xxh3_64(prefix),
        };
        self.save(&ck, versions)?;
        Ok(source)
    }

    /// Saves `ck` as the input's newest version, from the reading thread.
    fn save(
        &self,
        ck: &Checkpoint,
        versions: &mut rerun::Versions,
    ) -> Result<(), rerun::CheckpointError> {
        self.runtime.block_on(self.checkpoints.save(ck, versions))
    }

    /// Sends each chunk as a batch of `origin`; the bytes sent and their
    /// hash, or `None` when the writers stopped and closed the channel.
    fn send_chunks<R: Read>(
        &self,
        chunker: &mut Chunker<R>,
        origin: &Origin,
        tx: &mpsc::Sender<SourceBatch>,
        counters: &Counters,
    ) -> std::io::Result<Option<(u64, u64)>> {
        let mut read = xxhash_rust::xxh3::Xxh3::new();
        let mut bytes = 0u64;
        while let Some(chunk) = chunker.next_chunk()? {
            Counters::add(&counters.bytes_in, chunk.text.len() as u64);
            read.update(&chunk.text);
            bytes += chunk.text.len() as u64;
            let spans = vec![SourceSpan {
                source: origin.source.clone(),
                positions: Positions::Range {
                    first: chunk.first_line.into(),
                    last: chunk.last_line().into(),
                },
                stream: origin.stream,
            }];
            // Lines of a file can be edited in place, so the content is part of the id.
            let text = chunk.text.clone();
            let batch = SourceBatch::new(
                Source::new(origin.kind, origin.name.clone()),
                spans,
                Records::Ndjson(chunk),
            )
            .pinned_to(&text)
            .to_table(self.table.clone());
            if tx.blocking_send(batch).is_err() {
                return Ok(None);
            }
        }
        Ok(Some((bytes, read.digest())))
    }
}

/// Where an input's batches come from, as their spans and sources name it.
struct Origin {
    /// The source of their positions.
    source: String,
    kind: SourceKind,
    /// True for a stream's dump, whose line numbers are the stream's positions.
    stream: bool,
    /// The source's name for routing templates: the input's last path part.
    name: String,
}

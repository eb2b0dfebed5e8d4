//! Dead-letter administration of the embedded runner: listing, replaying
//! (exactly once, optionally with a fix) and purging dead-lettered records,
//! all or those a filter selects.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use iceberg::TableIdent;

use super::{Embedded, EmbeddedError, IngestOptions, IngestReport, Reader, one_batch};
use crate::clock::now_ms;
use crate::dlq::{Filter, Fix, Rejected, Replayed};
use crate::source::{Positions, Records, Source, SourceBatch, SourceKind, SourceSpan};

/// A dead-letter file of one batch, or the records a filter selects in it.
#[derive(Debug, Clone)]
pub struct DeadLetterFile {
    /// Where it is (`file:///…`, `s3://…`).
    pub path: String,
    /// The table its records were meant for (empty for unroutable records).
    pub table: String,
    /// Its records (those the filter selects) with why they were rejected.
    pub entries: Vec<Rejected>,
    /// When it was written, ms since the epoch.
    pub modified_ms: i64,
    /// The records the filter left, which stay dead-lettered.
    left: Vec<Rejected>,
    /// Its bytes, which name it in a replay's batch id.
    content: Bytes,
}

impl DeadLetterFile {
    /// The bytes that name the selected records in a replay's batch id: the
    /// file's own when every record is selected, so a replay crashed and run
    /// again, filtered the same way, is the same batch.
    fn pin(&self) -> Bytes {
        if self.left.is_empty() {
            return self.content.clone();
        }
        Bytes::from(lines(&self.entries))
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// The ingest of the replayed records.
    pub report: IngestReport,
    /// The dead-letter files replayed (wholly or in part).
    pub files: Vec<String>,
    /// Records a fix changed.
    pub fixed: usize,
    /// Records a fix could not apply to, with why (they replay as they were).
    pub unfixable: Vec<String>,
}

impl Embedded {
    /// The dead-letter files under the dead-letter prefix (local or on S3),
    /// optionally of one table; refused commit requests (`_requests/`) are
    /// not records and are left out.
    pub async fn dead_letter_files(
        &self,
        table: Option<&TableIdent>,
    ) -> Result<Vec<DeadLetterFile>, EmbeddedError> {
        self.dead_letters(table, &Filter::default()).await
    }

    /// [`Embedded::dead_letter_files`] with only the records `filter`
    /// selects; files with none are left out.
    pub async fn dead_letters(
        &self,
        table: Option<&TableIdent>,
        filter: &Filter,
    ) -> Result<Vec<DeadLetterFile>, EmbeddedError> {
        let prefix = self.dead_letter_prefix();
        let requests = format!("{prefix}/_requests/");
        let mut listed: Vec<_> = self
            .lister
            .list(&prefix)
            .await
            .map_err(EmbeddedError::List)?
            .into_iter()
            .filter(|l| l.uri.ends_with(".ndjson") && !l.uri.starts_with(&requests))
            .collect();
        listed.sort_by(|a, b| a.uri.cmp(&b.uri));
        let now = now_ms();
        let mut out = Vec::new();
        for listed in listed {
            let content = self.read(&listed.uri).await?;
            let entries = parse(&listed.uri, &content)?;
            let table_name = entries.first().map(|e| e.table.clone()).unwrap_or_default();
            if let Some(t) = table
                && table_name != crate::ident::display(t)
            {
                continue;
            }
            let age = now - listed.modified_ms;
            let (entries, left): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|e| filter.selects(e, age));
            if entries.is_empty() {
                continue;
            }
            out.push(DeadLetterFile {
                path: listed.uri,
                table: table_name,
                entries,
                modified_ms: listed.modified_ms,
                left,
                content,
            });
        }
        Ok(out)
    }

    async fn read(&self, path: &str) -> Result<Bytes, EmbeddedError> {
        let err = |source| EmbeddedError::DeadLetter {
            path: path.to_string(),
            source: Box::new(source),
        };
        self.file_io
            .new_input(path)
            .map_err(err)?
            .read()
            .await
            .map_err(err)
    }

    /// Re-ingests dead-lettered records (of one table, or all, or those
    /// `filter` selects) once the table or the data is fixed, or with
    /// `fixes` applied, exactly once: each dead-letter file is one batch
    /// whose id derives from its content, and each record keeps the id of
    /// its first source and position, so a replay that crashes and runs
    /// again commits nothing twice. Replayed records leave the dead-letter
    /// location (a file keeps what the filter left); records that fail
    /// again go to new dead-letter files.
    pub async fn replay_dead_letters(
        &self,
        table: Option<&TableIdent>,
        filter: &Filter,
        fixes: &[Fix],
        opts: &IngestOptions,
    ) -> Result<Replay, EmbeddedError> {
        let files = self.dead_letters(table, filter).await?;
        let mut readers: Vec<Reader> = Vec::new();
        let mut out = Replay::default();
        for file in &files {
            let target = if file.table.is_empty() {
                None
            } else {
                Some(
                    crate::ident::parse_table(&file.table).map_err(|e| EmbeddedError::Input {
                        source_name: file.path.clone(),
                        error: std::io::Error::other(e.to_string()),
                    })?,
                )
            };
            let replayed = replayed(file, fixes, &mut out)?;
            let spans = vec![SourceSpan {
                source: format!("dlq:{}", file.table),
                positions: Positions::Ids {
                    ids: replayed
                        .records()
                        .iter()
                        .map(|(id, _)| id.clone())
                        .collect(),
                },
                stream: false,
            }];
            let batch = SourceBatch::new(
                Source::new(SourceKind::File, "dlq"),
                spans,
                Records::Replayed(Arc::new(replayed)),
            )
            .pinned_to(&file.pin())
            .to_table(target);
            out.files.push(file.path.clone());
            readers.push(one_batch(batch));
        }
        out.report = self.run(readers, opts, None).await?;
        for file in &files {
            self.settle(file).await?;
        }
        Ok(out)
    }

    /// Deletes dead-lettered records (of one table, or all, or those
    /// `filter` selects) without replaying them: records no fix will make
    /// fit. Returns the files with the records deleted from each.
    pub async fn purge_dead_letters(
        &self,
        table: Option<&TableIdent>,
        filter: &Filter,
    ) -> Result<Vec<(String, usize)>, EmbeddedError> {
        let mut purged = Vec::new();
        for file in self.dead_letters(table, filter).await? {
            self.settle(&file).await?;
            purged.push((file.path, file.entries.len()));
        }
        Ok(purged)
    }

    /// Takes `file`'s selected records out of the dead-letter location: the
    /// records left are written to a file of their own before the old one
    /// goes, so a crash between the two leaves a record twice (a replay
    /// finds it committed), never lost.
    async fn settle(&self, file: &DeadLetterFile) -> Result<(), EmbeddedError> {
        if !file.left.is_empty() {
            let content = lines(&file.left);
            let mut hasher = DefaultHasher::new();
            content.hash(&mut hasher);
            let stem = file.path.strip_suffix(".ndjson").unwrap_or(&file.path);
            let path = format!("{stem}~{:016x}.ndjson", hasher.finish());
            let err = |source| EmbeddedError::DeadLetter {
                path: path.clone(),
                source: Box::new(source),
            };
            self.file_io
                .new_output(&path)
                .map_err(err)?
                .write(Bytes::from(content))
                .await
                .map_err(err)?;
        }
        self.file_io
            .delete(&file.path)
            .await
            .map_err(|source| EmbeddedError::DeadLetter {
                path: file.path.clone(),
                source: Box::new(source),
            })
    }
}

/// The records of a dead-letter file; a line that is not one is an error
/// naming it, never skipped (a replay or purge would then delete it).
fn parse(path: &str, content: &[u8]) -> Result<Vec<Rejected>, EmbeddedError> {
    String::from_utf8_lossy(content)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).map_err(|e| EmbeddedError::DeadLetterFormat {
                path: path.to_string(),
                reason: format!("line {} is not a dead-lettered record: {e}", n + 1),
            })
        })
        .collect()
}

/// Dead-lettered records as a dead-letter file holds them.
fn lines(entries: &[Rejected]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        // A struct of strings and numbers always serializes.
        if let Ok(line) = serde_json::to_vec(e) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    out
}

/// A dead-letter file's records as a replay holds them: each as the record
/// it was (with `fixes` applied), its bytes under the id of its first
/// source and position, so two copies of one (a source that delivered it
/// twice) commit once, a replay that crashes and runs again commits nothing
/// twice, and a keyed replay is ordered by where its records first came from.
fn replayed(
    file: &DeadLetterFile,
    fixes: &[Fix],
    out: &mut Replay,
) -> Result<Replayed, EmbeddedError> {
    let mut replayed = Replayed::default();
    for e in &file.entries {
        let mut bytes = e.bytes().ok_or_else(|| EmbeddedError::DeadLetterFormat {
            path: file.path.clone(),
            reason: format!(
                "the record at {} {} has a record_base64 that is not base64",
                e.source, e.position
            ),
        })?;
        let mut fixed = false;
        for fix in fixes {
            match fix.apply(&bytes) {
                Ok(Some(new)) => {
                    fixed |= new[..] != bytes[..];
                    bytes = Bytes::from(new);
                }
                Ok(None) => {}
                Err(why) => out
                    .unfixable
                    .push(format!("{} {}: {}: {why}", e.source, e.position, fix.field)),
            }
        }
        out.fixed += usize::from(fixed);
        replayed.push(e.replay_id(), bytes, e.origin());
    }
    Ok(replayed)
}

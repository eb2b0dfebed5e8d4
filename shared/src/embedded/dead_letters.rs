//! Dead-letter administration of the embedded runner: listing, replaying
//! (exactly once, optionally with a fix) and purging dead-lettered records,
//! all or those a filter selects.

use std::sync::Arc;

use iceberg::TableIdent;

use super::{Embedded, EmbeddedError, IngestOptions, IngestReport, Reader, one_batch};
use crate::dlq::{Rejected, Replayed};
use crate::source::{Positions, Records, Source, SourceBatch, SourceKind, SourceSpan};

/// A dead-letter file of one batch.
#[derive(Debug, Clone)]
pub struct DeadLetterFile {
    /// Where it is (`file:///…`, `s3://…`).
    pub path: String,
    /// The table its records were meant for (empty for unroutable records).
    pub table: String,
    /// Its records with why they were rejected.
    pub entries: Vec<Rejected>,
    /// Its bytes, which name it in a replay's batch id.
    content: bytes::Bytes,
}

impl Embedded {
    /// The dead-letter files under the dead-letter prefix (local or on S3),
    /// optionally of one table; refused commit requests (`_requests/`) are
    /// not records and are left out.
    pub async fn dead_letter_files(
        &self,
        table: Option<&TableIdent>,
    ) -> Result<Vec<DeadLetterFile>, EmbeddedError> {
        let prefix = self.dead_letter_prefix();
        let requests = format!("{prefix}/_requests/");
        let mut listed: Vec<String> = self
            .lister
            .list(&prefix)
            .await
            .map_err(EmbeddedError::List)?
            .into_iter()
            .map(|l| l.uri)
            .filter(|uri| uri.ends_with(".ndjson") && !uri.starts_with(&requests))
            .collect();
        listed.sort();
        let mut out = Vec::new();
        for path in listed {
            let content = self.read(&path).await?;
            let entries: Vec<Rejected> = String::from_utf8_lossy(&content)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let table_name = entries.first().map(|e| e.table.clone()).unwrap_or_default();
            if let Some(t) = table
                && table_name != crate::ident::display(t)
            {
                continue;
            }
            out.push(DeadLetterFile {
                path,
                table: table_name,
                entries,
                content,
            });
        }
        Ok(out)
    }

    async fn read(&self, path: &str) -> Result<bytes::Bytes, EmbeddedError> {
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

    /// Re-ingests dead-lettered records (of one table, or all) once the table or
    /// the data is fixed, exactly once: each dead-letter file is one batch whose
    /// id derives from its path and content, so a replay that crashes and runs
    /// again commits nothing twice. Replayed files are removed; records that
    /// fail again go to new dead-letter files.
    pub async fn replay_dead_letters(
        &self,
        table: Option<&TableIdent>,
        opts: &IngestOptions,
    ) -> Result<(IngestReport, Vec<String>), EmbeddedError> {
        let files = self.dead_letter_files(table).await?;
        let mut readers: Vec<Reader> = Vec::new();
        let mut paths = Vec::new();
        for file in files {
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
            let replayed = replayed(&file)?;
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
            .pinned_to(&file.content)
            .to_table(target);
            paths.push(file.path);
            readers.push(one_batch(batch));
        }
        let report = self.run(readers, opts, None).await?;
        for p in &paths {
            self.delete_dead_letter(p).await?;
        }
        Ok((report, paths))
    }

    /// Deletes dead-letter files (of one table, or all) without replaying
    /// them: records no fix will make fit. Returns the files with their
    /// record counts.
    pub async fn purge_dead_letters(
        &self,
        table: Option<&TableIdent>,
    ) -> Result<Vec<(String, usize)>, EmbeddedError> {
        let mut purged = Vec::new();
        for file in self.dead_letter_files(table).await? {
            self.delete_dead_letter(&file.path).await?;
            purged.push((file.path, file.entries.len()));
        }
        Ok(purged)
    }

    async fn delete_dead_letter(&self, path: &str) -> Result<(), EmbeddedError> {
        self.file_io
            .delete(path)
            .await
            .map_err(|source| EmbeddedError::DeadLetter {
                path: path.to_string(),
                source: Box::new(source),
            })
    }
}

/// A dead-letter file's records as a replay holds them: each as the record
/// it was, its exact bytes under the id of its first source and position,
/// so two copies of one (a source that delivered it twice) commit once, a
/// replay that crashes and runs again commits nothing twice, and a keyed
/// replay is ordered by where its records first came from.
fn replayed(file: &DeadLetterFile) -> Result<Replayed, EmbeddedError> {
    let mut replayed = Replayed::default();
    for e in &file.entries {
        let bytes = e.bytes().ok_or_else(|| EmbeddedError::DeadLetterFormat {
            path: file.path.clone(),
            reason: format!(
                "the record at {} {} has a record_base64 that is not base64",
                e.source, e.position
            ),
        })?;
        replayed.push(e.replay_id(), bytes, e.origin());
    }
    Ok(replayed)
}

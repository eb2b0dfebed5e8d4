//! The committer trusts no queue message: a request may name only files
//! under its table's location (its key file: or in the table's ledger
//! directory), and every file it names must be there with
//! the size it claims. A request that fails either is dead-lettered with its
//! reason, never committed, and none of its files is touched.

use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;

use crate::request::CommitRequest;

/// Files checked at once.
const CONCURRENCY: usize = 32;

/// Why a request may not be committed; `Ok(None)` when it may. Storage
/// errors are returned as such: a retry may get an answer.
pub async fn check(
    file_io: &FileIO,
    metadata: &iceberg::spec::TableMetadata,
    request: &CommitRequest,
) -> iceberg::Result<Option<String>> {
    let ledger_dir = crate::ledger::place::dir(metadata);
    if let Some(reason) = request.foreign_file(metadata.location(), &ledger_dir) {
        return Ok(Some(reason));
    }
    let mut sized: Vec<(String, Option<u64>)> = Vec::new();
    for f in request.data_files.iter().chain(&request.delete_files) {
        if let Some(path) = f.get("file_path").and_then(serde_json::Value::as_str) {
            let size = f
                .get("file_size_in_bytes")
                .and_then(serde_json::Value::as_u64);
            sized.push((path.to_string(), size));
        }
    }
    sized.extend(request.key_file.iter().map(|p| (p.clone(), None)));
    let problems: Vec<Option<String>> = futures::stream::iter(sized)
        .map(|(path, size)| async move {
            let input = file_io.new_input(&path)?;
            let gone = || {
                format!(
                    "{path} is gone (cleaned as an orphan, or compacted and expired after an earlier commit of the same records)"
                )
            };
            match size {
                // One HEAD answers both questions for a file that is there;
                // only a failed one asks again whether it is missing or
                // the storage failed (which fails the check: a retry may
                // get an answer).
                Some(size) => match input.metadata().await {
                    Ok(found) => Ok::<_, iceberg::Error>((found.size != size).then(|| {
                        format!("{path} has {} bytes, the request says {size}", found.size)
                    })),
                    Err(e) if input.exists().await? => Err(e),
                    Err(_) => Ok(Some(gone())),
                },
                None => Ok((!input.exists().await?).then(gone)),
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    Ok(problems.into_iter().flatten().next())
}

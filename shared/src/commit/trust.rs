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
            if !input.exists().await? {
                return Ok::<_, iceberg::Error>(Some(format!(
                    "{path} is gone (cleaned as an orphan, or compacted and expired after an earlier commit of the same records)"
                )));
            }
            match size {
                Some(size) => {
                    let found = input.metadata().await?.size;
                    Ok((found != size)
                        .then(|| format!("{path} has {found} bytes, the request says {size}")))
                }
                None => Ok(None),
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    Ok(problems.into_iter().flatten().next())
}

//! Row lineage for format v3 tables: every row gets a table-wide `_row_id`
//! when it is first committed, by inheritance, so floe never writes ids into
//! data files it adds. A snapshot takes the table's `next-row-id` as its
//! `first-row-id`; each data manifest without a `first_row_id` takes the next
//! range, as wide as its added and existing rows; a data file inherits its
//! manifest's id plus the rows of the files before it. Ids already handed
//! out must survive a manifest rewrite, so entries floe carries into a new
//! manifest get their inherited id written out.

use iceberg::spec::{DataFile, DataFileBuilder, Manifest, ManifestContentType, ManifestFile};
use iceberg::{Error, ErrorKind};

/// Assigns a `first_row_id` to each data manifest in `manifests` that has
/// none, from `next` on, in list order; returns the table's next row id.
pub fn assign(manifests: &mut [ManifestFile], mut next: u64) -> iceberg::Result<u64> {
    for m in manifests
        .iter_mut()
        .filter(|m| m.content == ManifestContentType::Data && m.first_row_id.is_none())
    {
        let rows = m
            .added_rows_count
            .zip(m.existing_rows_count)
            .map(|(a, e)| a + e)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::DataInvalid,
                    format!(
                        "manifest {} has no row counts to assign row ids by",
                        m.manifest_path
                    ),
                )
            })?;
        m.first_row_id = Some(next);
        next = next.checked_add(rows).ok_or_else(|| {
            Error::new(ErrorKind::DataInvalid, "row ids overflow a 64-bit integer")
        })?;
    }
    Ok(next)
}

/// The `first_row_id` each entry of `manifest` has, written or inherited, in
/// entry order (`None` for entries that have none: deleted entries whose
/// manifest predates v3, and delete files).
pub fn first_row_ids(file: &ManifestFile, manifest: &Manifest) -> Vec<Option<i64>> {
    let mut next = file.first_row_id.and_then(|id| i64::try_from(id).ok());
    manifest
        .entries()
        .iter()
        .map(|e| {
            let own = e.data_file().first_row_id();
            if own.is_some() || !e.is_alive() || file.content != ManifestContentType::Data {
                return own;
            }
            let id = next?;
            next = id.checked_add(e.record_count() as i64);
            Some(id)
        })
        .collect()
}

/// `file` with its `first_row_id` written out; `spec_id` is its manifest's
/// partition spec (a [`DataFile`] does not expose its own).
pub fn with_first_row_id(file: &DataFile, spec_id: i32, id: i64) -> iceberg::Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(id))
        .partition_spec_id(spec_id)
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| {
        Error::new(
            ErrorKind::Unexpected,
            format!("rebuilding a data file: {e}"),
        )
    })
}

//! A data file's Parquet footer, read with two ranged reads (its length,
//! then itself) instead of the whole file: what floe wrote there (`floe.rows`)
//! and which columns the file holds.

use iceberg::io::{FileIO, FileRead};
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};

/// The decoded footer of the Parquet file at `path`, `size` bytes long.
pub async fn read(file_io: &FileIO, path: &str, size: u64) -> iceberg::Result<ParquetMetaData> {
    let invalid = |what: String| iceberg::Error::new(iceberg::ErrorKind::DataInvalid, what);
    if size < 12 {
        return Err(invalid(format!(
            "{path}: {size} bytes is too short for Parquet"
        )));
    }
    let reader = file_io.new_input(path)?.reader().await?;
    let tail = reader.read(size - 8..size).await?;
    let tail: [u8; 8] = tail[..]
        .try_into()
        .map_err(|_| invalid(format!("{path}: short read of the footer")))?;
    let len = FooterTail::try_new(&tail)
        .map_err(|e| invalid(format!("{path}: {e}")))?
        .metadata_length() as u64;
    if len + 8 > size {
        return Err(invalid(format!("{path}: footer longer than the file")));
    }
    let footer = reader.read(size - 8 - len..size - 8).await?;
    ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| invalid(format!("{path}: {e}")))
}

/// The Iceberg field ids of the file's top-level columns.
pub fn top_level_field_ids(meta: &ParquetMetaData) -> Vec<i32> {
    meta.file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .iter()
        .filter(|f| f.get_basic_info().has_id())
        .map(|f| f.get_basic_info().id())
        .collect()
}

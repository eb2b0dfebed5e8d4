//! Deletion vectors, how format v3 tables say which rows of a data file are
//! gone: a Puffin `deletion-vector-v1` blob per data file (a portable 64-bit
//! Roaring bitmap of row positions, framed by its length, a magic number and
//! a CRC-32), tracked in a delete manifest by the Puffin file, the blob's
//! offset and length, and the data file it applies to. The v3 spec allows one
//! vector per data file in a snapshot, holding every row deleted so far, so a
//! commit that deletes more rows of a file writes the file's whole vector
//! again and drops the old one. One Puffin file per commit holds them all,
//! or, where the table asks (`floe.write.vector-per-puffin`), one per vector.

use std::borrow::Cow;
use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::puffin::{
    Blob, CREATED_BY_PROPERTY, CompressionCodec, DELETION_VECTOR_V1, PuffinWriter,
};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat};
use iceberg::{Error, ErrorKind};
use roaring::RoaringTreemap;

use super::{FileDeletes, TableWriter, WriteError};

/// The magic number after a vector's length.
const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// Puffin files of one commit written at once, one vector each.
const PUTS_AT_ONCE: usize = 16;

/// The Puffin file's own magic number, which precedes the first blob.
const PUFFIN_HEADER: u64 = 4;

/// How the table tells a delete file apart from the others: its path, and
/// for a deletion vector, which shares its Puffin file with others, the
/// blob's offset too.
pub fn file_key(file: &DataFile) -> Cow<'_, str> {
    match file.content_offset() {
        Some(offset) if file.file_format() == DataFileFormat::Puffin => {
            Cow::Owned(format!("{}#{offset}", file.file_path()))
        }
        _ => Cow::Borrowed(file.file_path()),
    }
}

/// True for a deletion vector (a delete file that names one data file's
/// rows inside a Puffin file).
pub fn is_vector(file: &DataFile) -> bool {
    file.file_format() == DataFileFormat::Puffin
        && file.content_type() == DataContentType::PositionDeletes
}

/// The blob of `rows`, as the Puffin spec frames it.
pub fn encode(rows: &RoaringTreemap) -> Vec<u8> {
    let body = MAGIC.len() + rows.serialized_size();
    let mut out = Vec::with_capacity(body + 8);
    out.extend_from_slice(&(body as u32).to_be_bytes());
    out.extend_from_slice(&MAGIC);
    // Writing into a Vec cannot fail.
    let _ = rows.serialize_into(&mut out);
    let crc = crc32fast::hash(&out[4..]);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The rows of a blob, after checking its length, magic number and CRC.
pub fn decode(blob: &[u8]) -> Result<RoaringTreemap, String> {
    if blob.len() < 12 {
        return Err(format!(
            "a {}-byte deletion vector is too short",
            blob.len()
        ));
    }
    let (len, rest) = blob.split_at(4);
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len + 4 != rest.len() {
        return Err(format!(
            "deletion vector says {len} bytes, holds {}",
            rest.len().saturating_sub(4)
        ));
    }
    let (body, crc) = rest.split_at(len);
    if body[..4] != MAGIC {
        return Err("deletion vector without its magic number".into());
    }
    let want = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32fast::hash(body) != want {
        return Err("deletion vector fails its CRC".into());
    }
    RoaringTreemap::deserialize_from(&body[4..]).map_err(|e| format!("deletion vector: {e}"))
}

/// Reads one deletion vector: the data file it applies to and its rows.
pub async fn read(file_io: &FileIO, file: &DataFile) -> iceberg::Result<(String, RoaringTreemap)> {
    let invalid = |what: String| {
        Error::new(
            ErrorKind::DataInvalid,
            format!("{}: {what}", file_key(file)),
        )
    };
    let target = file
        .referenced_data_file()
        .ok_or_else(|| invalid("a deletion vector names no data file".into()))?;
    let (offset, size) = file
        .content_offset()
        .zip(file.content_size_in_bytes())
        .and_then(|(o, s)| Some((u64::try_from(o).ok()?, u64::try_from(s).ok()?)))
        .ok_or_else(|| invalid("a deletion vector without its offset and size".into()))?;
    let bytes = file_io
        .new_input(file.file_path())?
        .reader()
        .await?
        .read(offset..offset + size)
        .await?;
    let rows = decode(&bytes).map_err(invalid)?;
    if rows.len() != file.record_count() {
        return Err(invalid(format!(
            "the vector holds {} rows, its manifest entry says {}",
            rows.len(),
            file.record_count()
        )));
    }
    Ok((target, rows))
}

impl TableWriter {
    /// Writes a vector for each of `deletes` (each with every deleted row
    /// of its data file): in one Puffin file `<name>-dv.puffin`, or one per
    /// vector (`<name>-dv-<n>.puffin`) where the table asks for it; returns
    /// one delete file per vector, with its data file's partition spec id.
    pub(super) async fn write_vectors(
        &self,
        deletes: &[FileDeletes],
        name: &str,
    ) -> Result<Vec<(i32, DataFile)>, WriteError> {
        if !self.settings.vector_per_puffin {
            let path = format!("{}/{name}-dv.puffin", self.data_location);
            return self.write_puffin(deletes, path).await;
        }
        // Written side by side: a commit's time grows with the slowest PUT,
        // not with the number of files it deletes from.
        let puts: Vec<_> = deletes
            .iter()
            .enumerate()
            .map(|(n, d)| {
                let path = format!("{}/{name}-dv-{n}.puffin", self.data_location);
                self.write_puffin(std::slice::from_ref(d), path)
            })
            .collect();
        let written: Vec<Vec<(i32, DataFile)>> = futures::stream::iter(puts)
            .buffered(PUTS_AT_ONCE)
            .try_collect()
            .await?;
        Ok(written.into_iter().flatten().collect())
    }

    async fn write_puffin(
        &self,
        deletes: &[FileDeletes],
        path: String,
    ) -> Result<Vec<(i32, DataFile)>, WriteError> {
        let output = self.file_io.new_output(&path).map_err(|e| self.err(e))?;
        let created_by = HashMap::from([(
            CREATED_BY_PROPERTY.to_string(),
            format!("floe {}", env!("CARGO_PKG_VERSION")),
        )]);
        let mut puffin = PuffinWriter::new(&output, created_by, false)
            .await
            .map_err(|e| self.err(e))?;
        let mut offset = PUFFIN_HEADER;
        let mut out = Vec::with_capacity(deletes.len());
        for d in deletes {
            let rows: RoaringTreemap = d.rows.iter().map(|r| u64::from(*r)).collect();
            let data = encode(&rows);
            let size = data.len() as u64;
            let blob = Blob::builder()
                .r#type(DELETION_VECTOR_V1.to_string())
                .fields(Vec::new())
                .snapshot_id(-1)
                .sequence_number(-1)
                .data(data)
                .properties(HashMap::from([
                    ("referenced-data-file".to_string(), d.data_file.clone()),
                    ("cardinality".to_string(), rows.len().to_string()),
                ]))
                .build();
            puffin
                .add(blob, CompressionCodec::None)
                .await
                .map_err(|e| self.err(e))?;
            out.push((d, rows.len(), offset, size));
            offset += size;
        }
        puffin.close().await.map_err(|e| self.err(e))?;
        let file_size = self
            .file_io
            .new_input(&path)
            .map_err(|e| self.err(e))?
            .metadata()
            .await
            .map_err(|e| self.err(e))?
            .size;
        out.into_iter()
            .map(|(d, cardinality, offset, size)| {
                let mut b = DataFileBuilder::default();
                b.content(DataContentType::PositionDeletes)
                    .file_path(path.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(d.partition.clone())
                    .partition_spec_id(d.spec_id)
                    .record_count(cardinality)
                    .file_size_in_bytes(file_size)
                    .referenced_data_file(Some(d.data_file.clone()))
                    .content_offset(Some(offset as i64))
                    .content_size_in_bytes(Some(size as i64));
                let file = b.build().map_err(|e| {
                    self.err(
                        Error::new(ErrorKind::Unexpected, "deletion vector entry").with_source(e),
                    )
                })?;
                Ok((d.spec_id, file))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_round_trips_and_a_flipped_bit_is_caught() {
        let rows: RoaringTreemap = [0u64, 1, 7, 65_536, 1 << 33].into_iter().collect();
        let blob = encode(&rows);
        assert_eq!(&blob[4..8], &MAGIC);
        assert_eq!(decode(&blob).unwrap(), rows);
        let mut bad = blob.clone();
        bad[10] ^= 1;
        assert!(decode(&bad).unwrap_err().contains("CRC"));
        assert!(decode(&blob[..blob.len() - 1]).is_err());
    }

    #[test]
    fn the_blob_is_the_portable_layout_the_spec_gives() {
        // Rows 1 and 3: one 32-bit bitmap under key 0, one array container.
        let rows: RoaringTreemap = [1u64, 3].into_iter().collect();
        let blob = encode(&rows);
        let body = &blob[8..blob.len() - 4];
        assert_eq!(&body[..8], &1u64.to_le_bytes(), "the number of bitmaps");
        assert_eq!(&body[8..12], &0u32.to_le_bytes(), "the first key");
        let len = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        assert_eq!(
            len,
            4 + body.len(),
            "the length counts the magic and the vector"
        );
    }
}

//! Table properties → Parquet writer settings. iceberg-rust 0.10.1 does not map
//! `write.parquet.*` itself, so floe does, with Iceberg's defaults.

use std::collections::HashMap;

use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};

use super::metrics::MetricsConfig;
use super::number;
use crate::error::ConfigError;

/// `write.parquet.compression-codec`.
pub const COMPRESSION_CODEC: &str = "write.parquet.compression-codec";
/// `write.parquet.compression-level`.
pub const COMPRESSION_LEVEL: &str = "write.parquet.compression-level";
/// `write.target-file-size-bytes`.
pub const TARGET_FILE_SIZE: &str = "write.target-file-size-bytes";
/// `write.parquet.page-size-bytes`.
pub const PAGE_SIZE: &str = "write.parquet.page-size-bytes";
/// `write.parquet.page-row-limit`.
pub const PAGE_ROW_LIMIT: &str = "write.parquet.page-row-limit";
/// `write.parquet.dict-size-bytes`.
pub const DICT_SIZE: &str = "write.parquet.dict-size-bytes";

/// `floe.write.vector-per-puffin`: `true` writes each deletion vector in a
/// Puffin file of its own, for readers that misapply one file's several
/// vectors (docs/cdc.md); by default a commit's vectors share one file.
pub const VECTOR_PER_PUFFIN: &str = "floe.write.vector-per-puffin";

/// Iceberg's default target file size (512 MiB).
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;

/// How a table's data files are written.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// Parquet writer properties.
    pub parquet: WriterProperties,
    /// Roll to a new file past this many bytes.
    pub target_file_size: u64,
    /// Which column metrics data files' entries keep.
    pub metrics: MetricsConfig,
    /// One Puffin file per deletion vector rather than per commit.
    pub vector_per_puffin: bool,
}

impl FileSettings {
    /// Reads the settings from table properties.
    pub fn from_properties(props: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let codec = props
            .get(COMPRESSION_CODEC)
            .map(String::as_str)
            .unwrap_or("zstd");
        let level = number::<i32>(props, COMPRESSION_LEVEL)?;
        let compression = compression(codec, level).map_err(|reason| ConfigError::Property {
            key: COMPRESSION_CODEC.into(),
            value: codec.into(),
            reason,
        })?;
        let mut b = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(compression)
            // Chunk statistics are what Iceberg's column metrics are built from;
            // page-level ones would cost encode time for no reader that floe targets.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(format!("floe {}", env!("CARGO_PKG_VERSION")));
        if let Some(v) = number::<usize>(props, PAGE_SIZE)? {
            b = b.set_data_page_size_limit(v);
        }
        if let Some(v) = number::<usize>(props, PAGE_ROW_LIMIT)? {
            b = b.set_data_page_row_count_limit(v);
        }
        if let Some(v) = number::<usize>(props, DICT_SIZE)? {
            b = b.set_dictionary_page_size_limit(v);
        }
        Ok(Self {
            parquet: b.build(),
            target_file_size: number::<u64>(props, TARGET_FILE_SIZE)?
                .unwrap_or(DEFAULT_TARGET_FILE_SIZE)
                .max(1),
            metrics: MetricsConfig::from_properties(props)?,
            vector_per_puffin: flag(props, VECTOR_PER_PUFFIN)?.unwrap_or(false),
        })
    }
}

fn flag(props: &HashMap<String, String>, key: &str) -> Result<Option<bool>, ConfigError> {
    props
        .get(key)
        .map(|v| match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(ConfigError::Property {
                key: key.into(),
                value: v.clone(),
                reason: "not `true` or `false`".into(),
            }),
        })
        .transpose()
}

fn compression(codec: &str, level: Option<i32>) -> Result<Compression, String> {
    let bad_level = |e: parquet::errors::ParquetError| format!("compression level: {e}");
    Ok(match codec.to_ascii_lowercase().as_str() {
        "zstd" => Compression::ZSTD(match level {
            Some(l) => ZstdLevel::try_new(l).map_err(bad_level)?,
            None => ZstdLevel::default(),
        }),
        "snappy" => Compression::SNAPPY,
        "gzip" => Compression::GZIP(match level {
            Some(l) => GzipLevel::try_new(l as u32).map_err(bad_level)?,
            None => GzipLevel::default(),
        }),
        "brotli" => Compression::BROTLI(match level {
            Some(l) => BrotliLevel::try_new(l as u32).map_err(bad_level)?,
            None => BrotliLevel::default(),
        }),
        "lz4" => Compression::LZ4_RAW,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(format!(
                "unknown codec `{other}` (zstd, snappy, gzip, brotli, lz4, uncompressed)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use parquet::schema::types::ColumnPath;

    use super::*;
    use crate::write::props;

    #[test]
    fn defaults_to_zstd_and_iceberg_sizes() {
        let s = FileSettings::from_properties(&HashMap::new()).unwrap();
        assert!(matches!(
            s.parquet.compression(&ColumnPath::from("c")),
            Compression::ZSTD(_)
        ));
        assert_eq!(s.target_file_size, DEFAULT_TARGET_FILE_SIZE);
    }

    #[test]
    fn maps_codec_level_and_sizes() {
        let s = FileSettings::from_properties(&props(&[
            (COMPRESSION_CODEC, "gzip"),
            (COMPRESSION_LEVEL, "9"),
            (TARGET_FILE_SIZE, "1048576"),
        ]))
        .unwrap();
        assert_eq!(
            s.parquet.compression(&ColumnPath::from("c")),
            Compression::GZIP(GzipLevel::try_new(9).unwrap())
        );
        assert_eq!(s.target_file_size, 1 << 20);
    }

    #[test]
    fn names_the_bad_property() {
        let e = FileSettings::from_properties(&props(&[(COMPRESSION_CODEC, "lzo")])).unwrap_err();
        assert!(matches!(e, ConfigError::Property { key, .. } if key == COMPRESSION_CODEC));
        let e = FileSettings::from_properties(&props(&[(TARGET_FILE_SIZE, "big")])).unwrap_err();
        assert!(matches!(e, ConfigError::Property { key, .. } if key == TARGET_FILE_SIZE));
        let column = "write.metadata.metrics.column.info";
        let e = FileSettings::from_properties(&props(&[(column, "most")])).unwrap_err();
        assert!(matches!(e, ConfigError::Property { key, .. } if key == column));
    }
}

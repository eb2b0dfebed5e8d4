//! gzip and zstd payloads, recognised by their magic bytes (Firehose-style
//! compressed records, CloudWatch Logs subscription data, compressed SQS
//! bodies as base64 text), decompressed with a bound so one record cannot
//! exhaust a function's memory.

use std::borrow::Cow;
use std::io::Read;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The largest a decompressed record may be: a Lambda event is at most 6 MB,
/// and CloudWatch Logs data compresses about tenfold.
pub const MAX_RECORD_BYTES: u64 = 256 * 1024 * 1024;

const GZIP: [u8; 2] = [0x1f, 0x8b];
const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The base64 text of a gzip member (`1f 8b 08`) and of a zstd frame.
const GZIP_B64: &[u8] = b"H4sI";
const ZSTD_B64: &[u8] = b"KLUv";

/// A compression floe reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// gzip (RFC 1952), one or more members.
    Gzip,
    /// A zstd frame.
    Zstd,
}

impl Codec {
    /// The codec `bytes` start with, by magic bytes.
    pub fn sniff(bytes: &[u8]) -> Option<Codec> {
        if bytes.starts_with(&GZIP) {
            Some(Codec::Gzip)
        } else if bytes.starts_with(&ZSTD) {
            Some(Codec::Zstd)
        } else {
            None
        }
    }

    /// The name users know it by.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }
}

/// Why a payload that claims a codec (by its magic bytes) does not decompress.
#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    /// The bytes after the magic are not that codec's.
    #[error("the payload starts like {codec} but does not decompress: {source}")]
    Corrupt {
        /// The codec's name.
        codec: &'static str,
        /// What the decoder said.
        source: std::io::Error,
    },
    /// It decompresses past [`MAX_RECORD_BYTES`].
    #[error("the {codec} payload decompresses to more than {MAX_RECORD_BYTES} bytes")]
    TooLarge {
        /// The codec's name.
        codec: &'static str,
    },
}

/// `payload` decompressed when it is gzip or zstd, or base64 text of either
/// (an SQS body can only be text); else `payload` itself. `Err` says what is
/// wrong with a payload that claims a codec but does not decode.
pub fn decompress(payload: &[u8]) -> Result<Cow<'_, [u8]>, CompressError> {
    let decoded;
    let bytes = if payload.starts_with(GZIP_B64) || payload.starts_with(ZSTD_B64) {
        match BASE64.decode(payload.trim_ascii()) {
            Ok(b) if Codec::sniff(&b).is_some() => {
                decoded = b;
                &decoded[..]
            }
            // Text that merely starts like base64 of a codec: a record.
            _ => return Ok(Cow::Borrowed(payload)),
        }
    } else {
        payload
    };
    let Some(codec) = Codec::sniff(bytes) else {
        return Ok(Cow::Borrowed(payload));
    };
    decode(codec, bytes).map(Cow::Owned)
}

fn decode(codec: Codec, bytes: &[u8]) -> Result<Vec<u8>, CompressError> {
    let mut out = Vec::with_capacity(bytes.len() * 4);
    let read = match codec {
        Codec::Gzip => flate2::read::MultiGzDecoder::new(bytes)
            .take(MAX_RECORD_BYTES + 1)
            .read_to_end(&mut out),
        Codec::Zstd => zstd::stream::read::Decoder::new(bytes)
            .and_then(|d| d.take(MAX_RECORD_BYTES + 1).read_to_end(&mut out)),
    };
    read.map_err(|source| CompressError::Corrupt {
        codec: codec.name(),
        source,
    })?;
    if out.len() as u64 > MAX_RECORD_BYTES {
        return Err(CompressError::TooLarge {
            codec: codec.name(),
        });
    }
    Ok(out)
}

/// Incremental decompression of a stream of compressed chunks (an S3 object
/// read piece by piece): bytes in, decompressed bytes out, never the whole.
pub enum Inflater {
    /// Not compressed: bytes pass through.
    Plain,
    /// gzip, members after members.
    Gzip(Box<flate2::write::MultiGzDecoder<Vec<u8>>>),
    /// zstd.
    Zstd(Box<zstd::stream::write::Decoder<'static, Vec<u8>>>),
}

impl Inflater {
    /// The inflater for a stream whose first bytes are `head`.
    pub fn for_head(head: &[u8]) -> std::io::Result<Self> {
        Ok(match Codec::sniff(head) {
            Some(Codec::Gzip) => {
                Inflater::Gzip(Box::new(flate2::write::MultiGzDecoder::new(Vec::new())))
            }
            Some(Codec::Zstd) => {
                Inflater::Zstd(Box::new(zstd::stream::write::Decoder::new(Vec::new())?))
            }
            None => Inflater::Plain,
        })
    }

    /// Decompresses `chunk`, appending what comes out to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::io::Write as _;
        match self {
            Inflater::Plain => out.extend_from_slice(chunk),
            Inflater::Gzip(d) => {
                d.write_all(chunk)?;
                out.append(d.get_mut());
            }
            Inflater::Zstd(d) => {
                d.write_all(chunk)?;
                out.append(d.get_mut());
            }
        }
        Ok(())
    }

    /// Ends the stream: the rest of the output; an error if it was cut short.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> std::io::Result<()> {
        use std::io::Write as _;
        match self {
            Inflater::Plain => {}
            Inflater::Gzip(d) => {
                d.try_finish()?;
                out.append(d.get_mut());
            }
            Inflater::Zstd(d) => {
                d.flush()?;
                out.append(d.get_mut());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn magic_bytes_pick_the_codec_and_plain_records_pass() {
        let record = br#"{"id":1}"#;
        assert_eq!(&*decompress(record).unwrap(), record);
        assert_eq!(&*decompress(&gzip(record)).unwrap(), record);
        let z = zstd::bulk::compress(record, 3).unwrap();
        assert_eq!(&*decompress(&z).unwrap(), record);
        // An SQS body holds base64 text of the compressed bytes.
        let text = BASE64.encode(gzip(record));
        assert_eq!(&*decompress(text.as_bytes()).unwrap(), record);
        // Text that only looks like it stays as it is.
        assert_eq!(
            &*decompress(b"H4sI is my name").unwrap(),
            b"H4sI is my name"
        );
        let cut = &gzip(record)[..12];
        assert!(decompress(cut).unwrap_err().to_string().contains("gzip"));
    }

    #[test]
    fn inflaters_stream_piece_by_piece() {
        let text: Vec<u8> = (0..5000)
            .flat_map(|i| format!("{{\"n\":{i}}}\n").into_bytes())
            .collect();
        for packed in [
            gzip(&text),
            zstd::bulk::compress(&text, 3).unwrap(),
            text.clone(),
        ] {
            let mut inflater = Inflater::for_head(&packed).unwrap();
            let mut out = Vec::new();
            for piece in packed.chunks(777) {
                inflater.push(piece, &mut out).unwrap();
            }
            inflater.finish(&mut out).unwrap();
            assert_eq!(out, text);
        }
    }
}

//! Which source record each row of a data file holds, written into the
//! file's Parquet footer (key-value metadata `floe.rows`) so the committer
//! can drop exactly the rows of records a table already holds when a source
//! redelivers a batch with other boundaries. Readers ignore the key.
//!
//! The text is one line per run: `n<span> <first>[+<more>]` for consecutive
//! integer positions, `i<span> <first>[+<more>]` for consecutive indices into
//! a span's ids, `b<span> <position>` for one position past 64 bits (Kinesis),
//! compressed with zstd and base64-encoded.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;

/// The footer key.
pub const FOOTER_KEY: &str = "floe.rows";

/// One row's record: the span of its request and where in the span it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowId {
    /// Index of the span in the commit request.
    pub span: u16,
    /// Where in the span.
    pub at: At,
}

/// A record's place in its span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// A position that fits 64 bits (an offset, a line number).
    Num(u64),
    /// A longer position (a Kinesis sequence number), as decimal text.
    Big(Box<str>),
    /// The index of the record's id in an unordered span's ids.
    Index(u32),
}

impl At {
    /// A position given as decimal text.
    pub fn position(text: &str) -> Self {
        match text.parse::<u64>() {
            Ok(n) => At::Num(n),
            Err(_) => At::Big(text.into()),
        }
    }
}

/// Encodes the records of a file's rows, in row order. Rows of one record
/// (a Postgres snapshot chunk's, all read at one position) are a line
/// each, written once and copied: at a quarter of a million rows a chunk,
/// formatting each was a tenth of the copy's write.
pub fn encode<'a>(rows: impl IntoIterator<Item = &'a RowId>) -> String {
    let mut text = String::new();
    let mut run = Run::default();
    for row in rows {
        let (tag, n) = match &row.at {
            At::Num(n) => (b'n', *n),
            At::Index(i) => (b'i', u64::from(*i)),
            At::Big(b) => {
                run.flush(&mut text);
                let _ = writeln!(text, "b{} {b}", row.span);
                continue;
            }
        };
        run.add(&mut text, tag, row.span, n);
    }
    run.flush(&mut text);
    let packed = zstd::bulk::compress(text.as_bytes(), 3).unwrap_or_else(|_| text.into_bytes());
    B64.encode(packed)
}

/// The run being encoded: `more` positions after `first`, consecutive, or
/// one position `repeats` more times.
#[derive(Default)]
struct Run {
    open: Option<(u8, u16, u64)>,
    more: u64,
    repeats: u64,
}

impl Run {
    /// Adds one row's record, flushing the run it does not continue.
    fn add(&mut self, text: &mut String, tag: u8, span: u16, n: u64) {
        if let Some((t, s, first)) = self.open
            && t == tag
            && s == span
        {
            if self.repeats == 0 && first.checked_add(self.more + 1) == Some(n) {
                self.more += 1;
                return;
            }
            if self.more == 0 && first == n {
                self.repeats += 1;
                return;
            }
        }
        self.flush(text);
        self.open = Some((tag, span, n));
    }

    fn flush(&mut self, text: &mut String) {
        let Some((tag, span, first)) = self.open.take() else {
            return;
        };
        let start = text.len();
        let _ = write!(text, "{}{span} {first}", tag as char);
        if self.more > 0 {
            let _ = write!(text, "+{}", self.more);
        }
        text.push('\n');
        let end = text.len();
        for _ in 0..self.repeats {
            text.extend_from_within(start..end);
        }
        self.more = 0;
        self.repeats = 0;
    }
}

/// The records of a file's rows from [`encode`]'s text; `None` when it is not one.
pub fn decode(value: &str) -> Option<Vec<RowId>> {
    let packed = B64.decode(value).ok()?;
    let text = zstd::stream::decode_all(&packed[..]).ok()?;
    let text = std::str::from_utf8(&text).ok()?;
    let mut rows = Vec::new();
    for line in text.lines() {
        let (head, value) = line.split_once(' ')?;
        let tag = head.as_bytes().first().copied()?;
        let span: u16 = head.get(1..)?.parse().ok()?;
        if tag == b'b' {
            rows.push(RowId {
                span,
                at: At::Big(value.into()),
            });
            continue;
        }
        let (first, more) = match value.split_once('+') {
            Some((f, m)) => (f.parse::<u64>().ok()?, m.parse::<u64>().ok()?),
            None => (value.parse::<u64>().ok()?, 0),
        };
        for n in first..=first.checked_add(more)? {
            let at = match tag {
                b'n' => At::Num(n),
                b'i' => At::Index(u32::try_from(n).ok()?),
                _ => return None,
            };
            rows.push(RowId { span, at });
        }
    }
    Some(rows)
}

/// The records of a data file's rows, read from its Parquet footer; `None`
/// when the file has no (readable) `floe.rows` entry.
pub async fn read(
    file_io: &iceberg::io::FileIO,
    path: &str,
    size: u64,
) -> iceberg::Result<Option<Vec<RowId>>> {
    let meta = super::footer::read(file_io, path, size).await?;
    Ok(meta
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == FOOTER_KEY))
        .and_then(|k| k.value.as_deref())
        .and_then(decode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(span: u16, at: At) -> RowId {
        RowId { span, at }
    }

    #[test]
    fn runs_compress_and_round_trip() {
        let big = "49590338271490256608559692538361571095921575989136588898";
        let rows: Vec<RowId> = (10..110)
            .map(|n| id(0, At::Num(n)))
            .chain([
                id(0, At::Num(200)),
                id(1, At::Index(3)),
                id(1, At::Index(4)),
            ])
            .chain([id(2, At::position(big)), id(2, At::position("17"))])
            .collect();
        let encoded = encode(&rows);
        assert!(encoded.len() < 120, "{} bytes", encoded.len());
        assert_eq!(decode(&encoded), Some(rows));
        assert_eq!(decode("garbage"), None);
    }

    #[test]
    fn repeated_records_are_a_line_each_in_the_format_decoders_read() {
        // A snapshot chunk's rows all at one position, then a run after it.
        let rows: Vec<RowId> = std::iter::repeat_n(id(0, At::Num(500)), 1000)
            .chain((501..504).map(|n| id(0, At::Num(n))))
            .chain(std::iter::repeat_n(id(0, At::Num(503)), 2))
            .chain([id(1, At::Num(503))])
            .collect();
        let encoded = encode(&rows);
        assert_eq!(decode(&encoded), Some(rows));
        let packed = B64.decode(encoded).unwrap();
        let text = String::from_utf8(zstd::stream::decode_all(&packed[..]).unwrap()).unwrap();
        let expected = "n0 500\n".repeat(1000) + "n0 501+2\nn0 503\nn0 503\nn1 503\n";
        assert_eq!(text, expected);
    }
}

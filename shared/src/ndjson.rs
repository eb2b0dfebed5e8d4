//! NDJSON input cut into source batches on line boundaries, each batch knowing
//! the line numbers it covers (its source positions).

use std::io::Read;

use bytes::{Bytes, BytesMut};

/// A run of whole lines of one input.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The lines, newline-terminated except possibly the last line of the input.
    pub text: Bytes,
    /// 1-based number of the first line in `text`.
    pub first_line: u64,
    /// Number of lines in `text` (blank ones included).
    pub lines: u64,
}

impl Chunk {
    /// The non-blank lines with their 1-based line numbers.
    pub fn records(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let text = &self.text[..];
        let mut start = 0;
        let mut line = self.first_line;
        std::iter::from_fn(move || {
            while start < text.len() {
                let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |p| start + p);
                let record = &text[start..end];
                let number = line;
                line += 1;
                start = end + 1;
                if record.iter().any(|b| !b.is_ascii_whitespace()) {
                    return Some((number, record));
                }
            }
            None
        })
    }

    /// The number of the last line in the chunk.
    pub fn last_line(&self) -> u64 {
        self.first_line + self.lines.saturating_sub(1)
    }
}

/// Reads an input and yields chunks of at most `lines_per_chunk` lines
/// and, past its first line, at most `bytes_per_chunk` bytes.
pub struct Chunker<R> {
    reader: R,
    lines_per_chunk: u64,
    bytes_per_chunk: usize,
    buf: BytesMut,
    next_line: u64,
    eof: bool,
    /// Keep an unterminated last line back instead of yielding it: the
    /// input is a file still being written.
    hold_unfinished: bool,
}

impl<R: Read> Chunker<R> {
    /// Chunks `reader` into runs of `lines_per_chunk` lines.
    pub fn new(reader: R, lines_per_chunk: u64) -> Self {
        Self {
            reader,
            lines_per_chunk: lines_per_chunk.max(1),
            bytes_per_chunk: usize::MAX,
            buf: BytesMut::new(),
            next_line: 1,
            eof: false,
            hold_unfinished: false,
        }
    }

    /// Ends a chunk once it holds `bytes` (a line is never cut, so a chunk
    /// of one long line may be larger): a batch's memory follows its bytes,
    /// not its record count.
    pub fn with_max_bytes(mut self, bytes: u64) -> Self {
        self.bytes_per_chunk = usize::try_from(bytes).unwrap_or(usize::MAX).max(1);
        self
    }

    /// Keeps an unterminated last line back (see [`Self::unfinished`]): a
    /// file read while a line is being appended yields that line once it is
    /// whole, on a later read, instead of a broken record now.
    pub fn holding_unfinished(mut self) -> Self {
        self.hold_unfinished = true;
        self
    }

    /// Bytes of an unterminated last line held back, once the input ended.
    pub fn unfinished(&self) -> usize {
        if self.eof { self.buf.len() } else { 0 }
    }

    /// The next chunk, `None` at the end of the input.
    pub fn next_chunk(&mut self) -> std::io::Result<Option<Chunk>> {
        let mut scanned = 0;
        let mut lines = 0u64;
        loop {
            while let Some(pos) = memchr::memchr(b'\n', &self.buf[scanned..]) {
                scanned += pos + 1;
                lines += 1;
                if lines == self.lines_per_chunk || scanned >= self.bytes_per_chunk {
                    return Ok(Some(self.take(scanned, lines)));
                }
            }
            if self.eof {
                if scanned > 0 && self.hold_unfinished {
                    return Ok(Some(self.take(scanned, lines)));
                }
                if self.buf.is_empty() || self.hold_unfinished {
                    return Ok(None);
                }
                let len = self.buf.len();
                let trailing = u64::from(scanned < len);
                return Ok(Some(self.take(len, lines + trailing)));
            }
            let old = self.buf.len();
            self.buf.resize(old + (1 << 20).max(old), 0);
            let n = self.reader.read(&mut self.buf[old..])?;
            self.buf.truncate(old + n);
            self.eof = n == 0;
        }
    }

    fn take(&mut self, len: usize, lines: u64) -> Chunk {
        let text = self.buf.split_to(len).freeze();
        let chunk = Chunk {
            text,
            first_line: self.next_line,
            lines,
        };
        self.next_line += lines;
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(input: &str, n: u64) -> Vec<(u64, u64, String)> {
        let mut c = Chunker::new(input.as_bytes(), n);
        let mut out = Vec::new();
        while let Some(ch) = c.next_chunk().unwrap() {
            out.push((
                ch.first_line,
                ch.lines,
                String::from_utf8(ch.text.to_vec()).unwrap(),
            ));
        }
        out
    }

    #[test]
    fn cuts_on_line_boundaries_with_line_numbers() {
        assert_eq!(
            chunks("a\nb\nc\n", 2),
            vec![(1, 2, "a\nb\n".into()), (3, 1, "c\n".into())]
        );
        assert_eq!(chunks("a\nb", 5), vec![(1, 2, "a\nb".into())]);
        assert!(chunks("", 5).is_empty());
    }

    #[test]
    fn a_chunk_ends_at_its_bytes_never_inside_a_line() {
        let mut c = Chunker::new("aaaa\nbb\nc\nddddddd\ne\n".as_bytes(), 100).with_max_bytes(6);
        let mut got = Vec::new();
        while let Some(ch) = c.next_chunk().unwrap() {
            got.push((
                ch.first_line,
                ch.lines,
                String::from_utf8(ch.text.to_vec()).unwrap(),
            ));
        }
        assert_eq!(
            got,
            vec![
                (1, 2, "aaaa\nbb\n".into()),
                (3, 2, "c\nddddddd\n".into()),
                (5, 1, "e\n".into())
            ]
        );
    }

    #[test]
    fn an_unfinished_last_line_is_held_back() {
        let mut c = Chunker::new("a\nb\n{\"c\":".as_bytes(), 10).holding_unfinished();
        let ch = c.next_chunk().unwrap().unwrap();
        assert_eq!(
            (ch.first_line, ch.lines, &ch.text[..]),
            (1, 2, &b"a\nb\n"[..])
        );
        assert!(c.next_chunk().unwrap().is_none());
        assert_eq!(c.unfinished(), 5);
    }

    #[test]
    fn records_skip_blank_lines_but_keep_numbering() {
        let mut c = Chunker::new("{}\n\n  \n{\"a\":1}\n".as_bytes(), 10);
        let ch = c.next_chunk().unwrap().unwrap();
        let recs: Vec<_> = ch.records().map(|(n, r)| (n, r.to_vec())).collect();
        assert_eq!(recs, vec![(1, b"{}".to_vec()), (4, b"{\"a\":1}".to_vec())]);
        assert_eq!(ch.last_line(), 4);
    }
}

//! Objects an S3 notification names, and their records: the lines of NDJSON
//! or the elements of a JSON array, split as the (decompressed) bytes
//! arrive, so an object is never held whole.

use bytes::Bytes;

use crate::ndjson::Chunk;

/// One object version a notification names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// The bucket.
    pub bucket: String,
    /// The key, URL-decoded.
    pub key: String,
    /// The ETag the notification gives (without quotes), when it gives one.
    pub etag: Option<String>,
    /// The version id, in a versioned bucket.
    pub version: Option<String>,
    /// The size the notification gives, bytes.
    pub size: Option<u64>,
}

impl ObjectRef {
    /// The source its records belong to: `s3://bucket/key@version` (or
    /// `@etag`), so the same content always names the same records and an
    /// object overwritten with new content is a new source.
    pub fn source(&self) -> String {
        let tag = self
            .version
            .as_deref()
            .or(self.etag.as_deref())
            .unwrap_or("");
        format!("s3://{}/{}@{tag}", self.bucket, self.key)
    }
}

/// Decodes `%XX` and `+` in an S3 notification's object key.
pub fn url_decode(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where an object's JSON array breaks; the records before it stand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// The object ends inside the array.
    #[error("the JSON array ends before its closing `]` (after element {after})")]
    Unclosed {
        /// The last whole element.
        after: u64,
    },
    /// Something other than whitespace follows the array.
    #[error("text after the JSON array's closing `]` (after element {after})")]
    TrailingText {
        /// The last element.
        after: u64,
    },
    /// Two commas with nothing between them.
    #[error("an empty element in the JSON array (element {at})")]
    EmptyElement {
        /// The element's index.
        at: u64,
    },
    /// A `}` that closes nothing.
    #[error("unbalanced `}}` in the JSON array (element {at})")]
    Unbalanced {
        /// The element's index.
        at: u64,
    },
}

/// How an object's records are laid out, from its first byte that is not
/// whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Not known yet: only whitespace so far.
    Unknown,
    /// One record a line; a record's position is its line number.
    Lines,
    /// One JSON array; a record's position is its element's 1-based index.
    Array,
}

/// Splits an object's decompressed bytes into records, chunk by chunk.
/// Every record comes out as one line of a [`Chunk`] whose line numbers are
/// the records' positions (line numbers for NDJSON, element indices for a
/// JSON array, whose elements are made one line each).
pub struct Splitter {
    layout: Layout,
    /// Bytes not yet part of a complete record.
    pending: Vec<u8>,
    /// NDJSON: the next line's number. Array: the next element's index.
    next: u64,
    /// Array scanning state, carried across chunks.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Array: the closing `]` was seen.
    closed: bool,
}

impl Default for Splitter {
    fn default() -> Self {
        Self::new()
    }
}

impl Splitter {
    /// A splitter at the start of an object.
    pub fn new() -> Self {
        Self {
            layout: Layout::Unknown,
            pending: Vec::new(),
            next: 1,
            depth: 0,
            in_string: false,
            escaped: false,
            closed: false,
        }
    }

    /// The position the next record will have.
    pub fn next_position(&self) -> u64 {
        self.next
    }

    /// Bytes held for the record in progress.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Feeds decompressed bytes; returns the complete records so far as a
    /// chunk (`None` when none completed). `Err` when a JSON array's syntax
    /// is broken, with where.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Option<Chunk>, SplitError> {
        if self.layout == Layout::Unknown {
            match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'[') => self.layout = Layout::Array,
                Some(_) => self.layout = Layout::Lines,
                None => {
                    // Leading blank lines still count as lines.
                    self.pending.extend_from_slice(bytes);
                    return Ok(None);
                }
            }
            if self.layout == Layout::Array {
                // Leading whitespace and the `[` are not part of any element.
                let at = bytes.iter().position(|b| *b == b'[').unwrap_or(0);
                self.pending.clear();
                self.depth = 1;
                return self.push_array(&bytes[at + 1..]);
            }
        }
        match self.layout {
            Layout::Array => self.push_array(bytes),
            _ => Ok(self.push_lines(bytes)),
        }
    }

    /// The object ended: the last records (a final line without a newline).
    pub fn finish(&mut self) -> Result<Option<Chunk>, SplitError> {
        match self.layout {
            Layout::Array if !self.closed => Err(SplitError::Unclosed {
                after: self.next - 1,
            }),
            Layout::Array => Ok(None),
            _ if self.pending.iter().all(u8::is_ascii_whitespace) => Ok(None),
            _ => {
                let text = std::mem::take(&mut self.pending);
                let chunk = Chunk {
                    text: Bytes::from(text),
                    first_line: self.next,
                    lines: 1,
                };
                self.next += 1;
                Ok(Some(chunk))
            }
        }
    }

    fn push_lines(&mut self, bytes: &[u8]) -> Option<Chunk> {
        let Some(last_newline) = memchr::memrchr(b'\n', bytes) else {
            self.pending.extend_from_slice(bytes);
            return None;
        };
        let mut text = std::mem::take(&mut self.pending);
        text.extend_from_slice(&bytes[..=last_newline]);
        self.pending.extend_from_slice(&bytes[last_newline + 1..]);
        let lines = memchr::memchr_iter(b'\n', &text).count() as u64;
        let chunk = Chunk {
            text: Bytes::from(text),
            first_line: self.next,
            lines,
        };
        self.next += lines;
        Some(chunk)
    }

    fn push_array(&mut self, bytes: &[u8]) -> Result<Option<Chunk>, SplitError> {
        let mut out = Vec::new();
        let mut count = 0u64;
        for &b in bytes {
            if self.closed {
                if !b.is_ascii_whitespace() {
                    return Err(SplitError::TrailingText {
                        after: self.next + count - 1,
                    });
                }
                continue;
            }
            if self.in_string {
                self.pending.push(b);
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.pending.push(b);
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.pending.push(b);
                }
                b'}' | b']' if self.depth > 1 => {
                    self.depth -= 1;
                    self.pending.push(b);
                }
                b']' => {
                    self.closed = true;
                    count += self.take_element(&mut out);
                }
                b',' if self.depth == 1 => {
                    if self.pending.iter().all(u8::is_ascii_whitespace) {
                        return Err(SplitError::EmptyElement {
                            at: self.next + count,
                        });
                    }
                    count += self.take_element(&mut out);
                }
                // Whitespace between tokens: a newline inside an element
                // would split its line, so it becomes a space.
                b'\n' | b'\r' => self.pending.push(b' '),
                b'}' => {
                    return Err(SplitError::Unbalanced {
                        at: self.next + count,
                    });
                }
                b => self.pending.push(b),
            }
        }
        if count == 0 {
            return Ok(None);
        }
        let chunk = Chunk {
            text: Bytes::from(out),
            first_line: self.next,
            lines: count,
        };
        self.next += count;
        Ok(Some(chunk))
    }

    /// Moves the element in progress to `out` as one line; 1 if there was one.
    fn take_element(&mut self, out: &mut Vec<u8>) -> u64 {
        let element = self.pending.trim_ascii();
        if element.is_empty() {
            self.pending.clear();
            return 0;
        }
        out.extend_from_slice(element);
        out.push(b'\n');
        self.pending.clear();
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &[u8], piece: usize) -> Vec<(u64, String)> {
        let mut s = Splitter::new();
        let mut out = Vec::new();
        let mut take = |c: Option<Chunk>| {
            if let Some(c) = c {
                out.extend(
                    c.records()
                        .map(|(n, r)| (n, String::from_utf8_lossy(r).into_owned())),
                );
            }
        };
        for p in text.chunks(piece) {
            take(s.push(p).unwrap());
        }
        take(s.finish().unwrap());
        out
    }

    #[test]
    fn ndjson_lines_keep_their_numbers_across_pieces() {
        let text = b"{\"a\":1}\n\n{\"a\":2}\n{\"a\":3}";
        for piece in [1, 3, 7, 100] {
            assert_eq!(
                split(text, piece),
                vec![
                    (1, "{\"a\":1}".to_string()),
                    (3, "{\"a\":2}".to_string()),
                    (4, "{\"a\":3}".to_string())
                ],
                "{piece}"
            );
        }
    }

    #[test]
    fn array_elements_become_lines_numbered_by_index() {
        let text = b"  [\n {\"a\": \"x,]}\\\"\",\n  \"b\": [1, 2]},\n {\"a\": 2} ]\n";
        for piece in [1, 2, 5, 100] {
            assert_eq!(
                split(text, piece),
                vec![
                    (1, "{\"a\": \"x,]}\\\"\",   \"b\": [1, 2]}".to_string()),
                    (2, "{\"a\": 2}".to_string())
                ],
                "{piece}"
            );
        }
        let mut s = Splitter::new();
        s.push(b"[{\"a\":1},").unwrap();
        assert_eq!(s.finish().unwrap_err(), SplitError::Unclosed { after: 1 });
    }

    #[test]
    fn object_sources_name_the_content() {
        let o = ObjectRef {
            bucket: "b".into(),
            key: url_decode("drops/day%3D1/a+b.json.gz"),
            etag: Some("abc".into()),
            version: None,
            size: None,
        };
        assert_eq!(o.key, "drops/day=1/a b.json.gz");
        assert_eq!(o.source(), "s3://b/drops/day=1/a b.json.gz@abc");
    }
}

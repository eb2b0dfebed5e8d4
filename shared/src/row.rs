//! A row as the change decoder leaves it: one JSON object's text with the
//! span of each top-level member, so folding, the changelog and DynamoDB
//! items read a column or copy members without parsing the row again, and
//! a row that needs no merge reaches the shredder as the decoder wrote it.
//! [`RowWriter`] is the one place floe writes a JSON object.

/// Spans are `u32`: a record is far below 4 GiB (Kinesis and SQS cap it at
/// 1 MiB, Kafka's default at 1 MiB, HTTP bodies at the configured limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn of(text: &[u8], span: Span) -> &[u8] {
        text.get(span.start as usize..span.end as usize)
            .unwrap_or_default()
    }
}

/// One top-level member: its key as written (escaped, without quotes) and
/// its value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    key: Span,
    value: Span,
}

/// A JSON object's text with the span of each member, in text order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    text: Vec<u8>,
    members: Vec<Member>,
}

impl Default for Row {
    /// `{}`: the row of a TRUNCATE.
    fn default() -> Self {
        RowWriter::with_capacity(0).finish()
    }
}

impl Row {
    /// The row of a JSON object held as a map (a tombstone's key).
    pub fn from_map(map: &serde_json::Map<String, serde_json::Value>) -> Row {
        let mut row = RowWriter::with_capacity(map.len() * 16);
        for (key, value) in map {
            row.raw(key, value.to_string().as_bytes());
        }
        row.finish()
    }

    /// The object's text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.text
    }

    /// The object's text, without a copy.
    pub fn into_bytes(self) -> Vec<u8> {
        self.text
    }

    /// How many members the object has.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object is `{}`.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The text of member `name`'s value, `None` when the row has no such
    /// member.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let i = self.position(name)?;
        Some(Span::of(&self.text, self.members[i].value))
    }

    /// [`Row::get`], or with `ignore_case` the member whose name equals
    /// `name` ignoring ASCII case when none is spelt exactly so, as the
    /// shredder matches columns under `case_insensitive`.
    pub fn get_matching(&self, name: &str, ignore_case: bool) -> Option<&[u8]> {
        if let Some(exact) = self.get(name) {
            return Some(exact);
        }
        if !ignore_case {
            return None;
        }
        self.members
            .iter()
            .find(|m| Span::of(&self.text, m.key).eq_ignore_ascii_case(name.as_bytes()))
            .map(|m| Span::of(&self.text, m.value))
    }

    /// The index of member `name`.
    fn position(&self, name: &str) -> Option<usize> {
        // Keys are stored escaped; a name with nothing to escape compares as
        // it is (the common case, and no allocation).
        let escaped;
        let wanted: &[u8] = if needs_escape(name) {
            let mut buf = Vec::with_capacity(name.len() + 8);
            write_json_string(&mut buf, name);
            escaped = buf;
            &escaped[1..escaped.len() - 1]
        } else {
            name.as_bytes()
        };
        self.members
            .iter()
            .position(|m| Span::of(&self.text, m.key) == wanted)
    }
}

/// Builds a [`Row`] member by member; values are written verbatim.
pub struct RowWriter {
    buf: Vec<u8>,
    members: Vec<Member>,
    /// The member being written: its key and where its value starts.
    open: Option<(Span, u32)>,
}

impl RowWriter {
    /// A writer with room for `capacity` bytes of members.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity + 2);
        buf.push(b'{');
        RowWriter {
            buf,
            members: Vec::new(),
            open: None,
        }
    }

    /// Writes `"key":` and returns the buffer for the caller to append the
    /// value.
    pub fn field(&mut self, key: &str) -> &mut Vec<u8> {
        self.next_member();
        let start = self.buf.len() as u32 + 1;
        write_json_string(&mut self.buf, key);
        self.begin_value(start)
    }

    /// Writes the member `key` with the value text `value`.
    pub fn raw(&mut self, key: &str, value: &[u8]) {
        self.field(key).extend_from_slice(value);
    }

    /// Writes a JSON string member.
    pub fn string(&mut self, key: &str, value: &str) {
        let buf = self.field(key);
        write_json_string(buf, value);
    }

    /// Copies every member of `row` whose name `keep` accepts, key and value
    /// as they are written there.
    pub fn copy(&mut self, row: &Row, mut keep: impl FnMut(&[u8]) -> bool) {
        for m in &row.members {
            let key = Span::of(&row.text, m.key);
            if !keep(key) {
                continue;
            }
            self.next_member();
            self.buf.push(b'"');
            let start = self.buf.len() as u32;
            self.buf.extend_from_slice(key);
            self.buf.push(b'"');
            self.begin_value(start)
                .extend_from_slice(Span::of(&row.text, m.value));
        }
    }

    /// Ends the member before, if any, and separates the next from it.
    fn next_member(&mut self) {
        self.close();
        if !self.members.is_empty() {
            self.buf.push(b',');
        }
    }

    /// The key was written from `start` up to its closing quote.
    fn begin_value(&mut self, start: u32) -> &mut Vec<u8> {
        let key = Span {
            start,
            end: self.buf.len() as u32 - 1,
        };
        self.buf.push(b':');
        self.open = Some((key, self.buf.len() as u32));
        self.members.push(Member {
            key,
            value: Span { start: 0, end: 0 },
        });
        &mut self.buf
    }

    /// Ends the open member's value where the buffer ends.
    fn close(&mut self) {
        if let Some((key, start)) = self.open.take()
            && let Some(last) = self.members.last_mut()
        {
            *last = Member {
                key,
                value: Span {
                    start,
                    end: self.buf.len() as u32,
                },
            };
        }
    }

    /// The row written.
    pub fn finish(mut self) -> Row {
        self.close();
        self.buf.push(b'}');
        Row {
            text: self.buf,
            members: self.members,
        }
    }
}

fn needs_escape(s: &str) -> bool {
    s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)
}

/// Writes `s` as a JSON string, quotes included.
pub fn write_json_string(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        buf.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[usize::from(b >> 4)]);
            buf.push(HEX[usize::from(b & 0xf)]);
        } else {
            buf.extend_from_slice(escape);
        }
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(row: &Row) -> &str {
        std::str::from_utf8(row.as_bytes()).unwrap()
    }

    #[test]
    fn members_are_found_by_name_and_copied_verbatim() {
        let mut w = RowWriter::with_capacity(0);
        w.raw("id", b"1");
        w.string("quote\"d", "a\nb");
        w.field("n").extend_from_slice(b"12345678901234567890.5");
        let row = w.finish();
        assert_eq!(
            text(&row),
            r#"{"id":1,"quote\"d":"a\nb","n":12345678901234567890.5}"#
        );
        assert_eq!(row.len(), 3);
        assert_eq!(row.get("id"), Some(&b"1"[..]));
        assert_eq!(row.get("quote\"d"), Some(&br#""a\nb""#[..]));
        assert_eq!(row.get("n"), Some(&b"12345678901234567890.5"[..]));
        assert_eq!(row.get("missing"), None);
        let parsed: serde_json::Value = serde_json::from_slice(row.as_bytes()).unwrap();
        assert_eq!(parsed["quote\"d"], "a\nb");

        let mut w = RowWriter::with_capacity(0);
        w.string("_op", "update");
        w.copy(&row, |k| k != b"id");
        let copied = w.finish();
        assert_eq!(
            text(&copied),
            r#"{"_op":"update","quote\"d":"a\nb","n":12345678901234567890.5}"#
        );
        assert_eq!(copied.get("quote\"d"), row.get("quote\"d"));
        assert_eq!(copied.get("id"), None);
    }

    #[test]
    fn members_match_ignoring_case_only_when_asked_and_exact_spelling_wins() {
        let mut w = RowWriter::with_capacity(0);
        w.raw("ID", b"5");
        w.raw("Id", b"6");
        let row = w.finish();
        assert_eq!(row.get_matching("id", false), None);
        assert_eq!(row.get_matching("id", true), Some(&b"5"[..]));
        assert_eq!(row.get_matching("Id", true), Some(&b"6"[..]));
    }

    #[test]
    fn json_string_escaping_round_trips() {
        let nasty = "a\"b\\c\n\r\t\u{8}\u{c}\u{0}\u{1f}é🙂/";
        let mut buf = Vec::new();
        write_json_string(&mut buf, nasty);
        let back: String = serde_json::from_slice(&buf).expect("valid JSON string");
        assert_eq!(back, nasty);
        let mut w = RowWriter::with_capacity(0);
        w.raw(nasty, b"1");
        assert_eq!(w.finish().get(nasty), Some(&b"1"[..]));
    }

    #[test]
    fn empty_rows() {
        let row = Row::default();
        assert_eq!(text(&row), "{}");
        assert!(row.is_empty());
        let mut w = RowWriter::with_capacity(0);
        w.copy(&row, |_| true);
        assert_eq!(text(&w.finish()), "{}");
        let map = serde_json::json!({"a": {"b": [1, null]}, "c": "x"});
        let row = Row::from_map(map.as_object().unwrap());
        assert_eq!(text(&row), r#"{"a":{"b":[1,null]},"c":"x"}"#);
        assert_eq!(row.get("a"), Some(&br#"{"b":[1,null]}"#[..]));
    }
}

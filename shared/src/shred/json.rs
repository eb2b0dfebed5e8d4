//! A byte cursor over one JSON record: whitespace, strings, numbers, literals, skipping.

use super::error::{Fail, PResult};

/// Deepest nesting accepted in values the schema does not describe, so hostile input cannot
/// exhaust the stack while it is skipped.
const MAX_SKIP_DEPTH: usize = 256;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `w` that is `"`, `\` or a control byte. Borrows can only mark
/// bytes after a true hit, so the lowest marked byte is always exact.
#[inline(always)]
fn special_mask(w: u64) -> u64 {
    let q = w ^ (ONES * b'"' as u64);
    let bs = w ^ (ONES * b'\\' as u64);
    let hq = q.wrapping_sub(ONES) & !q;
    let hb = bs.wrapping_sub(ONES) & !bs;
    let hc = w.wrapping_sub(ONES * 0x20) & !w;
    (hq | hb | hc) & HIGHS
}

/// Index of the first `"`, `\` or control byte at or after `i` (or `buf.len()`), and whether
/// a non-ASCII byte may lie before it (may over-report; only decides whether to validate UTF-8).
#[inline(always)]
fn find_special(buf: &[u8], mut i: usize) -> (usize, bool) {
    let mut high = 0u64;
    while let Some(chunk) = buf.get(i..i + 8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(bytes);
        high |= w;
        let m = special_mask(w);
        if m != 0 {
            return (i + (m.trailing_zeros() / 8) as usize, high & HIGHS != 0);
        }
        i += 8;
    }
    let mut non_ascii = high & HIGHS != 0;
    while let Some(&b) = buf.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        non_ascii |= b >= 0x80;
        i += 1;
    }
    (i, non_ascii)
}

#[inline]
fn hex(b: u8) -> Option<u32> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as u32),
        b'a'..=b'f' => Some((b - b'a' + 10) as u32),
        b'A'..=b'F' => Some((b - b'A' + 10) as u32),
        _ => None,
    }
}

/// Up to eight leading digits at `buf[i..]` as (count, value), converted in one word (SWAR);
/// `None` when fewer than eight bytes remain.
#[inline(always)]
fn eight_digits(buf: &[u8], i: usize) -> Option<(usize, u64)> {
    let chunk = buf.get(i..i + 8)?;
    let w = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).ok()?);
    const HI: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    // A byte is a digit iff its high nibble is 3 both before and after adding 6. Carries only
    // leave bytes at or above 0xFA (not digits), so bytes before the first non-digit are exact.
    let not_digit = ((w & HI) ^ (ONES * 0x30)) | ((w.wrapping_add(ONES * 6) & HI) ^ (ONES * 0x30));
    let n = if not_digit == 0 {
        8
    } else {
        (not_digit.trailing_zeros() / 8) as usize
    };
    if n == 0 {
        return None;
    }
    // Move the n digits to the top so the bytes below read as leading zeros.
    let mut v = (w.wrapping_sub(ONES * 0x30)) << (8 * (8 - n));
    v = ((v & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(10 << 8 | 1)) >> 8;
    v = ((v & 0x00FF_00FF_00FF_00FF).wrapping_mul(100 << 16 | 1)) >> 16;
    v = ((v & 0x0000_FFFF_0000_FFFF).wrapping_mul(10_000 << 32 | 1)) >> 32;
    Some((n, v))
}

/// A scanned JSON number: its text and whether it has no fraction or exponent.
#[derive(Debug, Clone, Copy)]
pub(super) struct NumTok<'a> {
    pub text: &'a [u8],
    pub integer: bool,
}

/// A JSON integer read straight into an `i64`.
#[derive(Debug, Clone, Copy)]
pub(super) enum IntTok {
    Int(i64),
    /// An integer literal outside the `i64` range.
    Overflow,
    /// A number with a fraction or exponent.
    NotInteger,
}

/// Position in one record.
pub(super) struct Cursor<'a> {
    buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn input(&self) -> &'a [u8] {
        self.buf
    }

    #[inline(always)]
    pub fn skip_ws(&mut self) {
        while let Some(&b) = self.buf.get(self.pos)
            && matches!(b, b' ' | b'\n' | b'\r' | b'\t')
        {
            self.pos += 1;
        }
    }

    /// The next non-whitespace byte, not consumed.
    #[inline(always)]
    pub fn peek(&mut self) -> PResult<u8> {
        // Compact JSON has no whitespace between tokens: answer that case without looping.
        if let Some(&b) = self.buf.get(self.pos)
            && b > b' '
        {
            return Ok(b);
        }
        self.peek_ws()
    }

    #[inline(never)]
    fn peek_ws(&mut self) -> PResult<u8> {
        self.skip_ws();
        match self.buf.get(self.pos) {
            Some(&b) => Ok(b),
            None => Err(self.eof()),
        }
    }

    pub fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.buf.len()
    }

    #[cold]
    pub fn eof(&self) -> Box<Fail> {
        Fail::syntax(self.pos, "unexpected end of input (unterminated record)")
    }

    #[cold]
    pub fn error(&self, what: &str) -> Box<Fail> {
        if self.pos >= self.buf.len() {
            return self.eof();
        }
        Fail::syntax(self.pos, what)
    }

    /// Consumes `b` after optional whitespace.
    #[inline(always)]
    pub fn expect(&mut self, b: u8, what: &str) -> PResult<()> {
        if self.peek()? == b {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// After a member or element: `true` on `,` (more follow), `false` on `close`.
    #[inline(always)]
    pub fn next_or_close(&mut self, close: u8) -> PResult<bool> {
        let b = self.peek()?;
        self.pos += 1;
        if b == b',' {
            Ok(true)
        } else if b == close {
            Ok(false)
        } else {
            self.pos -= 1;
            Err(self.error(if close == b'}' {
                "expected ',' or '}' after an object member"
            } else {
                "expected ',' or ']' after an array element"
            }))
        }
    }

    /// Consumes `{` or `[`; `true` if the container is empty (its closer consumed too).
    #[inline(always)]
    pub fn open(&mut self, close: u8) -> PResult<bool> {
        self.pos += 1;
        if self.peek()? == close {
            self.pos += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Consumes the literal `word` (`true`, `false`, `null`) at the cursor.
    #[inline]
    pub fn literal(&mut self, word: &[u8]) -> PResult<()> {
        if self.buf.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error("invalid literal (expected true, false or null)"))
        }
    }

    /// A string's content at the cursor, borrowed from the input when it has no escapes and
    /// decoded into `scratch` otherwise.
    #[inline]
    pub fn read_str<'s>(&mut self, scratch: &'s mut Vec<u8>) -> PResult<&'s [u8]>
    where
        'a: 's,
    {
        let start = self.pos + 1;
        let (end, non_ascii) = find_special(self.buf, start);
        match self.buf.get(end) {
            Some(b'"') => {
                let s = &self.buf[start..end];
                if non_ascii {
                    self.check_utf8(s, start)?;
                }
                self.pos = end + 1;
                Ok(s)
            }
            Some(b'\\') => {
                scratch.clear();
                self.decode_from(start, end, non_ascii, scratch)?;
                Ok(scratch)
            }
            _ => Err(self.bad_string_byte(end)),
        }
    }

    /// Appends a string's decoded content at the cursor to `out`.
    #[inline]
    pub fn read_str_into(&mut self, out: &mut Vec<u8>) -> PResult<()> {
        let start = self.pos + 1;
        let (end, non_ascii) = find_special(self.buf, start);
        match self.buf.get(end) {
            Some(b'"') => {
                let s = &self.buf[start..end];
                if non_ascii {
                    self.check_utf8(s, start)?;
                }
                out.extend_from_slice(s);
                self.pos = end + 1;
                Ok(())
            }
            Some(b'\\') => self.decode_from(start, end, non_ascii, out),
            _ => Err(self.bad_string_byte(end)),
        }
    }

    /// Skips a string at the cursor, still checking its escapes and UTF-8, without copying it.
    fn skip_str(&mut self) -> PResult<()> {
        let mut start = self.pos + 1;
        loop {
            let (end, non_ascii) = find_special(self.buf, start);
            if non_ascii {
                self.check_utf8(&self.buf[start..end], start)?;
            }
            match self.buf.get(end) {
                Some(b'"') => {
                    self.pos = end + 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos = end;
                    start = match self.buf.get(end + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => end + 2,
                        Some(b'u') => end + self.unicode_escape(end)?.1,
                        _ => return Err(self.error("invalid escape in a string")),
                    };
                }
                _ => return Err(self.bad_string_byte(end)),
            }
        }
    }

    #[cold]
    fn bad_string_byte(&mut self, at: usize) -> Box<Fail> {
        self.pos = at;
        if at >= self.buf.len() {
            self.eof()
        } else {
            Fail::syntax(at, "control character inside a string (must be escaped)")
        }
    }

    #[cold]
    fn check_utf8(&self, s: &[u8], start: usize) -> PResult<()> {
        match std::str::from_utf8(s) {
            Ok(_) => Ok(()),
            Err(e) => Err(Fail::syntax(
                start + e.valid_up_to(),
                "invalid UTF-8 inside a string",
            )),
        }
    }

    /// Slow path of a string with escapes: `seg_end` is the first backslash after `start`.
    #[inline(never)]
    fn decode_from(
        &mut self,
        mut start: usize,
        mut seg_end: usize,
        mut non_ascii: bool,
        out: &mut Vec<u8>,
    ) -> PResult<()> {
        loop {
            let seg = &self.buf[start..seg_end];
            if non_ascii {
                self.check_utf8(seg, start)?;
            }
            out.extend_from_slice(seg);
            match self.buf.get(seg_end) {
                Some(b'"') => {
                    self.pos = seg_end + 1;
                    return Ok(());
                }
                Some(b'\\') => {}
                _ => return Err(self.bad_string_byte(seg_end)),
            }
            self.pos = seg_end;
            let esc = self.buf.get(seg_end + 1).copied();
            let simple = match esc {
                Some(b'"') => Some(b'"'),
                Some(b'\\') => Some(b'\\'),
                Some(b'/') => Some(b'/'),
                Some(b'b') => Some(0x08),
                Some(b'f') => Some(0x0c),
                Some(b'n') => Some(b'\n'),
                Some(b'r') => Some(b'\r'),
                Some(b't') => Some(b'\t'),
                Some(b'u') => None,
                _ => return Err(self.error("invalid escape in a string")),
            };
            if let Some(b) = simple {
                out.push(b);
                start = seg_end + 2;
            } else {
                let (c, used) = self.unicode_escape(seg_end)?;
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                start = seg_end + used;
            }
            (seg_end, non_ascii) = find_special(self.buf, start);
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let b = self.buf.get(at..at + 4)?;
        let mut v = 0;
        for &d in b {
            v = v << 4 | hex(d)?;
        }
        Some(v)
    }

    /// Decodes `\uXXXX` (and a following low surrogate) at `at`; returns the char and bytes used.
    fn unicode_escape(&mut self, at: usize) -> PResult<(char, usize)> {
        let Some(hi) = self.hex4(at + 2) else {
            return Err(self.error("invalid \\u escape (expected 4 hex digits)"));
        };
        let (code, used) = if (0xD800..0xDC00).contains(&hi) {
            let lo = match self.buf.get(at + 6..at + 8) {
                Some(b"\\u") => self.hex4(at + 8),
                _ => None,
            };
            match lo {
                Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                    (0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), 12)
                }
                _ => return Err(self.error("unpaired UTF-16 surrogate in a \\u escape")),
            }
        } else {
            (hi, 6)
        };
        match char::from_u32(code) {
            Some(c) => Ok((c, used)),
            None => Err(self.error("unpaired UTF-16 surrogate in a \\u escape")),
        }
    }

    /// Scans a number at the cursor, enforcing JSON's grammar (no `+`, no leading zeros).
    pub fn number(&mut self) -> PResult<NumTok<'a>> {
        let start = self.pos;
        let buf = self.buf;
        let mut i = start;
        if buf.get(i) == Some(&b'-') {
            i += 1;
        }
        let digits = |mut i: usize| {
            while buf.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        match buf.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i),
            _ => {
                self.pos = i;
                return Err(self.error("invalid number"));
            }
        }
        let mut integer = true;
        if buf.get(i) == Some(&b'.') {
            integer = false;
            let j = digits(i + 1);
            if j == i + 1 {
                self.pos = j;
                return Err(self.error("invalid number (digits must follow '.')"));
            }
            i = j;
        }
        if matches!(buf.get(i), Some(b'e' | b'E')) {
            integer = false;
            i += 1;
            if matches!(buf.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let j = digits(i);
            if j == i {
                self.pos = j;
                return Err(self.error("invalid number (digits must follow the exponent)"));
            }
            i = j;
        }
        self.pos = i;
        Ok(NumTok {
            text: &buf[start..i],
            integer,
        })
    }

    /// Reads an integer straight to `i64`; falls back to [`Cursor::number`] for anything else
    /// so the grammar is still checked.
    #[inline]
    pub fn int(&mut self) -> PResult<IntTok> {
        let start = self.pos;
        let buf = self.buf;
        let mut i = start;
        let neg = buf.get(i) == Some(&b'-');
        i += neg as usize;
        let mut mag: u64 = 0;
        let mut overflow = false;
        match buf.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                let first = i;
                if let Some((n, v)) = eight_digits(buf, i) {
                    mag = v;
                    i += n;
                    if n < 8 {
                        // The word ended the digits; skip the byte loop.
                        return self.int_end(start, i, neg, mag, false);
                    }
                }
                while let Some(&d) = buf.get(i)
                    && d.is_ascii_digit()
                {
                    mag = mag.wrapping_mul(10).wrapping_add((d - b'0') as u64);
                    i += 1;
                }
                // Any 19 digits fit in a u64; more cannot be an i64.
                overflow = i - first > 19;
            }
            _ => return self.number().map(|_| IntTok::NotInteger),
        }
        self.int_end(start, i, neg, mag, overflow)
    }

    /// Finishes [`Cursor::int`] once the digits end at `i`.
    #[inline(always)]
    fn int_end(
        &mut self,
        start: usize,
        i: usize,
        neg: bool,
        mag: u64,
        overflow: bool,
    ) -> PResult<IntTok> {
        if matches!(self.buf.get(i), Some(b'.' | b'e' | b'E')) {
            self.pos = start;
            return self.number().map(|_| IntTok::NotInteger);
        }
        self.pos = i;
        if overflow {
            return Ok(IntTok::Overflow);
        }
        let v = if neg {
            if mag > i64::MAX as u64 + 1 {
                return Ok(IntTok::Overflow);
            }
            (mag as i64).wrapping_neg()
        } else {
            match i64::try_from(mag) {
                Ok(v) => v,
                Err(_) => return Ok(IntTok::Overflow),
            }
        };
        Ok(IntTok::Int(v))
    }

    /// Skips one value of any shape, checking its syntax.
    pub fn skip_value(&mut self, depth: usize) -> PResult<()> {
        if depth > MAX_SKIP_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        match self.peek()? {
            b'"' => self.skip_str(),
            b'{' => {
                if self.open(b'}')? {
                    return Ok(());
                }
                loop {
                    if self.peek()? != b'"' {
                        return Err(self.error("expected a string key"));
                    }
                    self.skip_str()?;
                    self.expect(b':', "expected ':' after an object key")?;
                    self.skip_value(depth + 1)?;
                    if !self.next_or_close(b'}')? {
                        return Ok(());
                    }
                }
            }
            b'[' => {
                if self.open(b']')? {
                    return Ok(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    if !self.next_or_close(b']')? {
                        return Ok(());
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number().map(|_| ()),
            _ => Err(self.error("expected a JSON value")),
        }
    }
}

/// Checks that `record` is one well-formed JSON value; used to prefer reporting malformed
/// input over a type error found earlier in the same record.
pub(super) fn check_syntax(record: &[u8]) -> PResult<()> {
    let mut cur = Cursor::new(record);
    cur.skip_value(0)?;
    if !cur.at_end() {
        return Err(cur.error("unexpected characters after the JSON object"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(text: &str) -> (Option<i64>, usize) {
        let mut c = Cursor::new(text.as_bytes());
        match c.int() {
            Ok(IntTok::Int(v)) => (Some(v), c.pos),
            _ => (None, c.pos),
        }
    }

    #[test]
    fn swar_and_byte_loop_agree() {
        for n in [
            0u64,
            7,
            42,
            100,
            999_999,
            1_000_000,
            12_345_678,
            99_999_999,
            123_456_789,
            9_223_372_036_854_775_807,
        ] {
            for tail in ["", ",", "}  padding", "]xxxxxxxxxx", " \"k\":1}"] {
                let text = format!("{n}{tail}");
                assert_eq!(
                    int(&text),
                    (Some(n as i64), n.to_string().len()),
                    "{text:?}"
                );
                let neg = format!("-{n}{tail}");
                assert_eq!(int(&neg).0, Some(-(n as i64)), "{neg:?}");
            }
        }
        assert_eq!(eight_digits(b"12a45678", 0), Some((2, 12)));
        assert_eq!(eight_digits(b"x2345678", 0), None);
        assert_eq!(eight_digits(b"1234567", 0), None);
        assert_eq!(
            eight_digits(b"1\xff\xff\xff\xff\xff\xff\xff", 0),
            Some((1, 1))
        );
    }

    #[test]
    fn special_bytes_found_exactly() {
        let cases: [(&[u8], usize); 5] = [
            (b"abcdefgh\"", 8),
            (b"ab\"cdefghij", 2),
            (b"a\x01\"", 1),
            (b"abcdefghijkl\\", 12),
            (b"\x20\x21\x1f", 2),
        ];
        for (buf, at) in cases {
            assert_eq!(find_special(buf, 0).0, at, "{buf:?}");
        }
    }
}

//! The Avro binary encoding, read from one datum: zigzag varints, lengths and
//! block counts bounded by the bytes left, so a hostile datum costs an error
//! and never a panic or an allocation it names.

/// Why a datum does not read as its writer's schema says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The datum ends before the value does.
    #[error("the datum ends inside {0}")]
    Truncated(&'static str),
    /// A varint of more than ten bytes, or past 64 bits.
    #[error("a varint longer than 64 bits")]
    Varint,
    /// An `int` (an enum index, a date, a time-millis) outside 32 bits.
    #[error("{0} is out of range for an Avro int")]
    Int(i64),
    /// A negative length of bytes or a string.
    #[error("a negative length ({0})")]
    NegativeLength(i64),
    /// A length past the end of the datum.
    #[error("a length of {len} bytes with {left} left in the datum")]
    Length {
        /// The length read.
        len: i64,
        /// Bytes left after it.
        left: usize,
    },
    /// A block of array or map items the rest of the datum cannot hold.
    #[error("a block of {count} items with {left} bytes left in the datum")]
    Block {
        /// The count read.
        count: i64,
        /// Bytes left after it.
        left: usize,
    },
    /// Items that take no bytes (nulls, empty records), more than a datum may hold.
    #[error("more than {MAX_EMPTY_ITEMS} items that take no bytes")]
    EmptyItems,
    /// A string that is not UTF-8.
    #[error("a string that is not UTF-8 ({0})")]
    Utf8(std::str::Utf8Error),
    /// A boolean byte other than 0 and 1.
    #[error("boolean byte {0} (only 0 and 1 are booleans)")]
    Boolean(u8),
    /// An enum index past its symbols.
    #[error("enum index {index} of {symbols} symbols")]
    Enum {
        /// The index read.
        index: i64,
        /// Symbols the enum has.
        symbols: usize,
    },
    /// A union branch past its branches.
    #[error("union branch {index} of {branches}")]
    Union {
        /// The branch read.
        index: i64,
        /// Branches the union has.
        branches: usize,
    },
    /// A `uuid` string that is not a UUID.
    #[error("a uuid that does not parse")]
    Uuid,
    /// A decimal of no bytes, which has no value.
    #[error("a decimal of no bytes")]
    EmptyDecimal,
    /// A decimal wider than an Iceberg decimal's 38 digits.
    #[error("a decimal of {0} bytes, wider than 38 digits")]
    WideDecimal(usize),
    /// A millisecond timestamp past the microseconds an `i64` holds.
    #[error("timestamp {0} is outside the range of microsecond timestamps")]
    Timestamp(i64),
}

/// Items that take no bytes one datum may hold in all: a block count is
/// otherwise bounded by the bytes left, but a million nulls take none.
pub const MAX_EMPTY_ITEMS: usize = 1 << 16;

/// A datum and how far it has been read.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    /// Bytes read so far.
    pub pos: usize,
    /// Items that take no bytes still allowed.
    empty: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            empty: MAX_EMPTY_ITEMS,
        }
    }

    /// The whole datum.
    pub fn datum(&self) -> &'a [u8] {
        self.buf
    }

    /// Bytes not yet read.
    pub fn left(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Whether every byte was read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A zigzag varint `long`.
    #[inline(always)]
    pub fn long(&mut self) -> Result<i64, DecodeError> {
        // One byte holds -64..=63: most union branches, small numbers, lengths.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(((b >> 1) as i64) ^ -((b & 1) as i64));
        }
        self.long_slow()
    }

    #[inline(never)]
    fn long_slow(&mut self) -> Result<i64, DecodeError> {
        // Ten bytes hold any varint: with ten left, no byte needs a check.
        if let Some(window) = self.buf.get(self.pos..self.pos + 10) {
            let mut z: u64 = 0;
            for (i, &b) in window.iter().enumerate() {
                // The tenth byte holds bit 63 only.
                if i == 9 && b > 1 {
                    return Err(DecodeError::Varint);
                }
                z |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    self.pos += i + 1;
                    return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
                }
            }
            return Err(DecodeError::Varint);
        }
        let mut z: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(DecodeError::Truncated("a varint"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(DecodeError::Varint);
            }
            z |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err(DecodeError::Varint)
    }

    /// A zigzag varint `int`.
    #[inline(always)]
    pub fn int(&mut self) -> Result<i32, DecodeError> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| DecodeError::Int(v))
    }

    /// A `boolean`: one byte, 0 or 1.
    #[inline]
    pub fn boolean(&mut self) -> Result<bool, DecodeError> {
        match self.buf.get(self.pos) {
            Some(&b @ (0 | 1)) => {
                self.pos += 1;
                Ok(b == 1)
            }
            Some(&b) => Err(DecodeError::Boolean(b)),
            None => Err(DecodeError::Truncated("a boolean")),
        }
    }

    /// `n` bytes as they are (a `fixed`, a `float`'s four).
    #[inline(always)]
    pub fn fixed(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end.and_then(|e| self.buf.get(self.pos..e)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(DecodeError::Truncated(what)),
        }
    }

    /// A `float`: four bytes, little-endian.
    #[inline]
    pub fn float(&mut self) -> Result<f32, DecodeError> {
        let b = self.fixed(4, "a float")?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `double`: eight bytes, little-endian.
    #[inline]
    pub fn double(&mut self) -> Result<f64, DecodeError> {
        let b = self.fixed(8, "a double")?;
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        Ok(f64::from_le_bytes(le))
    }

    /// `bytes`: a length, then that many bytes.
    #[inline(always)]
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.long()?;
        if len < 0 {
            return Err(DecodeError::NegativeLength(len));
        }
        if len as u64 > self.left() as u64 {
            return Err(DecodeError::Length {
                len,
                left: self.left(),
            });
        }
        self.fixed(len as usize, "bytes")
    }

    /// A `string`: `bytes` that are UTF-8.
    #[inline(always)]
    pub fn str(&mut self) -> Result<&'a [u8], DecodeError> {
        let bytes = self.bytes()?;
        // ASCII, the common case, needs no decoder.
        if !bytes.is_ascii() {
            std::str::from_utf8(bytes).map_err(DecodeError::Utf8)?;
        }
        Ok(bytes)
    }

    /// The item count of the next block of an array or map, 0 at its end;
    /// each item takes at least `width` bytes.
    #[inline]
    pub fn block(&mut self, width: usize) -> Result<usize, DecodeError> {
        let count = self.long()?;
        let count = match count {
            0 => return Ok(0),
            // A negative count is followed by the block's size in bytes,
            // which only a reader skipping the block needs.
            c if c < 0 => {
                self.long()?;
                c.checked_neg().ok_or(DecodeError::Block {
                    count: c,
                    left: self.left(),
                })?
            }
            c => c,
        };
        let left = self.left();
        if width == 0 {
            if count as u64 > self.empty as u64 {
                return Err(DecodeError::EmptyItems);
            }
            self.empty -= count as usize;
        } else if (count as u64).saturating_mul(width as u64) > left as u64 {
            return Err(DecodeError::Block { count, left });
        }
        Ok(count as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zig(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return out;
            }
            out.push(0x80 | (z & 0x7f) as u8);
            z >>= 7;
        }
    }

    #[test]
    fn varints_round_trip_and_overlong_ones_fail() {
        for v in [
            0,
            -1,
            1,
            63,
            -64,
            64,
            300,
            i32::MAX as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let bytes = zig(v);
            let mut r = Reader::new(&bytes);
            assert_eq!(r.long(), Ok(v), "{v}");
            assert!(r.at_end());
        }
        let mut r = Reader::new(&[0xff; 10]);
        assert_eq!(r.long(), Err(DecodeError::Varint));
        let mut r = Reader::new(&[0xff; 11]);
        assert_eq!(r.long(), Err(DecodeError::Varint));
        let mut r = Reader::new(&[0x80, 0x80]);
        assert_eq!(r.long(), Err(DecodeError::Truncated("a varint")));
        let big = zig(i32::MAX as i64 + 1);
        assert_eq!(
            Reader::new(&big).int(),
            Err(DecodeError::Int(i32::MAX as i64 + 1))
        );
    }

    #[test]
    fn lengths_and_blocks_are_bounded_by_the_datum() {
        let mut datum = zig(1 << 40);
        datum.extend_from_slice(b"abc");
        assert!(matches!(
            Reader::new(&datum).bytes(),
            Err(DecodeError::Length { .. })
        ));
        assert!(matches!(
            Reader::new(&zig(-2)).bytes(),
            Err(DecodeError::NegativeLength(-2))
        ));
        assert!(matches!(
            Reader::new(&zig(1 << 40)).block(1),
            Err(DecodeError::Block { .. })
        ));
        assert_eq!(
            Reader::new(&zig(1 << 40)).block(0),
            Err(DecodeError::EmptyItems)
        );
        let mut two = zig(-2);
        two.extend(zig(6));
        two.extend([2, 4, 6]);
        let mut r = Reader::new(&two);
        assert_eq!(r.block(1), Ok(2));
        let mut bad = zig(2);
        bad.extend([0xc3, 0x28]);
        assert!(matches!(Reader::new(&bad).str(), Err(DecodeError::Utf8(_))));
        assert_eq!(Reader::new(&[2]).boolean(), Err(DecodeError::Boolean(2)));
    }
}

//! Truncatable bit vectors for boolean values and validity.

use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer};

/// LSB-first bits as Arrow lays them out; bits past `len` are kept zero so the bytes can be
/// handed to Arrow as they are.
#[derive(Debug, Default)]
pub(super) struct Bitmap {
    bytes: Vec<u8>,
    len: usize,
}

impl Bitmap {
    pub fn with_capacity(bits: usize) -> Self {
        Bitmap {
            bytes: Vec::with_capacity(bits.div_ceil(8)),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    pub fn get(&self, i: usize) -> Option<bool> {
        if i >= self.len {
            return None;
        }
        self.bytes.get(i / 8).map(|b| b & (1 << (i & 7)) != 0)
    }

    #[inline]
    pub fn push(&mut self, bit: bool) {
        let shift = self.len & 7;
        if shift == 0 {
            self.bytes.push(bit as u8);
        } else if bit && let Some(last) = self.bytes.last_mut() {
            *last |= 1 << shift;
        }
        self.len += 1;
    }

    /// Appends `n` set bits, byte-wise where possible.
    pub fn push_ones(&mut self, mut n: usize) {
        while n > 0 && self.len & 7 != 0 {
            self.push(true);
            n -= 1;
        }
        let whole = n / 8;
        self.bytes.resize(self.bytes.len() + whole, 0xFF);
        self.len += whole * 8;
        for _ in 0..n % 8 {
            self.push(true);
        }
    }

    pub fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        self.bytes.truncate(len.div_ceil(8));
        let rem = len & 7;
        if rem != 0
            && let Some(last) = self.bytes.last_mut()
        {
            *last &= (1u8 << rem) - 1;
        }
        self.len = len;
    }

    /// Hands the bits to Arrow without copying and leaves an empty bitmap sized for `next`.
    pub fn take(&mut self, next: usize) -> BooleanBuffer {
        let len = self.len;
        let bytes = std::mem::replace(&mut self.bytes, Vec::with_capacity(next.div_ceil(8)));
        self.len = 0;
        BooleanBuffer::new(Buffer::from_vec(bytes), 0, len)
    }
}

/// Validity that costs nothing until the first null: most columns never see one.
#[derive(Debug, Default)]
pub(super) struct Validity {
    bits: Option<Bitmap>,
}

impl Validity {
    #[inline]
    pub fn push_valid(&mut self) {
        if let Some(bits) = &mut self.bits {
            bits.push(true);
        }
    }

    /// Records a null at row `row` (the column's length before this value).
    pub fn push_null(&mut self, row: usize) {
        let bits = self.bits.get_or_insert_with(|| {
            let mut bits = Bitmap::with_capacity(row.max(64) * 2);
            bits.push_ones(row);
            bits
        });
        bits.push(false);
    }

    pub fn truncate(&mut self, len: usize) {
        if let Some(bits) = &mut self.bits {
            bits.truncate(len);
        }
    }

    pub fn byte_len(&self) -> usize {
        self.bits.as_ref().map_or(0, Bitmap::byte_len)
    }

    /// The null buffer for a finished column of `len` rows, `None` when every row is valid.
    pub fn finish(&mut self, len: usize) -> Option<NullBuffer> {
        let mut bits = self.bits.take()?;
        debug_assert_eq!(bits.len(), len);
        let nulls = NullBuffer::new(bits.take(0));
        (nulls.null_count() > 0).then_some(nulls)
    }
}

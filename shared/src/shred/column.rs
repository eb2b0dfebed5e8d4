//! Owned column buffers: typed vectors plus validity, with cascading truncate for rollback.

use arrow_array::OffsetSizeTrait;
use arrow_schema::{FieldRef, Fields};

use super::bitmap::{Bitmap, Validity};
use super::error::{Fail, PResult, RecordErrorKind};
use super::lookup::FieldLookup;
use super::temporal::{DateCache, TsUnit};

/// One column (or nested child) being filled, shaped like its Arrow field.
#[derive(Debug)]
pub(super) struct Column {
    /// The exact Arrow field from the table's Arrow schema, reused when building arrays.
    pub field: FieldRef,
    pub nullable: bool,
    /// Rows appended; a struct compares it with its own row to spot missing and duplicate keys.
    pub len: usize,
    pub nulls: Validity,
    pub kind: Kind,
}

/// The buffers of a column, one variant per Iceberg type (they differ in what JSON they accept).
#[derive(Debug)]
pub(super) enum Kind {
    Bool(Bitmap),
    Int(Vec<i32>),
    Long(Vec<i64>),
    Float(Vec<f32>),
    Double(Vec<f64>),
    Decimal {
        precision: u8,
        scale: i8,
        values: Vec<i128>,
    },
    Date(Vec<i32>),
    Time(Vec<i64>),
    Timestamp {
        unit: TsUnit,
        values: Vec<i64>,
        dates: DateCache,
    },
    String(VarBytes<i32>),
    Binary(VarBytes<i64>),
    Uuid(Vec<u8>),
    Fixed {
        width: usize,
        data: Vec<u8>,
    },
    Struct(Box<StructCol>),
    List(Box<ListCol>),
    Map(Box<MapCol>),
}

/// Offsets + data of a variable-length column.
#[derive(Debug)]
pub(super) struct VarBytes<O> {
    pub offsets: Vec<O>,
    pub data: Vec<u8>,
}

/// Children of a struct (and of the record itself) plus how JSON keys find them.
#[derive(Debug)]
pub(super) struct StructCol {
    pub fields: Fields,
    pub children: Vec<Column>,
    pub lookup: FieldLookup,
    /// Position-free path of this struct in a record (`items[]`, `attrs{}`; empty for the
    /// record itself), the prefix of the paths its unknown keys are reported under.
    pub shape: Box<str>,
}

#[derive(Debug)]
pub(super) struct ListCol {
    pub element: FieldRef,
    pub offsets: Vec<i32>,
    pub child: Column,
}

#[derive(Debug)]
pub(super) struct MapCol {
    /// The `key_value` entries field of the Arrow map type.
    pub entries: FieldRef,
    pub offsets: Vec<i32>,
    pub keys: Column,
    pub values: Column,
}

impl<O: OffsetSizeTrait> VarBytes<O> {
    pub fn new() -> Self {
        VarBytes {
            offsets: vec![O::usize_as(0)],
            data: Vec::new(),
        }
    }

    /// Closes the value whose bytes were just appended to `data`.
    #[inline(always)]
    pub fn close(&mut self) -> PResult<()> {
        match O::from_usize(self.data.len()) {
            Some(end) => {
                self.offsets.push(end);
                Ok(())
            }
            None => Err(too_big()),
        }
    }

    fn push_empty(&mut self) {
        let last = self.offsets.last().copied().unwrap_or(O::usize_as(0));
        self.offsets.push(last);
    }

    fn truncate(&mut self, len: usize) {
        self.offsets.truncate(len + 1);
        let end = self.offsets.last().map_or(0, |o| o.as_usize());
        self.data.truncate(end);
    }

    pub fn value(&self, i: usize) -> &[u8] {
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(s), Some(e)) => self.data.get(s.as_usize()..e.as_usize()).unwrap_or(&[]),
            _ => &[],
        }
    }
}

#[cold]
pub(super) fn too_big() -> Box<Fail> {
    Fail::new(
        RecordErrorKind::BatchFull,
        "the batch holds more data than Arrow offsets can address; finish batches earlier",
    )
}

/// Offset of a list/map child, failing (instead of wrapping) past `i32::MAX` entries.
#[inline]
pub(super) fn child_offset(len: usize) -> PResult<i32> {
    i32::try_from(len).map_err(|_| too_big())
}

impl StructCol {
    pub fn truncate(&mut self, len: usize) {
        for child in &mut self.children {
            child.truncate(len);
        }
    }

    fn push_null(&mut self) {
        for child in &mut self.children {
            child.push_null();
        }
    }

    pub fn buffered_bytes(&self) -> usize {
        self.children.iter().map(Column::buffered_bytes).sum()
    }
}

impl Column {
    pub fn new(field: FieldRef, kind: Kind) -> Self {
        Column {
            nullable: field.is_nullable(),
            field,
            len: 0,
            nulls: Validity::default(),
            kind,
        }
    }

    pub fn name(&self) -> &str {
        self.field.name()
    }

    /// Marks the value just written to the buffers as a valid row.
    #[inline]
    pub fn commit_valid(&mut self) {
        self.nulls.push_valid();
        self.len += 1;
    }

    /// Appends a null row; nested children get placeholder rows so all lengths stay aligned.
    pub fn push_null(&mut self) {
        self.nulls.push_null(self.len);
        match &mut self.kind {
            Kind::Bool(b) => b.push(false),
            Kind::Int(v) | Kind::Date(v) => v.push(0),
            Kind::Long(v) | Kind::Time(v) | Kind::Timestamp { values: v, .. } => v.push(0),
            Kind::Float(v) => v.push(0.0),
            Kind::Double(v) => v.push(0.0),
            Kind::Decimal { values, .. } => values.push(0),
            Kind::String(v) => v.push_empty(),
            Kind::Binary(v) => v.push_empty(),
            Kind::Uuid(data) => data.extend_from_slice(&[0; 16]),
            Kind::Fixed { width, data } => data.resize(data.len() + *width, 0),
            Kind::Struct(s) => s.push_null(),
            Kind::List(l) => {
                let last = l.offsets.last().copied().unwrap_or(0);
                l.offsets.push(last);
            }
            Kind::Map(m) => {
                let last = m.offsets.last().copied().unwrap_or(0);
                m.offsets.push(last);
            }
        }
        self.len += 1;
    }

    /// Drops rows from `len` on. Cascades into children even when `self.len == len`, because a
    /// failed record may have written children of a row it never closed.
    pub fn truncate(&mut self, len: usize) {
        self.nulls.truncate(len);
        match &mut self.kind {
            Kind::Bool(b) => b.truncate(len),
            Kind::Int(v) | Kind::Date(v) => v.truncate(len),
            Kind::Long(v) | Kind::Time(v) | Kind::Timestamp { values: v, .. } => v.truncate(len),
            Kind::Float(v) => v.truncate(len),
            Kind::Double(v) => v.truncate(len),
            Kind::Decimal { values, .. } => values.truncate(len),
            Kind::String(v) => v.truncate(len),
            Kind::Binary(v) => v.truncate(len),
            Kind::Uuid(data) => data.truncate(len * 16),
            Kind::Fixed { width, data } => data.truncate(len * *width),
            Kind::Struct(s) => s.truncate(len),
            Kind::List(l) => {
                l.offsets.truncate(len + 1);
                let end = l.offsets.last().map_or(0, |&o| o as usize);
                l.child.truncate(end);
            }
            Kind::Map(m) => {
                m.offsets.truncate(len + 1);
                let end = m.offsets.last().map_or(0, |&o| o as usize);
                m.keys.truncate(end);
                m.values.truncate(end);
            }
        }
        self.len = self.len.min(len);
    }

    pub fn buffered_bytes(&self) -> usize {
        let values = match &self.kind {
            Kind::Bool(b) => b.byte_len(),
            Kind::Int(v) | Kind::Date(v) => v.len() * 4,
            Kind::Long(v) | Kind::Time(v) | Kind::Timestamp { values: v, .. } => v.len() * 8,
            Kind::Float(v) => v.len() * 4,
            Kind::Double(v) => v.len() * 8,
            Kind::Decimal { values, .. } => values.len() * 16,
            Kind::String(v) => v.offsets.len() * 4 + v.data.len(),
            Kind::Binary(v) => v.offsets.len() * 8 + v.data.len(),
            Kind::Uuid(data) | Kind::Fixed { data, .. } => data.len(),
            Kind::Struct(s) => s.buffered_bytes(),
            Kind::List(l) => l.offsets.len() * 4 + l.child.buffered_bytes(),
            Kind::Map(m) => {
                m.offsets.len() * 4 + m.keys.buffered_bytes() + m.values.buffered_bytes()
            }
        };
        values + self.nulls.byte_len()
    }

    /// Hash of row `i` of a primitive column, for spotting duplicate map keys.
    pub fn row_hash(&self, i: usize) -> Option<u64> {
        let mut h = super::lookup::Fnv::new();
        match &self.kind {
            Kind::Bool(b) => h.write(&[b.get(i)? as u8]),
            Kind::Int(v) | Kind::Date(v) => h.write(&v.get(i)?.to_le_bytes()),
            Kind::Long(v) | Kind::Time(v) | Kind::Timestamp { values: v, .. } => {
                h.write(&v.get(i)?.to_le_bytes())
            }
            Kind::Float(v) => h.write(&v.get(i)?.to_bits().to_le_bytes()),
            Kind::Double(v) => h.write(&v.get(i)?.to_bits().to_le_bytes()),
            Kind::Decimal { values, .. } => h.write(&values.get(i)?.to_le_bytes()),
            Kind::String(v) => h.write(v.value(i)),
            Kind::Binary(v) => h.write(v.value(i)),
            Kind::Uuid(data) => h.write(data.get(i * 16..i * 16 + 16)?),
            Kind::Fixed { width, data } => h.write(data.get(i * width..(i + 1) * width)?),
            Kind::Struct(_) | Kind::List(_) | Kind::Map(_) => return None,
        }
        Some(h.finish())
    }

    /// Whether rows `i` and `j` of a primitive column hold the same value.
    pub fn rows_equal(&self, i: usize, j: usize) -> bool {
        fn eq<T: PartialEq>(v: &[T], i: usize, j: usize) -> bool {
            v.get(i).is_some() && v.get(i) == v.get(j)
        }
        match &self.kind {
            Kind::Bool(b) => b.get(i).is_some() && b.get(i) == b.get(j),
            Kind::Int(v) | Kind::Date(v) => eq(v, i, j),
            Kind::Long(v) | Kind::Time(v) | Kind::Timestamp { values: v, .. } => eq(v, i, j),
            Kind::Float(v) => v.get(i).map(|x| x.to_bits()) == v.get(j).map(|x| x.to_bits()),
            Kind::Double(v) => v.get(i).map(|x| x.to_bits()) == v.get(j).map(|x| x.to_bits()),
            Kind::Decimal { values, .. } => eq(values, i, j),
            Kind::String(v) => v.value(i) == v.value(j),
            Kind::Binary(v) => v.value(i) == v.value(j),
            Kind::Uuid(data) => data.get(i * 16..i * 16 + 16) == data.get(j * 16..j * 16 + 16),
            Kind::Fixed { width, data } => {
                data.get(i * width..(i + 1) * width) == data.get(j * width..(j + 1) * width)
            }
            Kind::Struct(_) | Kind::List(_) | Kind::Map(_) => false,
        }
    }
}

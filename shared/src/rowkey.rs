//! Keys of keyed tables compared by typed value, not by JSON text: `"A"` and
//! `"\u0041"` are one key, `0` and `-0` on a long are one key, an int key
//! that widened to long keeps its identity. The digest of a key is taken
//! from its Arrow value, so the writer (which shreds change keys) and the
//! committer (which reads keys back from Parquet) always agree.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Int32Type, Int64Type, Time64MicrosecondType,
    TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use xxhash_rust::xxh3::xxh3_128;

/// A key column type floe cannot compare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("identifier field `{column}` has type {data_type}, which floe cannot use as a key")]
pub struct UnsupportedKey {
    /// The column.
    pub column: String,
    /// Its Arrow type.
    pub data_type: String,
}

/// The digest of every row's key, the key being the columns `columns` of `batch`.
///
/// Each row's key is laid out in one buffer and hashed in one call: the
/// same bytes a streaming hasher per row would be fed, so the same digest,
/// without a hasher's state (about 600 bytes) per row. At a quarter of a
/// million rows a chunk, those states were most of a Postgres copy's page
/// faults.
pub fn digests(batch: &RecordBatch, columns: &[usize]) -> Result<Vec<u128>, UnsupportedKey> {
    let schema = batch.schema();
    let typed: Vec<KeyColumn<'_>> = columns
        .iter()
        .map(|&c| KeyColumn::of(batch.column(c), schema.field(c).name()))
        .collect::<Result<_, _>>()?;
    let mut key = Vec::with_capacity(64);
    Ok((0..batch.num_rows())
        .map(|row| {
            key.clear();
            for column in &typed {
                column.put(row, &mut key);
            }
            xxh3_128(&key)
        })
        .collect())
}

/// The indices of `names` in `batch`, for [`digests`].
pub fn columns(batch: &RecordBatch, names: &[String]) -> Option<Vec<usize>> {
    names
        .iter()
        .map(|n| batch.schema().index_of(n).ok())
        .collect()
}

/// A key column, its type resolved once for all its rows.
enum KeyColumn<'a> {
    /// A whole number of any width, as `i64` under `tag`: an int key that
    /// widened to long keeps its identity.
    Int(&'a dyn Array, u8, fn(&dyn Array, usize) -> i64),
    Decimal(&'a arrow_array::Decimal128Array, u8),
    Boolean(&'a arrow_array::BooleanArray),
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    Binary(&'a arrow_array::BinaryArray),
    LargeBinary(&'a arrow_array::LargeBinaryArray),
    FixedBinary(&'a arrow_array::FixedSizeBinaryArray),
}

impl<'a> KeyColumn<'a> {
    fn of(array: &'a ArrayRef, column: &str) -> Result<Self, UnsupportedKey> {
        let array: &'a dyn Array = array.as_ref();
        Ok(match array.data_type() {
            DataType::Int32 => Self::Int(array, b'i', |a, r| {
                i64::from(a.as_primitive::<Int32Type>().value(r))
            }),
            DataType::Int64 => {
                Self::Int(array, b'i', |a, r| a.as_primitive::<Int64Type>().value(r))
            }
            DataType::Date32 => Self::Int(array, b'D', |a, r| {
                i64::from(a.as_primitive::<Date32Type>().value(r))
            }),
            DataType::Time64(TimeUnit::Microsecond) => Self::Int(array, b'T', |a, r| {
                a.as_primitive::<Time64MicrosecondType>().value(r)
            }),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => {
                Self::Int(array, if tz.is_some() { b'Z' } else { b't' }, |a, r| {
                    a.as_primitive::<TimestampMicrosecondType>().value(r)
                })
            }
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                Self::Int(array, if tz.is_some() { b'N' } else { b'n' }, |a, r| {
                    a.as_primitive::<TimestampNanosecondType>().value(r)
                })
            }
            DataType::Decimal128(_, scale) => {
                Self::Decimal(array.as_primitive::<Decimal128Type>(), *scale as u8)
            }
            DataType::Boolean => Self::Boolean(array.as_boolean()),
            DataType::Utf8 => Self::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Self::LargeUtf8(array.as_string::<i64>()),
            DataType::Binary => Self::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => Self::LargeBinary(array.as_binary::<i64>()),
            DataType::FixedSizeBinary(_) => Self::FixedBinary(array.as_fixed_size_binary()),
            other => {
                return Err(UnsupportedKey {
                    column: column.to_string(),
                    data_type: other.to_string(),
                });
            }
        })
    }

    fn array(&self) -> &dyn Array {
        match self {
            Self::Int(a, _, _) => *a,
            Self::Decimal(a, _) => *a,
            Self::Boolean(a) => *a,
            Self::Utf8(a) => *a,
            Self::LargeUtf8(a) => *a,
            Self::Binary(a) => *a,
            Self::LargeBinary(a) => *a,
            Self::FixedBinary(a) => *a,
        }
    }

    /// Appends row `row`'s value to `key`. Each value is tagged by its kind
    /// and length-prefixed, so no two keys of different columns or types
    /// run together into one byte string.
    fn put(&self, row: usize, key: &mut Vec<u8>) {
        if self.array().is_null(row) {
            return tagged(key, b'0', &[]);
        }
        match self {
            Self::Int(a, tag, value) => tagged(key, *tag, &value(*a, row).to_le_bytes()),
            Self::Decimal(a, scale) => {
                let mut bytes = [0u8; 17];
                bytes[0] = *scale;
                bytes[1..].copy_from_slice(&a.value(row).to_le_bytes());
                tagged(key, b'd', &bytes)
            }
            Self::Boolean(a) => tagged(key, b'b', &[u8::from(a.value(row))]),
            Self::Utf8(a) => tagged(key, b's', a.value(row).as_bytes()),
            Self::LargeUtf8(a) => tagged(key, b's', a.value(row).as_bytes()),
            Self::Binary(a) => tagged(key, b'x', a.value(row)),
            Self::LargeBinary(a) => tagged(key, b'x', a.value(row)),
            Self::FixedBinary(a) => tagged(key, b'x', a.value(row)),
        }
    }
}

fn tagged(key: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    key.push(tag);
    key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    key.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    fn batch(column: ArrayRef) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("id", column.data_type().clone(), true)]);
        RecordBatch::try_new(Arc::new(schema), vec![column]).unwrap()
    }

    #[test]
    fn equal_values_have_equal_digests_across_widening() {
        let ints = batch(Arc::new(Int32Array::from(vec![0, 7])));
        let longs = batch(Arc::new(Int64Array::from(vec![0, 7, 8])));
        let a = digests(&ints, &[0]).unwrap();
        let b = digests(&longs, &[0]).unwrap();
        assert_eq!(a[..], b[..2]);
        assert_ne!(b[1], b[2]);
        let text = batch(Arc::new(StringArray::from(vec!["7", "A"])));
        let t = digests(&text, &[0]).unwrap();
        assert_ne!(t[0], b[1], "a string key is not the number it spells");
    }

    /// The digest as earlier builds took it, one streaming hasher per row
    /// fed value by value: key files and the committer's lookups written
    /// by them must keep meaning the same keys.
    fn streamed(batch: &RecordBatch, columns: &[usize]) -> Vec<u128> {
        let mut hashers: Vec<xxhash_rust::xxh3::Xxh3> = (0..batch.num_rows())
            .map(|_| xxhash_rust::xxh3::Xxh3::new())
            .collect();
        for &c in columns {
            let one = RecordBatch::try_new(
                Arc::new(Schema::new(vec![batch.schema().field(c).clone()])),
                vec![batch.column(c).clone()],
            )
            .unwrap();
            let column = KeyColumn::of(one.column(0), "k").unwrap();
            for (row, h) in hashers.iter_mut().enumerate() {
                let mut value = Vec::new();
                column.put(row, &mut value);
                // Tag, length and bytes went in as three updates.
                h.update(&value[..1]);
                h.update(&value[1..5]);
                h.update(&value[5..]);
            }
        }
        hashers.into_iter().map(|h| h.digest128()).collect()
    }

    #[test]
    fn digests_are_those_of_a_streaming_hasher_per_row() {
        use arrow_array::{
            BinaryArray, BooleanArray, Date32Array, Decimal128Array, LargeStringArray,
            TimestampMicrosecondArray,
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![Some(1), None, Some(-3)])),
            Arc::new(StringArray::from(vec![Some("a"), Some(""), None])),
            Arc::new(
                Decimal128Array::from(vec![Some(12345), Some(-1), None])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            Arc::new(TimestampMicrosecondArray::from(vec![1, 2, 3]).with_timezone("UTC")),
            Arc::new(Date32Array::from(vec![Some(19000), None, Some(0)])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
            Arc::new(BinaryArray::from_vec(vec![b"x", b"", b"yz"])),
            Arc::new(LargeStringArray::from(vec!["p", "q", "r"])),
            Arc::new(Int32Array::from(vec![7, 8, 9])),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
            .collect();
        let all = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        for cols in [vec![0], vec![1], vec![0, 1, 2], (0..9).collect::<Vec<_>>()] {
            assert_eq!(
                digests(&all, &cols).unwrap(),
                streamed(&all, &cols),
                "{cols:?}"
            );
        }
        // And one pinned value, whatever the hasher's API does next.
        let one = batch(Arc::new(Int64Array::from(vec![42])));
        assert_eq!(
            digests(&one, &[0]).unwrap()[0],
            xxh3_128(&[b"i".as_slice(), &8u32.to_le_bytes(), &42i64.to_le_bytes()].concat())
        );
    }
}

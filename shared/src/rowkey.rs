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
use xxhash_rust::xxh3::Xxh3;

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
pub fn digests(batch: &RecordBatch, columns: &[usize]) -> Result<Vec<u128>, UnsupportedKey> {
    let mut hashers: Vec<Xxh3> = (0..batch.num_rows()).map(|_| Xxh3::new()).collect();
    for &c in columns {
        let array = batch.column(c);
        let name = batch.schema().field(c).name().clone();
        feed(array, &name, &mut hashers)?;
    }
    Ok(hashers.into_iter().map(|h| h.digest128()).collect())
}

/// The indices of `names` in `batch`, for [`digests`].
pub fn columns(batch: &RecordBatch, names: &[String]) -> Option<Vec<usize>> {
    names
        .iter()
        .map(|n| batch.schema().index_of(n).ok())
        .collect()
}

fn feed(array: &ArrayRef, column: &str, hashers: &mut [Xxh3]) -> Result<(), UnsupportedKey> {
    let unsupported = || UnsupportedKey {
        column: column.to_string(),
        data_type: array.data_type().to_string(),
    };
    // Each value is tagged by its kind and length-prefixed, so no two keys of
    // different columns or types run together into one byte string.
    let mut put = |row: usize, tag: u8, bytes: &[u8]| {
        let h = &mut hashers[row];
        h.update(&[tag]);
        h.update(&(bytes.len() as u32).to_le_bytes());
        h.update(bytes);
    };
    for row in 0..array.len() {
        if array.is_null(row) {
            put(row, b'0', &[]);
            continue;
        }
        match array.data_type() {
            DataType::Int32 => put(
                row,
                b'i',
                &i64::from(array.as_primitive::<Int32Type>().value(row)).to_le_bytes(),
            ),
            DataType::Int64 => put(
                row,
                b'i',
                &array.as_primitive::<Int64Type>().value(row).to_le_bytes(),
            ),
            DataType::Date32 => put(
                row,
                b'D',
                &i64::from(array.as_primitive::<Date32Type>().value(row)).to_le_bytes(),
            ),
            DataType::Time64(TimeUnit::Microsecond) => put(
                row,
                b'T',
                &array
                    .as_primitive::<Time64MicrosecondType>()
                    .value(row)
                    .to_le_bytes(),
            ),
            DataType::Timestamp(TimeUnit::Microsecond, tz) => put(
                row,
                if tz.is_some() { b'Z' } else { b't' },
                &array
                    .as_primitive::<TimestampMicrosecondType>()
                    .value(row)
                    .to_le_bytes(),
            ),
            DataType::Timestamp(TimeUnit::Nanosecond, tz) => put(
                row,
                if tz.is_some() { b'N' } else { b'n' },
                &array
                    .as_primitive::<TimestampNanosecondType>()
                    .value(row)
                    .to_le_bytes(),
            ),
            DataType::Decimal128(_, scale) => {
                let mut bytes = vec![*scale as u8];
                bytes.extend_from_slice(
                    &array
                        .as_primitive::<Decimal128Type>()
                        .value(row)
                        .to_le_bytes(),
                );
                put(row, b'd', &bytes)
            }
            DataType::Boolean => put(row, b'b', &[u8::from(array.as_boolean().value(row))]),
            DataType::Utf8 => put(row, b's', array.as_string::<i32>().value(row).as_bytes()),
            DataType::LargeUtf8 => put(row, b's', array.as_string::<i64>().value(row).as_bytes()),
            DataType::Binary => put(row, b'x', array.as_binary::<i32>().value(row)),
            DataType::LargeBinary => put(row, b'x', array.as_binary::<i64>().value(row)),
            DataType::FixedSizeBinary(_) => put(row, b'x', array.as_fixed_size_binary().value(row)),
            _ => return Err(unsupported()),
        }
    }
    Ok(())
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
}

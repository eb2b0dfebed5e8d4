//! Dictionary encoding only where it pays. Parquet writers dictionary-encode
//! every column until the dictionary page overflows; for columns whose values
//! are mostly distinct (ids, per-record text) that is pure cost — interning
//! every value into a hash table that is then thrown away. A sample of the
//! batch tells which columns those are.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

/// Rows sampled per column.
const SAMPLE: usize = 1024;
/// Above this share of distinct values in the sample, the column is written plain.
const MAX_DISTINCT_SHARE: f64 = 0.5;

/// The writer properties for `batch`: `base` with dictionary encoding turned
/// off for top-level columns whose sampled values are mostly distinct.
pub fn tune(base: &WriterProperties, batch: &RecordBatch) -> WriterProperties {
    let n = batch.num_rows().min(SAMPLE);
    if n < 64 {
        return base.clone();
    }
    let mut builder = None;
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let sample = column.slice(0, n);
        let distinct = match field.data_type() {
            DataType::Utf8 => distinct(sample.as_string::<i32>().iter()),
            DataType::LargeUtf8 => distinct(sample.as_string::<i64>().iter()),
            DataType::Int64 => distinct(sample.as_primitive::<Int64Type>().iter()),
            DataType::Int32 => distinct(sample.as_primitive::<Int32Type>().iter()),
            // Fixed-width values by their bits: a table copied from a
            // database holds whole columns of distinct timestamps, amounts
            // and measures, each dictionary as large as its data and
            // thrown away (a fifth of a 50-column copy's encoding).
            DataType::Float64 => distinct(sample.as_primitive::<Float64Type>().iter().map(bits)),
            DataType::Float32 => distinct(sample.as_primitive::<Float32Type>().iter().map(bits)),
            DataType::Decimal128(..) => distinct(sample.as_primitive::<Decimal128Type>().iter()),
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                distinct(sample.as_primitive::<TimestampMicrosecondType>().iter())
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                distinct(sample.as_primitive::<TimestampNanosecondType>().iter())
            }
            DataType::Time64(TimeUnit::Microsecond) => {
                distinct(sample.as_primitive::<Time64MicrosecondType>().iter())
            }
            DataType::Date32 => distinct(sample.as_primitive::<Date32Type>().iter()),
            _ => continue,
        };
        if distinct as f64 > n as f64 * MAX_DISTINCT_SHARE {
            let b = builder
                .take()
                .unwrap_or_else(|| base.clone().into_builder());
            builder = Some(
                b.set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false),
            );
        }
    }
    builder.map_or_else(|| base.clone(), |b| b.build())
}

/// A float's bits: equal bits, one dictionary entry.
fn bits<F: FloatBits>(v: Option<F>) -> Option<F::Bits> {
    v.map(F::to_bits)
}

/// Floats' bit patterns, for [`bits`].
trait FloatBits: Copy {
    type Bits: Hash + Eq;
    fn to_bits(self) -> Self::Bits;
}

impl FloatBits for f64 {
    type Bits = u64;
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
}

impl FloatBits for f32 {
    type Bits = u32;
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
}

fn distinct<T: Hash + Eq>(values: impl Iterator<Item = T>) -> usize {
    let state = std::hash::RandomState::new();
    let mut seen = HashSet::with_capacity_and_hasher(SAMPLE, state.clone());
    for v in values {
        seen.insert(state.hash_one(&v));
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    #[test]
    fn turns_dictionaries_off_only_for_mostly_distinct_columns() {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..2000));
        let kinds: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..2000).map(|i| ["click", "view"][i % 2]),
        ));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("kind", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(schema, vec![ids, kinds]).unwrap();
        let props = tune(&WriterProperties::default(), &batch);
        assert!(!props.dictionary_enabled(&ColumnPath::from("id")));
        assert!(props.dictionary_enabled(&ColumnPath::from("kind")));
    }

    #[test]
    fn fixed_width_columns_are_sampled_too() {
        use arrow_array::{Float64Array, TimestampMicrosecondArray};
        let at: ArrayRef = Arc::new(TimestampMicrosecondArray::from_iter_values(0..2000));
        let same: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![7; 2000]));
        let measure: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (0..2000).map(|i| f64::from(i) / 7.0),
        ));
        let schema = Arc::new(Schema::new(vec![
            Field::new("at", at.data_type().clone(), false),
            Field::new("same", same.data_type().clone(), false),
            Field::new("measure", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(schema, vec![at, same, measure]).unwrap();
        let props = tune(&WriterProperties::default(), &batch);
        assert!(!props.dictionary_enabled(&ColumnPath::from("at")));
        assert!(props.dictionary_enabled(&ColumnPath::from("same")));
        assert!(!props.dictionary_enabled(&ColumnPath::from("measure")));
    }
}

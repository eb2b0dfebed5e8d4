//! Dictionary encoding only where it pays. Parquet writers dictionary-encode
//! every column until the dictionary page overflows; for columns whose values
//! are mostly distinct (ids, per-record text) that is pure cost — interning
//! every value into a hash table that is then thrown away. A sample of the
//! batch tells which columns those are.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
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
}

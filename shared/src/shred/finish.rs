//! Turns filled columns into Arrow arrays, handing over the vectors without copying.

use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::types::{GenericBinaryType, GenericStringType};
use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeBinaryArray, GenericByteArray, ListArray, MapArray,
    OffsetSizeTrait, PrimitiveArray, StructArray,
};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType};

use super::column::{Column, Kind, StructCol, VarBytes};
use super::error::ShredError;
use super::temporal::TsUnit;

/// Takes `v`, leaving an empty vector with the same room for the next batch.
fn take<T>(v: &mut Vec<T>, next: usize) -> Vec<T> {
    std::mem::replace(v, Vec::with_capacity(next))
}

fn prim<T: arrow_array::ArrowPrimitiveType>(
    v: &mut Vec<T::Native>,
    len: usize,
    nulls: Option<NullBuffer>,
    dt: &DataType,
) -> ArrayRef {
    let values = ScalarBuffer::from(take(v, len));
    Arc::new(PrimitiveArray::<T>::new(values, nulls).with_data_type(dt.clone()))
}

fn offsets<O: OffsetSizeTrait>(v: &mut Vec<O>, len: usize) -> OffsetBuffer<O> {
    let mut next = Vec::with_capacity(len + 1);
    next.push(O::usize_as(0));
    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(v, next)))
}

fn bytes<O: OffsetSizeTrait>(v: &mut VarBytes<O>, len: usize) -> (OffsetBuffer<O>, Buffer) {
    let data_len = v.data.len();
    let offsets = offsets(&mut v.offsets, len);
    (offsets, Buffer::from_vec(take(&mut v.data, data_len)))
}

/// The children of `st` as arrays (also the columns of a record batch).
pub(super) fn children(st: &mut StructCol) -> Result<Vec<ArrayRef>, ShredError> {
    st.children.iter_mut().map(column).collect()
}

/// Finishes one column and resets it for the next batch.
pub(super) fn column(col: &mut Column) -> Result<ArrayRef, ShredError> {
    let len = std::mem::take(&mut col.len);
    let nulls = col.nulls.finish(len);
    let dt = col.field.data_type();
    let array: ArrayRef = match &mut col.kind {
        Kind::Bool(bits) => Arc::new(BooleanArray::new(bits.take(len), nulls)),
        Kind::Int(v) => prim::<Int32Type>(v, len, nulls, dt),
        Kind::Long(v) => prim::<Int64Type>(v, len, nulls, dt),
        Kind::Float(v) => prim::<Float32Type>(v, len, nulls, dt),
        Kind::Double(v) => prim::<Float64Type>(v, len, nulls, dt),
        Kind::Decimal { values, .. } => prim::<Decimal128Type>(values, len, nulls, dt),
        Kind::Date(v) => prim::<Date32Type>(v, len, nulls, dt),
        Kind::Time(v) => prim::<Time64MicrosecondType>(v, len, nulls, dt),
        Kind::Timestamp {
            unit: TsUnit::Micros,
            values,
            ..
        } => prim::<TimestampMicrosecondType>(values, len, nulls, dt),
        Kind::Timestamp {
            unit: TsUnit::Nanos,
            values,
            ..
        } => prim::<TimestampNanosecondType>(values, len, nulls, dt),
        Kind::String(v) => {
            let (offsets, data) = bytes(v, len);
            Arc::new(GenericByteArray::<GenericStringType<i32>>::try_new(
                offsets, data, nulls,
            )?)
        }
        Kind::Binary(v) => {
            let (offsets, data) = bytes(v, len);
            Arc::new(GenericByteArray::<GenericBinaryType<i64>>::try_new(
                offsets, data, nulls,
            )?)
        }
        Kind::Uuid(data) => fixed(data, 16, len, nulls)?,
        Kind::Fixed { width, data } => fixed(data, *width, len, nulls)?,
        Kind::Struct(st) => {
            let arrays = children(st)?;
            Arc::new(StructArray::try_new_with_length(
                st.fields.clone(),
                arrays,
                nulls,
                len,
            )?)
        }
        Kind::List(l) => {
            let offsets = offsets(&mut l.offsets, len);
            let child = column(&mut l.child)?;
            Arc::new(ListArray::try_new(
                l.element.clone(),
                offsets,
                child,
                nulls,
            )?)
        }
        Kind::Map(m) => {
            let DataType::Map(_, sorted) = dt else {
                return Err(not_map());
            };
            let DataType::Struct(kv) = m.entries.data_type() else {
                return Err(not_map());
            };
            let offsets = offsets(&mut m.offsets, len);
            let n = m.keys.len;
            let keys = column(&mut m.keys)?;
            let values = column(&mut m.values)?;
            let entries =
                StructArray::try_new_with_length(kv.clone(), vec![keys, values], None, n)?;
            Arc::new(MapArray::try_new(
                m.entries.clone(),
                offsets,
                entries,
                nulls,
                *sorted,
            )?)
        }
    };
    Ok(array)
}

fn fixed(
    data: &mut Vec<u8>,
    width: usize,
    len: usize,
    nulls: Option<NullBuffer>,
) -> Result<ArrayRef, ShredError> {
    let size = i32::try_from(width)
        .map_err(|_| ArrowError::InvalidArgumentError("fixed width too large".into()))?;
    let data = Buffer::from_vec(take(data, len * width));
    Ok(Arc::new(FixedSizeBinaryArray::try_new(size, data, nulls)?))
}

#[cold]
fn not_map() -> ShredError {
    ShredError::Arrow(ArrowError::SchemaError(
        "map column without a map data type".into(),
    ))
}

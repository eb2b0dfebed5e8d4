//! Walks one datum by its bound steps, appending each value to its column.
//! Any surprise (a value outside what the step places exactly, a bad byte,
//! a column that refuses) is a [`Miss`]: the caller rolls the record back
//! and gives it to the JSON path, whose outcome is the record's.

use super::super::column::{Column, Kind, ListCol, MapCol, StructCol, child_offset};
use super::super::decimal::POW10;
use super::super::json::Cursor;
use super::super::parse::{self, Ctx, Scratch};
use super::super::unknown::unknown_key;
use super::super::{Coercions, EpochUnit};
use super::bind::{Fields, Op, Slot};
use crate::avro::check::{branch, decimal_bytes, enum_symbol, map_entries, skip, unscaled, uuid};
use crate::avro::plan::{Node, NodeId, Plan};
use crate::avro::read::{DecodeError, Reader};
use crate::avro::render::render;

/// The direct path does not take this record.
#[derive(Debug)]
pub(in crate::shred) struct Miss;

impl From<DecodeError> for Miss {
    #[inline(always)]
    fn from(_: DecodeError) -> Self {
        Miss
    }
}

impl From<Box<crate::avro::check::Fault>> for Miss {
    #[inline(always)]
    fn from(_: Box<crate::avro::check::Fault>) -> Self {
        Miss
    }
}

/// What one datum's walk works with.
pub(in crate::shred) struct Cx<'c> {
    pub plan: &'c Plan,
    pub scratch: &'c mut Scratch,
    /// Where a value's JSON text is written for the JSON reader.
    pub text: &'c mut Vec<u8>,
    /// Map entries being sorted (key start, key length, value position),
    /// a stack shared by nested maps.
    pub entries: &'c mut Vec<(usize, usize, usize)>,
    pub epoch: EpochUnit,
    pub case_insensitive: bool,
}

/// The days `YYYY-MM-DD` spells: 0000-01-01 to 9999-12-31.
const FIRST_DAY: i64 = -719_528;
const LAST_DAY: i64 = 2_932_896;
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Fills the children of `st` from the record at `r`.
pub(in crate::shred) fn record(
    fields: &Fields,
    st: &mut StructCol,
    r: &mut Reader<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), Miss> {
    for slot in fields.slots.iter() {
        match slot {
            Slot::Fill { column, op } => {
                let Some(child) = st.children.get_mut(*column) else {
                    return Err(Miss);
                };
                value(op, child, r, cx)?;
            }
            Slot::Skip { node, unknown } => {
                if let Some(key) = unknown {
                    let policy = cx.scratch.unknown;
                    unknown_key(policy, &mut cx.scratch.collector, &st.shape, key.as_bytes())
                        .map_err(|_| Miss)?;
                }
                skip(cx.plan, *node, r)?;
            }
        }
    }
    for &i in fields.missing.iter() {
        let Some(child) = st.children.get_mut(i) else {
            return Err(Miss);
        };
        null(child)?;
    }
    Ok(())
}

#[inline(always)]
fn null(col: &mut Column) -> Result<(), Miss> {
    if !col.nullable {
        return Err(Miss);
    }
    col.push_null();
    Ok(())
}

/// The buffers of `col` when they are of kind `$k`, else a miss.
macro_rules! kind {
    ($col:expr, $k:pat => $v:expr) => {
        match &mut $col.kind {
            $k => $v,
            _ => return Err(Miss),
        }
    };
}

/// Appends one value of `op` to `col`.
fn value(op: &Op, col: &mut Column, r: &mut Reader<'_>, cx: &mut Cx<'_>) -> Result<(), Miss> {
    // `["null", T]`, the common field, reads its T without another call.
    let op = match op {
        Op::Nullable { null: n, value } => {
            let b = r.long()?;
            if b == i64::from(*n) {
                return null(col);
            }
            if b != 1 - i64::from(*n) {
                return Err(Miss);
            }
            value
        }
        op => op,
    };
    match op {
        Op::Long => {
            let v = r.long()?;
            kind!(col, Kind::Long(out) => out.push(v));
        }
        Op::Str => {
            let s = r.str()?;
            let out = kind!(col, Kind::String(out) => out);
            out.data.extend_from_slice(s);
            out.close().map_err(|_| Miss)?;
        }
        Op::Timestamp { millis } => {
            let t = r.long()?;
            let us = if *millis {
                t.checked_mul(1000).ok_or(Miss)?
            } else {
                t
            };
            // Past these the JSON text of the instant is not `YYYY-…`.
            if !(FIRST_DAY * MICROS_PER_DAY..(LAST_DAY + 1) * MICROS_PER_DAY).contains(&us) {
                return Err(Miss);
            }
            kind!(col, Kind::Timestamp { values, .. } => values.push(us));
        }
        Op::Null => return null(col),
        _ => return value_rest(op, col, r, cx),
    }
    col.commit_valid();
    Ok(())
}

/// [`value`] for the less common steps, out of line so the hot ones stay small.
///
/// Long because it is one match with an arm per plan step, each a few
/// lines that check a value against its column and append it; lists and
/// maps have functions of their own.
#[inline(never)]
fn value_rest(op: &Op, col: &mut Column, r: &mut Reader<'_>, cx: &mut Cx<'_>) -> Result<(), Miss> {
    match op {
        Op::Bool => {
            let b = r.boolean()?;
            kind!(col, Kind::Bool(bits) => bits.push(b));
        }
        Op::Int => {
            let v = r.int()?;
            kind!(col, Kind::Int(out) => out.push(v));
        }
        Op::IntToLong => {
            let v = r.int()?;
            kind!(col, Kind::Long(out) => out.push(i64::from(v)));
        }
        Op::LongToInt => {
            let v = i32::try_from(r.long()?).map_err(|_| Miss)?;
            kind!(col, Kind::Int(out) => out.push(v));
        }
        // NaN as the JSON path writes it ("NaN") and reads it back.
        Op::Float => {
            let f = match r.float()? {
                f if f.is_nan() => f64::NAN as f32,
                f => f,
            };
            kind!(col, Kind::Float(out) => out.push(f));
        }
        Op::Double => {
            let f = match r.double()? {
                f if f.is_nan() => f64::NAN,
                f => f,
            };
            kind!(col, Kind::Double(out) => out.push(f));
        }
        Op::Enum(node) => {
            let Node::Enum(symbols) = cx.plan.node(*node) else {
                return Err(Miss);
            };
            let s = enum_symbol(r, symbols)?;
            let out = kind!(col, Kind::String(out) => out);
            out.data.extend_from_slice(s.as_bytes());
            out.close().map_err(|_| Miss)?;
        }
        Op::Binary | Op::FixedBinary(_) => {
            let b = match op {
                Op::FixedBinary(n) => r.fixed(*n, "a fixed")?,
                _ => r.bytes()?,
            };
            let out = kind!(col, Kind::Binary(out) => out);
            out.data.extend_from_slice(b);
            out.close().map_err(|_| Miss)?;
        }
        Op::Fixed(n) => {
            let b = r.fixed(*n, "a fixed")?;
            let (width, data) = kind!(col, Kind::Fixed { width, data } => (*width, data));
            if width != b.len() {
                return Err(Miss);
            }
            data.extend_from_slice(b);
        }
        Op::Decimal { size } => {
            let v = unscaled(decimal_bytes(r, *size)?);
            let (precision, values) =
                kind!(col, Kind::Decimal { precision, values, .. } => (*precision, values));
            // More digits than the column holds: the JSON path says why.
            if v.unsigned_abs() >= POW10[usize::from(precision).min(38)] {
                return Err(Miss);
            }
            values.push(v);
        }
        Op::Date => {
            let d = r.int()?;
            if !(FIRST_DAY..=LAST_DAY).contains(&i64::from(d)) {
                return Err(Miss);
            }
            kind!(col, Kind::Date(out) => out.push(d));
        }
        Op::Time { millis } => {
            let us = match millis {
                true => i64::from(r.int()?) * 1000,
                false => r.long()?,
            };
            // A time past a day (or before it) has no `HH:MM:SS` text.
            if !(0..MICROS_PER_DAY).contains(&us) {
                return Err(Miss);
            }
            kind!(col, Kind::Time(out) => out.push(us));
        }
        Op::Uuid => {
            let u = uuid(r)?;
            kind!(col, Kind::Uuid(data) => data.extend_from_slice(&u));
        }
        Op::Union(node) => {
            let Node::Union { branches, .. } = cx.plan.node(*node) else {
                return Err(Miss);
            };
            let b = branch(r, branches)?;
            if matches!(cx.plan.node(b), Node::Null) {
                return null(col);
            }
            // The column keeps the branch's JSON text.
            let out = kind!(col, Kind::String(out) => out);
            render(cx.plan, b, r, &mut out.data)?;
            out.close().map_err(|_| Miss)?;
        }
        Op::Struct(fields) => {
            let st = kind!(col, Kind::Struct(st) => st);
            record(fields, st, r, cx)?;
        }
        Op::List { item, width } => {
            let l = kind!(col, Kind::List(l) => l);
            list(item, *width, l, r, cx)?;
        }
        Op::Map { value: op, node } => {
            let m = kind!(col, Kind::Map(m) => m);
            map(op, *node, m, r, cx)?;
        }
        Op::Json(node) => {
            cx.text.clear();
            render(cx.plan, *node, r, cx.text)?;
            let mut ctx = Ctx {
                cur: Cursor::new(cx.text),
                scratch: cx.scratch,
                epoch: cx.epoch,
                case_insensitive: cx.case_insensitive,
                // A declared Avro type is never a JSON type sent by mistake.
                coerce: Coercions::default(),
            };
            // The JSON reader commits the row itself.
            return parse::value(&mut ctx, col).map_err(|_| Miss);
        }
        Op::Nullable { .. } | Op::Long | Op::Str | Op::Timestamp { .. } | Op::Null => {
            return value(op, col, r, cx);
        }
    }
    col.commit_valid();
    Ok(())
}

/// Appends one array of `item`s (blocks of them, each at least `width`
/// bytes) to list column `l`.
fn list(
    item: &Op,
    width: usize,
    l: &mut ListCol,
    r: &mut Reader<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), Miss> {
    loop {
        let n = r.block(width)?;
        if n == 0 {
            break;
        }
        for _ in 0..n {
            value(item, &mut l.child, r, cx)?;
        }
    }
    l.offsets.push(child_offset(l.child.len).map_err(|_| Miss)?);
    Ok(())
}

/// Appends one map (values of plan node `node`, read with `op`) to map
/// column `m`.
fn map(
    op: &Op,
    node: NodeId,
    m: &mut MapCol,
    r: &mut Reader<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), Miss> {
    // The keys first, sorted as the JSON path writes them, then the values.
    let base = cx.entries.len();
    map_entries(cx.plan, node, r, cx.entries)?;
    let end = r.pos;
    let datum = r.datum();
    let key = |e: &(usize, usize, usize)| datum.get(e.0..e.0 + e.1).unwrap_or(&[]);
    for i in base..cx.entries.len() {
        let e = cx.entries[i];
        if cx
            .entries
            .get(i + 1)
            .is_some_and(|next| key(next) == key(&e))
        {
            continue;
        }
        let keys = kind!(m.keys, Kind::String(keys) => keys);
        keys.data.extend_from_slice(key(&e));
        keys.close().map_err(|_| Miss)?;
        m.keys.commit_valid();
        r.pos = e.2;
        value(op, &mut m.values, r, cx)?;
    }
    cx.entries.truncate(base);
    r.pos = end;
    m.offsets.push(child_offset(m.keys.len).map_err(|_| Miss)?);
    Ok(())
}

//! A writer's plan bound to one shredder's columns, once per batch: for each
//! Avro field the column it fills and the step that fills it. A step
//! exists only where the value lands exactly as its JSON text would; any
//! other pairing (a type the table holds differently) renders the value's
//! JSON for the shredder's own reader, so the outcome never differs.

use super::super::column::{Column, Kind, StructCol};
use super::super::lookup::Found;
use super::super::temporal::TsUnit;
use super::super::unknown::UnknownFields;
use crate::avro::plan::{Field, Node, NodeId, Plan, Unit};

/// The steps of a root record.
#[derive(Debug)]
pub(in crate::shred) struct Bound {
    pub root: Fields,
}

/// The steps of one record into one struct.
#[derive(Debug)]
pub(in crate::shred) struct Fields {
    /// One per Avro field, in the datum's order.
    pub slots: Box<[Slot]>,
    /// Columns no field fills: null in every record.
    pub missing: Box<[usize]>,
}

/// What becomes of one Avro field.
#[derive(Debug)]
pub(in crate::shred) enum Slot {
    /// It fills child `column` by `op`.
    Fill { column: usize, op: Op },
    /// The struct has no column for it: skipped, and reported as an
    /// unknown key by the name it has here unless unknown keys are ignored.
    Skip {
        node: NodeId,
        unknown: Option<Box<str>>,
    },
}

/// How one value reaches its column.
#[derive(Debug)]
pub(in crate::shred) enum Op {
    /// `null`.
    Null,
    Bool,
    Int,
    /// An `int` into a `long` column.
    IntToLong,
    /// A `long` (or a nanosecond timestamp, kept as its number).
    Long,
    /// A `long` into an `int` column, when it fits.
    LongToInt,
    Float,
    Double,
    Str,
    /// An enum's symbol into a string column.
    Enum(NodeId),
    Binary,
    /// A `fixed` of this size into a binary column.
    FixedBinary(usize),
    /// A `fixed` into a fixed column of its width.
    Fixed(usize),
    /// A decimal at the column's scale (on a `fixed` of `size`, else `bytes`).
    Decimal {
        size: Option<usize>,
    },
    /// Days, within the years `YYYY-MM-DD` text spells.
    Date,
    /// A time of day (`millis` for `time-millis`).
    Time {
        millis: bool,
    },
    /// An instant or wall time into a microsecond timestamp column.
    Timestamp {
        millis: bool,
    },
    Uuid,
    /// `["null", T]` either way round: branch `null` is null.
    Nullable {
        null: u8,
        value: Box<Op>,
    },
    /// A union of several types into a string column: the branch's JSON.
    Union(NodeId),
    Struct(Box<Fields>),
    /// An array's items; each takes `width` bytes at least.
    List {
        item: Box<Op>,
        width: usize,
    },
    /// A map's values (node `node`), into a map with string keys.
    Map {
        value: Box<Op>,
        node: NodeId,
    },
    /// Anything else: the value's JSON text, read by the shredder's JSON reader.
    Json(NodeId),
}

/// Binds `plan` to the columns under `root`; `None` when the JSON path
/// refuses every record of this schema (two fields for one column, a name
/// that matches several), which then takes that path.
pub(in crate::shred) fn bind(
    plan: &Plan,
    root: &StructCol,
    unknown: UnknownFields,
) -> Option<Bound> {
    let Node::Record(fields) = plan.node(plan.root()) else {
        return None;
    };
    Some(Bound {
        root: fields_of(plan, fields, root, unknown)?,
    })
}

fn fields_of(
    plan: &Plan,
    fields: &[Field],
    st: &StructCol,
    unknown: UnknownFields,
) -> Option<Fields> {
    let mut filled = vec![false; st.children.len()];
    let mut slots = Vec::with_capacity(fields.len());
    for f in fields {
        match st.lookup.find(f.name.as_bytes(), 0) {
            Found::Field(i) => {
                let child = st.children.get(i)?;
                if std::mem::replace(filled.get_mut(i)?, true) {
                    return None;
                }
                slots.push(Slot::Fill {
                    column: i,
                    op: op(plan, f.node, child, unknown)?,
                });
            }
            Found::Unknown => slots.push(Slot::Skip {
                node: f.node,
                unknown: (unknown != UnknownFields::Ignore).then(|| f.name.clone()),
            }),
            Found::Ambiguous => return None,
        }
    }
    let missing = filled
        .iter()
        .enumerate()
        .filter(|(_, f)| !**f)
        .map(|(i, _)| i)
        .collect();
    Some(Fields {
        slots: slots.into(),
        missing,
    })
}

fn op(plan: &Plan, node: NodeId, col: &Column, unknown: UnknownFields) -> Option<Op> {
    Some(match (plan.node(node), &col.kind) {
        (Node::Null, _) => Op::Null,
        (
            Node::Union {
                branches,
                null: Some(null),
            },
            _,
        ) => {
            let other = *branches.get(1 - usize::from(*null))?;
            Op::Nullable {
                null: *null,
                value: Box::new(op(plan, other, col, unknown)?),
            }
        }
        (Node::Union { .. }, Kind::String(_)) => Op::Union(node),
        (Node::Boolean, Kind::Bool(_)) => Op::Bool,
        (Node::Int, Kind::Int(_)) => Op::Int,
        (Node::Int, Kind::Long(_)) => Op::IntToLong,
        (
            Node::Long
            | Node::Timestamp {
                unit: Unit::Nanos, ..
            },
            Kind::Long(_),
        ) => Op::Long,
        (Node::Long, Kind::Int(_)) => Op::LongToInt,
        (Node::Float, Kind::Float(_)) => Op::Float,
        (Node::Double, Kind::Double(_)) => Op::Double,
        (Node::String, Kind::String(_)) => Op::Str,
        (Node::Enum(_), Kind::String(_)) => Op::Enum(node),
        (Node::Bytes, Kind::Binary(_)) => Op::Binary,
        (Node::Fixed(n), Kind::Binary(_)) => Op::FixedBinary(*n),
        (Node::Fixed(n), Kind::Fixed { width, .. }) if n == width => Op::Fixed(*n),
        (
            Node::Decimal {
                size,
                precision,
                scale,
            },
            Kind::Decimal { scale: s, .. },
        ) if *precision <= 38 && i64::try_from(*scale).ok() == Some(i64::from(*s)) => {
            Op::Decimal { size: *size }
        }
        (Node::Uuid, Kind::Uuid(_)) => Op::Uuid,
        (Node::Date, Kind::Date(_)) => Op::Date,
        (Node::TimeMillis, Kind::Time(_)) => Op::Time { millis: true },
        (Node::TimeMicros, Kind::Time(_)) => Op::Time { millis: false },
        (
            Node::Timestamp {
                unit: unit @ (Unit::Millis | Unit::Micros),
                ..
            },
            Kind::Timestamp {
                unit: TsUnit::Micros,
                ..
            },
        ) => Op::Timestamp {
            millis: *unit == Unit::Millis,
        },
        (Node::Record(fields), Kind::Struct(st)) => {
            Op::Struct(Box::new(fields_of(plan, fields, st, unknown)?))
        }
        (Node::Array { items, width }, Kind::List(l)) => Op::List {
            item: Box::new(op(plan, *items, &l.child, unknown)?),
            width: *width,
        },
        (Node::Map(values), Kind::Map(m)) if matches!(m.keys.kind, Kind::String(_)) => Op::Map {
            value: Box::new(op(plan, *values, &m.values, unknown)?),
            node: *values,
        },
        _ => Op::Json(node),
    })
}

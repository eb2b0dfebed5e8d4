//! A datum read through against its plan without keeping anything: what
//! the registry path refuses (a datum that is short, too long, or holds a
//! value its type forbids) is found here, when the record is opened, so it
//! is dead-lettered as undecodable before any table sees it.

use super::plan::{Node, NodeId, Plan, Unit};
use super::read::{DecodeError, Reader};

/// Where in a datum reading failed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Why.
    pub error: DecodeError,
    /// The field path (`ship.city`, `items[2]`), innermost last; empty for
    /// the datum as a whole.
    pub path: Vec<Seg>,
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A record's field, or a map's key.
    Key(Box<str>),
    /// An array's item.
    Index(usize),
}

impl Fault {
    /// The path as floe's record errors spell it: `a.b[2].c`.
    pub fn field(&self) -> String {
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

impl From<DecodeError> for Box<Fault> {
    #[cold]
    fn from(error: DecodeError) -> Self {
        Box::new(Fault {
            error,
            path: Vec::new(),
        })
    }
}

#[cold]
fn within(mut fault: Box<Fault>, seg: Seg) -> Box<Fault> {
    fault.path.insert(0, seg);
    fault
}

/// Reads `datum` through as `plan` says; `Ok` holds how many bytes follow
/// the value (0 for a datum that is exactly one).
pub fn check(plan: &Plan, datum: &[u8]) -> Result<usize, Box<Fault>> {
    let mut r = Reader::new(datum);
    skip(plan, plan.root(), &mut r)?;
    Ok(r.left())
}

/// Reads one map's blocks, skipping its values of plan node `values`, and
/// appends each entry as (key start, key length, value start) to
/// `entries`, sorted by key from `entries`' length on: a map is written the
/// way the registry path writes the hash map it decodes into, one entry per
/// key, the last one written winning. Leaves `r` after the map.
pub fn map_entries(
    plan: &Plan,
    values: NodeId,
    r: &mut Reader<'_>,
    entries: &mut Vec<(usize, usize, usize)>,
) -> Result<(), Box<Fault>> {
    let base = entries.len();
    loop {
        let n = r.block(1)?;
        if n == 0 {
            break;
        }
        for _ in 0..n {
            let key = r.str()?;
            entries.push((r.pos - key.len(), key.len(), r.pos));
            skip(plan, values, r)?;
        }
    }
    let datum = r.datum();
    let key = |e: &(usize, usize, usize)| datum.get(e.0..e.0 + e.1).unwrap_or(&[]);
    // Stable: of equal keys, the last written stays last.
    entries[base..].sort_by(|a, b| key(a).cmp(key(b)));
    Ok(())
}

/// Reads past one value of `node`, checking it as the registry path would.
#[inline]
pub fn skip(plan: &Plan, node: NodeId, r: &mut Reader<'_>) -> Result<(), Box<Fault>> {
    // A nullable scalar, the most common field, without a call per level.
    match plan.node(node) {
        Node::Union {
            branches,
            null: Some(_),
        } => {
            let b = branch(r, branches)?;
            match plan.node(b) {
                Node::Null => Ok(()),
                n if scalar(n, r)? => Ok(()),
                _ => skip_nested(plan, b, r),
            }
        }
        n if scalar(n, r)? => Ok(()),
        _ => skip_nested(plan, node, r),
    }
}

/// Reads past a value of a type with no parts; false for the others.
#[inline(always)]
fn scalar(node: &Node, r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    match node {
        Node::Null => {}
        Node::Boolean => {
            r.boolean()?;
        }
        Node::Int | Node::Date | Node::TimeMillis => {
            r.int()?;
        }
        Node::Long | Node::TimeMicros => {
            r.long()?;
        }
        Node::Timestamp { unit, .. } => {
            let v = r.long()?;
            if *unit == Unit::Millis && v.checked_mul(1000).is_none() {
                return Err(DecodeError::Timestamp(v));
            }
        }
        Node::String => {
            r.str()?;
        }
        Node::Float => {
            r.float()?;
        }
        Node::Double => {
            r.double()?;
        }
        Node::Bytes => {
            r.bytes()?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[inline(never)]
fn skip_nested(plan: &Plan, node: NodeId, r: &mut Reader<'_>) -> Result<(), Box<Fault>> {
    match plan.node(node) {
        n @ (Node::Null
        | Node::Boolean
        | Node::Int
        | Node::Date
        | Node::TimeMillis
        | Node::Long
        | Node::TimeMicros
        | Node::Timestamp { .. }
        | Node::String
        | Node::Float
        | Node::Double
        | Node::Bytes) => {
            scalar(n, r)?;
        }
        Node::Fixed(n) => {
            r.fixed(*n, "a fixed")?;
        }
        Node::Duration => {
            r.fixed(12, "a duration")?;
        }
        Node::Enum(symbols) => {
            enum_symbol(r, symbols)?;
        }
        Node::Decimal { size, .. } => {
            decimal_bytes(r, *size)?;
        }
        Node::Uuid => {
            uuid(r)?;
        }
        Node::Record(fields) => {
            for f in fields.iter() {
                skip(plan, f.node, r).map_err(|e| within(e, Seg::Key(f.name.clone())))?;
            }
        }
        Node::Array { items, width } => {
            let mut i = 0;
            loop {
                let n = r.block(*width)?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    skip(plan, *items, r).map_err(|e| within(e, Seg::Index(i)))?;
                    i += 1;
                }
            }
        }
        Node::Map(values) => loop {
            // A key takes a byte at least, its length.
            let n = r.block(1)?;
            if n == 0 {
                break;
            }
            for _ in 0..n {
                let key = r.str()?;
                skip(plan, *values, r)
                    .map_err(|e| within(e, Seg::Key(String::from_utf8_lossy(key).into())))?;
            }
        },
        Node::Union { branches, .. } => {
            let b = branch(r, branches)?;
            skip(plan, b, r)?;
        }
    }
    Ok(())
}

/// The symbol of an enum's index.
#[inline]
pub fn enum_symbol<'s>(
    r: &mut Reader<'_>,
    symbols: &'s [Box<str>],
) -> Result<&'s str, DecodeError> {
    let index = r.int()?;
    usize::try_from(index)
        .ok()
        .and_then(|i| symbols.get(i))
        .map(|s| &**s)
        .ok_or(DecodeError::Enum {
            index: index.into(),
            symbols: symbols.len(),
        })
}

/// The node of a union's branch.
#[inline(always)]
pub fn branch(r: &mut Reader<'_>, branches: &[NodeId]) -> Result<NodeId, DecodeError> {
    let index = r.long()?;
    usize::try_from(index)
        .ok()
        .and_then(|i| branches.get(i))
        .copied()
        .ok_or(DecodeError::Union {
            index,
            branches: branches.len(),
        })
}

/// A decimal's big-endian two's-complement bytes: 1 to 16 of them, as an
/// Iceberg decimal (38 digits) holds.
#[inline]
pub fn decimal_bytes<'a>(r: &mut Reader<'a>, size: Option<usize>) -> Result<&'a [u8], DecodeError> {
    let bytes = match size {
        Some(n) => r.fixed(n, "a decimal")?,
        None => r.bytes()?,
    };
    match bytes.len() {
        0 => Err(DecodeError::EmptyDecimal),
        1..=16 => Ok(bytes),
        n => Err(DecodeError::WideDecimal(n)),
    }
}

/// The unscaled value of a decimal's bytes (1 to 16 of them).
#[inline]
pub fn unscaled(bytes: &[u8]) -> i128 {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = if negative { [0xffu8; 16] } else { [0u8; 16] };
    let n = bytes.len().min(16);
    buf[16 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    i128::from_be_bytes(buf)
}

/// A `uuid`: as apache-avro reads it, `bytes` that are the UUID itself when
/// 16 long, else its text in any form `uuid` parses.
#[inline]
pub fn uuid(r: &mut Reader<'_>) -> Result<[u8; 16], DecodeError> {
    let bytes = r.bytes()?;
    if let Ok(raw) = <[u8; 16]>::try_from(bytes) {
        return Ok(raw);
    }
    let text = std::str::from_utf8(bytes).map_err(DecodeError::Utf8)?;
    uuid::Uuid::parse_str(text)
        .map(|u| *u.as_bytes())
        .map_err(|_| DecodeError::Uuid)
}

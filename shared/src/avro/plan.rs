//! A writer's schema compiled once, when its id is first seen, into the flat
//! tree of nodes the datum walkers follow: names resolved, logical types
//! settled, unions marked nullable or not, so reading a datum looks nothing
//! up and allocates nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use apache_avro::Schema as AvroSchema;
use apache_avro::schema::Name;

use super::types::{MAX_DEPTH, nullable, resolve};

/// Where a node sits in its plan.
pub type NodeId = u32;

/// A writer's schema as the steps that read its binary encoding.
#[derive(Debug)]
pub struct Plan {
    nodes: Vec<Node>,
    root: NodeId,
    /// Tells plans apart for the shredders that bind them to their columns.
    id: u64,
}

/// The unit a timestamp's long counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Millis,
    /// Microseconds.
    Micros,
    /// Nanoseconds.
    Nanos,
}

/// One type of the schema, as read from a datum.
#[derive(Debug)]
pub enum Node {
    /// `null`: no bytes.
    Null,
    /// `boolean`.
    Boolean,
    /// `int`.
    Int,
    /// `long`.
    Long,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `bytes`.
    Bytes,
    /// `string`.
    String,
    /// `fixed` of this many bytes.
    Fixed(usize),
    /// `enum`: its symbols.
    Enum(Box<[Box<str>]>),
    /// `decimal` on `bytes` (`size` none) or a `fixed` of `size` bytes.
    Decimal {
        /// The fixed size, when on a `fixed`.
        size: Option<usize>,
        /// Digits in all.
        precision: usize,
        /// Digits after the point.
        scale: usize,
    },
    /// `uuid`: 16 bytes, or the UUID's text.
    Uuid,
    /// `date`: days since 1970-01-01.
    Date,
    /// `time-millis`.
    TimeMillis,
    /// `time-micros`.
    TimeMicros,
    /// `timestamp-*` (an instant) or `local-timestamp-*` (wall time).
    Timestamp {
        /// What the long counts.
        unit: Unit,
        /// Wall time, no zone.
        local: bool,
    },
    /// `duration`: three little-endian u32s (months, days, millis).
    Duration,
    /// `record`: its fields in order.
    Record(Box<[Field]>),
    /// `array`: its items, and the fewest bytes one takes.
    Array {
        /// The items' node.
        items: NodeId,
        /// Bytes an item takes at least; 0 for a type with no bytes (`null`).
        width: usize,
    },
    /// `map` with string keys: its values.
    Map(NodeId),
    /// A union: its branches, and whether it is `["null", T]` either way round.
    Union {
        /// The branches, in order.
        branches: Box<[NodeId]>,
        /// The branch that is `null` in a two-branch union with one.
        null: Option<u8>,
    },
}

/// A record's field.
#[derive(Debug)]
pub struct Field {
    /// Its name, as the record spells it.
    pub name: Box<str>,
    /// Its type.
    pub node: NodeId,
}

/// Why a schema has no plan (its records take the JSON path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoPlan(String);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Plan {
    /// The plan of `schema`, a record, with its named types `names`.
    pub fn compile(schema: &AvroSchema, names: &HashMap<Name, AvroSchema>) -> Result<Plan, NoPlan> {
        let mut c = Compiler {
            nodes: Vec::new(),
            names,
            named: HashMap::new(),
        };
        let root = c.node(schema, 0)?;
        if !matches!(c.nodes.get(root as usize), Some(Node::Record(_))) {
            return Err(NoPlan("not a record".into()));
        }
        Ok(Plan {
            nodes: c.nodes,
            root,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The record every datum is.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// Node `id`; a missing one reads as `null`, which no plan this module
    /// builds ever holds.
    #[inline(always)]
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(id as usize).unwrap_or(&Node::Null)
    }

    /// Unique among the plans of this process.
    pub fn id(&self) -> u64 {
        self.id
    }
}

struct Compiler<'s> {
    nodes: Vec<Node>,
    names: &'s HashMap<Name, AvroSchema>,
    /// Named types compiled so far: a schema refers to them by name.
    named: HashMap<Name, NodeId>,
}

impl Compiler<'_> {
    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    /// Compiles `schema`, `depth` levels down, into a node of the plan.
    ///
    /// Long because it is one match with an arm per Avro schema kind and
    /// logical type, each naming the node that reads it.
    fn node(&mut self, schema: &AvroSchema, depth: usize) -> Result<NodeId, NoPlan> {
        if depth > MAX_DEPTH {
            return Err(NoPlan(format!("nests deeper than {MAX_DEPTH} levels")));
        }
        if let AvroSchema::Ref { name } = schema
            && let Some(&id) = self.named.get(name)
        {
            return Ok(id);
        }
        let schema = resolve(schema, self.names).map_err(NoPlan)?;
        let node = match schema {
            AvroSchema::Null => Node::Null,
            AvroSchema::Boolean => Node::Boolean,
            AvroSchema::Int => Node::Int,
            AvroSchema::Long => Node::Long,
            AvroSchema::Float => Node::Float,
            AvroSchema::Double => Node::Double,
            AvroSchema::Bytes => Node::Bytes,
            AvroSchema::String => Node::String,
            AvroSchema::Fixed(f) => Node::Fixed(f.size),
            AvroSchema::Enum(e) => {
                Node::Enum(e.symbols.iter().map(|s| s.as_str().into()).collect())
            }
            AvroSchema::Decimal(d) => Node::Decimal {
                size: match &*d.inner {
                    AvroSchema::Fixed(f) => Some(f.size),
                    AvroSchema::Bytes => None,
                    other => return Err(NoPlan(format!("a decimal on {other:?}"))),
                },
                precision: d.precision,
                scale: d.scale,
            },
            // apache-avro's own arbitrary-precision encoding: rare enough
            // to leave to the JSON path.
            AvroSchema::BigDecimal => return Err(NoPlan("a big-decimal".into())),
            AvroSchema::Uuid => Node::Uuid,
            AvroSchema::Date => Node::Date,
            AvroSchema::TimeMillis => Node::TimeMillis,
            AvroSchema::TimeMicros => Node::TimeMicros,
            AvroSchema::TimestampMillis => timestamp(Unit::Millis, false),
            AvroSchema::TimestampMicros => timestamp(Unit::Micros, false),
            AvroSchema::TimestampNanos => timestamp(Unit::Nanos, false),
            AvroSchema::LocalTimestampMillis => timestamp(Unit::Millis, true),
            AvroSchema::LocalTimestampMicros => timestamp(Unit::Micros, true),
            AvroSchema::LocalTimestampNanos => timestamp(Unit::Nanos, true),
            AvroSchema::Duration => Node::Duration,
            AvroSchema::Record(r) => {
                let mut fields = Vec::with_capacity(r.fields.len());
                for f in &r.fields {
                    fields.push(Field {
                        name: f.name.as_str().into(),
                        node: self.node(&f.schema, depth + 1)?,
                    });
                }
                Node::Record(fields.into())
            }
            AvroSchema::Array(a) => {
                let items = self.node(&a.items, depth + 1)?;
                Node::Array {
                    items,
                    width: self.width(items, 0),
                }
            }
            AvroSchema::Map(m) => Node::Map(self.node(&m.types, depth + 1)?),
            AvroSchema::Union(u) => {
                let mut branches = Vec::with_capacity(u.variants().len());
                for v in u.variants() {
                    branches.push(self.node(v, depth + 1)?);
                }
                // Which branch of a `["null", T]` union is the null one.
                let null = nullable(u)
                    .map(|_| u8::from(!matches!(u.variants().first(), Some(AvroSchema::Null))));
                Node::Union {
                    branches: branches.into(),
                    null,
                }
            }
            AvroSchema::Ref { name } => {
                return Err(NoPlan(format!("{name:?} refers to itself")));
            }
        };
        let id = self.push(node);
        match schema {
            AvroSchema::Record(r) => {
                self.named.insert(r.name.clone(), id);
            }
            AvroSchema::Enum(e) => {
                self.named.insert(e.name.clone(), id);
            }
            AvroSchema::Fixed(f) => {
                self.named.insert(f.name.clone(), id);
            }
            _ => {}
        }
        Ok(id)
    }

    /// The fewest bytes a value of node `id` takes.
    fn width(&self, id: NodeId, depth: usize) -> usize {
        match self.nodes.get(id as usize) {
            None | Some(Node::Null) => 0,
            Some(Node::Fixed(n)) => *n,
            Some(Node::Float) => 4,
            Some(Node::Double) => 8,
            Some(Node::Duration) => 12,
            Some(Node::Decimal { size: Some(n), .. }) => *n,
            Some(Node::Record(fields)) if depth < MAX_DEPTH => fields
                .iter()
                .map(|f| self.width(f.node, depth + 1))
                .fold(0usize, usize::saturating_add),
            Some(Node::Record(_)) => 0,
            // A varint, a length or a branch: one byte at least.
            Some(_) => 1,
        }
    }
}

fn timestamp(unit: Unit, local: bool) -> Node {
    Node::Timestamp { unit, local }
}

//! Registry Avro read straight into columns against the JSON path it
//! replaces: for random writer schemas (nested, nullable, logical types,
//! general unions, named references), random datums written by an encoder
//! of the test's own (several blocks, duplicate map keys, every uuid form),
//! tables of the declared types and of other types, and two writer versions
//! against one table, every record must give the same row or the same
//! error, and the batches the same bytes. Damaged datums must give an
//! error, never a panic.

use std::sync::Arc;

use iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type};
use serde_json::{Value as J, json};

use super::super::{EpochUnit, ShredOptions, Shredder, UnknownFields};
use crate::avro::Decoder;
use crate::avro::check::check;
use crate::avro::plan::{Node, NodeId, Plan, Unit};
use crate::avro::read::{DecodeError, Reader};
use crate::avro::render::render;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True `pct` percent of the time.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------
// Random writer schemas.

struct Gen {
    rng: Rng,
    names: usize,
    /// Named types defined so far, which a later type may refer to.
    named: Vec<String>,
}

const FIELD_NAMES: [&str; 10] = ["id", "a", "b", "Name", "name", "x_1", "v", "ts", "_u", "k"];

impl Gen {
    fn name(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    fn record(&mut self, depth: usize) -> J {
        let name = self.name("R");
        let n = 1 + self.rng.below(if depth == 0 { 7 } else { 4 });
        let mut fields = Vec::new();
        let mut used = Vec::new();
        for _ in 0..n {
            let f = *self.rng.pick(&FIELD_NAMES);
            if used.contains(&f) {
                continue;
            }
            used.push(f);
            fields.push(json!({"name": f, "type": self.ty(depth + 1)}));
        }
        self.named.push(name.clone());
        json!({"type": "record", "name": name, "fields": fields})
    }

    fn ty(&mut self, depth: usize) -> J {
        match self.rng.below(10) {
            0..=2 => {
                let inner = self.plain(depth);
                if self.rng.chance(50) {
                    json!(["null", inner])
                } else {
                    json!([inner, "null"])
                }
            }
            3 => self.union(depth),
            _ => self.plain(depth),
        }
    }

    /// A union of several types: one of each kind at most.
    fn union(&mut self, depth: usize) -> J {
        let mut branches = Vec::new();
        let kinds = [
            "null", "boolean", "int", "long", "double", "string", "bytes",
        ];
        for k in kinds {
            if self.rng.chance(35) {
                branches.push(json!(k));
            }
        }
        if depth < 3 && self.rng.chance(30) {
            branches.push(self.record(depth + 1));
        }
        if depth < 3 && self.rng.chance(20) {
            branches.push(json!({"type": "array", "items": "long"}));
        }
        if depth < 3 && self.rng.chance(20) {
            branches.push(json!({"type": "map", "values": ["null", "string"]}));
        }
        if branches.is_empty() {
            branches.push(json!("string"));
        }
        json!(branches)
    }

    fn plain(&mut self, depth: usize) -> J {
        let deep = depth < 3;
        match self.rng.below(if deep { 30 } else { 24 }) {
            0 => json!("boolean"),
            1 => json!("int"),
            2 | 3 => json!("long"),
            4 => json!("float"),
            5 => json!("double"),
            6 | 7 => json!("string"),
            8 => json!("bytes"),
            9 => json!({"type": "fixed", "name": self.name("F"), "size": 1 + self.rng.below(8)}),
            10 => {
                let n = 1 + self.rng.below(4);
                let symbols: Vec<String> = (0..n).map(|i| format!("S{i}")).collect();
                json!({"type": "enum", "name": self.name("E"), "symbols": symbols})
            }
            11 => {
                let p = 1 + self.rng.below(40);
                let s = self.rng.below(p + 1);
                json!({"type": "bytes", "logicalType": "decimal", "precision": p, "scale": s})
            }
            12 => {
                let size = 1 + self.rng.below(17);
                let p = 1 + self.rng.below(38);
                let s = self.rng.below(p + 1);
                json!({"type": "fixed", "name": self.name("D"), "size": size,
                    "logicalType": "decimal", "precision": p, "scale": s})
            }
            13 => json!({"type": "string", "logicalType": "uuid"}),
            14 => json!({"type": "int", "logicalType": "date"}),
            15 => json!({"type": "int", "logicalType": "time-millis"}),
            16 => json!({"type": "long", "logicalType": "time-micros"}),
            17 => json!({"type": "long", "logicalType": *self.rng.pick(&[
                "timestamp-millis", "timestamp-micros", "timestamp-nanos",
                "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos",
            ])}),
            18 => json!({"type": "long", "logicalType": "timestamp-micros"}),
            19 => {
                json!({"type": "fixed", "name": self.name("U"), "size": 12, "logicalType": "duration"})
            }
            20 => json!("null"),
            21..=23 => match self.named.is_empty() {
                true => json!("long"),
                false => json!(self.rng.pick(&self.named).clone()),
            },
            24 | 25 => self.record(depth + 1),
            26 | 27 => json!({"type": "array", "items": self.ty(depth + 1)}),
            _ => json!({"type": "map", "values": self.ty(depth + 1)}),
        }
    }

    /// A second version of `v1`: fields dropped, added, or retyped as a
    /// producer's schema evolves.
    fn evolve(&mut self, v1: &J) -> J {
        let mut v2 = v1.clone();
        let name = self.name("R");
        v2["name"] = json!(name);
        let Some(fields) = v2["fields"].as_array_mut() else {
            return v2;
        };
        for f in fields.iter_mut() {
            let widened = match &f["type"] {
                J::String(t) if t == "int" => Some(json!("long")),
                J::String(t) if t == "long" => Some(json!("int")),
                J::String(t) if t == "float" => Some(json!("double")),
                J::String(t) if t == "double" => Some(json!("float")),
                J::String(t) if self.rng.chance(30) => Some(json!(["null", t])),
                _ => None,
            };
            if let Some(t) = widened
                && self.rng.chance(50)
            {
                f["type"] = t;
            }
        }
        if fields.len() > 1 && self.rng.chance(40) {
            let i = self.rng.below(fields.len() as u64) as usize;
            fields.remove(i);
        }
        let extra = format!("added_{}", self.names);
        let t = self.ty(1);
        fields.push(json!({"name": extra, "type": t}));
        v2
    }
}

// ---------------------------------------------------------------------------
// Random datums, encoded by the test itself from the plan.

fn zig(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push(0x80 | (z & 0x7f) as u8);
        z >>= 7;
    }
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    zig(b.len() as i64, out);
    out.extend_from_slice(b);
}

fn int(rng: &mut Rng) -> i32 {
    match rng.below(8) {
        0 => i32::MIN,
        1 => i32::MAX,
        2 => 0,
        3 => -1,
        _ => (rng.next() as i32) >> rng.below(31),
    }
}

fn long(rng: &mut Rng) -> i64 {
    match rng.below(10) {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => 0,
        3 => i64::from(i32::MAX) + 1,
        _ => (rng.next() as i64) >> rng.below(63),
    }
}

/// An instant in `unit`s: mostly this century, sometimes at the ends of time.
fn instant(rng: &mut Rng, per_sec: i64) -> i64 {
    match rng.below(12) {
        0 => long(rng),
        1 => (-62_167_219_200i64)
            .saturating_mul(per_sec)
            .saturating_sub(rng.below(2) as i64),
        2 => 253_402_300_800i64.saturating_mul(per_sec) - rng.below(2) as i64,
        _ => {
            (1_700_000_000 + rng.below(200_000_000) as i64) * per_sec
                + rng.below(per_sec as u64) as i64
        }
    }
}

const STRINGS: [&str; 9] = [
    "",
    "click",
    "héllo wörld",
    "quote \" backslash \\ tab \t nl \n",
    "\u{1} ctl",
    "🦀 crab",
    "2026-11-30T10:00:00Z",
    "12.50",
    "a rather longer string that goes on for a while, to pass sixty-four bytes",
];

fn text(rng: &mut Rng) -> Vec<u8> {
    rng.pick(&STRINGS).as_bytes().to_vec()
}

/// Writes a random value of `node`; `tame` keeps to values every column of
/// the declared type takes (this century, within a day, a few digits).
fn encode(plan: &Plan, node: NodeId, rng: &mut Rng, out: &mut Vec<u8>, depth: usize, tame: bool) {
    if tame {
        match plan.node(node) {
            Node::Int | Node::Long => return zig(rng.below(1000) as i64 - 500, out),
            Node::Date => return zig(rng.below(40_000) as i64 - 10_000, out),
            Node::TimeMillis => return zig(rng.below(86_400_000) as i64, out),
            Node::TimeMicros => return zig(rng.below(86_400_000_000) as i64, out),
            Node::Timestamp { unit, .. } => {
                let per_sec = match unit {
                    Unit::Millis => 1_000,
                    Unit::Micros => 1_000_000,
                    Unit::Nanos => 1_000_000_000,
                };
                return zig((1_700_000_000 + rng.below(1000) as i64) * per_sec, out);
            }
            Node::Decimal { size: None, .. } => {
                return bytes(&[rng.below(100) as u8], out);
            }
            Node::Uuid => {
                let u = uuid::Uuid::from_u64_pair(rng.next(), rng.next());
                return bytes(u.hyphenated().to_string().as_bytes(), out);
            }
            _ => {}
        }
    }
    match plan.node(node) {
        Node::Null => {}
        Node::Boolean => out.push(rng.below(2) as u8),
        Node::Int => zig(int(rng).into(), out),
        Node::Long => zig(long(rng), out),
        Node::Float => {
            let f = match rng.below(8) {
                0 => f32::NAN,
                1 => f32::from_bits(rng.next() as u32),
                2 => -0.0,
                3 => f32::INFINITY,
                4 => 0.1,
                _ => (rng.next() % 100_000) as f32 / 7.0,
            };
            out.extend_from_slice(&f.to_le_bytes());
        }
        Node::Double => {
            let f = match rng.below(8) {
                0 => f64::from_bits(0x7ff8_0000_dead_beef),
                1 => f64::from_bits(rng.next()),
                2 => -0.0,
                3 => f64::NEG_INFINITY,
                4 => 1e300,
                _ => (rng.next() % 1_000_000) as f64 / 13.0,
            };
            out.extend_from_slice(&f.to_le_bytes());
        }
        Node::Bytes => {
            let n = rng.below(20) as usize;
            let b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            bytes(&b, out);
        }
        Node::String => bytes(&text(rng), out),
        Node::Fixed(n) | Node::Decimal { size: Some(n), .. } => {
            // A fixed decimal of 17 bytes or more is wider than 38 digits.
            let sign = if rng.chance(50) { 0xff } else { 0 };
            for i in 0..*n {
                out.push(if i + 2 < *n && rng.chance(60) {
                    sign
                } else {
                    rng.next() as u8
                });
            }
        }
        Node::Duration => out.extend((0..12).map(|_| rng.next() as u8)),
        Node::Enum(symbols) => zig(rng.below(symbols.len() as u64) as i64, out),
        Node::Decimal { size: None, .. } => {
            let n = match rng.below(20) {
                0 => 0,
                1 => 17,
                _ => 1 + rng.below(16) as usize,
            };
            let sign = if rng.chance(50) { 0xff } else { 0 };
            let b: Vec<u8> = (0..n)
                .map(|i| {
                    if i + 2 < n && rng.chance(60) {
                        sign
                    } else {
                        rng.next() as u8
                    }
                })
                .collect();
            bytes(&b, out);
        }
        Node::Uuid => {
            let u = uuid::Uuid::from_u64_pair(rng.next(), rng.next());
            match rng.below(7) {
                0 => bytes(u.as_bytes(), out),
                1 => bytes(u.simple().to_string().as_bytes(), out),
                2 => bytes(u.braced().to_string().as_bytes(), out),
                3 => bytes(u.urn().to_string().as_bytes(), out),
                4 => bytes(u.hyphenated().to_string().to_uppercase().as_bytes(), out),
                _ => bytes(u.hyphenated().to_string().as_bytes(), out),
            }
        }
        Node::Date => zig(
            match rng.below(6) {
                0 => i64::from(int(rng)),
                1 => -719_528 - rng.below(2) as i64,
                2 => 2_932_896 + rng.below(2) as i64,
                _ => rng.below(40_000) as i64 - 10_000,
            },
            out,
        ),
        Node::TimeMillis => zig(
            match rng.below(6) {
                0 => i64::from(int(rng)),
                1 => 86_400_000 - rng.below(2) as i64,
                _ => rng.below(86_400_000) as i64,
            },
            out,
        ),
        Node::TimeMicros => zig(
            match rng.below(6) {
                0 => long(rng),
                1 => 86_400_000_000 - rng.below(2) as i64,
                _ => rng.below(86_400_000_000) as i64,
            },
            out,
        ),
        Node::Timestamp { unit, .. } => zig(
            instant(
                rng,
                match unit {
                    Unit::Millis => 1_000,
                    Unit::Micros => 1_000_000,
                    Unit::Nanos => 1_000_000_000,
                },
            ),
            out,
        ),
        Node::Record(fields) => {
            for f in fields.iter() {
                encode(plan, f.node, rng, out, depth + 1, tame);
            }
        }
        Node::Array { items, .. } => {
            for _ in 0..rng.below(3) {
                let n = 1 + rng.below(if depth > 4 { 1 } else { 3 });
                let mut block = Vec::new();
                for _ in 0..n {
                    encode(plan, *items, rng, &mut block, depth + 1, tame);
                }
                // A negative count carries the block's size.
                if rng.chance(30) {
                    zig(-(n as i64), out);
                    zig(block.len() as i64, out);
                } else {
                    zig(n as i64, out);
                }
                out.extend(block);
            }
            out.push(0);
        }
        Node::Map(values) => {
            for _ in 0..rng.below(3) {
                let n = 1 + rng.below(if depth > 4 { 1 } else { 3 });
                zig(n as i64, out);
                for _ in 0..n {
                    // Few keys, so some repeat: the last one written wins.
                    bytes(rng.pick(&["k", "K", "a", "zz", "é", ""]).as_bytes(), out);
                    encode(plan, *values, rng, out, depth + 1, tame);
                }
            }
            out.push(0);
        }
        Node::Union { branches, .. } => {
            let b = rng.below(branches.len() as u64);
            zig(b as i64, out);
            encode(plan, branches[b as usize], rng, out, depth + 1, tame);
        }
    }
}

fn datum(decoder: &Decoder, rng: &mut Rng) -> Vec<u8> {
    let plan = decoder.plan().expect("a plan");
    let mut out = Vec::new();
    encode(plan, plan.root(), rng, &mut out, 0, false);
    out
}

fn tame_datum(decoder: &Decoder, rng: &mut Rng) -> Vec<u8> {
    let plan = decoder.plan().expect("a plan");
    let mut out = Vec::new();
    encode(plan, plan.root(), rng, &mut out, 0, true);
    out
}

// ---------------------------------------------------------------------------
// Tables: the declared types, or others.

fn schema_of(fields: Vec<NestedFieldRef>) -> Option<Schema> {
    Schema::builder().with_fields(fields).build().ok()
}

const OTHER_TYPES: [PrimitiveType; 11] = [
    PrimitiveType::Int,
    PrimitiveType::Long,
    PrimitiveType::Float,
    PrimitiveType::Double,
    PrimitiveType::String,
    PrimitiveType::Boolean,
    PrimitiveType::Date,
    PrimitiveType::Timestamptz,
    PrimitiveType::TimestampNs,
    PrimitiveType::Binary,
    PrimitiveType::Uuid,
];

/// `st` with some fields required and some primitives of another type.
fn mutate(st: &StructType, rng: &mut Rng) -> StructType {
    StructType::new(
        st.fields()
            .iter()
            .map(|f| {
                let mut f: NestedField = (**f).clone();
                if rng.chance(15) {
                    f.required = true;
                }
                match &*f.field_type {
                    Type::Primitive(_) if rng.chance(20) => {
                        f.field_type = Box::new(Type::Primitive(if rng.chance(20) {
                            let precision = 1 + rng.below(38) as u32;
                            PrimitiveType::Decimal {
                                precision,
                                scale: rng.below(u64::from(precision.min(5)) + 1) as u32,
                            }
                        } else {
                            rng.pick(&OTHER_TYPES).clone()
                        }));
                    }
                    Type::Struct(inner) => {
                        f.field_type = Box::new(Type::Struct(mutate(inner, rng)));
                    }
                    _ => {}
                }
                Arc::new(f)
            })
            .collect(),
    )
}

fn options(rng: &mut Rng) -> ShredOptions {
    ShredOptions {
        case_insensitive: rng.chance(30),
        epoch_unit: *rng.pick(&[EpochUnit::Milliseconds, EpochUnit::Microseconds]),
        unknown_fields: *rng.pick(&[
            UnknownFields::Ignore,
            UnknownFields::Collect,
            UnknownFields::Reject,
        ]),
        ..ShredOptions::default()
    }
}

/// What a differential run saw.
#[derive(Default, Debug)]
struct Seen {
    schemas: usize,
    records: usize,
    direct: usize,
    undecodable: usize,
    rejected: usize,
}

/// Pushes every datum both ways into one table and compares everything.
fn compare(table: &Schema, opts: &ShredOptions, datums: &[(&Decoder, Vec<u8>)], seen: &mut Seen) {
    let mut direct = Shredder::new(table, opts.clone()).expect("shredder");
    let mut json = Shredder::new(table, opts.clone()).expect("shredder");
    for round in 0..2 {
        for (decoder, datum) in datums {
            let expected = decoder.json(datum);
            let Ok(text) = expected else {
                // The opener dead-letters it with the check's reason.
                assert_eq!(decoder.check(datum).err(), expected.err());
                seen.undecodable += 1;
                continue;
            };
            assert_eq!(decoder.check(datum), Ok(()));
            // The renderer writes what the JSON path writes, byte for byte.
            let plan = decoder.plan().expect("a plan");
            let mut rendered = Vec::new();
            render(plan, plan.root(), &mut Reader::new(datum), &mut rendered).expect("renders");
            assert_eq!(
                String::from_utf8_lossy(&rendered),
                String::from_utf8_lossy(&text)
            );
            let a = direct.push_avro(decoder, datum);
            let b = json.push(&text);
            assert_eq!(
                a,
                b,
                "record {}\nschema {}\ntable {table:?}",
                String::from_utf8_lossy(&text),
                decoder.label
            );
            seen.records += 1;
            seen.rejected += usize::from(b.is_err());
        }
        assert_eq!(direct.take_unknown(), json.take_unknown());
        let (a, b) = (
            direct.finish().expect("batch"),
            json.finish().expect("batch"),
        );
        assert_eq!(a, b, "round {round}, table {table:?}");
    }
    seen.direct += direct.avro.direct;
}

fn decoder(label: &str, schema: &J) -> Option<Decoder> {
    let d = Decoder::new(label.into(), &schema.to_string()).ok()?;
    d.plan()?;
    Some(d)
}

#[test]
fn direct_avro_matches_the_json_path() {
    let mut g = Gen {
        rng: Rng(0x5eed_0fa7_7000),
        names: 0,
        named: Vec::new(),
    };
    let mut seen = Seen::default();
    for case in 0..600 {
        g.named.clear();
        let v1 = g.record(0);
        let v2 = g.evolve(&v1);
        let Some(d1) = decoder("schema id 1", &v1) else {
            continue;
        };
        let d2 = decoder("schema id 2", &v2);
        seen.schemas += 1;
        let mut datums: Vec<(&Decoder, Vec<u8>)> = Vec::new();
        for _ in 0..30 {
            let d = match &d2 {
                Some(d2) if g.rng.chance(40) => d2,
                _ => &d1,
            };
            datums.push((d, datum(d, &mut g.rng)));
        }
        let declared = &d1.declared;
        let tables = [
            schema_of(declared.fields().to_vec()),
            schema_of(mutate(declared, &mut g.rng).fields().to_vec()),
        ];
        for table in tables.iter().flatten() {
            let opts = match case % 3 {
                0 => ShredOptions::default(),
                _ => options(&mut g.rng),
            };
            compare(table, &opts, &datums, &mut seen);
        }
    }
    // The comparison means something only if most schemas build, most
    // records land, and the direct path takes most of them itself.
    assert!(seen.schemas > 500, "{seen:?}");
    assert!(seen.records > 10 * seen.undecodable, "{seen:?}");
    assert!(seen.direct * 2 > seen.records - seen.rejected, "{seen:?}");
}

/// The benchmark's event and the registry test's order take the direct path
/// for every record.
#[test]
fn common_shapes_take_the_direct_path() {
    let event = json!({"type":"record","name":"Event","fields":[
        {"name":"id","type":"long"},
        {"name":"user_id","type":["null","long"]},
        {"name":"event_type","type":["null","string"]},
        {"name":"value","type":["null","long"]},
        {"name":"info","type":["null","string"]},
        {"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}
    ]});
    let order = json!({"type":"record","name":"Order","namespace":"shop","fields":[
        {"name":"id","type":"long"},
        {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
        {"name":"day","type":{"type":"int","logicalType":"date"}},
        {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"local","type":{"type":"long","logicalType":"local-timestamp-micros"}},
        {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
        {"name":"note","type":["null","string"],"default":null},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"attrs","type":{"type":"map","values":"double"}},
        {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
        {"name":"raw","type":"bytes"},
        {"name":"ship","type":{"type":"record","name":"Ship","fields":[
            {"name":"city","type":"string"},
            {"name":"at","type":{"type":"int","logicalType":"time-millis"}}]}},
        {"name":"bill","type":["null","Ship"]}
    ]});
    let mut rng = Rng(42);
    for schema in [event, order] {
        let d = decoder("schema id 1", &schema).expect("decoder");
        let table = schema_of(d.declared.fields().to_vec()).expect("table");
        let mut shredder = Shredder::new(&table, ShredOptions::default()).expect("shredder");
        for _ in 0..200 {
            let datum = tame_datum(&d, &mut rng);
            d.check(&datum).expect("checked");
            shredder.push_avro(&d, &datum).expect("pushed");
        }
        assert_eq!(shredder.avro.direct, 200, "{}", schema["name"]);
    }
}

/// Truncated, bit-flipped and random datums: the check refuses what the
/// registry path refuses (and, deliberately, more), the shredder returns
/// an error and stays usable, and nothing panics.
#[test]
fn damaged_datums_are_errors_never_panics() {
    let mut g = Gen {
        rng: Rng(0xbad_da7a),
        names: 0,
        named: Vec::new(),
    };
    let mut refused = 0;
    let mut stricter = 0;
    for _ in 0..150 {
        g.named.clear();
        let v1 = g.record(0);
        let Some(d) = decoder("schema id 1", &v1) else {
            continue;
        };
        let plan = d.plan().expect("plan");
        let Some(table) = schema_of(d.declared.fields().to_vec()) else {
            continue;
        };
        let mut direct = Shredder::new(&table, ShredOptions::default()).expect("shredder");
        let mut json = Shredder::new(&table, ShredOptions::default()).expect("shredder");
        for _ in 0..4 {
            let good = datum(&d, &mut g.rng);
            let mut damaged: Vec<Vec<u8>> = (0..good.len().min(80))
                .map(|n| good[..n].to_vec())
                .collect();
            for _ in 0..8 {
                let mut flipped = good.clone();
                if !flipped.is_empty() {
                    let i = g.rng.below(flipped.len() as u64) as usize;
                    flipped[i] ^= 1 << g.rng.below(8);
                }
                damaged.push(flipped);
            }
            for n in [1, 5, 16, 64] {
                damaged.push((0..n).map(|_| g.rng.next() as u8).collect());
            }
            let mut long = good.clone();
            long.push(0);
            damaged.push(long);
            for m in &damaged {
                let checked = d.check(m);
                let expected = d.json(m);
                assert_eq!(
                    checked.is_ok(),
                    expected.is_ok(),
                    "{:?} / {:?}",
                    checked,
                    expected
                );
                if let Err(e) = &checked {
                    refused += 1;
                    // What the JSON path took before and the check refuses
                    // is a datum that ends early or a varint past 64 bits.
                    if d.json_unchecked(m).is_ok() {
                        stricter += 1;
                        let fault = check(plan, m).expect_err("refused");
                        assert!(
                            matches!(
                                fault.error,
                                DecodeError::Truncated(_)
                                    | DecodeError::Length { .. }
                                    | DecodeError::Varint
                            ),
                            "{e}"
                        );
                    }
                    assert!(direct.push_avro(&d, m).is_err());
                    continue;
                }
                let text = expected.expect("decoded");
                assert_eq!(direct.push_avro(&d, m), json.push(&text));
            }
        }
        assert_eq!(
            direct.finish().expect("batch"),
            json.finish().expect("batch")
        );
    }
    assert!(refused > 1000, "{refused}");
    assert!(stricter > 0, "no truncation the JSON path took");
}

/// A datum the direct path does not take whole is rolled back completely
/// and its JSON's outcome is the record's, unknown keys included.
#[test]
fn a_record_the_direct_path_leaves_is_the_json_paths() {
    let schema = json!({"type":"record","name":"R","fields":[
        {"name":"n","type":"long"},
        {"name":"extra","type":"string"},
        {"name":"d","type":{"type":"int","logicalType":"date"}}
    ]});
    let d = decoder("schema id 3", &schema).expect("decoder");
    let table = schema_of(vec![
        Arc::new(NestedField::required(
            1,
            "n",
            Type::Primitive(PrimitiveType::Int),
        )),
        Arc::new(NestedField::optional(
            2,
            "d",
            Type::Primitive(PrimitiveType::Date),
        )),
    ])
    .expect("table");
    let opts = ShredOptions {
        unknown_fields: UnknownFields::Collect,
        ..ShredOptions::default()
    };
    let mut s = Shredder::new(&table, opts).expect("shredder");
    let datum = |n: i64, days: i64| {
        let mut out = Vec::new();
        zig(n, &mut out);
        bytes(b"x", &mut out);
        zig(days, &mut out);
        out
    };
    s.push_avro(&d, &datum(7, 0)).expect("direct");
    // Past an int: the JSON path's own error, nothing of it kept.
    let e = s
        .push_avro(&d, &datum(1 << 40, 1))
        .expect_err("out of range");
    assert_eq!(e.field, "n");
    assert!(e.reason.contains("out of range for int"), "{e}");
    // Year 10000 has no YYYY-MM-DD: the JSON path's error.
    let e = s
        .push_avro(&d, &datum(1, 2_932_897))
        .expect_err("no date text");
    assert_eq!(e.field, "d");
    // Truncated: the check's reason, with the field.
    let e = s.push_avro(&d, &[14, 2]).expect_err("truncated");
    assert_eq!(e.field, "extra");
    assert!(e.reason.contains("does not decode with schema id 3"), "{e}");
    s.push_avro(&d, &datum(8, -1)).expect("direct");
    assert_eq!(s.avro.direct, 2);
    // The unknown key is counted for the two accepted pushes, by ordinal.
    let unknown = s.take_unknown();
    assert_eq!(unknown.records, [0, 4]);
    let batch = s.finish().expect("batch");
    assert_eq!(batch.num_rows(), 2);
}

//! Tests of the encoding: framings, schemas, checks, the JSON rendering.
use super::json::decimal_text;
use super::*;
use apache_avro::types::{Record, Value as AvroValue};

pub(crate) const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
    {"name":"id","type":"long"},
    {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
    {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
    {"name":"ship","type":{"type":"record","name":"Ship","fields":[{"name":"city","type":"string"}]}},
    {"name":"bill","type":"Ship"}
]}"#;

pub(crate) fn datum() -> Vec<u8> {
    let schema = AvroSchema::parse_str(ORDER).unwrap();
    let mut r = Record::new(&schema).unwrap();
    r.put("id", 7i64);
    r.put(
        "total",
        AvroValue::Decimal(apache_avro::Decimal::from(vec![0xfbu8, 0x2e])),
    );
    r.put("day", AvroValue::Date(20_422));
    r.put("at", AvroValue::TimestampMillis(1_764_511_142_123));
    r.put("at_us", AvroValue::TimestampMicros(1_764_511_142_123_456));
    r.put(
        "ref",
        AvroValue::Uuid(uuid::Uuid::parse_str("0e8f6c1a-0003-4c0f-9d3a-000000000003").unwrap()),
    );
    r.put(
        "note",
        AvroValue::Union(1, Box::new(AvroValue::String("hi \"x\"".into()))),
    );
    r.put(
        "tags",
        AvroValue::Array(vec![
            AvroValue::String("a".into()),
            AvroValue::String("b".into()),
        ]),
    );
    r.put("status", AvroValue::Enum(1, "PAID".into()));
    let ship = AvroValue::Record(vec![("city".into(), AvroValue::String("Oslo".into()))]);
    r.put("ship", ship.clone());
    r.put("bill", ship);
    apache_avro::to_avro_datum(&schema, r).unwrap()
}

#[test]
fn logical_types_come_out_exact() {
    let d = Decoder::new("schema id 1".into(), ORDER).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&d.json(&datum()).unwrap()).unwrap();
    // 0xfb2e is -1234 unscaled: -12.34 at scale 2.
    assert_eq!(
        json.to_string(),
        r#"{"id":7,"total":-12.34,"day":"2025-11-30","at":"2025-11-30T13:59:02.123000Z","at_us":"2025-11-30T13:59:02.123456Z","ref":"0e8f6c1a-0003-4c0f-9d3a-000000000003","note":"hi \"x\"","tags":["a","b"],"status":"PAID","ship":{"city":"Oslo"},"bill":{"city":"Oslo"}}"#
    );
    let types: Vec<String> = d
        .declared
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name, f.field_type))
        .collect();
    assert_eq!(
        types[..6],
        [
            "id:long",
            "total:decimal(10, 2)",
            "day:date",
            "at:timestamptz",
            "at_us:timestamptz",
            "ref:uuid"
        ]
    );
    assert_eq!(types[6], "note:string");
}

#[test]
fn framings_are_told_apart_from_json() {
    let mut confluent = vec![0, 0, 0, 0, 42];
    confluent.extend(datum());
    assert!(matches!(
        framing(&confluent),
        Some((Framing::Confluent(42), _))
    ));
    let id = uuid::Uuid::new_v4();
    let mut glue = vec![3, 0];
    glue.extend_from_slice(id.as_bytes());
    glue.extend(datum());
    assert!(matches!(framing(&glue), Some((Framing::Glue(g, false), _)) if g == id));
    assert!(framing(br#"{"id":1}"#).is_none());
    assert!(framing(&[3, 9, 1, 2]).is_none());
}

#[test]
fn decimals_keep_every_digit() {
    assert_eq!(decimal_text(&[0x04, 0xd2], 2).unwrap(), "12.34");
    assert_eq!(decimal_text(&[0x05], 3).unwrap(), "0.005");
    assert_eq!(decimal_text(&[0xff], 1).unwrap(), "-0.1");
    assert_eq!(decimal_text(&[0x01, 0x00], 0).unwrap(), "256");
    let max = 10i128.pow(38) - 1;
    assert_eq!(
        decimal_text(&max.to_be_bytes(), 10).unwrap(),
        "9999999999999999999999999999.9999999999"
    );
    assert!(decimal_text(&[0; 17], 0).is_none());
}

#[test]
fn a_damaged_datum_is_refused_with_its_field() {
    let d = Decoder::new("schema id 1".into(), ORDER).unwrap();
    assert_eq!(d.check(&datum()), Ok(()));
    // The last field, `bill.city`, cut short.
    let mut short = datum();
    short.pop();
    let e = d.check(&short).unwrap_err();
    assert_eq!(e.field, "bill.city");
    assert!(
        e.reason
            .starts_with("the Avro datum does not decode with schema id 1: "),
        "{e}"
    );
    assert_eq!(d.json(&short), Err(e));
    // A length of 2^40 bytes for `total`: an error, not an allocation.
    let huge = [14, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
    let e = d.check(&huge).unwrap_err();
    assert_eq!(e.field, "total");
    assert!(
        e.reason
            .ends_with("a length of 1099511627776 bytes with 0 left in the datum"),
        "{e}"
    );
    // An eleven-byte varint for `id`.
    let e = d.check(&[0xff; 11]).unwrap_err();
    assert_eq!(
        (
            e.field.as_str(),
            e.reason.ends_with("a varint longer than 64 bits")
        ),
        ("id", true)
    );
}

/// `apache-avro` reads a datum that ends where a union, a boolean or a
/// string begins as one whose missing values are null; the check refuses it.
#[test]
fn a_datum_cut_at_a_union_is_refused_not_read_as_nulls() {
    let schema = r#"{"type":"record","name":"R","fields":[
        {"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}"#;
    let d = Decoder::new("schema id 2".into(), schema).unwrap();
    assert_eq!(&d.json_unchecked(&[2]).unwrap()[..], br#"{"a":1,"b":null}"#);
    let e = d.check(&[2]).unwrap_err();
    assert_eq!(e.field, "b");
    assert!(e.reason.ends_with("the datum ends inside a varint"), "{e}");
}

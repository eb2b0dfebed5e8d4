use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::debezium::decimal_text;
use super::*;

// ---------------------------------------------------------------------------------------
// Helpers.

fn ok(record: &str, format: ChangeFormat) -> Change {
    match decode(record.as_bytes(), format) {
        Ok(change) => change,
        Err(e) => panic!("expected {record} to decode, got {e}"),
    }
}

fn err(record: &str, format: ChangeFormat) -> RecordError {
    match decode(record.as_bytes(), format) {
        Ok(change) => panic!("expected {record} to fail, got {change:?}"),
        Err(e) => e,
    }
}

/// Each column's exact JSON text, so numbers like `1e400` can be compared verbatim.
fn raw_row(change: &Change) -> BTreeMap<String, String> {
    let map: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(change.row.as_bytes()).expect("row is a JSON object");
    map.into_iter()
        .map(|(k, v)| (k, v.get().to_owned()))
        .collect()
}

/// The row parsed into a `Value` (only for rows without out-of-range numbers).
fn row(change: &Change) -> Value {
    serde_json::from_slice(change.row.as_bytes()).expect("row is valid JSON")
}

/// Column names in the order the row text has them.
fn row_keys(change: &Change) -> Vec<String> {
    let text = std::str::from_utf8(change.row.as_bytes()).expect("row is UTF-8");
    let obj = parse_object(text, Path::Root).expect("row is an object");
    obj.iter().map(|(k, _)| k.to_owned()).collect()
}

fn assert_error(e: &RecordError, field: &str, reason_part: &str) {
    assert_eq!(e.field, field, "wrong field in {e:?}");
    assert!(
        e.reason.contains(reason_part),
        "reason {:?} should mention {reason_part:?}",
        e.reason
    );
}

const BIG: &str = "123456789012345678901234.5678";

// ---------------------------------------------------------------------------------------
// Debezium.

fn debezium_envelope(payload: &str) -> String {
    format!(
        r#"{{"schema":{{"type":"struct","fields":[],"optional":false,"name":"srv.public.t.Envelope"}},"payload":{payload}}}"#
    )
}

#[test]
fn debezium_insert_in_connect_envelope() {
    let record = debezium_envelope(
        r#"{"before":null,"after":{"id":1,"name":"Ann","score":9.75},
            "source":{"version":"2.7.0.Final","connector":"postgresql","ts_ms":1700000000123,
                      "snapshot":"false","db":"app","schema":"public","table":"t",
                      "txId":771,"lsn":24023128,"sequence":"[\"24023119\",\"24023128\"]"},
            "op":"c","ts_ms":1700000000456,"transaction":null}"#,
    );
    let change = ok(&record, ChangeFormat::Debezium);
    assert_eq!(change.op, ChangeOp::Insert);
    assert_eq!(row(&change), json!({"id": 1, "name": "Ann", "score": 9.75}));
    assert_eq!(row_keys(&change), ["id", "name", "score"]);
    assert_eq!(change.position.as_deref(), Some("24023128"));
    // The database's commit time, not the connector's processing time.
    assert_eq!(change.ts_ms, Some(1_700_000_000_123));
    assert!(change.unchanged.is_empty());
    assert_eq!(ok(&record, ChangeFormat::Auto), change);
}

#[test]
fn debezium_update_without_envelope_uses_mysql_pos() {
    let record = r#"{"before":{"id":7,"qty":1},"after":{"id":7,"qty":2},
        "source":{"connector":"mysql","file":"mysql-bin.000003","pos":154,"row":0,"ts_ms":1700000001000},
        "op":"u","ts_ms":1700000001500}"#;
    let change = ok(record, ChangeFormat::Debezium);
    assert_eq!(change.op, ChangeOp::Update);
    assert_eq!(row(&change), json!({"id": 7, "qty": 2}));
    assert_eq!(change.position.as_deref(), Some("154"));
    assert_eq!(change.ts_ms, Some(1_700_000_001_000));
    assert_eq!(ok(record, ChangeFormat::Auto), change);
}

#[test]
fn debezium_delete_row_is_before() {
    let record = debezium_envelope(
        r#"{"before":{"id":3,"name":"gone"},"after":null,"source":{"lsn":99},"op":"d","ts_ms":5}"#,
    );
    let change = ok(&record, ChangeFormat::Debezium);
    assert_eq!(change.op, ChangeOp::Delete);
    assert_eq!(row(&change), json!({"id": 3, "name": "gone"}));
    assert_eq!(change.position.as_deref(), Some("99"));
    // No `source.ts_ms`: the envelope time is the fallback.
    assert_eq!(change.ts_ms, Some(5));
}

#[test]
fn debezium_delete_without_before_explains_replica_identity() {
    let record = debezium_envelope(r#"{"before":null,"after":null,"source":{},"op":"d"}"#);
    let e = err(&record, ChangeFormat::Debezium);
    assert_error(&e, "payload.before", "REPLICA IDENTITY FULL");
    let bare = r#"{"after":null,"source":{},"op":"d"}"#;
    assert_error(
        &err(bare, ChangeFormat::Auto),
        "before",
        "REPLICA IDENTITY FULL",
    );
}

#[test]
fn debezium_snapshot_read() {
    let record =
        r#"{"before":null,"after":{"id":1},"source":{"snapshot":"true","lsn":10},"op":"r"}"#;
    let change = ok(record, ChangeFormat::Debezium);
    assert_eq!(change.op, ChangeOp::Read);
    assert_eq!(row(&change), json!({"id": 1}));
    assert_eq!(change.ts_ms, None);
}

#[test]
fn debezium_numbers_keep_their_exact_text() {
    let record = format!(
        r#"{{"after":{{"big":{BIG},"huge":1e400,"tiny":-1.5E-300,"neg_zero":-0.0,"int":18446744073709551616}},
            "source":{{"lsn":18446744073709551615}},"op":"c"}}"#
    );
    let change = ok(&record, ChangeFormat::Debezium);
    let cols = raw_row(&change);
    assert_eq!(cols["big"], BIG);
    assert_eq!(cols["huge"], "1e400");
    assert_eq!(cols["tiny"], "-1.5E-300");
    assert_eq!(cols["neg_zero"], "-0.0");
    assert_eq!(cols["int"], "18446744073709551616");
    assert_eq!(change.position.as_deref(), Some("18446744073709551615"));
}

#[test]
fn debezium_nested_values_are_copied_verbatim() {
    let record = r#"{"after":{"doc":{"a":[1,{"b":1e400}],"c":null},"tags":["x","y"],
        "text":"quote \" backslash \\ é \u00e9 \n"},"source":{},"op":"c"}"#;
    let change = ok(record, ChangeFormat::Debezium);
    let cols = raw_row(&change);
    assert_eq!(cols["doc"], r#"{"a":[1,{"b":1e400}],"c":null}"#);
    assert_eq!(cols["tags"], r#"["x","y"]"#);
    let text: String = serde_json::from_str(&cols["text"]).expect("string column");
    assert_eq!(text, "quote \" backslash \\ é é \n");
}

#[test]
fn debezium_keys_with_escapes_round_trip() {
    let record = r#"{"after":{"we\"ird\\key\u0001":1,"ünï":2},"source":{},"op":"c"}"#;
    let change = ok(record, ChangeFormat::Debezium);
    assert_eq!(row_keys(&change), ["we\"ird\\key\u{1}", "ünï"]);
}

#[test]
fn debezium_truncates_decode_and_messages_are_errors() {
    let truncate = r#"{"source":{"lsn":5},"op":"t","ts_ms":1}"#;
    // Auto must not mistake a truncate (no before/after) for a plain row.
    for format in [ChangeFormat::Debezium, ChangeFormat::Auto] {
        let change = ok(truncate, format);
        assert_eq!(change.op, ChangeOp::Truncate);
        assert_eq!(change.row.as_bytes(), b"{}");
        assert_eq!(change.position.as_deref(), Some("5"));
    }
    let message = debezium_envelope(
        r#"{"op":"m","ts_ms":1,"source":{},"message":{"prefix":"p","content":"Zm9v"}}"#,
    );
    assert_error(
        &err(&message, ChangeFormat::Auto),
        "payload.op",
        "logical decoding message",
    );
    let unknown = r#"{"after":{"id":1},"source":{},"op":"x"}"#;
    assert_error(
        &err(unknown, ChangeFormat::Debezium),
        "op",
        "unknown Debezium op `x`",
    );
    let missing = r#"{"after":{"id":1},"source":{}}"#;
    assert_error(&err(missing, ChangeFormat::Debezium), "op", "missing");
    let not_string = r#"{"after":{"id":1},"op":1}"#;
    assert_error(
        &err(not_string, ChangeFormat::Debezium),
        "op",
        "expected a string, found a number",
    );
}

#[test]
fn tombstones_are_errors() {
    for record in ["", "  \n\t", "null", " null "] {
        assert_error(&err(record, ChangeFormat::Auto), "", "tombstone");
        assert_error(&err(record, ChangeFormat::Debezium), "", "tombstone");
    }
    let enveloped = r#"{"schema":null,"payload":null}"#;
    assert_error(&err(enveloped, ChangeFormat::Auto), "payload", "tombstone");
    assert_error(
        &err(enveloped, ChangeFormat::Debezium),
        "payload",
        "tombstone",
    );
    assert_error(&err("", ChangeFormat::Dms), "", "empty");
    assert_error(&err("null", ChangeFormat::DynamoDb), "", "empty");
}

#[test]
fn debezium_after_missing_on_update() {
    let record = r#"{"before":{"id":1},"after":null,"source":{},"op":"u"}"#;
    assert_error(
        &err(record, ChangeFormat::Debezium),
        "after",
        "missing or null on an `u` event",
    );
}

#[test]
fn debezium_mongodb_string_documents_are_explained() {
    let record =
        r#"{"after":"{\"_id\": {\"$oid\": \"1\"}}","source":{"connector":"mongodb"},"op":"c"}"#;
    assert_error(
        &err(record, ChangeFormat::Debezium),
        "after",
        "ExtractNewDocumentState",
    );
}

#[test]
fn debezium_toast_placeholders_become_unchanged() {
    let int_bytes: Vec<String> = PLACEHOLDER.bytes().map(|b| b.to_string()).collect();
    let float_bytes: Vec<String> = PLACEHOLDER.bytes().map(|b| format!("{b}.0")).collect();
    let record = format!(
        r#"{{"before":null,"after":{{"id":1,
            "text":"__debezium_unavailable_value",
            "text_arr":["__debezium_unavailable_value"],
            "int_arr":[{ints}],
            "float_arr":[{floats}],
            "bytea":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
            "bytea_hex":"5f5f646562657a69756d5f756e617661696c61626c655f76616c7565",
            "bytea_arr":["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="],
            "uuid_arr":["b68a35a7-17ad-35b3-af2a-ae46edb4545a"],
            "hstore":{{"__debezium_unavailable_value":"__debezium_unavailable_value"}},
            "hstore_json":"{{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}}",
            "geom":{{"wkb":"AQEAACDmEAAAAAAA/IPXl8EAAAD8g9eXwQ==","srid":4326}},
            "point":{{"x":-9.9999999E7,"y":-9.9999999E7,"wkb":"AQ==","srid":null}},
            "kept":"real text","kept_arr":[1,2,3],"kept_obj":{{"k":"__debezium_unavailable_value","j":1}}
        }},"source":{{"lsn":1}},"op":"u"}}"#,
        ints = int_bytes.join(","),
        floats = float_bytes.join(","),
    );
    let change = ok(&record, ChangeFormat::Debezium);
    assert_eq!(
        change.unchanged,
        [
            "text",
            "text_arr",
            "int_arr",
            "float_arr",
            "bytea",
            "bytea_hex",
            "bytea_arr",
            "uuid_arr",
            "hstore",
            "hstore_json",
            "geom",
            "point"
        ]
    );
    assert_eq!(
        row(&change),
        json!({"id": 1, "kept": "real text", "kept_arr": [1, 2, 3],
               "kept_obj": {"k": "__debezium_unavailable_value", "j": 1}})
    );
    assert!(!String::from_utf8_lossy(change.row.as_bytes()).contains("X19kZWJl"));
}

#[test]
fn placeholder_constants_match_their_encodings() {
    let bytes = PLACEHOLDER.as_bytes();
    assert_eq!(
        base64::engine::general_purpose::STANDARD.encode(bytes),
        PLACEHOLDER_BASE64
    );
    assert_eq!(
        base64::engine::general_purpose::URL_SAFE.encode(bytes),
        PLACEHOLDER_BASE64
    );
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, PLACEHOLDER_HEX);
}

fn decimal_schema(image_fields: &str) -> String {
    format!(
        r#"{{"type":"struct","optional":false,"name":"srv.public.t.Envelope","fields":[
            {{"type":"struct","optional":true,"name":"srv.public.t.Value","field":"before","fields":{image_fields}}},
            {{"type":"struct","optional":true,"name":"srv.public.t.Value","field":"after","fields":{image_fields}}},
            {{"type":"string","optional":false,"field":"op"}}]}}"#
    )
}

const DECIMAL_FIELDS: &str = r#"[
    {"type":"int32","optional":false,"field":"id","default":1e400},
    {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,
     "parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"price"},
    {"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","version":1,
     "fields":[{"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,"field":"value"}],
     "field":"amount"},
    {"type":"bytes","optional":true,"field":"blob"}]"#;

#[test]
fn debezium_connect_decimals_become_exact_numbers() {
    let schema = decimal_schema(DECIMAL_FIELDS);
    let record = format!(
        r#"{{"schema":{schema},"payload":{{"before":null,
            "after":{{"id":1,"price":"AeI6","amount":{{"scale":3,"value":"A/016215epG+OPNO"}},"blob":"AeI6"}},
            "source":{{"lsn":1}},"op":"c"}}}}"#
    );
    let change = ok(&record, ChangeFormat::Auto);
    let cols = raw_row(&change);
    assert_eq!(cols["price"], "1234.50");
    assert_eq!(cols["amount"], "1234567890123456789012345.678");
    // Plain bytes columns stay base64: only the schema's Decimal columns are numbers.
    assert_eq!(cols["blob"], "\"AeI6\"");

    let negative_and_null = format!(
        r#"{{"schema":{schema},"payload":{{"before":{{"id":1,"price":"/h3G","amount":null,"blob":null}},
            "after":null,"source":{{}},"op":"d"}}}}"#
    );
    let cols = raw_row(&ok(&negative_and_null, ChangeFormat::Debezium));
    assert_eq!(cols["price"], "-1234.50");
    assert_eq!(cols["amount"], "null");

    // JsonConverter `decimal.format=NUMERIC` already writes numbers; they pass through.
    let numeric = format!(
        r#"{{"schema":{schema},"payload":{{"after":{{"id":1,"price":{BIG}}},"source":{{}},"op":"c"}}}}"#
    );
    assert_eq!(raw_row(&ok(&numeric, ChangeFormat::Debezium))["price"], BIG);

    // A TOASTed numeric column is a placeholder, not a decimal to decode.
    let toasted = format!(
        r#"{{"schema":{schema},"payload":{{"after":{{"id":1,"price":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="}},
            "source":{{}},"op":"u"}}}}"#
    );
    assert_eq!(ok(&toasted, ChangeFormat::Debezium).unchanged, ["price"]);
}

#[test]
fn debezium_bad_decimal_bytes_name_the_column() {
    let schema = decimal_schema(DECIMAL_FIELDS);
    let record = format!(
        r#"{{"schema":{schema},"payload":{{"after":{{"id":1,"price":"not base64!"}},"source":{{}},"op":"c"}}}}"#
    );
    assert_error(
        &err(&record, ChangeFormat::Debezium),
        "payload.after.price",
        "not valid base64",
    );
    let wrong = format!(
        r#"{{"schema":{schema},"payload":{{"after":{{"id":1,"amount":"AQ=="}},"source":{{}},"op":"c"}}}}"#
    );
    assert_error(
        &err(&wrong, ChangeFormat::Debezium),
        "payload.after.amount",
        "VariableScaleDecimal",
    );
    let no_scale = decimal_schema(
        r#"[{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","field":"price"}]"#,
    );
    let record = format!(
        r#"{{"schema":{no_scale},"payload":{{"after":{{"price":"AQ=="}},"source":{{}},"op":"c"}}}}"#
    );
    assert_error(
        &err(&record, ChangeFormat::Debezium),
        "schema",
        "parameters.scale",
    );
}

#[test]
fn debezium_positions_from_other_connectors() {
    let position = |source: &str| {
        let record = format!(r#"{{"after":{{"id":1}},"source":{source},"op":"c"}}"#);
        ok(&record, ChangeFormat::Debezium).position
    };
    assert_eq!(
        position(r#"{"sequence":"[\"100\",\"00250\"]"}"#).as_deref(),
        Some("250")
    );
    assert_eq!(
        position(r#"{"sequence":"[null,\"7\"]"}"#).as_deref(),
        Some("7")
    );
    assert_eq!(
        position(r#"{"scn":"000123456789012345678901"}"#).as_deref(),
        Some("123456789012345678901")
    );
    // 0x2b << 48 | 0x260 << 16 | 2
    assert_eq!(
        position(
            r#"{"change_lsn":"0000002b:00000260:0002","commit_lsn":"0000002b:00000260:0003"}"#
        )
        .as_deref(),
        Some(((0x2bu128 << 48) | (0x260 << 16) | 2).to_string().as_str())
    );
    assert_eq!(position(r#"{"lsn":null,"pos":0}"#).as_deref(), Some("0"));
    assert_eq!(position(r#"{"connector":"mongodb","ord":1}"#), None);

    let bad = r#"{"after":{"id":1},"source":{"lsn":-5},"op":"c"}"#;
    assert_error(
        &err(bad, ChangeFormat::Debezium),
        "source.lsn",
        "cannot order changes",
    );
    let bad = r#"{"after":{"id":1},"source":{"lsn":{"x":1}},"op":"c"}"#;
    assert_error(
        &err(bad, ChangeFormat::Debezium),
        "source.lsn",
        "found an object",
    );
    let bad = r#"{"after":{"id":1},"source":{"ts_ms":"soon"},"op":"c"}"#;
    assert_error(
        &err(bad, ChangeFormat::Debezium),
        "source.ts_ms",
        "not a millisecond timestamp",
    );
}

#[test]
fn malformed_records_are_errors() {
    let e = err(r#"{"after":{"id":1},"op":"c""#, ChangeFormat::Auto);
    assert_error(&e, "", "not valid JSON");
    assert_error(
        &err("[1,2]", ChangeFormat::Auto),
        "",
        "expected a JSON object, found an array",
    );
    assert_error(
        &err("42", ChangeFormat::OpField),
        "",
        "expected a JSON object, found a number",
    );
    let e = decode(b"{\"a\":\"\xff\"}", ChangeFormat::Auto).expect_err("not UTF-8");
    assert_error(&e, "", "not valid UTF-8");
    let dup = r#"{"after":{"id":1,"id":2},"source":{},"op":"c"}"#;
    assert_error(
        &err(dup, ChangeFormat::Debezium),
        "after.id",
        "more than once",
    );
    let not_object = r#"{"after":[1],"source":{},"op":"c"}"#;
    assert_error(
        &err(not_object, ChangeFormat::Debezium),
        "after",
        "expected a JSON object, found an array",
    );
    assert_eq!(
        err(not_object, ChangeFormat::Debezium).to_string(),
        "field `after`: expected a JSON object, found an array"
    );
    assert_eq!(
        err("[]", ChangeFormat::Auto).to_string(),
        "expected a JSON object, found an array"
    );
}

// ---------------------------------------------------------------------------------------
// AWS DMS.

fn dms(operation: &str, data: &str) -> String {
    format!(
        r#"{{"data":{data},"metadata":{{"timestamp":"2026-11-30T10:00:00.123456Z","record-type":"data",
            "operation":"{operation}","partition-key-type":"schema-table","schema-name":"app",
            "table-name":"t","transaction-id":8797811}}}}"#
    )
}

#[test]
fn dms_operations() {
    for (operation, op) in [
        ("insert", ChangeOp::Insert),
        ("update", ChangeOp::Update),
        ("delete", ChangeOp::Delete),
        ("load", ChangeOp::Read),
    ] {
        let record = dms(operation, r#"{"id":5,"name":"x"}"#);
        let change = ok(&record, ChangeFormat::Dms);
        assert_eq!(change.op, op, "{operation}");
        assert_eq!(row(&change), json!({"id": 5, "name": "x"}));
        assert_eq!(change.ts_ms, Some(1_796_032_800_123));
        assert_eq!(change.position, None);
        assert!(change.unchanged.is_empty());
        assert_eq!(ok(&record, ChangeFormat::Auto), change);
    }
}

#[test]
fn dms_before_image_is_ignored_and_numbers_are_exact() {
    let record = format!(
        r#"{{"data":{{"id":1,"big":{BIG},"huge":1e400,"doc":{{"a":[1,2]}}}},
            "before-image":{{"id":1,"big":0}},
            "metadata":{{"timestamp":"2026-11-30T10:00:00Z","record-type":"data","operation":"update"}}}}"#
    );
    let change = ok(&record, ChangeFormat::Auto);
    assert_eq!(change.op, ChangeOp::Update);
    let cols = raw_row(&change);
    assert_eq!(cols["big"], BIG);
    assert_eq!(cols["huge"], "1e400");
    assert_eq!(cols["doc"], r#"{"a":[1,2]}"#);
    assert_eq!(cols.len(), 4);
    assert_eq!(change.ts_ms, Some(1_796_032_800_000));
}

#[test]
fn dms_errors() {
    let control = r#"{"metadata":{"timestamp":"2021-02-18T23:09:09.509179Z","record-type":"control",
        "operation":"create-table","partition-key-type":"task-id","schema-name":"","table-name":"x"}}"#;
    assert_error(
        &err(control, ChangeFormat::Dms),
        "metadata.record-type",
        "`create-table`",
    );
    assert_error(
        &err(control, ChangeFormat::Auto),
        "metadata.record-type",
        "control record",
    );
    assert_error(
        &err(&dms("upsert", "{}"), ChangeFormat::Dms),
        "metadata.operation",
        "unknown DMS operation",
    );
    let no_data = r#"{"metadata":{"record-type":"data","operation":"insert"}}"#;
    assert_error(
        &err(no_data, ChangeFormat::Dms),
        "data",
        "must hold the row",
    );
    let bad_time = dms("insert", "{}").replace("2026-11-30T10:00:00.123456Z", "30/11/2026");
    assert_error(
        &err(&bad_time, ChangeFormat::Dms),
        "metadata.timestamp",
        "ISO 8601",
    );
    assert_error(
        &err(r#"{"data":{}}"#, ChangeFormat::Dms),
        "metadata",
        "missing",
    );
    assert_error(
        &err(&dms("insert", "[1]"), ChangeFormat::Dms),
        "data",
        "expected a JSON object",
    );
}

// ---------------------------------------------------------------------------------------
// DynamoDB Streams.

fn ddb(event: &str, body: &str) -> String {
    format!(
        r#"{{"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"{event}","eventVersion":"1.1",
            "eventSource":"aws:dynamodb","awsRegion":"us-east-1",
            "dynamodb":{body},
            "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2015-06-27T00:48:05.899"}}"#
    )
}

#[test]
fn dynamodb_insert_unmarshals_every_type() {
    let record = ddb(
        "INSERT",
        &format!(
            r#"{{"ApproximateCreationDateTime":1479499740,
            "Keys":{{"pk":{{"S":"user#1"}}}},
            "NewImage":{{"pk":{{"S":"user#1"}},"n":{{"N":"{BIG}"}},"huge":{{"N":"1e400"}},
                "flag":{{"BOOL":true}},"nothing":{{"NULL":true}},
                "map":{{"M":{{"inner":{{"L":[{{"N":"1"}},{{"S":"two"}},{{"M":{{}}}}]}}}}}},
                "ss":{{"SS":["a","b"]}},"ns":{{"NS":["1.50","-2"]}},
                "bin":{{"B":"AAEC"}},"bs":{{"BS":["AQ==","Ag=="]}},"quoted":{{"S":"say \"hi\""}}}},
            "SequenceNumber":"000111","SizeBytes":26,"StreamViewType":"NEW_AND_OLD_IMAGES"}}"#
        ),
    );
    let change = ok(&record, ChangeFormat::DynamoDb);
    assert_eq!(change.op, ChangeOp::Insert);
    assert_eq!(change.position.as_deref(), Some("111"));
    assert_eq!(change.ts_ms, Some(1_479_499_740_000));
    let cols = raw_row(&change);
    assert_eq!(cols["pk"], "\"user#1\"");
    assert_eq!(cols["n"], BIG);
    assert_eq!(cols["huge"], "1e400");
    assert_eq!(cols["flag"], "true");
    assert_eq!(cols["nothing"], "null");
    assert_eq!(cols["map"], r#"{"inner":[1,"two",{}]}"#);
    assert_eq!(cols["ss"], r#"["a","b"]"#);
    assert_eq!(cols["ns"], "[1.50,-2]");
    assert_eq!(cols["bin"], "\"AAEC\"");
    assert_eq!(cols["bs"], r#"["AQ==","Ag=="]"#);
    assert_eq!(cols["quoted"], r#""say \"hi\"""#);
    assert_eq!(
        row_keys(&change),
        [
            "pk", "n", "huge", "flag", "nothing", "map", "ss", "ns", "bin", "bs", "quoted"
        ]
    );
    assert_eq!(ok(&record, ChangeFormat::Auto), change);
}

#[test]
fn dynamodb_modify_and_remove() {
    let images = r#""Keys":{"pk":{"N":"1"}},"NewImage":{"pk":{"N":"1"},"v":{"S":"new"}},
        "OldImage":{"pk":{"N":"1"},"v":{"S":"old"}},"SequenceNumber":"222","StreamViewType":"NEW_AND_OLD_IMAGES""#;
    let modify = ok(&ddb("MODIFY", &format!("{{{images}}}")), ChangeFormat::Auto);
    assert_eq!(modify.op, ChangeOp::Update);
    assert_eq!(row(&modify), json!({"pk": 1, "v": "new"}));

    let remove = ok(&ddb("REMOVE", &format!("{{{images}}}")), ChangeFormat::Auto);
    assert_eq!(remove.op, ChangeOp::Delete);
    assert_eq!(row(&remove), json!({"pk": 1, "v": "old"}));

    // KEYS_ONLY / NEW_IMAGE streams: a REMOVE still has the key.
    let keys_only = ddb(
        "REMOVE",
        r#"{"Keys":{"pk":{"N":"1"},"sk":{"S":"a"}},"StreamViewType":"KEYS_ONLY"}"#,
    );
    let remove = ok(&keys_only, ChangeFormat::DynamoDb);
    assert_eq!(remove.op, ChangeOp::Delete);
    assert_eq!(row(&remove), json!({"pk": 1, "sk": "a"}));
    assert_eq!(remove.position, None);
    assert_eq!(remove.ts_ms, None);
}

#[test]
fn dynamodb_lenient_numbers_and_times() {
    let record = ddb(
        "INSERT",
        r#"{"NewImage":{"a":{"N":"+5"},"b":{"N":".5"},"c":{"N":"007"},"d":{"N":"-.25e+3"},"e":{"N":" 1 "}},
            "ApproximateCreationDateTime":1.4794997401239E9}"#,
    );
    let change = ok(&record, ChangeFormat::DynamoDb);
    let cols = raw_row(&change);
    assert_eq!(cols["a"], "5");
    assert_eq!(cols["b"], "0.5");
    assert_eq!(cols["c"], "7");
    assert_eq!(cols["d"], "-0.25e+3");
    assert_eq!(cols["e"], "1");
    assert_eq!(change.ts_ms, Some(1_479_499_740_123));

    let time = |body: &str| ok(&ddb("INSERT", body), ChangeFormat::DynamoDb).ts_ms;
    // Kinesis Data Streams for DynamoDB: milliseconds or microseconds.
    assert_eq!(
        time(r#"{"NewImage":{},"ApproximateCreationDateTime":1598284553741}"#),
        Some(1_598_284_553_741)
    );
    assert_eq!(
        time(r#"{"NewImage":{},"ApproximateCreationDateTime":1598284553741123}"#),
        Some(1_598_284_553_741)
    );
    assert_eq!(
        time(
            r#"{"NewImage":{},"ApproximateCreationDateTime":1598284553,
                "ApproximateCreationDateTimePrecision":"MILLISECOND"}"#
        ),
        Some(1_598_284_553)
    );
    assert_eq!(
        time(r#"{"NewImage":{},"ApproximateCreationDateTime":"2026-11-30T12:30:00.5+02:30"}"#),
        Some(1_796_032_800_500)
    );
}

#[test]
fn dynamodb_errors_point_at_the_attribute() {
    let with_image = |image: &str| ddb("INSERT", &format!(r#"{{"NewImage":{image}}}"#));
    let case = |image: &str, field: &str, reason: &str| {
        assert_error(
            &err(&with_image(image), ChangeFormat::DynamoDb),
            field,
            reason,
        );
    };
    case(
        r#"{"a":{"X":1}}"#,
        "dynamodb.NewImage.a.X",
        "unknown DynamoDB attribute type `X`",
    );
    case(
        r#"{"a":{"S":"x","N":"1"}}"#,
        "dynamodb.NewImage.a",
        "exactly one type key",
    );
    case(r#"{"a":"plain"}"#, "dynamodb.NewImage.a", "typed attribute");
    case(
        r#"{"a":{"N":"abc"}}"#,
        "dynamodb.NewImage.a.N",
        "`abc` is not a number",
    );
    case(
        r#"{"a":{"N":"NaN"}}"#,
        "dynamodb.NewImage.a.N",
        "not a number",
    );
    case(
        r#"{"a":{"N":5}}"#,
        "dynamodb.NewImage.a.N",
        "expected a string",
    );
    case(
        r#"{"a":{"B":"%%%"}}"#,
        "dynamodb.NewImage.a.B",
        "not valid base64",
    );
    case(
        r#"{"a":{"L":[{"N":"1"},{"N":"x"}]}}"#,
        "dynamodb.NewImage.a.L[1].N",
        "not a number",
    );
    case(
        r#"{"a":{"M":{"b":{"SS":["ok",1]}}}}"#,
        "dynamodb.NewImage.a.M.b.SS[1]",
        "expected a string",
    );
    case(
        r#"{"a":{"BOOL":"yes"}}"#,
        "dynamodb.NewImage.a.BOOL",
        "expected a boolean",
    );

    let keys_only = ddb(
        "MODIFY",
        r#"{"Keys":{"pk":{"S":"a"}},"StreamViewType":"KEYS_ONLY"}"#,
    );
    let e = err(&keys_only, ChangeFormat::DynamoDb);
    assert_error(&e, "dynamodb.NewImage", "NEW_AND_OLD_IMAGES");
    assert!(e.reason.contains("KEYS_ONLY"), "{e}");

    let unknown = ddb("UPSERT", r#"{"NewImage":{}}"#);
    assert_error(
        &err(&unknown, ChangeFormat::DynamoDb),
        "eventName",
        "unknown DynamoDB event `UPSERT`",
    );
    let bad_seq = ddb("INSERT", r#"{"NewImage":{},"SequenceNumber":"12a"}"#);
    assert_error(
        &err(&bad_seq, ChangeFormat::DynamoDb),
        "dynamodb.SequenceNumber",
        "not a decimal",
    );
    let no_keys = ddb("REMOVE", r#"{"StreamViewType":"NEW_IMAGE"}"#);
    assert_error(
        &err(&no_keys, ChangeFormat::DynamoDb),
        "dynamodb.Keys",
        "neither `OldImage` nor `Keys`",
    );

    let mut deep = String::from(r#"{"S":"x"}"#);
    for _ in 0..70 {
        deep = format!(r#"{{"L":[{deep}]}}"#);
    }
    let e = err(
        &with_image(&format!(r#"{{"a":{deep}}}"#)),
        ChangeFormat::DynamoDb,
    );
    assert!(e.reason.contains("levels deep"), "{e}");

    let batch = format!(r#"{{"Records":[{}]}}"#, with_image("{}"));
    assert_error(
        &err(&batch, ChangeFormat::Auto),
        "Records",
        "each element of `Records`",
    );
}

// ---------------------------------------------------------------------------------------
// `_op` field convention.

#[test]
fn op_field_values() {
    for (value, op) in [
        ("c", ChangeOp::Insert),
        ("i", ChangeOp::Insert),
        ("insert", ChangeOp::Insert),
        ("I", ChangeOp::Insert),
        ("u", ChangeOp::Update),
        ("update", ChangeOp::Update),
        ("upsert", ChangeOp::Update),
        ("U", ChangeOp::Update),
        ("d", ChangeOp::Delete),
        ("delete", ChangeOp::Delete),
        ("D", ChangeOp::Delete),
        ("r", ChangeOp::Read),
    ] {
        let record = format!(r#"{{"id":1,"_op":"{value}","name":"n"}}"#);
        let change = ok(&record, ChangeFormat::OpField);
        assert_eq!(change.op, op, "{value}");
        assert_eq!(row(&change), json!({"id": 1, "name": "n"}));
        assert_eq!(ok(&record, ChangeFormat::Auto), change);
    }
}

#[test]
fn op_field_defaults_timestamps_and_numbers() {
    let plain = ok(r#"{"id":1,"name":"n"}"#, ChangeFormat::Auto);
    assert_eq!(plain.op, ChangeOp::Insert);
    assert_eq!(plain.position, None);
    assert_eq!(plain.ts_ms, None);
    assert_eq!(
        ok(r#"{"id":1,"_op":null}"#, ChangeFormat::OpField).op,
        ChangeOp::Insert
    );

    let record = format!(
        r#"{{"_ts":1700000000999,"id":1,"big":{BIG},"huge":1e400,"nested":{{"a":[1e400]}},"_op":"u"}}"#
    );
    let change = ok(&record, ChangeFormat::OpField);
    assert_eq!(change.op, ChangeOp::Update);
    assert_eq!(change.ts_ms, Some(1_700_000_000_999));
    assert_eq!(row_keys(&change), ["id", "big", "huge", "nested"]);
    let cols = raw_row(&change);
    assert_eq!(cols["big"], BIG);
    assert_eq!(cols["huge"], "1e400");
    assert_eq!(cols["nested"], r#"{"a":[1e400]}"#);

    assert_eq!(
        ok(r#"{"id":1,"_ts":"1700000000999"}"#, ChangeFormat::OpField).ts_ms,
        Some(1_700_000_000_999)
    );
}

#[test]
fn op_field_errors_and_truncate() {
    assert_error(
        &err(r#"{"id":1,"_op":"merge"}"#, ChangeFormat::OpField),
        "_op",
        "unknown op `merge`",
    );
    assert_eq!(
        ok(r#"{"_op":"truncate","__lsn":7}"#, ChangeFormat::OpField).op,
        ChangeOp::Truncate
    );
    assert_error(
        &err(r#"{"id":1,"_op":1}"#, ChangeFormat::OpField),
        "_op",
        "expected a string",
    );
    assert_error(
        &err(r#"{"id":1,"_ts":"yesterday"}"#, ChangeFormat::OpField),
        "_ts",
        "not a millisecond timestamp",
    );
    assert_error(
        &err(r#"{"id":1,"_ts":true}"#, ChangeFormat::OpField),
        "_ts",
        "found a boolean",
    );
    assert_error(
        &err(r#"{"id":1,"_ts":1e30}"#, ChangeFormat::OpField),
        "_ts",
        "within the range of i64",
    );
}

#[test]
fn op_field_understands_extract_new_record_state() {
    let deleted = r#"{"id":1,"name":"x","__op":"d","__deleted":"true","__source_ts_ms":1700000000000,"__lsn":4242}"#;
    let change = ok(deleted, ChangeFormat::Auto);
    assert_eq!(change.op, ChangeOp::Delete);
    assert_eq!(change.ts_ms, Some(1_700_000_000_000));
    assert_eq!(change.position.as_deref(), Some("4242"));
    // The SMT's fields are ordinary columns the user asked for; they stay in the row.
    assert_eq!(
        row_keys(&change),
        ["id", "name", "__op", "__deleted", "__source_ts_ms", "__lsn"]
    );

    let rewrite_only = r#"{"id":1,"__deleted":"true"}"#;
    assert_eq!(ok(rewrite_only, ChangeFormat::OpField).op, ChangeOp::Delete);
    let live = r#"{"id":1,"__deleted":false,"__op":"u"}"#;
    assert_eq!(ok(live, ChangeFormat::OpField).op, ChangeOp::Update);
    let bad = r#"{"id":1,"__deleted":"maybe"}"#;
    assert_error(&err(bad, ChangeFormat::OpField), "__deleted", "neither");
    // An explicit `_op` wins.
    assert_eq!(
        ok(r#"{"id":1,"__op":"d","_op":"u"}"#, ChangeFormat::OpField).op,
        ChangeOp::Update
    );
}

#[test]
fn op_field_toast_placeholders() {
    let record = r#"{"id":1,"body":"__debezium_unavailable_value","__op":"u","title":"t"}"#;
    let change = ok(record, ChangeFormat::OpField);
    assert_eq!(change.unchanged, ["body"]);
    assert_eq!(row(&change), json!({"id": 1, "__op": "u", "title": "t"}));
}

#[test]
fn connect_envelope_around_a_flattened_row() {
    let schema = r#"{"type":"struct","optional":false,"name":"srv.public.t.Value","fields":[
        {"type":"int32","optional":false,"field":"id"},
        {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal",
         "parameters":{"scale":"-2"},"field":"hundreds"},
        {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal",
         "parameters":{"scale":"4"},"field":"small"},
        {"type":"string","optional":true,"field":"__op"}]}"#;
    let record = format!(
        r#"{{"schema":{schema},"payload":{{"id":1,"hundreds":"AQ==","small":"/w==","__op":"u"}}}}"#
    );
    for format in [ChangeFormat::Auto, ChangeFormat::OpField] {
        let change = ok(&record, format);
        assert_eq!(change.op, ChangeOp::Update);
        let cols = raw_row(&change);
        assert_eq!(cols["hundreds"], "100");
        assert_eq!(cols["small"], "-0.0001");
    }
    assert_error(
        &err(r#"{"schema":{},"payload":null}"#, ChangeFormat::OpField),
        "payload",
        "tombstone",
    );
}

#[test]
fn auto_leaves_rows_with_lookalike_columns_alone() {
    // A row that happens to have `payload`, `op` or `metadata` columns is still just a row.
    let record = r#"{"id":1,"payload":{"op":"c"},"op":"c","metadata":{"k":1},"data":{}}"#;
    let change = ok(record, ChangeFormat::Auto);
    assert_eq!(change.op, ChangeOp::Insert);
    assert_eq!(
        row(&change),
        serde_json::from_str::<Value>(record).expect("json")
    );
    let event_like = r#"{"eventName":"signup","dynamodb":"no"}"#;
    assert_eq!(ok(event_like, ChangeFormat::Auto).op, ChangeOp::Insert);
}

#[test]
fn explicit_format_on_the_wrong_shape_says_what_is_missing() {
    let dms_record = dms("insert", r#"{"id":1}"#);
    assert_error(&err(&dms_record, ChangeFormat::Debezium), "op", "missing");
    assert_error(
        &err(&dms_record, ChangeFormat::DynamoDb),
        "eventName",
        "missing",
    );
    assert_error(
        &err(r#"{"id":1}"#, ChangeFormat::Dms),
        "metadata",
        "missing",
    );
}

// ---------------------------------------------------------------------------------------
// Helpers.

#[test]
fn timestamps() {
    assert_eq!(
        parse_timestamp_ms("2026-11-30T10:00:00.123456Z"),
        Some(1_796_032_800_123)
    );
    assert_eq!(
        parse_timestamp_ms("2026-11-30T10:00:00.123456"),
        Some(1_796_032_800_123)
    );
    assert_eq!(
        parse_timestamp_ms("2026-11-30 10:00:00.1Z"),
        Some(1_796_032_800_100)
    );
    assert_eq!(
        parse_timestamp_ms("2026-11-30T12:30:00.5+02:30"),
        Some(1_796_032_800_500)
    );
    assert_eq!(
        parse_timestamp_ms("2026-11-30T07:30:00.5-0230"),
        Some(1_796_032_800_500)
    );
    assert_eq!(
        parse_timestamp_ms("2026-11-30T10:00Z"),
        Some(1_796_032_800_000)
    );
    assert_eq!(parse_timestamp_ms("1969-12-31T23:59:59.999Z"), Some(-1));
    assert_eq!(
        parse_timestamp_ms("2024-02-29T00:00:00Z"),
        Some(1_709_164_800_000)
    );
    for bad in [
        "2023-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-30T24:00:00Z",
        "2026-11-30T10:00:00.Z",
        "2026-11-30T10:00:00Zjunk",
        "2026-11-30",
        "2026/11/30T10:00:00Z",
        "",
    ] {
        assert_eq!(parse_timestamp_ms(bad), None, "{bad}");
    }
}

#[test]
fn scaled_integers() {
    assert_eq!(scaled_integer("1479499740", 3), Some(1_479_499_740_000));
    assert_eq!(
        scaled_integer("1479499740.1239", 3),
        Some(1_479_499_740_123)
    );
    assert_eq!(
        scaled_integer("1.4794997401239E9", 3),
        Some(1_479_499_740_123)
    );
    assert_eq!(scaled_integer("-1.5", 0), Some(-2));
    assert_eq!(scaled_integer("-0.0001", 3), Some(-1));
    assert_eq!(scaled_integer("0e99999999999", 0), Some(0));
    assert_eq!(scaled_integer("1e-99999999999", 0), Some(0));
    assert_eq!(scaled_integer("9223372036854775807", 0), Some(i64::MAX));
    assert_eq!(scaled_integer("-9223372036854775808", 0), Some(i64::MIN));
    assert_eq!(scaled_integer("9223372036854775808", 0), None);
    assert_eq!(scaled_integer("1e400", 0), None);
    assert_eq!(
        scaled_integer("1598284553741123", -3),
        Some(1_598_284_553_741)
    );
    for bad in ["", "-", "01", "1.", ".5", "+1", "1e", "NaN", "0x10"] {
        assert_eq!(scaled_integer(bad, 0), None, "{bad}");
    }
}

#[test]
fn decimal_texts() {
    assert_eq!(decimal_text(&[], 0), "0");
    assert_eq!(decimal_text(&[0], 2), "0.00");
    assert_eq!(decimal_text(&[0x01, 0xE2, 0x3A], 2), "1234.50");
    assert_eq!(decimal_text(&[0xFE, 0x1D, 0xC6], 2), "-1234.50");
    assert_eq!(decimal_text(&[0x80], 0), "-128");
    assert_eq!(decimal_text(&[0x00, 0x80], 0), "128");
    assert_eq!(decimal_text(&[0xFF], 3), "-0.001");
    assert_eq!(decimal_text(&[0x05], -3), "5000");
    assert_eq!(decimal_text(&[0x05], -100), "5e100");
    assert_eq!(decimal_text(&[0x05], 5000), "5e-5000");
    assert_eq!(decimal_text(&[0x00], -3), "0");
    // 2^128 - 1 needs several limbs.
    let mut max = vec![0u8];
    max.extend([0xFF; 16]);
    assert_eq!(decimal_text(&max, 0), u128::MAX.to_string());
    assert_eq!(
        decimal_text(&max, 38),
        "3.40282366920938463463374607431768211455"
    );
}

#[test]
fn change_format_defaults_to_auto() {
    assert_eq!(ChangeFormat::default(), ChangeFormat::Auto);
}

#[test]
fn tombstone_records_carry_their_key_back() {
    assert_eq!(TOMBSTONE_PREFIX, format!("{{\"{TOMBSTONE}\":"));
    let record = tombstone_record(br#" {"id": 7} "#);
    assert_eq!(tombstone_key(&record), Some(r#"{"id": 7}"#));
    let record = tombstone_record(b"order-7");
    assert_eq!(tombstone_key(&record), Some(r#""order-7""#));
    assert_eq!(tombstone_key(br#"{"id":7}"#), None);
    assert_eq!(tombstone_key(br#"{"__floe_tombstone":7,"x":1"#), None);
}

#[test]
fn a_flat_line_decodes_back_to_its_change() {
    let mut row = RowWriter::with_capacity(64);
    row.raw("id", b"7");
    row.string("note", "a \"quoted\" note");
    row.raw("amount", b"12345678901234567890.123456789");
    let mut change = Change {
        op: ChangeOp::Update,
        row: row.finish(),
        position: Some("123456".into()),
        ts_ms: Some(1_700_000_000_123),
        unchanged: vec!["big".into()],
    };
    for op in [
        ChangeOp::Insert,
        ChangeOp::Update,
        ChangeOp::Delete,
        ChangeOp::Read,
    ] {
        change.op = op;
        let line = flat_line(&change);
        let text = std::str::from_utf8(&line).unwrap();
        assert_eq!(ok(text, ChangeFormat::Auto), change, "{text}");
        assert_eq!(ok(text, ChangeFormat::OpField), change, "{text}");
    }
    let truncate = Change {
        op: ChangeOp::Truncate,
        row: Row::default(),
        position: Some("9".into()),
        ts_ms: Some(1),
        unchanged: Vec::new(),
    };
    let line = flat_line(&truncate);
    assert_eq!(
        std::str::from_utf8(&line).unwrap(),
        r#"{"_op":"truncate","_ts":1,"_pos":9}"#
    );
    assert_eq!(
        ok(std::str::from_utf8(&line).unwrap(), ChangeFormat::Auto),
        truncate
    );
}

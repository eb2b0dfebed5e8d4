use super::*;
use crate::ident::display;

const KAFKA: SourceInfo<'static> = SourceInfo {
    kind: SourceKind::Kafka,
    name: "Orders.v2",
};

fn routing(mode: RoutingMode) -> RoutingConfig {
    RoutingConfig {
        mode,
        ..RoutingConfig::default()
    }
}

fn field_router(template: &str, allow: &[&str]) -> Router {
    Router::new(&RoutingConfig {
        field: Some("type".into()),
        template: Some(template.into()),
        allow: allow.iter().map(|s| s.to_string()).collect(),
        ..routing(RoutingMode::Field)
    })
    .unwrap()
}

fn source_router(template: &str) -> Router {
    Router::new(&RoutingConfig {
        template: Some(template.into()),
        ..routing(RoutingMode::Source)
    })
    .unwrap()
}

fn route(r: &Router, record: &str) -> Result<String, String> {
    r.route(record.as_bytes(), &KAFKA)
        .map(|t| display(&t))
        .map_err(|e| e.to_string())
}

#[test]
fn router_is_shareable_between_threads() {
    fn assert_sync<T: Send + Sync>() {}
    assert_sync::<Router>();
}

#[test]
fn fixed_mode_ignores_the_record() {
    let r = Router::new(&RoutingConfig {
        table: Some("bronze.events".into()),
        ..routing(RoutingMode::Fixed)
    })
    .unwrap();
    assert_eq!(route(&r, "not json at all"), Ok("bronze.events".into()));
    assert_eq!(r.fixed().map(display).as_deref(), Some("bronze.events"));
    assert!(field_router("raw.{value}", &[]).fixed().is_none());
}

#[test]
fn field_mode_routes_by_string_or_integer() {
    let r = field_router("raw.{value}", &[]);
    assert_eq!(
        route(&r, r#"{"id":1,"type":"click"}"#),
        Ok("raw.click".into())
    );
    assert_eq!(route(&r, r#"{"type":42}"#), Ok("raw.42".into()));
    assert_eq!(route(&r, r#"{"type":-7}"#), Ok("raw.-7".into()));
    assert_eq!(route(&r, r#"{"type":"a\u002eb"}"#), Ok("raw.a_b".into()));
    let t = r.route(br#"{"type":"click"}"#, &KAFKA).unwrap();
    assert_eq!(t.namespace().join("."), "raw");
    assert_eq!(t.name(), "click");
}

#[test]
fn field_mode_names_the_field_when_it_cannot_route() {
    let r = field_router("raw.{value}", &[]);
    assert_eq!(
        route(&r, r#"{"kind":"x"}"#),
        Err("record has no field `type` to route by".into())
    );
    assert_eq!(
        route(&r, r#"{"type":null}"#),
        Err("routing field `type` is null".into())
    );
    assert_eq!(
        route(&r, r#"{"type":{"a":1}}"#),
        Err("routing field `type` is an object, expected a string or an integer".into())
    );
    for (value, found) in [
        ("[1]", "an array"),
        ("true", "a boolean"),
        ("1.5", "a number that is not a 64-bit integer"),
    ] {
        let e = r
            .route(format!(r#"{{"type":{value}}}"#).as_bytes(), &KAFKA)
            .unwrap_err();
        assert_eq!(
            e,
            RouteError::NotScalar {
                field: "type".into(),
                found
            }
        );
    }
    let e = route(&r, "[1,2]").unwrap_err();
    assert!(
        e.starts_with("cannot read routing field `type`: record is not a JSON object"),
        "{e}"
    );
    let e = route(&r, r#"{"type":"x""#).unwrap_err();
    assert!(e.starts_with("cannot read routing field `type`"), "{e}");
}

#[test]
fn nested_fields_with_the_same_name_are_not_used() {
    let r = field_router("raw.{value}", &[]);
    assert_eq!(
        route(&r, r#"{"meta":{"type":"x"}}"#),
        Err("record has no field `type` to route by".into())
    );
}

#[test]
fn values_are_normalised() {
    let r = field_router("Raw.{value}", &[]);
    for (value, table) in [
        ("Orders.V2", "raw.orders_v2"),
        ("../x", "raw.___x"),
        ("a..b", "raw.a__b"),
        ("a/b\\c d", "raw.a_b_c_d"),
        ("Ünïcode", "raw._n_code"),
        ("keep_this-one", "raw.keep_this-one"),
    ] {
        let record = serde_json::json!({ "type": value }).to_string();
        assert_eq!(route(&r, &record), Ok(table.to_string()), "{value}");
    }
}

#[test]
fn source_mode_uses_the_matching_source_name() {
    let cases = [
        (
            "raw.{topic}",
            SourceKind::Kafka,
            "Orders.v2",
            "raw.orders_v2",
        ),
        (
            "raw.{queue}",
            SourceKind::Sqs,
            "orders-queue",
            "raw.orders-queue",
        ),
        ("raw.{stream}", SourceKind::Kinesis, "clicks", "raw.clicks"),
        ("raw.{stream}", SourceKind::DynamoDb, "Users", "raw.users"),
        (
            "raw.{source}",
            SourceKind::File,
            "events.ndjson",
            "raw.events_ndjson",
        ),
        ("raw.{source}", SourceKind::Http, "ingest", "raw.ingest"),
        ("{source}.{topic}_x", SourceKind::Kafka, "a", "a.a_x"),
    ];
    for (template, kind, name, want) in cases {
        let r = source_router(template);
        let t = r.route(b"ignored", &SourceInfo::new(kind, name)).unwrap();
        assert_eq!(display(&t), want, "{template} {kind:?} {name}");
    }
}

#[test]
fn source_mode_refuses_other_kinds_of_source() {
    let r = source_router("raw.{topic}");
    let e = r
        .route(b"{}", &SourceInfo::new(SourceKind::Sqs, "orders"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "placeholder {topic} needs a Kafka topic, but the record came from SQS queue `orders`"
    );
    let e = source_router("raw.{queue}")
        .route(b"{}", &SourceInfo::new(SourceKind::Kafka, "t"))
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("placeholder {queue} needs an SQS queue"),
        "{e}"
    );
    let e = source_router("raw.{stream}")
        .route(b"{}", &SourceInfo::new(SourceKind::Postgres, "t"))
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("placeholder {stream} needs a Kinesis or DynamoDB stream, but the record came from Postgres table `t`"),
        "{e}"
    );
}

#[test]
fn allow_list_limits_routed_tables() {
    let r = field_router("raw.{value}", &["raw.click*", "raw.view"]);
    assert_eq!(route(&r, r#"{"type":"clicks"}"#), Ok("raw.clicks".into()));
    assert_eq!(route(&r, r#"{"type":"view"}"#), Ok("raw.view".into()));
    let e = r.route(br#"{"type":"purchase"}"#, &KAFKA).unwrap_err();
    assert_eq!(
        e,
        RouteError::NotAllowed {
            table: "raw.purchase".into(),
            patterns: vec!["raw.click*".into(), "raw.view".into()],
        }
    );
    assert_eq!(
        e.to_string(),
        "table `raw.purchase` is not allowed by routing.allow (raw.click*, raw.view)"
    );
}

#[test]
fn unusable_names_name_the_field_and_value() {
    let r = field_router("raw.{value}", &[]);
    let e = route(&r, r#"{"type":""}"#).unwrap_err();
    assert_eq!(
        e,
        "field `type` value \"\" gives an unusable table name: invalid table name `raw.`: empty name part"
    );
    let long = "x".repeat(300);
    let e = r
        .route(format!(r#"{{"type":"{long}"}}"#).as_bytes(), &KAFKA)
        .unwrap_err();
    let RouteError::InvalidName {
        origin,
        value,
        error,
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(origin, "field `type`");
    assert!(
        value.starts_with(&"x".repeat(64)) && value.ends_with("(300 bytes)"),
        "{value}"
    );
    assert!(error.reason.contains("longer than 255"), "{e}");
    assert!(e.to_string().len() < 400, "{e}");

    let e = source_router("raw.{topic}")
        .route(b"", &SourceInfo::new(SourceKind::Kafka, ""))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("placeholder {topic} value \"\" gives an unusable table name"),
        "{e}"
    );
}

#[test]
fn new_refuses_bad_routing_with_key_names() {
    let with = |mode, table: Option<&str>, field: Option<&str>, template: Option<&str>| {
        Router::new(&RoutingConfig {
            table: table.map(Into::into),
            field: field.map(Into::into),
            template: template.map(Into::into),
            ..routing(mode)
        })
        .unwrap_err()
        .to_string()
    };
    use RoutingMode::*;
    let long = format!("ns.{}", "x".repeat(300));
    for bad in ["../x", "a..b", "", ".t", long.as_str()] {
        let e = with(Fixed, Some(bad), None, None);
        assert!(e.starts_with("config key routing.table: "), "{bad}: {e}");
    }
    let e = with(Field, None, Some("t"), Some("../{value}"));
    assert!(
        e.starts_with("config key routing.template: gives unusable names"),
        "{e}"
    );
    let e = with(Field, None, Some("t"), Some("raw..{value}"));
    assert!(
        e.starts_with("config key routing.template: gives unusable names"),
        "{e}"
    );
    let e = with(
        Field,
        None,
        Some("t"),
        Some(&format!("raw.{}{{value}}", "y".repeat(300))),
    );
    assert!(e.contains("longer than 255"), "{e}");
    let e = with(Source, None, None, Some("raw.{topik}"));
    assert_eq!(
        e,
        "config key routing.template: unknown placeholder {topik} (use {source}, {topic}, {queue} or {stream})"
    );
    let e = with(Field, None, None, Some("raw.{value}"));
    assert!(e.starts_with("config key routing.field: required"), "{e}");
}

#[test]
fn results_are_cached_per_value() {
    let r = field_router("raw.{value}", &["raw.a*"]);
    for _ in 0..3 {
        assert_eq!(route(&r, r#"{"type":"a1"}"#), Ok("raw.a1".into()));
        assert!(route(&r, r#"{"type":"b"}"#).is_err());
    }
    {
        let cache = r.cache.read().unwrap();
        assert_eq!(cache.entries, 2);
        assert!(matches!(
            cache.by_value.get("b"),
            Some(Err(RouteError::NotAllowed { .. }))
        ));
    }
    let s = source_router("raw.{topic}");
    s.route(b"", &SourceInfo::new(SourceKind::Kafka, "x"))
        .unwrap();
    assert!(
        s.route(b"", &SourceInfo::new(SourceKind::Sqs, "x"))
            .is_err()
    );
    assert_eq!(s.cache.read().unwrap().by_source.len(), 2);
}

#[test]
fn cache_stays_bounded() {
    let r = field_router("raw.{value}", &[]);
    for i in 0..(CACHE_LIMIT + 10) {
        let record = format!(r#"{{"type":{i}}}"#);
        assert_eq!(route(&r, &record), Ok(format!("raw.{i}")));
    }
    assert!(r.cache.read().unwrap().entries <= CACHE_LIMIT);
    let long = format!(r#"{{"type":"{}"}}"#, "z".repeat(MAX_NAME_LEN + 1));
    assert!(route(&r, &long).is_err());
    assert!(
        !r.cache
            .read()
            .unwrap()
            .by_value
            .keys()
            .any(|k| k.len() > MAX_NAME_LEN)
    );
}

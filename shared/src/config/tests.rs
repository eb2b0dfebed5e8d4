use std::collections::HashMap;
use std::fs;

use super::*;

const FIXED: &str = "[routing]\ntable = \"bronze.events\"\n";

fn no_env(_: &str) -> Option<String> {
    None
}

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new(""), &no_env)
}

fn load_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_toml_str(text, Path::new(""), &|k: &str| vars.get(k).cloned())
}

fn err(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

fn err_env(text: &str, vars: &[(&str, &str)]) -> String {
    load_env(text, vars).unwrap_err().to_string()
}

/// A config file with every key, and the schema file it names.
fn full_config(dir: &Path) -> String {
    fs::create_dir_all(dir.join("schemas")).unwrap();
    fs::write(
        dir.join("schemas/events.json"),
        r#"{"type":"struct","fields":[]}"#,
    )
    .unwrap();
    r#"
[warehouse]
path = "./wh"

[dead_letter]
location = "s3://bucket/dlq/"

[routing]
mode = "field"
field = "type"
template = "raw.{value}"
allow = ["raw.*", "bronze.events"]
create = false

[defaults]
evolution = true
unknown_fields = "ignore"
format_version = 3
properties = { "write.parquet.compression-codec" = "zstd", "write.metadata.previous-versions-max" = 10 }
infer_timestamps = false
infer_decimal_scale = 6
case_insensitive = true
epoch_unit = "us"

[tables."bronze.events"]
schema = "schemas/events.json"
partition = ["day(ts)", "bucket(16, id)"]
sort = ["ts", "id desc nulls last"]
identifier_fields = ["id"]
properties = { "write.target-file-size-bytes" = 134217728, "write.parquet.compression-codec" = "snappy" }
evolution = false
unknown_fields = "reject"
format_version = 2
infer_timestamps = true
infer_decimal_scale = 2
case_insensitive = false
epoch_unit = "s"
"#
    .to_string()
}

#[test]
fn full_config_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let text = full_config(dir.path());
    let c = Config::from_toml_str(&text, dir.path(), &no_env).unwrap();

    assert_eq!(c.warehouse.path.as_deref(), Some(Path::new("./wh")));
    assert_eq!(c.warehouse.uri, None);
    assert_eq!(
        c.warehouse_location(),
        Location::Path(dir.path().join("wh"))
    );
    assert_eq!(
        c.dead_letter_location(),
        Location::Uri("s3://bucket/dlq".into())
    );
    assert_eq!(c.routing.mode, RoutingMode::Field);
    assert_eq!(c.routing.field.as_deref(), Some("type"));
    assert_eq!(c.routing.template.as_deref(), Some("raw.{value}"));
    assert_eq!(c.routing.allow, ["raw.*", "bronze.events"]);
    assert!(!c.routing.create);
    let d = &c.defaults;
    assert!(d.evolution);
    assert_eq!(d.unknown_fields, UnknownFields::Ignore);
    assert_eq!(d.format_version, 3);
    assert_eq!(d.properties["write.metadata.previous-versions-max"], "10");
    assert!(!d.infer_timestamps);
    assert_eq!(d.infer_decimal_scale, Some(6));
    assert!(d.case_insensitive);
    assert_eq!(d.epoch_unit, EpochUnit::Microseconds);
    let t = &c.tables["bronze.events"];
    assert_eq!(t.schema.as_deref(), Some(Path::new("schemas/events.json")));
    assert_eq!(t.partition, ["day(ts)", "bucket(16, id)"]);
    assert_eq!(t.sort, ["ts", "id desc nulls last"]);
    assert_eq!(t.identifier_fields, ["id"]);
    assert_eq!(t.properties["write.target-file-size-bytes"], "134217728");
    assert_eq!(t.evolution, Some(false));
    assert_eq!(t.unknown_fields, Some(UnknownFields::Reject));
    assert_eq!(t.epoch_unit, Some(EpochUnit::Seconds));

    let written = toml::to_string(&c).unwrap();
    let again = Config::from_toml_str(&written, dir.path(), &no_env).unwrap();
    assert_eq!(again, c, "{written}");
}

#[test]
fn defaults_apply_when_keys_are_absent() {
    let c = load(FIXED).unwrap();
    assert_eq!(c.warehouse.path.as_deref(), Some(Path::new("./warehouse")));
    assert_eq!(c.warehouse_location(), Location::Path("warehouse".into()));
    assert_eq!(
        c.dead_letter_location(),
        Location::Path(Path::new("warehouse").join("_floe").join("dlq"))
    );
    assert_eq!(c.routing.mode, RoutingMode::Fixed);
    assert!(c.routing.create);
    assert!(c.routing.allow.is_empty());
    assert_eq!(c.defaults, TableDefaults::default());
    assert!(c.defaults.evolution);
    assert_eq!(c.defaults.format_version, 2);
    assert_eq!(c.defaults.epoch_unit, EpochUnit::Milliseconds);
    assert_eq!(c.defaults.unknown_fields, UnknownFields::Ignore);
    assert!(c.defaults.infer_timestamps);
    assert_eq!(c.defaults.infer_decimal_scale, None);
    assert!(c.tables.is_empty());
}

#[test]
fn dead_letter_follows_an_object_store_warehouse() {
    let c = load(&format!("{FIXED}[warehouse]\nuri = \"s3://b/p/\"\n")).unwrap();
    assert_eq!(c.warehouse.path, None);
    assert_eq!(c.warehouse_location(), Location::Uri("s3://b/p".into()));
    assert_eq!(
        c.dead_letter_location(),
        Location::Uri("s3://b/p/_floe/dlq".into())
    );
    let c = load(&format!("{FIXED}[dead_letter]\nlocation = \"rejects\"\n")).unwrap();
    assert_eq!(c.dead_letter_location(), Location::Path("rejects".into()));
}

#[test]
fn table_merges_its_section_over_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let c = Config::from_toml_str(&full_config(dir.path()), dir.path(), &no_env).unwrap();

    let t = c.table("bronze.events");
    assert!(t.configured);
    assert_eq!(t.schema, Some(dir.path().join("schemas/events.json")));
    assert!(!t.evolution);
    assert_eq!(t.unknown_fields, UnknownFields::Reject);
    assert_eq!(t.format_version, 2);
    assert!(t.infer_timestamps);
    assert_eq!(t.infer_decimal_scale, Some(2));
    assert!(!t.case_insensitive);
    assert_eq!(t.epoch_unit, EpochUnit::Seconds);
    let props: Vec<(&str, &str)> = t
        .properties
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        props,
        [
            ("write.metadata.previous-versions-max", "10"),
            ("write.parquet.compression-codec", "snappy"),
            ("write.target-file-size-bytes", "134217728"),
        ]
    );

    let other = c.table("raw.clicks");
    assert!(!other.configured);
    assert_eq!(other.name, "raw.clicks");
    assert_eq!(other.schema, None);
    assert!(other.partition.is_empty());
    assert!(other.evolution);
    assert_eq!(other.format_version, 3);
    assert_eq!(other.infer_decimal_scale, Some(6));
    assert_eq!(other.epoch_unit, EpochUnit::Microseconds);
    assert_eq!(other.properties, c.defaults.properties);
}

#[test]
fn partial_table_section_keeps_other_defaults() {
    let c = load(&format!(
        "{FIXED}[defaults]\ninfer_decimal_scale = 4\n[tables.\"a.b\"]\ncase_insensitive = true\n"
    ))
    .unwrap();
    let t = c.table("a.b");
    assert!(t.case_insensitive);
    assert_eq!(t.infer_decimal_scale, Some(4));
    assert_eq!(t.format_version, 2);
}

#[test]
fn every_section_key_has_an_env_override() {
    type Check = fn(&Config) -> bool;
    let cases: &[(&str, &str, Check)] = &[
        ("FLOE_WAREHOUSE_PATH", "/data/wh", |c| {
            c.warehouse_location() == Location::Path("/data/wh".into())
        }),
        ("FLOE_WAREHOUSE_URI", "s3://b/wh", |c| {
            c.warehouse.uri.as_deref() == Some("s3://b/wh") && c.warehouse.path.is_none()
        }),
        ("FLOE_DEAD_LETTER_LOCATION", "s3://b/dlq", |c| {
            c.dead_letter_location() == Location::Uri("s3://b/dlq".into())
        }),
        ("FLOE_ROUTING_TABLE", "silver.orders", |c| {
            c.routing.table.as_deref() == Some("silver.orders")
        }),
        ("FLOE_ROUTING_ALLOW", " raw.*, bronze.events,", |c| {
            c.routing.allow == ["raw.*", "bronze.events"]
        }),
        ("FLOE_ROUTING_CREATE", "false", |c| !c.routing.create),
        ("FLOE_DEFAULTS_EVOLUTION", "false", |c| {
            !c.defaults.evolution
        }),
        ("FLOE_DEFAULTS_UNKNOWN_FIELDS", "reject", |c| {
            c.defaults.unknown_fields == UnknownFields::Reject
        }),
        ("FLOE_DEFAULTS_FORMAT_VERSION", "1", |c| {
            c.defaults.format_version == 1
        }),
        ("FLOE_DEFAULTS_PROPERTIES", "a.b=1, c = two", |c| {
            c.defaults.properties.len() == 2
                && c.defaults.properties["a.b"] == "1"
                && c.defaults.properties["c"] == "two"
        }),
        ("FLOE_DEFAULTS_INFER_TIMESTAMPS", "0", |c| {
            !c.defaults.infer_timestamps
        }),
        ("FLOE_DEFAULTS_INFER_DECIMAL_SCALE", "9", |c| {
            c.defaults.infer_decimal_scale == Some(9)
        }),
        ("FLOE_DEFAULTS_CASE_INSENSITIVE", "TRUE", |c| {
            c.defaults.case_insensitive
        }),
        ("FLOE_DEFAULTS_EPOCH_UNIT", "ns", |c| {
            c.defaults.epoch_unit == EpochUnit::Nanoseconds
        }),
    ];
    let file = format!(
        "{FIXED}allow = [\"bronze.*\", \"silver.*\"]\n[warehouse]\npath = \"wh\"\n\
         [defaults]\nproperties = {{ x = \"y\" }}\n"
    );
    for (var, value, check) in cases {
        let c = load_env(&file, &[(var, value)]).unwrap_or_else(|e| panic!("{var}: {e}"));
        assert!(check(&c), "{var}={value}: {c:#?}");
    }
    // The mode override, with the keys the new mode needs.
    let c = load_env(
        FIXED,
        &[
            ("FLOE_ROUTING_MODE", "field"),
            ("FLOE_ROUTING_TABLE", ""),
            ("FLOE_ROUTING_FIELD", "kind"),
            ("FLOE_ROUTING_TEMPLATE", "raw.{value}"),
        ],
    )
    .unwrap();
    assert_eq!(c.routing.mode, RoutingMode::Field);
    assert_eq!(c.routing.table, None);
    assert_eq!(c.routing.field.as_deref(), Some("kind"));
    assert_eq!(c.routing.template.as_deref(), Some("raw.{value}"));
}

#[test]
fn env_alone_configures_without_a_file() {
    let c = load_env("", &[("FLOE_ROUTING_TABLE", "bronze.events")]).unwrap();
    assert_eq!(c.routing.table.as_deref(), Some("bronze.events"));
}

#[test]
fn empty_env_var_removes_the_key() {
    let c = load_env(
        &format!("{FIXED}allow = [\"nope.*\", \"bronze.*\"]\n"),
        &[("FLOE_ROUTING_ALLOW", "")],
    )
    .unwrap();
    assert!(c.routing.allow.is_empty());
}

#[test]
fn warehouse_path_from_env_replaces_file_uri() {
    let c = load_env(
        &format!("{FIXED}[warehouse]\nuri = \"s3://b/p\"\n"),
        &[("FLOE_WAREHOUSE_PATH", "/wh")],
    )
    .unwrap();
    assert_eq!(c.warehouse.uri, None);
    assert_eq!(c.warehouse_location(), Location::Path("/wh".into()));
}

#[test]
fn malformed_overrides_name_the_variable() {
    let e = err_env(FIXED, &[("FLOE_DEFAULTS_EVOLUTION", "maybe")]);
    assert_eq!(
        e,
        "environment variable FLOE_DEFAULTS_EVOLUTION: expected true or false, got \"maybe\" \
         (overrides defaults.evolution)"
    );
    let e = err_env(FIXED, &[("FLOE_DEFAULTS_FORMAT_VERSION", "two")]);
    assert!(
        e.starts_with("environment variable FLOE_DEFAULTS_FORMAT_VERSION: expected an integer"),
        "{e}"
    );
    let e = err_env(FIXED, &[("FLOE_DEFAULTS_PROPERTIES", "a=1,b")]);
    assert!(
        e.starts_with("environment variable FLOE_DEFAULTS_PROPERTIES: expected KEY=VALUE"),
        "{e}"
    );
    let e = err_env(FIXED, &[("FLOE_ROUTING_MODE", "feild")]);
    assert_eq!(
        e,
        "config key routing.mode (from FLOE_ROUTING_MODE): unknown value \"feild\" (use fixed, field or source)"
    );
    let e = err_env(FIXED, &[("FLOE_DEFAULTS_FORMAT_VERSION", "4")]);
    assert_eq!(
        e,
        "config key defaults.format_version (from FLOE_DEFAULTS_FORMAT_VERSION): must be between 1 and 3, got 4"
    );
    let e = err_env(FIXED, &[("FLOE_ROUTING_ALLOW", "raw.*,Bad/Pattern")]);
    assert!(
        e.starts_with("config key routing.allow[1] (from FLOE_ROUTING_ALLOW): "),
        "{e}"
    );
    let e = err_env(FIXED, &[("FLOE_ROUTING_TABLE", "../x")]);
    assert!(
        e.starts_with(
            "config key routing.table (from FLOE_ROUTING_TABLE): invalid table name `../x`"
        ),
        "{e}"
    );
    let e = err_env(FIXED, &[("FLOE_ROUTING_MODE", "source")]);
    assert!(
        e.starts_with("config key routing.table: not used when routing.mode = \"source\""),
        "{e}"
    );
}

#[test]
fn unknown_floe_section_variables_are_refused() {
    let names = |v: &[&str]| keys::check_env_names(v.iter().map(|s| s.to_string()));
    assert!(
        names(&[
            "FLOE_CONFIG",
            "FLOE_LOG",
            "FLOE_WAREHOUSE",
            "FLOE_ROUTING_MODE",
            "PATH"
        ])
        .is_ok()
    );
    let e = names(&["FLOE_ROUTING_TEMPALTE"]).unwrap_err().to_string();
    assert_eq!(
        e,
        "environment variable FLOE_ROUTING_TEMPALTE: not a config key (did you mean FLOE_ROUTING_TEMPLATE?)"
    );
    let e = names(&["FLOE_DEFAULTS_COLOUR"]).unwrap_err().to_string();
    assert!(
        e.contains("defaults keys are evolution, unknown_fields"),
        "{e}"
    );
    assert!(names(&["FLOE_ROUTING_mode"]).is_err());
}

#[test]
fn load_reads_file_flag_env_file_inline_or_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("floe.toml");
    fs::write(&path, format!("{FIXED}[warehouse]\npath = \"wh\"\n")).unwrap();
    let none = |_: &str| None;

    let c = Config::load_with(Some(&path), &none).unwrap();
    assert_eq!(c.base_dir(), dir.path());
    assert_eq!(
        c.warehouse_location(),
        Location::Path(dir.path().join("wh"))
    );

    let path_text = path.to_string_lossy().to_string();
    let c = Config::load_with(None, &|k: &str| {
        (k == "FLOE_CONFIG").then(|| path_text.clone())
    })
    .unwrap();
    assert_eq!(c.routing.table.as_deref(), Some("bronze.events"));

    let inline =
        |k: &str| (k == "FLOE_CONFIG_TOML").then(|| "[routing]\ntable = \"a.b\"".to_string());
    let c = Config::load_with(None, &inline).unwrap();
    assert_eq!(c.routing.table.as_deref(), Some("a.b"));
    assert_eq!(c.warehouse_location(), Location::Path("warehouse".into()));

    // No file and no routing: fine, the caller names the table.
    let c = Config::load_with(None, &none).unwrap();
    assert!(c.routing.table.is_none());

    let e = Config::load_with(Some(&path), &inline)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("environment variable FLOE_CONFIG_TOML: a config file"),
        "{e}"
    );

    let missing = dir.path().join("nope.toml");
    let e = Config::load_with(Some(&missing), &none).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e}");
    assert!(e.to_string().contains("nope.toml"), "{e}");
}

#[test]
fn syntax_errors_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("floe.toml");
    fs::write(&path, "[routing]\ntable = \n").unwrap();
    let e = Config::load_with(Some(&path), &|_: &str| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "config file {}: TOML parse error at line 2",
            path.display()
        )),
        "{e}"
    );
    let bad_inline = |k: &str| (k == "FLOE_CONFIG_TOML").then(|| "routing = [".to_string());
    let e = Config::load_with(None, &bad_inline)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("FLOE_CONFIG_TOML: TOML parse error"), "{e}");
}

#[test]
fn unknown_keys_are_named_with_their_path() {
    assert_eq!(
        err("[routing]\nmode = \"source\"\ntempalte = \"raw.{topic}\"\n"),
        "config key routing.tempalte: unknown key (did you mean template?)"
    );
    let e = err(&format!("{FIXED}[warehouse]\ndirectory = \"x\"\n"));
    assert_eq!(
        e,
        "config key warehouse.directory: unknown key (expected path, uri)"
    );
    let e = err(&format!("{FIXED}[dead_letter]\npath = \"x\"\n"));
    assert!(
        e.starts_with("config key dead_letter.path: unknown key"),
        "{e}"
    );
    let e = err(&format!("{FIXED}[defaults]\nevolve = true\n"));
    assert_eq!(
        e,
        "config key defaults.evolve: unknown key (did you mean evolution?)"
    );
    let e = err(&format!("{FIXED}[tables.\"a.b\"]\npartitions = []\n"));
    assert_eq!(
        e,
        "config key tables.\"a.b\".partitions: unknown key (did you mean partition?)"
    );
    let e = err(&format!("{FIXED}[rooting]\n"));
    assert_eq!(
        e,
        "config key rooting: unknown section (did you mean routing?)"
    );
    let e = err(&format!("{FIXED}[kafka]\n"));
    assert!(
        e.contains(
            "expected warehouse, dead_letter, routing, defaults, aws, catalog, queue, http, maintenance, postgres, tables or sources"
        ),
        "{e}"
    );
}

#[test]
fn wrong_types_and_values_are_named() {
    let cases: &[(&str, &str)] = &[
        (
            "[routing]\ntable = 5\n",
            "config key routing.table: expected a string, got an integer",
        ),
        (
            "[routing]\ntable = \"a.b\"\ncreate = \"yes\"\n",
            "config key routing.create: expected true or false, got a string",
        ),
        (
            "[routing]\ntable = \" \"\n",
            "config key routing.table: must not be empty",
        ),
        (
            "[routing]\ntable = \"a.b\"\nallow = \"a.*\"\n",
            "config key routing.allow: expected an array of strings, got a string",
        ),
        (
            "[routing]\ntable = \"a.b\"\nallow = [\"a.*\", \"\"]\n",
            "config key routing.allow[1]: must not be empty",
        ),
        (
            "routing = 1\n",
            "config key routing: expected a table ([routing]), got an integer",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nformat_version = 0\n",
            "config key defaults.format_version: must be between 1 and 3, got 0",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nformat_version = 4\n",
            "config key defaults.format_version: must be between 1 and 3, got 4",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\ninfer_decimal_scale = 39\n",
            "config key defaults.infer_decimal_scale: must be between 0 and 38, got 39",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nepoch_unit = \"millis\"\n",
            "config key defaults.epoch_unit: unknown value \"millis\" (use s, ms, us or ns)",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[tables.\"a.b\"]\ncoerce = [\"to_string\", \"strings\"]\n",
            "config key tables.\"a.b\".coerce[1]: unknown value \"strings\" (use numeric_strings or to_string)",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\ncoerce = \"to_string\"\n",
            "config key defaults.coerce: expected an array of strings, got a string",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nunknown_fields = \"drop\"\n",
            "config key defaults.unknown_fields: unknown value \"drop\" (use ignore or reject)",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nproperties = { x = [1] }\n",
            "config key defaults.properties.x: expected a string, number or boolean, got an array",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[defaults]\nproperties = \"x=y\"\n",
            "config key defaults.properties: expected a table of properties ({ \"key\" = \"value\" }), got a string",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[tables.\"a.b\"]\npartition = [\"day(ts)\", \" \"]\n",
            "config key tables.\"a.b\".partition[1]: must not be empty",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[tables.\"a.b\"]\nsort = [\"\"]\n",
            "config key tables.\"a.b\".sort[0]: must not be empty",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[tables.\"a.b\"]\nformat_version = 9\n",
            "config key tables.\"a.b\".format_version: must be between 1 and 3, got 9",
        ),
        (
            "[routing]\ntable = \"a.b\"\n[tables.\"a.b\"]\nidentifier_fields = [\"id\", \"id\"]\n",
            "config key tables.\"a.b\".identifier_fields[1]: \"id\" is listed twice",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&err(text), want, "{text}");
    }
}

#[test]
fn property_values_become_strings() {
    let c = load(&format!(
        "{FIXED}[defaults]\nproperties = {{ a = 1, b = true, c = 1.5, d = \"x\" }}\n"
    ))
    .unwrap();
    let p = &c.defaults.properties;
    assert_eq!(
        (
            p["a"].as_str(),
            p["b"].as_str(),
            p["c"].as_str(),
            p["d"].as_str()
        ),
        ("1", "true", "1.5", "x")
    );
}

#[test]
fn routing_modes_need_their_keys_and_only_those() {
    let cases: &[(&str, &str)] = &[
        (
            "[routing]\nmode = \"field\"\ntemplate = \"raw.{value}\"\n",
            "config key routing.field: required when routing.mode = \"field\"",
        ),
        (
            "[routing]\nmode = \"field\"\nfield = \"type\"\n",
            "config key routing.template: required when routing.mode = \"field\"",
        ),
        (
            "[routing]\nmode = \"source\"\n",
            "config key routing.template: required when routing.mode = \"source\"",
        ),
        (
            "[routing]\ntable = \"a.b\"\ntemplate = \"raw.{value}\"\n",
            "config key routing.template: not used when routing.mode = \"fixed\"",
        ),
        (
            "[routing]\ntable = \"a.b\"\nfield = \"type\"\n",
            "config key routing.field: not used when routing.mode = \"fixed\"",
        ),
        (
            "[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"raw.{value}\"\ntable = \"a.b\"\n",
            "config key routing.table: not used when routing.mode = \"field\"",
        ),
        (
            "[routing]\nmode = \"source\"\nfield = \"t\"\ntemplate = \"raw.{topic}\"\n",
            "config key routing.field: not used when routing.mode = \"source\"",
        ),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.starts_with(want), "{text}\n got: {e}\nwant: {want}");
    }
    assert!(load("[routing]\nmode = \"source\"\ntemplate = \"raw.{topic}\"\n").is_ok());
}

#[test]
fn template_placeholders_must_fit_the_mode() {
    assert_eq!(
        err("[routing]\nmode = \"source\"\ntemplate = \"raw.{topik}\"\n"),
        "config key routing.template: unknown placeholder {topik} (use {source}, {topic}, {queue} or {stream})"
    );
    assert_eq!(
        err("[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"raw.{valeu}\"\n"),
        "config key routing.template: unknown placeholder {valeu} (use {value})"
    );
    let e = err("[routing]\nmode = \"field\"\nfield = \"t\"\ntemplate = \"raw.{topic}\"\n");
    assert!(
        e.starts_with(
            "config key routing.template: placeholder {topic} is for routing.mode = \"source\""
        ),
        "{e}"
    );
    let e = err("[routing]\nmode = \"source\"\ntemplate = \"raw.{value}\"\n");
    assert!(
        e.starts_with(
            "config key routing.template: placeholder {value} is for routing.mode = \"field\""
        ),
        "{e}"
    );
    let e = err("[routing]\nmode = \"source\"\ntemplate = \"{topic}\"\n");
    assert!(
        e.starts_with("config key routing.template: gives unusable names such as `x`"),
        "{e}"
    );
    for ok in ["{source}", "{topic}", "{queue}", "{stream}"] {
        let text = format!("[routing]\nmode = \"source\"\ntemplate = \"raw.{ok}\"\n");
        assert!(load(&text).is_ok(), "{ok}");
    }
}

#[test]
fn table_names_are_validated() {
    let long = format!("ns.{}", "x".repeat(300));
    for bad in ["../x", "a..b", "", "events", "a.b c", long.as_str()] {
        let e = err(&format!("[routing]\ntable = {bad:?}\n"));
        assert!(e.starts_with("config key routing.table: "), "{bad}: {e}");
        if !bad.is_empty() {
            assert!(e.contains("invalid table name"), "{bad}: {e}");
        }
        if bad.len() > 255 {
            assert!(e.contains("longer than 255"), "{e}");
        }
        let e = err(&format!("{FIXED}[tables.{bad:?}]\n"));
        let key = keys::join("tables", bad);
        assert!(
            e.starts_with(&format!("config key {key}: invalid table name")),
            "{bad}: {e}"
        );
    }
    let e = err(&format!(
        "{FIXED}[tables.bronze.events]\nevolution = false\n"
    ));
    assert_eq!(
        e,
        "config key tables.bronze: invalid table name `bronze`: expected NAMESPACE.TABLE \
         (quote names with dots: [tables.\"bronze.events\"])"
    );
    assert!(load(&format!("{FIXED}[tables.\"a.b.c\"]\n")).is_ok());
}

#[test]
fn fixed_table_must_be_allowed() {
    let e = err("[routing]\ntable = \"bronze.events\"\nallow = [\"raw.*\"]\n");
    assert_eq!(
        e,
        "config key routing.table: `bronze.events` is not allowed by routing.allow (raw.*)"
    );
}

#[test]
fn schema_files_must_exist_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{FIXED}[tables.\"a.b\"]\nschema = \"s.json\"\n");
    let e = Config::from_toml_str(&text, dir.path(), &no_env)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "config key tables.\"a.b\".schema: no schema file at {}",
            dir.path().join("s.json").display()
        )
    );
    fs::write(dir.path().join("s.json"), "{}").unwrap();
    let c = Config::from_toml_str(&text, dir.path(), &no_env).unwrap();
    assert_eq!(c.table("a.b").schema, Some(dir.path().join("s.json")));
}

#[test]
fn absolute_paths_are_kept() {
    let c = Config::from_toml_str(
        &format!("{FIXED}[warehouse]\npath = \"/srv/wh\"\n"),
        Path::new("/etc/floe"),
        &no_env,
    )
    .unwrap();
    assert_eq!(c.warehouse_location(), Location::Path("/srv/wh".into()));
    assert_eq!(c.resolve(Path::new("./x")), Path::new("/etc/floe/x"));
}

#[test]
fn warehouse_locations_are_checked() {
    let e = err(&format!(
        "{FIXED}[warehouse]\npath = \"a\"\nuri = \"s3://b\"\n"
    ));
    assert_eq!(
        e,
        "config key warehouse.uri: set either warehouse.path or warehouse.uri, not both"
    );
    let e = err(&format!("{FIXED}[warehouse]\nuri = \"bucket/prefix\"\n"));
    assert_eq!(
        e,
        "config key warehouse.uri: expected a URI like s3://bucket/prefix, got \"bucket/prefix\""
    );
    let e = err(&format!("{FIXED}[dead_letter]\nlocation = \"s3://\"\n"));
    assert!(
        e.starts_with("config key dead_letter.location: expected a URI"),
        "{e}"
    );
}

#[test]
fn table_concurrency_defaults_to_eight_and_is_bounded() {
    assert_eq!(load("").unwrap().queue.table_concurrency(), 8);
    let c = load_env("", &[("FLOE_QUEUE_TABLE_CONCURRENCY", "32")]).unwrap();
    assert_eq!(c.queue.table_concurrency(), 32);
    let e = err("[queue]\ntable_concurrency = 0\n");
    assert!(
        e.contains("queue.table_concurrency") && e.contains("between 1 and 256"),
        "{e}"
    );
}

#[test]
fn the_commit_queue_is_one_shard_unless_urls_name_more() {
    const Q: &str = "https://sqs.eu-west-1.amazonaws.com/1/floe-commits";
    assert!(load("").unwrap().queue.shard_urls().is_empty());
    let one = load(&format!("[queue]\nurl = \"{Q}\"\n")).unwrap();
    assert_eq!(one.queue.shard_urls(), [Q]);
    // The functions' form: FLOE_QUEUE_URLS, comma-separated, in shard order;
    // a committer's FLOE_QUEUE_URL names the one it reads.
    let urls = format!("{Q}-0,{Q}-1, {Q}-2");
    let c = load_env(
        "",
        &[
            ("FLOE_QUEUE_URLS", urls.as_str()),
            ("FLOE_QUEUE_URL", &format!("{Q}-1")),
        ],
    )
    .unwrap();
    assert_eq!(
        c.queue.shard_urls(),
        [format!("{Q}-0"), format!("{Q}-1"), format!("{Q}-2")]
    );
    assert_eq!(c.queue.url.as_deref(), Some(format!("{Q}-1").as_str()));
    // A blank FLOE_QUEUE_URL (the module's writers) leaves only the shards.
    let c = load_env(
        "",
        &[("FLOE_QUEUE_URLS", urls.as_str()), ("FLOE_QUEUE_URL", "")],
    )
    .unwrap();
    assert_eq!((c.queue.url, c.queue.urls.len()), (None, 3));

    let e = err_env(
        "",
        &[
            ("FLOE_QUEUE_URLS", urls.as_str()),
            ("FLOE_QUEUE_URL", &format!("{Q}-9")),
        ],
    );
    assert!(
        e.contains("queue.url")
            && e.contains("FLOE_QUEUE_URL")
            && e.contains("not one of queue.urls"),
        "{e}"
    );
    let e = err(&format!(
        "[queue]\nurls = [\"{Q}-0\", \"{Q}-1\", \"{Q}-0\"]\n"
    ));
    assert!(
        e.starts_with("config key queue.urls[2]:") && e.contains("listed twice"),
        "{e}"
    );
    let e = err("[queue]\nurls = [\"floe-commits\"]\n");
    assert!(
        e.starts_with("config key queue.urls[0]: expected a URI"),
        "{e}"
    );
    let many: Vec<String> = (0..17).map(|i| format!("\"{Q}-{i}\"")).collect();
    let e = err(&format!("[queue]\nurls = [{}]\n", many.join(", ")));
    assert!(
        e.starts_with("config key queue.urls:") && e.contains("at most 16 shards, got 17"),
        "{e}"
    );
    let e = err("[queue]\nurls = \"https://sqs/1/q\"\n");
    assert!(e.contains("queue.urls") && e.contains("array"), "{e}");
}

#[test]
fn an_orphan_window_shorter_than_the_queues_retention_is_refused() {
    let c = load("").unwrap();
    assert_eq!(c.maintenance.orphan_window_ms(), 16 * 24 * 3600 * 1000);
    assert_eq!(
        c.queue.longest_retention(),
        ("queue.dlq_retention_seconds", 1_209_600)
    );
    // The old default, 3 days, is shorter than the DLQ's 14.
    let e = err("[maintenance]\norphan_window_seconds = 259200\n");
    assert!(
        e.starts_with("config key maintenance.orphan_window_seconds: 259200 s is shorter than queue.dlq_retention_seconds (1209600 s)"),
        "{e}"
    );
    let e = err_env(
        "[maintenance]\norphan_window_seconds = 1209599\n",
        &[
            ("FLOE_QUEUE_RETENTION_SECONDS", "1209600"),
            ("FLOE_QUEUE_DLQ_RETENTION_SECONDS", "60"),
        ],
    );
    assert!(
        e.contains("shorter than queue.retention_seconds (1209600 s)"),
        "{e}"
    );
    let e = err_env(
        "[maintenance]\norphan_window_seconds = 86400\n",
        &[("FLOE_QUEUE_DLQ_RETENTION_SECONDS", "3600")],
    );
    assert!(
        e.contains("shorter than queue.retention_seconds (172800 s)"),
        "{e}"
    );
    // At least the longest retention is accepted; a shorter DLQ lets a shorter window through.
    let c = load("[maintenance]\norphan_window_seconds = 1209600\n").unwrap();
    assert_eq!(c.maintenance.orphan_window_ms(), 1_209_600_000);
    let c = load_env(
        "[queue]\ndlq_retention_seconds = 86400\n[maintenance]\norphan_window_seconds = 172800\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.maintenance.orphan_window_ms(), 172_800_000);
    let e = err("[queue]\nretention_seconds = 30\n");
    assert!(
        e.contains("queue.retention_seconds") && e.contains("between 60 and 1209600"),
        "{e}"
    );
}

#[test]
fn deployment_sections_are_checked_and_overridable() {
    let c = load_env(
        "[warehouse]\nuri = \"s3://b/wh\"\n",
        &[
            ("FLOE_CATALOG_TYPE", "glue"),
            (
                "FLOE_QUEUE_URL",
                "https://sqs.eu-west-1.amazonaws.com/1/floe",
            ),
            ("FLOE_AWS_REGION", "eu-west-1"),
            ("FLOE_AWS_ENDPOINT", "http://127.0.0.1:5001"),
            ("FLOE_HTTP_TOKEN", "s3cret-token"),
            ("FLOE_HTTP_MAX_BODY_BYTES", "1024"),
        ],
    )
    .unwrap();
    assert_eq!(c.catalog.kind, CatalogType::Glue);
    assert_eq!(c.aws.region.as_deref(), Some("eu-west-1"));
    assert_eq!(c.aws.endpoint.as_deref(), Some("http://127.0.0.1:5001"));
    assert_eq!(
        c.queue.url.as_deref(),
        Some("https://sqs.eu-west-1.amazonaws.com/1/floe")
    );
    assert_eq!(
        c.claim_prefix(),
        Location::Uri("s3://b/wh/_floe/claims".into())
    );
    assert_eq!(c.http.max_body(), 1024);
    assert_eq!(c.http.wait(), std::time::Duration::from_secs(20));
    assert_eq!(
        c.http.token.as_ref().map(Secret::expose),
        Some("s3cret-token")
    );
    // The token stays out of logs and serialised configs.
    assert!(!format!("{c:?}").contains("s3cret"));
    assert!(!toml::to_string(&c).unwrap().contains("s3cret"));

    let e = err("[catalog]\ntype = \"glue\"\n");
    assert!(e.contains("warehouse.uri") && e.contains("s3://"), "{e}");
    let e = err("[catalog]\ntype = \"glu\"\n");
    assert!(
        e.contains("catalog.type") && e.contains("sqlite, glue or rest"),
        "{e}"
    );
    let e = err("[http]\nmax_body_bytes = 0\n");
    assert!(e.contains("http.max_body_bytes"), "{e}");
    let e = err("[catalog]\ncatalog_id = \"123\"\n");
    assert!(e.contains("catalog.catalog_id"), "{e}");
    let e = err_env("", &[("FLOE_AWS_ENDPOINT", "localhost")]);
    assert!(
        e.contains("aws.endpoint") && e.contains("FLOE_AWS_ENDPOINT"),
        "{e}"
    );
    assert!(
        keys::check_env_names(["FLOE_QUEUE_URLL".to_string()].into_iter())
            .unwrap_err()
            .to_string()
            .contains("FLOE_QUEUE_URL")
    );
}

#[test]
fn sources_sections_set_how_each_source_opens() {
    let c = load(&format!(
        "{FIXED}[sources.orders]\nenvelope = \"sns\"\nregistry = \"http://registry:8081\"\nregistry_username = \"u\"\nregistry_password = \"p\"\nremoves = \"keep\"\nmetadata = true\n[sources.\"*\"]\nenvelope = \"none\"\n"
    ))
    .unwrap();
    let orders = c.source("orders");
    assert_eq!(orders.envelope, EnvelopeKind::Sns);
    assert_eq!(orders.registry.as_deref(), Some("http://registry:8081"));
    assert_eq!(orders.removes, Removes::Keep);
    assert!(orders.metadata);
    // Every other source takes `*`; without it, the defaults.
    assert_eq!(c.source("clicks").envelope, EnvelopeKind::None);
    assert_eq!(
        load(FIXED).unwrap().source("clicks"),
        SourceConfig::default()
    );
    // Bad values name their key.
    let e = err(&format!("{FIXED}[sources.orders]\nenvelope = \"sqs\"\n"));
    assert!(e.contains("sources.orders.envelope"), "{e}");
    let e = err(&format!(
        "{FIXED}[sources.orders]\nregistery = \"http://r\"\n"
    ));
    assert!(e.contains("sources.orders.registery"), "{e}");
    let e = err(&format!(
        "{FIXED}[sources.orders]\nregistry = \"http://r\"\nregistry_username = \"u\"\n"
    ));
    assert!(e.contains("sources.orders.registry_password"), "{e}");
}

#[test]
fn change_orders_are_kept_under_order_sources() {
    for by in [ChangeOrder::Position, ChangeOrder::TsMs] {
        assert!(crate::source::is_order_source(by.source()), "{by:?}");
    }
    assert!(!crate::source::is_order_source("file:/x@1"));
}

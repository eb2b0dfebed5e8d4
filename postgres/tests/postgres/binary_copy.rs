//! The initial copy through binary COPY into columns against the text path:
//! the same table, every type the source writes, copied by `sync` into two
//! warehouses (one per path) and compared value by value.

use floe_core::embedded::Embedded;
use floe_postgres::PgConfig;
use floe_postgres::sync::{SyncReport, open, sync};

use super::pitfalls::{Rows, iceberg_rows, options, prepared, warehouse};

/// Copies `cfg`'s tables into a fresh warehouse through one path; returns
/// the warehouse (with its directory) and the run's report.
async fn copy(cfg: &PgConfig, columns: bool) -> (tempfile::TempDir, Embedded, SyncReport) {
    let (dir, floe) = warehouse();
    let mut opts = options();
    opts.snapshot_columns = columns;
    let mut source = open(&floe, cfg, &opts.namespace).await.unwrap();
    let report = sync(&floe, &mut source, cfg, &opts).await.unwrap();
    (dir, floe, report)
}

const EVERY_TYPE: &str = "
CREATE TABLE every_type (
    id bigint PRIMARY KEY,
    i2 smallint, i4 integer, i8 bigint, f4 real, f8 double precision,
    n numeric(12,3), n38 numeric(38,9), nfree numeric, nneg numeric(5,-2),
    t text, vc varchar(20), ch char(5), b boolean,
    d date, tm time, ts timestamp, tstz timestamptz,
    u uuid, j json, jb jsonb, by bytea, o oid, arr int[], iv interval, addr inet
);
INSERT INTO every_type VALUES
  (1, 7, 42, 9000000000, 1.5, 2.25, 1234.5, 12345678901234567890.123456789, 3.14159,
   12300, 'plain', 'short', 'ab', true, '2024-02-29', '12:34:56.789', '2024-01-02 03:04:05.123456',
   '2024-01-02 03:04:05.123456+02', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2.50, \"x\"]}',
   '{\"b\": 1, \"a\": [1, 2.50]}', '\\x00ff10', 12345, '{1,NULL,3}', '1 day 02:03:04', '192.168.1.1'),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (-9223372036854775808, -32768, -2147483648, -9223372036854775808, -3.4e38, '-Infinity',
   -999999999.999, -12345678901234567890.123456789, '-0.000001000', -9900,
   E'Zürich 東京 🚀 \\n\\t\"quoted\" \\\\ back', '', 'x', false, '0001-01-01', '23:59:59.999999',
   '1900-01-01 00:00:00.000001', '9999-12-31 23:59:59.999999+00',
   '00000000-0000-0000-0000-000000000000', '[]', '{}', '\\x', 4294967295, '{}', '-1 mon',
   '::1/128'),
  (9223372036854775807, 32767, 2147483647, 9223372036854775807, 'NaN', 'Infinity',
   0, 0.000000001, 'NaN', 0, 'trailing space ', 'twenty characters!!!', 'abcde', true,
   '1969-12-31', '00:00:00', '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999+00',
   'ffffffff-ffff-ffff-ffff-ffffffffffff', 'null', '\"s\"', '\\xdeadbeef', 0, '{{1,2},{3,4}}',
   '0 seconds', '10.0.0.0/8'),
  (5, 1, 1, 1, 1.17549435e-38, 4.9e-324, -0.001, -0.000000001, '1e-20', -100,
   'x', 'y', 'z', false, '1582-10-15', '00:00:00.000001', '1582-10-15 00:00:00',
   '1677-09-21 00:12:43.145224+00', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12', '1', '-0.5', '\\x00',
   1, '{-1}', 'P1Y', '2001:db8::1');
INSERT INTO every_type (id, i4, n, nfree, t, tstz, b)
SELECT g, g * 7, g * 1.5 - 1000, g / 7.0, 'row ' || g || ' ✓',
       '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute 1.5 second', g % 2 = 0
  FROM generate_series(10, 2509) g;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_copy_writes_every_type_as_the_text_path_does() {
    let Some((_conninfo, cfg)) =
        prepared("floe_bin_types", EVERY_TYPE, &["public.every_type"]).await
    else {
        return;
    };
    let (_text_dir, text, text_report) = copy(&cfg, false).await;
    let (_bin_dir, binary, bin_report) = copy(&cfg, true).await;
    // 2,505 rows in chunks of 1,000: three chunks, all through binary COPY.
    assert_eq!(text_report.snapshot_rows, 2505);
    assert_eq!(text_report.columnar_rows, 0);
    assert_eq!(bin_report.snapshot_rows, 2505);
    assert_eq!(bin_report.columnar_rows, 2505);
    let by_text = iceberg_rows(&text, "raw.every_type").await;
    let by_binary = iceberg_rows(&binary, "raw.every_type").await;
    assert_eq!(by_binary.len(), 2505);
    for (id, row) in &by_binary {
        assert_eq!(by_text.get(id), Some(row), "row {id}");
    }
    assert_eq!(by_text.len(), by_binary.len());
    // The comparison is not of two empty or all-null tables.
    let value = |rows: &Rows, id: &str, column: &str| rows[id][column].clone();
    let min = "-9223372036854775808";
    assert_eq!(
        value(&by_binary, min, "n38"),
        "-12345678901234567890.123456789"
    );
    assert_eq!(value(&by_binary, min, "nfree"), "-0.000001000");
    assert_eq!(value(&by_binary, min, "nneg"), "-9900");
    assert_eq!(
        value(&by_binary, min, "t"),
        "Zürich 東京 🚀 \n\t\"quoted\" \\ back"
    );
    assert_eq!(value(&by_binary, min, "ch"), "x    ");
    assert_eq!(
        value(&by_binary, min, "tstz"),
        "9999-12-31T23:59:59.999999Z"
    );
    assert_eq!(value(&by_binary, min, "d"), "0001-01-01");
    assert_eq!(
        value(&by_binary, "1", "tstz"),
        "2024-01-02T01:04:05.123456Z"
    );
    assert_eq!(value(&by_binary, "1", "jb"), r#"{"a": [1, 2.50], "b": 1}"#);
    assert_eq!(value(&by_binary, "1", "arr"), "{1,NULL,3}");
    assert_eq!(value(&by_binary, "1", "addr"), "192.168.1.1");
    assert_eq!(value(&by_binary, "1", "by"), "00ff10");
    assert_eq!(value(&by_binary, "2", "n"), "NULL");
    assert_eq!(
        value(&by_binary, "5", "u"),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"
    );
    assert_eq!(
        value(&by_binary, "9223372036854775807", "tstz"),
        "1969-12-31T23:59:59.999999Z"
    );
    assert_eq!(value(&by_binary, "9223372036854775807", "f4"), "NaN");
    assert_eq!(value(&by_binary, "2509", "t"), "row 2509 ✓");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_iceberg_cannot_hold_send_the_chunk_through_the_text_path() {
    let Some((_conninfo, cfg)) = prepared(
        "floe_bin_odd",
        "CREATE TABLE odd (id int PRIMARY KEY, at timestamptz, amount numeric(10,2), tm time, d date);
         INSERT INTO odd VALUES
           (1, 'infinity', 1.00, '01:00', '2024-01-01'),
           (2, '2024-01-01 00:00:00+00', 'NaN', '02:00', '2024-01-02'),
           (3, '2024-01-01 00:00:00+00', 3.00, '24:00:00', '2024-01-03'),
           (4, '2024-01-01 00:00:00+00', 4.00, '04:00', '-infinity'),
           (5, '2024-01-05 00:00:00+00', 5.00, '05:00', '2024-01-05');",
        &["public.odd"],
    )
    .await
    else {
        return;
    };
    let (_text_dir, text, _) = copy(&cfg, false).await;
    let (_bin_dir, binary, report) = copy(&cfg, true).await;
    // The chunk went through the text path, whose writer refuses what it
    // always refused: nothing is made up for a value Iceberg cannot hold.
    assert_eq!(report.columnar_rows, 0);
    let by_text = iceberg_rows(&text, "raw.odd").await;
    let by_binary = iceberg_rows(&binary, "raw.odd").await;
    assert_eq!(by_text, by_binary);
    assert!(by_binary.contains_key("5"), "{by_binary:?}");
    assert!(!by_binary.contains_key("1"), "{by_binary:?}");
}

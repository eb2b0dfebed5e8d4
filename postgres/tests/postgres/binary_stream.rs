//! Changes read in pgoutput's binary mode against the text path: the same
//! slot peeked both ways, every type floe reads in binary at its edges, and
//! the lines compared byte for byte (they are what the writer shreds).

use floe_postgres::{PgConfig, PgSource, setup};

use super::{client, config, done, fresh_db, lines};

/// A table of every type binary mode reads.
const EDGES: &str = "
CREATE TABLE edges (
    id bigint PRIMARY KEY,
    i2 smallint, i4 integer, i8 bigint, f4 real, f8 double precision,
    n numeric(12,3), n38 numeric(38,9), nfree numeric, nneg numeric(5,-2),
    t text, vc varchar(20), ch char(5), b boolean,
    d date, tm time, ts timestamp, tstz timestamptz,
    u uuid, j json, jb jsonb, by bytea, o oid
)";

/// Its values at their edges, then updates (a key among them) and deletes.
const EDGE_ROWS: &str = "
INSERT INTO edges VALUES
  (1, 7, 42, 9000000000, 1.5, 2.25, 1234.5, 12345678901234567890.123456789, 3.14159,
   12300, 'plain', 'short', 'ab', true, '2024-02-29', '12:34:56.789', '2024-01-02 03:04:05.123456',
   '2024-01-02 03:04:05.123456+02', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2.50, \"x\"]}',
   '{\"b\": 1, \"a\": [1, 2.50]}', '\\x00ff10', 12345);
INSERT INTO edges (id) VALUES (2);
INSERT INTO edges VALUES
  (-9223372036854775808, -32768, -2147483648, -9223372036854775808, -3.4e38, '-Infinity',
   -999999999.999, -12345678901234567890.123456789, '-0.000001000', -9900,
   E'Zürich 東京 🚀 \\n\\t\"quoted\" \\\\ back', '', 'x', false, '0001-01-01', '23:59:59.999999',
   '1900-01-01 00:00:00.000001', '9999-12-31 23:59:59.999999+00',
   '00000000-0000-0000-0000-000000000000', '[]', '{}', '\\x', 4294967295);
INSERT INTO edges VALUES
  (9223372036854775807, 32767, 2147483647, 9223372036854775807, 'NaN', 'Infinity',
   0, 0.000000001, 'NaN', 0, 'trailing space ', 'twenty characters!!!', 'abcde', true,
   'infinity', '24:00:00', 'infinity', '-infinity',
   'ffffffff-ffff-ffff-ffff-ffffffffffff', 'null', '\"s\"', '\\xdeadbeef', 0);
INSERT INTO edges VALUES
  (5, 1, 1, 1, 1.17549435e-38, 4.9e-324, -0.001, -0.000000001, '1e-20', -100,
   'x', 'y', 'z', false, '4713-01-01 BC', '00:00:00.000001', '0001-12-31 23:59:59.5 BC',
   '4713-01-01 00:00:00+00 BC', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12', '1', '-0.5', '\\x00', 1);
INSERT INTO edges (id, f4, f8, nfree, d, ts, tstz) VALUES
  (6, 1e6, 1e15, 'Infinity', '5874897-12-31', '294276-12-31 23:59:59.999999', '10000-01-01 00:00:00+00'),
  (7, 123456, 1e14, '-Infinity', '-infinity', '-infinity', '0001-01-01 00:00:00+00 BC'),
  (8, 3.4028235e38, 1e-5, 1e100, '1970-01-01', '1969-12-31 23:59:59.999999', '2000-01-01 00:00:00+00'),
  (9, 1e-45, 1e-4, -0.0, '2000-02-29', '2000-01-01 00:00:00.1', '1999-12-31 23:59:59.99+00'),
  (10, 0.1, 0.1, 1e-131, '1582-10-15', '1582-10-04 23:59:59', '1677-09-21 00:12:43.145224+00'),
  (11, -0.0, '-0', 123456789012345678901234567890.5, '0001-01-01', '0001-01-01 00:00:00', '1-01-01 00:00:00+00'),
  (12, 16777216, 1.7976931348623157e308, 0.5, '9999-12-31', '9999-12-31 23:59:59', '2262-04-11 23:47:16.854775+00'),
  (13, 7.0e-7, 123456789.125, 1e-6, '1999-01-08', '2024-06-30 12:00:00.000010', '2024-06-30 12:00:00.1+00');
INSERT INTO edges (id, i4, n, nfree, t, tstz, b)
SELECT g, g * 7, g * 1.5 - 1000, g / 7.0, 'row ' || g || ' ✓',
       '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute 1.5 second', g % 2 = 0
  FROM generate_series(100, 349) g;
UPDATE edges SET f8 = f8 * 2, tstz = tstz + interval '1 day' WHERE id BETWEEN 100 AND 120;
UPDATE edges SET id = 50 WHERE id = 5;
UPDATE edges SET ts = '2024-01-01', t = NULL WHERE id = 2;
DELETE FROM edges WHERE id = 7 OR id BETWEEN 300 AND 310;
";

/// The table's lines of the slot's pending changes, peeked in `binary`
/// mode or as text; and whether binary mode was still on after the read.
async fn peeked(cfg: &PgConfig, table: &str, binary: bool) -> (Vec<String>, bool) {
    let mut cfg = cfg.clone();
    cfg.binary = binary;
    let mut source = PgSource::connect(cfg).await.unwrap();
    let batch = source.read_batch(&done(&[table])).await.unwrap();
    (lines(&batch, table), source.reads_binary())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_changes_read_as_the_text_path_does() {
    let Some(conninfo) = fresh_db("floe_binstream").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(EDGES).await.unwrap();
    let cfg = config(&conninfo, "floe_binstream", &["public.edges"]);
    setup(&cfg).await.unwrap();
    db.batch_execute(EDGE_ROWS).await.unwrap();
    db.batch_execute(
        "INSERT INTO edges (id, f8) VALUES (1000, 1.5);
         UPDATE edges SET nfree = nfree + 1, tstz = '2030-01-01' WHERE id BETWEEN 100 AND 200;",
    )
    .await
    .unwrap();

    let (text, text_binary) = peeked(&cfg, "public.edges", false).await;
    let (binary, still_binary) = peeked(&cfg, "public.edges", true).await;
    assert!(!text_binary, "the text read asked for text");
    assert!(still_binary, "every column's type reads in binary");
    assert!(text.len() > 300, "{} lines", text.len());
    assert_eq!(binary.len(), text.len());
    for (b, t) in binary.iter().zip(&text) {
        assert_eq!(b, t, "binary line differs from the text line");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_binary_cannot_read_or_a_retyped_column_reads_as_text_does() {
    let Some(conninfo) = fresh_db("floe_binfall").await else {
        return;
    };
    let db = client(&conninfo).await;
    db.batch_execute(
        "CREATE TABLE narrow (id int PRIMARY KEY, v int4, at timestamptz);
         CREATE TABLE wide (id int PRIMARY KEY, tags int[], span interval)",
    )
    .await
    .unwrap();
    let narrow = config(&conninfo, "floe_binfall", &["public.narrow"]);
    setup(&narrow).await.unwrap();
    for sql in [
        "INSERT INTO narrow SELECT g, g * 1000, '2024-01-01'::timestamptz + g * interval '1 hour'
           FROM generate_series(1, 50) g",
        "ALTER TABLE narrow ALTER COLUMN v TYPE float8",
        "UPDATE narrow SET v = v / 3 WHERE id <= 10",
    ] {
        db.batch_execute(sql).await.unwrap();
    }
    // Changes made while `v` was int4 are sent as int4 and read as such,
    // then as the float8 column the catalog now has.
    let (text, _) = peeked(&narrow, "public.narrow", false).await;
    let (binary, still_binary) = peeked(&narrow, "public.narrow", true).await;
    assert!(still_binary);
    assert_eq!(binary.len(), 60);
    assert_eq!(binary, text);
    assert!(binary[0].contains(r#""v":1000"#), "{}", binary[0]);

    // Arrays and intervals have no binary reader: the peek is read as text.
    let both = config(&conninfo, "floe_binfall", &["public.narrow", "public.wide"]);
    db.batch_execute(
        "ALTER PUBLICATION floe_binfall_pub ADD TABLE wide;
         INSERT INTO wide VALUES (1, '{1,NULL,3}', '1 day 02:03:04')",
    )
    .await
    .unwrap();
    let (text, _) = peeked(&both, "public.wide", false).await;
    let (fallen, still_binary) = peeked(&both, "public.wide", true).await;
    assert!(
        !still_binary,
        "a column binary cannot read turns binary mode off"
    );
    assert_eq!(fallen, text);
    assert!(
        fallen[0].contains(r#""span":"P1DT2H3M4S""#),
        "{}",
        fallen[0]
    );
}

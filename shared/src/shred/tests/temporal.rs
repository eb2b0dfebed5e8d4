use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Time64MicrosecondType, TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};
use iceberg::spec::PrimitiveType as P;

use super::super::{EpochUnit, ShredOptions};
use super::{all_ok, p, rejected, single, single_with};

fn unit(epoch_unit: EpochUnit) -> ShredOptions {
    ShredOptions {
        epoch_unit,
        ..Default::default()
    }
}

fn micros(a: &ArrayRef) -> Vec<i64> {
    a.as_primitive::<TimestampMicrosecondType>()
        .values()
        .to_vec()
}

fn nanos(a: &ArrayRef) -> Vec<i64> {
    a.as_primitive::<TimestampNanosecondType>()
        .values()
        .to_vec()
}

/// 2026-11-30T10:00:00Z in microseconds.
const T0: i64 = 1_796_032_800_000_000;

#[test]
fn date_strings_and_day_numbers() {
    let (a, r) = single(
        p(P::Date),
        &[
            "\"1970-01-01\"",
            "\"2024-02-29\"",
            "\"1969-07-20\"",
            "19782",
            "-1",
            "\"2023-02-29\"",
            "\"2024-13-01\"",
            "\"2024-1-01\"",
            "\"2024-01-01T00:00:00\"",
            "1.5",
            "true",
        ],
    );
    all_ok(&r[..5]);
    assert_eq!(
        a.as_primitive::<Date32Type>().values().as_ref(),
        &[0, 19_782, -165, 19_782, -1]
    );
    for bad in &r[5..9] {
        assert!(rejected(bad, "v").contains("not a valid date"));
    }
    assert!(rejected(&r[9], "v").contains("whole number of days"));
    assert!(rejected(&r[10], "v").contains("YYYY-MM-DD"));
}

#[test]
fn time_strings_and_numbers() {
    let (a, r) = single(
        p(P::Time),
        &[
            "\"00:00:00\"",
            "\"10:30:15.25\"",
            "\"23:59:59.999999\"",
            "\"12:00:00.1234560\"",
            "1500",
            "1500.5",
            "\"24:00:00\"",
            "\"12:00:00.1234567\"",
            "\"12:00\"",
            "86400000",
            "-1",
            "1500.0005",
        ],
    );
    all_ok(&r[..6]);
    assert_eq!(
        a.as_primitive::<Time64MicrosecondType>().values().as_ref(),
        &[
            0,
            37_815_250_000,
            86_399_999_999,
            43_200_123_456,
            1_500_000,
            1_500_500
        ]
    );
    assert!(rejected(&r[6], "v").contains("not a valid time"));
    assert!(rejected(&r[7], "v").contains("would truncate"));
    assert!(rejected(&r[8], "v").contains("not a valid time"));
    assert!(rejected(&r[9], "v").contains("not within one day"));
    assert!(rejected(&r[10], "v").contains("not within one day"));
    assert!(rejected(&r[11], "v").contains("would be truncated"));

    let (a, r) = single_with(p(P::Time), unit(EpochUnit::Seconds), &["3600", "1.000001"]);
    all_ok(&r);
    assert_eq!(
        a.as_primitive::<Time64MicrosecondType>().values().as_ref(),
        &[3_600_000_000, 1_000_001]
    );
}

#[test]
fn timestamptz_offsets_convert_to_utc() {
    let (a, r) = single(
        p(P::Timestamptz),
        &[
            "\"2026-11-30T10:00:00Z\"",
            "\"2026-11-30T15:30:00+05:30\"",
            "\"2026-11-30T02:00:00-0800\"",
            "\"2026-11-30T11:00:00+01\"",
            "\"2026-11-30T10:00:00\"",
            "\"2026-11-30 10:00:00z\"",
            "\"2024-02-29T23:59:59.123456Z\"",
            "\"1969-12-31T23:59:59.999999Z\"",
            "\"1900-01-01T00:00:00Z\"",
        ],
    );
    all_ok(&r);
    assert_eq!(
        micros(&a),
        vec![
            T0,
            T0,
            T0,
            T0,
            T0,
            T0,
            1_709_251_199_123_456,
            -1,
            -2_208_988_800_000_000
        ]
    );
    assert_eq!(
        a.data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
    );
}

#[test]
fn timestamp_without_zone_takes_wall_time_or_converts_offsets() {
    let (a, r) = single(
        p(P::Timestamp),
        &[
            "\"2026-11-30T10:00:00\"",
            "\"2026-11-30 10:00:00.5\"",
            "\"2026-11-30T12:00:00+02:00\"",
        ],
    );
    all_ok(&r);
    assert_eq!(micros(&a), vec![T0, T0 + 500_000, T0]);
    assert_eq!(
        a.data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, None)
    );
}

#[test]
fn timestamp_fraction_precision() {
    let (a, r) = single(
        p(P::Timestamptz),
        &[
            "\"2026-11-30T10:00:00.123456000Z\"",
            "\"2026-11-30T10:00:00.1Z\"",
            "\"2026-11-30T10:00:00.123456789Z\"",
            "\"2026-11-30T10:00:00.Z\"",
        ],
    );
    all_ok(&r[..2]);
    assert_eq!(micros(&a), vec![T0 + 123_456, T0 + 100_000]);
    assert!(rejected(&r[2], "v").contains("would truncate"));
    assert!(rejected(&r[3], "v").contains("not a valid timestamp"));

    let (a, r) = single(
        p(P::TimestamptzNs),
        &[
            "\"2026-11-30T10:00:00.123456789Z\"",
            "\"2026-11-30T10:00:00.123456789000Z\"",
            "\"2026-11-30T11:00:00.000000001+01:00\"",
            "\"2026-11-30T10:00:00.1234567891Z\"",
            "\"2300-01-01T00:00:00Z\"",
        ],
    );
    all_ok(&r[..3]);
    let t0_ns = T0 * 1000;
    assert_eq!(
        nanos(&a),
        vec![t0_ns + 123_456_789, t0_ns + 123_456_789, t0_ns + 1]
    );
    assert_eq!(
        a.data_type(),
        &DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()))
    );
    assert!(rejected(&r[3], "v").contains("would truncate"));
    assert!(rejected(&r[4], "v").contains("out of range"));
}

#[test]
fn timestamp_ns_without_zone() {
    let (a, r) = single(
        p(P::TimestampNs),
        &["\"1970-01-01T00:00:00.000000001\"", "5"],
    );
    all_ok(&r);
    assert_eq!(nanos(&a), vec![1, 5_000_000]);
    assert_eq!(
        a.data_type(),
        &DataType::Timestamp(TimeUnit::Nanosecond, None)
    );
}

#[test]
fn timestamp_bad_strings() {
    let (_, r) = single(
        p(P::Timestamptz),
        &[
            "\"2026-11-30\"",
            "\"2026-11-30T10:00\"",
            "\"2026-11-30T25:00:00Z\"",
            "\"2026-11-31T10:00:00Z\"",
            "\"2026-11-30T10:00:00+25:00\"",
            "\"2026-11-30T10:00:00 UTC\"",
            "\"2026-11-30X10:00:00Z\"",
            "true",
        ],
    );
    for bad in &r[..7] {
        assert!(rejected(bad, "v").contains("not a valid timestamp"));
    }
    assert!(rejected(&r[7], "v").contains("ISO-8601"));
}

#[test]
fn timestamp_epoch_numbers_in_each_unit() {
    let cases: [(EpochUnit, &str, i64); 7] = [
        (EpochUnit::Milliseconds, "1796032800000", T0),
        (EpochUnit::Milliseconds, "1796032800000.001", T0 + 1),
        (EpochUnit::Seconds, "1796032800", T0),
        (EpochUnit::Seconds, "1796032800.123456", T0 + 123_456),
        (EpochUnit::Seconds, "1.7960328e9", T0),
        (EpochUnit::Microseconds, "-1", -1),
        (EpochUnit::Nanoseconds, "1796032800000001000", T0 + 1),
    ];
    for (u, text, expected) in cases {
        let (a, r) = single_with(p(P::Timestamptz), unit(u), &[text]);
        all_ok(&r);
        assert_eq!(micros(&a), vec![expected], "{text} in {u:?}");
    }
    let (a, r) = single_with(
        p(P::TimestampNs),
        unit(EpochUnit::Seconds),
        &["1.000000001", "1.0000000001", "1e30"],
    );
    assert_eq!(nanos(&a), vec![1_000_000_001]);
    assert!(rejected(&r[1], "v").contains("would be truncated"));
    assert!(rejected(&r[2], "v").contains("out of range"));

    let (_, r) = single_with(
        p(P::Timestamptz),
        unit(EpochUnit::Nanoseconds),
        &["1796032800000000001"],
    );
    assert!(rejected(&r[0], "v").contains("would be truncated"));
}

#[test]
fn consecutive_timestamps_with_changing_dates() {
    let (a, r) = single(
        p(P::Timestamptz),
        &[
            "\"2024-02-29T00:00:00Z\"",
            "\"2024-02-29T00:00:01Z\"",
            "\"2023-02-29T00:00:00Z\"",
            "\"2024-03-01T00:00:00Z\"",
            "\"2024-02-29T23:59:59Z\"",
            "\"2024-02-29T24:00:00Z\"",
        ],
    );
    all_ok(&r[..2]);
    assert!(rejected(&r[2], "v").contains("not a valid timestamp"));
    all_ok(&r[3..5]);
    assert!(rejected(&r[5], "v").contains("not a valid timestamp"));
    let day = 86_400_000_000i64;
    let feb29 = 19_782 * day;
    assert_eq!(
        micros(&a),
        vec![
            feb29,
            feb29 + 1_000_000,
            feb29 + day,
            feb29 + day - 1_000_000
        ]
    );
}

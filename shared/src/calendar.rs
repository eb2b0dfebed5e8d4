//! The proleptic Gregorian calendar as days since 1970-01-01, and the
//! ISO-8601 text of dates and instants floe writes (dead letters, records
//! rendered as JSON), by hand: no chrono on the hot path.

/// Seconds in a day (UTC has no leap seconds here, as in Iceberg).
pub(crate) const SECS_PER_DAY: i64 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (civil-from-days inverted: shift the year
/// to start in March so the leap day is last, then count 400-year eras).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Milliseconds since the epoch as RFC 3339 UTC text (`2026-11-30T13:59:02.123Z`).
pub fn format_utc_millis(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
    let sod = secs.rem_euclid(SECS_PER_DAY);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

/// Microseconds since the epoch as RFC 3339 UTC text (`2026-11-30T13:59:02.123456Z`).
pub fn format_utc_micros(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    format!(
        "{}.{:06}Z",
        format_date(secs.div_euclid(SECS_PER_DAY))
            + &format_time_of_day(secs.rem_euclid(SECS_PER_DAY)),
        us.rem_euclid(1_000_000)
    )
}

/// Days since 1970-01-01 as an ISO date (`2026-11-30`).
pub fn format_date(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `THH:MM:SS` of a second of the day.
fn format_time_of_day(sod: i64) -> String {
    format!("T{:02}:{:02}:{:02}", sod / 3600, sod % 3600 / 60, sod % 60)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2026, 11, 30), 20_787);
        assert_eq!(days_from_civil(1600, 2, 29), -135_081);
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(-135_081), (1600, 2, 29));
        assert_eq!(
            format_utc_millis(1_764_511_142_123),
            "2025-11-30T13:59:02.123Z"
        );
        assert_eq!(format_utc_millis(-1), "1969-12-31T23:59:59.999Z");
        // Every day of 1900..2100 is one more than the day before.
        let mut prev = days_from_civil(1899, 12, 31);
        for y in 1900..2100 {
            for m in 1..=12 {
                for d in 1..=days_in_month(y, m) {
                    let cur = days_from_civil(y, m, d);
                    assert_eq!(cur, prev + 1, "{y}-{m}-{d}");
                    prev = cur;
                }
            }
        }
    }
}

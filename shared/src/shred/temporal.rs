//! Hand-written ISO-8601 date/time parsing and epoch arithmetic (no chrono on the hot path).

use super::EpochUnit;
use super::decimal::{ExactError, ScaleError, long_integer_digits, parse_exact};
use super::error::{Fail, PResult, RecordErrorKind, show};
use crate::calendar::{SECS_PER_DAY, days_from_civil, days_in_month};

/// Resolution of a timestamp column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TsUnit {
    Micros,
    Nanos,
}

#[inline(always)]
fn d2(s: &[u8], i: usize) -> Option<u32> {
    match s.get(i..i + 2)? {
        [a @ b'0'..=b'9', b @ b'0'..=b'9'] => Some(((a - b'0') * 10 + (b - b'0')) as u32),
        _ => None,
    }
}

/// `YYYY-MM-DD` at the start of `s` as days since the epoch.
#[inline]
fn date_prefix(s: &[u8]) -> Option<i64> {
    let year = d2(s, 0)? as i64 * 100 + d2(s, 2)? as i64;
    if s.get(4) != Some(&b'-') || s.get(7) != Some(&b'-') {
        return None;
    }
    let month = d2(s, 5)?;
    let day = d2(s, 8)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

/// `HH:MM:SS` at `s[at..]` as seconds of the day.
#[inline]
fn hms(s: &[u8], at: usize) -> Option<i64> {
    let h = d2(s, at)?;
    let m = d2(s, at + 3)?;
    let sec = d2(s, at + 6)?;
    if s.get(at + 2) != Some(&b':') || s.get(at + 5) != Some(&b':') || h > 23 || m > 59 || sec > 59
    {
        return None;
    }
    Some((h * 3600 + m * 60 + sec) as i64)
}

/// Why a fraction of a second was refused.
enum FracError {
    Syntax,
    /// Non-zero digits past what the column stores.
    Precision,
}

/// Optional `.digits` at `s[*at..]` in units of 10^-`keep` s; digits past `keep` must be zero.
#[inline]
fn fraction(s: &[u8], at: &mut usize, keep: usize) -> Result<i64, FracError> {
    if !matches!(s.get(*at), Some(b'.' | b',')) {
        return Ok(0);
    }
    *at += 1;
    let start = *at;
    let mut value: i64 = 0;
    let mut n = 0;
    while let Some(&b) = s.get(*at)
        && b.is_ascii_digit()
    {
        if n < keep {
            value = value * 10 + (b - b'0') as i64;
        } else if b != b'0' {
            return Err(FracError::Precision);
        }
        n += 1;
        *at += 1;
    }
    if *at == start {
        return Err(FracError::Syntax);
    }
    for _ in n..keep {
        value *= 10;
    }
    Ok(value)
}

/// `Z`, `±HH:MM`, `±HHMM` or `±HH` at `s[at..]` (to the end) as seconds east of UTC;
/// `Ok(None)` when there is nothing left.
fn offset(s: &[u8], at: usize) -> Result<Option<i64>, ()> {
    let rest = s.get(at..).unwrap_or(&[]);
    let sign = match rest.first() {
        None => return Ok(None),
        Some(b'Z' | b'z') if rest.len() == 1 => return Ok(Some(0)),
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err(()),
    };
    let h = d2(rest, 1).ok_or(())?;
    let m = match rest.len() {
        3 => 0,
        5 => d2(rest, 3).ok_or(())?,
        6 if rest[3] == b':' => d2(rest, 4).ok_or(())?,
        _ => return Err(()),
    };
    if h > 23 || m > 59 {
        return Err(());
    }
    Ok(Some(sign * (h as i64 * 3600 + m as i64 * 60)))
}

/// `YYYY-MM-DD` as days since the epoch.
pub(super) fn parse_date(s: &[u8]) -> PResult<i32> {
    match date_prefix(s) {
        Some(days) if s.len() == 10 => i32::try_from(days).map_err(|_| bad_date(s)),
        _ => Err(bad_date(s)),
    }
}

#[cold]
fn bad_date(s: &[u8]) -> Box<Fail> {
    Fail::new(
        RecordErrorKind::TypeMismatch,
        format!("{} is not a valid date (expected YYYY-MM-DD)", show(s)),
    )
}

/// `HH:MM:SS[.ffffff]` as microseconds since midnight.
pub(super) fn parse_time(s: &[u8]) -> PResult<i64> {
    let bad = || {
        Fail::new(
            RecordErrorKind::TypeMismatch,
            format!(
                "{} is not a valid time (expected HH:MM:SS[.ffffff])",
                show(s)
            ),
        )
    };
    let secs = hms(s, 0).ok_or_else(bad)?;
    let mut at = 8;
    let micros = match fraction(s, &mut at, 6) {
        Ok(f) => f,
        Err(FracError::Syntax) => return Err(bad()),
        Err(FracError::Precision) => return Err(too_precise(s, TsUnit::Micros)),
    };
    if at != s.len() {
        return Err(bad());
    }
    Ok(secs * 1_000_000 + micros)
}

#[cold]
fn too_precise(s: &[u8], unit: TsUnit) -> Box<Fail> {
    let (digits, name) = match unit {
        TsUnit::Micros => (6, "microseconds"),
        TsUnit::Nanos => (9, "nanoseconds"),
    };
    Fail::new(
        RecordErrorKind::Precision,
        format!(
            "{} has non-zero digits past {digits} fractional digits; the column stores {name} and would truncate",
            show(s)
        ),
    )
}

/// The last `YYYY-MM-DD` a timestamp column parsed: records of one batch mostly share a date.
#[derive(Debug, Default)]
pub(super) struct DateCache {
    /// All zero until the first date, which no date text can equal.
    text: [u8; 10],
    days: i64,
}

impl DateCache {
    #[inline(always)]
    fn days(&mut self, s: &[u8]) -> Option<i64> {
        let text: [u8; 10] = s.get(..10)?.try_into().ok()?;
        if text == self.text {
            return Some(self.days);
        }
        let days = date_prefix(s)?;
        self.text = text;
        self.days = days;
        Some(days)
    }
}

/// An ISO-8601 timestamp as `unit`s since the epoch in UTC. A string without an offset is
/// taken as UTC (it is wall time for `timestamp`, and UTC by rule for `timestamptz`).
#[inline]
pub(super) fn parse_timestamp(s: &[u8], unit: TsUnit, dates: &mut DateCache) -> PResult<i64> {
    let parsed = (|| {
        let days = dates.days(s)?;
        if !matches!(s.get(10), Some(b'T' | b't' | b' ')) {
            return None;
        }
        let secs = hms(s, 11)?;
        Some(days * SECS_PER_DAY + secs)
    })();
    let Some(local_secs) = parsed else {
        return Err(bad_timestamp(s));
    };
    let mut at = 19;
    let (keep, per_sec) = match unit {
        TsUnit::Micros => (6, 1_000_000),
        TsUnit::Nanos => (9, 1_000_000_000),
    };
    let frac = match fraction(s, &mut at, keep) {
        Ok(f) => f,
        Err(FracError::Syntax) => return Err(bad_timestamp(s)),
        Err(FracError::Precision) => return Err(too_precise(s, unit)),
    };
    let utc_secs = match offset(s, at) {
        Ok(off) => local_secs - off.unwrap_or(0),
        Err(()) => return Err(bad_timestamp(s)),
    };
    // Before the epoch a positive fraction moves the instant up, so the
    // whole seconds alone can be out of range where the instant is not (the
    // lowest nanosecond timestamps): borrow a second from the fraction.
    let (secs, frac) = match utc_secs < 0 && frac > 0 {
        true => (utc_secs + 1, frac - per_sec),
        false => (utc_secs, frac),
    };
    secs.checked_mul(per_sec)
        .and_then(|v| v.checked_add(frac))
        .ok_or_else(|| {
            Fail::new(
                RecordErrorKind::OutOfRange,
                format!("{} is out of range for the column", show(s)),
            )
        })
}

#[cold]
fn bad_timestamp(s: &[u8]) -> Box<Fail> {
    Fail::new(
        RecordErrorKind::TypeMismatch,
        format!(
            "{} is not a valid timestamp (expected YYYY-MM-DDTHH:MM:SS[.fffffffff][Z|±HH:MM])",
            show(s)
        ),
    )
}

/// Powers of ten from one `EpochUnit` to the column's unit.
fn shift(from: EpochUnit, to: TsUnit) -> i64 {
    let from = match from {
        EpochUnit::Seconds => 0,
        EpochUnit::Milliseconds => 3,
        EpochUnit::Microseconds => 6,
        EpochUnit::Nanoseconds => 9,
    };
    let to = match to {
        TsUnit::Micros => 6,
        TsUnit::Nanos => 9,
    };
    to - from
}

pub(super) fn unit_name(u: EpochUnit) -> &'static str {
    match u {
        EpochUnit::Seconds => "seconds",
        EpochUnit::Milliseconds => "milliseconds",
        EpochUnit::Microseconds => "microseconds",
        EpochUnit::Nanoseconds => "nanoseconds",
    }
}

/// A JSON number of `unit`s converted exactly to the column's unit.
pub(super) fn epoch_number(text: &[u8], from: EpochUnit, to: TsUnit) -> PResult<i64> {
    let shift = shift(from, to);
    let x = match parse_exact(text) {
        Ok(x) => x,
        Err(ExactError::Syntax) => {
            return Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                format!("{} is not a number", show(text)),
            ));
        }
        Err(ExactError::TooManyDigits) => {
            // Over 38 significant digits: an integer part that fits an i64 (at most 19
            // digits, taken as 18 to stay on the safe side) leaves too fine a fraction.
            let kind = match long_integer_digits(text) {
                None => RecordErrorKind::TypeMismatch,
                Some(n) if n + shift > 18 => RecordErrorKind::OutOfRange,
                Some(_) => RecordErrorKind::Precision,
            };
            return Err(Fail::new(
                kind,
                format!("{} has too many digits", show(text)),
            ));
        }
    };
    x.scaled_i64(shift).map_err(|e| match e {
        ScaleError::Fraction => Fail::new(
            RecordErrorKind::Precision,
            format!(
                "{} {} has a fraction finer than the column's {} and would be truncated",
                show(text),
                unit_name(from),
                if to == TsUnit::Micros {
                    "microseconds"
                } else {
                    "nanoseconds"
                },
            ),
        ),
        ScaleError::Range => Fail::new(
            RecordErrorKind::OutOfRange,
            format!(
                "{} {} is out of range for the column",
                show(text),
                unit_name(from)
            ),
        ),
    })
}

/// A JSON number of `unit`s since midnight as microseconds, within one day.
pub(super) fn time_number(text: &[u8], from: EpochUnit) -> PResult<i64> {
    let v = epoch_number(text, from, TsUnit::Micros)?;
    if !(0..SECS_PER_DAY * 1_000_000).contains(&v) {
        return Err(Fail::new(
            RecordErrorKind::OutOfRange,
            format!("{} {} is not within one day", show(text), unit_name(from)),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        assert_eq!(offset(b"Z", 0), Ok(Some(0)));
        assert_eq!(offset(b"+05:30", 0), Ok(Some(19_800)));
        assert_eq!(offset(b"-0800", 0), Ok(Some(-28_800)));
        assert_eq!(offset(b"+02", 0), Ok(Some(7_200)));
        assert_eq!(offset(b"", 0), Ok(None));
        assert!(offset(b"+5:30", 0).is_err());
        assert!(offset(b"+24:00", 0).is_err());
        assert!(offset(b"Zulu", 0).is_err());
    }

    fn nanos(s: &str) -> PResult<i64> {
        parse_timestamp(s.as_bytes(), TsUnit::Nanos, &mut DateCache::default())
    }

    #[test]
    fn nanosecond_timestamps_reach_both_ends_of_the_range() {
        assert_eq!(nanos("1677-09-21T00:12:43.145224192Z").ok(), Some(i64::MIN));
        assert_eq!(
            nanos("1677-09-21T00:12:43.5Z").ok(),
            Some(-9_223_372_036_500_000_000)
        );
        assert!(nanos("1677-09-21T00:12:43.145224191Z").is_err());
        assert_eq!(nanos("2262-04-11T23:47:16.854775807Z").ok(), Some(i64::MAX));
        assert!(nanos("2262-04-11T23:47:16.854775808Z").is_err());
        assert_eq!(nanos("1969-12-31T23:59:59.999999999Z").ok(), Some(-1));
        assert_eq!(nanos("1970-01-01T00:00:00.000000001Z").ok(), Some(1));
    }
}

//! Exact decimal arithmetic on number text, for decimals and epoch numbers (never via f64).

use super::error::{Fail, PResult, RecordErrorKind, show};

/// At most this many significant digits are kept exactly (Iceberg decimals top out at 38).
const MAX_DIGITS: u32 = 38;

const fn pow10_table() -> [u128; 39] {
    let mut t = [1u128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
}
pub(super) const POW10: [u128; 39] = pow10_table();

/// A number as `±mantissa × 10^exp`, with the mantissa's trailing zeros moved into `exp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exact {
    pub negative: bool,
    pub mantissa: u128,
    /// Significant digits in `mantissa` (0 for zero).
    pub digits: u32,
    pub exp: i64,
}

/// Why text is not an exact number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExactError {
    Syntax,
    TooManyDigits,
}

/// Parses `[+-]digits[.digits][e[+-]digits]` (JSON numbers, and the laxer forms strings use:
/// a leading `+`, `.5`, `5.`).
pub(super) fn parse_exact(text: &[u8]) -> Result<Exact, ExactError> {
    let (negative, mut i) = sign(text, 0);
    let mut mantissa: u128 = 0;
    let mut digits: u32 = 0;
    let mut zeros: u64 = 0;
    let mut exp: i64 = 0;
    let mut seen_digit = false;
    let mut in_fraction = false;
    while let Some(&b) = text.get(i) {
        match b {
            b'0'..=b'9' => {
                seen_digit = true;
                if in_fraction {
                    exp -= 1;
                }
                let d = b - b'0';
                if d == 0 {
                    if digits > 0 {
                        zeros += 1;
                    }
                } else {
                    let grow = zeros + 1;
                    if digits as u64 + grow > MAX_DIGITS as u64 {
                        return Err(ExactError::TooManyDigits);
                    }
                    mantissa = mantissa * POW10[grow as usize] + d as u128;
                    digits += grow as u32;
                    zeros = 0;
                }
            }
            b'.' if !in_fraction => in_fraction = true,
            _ => break,
        }
        i += 1;
    }
    if !seen_digit {
        return Err(ExactError::Syntax);
    }
    exp += zeros as i64;
    if let Some(b'e' | b'E') = text.get(i) {
        let (e, end) = exponent(text, i + 1)?;
        exp += e;
        i = end;
    }
    if i != text.len() {
        return Err(ExactError::Syntax);
    }
    Ok(Exact {
        negative,
        mantissa,
        digits,
        exp,
    })
}

/// An optional sign at `i`: whether it is `-`, and where what follows starts.
fn sign(text: &[u8], i: usize) -> (bool, usize) {
    match text.get(i) {
        Some(b'-') => (true, i + 1),
        Some(b'+') => (false, i + 1),
        _ => (false, i),
    }
}

/// The exponent after the `e` (`[+-]digits` from `i`) and where it ends.
fn exponent(text: &[u8], i: usize) -> Result<(i64, usize), ExactError> {
    let (negative, start) = sign(text, i);
    let mut i = start;
    let mut e: i64 = 0;
    while let Some(&b) = text.get(i)
        && b.is_ascii_digit()
    {
        // Saturate: anything this large is out of range for every target anyway.
        e = (e * 10 + (b - b'0') as i64).min(1_000_000_000);
        i += 1;
    }
    if i == start {
        return Err(ExactError::Syntax);
    }
    Ok((if negative { -e } else { e }, i))
}

impl Exact {
    /// `self × 10^shift` as an integer, or `None` when a fractional part would be dropped.
    /// `Err(())` when it has more than 38 digits.
    fn scaled(&self, shift: i64) -> Result<Option<u128>, ()> {
        if self.mantissa == 0 {
            return Ok(Some(0));
        }
        let k = self.exp + shift;
        if k < 0 {
            return Ok(None);
        }
        if self.digits as i64 + k > MAX_DIGITS as i64 {
            return Err(());
        }
        Ok(Some(self.mantissa * POW10[k as usize]))
    }

    /// Digits before the decimal point.
    fn integer_digits(&self) -> i64 {
        if self.mantissa == 0 {
            0
        } else {
            (self.digits as i64 + self.exp).max(0)
        }
    }

    /// `self × 10^shift` as an `i64`, for epoch numbers converted to a column's unit.
    pub fn scaled_i64(self, shift: i64) -> Result<i64, ScaleError> {
        match self.scaled(shift) {
            Ok(Some(m)) => {
                let v = i128::try_from(m).map_err(|_| ScaleError::Range)?;
                let v = if self.negative { -v } else { v };
                i64::try_from(v).map_err(|_| ScaleError::Range)
            }
            Ok(None) => Err(ScaleError::Fraction),
            Err(()) => Err(ScaleError::Range),
        }
    }
}

/// Why an exact number does not convert to an integer in some unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScaleError {
    /// A non-zero fraction would be dropped.
    Fraction,
    Range,
}

/// Digits before the decimal point of a number too long for [`parse_exact`], which stops at
/// the digit limit; `None` if the text is not a number after all. Tells a number that is too
/// large from one that is too finely divided.
#[cold]
pub(super) fn long_integer_digits(text: &[u8]) -> Option<i64> {
    let body = match text.split_first() {
        Some((b'-' | b'+', rest)) => rest,
        _ => text,
    };
    let (mantissa, exp) = match body.iter().position(|&b| b == b'e' || b == b'E') {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &[][..]),
    };
    if int.is_empty() && frac.is_empty() || !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    // The value is 0.d₁d₂… × 10^(lead + exp), d₁ its first non-zero digit.
    let int_sig = int.iter().skip_while(|&&b| b == b'0').count() as i64;
    let lead = if int_sig > 0 {
        int_sig
    } else {
        match frac.iter().position(|&b| b != b'0') {
            Some(zeros) => -(zeros as i64),
            None => return Some(0),
        }
    };
    let exp = match exp {
        None => 0,
        Some(e) => {
            let (neg, digits) = match e.split_first() {
                Some((b'-', d)) => (true, d),
                Some((b'+', d)) => (false, d),
                _ => (false, e),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = digits.iter().fold(0i64, |v, &d| {
                (v * 10 + (d - b'0') as i64).min(1_000_000_000)
            });
            if neg { -v } else { v }
        }
    };
    Some((lead + exp).max(0))
}

/// The unscaled `i128` of `text` for `decimal(precision, scale)`.
pub(super) fn to_decimal(text: &[u8], precision: u8, scale: i8) -> PResult<i128> {
    // Only errors name the type, so the success path does not format it.
    let ty = || format!("decimal({precision},{scale})");
    let int_allowed = precision as i64 - scale as i64;
    let x = match parse_exact(text) {
        Ok(x) => x,
        Err(ExactError::Syntax) => {
            return Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                format!("{} is not a decimal number for {}", show(text), ty()),
            ));
        }
        Err(ExactError::TooManyDigits) => {
            // More significant digits than any precision: if the integer part fits, the
            // fraction must be what overflows the scale.
            let kind = match long_integer_digits(text) {
                None => RecordErrorKind::TypeMismatch,
                Some(n) if n > int_allowed => RecordErrorKind::OutOfRange,
                Some(_) => RecordErrorKind::Precision,
            };
            return Err(Fail::new(
                kind,
                format!(
                    "{} has more than {MAX_DIGITS} significant digits; does not fit {}",
                    show(text),
                    ty()
                ),
            ));
        }
    };
    if x.integer_digits() > int_allowed {
        return Err(Fail::new(
            RecordErrorKind::OutOfRange,
            format!(
                "{} does not fit {}: at most {int_allowed} digits before the decimal point",
                show(text),
                ty()
            ),
        ));
    }
    match x.scaled(scale as i64) {
        Ok(Some(m)) if m < POW10[precision as usize] => {
            // m < 10^38 < i128::MAX, so the conversion cannot fail.
            let v = i128::try_from(m).unwrap_or(i128::MAX);
            Ok(if x.negative { -v } else { v })
        }
        Ok(None) => Err(Fail::new(
            RecordErrorKind::Precision,
            format!(
                "{} has more than {scale} digits after the decimal point for {} and would round",
                show(text),
                ty()
            ),
        )),
        _ => Err(Fail::new(
            RecordErrorKind::OutOfRange,
            format!(
                "{} does not fit {}: more than {precision} digits",
                show(text),
                ty()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_forms() {
        let x = parse_exact(b"1.50").unwrap();
        assert_eq!((x.mantissa, x.exp, x.digits), (15, -1, 2));
        let x = parse_exact(b"100").unwrap();
        assert_eq!((x.mantissa, x.exp), (1, 2));
        let x = parse_exact(b"-0.001").unwrap();
        assert_eq!((x.negative, x.mantissa, x.exp), (true, 1, -3));
        let x = parse_exact(b"1.5e3").unwrap();
        assert_eq!((x.mantissa, x.exp), (15, 2));
        assert_eq!(parse_exact(b".5").unwrap().exp, -1);
        assert_eq!(parse_exact(b"1e").unwrap_err(), ExactError::Syntax);
        assert_eq!(parse_exact(b"").unwrap_err(), ExactError::Syntax);
        assert_eq!(parse_exact(b"1.2.3").unwrap_err(), ExactError::Syntax);
        assert_eq!(parse_exact(b"abc").unwrap_err(), ExactError::Syntax);
    }

    #[test]
    fn decimal_scaling() {
        assert_eq!(to_decimal(b"123.45", 10, 2).ok(), Some(12345));
        assert_eq!(to_decimal(b"123.4500000", 10, 2).ok(), Some(12345));
        assert_eq!(to_decimal(b"-0.001", 10, 3).ok(), Some(-1));
        assert_eq!(to_decimal(b"1.5e3", 10, 2).ok(), Some(150000));
        assert_eq!(to_decimal(b"0", 10, 2).ok(), Some(0));
        let e = to_decimal(b"1.234", 10, 2).unwrap_err();
        assert!(e.reason.contains("would round"), "{}", e.reason);
        assert_eq!(e.kind, RecordErrorKind::Precision);
        let e = to_decimal(b"123456789", 10, 2).unwrap_err();
        assert!(e.reason.contains("decimal(10,2)"), "{}", e.reason);
        assert_eq!(e.kind, RecordErrorKind::OutOfRange);
    }

    #[test]
    fn integer_digits_of_long_numbers() {
        assert_eq!(long_integer_digits(b"123.45"), Some(3));
        assert_eq!(long_integer_digits(b"-000123.45"), Some(3));
        assert_eq!(long_integer_digits(b"0.00123"), Some(0));
        assert_eq!(long_integer_digits(b"0.00123e5"), Some(3));
        assert_eq!(long_integer_digits(b"1.5e3"), Some(4));
        assert_eq!(long_integer_digits(b"12E-1"), Some(1));
        assert_eq!(long_integer_digits(b".5"), Some(0));
        assert_eq!(long_integer_digits(b"0.000"), Some(0));
        assert_eq!(long_integer_digits(b"1e"), None);
        assert_eq!(long_integer_digits(b"1x"), None);
        assert_eq!(long_integer_digits(b"."), None);
        assert_eq!(long_integer_digits(b""), None);
    }
}

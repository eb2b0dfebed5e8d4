//! Exact decimal arithmetic on number text, for decimals and epoch numbers (never via f64).

use super::error::show;

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
    let mut i = 0;
    let negative = match text.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
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
        i += 1;
        let neg_exp = match text.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
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
        exp += if neg_exp { -e } else { e };
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

/// The unscaled `i128` of `text` for `decimal(precision, scale)`.
pub(super) fn to_decimal(text: &[u8], precision: u8, scale: i8) -> Result<i128, String> {
    let ty = format!("decimal({precision},{scale})");
    let x = match parse_exact(text) {
        Ok(x) => x,
        Err(ExactError::Syntax) => {
            return Err(format!("{} is not a decimal number for {ty}", show(text)));
        }
        Err(ExactError::TooManyDigits) => {
            return Err(format!(
                "{} has more than {MAX_DIGITS} significant digits; does not fit {ty}",
                show(text)
            ));
        }
    };
    let int_allowed = precision as i64 - scale as i64;
    if x.integer_digits() > int_allowed {
        return Err(format!(
            "{} does not fit {ty}: at most {int_allowed} digits before the decimal point",
            show(text)
        ));
    }
    match x.scaled(scale as i64) {
        Ok(Some(m)) if m < POW10[precision as usize] => {
            // m < 10^38 < i128::MAX, so the conversion cannot fail.
            let v = i128::try_from(m).unwrap_or(i128::MAX);
            Ok(if x.negative { -v } else { v })
        }
        Ok(None) => Err(format!(
            "{} has more than {scale} digits after the decimal point for {ty} and would round",
            show(text)
        )),
        _ => Err(format!(
            "{} does not fit {ty}: more than {precision} digits",
            show(text)
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
        assert_eq!(to_decimal(b"123.45", 10, 2), Ok(12345));
        assert_eq!(to_decimal(b"123.4500000", 10, 2), Ok(12345));
        assert_eq!(to_decimal(b"-0.001", 10, 3), Ok(-1));
        assert_eq!(to_decimal(b"1.5e3", 10, 2), Ok(150000));
        assert_eq!(to_decimal(b"0", 10, 2), Ok(0));
        assert!(
            to_decimal(b"1.234", 10, 2)
                .unwrap_err()
                .contains("would round")
        );
        assert!(
            to_decimal(b"123456789", 10, 2)
                .unwrap_err()
                .contains("decimal(10,2)")
        );
    }
}

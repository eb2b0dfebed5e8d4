//! Log sequence numbers: Postgres prints them as `X/Y` (two hex halves of a
//! 64-bit WAL position); floe stores and compares them as plain integers.

use crate::PgError;

/// Parses Postgres' `X/Y` text form of an LSN into its 64-bit value.
pub fn parse_lsn(text: &str) -> Result<u64, PgError> {
    let bad = || PgError::BadLsn(text.to_string());
    let (hi, lo) = text.trim().split_once('/').ok_or_else(bad)?;
    let hi = u32::from_str_radix(hi, 16).map_err(|_| bad())?;
    let lo = u32::from_str_radix(lo, 16).map_err(|_| bad())?;
    Ok((u64::from(hi) << 32) | u64::from(lo))
}

/// Formats a 64-bit LSN the way Postgres prints it (`16/B374D848`).
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for (text, value) in [
            ("0/0", 0u64),
            ("0/16B3748", 0x16B3748),
            ("16/B374D848", 0x16_B374_D848),
            ("FFFFFFFF/FFFFFFFF", u64::MAX),
        ] {
            assert_eq!(parse_lsn(text).unwrap(), value);
            assert_eq!(format_lsn(value), text);
        }
        assert_eq!(parse_lsn("16/b374d848").unwrap(), 0x16_B374_D848);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "16", "16/", "/1", "G/1", "1/100000000", "1/2/3"] {
            assert!(matches!(parse_lsn(bad), Err(PgError::BadLsn(_))), "{bad}");
        }
    }
}

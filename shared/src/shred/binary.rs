//! UUID text and base64 decoding for uuid, fixed and binary columns.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::error::{Fail, PResult, RecordErrorKind, show};

/// Standard alphabet; producers differ on padding, so both forms are accepted.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Appends the 16 bytes of a canonical `8-4-4-4-12` UUID (hex in either case).
pub(super) fn parse_uuid(s: &[u8], out: &mut Vec<u8>) -> PResult<()> {
    let bad = || {
        Fail::new(
            RecordErrorKind::TypeMismatch,
            format!(
                "{} is not a UUID (expected xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                show(s)
            ),
        )
    };
    if s.len() != 36 {
        return Err(bad());
    }
    let mut bytes = [0u8; 16];
    let mut n = 0;
    let mut i = 0;
    while i < 36 {
        if matches!(i, 8 | 13 | 18 | 23) {
            if s[i] != b'-' {
                return Err(bad());
            }
            i += 1;
            continue;
        }
        match (hex(s[i]), s.get(i + 1).copied().and_then(hex)) {
            (Some(h), Some(l)) if n < 16 => bytes[n] = h << 4 | l,
            _ => return Err(bad()),
        }
        n += 1;
        i += 2;
    }
    out.extend_from_slice(&bytes);
    Ok(())
}

/// Appends the decoded bytes of standard base64 (padding optional); returns how many.
pub(super) fn decode_base64(s: &[u8], out: &mut Vec<u8>) -> PResult<usize> {
    let start = out.len();
    match BASE64.decode_vec(s, out) {
        Ok(()) => Ok(out.len() - start),
        Err(e) => {
            out.truncate(start);
            Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                format!("{} is not valid base64: {e}", show(s)),
            ))
        }
    }
}

/// Appends exactly `width` decoded bytes or fails without appending.
pub(super) fn decode_fixed(s: &[u8], width: usize, out: &mut Vec<u8>) -> PResult<()> {
    let start = out.len();
    let n = decode_base64(s, out)?;
    if n != width {
        out.truncate(start);
        return Err(Fail::new(
            RecordErrorKind::TypeMismatch,
            format!(
                "{} decodes to {n} bytes; fixed[{width}] needs exactly {width}",
                show(s)
            ),
        ));
    }
    Ok(())
}

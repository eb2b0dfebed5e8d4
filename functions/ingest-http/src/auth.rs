//! Bearer-token check for the HTTP function.

/// What the `Authorization` header says about the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The right token.
    Valid,
    /// No bearer token at all: 401.
    Missing,
    /// A token, but not the right one: 403.
    Wrong,
}

/// Checks `header` (the `Authorization` value) against `token`.
pub fn check(header: Option<&str>, token: &str) -> Auth {
    let Some(given) = header.and_then(|h| {
        h.strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
    }) else {
        return Auth::Missing;
    };
    if constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
        Auth::Valid
    } else {
        Auth::Wrong
    }
}

/// Equality whose time does not depend on where the inputs differ, so the
/// token cannot be guessed byte by byte from response times (the length may
/// leak; it is not the secret).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_missing_from_wrong() {
        assert_eq!(check(None, "s3cret"), Auth::Missing);
        assert_eq!(check(Some("Basic abc"), "s3cret"), Auth::Missing);
        assert_eq!(check(Some("Bearer nope"), "s3cret"), Auth::Wrong);
        assert_eq!(check(Some("Bearer s3cre"), "s3cret"), Auth::Wrong);
        assert_eq!(check(Some("Bearer s3cret"), "s3cret"), Auth::Valid);
    }
}

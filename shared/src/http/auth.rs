//! Who may call the HTTP API: a caller AWS authenticated (the Function
//! URL's `AWS_IAM` auth puts the IAM identity into the request context, which
//! callers cannot forge), or one presenting the configured bearer token.

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

/// Checks a request: `iam` when AWS authenticated its caller, else its
/// `Authorization` `header` against `token` (none: IAM callers only).
pub fn check(header: Option<&str>, token: Option<&str>, iam: bool) -> Auth {
    if iam {
        return Auth::Valid;
    }
    let Some(token) = token else {
        return Auth::Missing;
    };
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
        let t = Some("s3cret");
        assert_eq!(check(None, t, false), Auth::Missing);
        assert_eq!(check(Some("Basic abc"), t, false), Auth::Missing);
        assert_eq!(check(Some("Bearer nope"), t, false), Auth::Wrong);
        assert_eq!(check(Some("Bearer s3cre"), t, false), Auth::Wrong);
        assert_eq!(check(Some("Bearer s3cret"), t, false), Auth::Valid);
    }

    #[test]
    fn an_iam_caller_needs_no_token_and_without_a_token_only_iam_gets_in() {
        assert_eq!(check(None, Some("s3cret"), true), Auth::Valid);
        assert_eq!(check(None, None, true), Auth::Valid);
        assert_eq!(check(Some("Bearer anything"), None, false), Auth::Missing);
    }
}

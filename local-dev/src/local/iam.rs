//! The HTTP function's IAM authentication as a Function URL with `AWS_IAM`
//! auth gives it on AWS: a request signed with SigV4 (`curl --aws-sigv4`,
//! an SDK) by the stack's credentials gets in; one signed with other keys,
//! or a signature that does not match the request, is refused before the
//! function sees it. The bearer token keeps working beside it.

use std::time::{Duration, SystemTime};

use ring::{digest, hmac};

/// How far a signature's time may be from now, as AWS allows.
const SKEW: Duration = Duration::from_secs(15 * 60);

/// The credentials a signature must be made with.
pub struct IamCheck {
    access_key: String,
    secret: String,
}

impl IamCheck {
    /// Checks against the credentials the stack runs with.
    pub fn from_env() -> Option<IamCheck> {
        Some(IamCheck {
            access_key: std::env::var("AWS_ACCESS_KEY_ID").ok()?,
            secret: std::env::var("AWS_SECRET_ACCESS_KEY").ok()?,
        })
    }

    /// `None` when the request carries no SigV4 signature; else whether it
    /// is one of these credentials over this very request, made within
    /// [`SKEW`] of `now`.
    pub fn verify(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        now: SystemTime,
    ) -> Option<Result<(), String>> {
        let auth = parts.headers.get("authorization")?.to_str().ok()?;
        let fields = auth.strip_prefix("AWS4-HMAC-SHA256 ")?;
        Some(self.check(parts, body, fields, now))
    }

    fn check(
        &self,
        parts: &http::request::Parts,
        body: &[u8],
        fields: &str,
        now: SystemTime,
    ) -> Result<(), String> {
        let field = |name: &str| {
            fields
                .split(',')
                .map(str::trim)
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .ok_or_else(|| format!("the Authorization header has no {name}"))
        };
        let (credential, signed, signature) = (
            field("Credential")?,
            field("SignedHeaders")?,
            field("Signature")?,
        );
        let (key, scope) = credential
            .split_once('/')
            .ok_or("the credential has no scope")?;
        if key != self.access_key {
            return Err(format!("access key {key} is not the stack's"));
        }
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let amz_date = header("x-amz-date").ok_or("no X-Amz-Date header")?;
        check_time(amz_date, now)?;
        let canonical = canonical_request(parts, body, signed, header)?;
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
        );
        let mut k = format!("AWS4{}", self.secret).into_bytes();
        for part in scope.split('/') {
            k = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &k), part.as_bytes())
                .as_ref()
                .to_vec();
        }
        let expected =
            hex(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &k), to_sign.as_bytes()).as_ref());
        if expected != signature {
            return Err("the signature does not match the request".into());
        }
        Ok(())
    }
}

/// The request as SigV4 signs it: method, path, sorted query, the signed
/// headers, and the body's hash.
fn canonical_request<'a>(
    parts: &'a http::request::Parts,
    body: &[u8],
    signed: &str,
    header: impl Fn(&str) -> Option<&'a str>,
) -> Result<String, String> {
    let mut query: Vec<(String, String)> = parts
        .uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (encode(&decode(k)), encode(&decode(v)))
        })
        .collect();
    query.sort();
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut headers = String::new();
    for name in signed.split(';') {
        let value = header(name).ok_or_else(|| format!("signed header {name} is missing"))?;
        headers.push_str(&format!(
            "{name}:{}\n",
            value.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    let payload = match header("x-amz-content-sha256") {
        Some(h) => h.to_string(),
        None => hex(digest::digest(&digest::SHA256, body).as_ref()),
    };
    let path: Vec<String> = parts
        .uri
        .path()
        .split('/')
        .map(|s| encode(&decode(s)))
        .collect();
    Ok(format!(
        "{}\n{}\n{}\n{headers}\n{signed}\n{payload}",
        parts.method,
        path.join("/"),
        query.join("&")
    ))
}

/// Refuses a signature made more than [`SKEW`] from `now`.
fn check_time(amz_date: &str, now: SystemTime) -> Result<(), String> {
    let bad = || format!("X-Amz-Date {amz_date} is not YYYYMMDDTHHMMSSZ");
    let digits = |r: std::ops::Range<usize>| -> Result<i64, String> {
        amz_date.get(r).and_then(|s| s.parse().ok()).ok_or_else(bad)
    };
    if amz_date.len() != 16 {
        return Err(bad());
    }
    let (y, m, d) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let secs = floe_core::calendar::days_from_civil(y, m as u32, d as u32) * 86_400
        + digits(9..11)? * 3600
        + digits(11..13)? * 60
        + digits(13..15)?;
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if (now - secs).unsigned_abs() > SKEW.as_secs() {
        return Err(format!(
            "X-Amz-Date {amz_date} is more than 15 minutes from now"
        ));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SigV4's URI encoding: everything but unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Percent-decoding, so a path or query the client encoded is encoded once.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex_at = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (bytes[i], hex_at(i + 1), hex_at(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's SigV4 test suite, `get-vanilla`.
    #[test]
    fn verifies_the_aws_test_vector_and_refuses_a_changed_request() {
        let check = IamCheck {
            access_key: "AKIDEXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        };
        let request = |path: &str| {
            http::Request::get(path)
                .header("host", "example.amazonaws.com")
                .header("x-amz-date", "20150830T123600Z")
                .header("authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        assert_eq!(check.verify(&request("/"), b"", at), Some(Ok(())));
        let changed = check.verify(&request("/other"), b"", at);
        assert!(changed.is_some_and(|r| r.unwrap_err().contains("does not match")));
        let late = check.verify(&request("/"), b"", at + Duration::from_secs(3600));
        assert!(late.is_some_and(|r| r.unwrap_err().contains("15 minutes")));
        let unsigned = http::Request::get("/").body(()).unwrap().into_parts().0;
        assert_eq!(check.verify(&unsigned, b"", at), None);
    }
}

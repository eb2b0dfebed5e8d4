//! Reasons without values: what a rejection says about a record, with the
//! record's own values taken out, for answers that must not echo them (an
//! HTTP 400 under `http.redact_values`) and for grouping dead letters by
//! the kind of problem rather than by each value.

use std::collections::BTreeSet;

use serde_json::Value;

/// `reason` without the values of `record` in it: quoted text becomes
/// `<value>`, and so does every number the record holds. What is left names
/// the problem ("expected long, got <value>") but nothing the caller sent.
pub fn redact(reason: &str, record: &[u8]) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut chars = reason.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        // Skip to the closing quote, honouring escapes.
        let mut escaped = false;
        for c in chars.by_ref() {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => break,
                _ => escaped = false,
            }
        }
        out.push_str("<value>");
        // `show` marks a cut value with an ellipsis after the quote.
        if chars.peek() == Some(&'…') {
            chars.next();
        }
    }
    let mut numbers = BTreeSet::new();
    if let Ok(v) = serde_json::from_slice::<Value>(record) {
        collect_numbers(&v, &mut numbers);
    }
    // Longest first, so 123 is not left as <value>3 after 12.
    let mut numbers: Vec<String> = numbers.into_iter().collect();
    numbers.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for n in numbers {
        out = replace_token(&out, &n);
    }
    out
}

fn collect_numbers(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Number(n) => {
            out.insert(n.to_string());
        }
        Value::Array(items) => items.iter().for_each(|i| collect_numbers(i, out)),
        Value::Object(obj) => obj.values().for_each(|i| collect_numbers(i, out)),
        _ => {}
    }
}

/// `text` with every whole-token occurrence of `number` replaced (not the
/// digits inside a longer number or a word).
fn replace_token(text: &str, number: &str) -> String {
    let is_part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(number) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + number.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_part) || after.is_some_and(is_part) {
            out.push_str(number);
        } else {
            out.push_str("<value>");
        }
        rest = &rest[i + number.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_the_problem_and_drops_the_values() {
        let record = br#"{"id":"s3cr3t","n":12345678901,"m":12}"#;
        assert_eq!(
            redact("expected long, got the string \"s3cr3t\"", record),
            "expected long, got the string <value>"
        );
        assert_eq!(
            redact(
                "12345678901 is out of range for int (-2147483648..=2147483647)",
                record
            ),
            "<value> is out of range for int (-2147483648..=2147483647)"
        );
        assert_eq!(
            redact("the string \"aaaa\"… is too long; field12 has 12", record),
            "the string <value> is too long; field12 has <value>"
        );
        assert_eq!(redact("got \"a \\\" b\" here", b"{}"), "got <value> here");
    }
}

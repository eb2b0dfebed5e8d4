//! Request bodies to records: a JSON array, or NDJSON (one record per line).

use bytes::Bytes;

use super::HttpError;

/// The records of `body`, each with its position: its index in the array, or
/// its 1-based line number in NDJSON (blank lines are skipped, not counted out).
pub fn records(body: &[u8]) -> Result<Vec<(String, Bytes)>, HttpError> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace());
    if start.is_some_and(|i| body[i] == b'[') {
        let items: Vec<&serde_json::value::RawValue> = serde_json::from_slice(body)?;
        return Ok(items
            .into_iter()
            .enumerate()
            .map(|(i, raw)| {
                (
                    format!("record {i}"),
                    Bytes::copy_from_slice(raw.get().as_bytes()),
                )
            })
            .collect());
    }
    // A line that is not JSON is still a record: the writer dead-letters it
    // with its line number, and the other lines are written.
    Ok(body
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| line.iter().any(|b| !b.is_ascii_whitespace()))
        .map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            (format!("line {}", i + 1), Bytes::copy_from_slice(line))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_arrays_and_ndjson_with_positions() {
        let a = records(br#" [{"a":1}, {"a":2}]"#).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].0, "record 1");
        assert_eq!(&a[1].1[..], br#"{"a":2}"#);
        let n = records(b"{\"a\":1}\r\n\n{\"a\":2}\n").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].0, "line 3");
        assert_eq!(&n[0].1[..], br#"{"a":1}"#);
        assert!(records(b"[1,").is_err());
    }
}

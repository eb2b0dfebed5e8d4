//! Storage URIs compared by what they name, not by how they are spelled:
//! `s3a://b/k` and `s3://b/k` are one object, as are `file:/w/t`,
//! `file:///w/t` and `/w/t`; `a//b` is `a/b`. A path that climbs with `..`
//! names nothing floe will trust.

/// The canonical spelling of `uri`; `None` when it has `.` or `..` segments.
pub fn normalize(uri: &str) -> Option<String> {
    let (scheme, rest) = match uri.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest.to_string()),
        None => match uri.strip_prefix("file:") {
            Some(path) => ("file".to_string(), path.to_string()),
            None if uri.starts_with('/') => ("file".to_string(), uri.to_string()),
            None => return None,
        },
    };
    let scheme = match scheme.as_str() {
        "s3a" | "s3n" => "s3".to_string(),
        _ => scheme,
    };
    let mut parts = Vec::new();
    for part in rest.split('/') {
        match part {
            "" => {}
            "." | ".." => return None,
            p => parts.push(p),
        }
    }
    // A local path is rooted; an object-store authority is the bucket.
    let lead = if scheme == "file" { "/" } else { "" };
    Some(format!("{scheme}://{lead}{}", parts.join("/")))
}

/// True when `path` names something under the directory `location`.
pub fn within(path: &str, location: &str) -> bool {
    match (normalize(path), normalize(location)) {
        (Some(p), Some(l)) => p
            .strip_prefix(&l)
            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_location_compare_equal() {
        assert_eq!(normalize("file:/w/t/"), normalize("file:///w/t"));
        assert_eq!(normalize("/w//t"), normalize("file:///w/t"));
        assert_eq!(normalize("s3a://b/t/x"), normalize("s3://b/t//x"));
        assert!(within("s3a://b/t/data/x.parquet", "s3://b/t"));
        assert!(within("file:/w/t/data/x.parquet", "file:///w/t/"));
        assert!(!within("s3://b/t2/data/x.parquet", "s3://b/t"));
        assert!(!within("s3://b/t", "s3://b/t"));
        assert!(!within("s3://b/t/../u/x.parquet", "s3://b/t"));
        assert!(!within("s3://other/t/x", "s3://b/t"));
        assert!(!within("relative/x", "s3://b/t"));
    }
}

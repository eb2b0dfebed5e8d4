//! A fix applied to dead-lettered records as they are replayed
//! (`floe dlq replay --fix repo.id=number`): one field converted, set to
//! null or dropped, every other value kept as its exact source text.

use std::str::FromStr;

use serde_json::value::RawValue;

use crate::change::RawObject;
use crate::row::{RowWriter, write_json_string};

/// What a [`Fix`] makes of its field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// A string holding a JSON number becomes that number.
    Number,
    /// Any other value becomes a string of its JSON text.
    String,
    /// The value becomes null.
    Null,
    /// The field is removed.
    Drop,
}

/// One field's conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The field (`repo.id` inside an object; a key with a dot in its name
    /// is matched whole first).
    pub field: String,
    /// What it becomes.
    pub to: Conversion,
}

impl FromStr for Fix {
    type Err = String;

    /// `FIELD=number|string|null|drop`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (field, to) = s
            .split_once('=')
            .filter(|(f, _)| !f.trim().is_empty())
            .ok_or_else(|| format!("{s:?}: expected FIELD=number|string|null|drop"))?;
        let to = match to.trim() {
            "number" => Conversion::Number,
            "string" => Conversion::String,
            "null" => Conversion::Null,
            "drop" => Conversion::Drop,
            other => {
                return Err(format!(
                    "{s:?}: unknown conversion {other:?} (use number, string, null or drop)"
                ));
            }
        };
        Ok(Fix {
            field: field.trim().to_string(),
            to,
        })
    }
}

impl Fix {
    /// `record` with the fix applied; `Ok(None)` when the record does not
    /// have the field (nothing to fix), `Err` when its value cannot take the
    /// conversion (the record replays as it was, and is rejected again).
    pub fn apply(&self, record: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let text =
            std::str::from_utf8(record).map_err(|_| "the record is not UTF-8".to_string())?;
        let path: Vec<&str> = self.field.split('.').collect();
        rewrite(text, &path, self.to)
    }
}

/// The object `text` with the member at `path` rewritten.
fn rewrite(text: &str, path: &[&str], to: Conversion) -> Result<Option<Vec<u8>>, String> {
    let Ok(object) = serde_json::from_str::<RawObject>(text) else {
        return Ok(None);
    };
    let entries: Vec<(&str, &RawValue)> = object.iter().collect();
    // `a.b` names a key with a dot in it before a member `b` of `a`.
    let (at, rest) = match (1..=path.len()).rev().find_map(|n| {
        let key = path[..n].join(".");
        entries.iter().position(|(k, _)| *k == key).map(|i| (i, n))
    }) {
        Some((i, n)) => (i, &path[n..]),
        None => return Ok(None),
    };
    let value = entries[at].1.get();
    let new = if rest.is_empty() {
        match convert(value, to)? {
            Some(v) => Some(v),
            None if to == Conversion::Drop => None,
            None => return Ok(Some(text.as_bytes().to_vec())),
        }
    } else {
        match rewrite(value, rest, to)? {
            Some(inner) => Some(inner),
            None => return Ok(None),
        }
    };
    let mut out = RowWriter::with_capacity(text.len() + 16);
    for (i, (k, v)) in entries.iter().enumerate() {
        match (i == at, &new) {
            (false, _) => out.raw(k, v.get().as_bytes()),
            (true, Some(n)) => out.raw(k, n),
            (true, None) => {}
        }
    }
    Ok(Some(out.finish().into_bytes()))
}

/// The new text of `value`; `None` when it stays (or, for a drop, goes).
fn convert(value: &str, to: Conversion) -> Result<Option<Vec<u8>>, String> {
    let first = value.trim_start().as_bytes().first().copied();
    Ok(match to {
        Conversion::Drop => None,
        Conversion::Null => Some(b"null".to_vec()),
        Conversion::String if first == Some(b'"') => None,
        Conversion::String => {
            let mut out = Vec::new();
            write_json_string(&mut out, value.trim());
            Some(out)
        }
        Conversion::Number if first == Some(b'"') => {
            let s: String = serde_json::from_str(value).map_err(|e| e.to_string())?;
            let n = s.trim();
            let is_number = serde_json::from_str::<&RawValue>(n)
                .is_ok_and(|_| n.starts_with(|c: char| c == '-' || c.is_ascii_digit()));
            if !is_number {
                return Err(format!("the string {value} holds no number"));
            }
            Some(n.as_bytes().to_vec())
        }
        Conversion::Number if first.is_some_and(|b| b == b'-' || b.is_ascii_digit()) => None,
        Conversion::Number => return Err(format!("{value} is not a string holding a number")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(fix: &str, record: &str) -> Result<Option<String>, String> {
        let fix: Fix = fix.parse()?;
        Ok(fix
            .apply(record.as_bytes())?
            .map(|b| String::from_utf8(b).unwrap()))
    }

    #[test]
    fn converts_one_field_and_keeps_every_other_value_exact() {
        let record =
            r#"{"id":1,"repo":{"id":" 1009635 ","big":123456789012345678901234.5678},"x":[1, 2]}"#;
        assert_eq!(
            fixed("repo.id=number", record).unwrap().unwrap(),
            r#"{"id":1,"repo":{"id":1009635,"big":123456789012345678901234.5678},"x":[1, 2]}"#
        );
        assert_eq!(
            fixed("x=string", record).unwrap().unwrap(),
            r#"{"id":1,"repo":{"id":" 1009635 ","big":123456789012345678901234.5678},"x":"[1, 2]"}"#
        );
        assert_eq!(
            fixed("repo=drop", record).unwrap().unwrap(),
            r#"{"id":1,"x":[1, 2]}"#
        );
        assert_eq!(
            fixed("repo.big=null", record).unwrap().unwrap(),
            r#"{"id":1,"repo":{"id":" 1009635 ","big":null},"x":[1, 2]}"#
        );
        // Absent: nothing to fix. Already right: unchanged.
        assert_eq!(fixed("nope.id=number", record), Ok(None));
        assert_eq!(fixed("id=number", record).unwrap().unwrap(), record);
    }

    #[test]
    fn a_dotted_key_is_matched_whole_and_bad_values_are_named() {
        let record = r#"{"http.status":"404","http":{"status":"x"}}"#;
        assert_eq!(
            fixed("http.status=number", record).unwrap().unwrap(),
            r#"{"http.status":404,"http":{"status":"x"}}"#
        );
        assert!(
            fixed("http=number", record)
                .unwrap_err()
                .contains("not a string holding a number")
        );
        let record = r#"{"n":"12abc"}"#;
        assert!(
            fixed("n=number", record)
                .unwrap_err()
                .contains("holds no number")
        );
        assert!("n".parse::<Fix>().unwrap_err().contains("FIELD="));
        assert!(
            "n=float"
                .parse::<Fix>()
                .unwrap_err()
                .contains("unknown conversion")
        );
    }
}

//! Reads one top-level field of a JSON record without building the record's
//! tree: other values are skipped by the parser as they are read, and a string
//! value without escapes is borrowed from the record.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What the record holds under the routing field.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found<'a> {
    /// The record has no such field.
    Missing,
    /// The field is `null`.
    Null,
    /// A string.
    Str(Cow<'a, str>),
    /// An integer.
    Int(i128),
    /// Anything else, described for the error (`an object`).
    Other(&'static str),
}

/// The first value of `field` in the JSON object `record`. The whole record is
/// still read, so a record that is not valid JSON is an error here too.
pub(super) fn find<'a>(record: &'a [u8], field: &str) -> Result<Found<'a>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(record);
    let found = de.deserialize_map(Scan { field })?;
    de.end()?;
    Ok(found)
}

struct Scan<'f> {
    field: &'f str,
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = Found<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found<'de>, A::Error> {
        let mut found = Found::Missing;
        while let Some(is_field) = map.next_key_seed(KeyIs(self.field))? {
            if is_field && found == Found::Missing {
                found = map.next_value_seed(Scalar)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Compares a key with the field name without keeping it.
struct KeyIs<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

struct Scalar;

impl<'de> DeserializeSeed<'de> for Scalar {
    type Value = Found<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Found<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scalar {
    type Value = Found<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Owned(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Found<'de>, E> {
        Ok(Found::Int(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Found<'de>, E> {
        Ok(Found::Int(v.into()))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Found<'de>, E> {
        // serde_json also lands here for integers beyond 64 bits.
        Ok(Found::Other("a number that is not a 64-bit integer"))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Found<'de>, E> {
        Ok(Found::Other("a boolean"))
    }

    fn visit_unit<E>(self) -> Result<Found<'de>, E> {
        Ok(Found::Null)
    }

    fn visit_none<E>(self) -> Result<Found<'de>, E> {
        Ok(Found::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an object"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(record: &str, field: &str) -> Found<'static> {
        let record: &'static str = Box::leak(record.to_string().into_boxed_str());
        find(record.as_bytes(), field).unwrap()
    }

    #[test]
    fn finds_strings_and_integers_at_top_level_only() {
        let rec = r#"{"a":{"type":"inner"},"type":"order","n":[1,{"type":2}]}"#;
        assert_eq!(get(rec, "type"), Found::Str(Cow::Borrowed("order")));
        assert_eq!(get(r#"{"k": -42}"#, "k"), Found::Int(-42));
        assert_eq!(
            get(r#"{"k": 18446744073709551615}"#, "k"),
            Found::Int(u64::MAX.into())
        );
        assert_eq!(get(r#"{"other": 1}"#, "k"), Found::Missing);
    }

    #[test]
    fn borrows_plain_strings_and_unescapes_others() {
        match get(r#"{"k":"plain"}"#, "k") {
            Found::Str(Cow::Borrowed(s)) => assert_eq!(s, "plain"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            get(r#"{"k":"a\"b"}"#, "k"),
            Found::Str(Cow::Owned("a\"b".into()))
        );
        assert_eq!(
            get(r#"{"t\u0079pe":"x"}"#, "type"),
            Found::Str(Cow::Borrowed("x"))
        );
    }

    #[test]
    fn describes_non_scalars() {
        assert_eq!(get(r#"{"k":null}"#, "k"), Found::Null);
        assert_eq!(get(r#"{"k":{"a":1}}"#, "k"), Found::Other("an object"));
        assert_eq!(get(r#"{"k":[1]}"#, "k"), Found::Other("an array"));
        assert_eq!(get(r#"{"k":true}"#, "k"), Found::Other("a boolean"));
        assert!(matches!(get(r#"{"k":1.5}"#, "k"), Found::Other(_)));
    }

    #[test]
    fn first_occurrence_wins() {
        assert_eq!(
            get(r#"{"k":"a","k":"b"}"#, "k"),
            Found::Str(Cow::Borrowed("a"))
        );
    }

    #[test]
    fn refuses_non_objects_and_broken_json() {
        for bad in ["[1]", "\"s\"", "{\"k\":", "{\"k\":1} x", ""] {
            assert!(find(bad.as_bytes(), "k").is_err(), "{bad}");
        }
    }
}

//! Keyed batches: the changes of one batch folded per key, in source order.
//! Keys are grouped by the digest of their typed value ([`crate::rowkey`]),
//! never by JSON text, so `"A"` and `"\u0041"` are one key. Each key keeps
//! the states its changes left, newest last: when the newest state cannot be
//! written (a value that does not fit its column), the writer falls back to
//! the one before, and a key with no state left is not touched at all; a
//! rejected change never deletes a row.

use std::collections::HashMap;

use crate::change::{Change, ChangeOp};
use crate::error::{RecordError, RecordErrorKind};
use crate::row::{Row, RowWriter};
use crate::source::Pos;

/// Each change's key columns as a JSON object, in the order of `key_names`,
/// for the key shredder; a TRUNCATE has no key (`Ok(None)`). Values are the
/// row's own text: never through `f64`, so a numeric key like
/// `12345678901234567890.123456789` is shredded digit for digit. With
/// `ignore_case` (the table's `case_insensitive`) a member spelt `ID` is
/// column `id`'s value, as the row's shredder reads it.
pub fn keys(
    changes: &[(Pos<'_>, Change)],
    key_names: &[String],
    ignore_case: bool,
) -> Vec<Result<Option<Vec<u8>>, RecordError>> {
    changes
        .iter()
        .map(|(_, change)| {
            if change.op == ChangeOp::Truncate {
                return Ok(None);
            }
            let mut key = RowWriter::with_capacity(key_names.len() * 24);
            for k in key_names {
                match change.row.get_matching(k, ignore_case) {
                    Some(v) if v != b"null" => key.raw(k, v),
                    _ => return Err(RecordError::new(
                        RecordErrorKind::MissingRequired,
                        k.clone(),
                        format!("identifier field `{k}` is missing or null; a keyed table needs it in every change (for deletes: REPLICA IDENTITY DEFAULT or FULL)"),
                    )),
                }
            }
            Ok(Some(key.finish().into_bytes()))
        })
        .collect()
}

/// One state a key's change left: the change's index in the batch and the
/// row (`None` after a delete).
#[derive(Debug, Clone)]
pub struct State {
    /// The change's index in the batch.
    pub change: usize,
    /// The row, `None` for a delete.
    pub row: Option<Row>,
}

/// A key the batch touched.
#[derive(Debug, Clone)]
pub struct KeyChanges {
    /// The digest of its typed value.
    pub digest: u128,
    /// Its key columns as a JSON object.
    pub key: Vec<u8>,
    /// The states its changes left, in source order.
    pub states: Vec<State>,
}

/// A batch folded per key.
#[derive(Debug, Default)]
pub struct Folded {
    /// Keys in the order the batch first touched them.
    pub keys: Vec<KeyChanges>,
    /// The batch truncated the table: every row older than the batch goes.
    pub truncate: bool,
    /// The index of its last TRUNCATE among the changes.
    pub truncate_at: Option<usize>,
}

/// Folds changes per key, `keys` and `digests` (one per change; `None` for
/// changes that failed earlier and TRUNCATEs) from [`keys`] and the key
/// shredder; returns the fold and the changes that could not take part, by
/// their index. Each change's row moves into its state, so `changes` are
/// left with empty rows.
pub fn fold(
    changes: &mut [(Pos<'_>, Change)],
    keys: Vec<Option<Vec<u8>>>,
    digests: &[Option<u128>],
) -> (Folded, Vec<(usize, RecordError)>) {
    let mut errors = Vec::new();
    let mut folded = Folded::default();
    let mut slot: HashMap<u128, usize> = HashMap::new();
    for (i, ((_, change), key)) in changes.iter_mut().zip(keys).enumerate() {
        if change.op == ChangeOp::Truncate {
            // Everything before is gone with the table's older rows.
            folded.keys.clear();
            slot.clear();
            folded.truncate = true;
            folded.truncate_at = Some(i);
            continue;
        }
        let (Some(key), Some(digest)) = (key, digests.get(i).copied().flatten()) else {
            continue;
        };
        let at = *slot.entry(digest).or_insert_with(|| {
            folded.keys.push(KeyChanges {
                digest,
                key,
                states: Vec::new(),
            });
            folded.keys.len() - 1
        });
        let key = &mut folded.keys[at];
        let row = match change.op {
            ChangeOp::Delete => None,
            _ if change.unchanged.is_empty() => Some(std::mem::take(&mut change.row)),
            _ => {
                let previous = key.states.last().and_then(|s| s.row.as_ref());
                match with_unchanged(&change.row, &change.unchanged, previous) {
                    Ok(row) => Some(row),
                    Err(col) => {
                        errors.push((
                            i,
                            RecordError::new(
                                RecordErrorKind::MissingRequired,
                                col.to_string(),
                                format!("column `{col}` was left out as unchanged and its value is not in this batch; set REPLICA IDENTITY FULL on the source table"),
                            ),
                        ));
                        continue;
                    }
                }
            }
        };
        key.states.push(State { change: i, row });
    }
    folded.keys.retain(|k| !k.states.is_empty());
    (folded, errors)
}

/// `row` with its unchanged (TOAST) columns at the value the key had earlier
/// in the batch; the first column the batch has no value for is the error.
fn with_unchanged<'c>(
    row: &Row,
    unchanged: &'c [String],
    previous: Option<&Row>,
) -> Result<Row, &'c str> {
    let mut merged = RowWriter::with_capacity(row.as_bytes().len() + 64);
    merged.copy(row, |k| !unchanged.iter().any(|c| c.as_bytes() == k));
    for col in unchanged {
        match previous.and_then(|p| p.get(col)) {
            Some(v) => merged.raw(col, v),
            None => return Err(col),
        }
    }
    Ok(merged.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn change(op: ChangeOp, row: &str) -> Change {
        // Sorted by name, which the rows here already are.
        let members: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
            serde_json::from_str(row).unwrap();
        let mut w = RowWriter::with_capacity(row.len());
        for (k, v) in &members {
            w.raw(k, v.get().as_bytes());
        }
        Change {
            op,
            row: w.finish(),
            position: None,
            ts_ms: None,
            unchanged: vec![],
        }
    }

    /// Folds with digests of the key text as written, as a stand-in for the
    /// key shredder (the writer's tests cover typed keys).
    fn fold_text(changes: &mut [(Pos<'_>, Change)]) -> (Folded, Vec<(usize, RecordError)>) {
        let names = ["id".to_string()];
        let mut errors = Vec::new();
        let mut found = Vec::new();
        let mut digests = Vec::new();
        for (i, k) in keys(changes, &names, false).into_iter().enumerate() {
            match k {
                Ok(k) => {
                    digests.push(k.as_ref().map(|k| xxhash_rust::xxh3::xxh3_128(k)));
                    found.push(k);
                }
                Err(e) => {
                    errors.push((i, e));
                    digests.push(None);
                    found.push(None);
                }
            }
        }
        let (f, mut more) = fold(changes, found, &digests);
        errors.append(&mut more);
        (f, errors)
    }

    fn last_rows(f: &Folded) -> Vec<Value> {
        f.keys
            .iter()
            .filter_map(|k| k.states.last()?.row.as_ref())
            .map(|r| serde_json::from_slice(r.as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn keeps_every_state_per_key_in_order() {
        let mut changes = vec![
            (
                Pos::Line(1),
                change(ChangeOp::Insert, r#"{"id":1,"v":"a"}"#),
            ),
            (
                Pos::Line(2),
                change(ChangeOp::Insert, r#"{"id":2,"v":"b"}"#),
            ),
            (
                Pos::Line(3),
                change(ChangeOp::Update, r#"{"id":1,"v":"c"}"#),
            ),
            (Pos::Line(4), change(ChangeOp::Delete, r#"{"id":2}"#)),
            (Pos::Line(5), change(ChangeOp::Insert, r#"{"v":"no key"}"#)),
        ];
        let (f, errors) = fold_text(&mut changes);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, 4);
        assert_eq!(errors[0].1.field, "id");
        assert_eq!(last_rows(&f), vec![serde_json::json!({"id":1,"v":"c"})]);
        assert_eq!(f.keys.len(), 2);
        assert_eq!(
            f.keys[0].states.len(),
            2,
            "id 1 keeps both states for fallback"
        );
        assert!(f.keys[1].states.last().unwrap().row.is_none());
    }

    #[test]
    fn numbers_stay_exact_and_truncate_drops_what_came_before() {
        let mut changes = vec![
            (Pos::Line(1), change(ChangeOp::Insert, r#"{"id":1,"v":1}"#)),
            (Pos::Line(2), change(ChangeOp::Truncate, "{}")),
            (
                Pos::Line(3),
                change(
                    ChangeOp::Insert,
                    r#"{"id":2,"v":12345678901234567890.123456789}"#,
                ),
            ),
        ];
        let (f, errors) = fold_text(&mut changes);
        assert!(errors.is_empty());
        assert!(f.truncate);
        assert_eq!(f.keys.len(), 1);
        assert_eq!(f.keys[0].key, br#"{"id":2}"#.to_vec());
        assert_eq!(
            std::str::from_utf8(f.keys[0].states[0].row.as_ref().unwrap().as_bytes()).unwrap(),
            r#"{"id":2,"v":12345678901234567890.123456789}"#
        );
    }

    #[test]
    fn unchanged_columns_keep_the_earlier_value_or_are_refused() {
        let mut toast = change(ChangeOp::Update, r#"{"id":1,"v":"x"}"#);
        toast.unchanged = vec!["big".into()];
        let mut changes = vec![
            (
                Pos::Line(1),
                change(ChangeOp::Insert, r#"{"id":1,"v":"a","big":"blob"}"#),
            ),
            (Pos::Line(2), toast.clone()),
            (Pos::Line(3), {
                let mut t = toast;
                t.row = change(ChangeOp::Update, r#"{"id":2,"v":"y"}"#).row;
                t
            }),
        ];
        let (f, errors) = fold_text(&mut changes);
        assert_eq!(
            last_rows(&f),
            vec![serde_json::json!({"id":1,"v":"x","big":"blob"})]
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].1.field, "big");
    }
}

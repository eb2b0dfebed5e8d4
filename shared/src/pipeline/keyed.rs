//! Keyed batches: the changes of one batch folded to the last state per key,
//! in source order. Every touched key gets an equality delete (removing its
//! older rows); keys whose last change is an upsert also get their new row.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::writer::Pos;
use crate::change::{Change, ChangeOp};

/// A batch folded to its last state per key.
#[derive(Debug, Default)]
pub struct Folded<'a> {
    /// New rows (last change of their key is an insert/update/read), in source order.
    pub upserts: Vec<(Pos<'a>, Cow<'a, [u8]>)>,
    /// One JSON object of key columns per touched key, for the equality deletes.
    pub keys: Vec<Vec<u8>>,
}

/// Why one change cannot be folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldError {
    /// The field at fault.
    pub field: String,
    /// Why.
    pub reason: String,
}

/// The last change of a key: its index in the batch, the key columns, and the
/// row it leaves (`None` after a delete).
type Latest = (usize, Map<String, Value>, Option<Map<String, Value>>);

/// Folds decoded changes, keyed by `key_names`; returns the fold and the
/// changes that could not take part, by their index in `changes`.
pub fn fold<'a>(
    changes: Vec<(Pos<'a>, Change)>,
    key_names: &[String],
) -> (Folded<'a>, Vec<(usize, FoldError)>) {
    let mut errors = Vec::new();
    let mut last: HashMap<String, Latest> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, (_, change)) in changes.iter().enumerate() {
        let row: Map<String, Value> = match serde_json::from_slice(&change.row) {
            Ok(Value::Object(m)) => m,
            _ => {
                errors.push((
                    i,
                    FoldError {
                        field: String::new(),
                        reason: "change row is not a JSON object".into(),
                    },
                ));
                continue;
            }
        };
        let mut key = Map::new();
        let mut missing = None;
        for k in key_names {
            match row.get(k) {
                Some(v) if !v.is_null() => {
                    key.insert(k.clone(), v.clone());
                }
                _ => {
                    missing = Some(k.clone());
                    break;
                }
            }
        }
        if let Some(k) = missing {
            errors.push((
                i,
                FoldError {
                    field: k.clone(),
                    reason: format!("identifier field `{k}` is missing or null; a keyed table needs it in every change (for deletes: REPLICA IDENTITY DEFAULT or FULL)"),
                },
            ));
            continue;
        }
        let key_text = Value::Object(key.clone()).to_string();
        let previous = last.get(&key_text).and_then(|(_, _, r)| r.clone());
        let new_row = match change.op {
            ChangeOp::Delete => None,
            _ => {
                let mut row = row;
                // Unchanged (TOAST) columns keep the value the key had earlier in the batch.
                for col in &change.unchanged {
                    match previous.as_ref().and_then(|p| p.get(col)) {
                        Some(v) => {
                            row.insert(col.clone(), v.clone());
                        }
                        None => {
                            errors.push((
                                i,
                                FoldError {
                                    field: col.clone(),
                                    reason: format!("column `{col}` was left out as unchanged and its value is not in this batch; set REPLICA IDENTITY FULL on the source table"),
                                },
                            ));
                            row = Map::new();
                            break;
                        }
                    }
                }
                if row.is_empty() {
                    continue;
                }
                Some(row)
            }
        };
        if !last.contains_key(&key_text) {
            order.push(key_text.clone());
        }
        last.insert(key_text, (i, key, new_row));
    }
    let mut folded = Folded::default();
    let mut upserts: Vec<(usize, Vec<u8>)> = Vec::new();
    for key_text in order {
        let Some((i, key, row)) = last.remove(&key_text) else {
            continue;
        };
        folded
            .keys
            .push(Value::Object(key).to_string().into_bytes());
        if let Some(row) = row {
            upserts.push((i, Value::Object(row).to_string().into_bytes()));
        }
    }
    upserts.sort_by_key(|(i, _)| *i);
    let positions: Vec<Pos<'a>> = changes.iter().map(|(p, _)| *p).collect();
    folded.upserts = upserts
        .into_iter()
        .map(|(i, row)| (positions[i], Cow::Owned(row)))
        .collect();
    (folded, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(op: ChangeOp, row: &str) -> Change {
        Change {
            op,
            row: row.as_bytes().to_vec(),
            position: None,
            ts_ms: None,
            unchanged: vec![],
        }
    }

    #[test]
    fn keeps_the_last_state_per_key_and_deletes_every_touched_key() {
        let changes = vec![
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
        let (f, errors) = fold(changes, &["id".to_string()]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, 4);
        assert_eq!(errors[0].1.field, "id");
        let rows: Vec<Value> = f
            .upserts
            .iter()
            .map(|(_, r)| serde_json::from_slice(r).unwrap())
            .collect();
        assert_eq!(rows, vec![serde_json::json!({"id":1,"v":"c"})]);
        let keys: Vec<Value> = f
            .keys
            .iter()
            .map(|k| serde_json::from_slice(k).unwrap())
            .collect();
        assert_eq!(
            keys,
            vec![serde_json::json!({"id":1}), serde_json::json!({"id":2})]
        );
    }

    #[test]
    fn unchanged_columns_keep_the_earlier_value_or_are_refused() {
        let mut toast = change(ChangeOp::Update, r#"{"id":1,"v":"x"}"#);
        toast.unchanged = vec!["big".into()];
        let changes = vec![
            (
                Pos::Line(1),
                change(ChangeOp::Insert, r#"{"id":1,"v":"a","big":"blob"}"#),
            ),
            (Pos::Line(2), toast.clone()),
            (Pos::Line(3), {
                let mut t = toast;
                t.row = br#"{"id":2,"v":"y"}"#.to_vec();
                t
            }),
        ];
        let (f, errors) = fold(changes, &["id".to_string()]);
        let rows: Vec<Value> = f
            .upserts
            .iter()
            .map(|(_, r)| serde_json::from_slice(r).unwrap())
            .collect();
        assert_eq!(rows, vec![serde_json::json!({"id":1,"v":"x","big":"blob"})]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].1.field, "big");
    }
}

//! Keyed batches: the changes of one batch folded to the last state per key,
//! in source order. Every touched key gets an equality delete (removing its
//! older rows); keys whose last change is an upsert also get their new row.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;

use super::writer::Pos;
use crate::change::{Change, ChangeOp};

/// A batch folded to its last state per key.
#[derive(Debug, Default)]
pub struct Folded<'a> {
    /// New rows (last change of their key is an insert/update/read), in source order.
    pub upserts: Vec<(Pos<'a>, Cow<'a, [u8]>)>,
    /// One JSON object of key columns per touched key, for the equality deletes.
    pub keys: Vec<Vec<u8>>,
    /// The batch truncated the table: every row older than the batch goes.
    pub truncate: bool,
}

/// Why one change cannot be folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldError {
    /// The field at fault.
    pub field: String,
    /// Why.
    pub reason: String,
}

/// A row as its columns' exact JSON texts: never through `f64`, so a numeric
/// like `12345678901234567890.123456789` reaches the shredder digit for digit.
type Row = BTreeMap<String, Box<RawValue>>;

/// The last change of a key: its index in the batch, the key columns, and the
/// row it leaves (`None` after a delete).
type Latest = (usize, Row, Option<Row>);

/// Folds decoded changes, keyed by `key_names`; returns the fold and the
/// changes that could not take part, by their index in `changes`.
pub fn fold<'a>(
    changes: Vec<(Pos<'a>, Change)>,
    key_names: &[String],
) -> (Folded<'a>, Vec<(usize, FoldError)>) {
    let mut errors = Vec::new();
    let mut last: HashMap<String, Latest> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut truncate = false;
    for (i, (_, change)) in changes.iter().enumerate() {
        if change.op == ChangeOp::Truncate {
            // Everything before is gone with the table's older rows.
            last.clear();
            order.clear();
            truncate = true;
            continue;
        }
        let row: Row = match serde_json::from_slice(&change.row) {
            Ok(m) => m,
            Err(_) => {
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
        let mut key = Row::new();
        let mut missing = None;
        for k in key_names {
            match row.get(k) {
                Some(v) if v.get() != "null" => {
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
        let key_text = to_text(&key);
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
                            row = Row::new();
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
    let mut folded = Folded {
        truncate,
        ..Default::default()
    };
    let mut upserts: Vec<(usize, Vec<u8>)> = Vec::new();
    for key_text in order {
        let Some((i, key, row)) = last.remove(&key_text) else {
            continue;
        };
        folded.keys.push(to_text(&key).into_bytes());
        if let Some(row) = row {
            upserts.push((i, to_text(&row).into_bytes()));
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

fn to_text(row: &Row) -> String {
    let mut text = String::from("{");
    for (n, (k, v)) in row.iter().enumerate() {
        if n > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::Value::String(k.clone()).to_string());
        text.push(':');
        text.push_str(v.get());
    }
    text.push('}');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
    fn numbers_stay_exact_and_truncate_drops_what_came_before() {
        let changes = vec![
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
        let (f, errors) = fold(changes, &["id".to_string()]);
        assert!(errors.is_empty());
        assert!(f.truncate);
        assert_eq!(f.keys, vec![br#"{"id":2}"#.to_vec()]);
        assert_eq!(f.upserts.len(), 1);
        assert_eq!(
            std::str::from_utf8(&f.upserts[0].1).unwrap(),
            r#"{"id":2,"v":12345678901234567890.123456789}"#
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

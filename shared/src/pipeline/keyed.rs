//! Keyed batches: the changes of one batch folded per key, in source order.
//! Keys are grouped by the digest of their typed value ([`crate::rowkey`]),
//! never by JSON text, so `"A"` and `"\u0041"` are one key. Each key keeps
//! the states its changes left, newest last: when the newest state cannot be
//! written (a value that does not fit its column), the writer falls back to
//! the one before, and a key with no state left is not touched at all; a
//! rejected change never deletes a row.

use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;

use crate::change::{Change, ChangeOp};
use crate::source::Pos;

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

/// One change's row, parsed once, with its key columns as a JSON object.
#[derive(Debug, Clone)]
pub struct Parsed {
    row: Row,
    /// The key columns as a JSON object, for the key shredder.
    pub key: Vec<u8>,
}

/// Parses every change's row and takes its key; a TRUNCATE has no row
/// (`Ok(None)`).
pub fn parse(
    changes: &[(Pos<'_>, Change)],
    key_names: &[String],
) -> Vec<Result<Option<Parsed>, FoldError>> {
    changes
        .iter()
        .map(|(_, change)| {
            if change.op == ChangeOp::Truncate {
                return Ok(None);
            }
            let row: Row = serde_json::from_slice(&change.row).map_err(|_| FoldError {
                field: String::new(),
                reason: "change row is not a JSON object".into(),
            })?;
            let mut key = Row::new();
            for k in key_names {
                match row.get(k) {
                    Some(v) if v.get() != "null" => {
                        key.insert(k.clone(), v.clone());
                    }
                    _ => return Err(FoldError {
                        field: k.clone(),
                        reason: format!("identifier field `{k}` is missing or null; a keyed table needs it in every change (for deletes: REPLICA IDENTITY DEFAULT or FULL)"),
                    }),
                }
            }
            Ok(Some(Parsed {
                key: to_text(&key).into_bytes(),
                row,
            }))
        })
        .collect()
}

/// One state a key's change left: the change's index in the batch and the
/// row (`None` after a delete).
#[derive(Debug, Clone)]
pub struct State {
    /// The change's index in the batch.
    pub change: usize,
    /// The row as a JSON object, `None` for a delete.
    pub row: Option<Vec<u8>>,
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
}

/// Folds changes per key, `parsed` and `digests` (one per change; `None`
/// for changes that failed earlier and TRUNCATEs) from [`parse`] and the key
/// shredder; returns the fold and the changes that could not take part, by
/// their index.
pub fn fold(
    changes: &[(Pos<'_>, Change)],
    parsed: Vec<Option<Parsed>>,
    digests: &[Option<u128>],
) -> (Folded, Vec<(usize, FoldError)>) {
    let mut errors = Vec::new();
    let mut folded = Folded::default();
    let mut slot: HashMap<u128, usize> = HashMap::new();
    for (i, ((_, change), parsed)) in changes.iter().zip(parsed).enumerate() {
        if change.op == ChangeOp::Truncate {
            // Everything before is gone with the table's older rows.
            folded.keys.clear();
            slot.clear();
            folded.truncate = true;
            continue;
        }
        let (Some(parsed), Some(digest)) = (parsed, digests.get(i).copied().flatten()) else {
            continue;
        };
        let at = *slot.entry(digest).or_insert_with(|| {
            folded.keys.push(KeyChanges {
                digest,
                key: parsed.key.clone(),
                states: Vec::new(),
            });
            folded.keys.len() - 1
        });
        let key = &mut folded.keys[at];
        // Only a change that leaves columns out reads the key's earlier
        // state: a row is not parsed again for every change of its key.
        let previous: Option<Row> = key
            .states
            .last()
            .filter(|_| !change.unchanged.is_empty())
            .and_then(|s| s.row.as_ref())
            .and_then(|r| serde_json::from_slice(r).ok());
        let row = match change.op {
            ChangeOp::Delete => None,
            _ => {
                let mut row = parsed.row;
                // Unchanged (TOAST) columns keep the value the key had earlier in the batch.
                let mut missing = None;
                for col in &change.unchanged {
                    match previous.as_ref().and_then(|p| p.get(col)) {
                        Some(v) => {
                            row.insert(col.clone(), v.clone());
                        }
                        None => {
                            missing = Some(col.clone());
                            break;
                        }
                    }
                }
                if let Some(col) = missing {
                    errors.push((
                        i,
                        FoldError {
                            field: col.clone(),
                            reason: format!("column `{col}` was left out as unchanged and its value is not in this batch; set REPLICA IDENTITY FULL on the source table"),
                        },
                    ));
                    continue;
                }
                Some(to_text(&row).into_bytes())
            }
        };
        key.states.push(State { change: i, row });
    }
    folded.keys.retain(|k| !k.states.is_empty());
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

    /// Folds with digests of the key text as written, as a stand-in for the
    /// key shredder (the writer's tests cover typed keys).
    fn fold_text(changes: &[(Pos<'_>, Change)]) -> (Folded, Vec<(usize, FoldError)>) {
        let keys = ["id".to_string()];
        let mut errors = Vec::new();
        let mut parsed = Vec::new();
        let mut digests = Vec::new();
        for (i, p) in parse(changes, &keys).into_iter().enumerate() {
            match p {
                Ok(p) => {
                    digests.push(p.as_ref().map(|p| xxhash_rust::xxh3::xxh3_128(&p.key)));
                    parsed.push(p);
                }
                Err(e) => {
                    errors.push((i, e));
                    digests.push(None);
                    parsed.push(None);
                }
            }
        }
        let (f, mut more) = fold(changes, parsed, &digests);
        errors.append(&mut more);
        (f, errors)
    }

    fn last_rows(f: &Folded) -> Vec<Value> {
        f.keys
            .iter()
            .filter_map(|k| k.states.last()?.row.as_ref())
            .map(|r| serde_json::from_slice(r).unwrap())
            .collect()
    }

    #[test]
    fn keeps_every_state_per_key_in_order() {
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
        let (f, errors) = fold_text(&changes);
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
        let (f, errors) = fold_text(&changes);
        assert!(errors.is_empty());
        assert!(f.truncate);
        assert_eq!(f.keys.len(), 1);
        assert_eq!(f.keys[0].key, br#"{"id":2}"#.to_vec());
        assert_eq!(
            std::str::from_utf8(f.keys[0].states[0].row.as_ref().unwrap()).unwrap(),
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
        let (f, errors) = fold_text(&changes);
        assert_eq!(
            last_rows(&f),
            vec![serde_json::json!({"id":1,"v":"x","big":"blob"})]
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].1.field, "big");
    }
}

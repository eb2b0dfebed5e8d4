//! JSON keys that match no field: the policy for them, and what `Collect` remembers.

use std::collections::BTreeSet;

use super::error::{Fail, PResult, RecordErrorKind};

/// What to do with a JSON key that matches no field of the struct it is in (map keys are data).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownFields {
    /// Skip the key and its value.
    #[default]
    Ignore,
    /// Reject the record ([`RecordErrorKind::UnknownField`]) with the key's path.
    Reject,
    /// Skip like `Ignore`, and remember path and record for [`super::Shredder::take_unknown`].
    Collect,
}

/// Unknown keys of accepted records, taken with [`super::Shredder::take_unknown`].
///
/// Paths name no positions: `[]` stands for any list element, `{}` for any map value and
/// `{key}` for a map key of struct type (`m{key}.extra`). A key is spelled as the record spelled
/// it, so dots or brackets inside key names are not escaped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unknown {
    /// Distinct position-free key paths: `extra`, `payload.extra`, `items[].note`, `attrs{}.x`.
    pub paths: BTreeSet<String>,
    /// Ordinals of the accepted pushes with an unknown key, counting every push (ascending).
    pub records: Vec<usize>,
}

/// What `Collect` has seen so far, plus the record in progress.
#[derive(Debug, Default)]
pub(super) struct Collector {
    seen: Unknown,
    /// The record being pushed has an unknown key.
    hit: bool,
    /// Paths new in the record being pushed; they join `seen` only if it is accepted, so a
    /// rejected record leaves no trace.
    pending: BTreeSet<String>,
    /// Where a path is spelled before looking it up, so a path seen before allocates nothing.
    buf: String,
    /// Rejected pushes since the last finish; with the row count this numbers the pushes
    /// without a counter on the hot path.
    rejected: usize,
    /// Pushes (accepted or not) since the last finish that came before the last `take_unknown`.
    base: usize,
}

impl Collector {
    /// Notes the key `key` of the struct at `shape`.
    fn note(&mut self, shape: &str, key: &str) {
        self.hit = true;
        self.buf.clear();
        if !shape.is_empty() {
            self.buf.push_str(shape);
            self.buf.push('.');
        }
        self.buf.push_str(key);
        if !self.seen.paths.contains(self.buf.as_str()) && !self.pending.contains(self.buf.as_str())
        {
            self.pending.insert(self.buf.clone());
        }
    }

    /// Ends an accepted push; `rows` is how many were accepted before it since the last finish.
    #[inline(always)]
    pub fn accept(&mut self, rows: usize) {
        if self.hit {
            self.keep((rows + self.rejected).saturating_sub(self.base));
        }
    }

    #[cold]
    fn keep(&mut self, ordinal: usize) {
        self.seen.paths.append(&mut self.pending);
        self.seen.records.push(ordinal);
        self.hit = false;
    }

    /// Forgets what the push in progress saw, without ending it: the same
    /// record is pushed again another way.
    pub fn discard(&mut self) {
        self.pending.clear();
        self.hit = false;
    }

    /// Ends a rejected push: it leaves no trace but its place in the numbering.
    pub fn reject(&mut self) {
        self.pending.clear();
        self.hit = false;
        self.rejected += 1;
    }

    /// Hands over what was seen; pushes are numbered from here on (`rows` accepted so far).
    pub fn take(&mut self, rows: usize) -> Unknown {
        self.base = rows + self.rejected;
        std::mem::take(&mut self.seen)
    }

    /// Numbers pushes from zero again, for a new batch (keeping what was seen).
    pub fn restart(&mut self) {
        self.rejected = 0;
        self.base = 0;
    }
}

/// Handles a key of the struct at `shape` that matches none of its fields (not `Ignore`).
#[cold]
#[inline(never)]
pub(super) fn unknown_key(
    policy: UnknownFields,
    collector: &mut Collector,
    shape: &str,
    key: &[u8],
) -> PResult<()> {
    let key = String::from_utf8_lossy(key);
    match policy {
        UnknownFields::Ignore => Ok(()),
        UnknownFields::Collect => {
            collector.note(shape, &key);
            Ok(())
        }
        UnknownFields::Reject => {
            let column = if shape.is_empty() {
                key.to_string()
            } else {
                format!("{shape}.{key}")
            };
            Err(Fail::new(
                RecordErrorKind::UnknownField,
                format!("unknown field (the table has no column `{column}`)"),
            )
            .in_field(&key))
        }
    }
}

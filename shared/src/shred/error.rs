//! Public error types and the internal failure carried while a record unwinds.

use std::fmt::Write as _;

/// Why one record was rejected.
///
/// `field` is the path of the offending value (`payload.items[3].price`, `tags{"k"}` for a
/// map value), empty when the record as a whole is at fault (not an object, malformed JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.field, .reason))]
pub struct RecordError {
    /// Path of the offending field, empty for the whole record.
    pub field: String,
    /// What is wrong, phrased so a user can fix the producer.
    pub reason: String,
    /// The class of the problem, for callers that route or count rejections by cause.
    pub kind: RecordErrorKind,
}

/// The class of problem that rejected a record (the `reason` text says the specifics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordErrorKind {
    /// Malformed JSON or an empty record: the input is not one JSON value.
    Syntax,
    /// Well-formed JSON the column does not take (wrong JSON type, text not of the column's type).
    TypeMismatch,
    /// Out of the column's range: int/long/float/double, decimal integer digits, dates, times.
    OutOfRange,
    /// More fractional digits than the column keeps (decimal scale, time or timestamp unit).
    Precision,
    /// A required field, or a map entry's key or required value, is absent.
    MissingRequired,
    /// `null` in a required field, list element or map value.
    NullRequired,
    /// A key twice in one object, a repeated map key, or a key naming several fields (any case).
    Duplicate,
    /// A key that matches no field of its struct, under [`super::UnknownFields::Reject`].
    UnknownField,
    /// The batch outgrew Arrow's 32-bit offsets: not the record's fault; finish and push it again.
    BatchFull,
}

fn render(field: &str, reason: &str) -> String {
    if field.is_empty() {
        reason.to_string()
    } else {
        format!("field `{field}`: {reason}")
    }
}

/// Why a shredder could not be built or a batch could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ShredError {
    /// The Iceberg schema has a shape this shredder cannot write.
    #[error("cannot shred column `{field}`: {reason}")]
    Unsupported {
        /// Path of the column at fault.
        field: String,
        /// What about it is unsupported.
        reason: String,
    },
    /// iceberg-rust could not convert the schema to Arrow.
    #[error("cannot convert the Iceberg schema to Arrow: {0}")]
    Schema(#[from] iceberg::Error),
    /// Arrow refused the assembled arrays (a bug in the shredder if it ever happens).
    #[error("cannot assemble the Arrow batch: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// One step of a field path, innermost pushed first while unwinding.
#[derive(Debug)]
pub(super) enum Seg {
    Field(Box<str>),
    Index(usize),
    Key(String),
}

/// A rejected record on its way up; boxed so the hot `Ok` path stays one word wide.
#[derive(Debug)]
pub(super) struct Fail {
    /// Malformed JSON is reported against the whole record, so no path is collected for it
    /// (and the record is not re-checked for syntax).
    pub syntax: bool,
    pub kind: RecordErrorKind,
    pub reason: String,
    pub path: Vec<Seg>,
}

pub(super) type PResult<T> = Result<T, Box<Fail>>;

impl Fail {
    /// A bad value; the path is filled in while unwinding.
    #[cold]
    pub fn new(kind: RecordErrorKind, reason: impl Into<String>) -> Box<Fail> {
        Box::new(Fail {
            syntax: false,
            kind,
            reason: reason.into(),
            path: Vec::new(),
        })
    }

    #[cold]
    pub fn syntax(pos: usize, what: &str) -> Box<Fail> {
        Box::new(Fail {
            syntax: true,
            kind: RecordErrorKind::Syntax,
            reason: format!("invalid JSON at byte {pos}: {what}"),
            path: Vec::new(),
        })
    }

    /// Malformed input with no byte to point at (an empty record).
    #[cold]
    pub fn record(reason: impl Into<String>) -> Box<Fail> {
        Box::new(Fail {
            syntax: true,
            kind: RecordErrorKind::Syntax,
            reason: reason.into(),
            path: Vec::new(),
        })
    }

    #[cold]
    pub fn in_field(mut self: Box<Self>, name: &str) -> Box<Self> {
        if !self.syntax {
            self.path.push(Seg::Field(name.into()));
        }
        self
    }

    #[cold]
    pub fn at_index(mut self: Box<Self>, index: usize) -> Box<Self> {
        if !self.syntax {
            self.path.push(Seg::Index(index));
        }
        self
    }

    #[cold]
    pub fn at_key(mut self: Box<Self>, key: String) -> Box<Self> {
        if !self.syntax {
            self.path.push(Seg::Key(key));
        }
        self
    }

    pub fn into_record_error(self) -> RecordError {
        let mut field = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Field(name) => {
                    if !field.is_empty() {
                        field.push('.');
                    }
                    field.push_str(name);
                }
                Seg::Index(i) => {
                    let _ = write!(field, "[{i}]");
                }
                Seg::Key(k) => {
                    field.push('{');
                    quote_into(&mut field, k);
                    field.push('}');
                }
            }
        }
        RecordError {
            field,
            reason: self.reason,
            kind: self.kind,
        }
    }
}

/// Writes `s` as a JSON string literal, so a key with quotes or control bytes stays readable.
fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Quotes input text for a reason, cut short so a huge value cannot flood logs.
pub(super) fn show(text: &[u8]) -> String {
    const MAX: usize = 64;
    let cut = text.len() > MAX;
    let shown = if cut { &text[..MAX] } else { text };
    let mut out = String::with_capacity(shown.len() + 8);
    quote_into(&mut out, &String::from_utf8_lossy(shown));
    if cut {
        out.push('…');
    }
    out
}

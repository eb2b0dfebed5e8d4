//! The shredder's own error and the internal failure carried while a record unwinds
//! (reported as a [`RecordError`]).

use std::fmt::Write as _;

use crate::error::{Classify, ErrorKind};
pub(super) use crate::error::{RecordError, RecordErrorKind};

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

/// A schema the shredder cannot write stays so; so does a batch Arrow refused.
impl Classify for ShredError {
    fn kind(&self) -> ErrorKind {
        match self {
            ShredError::Unsupported { .. } | ShredError::Schema(_) => ErrorKind::Unsupported,
            ShredError::Arrow(_) => ErrorKind::Input,
        }
    }
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

//! A field path built on the stack while descending into a record (JSON or
//! Avro), rendered (`payload.after.items[2]`) only when an error names it.

/// One step down from the record, borrowing the steps above it.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    /// The record itself.
    Root,
    /// A field of the value at the path.
    Key(&'a Path<'a>, &'a str),
    /// An element of the list at the path.
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    /// The field `key` of this value.
    pub(crate) fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    /// Element `index` of this list.
    pub(crate) fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    /// The path as text, empty for the record itself.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Key(parent, key) => {
                parent.render_into(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Path::Index(parent, index) => {
                parent.render_into(out);
                out.push_str(&format!("[{index}]"));
            }
        }
    }
}

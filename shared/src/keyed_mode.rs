//! How a keyed table's commits change its older rows, as its properties
//! choose: read by the writers (which delete files to write) and by the
//! committer (how to apply them).

use iceberg::spec::TableMetadata;

/// The table properties that choose copy-on-write, as Iceberg's engines name them.
pub const MODE_PROPERTIES: [&str; 3] =
    ["write.update.mode", "write.merge.mode", "write.delete.mode"];

/// True when the table asks for copy-on-write.
pub fn copy_on_write(metadata: &TableMetadata) -> bool {
    MODE_PROPERTIES
        .iter()
        .any(|p| metadata.properties().get(*p).map(String::as_str) == Some("copy-on-write"))
}

/// Table property: how a keyed table's changes reach its older rows:
/// `position` (position deletes resolved at commit, the default) or
/// `equality` (equality delete files, which fewer readers apply).
/// `write.update.mode = copy-on-write` overrides both.
pub const KEYED_DELETES: &str = "floe.keyed.deletes";

/// How a keyed table's commits change its older rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedMode {
    /// Touched data files rewritten; no delete files.
    CopyOnWrite,
    /// Position deletes resolved against the table's rows at commit.
    Positions,
    /// Equality delete files the writers wrote, applied by readers.
    Equalities,
}

impl KeyedMode {
    /// The mode a table's properties choose. A table without the property
    /// (another engine created it, or floe before position deletes) takes
    /// position deletes: every reader applies them, and pyiceberg refuses
    /// equality deletes.
    pub fn of(metadata: &TableMetadata) -> Self {
        if copy_on_write(metadata) {
            return KeyedMode::CopyOnWrite;
        }
        match metadata.properties().get(KEYED_DELETES).map(String::as_str) {
            Some("equality") => KeyedMode::Equalities,
            _ => KeyedMode::Positions,
        }
    }
}

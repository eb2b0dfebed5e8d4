//! A catalog held in memory over in-memory storage, whose commits answer
//! as a script or a seed says: applied, applied with the answer lost,
//! applied late (after the next attempt has loaded the table), refused
//! without applying, or refused as a conflict. The commit engine's
//! stages and plans are tested on it without I/O, in milliseconds, and a
//! seeded run that fails replays from its seed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use iceberg::io::FileIO;
use iceberg::{NamespaceIdent, TableCreation, TableIdent};

use super::{Catalog, CatalogError, Committed, LoadedTable, TableCommit};
use crate::ident::display;

/// How the catalog answers one commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Applied, and said so.
    Apply,
    /// Applied, but the answer is lost on its way: `Ambiguous`.
    Lose,
    /// The answer is lost (`Ambiguous`) and the commit still on its way: it
    /// applies when the next commit arrives, if the table still points at
    /// its base then, so a retry planned meanwhile meets it as a conflict.
    Late,
    /// Not applied: `NotApplied` (a store that failed before the swap).
    Refuse,
    /// Not applied: `Conflict`, as if another commit had landed first.
    Conflict,
}

/// Where the answers come from once the script is spent.
#[derive(Debug)]
enum Draw {
    /// Every later commit applies.
    Apply,
    /// Drawn from a seed: one commit in `one_in` answers other than
    /// [`Answer::Apply`].
    Seeded { state: u64, one_in: u64 },
}

/// An in-memory catalog; see the module doc.
#[derive(Debug)]
pub struct MemoryCatalog {
    file_io: FileIO,
    tables: Mutex<HashMap<TableIdent, LoadedTable>>,
    script: Mutex<VecDeque<Answer>>,
    draw: Mutex<Draw>,
    /// A commit answered [`Answer::Late`], with the base it needs.
    late: Mutex<Option<(String, LoadedTable)>>,
    applied: AtomicUsize,
}

impl MemoryCatalog {
    /// A catalog whose commits all apply.
    pub fn new() -> Self {
        Self::scripted([])
    }

    /// A catalog whose next commits answer `answers`, in order, and every
    /// one after applies.
    pub fn scripted(answers: impl IntoIterator<Item = Answer>) -> Self {
        Self {
            file_io: FileIO::new_with_memory(),
            tables: Mutex::new(HashMap::new()),
            script: Mutex::new(answers.into_iter().collect()),
            draw: Mutex::new(Draw::Apply),
            late: Mutex::new(None),
            applied: AtomicUsize::new(0),
        }
    }

    /// Has the next commits answer `answers`, in order, after what the
    /// script holds still (a test's setup commits first, then its faults).
    pub fn then(&self, answers: impl IntoIterator<Item = Answer>) {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(answers);
    }

    /// A catalog where one commit in `one_in`, drawn from `seed`, is lost,
    /// late, refused or conflicts.
    pub fn seeded(seed: u64, one_in: u64) -> Self {
        let catalog = Self::new();
        *catalog.draw.lock().unwrap_or_else(|p| p.into_inner()) = Draw::Seeded {
            state: seed,
            one_in: one_in.max(1),
        };
        catalog
    }

    /// Commits that changed a table, lost answers included.
    pub fn applied(&self) -> usize {
        self.applied.load(Ordering::SeqCst)
    }

    fn next_answer(&self) -> Answer {
        if let Some(a) = self
            .script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            return a;
        }
        match &mut *self.draw.lock().unwrap_or_else(|p| p.into_inner()) {
            Draw::Apply => Answer::Apply,
            Draw::Seeded { state, one_in } => {
                let drawn = splitmix(state);
                if !drawn.is_multiple_of(*one_in) {
                    return Answer::Apply;
                }
                const OTHERS: [Answer; 4] =
                    [Answer::Lose, Answer::Late, Answer::Refuse, Answer::Conflict];
                OTHERS[(drawn / *one_in % 4) as usize]
            }
        }
    }

    fn current(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        let tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        tables
            .get(ident)
            .cloned()
            .ok_or_else(|| CatalogError::NoSuchTable {
                table: display(ident),
            })
    }
}

impl Default for MemoryCatalog {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryCatalog {
    /// `commit` as the next answer says.
    async fn answer(&self, commit: TableCommit) -> Result<LoadedTable, CatalogError> {
        let ident = commit.base.ident.clone();
        let table = display(&ident);
        if self.current(&ident)?.metadata_location != commit.base.metadata_location {
            return Err(CatalogError::Conflict { table });
        }
        let answer = self.next_answer();
        match answer {
            Answer::Refuse => {
                return Err(CatalogError::NotApplied {
                    table,
                    reason: "refused by the test's script".into(),
                });
            }
            Answer::Conflict => return Err(CatalogError::Conflict { table }),
            Answer::Apply | Answer::Lose | Answer::Late => {}
        }
        let next = super::next_location(&commit)?;
        super::write_metadata(&self.file_io, &ident, &commit.metadata, &next).await?;
        let loaded = LoadedTable {
            ident: ident.clone(),
            metadata: std::sync::Arc::new(commit.metadata),
            metadata_location: next.to_string(),
        };
        let lost = || CatalogError::Ambiguous {
            table: table.clone(),
            reason: "the answer was lost (the test's script)".into(),
        };
        match answer {
            Answer::Late => {
                *self.late.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((commit.base.metadata_location, loaded));
                Err(lost())
            }
            Answer::Lose => {
                self.swap(&commit.base.metadata_location, loaded)?;
                Err(lost())
            }
            _ => self.swap(&commit.base.metadata_location, loaded),
        }
    }

    /// Points the table at `next` if it still points at `base`.
    fn swap(&self, base: &str, next: LoadedTable) -> Result<LoadedTable, CatalogError> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        match tables.get(&next.ident) {
            Some(now) if now.metadata_location == base => {
                tables.insert(next.ident.clone(), next.clone());
            }
            _ => {
                return Err(CatalogError::Conflict {
                    table: display(&next.ident),
                });
            }
        }
        self.applied.fetch_add(1, Ordering::SeqCst);
        Ok(next)
    }
}

/// The next of a splitmix64 sequence.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[async_trait]
impl Catalog for MemoryCatalog {
    fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    fn default_location(&self, ident: &TableIdent) -> String {
        format!(
            "memory://warehouse/{}/{}",
            ident.namespace().join("/"),
            ident.name()
        )
    }

    async fn ensure_namespace(&self, _namespace: &NamespaceIdent) -> Result<(), CatalogError> {
        Ok(())
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        creation: TableCreation,
    ) -> Result<LoadedTable, CatalogError> {
        let table = display(ident);
        let (metadata, metadata_location) =
            super::write_first_metadata(self, ident, creation).await?;
        let loaded = LoadedTable {
            ident: ident.clone(),
            metadata: std::sync::Arc::new(metadata),
            metadata_location: metadata_location.to_string(),
        };
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if tables.contains_key(ident) {
            return Err(CatalogError::TableExists { table });
        }
        tables.insert(ident.clone(), loaded.clone());
        Ok(loaded)
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable, CatalogError> {
        self.current(ident)
    }

    async fn commit(&self, commit: TableCommit) -> Committed {
        let late = self.late.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((base, table)) = late {
            // A late commit whose base moved never applies, and no one is
            // waiting for its answer.
            let _ = self.swap(&base, table);
        }
        Committed::of(self.answer(commit).await)
    }

    async fn drop_table(&self, ident: &TableIdent) -> Result<(), CatalogError> {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        tables
            .remove(ident)
            .map(|_| ())
            .ok_or_else(|| CatalogError::NoSuchTable {
                table: display(ident),
            })
    }
}

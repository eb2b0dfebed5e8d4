//! Finding the field a JSON key names: the next field in schema order first, then a hash table.

/// FNV-1a: short field names make a simple byte hash faster than SipHash here.
pub(super) struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_byte(b);
        }
    }

    #[inline]
    fn write_byte(&mut self, b: u8) {
        self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

fn hash(key: &[u8], fold_case: bool) -> u64 {
    let mut h = Fnv::new();
    if fold_case {
        for &b in key {
            h.write_byte(b.to_ascii_lowercase());
        }
    } else {
        h.write(key);
    }
    h.finish()
}

/// Below this many fields a scan beats hashing the key.
const LINEAR_MAX: usize = 8;
const EMPTY: u32 = u32::MAX;

/// Open-addressing table of field indexes, keyed by name (exact or case-folded).
#[derive(Debug, Default)]
struct Table {
    slots: Vec<u32>,
}

impl Table {
    fn build(names: &[Box<[u8]>], fold_case: bool) -> Self {
        if names.len() <= LINEAR_MAX {
            return Table::default();
        }
        let size = (names.len() * 2).next_power_of_two();
        let mut slots = vec![EMPTY; size];
        for (i, name) in names.iter().enumerate() {
            let mut slot = hash(name, fold_case) as usize & (size - 1);
            while slots[slot] != EMPTY {
                slot = (slot + 1) & (size - 1);
            }
            slots[slot] = i as u32;
        }
        Table { slots }
    }

    /// First index whose name matches (in insertion order among equal hashes).
    fn find(&self, names: &[Box<[u8]>], key: &[u8], fold_case: bool) -> Option<usize> {
        let matches = |name: &[u8]| {
            if fold_case {
                name.eq_ignore_ascii_case(key)
            } else {
                name == key
            }
        };
        if self.slots.is_empty() {
            return names.iter().position(|n| matches(n));
        }
        let mask = self.slots.len() - 1;
        let mut slot = hash(key, fold_case) as usize & mask;
        loop {
            let idx = *self.slots.get(slot)?;
            if idx == EMPTY {
                return None;
            }
            let idx = idx as usize;
            if names.get(idx).is_some_and(|n| matches(n)) {
                return Some(idx);
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// What a key resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    Field(usize),
    Unknown,
    /// Only with case-insensitive matching: the key matches several fields' names.
    Ambiguous,
}

/// Loads 8 bytes at `i`; callers guarantee `i + 8 <= s.len()`.
#[inline(always)]
fn word(s: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(w)
}

/// Byte equality for short keys without a call into libc's `memcmp`.
#[inline(always)]
fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        // The last word may overlap the previous one; that is harmless for equality.
        word(a, n - 8) == word(b, n - 8)
    } else if n >= 4 {
        word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4)
    } else {
        a == b
    }
}

/// Loads 4 bytes at `i`; callers guarantee `i + 4 <= s.len()`.
#[inline(always)]
fn word4(s: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[i..i + 4]);
    u32::from_le_bytes(w)
}

/// Field names of one struct and the tables to find them by.
#[derive(Debug)]
pub(super) struct FieldLookup {
    names: Vec<Box<[u8]>>,
    /// `name":` for names a JSON string can only spell one way (no `"`, `\`, control bytes),
    /// so the expected key can be matched against raw input without scanning it as a string.
    raw: Vec<Option<Box<[u8]>>>,
    exact: Table,
    /// Present when matching ignores ASCII case.
    folded: Option<(Table, Vec<bool>)>,
}

impl FieldLookup {
    pub fn new<'n>(names: impl IntoIterator<Item = &'n str>, case_insensitive: bool) -> Self {
        let names: Vec<Box<[u8]>> = names.into_iter().map(|n| n.as_bytes().into()).collect();
        let raw = names
            .iter()
            .map(|n| {
                let plain = n.iter().all(|&b| b != b'"' && b != b'\\' && b >= 0x20);
                plain.then(|| [&n[..], b"\":"].concat().into_boxed_slice())
            })
            .collect();
        let exact = Table::build(&names, false);
        let folded = case_insensitive.then(|| {
            let ambiguous = names
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    names
                        .iter()
                        .enumerate()
                        .any(|(j, b)| i != j && a.eq_ignore_ascii_case(b))
                })
                .collect();
            (Table::build(&names, true), ambiguous)
        });
        FieldLookup {
            names,
            raw,
            exact,
            folded,
        }
    }

    /// Length of `"name":` if the input at `at` (the key's opening quote) is exactly field
    /// `hint`'s key followed by a colon; the common case of records in schema order.
    #[inline(always)]
    pub fn match_raw(&self, input: &[u8], at: usize, hint: usize) -> Option<usize> {
        let raw = self.raw.get(hint)?.as_deref()?;
        let candidate = input.get(at + 1..at + 1 + raw.len())?;
        eq_short(candidate, raw).then_some(raw.len() + 1)
    }

    /// Resolves `key`, trying `hint` (the field after the previous key) before anything else.
    #[inline]
    pub fn find(&self, key: &[u8], hint: usize) -> Found {
        if let Some(name) = self.names.get(hint)
            && eq_short(name, key)
        {
            return Found::Field(hint);
        }
        self.find_slow(key, hint)
    }

    #[inline(never)]
    fn find_slow(&self, key: &[u8], hint: usize) -> Found {
        if let Some(i) = self.exact.find(&self.names, key, false) {
            return Found::Field(i);
        }
        let Some((table, ambiguous)) = &self.folded else {
            return Found::Unknown;
        };
        let hit = match self.names.get(hint) {
            Some(name) if name.eq_ignore_ascii_case(key) => Some(hint),
            _ => table.find(&self.names, key, true),
        };
        match hit {
            Some(i) if ambiguous.get(i).copied().unwrap_or(false) => Found::Ambiguous,
            Some(i) => Found::Field(i),
            None => Found::Unknown,
        }
    }
}

//! Walks one JSON record and writes each value straight into its column.

use super::column::{Column, Kind, ListCol, MapCol, StructCol, child_offset};
use super::error::{Fail, PResult, RecordErrorKind, show};
use super::json::Cursor;
use super::lookup::Found;
use super::scalar::{
    Reject, expects, from_key_text, from_number, from_str, integer, not_integer, number_in_string,
};
use super::temporal::parse_timestamp;
use super::unknown::{Collector, UnknownFields, unknown_key};
use super::{Coercions, EpochUnit};

/// State kept across records: buffers reused so the common path allocates nothing, and what
/// unknown keys were seen. One pointer in [`Ctx`], so a push sets up no more than it uses.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// Decoded text of strings that had escapes.
    pub text: Vec<u8>,
    /// (hash, entry) pairs for finding duplicate map keys.
    pub dedup: Vec<(u64, u32)>,
    pub unknown: UnknownFields,
    pub collector: Collector,
}

/// Per-record parsing state.
pub(super) struct Ctx<'a, 's> {
    pub cur: Cursor<'a>,
    pub scratch: &'s mut Scratch,
    pub epoch: EpochUnit,
    pub case_insensitive: bool,
    pub coerce: Coercions,
}

/// Parses one record into the columns of `root` at row `row`.
pub(super) fn record(ctx: &mut Ctx, root: &mut StructCol, row: usize) -> PResult<()> {
    ctx.cur.skip_ws();
    if ctx.cur.at_end() {
        return Err(Fail::record("empty record (expected a JSON object)"));
    }
    let b = ctx.cur.peek()?;
    if b != b'{' {
        // A value error, so that broken input (`nope`, `[1,`) is reported as malformed JSON
        // rather than described as the value it starts like.
        let found = describe(ctx.cur.input(), ctx.cur.pos);
        return Err(Fail::new(
            RecordErrorKind::TypeMismatch,
            format!("a record must be a JSON object, got {found}"),
        ));
    }
    object(ctx, root, row)?;
    if !ctx.cur.at_end() {
        return Err(ctx.cur.error("unexpected characters after the JSON object"));
    }
    Ok(())
}

/// Fills the children of `st` at `row` from the object at the cursor; a child whose length is
/// still `row` afterwards was absent, one already past `row` when its key comes is a duplicate.
fn object(ctx: &mut Ctx, st: &mut StructCol, row: usize) -> PResult<()> {
    // Duplicates are rejected, so `filled == children.len()` means none can be missing.
    let mut filled = 0;
    if !ctx.cur.open(b'}')? {
        let mut hint = 0;
        loop {
            if ctx.cur.peek()? != b'"' {
                return Err(ctx.cur.error("expected a string key"));
            }
            let found = if let Some(n) = st.lookup.match_raw(ctx.cur.input(), ctx.cur.pos, hint) {
                ctx.cur.pos += n;
                Found::Field(hint)
            } else {
                let found = {
                    let key = ctx.cur.read_str(&mut ctx.scratch.text)?;
                    match st.lookup.find(key, hint) {
                        Found::Ambiguous => {
                            return Err(ambiguous(key));
                        }
                        Found::Unknown if ctx.scratch.unknown != UnknownFields::Ignore => {
                            let policy = ctx.scratch.unknown;
                            unknown_key(policy, &mut ctx.scratch.collector, &st.shape, key)?;
                            Found::Unknown
                        }
                        found => found,
                    }
                };
                ctx.cur.expect(b':', "expected ':' after an object key")?;
                found
            };
            match found {
                Found::Field(i) => {
                    let Some(child) = st.children.get_mut(i) else {
                        // Unreachable: lookup indexes come from this struct's own field list.
                        return Err(Fail::new(
                            RecordErrorKind::TypeMismatch,
                            "internal error: field index out of range",
                        ));
                    };
                    if child.len != row {
                        return Err(Fail::new(
                            RecordErrorKind::Duplicate,
                            "duplicate key in one object",
                        )
                        .in_field(child.name()));
                    }
                    if let Err(e) = value(ctx, child) {
                        return Err(e.in_field(child.name()));
                    }
                    hint = i + 1;
                    filled += 1;
                }
                _ => ctx.cur.skip_value(0)?,
            }
            if !ctx.cur.next_or_close(b'}')? {
                break;
            }
        }
    }
    if filled == st.children.len() {
        return Ok(());
    }
    for child in &mut st.children {
        if child.len == row {
            if !child.nullable {
                return Err(Fail::new(
                    RecordErrorKind::MissingRequired,
                    "required field is missing",
                )
                .in_field(child.name()));
            }
            child.push_null();
        }
    }
    Ok(())
}

/// A key that names several fields is rejected under every policy (it is neither skipped nor
/// collected); classed with duplicates, as several fields claim one key.
#[cold]
fn ambiguous(key: &[u8]) -> Box<Fail> {
    Fail::new(
        RecordErrorKind::Duplicate,
        "key matches several fields when ASCII case is ignored",
    )
    .in_field(&String::from_utf8_lossy(key))
}

/// Writes the value at the cursor as one row of `col`.
pub(super) fn value(ctx: &mut Ctx, col: &mut Column) -> PResult<()> {
    let b = ctx.cur.peek()?;
    if b == b'n' {
        ctx.cur.literal(b"null")?;
        if !col.nullable {
            return Err(Fail::new(
                RecordErrorKind::NullRequired,
                "null is not allowed: the field is required",
            ));
        }
        col.push_null();
        return Ok(());
    }
    let start = ctx.cur.pos;
    // The common column types stay in this small function; the rest go out of line so the
    // hot path does not pay their register pressure.
    match &mut col.kind {
        Kind::Long(v) => v.push(int(ctx, b, i64::MIN, i64::MAX, start)?),
        Kind::Int(v) => v.push(int(ctx, b, i32::MIN as i64, i32::MAX as i64, start)? as i32),
        Kind::String(v) if b == b'"' => {
            ctx.cur.read_str_into(&mut v.data)?;
            v.close()?;
        }
        Kind::Timestamp {
            unit,
            values,
            dates,
        } if b == b'"' && !ctx.coerce.numeric_strings => {
            let s = ctx.cur.read_str(&mut ctx.scratch.text)?;
            values.push(parse_timestamp(s, *unit, dates)?);
        }
        _ => return value_rest(ctx, col, b, start),
    }
    col.commit_valid();
    Ok(())
}

/// [`value`] for nested columns, the less common scalars, and type errors.
#[inline(never)]
fn value_rest(ctx: &mut Ctx, col: &mut Column, b: u8, start: usize) -> PResult<()> {
    let row = col.len;
    match &mut col.kind {
        Kind::Bool(bits) => match b {
            b't' => {
                ctx.cur.literal(b"true")?;
                bits.push(true);
            }
            b'f' => {
                ctx.cur.literal(b"false")?;
                bits.push(false);
            }
            b'"' if ctx.coerce.numeric_strings => match ctx.cur.read_str(&mut ctx.scratch.text)? {
                b"true" => bits.push(true),
                b"false" => bits.push(false),
                _ => return Err(wrong_type(ctx, &col.kind, start)),
            },
            _ => return Err(wrong_type(ctx, &col.kind, start)),
        },
        Kind::String(v) if ctx.coerce.to_string => {
            ctx.cur.skip_value(0)?;
            v.data
                .extend_from_slice(ctx.cur.input().get(start..ctx.cur.pos).unwrap_or(&[]));
            v.close()?;
        }
        Kind::String(_) => return Err(wrong_type(ctx, &col.kind, start)),
        Kind::Struct(st) => {
            if b != b'{' {
                return Err(wrong_type(ctx, &col.kind, start));
            }
            object(ctx, st, row)?;
        }
        Kind::List(l) => {
            if b != b'[' {
                return Err(wrong_type(ctx, &col.kind, start));
            }
            list(ctx, l)?;
        }
        Kind::Map(m) => match b {
            b'{' | b'[' => map(ctx, m, b)?,
            _ => return Err(wrong_type(ctx, &col.kind, start)),
        },
        kind => {
            let result = match b {
                b'"' => {
                    let (coerce, epoch) = (ctx.coerce, ctx.epoch);
                    let s = ctx.cur.read_str(&mut ctx.scratch.text)?;
                    match from_str(kind, s) {
                        // A column no number goes to keeps its own complaint.
                        Err(e) if coerce.numeric_strings => {
                            match number_in_string(kind, s, epoch) {
                                None | Some(Err(Reject::WrongType)) => Err(e),
                                Some(r) => r,
                            }
                        }
                        r => r,
                    }
                }
                b'-' | b'0'..=b'9' => {
                    let tok = ctx.cur.number()?;
                    from_number(kind, tok, ctx.epoch)
                }
                _ => Err(Reject::WrongType),
            };
            match result {
                Ok(()) => {}
                Err(Reject::Invalid(fail)) => return Err(fail),
                Err(Reject::WrongType) => return Err(wrong_type(ctx, &col.kind, start)),
            }
        }
    }
    col.commit_valid();
    Ok(())
}

/// An `int`/`long` read without going through text.
#[inline(always)]
fn int(ctx: &mut Ctx, b: u8, min: i64, max: i64, start: usize) -> PResult<i64> {
    if b == b'"' && ctx.coerce.numeric_strings {
        return int_in_string(ctx, min, max, start);
    }
    if b != b'-' && !b.is_ascii_digit() {
        let name = if min == i32::MIN as i64 {
            "int"
        } else {
            "long"
        };
        let found = describe(ctx.cur.input(), start);
        return Err(Fail::new(
            RecordErrorKind::TypeMismatch,
            format!("expected a JSON integer ({name}), got {found}"),
        ));
    }
    let tok = ctx.cur.int()?;
    if let super::json::IntTok::Int(v) = tok
        && v >= min
        && v <= max
    {
        return Ok(v);
    }
    let text = ctx.cur.input().get(start..ctx.cur.pos).unwrap_or(&[]);
    // Past the check above, `tok` is out of range or not an integer.
    Err(not_integer(text, tok, min, max))
}

/// An `int`/`long` from a string holding one, for tables that opt in.
#[cold]
fn int_in_string(ctx: &mut Ctx, min: i64, max: i64, start: usize) -> PResult<i64> {
    let s = ctx.cur.read_str(&mut ctx.scratch.text)?.trim_ascii();
    let mut c = Cursor::new(s);
    match c.int() {
        Ok(tok) if c.pos == s.len() => integer(s, tok, min, max),
        _ => {
            let name = if min == i32::MIN as i64 {
                "int"
            } else {
                "long"
            };
            let found = describe(ctx.cur.input(), start);
            Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                format!("expected a JSON integer or a string holding one ({name}), got {found}"),
            ))
        }
    }
}

#[cold]
fn wrong_type(ctx: &Ctx, kind: &Kind, start: usize) -> Box<Fail> {
    Fail::new(
        RecordErrorKind::TypeMismatch,
        format!(
            "expected {}, got {}",
            expects(kind, ctx.epoch),
            describe(ctx.cur.input(), start)
        ),
    )
}

/// A short description of the JSON value starting at `start`, for error messages.
#[cold]
fn describe(input: &[u8], start: usize) -> String {
    let mut c = Cursor::new(input);
    c.pos = start;
    match input.get(start) {
        Some(b'"') => {
            let mut text = Vec::new();
            match c.read_str_into(&mut text) {
                Ok(()) => format!("the string {}", show(&text)),
                Err(_) => "a string".into(),
            }
        }
        Some(b'{') => "an object".into(),
        Some(b'[') => "an array".into(),
        Some(b't') => "true".into(),
        Some(b'f') => "false".into(),
        Some(b'n') => "null".into(),
        Some(b'-' | b'0'..=b'9') => match c.number() {
            Ok(tok) => format!("the number {}", String::from_utf8_lossy(tok.text)),
            Err(_) => "a number".into(),
        },
        _ => "invalid JSON".into(),
    }
}

fn list(ctx: &mut Ctx, l: &mut ListCol) -> PResult<()> {
    if !ctx.cur.open(b']')? {
        let mut i = 0;
        loop {
            if !l.child.nullable && ctx.cur.peek()? == b'n' {
                ctx.cur.literal(b"null")?;
                return Err(Fail::new(
                    RecordErrorKind::NullRequired,
                    "null element, but the list's elements are required",
                )
                .at_index(i));
            }
            value(ctx, &mut l.child).map_err(|e| e.at_index(i))?;
            i += 1;
            if !ctx.cur.next_or_close(b']')? {
                break;
            }
        }
    }
    l.offsets.push(child_offset(l.child.len)?);
    Ok(())
}

fn map(ctx: &mut Ctx, m: &mut MapCol, open: u8) -> PResult<()> {
    let first = m.keys.len;
    if open == b'{' {
        map_object(ctx, m)?;
    } else {
        map_entries(ctx, m)?;
    }
    check_duplicates(&mut ctx.scratch.dedup, &m.keys, first)?;
    m.offsets.push(child_offset(m.keys.len)?);
    Ok(())
}

/// `{"k": v, …}`: keys are parsed from their text by the key type.
fn map_object(ctx: &mut Ctx, m: &mut MapCol) -> PResult<()> {
    if ctx.cur.open(b'}')? {
        return Ok(());
    }
    loop {
        if ctx.cur.peek()? != b'"' {
            return Err(ctx.cur.error("expected a string key"));
        }
        let key_pos = ctx.cur.pos;
        {
            let key = ctx.cur.read_str(&mut ctx.scratch.text)?;
            if let Err(mut fail) = from_key_text(&mut m.keys.kind, key, ctx.epoch) {
                fail.reason = format!("invalid map key: {}", fail.reason);
                return Err(fail.at_key(String::from_utf8_lossy(key).into_owned()));
            }
            m.keys.commit_valid();
        }
        ctx.cur.expect(b':', "expected ':' after an object key")?;
        if !m.values.nullable && ctx.cur.peek()? == b'n' {
            ctx.cur.literal(b"null")?;
            return Err(Fail::new(
                RecordErrorKind::NullRequired,
                "null value, but the map's values are required",
            )
            .at_key(key_text(ctx.cur.input(), key_pos)));
        }
        if let Err(e) = value(ctx, &mut m.values) {
            return Err(e.at_key(key_text(ctx.cur.input(), key_pos)));
        }
        if !ctx.cur.next_or_close(b'}')? {
            return Ok(());
        }
    }
}

/// Re-reads the key at `pos` for an error path (only on failure, so the hot path keeps none).
#[cold]
fn key_text(input: &[u8], pos: usize) -> String {
    let mut c = Cursor::new(input);
    c.pos = pos;
    let mut text = Vec::new();
    let _ = c.read_str_into(&mut text);
    String::from_utf8_lossy(&text).into_owned()
}

/// `[{"key": k, "value": v}, …]`, the only form for keys that JSON object keys cannot carry.
fn map_entries(ctx: &mut Ctx, m: &mut MapCol) -> PResult<()> {
    if ctx.cur.open(b']')? {
        return Ok(());
    }
    let mut i = 0;
    loop {
        if ctx.cur.peek()? != b'{' {
            let found = describe(ctx.cur.input(), ctx.cur.pos);
            return Err(Fail::new(
                RecordErrorKind::TypeMismatch,
                format!("a map entry must be an object {{\"key\":…,\"value\":…}}, got {found}"),
            )
            .at_index(i));
        }
        entry(ctx, m).map_err(|e| e.at_index(i))?;
        i += 1;
        if !ctx.cur.next_or_close(b']')? {
            return Ok(());
        }
    }
}

fn entry(ctx: &mut Ctx, m: &mut MapCol) -> PResult<()> {
    let row = m.keys.len;
    if !ctx.cur.open(b'}')? {
        loop {
            if ctx.cur.peek()? != b'"' {
                return Err(ctx.cur.error("expected a string key"));
            }
            let is_key = {
                let k = ctx.cur.read_str(&mut ctx.scratch.text)?;
                let eq = |name: &[u8]| {
                    if ctx.case_insensitive {
                        k.eq_ignore_ascii_case(name)
                    } else {
                        k == name
                    }
                };
                if eq(b"key") {
                    true
                } else if eq(b"value") {
                    false
                } else {
                    // The entry's shape is fixed by the format, not the table: this is a
                    // malformed entry under every unknown-field policy.
                    return Err(Fail::new(
                        RecordErrorKind::TypeMismatch,
                        format!(
                            "unexpected member {} in a map entry (only \"key\" and \"value\")",
                            show(k)
                        ),
                    ));
                }
            };
            ctx.cur.expect(b':', "expected ':' after an object key")?;
            let (col, name) = if is_key {
                (&mut m.keys, "key")
            } else {
                (&mut m.values, "value")
            };
            if col.len != row {
                return Err(
                    Fail::new(RecordErrorKind::Duplicate, "duplicate key in one object")
                        .in_field(name),
                );
            }
            value(ctx, col).map_err(|e| e.in_field(name))?;
            if !ctx.cur.next_or_close(b'}')? {
                break;
            }
        }
    }
    if m.keys.len == row {
        return Err(
            Fail::new(RecordErrorKind::MissingRequired, "map entry has no \"key\"").in_field("key"),
        );
    }
    if m.values.len == row {
        if !m.values.nullable {
            return Err(Fail::new(
                RecordErrorKind::MissingRequired,
                "map entry has no \"value\", but the map's values are required",
            )
            .in_field("value"));
        }
        m.values.push_null();
    }
    Ok(())
}

/// Rejects a map whose entries from `first` on repeat a key.
fn check_duplicates(scratch: &mut Vec<(u64, u32)>, keys: &Column, first: usize) -> PResult<()> {
    let n = keys.len - first;
    if n < 2 {
        return Ok(());
    }
    let dup = if n <= 8 {
        (first..keys.len).find_map(|j| (first..j).find(|&i| keys.rows_equal(i, j)).map(|i| (i, j)))
    } else {
        scratch.clear();
        for i in first..keys.len {
            match keys.row_hash(i) {
                Some(h) => scratch.push((h, i as u32)),
                None => return Ok(()),
            }
        }
        scratch.sort_unstable();
        let mut dup = None;
        for (a, pair) in scratch.iter().enumerate() {
            for other in &scratch[a + 1..] {
                if other.0 != pair.0 {
                    break;
                }
                if keys.rows_equal(pair.1 as usize, other.1 as usize) {
                    dup = Some((pair.1 as usize, other.1 as usize));
                    break;
                }
            }
            if dup.is_some() {
                break;
            }
        }
        dup
    };
    match dup {
        None => Ok(()),
        Some((i, j)) => {
            let (i, j) = (i.min(j), i.max(j));
            if let Kind::String(v) = &keys.kind {
                Err(Fail::new(RecordErrorKind::Duplicate, "duplicate map key")
                    .at_key(String::from_utf8_lossy(v.value(j)).into_owned()))
            } else {
                Err(Fail::new(
                    RecordErrorKind::Duplicate,
                    format!(
                        "duplicate map key (entries {} and {} are equal)",
                        i - first,
                        j - first
                    ),
                ))
            }
        }
    }
}

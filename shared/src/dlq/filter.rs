//! Which dead letters a `floe dlq` command acts on: by the field at fault,
//! the reason, the source and the age of the dead-letter file.

use super::Rejected;

/// A selection of dead-lettered records; the default selects every one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only records rejected at this field (`repo.id`; `(record)` for
    /// records rejected whole).
    pub field: Option<String>,
    /// Only records whose reason contains this text.
    pub reason: Option<String>,
    /// Only records whose source contains this text (`kafka:orders/3`, a file path).
    pub source: Option<String>,
    /// Only dead letters written at least this many ms ago.
    pub older_than_ms: Option<i64>,
    /// Only dead letters written at most this many ms ago.
    pub newer_than_ms: Option<i64>,
}

impl Filter {
    /// Whether it selects every record.
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// Whether it selects `e`, whose dead-letter file is `age_ms` old.
    pub fn selects(&self, e: &Rejected, age_ms: i64) -> bool {
        let field = if e.field.is_empty() {
            "(record)"
        } else {
            &e.field
        };
        self.field.as_deref().is_none_or(|f| f == field)
            && self.reason.as_deref().is_none_or(|r| e.reason.contains(r))
            && self.source.as_deref().is_none_or(|s| e.source.contains(s))
            && self.older_than_ms.is_none_or(|ms| age_ms >= ms)
            && self.newer_than_ms.is_none_or(|ms| age_ms <= ms)
    }
}

/// An age written as a number and a unit (`90s`, `30m`, `2h`, `7d`), in ms.
pub fn parse_age(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: give a unit (s, m, h or d), e.g. 30m"))?;
    let (n, unit) = text.split_at(unit_at);
    let n: i64 = n
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, e.g. 30m"))?;
    let per = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use s, m, h or d)"
            ));
        }
    };
    n.checked_mul(per)
        .ok_or_else(|| format!("{text:?} is too long an age"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(field: &str, reason: &str, source: &str) -> Rejected {
        Rejected {
            table: "a.b".into(),
            batch_id: "b".into(),
            source: source.into(),
            position: "line 1".into(),
            field: field.into(),
            reason: reason.into(),
            record: "{}".into(),
            record_base64: None,
            replays: 0,
        }
    }

    #[test]
    fn selects_by_every_criterion_together() {
        let e = rejected("repo.id", "expected a JSON integer (long)", "kafka:gh/3");
        let whole = rejected("", "a record must be a JSON object", "file:/x");
        assert!(Filter::default().selects(&e, 0) && Filter::default().is_all());
        let f = Filter {
            field: Some("repo.id".into()),
            reason: Some("integer".into()),
            source: Some("kafka:gh".into()),
            older_than_ms: Some(1_000),
            newer_than_ms: Some(10_000),
        };
        assert!(f.selects(&e, 5_000));
        assert!(!f.selects(&e, 500) && !f.selects(&e, 20_000));
        assert!(!f.selects(&whole, 5_000));
        let record = Filter {
            field: Some("(record)".into()),
            ..Filter::default()
        };
        assert!(record.selects(&whole, 0) && !record.selects(&e, 0));
    }

    #[test]
    fn ages_take_a_unit() {
        assert_eq!(parse_age("90s"), Ok(90_000));
        assert_eq!(parse_age("2h"), Ok(7_200_000));
        assert_eq!(parse_age(" 7d "), Ok(604_800_000));
        assert!(parse_age("30").unwrap_err().contains("give a unit"));
        assert!(parse_age("3w").unwrap_err().contains("unknown unit"));
    }
}

//! Table-name templates (`raw.{value}`) and the normalisation of the values put
//! into them.

use super::settings::RoutingMode;
use crate::ident::parse_table;

/// A placeholder of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placeholder {
    /// `{value}`: the routing field's value.
    Value,
    /// `{source}`: the source's name, whatever its kind.
    Source,
    /// `{topic}`: a Kafka topic's name.
    Topic,
    /// `{queue}`: an SQS queue's name.
    Queue,
    /// `{stream}`: a Kinesis or DynamoDB stream's name.
    Stream,
}

impl Placeholder {
    const ALL: [Placeholder; 5] = [
        Self::Value,
        Self::Source,
        Self::Topic,
        Self::Queue,
        Self::Stream,
    ];

    /// Its spelling in a template.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Value => "{value}",
            Self::Source => "{source}",
            Self::Topic => "{topic}",
            Self::Queue => "{queue}",
            Self::Stream => "{stream}",
        }
    }

    fn mode(self) -> RoutingMode {
        match self {
            Self::Value => RoutingMode::Field,
            _ => RoutingMode::Source,
        }
    }
}

fn usable_in(mode: RoutingMode) -> &'static str {
    match mode {
        RoutingMode::Field => "use {value}",
        _ => "use {source}, {topic}, {queue} or {stream}",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Hole(Placeholder),
}

/// A parsed template; its literal text is already lower-case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text` for `mode`; `Err` is the message for `routing.template`.
    pub(super) fn parse(text: &str, mode: RoutingMode) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let cut = rest.find(['{', '}']).unwrap_or(rest.len());
            if cut > 0 {
                pieces.push(Piece::Text(rest[..cut].to_ascii_lowercase()));
            }
            rest = &rest[cut..];
            if rest.starts_with('}') {
                return Err("`}` without an opening `{`".into());
            }
            if let Some(after) = rest.strip_prefix('{') {
                let end = after
                    .find(['}', '{'])
                    .filter(|&i| after[i..].starts_with('}'))
                    .ok_or("`{` without a closing `}`")?;
                let written = &rest[..end + 2];
                let hole = Placeholder::ALL
                    .into_iter()
                    .find(|p| p.as_str() == written)
                    .ok_or_else(|| {
                        format!("unknown placeholder {written} ({})", usable_in(mode))
                    })?;
                if hole.mode() != mode {
                    return Err(format!(
                        "placeholder {written} is for routing.mode = \"{}\" ({} in mode \"{mode}\")",
                        hole.mode(),
                        usable_in(mode)
                    ));
                }
                pieces.push(Piece::Hole(hole));
                rest = &after[end + 1..];
            }
        }
        let template = Template { pieces };
        match (mode, template.first_hole()) {
            (RoutingMode::Field, None) => {
                return Err("must contain {value}, where the field's value goes".into());
            }
            (_, None) => {
                return Err("has no placeholder, so every record would go to one table \
                            (use routing.mode = \"fixed\" with routing.table)"
                    .into());
            }
            _ => {}
        }
        // Any value renders to letters, digits, `_` and `-`, so rendering `x`
        // shows whether the literal text around the placeholders is usable.
        let sample = template.render(|_| Ok::<_, ()>("x")).unwrap_or_default();
        parse_table(&sample).map_err(|e| {
            let hint = if sample.contains('.') {
                String::new()
            } else {
                let hole = template.first_hole().map_or("{value}", Placeholder::as_str);
                format!(" (put a namespace before it, e.g. raw.{hole})")
            };
            format!(
                "gives unusable names such as `{sample}`: {}{hint}",
                e.reason
            )
        })?;
        Ok(template)
    }

    /// The first placeholder, to name in errors.
    pub(super) fn first_hole(&self) -> Option<Placeholder> {
        self.pieces.iter().find_map(|p| match p {
            Piece::Hole(h) => Some(*h),
            Piece::Text(_) => None,
        })
    }

    /// The table name with every placeholder filled by `fill` and normalised.
    pub(super) fn render<'v, E>(
        &self,
        fill: impl Fn(Placeholder) -> Result<&'v str, E>,
    ) -> Result<String, E> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Hole(h) => push_normalised(&mut out, fill(*h)?),
            }
        }
        Ok(out)
    }
}

/// Lower-cases `value` and turns every character outside `[a-z0-9_-]` into
/// `_`, so a value can never add a namespace level (`.`) or a path part (`/`).
pub(super) fn push_normalised(out: &mut String, value: &str) {
    out.extend(value.chars().map(|c| {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            c
        } else {
            '_'
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Template, v: &str) -> String {
        t.render(|_| Ok::<_, ()>(v)).unwrap()
    }

    #[test]
    fn renders_lower_case_literals_and_normalised_values() {
        let t = Template::parse("Raw.{value}_v1", RoutingMode::Field).unwrap();
        assert_eq!(render(&t, "Orders.V2"), "raw.orders_v2_v1");
        assert_eq!(render(&t, "../etc/passwd"), "raw.___etc_passwd_v1");
        assert_eq!(render(&t, "café"), "raw.caf__v1");
        let t = Template::parse("{source}.{topic}", RoutingMode::Source).unwrap();
        assert_eq!(render(&t, "a-b"), "a-b.a-b");
    }

    #[test]
    fn refuses_unknown_and_misplaced_placeholders() {
        let e = Template::parse("raw.{topik}", RoutingMode::Source).unwrap_err();
        assert_eq!(
            e,
            "unknown placeholder {topik} (use {source}, {topic}, {queue} or {stream})"
        );
        let e = Template::parse("raw.{topic}", RoutingMode::Field).unwrap_err();
        assert!(
            e.contains("{topic} is for routing.mode = \"source\""),
            "{e}"
        );
        assert!(e.contains("use {value}"), "{e}");
        let e = Template::parse("raw.{value}", RoutingMode::Source).unwrap_err();
        assert!(e.contains("{value} is for routing.mode = \"field\""), "{e}");
    }

    #[test]
    fn refuses_broken_braces_and_constant_templates() {
        for bad in [
            "raw.{value",
            "raw.value}",
            "raw.{}",
            "raw.{{value}}",
            "raw.{va{value}",
        ] {
            assert!(Template::parse(bad, RoutingMode::Field).is_err(), "{bad}");
        }
        let e = Template::parse("raw.events", RoutingMode::Field).unwrap_err();
        assert!(e.contains("must contain {value}"), "{e}");
        let e = Template::parse("raw.events", RoutingMode::Source).unwrap_err();
        assert!(e.contains("routing.mode = \"fixed\""), "{e}");
    }

    #[test]
    fn refuses_literals_that_make_bad_names() {
        for bad in [
            "{value}",
            "../{value}",
            "raw..{value}",
            "raw/{value}.t",
            "raw.{value}.",
        ] {
            let e = Template::parse(bad, RoutingMode::Field).unwrap_err();
            assert!(e.contains("gives unusable names"), "{bad}: {e}");
        }
    }
}

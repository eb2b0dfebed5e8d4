//! How the CLI shows the error that ends it.

use floe_core::catalog::CatalogError;
use floe_core::embedded::Embedded;
use floe_core::ident;
use floe_core::spelling::closest;

/// `e`'s message, then each cause it does not already show. floe's errors
/// name their source in their own message (a log line reads whole), so
/// anyhow's usual "Caused by" list would repeat each of them line by line.
pub fn describe(e: &anyhow::Error) -> String {
    let mut shown = e.to_string();
    let mut causes = Vec::new();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        let text = text.trim_end();
        if !shown.contains(text) {
            shown.push('\n');
            shown.push_str(text);
            causes.push(text.to_string());
        }
    }
    let mut out = format!("Error: {e}");
    if !causes.is_empty() {
        out.push_str("\n\nCaused by:");
        for cause in causes {
            out.push_str("\n    ");
            out.push_str(&cause);
        }
    }
    out
}

/// `e`, with the catalog's table nearest to the one it found missing
/// (`did you mean bronze.events?`), or the tables there are.
pub async fn suggest_table(floe: &Embedded, e: anyhow::Error) -> anyhow::Error {
    let Some(missing @ CatalogError::NoSuchTable { table }) =
        e.chain().find_map(|c| c.downcast_ref::<CatalogError>())
    else {
        return e;
    };
    let (missing, table) = (missing.to_string(), table.clone());
    // The listing only adds a hint: without it the error still says all.
    let Ok(tables) = floe.catalog().list_tables().await else {
        return e;
    };
    let names: Vec<String> = tables.iter().map(ident::display).collect();
    let hint = match closest(&table, names.iter().map(String::as_str)) {
        Some(near) => format!("did you mean {near}?"),
        None if names.is_empty() => "the catalog has no tables".to_string(),
        None if names.len() <= 10 => format!("its tables: {}", names.join(", ")),
        None => format!("{} tables: `floe table list`", names.len()),
    };
    e.context(format!("{missing} ({hint})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that shows its source in its message, as floe's do.
    #[derive(Debug)]
    struct Opening {
        source: std::io::Error,
    }

    impl std::fmt::Display for Opening {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "warehouse directory /w: {}", self.source)
        }
    }

    impl std::error::Error for Opening {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    fn denied() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied")
    }

    #[test]
    fn a_cause_the_message_shows_is_not_repeated_one_it_does_not_is() {
        let e = anyhow::Error::new(Opening { source: denied() });
        assert_eq!(
            describe(&e),
            "Error: warehouse directory /w: permission denied"
        );
        let e = e.context("cannot open the deployment the config describes");
        assert_eq!(
            describe(&e),
            "Error: cannot open the deployment the config describes\n\n\
             Caused by:\n    warehouse directory /w: permission denied"
        );
        let bare = anyhow::Error::new(denied()).context("reading floe.toml");
        assert_eq!(
            describe(&bare),
            "Error: reading floe.toml\n\nCaused by:\n    permission denied"
        );
    }
}

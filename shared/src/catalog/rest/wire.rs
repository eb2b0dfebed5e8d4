//! The REST spec's JSON bodies and how its answers map to [`CatalogError`].

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{Schema, SortOrder, TableMetadata, UnboundPartitionSpec};
use iceberg::{TableIdent, TableRequirement, TableUpdate};
use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::catalog::{CatalogError, LoadedTable};
use crate::ident::display;
use crate::schema_json;

/// `GET /v1/config`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ConfigResponse {
    #[serde(default)]
    pub defaults: HashMap<String, String>,
    #[serde(default)]
    pub overrides: HashMap<String, String>,
}

/// `POST /v1/{prefix}/namespaces`.
#[derive(Debug, Serialize)]
pub(super) struct CreateNamespace<'a> {
    pub namespace: &'a [String],
    pub properties: HashMap<String, String>,
}

/// `POST /v1/{prefix}/namespaces/{ns}/tables`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct CreateTable<'a> {
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<&'a str>,
    pub schema: &'a Schema,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_spec: Option<&'a UnboundPartitionSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_order: Option<&'a SortOrder>,
    pub stage_create: bool,
    pub properties: &'a HashMap<String, String>,
}

/// The table part of `POST /v1/{prefix}/namespaces/{ns}/tables/{t}`.
#[derive(Debug, Serialize)]
pub(super) struct TableName<'a> {
    pub namespace: &'a [String],
    pub name: &'a str,
}

/// `POST /v1/{prefix}/namespaces/{ns}/tables/{t}` (CommitTableRequest).
#[derive(Debug, Serialize)]
pub(super) struct CommitTable<'a> {
    pub identifier: TableName<'a>,
    pub requirements: &'a [TableRequirement],
    pub updates: &'a [TableUpdate],
}

/// LoadTableResult and CommitTableResponse: both carry these two.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct TableResponse {
    /// Absent only for a staged create, which floe never asks for.
    metadata_location: Option<String>,
    metadata: TableMetadata,
}

/// The table a create, load or commit answer (`body`, from `url`) carries.
pub(super) fn loaded(
    ident: &TableIdent,
    url: &Url,
    body: &[u8],
    what: &str,
) -> Result<LoadedTable, CatalogError> {
    let answer: TableResponse = serde_json::from_slice(body).map_err(|e| {
        // A table whose schema floe cannot read fails the same way on every
        // retry: say so, not that the service garbled its answer.
        let whence = format!("{what} answer from {url}");
        let unsupported = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| schema_json::unsupported(&whence, v.get("metadata")?));
        match unsupported {
            Some(source) => CatalogError::Iceberg {
                table: display(ident),
                source: Box::new(source),
            },
            None => CatalogError::store(format!("unreadable {whence}"), e),
        }
    })?;
    let metadata_location = answer.metadata_location.ok_or_else(|| {
        CatalogError::failed(format!("{what} answer from {url} has no metadata-location"))
    })?;
    Ok(LoadedTable {
        ident: ident.clone(),
        metadata: Arc::new(answer.metadata),
        metadata_location,
    })
}

/// The spec's error body: `{"error": {"message", "type", "code"}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorModel,
}

#[derive(Debug, Deserialize)]
struct ErrorModel {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// The server's own words for a refusal: `type: message` from the spec's error
/// body, else the start of the body as text.
pub(super) fn server_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) if error.kind.is_empty() => error.message,
        Ok(ErrorBody { error }) => format!("{}: {}", error.kind, error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            match text.char_indices().nth(300) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None if text.is_empty() => "(empty body)".to_string(),
                None => text.to_string(),
            }
        }
    }
}

fn refused(what: &str, table: &str, url: &str, status: u16, body: &[u8]) -> CatalogError {
    let answer = server_message(body);
    CatalogError::refused(
        format!("REST {what} {table} at {url}: HTTP {status}: {answer}"),
        status,
    )
}

/// A non-2xx answer to a commit. The spec: 409 `CommitFailedException` means
/// the requirements failed (reload and retry); 500, 502, 503 and 504 mean the
/// commit state is unknown; any other refusal was not applied.
pub(super) fn commit_error(table: &str, url: &str, status: u16, body: &[u8]) -> CatalogError {
    match status {
        409 => CatalogError::Conflict {
            table: table.to_string(),
        },
        404 => CatalogError::NoSuchTable {
            table: table.to_string(),
        },
        // A gateway or server failure after the request left: it may have landed.
        s if s >= 500 => CatalogError::Ambiguous {
            table: table.to_string(),
            reason: format!("HTTP {status} from {url}: {}", server_message(body)),
        },
        // The server refused it: not applied, whatever is retried later.
        _ => CatalogError::NotApplied {
            table: table.to_string(),
            reason: format!(
                "REST commit at {url}: HTTP {status}: {}",
                server_message(body)
            ),
        },
    }
}

/// A non-2xx answer to a table load.
pub(super) fn load_error(table: &str, url: &str, status: u16, body: &[u8]) -> CatalogError {
    match status {
        404 => CatalogError::NoSuchTable {
            table: table.to_string(),
        },
        _ => refused("load of", table, url, status, body),
    }
}

/// A non-2xx answer to a table creation.
pub(super) fn create_error(table: &str, url: &str, status: u16, body: &[u8]) -> CatalogError {
    match status {
        409 => CatalogError::TableExists {
            table: table.to_string(),
        },
        _ => refused("create of", table, url, status, body),
    }
}

/// A non-2xx answer to a namespace creation; `None` when it already exists.
pub(super) fn namespace_error(
    namespace: &str,
    url: &str,
    status: u16,
    body: &[u8],
) -> Option<CatalogError> {
    (status != 409).then(|| refused("create of namespace", namespace, url, status, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Classify;

    const COMMIT_FAILED: &[u8] = br#"{"error":{"message":"Requirement failed: branch main has changed","type":"CommitFailedException","code":409}}"#;

    /// A load answer for a table another engine gave a variant column: not
    /// a garbled answer to retry, a table floe cannot read, said where.
    #[test]
    fn a_table_with_a_type_floe_cannot_read_is_unsupported_not_a_bad_answer() {
        let body = serde_json::json!({
            "metadata-location": "s3://b/t/metadata/1.json",
            "metadata": {"format-version": 3, "table-uuid": "00000000-0000-0000-0000-000000000001",
                "location": "s3://b/t", "current-schema-id": 0,
                "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                    {"id": 1, "name": "id", "required": true, "type": "long"},
                    {"id": 2, "name": "payload", "required": false, "type": "variant"}]}]}
        });
        let url = Url::parse("http://c/v1/p/namespaces/bronze/tables/t").unwrap();
        let ident = TableIdent::from_strs(["bronze", "t"]).unwrap();
        let e = loaded(&ident, &url, body.to_string().as_bytes(), "load").unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Unsupported, "{e}");
        assert!(
            e.to_string()
                .contains("field `payload`: type `variant` (Iceberg v3)"),
            "{e}"
        );
        let garbled = loaded(&ident, &url, b"{\"metadata\": 1}", "load").unwrap_err();
        assert!(garbled.is_transient(), "{garbled}");
    }

    #[test]
    fn commit_answers_map_to_the_engine_s_outcomes() {
        let url = "http://c/v1/p/namespaces/bronze/tables/t";
        assert!(matches!(
            commit_error("bronze.t", url, 409, COMMIT_FAILED),
            CatalogError::Conflict { table } if table == "bronze.t"
        ));
        for status in [500, 502, 503, 504] {
            let e = commit_error("bronze.t", url, status, b"<html>bad gateway</html>");
            assert!(
                matches!(&e, CatalogError::Ambiguous { reason, .. }
                    if reason.contains(&status.to_string()) && reason.contains("bad gateway")),
                "{status}: {e:?}"
            );
            assert!(e.is_retryable());
        }
        assert!(matches!(
            commit_error("bronze.t", url, 404, b""),
            CatalogError::NoSuchTable { .. }
        ));
        let bad = commit_error(
            "bronze.t",
            url,
            400,
            br#"{"error":{"message":"unknown update action","type":"BadRequestException","code":400}}"#,
        );
        let text = bad.to_string();
        assert!(!bad.is_retryable());
        for part in [
            "bronze.t",
            url,
            "400",
            "BadRequestException",
            "unknown update action",
        ] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
    }

    #[test]
    fn other_answers_map_by_operation() {
        assert!(matches!(
            load_error("bronze.t", "u", 404, b""),
            CatalogError::NoSuchTable { .. }
        ));
        assert!(matches!(
            load_error("bronze.t", "u", 403, b"no"),
            CatalogError::Store { status: Some(403), context, .. } if context.contains("no")
        ));
        assert!(matches!(
            create_error("bronze.t", "u", 409, b""),
            CatalogError::TableExists { .. }
        ));
        assert!(namespace_error("bronze", "u", 409, b"").is_none());
        assert!(namespace_error("bronze", "u", 400, b"").is_some());
    }

    #[test]
    fn a_refusal_keeps_its_status_and_a_transport_error_its_source() {
        for status in [401, 403, 429, 503] {
            let e = load_error("bronze.t", "u", status, b"m");
            assert!(matches!(e, CatalogError::Store { status: Some(s), .. } if s == status));
            // Retried: a batch that met it is redelivered until someone acts.
            assert!(e.is_transient(), "{status}: {e}");
        }
        let io = std::io::Error::other("connection reset");
        let e = CatalogError::store("REST catalog", io);
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            "catalog store: REST catalog: connection reset"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn server_messages_are_short() {
        assert_eq!(server_message(b""), "(empty body)");
        assert_eq!(server_message(br#"{"error":{"message":"m"}}"#), "m");
        assert_eq!(server_message(&[b'x'; 1000]).chars().count(), 301);
    }

    #[test]
    fn requirements_and_updates_serialize_to_the_rest_shapes() {
        let uuid = uuid::Uuid::nil();
        let body = CommitTable {
            identifier: TableName {
                namespace: &["bronze".to_string()],
                name: "t",
            },
            requirements: &[
                TableRequirement::UuidMatch { uuid },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: None,
                },
            ],
            updates: &[TableUpdate::SetProperties {
                updates: HashMap::from([("k".to_string(), "v".to_string())]),
            }],
        };
        let json = serde_json::to_value(&body).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "identifier": {"namespace": ["bronze"], "name": "t"},
                "requirements": [
                    {"type": "assert-table-uuid", "uuid": uuid.to_string()},
                    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": null}
                ],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}]
            })
        );
    }
}

/// `GET /namespaces`: one page of namespaces.
#[derive(Debug, Deserialize)]
pub(super) struct ListNamespaces {
    #[serde(default)]
    pub namespaces: Vec<Vec<String>>,
    #[serde(rename = "next-page-token", default)]
    pub next_page_token: Option<String>,
}

/// `GET /namespaces/{ns}/tables`: one page of table identifiers.
#[derive(Debug, Deserialize)]
pub(super) struct ListTables {
    #[serde(default)]
    pub identifiers: Vec<Identifier>,
    #[serde(rename = "next-page-token", default)]
    pub next_page_token: Option<String>,
}

/// A table identifier as the REST spec writes it.
#[derive(Debug, Deserialize)]
pub(super) struct Identifier {
    pub namespace: Vec<String>,
    pub name: String,
}

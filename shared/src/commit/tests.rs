//! The engine's stages and plans on an in-memory catalog whose answers a
//! script or a seed decides ([`crate::catalog::memory`]): no I/O, so each
//! decision is tested alone and a failing seed replays.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use iceberg::spec::{NestedField, Operation, PrimitiveType, Schema, Type};
use iceberg::{TableCreation, TableIdent};

use super::plan::{Action, PlanContext};
use super::snapshot::SnapshotPlan;
use super::{CommitEngine, CommitError, RetryPolicy};
use crate::catalog::memory::{Answer, MemoryCatalog};
use crate::catalog::{Catalog, CatalogError, CatalogRef, Committed};
use crate::request::CommitRequest;
use crate::source::{Position, Positions, SourceSpan};

const SOURCE: &str = "file:/in.ndjson@0";

/// A one-column table `t.events`.
pub(crate) async fn table(catalog: &MemoryCatalog) -> TableIdent {
    let ident = TableIdent::from_strs(["t", "events"]).unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()
        .unwrap();
    let creation = TableCreation::builder()
        .name("events".into())
        .schema(schema)
        .properties(HashMap::new())
        .build();
    catalog.create_table(&ident, creation).await.unwrap();
    ident
}

/// An engine on `catalog` making `attempts` attempts, with no waits.
pub(crate) fn engine(catalog: &Arc<MemoryCatalog>, attempts: u32) -> CommitEngine {
    let policy = RetryPolicy {
        max_attempts: attempts,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        total_timeout: None,
    };
    CommitEngine::new(catalog.clone() as CatalogRef, policy)
}

/// A request of lines `first..=last` of one file, with no files (every
/// record dead-lettered): what the ledger decides needs nothing more.
fn request(ident: &TableIdent, batch: &str, first: u64, last: u64) -> CommitRequest {
    let at = |n: u64| Position::parse(&n.to_string()).unwrap();
    let span = SourceSpan {
        source: SOURCE.into(),
        positions: Positions::Range {
            first: at(first),
            last: at(last),
        },
        stream: false,
    };
    CommitRequest::new(ident.clone(), batch.into(), vec![span])
}

/// The table on `catalog` with lines 1-3 committed as batch `b1`, and the
/// engine that committed them.
async fn with_b1(catalog: &Arc<MemoryCatalog>) -> (TableIdent, CommitEngine) {
    let ident = table(catalog).await;
    let engine = engine(catalog, 4);
    engine
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap();
    (ident, engine)
}

/// A request naming one data file at `path` of `size` bytes.
fn with_file(mut r: CommitRequest, path: &str, size: u64) -> CommitRequest {
    r.data_files = vec![serde_json::json!({"file_path": path, "file_size_in_bytes": size})];
    r
}

#[tokio::test]
async fn a_request_whose_answer_was_lost_or_late_lands_once_and_counts_as_committed() {
    // Late: the commit lands only after the retry loaded the table, so the
    // retry conflicts, and the reload finds the batch.
    for (answer, attempts) in [(Answer::Lose, 2), (Answer::Late, 3)] {
        let catalog = Arc::new(MemoryCatalog::scripted([answer]));
        let ident = table(&catalog).await;
        let out = engine(&catalog, 4)
            .append(&ident, vec![request(&ident, "b1", 1, 3)])
            .await
            .unwrap();
        assert_eq!(
            (out.committed, out.duplicates),
            (vec!["b1".to_string()], vec![]),
            "{answer:?}"
        );
        assert_eq!(
            (out.attempts, catalog.applied()),
            (attempts, 1),
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn an_unknown_answer_settles_as_landed_only_when_the_table_shows_the_commit() {
    let catalog = Arc::new(MemoryCatalog::new());
    let ident = table(&catalog).await;
    let ours = engine(&catalog, 1)
        .rewrite(&ident, &Marker::default())
        .await
        .unwrap()[0];
    let now = catalog.load_table(&ident).await.unwrap();
    let lost = || {
        Committed::Unknown(CatalogError::Ambiguous {
            table: "t.events".into(),
            reason: "timed out".into(),
        })
    };
    // By a snapshot it added (REST: the server names the file) or by its
    // metadata file (SQLite, Glue).
    let by_snapshot = lost()
        .settled(catalog.as_ref(), &ident, None, &[ours])
        .await;
    assert!(
        matches!(by_snapshot, Committed::Landed(_)),
        "{by_snapshot:?}"
    );
    let file = now.metadata_location.as_str();
    let by_file = lost()
        .settled(catalog.as_ref(), &ident, Some(file), &[])
        .await;
    assert!(matches!(by_file, Committed::Landed(_)), "{by_file:?}");
    // Neither in the table: still unknown, never "not applied".
    let absent = lost()
        .settled(
            catalog.as_ref(),
            &ident,
            Some("memory://elsewhere.json"),
            &[ours + 1],
        )
        .await;
    assert!(matches!(absent, Committed::Unknown(_)), "{absent:?}");
}

#[tokio::test]
async fn a_redelivery_by_batch_or_by_positions_is_a_duplicate() {
    let catalog = Arc::new(MemoryCatalog::new());
    let (ident, engine) = with_b1(&catalog).await;
    // The same batch, and another batch of the same lines.
    let again = vec![request(&ident, "b1", 1, 3), request(&ident, "b2", 2, 3)];
    let out = engine.append(&ident, again).await.unwrap();
    assert_eq!(out.duplicates, vec!["b1".to_string(), "b2".to_string()]);
    assert!(out.committed.is_empty());
    // A batch of an unordered source is found by its id alone.
    let keyed = |id: &str| {
        let span = SourceSpan {
            source: "http:t.events".into(),
            positions: Positions::Key {
                key: "k-1".into(),
                order: None,
            },
            stream: false,
        };
        CommitRequest::new(ident.clone(), id.into(), vec![span])
    };
    let out = engine.append(&ident, vec![keyed("h1")]).await.unwrap();
    assert_eq!(out.committed, vec!["h1".to_string()]);
    let out = engine.append(&ident, vec![keyed("h1")]).await.unwrap();
    assert_eq!(out.duplicates, vec!["h1".to_string()]);
    // Lines past them are new.
    let out = engine
        .append(&ident, vec![request(&ident, "b3", 4, 5)])
        .await
        .unwrap();
    assert_eq!(out.committed, vec!["b3".to_string()]);
    assert_eq!(catalog.applied(), 3);
}

#[tokio::test]
async fn conflicts_go_round_again_until_exhausted_and_a_refusal_ends_the_call() {
    let catalog = Arc::new(MemoryCatalog::scripted([
        Answer::Conflict,
        Answer::Conflict,
    ]));
    let ident = table(&catalog).await;
    let out = engine(&catalog, 4)
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap();
    assert_eq!((out.attempts, catalog.applied()), (3, 1));

    let catalog = Arc::new(MemoryCatalog::scripted([Answer::Conflict; 3]));
    let ident = table(&catalog).await;
    let err = engine(&catalog, 3)
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CommitError::Exhausted {
                attempts: 3,
                last: CatalogError::Conflict { .. },
                ..
            }
        ),
        "{err:?}"
    );

    // Refused without applying: the call fails at once and the requests
    // go back to their queue.
    let catalog = Arc::new(MemoryCatalog::scripted([Answer::Refuse]));
    let ident = table(&catalog).await;
    let err = engine(&catalog, 3)
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CommitError::Catalog(CatalogError::NotApplied { .. })),
        "{err:?}"
    );
    assert_eq!(catalog.applied(), 0);
}

#[tokio::test]
async fn requests_whose_files_are_foreign_resized_or_gone_are_refused_and_commit_nothing() {
    let catalog = Arc::new(MemoryCatalog::new());
    let ident = table(&catalog).await;
    let location = catalog
        .load_table(&ident)
        .await
        .unwrap()
        .metadata
        .location()
        .to_string();
    let ours = format!("{location}/data/a.parquet");
    catalog
        .file_io()
        .new_output(&ours)
        .unwrap()
        .write(bytes::Bytes::from_static(&[0; 10]))
        .await
        .unwrap();
    let requests = vec![
        with_file(
            request(&ident, "foreign", 1, 1),
            "memory://elsewhere/a.parquet",
            10,
        ),
        with_file(request(&ident, "resized", 2, 2), &ours, 20),
        with_file(
            request(&ident, "gone", 3, 3),
            &format!("{location}/data/b.parquet"),
            10,
        ),
    ];
    let out = engine(&catalog, 4).append(&ident, requests).await.unwrap();
    let why: HashMap<String, String> = out.refused.into_iter().collect();
    assert_eq!(why.len(), 3, "{why:?}");
    assert!(
        why["foreign"].contains("memory://elsewhere/a.parquet"),
        "{why:?}"
    );
    assert!(
        why["resized"].contains("has 10 bytes, the request says 20"),
        "{why:?}"
    );
    assert!(why["gone"].contains("is gone"), "{why:?}");
    assert!(out.committed.is_empty());
    assert_eq!(catalog.applied(), 0);
}

/// A rewrite that adds one snapshot with no files, whose summary holds
/// `summary`.
#[derive(Debug, Default)]
pub(crate) struct Marker {
    summary: Vec<(String, String)>,
}

#[async_trait]
impl Action for Marker {
    async fn plan(
        &self,
        _: &PlanContext<'_>,
        _: &[CommitRequest],
    ) -> Result<Vec<SnapshotPlan>, CommitError> {
        Ok(vec![SnapshotPlan {
            operation: Operation::Append,
            properties: self.summary.clone(),
            ..Default::default()
        }])
    }
}

#[tokio::test]
async fn a_rewrite_whose_answer_was_lost_finds_its_snapshot_and_commits_no_second() {
    let catalog = Arc::new(MemoryCatalog::scripted([Answer::Lose]));
    let ident = table(&catalog).await;
    let ids = engine(&catalog, 4)
        .rewrite(&ident, &Marker::default())
        .await
        .unwrap();
    let loaded = catalog.load_table(&ident).await.unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(loaded.metadata.snapshots().count(), 1);
    assert_eq!(loaded.metadata.current_snapshot_id(), Some(ids[0]));
    assert_eq!(catalog.applied(), 1);
}

#[tokio::test]
async fn a_schema_update_whose_answer_was_lost_is_found_not_added_twice() {
    let catalog = Arc::new(MemoryCatalog::scripted([Answer::Lose]));
    let ident = table(&catalog).await;
    let evolve = |m: &iceberg::spec::TableMetadata| {
        let current = m.current_schema();
        if current.field_by_name("v").is_some() {
            return None;
        }
        let mut fields: Vec<_> = current.as_struct().fields().to_vec();
        fields.push(NestedField::optional(2, "v", Type::Primitive(PrimitiveType::String)).into());
        Schema::builder().with_fields(fields).build().ok()
    };
    let loaded = engine(&catalog, 4)
        .update_schema(&ident, evolve)
        .await
        .unwrap();
    assert!(
        loaded
            .metadata
            .current_schema()
            .field_by_name("v")
            .is_some()
    );
    assert_eq!(loaded.metadata.schemas_iter().count(), 2);
    assert_eq!(catalog.applied(), 1);
}

#[tokio::test]
async fn adopting_commits_only_a_ledger_still_in_the_summaries() {
    let catalog = Arc::new(MemoryCatalog::new());
    let ident = table(&catalog).await;
    let engine = engine(&catalog, 4);
    // A table with no ledger yet: nothing to adopt.
    engine.adopt_ledger(&ident).await.unwrap();
    assert_eq!(catalog.applied(), 0);
    // One whose ledger files the table names: nothing either.
    engine
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap();
    engine.adopt_ledger(&ident).await.unwrap();
    assert_eq!(catalog.applied(), 1);
}

#[tokio::test]
async fn an_adoption_whose_answer_was_lost_is_found_and_not_committed_again() {
    for lost in [Answer::Lose, Answer::Late] {
        let catalog = Arc::new(MemoryCatalog::new());
        let ident = table(&catalog).await;
        let engine = engine(&catalog, 4);
        // The ledger as builds before ledger files kept it, in the
        // snapshot's summary: lines up to 3 of `SOURCE` committed.
        let legacy = Marker {
            summary: vec![(format!("{}{SOURCE}", crate::ledger::HWM_PREFIX), "3".into())],
        };
        engine.rewrite(&ident, &legacy).await.unwrap();
        catalog.then([lost]);
        engine.adopt_ledger(&ident).await.unwrap();
        assert_eq!(
            catalog.applied(),
            2,
            "{lost:?}: the legacy commit and one adoption"
        );
        let loaded = catalog.load_table(&ident).await.unwrap();
        assert!(
            loaded
                .metadata
                .properties()
                .contains_key(crate::ledger::PROPERTY),
            "{lost:?}"
        );
        // The adopted ledger still holds what the summaries recorded.
        let out = engine
            .append(&ident, vec![request(&ident, "b1", 1, 3)])
            .await
            .unwrap();
        assert_eq!(out.duplicates, vec!["b1".to_string()], "{lost:?}");
    }
}

#[tokio::test]
async fn a_repair_whose_answer_was_lost_is_found_and_not_committed_again() {
    let catalog = Arc::new(MemoryCatalog::new());
    let (ident, engine) = with_b1(&catalog).await;
    for lost in [Answer::Lose, Answer::Late] {
        let before = catalog.applied();
        catalog.then([lost]);
        engine.repair_ledger(&ident).await.unwrap();
        assert_eq!(catalog.applied(), before + 1, "{lost:?}: one repair");
    }
    // The rebuilt ledger is the table's, and still knows the batch.
    let out = engine
        .append(&ident, vec![request(&ident, "b1", 1, 3)])
        .await
        .unwrap();
    assert_eq!(out.duplicates, vec!["b1".to_string()]);
}

#[tokio::test]
async fn every_batch_lands_once_whatever_the_catalog_answers() {
    for seed in 0..64 {
        let catalog = Arc::new(MemoryCatalog::seeded(seed, 3));
        let ident = table(&catalog).await;
        let engine = engine(&catalog, 3);
        let mut committed = Vec::new();
        for n in 0..6u64 {
            let batch = request(&ident, &format!("b{n}"), 10 * n + 1, 10 * n + 10);
            // Delivered until a commit call ends well, then once more.
            let mut tries = 0;
            loop {
                tries += 1;
                assert!(tries < 50, "seed {seed}: b{n} never committed");
                match engine.append(&ident, vec![batch.clone()]).await {
                    Ok(out) => {
                        committed.extend(out.committed);
                        // An exhausted call whose last answer was lost
                        // landed it: the next finds it in the ledger.
                        if tries > 1 {
                            committed.extend(out.duplicates);
                        }
                        break;
                    }
                    // Back to the queue, and delivered again.
                    Err(CommitError::Exhausted { .. } | CommitError::Catalog(_)) => continue,
                    Err(e) => panic!("seed {seed}: {e}"),
                }
            }
            if let Ok(out) = engine.append(&ident, vec![batch]).await {
                assert_eq!(out.duplicates, vec![format!("b{n}")], "seed {seed}");
            }
        }
        committed.sort();
        committed.dedup();
        assert_eq!(committed.len(), 6, "seed {seed}: {committed:?}");
        assert_eq!(catalog.applied(), 6, "seed {seed}");
    }
}

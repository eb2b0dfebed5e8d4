//! Changes over a replication session (`START_REPLICATION`): one session
//! across reads, the slot moved only by what the caller committed, a
//! session lost before a commit read again from the last one, and reads
//! bounded by `max_changes` whole transactions at a time.

use super::*;

/// The slot's holder: its backend's pid and type, if any.
async fn holder(db: &Client, slot: &str) -> Option<(i32, String)> {
    db.query_opt(
        "SELECT s.active_pid, a.backend_type FROM pg_replication_slots s
           JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1",
        &[&slot],
    )
    .await
    .unwrap()
    .map(|r| (r.get(0), r.get(1)))
}

/// The ids a batch's changes carry, in order.
fn ids(batch: &PgBatch) -> Vec<i64> {
    lines(batch, "public.t")
        .iter()
        .map(|l| parse(l)["id"].as_i64().unwrap())
        .collect()
}

/// A fresh database `slot` with an empty `t`, its slot and publication.
async fn table(slot: &str) -> Option<(Client, PgConfig)> {
    let conninfo = fresh_db(slot).await?;
    let db = client(&conninfo).await;
    db.batch_execute("CREATE TABLE t (id int8 PRIMARY KEY, v text)")
        .await
        .unwrap();
    let cfg = config(&conninfo, slot, &["public.t"]);
    setup(&cfg).await.unwrap();
    Some((db, cfg))
}

async fn insert(db: &Client, ids: std::ops::RangeInclusive<i64>) {
    for i in ids {
        db.execute("INSERT INTO t VALUES ($1, 'v')", &[&i])
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_streams_and_the_slot_moves_only_by_what_was_committed() {
    let slot = "floe_stream_session";
    let Some((db, cfg)) = table(slot).await else {
        return;
    };
    assert!(cfg.stream, "streaming is the default");
    let state = done(&["public.t"]);
    let mut source = PgSource::connect(cfg.clone()).await.unwrap();
    let before = source.confirmed_flush_lsn().await.unwrap();

    insert(&db, 1..=3).await;
    let first = source.read_batch(&state).await.unwrap();
    assert_eq!(ids(&first), [1, 2, 3]);
    let (pid, kind) = holder(&db, slot).await.expect("a session holds the slot");
    assert_eq!(kind, "walsender");
    assert_eq!(
        source.confirmed_flush_lsn().await.unwrap(),
        before,
        "read is not committed"
    );

    source.advance(first.last_lsn).await.unwrap();
    assert_eq!(source.confirmed_flush_lsn().await.unwrap(), first.last_lsn);
    insert(&db, 4..=5).await;
    let second = source.read_batch(&state).await.unwrap();
    assert_eq!(ids(&second), [4, 5]);
    assert!(second.caught_up);
    assert_eq!(
        holder(&db, slot).await.map(|h| h.0),
        Some(pid),
        "the same session"
    );

    // A batch read ahead of one still being written, on a new session
    // opened where that one ends, moves nothing: the slot stays at the
    // last commit even as the session reports its position.
    drop(source);
    let mut source = PgSource::connect(cfg.clone()).await.unwrap();
    let ahead = source
        .read_batch_after(&state, first.last_lsn, 0)
        .await
        .unwrap();
    assert_eq!(ids(&ahead), [4, 5]);
    assert_eq!(source.confirmed_flush_lsn().await.unwrap(), first.last_lsn);
    drop(source);
    let mut source = PgSource::connect(cfg.clone()).await.unwrap();
    let ahead = source
        .read_batch_after(&state, second.last_lsn, 0)
        .await
        .unwrap();
    assert!(ahead.is_empty());
    assert_eq!(
        source.confirmed_flush_lsn().await.unwrap(),
        first.last_lsn,
        "a read past an uncommitted batch moved the slot"
    );

    // Lost before the second batch commits: the next run reads it again,
    // and nothing the first committed.
    drop(source);
    let mut source = PgSource::connect(cfg.clone()).await.unwrap();
    let again = source.read_batch(&state).await.unwrap();
    assert_eq!(ids(&again), [4, 5]);
    assert_eq!(again.last_lsn, second.last_lsn);
    source.advance(again.last_lsn).await.unwrap();
    source.finish().await.unwrap();
    assert_eq!(holder(&db, slot).await, None, "finish frees the slot");
    assert_eq!(source.confirmed_flush_lsn().await.unwrap(), again.last_lsn);
    assert!(source.read_batch(&state).await.unwrap().is_empty());
    source.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_comes_in_whole_transactions_of_about_max_changes() {
    let Some((db, mut cfg)) = table("floe_stream_backlog").await else {
        return;
    };
    cfg.max_changes = 250;
    // Ten transactions of 100 rows, then one of 1,000: larger than a
    // batch, and than what the session holds read ahead.
    for t in 0..10_i64 {
        db.execute(
            "INSERT INTO t SELECT i, 'v' FROM generate_series($1::int8, $1::int8 + 99) i",
            &[&(t * 100 + 1)],
        )
        .await
        .unwrap();
    }
    db.execute(
        "INSERT INTO t SELECT i, 'w' FROM generate_series(1001, 2000) i",
        &[],
    )
    .await
    .unwrap();
    let state = done(&["public.t"]);
    let mut source = PgSource::connect(cfg).await.unwrap();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let batch = source.read_batch(&state).await.unwrap();
        if batch.is_empty() {
            break;
        }
        let got = ids(&batch);
        sizes.push(got.len());
        seen.extend(got);
        source.advance(batch.last_lsn).await.unwrap();
    }
    source.finish().await.unwrap();
    assert_eq!(
        seen,
        (1..=2000).collect::<Vec<_>>(),
        "every row once, in order"
    );
    // 102 messages a transaction: a read stops at the first past 250,
    // and the last takes the large one whole after a small one.
    assert_eq!(sizes, [300, 300, 300, 1100]);
}

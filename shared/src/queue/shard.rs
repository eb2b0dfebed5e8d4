//! The commit queue sharded by table: N queues, each drained by its own
//! committer (reserved concurrency 1), for deployments where one committer
//! cannot keep up with the tables' commits (docs/deploy.md, "Sharding the
//! commit queue").
//!
//! A table's requests always go to the same shard, [`shard_of`] its name, so
//! each table still has exactly one committer: its requests keep their order
//! and the ledger's exactly-once is unchanged; only different tables are
//! committed by different committers. The hash is part of the deployment's
//! contract (writers of different builds must agree on it), so it is a fixed
//! algorithm, never Rust's randomised `DefaultHasher`.

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::TableIdent;
use serde::Deserialize;

use super::{CommitQueue, Delivery, QueueError, QueueRef};
use crate::ident::display;

/// Most shards a commit queue may have (the Terraform module's bound too).
pub const MAX_SHARDS: usize = 16;

/// The shard (`0..shards`) of `table`'s commit requests: a jump consistent
/// hash (Lamping & Veach, 2014) of the xxh3-64 of its name as floe writes it
/// (`namespace.table`). Stable across builds and platforms; going from N to
/// M shards moves only the tables that must move (|M − N| / max(M, N) of
/// them), not nearly all of them as `hash % shards` would.
pub fn shard_of(table: &TableIdent, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let key = xxhash_rust::xxh3::xxh3_64(display(table).as_bytes());
    jump(key, shards)
}

/// Jump consistent hash: the bucket of `key` among `buckets` (≥ 1).
fn jump(mut key: u64, buckets: usize) -> usize {
    let (mut b, mut j) = (0u64, 0u64);
    while j < buckets as u64 {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as u64;
    }
    b as usize
}

/// The table a serialised commit request names, read without the rest of
/// it; `None` when the body is no commit request.
fn table_of(body: &[u8]) -> Option<TableIdent> {
    #[derive(Deserialize)]
    struct Head {
        table: TableIdent,
    }
    serde_json::from_slice::<Head>(body).ok().map(|h| h.table)
}

/// The writers' side of a sharded commit queue: each request goes to its
/// table's shard. Committers never receive from it; each reads its own
/// shard's queue directly.
#[derive(Debug, Clone)]
pub struct ShardedQueue {
    shards: Vec<QueueRef>,
}

impl ShardedQueue {
    /// Sends over `shards`, in shard order (the order of `queue.urls`).
    pub fn new(shards: Vec<QueueRef>) -> Result<Self, QueueError> {
        if shards.is_empty() || shards.len() > MAX_SHARDS {
            return Err(QueueError::Shards {
                found: shards.len(),
            });
        }
        Ok(Self { shards })
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[QueueRef] {
        &self.shards
    }

    /// The queue `table`'s requests go to.
    pub fn shard(&self, table: &TableIdent) -> &QueueRef {
        &self.shards[shard_of(table, self.shards.len())]
    }

    /// The shard of a body whose table is not given: the table it names; a
    /// body that names none goes to shard 0, whose committer dead-letters it
    /// as unreadable (never dropped here).
    fn shard_of_body(&self, body: &[u8]) -> usize {
        table_of(body).map_or(0, |t| shard_of(&t, self.shards.len()))
    }
}

#[async_trait]
impl CommitQueue for ShardedQueue {
    async fn send(&self, body: Bytes) -> Result<(), QueueError> {
        self.shards[self.shard_of_body(&body)].send(body).await
    }

    async fn send_to(&self, table: &TableIdent, body: Bytes) -> Result<(), QueueError> {
        self.shard(table).send(body).await
    }

    async fn send_batch(&self, bodies: Vec<Bytes>) -> Result<(), QueueError> {
        let mut by_shard: Vec<Vec<Bytes>> = vec![Vec::new(); self.shards.len()];
        for body in bodies {
            by_shard[self.shard_of_body(&body)].push(body);
        }
        // Each shard keeps its bodies' order; shards are independent queues,
        // so they are sent to at once.
        let sends = self
            .shards
            .iter()
            .zip(by_shard)
            .filter(|(_, b)| !b.is_empty())
            .map(|(q, b)| q.send_batch(b));
        futures::future::try_join_all(sends).await.map(|_| ())
    }

    async fn receive(
        &self,
        _max: usize,
        _wait: std::time::Duration,
    ) -> Result<Vec<Delivery>, QueueError> {
        Err(QueueError::SendOnly)
    }

    async fn ack(&self, _receipts: &[String]) -> Result<(), QueueError> {
        Err(QueueError::SendOnly)
    }

    async fn release(&self, _receipts: &[String]) -> Result<(), QueueError> {
        Err(QueueError::SendOnly)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::ident::parse_table;
    use crate::queue::MemoryQueue;

    fn t(name: &str) -> TableIdent {
        parse_table(name).unwrap()
    }

    #[test]
    fn a_table_maps_to_the_same_shard_in_every_build() {
        // Pinned, for 1, 2, 3, 4, 5, 8, 12 and 16 shards: writers of two
        // builds of floe must send a table to the same committer, so a
        // change to the hash fails here first. (A table only ever moves to
        // the newest shard as shards are added: the jump hash's promise.)
        let pinned = [
            ("bronze.events", [0, 0, 2, 2, 2, 6, 6, 6]),
            ("bronze.orders", [0, 1, 2, 2, 2, 2, 2, 2]),
            ("silver.users", [0, 1, 2, 2, 4, 4, 4, 4]),
        ];
        let got: Vec<(&str, [usize; 8])> = pinned
            .iter()
            .map(|(name, _)| {
                let mut out = [0; 8];
                for (i, n) in [1, 2, 3, 4, 5, 8, 12, 16].into_iter().enumerate() {
                    out[i] = shard_of(&t(name), n);
                }
                (*name, out)
            })
            .collect();
        assert_eq!(got, pinned);
        for n in 1..=MAX_SHARDS {
            for i in 0..100 {
                let table = t(&format!("bench.t{i:03}"));
                assert_eq!(shard_of(&table, n), shard_of(&table, n));
                assert!(shard_of(&table, n) < n);
            }
        }
    }

    #[test]
    fn tables_spread_over_the_shards_and_resharding_moves_few() {
        let tables: Vec<TableIdent> = (0..1000).map(|i| t(&format!("ns.t{i}"))).collect();
        for n in [2, 4, 16] {
            let mut counts = vec![0usize; n];
            for table in &tables {
                counts[shard_of(table, n)] += 1;
            }
            // Within 40% of an even share: over three standard deviations
            // of a uniform hash even at 16 shards (62 tables each).
            let even = tables.len() / n;
            assert!(
                counts
                    .iter()
                    .all(|&c| c * 10 > even * 6 && c * 10 < even * 14),
                "{n} shards: {counts:?}"
            );
        }
        // 4 → 5 shards: only the tables of the new shard move (about a fifth).
        let moved = tables
            .iter()
            .filter(|table| shard_of(table, 4) != shard_of(table, 5))
            .count();
        assert!(moved > 150 && moved < 250, "{moved}");
        assert!(
            tables
                .iter()
                .filter(|table| shard_of(table, 4) != shard_of(table, 5))
                .all(|table| shard_of(table, 5) == 4)
        );
    }

    #[tokio::test]
    async fn requests_go_to_their_tables_shard_and_committers_read_shards() {
        let shards: Vec<Arc<MemoryQueue>> = (0..3).map(|_| Arc::new(MemoryQueue::new())).collect();
        let q = ShardedQueue::new(shards.iter().map(|s| s.clone() as QueueRef).collect()).unwrap();
        let body = |name: &str| {
            Bytes::from(format!(
                r#"{{"version":1,"table":{{"namespace":["{}"],"name":"{}"}}}}"#,
                name.split('.').next().unwrap(),
                name.split('.').nth(1).unwrap()
            ))
        };
        let names = ["a.one", "a.two", "b.three", "b.four", "c.five"];
        for name in names {
            q.send(body(name)).await.unwrap();
            q.send_to(&t(name), body(name)).await.unwrap();
        }
        q.send_batch(names.iter().map(|n| body(n)).collect())
            .await
            .unwrap();
        // Not a commit request: shard 0, where the committer dead-letters it.
        q.send(Bytes::from_static(b"junk")).await.unwrap();
        let mut seen = 0;
        for (i, shard) in shards.iter().enumerate() {
            let got = shard.receive(100, Duration::from_millis(1)).await.unwrap();
            for d in &got {
                match table_of(&d.body) {
                    Some(table) => assert_eq!(shard_of(&table, 3), i),
                    None => assert_eq!(i, 0),
                }
            }
            seen += got.len();
        }
        assert_eq!(seen, names.len() * 3 + 1);
        assert!(matches!(
            q.receive(1, Duration::ZERO).await,
            Err(QueueError::SendOnly)
        ));
        assert!(matches!(
            ShardedQueue::new(Vec::new()),
            Err(QueueError::Shards { found: 0 })
        ));
    }
}

//! The embedded commit queue: in-process, with SQS's receive/ack/release shape
//! so the committer runs the same code as in Lambda. It lives as long as the
//! process; the embedded CLI only reports success once the queue is drained
//! into the table, so nothing it acknowledges depends on it surviving.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use super::{CommitQueue, Delivery, QueueError};
use crate::error::Failure;

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<(u64, Bytes, u32)>,
    in_flight: HashMap<String, (u64, Bytes, u32)>,
    next_id: u64,
    closed: bool,
}

/// An in-process commit queue.
#[derive(Debug, Default)]
pub struct MemoryQueue {
    state: Mutex<State>,
    notify: Notify,
}

impl MemoryQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// No more sends: receivers get [`QueueError::Closed`] once it is drained.
    pub fn close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.closed = true;
        }
        self.notify.notify_waiters();
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, QueueError> {
        self.state
            .lock()
            .map_err(|_| Failure::message("queue state poisoned").into())
    }
}

#[async_trait]
impl CommitQueue for MemoryQueue {
    async fn send(&self, body: Bytes) -> Result<(), QueueError> {
        {
            let mut s = self.lock()?;
            let id = s.next_id;
            s.next_id += 1;
            s.ready.push_back((id, body, 0));
        }
        self.notify.notify_waiters();
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock()?;
                if !s.ready.is_empty() {
                    let n = max.min(s.ready.len());
                    let mut out = Vec::with_capacity(n);
                    for _ in 0..n {
                        let Some((id, body, count)) = s.ready.pop_front() else {
                            break;
                        };
                        let receipt = format!("{id}-{}", count + 1);
                        s.in_flight
                            .insert(receipt.clone(), (id, body.clone(), count + 1));
                        out.push(Delivery {
                            receipt,
                            body,
                            receive_count: count + 1,
                        });
                    }
                    return Ok(out);
                }
                // Nothing more can arrive once closed: answer at once, so a
                // committer's batching window does not idle at the end of a run.
                if s.closed {
                    return if s.in_flight.is_empty() {
                        Err(QueueError::Closed)
                    } else {
                        Ok(Vec::new())
                    };
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    async fn ack(&self, receipts: &[String]) -> Result<(), QueueError> {
        {
            let mut s = self.lock()?;
            for r in receipts {
                s.in_flight.remove(r);
            }
        }
        self.notify.notify_waiters();
        Ok(())
    }

    async fn release(&self, receipts: &[String]) -> Result<(), QueueError> {
        {
            let mut s = self.lock()?;
            for r in receipts {
                if let Some(msg) = s.in_flight.remove(r) {
                    s.ready.push_back(msg);
                }
            }
        }
        self.notify.notify_waiters();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn delivers_acks_and_redelivers_released_messages() {
        let q = MemoryQueue::new();
        q.send(Bytes::from_static(b"a")).await.unwrap();
        q.send(Bytes::from_static(b"b")).await.unwrap();
        let got = q.receive(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].body, Bytes::from_static(b"a"));
        q.ack(&[got[0].receipt.clone()]).await.unwrap();
        q.release(&[got[1].receipt.clone()]).await.unwrap();
        let again = q.receive(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].body, Bytes::from_static(b"b"));
        assert_eq!(again[0].receive_count, 2);
        q.close();
        // Closed with a delivery still in flight: an empty answer, at once.
        let started = std::time::Instant::now();
        let none = q.receive(10, Duration::from_secs(5)).await.unwrap();
        assert!(none.is_empty() && started.elapsed() < Duration::from_secs(1));
        q.ack(&[again[0].receipt.clone()]).await.unwrap();
        assert!(matches!(
            q.receive(10, Duration::from_millis(10)).await,
            Err(QueueError::Closed)
        ));
    }
}

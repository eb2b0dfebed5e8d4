//! A commit queue that survives the process: each message is a file under
//! the warehouse (`_floe/commit-queue/`), written before `send` returns and
//! removed once acknowledged, so a process killed at any point finds what
//! it accepted when it starts again ([`SpoolQueue::open`] queues every file
//! left there, oldest first). `floe serve` answers a POST only once its
//! request is here. On a local warehouse a message is written to a
//! temporary file, fsynced and renamed, after the files its request names
//! (data, deletes, key file) were fsynced too: an acknowledged request never
//! outlives what it commits, not even through a power cut. On an object
//! store a PUT is durable once answered.
//!
//! A released message comes back after a backoff that grows with its
//! receives (a table that cannot commit is retried, not spun on); once the
//! queue is closed a released message is parked: it stays on disk for the
//! next start and is not delivered again by this process.

use std::collections::{BTreeSet, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::io::FileIO;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::warn;

use super::{CommitQueue, Delivery, QueueError};
use crate::error::{BoxError, Failure};
use crate::request::CommitRequest;

/// The directory under the warehouse that holds the queue's files.
pub const SPOOL_DIR: &str = "_floe/commit-queue";

/// First backoff of a released message; it doubles per receive.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// Longest backoff of a released message.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where the files live.
#[derive(Debug)]
enum Dir {
    /// A local directory: written with fsync and atomic renames.
    Local(PathBuf),
    /// An object store prefix (`s3://…`), read and written through FileIO.
    Store {
        file_io: FileIO,
        prefix: String,
        /// The files found there at open.
        listed: Vec<String>,
    },
}

/// One message: its file's name and body.
#[derive(Debug, Clone)]
struct Message {
    name: String,
    body: Bytes,
    receives: u32,
    visible_at: Instant,
}

#[derive(Debug, Default)]
struct State {
    /// Waiting messages, in the order they were sent.
    ready: Vec<Message>,
    in_flight: HashMap<String, Message>,
    /// Names of messages left on disk for the next start.
    parked: Vec<String>,
    closed: bool,
}

/// A durable, file-backed commit queue for one process.
#[derive(Debug)]
pub struct SpoolQueue {
    dir: Dir,
    state: Mutex<State>,
    notify: Notify,
    seq: AtomicU64,
}

impl SpoolQueue {
    /// Opens the queue in local directory `dir` (creating it), queueing
    /// every message a previous process left there, oldest first.
    pub async fn open_local(dir: PathBuf) -> Result<Self, QueueError> {
        Self::open(Dir::Local(dir)).await
    }

    /// Opens the queue under object store `prefix` (`s3://…`), queueing the
    /// messages a previous process left there: `listed`, the URIs of the
    /// files under it (the caller lists, with the store's lister).
    pub async fn open_store(
        file_io: FileIO,
        prefix: &str,
        listed: Vec<String>,
    ) -> Result<Self, QueueError> {
        Self::open(Dir::Store {
            file_io,
            prefix: prefix.trim_end_matches('/').to_string(),
            listed,
        })
        .await
    }

    async fn open(dir: Dir) -> Result<Self, QueueError> {
        let left = dir.load().await?;
        let now = Instant::now();
        let ready = left
            .into_iter()
            .map(|(name, body)| Message {
                name,
                body,
                receives: 0,
                visible_at: now,
            })
            .collect();
        Ok(Self {
            dir,
            state: Mutex::new(State {
                ready,
                ..State::default()
            }),
            notify: Notify::new(),
            seq: AtomicU64::new(0),
        })
    }

    /// Where the files are, for messages to users.
    pub fn location(&self) -> String {
        match &self.dir {
            Dir::Local(p) => p.display().to_string(),
            Dir::Store { prefix, .. } => prefix.clone(),
        }
    }

    /// Messages queued and not yet acknowledged (parked ones included).
    pub fn pending(&self) -> usize {
        self.state
            .lock()
            .map(|s| s.ready.len() + s.in_flight.len() + s.parked.len())
            .unwrap_or(0)
    }

    /// The file names of messages parked for the next start.
    pub fn parked(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.parked.clone())
            .unwrap_or_default()
    }

    /// No more redeliveries: waiting messages are delivered once more at
    /// once, released ones are parked, and receivers get
    /// [`QueueError::Closed`] when nothing is left in flight.
    pub fn close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.closed = true;
        }
        self.notify.notify_waiters();
    }

    /// True once [`Self::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().map(|s| s.closed).unwrap_or(true)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, QueueError> {
        self.state
            .lock()
            .map_err(|_| Failure::message("spool queue state poisoned").into())
    }

    /// A name that sorts in send order, across restarts too.
    fn next_name(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        format!(
            "{:013}-{seq:08}-{}.json",
            crate::clock::now_ms().max(0),
            uuid::Uuid::new_v4().simple()
        )
    }

    /// Takes up to `max` visible messages (all waiting ones once closed).
    fn take(&self, max: usize) -> Result<Option<Vec<Delivery>>, QueueError> {
        let mut s = self.lock()?;
        let now = Instant::now();
        let closed = s.closed;
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.ready.len() && out.len() < max {
            if closed || s.ready[i].visible_at <= now {
                let mut m = s.ready.remove(i);
                m.receives += 1;
                let receipt = format!("{}#{}", m.name, m.receives);
                out.push(Delivery {
                    receipt: receipt.clone(),
                    body: m.body.clone(),
                    receive_count: m.receives,
                });
                s.in_flight.insert(receipt, m);
            } else {
                i += 1;
            }
        }
        if !out.is_empty() {
            return Ok(Some(out));
        }
        if closed && s.ready.is_empty() {
            return if s.in_flight.is_empty() {
                Err(QueueError::Closed)
            } else {
                Ok(Some(Vec::new()))
            };
        }
        Ok(None)
    }

    /// When the next waiting message becomes visible.
    fn next_visible(&self) -> Option<Instant> {
        let s = self.state.lock().ok()?;
        s.ready.iter().map(|m| m.visible_at).min()
    }
}

#[async_trait]
impl CommitQueue for SpoolQueue {
    async fn send(&self, body: Bytes) -> Result<(), QueueError> {
        let name = self.next_name();
        self.dir.store(&name, &body).await?;
        self.lock()?.ready.push(Message {
            name,
            body,
            receives: 0,
            visible_at: Instant::now(),
        });
        self.notify.notify_waiters();
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let deadline = Instant::now() + wait;
        loop {
            let notified = self.notify.notified();
            if let Some(got) = self.take(max)? {
                return Ok(got);
            }
            let until = self.next_visible().map_or(deadline, |v| v.min(deadline));
            if tokio::time::timeout_at(until, notified).await.is_err() && until >= deadline {
                return Ok(Vec::new());
            }
        }
    }

    async fn ack(&self, receipts: &[String]) -> Result<(), QueueError> {
        let done: Vec<Message> = {
            let mut s = self.lock()?;
            receipts
                .iter()
                .filter_map(|r| s.in_flight.remove(r))
                .collect()
        };
        for m in &done {
            // A file left behind is committed again on the next start, which
            // the ledger finds already in the table: a warning, not an error.
            if let Err(e) = self.dir.remove(&m.name).await {
                warn!(file = %m.name, error = %e, "acknowledged commit request not removed from the spool");
            }
        }
        self.notify.notify_waiters();
        Ok(())
    }

    async fn release(&self, receipts: &[String]) -> Result<(), QueueError> {
        {
            let mut s = self.lock()?;
            let now = Instant::now();
            for r in receipts {
                let Some(mut m) = s.in_flight.remove(r) else {
                    continue;
                };
                if s.closed {
                    s.parked.push(m.name);
                    continue;
                }
                m.visible_at = now + backoff(m.receives);
                let at = s.ready.partition_point(|w| w.name < m.name);
                s.ready.insert(at, m);
            }
        }
        self.notify.notify_waiters();
        Ok(())
    }
}

/// How long a message received `receives` times waits before coming back.
fn backoff(receives: u32) -> Duration {
    let doublings = receives.saturating_sub(1).min(16);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

impl Dir {
    /// Every message file, in name (send) order.
    async fn load(&self) -> Result<Vec<(String, Bytes)>, QueueError> {
        match self {
            Dir::Local(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || load_local(&dir))
                    .await
                    .map_err(|e| QueueError::from(Failure::new("spool task", e)))?
                    .map_err(|(path, e)| spool_error(&path, e))
            }
            Dir::Store {
                file_io,
                prefix,
                listed,
            } => {
                let mut names: Vec<String> = listed
                    .iter()
                    .filter_map(|uri| uri.rsplit('/').next().map(str::to_string))
                    .filter(|n| is_message(n))
                    .collect();
                names.sort();
                let mut out = Vec::with_capacity(names.len());
                for name in names {
                    let path = format!("{prefix}/{name}");
                    let body = file_io
                        .new_input(&path)
                        .map_err(|e| spool_error(&path, e))?
                        .read()
                        .await
                        .map_err(|e| spool_error(&path, e))?;
                    out.push((name, body));
                }
                Ok(out)
            }
        }
    }

    /// Makes message `name` durable.
    async fn store(&self, name: &str, body: &Bytes) -> Result<(), QueueError> {
        match self {
            Dir::Local(dir) => {
                let (dir, name, body) = (dir.clone(), name.to_string(), body.clone());
                tokio::task::spawn_blocking(move || store_local(&dir, &name, &body))
                    .await
                    .map_err(|e| QueueError::from(Failure::new("spool task", e)))?
                    .map_err(|(path, e)| spool_error(&path, e))
            }
            Dir::Store {
                file_io, prefix, ..
            } => {
                let path = format!("{prefix}/{name}");
                file_io
                    .new_output(&path)
                    .map_err(|e| spool_error(&path, e))?
                    .write(body.clone())
                    .await
                    .map_err(|e| spool_error(&path, e))
            }
        }
    }

    async fn remove(&self, name: &str) -> Result<(), QueueError> {
        match self {
            Dir::Local(dir) => {
                let path = dir.join(name);
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(spool_error(&path.display().to_string(), e)),
                }
            }
            Dir::Store {
                file_io, prefix, ..
            } => {
                let path = format!("{prefix}/{name}");
                file_io
                    .delete(&path)
                    .await
                    .map_err(|e| spool_error(&path, e))
            }
        }
    }
}

fn is_message(name: &str) -> bool {
    name.ends_with(".json") && !name.starts_with('.')
}

fn spool_error(path: &str, e: impl Into<BoxError>) -> QueueError {
    Failure::new(format!("spool file {path}"), e).into()
}

type IoResult<T> = Result<T, (String, std::io::Error)>;

fn io_at<T>(path: &Path, r: std::io::Result<T>) -> IoResult<T> {
    r.map_err(|e| (path.display().to_string(), e))
}

/// The local spool's messages; temporary files of sends that never
/// finished (never acknowledged) are removed.
fn load_local(dir: &Path) -> IoResult<Vec<(String, Bytes)>> {
    io_at(dir, std::fs::create_dir_all(dir))?;
    let mut names = Vec::new();
    for entry in io_at(dir, std::fs::read_dir(dir))? {
        let entry = io_at(dir, entry)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_message(&name) {
            names.push(name);
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let body = io_at(&path, std::fs::read(&path))?;
            Ok((name, Bytes::from(body)))
        })
        .collect()
}

/// Writes message `name` so that it, and every file its request names, is
/// on disk before this returns.
fn store_local(dir: &Path, name: &str, body: &[u8]) -> IoResult<()> {
    sync_named_files(dir, body)?;
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = io_at(&tmp, std::fs::File::create(&tmp))?;
        io_at(&tmp, f.write_all(body))?;
        io_at(&tmp, f.sync_all())?;
    }
    let path = dir.join(name);
    io_at(&path, std::fs::rename(&tmp, &path))?;
    sync_dir(dir)
}

/// Fsyncs the local files a commit request names and the directories that
/// hold them, up to the spool's warehouse: the writer wrote them through
/// the page cache, and the request must not be durable without them.
fn sync_named_files(spool: &Path, body: &[u8]) -> IoResult<()> {
    let Ok(request) = CommitRequest::from_bytes(body) else {
        return Ok(());
    };
    // `<warehouse>/_floe/commit-queue`: stop at the warehouse.
    let root = spool.ancestors().nth(2).unwrap_or(spool);
    let mut dirs = BTreeSet::new();
    for uri in request.paths() {
        let Some(path) = uri.strip_prefix("file://").map(Path::new) else {
            continue;
        };
        let file = io_at(path, std::fs::File::open(path))?;
        io_at(path, file.sync_all())?;
        for dir in path.ancestors().skip(1) {
            if !dir.starts_with(root) || !dirs.insert(dir.to_path_buf()) {
                break;
            }
        }
    }
    for dir in &dirs {
        sync_dir(dir)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> IoResult<()> {
    io_at(dir, std::fs::File::open(dir).and_then(|d| d.sync_all()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open(dir: &Path) -> SpoolQueue {
        SpoolQueue::open_local(dir.to_path_buf()).await.unwrap()
    }

    #[tokio::test]
    async fn what_was_sent_and_not_acked_is_delivered_again_after_a_restart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("_floe/commit-queue");
        let q = open(&dir).await;
        for body in ["a", "b", "c"] {
            q.send(Bytes::from(body)).await.unwrap();
        }
        let got = q.receive(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(got.len(), 3);
        q.ack(&[got[1].receipt.clone()]).await.unwrap();
        // The process dies here: "a" and "c" were received, never acked.
        drop(q);
        let q = open(&dir).await;
        let again = q.receive(10, Duration::from_millis(10)).await.unwrap();
        let bodies: Vec<&[u8]> = again.iter().map(|d| &d.body[..]).collect();
        assert_eq!(bodies, vec![&b"a"[..], &b"c"[..]]);
        assert!(again.iter().all(|d| d.receive_count == 1));
    }

    #[tokio::test]
    async fn released_messages_back_off_and_park_once_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("_floe/commit-queue");
        let q = open(&dir).await;
        q.send(Bytes::from("x")).await.unwrap();
        let first = q.receive(10, Duration::from_millis(10)).await.unwrap();
        q.release(&[first[0].receipt.clone()]).await.unwrap();
        // Not visible again before its backoff.
        assert!(
            q.receive(10, Duration::from_millis(20))
                .await
                .unwrap()
                .is_empty()
        );
        let later = q.receive(10, FIRST_BACKOFF * 3).await.unwrap();
        assert_eq!(later[0].receive_count, 2);
        q.release(&[later[0].receipt.clone()]).await.unwrap();
        // Closed: delivered once more at once, then parked on release.
        q.close();
        let last = q.receive(10, Duration::from_millis(10)).await.unwrap();
        assert_eq!(last.len(), 1);
        q.release(&[last[0].receipt.clone()]).await.unwrap();
        assert!(matches!(
            q.receive(10, Duration::from_millis(10)).await,
            Err(QueueError::Closed)
        ));
        assert_eq!(q.parked().len(), 1);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    }
}

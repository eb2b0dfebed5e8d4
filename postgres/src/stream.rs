//! Changes streamed from the slot over a replication session
//! (`START_REPLICATION`). Postgres decodes the WAL once and continuously,
//! beside floe's writing; a peek decodes again from the slot's `restart_lsn`
//! every time, and floe waits for it.
//!
//! The slot moves only by the flush position floe reports, and floe reports
//! only what [`ChangeStream::flushed`] was told: batches durably committed.
//! What is read but not yet taken is bounded by a budget of messages, so a
//! backlog waits in Postgres, not in memory.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::{Buf as _, BufMut as _, BytesMut};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{Semaphore, TryAcquireError, mpsc, watch};
use tokio::time::Instant;

use crate::conn::ConnSettings;
use crate::copy_binary::PG_EPOCH_US;
use crate::txn::{Gather, Txn};
use crate::wire::{BlockingWire, Frame, Wire, server_error};
use crate::{PgError, format_lsn, quote_ident, quote_literal};

/// How often the session reports its position unasked, well inside the
/// server's `wal_sender_timeout` (60 s by default) even while floe writes.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// How often a reader waiting to catch up asks the server where it is.
const PING_EVERY: Duration = Duration::from_millis(100);

/// A transaction read, with the budget it holds.
type Read = Result<(Txn, u32), PgError>;

/// What floe asks of the session's thread, which looks between reads.
#[derive(Default)]
struct Asks {
    /// The flush position to report: only ever a committed batch's end (0,
    /// none yet, the server ignores).
    flush: AtomicU64,
    /// Report now, and ask the server to answer with where it is.
    ping: AtomicBool,
    /// Report the flush position one last time and end the session.
    stop: AtomicBool,
}

/// A replication session's decoded transactions, in commit order.
///
/// The session is read by its own thread, in bulk every few milliseconds
/// (`wire.rs`), and handed over whole transactions at a time.
pub(crate) struct ChangeStream {
    txns: mpsc::UnboundedReceiver<Read>,
    budget: Arc<Semaphore>,
    /// How far the server has decoded, as its keepalives say.
    decoded: watch::Receiver<u64>,
    asks: Arc<Asks>,
    thread: Option<std::thread::JoinHandle<()>>,
    given_back: VecDeque<Txn>,
    /// The end of the last transaction taken: where the next take continues.
    pub next: u64,
    /// Whether values come in pgoutput's binary mode.
    pub binary: bool,
}

impl ChangeStream {
    /// Opens a session on `slot` streaming `publication`'s transactions
    /// that commit after `start`, holding at most about `budget` messages
    /// read ahead of the reader. No flush position is reported until
    /// [`Self::flushed`] gives one: `start` may be the end of a batch still
    /// being written (a read ahead), which the slot must not pass.
    pub async fn open(
        settings: &ConnSettings,
        slot: &str,
        publication: &str,
        start: u64,
        binary: bool,
        budget: usize,
    ) -> Result<Self, PgError> {
        let mut wire = Wire::connect(settings).await?;
        let options = format!(
            "proto_version '1', publication_names {}, messages 'true'{}",
            quote_literal(&quote_ident(publication)),
            if binary { ", binary 'true'" } else { "" }
        );
        let sql = format!(
            "START_REPLICATION SLOT {} LOGICAL {} ({options})",
            quote_ident(slot),
            format_lsn(start)
        );
        wire.start_copy_both(&sql).await?;
        let cap = u32::try_from(budget.max(1)).unwrap_or(u32::MAX);
        let budget = Arc::new(Semaphore::new(cap as usize));
        let (tx, txns) = mpsc::unbounded_channel();
        let (decoded_tx, decoded) = watch::channel(0);
        let asks = Arc::new(Asks::default());
        let pump = Pump {
            wire: wire.into_blocking()?,
            txns: tx,
            budget: budget.clone(),
            cap,
            decoded: decoded_tx,
            asks: asks.clone(),
            received: start,
            reported: None,
            last_status: std::time::Instant::now(),
        };
        let span = tracing::info_span!("pg_stream", slot = %slot, start = %format_lsn(start));
        let thread = std::thread::Builder::new()
            .name(format!("floe-pg-{slot}"))
            .spawn(move || span.in_scope(|| pump.run()))
            .map_err(|e| PgError::Stream {
                context: "starting the replication session's thread".into(),
                message: e.to_string(),
                code: None,
            })?;
        Ok(Self {
            txns,
            budget,
            decoded,
            asks,
            thread: Some(thread),
            given_back: VecDeque::new(),
            next: start,
            binary,
        })
    }

    /// Takes whole transactions until they hold about `upto` messages (true:
    /// more may wait) or the server has decoded past `target`, the WAL
    /// flushed when the read began, so every transaction committed by then
    /// is in. Gives up waiting after `wait` (false, as if caught up).
    pub async fn take(
        &mut self,
        upto: usize,
        target: u64,
        wait: Duration,
    ) -> Result<(Vec<Txn>, bool), PgError> {
        let mut out = Vec::new();
        let mut held = 0;
        while held < upto
            && let Some(t) = self.given_back.pop_front()
        {
            held += weight(&t);
            out.push(t);
        }
        self.ping();
        let deadline = Instant::now() + wait;
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        loop {
            // Read before draining: a transaction decoded before the
            // position the server reported is already queued.
            let reached = *self.decoded.borrow_and_update() >= target;
            while held < upto {
                match self.txns.try_recv() {
                    Ok(read) => held += self.keep(read?, &mut out),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(ended()),
                }
            }
            if held >= upto || reached {
                break;
            }
            tokio::select! {
                read = self.txns.recv() => match read {
                    Some(read) => held += self.keep(read?, &mut out),
                    None => return Err(ended()),
                },
                // A session that ended shows as a closed channel above.
                _ = self.decoded.changed() => {}
                _ = ping.tick() => self.ping(),
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        if let Some(last) = out.last() {
            self.next = last.end_lsn;
        }
        Ok((out, held >= upto))
    }

    /// Puts back `rest`, taken past what the reader needed, to be taken
    /// first next time; the reader continues after `next`.
    pub fn give_back(&mut self, rest: Vec<Txn>, next: u64) {
        for t in rest.into_iter().rev() {
            self.given_back.push_front(t);
        }
        self.next = next;
    }

    /// Reports `lsn` flushed (durably committed): the slot may move there.
    pub fn flushed(&self, lsn: u64) {
        self.asks.flush.fetch_max(lsn, Ordering::AcqRel);
    }

    /// The flush position reported (or about to be).
    pub fn flush_position(&self) -> u64 {
        self.asks.flush.load(Ordering::Acquire)
    }

    /// Reports the flush position one last time and ends the session.
    pub async fn close(mut self) {
        self.asks.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // It looks between reads, which time out within milliseconds.
            let joined = tokio::task::spawn_blocking(move || thread.join());
            if tokio::time::timeout(Duration::from_secs(5), joined)
                .await
                .is_err()
            {
                tracing::warn!("the replication session's thread did not end in 5 s");
            }
        }
    }

    fn ping(&self) {
        self.asks.ping.store(true, Ordering::Release);
    }

    fn keep(&mut self, (txn, permits): (Txn, u32), out: &mut Vec<Txn>) -> usize {
        self.budget.add_permits(permits as usize);
        let w = weight(&txn);
        out.push(txn);
        w
    }
}

impl Drop for ChangeStream {
    fn drop(&mut self) {
        // The thread ends within a read and closes the session.
        self.asks.stop.store(true, Ordering::Release);
    }
}

/// A transaction's messages, its begin and commit included, as a peek
/// counts its rows.
fn weight(txn: &Txn) -> usize {
    txn.messages.len() + 2
}

fn ended() -> PgError {
    PgError::Stream {
        context: "streaming changes".into(),
        message: "the replication session ended".into(),
        code: None,
    }
}

/// The session's own thread: reads, gathers and hands over transactions,
/// and keeps the server told where floe is.
struct Pump {
    wire: BlockingWire,
    txns: mpsc::UnboundedSender<Read>,
    budget: Arc<Semaphore>,
    cap: u32,
    decoded: watch::Sender<u64>,
    asks: Arc<Asks>,
    /// The furthest position the server has sent.
    received: u64,
    /// The flush position last reported.
    reported: Option<u64>,
    last_status: std::time::Instant,
}

impl Pump {
    fn run(mut self) {
        match self.pump() {
            Ok(()) => self.wire.close(),
            Err(e) => {
                tracing::warn!(error = %e, "the replication session ended");
                // A reader that is gone needs no error.
                let _ = self.txns.send(Err(e));
            }
        }
    }

    fn pump(&mut self) -> Result<(), PgError> {
        let mut gather = Gather::default();
        while !self.asks.stop.load(Ordering::Acquire) {
            self.report_if_asked()?;
            let Some(frame) = self.wire.frame()? else {
                continue;
            };
            if let Some(txn) = self.frame(frame, &mut gather)?
                && !self.hand_over(txn)?
            {
                break;
            }
        }
        self.status(false)
    }

    /// Hands `txn` to the reader once the budget has room for it; false
    /// when the reader is gone or floe asked the session to end.
    fn hand_over(&mut self, txn: Txn) -> Result<bool, PgError> {
        let n = u32::try_from(weight(&txn))
            .unwrap_or(u32::MAX)
            .min(self.cap);
        loop {
            match self.budget.try_acquire_many(n) {
                Ok(room) => {
                    room.forget();
                    return Ok(self.txns.send(Ok((txn, n))).is_ok());
                }
                Err(TryAcquireError::Closed) => return Ok(false),
                Err(TryAcquireError::NoPermits) => {}
            }
            if self.asks.stop.load(Ordering::Acquire) {
                return Ok(false);
            }
            // The server waits meanwhile; it still hears where floe is.
            self.report_if_asked()?;
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A status update when floe flushed more, asked for one, or the last
    /// is [`STATUS_EVERY`] old.
    fn report_if_asked(&mut self) -> Result<(), PgError> {
        let ping = self.asks.ping.swap(false, Ordering::AcqRel);
        let flushed = self.asks.flush.load(Ordering::Acquire);
        if ping || self.reported != Some(flushed) || self.last_status.elapsed() >= STATUS_EVERY {
            self.status(ping)?;
        }
        Ok(())
    }

    /// One message of the copy stream: a transaction's data, or a keepalive.
    fn frame(&mut self, frame: Frame, gather: &mut Gather) -> Result<Option<Txn>, PgError> {
        let mut body = frame.body;
        match frame.tag {
            b'd' if body.first() == Some(&b'w') && body.len() >= 25 => {
                body.advance(1);
                let start = body.get_u64();
                body.advance(16);
                self.received = self.received.max(start);
                gather.push(&body, &|| format_lsn(start))
            }
            b'd' if body.first() == Some(&b'k') && body.len() >= 18 => {
                body.advance(1);
                let end = body.get_u64();
                body.advance(8);
                let reply = body.get_u8() == 1;
                self.received = self.received.max(end);
                self.decoded.send_replace(end);
                if reply {
                    self.status(false)?;
                }
                Ok(None)
            }
            b'd' => Err(PgError::Decode(format!(
                "a replication message of {} bytes, tag {:?}",
                body.len(),
                body.first().map(|b| *b as char)
            ))),
            b'E' => Err(server_error("streaming changes", &body)),
            b'c' => Err(ended()),
            // Notices.
            _ => Ok(None),
        }
    }

    /// A standby status update: received up to where the server sent,
    /// flushed (and applied) up to what floe committed.
    fn status(&mut self, reply: bool) -> Result<(), PgError> {
        let flushed = self.asks.flush.load(Ordering::Acquire);
        let now_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        let mut msg = BytesMut::with_capacity(34);
        msg.put_u8(b'r');
        msg.put_u64(self.received.max(flushed));
        msg.put_u64(flushed);
        msg.put_u64(flushed);
        msg.put_i64(now_us - PG_EPOCH_US);
        msg.put_u8(u8::from(reply));
        self.wire.copy_data(&msg)?;
        self.reported = Some(flushed);
        self.last_status = std::time::Instant::now();
        Ok(())
    }
}

/// `e` with the fix for a path that cannot carry a replication session,
/// when its SQLSTATE says the session itself was refused: a protocol or
/// feature error (08, 0A; PgBouncer in transaction mode, RDS Proxy), or
/// `START_REPLICATION` read as SQL (42601: a pooler dropped the
/// `replication` parameter). A lost network or a refused login is not that.
pub(crate) fn with_peek_hint(e: PgError) -> PgError {
    match e {
        PgError::Stream {
            context,
            message,
            code: Some(code),
        } if matches!(code.get(..2), Some("08" | "0A")) || code == "42601" => PgError::Stream {
            context,
            message: format!(
                "{message}; if the connection goes through a pooler or proxy that cannot carry \
                 a replication session (PgBouncer in transaction mode, RDS Proxy), read by \
                 peeking instead: postgres.peek = true (or --peek)"
            ),
            code: Some(code),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: &str) -> String {
        let e = PgError::Stream {
            context: "starting replication".into(),
            message: "refused".into(),
            code: Some(code.into()),
        };
        with_peek_hint(e).to_string()
    }

    #[test]
    fn a_session_refused_names_peeking_a_lost_login_does_not() {
        // PgBouncer's "unsupported startup parameter", START_REPLICATION
        // read as SQL, a feature a proxy does not support.
        for code in ["08P01", "42601", "0A000"] {
            assert!(refused(code).contains("postgres.peek = true"), "{code}");
        }
        for code in ["28P01", "55006", "42501"] {
            assert!(!refused(code).contains("peek"), "{code}");
        }
    }
}

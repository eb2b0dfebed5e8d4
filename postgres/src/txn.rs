//! pgoutput messages gathered into whole transactions, from a peek's rows
//! and a replication stream's data alike.

use crate::PgError;
use crate::copy_binary::PG_EPOCH_US;
use crate::pgoutput::{self, Message};

/// One decoded transaction.
pub(crate) struct Txn {
    pub xid: u32,
    /// The end of its commit record: where a reader continues after it.
    pub end_lsn: u64,
    /// Its commit time, ms since the Unix epoch.
    pub ts_ms: i64,
    pub messages: Vec<Message>,
}

/// The transaction being gathered.
#[derive(Default)]
pub(crate) struct Gather {
    open: Option<Txn>,
}

impl Gather {
    /// Takes the pgoutput message `data` (at `lsn`, for errors); a commit
    /// returns its whole transaction.
    pub fn push(&mut self, data: &[u8], lsn: &dyn Fn() -> String) -> Result<Option<Txn>, PgError> {
        match pgoutput::decode(data)? {
            Message::Begin { xid, .. } => {
                self.open = Some(Txn {
                    xid,
                    end_lsn: 0,
                    ts_ms: 0,
                    messages: Vec::new(),
                });
            }
            Message::Commit { end_lsn, ts, .. } => {
                let mut txn = self
                    .open
                    .take()
                    .ok_or_else(|| PgError::Decode(format!("commit without begin at {}", lsn())))?;
                txn.end_lsn = end_lsn;
                txn.ts_ms = (ts + PG_EPOCH_US).div_euclid(1000);
                return Ok(Some(txn));
            }
            // Non-transactional messages come outside any transaction and
            // floe has no use for them.
            message => {
                if let Some(txn) = self.open.as_mut() {
                    txn.messages.push(message);
                }
            }
        }
        Ok(None)
    }
}

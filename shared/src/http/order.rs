//! The order the HTTP API received requests in, which orders a keyed
//! table's changes from HTTP (a request received later wins per key, even
//! when the earlier one commits later). A receipt takes the larger of the
//! clock in microseconds and one past the last receipt, so the order never
//! runs backwards within a process; on a local warehouse (`floe serve`) the
//! values handed out are reserved ahead in a file, so a process restarted
//! with its clock set back continues above every value it handed out
//! before. Without a local warehouse (the Lambda function) the order is the
//! receiving clock's.

use std::path::PathBuf;
use std::sync::Mutex;

use crate::source::Position;

/// Microseconds reserved per write of the file: one write a minute of
/// receipts at most.
const RESERVE_US: u64 = 60_000_000;

/// Where receipts are ordered from.
#[derive(Debug)]
pub struct ReceiptOrder {
    state: Mutex<State>,
    /// The reservation file, on a local warehouse.
    path: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct State {
    last: u64,
    /// Every value handed out, in this process or before it, is below it.
    reserved: u64,
}

impl ReceiptOrder {
    /// Receipts ordered by this process's clock alone.
    pub fn in_memory() -> Self {
        Self {
            state: Mutex::new(State::default()),
            path: None,
        }
    }

    /// Receipts ordered above every value the reservation file at `path`
    /// says was handed out.
    pub fn open(path: PathBuf) -> std::io::Result<Self> {
        let reserved = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<u64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: not a receipt reservation: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(Self {
            state: Mutex::new(State {
                last: reserved,
                reserved,
            }),
            path: Some(path),
        })
    }

    /// The next receipt's place in the order.
    pub fn next(&self) -> std::io::Result<Position> {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A clock before 1970 orders by `last` alone.
        let now_us = u64::try_from(crate::clock::now_ms()).unwrap_or(0) * 1_000;
        let value = now_us.max(s.last + 1);
        if let Some(path) = &self.path
            && value >= s.reserved
        {
            let reserved = value + RESERVE_US;
            write_durably(path, reserved)?;
            s.reserved = reserved;
        }
        s.last = value;
        Ok(Position::from(value))
    }
}

/// Writes `reserved` to `path` through a synced temporary file and a rename:
/// a crash leaves the old reservation or the new one, never neither.
fn write_durably(path: &std::path::Path, reserved: u64) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(reserved.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_never_go_back_not_even_across_a_restart_with_the_clock_set_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("order");
        let first = ReceiptOrder::open(path.clone()).unwrap();
        let a = first.next().unwrap();
        let b = first.next().unwrap();
        assert!(b > a);
        drop(first);
        // A restart: whatever the clock says now, the order continues above.
        let again = ReceiptOrder::open(path.clone()).unwrap();
        let reserved: u64 = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let c = again.next().unwrap();
        assert!(c > b && c >= Position::from(reserved), "{c} after {b}");
    }
}

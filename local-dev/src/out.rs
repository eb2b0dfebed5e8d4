//! Standard output that a closed reader ends quietly: `floe … | head`
//! stops floe as it stops `cat`, instead of a "Broken pipe" panic.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Prints a line to stdout, like `outln!`; exits 0 when stdout's reader
/// has gone away (what was left to print has no one to read it).
macro_rules! outln {
    () => { $crate::out::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::out::line(format_args!($($arg)*)) };
}
pub(crate) use outln;

/// Writes `args` and a newline to stdout.
pub fn line(args: fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    settle(written);
}

/// Writes `bytes` to stdout as they are.
pub fn bytes(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    settle(stdout.write_all(bytes).and_then(|()| stdout.flush()));
}

fn settle(written: std::io::Result<()>) {
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("floe: writing to stdout: {e}");
            std::process::exit(1)
        }
    }
}

//! Freed memory given back to the system between batches.
//!
//! A stream's batches allocate and free a few hundred MB a second (decoded
//! changes, key sets, Parquet buffers). glibc keeps what is freed inside its
//! heaps for reuse, fragmented, so a long-running sync's resident size on a
//! 10M-key table climbed to 620-660 MiB while its live allocations peaked at
//! about half that. Giving it back costs CPU (pages faulted in again: 15 %
//! more at 60,000 changes/s), so it is done only once the process is large.

/// Resident size past which a batch's end gives freed memory back.
const LARGE: u64 = 384 << 20;

/// Returns freed heap pages to the system if the process holds more than
/// [`LARGE`] (glibc on Linux only; elsewhere a no-op).
pub(crate) fn release_freed_if_large() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if resident_bytes().is_some_and(|b| b > LARGE) {
        // SAFETY: malloc_trim takes no pointer and only touches the
        // allocator's free lists, under their own locks, from any thread.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// The process's resident size, from `/proc/self/statm`; None if unreadable
/// (then nothing is trimmed, which loses nothing but memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the running system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

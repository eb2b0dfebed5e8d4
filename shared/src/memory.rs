//! The allocator floe's binaries use, and freed memory given back to the
//! system between batches.
//!
//! A stream's batches allocate and free a few hundred MB a second (decoded
//! changes, key sets, Parquet buffers). Under glibc's malloc, a quarter to a
//! third of floe's CPU went to malloc and free and their free lists, and
//! what a batch freed stayed in glibc's heaps, fragmented: a long sync on a
//! 10M-key table held 620-660 MiB resident for a live heap of about half
//! that. mimalloc (v2) takes about 30 % less CPU on a 1M-key
//! table's stream (docs/benchmarks.md, "The allocator"). It returns freed
//! pages shortly after they are freed, which at 10M keys is not soon enough
//! to stay below 600 MB, so a process past [`LARGE`] has them returned at
//! once.

use std::sync::atomic::{AtomicBool, Ordering};

/// The global allocator of every floe binary (`#[global_allocator]` in each
/// `main.rs`).
pub type Allocator = mimalloc::MiMalloc;

/// Resident size past which freed memory is returned at once: a 1M-key
/// table's stream (250-380 MiB) never reaches it.
const LARGE: u64 = 384 << 20;

/// mimalloc's `mi_option_purge_delay`: 15 in `mi_option_e` of both its v2
/// and v3 headers, which libmimalloc-sys binds every option around but this
/// one (checked by a test against the option's documented default).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's default purge delay (v2), restored when the process is small again.
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Whether freed pages are returned at once now.
static AT_ONCE: AtomicBool = AtomicBool::new(false);

/// Called at a batch's end: once the process holds more than [`LARGE`],
/// mimalloc returns freed pages as they are freed (not 10 ms later)
/// and glibc's heap, which C libraries still use, is trimmed. Below it
/// again, freed pages wait for reuse, which costs no page faults.
pub fn release_freed_if_large() {
    // An unreadable size changes nothing, which loses nothing but memory.
    let Some(resident) = resident_bytes() else {
        return;
    };
    let large = resident > LARGE;
    if AT_ONCE.swap(large, Ordering::Relaxed) != large {
        let delay = if large { 0 } else { DEFAULT_PURGE_DELAY_MS };
        // SAFETY: sets an option mimalloc reads on each purge, an atomic
        // store it allows from any thread at any time.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, delay) };
    }
    if large {
        trim_glibc();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_glibc() {
    // SAFETY: malloc_trim takes no pointer and only touches glibc's free
    // lists, under their own locks, from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_glibc() {}

/// The process's resident size, from `/proc/self/statm`; None if unreadable.
#[cfg(target_os = "linux")]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the running system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(not(target_os = "linux"))]
fn resident_bytes() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: reads an option.
        let delay = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        // Its documented default, unless the environment says otherwise.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(delay, DEFAULT_PURGE_DELAY_MS);
        }
    }
}

//! Memory shared with child processes: an anonymous `MAP_SHARED` mapping made before any fork, so a
//! workload task run as its own process and the controlling process see the same stop flag, counters
//! and pipe statistics (a fork copies ordinary memory; this mapping stays shared).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// An anonymous shared mapping of `len` bytes, zero-filled by the kernel and page-aligned.
fn map_shared(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous shared mapping of `len` bytes; the kernel zero-fills it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

/// A stop flag and `n` 64-bit counters in shared memory, zeroed.
pub struct ShmCells {
    ptr: *mut u8,
    len: usize,
    n: usize,
}

// SAFETY: the mapping holds only atomics, which are made to be shared between threads (and here
// processes); the pointer is valid until drop.
unsafe impl Send for ShmCells {}
// SAFETY: as above.
unsafe impl Sync for ShmCells {}

impl ShmCells {
    /// Maps a stop flag and `n` counters.
    pub fn new(n: usize) -> io::Result<ShmCells> {
        let len = 8 * (n + 1);
        Ok(ShmCells { ptr: map_shared(len)?, len, n })
    }

    /// The stop flag (offset 0).
    pub fn flag(&self) -> &AtomicBool {
        // SAFETY: offset 0 is inside the mapping, zero (false) at first, and only ever used as an
        // AtomicBool; the mapping is page-aligned.
        unsafe { &*(self.ptr as *const AtomicBool) }
    }

    /// Counter `i` (`i < n`).
    pub fn cell(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.n, "shared counter {i} of {}", self.n);
        // SAFETY: 8-aligned offset 8 * (i + 1) < len, inside the mapping, only used as an AtomicU64.
        unsafe { &*(self.ptr.add(8 * (i + 1)) as *const AtomicU64) }
    }
}

impl Drop for ShmCells {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Shared memory for the workload's synchronisation objects (process-shared mutexes, condition
/// variables, semaphores and their state words), allocated in 64-byte slots while the objects are
/// made, before any fork. The memory lives as long as the arena.
pub struct ShmArena {
    ptr: *mut u8,
    len: usize,
    used: usize,
}

// SAFETY: the arena hands out memory only through `alloc` (with `&mut self`); what lives in it is
// made for sharing (process-shared pthread objects and atomics).
unsafe impl Send for ShmArena {}
// SAFETY: as above.
unsafe impl Sync for ShmArena {}

/// The slot size and alignment of the arena.
pub const SLOT: usize = 64;

impl ShmArena {
    /// An arena of `slots` zeroed 64-byte slots.
    pub fn new(slots: usize) -> io::Result<ShmArena> {
        let len = SLOT * slots.max(1);
        Ok(ShmArena { ptr: map_shared(len)?, len, used: 0 })
    }

    /// The next slot, zeroed, for a `T` of at most 64 bytes.
    pub fn alloc<T>(&mut self) -> *mut T {
        assert!(std::mem::size_of::<T>() <= SLOT && std::mem::align_of::<T>() <= SLOT, "a slot holds it");
        assert!(self.used + SLOT <= self.len, "the arena was sized for every object");
        // SAFETY: inside the mapping (checked above), 64-byte aligned (the mapping is page-aligned).
        let p = unsafe { self.ptr.add(self.used) };
        self.used += SLOT;
        p.cast()
    }
}

impl Drop for ShmArena {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once, after every object in it is dropped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// An atomic word in a [`ShmArena`].
pub struct SharedU64(*const AtomicU64);

// SAFETY: an atomic, made for sharing.
unsafe impl Send for SharedU64 {}
// SAFETY: as above.
unsafe impl Sync for SharedU64 {}

impl SharedU64 {
    /// A zeroed word in `arena`.
    pub fn new(arena: &mut ShmArena) -> SharedU64 {
        SharedU64(arena.alloc::<AtomicU64>())
    }

    /// The word (valid while its arena lives; its owner keeps both).
    pub fn get(&self) -> &AtomicU64 {
        // SAFETY: a zero-initialised, aligned slot used only as an AtomicU64.
        unsafe { &*self.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_forked_child_writes_what_the_parent_reads() {
        let cells = ShmCells::new(2).unwrap();
        assert!(!cells.flag().load(Ordering::SeqCst));
        assert_eq!(cells.cell(1).load(Ordering::SeqCst), 0);
        // SAFETY: the child only does atomic stores and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            cells.cell(1).store(42, Ordering::SeqCst);
            cells.flag().store(true, Ordering::SeqCst);
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(cells.cell(1).load(Ordering::SeqCst), 42);
        assert!(cells.flag().load(Ordering::SeqCst));
    }
}

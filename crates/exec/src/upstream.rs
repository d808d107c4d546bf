//! What a task process tells the executor: a task process (and every process or thread it forks)
//! reports through its *upstream*, the write end of the result pipe the executor made when it forked
//! the top-level task process ([`crate::process`]). Its descendants inherit that descriptor, so a
//! forking task process's children report to the executor directly, not through their parent.
//!
//! The executor's keeper of the top-level process reads the pipe and applies each message to the
//! run's state as if the event had happened in its own process: an instance became live, its kernel
//! id is known, it ended with (or without) its result, it was reaped (its whole CPU time, exit
//! included), a failure, a warning.
//!
//! Several processes and threads write to one pipe, so a message goes as chunks of at most
//! `PIPE_BUF` bytes (each `write` of that size is atomic on a pipe), each with the writing thread's
//! id: the reader reassembles per writer. Sending takes no lock (a forked child may send right after
//! `fork()`): one thread writes one message at a time, and chunks of different writers may
//! interleave, but not mix.

use crate::runner::TaskResult;
use schedlab_workload::TemplateId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// One event of a task process or of something it forked.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Msg {
    /// An instance of `template` is about to start (counts as live from now).
    Live {
        /// Its template.
        template: TemplateId,
    },
    /// Instance `id` runs as kernel task `tid` of thread group `tgid` (a process's own pid for a
    /// task process).
    Register {
        /// Instance id.
        id: u32,
        /// Its template.
        template: TemplateId,
        /// Kernel thread id.
        tid: i32,
        /// Kernel thread-group id (process id).
        tgid: i32,
    },
    /// Instance `id` ended, with its result, or without one (a failure was sent before).
    Done {
        /// Instance id.
        id: u32,
        /// Its template.
        template: TemplateId,
        /// What it measured.
        result: Option<Box<TaskResult>>,
    },
    /// Task process `id` was reaped: its whole CPU time as `wait4` reports it, ns.
    Reaped {
        /// Instance id.
        id: u32,
        /// User plus system time of the process and of the children it reaped, ns.
        life_ns: u64,
    },
    /// A task process's last word: the CPU time its own `wait4` figure includes that is not its
    /// task's, ns: that of the children it reaped and of the task threads it ran.
    Exit {
        /// Instance id of the task process.
        id: u32,
        /// `getrusage(RUSAGE_CHILDREN)` plus the CPU clocks of its task threads at their ends, ns.
        others_ns: u64,
    },
    /// The run failed.
    Fail(String),
    /// Something could not be done as asked.
    Warn(String),
}

/// The upstream descriptor of this process: -1 in the executor, the result pipe's write end in a
/// task process and its descendants.
static UPSTREAM: AtomicI32 = AtomicI32::new(-1);

/// CPU time of the task threads this process ran for instances forked by its task ([`Msg::Exit`]).
static THREADS_NS: AtomicU64 = AtomicU64::new(0);

/// Adds a task thread's CPU time at its end to [`threads_ns`] (in a task process).
pub fn add_thread_ns(ns: u64) {
    THREADS_NS.fetch_add(ns, Ordering::Relaxed);
}

/// CPU time of the task threads this process ran, ns.
pub fn threads_ns() -> u64 {
    THREADS_NS.load(Ordering::Relaxed)
}

/// Bytes of a chunk's header: writer tid (4), body length (2), last-chunk flag (1), padding (1).
const HEADER: usize = 8;

/// The largest chunk, header included: Linux's `PIPE_BUF`, the most a pipe writes atomically.
const CHUNK: usize = 4096;

/// Whether this process is a task process (or one forked by one) that reports upstream.
pub fn active() -> bool {
    UPSTREAM.load(Ordering::Relaxed) >= 0
}

/// Makes `fd` this process's upstream (in a task process forked by the executor, right after the
/// fork).
pub fn set(fd: i32) {
    UPSTREAM.store(fd, Ordering::Relaxed);
}

/// Sends `msg` upstream; nothing if this process has no upstream or the pipe is gone (the run is
/// ending).
pub fn send(msg: &Msg) {
    let fd = UPSTREAM.load(Ordering::Relaxed);
    if fd >= 0 {
        send_to(fd, msg);
    }
}

/// Sends `msg` as chunks on pipe `fd`.
fn send_to(fd: i32, msg: &Msg) {
    let Ok(body) = serde_json::to_vec(msg) else { return };
    let tid = crate::sys::gettid();
    let mut chunk = [0u8; CHUNK];
    let mut parts = body.chunks(CHUNK - HEADER).peekable();
    while let Some(part) = parts.next() {
        chunk[..4].copy_from_slice(&tid.to_le_bytes());
        chunk[4..6].copy_from_slice(&(part.len() as u16).to_le_bytes());
        chunk[6] = u8::from(parts.peek().is_none());
        chunk[7] = 0;
        chunk[HEADER..HEADER + part.len()].copy_from_slice(part);
        let len = HEADER + part.len();
        loop {
            // SAFETY: writes `len` initialised bytes of `chunk` to the upstream pipe; a pipe writes
            // at most PIPE_BUF bytes whole or not at all.
            let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), len) };
            if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    }
}

/// Reassembles the messages of one upstream pipe from the bytes read from it.
#[derive(Default)]
pub struct Reader {
    pending: Vec<u8>,
    partial: HashMap<i32, Vec<u8>>,
}

impl Reader {
    /// Takes `bytes` just read; returns the messages they complete, in order. A message that does
    /// not parse is an error naming the writer.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Msg>, String> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut at = 0;
        while self.pending.len() - at >= HEADER {
            let h = &self.pending[at..at + HEADER];
            let tid = i32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = u16::from_le_bytes([h[4], h[5]]) as usize;
            let last = h[6] == 1;
            if self.pending.len() - at < HEADER + len {
                break;
            }
            let body = &self.pending[at + HEADER..at + HEADER + len];
            let buf = self.partial.entry(tid).or_default();
            buf.extend_from_slice(body);
            at += HEADER + len;
            if last {
                let whole = self.partial.remove(&tid).unwrap_or_default();
                let msg = serde_json::from_slice(&whole)
                    .map_err(|e| format!("a message from task {tid} does not parse: {e}"))?;
                out.push(msg);
            }
        }
        self.pending.drain(..at);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tid: i32, body: &[u8], last: bool) -> Vec<u8> {
        let mut v = tid.to_le_bytes().to_vec();
        v.extend_from_slice(&(body.len() as u16).to_le_bytes());
        v.extend_from_slice(&[u8::from(last), 0]);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn interleaved_chunks_of_two_writers_reassemble_per_writer_across_reads() {
        let a = serde_json::to_vec(&Msg::Warn("a".repeat(30))).unwrap();
        let b = serde_json::to_vec(&Msg::Live { template: 3 }).unwrap();
        let mut bytes = frame(7, &a[..10], false);
        bytes.extend(frame(9, &b, true));
        bytes.extend(frame(7, &a[10..], true));
        let mut r = Reader::default();
        // Fed in pieces that cut headers and bodies.
        let mut got = Vec::new();
        for piece in bytes.chunks(5) {
            got.extend(r.feed(piece).unwrap());
        }
        assert_eq!(got.len(), 2);
        assert!(matches!(got[0], Msg::Live { template: 3 }), "{got:?}");
        assert!(matches!(&got[1], Msg::Warn(w) if *w == "a".repeat(30)), "{got:?}");
    }

    #[test]
    fn a_message_longer_than_a_chunk_goes_through_a_real_pipe_whole() {
        let mut fds = [0i32; 2];
        // SAFETY: fds has room for two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let long = "x".repeat(3 * CHUNK);
        send_to(fds[1], &Msg::Warn(long.clone()));
        // SAFETY: closes the write end made above.
        unsafe { libc::close(fds[1]) };
        use std::io::Read;
        use std::os::fd::FromRawFd;
        let mut bytes = Vec::new();
        // SAFETY: the read end made above, owned by the File from here on.
        unsafe { std::fs::File::from_raw_fd(fds[0]) }.read_to_end(&mut bytes).unwrap();
        assert!(bytes.len() > 3 * CHUNK && bytes.len() < 4 * CHUNK + 64, "{}", bytes.len());
        let msgs = Reader::default().feed(&bytes).unwrap();
        assert!(matches!(&msgs[..], [Msg::Warn(w)] if *w == long));
    }
}

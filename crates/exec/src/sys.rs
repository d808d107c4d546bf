//! Thin, safe wrappers over the Linux calls the executor needs: thread ids, affinity, nice and
//! scheduling classes, the monotonic clock and absolute sleeps, signals to interrupt blocked threads,
//! pipes with a capacity, and process-shared POSIX mutexes, condition variables and semaphores.
//!
//! Every `unsafe` block here calls one libc function with arguments it documents as valid; the
//! pthread and semaphore objects live in a shared-memory arena ([`ShmArena`]) that never moves and
//! outlives them.

use crate::shm::ShmArena;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The process id.
pub fn getpid() -> i32 {
    // SAFETY: getpid has no arguments and cannot fail.
    unsafe { libc::getpid() }
}

/// Whether a process `pid` exists (`kill(pid, 0)`: a process of another user exists too).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; only the existence and permission checks run.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// CPUs online.
pub fn nr_cpus() -> usize {
    // SAFETY: sysconf with a valid name.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// Clock ticks per second of /proc/stat.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf with a valid name.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// The CPU the calling thread runs on.
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu has no arguments.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as u32
}

/// Monotonic time, ns.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps until the monotonic time `abs_ns` with `clock_nanosleep(TIMER_ABSTIME)`. Returns false if
/// a signal interrupted the sleep first (the executor's stop signal).
pub fn sleep_until(abs_ns: u64) -> bool {
    let ts = timespec(abs_ns);
    // SAFETY: ts is a valid timespec; the remainder pointer may be null for TIMER_ABSTIME.
    let r = unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    };
    r == 0
}

/// `sched_yield()`.
pub fn yield_now() {
    // SAFETY: no arguments.
    unsafe { libc::sched_yield() };
}

/// Allows thread `tid` on `cpus` (all online CPUs when empty).
pub fn set_affinity(tid: i32, cpus: &[u32]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let all: Vec<u32> = if cpus.is_empty() { (0..nr_cpus() as u32).collect() } else { cpus.to_vec() };
    for &c in &all {
        if (c as usize) < libc::CPU_SETSIZE as usize {
            // SAFETY: c is below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
    }
    // SAFETY: set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs thread `tid` (0: the caller) may run on.
pub fn affinity(tid: i32) -> io::Result<Vec<u32>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set for the kernel to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads inside the set for c below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as u32).filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) }).collect())
}

/// Sets thread `tid`'s nice level (Linux applies `setpriority(PRIO_PROCESS, tid)` to one thread).
pub fn set_nice(tid: i32, nice: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The nice level of thread `tid` (`getpriority(PRIO_PROCESS, tid)`), `None` if it cannot be read.
pub fn get_nice(tid: i32) -> Option<i32> {
    // getpriority returns the nice level, and may return -1 legitimately: errno tells.
    // SAFETY: errno is thread-local; plain integer arguments.
    unsafe {
        *libc::__errno_location() = 0;
        let r = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        (r != -1 || *libc::__errno_location() == 0).then_some(r)
    }
}

/// Scheduling classes the executor can set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER.
    Other,
    /// SCHED_BATCH.
    Batch,
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO with a priority.
    Fifo(i32),
    /// SCHED_RR with a priority.
    Rr(i32),
}

/// Sets thread `tid`'s scheduling class.
pub fn set_policy(tid: i32, p: Policy) -> io::Result<()> {
    let (policy, prio) = match p {
        Policy::Other => (libc::SCHED_OTHER, 0),
        Policy::Batch => (libc::SCHED_BATCH, 0),
        Policy::Idle => (libc::SCHED_IDLE, 0),
        Policy::Fifo(x) => (libc::SCHED_FIFO, x),
        Policy::Rr(x) => (libc::SCHED_RR, x),
    };
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: param is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct sched_attr` (include/uapi/linux/sched/types.h), `SCHED_ATTR_SIZE_VER1` (56 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Gives fair-class thread `tid` (policy `p`: other, batch or idle, at `nice`) its own slice,
/// `sched_attr.sched_runtime` = `slice_ns` (Linux 6.12+; earlier kernels accept and ignore it).
pub fn set_fair_slice(tid: i32, p: Policy, nice: i32, slice_ns: u64) -> io::Result<()> {
    let policy = match p {
        Policy::Other => libc::SCHED_OTHER,
        Policy::Batch => libc::SCHED_BATCH,
        Policy::Idle => libc::SCHED_IDLE,
        Policy::Fifo(_) | Policy::Rr(_) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: policy as u32,
        sched_nice: nice,
        sched_runtime: slice_ns,
        ..SchedAttr::default()
    };
    // SAFETY: attr is a valid sched_attr of the size it states; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0u32) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Thread `tid`'s `sched_attr.sched_runtime` as `sched_getattr` reports it: a fair task's custom
/// slice on Linux 6.12+, 0 for one without (and on kernels without per-task slices).
pub fn fair_slice(tid: i32) -> io::Result<u64> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: attr is writable for `size` bytes; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut SchedAttr, size, 0u32) };
    if r == 0 {
        Ok(attr.sched_runtime)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's CPUs, put back when dropped.
pub struct SavedAffinity {
    /// The CPUs it had.
    pub cpus: Vec<u32>,
}

impl Drop for SavedAffinity {
    fn drop(&mut self) {
        let _ = set_affinity(0, &self.cpus);
    }
}

/// Moves the calling thread to `cpu` alone; its old CPUs come back when the returned guard is
/// dropped.
pub fn move_to_cpu(cpu: u32) -> io::Result<SavedAffinity> {
    let saved = SavedAffinity { cpus: affinity(0)? };
    if (cpu as usize) >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    set_affinity(0, &[cpu])?;
    Ok(saved)
}

/// The calling thread's scheduling policy (with its flags) and priority, put back when dropped.
pub struct SavedPolicy {
    policy: i32,
    param: libc::sched_param,
}

impl Drop for SavedPolicy {
    fn drop(&mut self) {
        // SAFETY: param is a valid sched_param read by sched_getparam for this thread.
        unsafe { libc::sched_setscheduler(0, self.policy, &self.param) };
    }
}

/// Makes the calling thread SCHED_FIFO at the highest priority with SCHED_RESET_ON_FORK, so the
/// threads and processes it creates start as SCHED_OTHER (and nice 0 if it was negative); the old
/// policy comes back when the returned guard is dropped. Needs CAP_SYS_NICE (or an RLIMIT_RTPRIO).
pub fn raise_to_fifo_resetting_children() -> io::Result<SavedPolicy> {
    // SAFETY: sched_getscheduler and sched_getparam on the calling thread with a valid out-pointer.
    let saved = unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param: libc::sched_param = std::mem::zeroed();
        if policy < 0 || libc::sched_getparam(0, &mut param) != 0 {
            return Err(io::Error::last_os_error());
        }
        SavedPolicy { policy, param }
    };
    // SAFETY: a valid policy constant.
    let param =
        libc::sched_param { sched_priority: unsafe { libc::sched_get_priority_max(libc::SCHED_FIFO) } };
    // SAFETY: param is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) };
    if r == 0 {
        Ok(saved)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The scheduling policy of thread `tid` (0: the caller) without its flags (`SCHED_OTHER` = 0,
/// `SCHED_FIFO` = 1, ...).
pub fn policy_of(tid: i32) -> io::Result<i32> {
    // SAFETY: sched_getscheduler takes a thread id.
    let p = unsafe { libc::sched_getscheduler(tid) };
    if p < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(p & !libc::SCHED_RESET_ON_FORK)
    }
}

/// The signal used to interrupt blocked threads at the stop.
pub const WAKE_SIGNAL: i32 = libc::SIGUSR1;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_wake_signal(_: libc::c_int) {}

/// The eventfd Ctrl-C and SIGTERM ring, -1 until [`install_handlers`].
static INTERRUPT_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    ring_fd(INTERRUPT_FD.load(Ordering::SeqCst));
}

/// Adds one to eventfd `fd` (nothing if negative). Async-signal-safe: one `write`.
fn ring_fd(fd: i32) {
    if fd >= 0 {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64; an eventfd at its limit gives EAGAIN, still readable.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

fn install(sig: i32, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a handler, an empty mask and no SA_RESTART, so blocking calls
    // return EINTR; the handlers only touch an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Installs the no-op handler of [`WAKE_SIGNAL`] and a SIGINT/SIGTERM handler that records the
/// interruption (see [`interrupted`]) and rings an eventfd a [`Doorbell`] wait also watches, so the
/// controller notices Ctrl-C at once without waking to look for it.
pub fn install_handlers() -> io::Result<()> {
    if INTERRUPT_FD.load(Ordering::SeqCst) < 0 {
        let fd = eventfd()?;
        if INTERRUPT_FD.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            // SAFETY: closes the fd just made, which nothing else holds.
            unsafe { libc::close(fd) };
        }
    }
    install(WAKE_SIGNAL, on_wake_signal);
    install(libc::SIGINT, on_interrupt);
    install(libc::SIGTERM, on_interrupt);
    Ok(())
}

/// Whether Ctrl-C (SIGINT) or SIGTERM arrived since the handlers were installed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn eventfd() -> io::Result<i32> {
    // SAFETY: eventfd with an initial count and flags; returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

/// A wake-up one thread waits for with a deadline and others (or a signal handler) give: an
/// eventfd, so a ring given before the wait is not lost, and the wait also ends at Ctrl-C
/// ([`install_handlers`]). The executor's controller waits on it instead of polling, so it wakes
/// only when something happened or at its next scheduled moment, never on a workload CPU just to
/// look.
pub struct Doorbell {
    fd: i32,
}

impl Doorbell {
    /// A new doorbell (an eventfd).
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell { fd: eventfd()? })
    }

    /// Wakes the waiter (now or at its next wait).
    pub fn ring(&self) {
        ring_fd(self.fd);
    }

    /// Waits until a ring, Ctrl-C/SIGTERM, or the monotonic time `until_ns`, whichever is first,
    /// and clears the rings. May return early (another signal): callers look at their state again.
    pub fn wait_until(&self, until_ns: u64) {
        let now = now_ns();
        if until_ns > now {
            let mut fds = [
                libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: INTERRUPT_FD.load(Ordering::SeqCst), events: libc::POLLIN, revents: 0 },
            ];
            let ts = timespec(until_ns - now);
            // SAFETY: two valid pollfds (a negative fd is ignored), a valid relative timeout, no mask.
            unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        }
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd (EAGAIN when not rung).
        unsafe { libc::read(self.fd, (&mut count as *mut u64).cast(), 8) };
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: closes the doorbell's own fd once.
        unsafe { libc::close(self.fd) };
    }
}

/// Sends [`WAKE_SIGNAL`] to thread `tid` of thread group (process) `tgid`: this process's or a
/// task process's, whose inherited handler of the signal does the same nothing.
pub fn wake(tgid: i32, tid: i32) {
    // SAFETY: plain integer arguments; a vanished thread gives ESRCH, which is fine.
    unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, WAKE_SIGNAL) };
}

/// How a workload pipe is made real.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeMode {
    /// A byte stream with a buffer of at least this many bytes.
    Stream {
        /// Buffer size asked for, bytes.
        bytes: u32,
    },
    /// Packet mode with this many one-message slots.
    Packets {
        /// Slots (pages), a power of two.
        slots: u32,
    },
    /// An AF_UNIX stream socket pair (`socketpair(AF_UNIX, SOCK_STREAM)`), written at one end and
    /// read at the other, with this send buffer (`SO_SNDBUF`; None: the kernel's default).
    UnixStream {
        /// Send buffer asked for, bytes.
        sndbuf: Option<u32>,
    },
}

/// The send buffer of socket `fd` (`SO_SNDBUF`), bytes.
pub fn socket_sndbuf(fd: i32) -> io::Result<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for getsockopt to write an int.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, (&mut v as *mut libc::c_int).cast(), &mut len)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v.max(0) as u32)
}

/// A pipe with its two ends.
pub struct Pipe {
    /// Read end.
    pub rd: i32,
    /// Write end.
    pub wr: i32,
}

impl Pipe {
    /// A new pipe as `mode` says: a byte stream of at least `bytes` (`F_SETPIPE_SZ`; the kernel rounds
    /// up to a power of two pages and caps unprivileged sizes at /proc/sys/fs/pipe-max-size), or a
    /// packet-mode pipe (`O_DIRECT`: each write is one packet in one page-sized slot) of `slots` slots.
    /// A socket pair gets the send buffer asked for with `SO_SNDBUF` (the kernel doubles what it is
    /// given, so half of it is given, and caps it at /proc/sys/net/core/wmem_max).
    pub fn new(mode: PipeMode) -> io::Result<Pipe> {
        let mut fds = [0i32; 2];
        let (flags, size) = match mode {
            PipeMode::Stream { bytes } => (libc::O_CLOEXEC, bytes.max(4096)),
            PipeMode::Packets { slots } => (libc::O_CLOEXEC | libc::O_DIRECT, slots.max(1) * 4096),
            PipeMode::UnixStream { sndbuf } => {
                // SAFETY: fds has room for two descriptors.
                let r = unsafe {
                    libc::socketpair(
                        libc::AF_UNIX,
                        libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                        0,
                        fds.as_mut_ptr(),
                    )
                };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
                let pipe = Pipe { rd: fds[0], wr: fds[1] };
                if let Some(bytes) = sndbuf.filter(|&b| socket_sndbuf(pipe.wr).ok() != Some(b)) {
                    let half = (bytes / 2) as libc::c_int;
                    // SAFETY: a valid socket and a pointer to an int of the given length.
                    unsafe {
                        libc::setsockopt(
                            pipe.wr,
                            libc::SOL_SOCKET,
                            libc::SO_SNDBUF,
                            (&half as *const libc::c_int).cast(),
                            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                        )
                    };
                }
                return Ok(pipe);
            }
        };
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a valid descriptor; failure leaves the default size.
        unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, size as libc::c_int) };
        Ok(Pipe { rd: fds[0], wr: fds[1] })
    }

    /// Writes all of `buf`; false if interrupted by the stop.
    pub fn write_all(&self, mut buf: &[u8], stop: &AtomicBool) -> bool {
        while !buf.is_empty() {
            // SAFETY: buf is valid for its length.
            let n = unsafe { libc::write(self.wr, buf.as_ptr().cast(), buf.len()) };
            if n > 0 {
                buf = &buf[n as usize..];
            } else if stop.load(Ordering::Relaxed) {
                return false;
            }
        }
        true
    }

    /// Reads exactly `buf.len()` bytes; false if interrupted by the stop.
    pub fn read_exact(&self, mut buf: &mut [u8], stop: &AtomicBool) -> bool {
        while !buf.is_empty() {
            // SAFETY: buf is valid for its length.
            let n = unsafe { libc::read(self.rd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                buf = &mut buf[n as usize..];
            } else if stop.load(Ordering::Relaxed) || n == 0 {
                return false;
            }
        }
        true
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: the descriptors belong to this pipe.
        unsafe {
            libc::close(self.rd);
            libc::close(self.wr);
        }
    }
}

/// A process-shared POSIX mutex (`pthread_mutex_t` with `PTHREAD_PROCESS_SHARED`) in a
/// [`ShmArena`], so task processes and threads share it.
pub struct PMutex(*mut libc::pthread_mutex_t);

// SAFETY: pthread mutexes are made to be shared between threads (and, process-shared, processes).
unsafe impl Send for PMutex {}
// SAFETY: as above.
unsafe impl Sync for PMutex {}

impl PMutex {
    /// A default (fast, non-recursive) process-shared mutex in `arena`.
    pub fn new(arena: &mut ShmArena) -> PMutex {
        let m = arena.alloc::<libc::pthread_mutex_t>();
        // SAFETY: a zeroed attribute object initialised before use; `m` is a valid, aligned slot.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_mutex_init(m, &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        PMutex(m)
    }

    /// `pthread_mutex_lock`.
    pub fn lock(&self) {
        // SAFETY: an initialised mutex in a live arena.
        unsafe { libc::pthread_mutex_lock(self.0) };
    }

    /// `pthread_mutex_unlock`; the caller holds it.
    pub fn unlock(&self) {
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_unlock(self.0) };
    }
}

/// A process-shared POSIX condition variable in a [`ShmArena`].
pub struct PCond(*mut libc::pthread_cond_t);

// SAFETY: condition variables are made to be shared between threads (and processes).
unsafe impl Send for PCond {}
// SAFETY: as above.
unsafe impl Sync for PCond {}

impl PCond {
    /// A process-shared condition variable in `arena`.
    pub fn new(arena: &mut ShmArena) -> PCond {
        let c = arena.alloc::<libc::pthread_cond_t>();
        // SAFETY: a zeroed attribute object initialised before use; `c` is a valid, aligned slot.
        unsafe {
            let mut attr: libc::pthread_condattr_t = std::mem::zeroed();
            libc::pthread_condattr_init(&mut attr);
            libc::pthread_condattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_cond_init(c, &attr);
            libc::pthread_condattr_destroy(&mut attr);
        }
        PCond(c)
    }

    /// `pthread_cond_wait` with `m` held.
    pub fn wait(&self, m: &PMutex) {
        // SAFETY: both initialised, the caller holds m.
        unsafe { libc::pthread_cond_wait(self.0, m.0) };
    }

    /// `pthread_cond_signal`.
    pub fn signal(&self) {
        // SAFETY: initialised.
        unsafe { libc::pthread_cond_signal(self.0) };
    }

    /// `pthread_cond_broadcast`.
    pub fn broadcast(&self) {
        // SAFETY: initialised.
        unsafe { libc::pthread_cond_broadcast(self.0) };
    }
}

/// A process-shared POSIX unnamed semaphore (`sem_t`, `pshared` = 1) in a [`ShmArena`].
pub struct PSem(*mut libc::sem_t);

// SAFETY: semaphores are made to be shared between threads (and processes).
unsafe impl Send for PSem {}
// SAFETY: as above.
unsafe impl Sync for PSem {}

impl PSem {
    /// A semaphore with `initial` units in `arena`.
    pub fn new(arena: &mut ShmArena, initial: u32) -> PSem {
        let s = arena.alloc::<libc::sem_t>();
        // SAFETY: a valid, aligned slot; shared between processes.
        unsafe { libc::sem_init(s, 1, initial) };
        PSem(s)
    }

    /// `sem_wait`; false if interrupted by the stop.
    pub fn wait(&self, stop: &AtomicBool) -> bool {
        loop {
            // SAFETY: initialised.
            if unsafe { libc::sem_wait(self.0) } == 0 {
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
        }
    }

    /// `sem_post`.
    pub fn post(&self) {
        // SAFETY: initialised.
        unsafe { libc::sem_post(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's accounting of AF_UNIX stream messages (`SkbAccounting::Linux`) against this
    /// machine's kernel: a socket pair whose writes never block takes exactly as many writes of each
    /// size as the model lets in (a write goes in while the charge is below the send buffer).
    #[test]
    fn socket_charges_match_this_kernel() {
        use schedlab_workload::SkbAccounting;
        let acc = SkbAccounting::Linux;
        for len in [1u32, 100, 200, 512, 1000, 3000, 3776, 3777, 5000, 8192, 12_000, 30_000] {
            let p = Pipe::new(PipeMode::UnixStream { sndbuf: None }).unwrap();
            let sndbuf = socket_sndbuf(p.wr).unwrap();
            // SAFETY: a valid descriptor; O_NONBLOCK makes a full socket answer EAGAIN.
            unsafe { libc::fcntl(p.wr, libc::F_SETFL, libc::O_NONBLOCK) };
            let buf = vec![7u8; len as usize];
            let mut writes = 0u32;
            loop {
                // SAFETY: buf is valid for its length.
                let n = unsafe { libc::write(p.wr, buf.as_ptr().cast(), buf.len()) };
                if n < 0 {
                    break;
                }
                assert_eq!(n as usize, buf.len(), "a partial write of {len} bytes");
                writes += 1;
            }
            let want = sndbuf.div_ceil(acc.truesize(len));
            assert_eq!(
                writes,
                want,
                "{len}-byte messages: the kernel ({}) took {writes} into a {sndbuf}-byte send buffer, the model \
                 ({} bytes each) {want}",
                crate::measure::kernel_release(),
                acc.truesize(len)
            );
        }
    }

    #[test]
    fn a_doorbell_keeps_a_ring_given_before_the_wait_and_otherwise_waits_to_its_deadline() {
        let bell = Doorbell::new().unwrap();
        // Rung before the wait: the wait returns at once (a 10 s deadline) and clears the ring.
        bell.ring();
        let t = now_ns();
        bell.wait_until(t + 10_000_000_000);
        assert!(now_ns() - t < 1_000_000_000, "a ring given before the wait was lost");
        // Not rung: it waits to its deadline.
        let t = now_ns();
        bell.wait_until(t + 30_000_000);
        assert!(now_ns() - t >= 30_000_000, "woke {} ns early", 30_000_000 - (now_ns() - t));
        // Rung by another thread while waiting.
        let bell = std::sync::Arc::new(bell);
        let b2 = bell.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            b2.ring();
        });
        let t = now_ns();
        bell.wait_until(t + 10_000_000_000);
        assert!(now_ns() - t < 5_000_000_000, "a ring while waiting did not wake it");
        h.join().unwrap();
    }

    /// The kernel's (major, minor) version from its release string.
    fn kernel_version() -> (u32, u32) {
        let r = crate::measure::kernel_release();
        let mut it = r.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok());
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }

    #[test]
    fn a_fair_thread_keeps_its_own_slice_on_612_and_later() {
        // On a thread of its own (the slice stays with it): ask 0.3 ms, then 20 us (clamped to
        // 0.1 ms by 6.12's __setparam_fair). Before, the thread reports the kernel's base slice
        // (6.18 reports `se->slice` for every fair task; 6.12 only a custom one, else 0).
        let per_task = kernel_version() >= (6, 12);
        std::thread::spawn(move || {
            let tid = gettid();
            let base = fair_slice(tid).unwrap();
            assert!(base == 0 || (100_000..=100_000_000).contains(&base), "{base}");
            set_fair_slice(tid, Policy::Other, 0, 300_000).unwrap();
            assert_eq!(fair_slice(tid).unwrap(), if per_task { 300_000 } else { base });
            set_fair_slice(tid, Policy::Batch, 3, 20_000).unwrap();
            assert_eq!(fair_slice(tid).unwrap(), if per_task { 100_000 } else { base });
            assert!(set_fair_slice(tid, Policy::Fifo(1), 0, 300_000).is_err(), "not for RT policies");
        })
        .join()
        .unwrap();
    }
}

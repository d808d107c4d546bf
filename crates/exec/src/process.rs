//! Tasks run as processes: a template that is neither `threads = true` nor part of a named `process`
//! is, in the model as in Linux, a process of its own per instance (its own tgid and address space,
//! so switching to it changes the memory map). `exec` forks such an instance from the thread that
//! asks for it (a forking task pays for its fork, as in Linux): the child runs the task (the same
//! [`task_body`] as a thread) and reports its result through a pipe ([`crate::upstream`]); a keeper
//! thread applies what comes, reaps the process (its run time then includes its exit) and records
//! the result.
//!
//! What a task process shares with the others survives the fork: pipes (inherited descriptors), and
//! in `MAP_SHARED` memory ([`crate::shm`]) the stop flag, counters, pipe statistics, and the
//! process-shared mutexes, condition variables, semaphores, barriers, events, devices and shared
//! timers ([`crate::objects`]). A task process may fork: its children (processes, or threads of
//! its own) report to the executor through the result pipe they inherit ([`crate::upstream`]), and
//! its thread reaps its child processes and waits for them before it ends, as a forking program
//! does. Forking from a small single-threaded process costs what a forking program's fork costs,
//! and the executor's other threads do not wait on its address space meanwhile (forking the
//! executor itself copies every thread's mappings under its `mmap_lock`).
//!
//! The child only runs code that takes no lock another thread of this process may hold at the fork
//! (no printing, no shared mutex; glibc's allocator is reset in the child by its own fork handlers),
//! asks to be killed if the thread that forked it dies (`PR_SET_PDEATHSIG`), and ends with `_exit`.

use crate::runner::{finish, panic_message, task_body, Spawn};
use crate::upstream::{self, Msg};
use crate::{sys, Shared};
use schedlab_workload::Workload;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::Arc;

/// For each template, whether its instances run as processes: those the model makes a process per
/// instance (neither `threads = true` nor part of a named `process`).
pub fn plan(w: &Workload) -> Vec<bool> {
    w.tasks.iter().map(|t| t.own_process()).collect()
}

/// Held from creating a result pipe until the parent has closed its write end, so that no other task
/// process is forked in between and inherits that write end: the keeper reads the pipe to its end,
/// and a second holder would keep it open until that other process ended (a process that panicked
/// was then noticed only at the end of the run).
static FORK_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Forks the task process of `s` from the calling thread (the forking task's, or the controller's
/// for an initial instance): its pid and its result pipe's read end (`-1` when forked by a task
/// process: the child reports on the upstream it inherits), or `None` after recording the failure.
/// The child dies with the calling thread (`PR_SET_PDEATHSIG`), so a forking task's thread lingers
/// until its children end ([`crate::runner::Children::linger`]).
pub fn fork_task(shared: &Arc<Shared>, id: u32, s: &Spawn) -> Option<(i32, i32)> {
    if upstream::active() {
        // In a task process: its children report upstream as it does, so no pipe of their own.
        // SAFETY: fork; the child runs `child` only and ends with _exit (see the module notes).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            child(shared, id, s, None);
        }
        if pid < 0 {
            shared.fail(format!("{}: fork: {}", s.name, std::io::Error::last_os_error()));
            finish_without_result(shared, s, id);
            return None;
        }
        shared.register(id, s.template, pid, true);
        return Some((pid, -1));
    }
    let fork_guard = FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        drop(fork_guard);
        shared.fail(format!("{}: cannot create a result pipe: {}", s.name, std::io::Error::last_os_error()));
        finish_without_result(shared, s, id);
        return None;
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: fork; the child runs `child` only and ends with _exit (see the module notes).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child(shared, id, s, Some((rd, wr)));
    }
    // SAFETY: the parent's copy of the write end, not used here.
    unsafe { libc::close(wr) };
    drop(fork_guard);
    if pid < 0 {
        // SAFETY: the read end made above.
        unsafe { libc::close(rd) };
        shared.fail(format!("{}: fork: {}", s.name, std::io::Error::last_os_error()));
        finish_without_result(shared, s, id);
        return None;
    }
    shared.register(id, s.template, pid, true);
    Some((pid, rd))
}

/// Waits for task process `pid` to end (retrying when a signal interrupts): its wait status and
/// its CPU time (user plus system, its reaped children's included, as `wait4` reports it), ns.
fn reap(pid: i32) -> (i32, u64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaps a child forked by this process, with valid pointers.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    (status, cpu_ns(&usage))
}

/// User plus system time of `usage`, ns.
fn cpu_ns(usage: &libc::rusage) -> u64 {
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(usage.ru_utime) + us(usage.ru_stime)) * 1_000
}

/// Waits for any child of this process to end (`wait4(-1)`): its pid, wait status and CPU time
/// (as [`reap`] reports them); `EINTR` when a signal interrupts the wait.
pub(crate) fn reap_any() -> std::io::Result<(i32, i32, u64)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for a child of this process, with valid pointers.
    let pid = unsafe { libc::wait4(-1, &mut status, 0, &mut usage) };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((pid, status, cpu_ns(&usage)))
}

/// Reports a task process reaped by the task process that forked it: its CPU time, or, if it
/// ended without reporting its end (killed, or a crash outside the task), the failure.
pub(crate) fn report_reaped(shared: &Arc<Shared>, f: &crate::runner::Forked, status: i32, life_ns: u64) {
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        upstream::send(&Msg::Reaped { id: f.id, life_ns });
    } else {
        shared.fail(format!(
            "task process `{}` (pid {}) ended without its result (wait status {status})",
            f.name, f.pid
        ));
        upstream::send(&Msg::Done { id: f.id, template: f.template, result: None });
    }
}

/// The executor's keeper of a task process it forked: applies what the process, and everything it
/// forks, reports on the result pipe ([`upstream`]) until all of them have closed it, then reaps
/// the process. If a task process ended its program within the run, its run time is its whole CPU
/// time as `wait4` reports it (which includes its exit), less that of the children it reaped and
/// of the task threads it ran, and less its CPU time before its counters were first read.
pub fn keep(shared: &Arc<Shared>, id: u32, s: Spawn, pid: i32, rd: i32) {
    // SAFETY: the read end, owned from here on and closed by the File.
    let mut file = unsafe { std::fs::File::from_raw_fd(rd) };
    let mut reader = upstream::Reader::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut own_done = false;
    // Per task process (this one and those it forks): CPU time in its `wait4` figure not its own.
    let mut others_ns = std::collections::HashMap::new();
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let msgs = match reader.feed(&buf[..n]) {
            Ok(m) => m,
            Err(e) => {
                shared.fail(format!("task process `{}` (pid {pid}): {e}", s.name));
                Vec::new()
            }
        };
        for msg in msgs {
            match msg {
                Msg::Live { template } => shared.live_add(template),
                Msg::Register { id: d, template, tid, tgid } => shared.register_in(d, template, tid, tgid),
                Msg::Done { id: d, result, .. } if d == id => {
                    own_done = true;
                    record_end(shared, &s, id, result);
                }
                Msg::Done { id: d, template, result } => {
                    let descendant = Spawn {
                        template,
                        name: String::new(),
                        delay_ns: None,
                        forked_at_ns: 0,
                        parent: None,
                    };
                    record_end(shared, &descendant, d, result);
                }
                Msg::Reaped { id: d, life_ns } => {
                    shared.count_exit(d, life_ns.saturating_sub(others_ns.get(&d).copied().unwrap_or(0)))
                }
                Msg::Exit { id: d, others_ns: o } => {
                    others_ns.insert(d, o);
                }
                Msg::Fail(why) => shared.fail(why),
                Msg::Warn(w) => shared.warn(w),
            }
        }
    }
    let (status, life_ns) = reap(pid);
    if own_done {
        shared.count_exit(id, life_ns.saturating_sub(others_ns.get(&id).copied().unwrap_or(0)));
    } else {
        shared.fail(format!(
            "task process `{}` (pid {pid}) ended without its result (wait status {status})",
            s.name
        ));
        finish_without_result(shared, &s, id);
    }
}

/// Records the end of instance `id` reported by a task process: its result and warnings, or the
/// end without a result.
fn record_end(shared: &Arc<Shared>, s: &Spawn, id: u32, result: Option<Box<crate::runner::TaskResult>>) {
    match result {
        Some(r) => {
            for w in &r.warnings {
                shared.warn(w.clone());
            }
            finish(shared, s, id, *r);
        }
        None => finish_without_result(shared, s, id),
    }
}

/// Tells the run a task ended without a result (the failure is already recorded).
pub(crate) fn finish_without_result(shared: &Arc<Shared>, s: &Spawn, id: u32) {
    if upstream::active() {
        upstream::send(&Msg::Done { id, template: s.template, result: None });
    } else {
        shared.deregister(id, s.template);
        shared.thread_done();
    }
    if let Some(p) = &s.parent {
        p.done();
    }
}

/// The task process: runs the instance and reports its end upstream (`pipe`: the result pipe the
/// executor made, whose write end becomes this process's upstream; `None` when forked by a task
/// process, whose upstream it inherits), waits for the children it forked, reports the CPU time they
/// used and ends. It exits with status 0 once it has reported its end, whatever the result.
fn child(shared: &Arc<Shared>, id: u32, s: &Spawn, pipe: Option<(i32, i32)>) -> ! {
    // SAFETY: plain system calls on this (single-threaded) child: the parent's read end closed, death
    // signal set, name set (15 bytes and a NUL).
    unsafe {
        if let Some((rd, _)) = pipe {
            libc::close(rd);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut name = [0u8; 16];
        for (d, c) in name.iter_mut().zip(s.name.bytes().take(15)) {
            *d = c;
        }
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    if let Some((_, wr)) = pipe {
        upstream::set(wr);
    }
    let pid = sys::getpid();
    // The children this task forks; `s.parent` (the forking thread's, copied at the fork) is not
    // touched here: another thread may have held its lock at the fork.
    let children = Arc::default();
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task_body(shared, id, s, pid, &children)));
    let result = match outcome {
        Ok(r) => Some(Box::new(r)),
        Err(payload) => {
            let why = panic_message(payload.as_ref());
            upstream::send(&Msg::Fail(format!("task process `{}` (pid {pid}) panicked: {why}", s.name)));
            None
        }
    };
    upstream::send(&Msg::Done { id, template: s.template, result });
    // Its children die with this thread: reap them and wait for its task threads.
    children.linger(shared);
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    upstream::send(&Msg::Exit { id, others_ns: cpu_ns(&usage) + upstream::threads_ns() });
    // SAFETY: ends the child at once: no destructor of the parent's state runs here.
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_workload::parse_toml;

    #[test]
    fn processes_where_the_model_says() {
        let w = parse_toml(
            "p.toml",
            r#"
            [[pipe]]
            name = "p"
            [[mutex]]
            name = "m"
            [[task]]
            name = "proc"
            ops = [ { send = "p", bytes = 4 }, { compute = "1ms" } ]
            [[task]]
            name = "thr"
            threads = true
            ops = [ { recv = "p", bytes = 4 } ]
            [[task]]
            name = "locker"
            ops = [ { lock = "m" }, { unlock = "m" } ]
            [[task]]
            name = "forker"
            ops = [ { fork = "proc" }, { wait_children = true } ]
            [[task]]
            name = "server"
            process = "srv"
            ops = [ { compute = "1ms" } ]
            "#,
        )
        .unwrap();
        assert_eq!(plan(&w), vec![true, false, true, true, false], "threads and named processes are threads");
    }
}

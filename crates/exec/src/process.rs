//! Tasks run as processes: a template that is neither `threads = true` nor part of a named `process`
//! is, in the model as in Linux, a process of its own per instance (its own tgid and address space,
//! so switching to it changes the memory map). `exec` forks such an instance from the thread that
//! asks for it (a forking task pays for its fork, as in Linux): the child runs the task (the same
//! [`task_body`] as a thread) and sends its result back through a pipe as JSON; a keeper thread
//! waits for it, reaps it (its run time then includes its exit) and records the result.
//!
//! What a task process shares with the others survives the fork: pipes (inherited descriptors), and
//! in `MAP_SHARED` memory ([`crate::shm`]) the stop flag, counters, pipe statistics, and the
//! process-shared mutexes, condition variables, semaphores, barriers, events, devices and shared
//! timers ([`crate::objects`]). A template whose program forks or waits for children runs as threads
//! (a task process's children would be processes of their own to track), with a warning saying why.
//!
//! The child only runs code that takes no lock another thread of this process may hold at the fork
//! (no printing, no shared mutex; glibc's allocator is reset in the child by its own fork handlers),
//! asks to be killed if the keeper thread dies (`PR_SET_PDEATHSIG`), and ends with `_exit`.

use crate::runner::{finish, task_body, Spawn, TaskResult};
use crate::{sys, Shared};
use schedlab_workload::{Op, TaskSpec, Workload};
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::Arc;

/// The first op of `spec`'s program that keeps it from running as a task process, if any.
pub fn unshareable_op(spec: &TaskSpec) -> Option<&'static str> {
    spec.program.ops.iter().find_map(|op| match *op {
        Op::Fork(_) | Op::WaitChildren => Some("fork/wait_children"),
        _ => None,
    })
}

/// For each template, whether its instances run as processes, and a warning for each template that
/// the model makes processes but that runs as threads.
pub fn plan(w: &Workload) -> (Vec<bool>, Vec<String>) {
    let mut warnings = Vec::new();
    let as_process = w
        .tasks
        .iter()
        .map(|t| {
            if t.threads || t.process.is_some() {
                return false;
            }
            match unshareable_op(t) {
                None => true,
                Some(what) => {
                    warnings.push(format!(
                        "task `{}` is a process in the model, but its program uses {what}, which exec runs \
                         only in threads: it runs as threads of one process",
                        t.name
                    ));
                    false
                }
            }
        })
        .collect();
    (as_process, warnings)
}

/// Held from creating a result pipe until the parent has closed its write end, so that no other task
/// process is forked in between and inherits that write end: the keeper reads the pipe to its end,
/// and a second holder would keep it open until that other process ended (a process that panicked
/// was then noticed only at the end of the run).
static FORK_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Forks the task process of `s` from the calling thread (the forking task's, or the controller's
/// for an initial instance): its result pipe's read end and its pid, or `None` after recording the
/// failure. The child dies with the calling thread (`PR_SET_PDEATHSIG`), so a forking task's
/// thread lingers until its children end ([`crate::runner::Children::linger`]).
pub fn fork_task(shared: &Arc<Shared>, id: u32, s: &Spawn) -> Option<(i32, i32)> {
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
        child(shared, id, s, rd, wr);
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

/// The keeper thread of one task process: reads its result, reaps it and records both. If it
/// ended its program within the run, its run time is its whole CPU time as `wait4` reports it
/// (which includes its exit) less its CPU time before its counters were first read.
pub fn keep(shared: &Arc<Shared>, id: u32, s: Spawn, pid: i32, rd: i32) {
    let mut bytes = Vec::new();
    // SAFETY: the read end, owned from here on and closed by the File.
    let _ = unsafe { std::fs::File::from_raw_fd(rd) }.read_to_end(&mut bytes);
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaps the child forked for this keeper, with valid pointers.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    match serde_json::from_slice::<TaskResult>(&bytes) {
        Ok(mut r) => {
            let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
            let life_ns = (us(usage.ru_utime) + us(usage.ru_stime)) * 1_000;
            if r.exited_ns.is_some() {
                // It ended within the run: its exit is part of its run time, as Linux counts it.
                // (One the run's end stopped keeps its own reading, within the run.)
                r.stat.run_ns = r.stat.run_ns.max(life_ns.saturating_sub(r.cpu_before_ns));
            }
            for w in &r.warnings {
                shared.warn(w.clone());
            }
            finish(shared, &s, id, r);
        }
        Err(_) => {
            shared.fail(format!(
                "task process `{}` (pid {pid}) ended without its result (wait status {status})",
                s.name
            ));
            finish_without_result(shared, &s, id);
        }
    }
}

/// Tells the run a task ended without a result (the failure is already recorded).
pub(crate) fn finish_without_result(shared: &Arc<Shared>, s: &Spawn, id: u32) {
    shared.deregister(id, s.template);
    if let Some(p) = &s.parent {
        p.done();
    }
    shared.thread_done();
}

/// The task process: runs the instance, writes its result, ends.
fn child(shared: &Arc<Shared>, id: u32, s: &Spawn, rd: i32, wr: i32) -> ! {
    // SAFETY: plain system calls on this (single-threaded) child: the parent's read end closed, death
    // signal set, name set (15 bytes and a NUL).
    unsafe {
        libc::close(rd);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let mut name = [0u8; 16];
        for (d, c) in name.iter_mut().zip(s.name.bytes().take(15)) {
            *d = c;
        }
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    let pid = sys::getpid();
    // A task process cannot fork (`unshareable_op`): its children list stays empty.
    let children = Arc::default();
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task_body(shared, id, s, pid, &children)));
    let code = match outcome.ok().and_then(|r| serde_json::to_vec(&r).ok()) {
        Some(bytes) => {
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                // SAFETY: writes from a valid buffer to the result pipe.
                let n = unsafe { libc::write(wr, rest.as_ptr().cast(), rest.len()) };
                if n > 0 {
                    rest = &rest[n as usize..];
                } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                } else {
                    break;
                }
            }
            0
        }
        None => 101,
    };
    // SAFETY: ends the child at once: no destructor of the parent's state runs here.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_workload::parse_toml;

    #[test]
    fn processes_where_the_model_says_and_the_objects_allow() {
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
            "#,
        )
        .unwrap();
        let (as_process, warnings) = plan(&w);
        assert_eq!(as_process, vec![true, false, true, false], "a mutex is process-shared; fork is not");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`forker`") && warnings[0].contains("fork"), "{warnings:?}");
    }
}

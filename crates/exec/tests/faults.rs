//! `exec` under faults: a task thread that panics, a task process that panics, a task process
//! killed from outside (each of the last two also as a process forked by a task process). Each run fails with one error naming the task, returns no report (no partial
//! result passed off as whole), and leaves no thread or process behind, including the threads
//! blocked in waits when the fault happens. (Ctrl-C and unwritable output paths are tested through
//! the command line, crates/cli/tests/exec_faults.rs.) The tests run one at a time.

use schedlab_exec::{run, ExecConfig, ExecError};
use schedlab_workload::parse_toml;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What the victim is.
#[derive(Clone, Copy, PartialEq)]
enum Victim {
    /// A thread of the executor (`fltvictim`).
    Thread,
    /// A task process (`fltvictim`).
    Process,
    /// A task process forked by the task process `fltforker` (`fltvictim-0`).
    Forked,
}

/// Threads and task processes blocked in waits, plus a victim that computes for a while.
fn workload(victim: Victim) -> schedlab_workload::Workload {
    let victim_is_thread = victim == Victim::Thread;
    let instances = if victim == Victim::Forked { 0 } else { 1 };
    let forker = if victim == Victim::Forked {
        "[[task]]\nname = \"fltforker\"\nstart = \"100ms\"\nops = [ { fork = \"fltvictim\" }, { wait_children = true } ]\n"
    } else {
        ""
    };
    let src = format!(
        r#"
        [[mutex]]
        name = "m"
        [[semaphore]]
        name = "s"
        initial = 0
        [[pipe]]
        name = "p"
        [[task]]
        name = "fltsem"
        threads = true
        ops = [ {{ sem_wait = "s" }} ]
        [[task]]
        name = "fltpipe"
        ops = [ {{ recv = "p", bytes = 8 }} ]
        [[task]]
        name = "fltsleep"
        instances = 2
        ops = [ {{ sleep = "100s" }} ]
        [[task]]
        name = "fltholder"
        threads = true
        ops = [ {{ lock = "m" }}, {{ sleep = "100s" }}, {{ unlock = "m" }} ]
        [[task]]
        name = "fltvictim"
        instances = {instances}
        threads = {victim_is_thread}
        start = "100ms"
        ops = [ {{ loop = "forever", ops = [ {{ compute = "5ms" }} ] }} ]
        {forker}"#
    );
    parse_toml("faults.toml", &src).unwrap()
}

/// Names of this process's threads and of every process whose name starts with `flt` (the task
/// processes are children of this one; a leftover would be reparented, so look everywhere).
fn leftovers() -> Vec<String> {
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(n) = std::fs::read_to_string(e.path().join("comm")) {
            if n.starts_with("flt") {
                left.push(format!("thread {}", n.trim()));
            }
        }
    }
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().to_string();
        if pid.parse::<u32>().is_err() || pid == std::process::id().to_string() {
            continue;
        }
        if let Ok(n) = std::fs::read_to_string(e.path().join("comm")) {
            if n.starts_with("flt") {
                left.push(format!("process {pid} {}", n.trim()));
            }
        }
    }
    // SAFETY: a non-blocking wait for any child.
    if unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {
        left.push("an unreaped child".into());
    }
    left
}

fn failing_run(w: &schedlab_workload::Workload, cfg: &ExecConfig) -> String {
    let start = std::time::Instant::now();
    let err = match run(w, cfg) {
        Err(ExecError::System(e)) => e,
        Err(e) => panic!("wrong kind of error: {e}"),
        Ok(out) => panic!("the run succeeded: stop {}", out.report.stop_reason),
    };
    assert!(start.elapsed().as_secs_f64() < 8.0, "the run took {:?} to stop", start.elapsed());
    let left = leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
    err
}

/// A run whose victim (`name`) panics when it starts; the run's error.
fn run_with_a_panic(victim: Victim, name: &str) -> String {
    let cfg = ExecConfig {
        duration_ns: 10_000_000_000,
        inject_panic: Some(name.into()),
        trace_migrations: false,
        ..ExecConfig::default()
    };
    failing_run(&workload(victim), &cfg)
}

#[test]
fn a_task_thread_that_panics_fails_the_run_and_everything_stops() {
    let _one = ONE_AT_A_TIME.lock();
    let err = run_with_a_panic(Victim::Thread, "fltvictim");
    assert!(err.starts_with("task thread `fltvictim`") && err.contains("panicked: injected fault"), "{err}");
}

#[test]
fn a_task_process_that_panics_fails_the_run_and_everything_stops() {
    let _one = ONE_AT_A_TIME.lock();
    let err = run_with_a_panic(Victim::Process, "fltvictim");
    // The process reports its panic upstream, with the reason.
    assert!(err.contains("task process `fltvictim`") && err.contains("panicked: injected fault"), "{err}");
}

#[test]
fn a_task_process_forked_by_a_task_process_that_panics_fails_the_run_and_everything_stops() {
    let _one = ONE_AT_A_TIME.lock();
    let err = run_with_a_panic(Victim::Forked, "fltvictim-0");
    assert!(err.contains("task process `fltvictim-0`") && err.contains("panicked: injected fault"), "{err}");
}

/// Runs `victim`'s workload and kills the process named `name` with SIGKILL once it runs (200 ms
/// after it is seen); the run's error.
fn run_with_a_kill(victim: Victim, name: &'static str) -> String {
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                if comm.trim() == name && pid != std::process::id() as i32 {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    // SAFETY: signals the victim process found above.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return true;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    });
    let cfg = ExecConfig { duration_ns: 10_000_000_000, trace_migrations: false, ..ExecConfig::default() };
    let err = failing_run(&workload(victim), &cfg);
    assert!(killer.join().unwrap(), "the victim process was never seen");
    err
}

#[test]
fn a_task_process_killed_from_outside_fails_the_run_and_everything_stops() {
    let _one = ONE_AT_A_TIME.lock();
    let err = run_with_a_kill(Victim::Process, "fltvictim");
    assert!(
        err.contains("task process `fltvictim`")
            && err.contains("ended without its result")
            && err.contains("wait status 9"),
        "{err}"
    );
}

#[test]
fn a_task_process_forked_by_a_task_process_killed_from_outside_fails_the_run_and_everything_stops() {
    let _one = ONE_AT_A_TIME.lock();
    // Its forker reaps it and reports it to the executor.
    let err = run_with_a_kill(Victim::Forked, "fltvictim-0");
    assert!(
        err.contains("task process `fltvictim-0`")
            && err.contains("ended without its result")
            && err.contains("wait status 9"),
        "{err}"
    );
}

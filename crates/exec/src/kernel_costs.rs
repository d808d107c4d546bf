//! Per-kind kernel path costs for `schedlab calibrate` (issue 30): what one call of each kind costs
//! the thread that makes it, measured the way Linux accounts it, as the thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`, the same `sum_exec_runtime` that schedstat reports for real runs).
//!
//! * **Block and wake pairs** (a contended mutex, a condition variable, a semaphore's futex, a pipe):
//!   a waiter thread on the last CPU calls the blocking side while the object is unavailable; a waker
//!   on CPU 0 spins 50 us (so the waiter is surely asleep in the kernel; on a one-CPU machine it
//!   sleeps 200 us instead, to let the waiter run), then makes the call that wakes it. The waiter's
//!   CPU time across its call is the *wait* cost (the call's entry, the path into `schedule()` and,
//!   after the wakeup, the switch-in and the return); the waker's across its
//!   call is the *wake* cost (the call and `try_to_wake_up` of the waiter, with its IPI). These are
//!   the executor's own objects (`sys::PMutex`, `PCond`, `PSem`, `Pipe`), so the costs are those of
//!   the calls real runs make.
//! * **A timed sleep, by its length** (the resume curve): a thread sleeping `L` at a time, CPU time
//!   per sleep (arming the high-resolution timer, which in a VM traps to the host, the block and
//!   the return), for each `L` of [`RESUME_AFTER_NS`] (50 us to 100 ms), on an otherwise idle CPU
//!   and on one kept busy by a SCHED_IDLE spinner (which the sleeper preempts at once on its
//!   return). The cost grows with `L` (here 5 us after 50 us, 40 us after 30 ms: the task's
//!   kernel data goes cold while it is away), for a pipe read that blocks as much as for a sleep;
//!   the simulator charges the growth to every blocked task's return (`resume_*_ns`).
//! * **`sched_yield`** with nothing else runnable on the CPU; **a fork** as the executor makes one
//!   (`std::thread::spawn`, the parent's CPU time, each thread joined before the next is made, as
//!   a run joins ended threads); **a task process's fork and exit**, by running the executor
//!   itself on a fork micro-workload ([`process_fork_costs`]).
//!
//! Each is the median over its rounds; the cost of reading the thread clock itself (a system call:
//! thread CPU clocks have no vDSO path) is measured and subtracted.

use crate::shm::ShmArena;
use crate::sys::{self, now_ns, PCond, PMutex, PSem, Pipe, PipeMode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The calling thread's CPU time, ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// The median cost of one `thread_cpu_ns` reading (what a timed region around a call includes).
fn clock_overhead_ns() -> u64 {
    median(
        (0..201)
            .map(|_| {
                let a = thread_cpu_ns();
                thread_cpu_ns() - a
            })
            .collect(),
    )
}

/// What the measurements gave, ns of the calling thread's CPU time per call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelCosts {
    /// `pthread_mutex_lock` of a mutex another thread holds, which blocks.
    pub mutex_wait_ns: u64,
    /// `pthread_mutex_unlock` with a blocked waiter.
    pub mutex_wake_ns: u64,
    /// `pthread_cond_wait` until a signal.
    pub cond_wait_ns: u64,
    /// `pthread_cond_signal` with a waiter.
    pub cond_wake_ns: u64,
    /// `sem_wait` on an empty semaphore (a futex wait).
    pub futex_wait_ns: u64,
    /// `sem_post` with a waiter (a futex wake).
    pub futex_wake_ns: u64,
    /// A 4-byte pipe read that blocks until a write.
    pub pipe_wait_ns: u64,
    /// A 4-byte pipe write that wakes a blocked reader.
    pub pipe_wake_ns: u64,
    /// A sleep of the shortest resume absence (50 us) on an idle CPU.
    pub sleep_ns: u64,
    /// A sleep's CPU time after each absence of [`RESUME_AFTER_NS`]: `(absence, on an idle CPU, on
    /// a busy CPU)`, ns.
    pub resume: Vec<(u64, u64, u64)>,
    /// `sched_yield` with nothing else to run.
    pub yield_ns: u64,
    /// Creating a thread (the parent's part).
    pub fork_ns: u64,
    /// Forking a task process as a run does (the forking thread's part: the result pipe, `fork()`
    /// and the keeper thread's creation).
    pub fork_process_ns: u64,
    /// A task process's exit as a run counts it (from `wait4`: the result's write and the
    /// teardown of its address space).
    pub exit_process_ns: u64,
    /// The libc's condition variables quiesce before switching groups ([`cond_quiesces`]).
    pub cond_quiesce: bool,
}

/// Rounds of each block/wake measurement.
const ROUNDS: u64 = 201;

/// Polls `cell` until it holds `want` (sleeping 20 us between looks, so one CPU is enough).
fn await_value(cell: &AtomicU64, want: u64) {
    while cell.load(Ordering::Acquire) != want {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// The block/wake harness: per round, once the waker says go, the waiter announces itself, then
/// times `block(i)`; the waker waits for the announcement, lets 50 us pass (spinning when the two
/// are on different CPUs; sleeping 200 us on one) and times `wake(i)`; then the waiter runs
/// `after_wait(i)` and, once it has, the waker `after_wake(i)` (both untimed). Medians of
/// (waiter, waker) CPU time per call, clock cost subtracted.
fn block_wake<S: Send + Sync + 'static>(
    shared: S,
    waiter_cpu: u32,
    waker_cpu: u32,
    block: fn(&S, u64),
    wake: fn(&S, u64),
    after_wait: fn(&S, u64),
    after_wake: fn(&S, u64),
) -> (u64, u64) {
    let clock = clock_overhead_ns();
    let s = Arc::new(shared);
    let ready = Arc::new(AtomicU64::new(u64::MAX));
    let done = Arc::new(AtomicU64::new(u64::MAX));
    let go = Arc::new(AtomicU64::new(u64::MAX));
    let (s2, r2, d2, g2) = (s.clone(), ready.clone(), done.clone(), go.clone());
    let waiter = std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[waiter_cpu]);
        let mut costs = Vec::with_capacity(ROUNDS as usize);
        for i in 0..ROUNDS {
            await_value(&g2, i);
            r2.store(i, Ordering::Release);
            let c0 = thread_cpu_ns();
            block(&s2, i);
            costs.push((thread_cpu_ns() - c0).saturating_sub(clock));
            after_wait(&s2, i);
            d2.store(i, Ordering::Release);
        }
        costs
    });
    let _ = sys::set_affinity(0, &[waker_cpu]);
    let mut wakes = Vec::with_capacity(ROUNDS as usize);
    for i in 0..ROUNDS {
        go.store(i, Ordering::Release);
        await_value(&ready, i);
        if waiter_cpu != waker_cpu {
            // Busy, as a waker is when it makes its call; 50 us is ample for the waiter to block.
            let t = now_ns();
            while now_ns() - t < 50_000 {
                std::hint::spin_loop();
            }
        } else {
            // One CPU: sleep so the waiter can run and block.
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let c0 = thread_cpu_ns();
        wake(&s, i);
        wakes.push((thread_cpu_ns() - c0).saturating_sub(clock));
        await_value(&done, i);
        after_wake(&s, i);
    }
    let _ = sys::set_affinity(0, &[]);
    let waits = waiter.join().unwrap_or_default();
    // The first round warms caches and page tables: left out.
    (median(waits[1..].to_vec()), median(wakes[1..].to_vec()))
}

/// A mutex the waker holds while the waiter locks it.
struct MutexCase {
    _arena: ShmArena,
    m: PMutex,
}

// SAFETY: the pthread objects live in the arena owned alongside them and are made to be shared.
unsafe impl Send for MutexCase {}
// SAFETY: as above.
unsafe impl Sync for MutexCase {}

fn mutex_costs(waiter_cpu: u32, waker_cpu: u32) -> std::io::Result<(u64, u64)> {
    let mut arena = ShmArena::new(4)?;
    let m = PMutex::new(&mut arena);
    // The waker holds the mutex before round 0; after each round it locks it again (below) before
    // the waiter announces the next one.
    m.lock();
    let case = MutexCase { _arena: arena, m };
    Ok(block_wake(
        case,
        waiter_cpu,
        waker_cpu,
        |c, _| c.m.lock(),
        |c, _| c.m.unlock(),
        |c, _| c.m.unlock(),
        // The waiter has let it go (the round is done): take it for the next round.
        |c, _| c.m.lock(),
    ))
}

/// A condition variable with its mutex and a generation the waiter waits to change.
struct CondCase {
    _arena: ShmArena,
    m: PMutex,
    cv: PCond,
    generation: AtomicU64,
}

// SAFETY: see MutexCase.
unsafe impl Send for CondCase {}
// SAFETY: as above.
unsafe impl Sync for CondCase {}

fn cond_costs(waiter_cpu: u32, waker_cpu: u32) -> std::io::Result<(u64, u64)> {
    let mut arena = ShmArena::new(4)?;
    let (m, cv) = (PMutex::new(&mut arena), PCond::new(&mut arena));
    let case = CondCase { _arena: arena, m, cv, generation: AtomicU64::new(0) };
    Ok(block_wake(
        case,
        waiter_cpu,
        waker_cpu,
        |c, i| {
            c.m.lock();
            while c.generation.load(Ordering::Acquire) <= i {
                c.cv.wait(&c.m);
            }
            c.m.unlock();
        },
        |c, i| {
            // Under the mutex, so the change cannot fall between the waiter's check and its wait.
            c.m.lock();
            c.generation.store(i + 1, Ordering::Release);
            c.cv.signal();
            c.m.unlock();
        },
        |_, _| {},
        |_, _| {},
    ))
}

/// The condition-variable micro-workload of [`cond_quiesces`]: on the last CPU, two waiters at
/// nice 8, each computing 1.2 ms after every wakeup, behind ten nice-0 hogs (so a woken waiter
/// waits tens of milliseconds for the CPU); on CPU 0, alone, a dispatcher that broadcasts every
/// 4 ms.
const QUIESCE_WORKLOAD: &str = r#"
name = "calibrate-cond-quiesce"
[[mutex]]
name = "m"
[[cond]]
name = "c"
[[task]]
name = "dispatch"
cpus = [0]
ops = [ { loop = "forever", ops = [ { sleep = "4ms" }, { lock = "m" }, { broadcast = "c" }, { unlock = "m" } ] } ]
[[task]]
name = "waiter"
instances = 2
nice = 8
cpus = [LAST]
ops = [ { loop = "forever", ops = [ { lock = "m" }, { wait = "c", mutex = "m" }, { unlock = "m" }, { compute = "1200us" } ] } ]
[[task]]
name = "hog"
instances = 10
cpus = [LAST]
ops = [ { loop = "forever", ops = [ { compute = "10ms" } ] } ]
"#;

/// Whether a broadcast (or signal) that switches a condition's groups first waits until the
/// waiters signalled earlier have run, as glibc 2.25-2.40 do (`__condvar_quiesce_and_switch_g1`
/// waits for the old group's `__g_refs`, which a signalled waiter drops only when it runs; glibc
/// 2.41 removed the wait). Found by behaviour, not by version (a distribution may carry the
/// change back): the executor runs [`QUIESCE_WORKLOAD`] for a second, and the dispatcher's
/// voluntary switches beyond its sleeps are the calls that blocked. With quiescence a broadcast
/// blocks whenever one waiter is back while the other, woken, still waits for the CPU (about once
/// per waiter cycle, 13 times a second here); without, it never blocks (its mutex is held for
/// microseconds at a time).
pub fn cond_quiesces() -> std::io::Result<bool> {
    Ok(dispatcher_blocks(2)? >= QUIESCE_MIN_BLOCKS)
}

/// The blocked calls of [`QUIESCE_WORKLOAD`]'s dispatcher in a second, with `waiters` waiters.
fn dispatcher_blocks(waiters: u32) -> std::io::Result<u64> {
    let err = |e: String| std::io::Error::other(format!("the condition-variable probe: {e}"));
    let last = sys::nr_cpus().saturating_sub(1);
    let text = QUIESCE_WORKLOAD
        .replace("LAST", &last.to_string())
        .replace("instances = 2", &format!("instances = {waiters}"));
    let w = schedlab_workload::parse_toml("calibrate-cond-quiesce", &text).map_err(|e| err(e.to_string()))?;
    let cfg = crate::ExecConfig { duration_ns: 1_000_000_000, trace_migrations: false, ..Default::default() };
    let report = crate::run(&w, &cfg).map_err(|e| err(e.to_string()))?.report;
    let d =
        report.tasks.iter().find(|t| t.template == "dispatch").ok_or_else(|| err("no dispatcher".into()))?;
    // Each sleep is one voluntary switch and one timed wakeup; the run's stop may add one.
    Ok(d.nvcsw.saturating_sub(d.wakeup_latency.count + 1))
}

/// The fewest blocked calls in [`cond_quiesces`]'s second that mean quiescence (with it, 10-15;
/// without, 0).
const QUIESCE_MIN_BLOCKS: u64 = 4;

/// A semaphore the waiter takes while it is empty.
struct SemCase {
    _arena: ShmArena,
    sem: PSem,
    stop: AtomicBool,
}

// SAFETY: see MutexCase.
unsafe impl Send for SemCase {}
// SAFETY: as above.
unsafe impl Sync for SemCase {}

fn futex_costs(waiter_cpu: u32, waker_cpu: u32) -> std::io::Result<(u64, u64)> {
    let mut arena = ShmArena::new(4)?;
    let sem = PSem::new(&mut arena, 0);
    let case = SemCase { _arena: arena, sem, stop: AtomicBool::new(false) };
    Ok(block_wake(
        case,
        waiter_cpu,
        waker_cpu,
        |c, _| {
            c.sem.wait(&c.stop);
        },
        |c, _| c.sem.post(),
        |_, _| {},
        |_, _| {},
    ))
}

/// A pipe the waiter reads while it is empty.
struct PipeCase {
    pipe: Pipe,
    stop: AtomicBool,
}

fn pipe_costs(waiter_cpu: u32, waker_cpu: u32) -> std::io::Result<(u64, u64)> {
    let pipe = Pipe::new(PipeMode::Stream { bytes: 4096 })?;
    let case = PipeCase { pipe, stop: AtomicBool::new(false) };
    Ok(block_wake(
        case,
        waiter_cpu,
        waker_cpu,
        |c, _| {
            let mut buf = [0u8; 4];
            c.pipe.read_exact(&mut buf, &c.stop);
        },
        |c, _| {
            c.pipe.write_all(&[1u8; 4], &c.stop);
        },
        |_, _| {},
        |_, _| {},
    ))
}

/// The absences of the resume curve, ns: log-spaced over the sleeps and waits workloads make.
pub const RESUME_AFTER_NS: [u64; 7] =
    [50_000, 200_000, 1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000];

/// CPU time per absolute sleep of `len_ns` on `cpu` (the median over about 0.4 s of sleeps, 11 to
/// 401 of them). With `busy`, a SCHED_IDLE thread spins on `cpu` meanwhile.
fn sleep_cost(cpu: u32, len_ns: u64, busy: bool) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = busy.then(|| {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = sys::set_affinity(0, &[cpu]);
            let _ = sys::set_policy(0, sys::Policy::Idle);
            let mut x = 1;
            while !stop.load(Ordering::Relaxed) {
                x = crate::calibrate::burn(1024, x);
            }
            x
        })
    });
    let rounds = (400_000_000 / len_ns).clamp(11, 401) as usize;
    let cost = std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[cpu]);
        let clock = clock_overhead_ns();
        let mut costs = Vec::with_capacity(rounds);
        // One sleep first, unmeasured: the thread's first block.
        let mut next = now_ns() + len_ns;
        sys::sleep_until(next);
        for _ in 0..rounds {
            next = next.max(now_ns()) + len_ns;
            let c0 = thread_cpu_ns();
            sys::sleep_until(next);
            costs.push((thread_cpu_ns() - c0).saturating_sub(clock));
        }
        median(costs)
    })
    .join()
    .unwrap_or(0);
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = spinner {
        let _ = h.join();
    }
    cost
}

/// The resume curve on `cpu`: [`KernelCosts::resume`].
fn resume_curve(cpu: u32) -> Vec<(u64, u64, u64)> {
    RESUME_AFTER_NS
        .iter()
        .map(|&len| (len, sleep_cost(cpu, len, false), sleep_cost(cpu, len, true)))
        .collect()
}

/// CPU time per `sched_yield` on `cpu` with nothing else runnable there (the median of 201 batches
/// of 100 calls).
fn yield_cost(cpu: u32) -> u64 {
    std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &[cpu]);
        let clock = clock_overhead_ns();
        median(
            (0..201)
                .map(|_| {
                    let c0 = thread_cpu_ns();
                    for _ in 0..100 {
                        sys::yield_now();
                    }
                    (thread_cpu_ns() - c0).saturating_sub(clock) / 100
                })
                .collect(),
        )
    })
    .join()
    .unwrap_or(0)
}

/// The parent's CPU time per thread created as the executor creates a forked task's thread, over
/// 101 creations. As in a run, which joins the threads that have ended whenever it makes another,
/// each thread (which exits at once) is joined before the next is made, so glibc reuses its stack.
fn fork_cost() -> u64 {
    let clock = clock_overhead_ns();
    let mut costs = Vec::with_capacity(101);
    for _ in 0..101 {
        let c0 = thread_cpu_ns();
        let h = std::thread::Builder::new().name("calib-fork".into()).spawn(|| {});
        costs.push((thread_cpu_ns() - c0).saturating_sub(clock));
        if let Ok(h) = h {
            let _ = h.join();
        }
    }
    median(costs[1..].to_vec())
}

/// The fork micro-workload of [`process_fork_costs`]: a forker process forks ten task processes
/// (each computes 1 us and ends) and waits for them, four times.
const FORK_WORKLOAD: &str = r#"
name = "calibrate-process-fork"
[[task]]
name = "forker"
ops = [ { loop = 4, ops = [ { loop = 10, ops = [ { fork = "child" } ] }, { wait_children = true } ] } ]
[[task]]
name = "child"
instances = 0
ops = [ { compute = "1us" } ]
"#;

/// A task process's fork and exit as a run makes them, measured by running the executor itself on
/// [`FORK_WORKLOAD`] (a task process forking task processes, with its keeper threads): the median
/// child's run time less its 1 us of work (the result's report and the teardown of its address
/// space, from `wait4`) is the exit; the forker's run time, less its four waits (`cond_wait_ns`
/// each) and its own exit (taken as a child's), per fork is the fork.
fn process_fork_costs(cond_wait_ns: u64) -> std::io::Result<(u64, u64)> {
    let err = |e: String| std::io::Error::other(format!("the process fork benchmark: {e}"));
    let w = schedlab_workload::parse_toml("calibrate-process-fork", FORK_WORKLOAD)
        .map_err(|e| err(e.to_string()))?;
    let cfg =
        crate::ExecConfig { duration_ns: 20_000_000_000, trace_migrations: false, ..Default::default() };
    let report = crate::run(&w, &cfg).map_err(|e| err(e.to_string()))?.report;
    let forker =
        report.tasks.iter().find(|t| t.template == "forker").ok_or_else(|| err("no forker".into()))?;
    let children: Vec<u64> = report
        .tasks
        .iter()
        .filter(|t| t.template == "child" && t.exited_ns.is_some())
        .map(|t| t.run_ns.saturating_sub(t.work_ns))
        .collect();
    if children.len() != 40 {
        return Err(err(format!("{} of 40 children ended", children.len())));
    }
    let exit_ns = median(children);
    Ok((forker.run_ns.saturating_sub(4 * cond_wait_ns + exit_ns) / 40, exit_ns))
}

/// Measures every kind: the waiter on the last CPU, the waker on CPU 0 (the same CPU on a
/// one-CPU machine, where the waker's sleep lets the waiter block first).
pub fn measure() -> std::io::Result<KernelCosts> {
    let last = sys::nr_cpus().saturating_sub(1) as u32;
    let (mutex_wait_ns, mutex_wake_ns) = mutex_costs(last, 0)?;
    let (cond_wait_ns, cond_wake_ns) = cond_costs(last, 0)?;
    let (futex_wait_ns, futex_wake_ns) = futex_costs(last, 0)?;
    let (pipe_wait_ns, pipe_wake_ns) = pipe_costs(last, 0)?;
    let resume = resume_curve(last);
    let (fork_process_ns, exit_process_ns) = process_fork_costs(cond_wait_ns)?;
    Ok(KernelCosts {
        mutex_wait_ns,
        mutex_wake_ns,
        cond_wait_ns,
        cond_wake_ns,
        futex_wait_ns,
        futex_wake_ns,
        pipe_wait_ns,
        pipe_wake_ns,
        sleep_ns: resume[0].1,
        resume,
        yield_ns: yield_cost(last),
        fork_ns: fork_cost(),
        fork_process_ns,
        exit_process_ns,
        cond_quiesce: cond_quiesces()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_clock_counts_this_threads_work_only() {
        // 5 ms of sleep adds (almost) no CPU time; spinning adds it, and never faster than the wall
        // clock (a clock of the whole process would, with another thread spinning beside this one).
        // Spinning runs until the clock shows 5 ms, so a loaded machine only makes it take longer.
        let c0 = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let slept = thread_cpu_ns() - c0;
        assert!(slept < 1_000_000, "sleeping 5 ms cost {slept} ns of CPU time");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let other = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let (c1, t1) = (thread_cpu_ns(), now_ns());
        while thread_cpu_ns() - c1 < 5_000_000 {
            assert!(
                now_ns() - t1 < 60_000_000_000,
                "the thread clock did not reach 5 ms in 60 s of spinning"
            );
            std::hint::spin_loop();
        }
        let (spun, wall) = (thread_cpu_ns() - c1, now_ns() - t1);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        other.join().unwrap();
        assert!(spun <= wall + 100_000, "{spun} ns of CPU time in {wall} ns of wall time");
    }

    /// The running glibc's version, `(major, minor)`.
    fn glibc_version() -> (u32, u32) {
        extern "C" {
            fn gnu_get_libc_version() -> *const libc::c_char;
        }
        // SAFETY: glibc returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) }.to_string_lossy().into_owned();
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    }

    #[test]
    fn the_condition_quiescence_probe_matches_the_glibc_release() {
        // glibc 2.25 to 2.40 wait for the old group to quiesce; 2.41 removed it. (A distribution
        // that carried the removal back would fail this: the probe is right, the version wrong.)
        let v = glibc_version();
        let expect = ((2, 25)..(2, 41)).contains(&v);
        let (one, two) = (dispatcher_blocks(1).expect("probe"), dispatcher_blocks(2).expect("probe"));
        // With one waiter there is never a second group to switch to while the first is busy:
        // the dispatcher's calls do not block on any glibc, so the probe's signal is the second
        // waiter's.
        assert!(one < QUIESCE_MIN_BLOCKS, "one waiter: {one} blocked calls");
        assert_eq!(two >= QUIESCE_MIN_BLOCKS, expect, "glibc {v:?}: {two} blocked calls with two waiters");
    }

    #[test]
    fn every_kind_is_measured_and_blocking_costs_more_than_a_plain_call() {
        // Each block/wake round really blocks the waiter (its call spans a sleep and a wakeup), so
        // its CPU time is at least the thread clock's own cost and its waker's call did some work.
        let k = measure().expect("measure");
        for (name, v) in [
            ("mutex_wait", k.mutex_wait_ns),
            ("mutex_wake", k.mutex_wake_ns),
            ("cond_wait", k.cond_wait_ns),
            ("cond_wake", k.cond_wake_ns),
            ("futex_wait", k.futex_wait_ns),
            ("futex_wake", k.futex_wake_ns),
            ("pipe_wait", k.pipe_wait_ns),
            ("pipe_wake", k.pipe_wake_ns),
            ("sleep", k.sleep_ns),
            ("yield", k.yield_ns),
            ("fork", k.fork_ns),
            ("fork_process", k.fork_process_ns),
            ("exit_process", k.exit_process_ns),
        ] {
            assert!(v > 0, "{name}: {v} ns in {k:?}");
            assert!(v < 10_000_000, "{name}: {v} ns (over 10 ms) in {k:?}");
        }
        // The resume curve: every absence measured, on an idle and a busy CPU, each a real block.
        assert_eq!(k.resume.iter().map(|p| p.0).collect::<Vec<_>>(), RESUME_AFTER_NS);
        assert_eq!(k.sleep_ns, k.resume[0].1);
        for &(len, idle, busy) in &k.resume {
            assert!(idle > 0 && busy > 0 && idle.max(busy) < 10_000_000, "{len} ns away: {idle} / {busy}");
        }
    }
}

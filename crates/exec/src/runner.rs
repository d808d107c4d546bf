//! One real thread running one task instance's program: it applies the template's scheduling
//! properties, waits for its start time, interprets the ops (loops included) with real system calls,
//! measures its own wakeup latencies and CPU changes, and at its end (program done or run stopped)
//! releases any mutex it holds and reads its kernel counters.

use crate::calibrate::{burn, CHUNK};
use crate::measure::{thread_self, ThreadStat};
use crate::sys::{self, now_ns};
use crate::Shared;
use schedlab_core::SchedClass;
use schedlab_sim::{Histogram, RunRng};
use schedlab_workload::{Op, TemplateId};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

/// What one thread measured.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TaskResult {
    /// Creation order.
    pub id: u32,
    /// Kernel thread id.
    pub tid: i32,
    /// Kernel thread-group (process) id: the executor's, or a task process's.
    pub tgid: i32,
    /// The span the kernel counters cover, monotonic ns (from the first reading to the last).
    pub measured: (u64, u64),
    /// Instance name.
    pub name: String,
    /// Template index.
    pub template: TemplateId,
    /// Started, ns after the run's start.
    pub started_ns: u64,
    /// Finished its program, ns after the run's start (`None`: stopped by the run's end).
    pub exited_ns: Option<u64>,
    /// Kernel counters over the thread's life after its start.
    pub stat: ThreadStat,
    /// The thread's CPU clock when the counters were first read: a task process's keeper counts its
    /// run time as its whole CPU time from `wait4` less this, so the process's exit (the teardown
    /// of its address space, which Linux charges to the exiting task) is in it.
    #[serde(default)]
    pub cpu_before_ns: u64,
    /// Compute work done, nominal ns.
    pub work_ns: u64,
    /// Spin time, ns.
    pub spin_ns: u64,
    /// Wakeup latency of sleeps and timer waits: actual minus intended wake time.
    pub latency: Histogram,
    /// Changes of CPU seen at op boundaries (sampled).
    pub migrations: u64,
    /// The CPU it was last seen on.
    pub cpu: u32,
    /// `sched_yield` calls.
    pub yields: u64,
    /// Last wakeup from a sleep or timer, ns after the start.
    pub last_wakeup_ns: Option<u64>,
    /// What could not be done as asked.
    pub warnings: Vec<String>,
}

/// Children forked by one thread, for `wait_children` and `wait_child`.
#[derive(Default)]
pub struct Children {
    live: Mutex<Counts>,
    cv: Condvar,
    /// In a task process: the task processes this thread forked and has not reaped yet, which it
    /// reaps itself (`wait4`) as a forking program does.
    unreaped: Mutex<Vec<Forked>>,
}

/// A task process forked by a task process, until its forker reaps it.
pub struct Forked {
    /// Instance id.
    pub id: u32,
    /// Process id.
    pub pid: i32,
    /// Its template.
    pub template: TemplateId,
    /// Instance name.
    pub name: String,
}

/// What one `wait4` for a thread's task processes came to.
enum Reaped {
    /// One of them ended and was reported.
    One,
    /// The run's stop interrupted the wait.
    Interrupted,
    /// No child is left to wait for (the error of `wait4`).
    NoChild(std::io::Error),
}

/// How many of a thread's children are running, and how many ended since its last `wait_child`.
#[derive(Default)]
struct Counts {
    live: u32,
    unclaimed: u32,
}

impl Children {
    fn add(&self) {
        if let Ok(mut n) = self.live.lock() {
            n.live += 1;
        }
    }

    /// One child finished.
    pub fn done(&self) {
        if let Ok(mut n) = self.live.lock() {
            n.live = n.live.saturating_sub(1);
            n.unclaimed += 1;
            self.cv.notify_all();
        }
    }

    /// Records a task process forked by this (task process's) thread, to be reaped by it.
    fn add_forked(&self, f: Forked) {
        if let Ok(mut u) = self.unreaped.lock() {
            u.push(f);
        }
    }

    /// Reaps this thread's task processes as they end (`wait4` on any child, as `wait()` does),
    /// reporting each upstream; `false` if the run's stop interrupts it (`stop` given).
    fn reap(&self, shared: &Arc<Shared>, stop: Option<&std::sync::atomic::AtomicBool>) -> bool {
        while !self.unreaped.lock().map(|u| u.is_empty()).unwrap_or(true) {
            match self.reap_next(shared, stop) {
                Reaped::One => {}
                Reaped::Interrupted => return false,
                Reaped::NoChild(e) => {
                    // No child left to wait for (ECHILD): those not reaped ended unseen.
                    let lost = self.unreaped.lock().map(|mut u| std::mem::take(&mut *u)).unwrap_or_default();
                    for f in lost {
                        shared.fail(format!("task process `{}` (pid {}): wait4: {e}", f.name, f.pid));
                        crate::process::finish_without_result(
                            shared,
                            &Spawn {
                                template: f.template,
                                name: f.name,
                                delay_ns: None,
                                forked_at_ns: 0,
                                parent: None,
                            },
                            f.id,
                        );
                        self.done();
                    }
                    return true;
                }
            }
        }
        true
    }

    /// Reaps the next of this thread's task processes to end (`wait4` on any child), reporting it
    /// upstream.
    fn reap_next(&self, shared: &Arc<Shared>, stop: Option<&std::sync::atomic::AtomicBool>) -> Reaped {
        loop {
            match crate::process::reap_any() {
                Ok((pid, status, life_ns)) => {
                    let f = self.unreaped.lock().ok().and_then(|mut u| {
                        let i = u.iter().position(|f| f.pid == pid)?;
                        Some(u.swap_remove(i))
                    });
                    if let Some(f) = f {
                        crate::process::report_reaped(shared, &f, status, life_ns);
                        self.done();
                        return Reaped::One;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                        return Reaped::Interrupted;
                    }
                }
                Err(e) => return Reaped::NoChild(e),
            }
        }
    }

    /// Waits on the condition variable until `done(counts)` holds; `false` if the run stops first.
    fn wait_until(&self, stop: &std::sync::atomic::AtomicBool, done: impl Fn(&mut Counts) -> bool) -> bool {
        let Ok(mut n) = self.live.lock() else { return false };
        while !done(&mut n) {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            match self.cv.wait_timeout(n, std::time::Duration::from_millis(100)) {
                Ok((x, _)) => n = x,
                Err(_) => return false,
            }
        }
        true
    }

    /// `wait()` for all: until every child has ended (all reaped).
    fn wait(&self, shared: &Arc<Shared>) -> bool {
        let stop = shared.stop();
        self.reap(shared, Some(stop))
            && self.wait_until(stop, |n| {
                let all = n.live == 0;
                if all {
                    n.unclaimed = 0;
                }
                all
            })
    }

    /// `wait()`: until one child has ended since the last such wait (a task process reaped with
    /// `wait4` on any child), at once if one has, or none is left; `false` if the run stops.
    fn wait_one(&self, shared: &Arc<Shared>) -> bool {
        let stop = shared.stop();
        let claimed = self.live.lock().map(|n| n.unclaimed > 0).unwrap_or(false);
        let forked = self.unreaped.lock().map(|u| !u.is_empty()).unwrap_or(false);
        // No child left (ECHILD): `reap`, at the end, reports those that ended unseen.
        if !claimed && forked && matches!(self.reap_next(shared, Some(stop)), Reaped::Interrupted) {
            return false;
        }
        self.wait_until(stop, |n| {
            if n.unclaimed > 0 {
                n.unclaimed -= 1;
                true
            } else {
                n.live == 0
            }
        })
    }

    /// Blocks until every child has ended, whether or not the run is stopping (threads: at most
    /// 30 s): a task process dies with the thread that forked it (`PR_SET_PDEATHSIG`), so its
    /// forker's thread outlives it, and a task process's own children are reaped here.
    pub fn linger(&self, shared: &Arc<Shared>) {
        self.reap(shared, None);
        let deadline = now_ns() + 30_000_000_000;
        let Ok(mut n) = self.live.lock() else { return };
        while n.live > 0 && now_ns() < deadline {
            match self.cv.wait_timeout(n, std::time::Duration::from_millis(10)) {
                Ok((x, _)) => n = x,
                Err(_) => return,
            }
        }
    }

    /// Wakes a waiting parent so it can see the stop.
    pub fn wake(&self) {
        let _g = self.live.lock();
        self.cv.notify_all();
    }
}

/// Where a new thread comes from.
pub struct Spawn {
    /// Template.
    pub template: TemplateId,
    /// Instance name.
    pub name: String,
    /// For an initial instance, its delay after the common start; `None` for a forked one (now).
    pub delay_ns: Option<u64>,
    /// For a forked one, when its parent forked it (monotonic ns): its life, and so its elapsed
    /// time and its wait for a first CPU, count from there, as the simulator's count from the
    /// task's creation. 0 for an initial instance (whose life starts at its intended start).
    pub forked_at_ns: u64,
    /// The forking parent's children, if forked.
    pub parent: Option<Arc<Children>>,
}

/// Starts a thread for `s`; an error when the thread budget is exhausted or the OS refuses.
pub fn spawn(shared: &Arc<Shared>, s: Spawn) -> Result<(), String> {
    let id = shared.objects.created().fetch_add(1, Ordering::SeqCst) as u32;
    spawn_as(shared, s, id)
}

/// Starts instance `id` (already counted in [`crate::objects::Objects::created`]) for `s`.
pub fn spawn_as(shared: &Arc<Shared>, s: Spawn, id: u32) -> Result<(), String> {
    if id as usize >= shared.cfg.max_threads {
        return Err(format!(
            "more than {} threads (--max-threads): template `{}` would create another",
            shared.cfg.max_threads, shared.w.tasks[s.template as usize].name
        ));
    }
    shared.live_add(s.template);
    if let Some(p) = &s.parent {
        p.add();
    }
    let sh = shared.clone();
    // Linux thread names hold 15 bytes.
    let os_name: String = s.name.chars().take(15).collect();
    let builder = std::thread::Builder::new().name(os_name);
    let handle = if shared.as_process[s.template as usize] {
        // A task process is forked here, by the forking task's own thread, which pays for the fork
        // as a forking program does. The executor's keeper thread then reads what it reports and
        // reaps it; a task process reaps its own children (`wait_children`, and at its end).
        let Some((pid, rd)) = crate::process::fork_task(shared, id, &s) else { return Ok(()) };
        if rd < 0 {
            if let Some(p) = &s.parent {
                p.add_forked(Forked { id, pid, template: s.template, name: s.name });
            }
            return Ok(());
        }
        builder.spawn(move || crate::process::keep(&sh, id, s, pid, rd))
    } else {
        builder.spawn(move || run_thread(&sh, id, s))
    }
    .map_err(|e| format!("cannot create a thread: {e}"))?;
    if crate::upstream::active() {
        // In a task process: the thread is left detached (its process waits for its children, which
        // it reports, before it exits), and the handle list, whose lock another thread of the
        // executor may have held when this process was forked, is not touched.
        return Ok(());
    }
    let mut handles = shared.handles.lock().map_err(|_| "poisoned".to_string())?;
    // Join the threads that have ended, as a program reaps its children: glibc reuses a joined
    // thread's stack, so the address space (whose mappings a process fork copies) stays the size
    // of the live threads' instead of growing with every thread the run ever made.
    let (ended, live): (Vec<_>, Vec<_>) =
        std::mem::take(&mut *handles).into_iter().partition(|h| h.is_finished());
    *handles = live;
    handles.push(handle);
    drop(handles);
    for h in ended {
        let _ = h.join();
    }
    Ok(())
}

fn run_thread(shared: &Arc<Shared>, id: u32, s: Spawn) {
    let tid = sys::gettid();
    shared.register(id, s.template, tid, false);
    let children = Arc::<Children>::default();
    // A panicking task fails the run (no report) and the others stop; its thread still counts as
    // ended, so the stop does not wait for it.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task_body(shared, id, &s, tid, &children)))
    {
        Ok(r) => {
            for w in &r.warnings {
                shared.warn(w.clone());
            }
            if crate::upstream::active() {
                // A thread of a task process: its CPU time is in its process's, not its task's
                // (counted before its end is reported, which may let its process end).
                crate::upstream::add_thread_ns(thread_self().run_ns);
            }
            finish(shared, &s, id, r);
            children.linger(shared);
        }
        Err(payload) => {
            let why = panic_message(payload.as_ref());
            shared.fail(format!("task thread `{}` (tid {tid}) panicked: {why}", s.name));
            crate::process::finish_without_result(shared, &s, id);
        }
    }
}

/// What a caught panic said (its message, if it was a string).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The controller's side of a task's end: its result recorded, its parent and the run told (in a
/// task process, the result goes upstream to the executor, which records it).
pub(crate) fn finish(shared: &Arc<Shared>, s: &Spawn, id: u32, r: TaskResult) {
    if crate::upstream::active() {
        let result = Some(Box::new(r));
        crate::upstream::send(&crate::upstream::Msg::Done { id, template: s.template, result });
        if let Some(p) = &s.parent {
            p.done();
        }
        return;
    }
    shared.deregister(id, s.template);
    if let Ok(mut v) = shared.results.lock() {
        v.push(r);
    }
    if let Some(p) = &s.parent {
        p.done();
    }
    shared.thread_done();
}

/// One task instance from its start to its end, in the calling thread (of this process or of a task
/// process): scheduling properties, start time, program, counters. Touches no lock of `shared`, so a
/// forked task process can run it; what could not be done is in the result's `warnings`.
/// Gives the thread its `slice` (`sched_setattr` with `sched_runtime`) and reads it back: a
/// warning if the call fails or the kernel does not keep it (per-task slices are Linux 6.12+).
fn apply_slice(tid: i32, spec: &schedlab_workload::TaskSpec, slice_ns: u64) -> Option<String> {
    let policy = match spec.class {
        SchedClass::Batch => sys::Policy::Batch,
        SchedClass::Idle => sys::Policy::Idle,
        _ => sys::Policy::Other,
    };
    if let Err(e) = sys::set_fair_slice(tid, policy, spec.nice as i32, slice_ns) {
        return Some(format!("sched_setattr(sched_runtime {slice_ns} ns): {e}"));
    }
    // 6.12 clamps the ask to 0.1-100 ms (`__setparam_fair`).
    let want = slice_ns.clamp(100_000, 100_000_000);
    match sys::fair_slice(tid) {
        Ok(got) if got == want => None,
        Ok(got) => Some(format!(
            "the kernel keeps a slice of {got} ns, not {want} ns (per-task slices are Linux 6.12+)"
        )),
        Err(e) => Some(format!("sched_getattr: {e}")),
    }
}

pub(crate) fn task_body(
    shared: &Arc<Shared>,
    id: u32,
    s: &Spawn,
    tid: i32,
    children: &Arc<Children>,
) -> TaskResult {
    let spec = &shared.w.tasks[s.template as usize];
    let mut warnings = Vec::new();
    if let Some(groups) = &shared.groups {
        if let Err(e) = groups.attach(spec.group, tid) {
            warnings.push(format!("{}: task group: {e}", s.name));
        }
    }
    // Its own CPUs; else, made by a controller that left the CPUs it was started on, those (a
    // forked task inherits its parent's, as on Linux).
    let inherited = shared.task_cpus.as_ref().filter(|_| s.parent.is_none());
    if let Some(cpus) = spec.cpus.as_ref().or(inherited) {
        if let Err(e) = sys::set_affinity(0, cpus) {
            warnings.push(format!("{}: sched_setaffinity({cpus:?}): {e}", s.name));
        }
    }
    let policy = match spec.class {
        SchedClass::Batch => Some(sys::Policy::Batch),
        SchedClass::Idle => Some(sys::Policy::Idle),
        SchedClass::Fifo => Some(sys::Policy::Fifo(spec.rt_priority.max(1) as i32)),
        SchedClass::Rr => Some(sys::Policy::Rr(spec.rt_priority.max(1) as i32)),
        // The class is absolute too: a normal task forked by a real-time, batch or idle one would
        // keep its creator's class (an ISO task is a normal one on Linux).
        SchedClass::Normal | SchedClass::Iso => sys::policy_of(0)
            .is_ok_and(|p| p & !libc::SCHED_RESET_ON_FORK != libc::SCHED_OTHER)
            .then_some(sys::Policy::Other),
    };
    if let Some(p) = policy {
        if let Err(e) = sys::set_policy(0, p) {
            warnings.push(format!("{}: sched_setscheduler({p:?}): {e}", s.name));
        }
    }
    // The workload's nice is absolute: a thread inherits its creator's nice (the executor's, when it
    // runs under `nice`), so it is set whenever it differs, to 0 as well.
    if !spec.class.is_rt() && sys::get_nice(tid) != Some(spec.nice as i32) {
        if let Err(e) = sys::set_nice(tid, spec.nice as i32) {
            let inherited = sys::get_nice(tid).map_or(String::new(), |n| format!("; it runs at nice {n}"));
            warnings.push(format!("{}: setpriority(nice {}): {e}{inherited}", s.name, spec.nice));
        }
    }
    if let Some(slice) = spec.slice_ns {
        if let Some(w) = apply_slice(tid, spec, slice) {
            warnings.push(format!("{}: {w}", s.name));
        }
    }
    let mut started = true;
    let mut start_at = now_ns();
    if let Some(delay) = s.delay_ns {
        // The start gate: count in, wait for the common start, then for this instance's delay.
        shared.objects.ready().fetch_add(1, Ordering::AcqRel);
        while shared.t0() == 0 && !shared.stop().load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        start_at = shared.t0() + delay;
        if start_at > now_ns() {
            started = sys::sleep_until(start_at) || !shared.stop().load(Ordering::Relaxed);
        }
    }
    if started && shared.cfg.inject_panic.as_deref() == Some(s.name.as_str()) {
        panic!("injected fault: task `{}` panics (ExecConfig::inject_panic)", s.name);
    }
    let mut r = TaskResult {
        id,
        tid,
        tgid: sys::getpid(),
        measured: (0, 0),
        name: s.name.clone(),
        template: s.template,
        // Its life counts from its creation, as the simulator's does: the fork, or the intended start.
        started_ns: if s.delay_ns.is_some() { start_at } else { s.forked_at_ns }.saturating_sub(shared.t0()),
        exited_ns: None,
        stat: ThreadStat::default(),
        cpu_before_ns: 0,
        work_ns: 0,
        spin_ns: 0,
        latency: Histogram::new(),
        migrations: 0,
        cpu: sys::current_cpu(),
        yields: 0,
        last_wakeup_ns: None,
        warnings,
    };
    // The timers' anchor: the intended start (rt-app's t_first: the common start plus the delay), or
    // the fork for a forked thread (rt-app anchors those at the run's start; see docs/exec.md).
    let anchor_ns = start_at;
    let measured_from = now_ns();
    let mut before = thread_self();
    if s.delay_ns.is_none() {
        // A forked task's counters start at its creation (its wait for a first CPU is run-queue wait,
        // as in the simulator); an initial instance's after the start gate. Migrations keep the
        // baseline: the fork's placement is not a migration.
        before = ThreadStat {
            nr_migrations: before.nr_migrations,
            have_schedstat: before.have_schedstat,
            ..ThreadStat::default()
        };
    }
    r.cpu_before_ns = before.run_ns;
    let finished = started
        && !shared.stop().load(Ordering::Relaxed)
        && Interp::new(shared, id, anchor_ns, &mut r, children.clone()).run();
    let after = thread_self();
    r.measured = (measured_from, now_ns());
    r.stat = ThreadStat {
        nr_migrations: after.nr_migrations.zip(before.nr_migrations).map(|(a, b)| a.saturating_sub(b)),
        run_ns: after.run_ns.saturating_sub(before.run_ns),
        wait_ns: after.wait_ns.saturating_sub(before.wait_ns),
        timeslices: after.timeslices.saturating_sub(before.timeslices),
        nvcsw: after.nvcsw.saturating_sub(before.nvcsw),
        nivcsw: after.nivcsw.saturating_sub(before.nivcsw),
        have_schedstat: after.have_schedstat,
    };
    if finished {
        r.exited_ns = Some(now_ns().saturating_sub(shared.t0()));
    }
    r
}

/// The interpreter of one thread's program.
struct Interp<'a> {
    shared: &'a Arc<Shared>,
    r: &'a mut TaskResult,
    rng: RunRng,
    held: Vec<u32>,
    timers: HashMap<u32, u64>,
    /// Where a timer's grid starts: the thread's start, monotonic ns.
    anchor_ns: u64,
    children: Arc<Children>,
    buf: Vec<u8>,
}

impl<'a> Interp<'a> {
    fn new(
        shared: &'a Arc<Shared>,
        id: u32,
        anchor_ns: u64,
        r: &'a mut TaskResult,
        children: Arc<Children>,
    ) -> Interp<'a> {
        let rng = RunRng::new(shared.cfg.seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        Interp {
            shared,
            r,
            rng,
            held: Vec::new(),
            timers: HashMap::new(),
            anchor_ns,
            children,
            buf: Vec::new(),
        }
    }

    fn stopped(&self) -> bool {
        self.shared.stop().load(Ordering::Relaxed)
    }

    fn woke(&mut self, intended: u64) {
        let now = now_ns();
        self.r.latency.record(now.saturating_sub(intended));
        self.r.last_wakeup_ns = Some(now.saturating_sub(self.shared.t0()));
    }

    fn compute(&mut self, work_ns: u64) {
        let loops = (work_ns as u128 * 1000 / self.shared.ps_per_loop as u128) as u64;
        let mut done = 0;
        while done < loops {
            if self.stopped() {
                break;
            }
            let n = CHUNK.min(loops - done);
            std::hint::black_box(burn(n, done));
            done += n;
        }
        self.r.work_ns +=
            if loops == 0 { work_ns } else { (work_ns as u128 * done as u128 / loops as u128) as u64 };
    }

    /// Runs the program; true if it reached its end (or `exit`), false if the run stopped it.
    fn run(mut self) -> bool {
        let ops = &self.shared.w.tasks[self.r.template as usize].program.ops;
        let mut pc = 0usize;
        let mut loops: Vec<u32> = Vec::new(); // remaining iterations of the enclosing loops (0 = forever)
        let complete = loop {
            let cpu = sys::current_cpu();
            if cpu != self.r.cpu {
                self.r.migrations += 1;
                self.r.cpu = cpu;
            }
            if self.stopped() {
                break false;
            }
            let Some(op) = ops.get(pc) else { break true };
            pc += 1;
            let ok = match *op {
                Op::Compute { work } => {
                    let w = self.rng.draw(work);
                    self.compute(w);
                    true
                }
                Op::Spin { time } => {
                    let t = self.rng.draw(time);
                    let until = now_ns() + t;
                    while now_ns() < until && !self.stopped() {
                        std::hint::spin_loop();
                    }
                    self.r.spin_ns += t;
                    true
                }
                Op::Sleep { time } => {
                    let target = now_ns() + self.rng.draw(time);
                    let ok = sys::sleep_until(target);
                    if ok {
                        self.woke(target);
                    }
                    ok
                }
                Op::Timer { timer, period_ns, absolute } => self.timer(timer, period_ns, absolute),
                Op::Yield => {
                    sys::yield_now();
                    self.r.yields += 1;
                    true
                }
                Op::Lock(m) => {
                    self.shared.objects.mutexes[m as usize].lock();
                    self.held.push(m);
                    true
                }
                Op::Unlock(m) => {
                    if let Some(i) = self.held.iter().rposition(|&x| x == m) {
                        self.held.remove(i);
                        self.shared.objects.mutexes[m as usize].unlock();
                    }
                    true
                }
                Op::CondWait { cond, mutex } => {
                    self.shared.objects.conds[cond as usize]
                        .wait(&self.shared.objects.mutexes[mutex as usize]);
                    !self.stopped()
                }
                Op::Signal(c) => {
                    self.shared.objects.conds[c as usize].signal();
                    true
                }
                Op::Broadcast(c) => {
                    self.shared.objects.conds[c as usize].broadcast();
                    true
                }
                Op::SemWait(s) => self.shared.objects.sems[s as usize].wait(self.shared.stop()),
                Op::SemPost(s) => {
                    self.shared.objects.sems[s as usize].post();
                    true
                }
                Op::Suspend(e) => self.shared.objects.events[e as usize].suspend(self.shared.stop()),
                Op::Resume(e) => {
                    self.shared.objects.events[e as usize].resume();
                    true
                }
                Op::Nice(nice) => {
                    // `who` 0 is the calling thread: Linux keeps a nice level per thread.
                    if let Err(e) = sys::set_nice(0, nice as i32) {
                        let msg = format!("{}: setpriority(nice {nice}): {e}", self.r.name);
                        self.r.warnings.push(msg);
                    }
                    true
                }
                Op::SetClass { class, rt_priority } => {
                    // `pid` 0 is the calling thread: Linux keeps a policy per thread.
                    let p = match class {
                        SchedClass::Batch => sys::Policy::Batch,
                        SchedClass::Idle => sys::Policy::Idle,
                        SchedClass::Fifo => sys::Policy::Fifo(rt_priority as i32),
                        SchedClass::Rr => sys::Policy::Rr(rt_priority as i32),
                        SchedClass::Normal | SchedClass::Iso => sys::Policy::Other,
                    };
                    if let Err(e) = sys::set_policy(0, p) {
                        let msg = format!("{}: sched_setscheduler({p:?}): {e}", self.r.name);
                        self.r.warnings.push(msg);
                    }
                    true
                }
                Op::SetCpus(l) => {
                    let cpus = &self.shared.w.cpu_lists[l as usize];
                    if let Err(e) = sys::set_affinity(0, cpus) {
                        let msg = format!("{}: sched_setaffinity({cpus:?}): {e}", self.r.name);
                        self.r.warnings.push(msg);
                    }
                    true
                }
                Op::Send { pipe, bytes } => {
                    self.buf.resize(bytes as usize, 0);
                    let p = &self.shared.objects.pipes[pipe as usize];
                    let (sends, total) = self.shared.objects.pipe_counts(pipe);
                    let ok = p.write_all(&self.buf, self.shared.stop());
                    if ok {
                        sends.fetch_add(1, Ordering::Relaxed);
                        total.fetch_add(bytes as u64, Ordering::Relaxed);
                    }
                    ok
                }
                Op::Recv { pipe, bytes } => {
                    self.buf.resize(bytes as usize, 0);
                    let p = &self.shared.objects.pipes[pipe as usize];
                    p.read_exact(&mut self.buf, self.shared.stop())
                }
                Op::Barrier(b) => self.shared.objects.barriers[b as usize].wait(0, self.shared.stop()),
                Op::BarrierSpin { barrier, spin_ns } => {
                    self.shared.objects.barriers[barrier as usize].wait(spin_ns, self.shared.stop())
                }
                Op::Count(c) => {
                    self.shared.objects.counter(c).fetch_add(1, Ordering::Relaxed);
                    true
                }
                Op::Fork(t) => {
                    let name = self.shared.child_name(t);
                    let s = Spawn {
                        template: t,
                        name,
                        delay_ns: None,
                        forked_at_ns: now_ns(),
                        parent: Some(self.children.clone()),
                    };
                    match spawn(self.shared, s) {
                        Ok(()) => true,
                        Err(e) => {
                            self.shared.fail(e);
                            false
                        }
                    }
                }
                Op::WaitChildren => self.children.wait(self.shared),
                Op::WaitChild => self.children.wait_one(self.shared),
                Op::Exec(_) => {
                    // Refused before the run (`check`).
                    self.shared.fail(format!("{}: exec is not supported in real runs", self.r.name));
                    false
                }
                Op::Io { device, service } => {
                    let t = self.rng.draw(service);
                    let d = &self.shared.objects.devices[device as usize];
                    d.lock();
                    let ok = sys::sleep_until(now_ns() + t);
                    d.unlock();
                    ok
                }
                Op::Loop { count, .. } => {
                    loops.push(count);
                    true
                }
                Op::EndLoop { start } => {
                    match loops.last_mut() {
                        Some(0) => pc = start as usize + 1,
                        Some(n) if *n > 1 => {
                            *n -= 1;
                            pc = start as usize + 1;
                        }
                        _ => {
                            loops.pop();
                        }
                    }
                    true
                }
                Op::Exit => break true,
            };
            if !ok && self.stopped() {
                break false;
            }
        };
        // Leave no mutex locked: a thread stopped inside a critical section unlocks on its way out.
        for m in self.held.drain(..).rev() {
            self.shared.objects.mutexes[m as usize].unlock();
        }
        complete
    }

    /// The next expiry of a periodic timer (see `Op::Timer`): the first one period after the thread's
    /// start, each later one period after the previous; after an overrun the task continues at once
    /// and, in relative mode, the grid restarts from now.
    fn timer(&mut self, timer: u32, period: u64, absolute: bool) -> bool {
        let now = now_ns();
        let shared_timer = self.shared.w.timers.get(timer as usize).is_some_and(|t| t.shared);
        let expiry = if shared_timer {
            let anchor = self.anchor_ns;
            self.shared.objects.timers[timer as usize].update(|next| {
                let e = next.unwrap_or(anchor + period);
                (e, if e < now && !absolute { now + period } else { e + period })
            })
        } else {
            let e = *self.timers.get(&timer).unwrap_or(&(self.anchor_ns + period));
            let next = if e < now && !absolute { now + period } else { e + period };
            self.timers.insert(timer, next);
            e
        };
        if expiry <= now {
            return true;
        }
        let ok = sys::sleep_until(expiry);
        if ok {
            self.woke(expiry);
        }
        ok
    }
}

//! # schedlab-exec
//!
//! Runs a schedlab workload for real: one Linux thread per task instance, on the machine's own
//! kernel and scheduler, and measures it with the kernel's own accounting, into the same
//! `schedlab.run/1` report the simulator writes (with `source = "real"`), so `compare` and `report`
//! work on both.
//!
//! * **Execution** ([`runner`]): `compute` runs a loop calibrated at start ([`calibrate`], like
//!   rt-app's ns-per-loop), `spin` busy-waits on the clock, sleeps and periodic timers use
//!   `clock_nanosleep(TIMER_ABSTIME)`, mutexes, condition variables and semaphores are process-shared
//!   POSIX ones, pipes are pipes (sized, or packet-mode for small ones), barriers and events are built
//!   on those ([`objects`]), `yield` is `sched_yield`, `nice` is `setpriority` on the thread, classes are
//!   `sched_setscheduler` (FIFO and RR only when allowed), `cpus` and the timed affinity changes are
//!   `sched_setaffinity`, `fork` creates a thread or process running the template, task groups are cgroups
//!   with CPU weights where the machine has the `cpu` controller ([`cgroups`]).
//! * **Measurement** ([`measure`]): per thread, run time from the thread's CPU clock, run-queue wait
//!   and timeslices from `/proc/thread-self/schedstat` and voluntary/involuntary switches from
//!   `/proc/thread-self/status`,
//!   read by the thread itself at its end; wakeup latency as the thread's own actual minus intended
//!   wake time of each sleep and timer (rt-app's `wu_lat`, cyclictest's method); migrations as changes
//!   of `sched_getcpu()` seen between ops; per-CPU busy and idle time from `/proc/stat`.
//! * **Processes** ([`process`]): a template the model makes a process per instance (neither
//!   `threads = true` nor a named `process`) is forked as one (its shared objects are process-shared,
//!   in shared memory); what a task process forks reports to the executor through its result pipe
//!   ([`upstream`]).
//! * **Simplifications**, stated in docs/exec.md: tasks of a named `process` are threads of this
//!   process (not of a process of their own), a device is a mutex held for the service time, and the kernel's
//!   internals the simulator reports (decisions, tasks examined, balancing, overhead, energy, counters
//!   per CPU) are left at 0.
//! * **Safety**: the number of threads and the duration are bounded ([`ExecConfig`]); real-time
//!   classes need `allow_rt`; at the end, on an error or on Ctrl-C every thread is stopped (blocked ones
//!   are woken by a signal, a broadcast or a post) and joined, so nothing is left running.
#![warn(missing_docs)]

pub mod calibrate;
pub mod cgroups;
pub mod kernel_costs;
pub mod machine_file;
pub mod measure;
pub mod objects;
pub mod process;
pub mod report;
pub mod runner;
pub mod sample;
pub mod shm;
pub mod sys;
pub mod tracing;
pub mod upstream;

use objects::Objects;
use runner::{Spawn, TaskResult};
use schedlab_workload::{Op, StopWhen, TemplateId, Workload};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// Limits and switches of a real run.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// How long to run at most, ns.
    pub duration_ns: u64,
    /// Most threads the run may create (initial instances and forks).
    pub max_threads: usize,
    /// Allow SCHED_FIFO and SCHED_RR tasks.
    pub allow_rt: bool,
    /// Seed of the random durations.
    pub seed: u64,
    /// Count migrations from tracefs `sched_migrate_task` events where possible (root).
    pub trace_migrations: bool,
    /// Fault injection for the fault tests: the task instance of this name panics when it starts
    /// (in a thread, or in a task process). `None` in normal use.
    pub inject_panic: Option<String>,
    /// Run the controlling thread (the caller of [`run`], which starts, times and stops the run) as
    /// SCHED_FIFO at the highest priority with SCHED_RESET_ON_FORK, so the task threads and processes
    /// it creates still start as SCHED_OTHER, and a policy that starves normal threads (ULE's batch
    /// threads behind interactive ones, a FIFO-like policy under sched_ext) cannot keep the run from
    /// stopping. Its old policy comes back at the end. A warning, not an error, when refused.
    pub fifo_controller: bool,
    /// Run the controlling thread on this CPU only, off the CPUs it was started on: its own
    /// wake-ups (timed affinity changes, samples, delayed starts, threads' ends; a SCHED_FIFO
    /// controller preempts whatever runs there) then leave the workload's CPUs alone. The tasks still start on the CPUs the controller was
    /// started on (a task without `cpus` of its own is given them), and the controller's own
    /// affinity comes back at the end. A warning, not an error, when refused.
    pub controller_cpu: Option<u32>,
    /// The compute loop's speed, picoseconds per loop, instead of measuring it as the run starts
    /// ([`calibrate::ps_per_loop`]): for runs that must do the same work however the machine behaves
    /// while each starts (in a software-emulated VM the measurement swings by half from one run to
    /// the next, with the scheduler loaded).
    pub ps_per_loop: Option<u64>,
    /// Sample every task's CPU time this often, ns (0: no series; see [`sample`]).
    pub sample_interval_ns: u64,
    /// Create each initial instance at its start, from the controller (as a fork), instead of
    /// creating them all before the common start and holding them at a start gate. A held task
    /// sleeps until the start, and a policy that credits sleep (O(1)'s `sleep_avg`, ULE's
    /// interactivity score) then treats it as interactive from its first instruction, where the
    /// simulator's task, created at its start, has no history. The price: the creations are made
    /// during the run (by the controller, one after another), so instances that start together start
    /// a fork apart.
    pub spawn_at_start: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            duration_ns: 10_000_000_000,
            max_threads: 256,
            allow_rt: false,
            seed: 1,
            trace_migrations: true,
            inject_panic: None,
            fifo_controller: false,
            controller_cpu: None,
            ps_per_loop: None,
            sample_interval_ns: 0,
            spawn_at_start: false,
        }
    }
}

/// The longest run allowed.
pub const MAX_DURATION_NS: u64 = 600_000_000_000;

/// Why a real run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The workload asks for something this run refuses (too many threads, RT without permission).
    #[error("{0}")]
    Refused(String),
    /// The system refused (a pipe, a thread) or a thread failed.
    #[error("{0}")]
    System(String),
}

/// A live task: template, kernel tid (a task process's pid) and thread group (process id).
struct Entry {
    template: TemplateId,
    tid: i32,
    tgid: i32,
}

/// State shared by the controller and every thread.
pub struct Shared {
    /// The workload.
    pub w: Workload,
    /// Limits.
    pub cfg: ExecConfig,
    /// Real objects.
    pub objects: Objects,
    /// Calibration: picoseconds per compute loop.
    pub ps_per_loop: u64,
    /// Per template: whether its instances run as processes ([`process`]).
    pub as_process: Vec<bool>,
    /// The workload's task groups as real cgroups, when it has groups and the machine allows.
    pub groups: Option<cgroups::TaskGroups>,
    /// The CPUs a task without `cpus` of its own runs on, when the controller left them
    /// ([`ExecConfig::controller_cpu`]): what it would have inherited.
    pub task_cpus: Option<Vec<u32>>,
    /// Join handles of every thread.
    pub handles: Mutex<Vec<JoinHandle<()>>>,
    /// Results of finished threads.
    pub results: Mutex<Vec<TaskResult>>,
    live: Mutex<Live>,
    /// Rung when a thread ends or the run fails: the controller's wait ([`control`]).
    live_bell: sys::Doorbell,
    registry: Mutex<Vec<Option<Entry>>>,
    warnings: Mutex<Vec<String>>,
    failure: Mutex<Option<String>>,
}

#[derive(Default)]
struct Live {
    threads: usize,
    per_template: Vec<usize>,
}

impl Live {
    /// Live tasks of the templates that are not `background`: what `all_done` waits for.
    fn foreground(&self, w: &Workload) -> usize {
        self.per_template.iter().zip(&w.tasks).filter(|(_, t)| !t.background).map(|(n, _)| n).sum()
    }
}

impl Shared {
    /// The run's common start, monotonic ns (0 until the gate opens).
    pub fn t0(&self) -> u64 {
        self.objects.start().load(Ordering::Acquire)
    }

    /// Set when the run ends; every thread (and task process) stops at its next op.
    pub fn stop(&self) -> &AtomicBool {
        self.objects.stop()
    }

    // In a task process (and whatever it forks), the run's bookkeeping is the executor's: these
    // methods send it upstream ([`upstream`]) instead of keeping it here.

    fn live_add(&self, t: TemplateId) {
        if upstream::active() {
            return upstream::send(&upstream::Msg::Live { template: t });
        }
        if let Ok(mut l) = self.live.lock() {
            l.threads += 1;
            l.per_template[t as usize] += 1;
        }
    }

    fn register(&self, id: u32, template: TemplateId, tid: i32, process: bool) {
        let tgid = if process { tid } else { sys::getpid() };
        if upstream::active() {
            return upstream::send(&upstream::Msg::Register { id, template, tid, tgid });
        }
        self.register_in(id, template, tid, tgid);
    }

    fn register_in(&self, id: u32, template: TemplateId, tid: i32, tgid: i32) {
        if let Ok(mut r) = self.registry.lock() {
            if r.len() <= id as usize {
                r.resize_with(id as usize + 1, || None);
            }
            r[id as usize] = Some(Entry { template, tid, tgid });
        }
    }

    fn deregister(&self, id: u32, template: TemplateId) {
        if let Ok(mut r) = self.registry.lock() {
            if let Some(e) = r.get_mut(id as usize) {
                *e = None;
            }
        }
        if let Ok(mut l) = self.live.lock() {
            l.per_template[template as usize] = l.per_template[template as usize].saturating_sub(1);
        }
    }

    /// Task process `id` was reaped, having used `life_ns` of CPU time of its own (its exit
    /// included): if it ended its program within the run, that is its run time, less its CPU time
    /// before its counters were first read. (One the run's end stopped keeps its own reading.)
    fn count_exit(&self, id: u32, life_ns: u64) {
        if let Ok(mut v) = self.results.lock() {
            if let Some(r) = v.iter_mut().find(|r| r.id == id && r.exited_ns.is_some()) {
                r.stat.run_ns = r.stat.run_ns.max(life_ns.saturating_sub(r.cpu_before_ns));
            }
        }
    }

    fn thread_done(&self) {
        if let Ok(mut l) = self.live.lock() {
            l.threads = l.threads.saturating_sub(1);
            // A task process's copy of the doorbell is the executor's eventfd: its threads' ends are
            // the executor's business only when the process ends (its keeper's call).
            if !upstream::active() {
                self.live_bell.ring();
            }
        }
    }

    fn warn(&self, msg: String) {
        if upstream::active() {
            return upstream::send(&upstream::Msg::Warn(msg));
        }
        if let Ok(mut w) = self.warnings.lock() {
            if w.len() < 100 && !w.contains(&msg) {
                w.push(msg);
            }
        }
    }

    fn fail(&self, msg: String) {
        if upstream::active() {
            upstream::send(&upstream::Msg::Fail(msg));
            self.stop().store(true, Ordering::SeqCst);
            return;
        }
        if let Ok(mut f) = self.failure.lock() {
            f.get_or_insert(msg);
        }
        self.stop().store(true, Ordering::SeqCst);
        self.live_bell.ring();
    }

    /// The name of the next forked instance of template `t`: `name-k`, numbered after the initial
    /// instances, as the simulator names them.
    fn child_name(&self, t: TemplateId) -> String {
        let spec = &self.w.tasks[t as usize];
        let k = self.objects.forked(t).fetch_add(1, Ordering::SeqCst);
        format!("{}-{}", spec.name, spec.instances as u64 + k)
    }

    /// The live tasks: id, kernel tid, thread group.
    fn live_ids(&self) -> Vec<(u32, i32, i32)> {
        self.registry
            .lock()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .filter_map(|(id, e)| e.as_ref().map(|e| (id as u32, e.tid, e.tgid)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The live tasks: template, kernel tid, thread group.
    fn live_tids(&self) -> Vec<(TemplateId, i32, i32)> {
        self.registry
            .lock()
            .map(|r| r.iter().flatten().map(|e| (e.template, e.tid, e.tgid)).collect())
            .unwrap_or_default()
    }
}

/// The outcome of a real run.
pub struct Outcome {
    /// The report (schema `schedlab.run/1`, `source = "real"`).
    pub report: schedlab_sim::RunReport,
    /// What could not be done as asked (a nice level refused, an affinity not allowed...).
    pub warnings: Vec<String>,
    /// How things were measured where there is a choice (where the migration counts come from).
    pub notes: Vec<String>,
}

/// Checks what a run would need before starting anything.
pub fn check(w: &Workload, cfg: &ExecConfig) -> Result<(), ExecError> {
    let initial: u64 = w.tasks.iter().map(|t| t.instances as u64).sum();
    if initial > cfg.max_threads as u64 {
        return Err(ExecError::Refused(format!(
            "the workload starts {initial} threads, more than --max-threads {}",
            cfg.max_threads
        )));
    }
    if cfg.sample_interval_ns != 0 {
        if cfg.sample_interval_ns < sample::MIN_INTERVAL_NS {
            return Err(ExecError::Refused(format!(
                "sample interval {} ns is below the {} ms allowed (the controller's reads would load the run)",
                cfg.sample_interval_ns,
                sample::MIN_INTERVAL_NS / 1_000_000
            )));
        }
        if cfg.duration_ns / cfg.sample_interval_ns > sample::MAX_SAMPLES {
            return Err(ExecError::Refused(format!(
                "a sample every {} ns for {} ns makes more than {} samples: take a longer interval",
                cfg.sample_interval_ns,
                cfg.duration_ns,
                sample::MAX_SAMPLES
            )));
        }
    }
    if cfg.duration_ns == 0 || cfg.duration_ns > MAX_DURATION_NS {
        return Err(ExecError::Refused(format!(
            "duration {} ns is outside 1 ns..={} s",
            cfg.duration_ns,
            MAX_DURATION_NS / 1_000_000_000
        )));
    }
    if let Some(t) = w.tasks.iter().find(|t| t.program.ops.iter().any(|o| matches!(o, Op::Exec(_)))) {
        // A task process is a fork of this executor running the interpreter, sharing its objects
        // through inherited mappings and descriptors; a real execve() would drop them.
        return Err(ExecError::Refused(format!(
            "task `{}` execs (`exec`), which real runs cannot do yet (a task process is a fork of the \
             executor, and a real execve would leave its shared objects): simulate it with `schedlab run`",
            t.name
        )));
    }
    if !cfg.allow_rt {
        if let Some((t, class)) = w.real_time_task() {
            return Err(ExecError::Refused(format!(
                "task `{}` asks for a real-time class ({class:?}); a runaway RT thread can freeze the machine, \
                 so this needs --allow-rt",
                t.name
            )));
        }
    }
    Ok(())
}

/// Runs `w` for real and measures it.
pub fn run(w: &Workload, cfg: &ExecConfig) -> Result<Outcome, ExecError> {
    check(w, cfg)?;
    sys::install_handlers().map_err(|e| ExecError::System(format!("cannot create an eventfd: {e}")))?;
    let mut controller_warning = None;
    let _saved_policy = if cfg.fifo_controller {
        sys::raise_to_fifo_resetting_children()
            .map_err(|e| {
                controller_warning =
                    Some(format!("the controller stays SCHED_OTHER: sched_setscheduler(SCHED_FIFO): {e}"))
            })
            .ok()
    } else {
        None
    };
    let objects = Objects::new(w).map_err(|e| ExecError::System(format!("cannot create a pipe: {e}")))?;
    let (_, mut early_warnings) = objects::pipe_plan(w);
    early_warnings.extend(controller_warning);
    let as_process = process::plan(w);
    let groups = cgroups::TaskGroups::create(w).unwrap_or_else(|why| {
        early_warnings
            .push(format!("task groups are not created ({why}); the threads share the CPU as one group"));
        None
    });
    let ps_per_loop = cfg.ps_per_loop.unwrap_or_else(|| calibrate::ps_per_loop(5));
    // Off the workload's CPUs after the calibration, which measures one of them; the tracer's
    // reader thread started below goes along.
    let saved_cpus = cfg.controller_cpu.and_then(|c| {
        sys::move_to_cpu(c)
            .map_err(|e| {
                early_warnings
                    .push(format!("the controller stays on its CPUs: sched_setaffinity([{c}]): {e}"))
            })
            .ok()
    });
    let task_cpus = saved_cpus.as_ref().map(|s| s.cpus.clone());
    let trace = if cfg.trace_migrations { Some(tracing::MigrationTrace::start()) } else { None };
    let live_bell =
        sys::Doorbell::new().map_err(|e| ExecError::System(format!("cannot create an eventfd: {e}")))?;
    let shared = std::sync::Arc::new(Shared {
        w: w.clone(),
        cfg: cfg.clone(),
        objects,
        ps_per_loop,
        as_process,
        groups,
        task_cpus,
        handles: Mutex::new(Vec::new()),
        results: Mutex::new(Vec::new()),
        live: Mutex::new(Live { threads: 0, per_template: vec![0; w.tasks.len()] }),
        live_bell,
        registry: Mutex::new(Vec::new()),
        warnings: Mutex::new(early_warnings),
        failure: Mutex::new(None),
    });
    // The initial instances, numbered in template order. The task processes are forked first, while
    // the executor has no task thread yet: a forking task process is then a copy of a small process
    // (the executor's heap, not every task thread's stack), as a forking program is, and its forks
    // cost what such a program's do.
    let mut initial = Vec::new();
    for (ti, t) in w.tasks.iter().enumerate() {
        for i in 0..t.instances {
            let name = if t.instances > 1 { format!("{}-{i}", t.name) } else { t.name.clone() };
            initial.push(Spawn {
                template: ti as TemplateId,
                name,
                delay_ns: Some(t.start_ns),
                forked_at_ns: 0,
                parent: None,
            });
        }
    }
    shared.objects.created().store(initial.len() as u64, Ordering::SeqCst);
    let mut order: Vec<(u32, Spawn)> =
        initial.into_iter().enumerate().map(|(id, s)| (id as u32, s)).collect();
    order.sort_by_key(|(id, s)| (!shared.as_process[s.template as usize], *id));
    let mut spawn_error = None;
    let mut spawned = 0;
    let mut at_start = Vec::new();
    if cfg.spawn_at_start {
        // Made by the controller as each start comes (in start order, then id order).
        at_start = order;
        at_start.sort_by_key(|(id, s)| (s.delay_ns, *id));
        at_start.reverse();
    } else {
        for (id, s) in order {
            if let Err(e) = runner::spawn_as(&shared, s, id) {
                spawn_error = Some(e);
                break;
            }
            spawned += 1;
        }
    }
    // The common start: once every initial thread and task process waits at the gate (forking many
    // processes from a large one takes milliseconds each), or after 10 s.
    let gate_deadline = sys::now_ns() + 10_000_000_000;
    while shared.objects.ready().load(Ordering::Acquire) < spawned
        && sys::now_ns() < gate_deadline
        && !shared.stop().load(Ordering::Relaxed)
        && !sys::interrupted()
    {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let cpu_before = measure::cpu_times();
    let t0 = sys::now_ns() + 1_000_000;
    shared.objects.start().store(t0, Ordering::Release);
    let end = t0 + cfg.duration_ns;
    let mut sampler = (cfg.sample_interval_ns > 0).then(|| sample::Sampler::new(cfg.sample_interval_ns));
    let stop_reason =
        if spawn_error.is_some() { "error" } else { control(&shared, end, sampler.as_mut(), &mut at_start) };
    let finished_at = sys::now_ns();
    stop_all(&shared)?;
    let cpu_after = measure::cpu_times();
    if let Some(e) = spawn_error.or_else(|| shared.failure.lock().ok().and_then(|f| f.clone())) {
        return Err(ExecError::System(e));
    }
    let mut warnings = shared.warnings.lock().map(|w| w.clone()).unwrap_or_default();
    let mut results = shared.results.lock().map(|r| r.clone()).unwrap_or_default();
    let (note, cleanup) = count_migrations(trace, &mut results);
    warnings.extend(cleanup);
    let notes = vec![note];
    let duration_ns = finished_at.saturating_sub(t0).min(cfg.duration_ns);
    let mut report = report::build(&shared, results, stop_reason, duration_ns, &cpu_before, &cpu_after);
    if let Some(s) = sampler {
        let ids: Vec<u32> = report.tasks.iter().map(|t| t.id).collect();
        report.series = Some(s.finish(&ids));
    }
    Ok(Outcome { report, warnings, notes })
}

/// Sets each thread's migrations from the best source there is: the trace's `sched_migrate_task`
/// events, else the kernel's per-thread count, else the CPU changes sampled between ops; returns a
/// note naming the source (and why a better one was not used), and a warning if the trace instance
/// could not be removed.
fn count_migrations(
    trace: Option<Result<tracing::MigrationTrace, String>>,
    results: &mut [TaskResult],
) -> (String, Option<String>) {
    let mut cleanup = None;
    let mut instance = String::new();
    let traced = match trace {
        None => Err("not asked for".to_string()),
        Some(Err(why)) => Err(why),
        Some(Ok(mut t)) => {
            instance = t.name();
            let windows = results.iter().map(|r| (r.tid, r.measured)).collect();
            let counted = t.finish(&windows);
            cleanup = t.remove().err();
            counted
        }
    };
    let note = match traced {
        Ok(counts) => {
            for r in results.iter_mut() {
                r.migrations = counts.get(&r.tid).copied().unwrap_or(0);
            }
            format!("migrations: counted from tracefs sched:sched_migrate_task events (instance {instance})")
        }
        Err(why) if results.iter().all(|r| r.stat.nr_migrations.is_some()) => {
            for r in results.iter_mut() {
                r.migrations = r.stat.nr_migrations.unwrap_or(0);
            }
            format!("migrations: the kernel's se.nr_migrations from /proc/<tid>/sched (tracing: {why})")
        }
        Err(why) => format!(
            "migrations: sampled as CPU changes between ops (tracing: {why}; /proc/<tid>/sched has no \
             se.nr_migrations without CONFIG_SCHED_DEBUG)"
        ),
    };
    (note, cleanup)
}

/// Applies the timed affinity changes, takes the samples and waits for the stop condition; returns
/// the stop reason.
fn control(
    shared: &std::sync::Arc<Shared>,
    end: u64,
    mut sampler: Option<&mut sample::Sampler>,
    at_start: &mut Vec<(u32, Spawn)>,
) -> &'static str {
    let mut changes: Vec<_> = shared.w.affinity_changes.iter().collect();
    changes.sort_by_key(|a| a.at_ns);
    let mut next_change = 0;
    loop {
        let now = sys::now_ns();
        while next_change < changes.len() && shared.t0() + changes[next_change].at_ns <= now {
            let a = changes[next_change];
            let cpus = a.cpus.clone().unwrap_or_default();
            for (t, tid, _) in shared.live_tids() {
                if t == a.template {
                    if let Err(e) = sys::set_affinity(tid, &cpus) {
                        shared.warn(format!("taskset at {} ns: sched_setaffinity: {e}", a.at_ns));
                    }
                }
            }
            next_change += 1;
        }
        // The initial instances made at their start (`spawn_at_start`), latest last in the list.
        while at_start.last().is_some_and(|(_, s)| shared.t0() + s.delay_ns.unwrap_or(0) <= now) {
            let Some((id, mut s)) = at_start.pop() else { break };
            (s.delay_ns, s.forked_at_ns) = (None, sys::now_ns());
            if let Err(e) = runner::spawn_as(shared, s, id) {
                shared.fail(e);
                at_start.clear();
            }
        }
        if let Some(s) = sampler.as_deref_mut() {
            if shared.t0() + s.next_ns() <= now && now < end {
                s.sample(now - shared.t0(), &shared.live_ids());
            }
        }
        if sys::interrupted() {
            return "interrupted";
        }
        if shared.stop().load(Ordering::Relaxed) {
            return "error";
        }
        if now >= end {
            return "duration";
        }
        let Ok(live) = shared.live.lock() else { return "error" };
        let started = now >= shared.t0() && at_start.is_empty();
        match shared.w.stop {
            StopWhen::AllDone if started && live.foreground(&shared.w) == 0 => return "all_done",
            StopWhen::TemplateDone(t) if started && live.per_template[t as usize] == 0 => return "task_done",
            _ => {}
        }
        // Wake for the next affinity change, sample or delayed start, or the end; a thread's end, a
        // failure and Ctrl-C ring the doorbell. Nothing else: the controller (SCHED_FIFO) waking to
        // look would preempt a task on a workload CPU, which no simulated run has.
        let mut until = end;
        if let Some(a) = changes.get(next_change) {
            until = until.min(shared.t0() + a.at_ns);
        }
        if let Some(s) = sampler.as_deref() {
            until = until.min(shared.t0() + s.next_ns());
        }
        if let Some((_, s)) = at_start.last() {
            until = until.min(shared.t0() + s.delay_ns.unwrap_or(0));
        }
        drop(live);
        shared.live_bell.wait_until(until);
    }
}

/// Stops every thread and joins it: the stop flag, then repeated wake-ups of whatever a thread may
/// block on, until all have finished (or 10 s pass, an error).
fn stop_all(shared: &Shared) -> Result<(), ExecError> {
    shared.stop().store(true, Ordering::SeqCst);
    let deadline = sys::now_ns() + 10_000_000_000;
    loop {
        let live = shared.live.lock().map(|l| l.threads).unwrap_or(0);
        if live == 0 {
            break;
        }
        if sys::now_ns() > deadline {
            return Err(ExecError::System(format!("{live} thread(s) did not stop within 10 s")));
        }
        shared.objects.release_waiters(live);
        // A task process's own thread is its first (tid = pid): the signal goes to it, not to a
        // keeper thread of a forking one.
        for (_, tid, tgid) in shared.live_tids() {
            sys::wake(tgid, tid);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let handles: Vec<_> = shared.handles.lock().map(|mut h| std::mem::take(&mut *h)).unwrap_or_default();
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

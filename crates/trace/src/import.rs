//! A recording as a schedlab workload: one task template per traced thread, whose program replays
//! what the thread did and leaves every scheduling decision to the policy under test.
//!
//! Per thread, in time order:
//!
//! * the CPU time between two points of interest becomes one burst (`compute`, calibrated work that
//!   scales with the simulated CPU's speed and cache, or with `--bursts spin` wall-clock `spin`);
//!   preemptions inside a burst are dropped, since they are the recorded scheduler's decisions;
//! * blocking becomes a wait: on the thread's own semaphore (`wake-<thread>`) when another traced
//!   thread woke it, posted by that thread at the moment of the wakeup (so its burst is split there);
//!   otherwise (a timer, a device, an interrupt, an untraced or filtered-out task) a `sleep` for as
//!   long as it slept. A counting semaphore per woken thread keeps one post for one wait, so the
//!   replay cannot lose a wakeup or deadlock when it reorders them;
//! * a fork by a traced thread becomes a `fork` of the child's template (the child's template then
//!   has no instances of its own); an exit becomes `exit`;
//! * `prio` gives the class: nice = prio - 120, prio below 100 is SCHED_FIFO with rt_priority
//!   99 - prio; threads of one process (when the trace says: a tgid column, Perfetto's process tree,
//!   perf's pid/tid) share a `process`.
//!
//! Threads alive before the trace start when first seen; a thread still asleep at the end ends
//! there. The workload stops when every task is done (or after twice the recorded span plus a
//! second, a bound for a policy that starves someone).

use crate::stats::{class_of, thread_name};
use crate::timeline::{Mark, Recording, Run, Thread};
use schedlab_core::{Ns, NSEC_PER_SEC};
use schedlab_workload::{default_timer, Dist, GroupSpec, Op, Program, SemSpec, StopWhen, TaskSpec, Workload};

/// How CPU bursts replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BurstOp {
    /// Calibrated work (`compute`): takes the recorded time on a nominal-speed CPU with a warm cache,
    /// longer on slower CPUs and after migrations; for "what if" questions about the machine.
    #[default]
    Compute,
    /// Wall-clock busy time (`spin`): exactly the recorded time on any machine.
    Spin,
}

/// Which threads to keep. Empty lists keep everything; a thread is kept if it matches any entry.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Thread ids.
    pub pids: Vec<i32>,
    /// Process ids (thread groups).
    pub tgids: Vec<i32>,
    /// Substrings of the thread name.
    pub comms: Vec<String>,
    /// Also keep kernel threads that ran (by default, names such as `kworker/...`, `ksoftirqd/N`,
    /// `migration/N`, `rcu_*` and `swapper` are dropped: they are the traced kernel's, not the
    /// workload's).
    pub kernel_threads: bool,
}

/// Names the Linux kernel gives its own threads.
const KERNEL_THREADS: [&str; 12] = [
    "kworker/",
    "ksoftirqd/",
    "migration/",
    "rcu_",
    "rcuop/",
    "rcuog/",
    "kthreadd",
    "watchdog/",
    "idle_inject/",
    "cpuhp/",
    "irq/",
    "swapper",
];

impl Filter {
    /// Whether the filter keeps this thread.
    pub fn keeps(&self, t: &Thread) -> bool {
        if !self.kernel_threads && KERNEL_THREADS.iter().any(|k| t.comm.starts_with(k)) {
            return false;
        }
        if self.pids.is_empty() && self.tgids.is_empty() && self.comms.is_empty() {
            return true;
        }
        self.pids.contains(&t.pid)
            || self.tgids.contains(&t.tgid)
            || self.comms.iter().any(|c| t.comm.contains(c.as_str()))
    }
}

/// Options of an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The workload's name.
    pub name: String,
    /// How bursts replay.
    pub bursts: BurstOp,
    /// Which threads to keep.
    pub filter: Filter,
}

/// The result of an import.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The workload.
    pub workload: Workload,
    /// The workload as TOML, with a header saying where it came from and what was assumed.
    pub toml: String,
    /// Threads kept (one template each).
    pub nr_threads: usize,
    /// Threads dropped by the filter.
    pub nr_dropped: usize,
    /// Blocking intervals replayed as waits for a traced waker.
    pub nr_edges: usize,
    /// Blocking intervals replayed as sleeps.
    pub nr_sleeps: usize,
    /// Forks kept.
    pub nr_forks: usize,
}

/// CPU time of a thread up to a point, walking its runs once (points must come in time order).
struct CpuClock<'a> {
    runs: &'a [Run],
    next: usize,
    done: Ns,
}

impl CpuClock<'_> {
    fn upto(&mut self, t: Ns) -> Ns {
        while self.next < self.runs.len() && self.runs[self.next].to <= t {
            let r = self.runs[self.next];
            self.done += r.to - r.from;
            self.next += 1;
        }
        let partial = self.runs.get(self.next).map_or(0, |r| t.saturating_sub(r.from).min(r.to - r.from));
        self.done + partial
    }
}

/// Builds the workload of a recording.
pub fn import(rec: &Recording, opts: &ImportOptions) -> Result<Imported, String> {
    let keep: Vec<bool> = rec.threads.iter().map(|t| opts.filter.keeps(t)).collect();
    let kept: Vec<usize> = (0..rec.threads.len()).filter(|&i| keep[i]).collect();
    if kept.is_empty() {
        return Err("no thread of the trace passes the filter".into());
    }
    let mut template = vec![u32::MAX; rec.threads.len()];
    for (k, &i) in kept.iter().enumerate() {
        template[i] = k as u32;
    }
    let mut sem = vec![u32::MAX; rec.threads.len()];
    let mut sems: Vec<SemSpec> = Vec::new();
    for &i in &kept {
        let t = &rec.threads[i];
        let woken_by_traced = t
            .marks
            .iter()
            .any(|(_, m)| matches!(m, Mark::Block { until: Some(_), waker: Some(k), .. } if keep[*k]));
        if woken_by_traced {
            sem[i] = sems.len() as u32;
            sems.push(SemSpec { name: format!("wake-{}", thread_name(t)), initial: 0 });
        }
    }
    let forked_by_kept =
        |t: &Thread| matches!(t.origin, crate::timeline::Origin::Forked { parent } if keep[parent]);
    let (mut nr_edges, mut nr_sleeps, mut nr_forks) = (0, 0, 0);
    let mut tasks = Vec::with_capacity(kept.len());
    for &i in &kept {
        let t = &rec.threads[i];
        let mut marks = t.marks.clone();
        marks.sort_by_key(|m| m.0);
        let mut clock = CpuClock { runs: &t.runs, next: 0, done: 0 };
        let mut ops = Vec::new();
        let burst = |ops: &mut Vec<Op>, ns: Ns| {
            if ns > 0 {
                ops.push(match opts.bursts {
                    BurstOp::Compute => Op::Compute { work: Dist::Fixed(ns) },
                    BurstOp::Spin => Op::Spin { time: Dist::Fixed(ns) },
                });
            }
        };
        let mut cpu_before = 0;
        let mut ended = false;
        for &(ts, mark) in &marks {
            let c = clock.upto(ts);
            burst(&mut ops, c - cpu_before);
            cpu_before = c;
            match mark {
                Mark::Block { until: None, .. } => {
                    ended = true;
                    break;
                }
                Mark::Block { until: Some(_), waker: Some(k), .. } if keep[k] => {
                    ops.push(Op::SemWait(sem[i]));
                    nr_edges += 1;
                }
                Mark::Block { until: Some(u), .. } => {
                    ops.push(Op::Sleep { time: Dist::Fixed(u.saturating_sub(ts)) });
                    nr_sleeps += 1;
                }
                Mark::Wake { target } if keep[target] => ops.push(Op::SemPost(sem[target])),
                Mark::Fork { child } if keep[child] => {
                    ops.push(Op::Fork(template[child]));
                    nr_forks += 1;
                }
                Mark::Exit => {
                    ops.push(Op::Exit);
                    ended = true;
                    break;
                }
                Mark::Wake { .. } | Mark::Fork { .. } => {}
            }
        }
        if !ended {
            burst(&mut ops, clock.upto(rec.end_ns) - cpu_before);
        }
        if ops.is_empty() {
            ops.push(Op::Exit);
        }
        let (class, nice, rt_priority) = class_of(t.prio);
        let forked = forked_by_kept(t);
        let mut spec = TaskSpec::new(thread_name(t), Program { ops });
        spec.class = class;
        spec.nice = nice;
        spec.rt_priority = rt_priority;
        if forked {
            spec.instances = 0;
            if let crate::timeline::Origin::Forked { parent } = t.origin {
                spec.threads = rec.threads[parent].tgid == t.tgid;
            }
        } else {
            spec.start_ns = t.first_ns.saturating_sub(rec.start_ns);
            let siblings =
                kept.iter().filter(|&&j| rec.threads[j].tgid == t.tgid && !forked_by_kept(&rec.threads[j]));
            if siblings.count() > 1 {
                spec.process = Some(format!("pid-{}", t.tgid));
            }
        }
        tasks.push(spec);
    }
    let span = rec.span_ns();
    let w = Workload {
        name: opts.name.clone(),
        tasks,
        groups: vec![GroupSpec { name: "root".into(), parent: 0, shares: 1024 }],
        semaphores: sems,
        timers: vec![default_timer()],
        stop: StopWhen::AllDone,
        duration_ns: Some(span + span.max(NSEC_PER_SEC)),
        ..Workload::default()
    };
    w.validate().map_err(|e| format!("the imported workload is inconsistent (a bug): {e}"))?;
    let imported = Imported {
        nr_threads: kept.len(),
        nr_dropped: rec.threads.len() - kept.len(),
        nr_edges,
        nr_sleeps,
        nr_forks,
        toml: String::new(),
        workload: w,
    };
    let toml = format!("{}{}", header(rec, opts, &imported), schedlab_workload::to_toml(&imported.workload));
    Ok(Imported { toml, ..imported })
}

fn header(rec: &Recording, opts: &ImportOptions, im: &Imported) -> String {
    let mut h = String::new();
    let ms = |ns: Ns| format!("{:.3} ms", ns as f64 / 1e6);
    h.push_str(&format!("# Imported by `schedlab trace import` from a {} trace.\n", rec.format));
    h.push_str(&format!(
        "# Recorded: {} CPUs, {} from the first event to the last, {} events.\n",
        rec.nr_cpus,
        ms(rec.span_ns()),
        rec.nr_events
    ));
    h.push_str(&format!(
        "# Threads: {} kept, {} dropped (kernel threads and the filter); {} waits for a traced waker,\n\
         # {} sleeps (timers, devices, interrupts, untraced wakers), {} forks.\n",
        im.nr_threads, im.nr_dropped, im.nr_edges, im.nr_sleeps, im.nr_forks
    ));
    h.push_str(&format!(
        "# Bursts are recorded CPU time replayed as `{}`.{}\n",
        if opts.bursts == BurstOp::Spin { "spin" } else { "compute" },
        if rec.has_wakeups {
            ""
        } else {
            " The trace has no wakeup events: sleeps last until the switch-in."
        }
    ));
    for w in &rec.warnings {
        h.push_str(&format!("# Warning: {w}\n"));
    }
    h.push_str("# Not in a trace (see docs/traces.md): what a burst computed or waited on (locks, pipes),\n");
    h.push_str("# affinity, cgroups, SCHED_RR vs SCHED_FIFO, SCHED_BATCH/IDLE.\n\n");
    h
}

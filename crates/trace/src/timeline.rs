//! From events to threads: each thread's running intervals, waits, sleeps and the points that matter
//! for a replay (blocking, who woke it, forks, exit), reconstructed by replaying the events in time
//! order through a per-thread state machine (unseen, new, running, runnable, blocked, unknown, dead)
//! and a per-CPU "who runs here".
//!
//! What real traces throw at it, and what happens:
//!
//! * **Unsorted streams.** Per-CPU buffers are read one after the other (`trace-cmd report` merges
//!   them, a raw ring buffer or a Perfetto file need not): events are sorted by timestamp, keeping
//!   file order among equal timestamps (so each CPU's own order is kept).
//! * **Threads alive at trace start** (no fork record). A thread first seen leaving a CPU was
//!   running since that CPU's first event; first seen being switched in, it was runnable; first seen
//!   being woken, it was asleep since the trace began.
//! * **Lost events** (`[LOST n EVENTS]`, Perfetto's `lost_events`): the CPU's current task becomes
//!   unknown, its running interval is closed at the CPU's last event before the loss, and the next
//!   switch on that CPU starts over. A switch whose `prev` is not the task this CPU was known to run
//!   (events lost without a marker) is treated the same way. Both are counted in the warnings.
//! * **pid reuse.** A pid seen again after its thread exited, or forked again while alive, starts a
//!   new thread (a new generation of that pid).
//! * **Missing wakeup events.** A blocked thread switched in without a wakeup was woken at that
//!   moment by something unknown (its wakeup latency is then not measured).
//!
//! A wakeup's waker is the task running on the waking CPU, unless the event was recorded in
//! interrupt context (ftrace's flags column, Perfetto's `common_flags`), came from the idle task, or
//! the task is the woken one itself: then the wakeup has no task as its cause (a timer, a device).

use crate::event::{Event, Kind, PrevState, RawTrace, TaskRef};
use schedlab_core::Ns;
use schedlab_sim::Histogram;
use std::collections::HashMap;

/// A stretch of time a thread ran on one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Start, ns of the trace clock.
    pub from: Ns,
    /// End.
    pub to: Ns,
    /// The CPU.
    pub cpu: u32,
    /// How the thread left the CPU at `to`: still runnable (preempted, `R` or `R+`) or not (blocked
    /// or exited); `None` when it did not leave (still running at the trace's end, or its CPU lost
    /// events).
    pub left_runnable: Option<bool>,
}

/// Something in a thread's life a replay must reproduce, at a point in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The thread blocked (left the CPU asleep).
    Block {
        /// When it was woken (the `sched_waking`, else the switch-in); `None`: still asleep at the end.
        until: Option<Ns>,
        /// The thread that woke it, if a thread did.
        waker: Option<usize>,
        /// Uninterruptible sleep (`D`, typically I/O).
        uninterruptible: bool,
    },
    /// This thread woke `target` (the other side of a [`Mark::Block`] with this thread as waker).
    Wake {
        /// The woken thread.
        target: usize,
    },
    /// This thread created `child`.
    Fork {
        /// The new thread.
        child: usize,
    },
    /// The thread exited.
    Exit,
}

/// How a thread came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Alive when the trace began (or its creation was not recorded).
    Alive,
    /// Created during the trace by this thread, at this time.
    Forked {
        /// The parent thread.
        parent: usize,
    },
}

/// One thread (one generation of a pid) and its accounting.
#[derive(Clone, Debug)]
pub struct Thread {
    /// Thread id.
    pub pid: i32,
    /// Which generation of this pid (0 first; more after pid reuse).
    pub generation: u32,
    /// Thread group (process) id; the pid itself unless the trace says.
    pub tgid: i32,
    /// Last name seen.
    pub comm: String,
    /// Last kernel priority seen.
    pub prio: Option<i32>,
    /// How it came to be.
    pub origin: Origin,
    /// When it was first alive in the trace, ns of the trace clock.
    pub first_ns: Ns,
    /// When it exited, if it did.
    pub exited_ns: Option<Ns>,
    /// Running intervals, in time order.
    pub runs: Vec<Run>,
    /// Points in time order (a [`Mark::Block`] at the time it blocked).
    pub marks: Vec<(Ns, Mark)>,
    /// Time running, ns.
    pub run_ns: Ns,
    /// Time runnable, not running, ns.
    pub wait_ns: Ns,
    /// Time blocked, ns.
    pub sleep_ns: Ns,
    /// Longest runnable stretch, ns.
    pub max_wait_ns: Ns,
    /// Context switches away while blocking or exiting.
    pub nvcsw: u64,
    /// Context switches away while still runnable (preempted, yielded).
    pub nivcsw: u64,
    /// Times it was switched in.
    pub nr_switch_in: u64,
    /// Times it was switched out to the idle task.
    pub nr_out_to_idle: u64,
    /// Migrations (`sched_migrate_task` between different CPUs, else changes of CPU between runs).
    pub nr_migrations: u64,
    /// Wakeups.
    pub nr_wakeups: u64,
    /// Time of the last wakeup.
    pub last_wakeup_ns: Option<Ns>,
    /// Wakeup latency: from the wakeup until it ran.
    pub latency: Histogram,
    /// CPU it last ran on.
    pub last_cpu: Option<u32>,
    state: St,
    exiting: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Not seen yet (alive before the trace).
    Unseen,
    /// Forked, not yet runnable.
    New,
    Running {
        cpu: u32,
        since: Ns,
    },
    Runnable {
        since: Ns,
        woke: Option<Ns>,
    },
    Blocked {
        since: Ns,
        mark: usize,
    },
    /// Lost track (lost events).
    Unknown,
    Dead,
}

/// Per-CPU accounting.
#[derive(Clone, Debug, Default)]
pub struct CpuAcct {
    /// Time a thread ran, ns.
    pub busy_ns: Ns,
    /// Context switches.
    pub nr_switches: u64,
    curr: Option<usize>,
    known: bool,
    first_ts: Option<Ns>,
    last_ts: Ns,
}

/// A whole recording, reconstructed.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The input format.
    pub format: &'static str,
    /// CPUs (the file's own count, else the highest CPU seen plus one).
    pub nr_cpus: u32,
    /// First event, ns of the trace clock.
    pub start_ns: Ns,
    /// Last event.
    pub end_ns: Ns,
    /// Threads in order of appearance.
    pub threads: Vec<Thread>,
    /// CPUs by id.
    pub cpus: Vec<CpuAcct>,
    /// Events read.
    pub nr_events: usize,
    /// Whether the trace has wakeup events (else wakeups are inferred from switches).
    pub has_wakeups: bool,
    /// Whether migrations come from `sched_migrate_task` (else from changes of CPU).
    pub has_migrate_events: bool,
    /// What did not add up, one line per kind with its count and first place.
    pub warnings: Vec<String>,
}

impl Recording {
    /// The recording's length, ns.
    pub fn span_ns(&self) -> Ns {
        self.end_ns - self.start_ns
    }
}

/// Counts problems of one kind and keeps the first place.
#[derive(Default)]
struct Warn(Vec<(&'static str, usize, String)>);

impl Warn {
    fn add(&mut self, what: &'static str, first: impl FnOnce() -> String) {
        match self.0.iter_mut().find(|w| w.0 == what) {
            Some(w) => w.1 += 1,
            None => self.0.push((what, 1, first())),
        }
    }
}

/// Reconstructs the threads of a trace.
pub fn build(raw: RawTrace) -> Recording {
    let mut events = raw.events;
    events.sort_by_key(|e| e.ts); // stable: file order among equal timestamps
    let nr_cpus =
        raw.nr_cpus.unwrap_or(0).max(events.iter().map(|e| e.cpu.saturating_add(1)).max().unwrap_or(1));
    let mut b = Builder {
        threads: Vec::new(),
        by_pid: HashMap::new(),
        cpus: vec![CpuAcct::default(); nr_cpus as usize],
        tgids: raw.tgids.into_iter().collect(),
        warn: Warn::default(),
        has_migrate_events: events.iter().any(|e| matches!(e.kind, Kind::Migrate { .. })),
        start: events.first().map_or(0, |e| e.ts),
    };
    for e in &events {
        let c = &mut b.cpus[e.cpu as usize];
        c.first_ts.get_or_insert(e.ts);
    }
    for e in &events {
        b.event(e);
        b.cpus[e.cpu as usize].last_ts = e.ts;
    }
    let end = events.last().map_or(0, |e| e.ts);
    for th in &mut b.threads {
        match th.state {
            St::Running { cpu, since } => {
                th.runs.push(Run { from: since, to: end, cpu, left_runnable: None });
                th.run_ns += end - since;
                b.cpus[cpu as usize].busy_ns += end - since;
            }
            St::Runnable { since, .. } => add_wait(th, end - since),
            St::Blocked { since, .. } => th.sleep_ns += end - since,
            _ => {}
        }
    }
    Recording {
        format: raw.format,
        nr_cpus,
        start_ns: b.start,
        end_ns: end,
        has_wakeups: events.iter().any(|e| matches!(e.kind, Kind::Wake { .. })),
        has_migrate_events: b.has_migrate_events,
        nr_events: events.len(),
        threads: b.threads,
        cpus: b.cpus,
        warnings: b
            .warn
            .0
            .into_iter()
            .map(|(what, n, first)| format!("{what}: {n} (first at {first})"))
            .collect(),
    }
}

fn add_wait(th: &mut Thread, d: Ns) {
    th.wait_ns += d;
    th.max_wait_ns = th.max_wait_ns.max(d);
}

struct Builder {
    threads: Vec<Thread>,
    by_pid: HashMap<i32, usize>,
    cpus: Vec<CpuAcct>,
    tgids: HashMap<i32, i32>,
    warn: Warn,
    has_migrate_events: bool,
    start: Ns,
}

impl Builder {
    fn new_thread(&mut self, t: &TaskRef, origin: Origin, ts: Ns) -> usize {
        let generation = self.threads.iter().filter(|x| x.pid == t.pid).count() as u32;
        let tgid = self.tgids.get(&t.pid).copied().unwrap_or(t.pid);
        self.threads.push(Thread {
            pid: t.pid,
            generation,
            tgid,
            comm: t.comm.clone(),
            prio: t.prio,
            origin,
            first_ns: ts,
            exited_ns: None,
            runs: Vec::new(),
            marks: Vec::new(),
            run_ns: 0,
            wait_ns: 0,
            sleep_ns: 0,
            max_wait_ns: 0,
            nvcsw: 0,
            nivcsw: 0,
            nr_switch_in: 0,
            nr_out_to_idle: 0,
            nr_migrations: 0,
            nr_wakeups: 0,
            last_wakeup_ns: None,
            latency: Histogram::new(),
            last_cpu: None,
            state: if matches!(origin, Origin::Forked { .. }) { St::New } else { St::Unseen },
            exiting: false,
        });
        let i = self.threads.len() - 1;
        self.by_pid.insert(t.pid, i);
        i
    }

    /// The live thread of a pid (a new one if the pid is new or its thread has exited).
    fn thread(&mut self, t: &TaskRef, e: &Event) -> usize {
        let i = match self.by_pid.get(&t.pid) {
            Some(&i) if self.threads[i].state != St::Dead => i,
            Some(_) => {
                self.warn.add("pid reused without a fork record", || e.loc.to_string());
                self.new_thread(t, Origin::Alive, e.ts)
            }
            None => self.new_thread(t, Origin::Alive, e.ts),
        };
        let th = &mut self.threads[i];
        if !t.comm.is_empty() {
            th.comm.clone_from(&t.comm);
        }
        if t.prio.is_some() {
            th.prio = t.prio;
        }
        i
    }

    /// Ends thread `i`'s running interval on `cpu` at `to` (if it is running there).
    fn stop_running(&mut self, i: usize, cpu: u32, to: Ns) -> bool {
        let th = &mut self.threads[i];
        match th.state {
            St::Running { cpu: c, since } if c == cpu => {
                let to = to.max(since);
                th.runs.push(Run { from: since, to, cpu, left_runnable: None });
                th.run_ns += to - since;
                self.cpus[cpu as usize].busy_ns += to - since;
                true
            }
            St::Unseen => {
                // Running since before the trace: since this CPU's first event.
                let since = self.cpus[cpu as usize].first_ts.unwrap_or(to).min(to);
                th.first_ns = since;
                th.runs.push(Run { from: since, to, cpu, left_runnable: None });
                th.run_ns += to - since;
                self.cpus[cpu as usize].busy_ns += to - since;
                true
            }
            _ => false,
        }
    }

    /// The CPU lost track of its current task (lost events): close its run at the CPU's last event.
    fn lose_cpu(&mut self, cpu: u32) {
        let c = &self.cpus[cpu as usize];
        if let (true, Some(i)) = (c.known, c.curr) {
            let last = c.last_ts;
            if self.stop_running(i, cpu, last) {
                self.threads[i].state = St::Unknown;
            }
        }
        let c = &mut self.cpus[cpu as usize];
        c.known = false;
        c.curr = None;
    }

    fn event(&mut self, e: &Event) {
        let t = e.ts;
        if !matches!(e.kind, Kind::Lost { .. }) {
            self.resync(e);
        }
        match &e.kind {
            Kind::Lost { .. } => {
                self.warn.add("events lost by the tracer", || format!("{} on CPU {}", e.loc, e.cpu));
                self.lose_cpu(e.cpu);
            }
            Kind::Switch { prev, prev_state, next } => self.switch(e, prev, *prev_state, next),
            Kind::Wake { task, .. } => {
                if task.pid <= 0 {
                    return;
                }
                let w = self.thread(task, e);
                let st = self.threads[w].state;
                match st {
                    St::Blocked { since, mark } => self.wake(w, since, Some(mark), e),
                    St::Unseen => {
                        // Asleep since before the trace.
                        let start = self.start;
                        self.threads[w].first_ns = start;
                        self.threads[w]
                            .marks
                            .push((start, Mark::Block { until: None, waker: None, uninterruptible: false }));
                        let mark = self.threads[w].marks.len() - 1;
                        self.wake(w, start, Some(mark), e);
                    }
                    St::New | St::Unknown => {
                        self.threads[w].state = St::Runnable { since: t, woke: None };
                    }
                    _ => {} // already runnable or running: a second wakeup event (sched_wakeup)
                }
            }
            Kind::WakeupNew { task, .. } => {
                if task.pid <= 0 {
                    return;
                }
                let w = self.thread(task, e);
                let th = &mut self.threads[w];
                if matches!(th.state, St::New | St::Unseen | St::Unknown) {
                    if th.state == St::Unseen {
                        th.first_ns = t;
                    }
                    th.state = St::Runnable { since: t, woke: None };
                }
            }
            Kind::Fork { parent, child } => {
                if child.pid <= 0 {
                    return;
                }
                if let Some(&old) = self.by_pid.get(&child.pid) {
                    if self.threads[old].state != St::Dead {
                        self.warn
                            .add("pid forked again while alive (exit not recorded)", || e.loc.to_string());
                        self.threads[old].state = St::Dead;
                    }
                }
                let p = (parent.pid > 0).then(|| self.thread(parent, e));
                let origin = p.map_or(Origin::Alive, |parent| Origin::Forked { parent });
                let c = self.new_thread(child, origin, t);
                if let Some(p) = p {
                    self.threads[p].marks.push((t, Mark::Fork { child: c }));
                }
                if origin == Origin::Alive {
                    self.threads[c].state = St::New;
                }
            }
            // The thread keeps its identity; the next switch carries its new name.
            Kind::Exec { .. } => {}
            // Only for placing unrecorded switches (`resync`).
            Kind::Runtime { .. } => {}
            Kind::Exit { task } => {
                if task.pid > 0 {
                    let i = self.thread(task, e);
                    self.threads[i].exiting = true;
                }
            }
            Kind::Migrate { task, orig_cpu, dest_cpu } => {
                if task.pid > 0 && orig_cpu != dest_cpu {
                    let i = self.thread(task, e);
                    self.threads[i].nr_migrations += 1;
                }
            }
        }
    }

    /// Thread `w` blocked since `since` is woken by event `e`.
    fn wake(&mut self, w: usize, since: Ns, mark: Option<usize>, e: &Event) {
        let t = e.ts;
        let cpu = &self.cpus[e.cpu as usize];
        let candidate = if cpu.known {
            cpu.curr
        } else {
            e.current.filter(|&p| p > 0).and_then(|p| self.by_pid.get(&p).copied())
        };
        let waker = candidate.filter(|&k| {
            k != w
                && e.irq != Some(true)
                && matches!(self.threads[k].state, St::Running { cpu, .. } if cpu == e.cpu)
        });
        let th = &mut self.threads[w];
        th.sleep_ns += t.saturating_sub(since);
        th.nr_wakeups += 1;
        th.last_wakeup_ns = Some(t);
        th.state = St::Runnable { since: t, woke: Some(t) };
        if let Some(m) = mark {
            if let Mark::Block { until, waker: wk, .. } = &mut th.marks[m].1 {
                *until = Some(t);
                *wk = waker;
            }
        }
        if let Some(k) = waker {
            self.threads[k].marks.push((t, Mark::Wake { target: w }));
        }
    }

    fn switch(&mut self, e: &Event, prev: &TaskRef, prev_state: PrevState, next: &TaskRef) {
        let t = e.ts;
        let c = e.cpu;
        self.cpus[c as usize].nr_switches += 1;
        // The task leaving.
        let known = self.cpus[c as usize].known;
        let curr = self.cpus[c as usize].curr;
        let out = if prev.pid > 0 {
            let p = self.thread(prev, e);
            if known && curr != Some(p) {
                self.warn.add("switch from a task the CPU was not known to run (events lost)", || {
                    format!("{} on CPU {c}", e.loc)
                });
                self.lose_cpu(c);
                self.threads[p].state = St::Unknown;
            }
            Some(p)
        } else if prev.pid < 0 {
            curr.filter(|_| known)
        } else {
            if known && curr.is_some() {
                self.warn.add("switch from idle on a CPU that was running a task (events lost)", || {
                    format!("{} on CPU {c}", e.loc)
                });
                self.lose_cpu(c);
            }
            None
        };
        if let Some(p) = out {
            let ran = self.stop_running(p, c, t);
            let th = &mut self.threads[p];
            if next.pid == 0 {
                th.nr_out_to_idle += 1;
            }
            if ran {
                th.last_cpu = Some(c);
            }
            // After `sched_process_exit` a task may still be preempted (`R+`) before it leaves
            // for good (`X`); a sleep after it is taken as the end (old kernels' TASK_DEAD in raw
            // Perfetto states reads as a sleep).
            let dead = prev_state == PrevState::Dead
                || (th.exiting && matches!(prev_state, PrevState::Blocked { .. }));
            if ran {
                let runnable = !dead && !matches!(prev_state, PrevState::Blocked { .. });
                if let Some(r) = th.runs.last_mut() {
                    r.left_runnable = Some(runnable);
                }
            }
            if dead {
                th.nvcsw += 1;
                th.state = St::Dead;
                th.exited_ns = Some(t);
                th.marks.push((t, Mark::Exit));
            } else if let PrevState::Blocked { uninterruptible } = prev_state {
                th.nvcsw += 1;
                th.marks.push((t, Mark::Block { until: None, waker: None, uninterruptible }));
                th.state = St::Blocked { since: t, mark: th.marks.len() - 1 };
            } else {
                th.nivcsw += 1;
                th.state = St::Runnable { since: t, woke: None };
            }
        }
        // The task starting.
        let n = (next.pid > 0).then(|| self.thread(next, e));
        self.switch_in(n, c, t, e);
    }

    /// Thread `n` (or the idle task) starts running on CPU `c` at `t`.
    fn switch_in(&mut self, n: Option<usize>, c: u32, t: Ns, e: &Event) {
        if let Some(n) = n {
            let st = self.threads[n].state;
            match st {
                St::Runnable { since, woke } => {
                    let th = &mut self.threads[n];
                    add_wait(th, t.saturating_sub(since));
                    if let Some(w) = woke {
                        th.latency.record(t.saturating_sub(w));
                    }
                }
                St::Unseen | St::New => self.threads[n].first_ns = t,
                St::Blocked { since, mark } => {
                    // Woken without a wakeup event: at this switch, by something unknown.
                    let th = &mut self.threads[n];
                    th.sleep_ns += t.saturating_sub(since);
                    th.nr_wakeups += 1;
                    th.last_wakeup_ns = Some(t);
                    th.state = St::Runnable { since: t, woke: None };
                    if let Mark::Block { until, .. } = &mut th.marks[mark].1 {
                        *until = Some(t);
                    }
                }
                St::Running { cpu, .. } => {
                    self.warn.add("switch to a task already running on another CPU (events lost)", || {
                        format!("{} on CPU {c}", e.loc)
                    });
                    let last = self.cpus[cpu as usize].last_ts;
                    self.stop_running(n, cpu, last);
                    self.cpus[cpu as usize].known = false;
                    self.cpus[cpu as usize].curr = None;
                }
                St::Unknown | St::Dead => {}
            }
            let th = &mut self.threads[n];
            if let (Some(l), false) = (th.last_cpu, self.has_migrate_events) {
                if l != c {
                    th.nr_migrations += 1;
                }
            }
            th.last_cpu = Some(c);
            th.nr_switch_in += 1;
            th.state = St::Running { cpu: c, since: t };
        }
        let cpu = &mut self.cpus[c as usize];
        cpu.curr = n;
        cpu.known = true;
    }

    /// Checks the event's current-task column against who this CPU is known to run. Some switches
    /// are not recorded (seen on Linux 6.18: a task woken by an interrupt on its idle CPU runs with
    /// no `sched_switch` from the idle task); the column then says who runs: the switch is inferred
    /// at the CPU's previous event, or the task's wakeup if later, or, when this event is the task's
    /// own `sched_stat_runtime`, that long before it. On a CPU whose current task was lost, the
    /// column re-synchronises it at this event.
    fn resync(&mut self, e: &Event) {
        let Some(p) = e.current.filter(|&p| p >= 0) else { return };
        let c = e.cpu;
        let cpu = &self.cpus[c as usize];
        let curr_pid = cpu.curr.map_or(0, |i| self.threads[i].pid);
        if cpu.known && curr_pid == p {
            return;
        }
        let cpu_known = cpu.known;
        let at = if cpu.known { cpu.last_ts } else { e.ts };
        if cpu.known {
            self.warn.add("switches not recorded, inferred from the current-task column", || {
                format!("{} on CPU {c}", e.loc)
            });
            if let Some(i) = cpu.curr {
                if self.stop_running(i, c, at) {
                    self.threads[i].state = St::Unknown;
                }
            }
        }
        let n = (p > 0).then(|| self.thread(&TaskRef { pid: p, comm: String::new(), prio: None }, e));
        // A `sched_stat_runtime` of the task itself says how long it has been running: since the
        // switch, for a task that was not running before (tracers also drop wakeups: perf does on
        // this machine).
        let mut at = match &e.kind {
            Kind::Runtime { task, runtime_ns } if task.pid == p && cpu_known => {
                at.max(e.ts.saturating_sub(*runtime_ns))
            }
            _ => at,
        };
        if let Some(n) = n {
            match self.threads[n].state {
                St::Running { .. } | St::Dead => {
                    let c = &mut self.cpus[c as usize];
                    c.known = false;
                    c.curr = None;
                    return;
                }
                // It cannot have started before it was woken (by another CPU, say).
                St::Runnable { since, .. } => at = at.max(since),
                _ => {}
            }
        }
        self.switch_in(n, c, at, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lines: &[&str]) -> Recording {
        build(crate::text::read("t", &(lines.join("\n") + "\n")).unwrap())
    }

    fn sw(cpu: u32, ts: &str, prev: (&str, i32), state: &str, next: (&str, i32)) -> String {
        format!(
            "  {}-{} [{cpu:03}] d..2. {ts}: sched_switch: prev_comm={} prev_pid={} prev_prio=120 prev_state={state} ==> next_comm={} next_pid={} next_prio=120",
            prev.0, prev.1, prev.0, prev.1, next.0, next.1
        )
    }

    const IDLE: (&str, i32) = ("swapper/0", 0);

    #[test]
    fn unsorted_per_cpu_streams_give_the_same_threads() {
        let a = sw(0, "1.000", IDLE, "R", ("a", 10));
        let b = sw(1, "1.001", ("swapper/1", 0), "R", ("b", 11));
        let c = sw(0, "1.004", ("a", 10), "S", IDLE);
        let d = sw(1, "1.006", ("b", 11), "R+", ("swapper/1", 0));
        let sorted = rec(&[&a, &b, &c, &d]);
        let cpu_by_cpu = rec(&[&a, &c, &b, &d]);
        for r in [&sorted, &cpu_by_cpu] {
            let t: Vec<_> = r.threads.iter().map(|t| (t.pid, t.run_ns, t.nvcsw, t.nivcsw)).collect();
            assert_eq!(t, vec![(10, 4_000_000, 1, 0), (11, 5_000_000, 0, 1)]);
        }
    }

    #[test]
    fn a_reused_pid_is_a_new_thread() {
        let r = rec(&[
            &sw(0, "1.000", IDLE, "R", ("a", 10)),
            &sw(0, "1.002", ("a", 10), "X", IDLE),
            &sw(0, "1.005", IDLE, "R", ("b", 10)),
            &sw(0, "1.006", ("b", 10), "S", IDLE),
        ]);
        let t: Vec<_> = r.threads.iter().map(|t| (t.pid, t.generation, t.comm.as_str(), t.run_ns)).collect();
        assert_eq!(t, vec![(10, 0, "a", 2_000_000), (10, 1, "b", 1_000_000)]);
        assert_eq!(r.threads[0].exited_ns, Some(1_002_000_000));
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    }

    #[test]
    fn lost_events_close_the_current_run_at_the_cpus_last_event() {
        let r = rec(&[
            &sw(0, "1.000", IDLE, "R", ("a", 10)),
            "  a-10 [000] d..3. 1.001: sched_waking: comm=b pid=11 prio=120 target_cpu=001",
            "CPU:0 [LOST 40 EVENTS]",
            &sw(0, "1.009", ("c", 12), "S", IDLE),
        ]);
        let a = r.threads.iter().find(|t| t.pid == 10).unwrap();
        assert_eq!(a.run_ns, 1_000_000, "a ran until the last event before the loss");
        let c = r.threads.iter().find(|t| t.pid == 12).unwrap();
        assert_eq!(c.run_ns, 0, "when c started is unknown");
        assert!(r.warnings[0].starts_with("events lost by the tracer: 1"), "{:?}", r.warnings);
    }

    #[test]
    fn an_unrecorded_switch_is_placed_by_the_tasks_own_runtime_event() {
        // `h` sleeps at 1.000; its wakeup and the switch to it are not recorded; at 1.010 the kernel
        // charges it 2 ms: it has been running since 1.008.
        let r = rec(&[
            &sw(0, "1.000", ("h", 10), "S", IDLE),
            "  h-10 [000] d..2. 1.010: sched_stat_runtime: comm=h pid=10 runtime=2000000 [ns]",
            &sw(0, "1.011", ("h", 10), "S", IDLE),
        ]);
        let h = &r.threads[0];
        assert_eq!(h.runs.last().map(|r| (r.from, r.to)), Some((1_008_000_000, 1_011_000_000)));
        assert_eq!(h.nvcsw, 2);
        assert_eq!(h.sleep_ns, 8_000_000, "asleep from 1.000 to 1.008");
        // Without the runtime event, the switch is placed at the CPU's previous event.
        let r = rec(&[
            &sw(0, "1.000", ("h", 10), "S", IDLE),
            "  <idle>-0 [000] d.h2. 1.004: sched_waking: comm=h pid=10 prio=120 target_cpu=000",
            "  h-10 [000] d..3. 1.010: sched_waking: comm=x pid=20 prio=120 target_cpu=001",
            &sw(0, "1.011", ("h", 10), "S", IDLE),
        ]);
        let h = r.threads.iter().find(|t| t.pid == 10).unwrap();
        assert_eq!(h.runs.last().map(|r| r.from), Some(1_004_000_000));
        assert_eq!(h.marks.iter().filter(|m| matches!(m.1, Mark::Wake { .. })).count(), 1, "h woke x");
        let blk = h.marks.iter().find(|m| matches!(m.1, Mark::Block { .. })).unwrap();
        assert_eq!(
            blk.1,
            Mark::Block { until: Some(1_004_000_000), waker: None, uninterruptible: false },
            "an IRQ wakeup has no waker"
        );
    }
}

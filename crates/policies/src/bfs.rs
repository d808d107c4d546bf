//! # BFS, the Brain Fuck Scheduler (Con Kolivas), as in the Linux 3.0 series
//!
//! Source: kernel/sched_bfs.c of a Linux 3.0 tree carrying BFS (the generation seed 000 sec. 3.2
//! describes, "up to 3.0"; read in Ezekeel/GLaDOS-nexus-s-ics through `search`): `prio_ratios`,
//! `prio_deadline_diff`, `time_slice_expired`, `check_deadline`, `update_cpu_clock`,
//! `task_running_tick`, `schedule`, `swap_sticky`, `earliest_deadline_task`, `try_preempt`,
//! `can_preempt`, `resched_best_mask`, `ttwu_activate`, `sched_fork`, `wake_up_new_task`,
//! `iso_tick`, `no_iso_tick`, `test_ret_isorefractory`; ../shared/design/POLICIES.md sec. 6.
//!
//! One global run queue for all CPUs, no load balancer. Every task carries a *virtual deadline* in
//! `niffies` (a monotonic nanosecond clock) and a time slice. The slice is `rr_interval` (6 ms) counted
//! in BFS's units of 1,024 ns (`MS_TO_US` and `NS_TO_US` are shifts by 10), so it lasts 6.29 ms; when it
//! runs out the task gets a new one and the deadline `now + prio_ratios[nice] x rr_interval x 2^20 /
//! 128` ns, where `prio_ratios` grows by 10 % per nice level from 128 (nice -20: 6.3 ms ahead, nice 0:
//! 41.1 ms, nice 19: 250.1 ms). The deadline is kept across sleep, so a task that slept comes back with
//! an early deadline.
//!
//! * **Pick.** Real-time tasks first (by priority, FIFO within one), then SCHED_ISO, then normal, then
//!   SCHED_IDLEPRIO tasks, each class by earliest deadline (the first queued wins ties). A task made
//!   *sticky* to another CPU counts its deadline `longest_deadline_diff` (nice 19's, 250 ms) later.
//! * **Tick.** The slice is charged at every tick and every `schedule()`; the task is rescheduled when
//!   less than 100 units (`RESCHED_US`) are left, or when at most half a jiffy is left if it was
//!   scheduled in the first half of a tick (`dither`). `schedule()` gives a new slice and deadline to a
//!   task below 100 units, and to a SCHED_BATCH task at every reschedule.
//! * **Sticky.** A task descheduled while runnable, with others waiting, becomes its CPU's sticky task
//!   (the previous one loses the flag); picking it anywhere, waking it, or running an RT task next
//!   clears it.
//! * **Wakeup.** A woken task goes to an idle CPU it may use, the best by cache locality and idleness
//!   (`resched_best_mask`'s ranking); with none idle it preempts the CPU running the worst task (worst
//!   priority class, then latest deadline) if it beats it (`can_preempt`). A sync wakeup preempts nothing
//!   unless a CPU is idle.
//! * **Fork.** The child starts on its parent's CPU with half the parent's slice and the parent's
//!   deadline (a parent with less than 200 units left gives its child a fresh slice and deadline and
//!   reschedules); the parent is rescheduled so the child usually runs first, unless a CPU is idle,
//!   where the child then goes.
//! * **SCHED_ISO.** Every tick that runs an RT task or an ISO task as ISO adds 100 to `iso_ticks` (up to
//!   `ISO_PERIOD x 100`, ISO_PERIOD = 5 s x HZ x CPUs); every other busy tick takes away
//!   `iso_ticks / ISO_PERIOD + 1`. Above `ISO_PERIOD x iso_cpu` ISO tasks are *refractory* and run as
//!   normal tasks until the count falls below `ISO_PERIOD x (iso_cpu x 115 / 128)`.
//!
//! Simplifications (docs/policies/bfs.md has the table): `niffies` is the simulated clock; a CPU's
//! frequency scaling (`scaling_rq`, which makes a sticky task invisible to other CPUs) is not read, so
//! sticky tasks are always biased, never hidden; an idle CPU already handed a task counts as busy for
//! the next wakeup of the same instant (the kernel's idle map clears when that CPU schedules, within
//! microseconds); a sticky task displaced by another is not handed to an idle CPU
//! (`resched_closest_idle`: with a global queue and every CPU work-conserving no CPU is idle while it
//! waits); a parent whose slice ran out at fork while its child went to an idle CPU reschedules at its
//! next tick; the global run-queue lock is not modelled (its contention is BFS's known cost on many
//! CPUs), but the pick's scan is reported as tasks examined and charged by the cost model.

use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Level, Ns, PolicyStat, SchedClass, SchedPolicy,
    SwitchReason, TaskId, TaskState as RunState, WakeInfo, WakeKind, WorkConservation, NSEC_PER_MSEC,
};

/// BFS parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BfsParams {
    /// `rr_interval`: the slice, ns (BFS keeps it in whole ms). Default 6 ms.
    pub rr_interval_ns: Ns,
    /// `sched_iso_cpu`: the share of CPU SCHED_ISO tasks may use as soft real time, percent. Default 70.
    pub iso_cpu_pct: u64,
}

impl Default for BfsParams {
    fn default() -> Self {
        BfsParams { rr_interval_ns: 6 * NSEC_PER_MSEC, iso_cpu_pct: 70 }
    }
}

impl Params for BfsParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo { key: "rr_interval_ns", default: "6000000", help: "the time slice" },
            ParamInfo {
                key: "iso_cpu_pct",
                default: "70",
                help: "CPU share SCHED_ISO tasks may use before being treated as normal",
            },
        ]
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "rr_interval_ns" => self.rr_interval_ns = parse_u64(value, 100_000..=1_000_000_000)?,
            "iso_cpu_pct" => self.iso_cpu_pct = parse_u64(value, 0..=100)?,
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// `prio_ratios[40]`: 128, then +10 % per nice level, in integer arithmetic as BFS computes it.
pub fn prio_ratios() -> [u64; 40] {
    let mut r = [0u64; 40];
    r[0] = 128;
    for i in 1..40 {
        r[i] = r[i - 1] * 11 / 10;
    }
    r
}

/// `RESCHED_US`: a slice with less than this many units left is as good as expired.
const RESCHED_US: i64 = 100;
/// BFS priorities: 0-99 real time, then these (`ISO_PRIO`, `NORMAL_PRIO`, `IDLE_PRIO`, `PRIO_LIMIT`:
/// the idle task).
const ISO_PRIO: u32 = 100;
const NORMAL_PRIO: u32 = 101;
const IDLE_PRIO: u32 = 102;
const PRIO_LIMIT: u32 = 103;

/// The `CPUIDLE_*` ranking bits of `resched_best_mask`: the lowest total wins.
const CPUIDLE_DIFF_THREAD: u32 = 1;
const CPUIDLE_DIFF_CORE: u32 = 2;
const CPUIDLE_CACHE_BUSY: u32 = 4;
const CPUIDLE_DIFF_CPU: u32 = 8;
const CPUIDLE_THREAD_BUSY: u32 = 16;
const CPUIDLE_DIFF_NODE: u32 = 32;

/// What BFS keeps per task.
#[derive(Clone, Copy, Debug)]
struct TaskState {
    deadline: Ns,
    /// `time_slice`, in units of 1,024 ns.
    time_slice: i64,
    /// `p->prio` as `enqueue_task` last set it.
    prio: u32,
    sticky: bool,
    /// `task_cpu(p)`: where it last ran (the engine's CPU of a queued task is only where it waits).
    cpu: CpuId,
    queued: bool,
    /// The preemption `try_preempt` decided at its wakeup or fork, for `check_preempt`.
    preempts: bool,
}

impl Default for TaskState {
    fn default() -> Self {
        TaskState {
            deadline: 0,
            time_slice: 0,
            prio: NORMAL_PRIO,
            sticky: false,
            cpu: CpuId(0),
            queued: false,
            preempts: false,
        }
    }
}

/// What BFS keeps per CPU (`struct rq`): the running task's copy of its scheduling data.
#[derive(Clone, Copy, Debug)]
struct Rq {
    curr: Option<TaskId>,
    /// The task that stopped here last (`prev` of the next `schedule()`).
    prev: Option<TaskId>,
    /// `rq_prio`: the running task's priority, `PRIO_LIMIT` when idle (or the priority of a task handed
    /// to it by `preempt_rq`).
    prio: u32,
    deadline: Ns,
    time_slice: i64,
    /// `rq_last_ran`: when the slice was last charged.
    last_ran: Ns,
    last_tick: Ns,
    /// Scheduled in the first half of a tick.
    dither: bool,
    sticky: Option<TaskId>,
    /// `rq->preempt`: the task `resched_best_idle` sent here, taken first.
    preempt: Option<TaskId>,
    /// The parent's slice ran out at a fork: reschedule it at the next tick.
    resched: bool,
}

impl Default for Rq {
    fn default() -> Self {
        Rq {
            curr: None,
            prev: None,
            prio: PRIO_LIMIT,
            deadline: 0,
            time_slice: 0,
            last_ran: 0,
            last_tick: 0,
            dither: false,
            sticky: None,
            preempt: None,
            resched: false,
        }
    }
}

/// The BFS policy.
pub struct Bfs {
    p: BfsParams,
    ratios: [u64; 40],
    /// The global queue, in queueing order (`grq.queue`: FIFO within a priority).
    queue: Vec<TaskId>,
    states: Vec<TaskState>,
    rqs: Vec<Rq>,
    /// `grq.iso_ticks` and `grq.iso_refractory`.
    iso_ticks: u64,
    iso_refractory: bool,
    ncpus: u64,
    hz: u64,
    tick_ns: Ns,
    nr_running: usize,
    nr_examined: u64,
    nr_sticky: u64,
}

impl Bfs {
    /// A new instance.
    pub fn new(p: BfsParams) -> Bfs {
        Bfs {
            p,
            ratios: prio_ratios(),
            queue: Vec::new(),
            states: Vec::new(),
            rqs: Vec::new(),
            iso_ticks: 0,
            iso_refractory: false,
            ncpus: 1,
            hz: 1000,
            tick_ns: 1_000_000,
            nr_running: 0,
            nr_examined: 0,
            nr_sticky: 0,
        }
    }

    /// `prio_deadline_diff`: `prio_ratios[nice] x rr_interval x (MS_TO_NS(1) / 128)` ns, with
    /// `MS_TO_NS(1)` = 2^20.
    pub fn deadline_diff(&self, nice: i8) -> Ns {
        self.ratios[(nice.clamp(-20, 19) + 20) as usize] * self.p.rr_interval_ns * 8192 / NSEC_PER_MSEC
    }

    /// `timeslice()`: `MS_TO_US(rr_interval)` = rr_interval ms x 1,024 units of 1,024 ns.
    pub fn full_slice_units(&self) -> i64 {
        (self.p.rr_interval_ns * 1024 / NSEC_PER_MSEC) as i64
    }

    /// A task's virtual deadline (tests).
    pub fn deadline_of(&self, t: TaskId) -> Ns {
        self.states[t.idx()].deadline
    }

    /// A task's slice left, units of 1,024 ns (tests; a running task's is its CPU's copy).
    pub fn time_slice_of(&self, t: TaskId) -> i64 {
        let st = &self.states[t.idx()];
        match self.rqs.get(st.cpu.idx()) {
            Some(rq) if rq.curr == Some(t) => rq.time_slice,
            _ => st.time_slice,
        }
    }

    /// Whether a task is sticky to the CPU it last ran on (tests).
    pub fn is_sticky(&self, t: TaskId) -> bool {
        self.states[t.idx()].sticky
    }

    /// `longest_deadline_diff`: nice 19's deadline offset, the sticky bias.
    fn longest_deadline_diff(&self) -> Ns {
        self.deadline_diff(19)
    }

    /// `ISO_PERIOD`: the ISO accounting window in ticks (5 s x HZ x CPUs, + 1).
    fn iso_period(&self) -> u64 {
        5 * self.hz * self.ncpus + 1
    }

    /// `normal_prio`, then `enqueue_task`'s choice: a SCHED_ISO task runs at `ISO_PRIO` unless ISO is
    /// refractory, a SCHED_IDLEPRIO one at `IDLE_PRIO`, everything else not real time at `NORMAL_PRIO`.
    fn queue_prio(&self, ctx: &Ctx, t: TaskId) -> u32 {
        let info = ctx.task(t);
        match info.class {
            SchedClass::Fifo | SchedClass::Rr => 99 - info.rt_priority.min(99) as u32,
            SchedClass::Iso if !self.iso_refractory => ISO_PRIO,
            SchedClass::Idle => IDLE_PRIO,
            _ => NORMAL_PRIO,
        }
    }

    /// `time_slice_expired`: a new slice and deadline.
    fn time_slice_expired(&mut self, ctx: &Ctx, t: TaskId) {
        let d = self.deadline_diff(ctx.task(t).nice);
        let full = self.full_slice_units();
        let st = &mut self.states[t.idx()];
        st.time_slice = full;
        st.deadline = ctx.now + d;
    }

    /// `update_cpu_clock`'s slice accounting: the ns since the last charge, shifted down by 10 (one
    /// jiffy or more without a charge counts 1 ns: `niffy_diff`), off the running slice.
    fn charge(&mut self, cpu: CpuId, now: Ns) {
        let rq = &mut self.rqs[cpu.idx()];
        let mut diff = now.saturating_sub(rq.last_ran);
        if diff < 1 || diff > 2 * self.tick_ns {
            diff = 1;
        }
        rq.time_slice -= (diff >> 10) as i64;
        rq.last_ran = now;
    }

    /// A CPU idle for the placement of a wakeup: running nothing, and handed nothing yet.
    fn idle(ctx: &Ctx, c: CpuId) -> bool {
        ctx.is_idle(c)
    }

    /// `cpu_locality` of `other` seen from `cpu`: 0 itself, 1 an SMT sibling, 2 a core sharing its
    /// cache, 3 another package of the node (of the machine without NUMA), 4 another node.
    fn locality(ctx: &Ctx, cpu: CpuId, other: CpuId) -> u32 {
        match ctx.topo.level(cpu, other) {
            Level::Same => 0,
            Level::Smt => 1,
            Level::Llc => 2,
            Level::Node => 3,
            Level::Socket | Level::Machine => {
                if ctx.numa {
                    4
                } else {
                    3
                }
            }
        }
    }

    /// `resched_best_mask` over the idle CPUs `t` may use: the lowest `CPUIDLE_*` ranking seen from
    /// its last CPU (ties: the lowest number), the task's own CPU if none ranks; that CPU takes `t` first
    /// (`preempt_rq`).
    fn best_idle(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        let from = self.states[t.idx()].cpu;
        let mut best = from;
        let mut best_ranking = CPUIDLE_DIFF_NODE
            | CPUIDLE_THREAD_BUSY
            | CPUIDLE_DIFF_CPU
            | CPUIDLE_CACHE_BUSY
            | CPUIDLE_DIFF_CORE
            | CPUIDLE_DIFF_THREAD;
        for c in ctx.task(t).allowed.iter().filter(|&c| Self::idle(ctx, c)) {
            self.nr_examined += 1;
            let loc = Self::locality(ctx, from, c);
            let mut ranking = 0;
            if loc > 3 {
                ranking |= CPUIDLE_DIFF_NODE;
            } else if loc > 2 {
                ranking |= CPUIDLE_DIFF_CPU;
            }
            if loc == 2 {
                ranking |= CPUIDLE_DIFF_CORE;
            }
            if !ctx.topo.span(Level::Llc, c).iter().all(|s| Self::idle(ctx, s)) {
                ranking |= CPUIDLE_CACHE_BUSY;
            }
            if loc == 1 {
                ranking |= CPUIDLE_DIFF_THREAD;
            }
            if !ctx.topo.span(Level::Smt, c).iter().all(|s| Self::idle(ctx, s)) {
                ranking |= CPUIDLE_THREAD_BUSY;
            }
            if ranking < best_ranking {
                best = c;
                if ranking == 0 {
                    break;
                }
                best_ranking = ranking;
            }
        }
        let prio = self.states[t.idx()].prio;
        let rq = &mut self.rqs[best.idx()];
        rq.preempt = Some(t);
        rq.prio = prio;
        best
    }

    /// `try_preempt` (after `ttwu_activate`'s sync rule): the CPU `t` is sent to and whether it preempts
    /// the task running there.
    fn try_preempt(&mut self, ctx: &Ctx, t: TaskId, sync: bool) -> (CpuId, bool) {
        self.states[t.idx()].sticky = false;
        let info = ctx.task(t);
        let any_idle = info.allowed.iter().any(|c| Self::idle(ctx, c));
        let own = self.states[t.idx()].cpu;
        let own = if info.allowed.contains(own) { own } else { info.allowed.first().expect("non-empty") };
        if any_idle {
            return (self.best_idle(ctx, t), true);
        }
        if sync || info.class == SchedClass::Idle {
            return (own, false);
        }
        // The CPU running the worst task: a worse priority, or at an equal one the latest deadline.
        let st = self.states[t.idx()];
        let (mut highest_prio, mut latest_deadline, mut target) = (st.prio, 0, own);
        for c in info.allowed.iter() {
            self.nr_examined += 1;
            let rq = &self.rqs[c.idx()];
            if rq.prio < highest_prio {
                continue;
            }
            if rq.prio > highest_prio || rq.deadline > latest_deadline {
                latest_deadline = rq.deadline;
                highest_prio = rq.prio;
                target = c;
            }
        }
        let rq = &self.rqs[target.idx()];
        // can_preempt: a better priority, or the same one and a strictly earlier deadline.
        let preempts = st.prio < rq.prio || (st.prio == rq.prio && st.deadline < rq.deadline);
        (target, preempts)
    }

    /// `swap_sticky` for `prev`, descheduled runnable on `cpu` while other tasks wait: it becomes the
    /// CPU's sticky task (an RT task does not), and the previous sticky task loses the flag.
    fn swap_sticky(&mut self, ctx: &Ctx, cpu: CpuId, prev: TaskId) {
        let rq = &mut self.rqs[cpu.idx()];
        if let Some(s) = rq.sticky {
            if s == prev {
                self.states[prev.idx()].sticky = true;
                return;
            }
            self.states[s.idx()].sticky = false;
        }
        if ctx.task(prev).class.is_rt() {
            self.rqs[cpu.idx()].sticky = None;
        } else {
            self.states[prev.idx()].sticky = true;
            self.rqs[cpu.idx()].sticky = Some(prev);
        }
    }

    /// `earliest_deadline_task` for `cpu`: the index in the queue of the task it takes.
    fn earliest_deadline_task(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<usize> {
        if let Some(p) = self.rqs[cpu.idx()].preempt.take() {
            // (An affinity change since it was sent here may have excluded this CPU.)
            if let Some(i) = self.queue.iter().position(|&x| x == p) {
                if ctx.task(p).allowed.contains(cpu) {
                    return Some(i);
                }
            }
        }
        let bias = self.longest_deadline_diff();
        // (priority, effective deadline, queue index): RT by priority then queue order; the others by
        // priority class then the first strictly earliest deadline.
        let mut best: Option<(u32, Ns, usize)> = None;
        for (i, &t) in self.queue.iter().enumerate() {
            self.nr_examined += 1;
            if !ctx.task(t).allowed.contains(cpu) {
                continue;
            }
            let st = &self.states[t.idx()];
            let dl = if st.prio < ISO_PRIO {
                0
            } else if st.sticky && st.cpu != cpu {
                st.deadline + bias
            } else {
                st.deadline
            };
            if best.is_none_or(|(p, d, _)| (st.prio, dl) < (p, d)) {
                best = Some((st.prio, dl, i));
            }
        }
        best.map(|b| b.2)
    }

    /// Queues `t` at the tail of its priority's list (`enqueue_task`).
    fn enqueue_task(&mut self, ctx: &Ctx, t: TaskId) {
        let prio = self.queue_prio(ctx, t);
        let st = &mut self.states[t.idx()];
        st.prio = prio;
        st.queued = true;
        self.queue.push(t);
    }
}

impl SchedPolicy for Bfs {
    fn name(&self) -> &str {
        "bfs"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.ncpus = ctx.nr_cpus() as u64;
        self.hz = ctx.hz();
        self.tick_ns = ctx.tick_ns;
        self.rqs = vec![Rq::default(); ctx.nr_cpus()];
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.states.len() <= t.idx() {
            self.states.resize(t.idx() + 1, TaskState::default());
        }
        let info = ctx.task(t);
        let parent = info.parent.filter(|&p| ctx.task(p).state != RunState::Exited);
        // sched_fork: the parent's running slice and deadline are its CPU's copies. A task without a
        // parent is forked by an idle shell (docs/policies/README.md): a full slice, and a deadline
        // from long ago, taken as now.
        let (cpu, slice, deadline, running) = match parent {
            Some(p) => {
                let pc = ctx.task(p).cpu;
                let rq = &self.rqs[pc.idx()];
                if rq.curr == Some(p) {
                    (pc, rq.time_slice, rq.deadline, Some(p))
                } else {
                    let ps = &self.states[p.idx()];
                    (pc, ps.time_slice, ps.deadline, None)
                }
            }
            None => (info.cpu, self.full_slice_units(), ctx.now, None),
        };
        let give = |me: &mut Self, slice: i64| match (parent, running) {
            (Some(_), Some(_)) => me.rqs[cpu.idx()].time_slice = slice,
            (Some(p), None) => me.states[p.idx()].time_slice = slice,
            _ => {}
        };
        self.states[t.idx()] = TaskState { cpu, ..TaskState::default() };
        if slice >= 2 * RESCHED_US {
            give(self, slice / 2);
            let st = &mut self.states[t.idx()];
            st.time_slice = slice / 2;
            st.deadline = deadline;
        } else {
            // The parent is out of slice: it reschedules, the child starts afresh.
            give(self, 0);
            if running.is_some() {
                self.rqs[cpu.idx()].resched = true;
            }
            self.time_slice_expired(ctx, t);
        }
        self.states[t.idx()].prio = self.queue_prio(ctx, t);
        // wake_up_new_task: on the parent's CPU, rescheduling the parent (the child, queued first with
        // the same deadline, runs first) unless an idle CPU takes the child.
        let any_idle = info.allowed.iter().any(|c| Self::idle(ctx, c));
        if running.is_some() && !any_idle && info.allowed.contains(cpu) {
            self.states[t.idx()].preempts = true;
            return cpu;
        }
        let (target, preempts) = self.try_preempt(ctx, t, false);
        self.states[t.idx()].preempts = preempts;
        target
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        self.states[t.idx()].prio = self.queue_prio(ctx, t);
        let (target, preempts) = self.try_preempt(ctx, t, wake.sync);
        self.states[t.idx()].preempts = preempts;
        target
    }

    fn enqueue(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        self.enqueue_task(ctx, t);
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, _why: DequeueReason) {
        if let Some(i) = self.queue.iter().position(|&x| x == t) {
            self.queue.remove(i);
        }
        self.states[t.idx()].queued = false;
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let now = ctx.now;
        let rq = &mut self.rqs[cpu.idx()];
        rq.dither = now.saturating_sub(rq.last_tick) <= self.tick_ns / 2;
        let prev = rq.prev.take();
        rq.curr = None;
        rq.prio = PRIO_LIMIT;
        let i = self.earliest_deadline_task(ctx, cpu)?;
        let t = self.queue.remove(i);
        let st = &mut self.states[t.idx()];
        st.queued = false;
        st.sticky = false;
        st.cpu = cpu;
        let st = *st;
        if st.prio < ISO_PRIO {
            // unstick_task: an RT task is next; the task that stopped here is not kept for this CPU.
            self.rqs[cpu.idx()].sticky = None;
            if let Some(p) = prev {
                self.states[p.idx()].sticky = false;
            }
        }
        let rq = &mut self.rqs[cpu.idx()];
        rq.curr = Some(t);
        rq.time_slice = st.time_slice;
        rq.deadline = st.deadline;
        rq.last_ran = now;
        rq.prio = st.prio;
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        // schedule(): charge the slice, take the task's data back from the CPU, check_deadline.
        self.charge(cpu, ctx.now);
        let rq = &mut self.rqs[cpu.idx()];
        let (slice, deadline) = (rq.time_slice, rq.deadline);
        // pick_next reads the stopped task as `prev` (unstick_task); the CPU runs nothing meanwhile.
        rq.prev = rq.curr.take();
        rq.prio = PRIO_LIMIT;
        let st = &mut self.states[t.idx()];
        st.time_slice = slice;
        st.deadline = deadline;
        if st.time_slice < RESCHED_US || ctx.task(t).class == SchedClass::Batch {
            self.time_slice_expired(ctx, t);
        }
        if !why.still_runnable() {
            self.nr_running -= 1;
            return;
        }
        if ctx.task(t).allowed.contains(cpu) && !self.queue.is_empty() {
            self.swap_sticky(ctx, cpu, t);
            self.nr_sticky += 1;
        }
        self.enqueue_task(ctx, t);
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        self.charge(cpu, ctx.now);
        let class = ctx.task(curr).class;
        let period = self.iso_period();
        let limit = period * (self.p.iso_cpu_pct * 115 / 128);
        let rq_prio = self.rqs[cpu.idx()].prio;
        // task_running_tick: ISO accounting (an RT task counts as ISO work too).
        if rq_prio < ISO_PRIO || (class == SchedClass::Iso && !self.iso_refractory) {
            if self.iso_ticks <= period * 100 - 100 {
                self.iso_ticks += 100;
            }
        } else if self.iso_ticks > 0 {
            // no_iso_tick
            self.iso_ticks -= self.iso_ticks / period + 1;
            if self.iso_refractory && self.iso_ticks < limit {
                self.iso_refractory = false;
            }
        }
        if class == SchedClass::Iso {
            // test_ret_isorefractory: 10 % hysteresis (115/128).
            if !self.iso_refractory {
                if self.iso_ticks > period * self.p.iso_cpu_pct {
                    self.iso_refractory = true;
                }
            } else if self.iso_ticks < limit {
                self.iso_refractory = false;
            }
            if self.iso_refractory && rq_prio == ISO_PRIO {
                self.rqs[cpu.idx()].time_slice = 0; // runs on as a normal task
            }
        }
        let half_jiffy_units = (1_000_000 / self.hz / 2) as i64;
        let rq = &mut self.rqs[cpu.idx()];
        rq.last_tick = ctx.now;
        let resched = std::mem::take(&mut rq.resched);
        if class == SchedClass::Fifo {
            return resched;
        }
        if rq.dither {
            if rq.time_slice > half_jiffy_units {
                return resched;
            }
            rq.time_slice = 0;
        } else if rq.time_slice >= RESCHED_US {
            return resched;
        }
        true
    }

    fn check_preempt(
        &mut self,
        _ctx: &Ctx,
        _cpu: CpuId,
        _curr: TaskId,
        woken: TaskId,
        _kind: WakeKind,
    ) -> bool {
        std::mem::take(&mut self.states[woken.idx()].preempts)
    }

    /// `set_user_nice`: an RT task only stores the level. Otherwise a queued task leaves the queue,
    /// its deadline moves by the difference of the two levels' deadline offsets
    /// (`adjust_deadline`), and it is queued again at the tail; a lower nice then tries to preempt
    /// (`try_preempt`: an idle CPU, or the one running the worst task). A running task's deadline
    /// is adjusted on its CPU too (`reset_rq_task`), and a higher nice reschedules it.
    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, old_nice: i8) -> Option<CpuId> {
        let info = ctx.task(t);
        if info.class.is_rt() {
            return None;
        }
        let queued = self.states[t.idx()].queued;
        if queued {
            if let Some(i) = self.queue.iter().position(|&x| x == t) {
                self.queue.remove(i);
            }
        }
        let (new_diff, old_diff) = (self.deadline_diff(info.nice), self.deadline_diff(old_nice));
        let adjust = |d: Ns| (d + new_diff).saturating_sub(old_diff);
        let st = &mut self.states[t.idx()];
        st.deadline = adjust(st.deadline);
        if queued {
            self.enqueue_task(ctx, t);
            if info.nice >= old_nice {
                return None;
            }
            // try_preempt decides where the task goes; it does not make it lose its stickiness.
            let sticky = self.states[t.idx()].sticky;
            let (target, preempts) = self.try_preempt(ctx, t, false);
            self.states[t.idx()].sticky = sticky;
            return preempts.then_some(target);
        }
        if info.state == schedlab_core::TaskState::Running {
            let rq = &mut self.rqs[info.cpu.idx()];
            rq.deadline = adjust(rq.deadline);
            return (info.nice > old_nice).then_some(info.cpu);
        }
        None
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_iso_ticks",
                value: self.iso_ticks,
                help: "SCHED_ISO usage in the rolling window (100 per tick)",
            },
            PolicyStat {
                name: "nr_sticky",
                value: self.nr_sticky,
                help: "tasks made sticky to their CPU when descheduled runnable",
            },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(st) = self.states.get(t.idx()) {
            out.push(("bfs deadline ns", st.deadline as i64));
            out.push(("bfs time_slice units", self.time_slice_of(t)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::TestWorld;

    const MS: Ns = NSEC_PER_MSEC;

    /// `prio_deadline_diff` = prio_ratios[nice] x 6 x 8192 ns: prio_ratios 128 (nice -20), 836 (nice 0),
    /// 5089 (nice 19) by 128 x 11 / 10 per step in integers.
    #[test]
    fn deadlines_per_nice_level() {
        let b = Bfs::new(BfsParams::default());
        assert_eq!(b.deadline_diff(-20), 128 * 6 * 8192);
        assert_eq!(b.deadline_diff(0), 836 * 6 * 8192);
        assert_eq!(b.deadline_diff(19), 5089 * 6 * 8192);
        assert_eq!(b.full_slice_units(), 6 * 1024);
    }

    #[test]
    fn earliest_deadline_first_and_sleepers_keep_their_deadline() {
        let mut w = TestWorld::new(1);
        let mut b = Bfs::new(BfsParams::default());
        b.init(&w.ctx());
        let (a, c, d) = (w.add_task(0), w.add_task(-10), w.add_task(10));
        for t in [a, c, d] {
            w.start(&mut b, t);
        }
        // Forked by the idle shell at time 0, all three carry its deadline 0 and half its slice:
        // queue order decides.
        assert_eq!((b.deadline_of(d), b.time_slice_of(d)), (0, 3072));
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(a));
        w.stop(&mut b, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(c));
        let kept = b.deadline_of(a);
        w.advance(&mut b, 3 * MS);
        w.wake(&mut b, a, CpuId(0));
        assert_eq!(b.deadline_of(a), kept, "the deadline survives the sleep");
        // c's deadline is 0 too and a's is not earlier: no preemption.
        assert!(!b.check_preempt(&w.ctx(), CpuId(0), c, a, WakeKind::Wakeup));
    }

    /// The slice is 6,144 units of 1,024 ns, charged 976 units per 1 ms tick. Picked at a tick (in its
    /// first half: `dither`) the task is rescheduled at the tick that leaves at most 500 units (half a
    /// jiffy): 6,144 - 6 x 976 = 288, the sixth. Picked 0.6 ms into a tick, the first tick charges
    /// 400,000 >> 10 = 390 and the task runs until fewer than 100 units are left: 5,754 - 5 x 976 = 874
    /// at the sixth tick, -102 at the seventh. The expiry then gives a new slice and deadline.
    #[test]
    fn the_slice_is_charged_in_1024_ns_units_and_ends_at_a_tick() {
        for (start, ticks_run) in [(0, 6), (600_000, 7)] {
            let mut w = TestWorld::new(1);
            let mut b = Bfs::new(BfsParams::default());
            b.init(&w.ctx());
            let a = w.add_task(0);
            w.start(&mut b, a);
            b.states[a.idx()].time_slice = 6 * 1024;
            w.now = start;
            w.pick(&mut b, CpuId(0));
            for k in 1..=ticks_run {
                w.now = k * MS;
                let resched = b.tick(&w.ctx(), CpuId(0), a);
                assert_eq!(resched, k == ticks_run, "start {start}: tick {k}");
            }
            w.stop(&mut b, CpuId(0), SwitchReason::Preempted);
            assert_eq!(b.time_slice_of(a), 6 * 1024);
            assert_eq!(b.deadline_of(a), ticks_run * MS + b.deadline_diff(0));
        }
    }

    /// `swap_sticky`: A, descheduled on CPU 0 while B waits, is sticky to CPU 0. With deadlines 10 ms
    /// (A) and 50 ms (B), CPU 1 counts A's as 10 + 250.1 ms and takes B; CPU 0 takes A.
    #[test]
    fn a_preempted_task_sticks_to_its_cpu() {
        let mut w = TestWorld::new(2);
        let mut b = Bfs::new(BfsParams::default());
        b.init(&w.ctx());
        let (a, bb) = (w.add_task(0), w.add_task(0));
        w.start(&mut b, a);
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(a));
        w.start(&mut b, bb);
        b.states[bb.idx()].deadline = 50 * MS;
        b.rqs[0].deadline = 10 * MS;
        w.now = 2 * MS;
        w.stop(&mut b, CpuId(0), SwitchReason::Preempted);
        assert!(b.is_sticky(a));
        assert_eq!(w.pick(&mut b, CpuId(1)), Some(bb));
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(a));
        assert!(!b.is_sticky(a), "taking a task clears the flag");
    }

    /// `try_preempt` with every CPU busy: the woken task (deadline 150 ms) goes to the CPU running the
    /// latest deadline (200 ms, CPU 1) and preempts it; a sync wakeup preempts nothing; with CPU 2 idle
    /// it goes there.
    #[test]
    fn a_wakeup_preempts_the_latest_deadline_or_takes_an_idle_cpu() {
        let mut w = TestWorld::new(3);
        let mut b = Bfs::new(BfsParams::default());
        b.init(&w.ctx());
        let (x, y, z, t) = (w.add_task(0), w.add_task(0), w.add_task(0), w.add_task(0));
        for (task, cpu) in [(x, 0), (y, 1), (z, 2), (t, 0)] {
            w.start(&mut b, task);
            assert_eq!(w.pick(&mut b, CpuId(cpu)), Some(task));
        }
        w.stop(&mut b, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut b, CpuId(0)), None);
        w.start(&mut b, x);
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(x));
        b.rqs[0].deadline = 100 * MS;
        b.rqs[1].deadline = 200 * MS;
        b.rqs[2].deadline = 120 * MS;
        b.states[t.idx()].deadline = 150 * MS;
        let wake = |sync| WakeInfo {
            waker_cpu: CpuId(0),
            waker: Some(x),
            sync,
            wait: schedlab_core::WaitKind::Futex,
        };
        w.tasks[t.idx()].state = RunState::Runnable;
        assert_eq!(b.select_cpu(&w.ctx(), t, &wake(false)), CpuId(1));
        assert!(b.check_preempt(&w.ctx(), CpuId(1), y, t, WakeKind::Wakeup));
        assert_eq!(b.select_cpu(&w.ctx(), t, &wake(true)), CpuId(0), "its own CPU");
        assert!(!b.check_preempt(&w.ctx(), CpuId(0), x, t, WakeKind::Wakeup));
        let zt = w.stop(&mut b, CpuId(2), SwitchReason::Blocked);
        assert_eq!((zt, w.pick(&mut b, CpuId(2))), (z, None));
        assert_eq!(b.select_cpu(&w.ctx(), t, &wake(true)), CpuId(2), "an idle CPU even for sync");
    }

    /// `sched_fork`: a running parent with a full slice (6,144 units) gives its child half, keeps half
    /// and shares its deadline; with no CPU idle the child stays on the parent's CPU and the parent is
    /// rescheduled. A parent with fewer than 200 units left gives the child a fresh slice and deadline
    /// and is rescheduled at its tick.
    #[test]
    fn fork_shares_the_slice_and_deadline_and_the_child_runs_first() {
        let mut w = TestWorld::new(1);
        let mut b = Bfs::new(BfsParams::default());
        b.init(&w.ctx());
        let p = w.add_task(0);
        w.start(&mut b, p);
        assert_eq!(w.pick(&mut b, CpuId(0)), Some(p));
        b.rqs[0].time_slice = 6144;
        b.rqs[0].deadline = 77 * MS;
        let c = w.add_task(0);
        w.tasks[c.idx()].parent = Some(p);
        assert_eq!(w.start(&mut b, c), CpuId(0));
        assert_eq!((b.time_slice_of(p), b.time_slice_of(c), b.deadline_of(c)), (3072, 3072, 77 * MS));
        assert!(b.check_preempt(&w.ctx(), CpuId(0), p, c, WakeKind::Fork));
        b.rqs[0].time_slice = 150;
        w.now = 5 * MS;
        let d = w.add_task(0);
        w.tasks[d.idx()].parent = Some(p);
        w.start(&mut b, d);
        assert_eq!((b.time_slice_of(d), b.deadline_of(d)), (6144, 5 * MS + b.deadline_diff(0)));
        assert_eq!(b.time_slice_of(p), 0);
    }
}

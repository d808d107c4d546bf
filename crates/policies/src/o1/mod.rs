//! # The Linux O(1) scheduler (2.6.22)
//!
//! Source: Linux 2.6.22 kernel/sched.c (`static_prio_timeslice`, `effective_prio`, `recalc_task_prio`,
//! `task_running_tick`, `expired_starving`, `schedule`, `sched_fork`, `wake_up_new_task`, `sched_exit`,
//! `sys_sched_yield`, `load_balance`, `idle_balance`); seed 003 sec. 2.5; ../shared/design/POLICIES.md
//! sec. 3.
//!
//! Each CPU has two priority arrays, *active* and *expired*, each a bitmap over 140 priorities with a
//! FIFO list per priority (0-99 real time, 100-139 = 120 + nice). A CPU runs the head of the best
//! non-empty list of the active array; when the active array empties, the arrays swap. Every decision
//! is constant time.
//!
//! * Time slices depend on the static priority: 800 ms at nice -20, 100 ms at nice 0, 5 ms at nice 19
//!   (`max(X x (140 - static) / 20, 5 ms)`, X = 400 ms below nice 0, 100 ms otherwise).
//! * Interactivity: `sleep_avg` grows by the time slept (capped at 1 s; one long sleep lifts a user task
//!   only to the interactive ceiling; after an uninterruptible sleep, such as a disk wait, the credit
//!   stops at that ceiling) and shrinks by the time run divided by the current bonus. A task woken by
//!   another task has 30 % of its run-queue wait credited as sleep when it is picked, one woken by an
//!   interrupt (a timer, a device) all of it (ON_RUNQUEUE_WEIGHT). The bonus
//!   `sleep_avg x 10 / 1 s - 5` moves the dynamic priority up to 5 levels either way. A task is
//!   *interactive* when its priority is at least DELTA(nice) levels better than its static priority
//!   (nice 0 needs a bonus of 2, i.e. `sleep_avg` >= 700 ms).
//! * When a slice ends the task gets a new slice and goes to the expired array, unless it is
//!   interactive and the expired array is not starving (`expired_starving`: a better static priority
//!   waits there, or it has waited longer than 1 s x nr_running) — then it goes back to the active
//!   array. Interactive tasks are round-robined every TIMESLICE_GRANULARITY (10 ms x 2^(max(10 -
//!   bonus, 1) - 1), x the CPU count). Slices and granularities are whole jiffies, as in the kernel.
//! * A woken task preempts when its priority is better (not after a sync wakeup onto the waker's CPU).
//!   Yield sends a normal task to the expired array. Fork splits the parent's remaining slice with the
//!   child, puts the child one bonus level below the parent and rounds the parent down to its level
//!   (CHILD_PENALTY, PARENT_PENALTY), and runs a new process first on the parent's CPU; an exiting
//!   child still in its first slice returns it to the parent. A task without a parent is forked by an
//!   idle nice-0 shell (docs/policies/README.md).
//! * A preempted task keeps its place at the head of its list (the running task stays queued in
//!   2.6.22); only the tick (slice or granularity end) or a yield sends it to the tail.
//! * Placement: a woken task goes to the waker's CPU when the wake-affine test passes (sync wakeups
//!   discount the waker), else stays on its previous CPU, and moves to an idle SMT sibling of a CPU
//!   running one task (`wake_idle`); a child starts on its parent's CPU (2.6.22 balances at fork only
//!   across NUMA nodes).
//! * Balancing per sched domain with 2.6.22's parameters and group powers (runqueue.rs): the busiest
//!   group over its capacity by the `cpu_load[]` tick averages of weighted load
//!   (`load_weight = timeslice x 128 / 100 ms`), the imbalance and `small_imbalance` of
//!   `find_busiest_group`, the busiest queue by raw load; `move_tasks` takes the expired array first,
//!   best priority first, each list from the tail, skipping running and cache-hot tasks (ran within
//!   2.5 ms) until balancing has failed `cache_nice_tries` times; a CPU going idle balances at once
//!   (`idle_balance`); after repeated failures the busiest CPU's migration thread pushes a task
//!   (active balance).
//!
//! Simplifications (docs/policies/o1.md has the table): `cache_hot_time` is 2.5 ms at every level
//! (2.6.22 measures it at boot); a periodic balancing pass ends at the first domain that moved tasks
//! (the moves apply after the hook returns); idle CPUs balance on the engine's nohz kick.

pub(crate) mod runqueue;
#[cfg(test)]
mod tests_balance;

use runqueue::{Runqueues, TaskView, MAX_PRIO};
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, TaskState, WakeInfo, WakeKind, WorkConservation, NSEC_PER_SEC,
};

const MAX_RT_PRIO: usize = 100;
const MAX_SLEEP_AVG: Ns = NSEC_PER_SEC;
const STARVATION_LIMIT: Ns = NSEC_PER_SEC;
const MAX_BONUS: i64 = 10;
const INTERACTIVE_DELTA: i64 = 2;
const CHILD_PENALTY: i64 = 95;
const PARENT_PENALTY: i64 = 100;
const ON_RUNQUEUE_WEIGHT: u64 = 30;
const EXIT_WEIGHT: u64 = 3;
/// `SCHED_LOAD_SCALE` of 2.6.22.
const LOAD_SCALE: u64 = 128;

/// `PRIO_TO_LOAD_WEIGHT(static_prio)`: the slice in jiffies x SCHED_LOAD_SCALE / DEF_TIMESLICE.
pub(crate) fn prio_load_weight(static_prio: usize, tick_ns: Ns) -> u64 {
    timeslice_ns(static_prio, tick_ns) / tick_ns * LOAD_SCALE / def_timeslice_jiffies(tick_ns)
}

/// `RTPRIO_TO_LOAD_WEIGHT(rt_priority)`: `PRIO_TO_LOAD_WEIGHT(MAX_RT_PRIO)` + `LOAD_WEIGHT(rp)`.
pub(crate) fn rt_load_weight(rt_priority: u64, tick_ns: Ns) -> u64 {
    prio_load_weight(MAX_RT_PRIO, tick_ns) + rt_priority * LOAD_SCALE / def_timeslice_jiffies(tick_ns)
}

/// Timer ticks per second for a tick length (HZ).
fn hz_of(tick_ns: Ns) -> u64 {
    (NSEC_PER_SEC + tick_ns / 2) / tick_ns.max(1)
}

/// `DEF_TIMESLICE` in jiffies: `100 * HZ / 1000`.
fn def_timeslice_jiffies(tick_ns: Ns) -> u64 {
    (100 * hz_of(tick_ns) / 1000).max(1)
}

/// `static_prio_timeslice(static_prio)`, counted in jiffies as the kernel does
/// (`SCALE_PRIO(DEF_TIMESLICE x 4 or x 1, prio)`, at least `MIN_TIMESLICE = max(5 * HZ / 1000, 1)`), in
/// ns: at HZ 250 a nice-10 slice is 12 jiffies (48 ms), not 50 ms.
pub fn timeslice_ns(static_prio: usize, tick_ns: Ns) -> Ns {
    let def = def_timeslice_jiffies(tick_ns);
    let x = if static_prio < 120 { def * 4 } else { def };
    let min = (5 * hz_of(tick_ns) / 1000).max(1);
    (x * (MAX_PRIO - static_prio) as u64 / 20).max(min) * tick_ns
}

/// `CURRENT_BONUS` of a `sleep_avg`: `NS_TO_JIFFIES(sleep_avg) x MAX_BONUS / MAX_SLEEP_AVG`.
fn bonus_of(sleep_avg: Ns) -> i64 {
    (sleep_avg * MAX_BONUS as u64 / MAX_SLEEP_AVG) as i64
}

/// `wake_up_new_task`'s rescaling of a `sleep_avg` by a penalty in percent, on whole bonus levels:
/// `JIFFIES_TO_NS(CURRENT_BONUS x PENALTY / 100 x MAX_SLEEP_AVG / MAX_BONUS)`; CHILD_PENALTY 95 takes
/// one bonus level off, PARENT_PENALTY 100 rounds down to the level.
fn penalised_sleep_avg(sleep_avg: Ns, penalty: i64) -> Ns {
    (bonus_of(sleep_avg) * penalty / 100) as u64 * (MAX_SLEEP_AVG / MAX_BONUS as u64)
}

/// `INTERACTIVE_SLEEP(p)`: `MAX_SLEEP_AVG x (MAX_BONUS / 2 + DELTA(p) + 1) / MAX_BONUS - 1` jiffies.
fn interactive_sleep_ns(nice: i8, tick_ns: Ns) -> Ns {
    (MAX_SLEEP_AVG as i64 * (MAX_BONUS / 2 + delta(nice) + 1) / MAX_BONUS) as Ns - tick_ns
}

/// `p->sleep_type` of 2.6.22: how the last sleep ended, which decides how much of the run-queue wait
/// after it counts as sleep (`schedule()`'s ON_RUNQUEUE_WEIGHT credit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SleepType {
    /// `SLEEP_NORMAL`: no credit pending.
    #[default]
    Normal,
    /// `SLEEP_NONINTERACTIVE`: an uninterruptible sleep (disk), or one long sleep that hit the
    /// INTERACTIVE_SLEEP ceiling: no run-queue credit, and the sleep's own credit is capped.
    NonInteractive,
    /// `SLEEP_INTERACTIVE`: woken by a task: 30 % of the run-queue wait counts as sleep.
    Interactive,
    /// `SLEEP_INTERRUPTED`: woken from an interrupt (a timer or a device): all of it counts.
    Interrupted,
}

/// The idle shell a task without a parent is taken to be forked from (schedlab's convention for
/// every policy with per-task history, docs/policies/README.md): nice 0, just woken from a long sleep
/// at its prompt (so `recalc_task_prio` left `sleep_avg` at the INTERACTIVE_SLEEP ceiling) and holding
/// a whole nice-0 slice.
fn idle_shell(tick_ns: Ns) -> Task1 {
    Task1 {
        static_prio: 120,
        prio: 120,
        sleep_avg: interactive_sleep_ns(0, tick_ns),
        slice_left: timeslice_ns(120, tick_ns),
        ..Task1::default()
    }
}

/// `DELTA(p)`: how many levels above its static priority a task must be to count as interactive.
pub fn delta(nice: i8) -> i64 {
    (nice as i64 + 20) * MAX_BONUS / 40 - 20 * MAX_BONUS / 40 + INTERACTIVE_DELTA
}

#[derive(Clone, Copy, Debug, Default)]
struct Task1 {
    static_prio: usize,
    prio: usize,
    sleep_avg: Ns,
    slice_left: Ns,
    first_time_slice: bool,
    /// Queued in (or, while running or migrating, belongs to) the expired array.
    expired: bool,
    /// When it last started running or was woken (`timestamp`).
    timestamp: Ns,
    queued: bool,
    /// `sleep_type`.
    sleep_type: SleepType,
    /// The pending wakeup was woken from interrupt context (a timer or device, no waking task).
    woken_in_interrupt: bool,
    /// The pending wakeup is a synchronous one onto the waker's CPU (no preemption check).
    sync_local: bool,
    /// While running: the tick moved it to the tail of its list or to the expired array (its slice
    /// ended, or an interactive task's TIMESLICE_GRANULARITY did) or it yielded. Without this a
    /// preempted task keeps its place at the head of its list, as a running task stays queued in
    /// 2.6.22.
    requeue: bool,
}

/// What the O(1) scheduler keeps per CPU beyond the shared run queue.
#[derive(Clone, Copy, Debug)]
struct O1Rq {
    expired_timestamp: Option<Ns>,
    best_expired_prio: usize,
    /// Tasks put at the head of the running task's list since it was picked (a child that runs
    /// first): `wake_up_new_task` links the child just before the parent, so they stay ahead of it.
    ahead_of_curr: usize,
}

/// No tunables beyond HZ.
pub use crate::linux24::NoParams;

/// The O(1) scheduler.
pub struct O1 {
    q: Runqueues<O1Rq>,
    tasks: Vec<Task1>,
    tick_ns: Ns,
    resched: Vec<bool>,
    nr_running: usize,
    nr_examined: u64,
    nr_swaps: u64,
}

impl O1 {
    /// A new instance.
    pub fn new(_p: NoParams) -> O1 {
        O1 {
            q: Runqueues::empty(),
            tasks: Vec::new(),
            tick_ns: 1_000_000,
            resched: Vec::new(),
            nr_running: 0,
            nr_examined: 0,
            nr_swaps: 0,
        }
    }

    /// Dynamic priority of a task (tests).
    pub fn prio_of(&self, t: TaskId) -> usize {
        self.tasks[t.idx()].prio
    }

    /// Whether a queued task sits in its CPU's expired array (tests).
    pub fn in_expired(&self, t: TaskId) -> bool {
        self.tasks[t.idx()].expired
    }

    /// A task's remaining slice, ns (tests).
    pub fn slice_left(&self, t: TaskId) -> Ns {
        self.tasks[t.idx()].slice_left
    }

    /// A task's `sleep_type` (tests).
    pub fn sleep_type_of(&self, t: TaskId) -> SleepType {
        self.tasks[t.idx()].sleep_type
    }

    /// A task's `sleep_avg`, ns (tests).
    pub fn sleep_avg_of(&self, t: TaskId) -> Ns {
        self.tasks[t.idx()].sleep_avg
    }

    /// `CURRENT_BONUS`.
    fn bonus(st: &Task1) -> i64 {
        bonus_of(st.sleep_avg)
    }

    /// `effective_prio`.
    fn effective_prio(ctx: &Ctx, t: TaskId, st: &Task1) -> usize {
        if ctx.task(t).class.is_rt() {
            return MAX_RT_PRIO - 1 - ctx.task(t).rt_priority as usize;
        }
        let p = st.static_prio as i64 - (Self::bonus(st) - MAX_BONUS / 2);
        p.clamp(MAX_RT_PRIO as i64, MAX_PRIO as i64 - 1) as usize
    }

    /// `TASK_INTERACTIVE`.
    fn interactive(ctx: &Ctx, t: TaskId, st: &Task1) -> bool {
        st.prio as i64 <= st.static_prio as i64 - delta(ctx.task(t).nice)
    }

    /// `TIMESLICE_GRANULARITY` (x the CPU count, as 2.6.22 scales it on SMP), `GRANULARITY` being
    /// `10 * HZ / 1000` jiffies (at least one).
    fn granularity(&self, st: &Task1) -> Ns {
        let shift = (MAX_BONUS - Self::bonus(st)).max(1) - 1;
        let gran = (10 * hz_of(self.tick_ns) / 1000).max(1) * self.tick_ns;
        gran * (1 << shift) * self.q.rqs.len() as u64
    }

    /// `set_load_weight`: `PRIO_TO_LOAD_WEIGHT(static_prio)` = timeslice x SCHED_LOAD_SCALE /
    /// DEF_TIMESLICE (jiffies); an RT task `PRIO_TO_LOAD_WEIGHT(MAX_RT_PRIO) + LOAD_WEIGHT(rt_priority)`.
    fn load_weight(st: &Task1, ctx: &Ctx, t: TaskId) -> u64 {
        let info = ctx.task(t);
        if info.class.is_rt() {
            return rt_load_weight(info.rt_priority as u64, ctx.tick_ns);
        }
        prio_load_weight(st.static_prio, ctx.tick_ns)
    }

    fn enqueue_array(&mut self, cpu: CpuId, t: TaskId, expired: bool, head: bool) {
        let st = &mut self.tasks[t.idx()];
        st.expired = expired;
        st.queued = true;
        let rq = &mut self.q.rqs[cpu.idx()];
        let a = if expired { 1 - rq.active } else { rq.active };
        rq.arrays[a].push(st.prio, t, head);
        if head {
            rq.x.ahead_of_curr += 1;
        }
    }

    fn dequeue_array(&mut self, cpu: CpuId, t: TaskId) {
        let st = &mut self.tasks[t.idx()];
        if !st.queued {
            return;
        }
        st.queued = false;
        let rq = &mut self.q.rqs[cpu.idx()];
        let a = if st.expired { 1 - rq.active } else { rq.active };
        rq.arrays[a].remove(st.prio, t);
    }

    /// `expired_starving`.
    fn expired_starving(&self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        let rq = &self.q.rqs[cpu.idx()];
        if self.tasks[curr.idx()].static_prio > rq.x.best_expired_prio {
            return true;
        }
        match rq.x.expired_timestamp {
            Some(ts) => ctx.now.saturating_sub(ts) > STARVATION_LIMIT * rq.nr_running,
            None => false,
        }
    }

    /// `recalc_task_prio(p, timestamp + slept)`: credit `slept` to `sleep_avg` and return the new
    /// dynamic priority. One long sleep lifts a user task only to the INTERACTIVE_SLEEP ceiling (and
    /// marks the sleep noninteractive); after an uninterruptible sleep the credit stops at the ceiling.
    fn recalc_task_prio(ctx: &Ctx, t: TaskId, st: &mut Task1, slept: Ns) -> usize {
        let info = ctx.task(t);
        let mut slept = if info.class == SchedClass::Batch { 0 } else { slept };
        if slept > 0 {
            let ceiling = interactive_sleep_ns(info.nice, ctx.tick_ns);
            if slept > ceiling && st.sleep_avg < ceiling {
                st.sleep_avg = ceiling;
                st.sleep_type = SleepType::NonInteractive;
            } else {
                if st.sleep_type == SleepType::NonInteractive {
                    if st.sleep_avg >= ceiling {
                        slept = 0;
                    } else if st.sleep_avg + slept >= ceiling {
                        st.sleep_avg = ceiling;
                        slept = 0;
                    }
                }
                st.sleep_avg += slept;
            }
            st.sleep_avg = st.sleep_avg.min(MAX_SLEEP_AVG);
        }
        Self::effective_prio(ctx, t, st)
    }

    /// `activate_task` on wakeup: credit the sleep (`recalc_task_prio`), then record how the task was
    /// woken for `schedule()`'s run-queue credit, and stamp the wakeup time.
    fn activate(ctx: &Ctx, t: TaskId, st: &mut Task1) {
        if ctx.task(t).class.is_rt() {
            return;
        }
        let slept = ctx.now.saturating_sub(st.timestamp);
        st.prio = Self::recalc_task_prio(ctx, t, st, slept);
        if st.sleep_type == SleepType::Normal {
            st.sleep_type =
                if st.woken_in_interrupt { SleepType::Interrupted } else { SleepType::Interactive };
        }
        st.timestamp = ctx.now;
    }
}

impl SchedPolicy for O1 {
    fn name(&self) -> &str {
        "o1"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.tick_ns = ctx.tick_ns;
        self.resched = vec![false; ctx.nr_cpus()];
        self.q = Runqueues::build(
            ctx,
            O1Rq { expired_timestamp: None, best_expired_prio: MAX_PRIO, ahead_of_curr: 0 },
        );
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.tasks.len() <= t.idx() {
            self.tasks.resize(t.idx() + 1, Task1::default());
        }
        let info = ctx.task(t);
        let static_prio = (120 + info.nice as i64) as usize;
        let mut st = Task1 { static_prio, first_time_slice: true, timestamp: ctx.now, ..Task1::default() };
        let tick = ctx.tick_ns;
        let parent = info.parent.filter(|p| ctx.task(*p).state != TaskState::Exited);
        let mut shell = idle_shell(tick);
        let ps = match parent {
            Some(p) => &mut self.tasks[p.idx()],
            None => &mut shell,
        };
        // sched_fork: the child takes half the parent's slice (in jiffies, rounded up), the parent
        // keeps the rest; a parent left with nothing keeps one jiffy and reschedules.
        let parent_jiffies = ps.slice_left / tick;
        st.slice_left = parent_jiffies.div_ceil(2).max(1) * tick;
        ps.slice_left = parent_jiffies / 2 * tick;
        if ps.slice_left == 0 {
            ps.slice_left = tick;
            if let Some(p) = parent {
                self.resched[ctx.task(p).cpu.idx()] = true;
            }
        }
        // wake_up_new_task: the child one bonus level below the parent (CHILD_PENALTY), the parent
        // rounded down to its level (PARENT_PENALTY).
        st.sleep_avg = penalised_sleep_avg(ps.sleep_avg, CHILD_PENALTY);
        ps.sleep_avg = penalised_sleep_avg(ps.sleep_avg, PARENT_PENALTY);
        st.prio = Self::effective_prio(ctx, t, &st);
        self.tasks[t.idx()] = st;
        // sched_fork: the child starts on the CPU its parent forks it from, unless a domain balances
        // at fork (NUMA levels only in 2.6.22).
        let home = parent.map_or(ctx.task(t).cpu, |p| ctx.task(p).cpu);
        self.q.fork_cpu(ctx, t, home)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // try_to_wake_up's CPU choice.
        let weight = Self::load_weight(&self.tasks[t.idx()], ctx, t);
        let waker_weight =
            wake.waker.filter(|_| wake.sync).map(|w| Self::load_weight(&self.tasks[w.idx()], ctx, w));
        let cpu = self.q.wake_cpu(ctx, t, wake.waker_cpu, weight, waker_weight);
        // An uninterruptible sleep is marked noninteractive before activate_task; a wakeup without a
        // waking task comes from an interrupt; a sync wakeup onto the waker's CPU does not preempt.
        let st = &mut self.tasks[t.idx()];
        if wake.uninterruptible() {
            st.sleep_type = SleepType::NonInteractive;
        }
        st.woken_in_interrupt = wake.waker.is_none();
        st.sync_local = wake.sync && cpu == wake.waker_cpu;
        cpu
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        let mut head = false;
        let mut expired = false;
        match why {
            EnqueueReason::New => {
                self.nr_running += 1;
                let parent = ctx.task(t).parent;
                // Child runs first: a new process on its parent's CPU goes ahead of the parent.
                if let Some(p) = parent {
                    if ctx.task(p).cpu == cpu && ctx.task(p).tgid != ctx.task(t).tgid {
                        self.tasks[t.idx()].prio = self.tasks[p.idx()].prio;
                        head = true;
                    }
                }
            }
            EnqueueReason::Wakeup => {
                self.nr_running += 1;
                let st = &mut self.tasks[t.idx()];
                Self::activate(ctx, t, st);
            }
            EnqueueReason::Migrated => expired = self.tasks[t.idx()].expired,
            // sched_setscheduler's __activate_task: the active array, at the tail.
            EnqueueReason::Restore => {}
        }
        let w = Self::load_weight(&self.tasks[t.idx()], ctx, t);
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.nr_running += 1;
        rq.load += w;
        self.enqueue_array(cpu, t, expired, head);
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.dequeue_array(cpu, t);
        let w = Self::load_weight(&self.tasks[t.idx()], ctx, t);
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.nr_running -= 1;
        rq.load -= w;
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.resched[cpu.idx()] = false;
        let rq = &mut self.q.rqs[cpu.idx()];
        if rq.arrays[rq.active].nr_active == 0 {
            if rq.arrays[1 - rq.active].nr_active == 0 {
                return None;
            }
            // Switch the active and expired arrays.
            rq.active = 1 - rq.active;
            rq.x.expired_timestamp = None;
            rq.x.best_expired_prio = MAX_PRIO;
            self.nr_swaps += 1;
            let active = rq.active;
            for q in &rq.arrays[active].queues {
                for &t in q {
                    self.tasks[t.idx()].expired = false;
                }
            }
        }
        self.nr_examined += 1;
        let rq = &self.q.rqs[cpu.idx()];
        let prio = rq.arrays[rq.active].first()?;
        let t = *rq.arrays[rq.active].queues[prio].front()?;
        self.dequeue_array(cpu, t);
        self.q.rqs[cpu.idx()].x.ahead_of_curr = 0;
        // schedule(): a task woken from an interactive sleep gets its run-queue wait credited as sleep,
        // 30 % of it when a task woke it, all of it when an interrupt did.
        let st = &mut self.tasks[t.idx()];
        if !ctx.task(t).class.is_rt()
            && matches!(st.sleep_type, SleepType::Interactive | SleepType::Interrupted)
        {
            let mut waited = ctx.now.saturating_sub(st.timestamp);
            if st.sleep_type == SleepType::Interactive {
                waited = waited * (ON_RUNQUEUE_WEIGHT * 128 / 100) / 128;
            }
            st.prio = Self::recalc_task_prio(ctx, t, st, waited);
        }
        st.sleep_type = SleepType::Normal;
        st.timestamp = ctx.now;
        st.requeue = false;
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        let now = ctx.now;
        // schedule(): charge the run time to sleep_avg, less at a high bonus.
        {
            let st = &mut self.tasks[t.idx()];
            let run = now.saturating_sub(st.timestamp).min(MAX_SLEEP_AVG);
            let run = run / (Self::bonus(st).max(1) as u64);
            st.sleep_avg = st.sleep_avg.saturating_sub(run);
            st.timestamp = now;
        }
        if !why.still_runnable() {
            let w = Self::load_weight(&self.tasks[t.idx()], ctx, t);
            let rq = &mut self.q.rqs[cpu.idx()];
            rq.nr_running -= 1;
            rq.load -= w;
            self.nr_running -= 1;
            return;
        }
        let st = self.tasks[t.idx()];
        if why == SwitchReason::Preempted && !st.requeue {
            // A preempted task never left its list in 2.6.22 (the running task stays queued): it
            // resumes at the head, behind only a child linked in front of it.
            let ahead = self.q.rqs[cpu.idx()].x.ahead_of_curr;
            let st = &mut self.tasks[t.idx()];
            st.queued = true;
            let rq = &mut self.q.rqs[cpu.idx()];
            let a = if st.expired { 1 - rq.active } else { rq.active };
            rq.arrays[a].insert(st.prio, t, ahead);
            return;
        }
        self.enqueue_array(cpu, t, st.expired, false);
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        self.q.update_cpu_load(cpu, ctx.now);
        let mut resched = std::mem::take(&mut self.resched[cpu.idx()]);
        let info = ctx.task(curr);
        let tick = ctx.tick_ns;
        if info.class.is_rt() {
            if info.class == SchedClass::Rr {
                let st = &mut self.tasks[curr.idx()];
                st.slice_left = st.slice_left.saturating_sub(tick);
                if st.slice_left == 0 {
                    st.slice_left = timeslice_ns(st.static_prio, tick);
                    st.first_time_slice = false;
                    st.requeue = true;
                    resched = true; // put_prev requeues it at the tail
                }
            }
            return resched;
        }
        let st = self.tasks[curr.idx()];
        let left = st.slice_left.saturating_sub(tick);
        if left == 0 {
            let mut st = st;
            st.prio = Self::effective_prio(ctx, curr, &st);
            st.slice_left = timeslice_ns(st.static_prio, tick);
            st.first_time_slice = false;
            let rq = &mut self.q.rqs[cpu.idx()];
            if rq.x.expired_timestamp.is_none() {
                rq.x.expired_timestamp = Some(ctx.now);
            }
            st.expired = !Self::interactive(ctx, curr, &st) || self.expired_starving(ctx, cpu, curr);
            st.requeue = true;
            if st.expired {
                let rq = &mut self.q.rqs[cpu.idx()];
                rq.x.best_expired_prio = rq.x.best_expired_prio.min(st.static_prio);
            }
            self.tasks[curr.idx()] = st;
            return true;
        }
        self.tasks[curr.idx()].slice_left = left;
        // Interactive tasks round-robin among their priority every TIMESLICE_GRANULARITY.
        let gran = self.granularity(&st);
        let used = timeslice_ns(st.static_prio, tick).saturating_sub(left);
        if Self::interactive(ctx, curr, &st) && used % gran < tick && used >= gran && left >= gran {
            self.tasks[curr.idx()].requeue = true; // requeue_task: to the tail of its list
            resched = true;
        }
        resched
    }

    fn check_preempt(&mut self, _ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool {
        if std::mem::take(&mut self.resched[cpu.idx()]) {
            return true;
        }
        if kind == WakeKind::Wakeup && std::mem::take(&mut self.tasks[woken.idx()].sync_local) {
            return false; // try_to_wake_up: `if (!sync || cpu != this_cpu)` guards the preemption
        }
        let child_first =
            kind == WakeKind::Fork && self.tasks[woken.idx()].prio == self.tasks[curr.idx()].prio;
        // TASK_PREEMPTS_CURR: a strictly better priority (or child-runs-first).
        self.tasks[woken.idx()].prio < self.tasks[curr.idx()].prio
            || (child_first && self.tasks[woken.idx()].queued && {
                let rq = &self.q.rqs[cpu.idx()];
                rq.arrays[rq.active].queues[self.tasks[woken.idx()].prio].front() == Some(&woken)
            })
    }

    fn yield_task(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId) {
        // sys_sched_yield: a normal task goes to the expired array; an RT task to the tail.
        if !ctx.task(t).class.is_rt() {
            self.tasks[t.idx()].expired = true;
        }
        self.tasks[t.idx()].requeue = true;
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if ctx.nr_cpus() < 2 {
            return;
        }
        let (idle, newly) = match kind {
            BalanceKind::Periodic => (false, false),
            BalanceKind::NohzIdle => (true, false),
            BalanceKind::NewlyIdle => (true, true),
        };
        let tasks = &self.tasks;
        let best_expired: Vec<usize> = self.q.rqs.iter().map(|rq| rq.x.best_expired_prio).collect();
        let view = TaskView {
            weight: &|t| Self::load_weight(&tasks[t.idx()], ctx, t),
            prio: &|t| tasks[t.idx()].prio,
            best_expired_prio: &|c| best_expired[c.idx()],
            active_load_move: rt_load_weight(100, ctx.tick_ns),
        };
        self.q.rebalance(ctx, cpu, idle, newly, &view, out);
    }

    /// 2.6.22 `set_user_nice`: an RT task only stores the level. Otherwise a queued task leaves its
    /// array and its CPU's raw weighted load, takes the new static priority, load weight and
    /// `effective_prio` (its bonus kept), and is queued again at the tail of its new list in the
    /// same array (the running task, which 2.6.22 keeps queued, likewise: it goes to the tail when
    /// it stops). Its remaining slice is kept; the next one follows the new level. The CPU is
    /// rescheduled when the priority rose, or fell for the running task.
    /// `sched_setscheduler` (2.6.22): between `deactivate_task` and `__activate_task`,
    /// `__setscheduler` sets `prio = normal_prio(p)`: `99 - rt_priority` for an RT task, else
    /// `effective_prio` (the static priority less the bonus, the task's `sleep_avg` kept); the load
    /// weight follows the class (`set_load_weight`, read at the enqueue that follows).
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, _old_class: SchedClass, _old_rt_priority: u8) {
        let st = &mut self.tasks[t.idx()];
        st.prio = Self::effective_prio(ctx, t, st);
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, _old_nice: i8) -> Option<CpuId> {
        let info = ctx.task(t);
        let static_prio = (120 + info.nice.clamp(-20, 19) as i64) as usize;
        if info.class.is_rt() {
            self.tasks[t.idx()].static_prio = static_prio;
            return None;
        }
        let cpu = info.cpu;
        let running = info.state == TaskState::Running;
        let queued = running || info.state == TaskState::Runnable;
        let old_weight = Self::load_weight(&self.tasks[t.idx()], ctx, t);
        let in_array = self.tasks[t.idx()].queued;
        if in_array {
            self.dequeue_array(cpu, t);
        }
        let old_prio = self.tasks[t.idx()].prio;
        let st = &mut self.tasks[t.idx()];
        st.static_prio = static_prio;
        st.prio = Self::effective_prio(ctx, t, st);
        let (new_prio, expired) = (st.prio, st.expired);
        if running {
            st.requeue = true;
        }
        if !queued {
            return None;
        }
        let new_weight = Self::load_weight(&self.tasks[t.idx()], ctx, t);
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.load = rq.load - old_weight + new_weight;
        if in_array {
            self.enqueue_array(cpu, t, expired, false);
        }
        (new_prio < old_prio || (new_prio > old_prio && running)).then_some(cpu)
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        // sched_exit: a child still in its first slice returns it; the parent absorbs some sleep_avg.
        let Some(p) = ctx.task(t).parent else { return };
        if ctx.task(p).state == TaskState::Exited {
            return;
        }
        let c = self.tasks[t.idx()];
        let ps = &mut self.tasks[p.idx()];
        if c.first_time_slice && ctx.task(t).cpu == ctx.task(p).cpu {
            ps.slice_left = (ps.slice_left + c.slice_left).min(timeslice_ns(c.static_prio, ctx.tick_ns));
        }
        if c.sleep_avg < ps.sleep_avg {
            ps.sleep_avg = ps.sleep_avg / (EXIT_WEIGHT + 1) * EXIT_WEIGHT + c.sleep_avg / (EXIT_WEIGHT + 1);
        }
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined) + std::mem::take(&mut self.q.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_array_swaps",
                value: self.nr_swaps,
                help: "active/expired array switches",
            },
            PolicyStat {
                name: "nr_lb_moved",
                value: self.q.nr_lb_moved,
                help: "tasks moved by the balancer",
            },
        ]
    }

    fn exec_cpu(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) -> Option<CpuId> {
        // 2.6.22 sched_exec: sched_balance_self(SD_BALANCE_EXEC), then sched_migrate_task.
        Some(self.q.exec_cpu(ctx, t, cpu))
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::None
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(st) = self.tasks.get(t.idx()) {
            out.push(("o1 dynamic priority", st.prio as i64));
            out.push(("o1 sleep_avg ms", (st.sleep_avg / 1_000_000) as i64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::TestWorld;

    use schedlab_core::NSEC_PER_MSEC;

    #[test]
    fn timeslices_per_nice_level() {
        let ms = |n: i8| timeslice_ns((120 + n as i64) as usize, 1_000_000) / NSEC_PER_MSEC;
        assert_eq!([ms(-20), ms(-10), ms(-1), ms(0), ms(10), ms(19)], [800, 600, 420, 100, 50, 5]);
        // HZ 250: DEF_TIMESLICE 25 jiffies, MIN_TIMESLICE max(5 x 250 / 1000, 1) = 1 jiffy (4 ms);
        // nice 10: 25 x 10 / 20 = 12 jiffies = 48 ms; nice 19: 25 x 1 / 20 = 1 jiffy; nice -20:
        // 100 x 40 / 20 = 200 jiffies.
        let ms = |n: i8| timeslice_ns((120 + n as i64) as usize, 4_000_000) / NSEC_PER_MSEC;
        assert_eq!([ms(-20), ms(0), ms(10), ms(19)], [800, 100, 48, 4]);
        // HZ 100: 5 x 100 / 1000 = 0, so MIN_TIMESLICE is the one-jiffy floor (10 ms) for nice 19.
        assert_eq!(timeslice_ns(139, 10_000_000) / NSEC_PER_MSEC, 10);
    }

    /// Wakes `t` as the engine does, from `waker` (None: a timer or device interrupt).
    fn wake_by(w: &mut TestWorld, o: &mut O1, t: TaskId, waker: Option<TaskId>, sync: bool, d_state: bool) {
        let wait = if d_state { schedlab_core::WaitKind::Disk } else { schedlab_core::WaitKind::Sleep };
        let info = WakeInfo { waker_cpu: CpuId(0), waker, sync, wait };
        w.tasks[t.idx()].state = TaskState::Runnable;
        let cpu = o.select_cpu(&w.ctx(), t, &info);
        w.cpus[cpu.idx()].nr_running += 1;
        o.enqueue(&w.ctx(), cpu, t, EnqueueReason::Wakeup);
    }

    /// Puts `t` to sleep at `sleep_avg` (ms) from now (its `timestamp`).
    fn asleep(w: &TestWorld, o: &mut O1, t: TaskId, sleep_avg_ms: u64) {
        o.dequeue_array(CpuId(0), t);
        let st = &mut o.tasks[t.idx()];
        st.sleep_avg = sleep_avg_ms * NSEC_PER_MSEC;
        st.timestamp = w.now;
        st.sleep_type = SleepType::Normal;
        o.q.rqs[0].nr_running -= 1;
        o.nr_running -= 1;
    }

    /// 2.6.22 keeps the running task queued at the head of its list: a task preempted by a better
    /// priority resumes before the equal-priority task queued behind it, while one whose slice ran
    /// out (or that yielded) goes behind it (`task_running_tick` requeues at the tick, `schedule()`
    /// does not move a preempted task).
    /// `sched_setscheduler`: the priority follows the class (`99 - rt_priority` for an RT task,
    /// `effective_prio` again after), the task's `sleep_avg` is kept, and the load weight moves.
    #[test]
    fn a_class_change_takes_the_new_classs_priority_and_keeps_the_sleep_average() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let (a, b) = (w.add_task(0), w.add_task(-20));
        w.start(&mut o, a);
        w.start(&mut o, b);
        o.tasks[a.idx()].sleep_avg = 600 * NSEC_PER_MSEC;
        let fair_load = o.q.rqs[0].load;
        w.set_class(&mut o, a, SchedClass::Fifo, 40);
        assert_eq!(o.tasks[a.idx()].prio, 99 - 40);
        assert_eq!(
            o.q.rqs[0].load,
            fair_load - prio_load_weight(120, w.tick_ns) + rt_load_weight(40, w.tick_ns)
        );
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(a), "real time before nice -20");
        w.stop(&mut o, CpuId(0), SwitchReason::Preempted);
        w.set_class(&mut o, a, SchedClass::Normal, 0);
        assert_eq!(o.sleep_avg_of(a), 600 * NSEC_PER_MSEC);
        // Bonus 600 ms x 10 / 1 s - 5 = 1: priority 119.
        assert_eq!(o.tasks[a.idx()].prio, 119);
        assert_eq!(o.q.rqs[0].load, fair_load);
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(b));
    }

    #[test]
    fn a_preempted_task_keeps_its_place_at_the_head_of_its_list() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.start(&mut o, a);
        w.start(&mut o, b);
        o.tasks[b.idx()].prio = o.tasks[a.idx()].prio;
        o.dequeue_array(CpuId(0), b);
        o.enqueue_array(CpuId(0), b, false, false);
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(a));
        // A wakeup preemption: a goes back in front of b.
        w.stop(&mut o, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(a));
        // A tick that ends the interactive round-robin granularity or the slice moves it behind b.
        o.tasks[a.idx()].slice_left = w.tick_ns;
        assert!(o.tick(&w.ctx(), CpuId(0), a));
        w.stop(&mut o, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(b));
    }

    /// `sched_fork` and `wake_up_new_task` (2.6.22) for a task without a parent, forked by the idle
    /// shell of the convention: the shell's sleep_avg is INTERACTIVE_SLEEP(nice 0) = 1000 x (5 + 2 + 1)
    /// / 10 - 1 jiffies = 799 ms (bonus 7); the child gets bonus 7 x 95 / 100 = 6 levels = 600 ms,
    /// priority 120 - (6 - 5) = 119, and half the shell's 100 ms slice.
    #[test]
    fn a_task_without_parent_is_forked_by_an_idle_shell() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let t = w.add_task(0);
        w.start(&mut o, t);
        assert_eq!(o.sleep_avg_of(t), 600 * NSEC_PER_MSEC);
        assert_eq!(o.prio_of(t), 119);
        assert_eq!(o.slice_left(t), 50 * NSEC_PER_MSEC);
        // A child of t (bonus 6, slice 50 ms): 6 x 95 / 100 = 5 levels, 500 ms; the parent keeps
        // bonus 6 x 100 / 100 = 600 ms; slices 25 / 25 jiffies.
        w.pick(&mut o, CpuId(0));
        o.tasks[t.idx()].sleep_avg = 650 * NSEC_PER_MSEC;
        let c = w.add_task(0);
        w.tasks[c.idx()].parent = Some(t);
        w.start(&mut o, c);
        assert_eq!((o.sleep_avg_of(c), o.sleep_avg_of(t)), (500 * NSEC_PER_MSEC, 600 * NSEC_PER_MSEC));
        assert_eq!((o.slice_left(c), o.slice_left(t)), (25 * NSEC_PER_MSEC, 25 * NSEC_PER_MSEC));
    }

    /// An odd number of jiffies splits with the child rounded up: `(time_slice + 1) >> 1`. HZ 250, a
    /// 25-jiffy parent slice: child 13 jiffies (52 ms), parent 12 (48 ms).
    #[test]
    fn fork_splits_the_slice_in_jiffies() {
        let mut w = TestWorld::new(1);
        w.tick_ns = 4_000_000;
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let p = w.add_task(0);
        w.start(&mut o, p);
        w.pick(&mut o, CpuId(0));
        o.tasks[p.idx()].slice_left = 100 * NSEC_PER_MSEC;
        let c = w.add_task(0);
        w.tasks[c.idx()].parent = Some(p);
        w.start(&mut o, c);
        assert_eq!((o.slice_left(c), o.slice_left(p)), (52 * NSEC_PER_MSEC, 48 * NSEC_PER_MSEC));
    }

    /// `recalc_task_prio` after an uninterruptible sleep (SLEEP_NONINTERACTIVE): the credit stops at
    /// INTERACTIVE_SLEEP (799 ms at nice 0, HZ 1000); an interruptible sleep is credited whole (up to
    /// MAX_SLEEP_AVG); a sleep longer than the ceiling lifts a low sleep_avg to the ceiling only.
    #[test]
    fn uninterruptible_sleep_credit_stops_at_the_interactive_ceiling() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let t = w.add_task(0);
        w.start(&mut o, t);
        for (start_ms, d_state, slept_ms, expect_ms) in [
            (0, true, 500, 500),     // below the ceiling: whole sleep
            (600, true, 500, 799),   // 600 + 500 >= 799: capped at the ceiling
            (800, true, 100, 800),   // already at or above it: no credit
            (600, false, 500, 1000), // interruptible: MAX_SLEEP_AVG
            (100, false, 900, 799),  // one long sleep (> 799 ms) from below: the ceiling
        ] {
            asleep(&w, &mut o, t, start_ms);
            w.now += slept_ms * NSEC_PER_MSEC;
            wake_by(&mut w, &mut o, t, None, false, d_state);
            assert_eq!(o.sleep_avg_of(t), expect_ms * NSEC_PER_MSEC, "from {start_ms} ms, D {d_state}");
        }
    }

    /// `schedule()`'s run-queue credit: a task woken by a task (SLEEP_INTERACTIVE) gets 30 % of its
    /// run-queue wait as sleep, `delta x (30 x 128 / 100) / 128` = x 38 / 128; one woken by an
    /// interrupt (SLEEP_INTERRUPTED) all of it; the credit is given once (sleep_type back to NORMAL).
    #[test]
    fn run_queue_wait_is_credited_by_how_the_task_was_woken() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let (t, waker) = (w.add_task(0), w.add_task(0));
        w.start(&mut o, t);
        for (by, credit_ns) in [(Some(waker), 10_000_000 * 38 / 128), (None, 10_000_000)] {
            asleep(&w, &mut o, t, 100);
            w.now += NSEC_PER_MSEC;
            wake_by(&mut w, &mut o, t, by, false, false);
            let woke = o.sleep_avg_of(t);
            assert_eq!(woke, 101 * NSEC_PER_MSEC);
            w.now += 10 * NSEC_PER_MSEC;
            assert_eq!(w.pick(&mut o, CpuId(0)), Some(t));
            assert_eq!(o.sleep_avg_of(t) - woke, credit_ns, "waker {by:?}");
            assert_eq!(o.sleep_type_of(t), SleepType::Normal);
            w.stop(&mut o, CpuId(0), SwitchReason::Blocked);
            w.tasks[t.idx()].state = TaskState::Blocked;
            o.q.rqs[0].nr_running += 1; // asleep() takes it off again
            o.nr_running += 1;
        }
    }

    /// `try_to_wake_up`: a sync wakeup onto the waker's CPU does not preempt even a worse-priority
    /// task; the same wakeup without WF_SYNC does.
    #[test]
    fn a_sync_wakeup_on_the_wakers_cpu_does_not_preempt() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let (t, hog) = (w.add_task(0), w.add_task(10));
        w.start(&mut o, t);
        w.start(&mut o, hog);
        o.dequeue_array(CpuId(0), t);
        assert_eq!(w.pick(&mut o, CpuId(0)), Some(hog));
        o.enqueue_array(CpuId(0), t, false, false);
        for (sync, preempts) in [(true, false), (false, true)] {
            asleep(&w, &mut o, t, 900);
            w.now += NSEC_PER_MSEC;
            wake_by(&mut w, &mut o, t, Some(hog), sync, false);
            assert_eq!(
                o.check_preempt(&w.ctx(), CpuId(0), hog, t, WakeKind::Wakeup),
                preempts,
                "sync {sync}"
            );
        }
    }

    /// `set_load_weight` (2.6.22): nice 0 weighs SCHED_LOAD_SCALE; an RT task weighs a nice -20 slice
    /// plus `LOAD_WEIGHT(rt_priority)`: 800 x 128 / 100 + 50 x 128 / 100 = 1024 + 64. At HZ 250 a
    /// nice-10 task weighs 12 x 128 / 25 = 61.
    #[test]
    fn load_weights_follow_jiffy_slices_and_rt_priority() {
        let mut w = TestWorld::new(1);
        let (n0, rt) = (w.add_task(0), w.add_task(0));
        w.tasks[rt.idx()].class = SchedClass::Fifo;
        w.tasks[rt.idx()].rt_priority = 50;
        let st = Task1 { static_prio: 120, ..Task1::default() };
        assert_eq!(O1::load_weight(&st, &w.ctx(), n0), 128);
        assert_eq!(O1::load_weight(&st, &w.ctx(), rt), 1088);
        w.tick_ns = 4_000_000;
        let st = Task1 { static_prio: 130, ..Task1::default() };
        assert_eq!(O1::load_weight(&st, &w.ctx(), n0), 61);
    }

    #[test]
    fn cpu_load_averages_follow_the_tick_and_decay_while_idle() {
        let mut w = TestWorld::new(2);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let t = w.add_task(0);
        let cpu = w.start(&mut o, t);
        let l = o.q.rqs[cpu.idx()].load;
        assert_eq!(l, 128, "nice 0 weighs SCHED_LOAD_SCALE");
        w.pick(&mut o, cpu);
        w.advance(&mut o, 2_000_000);
        // Two ticks: cpu_load[i] moves 1/2^i of the way to 128 each time, rounding up when rising:
        // i=1: (0 + 129) >> 1 = 64, then (64 + 129) >> 1 = 96; i=2: 131 >> 2 = 32, then (96 + 131) >> 2 = 56.
        assert_eq!(o.q.rqs[cpu.idx()].cpu_load[..3], [128, 96, 56]);
        w.stop(&mut o, cpu, SwitchReason::Blocked);
        // Three ticks later, untaken while idle: two decay as missed, the last folds in load 0.
        // i=1: 96 -> 48 -> 24 -> 12; i=2: 56 -> 42 -> 31 -> 23.
        w.advance(&mut o, 3_000_000);
        o.q.update_cpu_load(cpu, w.now);
        assert_eq!(o.q.rqs[cpu.idx()].cpu_load[..3], [0, 12, 23]);
        // target_load takes the higher of the average and the raw load, source_load the lower.
        assert_eq!((o.q.guess_load(cpu, 2, true), o.q.guess_load(cpu, 2, false)), (12, 0));
        assert_eq!(o.q.guess_load(cpu, 0, true), 0);
    }

    #[test]
    fn interactivity_needs_a_bonus_of_delta() {
        // DELTA: nice 0 -> 2 (bonus >= 7, sleep_avg >= 700 ms); nice -20 -> -3; nice 19 -> 6 (never).
        assert_eq!((delta(0), delta(-20), delta(19)), (2, -3, 6));
    }

    #[test]
    fn an_interactive_task_stays_active_until_the_expired_array_starves() {
        let mut w = TestWorld::new(1);
        let mut o = O1::new(NoParams);
        o.init(&w.ctx());
        let (i, h) = (w.add_task(0), w.add_task(0));
        w.start(&mut o, i);
        w.start(&mut o, h);
        // Make `i` fully interactive: a long sleep credits it up to the ceiling (bonus 7 = 700+ ms).
        o.dequeue_array(CpuId(0), i);
        o.tasks[i.idx()].sleep_avg = MAX_SLEEP_AVG;
        o.tasks[i.idx()].prio = O1::effective_prio(&w.ctx(), i, &o.tasks[i.idx()]);
        o.enqueue_array(CpuId(0), i, false, false);
        assert_eq!(o.prio_of(i), 115, "bonus 10 - 5 = 5 levels better");
        let first = w.pick(&mut o, CpuId(0)).unwrap();
        assert_eq!(first, i, "the better dynamic priority runs first");
        // i runs its whole 100 ms slice: interactive and nothing starving -> back into the active array.
        for _ in 0..99 {
            w.advance(&mut o, 1_000_000);
        }
        assert!(!o.in_expired(i));
        let resched = w.advance(&mut o, 1_000_000);
        assert_eq!(resched, vec![CpuId(0)]);
        assert!(!o.in_expired(i), "interactive: reinserted into the active array");
        // Once a task waited in the expired array longer than STARVATION_LIMIT x nr_running (2 s),
        // the interactive task expires too.
        o.q.rqs[0].x.expired_timestamp = Some(0);
        w.now = 3 * NSEC_PER_SEC;
        o.tasks[i.idx()].slice_left = 1_000_000;
        w.advance(&mut o, 1_000_000);
        assert!(o.in_expired(i), "expired_starving sends it to the expired array");
    }
}

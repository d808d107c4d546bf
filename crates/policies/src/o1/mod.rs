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
//!   only to the interactive ceiling) and shrinks by the time run divided by the current bonus. The
//!   bonus `sleep_avg x 10 / 1 s - 5` moves the dynamic priority up to 5 levels either way. A task is
//!   *interactive* when its priority is at least DELTA(nice) levels better than its static priority
//!   (nice 0 needs a bonus of 2, i.e. `sleep_avg` >= 700 ms).
//! * When a slice ends the task gets a new slice and goes to the expired array, unless it is
//!   interactive and the expired array is not starving (`expired_starving`: a better static priority
//!   waits there, or it has waited longer than 1 s x nr_running) — then it goes back to the active
//!   array. Interactive tasks are round-robined every TIMESLICE_GRANULARITY (10 ms x 2^(max(10 -
//!   bonus, 1) - 1)).
//! * A woken task preempts when its priority is better. Yield sends a normal task to the expired array.
//!   Fork splits the parent's remaining slice with the child, gives the child 95 % of the parent's
//!   `sleep_avg`, and runs a new process first on the parent's CPU; an exiting child still in its first
//!   slice returns it to the parent.
//! * Balancing per sched domain (2.6.22 parameters, shared with CFS 2.6.38's domains): at each domain's
//!   interval the busiest group is found by the `cpu_load[]` tick averages of weighted load
//!   (`load_weight = timeslice x 128 / 100 ms`; low guesses for remote groups, high for the local one)
//!   and its busiest queue by raw weighted load; tasks move from the expired array first, best priority first, skipping
//!   running and cache-hot tasks (ran within 2.5 ms) until balancing has failed `cache_nice_tries` times;
//!   an idle CPU balances at once (`idle_balance`); after repeated failures the busiest CPU's running
//!   task is pushed (active balance).
//!
//! Simplifications: the on-runqueue wait credit of interactive wakeups (ON_RUNQUEUE_WEIGHT) and the
//! uninterruptible-sleep limit on `sleep_avg` are left out (the engine does not distinguish sleep kinds);
//! an idle CPU's `cpu_load[]` is caught up before it is read (2.6.22 left it stale under NO_HZ); the
//! balancer moves at least one task
//! whenever the busiest queue has two and the gap exceeds one task's load (the core of
//! `fix_small_imbalance`); fork placement takes the least loaded allowed CPU, the parent's on ties.

pub(crate) mod runqueue;

use runqueue::{Runqueues, MAX_PRIO};
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, TaskState, WakeInfo, WakeKind, WorkConservation, NSEC_PER_MSEC,
    NSEC_PER_SEC,
};

const MAX_RT_PRIO: usize = 100;
const DEF_TIMESLICE: Ns = 100 * NSEC_PER_MSEC;
const MIN_TIMESLICE: Ns = 5 * NSEC_PER_MSEC;
const MAX_SLEEP_AVG: Ns = NSEC_PER_SEC;
const STARVATION_LIMIT: Ns = NSEC_PER_SEC;
const MAX_BONUS: i64 = 10;
const INTERACTIVE_DELTA: i64 = 2;
const CHILD_PENALTY: u64 = 95;
const EXIT_WEIGHT: u64 = 3;
const GRANULARITY: Ns = 10 * NSEC_PER_MSEC;
/// `SCHED_LOAD_SCALE` of 2.6.22.
const LOAD_SCALE: u64 = 128;

/// `static_prio_timeslice(static_prio)`.
pub fn timeslice_ns(static_prio: usize, tick_ns: Ns) -> Ns {
    let x = if static_prio < 120 { DEF_TIMESLICE * 4 } else { DEF_TIMESLICE };
    (x * (MAX_PRIO - static_prio) as u64 / 20).max(MIN_TIMESLICE.max(tick_ns))
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
}

/// What the O(1) scheduler keeps per CPU beyond the shared run queue.
#[derive(Clone, Copy, Debug)]
struct O1Rq {
    expired_timestamp: Option<Ns>,
    best_expired_prio: usize,
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

    /// `CURRENT_BONUS`.
    fn bonus(st: &Task1) -> i64 {
        (st.sleep_avg * MAX_BONUS as u64 / MAX_SLEEP_AVG) as i64
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

    /// `TIMESLICE_GRANULARITY` (x the CPU count, as 2.6.22 scales it).
    fn granularity(&self, st: &Task1) -> Ns {
        let shift = (MAX_BONUS - Self::bonus(st)).max(1) - 1;
        GRANULARITY * (1 << shift) * self.q.rqs.len() as u64
    }

    fn load_weight(st: &Task1, ctx: &Ctx, t: TaskId) -> u64 {
        if ctx.task(t).class.is_rt() {
            return timeslice_ns(100, 0) * LOAD_SCALE / DEF_TIMESLICE; // RT tasks weigh as nice -20
        }
        timeslice_ns(st.static_prio, 0) * LOAD_SCALE / DEF_TIMESLICE
    }

    fn enqueue_array(&mut self, cpu: CpuId, t: TaskId, expired: bool, head: bool) {
        let st = &mut self.tasks[t.idx()];
        st.expired = expired;
        st.queued = true;
        let rq = &mut self.q.rqs[cpu.idx()];
        let a = if expired { 1 - rq.active } else { rq.active };
        rq.arrays[a].push(st.prio, t, head);
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

    /// `recalc_task_prio` on wakeup: credit the sleep to `sleep_avg`.
    fn credit_sleep(ctx: &Ctx, t: TaskId, st: &mut Task1) {
        let info = ctx.task(t);
        if info.class.is_rt() {
            return;
        }
        let slept = if info.class == SchedClass::Batch { 0 } else { ctx.now.saturating_sub(st.timestamp) };
        if slept > 0 {
            // INTERACTIVE_SLEEP: one long sleep lifts a user task to the interactive ceiling only.
            let ceiling = (MAX_SLEEP_AVG as i64 * (MAX_BONUS / 2 + delta(info.nice) + 1) / MAX_BONUS) as Ns
                - ctx.tick_ns;
            if slept > ceiling && st.sleep_avg < ceiling {
                st.sleep_avg = ceiling;
            } else {
                st.sleep_avg += slept;
            }
            st.sleep_avg = st.sleep_avg.min(MAX_SLEEP_AVG);
        }
        st.prio = Self::effective_prio(ctx, t, st);
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
        self.q = Runqueues::build(ctx, O1Rq { expired_timestamp: None, best_expired_prio: MAX_PRIO });
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.tasks.len() <= t.idx() {
            self.tasks.resize(t.idx() + 1, Task1::default());
        }
        let info = ctx.task(t);
        let static_prio = (120 + info.nice as i64) as usize;
        let mut st = Task1 { static_prio, first_time_slice: true, timestamp: ctx.now, ..Task1::default() };
        match info.parent {
            Some(p) => {
                // sched_fork: split the parent's slice; wake_up_new_task: the child's sleep_avg is 95 %
                // of the parent's (CHILD_PENALTY).
                let ps = &mut self.tasks[p.idx()];
                st.slice_left = ps.slice_left.div_ceil(2).max(1);
                ps.slice_left /= 2;
                if ps.slice_left == 0 {
                    ps.slice_left = 1;
                    self.resched[ctx.task(p).cpu.idx()] = true;
                }
                st.sleep_avg = ps.sleep_avg * CHILD_PENALTY / 100;
            }
            None => st.slice_left = timeslice_ns(static_prio, ctx.tick_ns),
        }
        st.prio = Self::effective_prio(ctx, t, &st);
        self.tasks[t.idx()] = st;
        self.nr_examined += ctx.task(t).allowed.count() as u64;
        let rqs = &self.q.rqs;
        crate::placement::least_loaded(ctx, t, ctx.task(t).cpu, |c| rqs[c.idx()].load)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // try_to_wake_up, reduced (see crate::placement).
        let rqs = &self.q.rqs;
        crate::placement::wake_target(ctx, t, wake.waker_cpu, |c| rqs[c.idx()].load)
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
                Self::credit_sleep(ctx, t, st);
            }
            EnqueueReason::Migrated => expired = self.tasks[t.idx()].expired,
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
        self.tasks[t.idx()].timestamp = ctx.now;
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
        let expired = self.tasks[t.idx()].expired;
        self.enqueue_array(cpu, t, expired, false);
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
            resched = true;
        }
        resched
    }

    fn check_preempt(&mut self, _ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool {
        if std::mem::take(&mut self.resched[cpu.idx()]) {
            return true;
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
        self.q.rebalance(ctx, cpu, idle, newly, &|t| Self::load_weight(&tasks[t.idx()], ctx, t), out);
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

    #[test]
    fn timeslices_per_nice_level() {
        let ms = |n: i8| timeslice_ns((120 + n as i64) as usize, 1_000_000) / NSEC_PER_MSEC;
        assert_eq!([ms(-20), ms(-10), ms(-1), ms(0), ms(10), ms(19)], [800, 600, 420, 100, 50, 5]);
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

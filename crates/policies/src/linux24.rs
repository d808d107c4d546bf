//! # Linux 2.4: the goodness() scheduler
//!
//! Source: Linux 2.4.27 kernel/sched.c (`goodness`, `schedule`, `reschedule_idle`, `sys_sched_yield`),
//! kernel/timer.c (`update_process_times`), kernel/fork.c and kernel/exit.c (counter hand-over); seed 001
//! sec. 3 (Molloy & Honeyman) describes the same design.
//!
//! One run list for the whole machine, holding every runnable task, the running ones included. Each
//! task has a `counter`: the ticks left in its time slice. At every decision the scheduler walks the
//! whole list and computes `goodness()` for each task that may run on this CPU and is not running
//! elsewhere:
//!
//! * a SCHED_OTHER task with `counter == 0` has goodness 0 (runnable, but its slice is used up);
//!   otherwise `counter + 20 - nice`, plus 15 (`PROC_CHANGE_PENALTY`) on `p->processor` (the CPU it
//!   last ran on; a child that has not run yet has its parent's) and 1 if it shares the previous
//!   task's address space (`mm`);
//! * an RT task has `1000 + rt_priority`; a task that just yielded has -1.
//!
//! The greatest goodness wins, the first in list order on ties (strict `>`). When the best is 0 — every
//! candidate has used its slice — the counters of *all* tasks, sleepers included, are recalculated as
//! `counter / 2 + NICE_TO_TICKS(nice)` and the walk starts again: sleepers thus accumulate up to about
//! twice their slice, which is 2.4's interactivity bonus. The tick decrements the running task's
//! counter and asks for a reschedule at zero (never for SCHED_FIFO).
//!
//! A woken task goes to its last CPU if that CPU is idle, else to the allowed CPU that has been idle
//! longest, else to the CPU whose running task it beats by the most goodness (`reschedule_idle`);
//! on a uniprocessor it preempts when its goodness exceeds the current task's. There is no load
//! balancer: the single list is the balance.
//!
//! The decision walks the whole list, so the tasks it examines grow with the number of runnable tasks;
//! the cost model charges that (seed 001's point).

use schedlab_core::{
    CpuId, CpuSet, Ctx, DequeueReason, Dispatch, EnqueueReason, PolicyStat, SchedClass, SchedPolicy,
    SwitchReason, TaskId, WakeInfo, WakeKind, WorkConservation,
};

use crate::params::{ParamInfo, Params};

/// `PROC_CHANGE_PENALTY` on i386: the goodness bonus for the CPU a task last ran on.
pub const PROC_CHANGE_PENALTY: i32 = 15;

/// `TICK_SCALE(x)`: slices are expressed for HZ=100 and scaled to the real HZ.
pub fn tick_scale(x: i32, hz: u64) -> i32 {
    match hz {
        0..200 => x >> 2,
        200..400 => x >> 1,
        400..800 => x,
        800..1600 => x << 1,
        _ => x << 2,
    }
}

/// `NICE_TO_TICKS(nice)`: the slice of a task, in ticks (HZ=100: nice -20 -> 11, 0 -> 6, 19 -> 1).
pub fn nice_to_ticks(nice: i8, hz: u64) -> i32 {
    tick_scale(20 - nice as i32, hz) + 1
}

/// `MAX_COUNTER`: the cap on a counter returned by an exiting child.
pub fn max_counter(hz: u64) -> i32 {
    (20 * hz / 100) as i32
}

/// Per-task scheduling state shared by the 2.4-family policies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskState24 {
    /// Ticks left in the slice.
    pub counter: i32,
    /// SCHED_YIELD bit.
    pub yielded: bool,
    /// Known to the policy and not exited.
    pub alive: bool,
    /// `p->processor`: the CPU it last ran on, or for a task that has not run yet its parent's
    /// (`do_fork` copies it); where the goodness bonus applies.
    pub processor: CpuId,
    /// Woken by a synchronous wakeup the waker's CPU may run: `try_to_wake_up` only queued it (no
    /// `reschedule_idle`, so no preemption and no idle CPU kicked).
    pub quiet_wakeup: bool,
}

impl Default for TaskState24 {
    fn default() -> Self {
        TaskState24 { counter: 0, yielded: false, alive: false, processor: CpuId(0), quiet_wakeup: false }
    }
}

impl TaskState24 {
    /// A new task's state: `counter` ticks, and the forking CPU as its `processor`.
    pub(crate) fn forked(ctx: &Ctx, t: TaskId, counter: i32) -> TaskState24 {
        TaskState24 { counter, yielded: false, alive: true, processor: ctx.task(t).cpu, quiet_wakeup: false }
    }
}

/// `try_to_wake_up(p, synchronous)` (2.4): a synchronous wakeup (`wake_up_interruptible_sync`, as
/// pipes use) of a task allowed on the waker's CPU skips `reschedule_idle`: the task is only queued,
/// and the waker's CPU, about to schedule, finds it. Returns that CPU when the wakeup is such.
pub(crate) fn sync_wakeup_cpu(
    ctx: &Ctx,
    t: TaskId,
    wake: &WakeInfo,
    states: &mut [TaskState24],
) -> Option<CpuId> {
    let quiet = wake.sync && ctx.task(t).allowed.contains(wake.waker_cpu);
    states[t.idx()].quiet_wakeup = quiet;
    quiet.then_some(wake.waker_cpu)
}

/// `goodness(p, this_cpu, this_mm)`.
pub(crate) fn goodness(ctx: &Ctx, t: TaskId, st: &TaskState24, this_cpu: CpuId, this_mm: Option<u32>) -> i32 {
    if st.yielded {
        return -1;
    }
    let info = ctx.task(t);
    if info.class.is_rt() {
        return 1000 + info.rt_priority as i32;
    }
    if st.counter == 0 {
        return 0;
    }
    let mut w = st.counter;
    // CONFIG_SMP: `p->processor == this_cpu`, also for a child that has not run yet.
    if ctx.nr_cpus() > 1 && st.processor == this_cpu {
        w += PROC_CHANGE_PENALTY;
    }
    if this_mm == Some(info.tgid) {
        w += 1;
    }
    w + 20 - info.nice as i32
}

/// Whether `t` may be chosen by `cpu` (`can_schedule`): allowed there and not running elsewhere.
pub(crate) fn can_schedule(ctx: &Ctx, t: TaskId, cpu: CpuId) -> bool {
    let info = ctx.task(t);
    info.allowed.contains(cpu) && info.state != schedlab_core::TaskState::Running
}

/// The 2.4-family wakeup placement (`reschedule_idle`): the last CPU if idle; else the allowed CPU idle
/// longest; else the CPU whose current task the woken one beats by the most goodness; else the last CPU.
pub(crate) fn reschedule_idle(ctx: &Ctx, t: TaskId, states: &[TaskState24], examined: &mut u64) -> CpuId {
    reschedule_idle_in(ctx, t, ctx.task(t).allowed, states, examined)
}

/// [`reschedule_idle`] over the CPUs of `allowed` only (a non-empty subset of the task's affinity).
pub(crate) fn reschedule_idle_in(
    ctx: &Ctx,
    t: TaskId,
    allowed: CpuSet,
    states: &[TaskState24],
    examined: &mut u64,
) -> CpuId {
    let last = states[t.idx()].processor; // p->processor
    if allowed.contains(last) && ctx.is_idle(last) {
        return last;
    }
    let mut oldest: Option<(u64, CpuId)> = None;
    let mut best_prio: Option<(i32, CpuId)> = None;
    for c in allowed.iter() {
        *examined += 1;
        if ctx.is_idle(c) {
            let since = ctx.cpu(c).idle_since_ns;
            if oldest.is_none_or(|(s, _)| since < s) {
                oldest = Some((since, c));
            }
        } else if oldest.is_none() {
            if let Some(curr) = ctx.cpu(c).curr {
                let mm = Some(ctx.task(curr).tgid);
                let prio = goodness(ctx, t, &states[t.idx()], c, mm)
                    - goodness(ctx, curr, &states[curr.idx()], c, mm);
                if prio > best_prio.map_or(0, |b| b.0) {
                    best_prio = Some((prio, c));
                }
            }
        }
    }
    oldest.map(|o| o.1).or(best_prio.map(|b| b.1)).unwrap_or(if allowed.contains(last) {
        last
    } else {
        allowed.first().expect("non-empty affinity")
    })
}

/// `do_fork`'s counter: the child gets half the parent's remaining counter (rounded up), the parent
/// keeps the other half, and a running parent left with nothing is rescheduled (`resched` of its
/// CPU). A task with no parent starts with a full slice.
pub(crate) fn fork_counter(
    ctx: &Ctx,
    t: TaskId,
    states: &mut [TaskState24],
    resched: &mut [bool],
    hz: u64,
) -> i32 {
    match ctx.task(t).parent {
        Some(p) => {
            let ps = &mut states[p.idx()];
            let child = (ps.counter + 1) >> 1;
            ps.counter >>= 1;
            if ps.counter == 0 && ctx.task(p).state == schedlab_core::TaskState::Running {
                resched[ctx.task(p).cpu.idx()] = true;
            }
            child
        }
        None => nice_to_ticks(ctx.task(t).nice, hz),
    }
}

/// `update_process_times`: one tick off the running task's counter; a reschedule at zero (never for
/// SCHED_FIFO) or when one was pending for the CPU.
pub(crate) fn tick_counter(ctx: &Ctx, curr: TaskId, st: &mut TaskState24, pending: &mut bool) -> bool {
    st.counter -= 1;
    let mut resched = std::mem::take(pending);
    if st.counter <= 0 {
        st.counter = 0;
        resched |= ctx.task(curr).class != SchedClass::Fifo;
    }
    resched
}

/// `preemption_goodness(curr, woken) > 0`, or a reschedule pending for the CPU.
pub(crate) fn preempts(
    ctx: &Ctx,
    cpu: CpuId,
    curr: TaskId,
    woken: TaskId,
    states: &mut [TaskState24],
    pending: &mut bool,
) -> bool {
    if std::mem::take(pending) {
        return true;
    }
    if std::mem::take(&mut states[woken.idx()].quiet_wakeup) {
        return false;
    }
    let mm = Some(ctx.task(curr).tgid);
    goodness(ctx, woken, &states[woken.idx()], cpu, mm) > goodness(ctx, curr, &states[curr.idx()], cpu, mm)
}

/// `release_task`: the parent gets the exiting child's remaining counter back, capped.
pub(crate) fn exit_counter(ctx: &Ctx, t: TaskId, states: &mut [TaskState24], hz: u64) {
    let c = states[t.idx()].counter;
    states[t.idx()].alive = false;
    if let Some(p) = ctx.task(t).parent {
        if states[p.idx()].alive {
            let ps = &mut states[p.idx()];
            ps.counter = (ps.counter + c).min(max_counter(hz));
        }
    }
}

/// Parameters (none: 2.4 has no tunables beyond HZ, which the machine sets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoParams;

impl Params for NoParams {
    fn info() -> &'static [ParamInfo] {
        &[]
    }
    fn set(&mut self, _key: &str, _value: &str) -> Result<(), String> {
        unreachable!("no parameters to set")
    }
}

/// The Linux 2.4 scheduler.
pub struct Goodness {
    /// The run list, in list order (new and woken tasks at the tail).
    runqueue: Vec<TaskId>,
    states: Vec<TaskState24>,
    hz: u64,
    /// A reschedule requested outside a tick (fork halving the parent's counter to zero), per CPU.
    resched: Vec<bool>,
    /// The task that ran last on each CPU (its SCHED_YIELD bit is cleared after the next pick).
    prev: Vec<Option<TaskId>>,
    nr_examined: u64,
    nr_recalcs: u64,
    nr_picks: u64,
    nr_running: usize,
}

impl Goodness {
    /// A new instance.
    pub fn new(_p: NoParams) -> Goodness {
        Goodness {
            runqueue: Vec::new(),
            states: Vec::new(),
            hz: 100,
            resched: Vec::new(),
            prev: Vec::new(),
            nr_examined: 0,
            nr_recalcs: 0,
            nr_picks: 0,
            nr_running: 0,
        }
    }

    /// A task's counter (tests).
    pub fn counter(&self, t: TaskId) -> i32 {
        self.states[t.idx()].counter
    }

    /// Recalculations so far.
    pub fn recalcs(&self) -> u64 {
        self.nr_recalcs
    }

    #[cfg(test)]
    pub(crate) fn states_for_test(&mut self, t: TaskId) -> &mut TaskState24 {
        &mut self.states[t.idx()]
    }

    fn remove(&mut self, t: TaskId) {
        if let Some(i) = self.runqueue.iter().position(|&x| x == t) {
            self.runqueue.remove(i);
        }
    }
}

/// The recalculation loop: every live task, sleepers included.
pub(crate) fn recalculate(ctx: &Ctx, states: &mut [TaskState24], hz: u64) -> u64 {
    let mut n = 0;
    for (i, st) in states.iter_mut().enumerate() {
        if st.alive {
            st.counter = (st.counter >> 1) + nice_to_ticks(ctx.tasks[i].nice, hz);
            n += 1;
        }
    }
    n
}

impl SchedPolicy for Goodness {
    fn name(&self) -> &str {
        "linux24"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.hz = ctx.hz();
        self.resched = vec![false; ctx.nr_cpus()];
        self.prev = vec![None; ctx.nr_cpus()];
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.states.len() <= t.idx() {
            self.states.resize(t.idx() + 1, TaskState24::default());
        }
        let counter = fork_counter(ctx, t, &mut self.states, &mut self.resched, self.hz);
        self.states[t.idx()] = TaskState24::forked(ctx, t, counter);
        reschedule_idle(ctx, t, &self.states, &mut self.nr_examined)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        match sync_wakeup_cpu(ctx, t, wake, &mut self.states) {
            Some(cpu) => cpu,
            None => reschedule_idle(ctx, t, &self.states, &mut self.nr_examined),
        }
    }

    fn enqueue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if why != EnqueueReason::Migrated {
            self.nr_running += 1;
        }
        self.runqueue.push(t); // add_to_runqueue: the tail (2.4.27)
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.remove(t);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.nr_picks += 1;
        let prev = self.prev[cpu.idx()];
        let this_mm = prev.map(|p| ctx.task(p).tgid);
        let mut recalculated = false;
        let choice = loop {
            let mut best: Option<(i32, TaskId)> = None;
            for &t in &self.runqueue {
                self.nr_examined += 1;
                if !can_schedule(ctx, t, cpu) {
                    continue;
                }
                let g = goodness(ctx, t, &self.states[t.idx()], cpu, this_mm);
                if best.is_none_or(|(bg, _)| g > bg) {
                    best = Some((g, t));
                }
            }
            match best {
                Some((0, _)) if !recalculated => {
                    self.nr_recalcs += 1;
                    self.nr_examined += recalculate(ctx, &mut self.states, self.hz);
                    recalculated = true;
                }
                other => break other.map(|b| b.1),
            }
        };
        // The SCHED_YIELD bit of the previous task is cleared once a decision is made.
        if let Some(p) = prev {
            self.states[p.idx()].yielded = false;
        }
        let t = choice?;
        self.states[t.idx()].processor = cpu; // schedule(): next->processor = this_cpu
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        self.prev[cpu.idx()] = Some(t);
        if !why.still_runnable() {
            self.remove(t);
            self.nr_running -= 1;
            return;
        }
        // schedule(): an exhausted SCHED_RR task is refilled and moved to the end.
        if ctx.task(t).class == SchedClass::Rr && self.states[t.idx()].counter == 0 {
            self.states[t.idx()].counter = nice_to_ticks(ctx.task(t).nice, self.hz);
            self.remove(t);
            self.runqueue.push(t);
        }
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        tick_counter(ctx, curr, &mut self.states[curr.idx()], &mut self.resched[cpu.idx()])
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        preempts(ctx, cpu, curr, woken, &mut self.states, &mut self.resched[cpu.idx()])
    }

    fn yield_task(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId) {
        // sys_sched_yield: only when other tasks wait (runnable ones not running on a CPU).
        let pending = self
            .runqueue
            .iter()
            .filter(|&&x| x != t && ctx.task(x).state != schedlab_core::TaskState::Running)
            .count();
        if pending > 0 {
            if ctx.task(t).class.is_normal() || ctx.task(t).class == SchedClass::Batch {
                self.states[t.idx()].yielded = true;
            }
            self.remove(t);
            self.runqueue.push(t); // move_last_runqueue
        }
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        exit_counter(ctx, t, &mut self.states, self.hz);
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_recalcs",
                value: self.nr_recalcs,
                help: "counter recalculations of all tasks",
            },
            PolicyStat { name: "nr_picks", value: self.nr_picks, help: "scheduling decisions" },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::TestWorld;

    #[test]
    fn slices_per_nice_level_at_hz_100() {
        // TICK_SCALE(20 - nice) + 1 with HZ=100 (>> 2): nice -20 -> 11, 0 -> 6, 19 -> 1.
        assert_eq!((nice_to_ticks(-20, 100), nice_to_ticks(0, 100), nice_to_ticks(19, 100)), (11, 6, 1));
        assert_eq!(nice_to_ticks(0, 1000), 41);
    }

    fn world(cpus: u32) -> (TestWorld, Goodness) {
        let mut w = TestWorld::new(cpus);
        w.tick_ns = 10_000_000; // HZ=100
        let mut g = Goodness::new(NoParams);
        g.init(&w.ctx());
        (w, g)
    }

    #[test]
    fn goodness_is_counter_plus_priority_with_bonuses() {
        let (mut w, mut g) = world(2);
        let a = w.add_task(0);
        let b = w.add_task(-5);
        w.start(&mut g, a);
        w.start(&mut g, b);
        let st = |g: &Goodness, t: TaskId| g.states[t.idx()];
        // b: counter 7 (nice -5 -> 25 >> 2 = 6, + 1), + 20 - (-5) = 32; a: 6 + 20 = 26.
        assert_eq!(goodness(&w.ctx(), b, &st(&g, b), CpuId(1), None), 32);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), None), 26);
        // Same mm: +1. On `p->processor`: +15, also for a child that has not run yet (do_fork copies
        // the parent's processor, CPU 0 here), wherever reschedule_idle sent the wakeup.
        let mm = Some(w.tasks[a.idx()].tgid);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), mm), 27);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(0), None), 26 + 15);
        g.states[a.idx()].processor = CpuId(1);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), None), 26 + 15);
        assert_eq!(w.pick(&mut g, CpuId(1)), Some(a), "the affinity bonus beats nice -5");
        // schedule() sets the chosen task's processor; b, never run, keeps its parent's CPU 0.
        assert_eq!((g.states[a.idx()].processor, g.states[b.idx()].processor), (CpuId(1), CpuId(0)));
    }

    /// `try_to_wake_up(p, synchronous)`: a sync wakeup (a pipe write) of a task allowed on the
    /// waker's CPU only queues it: no `reschedule_idle` (CPU 1 idles on) and no preemption of the
    /// waker, although the woken task's goodness is higher; without WF_SYNC `reschedule_idle` sends it
    /// to idle CPU 1, its `processor`.
    #[test]
    fn a_sync_wakeup_only_queues_the_task() {
        let (mut w, mut g) = world(2);
        let (waker, t) = (w.add_task(0), w.add_task(-20));
        w.start(&mut g, waker);
        w.start(&mut g, t);
        // Both run on CPU 0 (TestWorld counts them where reschedule_idle sent them).
        (w.cpus[0].nr_running, w.cpus[1].nr_running) = (2, 0);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(t));
        g.states[t.idx()].processor = CpuId(1);
        w.stop(&mut g, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(waker));
        for (sync, cpu, preempts) in [(true, CpuId(0), false), (false, CpuId(1), false)] {
            let info = WakeInfo {
                waker_cpu: CpuId(0),
                waker: Some(waker),
                sync,
                wait: schedlab_core::WaitKind::Pipe,
            };
            w.tasks[t.idx()].state = schedlab_core::TaskState::Runnable;
            assert_eq!(g.select_cpu(&w.ctx(), t, &info), cpu, "sync {sync}");
            g.enqueue(&w.ctx(), cpu, t, EnqueueReason::Wakeup);
            if cpu == CpuId(0) {
                assert_eq!(g.check_preempt(&w.ctx(), cpu, waker, t, WakeKind::Wakeup), preempts);
            }
            // Without the sync rule the waker would be preempted: t's goodness is higher.
            let mm = Some(w.tasks[waker.idx()].tgid);
            assert!(
                goodness(&w.ctx(), t, &g.states[t.idx()], CpuId(0), mm)
                    > goodness(&w.ctx(), waker, &g.states[waker.idx()], CpuId(0), mm)
            );
            g.remove(t);
            g.nr_running -= 1;
            w.tasks[t.idx()].state = schedlab_core::TaskState::Blocked;
        }
    }

    #[test]
    fn counters_recalculate_for_sleepers_too_when_all_runnable_are_spent() {
        let (mut w, mut g) = world(1);
        let (s, a) = (w.add_task(0), w.add_task(0));
        w.start(&mut g, s);
        w.start(&mut g, a);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(s), "equal goodness: the first in list order");
        w.stop(&mut g, CpuId(0), SwitchReason::Blocked); // s sleeps with its full counter of 6
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
        let resched = w.advance(&mut g, 6 * 10_000_000);
        assert_eq!((g.counter(a), resched), (0, vec![CpuId(0)]));
        w.stop(&mut g, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
        // The only runnable task has goodness 0: recalculate everyone, a = 0/2 + 6, the sleeper
        // s = 6/2 + 6 = 9 (2.4's bonus for sleeping).
        assert_eq!(g.recalcs(), 1);
        assert_eq!((g.counter(a), g.counter(s)), (6, 9));
    }
}

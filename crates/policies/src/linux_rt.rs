//! # The Linux real-time class (SCHED_FIFO / SCHED_RR) and the class stack
//!
//! Source: Linux 2.6.38 kernel/sched_rt.c and kernel/sched.c (`pick_next_task`, `check_preempt_curr`).
//!
//! Linux asks its scheduling classes in order: real-time first, then fair (CFS), then idle. The RT class
//! keeps, per CPU, 100 FIFO lists indexed by priority (`prio = 99 - rt_priority`, lower runs first) and a
//! bitmap of non-empty lists; it always runs the head of the highest non-empty list. The running task
//! stays at the head of its list: a SCHED_FIFO task preempted by a higher priority keeps its place;
//! `sched_yield` and an expired SCHED_RR slice (100 ms, `DEF_TIMESLICE`) move it to the tail. A woken
//! RT task preempts a running task of lower priority and any fair task.
//!
//! [`LinuxClasses`] stacks this class above a fair-class policy (CFS, later EEVDF): tasks are routed to
//! the class of their policy, `pick_next` asks RT before fair, and a wakeup across classes preempts only
//! upward.
//!
//! Simplifications: wakeup and fork placement use `find_lowest_rq` (the allowed CPU running the lowest
//! priority, the previous CPU first, then the nearest by topology) — 2.6.38 keeps a forked RT task on the
//! parent's CPU and relies on pushing; push/pull migration (`push_rt_tasks`, `pull_rt_task`) is reduced
//! to a pull when a CPU looks for work (newly idle) or runs only fair tasks (periodic tick); RT group
//! scheduling and RT bandwidth throttling (`sched_rt_runtime_us`) are not modelled.

use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, WakeInfo, WakeKind, WorkConservation,
};
use std::collections::VecDeque;

/// `DEF_TIMESLICE`: the SCHED_RR quantum, 100 ms.
pub const RR_TIMESLICE_NS: Ns = 100_000_000;
/// RT priority levels.
const MAX_RT_PRIO: usize = 100;

/// `prio` of an RT task: 0 is the highest.
fn rt_prio(ctx: &Ctx, t: TaskId) -> usize {
    MAX_RT_PRIO - 1 - ctx.task(t).rt_priority.clamp(1, 99) as usize
}

/// One CPU's RT runqueue.
#[derive(Clone, Debug)]
struct RtRq {
    lists: Vec<VecDeque<TaskId>>,
    bitmap: u128,
    nr_running: u32,
}

impl RtRq {
    fn new() -> RtRq {
        RtRq { lists: vec![VecDeque::new(); MAX_RT_PRIO], bitmap: 0, nr_running: 0 }
    }
    fn highest(&self) -> Option<usize> {
        (self.bitmap != 0).then(|| self.bitmap.trailing_zeros() as usize)
    }
    fn push(&mut self, prio: usize, t: TaskId) {
        self.lists[prio].push_back(t);
        self.bitmap |= 1 << prio;
        self.nr_running += 1;
    }
    fn remove(&mut self, prio: usize, t: TaskId) {
        let l = &mut self.lists[prio];
        let i = l.iter().position(|&x| x == t).expect("RT task on its list");
        l.remove(i);
        if l.is_empty() {
            self.bitmap &= !(1 << prio);
        }
        self.nr_running -= 1;
    }
}

/// The RT class on its own.
pub struct RtClass {
    rqs: Vec<RtRq>,
    /// Per task: (CPU queued on, prio, RR slice left).
    state: Vec<Option<(CpuId, usize, Ns)>>,
    nr_running: usize,
    nr_examined: u64,
    nr_pulls: u64,
}

impl RtClass {
    fn new() -> RtClass {
        RtClass { rqs: Vec::new(), state: Vec::new(), nr_running: 0, nr_examined: 0, nr_pulls: 0 }
    }

    /// The priority a CPU currently runs at: the RT prio of its best queued task, else "below RT".
    fn cpu_prio(&self, cpu: CpuId) -> usize {
        self.rqs[cpu.idx()].highest().unwrap_or(MAX_RT_PRIO)
    }

    /// `find_lowest_rq`: an allowed CPU running something of lower priority than `prio`, preferring the
    /// previous CPU, then the nearest by topology, then the lowest id. `None` if none is lower.
    fn find_lowest_rq(&mut self, ctx: &Ctx, t: TaskId, prio: usize) -> Option<CpuId> {
        let info = ctx.task(t);
        let mut best: Option<(usize, schedlab_core::Level, CpuId)> = None;
        for c in info.allowed.iter() {
            self.nr_examined += 1;
            let p = self.cpu_prio(c);
            if p <= prio {
                continue;
            }
            // Lowest running priority first (idle below fair below RT), then proximity.
            let run_rank = if ctx.is_idle(c) { MAX_RT_PRIO + 1 } else { p };
            let key = (usize::MAX - run_rank, ctx.topo.level(info.cpu, c), c);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best.map(|b| b.2)
    }

    fn place(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        let prio = rt_prio(ctx, t);
        let prev = ctx.task(t).cpu;
        let allowed = ctx.task(t).allowed;
        if allowed.contains(prev) && self.cpu_prio(prev) > prio && ctx.is_idle(prev) {
            return prev;
        }
        self.find_lowest_rq(ctx, t, prio).unwrap_or(if allowed.contains(prev) {
            prev
        } else {
            allowed.first().expect("non-empty")
        })
    }

    fn ensure(&mut self, ctx: &Ctx, t: TaskId) {
        if self.rqs.is_empty() {
            self.rqs = vec![RtRq::new(); ctx.nr_cpus()];
        }
        if self.state.len() <= t.idx() {
            self.state.resize(t.idx() + 1, None);
        }
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, new: bool) {
        self.ensure(ctx, t);
        let prio = rt_prio(ctx, t);
        let slice = match self.state[t.idx()] {
            Some((_, _, s)) if !new => s,
            _ => RR_TIMESLICE_NS,
        };
        self.rqs[cpu.idx()].push(prio, t);
        self.state[t.idx()] = Some((cpu, prio, slice));
        self.nr_running += 1;
    }

    fn remove(&mut self, t: TaskId) {
        let (cpu, prio, _) = self.state[t.idx()].expect("queued RT task");
        self.rqs[cpu.idx()].remove(prio, t);
        self.nr_running -= 1;
    }

    fn requeue_tail(&mut self, t: TaskId) {
        let (cpu, prio, _) = self.state[t.idx()].expect("queued RT task");
        let l = &mut self.rqs[cpu.idx()].lists[prio];
        if let Some(i) = l.iter().position(|&x| x == t) {
            l.remove(i);
            l.push_back(t);
        }
    }

    fn pick(&mut self, cpu: CpuId) -> Option<TaskId> {
        let rq = self.rqs.get(cpu.idx())?;
        let prio = rq.highest()?;
        self.nr_examined += 1;
        rq.lists[prio].front().copied()
    }

    /// `task_tick_rt`: SCHED_RR slices, in ticks.
    fn tick(&mut self, ctx: &Ctx, t: TaskId) -> bool {
        if ctx.task(t).class != SchedClass::Rr {
            return false;
        }
        let Some((cpu, prio, left)) = self.state[t.idx()] else { return false };
        let left = left.saturating_sub(ctx.tick_ns);
        if left > 0 {
            self.state[t.idx()] = Some((cpu, prio, left));
            return false;
        }
        self.state[t.idx()] = Some((cpu, prio, RR_TIMESLICE_NS));
        if self.rqs[cpu.idx()].lists[prio].len() > 1 {
            self.requeue_tail(t);
            return true;
        }
        false
    }

    /// Simplified `pull_rt_task`: bring the best queued, not running RT task that would run here.
    fn pull(&mut self, ctx: &Ctx, cpu: CpuId, out: &mut Vec<Migration>) {
        let here = self.cpu_prio(cpu);
        let mut best: Option<(usize, CpuId, TaskId)> = None;
        for (i, rq) in self.rqs.iter().enumerate() {
            let src = CpuId(i as u32);
            if src == cpu || rq.nr_running < 2 {
                continue;
            }
            let running = ctx.cpu(src).curr;
            for prio in 0..here.min(MAX_RT_PRIO) {
                if rq.bitmap & (1 << prio) == 0 {
                    continue;
                }
                if let Some(&t) =
                    rq.lists[prio].iter().find(|&&t| Some(t) != running && ctx.task(t).allowed.contains(cpu))
                {
                    if best.is_none_or(|b| prio < b.0) {
                        best = Some((prio, src, t));
                    }
                    break;
                }
            }
        }
        if let Some((_, from, t)) = best {
            self.nr_pulls += 1;
            out.push(Migration { task: t, from, to: cpu });
        }
    }
}

/// The Linux class stack: the RT class above a fair-class policy `F`.
pub struct LinuxClasses<F: SchedPolicy> {
    rt: RtClass,
    fair: F,
    /// Per task: whether the fair class has met it (`task_new`); a task created real-time meets it
    /// when it first leaves the RT class.
    fair_known: Vec<bool>,
}

impl<F: SchedPolicy> LinuxClasses<F> {
    /// Stacks the RT class above `fair`.
    pub fn new(fair: F) -> Self {
        LinuxClasses { rt: RtClass::new(), fair, fair_known: Vec::new() }
    }

    /// The fair class, for inspection in tests.
    pub fn fair(&self) -> &F {
        &self.fair
    }
}

fn is_rt(ctx: &Ctx, t: TaskId) -> bool {
    ctx.task(t).class.is_rt()
}

impl<F: SchedPolicy> SchedPolicy for LinuxClasses<F> {
    fn name(&self) -> &str {
        self.fair.name()
    }

    fn init(&mut self, ctx: &Ctx) {
        self.rt.rqs = vec![RtRq::new(); ctx.nr_cpus()];
        self.fair.init(ctx);
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.fair_known.len() <= t.idx() {
            self.fair_known.resize(t.idx() + 1, false);
        }
        if is_rt(ctx, t) {
            self.rt.ensure(ctx, t);
            self.rt.place(ctx, t)
        } else {
            self.fair_known[t.idx()] = true;
            self.fair.task_new(ctx, t)
        }
    }

    /// `check_class_changed` across the stack: the task left its old class's queue at
    /// `dequeue(.., Save)` (the fair class making its vruntime relative, as `dequeue_entity` without
    /// `DEQUEUE_SLEEP` does) and `enqueue(.., Restore)` queues it in its new class, so a task that
    /// goes real-time and back keeps its place relative to the fair runqueue's `min_vruntime`. A
    /// task created real-time is introduced to the fair class (`task_new`, whose CPU choice is
    /// ignored) the first time it leaves the RT class; 2.6.38 gives such a task the runqueue's
    /// `min_vruntime`, `task_fork_fair` its child placement (a simplification). A change within the
    /// fair classes (SCHED_OTHER, BATCH, IDLE) is the fair class's own.
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, old_class: SchedClass, old_rt_priority: u8) {
        if is_rt(ctx, t) {
            self.rt.ensure(ctx, t);
            return;
        }
        if self.fair_known.len() <= t.idx() {
            self.fair_known.resize(t.idx() + 1, false);
        }
        if !self.fair_known[t.idx()] {
            self.fair_known[t.idx()] = true;
            self.fair.task_new(ctx, t);
        }
        self.fair.set_class(ctx, t, old_class, old_rt_priority);
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        if is_rt(ctx, t) {
            self.rt.place(ctx, t)
        } else {
            self.fair.select_cpu(ctx, t, wake)
        }
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if is_rt(ctx, t) {
            self.rt.enqueue(ctx, cpu, t, why == EnqueueReason::New);
        } else {
            self.fair.enqueue(ctx, cpu, t, why);
        }
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: DequeueReason) {
        if is_rt(ctx, t) {
            self.rt.remove(t);
        } else {
            self.fair.dequeue(ctx, cpu, t, why);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        match self.rt.pick(cpu) {
            Some(t) => Some(Dispatch::task(t)),
            None => self.fair.pick_next(ctx, cpu),
        }
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        if is_rt(ctx, t) {
            if !why.still_runnable() {
                self.rt.remove(t);
            }
        } else {
            self.fair.put_prev(ctx, cpu, t, why);
        }
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        if is_rt(ctx, curr) {
            self.rt.tick(ctx, curr)
        } else {
            self.fair.tick(ctx, cpu, curr)
        }
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool {
        match (is_rt(ctx, curr), is_rt(ctx, woken)) {
            (true, true) => rt_prio(ctx, woken) < rt_prio(ctx, curr),
            (false, true) => true,
            (true, false) => false,
            (false, false) => self.fair.check_preempt(ctx, cpu, curr, woken, kind),
        }
    }

    fn yield_task(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) {
        if is_rt(ctx, t) {
            self.rt.requeue_tail(t);
        } else {
            self.fair.yield_task(ctx, cpu, t);
        }
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if self.rt.nr_running > 0
            && kind != BalanceKind::NohzIdle
            && ctx.cpu(cpu).curr.is_none_or(|t| !is_rt(ctx, t))
        {
            self.rt.pull(ctx, cpu, out);
            if !out.is_empty() {
                return;
            }
        }
        self.fair.balance(ctx, cpu, kind, out);
    }

    fn group_new(&mut self, ctx: &Ctx, g: schedlab_core::GroupId) {
        self.fair.group_new(ctx, g);
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, old_nice: i8) -> Option<CpuId> {
        // set_user_nice: an RT task only stores the level; it counts once the task is fair again.
        if is_rt(ctx, t) {
            return None;
        }
        // A fair task's priority never preempts an RT task running on its CPU.
        self.fair.set_nice(ctx, t, old_nice).filter(|&c| !ctx.cpu(c).curr.is_some_and(|r| is_rt(ctx, r)))
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        if !is_rt(ctx, t) {
            self.fair.task_exit(ctx, t);
        }
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.rt.nr_examined) + self.fair.take_examined()
    }

    fn stats(&self) -> Vec<PolicyStat> {
        let mut v = self.fair.stats();
        v.push(PolicyStat {
            name: "nr_rt_pulls",
            value: self.rt.nr_pulls,
            help: "RT tasks pulled to a CPU running lower priorities",
        });
        v
    }

    fn counts_fork_placement(&self) -> bool {
        self.fair.counts_fork_placement()
    }

    fn exec_cpu(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) -> Option<CpuId> {
        // select_task_rq_rt places only wakeups and forks: an RT task execs where it is.
        if is_rt(ctx, t) {
            return None;
        }
        self.fair.exec_cpu(ctx, cpu, t)
    }

    fn work_conservation(&self) -> WorkConservation {
        // The RT class keeps per-CPU queues (with pulls, not a global queue), so a fair class's
        // machine-wide promise holds only per CPU for the stack.
        match self.fair.work_conservation() {
            WorkConservation::Global => WorkConservation::PerCpu,
            w => w,
        }
    }

    fn nr_runnable(&self) -> Option<usize> {
        self.fair.nr_runnable().map(|n| n + self.rt.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        self.fair.trace_values(t, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfs::{Cfs, CfsParams};
    use crate::testworld::TestWorld;

    fn stack(w: &TestWorld) -> LinuxClasses<Cfs> {
        let mut p = LinuxClasses::new(Cfs::new(CfsParams::default()));
        p.init(&w.ctx());
        p
    }

    #[test]
    fn rt_runs_before_fair_and_by_priority() {
        let mut w = TestWorld::new(1);
        let mut p = stack(&w);
        let fair = w.add_task(-20);
        let low = w.add_task(0);
        let high = w.add_task(0);
        w.tasks[low.idx()].class = SchedClass::Fifo;
        w.tasks[low.idx()].rt_priority = 10;
        w.tasks[high.idx()].class = SchedClass::Rr;
        w.tasks[high.idx()].rt_priority = 50;
        for t in [fair, low, high] {
            w.start(&mut p, t);
        }
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(high));
        // A woken higher RT priority preempts; lower or fair do not.
        assert!(!p.check_preempt(&w.ctx(), CpuId(0), high, low, WakeKind::Wakeup));
        assert!(p.check_preempt(&w.ctx(), CpuId(0), low, high, WakeKind::Wakeup));
        assert!(p.check_preempt(&w.ctx(), CpuId(0), fair, low, WakeKind::Wakeup));
        assert!(!p.check_preempt(&w.ctx(), CpuId(0), low, fair, WakeKind::Wakeup));
        w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(low));
        w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(fair));
    }

    #[test]
    fn a_fair_task_made_real_time_and_back_keeps_its_vruntime_lag() {
        let mut w = TestWorld::new(1);
        let mut p = stack(&w);
        let (a, b) = (w.add_task(0), w.add_task(0));
        for t in [a, b] {
            w.start(&mut p, t);
        }
        let first = w.pick(&mut p, CpuId(0)).unwrap();
        w.advance(&mut p, 3_000_000);
        w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
        let other = if first == a { b } else { a };
        let lag =
            |p: &LinuxClasses<Cfs>| p.fair().vruntime_of(first) as i64 - p.fair().vruntime_of(other) as i64;
        let before = lag(&p);
        assert!(before > 0, "the task that ran is ahead");
        w.set_class(&mut p, first, SchedClass::Fifo, 10);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(first), "real time runs first");
        w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
        w.set_class(&mut p, first, SchedClass::Normal, 0);
        // 2.6.38: dequeue_entity without DEQUEUE_SLEEP makes the vruntime relative to
        // min_vruntime, enqueue_entity without ENQUEUE_WAKEUP absolute again.
        assert_eq!(lag(&p), before);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(other), "the fair order is the one before");
    }

    #[test]
    fn rr_rotates_every_100ms_fifo_never() {
        let mut w = TestWorld::new(1);
        let mut p = stack(&w);
        let (a, b) = (w.add_task(0), w.add_task(0));
        for t in [a, b] {
            w.tasks[t.idx()].class = SchedClass::Rr;
            w.tasks[t.idx()].rt_priority = 20;
            w.start(&mut p, t);
        }
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
        let resched = w.advance(&mut p, 99_000_000);
        assert!(resched.is_empty(), "no rotation before 100 ms");
        let resched = w.advance(&mut p, 1_000_000);
        assert_eq!(resched, vec![CpuId(0)]);
        w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(b));
        // FIFO: a preempted task keeps its place at the head.
        let mut w = TestWorld::new(1);
        let mut p = stack(&w);
        let (a, b) = (w.add_task(0), w.add_task(0));
        for t in [a, b] {
            w.tasks[t.idx()].class = SchedClass::Fifo;
            w.tasks[t.idx()].rt_priority = 20;
            w.start(&mut p, t);
        }
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
        assert!(w.advance(&mut p, 500_000_000).is_empty());
        w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    }
}

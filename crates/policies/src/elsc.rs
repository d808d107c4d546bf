//! # ELSC: the table-based scheduler of Molloy & Honeyman
//!
//! Source: seed 001, "Scalable Linux Scheduling" (USENIX 2001), sec. 5; it replaces the run list of
//! the kernel it modified, Linux 2.3.99-pre4 (see [`crate::linux24`], `Kernel::V2_3_99`), and keeps
//! everything else: counters, `goodness()` bonuses, recalculation, `reschedule_idle`. The `kernel`
//! parameter puts the same table on 2.4.27's counters instead.
//!
//! The run queue is a table of 30 lists indexed by *static goodness*: `(counter + priority) / 4` for
//! SCHED_OTHER tasks (lists 0-19; 2.3.99's `p->priority`, 20 ticks at HZ 100 for nice 0, or 2.4.27's
//! `20 - nice`), `20 + rt_priority / 10` for real-time tasks (the 10 highest lists). A task with a
//! non-zero counter goes to the front of its list; a task with a zero counter is indexed by the counter
//! the next recalculation will give it (`counter/2 + slice`) and goes to the end of its list, so
//! zero-counter tasks wait behind the others, already in place for after the recalculation. `top` is
//! the highest list holding a usable (non-zero counter) task; `next_top` the highest holding any task.
//! Running tasks are taken out of their list and put back when they stop.
//!
//! A decision searches the `top` list from the front: tasks running on another CPU are skipped; a
//! zero-counter task ends the list; at most `nr_cpus / 2 + 5` tasks are examined; the utility is the
//! goodness with the affinity (+15) and same-mm (+1) bonuses; on a uniprocessor the first task sharing
//! the previous task's mm is taken at once. A task that just yielded runs only if nothing else in the
//! list can. If every task of the list runs elsewhere, the next populated list is searched. Counters are
//! recalculated only when `top` is empty and `next_top` is not.
//!
//! Its two documented differences from 2.4 follow: it may run a top-list task without the affinity bonus
//! where 2.4 would have picked a lower list's task that has it; and a yielding task that is alone runs
//! again instead of triggering a recalculation.

use crate::linux24::{
    can_schedule, params_info, recalculate, set_param, slice_ticks, static_goodness, wake_cpu, Kernel,
    Linux24Params, SliceClock, TaskState24, CACHEFLUSH_TIME_NS, PROC_CHANGE_PENALTY,
};
use crate::params::{ParamInfo, Params};
use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, PolicyStat, SchedClass, SchedPolicy, SwitchReason,
    TaskId, WakeInfo, WakeKind, WorkConservation,
};
use std::collections::VecDeque;

/// Lists in the table.
pub const NR_LISTS: usize = 30;
/// The first of the 10 real-time lists.
const RT_BASE: usize = 20;

/// Parameters of `elsc`: the kernel generation it modifies (default 2.3.99-pre4, seed 001's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElscParams(pub Linux24Params);

impl Default for ElscParams {
    fn default() -> Self {
        ElscParams(Linux24Params { kernel: Kernel::V2_3_99, cacheflush_time_ns: CACHEFLUSH_TIME_NS })
    }
}

impl Params for ElscParams {
    fn info() -> &'static [ParamInfo] {
        params_info("2.3.99")
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        set_param(&mut self.0.kernel, &mut self.0.cacheflush_time_ns, key, value)
    }
}

/// The ELSC scheduler.
pub struct Elsc {
    p: Linux24Params,
    /// 2.3.99's `avg_slice` bookkeeping.
    clock: SliceClock,
    lists: Vec<VecDeque<TaskId>>,
    /// The list each queued task is in.
    list_of: Vec<Option<u8>>,
    states: Vec<TaskState24>,
    hz: u64,
    ncpus: usize,
    resched: Vec<bool>,
    prev: Vec<Option<TaskId>>,
    nr_examined: u64,
    nr_recalcs: u64,
    nr_picks: u64,
    nr_running: usize,
}

impl Elsc {
    /// A new instance.
    pub fn new(p: ElscParams) -> Elsc {
        Elsc {
            p: p.0,
            clock: SliceClock::default(),
            lists: vec![VecDeque::new(); NR_LISTS],
            list_of: Vec::new(),
            states: Vec::new(),
            hz: 100,
            ncpus: 1,
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

    /// The list a queued task is in (tests).
    pub fn list_of(&self, t: TaskId) -> Option<usize> {
        self.list_of.get(t.idx()).copied().flatten().map(usize::from)
    }

    /// Recalculations so far.
    pub fn recalcs(&self) -> u64 {
        self.nr_recalcs
    }

    fn usable(ctx: &Ctx, st: &TaskState24, t: TaskId) -> bool {
        st.counter > 0 || ctx.task(t).class.is_rt()
    }

    /// `add_to_runqueue`: by static goodness; zero-counter tasks by their predicted counter, at the end.
    fn insert(&mut self, ctx: &Ctx, t: TaskId) {
        let info = ctx.task(t);
        let st = self.states[t.idx()];
        let (list, front) = if info.class.is_rt() {
            ((RT_BASE + info.rt_priority as usize / 10).min(NR_LISTS - 1), true)
        } else {
            let counter = if st.counter > 0 {
                st.counter
            } else {
                (st.counter >> 1) + slice_ticks(self.p.kernel, info.nice, self.hz)
            };
            let static_part = static_goodness(self.p.kernel, info.nice, self.hz);
            let sg = ((counter + static_part) / 4).clamp(0, RT_BASE as i32 - 1) as usize;
            (sg, st.counter > 0)
        };
        if front {
            self.lists[list].push_front(t);
        } else {
            self.lists[list].push_back(t);
        }
        self.list_of[t.idx()] = Some(list as u8);
    }

    fn remove(&mut self, t: TaskId) {
        if let Some(l) = self.list_of[t.idx()].take() {
            let list = &mut self.lists[l as usize];
            let i = list.iter().position(|&x| x == t).expect("listed task");
            list.remove(i);
        }
    }

    /// `top`: the highest list with a usable task at its front.
    fn top(&self, ctx: &Ctx) -> Option<usize> {
        (0..NR_LISTS)
            .rev()
            .find(|&l| self.lists[l].front().is_some_and(|&t| Self::usable(ctx, &self.states[t.idx()], t)))
    }

    /// `next_top`: the highest non-empty list.
    fn next_top(&self) -> Option<usize> {
        (0..NR_LISTS).rev().find(|&l| !self.lists[l].is_empty())
    }

    /// The limited search from `top` down. Returns the chosen task.
    fn search(&mut self, ctx: &Ctx, cpu: CpuId, top: usize) -> Option<TaskId> {
        let limit = self.ncpus / 2 + 5;
        let prev = self.prev[cpu.idx()];
        let this_mm = prev.map(|p| ctx.task(p).tgid);
        for l in (0..=top).rev() {
            let mut examined = 0;
            let mut best: Option<(i32, TaskId)> = None;
            let mut yielded: Option<TaskId> = None;
            for &t in &self.lists[l] {
                let st = &self.states[t.idx()];
                if !Self::usable(ctx, st, t) {
                    break; // the rest of the list has zero counters
                }
                if !can_schedule(ctx, t, cpu) {
                    continue; // running on another CPU (or not allowed here)
                }
                examined += 1;
                self.nr_examined += 1;
                let info = ctx.task(t);
                if st.yielded {
                    yielded = yielded.or(Some(t));
                } else {
                    let utility = if info.class.is_rt() {
                        1000 + info.rt_priority as i32
                    } else {
                        let mut u = st.counter + 20 - info.nice as i32;
                        if self.ncpus > 1 && info.cpu == cpu && info.last_ran_ns > 0 {
                            u += PROC_CHANGE_PENALTY;
                        }
                        if this_mm == Some(info.tgid) {
                            u += 1;
                            if self.ncpus == 1 {
                                best = Some((i32::MAX, t)); // UP shortcut: take the same-mm task now
                                break;
                            }
                        }
                        u
                    };
                    if best.is_none_or(|(b, _)| utility > b) {
                        best = Some((utility, t));
                    }
                }
                if examined >= limit {
                    break;
                }
            }
            if let Some((_, t)) = best {
                return Some(t);
            }
            if yielded.is_some() {
                return yielded; // run the yielder only if nothing else in the list can run
            }
        }
        None
    }
}

impl SchedPolicy for Elsc {
    fn name(&self) -> &str {
        "elsc"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.hz = ctx.hz();
        self.ncpus = ctx.nr_cpus();
        self.resched = vec![false; ctx.nr_cpus()];
        self.prev = vec![None; ctx.nr_cpus()];
        self.clock = SliceClock::new(ctx);
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.states.len() <= t.idx() {
            self.states.resize(t.idx() + 1, TaskState24::default());
            self.list_of.resize(t.idx() + 1, None);
        }
        let counter =
            crate::linux24::fork_counter(ctx, t, &mut self.states, &mut self.resched, self.p.kernel);
        self.states[t.idx()] = TaskState24::forked(ctx, t, counter, self.p.kernel);
        wake_cpu(ctx, t, &self.states, &self.p, &mut self.nr_examined)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        match crate::linux24::sync_wakeup_cpu(ctx, t, wake, &mut self.states) {
            Some(cpu) => cpu,
            None => wake_cpu(ctx, t, &self.states, &self.p, &mut self.nr_examined),
        }
    }

    fn enqueue(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        self.insert(ctx, t);
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.remove(t);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.nr_picks += 1;
        let mut choice = None;
        for _pass in 0..2 {
            if let Some(top) = self.top(ctx) {
                choice = self.search(ctx, cpu, top);
                if choice.is_some() {
                    break;
                }
            }
            // Nothing usable: recalculate only if zero-counter tasks wait (next_top), and only once.
            if self.next_top().is_none() || _pass == 1 {
                break;
            }
            let zero_waiting =
                self.lists.iter().flatten().any(|&t| !Self::usable(ctx, &self.states[t.idx()], t));
            if !zero_waiting {
                break;
            }
            self.nr_recalcs += 1;
            self.nr_examined += recalculate(ctx, &mut self.states, self.hz);
        }
        if let Some(p) = self.prev[cpu.idx()] {
            self.states[p.idx()].yielded = false;
        }
        let from = self.clock.from(cpu, self.prev[cpu.idx()]);
        self.clock.switch(cpu, from, choice, ctx.now, &mut self.states);
        let t = choice?;
        self.remove(t); // the chosen task leaves its list while it runs
        self.states[t.idx()].processor = cpu; // schedule(): next->processor = this_cpu
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        self.prev[cpu.idx()] = Some(t);
        if !why.still_runnable() {
            self.nr_running -= 1;
            return;
        }
        if ctx.task(t).class == SchedClass::Rr && self.states[t.idx()].counter == 0 {
            self.states[t.idx()].counter = slice_ticks(self.p.kernel, ctx.task(t).nice, self.hz);
        }
        self.insert(ctx, t);
        if self.states[t.idx()].yielded || ctx.task(t).class == SchedClass::Rr {
            // move_last_runqueue: to the end of its section of the list (before zero-counter tasks).
            let l = self.list_of[t.idx()].expect("just inserted") as usize;
            let list = &mut self.lists[l];
            let i = list.iter().position(|&x| x == t).expect("listed");
            list.remove(i);
            let states = &self.states;
            let end =
                list.iter().position(|&x| !Self::usable(ctx, &states[x.idx()], x)).unwrap_or(list.len());
            list.insert(end, t);
        }
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        crate::linux24::tick_counter(ctx, curr, &mut self.states[curr.idx()], &mut self.resched[cpu.idx()])
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        crate::linux24::preempts(ctx, cpu, curr, woken, &mut self.states, &mut self.resched[cpu.idx()])
    }

    fn yield_task(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId) {
        if ctx.task(t).class.is_normal() || ctx.task(t).class == SchedClass::Batch {
            self.states[t.idx()].yielded = true;
        }
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        crate::linux24::exit_counter(ctx, t, &mut self.states, self.hz);
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
    use crate::linux24::Goodness;

    /// ELSC on 2.4.27's counters and goodness (the kernel the tests below were derived for).
    fn elsc_2427() -> Elsc {
        Elsc::new(ElscParams(Linux24Params::default()))
    }
    use crate::testworld::TestWorld;

    fn world(cpus: u32) -> TestWorld {
        let mut w = TestWorld::new(cpus);
        w.tick_ns = 10_000_000; // HZ=100
        w
    }

    #[test]
    fn tasks_are_indexed_by_static_goodness() {
        let mut w = world(1);
        let mut e = elsc_2427();
        e.init(&w.ctx());
        let a = w.add_task(0); // counter 6: (6 + 20) / 4 = 6
        let b = w.add_task(-20); // counter 11: (11 + 40) / 4 = 12
        let r = w.add_task(0);
        w.tasks[r.idx()].class = SchedClass::Fifo;
        w.tasks[r.idx()].rt_priority = 55; // 20 + 5
        for t in [a, b, r] {
            w.start(&mut e, t);
        }
        assert_eq!((e.list_of(a), e.list_of(b), e.list_of(r)), (Some(6), Some(12), Some(25)));
        assert_eq!(w.pick(&mut e, CpuId(0)), Some(r));
    }

    #[test]
    fn tasks_are_indexed_by_counter_plus_priority_over_4_on_2399() {
        // Seed 001 sec. 5: "adding counter to priority and dividing by four", with 2.3.99's priority
        // (nice 0 -> 20, nice -20 -> 40, nice 5 -> 15 at HZ 100) and a first counter equal to it:
        // (20 + 20) / 4 = 10, (15 + 15) / 4 = 7, (40 + 40) / 4 = 20 -> the highest SCHED_OTHER list, 19.
        let mut w = world(1);
        let mut e = Elsc::new(ElscParams::default());
        e.init(&w.ctx());
        let (a, b, c) = (w.add_task(0), w.add_task(5), w.add_task(-20));
        for t in [a, b, c] {
            w.start(&mut e, t);
        }
        assert_eq!((e.list_of(a), e.list_of(b), e.list_of(c)), (Some(10), Some(7), Some(19)));
        // A zero-counter task is indexed by its predicted counter, 0 / 2 + 20: (20 + 20) / 4 = 10.
        let t = w.pick(&mut e, CpuId(0)).expect("a task");
        assert_eq!(t, c);
        e.states[a.idx()].counter = 0;
        e.remove(a);
        e.insert(&w.ctx(), a);
        assert_eq!(e.list_of(a), Some(10));
        assert_eq!(e.lists[10].back(), Some(&a), "behind the tasks with a counter");
    }

    /// Tasks examined by one decision with `n` runnable CPU hogs on one CPU.
    fn examined_per_pick(p: &mut dyn SchedPolicy, n: usize) -> u64 {
        let mut w = world(1);
        p.init(&w.ctx());
        let tasks: Vec<TaskId> = (0..n).map(|_| w.add_task(0)).collect();
        for &t in &tasks {
            w.start(p, t);
        }
        p.take_examined();
        w.pick(p, CpuId(0));
        p.take_examined()
    }

    #[test]
    fn elsc_examines_a_bounded_number_of_tasks_while_goodness_scans_them_all() {
        for n in [10, 100, 1000] {
            let g = examined_per_pick(&mut Goodness::new(Linux24Params::default()), n);
            let e = examined_per_pick(&mut elsc_2427(), n);
            assert_eq!(g, n as u64, "2.4 computes goodness for every runnable task");
            assert!(e <= 5, "ELSC examines at most nr_cpus/2 + 5 = 5 on one CPU: {e} with {n} tasks");
        }
    }

    #[test]
    fn a_lone_yielder_runs_again_without_a_recalculation() {
        let mut w = world(1);
        let mut e = elsc_2427();
        e.init(&w.ctx());
        let a = w.add_task(0);
        w.start(&mut e, a);
        assert_eq!(w.pick(&mut e, CpuId(0)), Some(a));
        e.yield_task(&w.ctx(), CpuId(0), a);
        w.stop(&mut e, CpuId(0), SwitchReason::Yielded);
        assert_eq!(w.pick(&mut e, CpuId(0)), Some(a));
        assert_eq!(e.recalcs(), 0);
        // Linux 2.4 in the same situation gives the yielder goodness -1... and recalculates when the
        // yield bit is set with others pending; alone, sys_sched_yield does not set it.
        let mut w = world(1);
        let mut g = Goodness::new(Linux24Params::default());
        g.init(&w.ctx());
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.start(&mut g, a);
        w.start(&mut g, b);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
        // b has used its slice (counter 0): a yields with b pending, so best goodness is 0 -> recalc.
        g.states_for_test(b).counter = 0;
        g.yield_task(&w.ctx(), CpuId(0), a);
        w.stop(&mut g, CpuId(0), SwitchReason::Yielded);
        w.pick(&mut g, CpuId(0));
        assert_eq!(g.recalcs(), 1);
    }
}

//! # MQS and PMQS: per-CPU run queues for Linux 2.4, searched within CPU pools
//!
//! Sources: M. Kravetz, H. Franke, S. Nagar, R. Ravindran, *Enhancing Linux Scheduler Scalability*,
//! Ottawa Linux Symposium 2001, and its presentation (the multi-queue scheduler, MQS); H. Franke,
//! S. Nagar, M. Kravetz, R. Ravindran, *PMQS: Scalable Linux Scheduling for High End Servers*,
//! 5th Annual Linux Showcase 2001 (CPU pools and load balancing); seed 000 sec. 3.5 summarises PMQS.
//!
//! MQS keeps Linux 2.4's decision rule, `goodness()` with its counters and recalculation
//! ([`crate::linux24`]), but splits the single run queue (and its lock) into one per CPU:
//!
//! * **`schedule()`** on a CPU first looks at the real-time tasks (one global list, scanned as in
//!   2.4), then scans only its **own queue** for the best goodness (with 2.4's `PROC_CHANGE_PENALTY`
//!   bonus for tasks that last ran here and the +1 for the same address space). It then reads each
//!   other queue's **`max_na_goodness`**, the best *non-affinity* goodness (no CPU or mm bonus) of the
//!   tasks waiting there. If one is higher than its best local goodness, it locks that queue,
//!   validates the value, moves that task to its own queue and runs it ("quit looking").
//! * `max_na_goodness` is a cache, kept as the presentation describes: adding a task raises it to the
//!   task's value; removing the task that holds it clears it; `schedule()` sets its own queue's to the
//!   second-best task it saw. A stale value is found out at validation and corrected.
//! * When the best goodness found is 0 (every candidate has used its slice), the counters of all tasks
//!   are recalculated as in 2.4 and the search runs again.
//! * Wakeups use 2.4's `reschedule_idle` and queue the task on the CPU chosen.
//!
//! **PMQS** groups the CPUs into **pools** and limits the remote search (and wakeup placement) to the
//! CPUs of the caller's pool, so no scheduling decision touches another pool's queues. The imbalance
//! this leaves between pools is corrected by a separate **load balancer**. With one pool of all CPUs
//! this is MQS.
//!
//! Simplifications (also in docs/policies/pmqs.md):
//! * The PMQS paper compares several load balancers; the one here, run every `balance_interval_ms`,
//!   moves waiting tasks from the pool with the most runnable tasks per CPU to the one with the fewest
//!   for as long as the busy pool stays at least as loaded per CPU as the other after the move, each
//!   time from the longest queue of the busy pool to the shortest of the other, the first movable
//!   task in queue order.
//! * Pools are `pool_size` consecutive CPU numbers, or with `pool_size=0` the CPUs of each NUMA node
//!   (one pool on a machine without nodes: MQS).
//! * 2.4's `__schedule_tail` offers a still-runnable previous task to an idle CPU
//!   (`reschedule_idle(prev)`); here an idle CPU of the same pool takes such a task at the next tick
//!   of a busy CPU (the engine's idle kick), by the same remote search.
//! * The `max_na_goodness` values are refreshed from scratch after a recalculation (every counter
//!   changed).

use crate::linux24::{
    can_schedule, exit_counter, fork_counter, goodness, nice_to_ticks, preempts, recalculate,
    reschedule_idle_in, tick_counter, Kernel, TaskState24,
};
use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::{
    BalanceKind, CpuId, CpuSet, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat,
    SchedClass, SchedPolicy, SwitchReason, TaskId, TaskState, WakeInfo, WakeKind, WorkConservation,
    NSEC_PER_MSEC,
};

/// A cleared `max_na_goodness`: lower than any task's.
const CLEARED: i32 = -1000;
/// Tasks the pool balancer moves at most per pass.
const MAX_MOVES: usize = 32;

/// PMQS's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmqsParams {
    /// CPUs per pool (consecutive CPU numbers); 0 = one pool per NUMA node.
    pub pool_size: u32,
    /// Period of the pool load balancer, ms.
    pub balance_interval_ms: u64,
}

impl Default for PmqsParams {
    fn default() -> Self {
        PmqsParams { pool_size: 0, balance_interval_ms: 100 }
    }
}

impl Params for PmqsParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo {
                key: "pool_size",
                default: "0",
                help: "CPUs per pool, consecutive CPU numbers (1 to 1024); 0 = one pool per NUMA node (MQS on a machine without nodes)",
            },
            ParamInfo {
                key: "balance_interval_ms",
                default: "100",
                help: "period of the load balancer between pools, ms (1 to 60000)",
            },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "pool_size" => self.pool_size = parse_u64(value, 0..=1024)? as u32,
            "balance_interval_ms" => self.balance_interval_ms = parse_u64(value, 1..=60_000)?,
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// Non-affinity goodness: 2.4's goodness without the CPU and address-space bonuses.
fn na_goodness(ctx: &Ctx, t: TaskId, st: &TaskState24) -> i32 {
    if st.yielded {
        return -1;
    }
    if st.counter == 0 {
        return 0;
    }
    st.counter + 20 - ctx.task(t).nice as i32
}

/// The MQS / PMQS scheduler.
pub struct Pmqs {
    p: PmqsParams,
    hz: u64,
    states: Vec<TaskState24>,
    /// The CPU whose queue a (non-RT) task is on.
    on: Vec<Option<CpuId>>,
    /// Per-CPU run lists in list order, running tasks included (as 2.4 keeps them).
    rqs: Vec<Vec<TaskId>>,
    /// Per-CPU `max_na_goodness` cache.
    max_na: Vec<i32>,
    /// The real-time run list (global), running ones included.
    rt: Vec<TaskId>,
    /// Pool of each CPU.
    pool: Vec<u32>,
    /// CPUs of each pool.
    pool_cpus: Vec<CpuSet>,
    /// Task that last ran on each CPU.
    prev: Vec<Option<TaskId>>,
    /// Reschedule asked outside a tick (fork emptying the parent's counter).
    resched: Vec<bool>,
    next_balance_ns: Ns,
    nr_running: usize,
    nr_examined: u64,
    nr_recalcs: u64,
    nr_steals: u64,
    nr_stale: u64,
    nr_pool_moves: u64,
}

impl Pmqs {
    /// A new instance.
    pub fn new(p: PmqsParams) -> Pmqs {
        let next = p.balance_interval_ms * NSEC_PER_MSEC;
        Pmqs {
            p,
            hz: 100,
            states: Vec::new(),
            on: Vec::new(),
            rqs: Vec::new(),
            max_na: Vec::new(),
            rt: Vec::new(),
            pool: Vec::new(),
            pool_cpus: Vec::new(),
            prev: Vec::new(),
            resched: Vec::new(),
            next_balance_ns: next,
            nr_running: 0,
            nr_examined: 0,
            nr_recalcs: 0,
            nr_steals: 0,
            nr_stale: 0,
            nr_pool_moves: 0,
        }
    }

    /// The pool of a CPU (tests).
    pub fn pool_of(&self, cpu: CpuId) -> u32 {
        self.pool[cpu.idx()]
    }

    /// The tasks on a CPU's queue, in list order (tests).
    pub fn queue(&self, cpu: CpuId) -> &[TaskId] {
        &self.rqs[cpu.idx()]
    }

    /// A CPU's cached `max_na_goodness` (tests).
    pub fn max_na_goodness(&self, cpu: CpuId) -> i32 {
        self.max_na[cpu.idx()]
    }

    /// A task's counter (tests).
    pub fn counter(&self, t: TaskId) -> i32 {
        self.states[t.idx()].counter
    }

    /// `add_to_runqueue`: the tail of `cpu`'s list, raising its `max_na_goodness`.
    fn add(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) {
        self.rqs[cpu.idx()].push(t);
        self.on[t.idx()] = Some(cpu);
        // MQS queues a task on its `p->processor`'s run queue.
        self.states[t.idx()].processor = cpu;
        let na = na_goodness(ctx, t, &self.states[t.idx()]);
        self.max_na[cpu.idx()] = self.max_na[cpu.idx()].max(na);
    }

    /// `del_from_runqueue`: clears the cache if `t` held its value.
    fn del(&mut self, ctx: &Ctx, t: TaskId) {
        let Some(cpu) = self.on[t.idx()].take() else { return };
        let q = &mut self.rqs[cpu.idx()];
        if let Some(i) = q.iter().position(|&x| x == t) {
            q.remove(i);
        }
        if na_goodness(ctx, t, &self.states[t.idx()]) == self.max_na[cpu.idx()] {
            self.max_na[cpu.idx()] = CLEARED;
        }
    }

    /// The best waiting task of `src`'s queue that `cpu` may run, by non-affinity goodness (the first
    /// on ties), and the second best value.
    fn best_na(&mut self, ctx: &Ctx, src: CpuId, cpu: CpuId) -> (Option<(i32, TaskId)>, i32) {
        let (mut best, mut second) = (None::<(i32, TaskId)>, CLEARED);
        for &t in &self.rqs[src.idx()] {
            self.nr_examined += 1;
            if !can_schedule(ctx, t, cpu) {
                continue;
            }
            let na = na_goodness(ctx, t, &self.states[t.idx()]);
            match best {
                Some((b, _)) if na <= b => second = second.max(na),
                _ => {
                    if let Some((b, _)) = best {
                        second = second.max(b);
                    }
                    best = Some((na, t));
                }
            }
        }
        (best, second)
    }

    /// The remote search: the best validated task of another queue of `cpu`'s pool whose non-affinity
    /// goodness beats `local`. Stale caches met on the way are corrected.
    fn remote_candidate(&mut self, ctx: &Ctx, cpu: CpuId, local: i32) -> Option<(i32, TaskId)> {
        let pool = self.pool_cpus[self.pool[cpu.idx()] as usize];
        let mut order: Vec<(i32, CpuId)> = pool
            .iter()
            .filter(|&c| c != cpu)
            .map(|c| (self.max_na[c.idx()], c))
            .filter(|&(na, _)| na > local)
            .collect();
        self.nr_examined += pool.count() as u64;
        order.sort_by_key(|&(na, c)| (std::cmp::Reverse(na), c.0));
        for (_, src) in order {
            let (best, _) = self.best_na(ctx, src, cpu);
            match best {
                Some((na, t)) if na > local => return Some((na, t)),
                _ => {
                    // The cached value was stale (or only tasks it may not run beat it): refresh.
                    self.nr_stale += 1;
                    let (all, _) = self.best_na(ctx, src, src);
                    self.max_na[src.idx()] = all.map_or(CLEARED, |b| b.0);
                }
            }
        }
        None
    }

    /// Moves a waiting task to `cpu`'s queue (a steal or a balancer move).
    fn move_to(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId) {
        self.del(ctx, t);
        self.add(ctx, cpu, t);
    }

    /// The best real-time task `cpu` may run (goodness 1000 + rt_priority; -1 after a yield).
    fn pick_rt(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<TaskId> {
        let mut best: Option<(i32, TaskId)> = None;
        for &t in &self.rt {
            self.nr_examined += 1;
            if !can_schedule(ctx, t, cpu) {
                continue;
            }
            let g = goodness(ctx, t, &self.states[t.idx()], cpu, None);
            if best.is_none_or(|(b, _)| g > b) {
                best = Some((g, t));
            }
        }
        best.map(|b| b.1)
    }

    /// Every queue's `max_na_goodness` from scratch (after a recalculation).
    fn refresh_caches(&mut self, ctx: &Ctx) {
        for c in 0..self.rqs.len() {
            let (best, _) = self.best_na(ctx, CpuId(c as u32), CpuId(c as u32));
            self.max_na[c] = best.map_or(CLEARED, |b| b.0);
        }
    }

    /// Runnable normal tasks on the queues of a pool.
    fn pool_load(&self, pool: usize) -> usize {
        self.pool_cpus[pool].iter().map(|c| self.rqs[c.idx()].len()).sum()
    }

    /// The pool load balancer: evens out runnable tasks per CPU between the busiest and idlest pools.
    fn balance_pools(&mut self, ctx: &Ctx, out: &mut Vec<Migration>) {
        let n = self.pool_cpus.len();
        if n < 2 {
            return;
        }
        let mut load: Vec<usize> = (0..n).map(|p| self.pool_load(p)).collect();
        let cpus: Vec<usize> = self.pool_cpus.iter().map(|s| s.count()).collect();
        self.nr_examined += ctx.nr_cpus() as u64;
        // Pools by runnable tasks per CPU (in millionths), the lowest-numbered pool on ties.
        let per_cpu = |p: usize| load[p] as u128 * 1_000_000 / cpus[p] as u128;
        let busiest = (0..n).max_by_key(|&p| (per_cpu(p), std::cmp::Reverse(p))).expect("pools");
        let idlest = (0..n).min_by_key(|&p| (per_cpu(p), p)).expect("pools");
        let mut lengths: Vec<usize> = self.rqs.iter().map(|q| q.len()).collect();
        let mut moved_now: Vec<TaskId> = Vec::new();
        while moved_now.len() < MAX_MOVES {
            // Move while the busy pool stays at least as loaded per CPU as the other after the move:
            // (lb - 1) / cb >= (li + 1) / ci.
            let (lb, li, cb, ci) = (load[busiest], load[idlest], cpus[busiest], cpus[idlest]);
            if lb == 0 || (lb - 1) * ci < (li + 1) * cb {
                break;
            }
            let src =
                self.pool_cpus[busiest].iter().max_by_key(|c| (lengths[c.idx()], std::cmp::Reverse(c.0)));
            let dst = self.pool_cpus[idlest].iter().min_by_key(|c| (lengths[c.idx()], c.0));
            let (Some(src), Some(dst)) = (src, dst) else { break };
            let task = self.rqs[src.idx()].iter().copied().find(|&t| {
                self.nr_examined += 1;
                ctx.task(t).state == TaskState::Runnable
                    && ctx.task(t).allowed.contains(dst)
                    && !moved_now.contains(&t)
            });
            let Some(t) = task else { break };
            out.push(Migration { task: t, from: src, to: dst });
            moved_now.push(t);
            self.nr_pool_moves += 1;
            lengths[src.idx()] -= 1;
            lengths[dst.idx()] += 1;
            load[busiest] -= 1;
            load[idlest] += 1;
        }
    }
}

impl SchedPolicy for Pmqs {
    fn name(&self) -> &str {
        "pmqs"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.hz = ctx.hz();
        let n = ctx.nr_cpus();
        self.rqs = vec![Vec::new(); n];
        self.max_na = vec![CLEARED; n];
        self.prev = vec![None; n];
        self.resched = vec![false; n];
        self.pool = (0..n)
            .map(|c| match self.p.pool_size {
                0 => ctx.topo.place(CpuId(c as u32)).node,
                size => c as u32 / size,
            })
            .collect();
        // Number the pools densely in CPU order.
        let mut ids: Vec<u32> = Vec::new();
        for p in self.pool.iter_mut() {
            let i = ids.iter().position(|&x| x == *p).unwrap_or_else(|| {
                ids.push(*p);
                ids.len() - 1
            });
            *p = i as u32;
        }
        self.pool_cpus = vec![CpuSet::default(); ids.len()];
        for (c, &p) in self.pool.iter().enumerate() {
            self.pool_cpus[p as usize].insert(CpuId(c as u32));
        }
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.states.len() <= t.idx() {
            self.states.resize(t.idx() + 1, TaskState24::default());
            self.on.resize(t.idx() + 1, None);
        }
        let counter = fork_counter(ctx, t, &mut self.states, &mut self.resched, Kernel::V2_4_27);
        self.states[t.idx()] = TaskState24::forked(ctx, t, counter, Kernel::V2_4_27);
        self.place(ctx, t)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // MQS's try_to_wake_up: a synchronous wakeup the waker's CPU may run only queues the task on
        // its own CPU's queue (`add_to_runqueue`), without `reschedule_idle`.
        match crate::linux24::sync_wakeup_cpu(ctx, t, wake, &mut self.states) {
            Some(_) => ctx.task(t).cpu,
            None => self.place(ctx, t),
        }
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        if ctx.task(t).class.is_rt() {
            if !self.rt.contains(&t) {
                self.rt.push(t);
            }
        } else {
            self.add(ctx, cpu, t);
        }
    }

    fn dequeue(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: DequeueReason) {
        // A balancer move: the matching enqueue follows. RT tasks stay on the global list, unless
        // their class is changing (the enqueue that follows files them by the new one).
        if !ctx.task(t).class.is_rt() {
            self.del(ctx, t);
        } else if why == DequeueReason::Save {
            self.rt.retain(|&x| x != t);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let prev = self.prev[cpu.idx()];
        let this_mm = prev.map(|p| ctx.task(p).tgid);
        let choice = match self.pick_rt(ctx, cpu) {
            Some(t) => Some(t),
            None => {
                let mut recalculated = false;
                loop {
                    // The local scan: the best goodness, and the best other non-affinity value.
                    let mut best: Option<(i32, TaskId)> = None;
                    for &t in &self.rqs[cpu.idx()] {
                        self.nr_examined += 1;
                        if !can_schedule(ctx, t, cpu) {
                            continue;
                        }
                        let g = goodness(ctx, t, &self.states[t.idx()], cpu, this_mm);
                        if best.is_none_or(|(b, _)| g > b) {
                            best = Some((g, t));
                        }
                    }
                    let local = best.map_or(CLEARED, |b| b.0);
                    let remote = self.remote_candidate(ctx, cpu, local);
                    let chosen = remote.or(best);
                    if matches!(chosen, Some((0, _))) && !recalculated {
                        self.nr_recalcs += 1;
                        self.nr_examined += recalculate(ctx, &mut self.states, self.hz);
                        self.refresh_caches(ctx);
                        recalculated = true;
                        continue;
                    }
                    if let Some((_, t)) = remote {
                        self.nr_steals += 1;
                        self.move_to(ctx, t, cpu);
                    }
                    // This queue's cache: the best non-affinity value left waiting here.
                    let chosen_t = chosen.map(|c| c.1);
                    let mut left = CLEARED;
                    for &t in &self.rqs[cpu.idx()] {
                        if Some(t) != chosen_t && ctx.task(t).state != TaskState::Running {
                            left = left.max(na_goodness(ctx, t, &self.states[t.idx()]));
                        }
                    }
                    self.max_na[cpu.idx()] = left;
                    break chosen_t;
                }
            }
        };
        if let Some(p) = prev {
            self.states[p.idx()].yielded = false;
        }
        let t = choice?;
        self.states[t.idx()].processor = cpu; // schedule(): next->processor = this_cpu
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        self.prev[cpu.idx()] = Some(t);
        let rt = ctx.task(t).class.is_rt();
        if !why.still_runnable() {
            self.nr_running -= 1;
            if rt {
                self.rt.retain(|&x| x != t);
            } else {
                self.del(ctx, t);
            }
            return;
        }
        // schedule(): an exhausted SCHED_RR task is refilled and moved to the end of its list.
        if ctx.task(t).class == SchedClass::Rr && self.states[t.idx()].counter == 0 {
            self.states[t.idx()].counter = nice_to_ticks(ctx.task(t).nice, self.hz);
            self.rt.retain(|&x| x != t);
            self.rt.push(t);
        }
        if !rt {
            // Waiting again: it counts for this queue's max_na_goodness.
            let na = na_goodness(ctx, t, &self.states[t.idx()]);
            self.max_na[cpu.idx()] = self.max_na[cpu.idx()].max(na);
        }
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        tick_counter(ctx, curr, &mut self.states[curr.idx()], &mut self.resched[cpu.idx()])
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        preempts(ctx, cpu, curr, woken, &mut self.states, &mut self.resched[cpu.idx()])
    }

    fn yield_task(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) {
        // sys_sched_yield: only when other tasks wait; the yield bit, and the end of its list.
        let list: &Vec<TaskId> = if ctx.task(t).class.is_rt() { &self.rt } else { &self.rqs[cpu.idx()] };
        let pending = list.iter().any(|&x| x != t && ctx.task(x).state != TaskState::Running);
        if pending {
            if !ctx.task(t).class.is_rt() {
                self.states[t.idx()].yielded = true;
            }
            let list = if ctx.task(t).class.is_rt() { &mut self.rt } else { &mut self.rqs[cpu.idx()] };
            list.retain(|&x| x != t);
            list.push(t);
        }
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        match kind {
            BalanceKind::Periodic if ctx.now >= self.next_balance_ns => {
                let step = self.p.balance_interval_ms * NSEC_PER_MSEC;
                self.next_balance_ns = (ctx.now / step + 1) * step;
                self.balance_pools(ctx, out);
            }
            BalanceKind::NohzIdle if ctx.is_idle(cpu) => {
                // reschedule_idle(prev), late: an idle CPU takes waiting work from its pool.
                if let Some((_, t)) = self.remote_candidate(ctx, cpu, CLEARED) {
                    self.nr_steals += 1;
                    out.push(Migration { task: t, from: ctx.task(t).cpu, to: cpu });
                }
            }
            _ => {}
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
            PolicyStat {
                name: "nr_steals",
                value: self.nr_steals,
                help: "tasks taken from another queue of the pool by a better max_na_goodness",
            },
            PolicyStat {
                name: "nr_stale_max_na",
                value: self.nr_stale,
                help: "cached max_na_goodness values found stale at validation",
            },
            PolicyStat {
                name: "nr_pool_moves",
                value: self.nr_pool_moves,
                help: "tasks moved between pools by the balancer",
            },
            PolicyStat { name: "nr_pools", value: self.pool_cpus.len() as u64, help: "CPU pools" },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::PerCpu
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(st) = self.states.get(t.idx()) {
            out.push(("pmqs counter", st.counter as i64));
        }
    }
}

impl Pmqs {
    /// `reschedule_idle` over the task's pool (its last CPU's), or over all its allowed CPUs when its
    /// affinity leaves none there.
    fn place(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        let pool = self.pool_cpus[self.pool[ctx.task(t).cpu.idx()] as usize];
        let allowed = ctx.task(t).allowed;
        let cpus = if allowed.intersects(&pool) { allowed.and(&pool) } else { allowed };
        reschedule_idle_in(ctx, t, cpus, &self.states, &mut self.nr_examined)
    }
}

#[cfg(test)]
mod tests;

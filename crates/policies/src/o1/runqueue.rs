//! The O(1) scheduler's per-CPU run queues and their load balancer, shared by the policies built on
//! it (`o1` and `rsdl`: RSDL was a patch to the 2.6.20 O(1) scheduler that replaced its priority and
//! time-slice rules and kept its priority arrays and SMP balancing).
//!
//! Source: Linux 2.6.22 kernel/sched.c (`struct prio_array`, `update_load`, `source_load`,
//! `target_load`, `find_busiest_group`, `find_busiest_queue`, `move_tasks`, `load_balance`,
//! `load_balance_newidle`, `active_load_balance`, `rebalance_domains`, `idle_balance`,
//! `try_to_wake_up`, `wake_idle`, `sched_balance_self`), with 2.6.22's domains
//! (crate::domains::Style::Linux2622); docs/policies/o1.md has the table, function by function.

use crate::cfs::{fold_cpu_load, CPU_LOAD_IDX_MAX};
use crate::domains::{self, Domain, Style};
use schedlab_core::{CpuId, CpuSet, Ctx, Migration, Ns, TaskId};
use std::collections::VecDeque;

/// Priority levels: 0-99 real time, 100-139 = 120 + nice.
pub(crate) const MAX_PRIO: usize = 140;
/// `cache_hot_time`. 2.6.22 measures it per domain distance at boot (`calibrate_migration_costs`:
/// twice the worst measured cost of moving a cache-sized working set); schedlab uses 2.5 ms at every
/// level, the fixed `SD_CPU_INIT` value that calibration replaced (2.6.16).
const CACHE_HOT_NS: Ns = 2_500_000;
use crate::domains::SCHED_LOAD_SCALE_2622 as SCHED_LOAD_SCALE;
/// `MAX_PINNED_INTERVAL`: how far the interval backs off while every task is pinned, ms.
const MAX_PINNED_INTERVAL_MS: u64 = 512;

/// `struct prio_array`: a FIFO list per priority and a bitmap of the non-empty ones.
#[derive(Clone, Debug)]
pub(crate) struct PrioArray {
    pub queues: Vec<VecDeque<TaskId>>,
    bitmap: [u64; 3],
    pub nr_active: usize,
}

impl PrioArray {
    pub fn new() -> PrioArray {
        PrioArray { queues: vec![VecDeque::new(); MAX_PRIO], bitmap: [0; 3], nr_active: 0 }
    }

    pub fn push(&mut self, prio: usize, t: TaskId, head: bool) {
        if head {
            self.queues[prio].push_front(t);
        } else {
            self.queues[prio].push_back(t);
        }
        self.bitmap[prio / 64] |= 1 << (prio % 64);
        self.nr_active += 1;
    }

    /// Links `t` at position `idx` of its list (its end when shorter).
    pub fn insert(&mut self, prio: usize, t: TaskId, idx: usize) {
        let q = &mut self.queues[prio];
        q.insert(idx.min(q.len()), t);
        self.bitmap[prio / 64] |= 1 << (prio % 64);
        self.nr_active += 1;
    }

    pub fn remove(&mut self, prio: usize, t: TaskId) {
        let q = &mut self.queues[prio];
        let i = q.iter().position(|&x| x == t).expect("task in its priority list");
        q.remove(i);
        if q.is_empty() {
            self.bitmap[prio / 64] &= !(1 << (prio % 64));
        }
        self.nr_active -= 1;
    }

    /// Appends the whole list of `from` to the tail of the list of `to` (RSDL's minor rotation).
    pub fn merge_down(&mut self, from: usize, to: usize) {
        let moved = std::mem::take(&mut self.queues[from]);
        if moved.is_empty() {
            return;
        }
        self.bitmap[from / 64] &= !(1 << (from % 64));
        self.queues[to].extend(moved);
        self.bitmap[to / 64] |= 1 << (to % 64);
    }

    /// `sched_find_first_bit`.
    pub fn first(&self) -> Option<usize> {
        self.bitmap
            .iter()
            .enumerate()
            .find(|(_, &w)| w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }
}

/// One CPU's run queue; `X` holds what the policy on top keeps per CPU.
#[derive(Clone, Debug)]
pub(crate) struct Rq<X> {
    pub arrays: [PrioArray; 2],
    /// Index of the active array.
    pub active: usize,
    pub nr_running: u64,
    /// `raw_weighted_load`.
    pub load: u64,
    /// `cpu_load[]`: the load averaged over ticks with weights 1/2^i.
    pub cpu_load: [u64; CPU_LOAD_IDX_MAX],
    /// Tick of the last `cpu_load` update.
    last_load_update_tick: u64,
    domains: Vec<Domain>,
    /// The policy's own per-CPU state.
    pub x: X,
}

/// Every CPU's run queue and the balancer's counters.
pub(crate) struct Runqueues<X> {
    pub rqs: Vec<Rq<X>>,
    tick_ns: Ns,
    /// Where the ticks fall ([`Ctx::tick_phase_ns`]).
    tick_phase_ns: Ns,
    /// Tasks and CPUs the balancer examined (taken by the policy's `take_examined`).
    pub nr_examined: u64,
    /// Tasks the balancer moved.
    pub nr_lb_moved: u64,
}

impl<X: Clone> Runqueues<X> {
    /// No CPUs yet (before `init`).
    pub fn empty() -> Self {
        Runqueues { rqs: Vec::new(), tick_ns: 1_000_000, tick_phase_ns: 0, nr_examined: 0, nr_lb_moved: 0 }
    }

    /// One run queue per CPU with the 2.6.22 scheduling domains.
    pub fn build(ctx: &Ctx, x: X) -> Self {
        let rqs = domains::build_all(ctx.topo, ctx.numa, Style::Linux2622)
            .into_iter()
            .map(|domains| Rq {
                arrays: [PrioArray::new(), PrioArray::new()],
                active: 0,
                nr_running: 0,
                load: 0,
                cpu_load: [0; CPU_LOAD_IDX_MAX],
                last_load_update_tick: 0,
                domains,
                x: x.clone(),
            })
            .collect();
        Runqueues {
            rqs,
            tick_ns: ctx.tick_ns,
            tick_phase_ns: ctx.tick_phase_ns,
            nr_examined: 0,
            nr_lb_moved: 0,
        }
    }

    /// `update_cpu_load` (scheduler_tick), catching up ticks an idle CPU did not take.
    pub fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        let tick = schedlab_core::jiffies_at(now, self.tick_ns, self.tick_phase_ns);
        let rq = &mut self.rqs[cpu.idx()];
        let pending = tick.saturating_sub(rq.last_load_update_tick);
        rq.last_load_update_tick = tick;
        fold_cpu_load(&mut rq.cpu_load, rq.load, pending);
    }

    /// `source_load` (`local` false: a low guess, to migrate from) or `target_load` (`local`: a high
    /// guess, to migrate to) of `cpu` with averaging index `idx` (0: the raw load).
    pub fn guess_load(&self, cpu: CpuId, idx: usize, local: bool) -> u64 {
        let rq = &self.rqs[cpu.idx()];
        if idx == 0 {
            return rq.load;
        }
        let avg = rq.cpu_load[idx - 1];
        if local {
            avg.max(rq.load)
        } else {
            avg.min(rq.load)
        }
    }

    /// `idle_cpu(cpu)` during a balance of `idle` kind by `this`: a CPU running its idle task. A
    /// CPU balancing because it is about to go idle still runs the task that blocked
    /// (`idle_balance` runs inside `schedule()`), so it is not idle.
    fn idle_cpu(ctx: &Ctx, cpu: CpuId, this: CpuId, idle: IdleType) -> bool {
        !(cpu == this && idle == IdleType::NewlyIdle) && ctx.cpu(cpu).curr.is_none()
    }

    /// `rq_best_prio`: the better of the running task's priority (MAX_PRIO for the idle task) and
    /// the best static priority waiting in the expired array.
    fn best_prio(ctx: &Ctx, cpu: CpuId, view: &TaskView) -> usize {
        let curr = ctx.cpu(cpu).curr.map_or(MAX_PRIO, |c| (view.prio)(c));
        curr.min((view.best_expired_prio)(cpu))
    }

    /// 2.6.22 `find_busiest_group` for domain `level` of `this` (power-savings balancing off): the
    /// busiest group with more tasks than its capacity and its imbalance, or None when balanced.
    /// `excluded` CPUs are not looked at; `balance` (None for newly idle balancing) is cleared when
    /// another CPU of the local group (its first idle one, else its first) balances for it, and
    /// `sd_idle` when a CPU of the domain is busy.
    #[allow(clippy::too_many_arguments)]
    fn find_busiest_group(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        level: usize,
        idle: IdleType,
        load_idx: usize,
        excluded: &CpuSet,
        sd_idle: &mut bool,
        balance: Option<&mut bool>,
    ) -> Option<(usize, u64)> {
        let d = &self.rqs[this.idx()].domains[level];
        let pct = d.p.imbalance_pct;
        let groups = d.groups.clone();
        let (mut max_load, mut this_load, mut total_load, mut total_pwr) = (0u64, 0u64, 0u64, 0u64);
        let (mut busiest, mut busiest_nr, mut busiest_lpt) = (None, 0u64, 0u64);
        let (mut this_nr, mut this_lpt, mut this_pwr) = (0u64, 0u64, SCHED_LOAD_SCALE);
        for (gi, g) in groups.iter().enumerate() {
            let local = gi == 0;
            let mut balance_cpu = g.first;
            let mut first_idle = false;
            let (mut load_sum, mut nr_sum, mut weighted_sum) = (0u64, 0u64, 0u64);
            for &c in g.members.iter() {
                if excluded.contains(c) {
                    continue;
                }
                self.nr_examined += 1;
                if self.rqs[c.idx()].nr_running == 0 {
                    self.update_cpu_load(c, ctx.now);
                }
                let c_idle = Self::idle_cpu(ctx, c, this, idle);
                if *sd_idle && !c_idle {
                    *sd_idle = false;
                }
                if local && c_idle && !first_idle {
                    first_idle = true;
                    balance_cpu = c;
                }
                load_sum += self.guess_load(c, load_idx, local);
                nr_sum += self.rqs[c.idx()].nr_running;
                weighted_sum += self.rqs[c.idx()].load;
            }
            if local && balance_cpu != this {
                if let Some(b) = balance {
                    *b = false;
                    return None;
                }
            }
            total_load += load_sum;
            total_pwr += g.power;
            let avg_load = sg_div_cpu_power(g.power, load_sum * SCHED_LOAD_SCALE);
            let capacity = g.power / SCHED_LOAD_SCALE;
            if local {
                this_load = avg_load;
                this_nr = nr_sum;
                this_lpt = weighted_sum;
                this_pwr = g.power;
            } else if avg_load > max_load && nr_sum > capacity {
                max_load = avg_load;
                busiest = Some((gi, g.power));
                busiest_nr = nr_sum;
                busiest_lpt = weighted_sum;
            }
        }
        let (gi, busiest_pwr) = busiest?;
        if this_load >= max_load || busiest_nr == 0 {
            return None;
        }
        let avg_load = SCHED_LOAD_SCALE * total_load / total_pwr;
        if this_load >= avg_load || 100 * max_load <= pct * this_load {
            return None;
        }
        busiest_lpt /= busiest_nr;
        if max_load <= busiest_lpt {
            return None;
        }
        // Pull no more than brings us to the average, or the busiest below it or idle.
        let mut imbalance = if max_load < avg_load {
            0
        } else {
            let max_pull = (max_load - avg_load).min(max_load - busiest_lpt);
            (max_pull * busiest_pwr).min((avg_load - this_load) * this_pwr) / SCHED_LOAD_SCALE
        };
        if imbalance < busiest_lpt {
            // small_imbalance: move one task if that gains throughput.
            let mut imbn = 2;
            match this_lpt.checked_div(this_nr) {
                Some(per_task) => {
                    this_lpt = per_task;
                    if busiest_lpt > this_lpt {
                        imbn = 1;
                    }
                }
                None => this_lpt = SCHED_LOAD_SCALE,
            }
            if max_load - this_load >= busiest_lpt * imbn {
                return Some((gi, busiest_lpt));
            }
            let pwr_now = (busiest_pwr * busiest_lpt.min(max_load) + this_pwr * this_lpt.min(this_load))
                / SCHED_LOAD_SCALE;
            let mut pwr_move = 0;
            let tmp = sg_div_cpu_power(busiest_pwr, busiest_lpt * SCHED_LOAD_SCALE);
            if max_load > tmp {
                pwr_move += busiest_pwr * busiest_lpt.min(max_load - tmp);
            }
            let tmp = if max_load * busiest_pwr < busiest_lpt * SCHED_LOAD_SCALE {
                sg_div_cpu_power(this_pwr, max_load * busiest_pwr)
            } else {
                sg_div_cpu_power(this_pwr, busiest_lpt * SCHED_LOAD_SCALE)
            };
            pwr_move += this_pwr * this_lpt.min(this_load + tmp);
            pwr_move /= SCHED_LOAD_SCALE;
            if pwr_move <= pwr_now {
                return None;
            }
            imbalance = busiest_lpt;
        }
        Some((gi, imbalance))
    }

    /// `find_busiest_queue`: the CPU of the group with the most raw weighted load, skipping one whose
    /// single task weighs more than the imbalance.
    fn find_busiest_queue(&self, group: &domains::Group, imbalance: u64, excluded: &CpuSet) -> Option<CpuId> {
        let mut max_load = 0;
        let mut busiest = None;
        for &c in group.members.iter() {
            if excluded.contains(c) {
                continue;
            }
            let rq = &self.rqs[c.idx()];
            if rq.nr_running == 1 && rq.load > imbalance {
                continue;
            }
            if rq.load > max_load {
                max_load = rq.load;
                busiest = Some(c);
            }
        }
        busiest
    }

    /// 2.6.22 `move_tasks`: pulls up to `max_nr_move` tasks and `max_load_move` weighted load from
    /// `busiest` to `this`, from the expired array first (then the active one), best priority first,
    /// each list from its tail. A task heavier than the load left is skipped unless it would be the
    /// best-priority task here and is not the only one of the busiest queue's best priority;
    /// `can_migrate_task` skips tasks not allowed here, the running one, and cache-hot ones until the
    /// domain has failed `cache_nice_tries` times. `active` is the migration thread's pass (the
    /// running task preempted by it may move). Returns how many moved and whether every task looked
    /// at was pinned elsewhere.
    #[allow(clippy::too_many_arguments)]
    fn move_tasks(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        busiest: CpuId,
        max_nr_move: u64,
        max_load_move: u64,
        level: usize,
        view: &TaskView,
        active: bool,
        out: &mut Vec<Migration>,
    ) -> (u64, bool) {
        if max_nr_move == 0 || max_load_move == 0 {
            return (0, false);
        }
        let failed = self.rqs[this.idx()].domains[level].nr_balance_failed;
        let tries = self.rqs[this.idx()].domains[level].p.cache_nice_tries;
        let mut rem = max_load_move as i64;
        let mut pinned = true;
        let mut this_best = Self::best_prio(ctx, this, view);
        let busiest_curr = ctx.cpu(busiest).curr;
        // The migration thread (priority 0) is what runs on the busiest CPU during active balancing.
        let (best_prio, mut best_seen) = if active {
            (0, true)
        } else {
            let b = Self::best_prio(ctx, busiest, view);
            (b, busiest_curr.is_some_and(|c| (view.prio)(c) == b))
        };
        let rq = &self.rqs[busiest.idx()];
        let expired = 1 - rq.active;
        let order: &[usize] =
            if rq.arrays[expired].nr_active > 0 { &[expired, rq.active] } else { &[rq.active] };
        // The task the migration thread preempted is still at the head of its list.
        let preempted = if active { busiest_curr } else { None };
        let mut pulled = 0u64;
        'arrays: for &a in order {
            let arr = &self.rqs[busiest.idx()].arrays[a];
            let pre = preempted.filter(|_| a == rq.active).map(|p| (view.prio)(p));
            let next = |from: usize| (from..MAX_PRIO).find(|&i| !arr.queues[i].is_empty() || pre == Some(i));
            let mut prio = next(0);
            while let Some(idx) = prio {
                let mut list: Vec<TaskId> = Vec::with_capacity(arr.queues[idx].len() + 1);
                if let Some(p) = preempted.filter(|_| pre == Some(idx)) {
                    list.push(p);
                }
                list.extend(arr.queues[idx].iter().copied());
                for &t in list.iter().rev() {
                    self.nr_examined += 1;
                    let w = (view.weight)(t) as i64;
                    let mut skip_for_load = w > rem;
                    if skip_for_load && idx < this_best {
                        skip_for_load = !best_seen && idx == best_prio;
                    }
                    // can_migrate_task, consulted only for a task not skipped for its load.
                    let can = !skip_for_load && ctx.task(t).allowed.contains(this) && {
                        pinned = false;
                        let running = !active && busiest_curr == Some(t);
                        let last = ctx.task(t).last_ran_ns;
                        let hot = last > 0 && ctx.now.saturating_sub(last) < CACHE_HOT_NS;
                        !running && (failed > tries || !hot)
                    };
                    if skip_for_load || !can {
                        best_seen |= idx == best_prio;
                        continue;
                    }
                    out.push(Migration { task: t, from: busiest, to: this });
                    self.nr_lb_moved += 1;
                    pulled += 1;
                    rem -= w;
                    if pulled >= max_nr_move || rem <= 0 {
                        break 'arrays;
                    }
                    this_best = this_best.min(idx);
                }
                prio = next(idx + 1);
            }
        }
        (pulled, pinned)
    }

    /// 2.6.22 `load_balance` (periodic, `idle` Idle or NotIdle) or `load_balance_newidle` (`idle`
    /// NewlyIdle) for domain `level` of `this`. Returns what the kernel returns: the number of tasks
    /// moved, or -1 when nothing moved on an SMT level whose CPUs are not all idle (the caller then
    /// balances the levels above as a busy CPU, or a newly idle CPU stops).
    #[allow(clippy::too_many_arguments)]
    fn load_balance(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        level: usize,
        idle: IdleType,
        load_idx: usize,
        view: &TaskView,
        balance: &mut bool,
        out: &mut Vec<Migration>,
    ) -> i64 {
        let share_cpupower = self.rqs[this.idx()].domains[level].p.flags & domains::SD_SHARE_CPUPOWER != 0;
        let newly = idle == IdleType::NewlyIdle;
        let mut sd_idle = idle != IdleType::NotIdle && share_cpupower;
        let mut excluded = CpuSet::empty();
        let all = ctx.topo.all();
        let mut all_pinned = false;
        let mut active_balance = false;
        let found = loop {
            let bal = if newly { None } else { Some(&mut *balance) };
            let Some((gi, imbalance)) =
                self.find_busiest_group(ctx, this, level, idle, load_idx, &excluded, &mut sd_idle, bal)
            else {
                break None;
            };
            let group = self.rqs[this.idx()].domains[level].groups[gi].clone();
            let Some(busiest) = self.find_busiest_queue(&group, imbalance, &excluded) else { break None };
            let mut moved = 0;
            let nr = self.rqs[busiest.idx()].nr_running;
            if nr > 1 {
                let (m, pinned) =
                    self.move_tasks(ctx, this, busiest, nr - 1, imbalance, level, view, false, out);
                moved = m;
                // All pinned (periodic) or nothing moved (newly idle): try the next busiest CPU.
                if (!newly && pinned) || (newly && m == 0) {
                    excluded.insert(busiest);
                    if excluded != all {
                        continue;
                    }
                    if !newly {
                        all_pinned = pinned;
                        break None;
                    }
                }
            }
            break Some((busiest, moved));
        };
        let d = &mut self.rqs[this.idx()].domains[level];
        let smt_busy = !sd_idle && share_cpupower;
        let Some((busiest, moved)) = found else {
            // out_balanced
            if newly {
                if smt_busy {
                    return -1;
                }
                d.nr_balance_failed = 0;
                return 0;
            }
            d.nr_balance_failed = 0;
            if (all_pinned && d.balance_interval_ms < MAX_PINNED_INTERVAL_MS)
                || d.balance_interval_ms < d.p.max_interval_ms
            {
                d.balance_interval_ms *= 2;
            }
            return if smt_busy { -1 } else { 0 };
        };
        if newly {
            if moved == 0 {
                return if smt_busy { -1 } else { 0 };
            }
            d.nr_balance_failed = 0;
            return moved as i64;
        }
        if moved == 0 {
            d.nr_balance_failed += 1;
            if d.nr_balance_failed > d.p.cache_nice_tries + 2 {
                let curr_movable = ctx.cpu(busiest).curr.is_some_and(|c| ctx.task(c).allowed.contains(this));
                if !curr_movable {
                    // out_one_pinned
                    if d.balance_interval_ms < MAX_PINNED_INTERVAL_MS
                        || d.balance_interval_ms < d.p.max_interval_ms
                    {
                        d.balance_interval_ms *= 2;
                    }
                    return if smt_busy { -1 } else { 0 };
                }
                active_balance = true;
                d.nr_balance_failed = d.p.cache_nice_tries + 1;
            }
        } else {
            d.nr_balance_failed = 0;
        }
        if !active_balance {
            d.balance_interval_ms = d.p.min_interval_ms;
        } else if d.balance_interval_ms < d.p.max_interval_ms {
            d.balance_interval_ms *= 2;
        }
        if active_balance {
            self.active_load_balance(ctx, busiest, this, view, out);
        }
        if moved == 0 && smt_busy {
            return -1;
        }
        moved as i64
    }

    /// `active_load_balance`, run by the busiest CPU's migration thread (at once, here): if that CPU
    /// has a task besides the thread, one task (the one the thread preempted included) moves to
    /// `target` through `move_tasks` in the lowest domain of `target` spanning both, as an idle
    /// balance with load limit `RTPRIO_TO_LOAD_WEIGHT(100)`.
    fn active_load_balance(
        &mut self,
        ctx: &Ctx,
        busiest: CpuId,
        target: CpuId,
        view: &TaskView,
        out: &mut Vec<Migration>,
    ) {
        // `nr_running <= 1` counting the migration thread itself: nothing besides it.
        if self.rqs[busiest.idx()].nr_running == 0 {
            return;
        }
        let Some(level) = self.rqs[target.idx()]
            .domains
            .iter()
            .position(|d| d.p.flags & domains::SD_LOAD_BALANCE != 0 && d.span.contains(busiest))
        else {
            return;
        };
        self.move_tasks(ctx, target, busiest, 1, view.active_load_move, level, view, true, out);
    }

    /// `rebalance_domains` (a tick, `idle` true when the CPU runs its idle task) or `idle_balance`
    /// (`newly`): every domain of `cpu` whose interval is due, from the smallest. A periodic pass stops
    /// where another CPU of the local group balances instead; a newly idle one at the first domain that
    /// pulled (or at a busy SMT level). schedlab also ends a periodic pass at the first domain that
    /// moved tasks: the moves apply after this hook returns, so the domains above would see the loads
    /// of before the move (2.6.22 goes on, balancing them as a busy CPU, whose intervals are
    /// `busy_factor` times longer).
    pub fn rebalance(
        &mut self,
        ctx: &Ctx,
        cpu: CpuId,
        idle: bool,
        newly: bool,
        view: &TaskView,
        out: &mut Vec<Migration>,
    ) {
        let jiffies = ctx.jiffies();
        let hz = ctx.hz();
        let mut idle = match (newly, idle) {
            (true, _) => IdleType::NewlyIdle,
            (false, true) => IdleType::Idle,
            (false, false) => IdleType::NotIdle,
        };
        let mut balance = true;
        for level in 0..self.rqs[cpu.idx()].domains.len() {
            let is_idle = idle != IdleType::NotIdle;
            let Some(load_idx) =
                domains::due(&mut self.rqs[cpu.idx()].domains[level], jiffies, hz, is_idle, newly)
            else {
                continue;
            };
            let r = self.load_balance(ctx, cpu, level, idle, load_idx, view, &mut balance, out);
            if newly {
                if r != 0 {
                    break;
                }
                continue;
            }
            if r > 0 {
                break;
            }
            if r != 0 {
                idle = IdleType::NotIdle;
            }
            if !balance {
                break;
            }
        }
    }
}

impl<X: Clone> Runqueues<X> {
    /// `source_load` / `target_load` after catching up a tickless idle CPU's averages.
    fn load_of(&mut self, ctx: &Ctx, cpu: CpuId, idx: usize, local: bool) -> u64 {
        if self.rqs[cpu.idx()].nr_running == 0 {
            self.update_cpu_load(cpu, ctx.now);
        }
        self.guess_load(cpu, idx, local)
    }

    /// The CPU choice of 2.6.22 `try_to_wake_up` for `t`, woken from `this_cpu`: on the waker's CPU if
    /// it is `t`'s own; otherwise, in the lowest domain of the waker's CPU that spans `t`'s CPU, the
    /// waker's CPU when the wake-affine test passes (`SD_WAKE_AFFINE`: the waker's CPU, less the
    /// waker itself on a sync wakeup, is no busier than `t`'s and the two fit in one task's load, or
    /// adding `t` keeps it within half the imbalance percentage of `t`'s CPU) or passive balancing
    /// does (`SD_WAKE_BALANCE`), else `t`'s CPU; then `wake_idle`: a busy CPU running one task hands
    /// the wakeup to the first idle CPU of its `SD_WAKE_IDLE` domains (SMT siblings).
    /// `weight_of` is `p->load_weight`; `waker_weight` the waker's on a sync wakeup.
    pub fn wake_cpu(
        &mut self,
        ctx: &Ctx,
        t: TaskId,
        this_cpu: CpuId,
        weight_of_t: u64,
        sync_waker_weight: Option<u64>,
    ) -> CpuId {
        let info = ctx.task(t);
        let cpu = info.cpu;
        let mut new_cpu = cpu;
        if cpu != this_cpu && info.allowed.contains(this_cpu) {
            let this_sd = self.rqs[this_cpu.idx()].domains.iter().position(|d| d.span.contains(cpu));
            if let Some(level) = this_sd {
                let d = &self.rqs[this_cpu.idx()].domains[level];
                let (idx, flags) = (d.p.wake_idx, d.p.flags);
                let imbalance = 100 + (d.p.imbalance_pct - 100) / 2;
                self.nr_examined += 2;
                let load = self.load_of(ctx, cpu, idx, false);
                let this_load = self.load_of(ctx, this_cpu, idx, true);
                let mut chosen = false;
                if flags & domains::SD_WAKE_AFFINE != 0 {
                    let mut tl = this_load;
                    let rq = &self.rqs[this_cpu.idx()];
                    let tl_per_task = rq.load.checked_div(rq.nr_running).unwrap_or(SCHED_LOAD_SCALE);
                    if let Some(w) = sync_waker_weight {
                        tl = tl.saturating_sub(w);
                    }
                    let prev_target = self.load_of(ctx, cpu, idx, true);
                    if (tl <= load && tl + prev_target <= tl_per_task)
                        || 100 * (tl + weight_of_t) <= imbalance * load
                    {
                        chosen = true;
                    }
                }
                if !chosen && flags & domains::SD_WAKE_BALANCE != 0 && imbalance * this_load <= 100 * load {
                    chosen = true;
                }
                if chosen {
                    new_cpu = this_cpu;
                }
            }
        } else if cpu == this_cpu {
            new_cpu = this_cpu;
        }
        let cpu = self.wake_idle(ctx, t, new_cpu);
        allowed_or_first(ctx, t, cpu)
    }

    /// `wake_idle`: `cpu` itself when idle or running more than one task, else the first idle
    /// allowed CPU of its lowest domains that have `SD_WAKE_IDLE`.
    fn wake_idle(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId) -> CpuId {
        if ctx.cpu(cpu).curr.is_none() || self.rqs[cpu.idx()].nr_running > 1 {
            return cpu;
        }
        for d in self.rqs[cpu.idx()].domains.iter() {
            if d.p.flags & domains::SD_WAKE_IDLE == 0 {
                break;
            }
            for c in d.span.iter() {
                self.nr_examined += 1;
                if ctx.task(t).allowed.contains(c) && ctx.cpu(c).curr.is_none() {
                    return c;
                }
            }
        }
        cpu
    }

    /// 2.6.22 `sched_balance_self(cpu, SD_BALANCE_FORK)` for a child forked on `cpu`: from the
    /// highest domain with `SD_BALANCE_FORK` down, the idlest group (by `forkexec_idx` averages, the
    /// local group's a low guess, the others' high) when this one is busier by half the imbalance
    /// percentage, and in it the CPU with the least raw load (`cpu` on ties); then again below the
    /// chosen CPU's domains narrower than the one just used. Without such a domain (2.6.22 sets the
    /// flag on NUMA levels only) the child starts on `cpu`.
    pub fn fork_cpu(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId) -> CpuId {
        self.balance_self(ctx, t, cpu, domains::SD_BALANCE_FORK)
    }

    /// 2.6.22 `sched_exec`: `sched_balance_self(cpu, SD_BALANCE_EXEC)` for `t`, running on `cpu`
    /// and calling `execve()`, as for a fork but through the domains with `SD_BALANCE_EXEC`, which
    /// 2.6.22 sets on its SMT, multi-core and physical-CPU levels too.
    pub fn exec_cpu(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId) -> CpuId {
        self.balance_self(ctx, t, cpu, domains::SD_BALANCE_EXEC)
    }

    /// `sched_balance_self(cpu, flag)`.
    fn balance_self(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId, flag: u32) -> CpuId {
        let allowed = ctx.task(t).allowed;
        let mut cpu = cpu;
        let mut sd = self.rqs[cpu.idx()].domains.iter().rposition(|d| d.p.flags & flag != 0);
        while let Some(level) = sd {
            let d = &self.rqs[cpu.idx()].domains[level];
            if d.p.flags & flag == 0 {
                sd = level.checked_sub(1);
                continue;
            }
            let span_weight = d.span.count();
            let Some(group) = self.find_idlest_group(ctx, cpu, level, &allowed) else {
                sd = level.checked_sub(1);
                continue;
            };
            let mut idlest = None;
            let mut min_load = u64::MAX;
            for &c in group.members.iter().filter(|&&c| allowed.contains(c)) {
                self.nr_examined += 1;
                let load = self.rqs[c.idx()].load;
                if load < min_load || (load == min_load && c == cpu) {
                    min_load = load;
                    idlest = Some(c);
                }
            }
            match idlest {
                Some(new_cpu) if new_cpu != cpu => {
                    cpu = new_cpu;
                    sd = None;
                    for (l, d) in self.rqs[cpu.idx()].domains.iter().enumerate() {
                        if span_weight <= d.span.count() {
                            break;
                        }
                        if d.p.flags & flag != 0 {
                            sd = Some(l);
                        }
                    }
                }
                _ => sd = level.checked_sub(1),
            }
        }
        allowed_or_first(ctx, t, cpu)
    }

    /// `find_idlest_group` in domain `level` of `this`.
    fn find_idlest_group(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        level: usize,
        allowed: &CpuSet,
    ) -> Option<domains::Group> {
        let d = &self.rqs[this.idx()].domains[level];
        let idx = d.p.forkexec_idx;
        let imbalance = 100 + (d.p.imbalance_pct - 100) / 2;
        let groups = d.groups.clone();
        let mut this_load = 0;
        let mut min_load = u64::MAX;
        let mut idlest = None;
        for (gi, g) in groups.iter().enumerate() {
            if !g.members.iter().any(|&c| allowed.contains(c)) {
                continue;
            }
            let local = gi == 0;
            let mut sum = 0;
            for &c in g.members.iter() {
                self.nr_examined += 1;
                // Biased toward the local group: a low guess for it, a high one elsewhere.
                sum += self.load_of(ctx, c, idx, !local);
            }
            let avg = sg_div_cpu_power(g.power, sum * SCHED_LOAD_SCALE);
            if local {
                this_load = avg;
            } else if avg < min_load {
                min_load = avg;
                idlest = Some(g.clone());
            }
        }
        let idlest = idlest?;
        if 100 * this_load < imbalance * min_load {
            return None;
        }
        Some(idlest)
    }
}

/// What kind of balancing pass (`enum idle_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleType {
    /// A busy CPU's tick.
    NotIdle,
    /// An idle CPU's tick.
    Idle,
    /// A CPU about to go idle (`idle_balance`).
    NewlyIdle,
}

/// What the balancer asks the policy on top about its tasks.
pub(crate) struct TaskView<'a> {
    /// `p->load_weight`.
    pub weight: &'a dyn Fn(TaskId) -> u64,
    /// `p->prio` (the list a queued task sits in; the running task's priority).
    pub prio: &'a dyn Fn(TaskId) -> usize,
    /// `rq->best_expired_prio` of a CPU (MAX_PRIO when the policy keeps none).
    pub best_expired_prio: &'a dyn Fn(CpuId) -> usize,
    /// `RTPRIO_TO_LOAD_WEIGHT(100)`: the load an active balance may move.
    pub active_load_move: u64,
}

/// `cpu` if `t` may run there, else its first allowed CPU (a previous or parent CPU the task's
/// affinity has since excluded).
fn allowed_or_first(ctx: &Ctx, t: TaskId, cpu: CpuId) -> CpuId {
    if ctx.task(t).allowed.contains(cpu) {
        cpu
    } else {
        ctx.task(t).allowed.first().expect("non-empty affinity")
    }
}

/// `sg_div_cpu_power`: `load / power` by the reciprocal multiply of lib/reciprocal_div.c (32-bit,
/// as the kernel computes it).
fn sg_div_cpu_power(power: u64, load: u64) -> u64 {
    let r = (1u64 << 32).div_ceil(power);
    ((load as u32 as u64) * (r as u32 as u64)) >> 32
}

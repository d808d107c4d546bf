//! The O(1) scheduler's per-CPU run queues and their load balancer, shared by the policies built on
//! it (`o1` and `rsdl`: RSDL was a patch to the 2.6.20 O(1) scheduler that replaced its priority and
//! time-slice rules and kept its priority arrays and SMP balancing).
//!
//! Source: Linux 2.6.22 kernel/sched.c (`struct prio_array`, `update_cpu_load`, `source_load`,
//! `target_load`, `load_balance`, `move_tasks`, `rebalance_tick`, `idle_balance`); the balancing
//! rules are described in the header of crates/policies/src/o1/mod.rs.

use crate::cfs::{fold_cpu_load, CPU_LOAD_IDX_MAX};
use crate::domains::{self, Domain, Style};
use schedlab_core::{CpuId, Ctx, Migration, Ns, TaskId};
use std::collections::VecDeque;

/// Priority levels: 0-99 real time, 100-139 = 120 + nice.
pub(crate) const MAX_PRIO: usize = 140;
/// `cache_hot_time`.
const CACHE_HOT_NS: Ns = 2_500_000;

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
    /// Tasks and CPUs the balancer examined (taken by the policy's `take_examined`).
    pub nr_examined: u64,
    /// Tasks the balancer moved.
    pub nr_lb_moved: u64,
}

impl<X: Clone> Runqueues<X> {
    /// No CPUs yet (before `init`).
    pub fn empty() -> Self {
        Runqueues { rqs: Vec::new(), tick_ns: 1_000_000, nr_examined: 0, nr_lb_moved: 0 }
    }

    /// One run queue per CPU with the 2.6.22 scheduling domains.
    pub fn build(ctx: &Ctx, x: X) -> Self {
        let rqs = domains::build_all(ctx.topo, ctx.numa, Style::Linux2638)
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
        Runqueues { rqs, tick_ns: ctx.tick_ns, nr_examined: 0, nr_lb_moved: 0 }
    }

    /// `update_cpu_load` (scheduler_tick), catching up ticks an idle CPU did not take.
    pub fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        let tick = now / self.tick_ns;
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

    /// 2.6.22 `load_balance` for one domain; returns whether tasks were moved. `weight` is a task's
    /// load weight.
    fn load_balance(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        level: usize,
        load_idx: usize,
        weight: &dyn Fn(TaskId) -> u64,
        out: &mut Vec<Migration>,
    ) -> bool {
        let d = &self.rqs[this.idx()].domains[level];
        let pct = d.p.imbalance_pct;
        let groups = d.groups.clone();
        for g in groups.iter() {
            for &c in g.members.iter() {
                if self.rqs[c.idx()].nr_running == 0 {
                    self.update_cpu_load(c, ctx.now);
                }
            }
        }
        // find_busiest_group: the local group's load is a high guess, the others' a low one.
        let avg = |s: &Self, g: &domains::Group, local: bool| {
            g.members.iter().map(|&c| s.guess_load(c, load_idx, local)).sum::<u64>() * 1024 / g.power
        };
        let this_load = avg(self, &groups[0], true);
        let total: u64 = groups.iter().enumerate().map(|(i, g)| avg(self, g, i == 0) * g.power).sum::<u64>();
        let power: u64 = groups.iter().map(|g| g.power).sum();
        let avg_load = total / power;
        let busiest = groups.iter().skip(1).map(|g| (avg(self, g, false), g)).max_by_key(|g| g.0);
        self.nr_examined += ctx.nr_cpus() as u64;
        let moved = match busiest {
            Some((max_load, g)) if max_load > this_load && 100 * max_load > pct * this_load => {
                let src = g
                    .members
                    .iter()
                    .copied()
                    .filter(|c| self.rqs[c.idx()].nr_running >= 2)
                    .max_by_key(|c| (self.rqs[c.idx()].load, std::cmp::Reverse(c.0)));
                match src {
                    Some(src) => {
                        let gap = (max_load - avg_load).min(avg_load.saturating_sub(this_load)).max(1);
                        self.move_tasks(ctx, src, this, gap, level, weight, out)
                    }
                    None => false,
                }
            }
            _ => false,
        };
        let d = &mut self.rqs[this.idx()].domains[level];
        if moved {
            d.nr_balance_failed = 0;
            d.balance_interval_ms = d.p.min_interval_ms;
        } else if busiest.is_some_and(|b| b.0 > this_load && 100 * b.0 > pct * this_load) {
            d.nr_balance_failed += 1;
            if d.nr_balance_failed > d.p.cache_nice_tries + 2 {
                // Active balance: push the busiest queue's running task here.
                d.nr_balance_failed = d.p.cache_nice_tries + 1;
                if let Some((_, g)) = busiest {
                    if let Some(&src) = g.members.iter().find(|c| self.rqs[c.idx()].nr_running >= 2) {
                        if let Some(curr) = ctx.cpu(src).curr.filter(|&c| ctx.task(c).allowed.contains(this))
                        {
                            out.push(Migration { task: curr, from: src, to: this });
                            return true;
                        }
                    }
                }
            }
        } else if d.balance_interval_ms < d.p.max_interval_ms {
            d.balance_interval_ms *= 2;
        }
        moved
    }

    /// `move_tasks`: expired array first, best priority first, up to `imbalance` of load.
    #[allow(clippy::too_many_arguments)]
    fn move_tasks(
        &mut self,
        ctx: &Ctx,
        src: CpuId,
        this: CpuId,
        imbalance: u64,
        level: usize,
        weight: &dyn Fn(TaskId) -> u64,
        out: &mut Vec<Migration>,
    ) -> bool {
        let rq = &self.rqs[src.idx()];
        let failed = rq.domains.get(level).map_or(0, |d| d.nr_balance_failed);
        let tries = self.rqs[this.idx()].domains[level].p.cache_nice_tries;
        let mut rem = imbalance as i64;
        let mut moved = false;
        let order = [1 - rq.active, rq.active];
        let mut picks = Vec::new();
        'outer: for a in order {
            let arr = &rq.arrays[a];
            let mut prio = 0;
            while prio < MAX_PRIO {
                for &t in &arr.queues[prio] {
                    self.nr_examined += 1;
                    let w = weight(t) as i64;
                    let hot = ctx.now.saturating_sub(ctx.task(t).last_ran_ns) < CACHE_HOT_NS
                        && ctx.task(t).last_ran_ns > 0;
                    if !ctx.task(t).allowed.contains(this)
                        || ctx.cpu(src).curr == Some(t)
                        || (hot && failed <= tries)
                    {
                        continue;
                    }
                    if w / 2 > rem && moved {
                        continue;
                    }
                    picks.push(t);
                    moved = true;
                    rem -= w;
                    if rem <= 0 || picks.len() >= 32 {
                        break 'outer;
                    }
                }
                prio += 1;
            }
        }
        for t in picks {
            out.push(Migration { task: t, from: src, to: this });
            self.nr_lb_moved += 1;
        }
        moved
    }

    /// `rebalance_tick` / `idle_balance`: every domain of `cpu` whose interval is due, from the
    /// smallest, stopping after the first that moved tasks.
    pub fn rebalance(
        &mut self,
        ctx: &Ctx,
        cpu: CpuId,
        idle: bool,
        newly: bool,
        weight: &dyn Fn(TaskId) -> u64,
        out: &mut Vec<Migration>,
    ) {
        let jiffies = ctx.now / self.tick_ns;
        let hz = ctx.hz();
        for level in 0..self.rqs[cpu.idx()].domains.len() {
            let Some(load_idx) =
                domains::due(&mut self.rqs[cpu.idx()].domains[level], jiffies, hz, idle, newly)
            else {
                continue;
            };
            if self.load_balance(ctx, cpu, level, load_idx, weight, out) {
                break; // migrations apply after this hook returns: wider domains would see stale loads
            }
        }
    }
}

//! HTFS load balancing: "all balancing algorithms are done by the CFS code" (seed 000 sec. 4.10), i.e.
//! Linux 2.6.38's sched-domain balancer, with the loads chosen by the balancing method of sec. 5.3.1
//! and HTFS's own choice of which queued tasks to move (from every group's runqueues on the CPU).
//!
//! Per domain at its interval: the busiest group by average load (a low guess for remote groups, a
//! high one for the local group), its busiest CPU, and tasks moved until the imbalance (the smaller of
//! busiest-above-average and local-below-average) is covered: normal runqueue first, heaviest
//! priority queues first, skipping the running task, tasks not allowed here and cache-hot ones (ran
//! within 0.5 ms, `sysctl_sched_migration_cost`) until balancing has failed `cache_nice_tries` times.
//! Group by group, root first; CFS's hierarchical `h_load` weighting is not modelled.
//!
//! * `std`: CPU load = sum of task weights, averaged per tick into `cpu_load[]` as CFS does; tasks
//!   weigh their weight.
//! * `stdavg`: CPU load = the simple moving average of that sum, updated after every run.
//! * `avg`: CPU load = the runqueue's moving average of its entities' average loads; tasks weigh their
//!   average load.
//!
//! The runqueue averages are only updated after runs; an empty runqueue's is read as 0 (the thesis
//! does not say what an idle CPU reports). The 2.6.38 group-power and `fix_small_imbalance` details
//! are reduced to moving at least one task when the busiest CPU has two and the gap exceeds half of it.

use super::{Htfs, Kind, Method, Se};
use crate::cfs::fold_cpu_load;
use crate::domains;
use schedlab_core::{CpuId, Ctx, Migration, Ns, TaskId};

/// `sysctl_sched_migration_cost`: a task that ran this recently is cache-hot.
const MIGRATION_COST_NS: Ns = 500_000;

impl Htfs {
    /// `update_cpu_load` at the tick (the `std` method's averages), catching up idle ticks.
    pub(super) fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        let tick = now / self.tick_ns;
        let c = &mut self.cpus[cpu.idx()];
        let pending = tick.saturating_sub(c.last_load_tick);
        c.last_load_tick = tick;
        fold_cpu_load(&mut c.cpu_load, c.load, pending);
    }

    /// The CPU's current load under the balancing method.
    pub(super) fn cpu_load_now(&self, cpu: CpuId) -> u64 {
        let c = &self.cpus[cpu.idx()];
        match self.p.balance {
            Method::Std => c.load,
            Method::StdAvg | Method::Avg if c.nr_running == 0 => 0,
            Method::StdAvg | Method::Avg => c.avg,
        }
    }

    /// `source_load` (`local` false) or `target_load` (`local` true) with averaging index `idx`.
    fn guess_load(&self, cpu: CpuId, idx: usize, local: bool) -> u64 {
        let now = self.cpu_load_now(cpu);
        if self.p.balance != Method::Std || idx == 0 {
            return now;
        }
        let avg = self.cpus[cpu.idx()].cpu_load[idx - 1];
        if local {
            avg.max(now)
        } else {
            avg.min(now)
        }
    }

    /// A task's weight for the balancer.
    fn task_load(&self, t: TaskId) -> u64 {
        let e = &self.ents[t.idx()];
        match self.p.balance {
            Method::Avg => e.avgload,
            Method::Std | Method::StdAvg => e.weight,
        }
    }

    /// `rebalance_domains` / `idle_balance` for `cpu`.
    pub(super) fn rebalance(
        &mut self,
        ctx: &Ctx,
        cpu: CpuId,
        idle: bool,
        newly: bool,
        out: &mut Vec<Migration>,
    ) {
        let jiffies = ctx.now / self.tick_ns;
        let hz = ctx.hz();
        for c in ctx.topo.cpus() {
            if self.cpus[c.idx()].nr_running == 0 {
                self.update_cpu_load(c, ctx.now);
            }
        }
        for level in 0..self.cpus[cpu.idx()].domains.len() {
            let Some(load_idx) =
                domains::due(&mut self.cpus[cpu.idx()].domains[level], jiffies, hz, idle, newly)
            else {
                continue;
            };
            if self.load_balance(ctx, cpu, level, load_idx, out) {
                break; // migrations apply after this hook returns: wider domains would see stale loads
            }
        }
    }

    /// `load_balance` for one domain; returns whether tasks were moved.
    fn load_balance(
        &mut self,
        ctx: &Ctx,
        this: CpuId,
        level: usize,
        load_idx: usize,
        out: &mut Vec<Migration>,
    ) -> bool {
        let d = &self.cpus[this.idx()].domains[level];
        let pct = d.p.imbalance_pct;
        let groups = d.groups.clone();
        let group_avg = |s: &Self, g: &domains::Group, local: bool| {
            g.members.iter().map(|&c| s.guess_load(c, load_idx, local)).sum::<u64>() * 1024 / g.power.max(1)
        };
        let this_load = group_avg(self, &groups[0], true);
        let total: u64 = groups.iter().enumerate().map(|(i, g)| group_avg(self, g, i == 0) * g.power).sum();
        let power: u64 = groups.iter().map(|g| g.power).sum::<u64>().max(1);
        let avg_load = total / power;
        let busiest = groups.iter().skip(1).map(|g| (group_avg(self, g, false), g)).max_by_key(|g| g.0);
        self.nr_examined += ctx.nr_cpus() as u64;
        let mut moved = false;
        if let Some((max_load, g)) = busiest {
            if max_load > this_load && 100 * max_load > pct * this_load {
                let src = g
                    .members
                    .iter()
                    .copied()
                    .filter(|c| self.cpus[c.idx()].nr_running >= 2)
                    .max_by_key(|c| (self.cpu_load_now(*c), std::cmp::Reverse(c.0)));
                if let Some(src) = src {
                    let gap = (max_load - avg_load).min(avg_load.saturating_sub(this_load)).max(1);
                    moved = self.move_tasks(ctx, src, this, gap, level, out);
                }
            }
        }
        let d = &mut self.cpus[this.idx()].domains[level];
        if moved {
            d.nr_balance_failed = 0;
            d.balance_interval_ms = d.p.min_interval_ms;
        } else if busiest.is_some_and(|b| b.0 > this_load) {
            d.nr_balance_failed += 1;
        } else if d.balance_interval_ms < d.p.max_interval_ms {
            d.balance_interval_ms *= 2;
        }
        moved
    }

    /// Picks queued tasks of `src` to move to `this`, up to `imbalance` of load.
    fn move_tasks(
        &mut self,
        ctx: &Ctx,
        src: CpuId,
        this: CpuId,
        imbalance: u64,
        level: usize,
        out: &mut Vec<Migration>,
    ) -> bool {
        let failed = self.cpus[this.idx()].domains[level].nr_balance_failed;
        let tries = self.cpus[this.idx()].domains[level].p.cache_nice_tries;
        let curr = ctx.cpu(src).curr;
        let mut rem = imbalance as i64;
        let mut picks = Vec::new();
        'all: for g in 0..self.group_parent.len() {
            let dual = &self.duals[g * self.ncpus + src.idx()];
            for kind in [Kind::Normal, Kind::Inter] {
                let rq = if kind == Kind::Normal { &dual.normal } else { &dual.inter };
                for &lvl in rq.sorted_levels() {
                    for &se in rq.queue(lvl) {
                        let Se::Task(t) = se else { continue };
                        self.nr_examined += 1;
                        let info = ctx.task(t);
                        let hot = info.last_ran_ns > 0
                            && ctx.now.saturating_sub(info.last_ran_ns) < MIGRATION_COST_NS;
                        if Some(t) == curr || !info.allowed.contains(this) || (hot && failed <= tries) {
                            continue;
                        }
                        let w = self.task_load(t) as i64;
                        if w / 2 > rem && !picks.is_empty() {
                            continue;
                        }
                        picks.push(t);
                        rem -= w;
                        if rem <= 0 || picks.len() >= 32 {
                            break 'all;
                        }
                    }
                }
            }
        }
        let moved = !picks.is_empty();
        for t in picks {
            out.push(Migration { task: t, from: src, to: this });
            self.nr_lb_moved += 1;
        }
        moved
    }
}

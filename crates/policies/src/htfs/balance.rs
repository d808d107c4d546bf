//! HTFS load balancing and placement: "all balancing algorithms are done by the CFS code" (seed 000
//! sec. 4.10), so HTFS runs Linux 2.6.38's balancer and placement, the same code CFS runs here
//! ([`crate::cfs::lb_host`]): `find_busiest_group` with group capacities and `fix_small_imbalance`,
//! `find_busiest_queue`, `load_balance` with its failure counting, all-pinned retry and active
//! balancing, `idle_balance`, `rebalance_domains`, and `select_task_rq_fair` (`wake_affine`,
//! `select_idle_sibling`, `find_idlest_group` at fork). What HTFS supplies:
//!
//! * the loads, by the balancing method of sec. 5.3.1 (`balance` parameter):
//!   * `std`: a CPU's load is the sum of its tasks' weights, averaged per tick into `cpu_load[]` as
//!     CFS does; a task weighs its weight;
//!   * `stdavg`: a CPU's load is the simple moving average of that sum, updated after every run;
//!   * `avg`: a CPU's load is its runqueue's moving average of its entities' average loads; a task
//!     weighs its average load;
//! * which tasks move (sec. 4.10: HTFS "chooses the tasks"): from every group's dual runqueue on the
//!   busiest CPU, root first, the normal runqueue before the interactive one, priority queues with the
//!   largest `realbweight` first, each from its head, under 2.6.38 `balance_tasks`'s rules (at most
//!   `sched_nr_migrate + 1` examined per pass, a task whose half load exceeds what is left is skipped,
//!   not the running task, not a task ran within `sysctl_sched_migration_cost` until balancing failed
//!   `cache_nice_tries` times); the stopper's `move_one_task` takes the first movable task in the same
//!   order, the running one included.
//!
//! Simplified: the runqueue averages of `stdavg` and `avg` are only updated after runs, and an empty
//! runqueue's reads as 0 (the thesis does not say what an idle CPU reports; `idle_load=last` reads
//! the average as the last run left it); tasks of groups are
//! weighed by their own load, not through CFS's hierarchical `h_load`; `effective_load` walks the
//! group hierarchy with the groups' weights (HTFS's group entities are weighted as CFS's
//! `update_cfs_shares` does, from the groups' weights, whatever the method).

use super::{Htfs, IdleLoad, Method, Se, MIN_SHARES};
use crate::cfs::fold_cpu_load;
use crate::cfs::lb2638::{fold_avg_idle, Balance2638};
use crate::cfs::lb_host::LbHost;
use crate::cfs::select::Select2638;
use crate::domains::Domain;
use schedlab_core::{CpuId, Ctx, DequeueReason, EnqueueReason, Migration, Ns, SchedPolicy, TaskId};

/// `sysctl_sched_migration_cost` (2.6.38): a task that ran this recently is cache-hot, and a CPU idle
/// on average for less than this does no newly idle balancing.
pub(super) const MIGRATION_COST_NS: Ns = 500_000;
/// `sysctl_sched_nr_migrate` (2.6.38): at most this many tasks (plus one) examined per pass.
const SCHED_NR_MIGRATE: usize = 32;

impl Htfs {
    /// `update_cpu_load` at the tick (the `std` method's averages), catching up idle ticks.
    pub(super) fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        let tick = schedlab_core::jiffies_at(now, self.tick_ns, self.tick_phase_ns);
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
            Method::StdAvg | Method::Avg if c.nr_running == 0 && self.p.idle_load == IdleLoad::Zero => 0,
            Method::StdAvg | Method::Avg => c.avg,
        }
    }

    /// `cpu_load[idx - 1]` for the `std` method (an idle CPU's caught up first); the current load
    /// for the others, whose averages are their own.
    fn load_at(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        if self.p.balance != Method::Std || idx == 0 {
            return self.cpu_load_now(cpu);
        }
        if self.cpus[cpu.idx()].nr_running == 0 {
            self.update_cpu_load(cpu, now);
        }
        self.cpus[cpu.idx()].cpu_load[idx - 1]
    }

    /// A task's load for the balancer.
    fn task_load(&self, t: TaskId) -> u64 {
        let e = &self.ents[t.idx()];
        match self.p.balance {
            Method::Avg => e.avgload,
            Method::Std | Method::StdAvg => e.weight,
        }
    }

    /// The tasks queued (or running) on `cpu` in the order HTFS offers them to the balancer: group
    /// by group, root first; in each dual runqueue the normal runqueue, then the interactive one;
    /// priority queues with the largest `realbweight` first, each from its head.
    fn balance_order(&self, cpu: CpuId) -> Vec<TaskId> {
        let mut list = Vec::new();
        for g in 0..self.group_parent.len() {
            let dual = &self.duals[g * self.ncpus + cpu.idx()];
            for rq in [&dual.normal, &dual.inter] {
                for &lvl in rq.sorted_levels() {
                    list.extend(rq.queue(lvl).iter().filter_map(|&se| match se {
                        Se::Task(t) => Some(t),
                        Se::Group(_) => None,
                    }));
                }
            }
        }
        list
    }

    /// `task_hot`: ran within `sysctl_sched_migration_cost` (a task that never ran is cold).
    fn task_hot(ctx: &Ctx, t: TaskId) -> bool {
        let last = ctx.task(t).last_ran_ns;
        last > 0 && ctx.now.saturating_sub(last) < MIGRATION_COST_NS
    }

    /// `pull_task`: the task leaves `busiest` and joins `this_cpu` in HTFS's runqueues now, so the
    /// rest of the pass sees the loads after the move; the engine's own dequeue and enqueue of it
    /// are then no-ops.
    fn pull_task(&mut self, ctx: &Ctx, t: TaskId, busiest: CpuId, this_cpu: CpuId, out: &mut Vec<Migration>) {
        self.dequeue(ctx, busiest, t, DequeueReason::Migrate);
        self.enqueue(ctx, this_cpu, t, EnqueueReason::Migrated);
        self.premoved[t.idx()] = true;
        out.push(Migration { task: t, from: busiest, to: this_cpu });
        self.nr_lb_moved += 1;
    }

    /// `ttwu_post_activation`: a wakeup folds this CPU's idle time into `avg_idle`.
    pub(super) fn note_idle_end(&mut self, cpu: CpuId, now: Ns) {
        let c = &mut self.cpus[cpu.idx()];
        fold_avg_idle(&mut c.avg_idle, &mut c.idle_stamp, now, MIGRATION_COST_NS);
    }
}

impl LbHost for Htfs {
    fn domains(&self, cpu: CpuId) -> &[Domain] {
        &self.cpus[cpu.idx()].domains
    }

    fn domains_mut(&mut self, cpu: CpuId) -> &mut [Domain] {
        &mut self.cpus[cpu.idx()].domains
    }

    fn cpu_power(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu.idx()].power
    }

    fn nr_tasks(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu.idx()].nr_running
    }

    fn weighted_cpuload(&self, cpu: CpuId, _now: Ns) -> u64 {
        self.cpu_load_now(cpu)
    }

    fn source_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.cpu_load_now(cpu);
        self.load_at(cpu, idx, now).min(total)
    }

    fn target_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.cpu_load_now(cpu);
        self.load_at(cpu, idx, now).max(total)
    }

    fn add_examined(&mut self, n: u64) {
        self.nr_examined += n;
    }
}

impl Balance2638 for Htfs {
    /// One `balance_tasks` pass over HTFS's order; returns the load moved.
    fn move_pass(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        max_load_move: u64,
        level: usize,
        all_pinned: &mut bool,
        out: &mut Vec<Migration>,
    ) -> u64 {
        if max_load_move == 0 {
            return 0;
        }
        let (failed, tries) = {
            let d = &self.cpus[this_cpu.idx()].domains[level];
            (d.nr_balance_failed, d.p.cache_nice_tries)
        };
        let curr = ctx.cpu(busiest).curr;
        let mut rem = max_load_move as i64;
        for (loops, t) in self.balance_order(busiest).into_iter().enumerate() {
            if loops > SCHED_NR_MIGRATE {
                break;
            }
            self.nr_examined += 1;
            let w = self.task_load(t) as i64;
            if (w >> 1) > rem {
                continue;
            }
            // can_migrate_task: affinity (clears all_pinned), not running, cache cold or past the
            // domain's cache_nice_tries.
            if !ctx.task(t).allowed.contains(this_cpu) {
                continue;
            }
            *all_pinned = false;
            if Some(t) == curr || (Self::task_hot(ctx, t) && failed <= tries) {
                continue;
            }
            self.pull_task(ctx, t, busiest, this_cpu, out);
            rem -= w;
            if rem <= 0 {
                break;
            }
        }
        (max_load_move as i64 - rem).max(0) as u64
    }

    fn queue_active_balance(&mut self, busiest: CpuId, this_cpu: CpuId, level: usize) -> bool {
        if self.pending_active.iter().any(|&(b, _, _)| b == busiest) {
            return false;
        }
        self.pending_active.push((busiest, this_cpu, level));
        true
    }

    /// `active_load_balance_cpu_stop`: on the busiest CPU, its running task preempted by the stopper,
    /// the first task in HTFS's order that may move goes to the CPU that asked.
    fn run_active_balances(&mut self, ctx: &Ctx, out: &mut Vec<Migration>) {
        for (busiest, target, level) in std::mem::take(&mut self.pending_active) {
            if self.cpus[busiest.idx()].nr_running == 0 {
                continue;
            }
            let d = &self.cpus[target.idx()].domains[level];
            let (failed, tries) = (d.nr_balance_failed, d.p.cache_nice_tries);
            let found = self.balance_order(busiest).into_iter().find(|&t| {
                ctx.task(t).allowed.contains(target) && (!Self::task_hot(ctx, t) || failed > tries)
            });
            self.nr_examined += 1;
            if let Some(t) = found {
                out.push(Migration { task: t, from: busiest, to: target });
                self.nr_active_balance += 1;
                self.nr_lb_moved += 1;
            }
        }
    }

    fn note_lb_call(&mut self) {}

    fn avg_idle(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu.idx()].avg_idle
    }

    fn set_idle_stamp(&mut self, cpu: CpuId, stamp: Ns) {
        self.cpus[cpu.idx()].idle_stamp = stamp;
    }

    fn migration_cost_ns(&self) -> u64 {
        MIGRATION_COST_NS
    }
}

impl Select2638 for Htfs {
    fn task_load_weight(&self, t: TaskId) -> i64 {
        self.task_load(t) as i64
    }

    /// `effective_load` over HTFS's groups: at each level the group's entity weight is recomputed as
    /// `update_cfs_shares` would with `wl` more load on this CPU and `wg` more in the group.
    fn effective_load_of(&self, ctx: &Ctx, t: TaskId, cpu: CpuId, mut wl: i64, mut wg: i64) -> i64 {
        let mut g = (ctx.task(t).group.0 as usize).min(self.group_parent.len() - 1);
        while g != 0 {
            let d = g * self.ncpus + cpu.idx();
            let w = self.duals[d].weight as i64;
            let lw = self.group_weight[g] as i64 + wg;
            let shares = self.group_shares[g] as i64;
            wl += w;
            wl = if lw > 0 && wl < lw { wl * shares / lw } else { shares };
            wl = wl.max(MIN_SHARES as i64);
            wl -= self.gents[d].weight as i64;
            wg = 0;
            g = self.group_parent[g];
        }
        wl
    }

    fn affine_wakeups(&self) -> bool {
        true
    }

    fn note_wake_affine(&mut self) {
        self.nr_wake_affine += 1;
    }
}

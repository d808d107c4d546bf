//! The driver of Linux 2.6.38's load balancing (kernel/sched.c), for any fair class that implements
//! [`LbHost`] and [`Balance2638`]'s hooks: `find_busiest_queue`, `need_active_balance`,
//! `load_balance` (with the all-pinned retry, failure counting, active balancing and the interval
//! back-off), `idle_balance` and `rebalance_domains`, in the kernel's order. `find_busiest_group` is
//! [`super::lb_stats`]. Which tasks move (`move_tasks`, the stopper's `move_one_task`) is the class's:
//! CFS's `load_balance_fair` walk is in [`super::balance`]; HTFS chooses its own tasks (seed 000
//! sec. 4.10).

use super::balance::IdleType;
use super::lb_host::LbHost;
use super::lb_stats::{div_round_closest, fix_small_capacity, FindBusiest2638};
use crate::domains::{
    Domain, SCHED_LOAD_SCALE, SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE, SD_POWERSAVINGS_BALANCE, SD_SHARE_CPUPOWER,
};
use schedlab_core::{CpuId, CpuSet, Ctx, Migration, Ns};

/// `MAX_PINNED_INTERVAL`: the longest back-off, ms, when affinity pins every task of the busiest CPU.
const MAX_PINNED_INTERVAL_MS: u64 = 512;
/// `CONFIG_NR_CPUS` of arch/x86/configs/x86_64_defconfig (2.6.38), which caps a balance interval at
/// `HZ x NR_CPUS / 10` jiffies in `rebalance_domains`.
const CONFIG_NR_CPUS: u64 = 64;

/// `sd->flags & SD_SHARE_CPUPOWER && !test_sd_parent(sd, SD_POWERSAVINGS_BALANCE)`: an SMT domain
/// whose idleness `load_balance` tracks (`sd_idle`). When one of its CPUs has a task, `load_balance`
/// reports -1 ("moved") so that wider domains balance this CPU as a busy one.
fn smt_domain(doms: &[Domain], level: usize) -> bool {
    let parent_powersave = doms.get(level + 1).is_some_and(|p| p.p.flags & SD_POWERSAVINGS_BALANCE != 0);
    doms[level].p.flags & SD_SHARE_CPUPOWER != 0 && !parent_powersave
}

/// A domain's balance interval in jiffies (2.6.38 `rebalance_domains`): `balance_interval` ms, times
/// `busy_factor` on a busy CPU, rounded up (`msecs_to_jiffies`), at least 1 and at most
/// `HZ x NR_CPUS / 10`.
pub(crate) fn interval_2638_j(d: &Domain, idle: bool, hz: u64) -> u64 {
    let mut interval_ms = d.balance_interval_ms;
    if !idle {
        interval_ms *= d.p.busy_factor;
    }
    let max_interval_j = hz * CONFIG_NR_CPUS / 10;
    (interval_ms * hz).div_ceil(1000).clamp(1, max_interval_j)
}

/// `ttwu_post_activation` (2.6.38): a wakeup on a CPU that went idle at `*idle_stamp` (0: it did not)
/// folds the idle time into `*avg_idle`, an eighth at a time, capped at twice the migration cost.
pub(crate) fn fold_avg_idle(avg_idle: &mut u64, idle_stamp: &mut Ns, now: Ns, migration_cost_ns: u64) {
    if *idle_stamp == 0 {
        return;
    }
    let delta = now.saturating_sub(*idle_stamp);
    let max = 2 * migration_cost_ns;
    if delta > max {
        *avg_idle = max;
    } else {
        let diff = delta as i64 - *avg_idle as i64;
        *avg_idle = (*avg_idle as i64 + (diff >> 3)) as u64;
    }
    *idle_stamp = 0;
}

/// 2.6.38's `load_balance` and its callers over a class's loads; the class supplies the task moves.
pub(crate) trait Balance2638: LbHost {
    /// One pass of the class's task walk (CFS's `load_balance_fair`): pulls tasks of `busiest` to
    /// `this_cpu` up to `max_load_move` of load (the class's unit), clearing `*all_pinned` when some
    /// task may run on `this_cpu`. Returns the load moved.
    #[allow(clippy::too_many_arguments)]
    fn move_pass(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        max_load_move: u64,
        level: usize,
        all_pinned: &mut bool,
        out: &mut Vec<Migration>,
    ) -> u64;
    /// Queues an active balance (the stopper on `busiest` pushing one task to `this_cpu`) unless one
    /// is pending for `busiest` already; returns whether it was queued.
    fn queue_active_balance(&mut self, busiest: CpuId, this_cpu: CpuId, level: usize) -> bool;
    /// Runs the queued active balances (after the balancing pass, as the stopper thread does).
    fn run_active_balances(&mut self, ctx: &Ctx, out: &mut Vec<Migration>);
    /// Counts one `load_balance` call.
    fn note_lb_call(&mut self);
    /// `avg_idle` of `cpu`, ns.
    fn avg_idle(&self, cpu: CpuId) -> u64;
    /// Sets `rq->idle_stamp` of `cpu` (0: not idle-balancing).
    fn set_idle_stamp(&mut self, cpu: CpuId, stamp: Ns);
    /// `sysctl_sched_migration_cost`, ns.
    fn migration_cost_ns(&self) -> u64;
    /// `update_shares(cpu)` before balancing (task groups' weights); nothing by default.
    fn update_shares(&mut self, _cpu: CpuId, _now: Ns) {}
    /// Recomputes `rq->next_balance` after a pass; nothing by default.
    fn update_next_balance(&mut self, _cpu: CpuId, _hz: u64) {}

    /// `move_tasks`: the class's pass again while it moved something and the imbalance is not met
    /// (unsigned arithmetic, as the kernel's). Returns whether any load moved.
    #[allow(clippy::too_many_arguments)]
    fn move_tasks(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        max_load_move: u64,
        level: usize,
        all_pinned: &mut bool,
        out: &mut Vec<Migration>,
    ) -> bool {
        let mut total: u64 = 0;
        loop {
            let rem = max_load_move.wrapping_sub(total);
            let moved = self.move_pass(ctx, this_cpu, busiest, rem, level, all_pinned, out);
            total = total.wrapping_add(moved);
            if moved == 0 || max_load_move <= total {
                break;
            }
        }
        total > 0
    }

    /// `find_busiest_queue` in group `group` of domain `level`: the CPU of `cpus` with the highest
    /// power-scaled weighted load, passing over a CPU with one task heavier than the imbalance.
    fn find_busiest_queue(
        &mut self,
        level: usize,
        this_cpu: CpuId,
        group: usize,
        imbalance: u64,
        cpus: Option<&CpuSet>,
        now: Ns,
    ) -> Option<CpuId> {
        let d = &self.domains(this_cpu)[level];
        let kind = d.kind;
        let groups = d.groups.clone();
        let mut best = None;
        let mut max_load = 0;
        for &i in groups[group].members.iter() {
            let power = self.cpu_power(i);
            let mut capacity = div_round_closest(power, SCHED_LOAD_SCALE);
            if capacity == 0 {
                capacity = fix_small_capacity(kind);
            }
            if cpus.is_some_and(|set| !set.contains(i)) {
                continue;
            }
            let mut wl = self.weighted_cpuload(i, now);
            if capacity > 0 && self.nr_tasks(i) == 1 && wl > imbalance {
                continue;
            }
            wl = wl * SCHED_LOAD_SCALE / power;
            if wl > max_load {
                max_load = wl;
                best = Some(i);
            }
        }
        best
    }

    /// `need_active_balance`: after more than `cache_nice_tries + 2` failed periodic balances (never
    /// for newly idle balancing with power savings off).
    fn need_active_balance(&self, this_cpu: CpuId, level: usize, idle: IdleType) -> bool {
        if idle == IdleType::NewlyIdle {
            return false;
        }
        let d = &self.domains(this_cpu)[level];
        d.nr_balance_failed > d.p.cache_nice_tries + 2
    }

    /// `load_balance` at domain `level` of `this_cpu`. Returns `ld_moved` (1 moved, 0 not, -1 for an
    /// SMT domain with a busy sibling) and `*balance`.
    fn load_balance(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        idle: IdleType,
        out: &mut Vec<Migration>,
    ) -> (i32, bool) {
        self.note_lb_call();
        let smt = smt_domain(self.domains(this_cpu), level);
        let mut sd_idle = idle != IdleType::NotIdle && smt;
        // The CPUs still considered (`None`: all of them, until an all-pinned busiest CPU is dropped).
        let mut cpus: Option<CpuSet> = None;
        let mut all_pinned = false;
        let mut balance;
        // redo:
        let outcome = loop {
            let (found, bal, walked_sd_idle) =
                self.find_busiest_group(ctx, this_cpu, level, idle, sd_idle, cpus.as_ref());
            balance = bal;
            sd_idle = walked_sd_idle;
            if !balance {
                break None;
            }
            let Some((group, imbalance)) = found else { break None };
            let Some(busiest) =
                self.find_busiest_queue(level, this_cpu, group, imbalance, cpus.as_ref(), ctx.now)
            else {
                break None;
            };
            let mut ld_moved = false;
            if self.nr_tasks(busiest) > 1 {
                all_pinned = true;
                ld_moved = self.move_tasks(ctx, this_cpu, busiest, imbalance, level, &mut all_pinned, out);
                if all_pinned {
                    // All tasks on this runqueue were pinned by CPU affinity: try without it.
                    let remaining = cpus.get_or_insert_with(|| ctx.topo.all());
                    remaining.remove(busiest);
                    if !remaining.is_empty() {
                        continue;
                    }
                    break None;
                }
            }
            break Some((busiest, ld_moved));
        };
        let busy_sibling = !sd_idle && smt;
        match outcome {
            Some((_, true)) => {
                let d = &mut self.domains_mut(this_cpu)[level];
                d.nr_balance_failed = 0;
                d.balance_interval_ms = d.p.min_interval_ms;
                (1, balance)
            }
            Some((busiest, false)) => {
                let d = &mut self.domains_mut(this_cpu)[level];
                if idle != IdleType::NewlyIdle {
                    d.nr_balance_failed += 1;
                }
                let mut active = false;
                if self.need_active_balance(this_cpu, level, idle) {
                    let curr_allowed =
                        ctx.cpu(busiest).curr.is_some_and(|c| ctx.task(c).allowed.contains(this_cpu));
                    if !curr_allowed {
                        // The running task cannot come here: no stopper (goto out_one_pinned).
                        return (self.out_one_pinned(this_cpu, level, true, busy_sibling), balance);
                    }
                    active = self.queue_active_balance(busiest, this_cpu, level);
                    let d = &mut self.domains_mut(this_cpu)[level];
                    d.nr_balance_failed = d.p.cache_nice_tries + 1;
                }
                let d = &mut self.domains_mut(this_cpu)[level];
                if !active {
                    d.balance_interval_ms = d.p.min_interval_ms;
                } else if d.balance_interval_ms < d.p.max_interval_ms {
                    d.balance_interval_ms *= 2;
                }
                (-i32::from(busy_sibling), balance)
            }
            None => {
                // out_balanced
                self.domains_mut(this_cpu)[level].nr_balance_failed = 0;
                (self.out_one_pinned(this_cpu, level, all_pinned, busy_sibling), balance)
            }
        }
    }

    /// `load_balance`'s `out_one_pinned` tail: back off the interval (to `MAX_PINNED_INTERVAL` when
    /// affinity pinned everything, else to `max_interval`); -1 for an SMT domain with a busy sibling.
    fn out_one_pinned(&mut self, this_cpu: CpuId, level: usize, all_pinned: bool, busy_sibling: bool) -> i32 {
        let d = &mut self.domains_mut(this_cpu)[level];
        if (all_pinned && d.balance_interval_ms < MAX_PINNED_INTERVAL_MS)
            || d.balance_interval_ms < d.p.max_interval_ms
        {
            d.balance_interval_ms *= 2;
        }
        -i32::from(busy_sibling)
    }

    /// `idle_balance(this_cpu)`: the CPU is about to go idle. Unless it idles too briefly on average,
    /// each domain with SD_BALANCE_NEWIDLE is balanced bottom-up until one reports a move (an SMT
    /// domain with a busy sibling does too).
    fn idle_balance(&mut self, ctx: &Ctx, cpu: CpuId, out: &mut Vec<Migration>) {
        self.set_idle_stamp(cpu, ctx.now.max(1));
        if self.avg_idle(cpu) < self.migration_cost_ns() {
            return;
        }
        self.update_shares(cpu, ctx.now);
        for level in 0..self.domains(cpu).len() {
            let d = &self.domains(cpu)[level];
            if d.p.flags & SD_LOAD_BALANCE == 0 {
                continue;
            }
            let mut pulled = 0;
            if d.p.flags & SD_BALANCE_NEWIDLE != 0 {
                pulled = self.load_balance(ctx, cpu, level, IdleType::NewlyIdle, out).0;
            }
            if pulled != 0 {
                self.set_idle_stamp(cpu, 0);
                break;
            }
        }
        self.run_active_balances(ctx, out);
        // load_balance may have changed the domains' intervals.
        self.update_next_balance(cpu, ctx.hz());
    }

    /// `rebalance_domains(cpu, idle)`, once due: each domain whose interval (times
    /// `busy_factor` unless idle) has passed is balanced, bottom-up; a move makes the rest of the pass
    /// balance as a busy CPU; a domain this CPU is not the one to balance ends the pass.
    fn rebalance_domains(&mut self, ctx: &Ctx, cpu: CpuId, mut idle: IdleType, out: &mut Vec<Migration>) {
        let jiffies = ctx.jiffies();
        let hz = ctx.hz();
        self.update_shares(cpu, ctx.now);
        for level in 0..self.domains(cpu).len() {
            let d = &self.domains(cpu)[level];
            if d.p.flags & SD_LOAD_BALANCE == 0 {
                continue;
            }
            let interval_j = interval_2638_j(d, idle == IdleType::Idle, hz);
            let mut balance = true;
            if jiffies >= d.last_balance + interval_j {
                let (ld_moved, bal) = self.load_balance(ctx, cpu, level, idle, out);
                balance = bal;
                if ld_moved != 0 {
                    // "We've pulled tasks over so either we're no longer idle, or one of our SMT
                    // siblings is not idle."
                    idle = IdleType::NotIdle;
                }
                self.domains_mut(cpu)[level].last_balance = jiffies;
            }
            if !balance {
                break;
            }
        }
        self.run_active_balances(ctx, out);
        self.update_next_balance(cpu, hz);
    }
}

//! Task placement and load balancing of Linux 2.6.38 (kernel/sched_fair.c and kernel/sched.c):
//! `select_task_rq_fair` (wake_affine, select_idle_sibling, find_idlest_group/cpu), the per-tick
//! `cpu_load[]` averages, and `rebalance_domains` / `load_balance` (find_busiest_group with
//! `calculate_imbalance` and `fix_small_imbalance`, find_busiest_queue, load_balance_fair with
//! `h_load`, balance_tasks, can_migrate_task/task_hot, active balancing) and `idle_balance`.
//!
//! Simplifications, each noted where it is made: migrations are applied by the engine after the hook
//! returns, so one `rebalance_domains` call stops at the first domain that pulled something (the kernel
//! goes on to wider domains with the updated loads); `effective_load` is the flat version (no group
//! correction in wake_affine); power-savings balancing and SD_ASYM_PACKING are left out (off by
//! default in the kernel); `all_pinned` retries are not modelled.

use super::domains::{
    Domain, Group, GroupList, SCHED_LOAD_SCALE, SD_BALANCE_FORK, SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE,
    SD_PREFER_SIBLING, SD_SHARE_PKG_RESOURCES, SD_WAKE_AFFINE,
};
use super::fair::SeId;
use super::Cfs;
use schedlab_core::{CpuId, CpuSet, Ctx, Migration, Ns, SchedClass, TaskId};

/// `CPU_LOAD_IDX_MAX`.
pub const CPU_LOAD_IDX_MAX: usize = 5;
/// `degrade_zero_ticks`: after this many idle ticks `cpu_load[i]` has decayed to zero.
const DEGRADE_ZERO_TICKS: [u64; CPU_LOAD_IDX_MAX] = [0, 8, 32, 64, 128];

/// `update_cpu_load` for `pending` ticks (0: nothing to do) ending with `this_load`: the ticks
/// missed before the last one decay the averages as idle (`decay_load_missed`), and each index `i`
/// then moves `1/2^i` of the way to `this_load`, rounding up when rising. Shared with O(1).
#[allow(clippy::needless_range_loop)] // i is the averaging index, as in the kernel
pub(crate) fn fold_cpu_load(cpu_load: &mut [u64; CPU_LOAD_IDX_MAX], this_load: u64, pending: u64) {
    if pending == 0 {
        return;
    }
    cpu_load[0] = this_load;
    for i in 1..CPU_LOAD_IDX_MAX {
        let scale = 1u64 << i;
        let mut old = cpu_load[i];
        let missed = pending - 1;
        if missed >= DEGRADE_ZERO_TICKS[i] {
            old = 0;
        } else {
            for _ in 0..missed {
                old = (old * (scale - 1)) >> i;
            }
        }
        let mut new = this_load;
        if new > old {
            new += scale - 1;
        }
        cpu_load[i] = (old * (scale - 1) + new) >> i;
    }
}

/// `enum cpu_idle_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleType {
    /// `CPU_IDLE`: balancing for an idle CPU (nohz or its own tick while idle).
    Idle,
    /// `CPU_NOT_IDLE`.
    NotIdle,
    /// `CPU_NEWLY_IDLE`: the CPU is about to go idle.
    NewlyIdle,
}

/// Per-CPU balancing state.
#[derive(Clone, Debug)]
pub struct CpuState {
    /// `cpu_load[]`.
    pub cpu_load: [u64; CPU_LOAD_IDX_MAX],
    /// Tick of the last `cpu_load` update.
    pub last_load_update_tick: u64,
    /// `avg_idle`, ns.
    pub avg_idle: u64,
    /// `idle_stamp` (0 = not idle-balancing).
    pub idle_stamp: Ns,
    /// `cpu_power`.
    pub power: u64,
    /// Domains, bottom-up.
    pub domains: Vec<Domain>,
    /// `rq->next_balance`, in jiffies, for a busy (`[0]`) and for an idle (`[1]`) CPU: no domain of
    /// this CPU is due for periodic balancing before it (the earliest `last_balance + interval`
    /// over its domains). Both are kept so the gate is exact whichever state the CPU is in at its
    /// next balance. 0 until first computed.
    pub next_balance_j: [u64; 2],
}

/// Statistics of one group (`struct sg_lb_stats`).
#[derive(Default)]
struct SgStats {
    avg_load: u64,
    group_load: u64,
    sum_nr_running: u64,
    sum_weighted_load: u64,
    group_capacity: u64,
    group_imb: bool,
    group_has_capacity: bool,
}

/// Domain-wide statistics (`struct sd_lb_stats`).
#[derive(Default, Debug, PartialEq)]
struct SdStats {
    busiest: Option<usize>,
    this: usize,
    total_load: u64,
    total_pwr: u64,
    avg_load: u64,
    this_load: u64,
    this_load_per_task: u64,
    this_nr_running: u64,
    this_has_capacity: bool,
    max_load: u64,
    busiest_load_per_task: u64,
    busiest_nr_running: u64,
    busiest_group_capacity: u64,
    busiest_has_capacity: bool,
    group_imb: bool,
}

#[inline]
fn div_round_closest(x: u64, d: u64) -> u64 {
    (x + d / 2) / d
}

/// The remote groups' part of `update_sd_lb_stats` for one-CPU groups, in walk order (the local
/// group is index 0, so `remote` starts at 1): their load into the domain's totals, and the busiest
/// by `update_sd_pick_busiest`. `loads(cpu)` gives the CPU's weighted load, its task count and its
/// load at the domain's index (`source_load`).
#[inline]
fn scan_single_groups(
    sds: &mut SdStats,
    remote: [&[Group]; 2],
    cap_one: bool,
    mut loads: impl FnMut(CpuId) -> (u64, u64, u64),
) {
    let mut gi = 1;
    for half in remote {
        for g in half {
            let (weighted, nr, load) = loads(g.first);
            let power = g.power;
            let avg_load = if power == SCHED_LOAD_SCALE { load } else { load * SCHED_LOAD_SCALE / power };
            sds.total_load += load;
            sds.total_pwr += power;
            if avg_load > sds.max_load {
                // In a one-CPU group the busiest and least loaded CPU are one: `group_imb` is
                // `max - min >= weighted / nr` with max = min, for a CPU with load and tasks to spare.
                let group_imb = load > 0 && nr > 1 && weighted < nr;
                let capacity = div_round_closest(power, SCHED_LOAD_SCALE);
                let has_capacity = capacity > nr;
                let capacity = if cap_one { capacity.min(1) } else { capacity };
                if nr > capacity || group_imb {
                    sds.max_load = avg_load;
                    sds.busiest = Some(gi);
                    sds.busiest_nr_running = nr;
                    sds.busiest_group_capacity = capacity;
                    sds.busiest_load_per_task = weighted;
                    sds.busiest_has_capacity = has_capacity;
                    sds.group_imb = group_imb;
                }
            }
            gi += 1;
        }
    }
}

impl Cfs {
    // ------------------------------------------------------------------------------------------
    // Loads
    // ------------------------------------------------------------------------------------------

    /// `update_cpu_load`: folds the ticks since the last update into `cpu_load[]` (the missed ones
    /// decayed as idle, `decay_load_missed`).
    #[inline]
    pub(crate) fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        if self.eevdf {
            // 6.6 has no cpu_load[]: every reader uses the PELT average.
            return;
        }
        let tick = now / self.tick_ns;
        let this_load = self.weighted_cpuload(cpu, now);
        let st = &mut self.cpus[cpu.idx()];
        let pending = tick.saturating_sub(st.last_load_update_tick);
        st.last_load_update_tick = tick;
        fold_cpu_load(&mut st.cpu_load, this_load, pending);
    }

    fn load_at(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        if self.eevdf {
            return self.weighted_cpuload(cpu, now);
        }
        self.update_cpu_load_idle(cpu, now);
        self.cpus[cpu.idx()].cpu_load[idx - 1]
    }

    /// Catches up `cpu_load[]` of a tickless idle CPU before it is read.
    fn update_cpu_load_idle(&mut self, cpu: CpuId, now: Ns) {
        if self.rqs[cpu.idx()].nr_running == 0 {
            self.update_cpu_load(cpu, now);
        }
    }

    /// `source_load(cpu, type)`: a low guess of the load, to migrate from.
    pub(crate) fn source_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.weighted_cpuload(cpu, now);
        if idx == 0 {
            total
        } else {
            self.load_at(cpu, idx, now).min(total)
        }
    }

    /// `target_load(cpu, type)`: a high guess of the load, to migrate to.
    pub(crate) fn target_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.weighted_cpuload(cpu, now);
        if idx == 0 {
            total
        } else {
            self.load_at(cpu, idx, now).max(total)
        }
    }

    /// `cpu_avg_load_per_task`.
    fn cpu_avg_load_per_task(&self, cpu: CpuId, now: Ns) -> u64 {
        // rq->nr_running counts tasks; the root cfs_rq counts top-level entities, so use the
        // per-CPU task count kept by the engine view where groups exist.
        self.weighted_cpuload(cpu, now).checked_div(self.cpu_nr_tasks(cpu)).unwrap_or(0)
    }

    /// Tasks on `cpu` (`rq->nr_running`): queued plus running task entities at every level.
    pub(crate) fn cpu_nr_tasks(&self, cpu: CpuId) -> u64 {
        self.cpu_tasks[cpu.idx()]
    }

    // ------------------------------------------------------------------------------------------
    // Placement
    // ------------------------------------------------------------------------------------------

    /// `select_task_rq_fair` for a new task (`SD_BALANCE_FORK`) from `this_cpu`.
    pub(crate) fn select_fork_cpu(&mut self, ctx: &Ctx, t: TaskId, this_cpu: CpuId) -> CpuId {
        let allowed = ctx.task(t).allowed;
        let mut cpu = this_cpu;
        let mut new_cpu = cpu;
        let doms = &self.cpus[cpu.idx()].domains;
        let mut sd =
            doms.iter().rposition(|d| d.flags & SD_LOAD_BALANCE != 0 && d.flags & SD_BALANCE_FORK != 0);
        while let Some(level) = sd {
            let d = &self.cpus[cpu.idx()].domains[level];
            if d.flags & SD_BALANCE_FORK == 0 {
                sd = level.checked_sub(1);
                continue;
            }
            let load_idx = d.forkexec_idx;
            let Some(gi) = self.find_idlest_group(ctx, t, cpu, level, load_idx) else {
                sd = level.checked_sub(1);
                continue;
            };
            let groups = self.cpus[cpu.idx()].domains[level].groups.clone();
            let cand = self.find_idlest_cpu(&groups[gi], &allowed, cpu, ctx.now);
            match cand {
                None => sd = level.checked_sub(1),
                Some(c) if c == cpu => sd = level.checked_sub(1),
                Some(c) => {
                    new_cpu = c;
                    let weight = self.cpus[cpu.idx()].domains[level].span_weight();
                    cpu = c;
                    sd = None;
                    for (i, tmp) in self.cpus[cpu.idx()].domains.iter().enumerate() {
                        if weight <= tmp.span_weight() {
                            break;
                        }
                        if tmp.flags & SD_BALANCE_FORK != 0 {
                            sd = Some(i);
                        }
                    }
                }
            }
        }
        if allowed.contains(new_cpu) {
            new_cpu
        } else {
            // select_fallback_rq: the first allowed CPU.
            allowed.first().expect("non-empty affinity")
        }
    }

    /// `find_idlest_group` in domain `level` of `this_cpu`: the index of the group (in the domain's
    /// walk order) to place the new task in, or `None` to stay.
    fn find_idlest_group(
        &mut self,
        ctx: &Ctx,
        t: TaskId,
        this_cpu: CpuId,
        level: usize,
        load_idx: usize,
    ) -> Option<usize> {
        let allowed = ctx.task(t).allowed;
        let d = &self.cpus[this_cpu.idx()].domains[level];
        let imbalance = 100 + (d.imbalance_pct - 100) / 2;
        let groups = d.groups.clone();
        let (mut idlest, mut min_load, mut this_load) = (None, u64::MAX, 0);
        for (gi, g) in groups.iter().enumerate() {
            if !g.allows_any(&allowed) {
                continue;
            }
            let local = g.cpus.contains(this_cpu);
            let mut avg = 0;
            for &i in g.members.iter() {
                self.nr_examined += 1;
                avg += if local {
                    self.source_load(i, load_idx, ctx.now)
                } else {
                    self.target_load(i, load_idx, ctx.now)
                };
            }
            avg = avg * SCHED_LOAD_SCALE / g.power;
            if local {
                this_load = avg;
            } else if avg < min_load {
                min_load = avg;
                idlest = Some(gi);
            }
        }
        let idlest = idlest?;
        if 100 * this_load < imbalance * min_load {
            return None;
        }
        Some(idlest)
    }

    /// `find_idlest_cpu`: the least loaded allowed CPU of `group`, `this_cpu` winning ties.
    fn find_idlest_cpu(&self, group: &Group, allowed: &CpuSet, this_cpu: CpuId, now: Ns) -> Option<CpuId> {
        let mut best = None;
        let mut min_load = u64::MAX;
        for &i in group.members.iter().filter(|&&i| allowed.contains(i)) {
            let load = self.weighted_cpuload(i, now);
            if load < min_load || (load == min_load && i == this_cpu) {
                min_load = load;
                best = Some(i);
            }
        }
        best
    }

    /// `select_task_rq_fair` for a wakeup (`SD_BALANCE_WAKE`, which no default domain sets: only the
    /// wake-affine path or the previous CPU).
    pub(crate) fn select_wake_cpu(
        &mut self,
        ctx: &Ctx,
        t: TaskId,
        this_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> CpuId {
        let task = ctx.task(t);
        let prev_cpu = task.cpu;
        let want_affine = self.p.affine_wakeups && task.allowed.contains(this_cpu);
        let mut affine_sd = None;
        if want_affine {
            affine_sd = self.cpus[this_cpu.idx()].domains.iter().position(|d| {
                d.flags & SD_LOAD_BALANCE != 0 && d.flags & SD_WAKE_AFFINE != 0 && d.span.contains(prev_cpu)
            });
        }
        let target = match affine_sd {
            Some(level) => {
                if this_cpu == prev_cpu || self.wake_affine(ctx, level, t, this_cpu, waker, sync) {
                    self.nr_wake_affine += u64::from(this_cpu != prev_cpu);
                    self.select_idle_sibling(ctx, t, this_cpu, this_cpu)
                } else {
                    self.select_idle_sibling(ctx, t, prev_cpu, this_cpu)
                }
            }
            None => prev_cpu,
        };
        if task.allowed.contains(target) {
            target
        } else {
            task.allowed.first().expect("non-empty affinity")
        }
    }

    /// `wake_affine` (flat `effective_load`: the group correction is left out).
    fn wake_affine(
        &mut self,
        ctx: &Ctx,
        level: usize,
        t: TaskId,
        this_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> bool {
        let prev_cpu = ctx.task(t).cpu;
        let (idx, pct) = {
            let d = &self.cpus[this_cpu.idx()].domains[level];
            (d.wake_idx, d.imbalance_pct)
        };
        // effective_load() without group scheduling is the identity on the weight it is given.
        let load = self.source_load(prev_cpu, idx, ctx.now) as i64;
        let mut this_load = self.target_load(this_cpu, idx, ctx.now) as i64;
        if sync {
            if let Some(w) = waker {
                this_load -= self.ses[self.task_se[w.idx()] as usize].weight as i64;
            }
        }
        let weight = self.ses[self.task_se[t.idx()] as usize].weight as i64;
        let balanced = if this_load > 0 {
            let this_eff_load = 100 * self.cpus[prev_cpu.idx()].power as i64 * (this_load + weight);
            let prev_eff_load =
                (100 + (pct as i64 - 100) / 2) * self.cpus[this_cpu.idx()].power as i64 * load;
            this_eff_load <= prev_eff_load
        } else {
            true
        };
        if sync && balanced {
            return true;
        }
        let tl_per_task = self.cpu_avg_load_per_task(this_cpu, ctx.now) as i64;
        let prev_target = self.target_load(prev_cpu, idx, ctx.now) as i64;
        balanced || (this_load <= load && this_load + prev_target <= tl_per_task)
    }

    /// `select_idle_sibling(p, target)` (2.6.38).
    fn select_idle_sibling(&mut self, ctx: &Ctx, t: TaskId, target: CpuId, this_cpu: CpuId) -> CpuId {
        let prev_cpu = ctx.task(t).cpu;
        if target == this_cpu && ctx.is_idle(this_cpu) {
            return this_cpu;
        }
        if target == prev_cpu && ctx.is_idle(prev_cpu) {
            return prev_cpu;
        }
        let allowed = ctx.task(t).allowed;
        let mut target = target;
        for d in &self.cpus[target.idx()].domains {
            if d.flags & SD_SHARE_PKG_RESOURCES == 0 {
                break;
            }
            if let Some(i) = d.span.and(&allowed).iter().find(|&i| ctx.is_idle(i)) {
                target = i;
                break;
            }
            if d.span.contains(this_cpu) && d.span.contains(prev_cpu) {
                break;
            }
        }
        target
    }

    // ------------------------------------------------------------------------------------------
    // Periodic, nohz and newly-idle balancing
    // ------------------------------------------------------------------------------------------

    /// `trigger_load_balance`'s test: whether `rq->next_balance` (for this CPU state) has come.
    #[inline]
    pub(crate) fn balance_due(&self, ctx: &Ctx, cpu: CpuId, idle: IdleType) -> bool {
        ctx.now / self.tick_ns >= self.cpus[cpu.idx()].next_balance_j[usize::from(idle == IdleType::Idle)]
    }

    /// `rebalance_domains(cpu, idle)`, once [`Self::balance_due`].
    pub(crate) fn rebalance_domains(
        &mut self,
        ctx: &Ctx,
        cpu: CpuId,
        mut idle: IdleType,
        out: &mut Vec<Migration>,
    ) {
        // The caller has checked `balance_due`.
        let jiffies = ctx.now / self.tick_ns;
        let hz = ctx.hz();
        for level in 0..self.cpus[cpu.idx()].domains.len() {
            let d = &self.cpus[cpu.idx()].domains[level];
            if d.flags & SD_LOAD_BALANCE == 0 {
                continue;
            }
            let interval_j = self.balance_interval_j(d, idle == IdleType::Idle, hz);
            if jiffies < d.last_balance + interval_j {
                continue;
            }
            let (pulled, go_on) = self.load_balance(ctx, cpu, level, idle, out);
            self.cpus[cpu.idx()].domains[level].last_balance = jiffies;
            if pulled {
                idle = IdleType::NotIdle;
                // Simplification: the engine applies the migrations after this hook returns, so wider
                // domains would see stale loads; stop here (the kernel goes on with `idle` updated).
                let _ = idle;
                break;
            }
            if !go_on {
                break;
            }
        }
        self.update_next_balance(cpu, hz);
    }

    /// A domain's balance interval in jiffies: `balance_interval` ms, times `busy_factor` on a busy
    /// CPU, rounded up (`msecs_to_jiffies`), at least 1 and at most `max_load_balance_interval`
    /// (HZ x CPUs / 10).
    fn balance_interval_j(&self, d: &Domain, idle: bool, hz: u64) -> u64 {
        let mut interval_ms = d.balance_interval_ms;
        if !idle {
            interval_ms *= d.busy_factor;
        }
        let max_interval_j = (hz * self.ncpus as u64 / 10).max(1);
        (interval_ms * hz).div_ceil(1000).clamp(1, max_interval_j)
    }

    /// Recomputes `next_balance_j` of `cpu` from its domains' last balances and current intervals,
    /// for both CPU states, so the gate in [`Self::rebalance_domains`] skips exactly the passes in
    /// which the per-domain test would balance no domain. (The kernel keeps one value, from the
    /// state of the last pass, and refreshes it on idle entry.)
    fn update_next_balance(&mut self, cpu: CpuId, hz: u64) {
        let mut next = [u64::MAX; 2];
        for d in self.cpus[cpu.idx()].domains.iter().filter(|d| d.flags & SD_LOAD_BALANCE != 0) {
            for (i, idle) in [false, true].into_iter().enumerate() {
                next[i] = next[i].min(d.last_balance + self.balance_interval_j(d, idle, hz));
            }
        }
        self.cpus[cpu.idx()].next_balance_j = next;
    }

    /// `idle_balance(this_cpu)`: the CPU is about to go idle.
    pub(crate) fn idle_balance(&mut self, ctx: &Ctx, cpu: CpuId, out: &mut Vec<Migration>) {
        self.cpus[cpu.idx()].idle_stamp = ctx.now.max(1);
        if self.cpus[cpu.idx()].avg_idle < self.p.sched_migration_cost_ns {
            return;
        }
        for level in 0..self.cpus[cpu.idx()].domains.len() {
            let d = &self.cpus[cpu.idx()].domains[level];
            if d.flags & SD_LOAD_BALANCE == 0 || d.flags & SD_BALANCE_NEWIDLE == 0 {
                continue;
            }
            let (pulled, _) = self.load_balance(ctx, cpu, level, IdleType::NewlyIdle, out);
            if pulled {
                self.cpus[cpu.idx()].idle_stamp = 0;
                break;
            }
        }
        // load_balance may have changed the domains' intervals.
        self.update_next_balance(cpu, ctx.hz());
    }

    /// `load_balance` at domain `level` of `this_cpu`. Returns (pulled anything, `*balance`).
    fn load_balance(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        idle: IdleType,
        out: &mut Vec<Migration>,
    ) -> (bool, bool) {
        self.nr_lb_calls += 1;
        let (found, balance) = self.find_busiest_group(ctx, this_cpu, level, idle);
        let mut active = false;
        if let Some((group, imbalance)) = found {
            if let Some(busiest) = self.find_busiest_queue(level, this_cpu, group, imbalance, ctx.now) {
                let mut moved = 0;
                if self.cpu_nr_tasks(busiest) > 1 {
                    moved = self.move_tasks(ctx, this_cpu, busiest, imbalance, level, idle, out);
                }
                let mut pulled = moved > 0;
                let d = &mut self.cpus[this_cpu.idx()].domains[level];
                if !pulled {
                    if idle != IdleType::NewlyIdle {
                        d.nr_balance_failed += 1;
                    }
                    if idle != IdleType::NewlyIdle && d.nr_balance_failed > d.cache_nice_tries + 2 {
                        // need_active_balance: push one task of busiest to this_cpu via the stopper.
                        d.nr_balance_failed = d.cache_nice_tries + 1;
                        active = true;
                        if let Some(m) = self.active_balance_pick(ctx, busiest, this_cpu, out) {
                            out.push(m);
                            self.nr_active_balance += 1;
                            pulled = true;
                        }
                    }
                } else {
                    d.nr_balance_failed = 0;
                }
                let d = &mut self.cpus[this_cpu.idx()].domains[level];
                if !active {
                    d.balance_interval_ms = d.min_interval_ms;
                } else if d.balance_interval_ms < d.max_interval_ms {
                    d.balance_interval_ms *= 2;
                }
                return (pulled, balance);
            }
        }
        // out_balanced
        let d = &mut self.cpus[this_cpu.idx()].domains[level];
        d.nr_balance_failed = 0;
        if d.balance_interval_ms < d.max_interval_ms {
            d.balance_interval_ms *= 2;
        }
        (false, balance)
    }

    /// Active balancing: the task the stopper on `busiest` would move to `this_cpu`
    /// (`move_one_task` with CPU_IDLE, so cache-hot tasks are not spared): the newest-queued task
    /// allowed on `this_cpu`, or the running one if it is the only candidate. Tasks that `pending`
    /// already moves are gone from `busiest` by the time the stopper runs in the kernel (which moves
    /// them at once even when `move_tasks` reports no load moved, as it can when a group's `h_load`
    /// scales the moved weight down to 0).
    fn active_balance_pick(
        &mut self,
        ctx: &Ctx,
        busiest: CpuId,
        this_cpu: CpuId,
        pending: &[Migration],
    ) -> Option<Migration> {
        let moved = |t: TaskId| pending.iter().any(|m| m.task == t);
        let nr_pending = pending.iter().filter(|m| m.from == busiest).count() as u64;
        if self.cpu_nr_tasks(busiest) <= 1 + nr_pending {
            return None;
        }
        let mut cands = self.tasks_on_cpu(busiest);
        cands.sort_by_key(|&se| std::cmp::Reverse(self.ses[se as usize].list_seq));
        let running = ctx.cpu(busiest).curr;
        let pick = cands
            .iter()
            .filter_map(|&se| self.ses[se as usize].task)
            .find(|&t| Some(t) != running && !moved(t) && ctx.task(t).allowed.contains(this_cpu))
            .or_else(|| running.filter(|&t| !moved(t) && ctx.task(t).allowed.contains(this_cpu)))?;
        Some(Migration { task: pick, from: busiest, to: this_cpu })
    }

    /// Task entities queued or running on `cpu`, at every group level.
    fn tasks_on_cpu(&self, cpu: CpuId) -> Vec<SeId> {
        let mut v = Vec::new();
        for g in 0..self.ngroups as u32 {
            let rq = &self.rqs[self.rq_id(g, cpu) as usize];
            v.extend(rq.timeline.iter().copied().filter(|&s| self.ses[s as usize].task.is_some()));
            if let Some(c) = rq.curr {
                if self.ses[c as usize].task.is_some() {
                    v.push(c);
                }
            }
        }
        v
    }

    /// `find_busiest_group` (with `update_sd_lb_stats`, `update_sg_lb_stats`,
    /// `update_sd_pick_busiest` and `calculate_imbalance`). Returns the busiest group's index and the
    /// imbalance, and whether this CPU may balance this domain (`*balance`).
    fn find_busiest_group(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        idle: IdleType,
    ) -> (Option<(usize, u64)>, bool) {
        let now = ctx.now;
        let d = &self.cpus[this_cpu.idx()].domains[level];
        let load_idx = match idle {
            IdleType::NotIdle => d.busy_idx,
            IdleType::NewlyIdle => d.newidle_idx,
            IdleType::Idle => d.idle_idx,
        };
        let prefer_sibling =
            level > 0 && self.cpus[this_cpu.idx()].domains[level - 1].flags & SD_PREFER_SIBLING != 0;
        let groups = d.groups.clone();
        let sds = if groups.all_single() {
            self.sd_lb_stats_single(ctx, this_cpu, &groups, load_idx, idle, prefer_sibling)
        } else {
            self.sd_lb_stats(ctx, this_cpu, &groups, load_idx, idle, prefer_sibling)
        };
        let Some(mut sds) = sds else { return (None, false) };
        let Some(busiest) = sds.busiest else { return (None, true) };
        if sds.busiest_nr_running == 0 {
            return (None, true);
        }
        sds.avg_load = SCHED_LOAD_SCALE * sds.total_load / sds.total_pwr;
        let force = sds.group_imb
            || (idle == IdleType::NewlyIdle && sds.this_has_capacity && !sds.busiest_has_capacity);
        if !force {
            let pct = self.cpus[this_cpu.idx()].domains[level].imbalance_pct;
            if sds.this_load >= sds.max_load
                || sds.this_load >= sds.avg_load
                || 100 * sds.max_load <= pct * sds.this_load
            {
                return (None, true);
            }
        }
        let busiest_power = groups[busiest].power;
        let this_power = groups[sds.this].power;
        let imbalance = calculate_imbalance(
            &mut sds,
            busiest_power,
            this_power,
            self.cpu_avg_load_per_task(this_cpu, now),
        );
        if imbalance == 0 {
            return (None, true);
        }
        (Some((busiest, imbalance)), true)
    }

    /// `update_sd_lb_stats` with `update_sg_lb_stats` for each group; `None` when this CPU is not
    /// the one to balance the domain (`*balance = 0`).
    fn sd_lb_stats(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        groups: &GroupList,
        load_idx: usize,
        idle: IdleType,
        prefer_sibling: bool,
    ) -> Option<SdStats> {
        let now = ctx.now;
        let mut sds = SdStats::default();
        for (gi, g) in groups.iter().enumerate() {
            let power = g.power;
            let local = gi == 0;
            let mut sgs = SgStats::default();
            let (mut max_cpu_load, mut min_cpu_load, mut max_nr_running) = (0u64, u64::MAX, 0u64);
            let mut balance_cpu = g.members[0];
            let mut first_idle = false;
            self.nr_examined += g.members.len() as u64;
            for &i in g.members.iter() {
                let weighted = self.weighted_cpuload(i, now);
                let nr = self.cpu_nr_tasks(i);
                // source_load and target_load of index 0 are the weighted load itself.
                let load;
                if local {
                    if !first_idle && ctx.is_idle(i) {
                        first_idle = true;
                        balance_cpu = i;
                    }
                    load = if load_idx == 0 { weighted } else { self.target_load(i, load_idx, now) };
                } else {
                    load = if load_idx == 0 { weighted } else { self.source_load(i, load_idx, now) };
                    if load > max_cpu_load {
                        max_cpu_load = load;
                        max_nr_running = nr;
                    }
                    min_cpu_load = min_cpu_load.min(load);
                }
                sgs.group_load += load;
                sgs.sum_nr_running += nr;
                sgs.sum_weighted_load += weighted;
            }
            if idle != IdleType::NewlyIdle && local && balance_cpu != this_cpu {
                return None;
            }
            // x * SCHED_LOAD_SCALE / SCHED_LOAD_SCALE is x: skip the division (tens of cycles) for
            // the common full-power group.
            sgs.avg_load = if power == SCHED_LOAD_SCALE {
                sgs.group_load
            } else {
                sgs.group_load * SCHED_LOAD_SCALE / power
            };
            // The imbalance test, with its division last: it only matters for a remote group whose
            // busiest CPU has more than one task.
            if !local && max_nr_running > 1 {
                let avg_load_per_task = sgs.sum_weighted_load.checked_div(sgs.sum_nr_running).unwrap_or(0);
                if max_cpu_load.wrapping_sub(min_cpu_load) >= avg_load_per_task {
                    sgs.group_imb = true;
                }
            }
            sgs.group_capacity = div_round_closest(power, SCHED_LOAD_SCALE);
            sgs.group_has_capacity = sgs.group_capacity > sgs.sum_nr_running;
            sds.total_load += sgs.group_load;
            sds.total_pwr += power;
            if prefer_sibling && !local && sds.this_has_capacity {
                sgs.group_capacity = sgs.group_capacity.min(1);
            }
            if local {
                sds.this_load = sgs.avg_load;
                sds.this = gi;
                sds.this_nr_running = sgs.sum_nr_running;
                sds.this_load_per_task = sgs.sum_weighted_load;
                sds.this_has_capacity = sgs.group_has_capacity;
            } else if sgs.avg_load > sds.max_load
                && (sgs.sum_nr_running > sgs.group_capacity || sgs.group_imb)
            {
                sds.max_load = sgs.avg_load;
                sds.busiest = Some(gi);
                sds.busiest_nr_running = sgs.sum_nr_running;
                sds.busiest_group_capacity = sgs.group_capacity;
                sds.busiest_load_per_task = sgs.sum_weighted_load;
                sds.busiest_has_capacity = sgs.group_has_capacity;
                sds.group_imb = sgs.group_imb;
            }
        }
        Some(sds)
    }

    /// [`Self::sd_lb_stats`] for a domain whose groups are all single CPUs, without the per-group
    /// walk of members: the same statistics, decisions and tie-breaks. (In a one-CPU group the
    /// busiest and least loaded CPU are the same, so `group_imb` reduces to `weighted < nr_running`
    /// for a CPU with load and more than one task.)
    fn sd_lb_stats_single(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        groups: &GroupList,
        load_idx: usize,
        idle: IdleType,
        prefer_sibling: bool,
    ) -> Option<SdStats> {
        let now = ctx.now;
        let mut sds = SdStats::default();
        let [first, rest] = groups.halves();
        // The local group: this CPU's own.
        let g = &first[0];
        let i = g.first;
        let weighted = self.weighted_cpuload(i, now);
        let nr = self.cpu_nr_tasks(i);
        let load = if load_idx == 0 { weighted } else { self.target_load(i, load_idx, now) };
        self.nr_examined += 1;
        if idle != IdleType::NewlyIdle && i != this_cpu {
            return None;
        }
        sds.this_load = if g.power == SCHED_LOAD_SCALE { load } else { load * SCHED_LOAD_SCALE / g.power };
        sds.this = 0;
        sds.this_nr_running = nr;
        sds.this_load_per_task = weighted;
        sds.this_has_capacity = div_round_closest(g.power, SCHED_LOAD_SCALE) > nr;
        sds.total_load = load;
        sds.total_pwr = g.power;
        // The others, in walk order. prefer_sibling caps their capacity at one task.
        let cap_one = prefer_sibling && sds.this_has_capacity;
        let remote = [&first[1..], rest];
        if !self.eevdf && load_idx == 0 {
            // The common case (2.6.38's newly-idle index is 0): the load is the runqueue's weight.
            let (rqs, tasks) = (&self.rqs, &self.cpu_tasks);
            scan_single_groups(&mut sds, remote, cap_one, |c| {
                (rqs[c.idx()].load, tasks[c.idx()], rqs[c.idx()].load)
            });
        } else {
            scan_single_groups(&mut sds, remote, cap_one, |c| {
                let weighted = self.weighted_cpuload(c, now);
                (weighted, self.cpu_nr_tasks(c), self.source_load(c, load_idx, now))
            });
        }
        self.nr_examined += groups.len() as u64 - 1;
        Some(sds)
    }

    /// `find_busiest_queue` in group `group` of domain `level`.
    fn find_busiest_queue(
        &mut self,
        level: usize,
        this_cpu: CpuId,
        group: usize,
        imbalance: u64,
        now: Ns,
    ) -> Option<CpuId> {
        let groups = self.cpus[this_cpu.idx()].domains[level].groups.clone();
        let mut best = None;
        let mut max_load = 0;
        for &i in groups[group].members.iter() {
            let power = self.cpus[i.idx()].power;
            let capacity = div_round_closest(power, SCHED_LOAD_SCALE);
            let mut wl = self.weighted_cpuload(i, now);
            if capacity > 0 && self.cpu_nr_tasks(i) == 1 && wl > imbalance {
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

    /// `move_tasks` -> `load_balance_fair`: walks the task groups of `busiest`, converting the
    /// load to move through each group runqueue's `h_load`.
    #[allow(clippy::too_many_arguments)]
    fn move_tasks(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        max_load_move: u64,
        level: usize,
        idle: IdleType,
        out: &mut Vec<Migration>,
    ) -> u64 {
        self.update_h_load(busiest, ctx.now);
        let mut rem_load_move = max_load_move as i64;
        for g in 0..self.ngroups as u32 {
            let rq = self.rq_id(g, busiest);
            let (h_load, mut weight, task_weight) = {
                let r = &self.rqs[rq as usize];
                (r.h_load, r.load, r.task_weight)
            };
            if self.eevdf && g == 0 {
                // 6.6: root tasks move their PELT load (task_h_load), the unit of h_load.
                weight = h_load;
            }
            if task_weight == 0 {
                continue;
            }
            let rem_load = (rem_load_move.max(0) as u64 * weight) / (h_load + 1);
            let mut moved = self.balance_tasks(ctx, this_cpu, busiest, rq, rem_load, level, idle, out);
            if moved == 0 {
                continue;
            }
            moved = moved * h_load / (weight + 1);
            rem_load_move -= moved as i64;
            if rem_load_move < 0 {
                break;
            }
        }
        (max_load_move as i64 - rem_load_move).max(0) as u64
    }

    /// `update_h_load`: each group runqueue's share of the CPU's load (`tg_load_down`).
    /// In the EEVDF variant the root's is its PELT average (6.6 `update_cfs_rq_h_load`); the group
    /// levels below keep 2.6.38's weight ratios.
    fn update_h_load(&mut self, cpu: CpuId, now: Ns) {
        for g in 0..self.ngroups {
            let rq = self.rq_id(g as u32, cpu) as usize;
            let h = match self.group_parent[g] {
                None => self.weighted_cpuload(cpu, now),
                Some(p) => {
                    let prq = self.rq_id(p, cpu) as usize;
                    let se = self.group_se[g * self.ncpus + cpu.idx()] as usize;
                    self.rqs[prq].h_load * self.ses[se].weight / (self.rqs[prq].load + 1)
                }
            };
            self.rqs[rq].h_load = h;
        }
    }

    /// `balance_tasks` over one runqueue's tasks, newest-enqueued first (the kernel's
    /// `cfs_rq->tasks` list, `list_add` at the head).
    #[allow(clippy::too_many_arguments)]
    fn balance_tasks(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        rq: u32,
        max_load_move: u64,
        level: usize,
        idle: IdleType,
        out: &mut Vec<Migration>,
    ) -> u64 {
        if max_load_move == 0 {
            return 0;
        }
        let mut list = std::mem::take(&mut self.scratch);
        list.clear();
        let r = &self.rqs[rq as usize];
        list.extend(r.timeline.iter().copied().filter(|&s| self.ses[s as usize].task.is_some()));
        if let Some(c) = r.curr.filter(|&c| self.ses[c as usize].task.is_some()) {
            list.push(c);
        }
        list.sort_unstable_by_key(|&s| std::cmp::Reverse(self.ses[s as usize].list_seq));
        if let Some(av) = self.avec.as_ref() {
            // AVEC migration (seed 004 sec. 3.4.3): which tasks move is AVEC's choice.
            let task = |s: SeId| self.ses[s as usize].task.expect("task entity");
            match av.p.migration {
                super::avec::AvecMigration::Boosted => list.sort_by_key(|&s| av.boosted(task(s))),
                super::avec::AvecMigration::RqAvec => {
                    let dest: Vec<super::avec::Vector> =
                        self.tasks_on_cpu(this_cpu).into_iter().filter_map(|s| av.vector(task(s))).collect();
                    let n = dest.len().max(1) as u64;
                    let mut avg = [0u64; super::avec::NR_ELEMS];
                    for v in &dest {
                        for (a, x) in avg.iter_mut().zip(v) {
                            *a += x;
                        }
                    }
                    let avg = avg.map(|a| a / n);
                    list.sort_by_key(|&s| {
                        std::cmp::Reverse(av.vector(task(s)).map_or(0, |v| super::avec::distance(&v, &avg)))
                    });
                }
            }
        }
        let mut rem = max_load_move as i64;
        let mut loops = 0;
        for &se in &list {
            loops += 1;
            if loops > self.p.sched_nr_migrate + 1 {
                break;
            }
            self.nr_examined += 1;
            let t = self.ses[se as usize].task.expect("task entity");
            if out.iter().any(|m| m.task == t) {
                // Already moved by this pass (at another level, after a move that scaled to 0 load).
                continue;
            }
            let (w, too_big) = if self.eevdf && rq == self.root(busiest) {
                // 6.6 detach_tasks: the task's PELT load, halved per failed attempt.
                let load = self.pelt_task_load(t, ctx.now).max(1) as i64;
                let failed = self.cpus[this_cpu.idx()].domains[level].nr_balance_failed.min(63);
                (load, (load >> failed) > rem)
            } else {
                let w = self.ses[se as usize].weight as i64;
                (w, (w >> 1) > rem)
            };
            if too_big || !self.can_migrate_task(ctx, t, busiest, this_cpu, level) {
                continue;
            }
            out.push(Migration { task: t, from: busiest, to: this_cpu });
            self.nr_lb_moved += 1;
            if let Some(av) = self.avec.as_mut() {
                if av.p.migration == super::avec::AvecMigration::Boosted {
                    av.reset_boosted(t);
                }
            }
            rem -= w;
            if rem <= 0 {
                break;
            }
            let _ = idle; // CONFIG_PREEMPT's stop-after-one for NEWLY_IDLE is off (server config).
        }
        self.scratch = list;
        (max_load_move as i64 - rem).max(0) as u64
    }

    /// `can_migrate_task` with `task_hot`.
    fn can_migrate_task(&self, ctx: &Ctx, t: TaskId, busiest: CpuId, this_cpu: CpuId, level: usize) -> bool {
        let info = ctx.task(t);
        if !info.allowed.contains(this_cpu) {
            return false;
        }
        if ctx.cpu(busiest).curr == Some(t) {
            return false;
        }
        let d = &self.cpus[this_cpu.idx()].domains[level];
        !self.task_hot(ctx, t, this_cpu) || d.nr_balance_failed > d.cache_nice_tries
    }

    /// `task_hot`: buddies are hot; otherwise hot if it ran within `sched_migration_cost`.
    fn task_hot(&self, ctx: &Ctx, t: TaskId, this_cpu: CpuId) -> bool {
        if ctx.task(t).class == SchedClass::Idle {
            return false;
        }
        let se = self.task_se[t.idx()];
        let rq = &self.rqs[self.ses[se as usize].cfs_rq as usize];
        if self.p.cache_hot_buddy
            && self.cpu_nr_tasks(this_cpu) > 0
            && (rq.next == Some(se) || rq.last == Some(se))
        {
            return true;
        }
        let cost = self.p.sched_migration_cost_ns;
        if cost == 0 {
            return false;
        }
        (ctx.now as i64 - self.ses[se as usize].exec_start as i64) < cost as i64
    }
}

/// `calculate_imbalance` with `fix_small_imbalance` (kernel/sched_fair.c 2.6.38), in the kernel's
/// unsigned arithmetic.
fn calculate_imbalance(
    sds: &mut SdStats,
    busiest_power: u64,
    this_power: u64,
    this_avg_load_per_task: u64,
) -> u64 {
    sds.busiest_load_per_task /= sds.busiest_nr_running;
    if sds.group_imb {
        sds.busiest_load_per_task = sds.busiest_load_per_task.min(sds.avg_load);
    }
    if sds.max_load < sds.avg_load {
        return fix_small_imbalance(sds, busiest_power, this_power, this_avg_load_per_task, 0);
    }
    let mut load_above_capacity = u64::MAX;
    if !sds.group_imb {
        load_above_capacity = sds.busiest_nr_running.wrapping_sub(sds.busiest_group_capacity);
        load_above_capacity = load_above_capacity.wrapping_mul(SCHED_LOAD_SCALE * SCHED_LOAD_SCALE);
        load_above_capacity /= busiest_power;
    }
    let max_pull = (sds.max_load - sds.avg_load).min(load_above_capacity);
    let imbalance = max_pull
        .wrapping_mul(busiest_power)
        .min(sds.avg_load.wrapping_sub(sds.this_load).wrapping_mul(this_power))
        / SCHED_LOAD_SCALE;
    if imbalance < sds.busiest_load_per_task {
        return fix_small_imbalance(sds, busiest_power, this_power, this_avg_load_per_task, imbalance);
    }
    imbalance
}

fn fix_small_imbalance(
    sds: &mut SdStats,
    busiest_power: u64,
    this_power: u64,
    this_avg_load_per_task: u64,
    imbalance: u64,
) -> u64 {
    let mut imbn = 2;
    match sds.this_load_per_task.checked_div(sds.this_nr_running) {
        Some(per_task) => {
            sds.this_load_per_task = per_task;
            if sds.busiest_load_per_task > per_task {
                imbn = 1;
            }
        }
        None => sds.this_load_per_task = this_avg_load_per_task,
    }
    let scaled_busy = sds.busiest_load_per_task * SCHED_LOAD_SCALE / busiest_power;
    if sds.max_load.wrapping_sub(sds.this_load).wrapping_add(scaled_busy) >= scaled_busy * imbn {
        return sds.busiest_load_per_task;
    }
    let mut pwr_now = busiest_power * sds.busiest_load_per_task.min(sds.max_load);
    pwr_now += this_power * sds.this_load_per_task.min(sds.this_load);
    pwr_now /= SCHED_LOAD_SCALE;
    let mut pwr_move = 0;
    let tmp = sds.busiest_load_per_task * SCHED_LOAD_SCALE / busiest_power;
    if sds.max_load > tmp {
        pwr_move += busiest_power * sds.busiest_load_per_task.min(sds.max_load - tmp);
    }
    let tmp = if sds.max_load * busiest_power < sds.busiest_load_per_task * SCHED_LOAD_SCALE {
        sds.max_load * busiest_power / this_power
    } else {
        sds.busiest_load_per_task * SCHED_LOAD_SCALE / this_power
    };
    pwr_move += this_power * sds.this_load_per_task.min(sds.this_load + tmp);
    pwr_move /= SCHED_LOAD_SCALE;
    if pwr_move > pwr_now {
        sds.busiest_load_per_task
    } else {
        imbalance
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfs::{CfsParams, EevdfParams};
    use crate::testworld::TestWorld;
    use schedlab_core::{SchedPolicy, SwitchReason};

    /// The one-CPU-group scan gives exactly the general `update_sd_lb_stats` walk's statistics (and
    /// counts as many CPUs examined) for CFS and EEVDF, every balancing kind and `cpu_load[]` index,
    /// on runqueues from empty to crowded, with mixed weights, after some run time.
    #[test]
    fn single_cpu_group_scan_matches_the_general_walk() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut compared = 0;
        for round in 0..12 {
            let mut w = TestWorld::new(16);
            let mut c = if round % 2 == 0 {
                Cfs::new(CfsParams::default())
            } else {
                Cfs::new_eevdf(EevdfParams(CfsParams::default()))
            };
            c.init(&w.ctx());
            for _ in 0..next(60) {
                let t = w.add_task(next(40) as i8 - 20);
                if next(4) > 0 {
                    // Pinned, so that some CPUs stay empty and others crowd.
                    let cpu = CpuId(next(16) as u32 % (4 + round as u32));
                    w.tasks[t.idx()].allowed = CpuSet::single(cpu);
                }
                w.start(&mut c, t);
            }
            for cpu in 0..16 {
                w.pick(&mut c, CpuId(cpu));
            }
            w.advance(&mut c, 7_000_000 + next(5) * 1_000_000);
            for cpu in 0..16 {
                // Some CPUs go idle (the running task blocks), so the idle and load indices diverge.
                if next(3) == 0 && w.cpus[cpu].curr.is_some() {
                    w.stop(&mut c, CpuId(cpu as u32), SwitchReason::Blocked);
                }
            }
            w.advance(&mut c, 3_000_000);
            let ctx = w.ctx();
            for cpu in (0..16).map(CpuId) {
                let groups = c.cpus[cpu.idx()].domains[0].groups.clone();
                assert!(groups.all_single());
                for idle in [IdleType::NewlyIdle, IdleType::NotIdle, IdleType::Idle] {
                    for load_idx in 0..3 {
                        for prefer_sibling in [false, true] {
                            c.take_examined();
                            let fast =
                                c.sd_lb_stats_single(&ctx, cpu, &groups, load_idx, idle, prefer_sibling);
                            let fast_examined = c.take_examined();
                            let general = c.sd_lb_stats(&ctx, cpu, &groups, load_idx, idle, prefer_sibling);
                            assert_eq!(fast, general, "round {round}, {cpu}, {idle:?}, index {load_idx}");
                            assert_eq!(fast_examined, c.take_examined());
                            compared += usize::from(general.is_some_and(|s| s.busiest.is_some()));
                        }
                    }
                }
            }
        }
        // The comparison saw busiest groups, not only balanced domains.
        assert!(compared > 100, "{compared}");
    }
}

//! Load balancing of Linux 2.6.38 (kernel/sched_fair.c, kernel/sched.c), in the kernel's order:
//! `pull_task`, `can_migrate_task` with `task_hot`, `move_one_task`, `balance_tasks`,
//! `load_balance_fair` with `h_load`, `move_tasks`, then (after `find_busiest_group` in
//! [`super::lb_stats`]) `find_busiest_queue`, `need_active_balance`, `load_balance`, `idle_balance`,
//! `active_load_balance_cpu_stop`, `rebalance_domains` and `trigger_load_balance`.
//!
//! A pulled task moves at once in the policy's own runqueues (`pull_task` dequeues and enqueues it
//! as the kernel does under both runqueue locks), so later decisions of the same pass (the rest of
//! `move_tasks`, wider domains in `rebalance_domains`) see the loads after the move; the engine then
//! applies the moves it is handed (its own dequeue and enqueue of a task already moved here are
//! no-ops) and runs the preemption check `pull_task` ends with. Active balancing is deferred to the
//! end of the pass, as the kernel's stopper thread runs after the balancing softirq.
//!
//! Left out: power-savings balancing and SD_ASYM_PACKING (off by default); CONFIG_PREEMPT's
//! stop-after-one-task in newly idle balancing (a server configuration is modelled).

use super::fair::{RqId, SeId};
use super::lb2638::{interval_2638_j, Balance2638};
use super::lb_host::LbHost;
use super::Cfs;
use crate::domains::{Domain, SD_LOAD_BALANCE};
use schedlab_core::{CpuId, Ctx, Migration, Ns, SchedClass, TaskId};

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
    pub cpu_load: [u64; super::cpu_load::CPU_LOAD_IDX_MAX],
    /// Tick of the last `cpu_load` update.
    pub last_load_update_tick: u64,
    /// `avg_idle`, ns.
    pub avg_idle: u64,
    /// `idle_stamp` (0 = not idle-balancing).
    pub idle_stamp: Ns,
    /// `rq->max_idle_balance_cost` (6.6+): the longest newly idle balance lately, at least
    /// `sysctl_sched_migration_cost`; `avg_idle` is capped at twice it.
    pub max_idle_balance_cost: u64,
    /// `rq->misfit_task_load` (6.x, asymmetric capacities): the load of a running task too big for
    /// this CPU that a bigger one may take, else 0.
    pub misfit_task_load: u64,
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

impl Cfs {
    /// `pull_task(src_rq, p, this_rq, this_cpu)`: `deactivate_task` on `busiest`, `set_task_cpu`,
    /// `activate_task` on `this_cpu`, in the policy's runqueues now; the engine applies the move (and
    /// the preemption check) after the hook.
    pub(crate) fn pull_task(
        &mut self,
        ctx: &Ctx,
        t: TaskId,
        busiest: CpuId,
        this_cpu: CpuId,
        out: &mut Vec<Migration>,
    ) {
        self.dequeue_queued(busiest, t, ctx.now);
        let group = Self::group_of(ctx, t);
        self.enqueue_migrated(this_cpu, t, group, ctx.now);
        self.premoved[t.idx()] = true;
        out.push(Migration { task: t, from: busiest, to: this_cpu });
        self.nr_lb_moved += 1;
    }

    /// `can_migrate_task`: allowed on `this_cpu` (which clears `all_pinned`), not running, and cache
    /// cold or past the domain's `cache_nice_tries` failed balances.
    fn can_migrate_task(
        &self,
        ctx: &Ctx,
        t: TaskId,
        busiest: CpuId,
        this_cpu: CpuId,
        level: usize,
        all_pinned: &mut bool,
    ) -> bool {
        let info = ctx.task(t);
        if !info.allowed.contains(this_cpu) {
            return false;
        }
        *all_pinned = false;
        if ctx.cpu(busiest).curr == Some(t) {
            return false;
        }
        let d = &self.cpus[this_cpu.idx()].domains[level];
        !self.task_hot(ctx, t, this_cpu) || d.nr_balance_failed > d.p.cache_nice_tries
    }

    /// `task_hot` (sched.c): buddies are hot (while the balancing CPU has tasks); otherwise hot if it
    /// ran within `sched_migration_cost`. SCHED_IDLE tasks are never hot.
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

    /// `move_one_task` as the stopper calls it (CPU_IDLE, the running task preempted by the stopper):
    /// the first task, leaf runqueue by leaf runqueue and newest first within each, that may move to
    /// `this_cpu`. Returns the task.
    fn move_one_task(&mut self, ctx: &Ctx, this_cpu: CpuId, busiest: CpuId, level: usize) -> Option<TaskId> {
        let leaves = self.leaf_or_root(busiest);
        for rq in leaves {
            let list = self.cfs_rq_tasks(rq);
            for se in list {
                let t = self.ses[se as usize].task.expect("task entity");
                // The stopper runs on `busiest`: no CFS task is running there any more.
                if !ctx.task(t).allowed.contains(this_cpu) {
                    continue;
                }
                let d = &self.cpus[this_cpu.idx()].domains[level];
                if self.task_hot(ctx, t, busiest) && d.nr_balance_failed <= d.p.cache_nice_tries {
                    continue;
                }
                return Some(t);
            }
        }
        None
    }

    /// Task entities queued or running on `cpu`, at every group level.
    fn tasks_on_cpu(&self, cpu: CpuId) -> Vec<SeId> {
        let mut v = Vec::new();
        for g in 0..self.ngroups as u32 {
            v.extend(self.cfs_rq_tasks(self.rq_id(g, cpu)));
        }
        v
    }

    /// The runqueues `move_one_task` walks: the CPU's leaf list (2.6.38 lists the root runqueue too,
    /// once it has had a task).
    fn leaf_or_root(&self, cpu: CpuId) -> Vec<RqId> {
        if self.eevdf || self.ngroups < 2 {
            vec![self.root(cpu)]
        } else {
            self.leaf[cpu.idx()].clone()
        }
    }

    /// `cfs_rq->tasks`: the task entities queued on `rq` (the running one included), newest-enqueued
    /// first (`list_add` at the head in `account_entity_enqueue`).
    fn cfs_rq_tasks(&self, rq: RqId) -> Vec<SeId> {
        let r = &self.rqs[rq as usize];
        let mut list: Vec<SeId> =
            r.timeline.iter().copied().filter(|&s| self.ses[s as usize].task.is_some()).collect();
        if let Some(c) = r.curr.filter(|&c| self.ses[c as usize].task.is_some()) {
            list.push(c);
        }
        list.sort_unstable_by_key(|&s| std::cmp::Reverse(self.ses[s as usize].list_seq));
        list
    }

    /// `balance_tasks` over one runqueue's tasks, newest-enqueued first: pulls tasks whose half weight
    /// fits in what is left to move, examining at most `sched_nr_migrate + 1`.
    #[allow(clippy::too_many_arguments)]
    fn balance_tasks(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        rq: u32,
        max_load_move: u64,
        level: usize,
        all_pinned: &mut bool,
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
            let (w, too_big) = if self.eevdf && rq == self.root(busiest) {
                // 6.6 detach_tasks: the task's PELT load, halved per failed attempt.
                let load = self.pelt_task_load(t, ctx.now).max(1) as i64;
                let failed = self.cpus[this_cpu.idx()].domains[level].nr_balance_failed.min(63);
                (load, (load >> failed) > rem)
            } else if self.load49() && rq == self.root(busiest) {
                // 4.9 detach_tasks: `if ((load / 2) > env->imbalance) goto next;` on task_h_load.
                let load = self.l49_task_h_load(t, busiest) as i64;
                (load, (load / 2) > rem)
            } else {
                let w = self.ses[se as usize].weight as i64;
                (w, (w >> 1) > rem)
            };
            if too_big || !self.can_migrate_task(ctx, t, busiest, this_cpu, level, all_pinned) {
                continue;
            }
            self.pull_task(ctx, t, busiest, this_cpu, out);
            if let Some(av) = self.avec.as_mut() {
                if av.p.migration == super::avec::AvecMigration::Boosted {
                    av.reset_boosted(t);
                }
            }
            rem -= w;
            if rem <= 0 {
                break;
            }
        }
        self.scratch = list;
        (max_load_move as i64 - rem).max(0) as u64
    }

    /// `update_h_load`: each group runqueue's share of the CPU's load (`tg_load_down`).
    /// In the EEVDF variant the root's is its PELT average (6.6 `update_cfs_rq_h_load`); the group
    /// levels below keep 2.6.38's weight ratios.
    pub(crate) fn update_h_load(&mut self, cpu: CpuId, now: Ns) {
        for g in 0..self.ngroups {
            let rq = self.rq_id(g as u32, cpu) as usize;
            let h = match self.group_parent[g] {
                // 4.9's update_cfs_rq_h_load: the root's whole load average.
                None if self.load49() => self.l49_cpu_whole_load(cpu),
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

    /// `load_balance_fair`: for each task group (the newest first, the root last: `list_add_rcu` at
    /// the head of `task_groups`), the load still to move converted into that group runqueue's own
    /// weight through its `h_load`, `balance_tasks` on it, and what moved converted back.
    #[allow(clippy::too_many_arguments)]
    fn load_balance_fair(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        busiest: CpuId,
        max_load_move: u64,
        level: usize,
        all_pinned: &mut bool,
        out: &mut Vec<Migration>,
    ) -> u64 {
        self.update_h_load(busiest, ctx.now);
        let mut rem_load_move = max_load_move as i64;
        for g in (0..self.ngroups as u32).rev() {
            let rq = self.rq_id(g, busiest);
            let (h_load, mut weight, task_weight) = {
                let r = &self.rqs[rq as usize];
                (r.h_load, r.load, r.task_weight)
            };
            if (self.eevdf || self.load49()) && g == 0 {
                // 6.6 and 4.9: root tasks move their PELT load (task_h_load), the unit of h_load.
                weight = h_load;
            }
            if task_weight == 0 {
                continue;
            }
            let rem_load = (rem_load_move as u64).wrapping_mul(weight) / (h_load + 1);
            let mut moved = self.balance_tasks(ctx, this_cpu, busiest, rq, rem_load, level, all_pinned, out);
            if moved == 0 {
                continue;
            }
            moved = moved * h_load / (weight + 1);
            rem_load_move -= moved as i64;
            if rem_load_move < 0 {
                break;
            }
        }
        (max_load_move as i64 - rem_load_move) as u64
    }

    /// `active_load_balance_cpu_stop` for each active balance the pass kicked, after it (the stopper
    /// runs once the balancing softirq is done): on the busiest CPU, with its running task preempted,
    /// one task moves to the CPU that asked (`move_one_task`), if any task is left there.
    pub(crate) fn run_active_balances(&mut self, ctx: &Ctx, out: &mut Vec<Migration>) {
        if self.pending_active.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending_active);
        for &(busiest, target, level) in &pending {
            // `busiest_rq->nr_running <= 1` counts the stopper itself.
            if self.cpu_nr_tasks(busiest) == 0 {
                continue;
            }
            let found = if self.eevdf {
                self.detach_one_task_66(ctx, target, busiest)
            } else {
                self.move_one_task(ctx, target, busiest, level)
            };
            if let Some(t) = found {
                out.push(Migration { task: t, from: busiest, to: target });
                self.nr_active_balance += 1;
                self.nr_lb_moved += 1;
            }
        }
        self.pending_active = pending;
        self.pending_active.clear();
    }

    /// A domain's balance interval in jiffies: `balance_interval` ms, times `busy_factor` on a busy
    /// CPU, rounded up (`msecs_to_jiffies`), at least 1 and at most `HZ x NR_CPUS / 10`.
    ///
    /// 6.6 (`get_sd_balance_interval`) takes one jiffy off a busy CPU's interval and caps it at
    /// `max_load_balance_interval`, `HZ x num_online_cpus() / 10`.
    pub(crate) fn balance_interval_j(&self, d: &Domain, idle: bool, hz: u64) -> u64 {
        if self.eevdf {
            let mut interval_ms = d.balance_interval_ms;
            if !idle {
                interval_ms *= d.p.busy_factor;
            }
            let mut j = (interval_ms * hz).div_ceil(1000);
            if !idle {
                j = j.saturating_sub(1);
            }
            return j.clamp(1, (hz * self.ncpus as u64 / 10).max(1));
        }
        interval_2638_j(d, idle, hz)
    }

    /// Recomputes `next_balance_j` of `cpu` from its domains' last balances and current intervals,
    /// for both CPU states, so the gate in [`Self::balance_due`] skips exactly the passes in which
    /// the per-domain test would balance no domain. (The kernel keeps one value, from the state of
    /// the last pass, and refreshes it on idle entry.)
    pub(crate) fn update_next_balance(&mut self, cpu: CpuId, hz: u64) {
        let mut next = [u64::MAX; 2];
        for d in self.cpus[cpu.idx()].domains.iter().filter(|d| d.p.flags & SD_LOAD_BALANCE != 0) {
            for (i, idle) in [false, true].into_iter().enumerate() {
                next[i] = next[i].min(d.last_balance + self.balance_interval_j(d, idle, hz));
            }
        }
        self.cpus[cpu.idx()].next_balance_j = next;
    }

    /// `trigger_load_balance`'s test: whether `rq->next_balance` (for this CPU state) has come.
    #[inline]
    pub(crate) fn balance_due(&self, ctx: &Ctx, cpu: CpuId, idle: IdleType) -> bool {
        ctx.jiffies() >= self.cpus[cpu.idx()].next_balance_j[usize::from(idle == IdleType::Idle)]
    }
}

impl LbHost for Cfs {
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
        self.cpu_nr_tasks(cpu)
    }

    fn weighted_cpuload(&self, cpu: CpuId, now: Ns) -> u64 {
        Cfs::weighted_cpuload(self, cpu, now)
    }

    fn source_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        Cfs::source_load(self, cpu, idx, now)
    }

    fn target_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        Cfs::target_load(self, cpu, idx, now)
    }

    fn add_examined(&mut self, n: u64) {
        self.nr_examined += n;
    }

    fn cpu_avg_load_per_task(&self, cpu: CpuId, now: Ns) -> u64 {
        Cfs::cpu_avg_load_per_task(self, cpu, now)
    }
}

impl Balance2638 for Cfs {
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
        self.load_balance_fair(ctx, this_cpu, busiest, max_load_move, level, all_pinned, out)
    }

    fn queue_active_balance(&mut self, busiest: CpuId, this_cpu: CpuId, level: usize) -> bool {
        if self.pending_active.iter().any(|&(b, _, _)| b == busiest) {
            return false;
        }
        self.pending_active.push((busiest, this_cpu, level));
        true
    }

    fn run_active_balances(&mut self, ctx: &Ctx, out: &mut Vec<Migration>) {
        Cfs::run_active_balances(self, ctx, out)
    }

    fn note_lb_call(&mut self) {
        self.nr_lb_calls += 1;
    }

    fn avg_idle(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu.idx()].avg_idle
    }

    fn set_idle_stamp(&mut self, cpu: CpuId, stamp: Ns) {
        self.cpus[cpu.idx()].idle_stamp = stamp;
    }

    fn migration_cost_ns(&self) -> u64 {
        self.p.sched_migration_cost_ns
    }

    fn update_shares(&mut self, cpu: CpuId, now: Ns) {
        Cfs::update_shares(self, cpu, now)
    }

    fn update_next_balance(&mut self, cpu: CpuId, hz: u64) {
        Cfs::update_next_balance(self, cpu, hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfs::lb_stats::FindBusiest2638;
    use crate::cfs::{CfsParams, EevdfParams};
    use crate::domains::SD_PREFER_SIBLING;
    use crate::testworld::TestWorld;
    use schedlab_core::CpuSet;
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
                Cfs::new_eevdf(EevdfParams(CfsParams::default())).expect("default parameters")
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
                // A copy of the domain below it, to switch SD_PREFER_SIBLING of "the child" on and off.
                let mut child = c.cpus[cpu.idx()].domains[0].clone();
                for prefer_sibling in [false, true] {
                    child.p.flags = if prefer_sibling { SD_PREFER_SIBLING } else { 0 };
                    c.cpus[cpu.idx()].domains.insert(0, child.clone());
                    let groups = c.cpus[cpu.idx()].domains[1].groups.clone();
                    assert!(groups.all_single());
                    for idle in [IdleType::NewlyIdle, IdleType::NotIdle, IdleType::Idle] {
                        for load_idx in 0..3 {
                            let d = &mut c.cpus[cpu.idx()].domains[1];
                            (d.p.busy_idx, d.p.newidle_idx, d.p.idle_idx) = (load_idx, load_idx, load_idx);
                            for sd_idle in [false, true] {
                                c.take_examined();
                                let fast = c.update_sd_lb_stats_single(&ctx, cpu, 1, &groups, idle, sd_idle);
                                let fast_examined = c.take_examined();
                                let all = ctx.topo.all();
                                let general =
                                    c.update_sd_lb_stats(&ctx, cpu, 1, &groups, idle, sd_idle, &all);
                                assert_eq!(fast, general, "round {round}, {cpu}, {idle:?}, index {load_idx}");
                                assert_eq!(fast_examined, c.take_examined());
                                compared += usize::from(general.balance && general.sds.busiest.is_some());
                            }
                        }
                    }
                    c.cpus[cpu.idx()].domains.remove(0);
                }
            }
        }
        // The comparison saw busiest groups, not only balanced domains.
        assert!(compared > 100, "{compared}");
    }
}

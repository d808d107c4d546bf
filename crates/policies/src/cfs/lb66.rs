//! The load balancer of Linux 6.6 (kernel/sched/fair.c), which the EEVDF model uses, in the
//! kernel's order: `group_has_capacity`, `group_is_overloaded`, `group_classify`, `smt_balance`,
//! `sibling_imbalance`, `update_sg_lb_stats`, `update_sd_pick_busiest`, `update_idle_cpu_scan`,
//! `update_sd_lb_stats`, `calculate_imbalance`, `find_busiest_group`, `find_busiest_queue`,
//! `task_hot`, `can_migrate_task`, `detach_tasks`, `need_active_balance`, `should_we_balance`,
//! `load_balance`, `get_sd_balance_interval`, `rebalance_domains` and the stopper's
//! `detach_one_task` (`newidle_balance` is in cfs/newidle66.rs).
//!
//! Where 2.6.38 compares weighted loads, 6.6 first *classifies* every group from its PELT
//! utilisation and runnable averages and its task count (has spare capacity < fully busy < SMT to
//! balance < imbalanced by affinity < overloaded), picks the busiest by class, and moves tasks of
//! one of three kinds: load (overloaded groups, by `task_h_load`), utilisation (to a group with
//! spare capacity outside an LLC) or a number of tasks (spreading runnable tasks while there is
//! spare capacity; `SD_PREFER_SIBLING` evens the counts between sibling groups, NUMA levels leave a
//! small imbalance alone).
//!
//! Sources read: Debian's linux-source-6.1 for the structure that 6.6 keeps, and the patches that
//! reached 6.6 on top of it (Ricardo Neri's SMT `fully_busy` tie-break, 6.5; Tim Chen's
//! `group_smt_balance` and `sibling_imbalance`, 6.6; the whole-core test of `should_we_balance`,
//! 6.6-rc1, in the form 6.6.0 shipped, before the 6.7 fix of its `idle_smt` fallback). The kernel is
//! modelled with `CONFIG_PREEMPTION` (what `PREEMPT_DYNAMIC`, the distributions' choice, selects), so
//! a newly idle balance detaches one task.
//!
//! With CPUs of different capacities (cfs/asym.rs), 6.12.117's misfit handling: a group with a
//! CPU running a task too big for it is `group_misfit_task`, picked only by a bigger CPU on an
//! idle core whose group has spare capacity, and balanced with `migrate_misfit` (the task, by the
//! stopper if it runs); groups of bigger CPUs with a task each are left alone.
//!
//! Not modelled (said again in docs/policies/eevdf.md): asym packing (no machine has CPU
//! priorities); RT/IRQ pressure on a CPU's capacity; NUMA balancing (`fbq_type`). Utilisation is read with UTIL_EST (cfs/util_est.rs):
//! `cpu_util_cfs` for the group statistics, `cpu_util_cfs_boost` (6.5's runnable boosting) for
//! the busiest CPU of a utilisation migration, `task_util_est` in `detach_tasks`. The newly idle
//! balance, its cost gate and NI_RANDOM are in cfs/newidle66.rs; `rebalance_domains` decays the
//! domains' newly idle costs. `sched_idle_cpu` (a CPU running only SCHED_IDLE tasks) is modelled
//! where 6.6 reads it: `rebalance_domains` balances such a CPU at its idle interval, and the
//! wakeup paths take it as idle (cfs/select66.rs).

use super::asym::capacity_greater;
use super::balance::IdleType;
use super::fair::SeId;
use super::load_avg::CPU_CAPACITY;
use super::newidle66::update_newidle_cost;
use super::Cfs;
use crate::domains::{
    Group, SD_ASYM_CPUCAPACITY, SD_NUMA, SD_PREFER_SIBLING, SD_SHARE_CPUPOWER, SD_SHARE_PKG_RESOURCES,
};
use schedlab_core::{CpuId, CpuSet, Ctx, Level, Migration, SchedClass, TaskId};

/// `MAX_PINNED_INTERVAL`, ms.
const MAX_PINNED_INTERVAL_MS: u64 = 512;
/// `NUMA_IMBALANCE_MIN`: a NUMA imbalance of up to this many tasks is left alone while the
/// destination is lightly loaded.
const NUMA_IMBALANCE_MIN: i64 = 2;

/// `enum group_type` of 6.6, in its order (misfit and asym packing left out: see the module essay).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GroupType {
    /// `group_has_spare`.
    #[default]
    HasSpare,
    /// `group_fully_busy`.
    FullyBusy,
    /// `group_misfit_task`: a CPU of the group runs a task too big for it (asymmetric capacities).
    Misfit,
    /// `group_smt_balance`.
    SmtBalance,
    /// `group_imbalanced`.
    Imbalanced,
    /// `group_overloaded`.
    Overloaded,
}

/// `enum migration_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MigrationType {
    /// `migrate_load`.
    Load,
    /// `migrate_util`.
    Util,
    /// `migrate_task`.
    Task,
    /// `migrate_misfit`: the busiest CPU's misfit task, to a bigger CPU.
    Misfit,
}

/// `struct sg_lb_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SgStats {
    /// `avg_load`: load per capacity (only computed for overloaded groups, and for the local group
    /// when the imbalance is computed).
    pub avg_load: u64,
    /// `group_load`.
    pub group_load: u64,
    /// `group_capacity`.
    pub group_capacity: u64,
    /// `group_util`.
    pub group_util: u64,
    /// `group_runnable`.
    pub group_runnable: u64,
    /// `sum_nr_running`.
    pub sum_nr_running: u64,
    /// `sum_h_nr_running`.
    pub sum_h_nr_running: u64,
    /// `idle_cpus`.
    pub idle_cpus: u64,
    /// `group_weight`.
    pub group_weight: u64,
    /// `group_type`.
    pub group_type: GroupType,
    /// `group_smt_balance`.
    pub smt_balance: bool,
    /// `group_misfit_task_load`: the largest misfit load of its CPUs (asymmetric domains).
    pub group_misfit_task_load: u64,
    /// `sgc->min_capacity`: the smallest capacity of its CPUs.
    pub min_capacity: u64,
    /// `sgc->max_capacity`: the largest capacity of its CPUs.
    pub max_capacity: u64,
}

/// `struct sd_lb_stats`: the local and busiest groups (indices in the domain's walk order).
#[derive(Clone, Debug, Default)]
pub(crate) struct SdStats {
    /// The busiest group.
    pub busiest: Option<usize>,
    /// The local group.
    pub local: usize,
    /// `total_load`.
    pub total_load: u64,
    /// `total_capacity`.
    pub total_capacity: u64,
    /// `avg_load`.
    pub avg_load: u64,
    /// `prefer_sibling`.
    pub prefer_sibling: bool,
    /// `busiest_stat`.
    pub busiest_stat: SgStats,
    /// `local_stat`.
    pub local_stat: SgStats,
}

/// `struct lb_env`, the part that changes during one `load_balance`.
#[derive(Clone, Debug)]
pub(crate) struct LbEnv {
    /// Domain level.
    pub level: usize,
    /// The CPU whose domain `sd` is (the balancing CPU; `dst_cpu` may change to another CPU of its
    /// group when affinity pins tasks).
    pub this_cpu: CpuId,
    /// `dst_cpu`.
    pub dst_cpu: CpuId,
    /// `src_cpu`.
    pub src_cpu: CpuId,
    /// `dst_grpmask`: the local group's CPUs.
    pub dst_grpmask: CpuSet,
    /// `cpus`: the CPUs still considered.
    pub cpus: CpuSet,
    /// `idle`.
    pub idle: IdleType,
    /// `imbalance`.
    pub imbalance: i64,
    /// `migration_type`.
    pub migration_type: MigrationType,
    /// `loop`.
    pub nr_loop: u32,
    /// `loop_max`.
    pub loop_max: u32,
    /// `LBF_ALL_PINNED`.
    pub all_pinned: bool,
    /// `LBF_SOME_PINNED`.
    pub some_pinned: bool,
    /// `LBF_DST_PINNED` with `new_dst_cpu`.
    pub new_dst: Option<CpuId>,
    /// `dst_core_idle` (6.12): SMT is off or every sibling of `dst_cpu` is idle.
    pub dst_core_idle: bool,
}

impl LbEnv {
    /// The environment `load_balance` starts from: balancing domain `level` of `this_cpu` (also the
    /// destination and, until a busiest queue is found, the source) over `cpus`, its local group
    /// `dst_grpmask`.
    pub(crate) fn new(
        level: usize,
        this_cpu: CpuId,
        dst_grpmask: CpuSet,
        cpus: CpuSet,
        idle: IdleType,
    ) -> LbEnv {
        LbEnv {
            level,
            this_cpu,
            dst_cpu: this_cpu,
            src_cpu: this_cpu,
            dst_grpmask,
            dst_core_idle: true,
            cpus,
            idle,
            imbalance: 0,
            migration_type: MigrationType::Load,
            nr_loop: 0,
            loop_max: 0,
            all_pinned: false,
            some_pinned: false,
            new_dst: None,
        }
    }
}

/// `group_has_capacity`: fewer tasks than CPUs, or runnable and utilisation both within the
/// capacity by `imbalance_pct`.
pub(crate) fn group_has_capacity(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running < s.group_weight {
        return true;
    }
    if s.group_capacity * imbalance_pct < s.group_runnable * 100 {
        return false;
    }
    s.group_capacity * 100 > s.group_util * imbalance_pct
}

/// `group_is_overloaded`: more tasks than CPUs and utilisation or runnable beyond the capacity by
/// `imbalance_pct`.
pub(crate) fn group_is_overloaded(imbalance_pct: u64, s: &SgStats) -> bool {
    if s.sum_nr_running <= s.group_weight {
        return false;
    }
    if s.group_capacity * 100 < s.group_util * imbalance_pct {
        return true;
    }
    s.group_capacity * imbalance_pct < s.group_runnable * 100
}

/// `group_classify`.
pub(crate) fn group_classify(imbalance_pct: u64, imbalanced: bool, s: &SgStats) -> GroupType {
    if group_is_overloaded(imbalance_pct, s) {
        GroupType::Overloaded
    } else if imbalanced {
        GroupType::Imbalanced
    } else if s.smt_balance {
        GroupType::SmtBalance
    } else if s.group_misfit_task_load != 0 {
        GroupType::Misfit
    } else if !group_has_capacity(imbalance_pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

/// `adjust_numa_imbalance`: a destination with at most `imb_numa_nr` tasks keeps an imbalance of up
/// to `NUMA_IMBALANCE_MIN` tasks.
pub(crate) fn adjust_numa_imbalance(imbalance: i64, dst_running: u64, imb_numa_nr: u64) -> i64 {
    if dst_running > imb_numa_nr {
        return imbalance;
    }
    if imbalance <= NUMA_IMBALANCE_MIN {
        return 0;
    }
    imbalance
}

/// `sibling_imbalance` (6.6.0): how many tasks to move so that both groups run as many tasks per
/// core, doubled (the caller halves it); 0 for a busy CPU.
pub(crate) fn sibling_imbalance(
    idle: IdleType,
    ncores_local: u64,
    ncores_busiest: u64,
    local: &SgStats,
    busiest: &SgStats,
) -> i64 {
    if idle == IdleType::NotIdle || busiest.sum_nr_running == 0 {
        return 0;
    }
    if ncores_busiest == ncores_local {
        return busiest.sum_nr_running.saturating_sub(local.sum_nr_running) as i64;
    }
    let mut imbalance =
        (ncores_local * busiest.sum_nr_running).saturating_sub(ncores_busiest * local.sum_nr_running) as i64;
    imbalance =
        (2 * imbalance + (ncores_local + ncores_busiest) as i64) / (ncores_local + ncores_busiest) as i64;
    if imbalance == 0 && local.sum_nr_running == 0 && busiest.sum_nr_running > 1 {
        imbalance = 2;
    }
    imbalance
}

impl Cfs {
    /// `sg->flags`: the flags of the domain below the group (none for a single CPU).
    pub(crate) fn group_flags(&self, level: usize, g: &Group) -> u32 {
        let Some(child) = level.checked_sub(1) else { return 0 };
        let d = &self.cpus[g.first.idx()].domains[child];
        if d.span_weight() > 1 {
            d.p.flags
        } else {
            0
        }
    }

    /// `sg->cores`: the group's SMT cores.
    pub(crate) fn group_cores(ctx: &Ctx, g: &Group) -> u64 {
        g.members.iter().filter(|&&c| ctx.topo.span(Level::Smt, c).first() == Some(c)).count() as u64
    }

    /// `sg->sgc->imbalance` of the group of `cpu` at domain `level`.
    fn sgc_imbalance(&self, level: usize, first: CpuId) -> bool {
        self.v66.sgc_imbalance.get(level * self.ncpus + first.idx()).copied().unwrap_or(false)
    }

    /// `idle_cpu(cpu)`: nothing runs or waits there.
    fn idle_cpu(ctx: &Ctx, cpu: CpuId) -> bool {
        ctx.is_idle(cpu)
    }

    /// `is_core_idle(cpu)`: every other SMT sibling of `cpu` is idle.
    pub(crate) fn is_core_idle(ctx: &Ctx, cpu: CpuId) -> bool {
        ctx.topo.span(Level::Smt, cpu).iter().filter(|&c| c != cpu).all(|c| Self::idle_cpu(ctx, c))
    }

    /// `sgc->capacity`, `min_capacity` and `max_capacity` of `g`: the sum, least and most of its
    /// CPUs' capacities.
    pub(crate) fn group_capacities(&self, g: &Group, s: &mut SgStats) {
        let caps = g.members.iter().map(|&c| self.capacity(c));
        s.group_capacity = caps.clone().sum();
        s.min_capacity = caps.clone().min().unwrap_or(CPU_CAPACITY);
        s.max_capacity = caps.max().unwrap_or(CPU_CAPACITY);
    }

    /// `smt_balance`: a non-local SMT group running more than one task, seen from an idle CPU.
    fn smt_balance(&self, idle: IdleType, level: usize, g: &Group, s: &SgStats) -> bool {
        idle != IdleType::NotIdle
            && self.group_flags(level, g) & SD_SHARE_CPUPOWER != 0
            && s.sum_h_nr_running > 1
    }

    /// `update_sg_lb_stats` for group `g` of domain `level` as balanced towards `env.dst_cpu`.
    /// Returns the statistics and whether some CPU had more than one task (`SG_OVERLOAD`).
    fn update_sg_lb_stats_66(&mut self, ctx: &Ctx, env: &LbEnv, g: &Group, local: bool) -> (SgStats, bool) {
        let mut s = SgStats::default();
        let mut overload = false;
        let asym = self.cpus[env.this_cpu.idx()].domains[env.level].p.flags & SD_ASYM_CPUCAPACITY != 0;
        for &i in g.members.iter().filter(|&&i| env.cpus.contains(i)) {
            self.nr_examined += 1;
            s.group_load += self.pelt_cpu_load(i, ctx.now);
            s.group_util += self.cpu_util_cfs(i, ctx.now);
            s.group_runnable += self.cpu_runnable(i, ctx.now);
            s.sum_h_nr_running += self.cpu_nr_tasks(i);
            let nr_running = u64::from(ctx.cpu(i).nr_running).max(self.cpu_nr_tasks(i));
            s.sum_nr_running += nr_running;
            if nr_running > 1 {
                overload = true;
            }
            if nr_running == 0 && Self::idle_cpu(ctx, i) {
                s.idle_cpus += 1;
                continue;
            }
            if !local && asym {
                let misfit = self.cpus[i.idx()].misfit_task_load;
                if s.group_misfit_task_load < misfit {
                    s.group_misfit_task_load = misfit;
                    overload = true;
                }
            }
        }
        self.group_capacities(g, &mut s);
        s.group_weight = g.members.len() as u64;
        if !local && self.smt_balance(env.idle, env.level, g, &s) {
            s.smt_balance = true;
        }
        let pct = self.cpus[env.this_cpu.idx()].domains[env.level].p.imbalance_pct;
        s.group_type = group_classify(pct, self.sgc_imbalance(env.level, g.first), &s);
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * CPU_CAPACITY / s.group_capacity;
        }
        (s, overload)
    }

    /// `update_sd_pick_busiest`: whether group `g` (stats `s`) is busier than the busiest so far.
    fn update_sd_pick_busiest_66(
        &self,
        env: &LbEnv,
        sds: &SdStats,
        groups: &[&Group],
        g: &Group,
        s: &SgStats,
    ) -> bool {
        let level = env.level;
        let busiest = &sds.busiest_stat;
        if s.sum_h_nr_running == 0 {
            return false;
        }
        if self.cpus[env.this_cpu.idx()].domains[level].p.flags & SD_ASYM_CPUCAPACITY != 0 {
            let dst_cap = self.capacity(env.dst_cpu);
            // A misfit task the destination cannot help: not from a busy core, not to a CPU not
            // bigger than the group's biggest, not while the local group has no spare capacity.
            if s.group_type == GroupType::Misfit
                && (!env.dst_core_idle
                    || !capacity_greater(dst_cap, s.max_capacity)
                    || sds.local_stat.group_type != GroupType::HasSpare)
            {
                return false;
            }
            // No more than a task per CPU, on CPUs bigger than the destination: leave them.
            if s.group_type <= GroupType::FullyBusy && capacity_greater(s.min_capacity, dst_cap) {
                return false;
            }
        }
        if s.group_type > busiest.group_type {
            return true;
        }
        if s.group_type < busiest.group_type {
            return false;
        }
        let busiest_flags = sds.busiest.map(|b| self.group_flags(level, groups[b]));
        match s.group_type {
            GroupType::Overloaded => {
                if s.avg_load <= busiest.avg_load {
                    return false;
                }
            }
            GroupType::Imbalanced => return false,
            GroupType::Misfit => return s.group_misfit_task_load > busiest.group_misfit_task_load,
            GroupType::SmtBalance | GroupType::FullyBusy => {
                // avg_load is 0 for both: the first group wins, unless it is not SMT and this one
                // is (Neri's tie-break: SMT groups need more help).
                if s.avg_load < busiest.avg_load {
                    return false;
                }
                if s.avg_load == busiest.avg_load && busiest_flags.is_some_and(|f| f & SD_SHARE_CPUPOWER != 0)
                {
                    return false;
                }
            }
            GroupType::HasSpare => {
                let g_smt = self.group_flags(level, g) & SD_SHARE_CPUPOWER != 0;
                if let Some(bf) = busiest_flags {
                    if (bf & SD_SHARE_CPUPOWER != 0) != g_smt {
                        // smt_vs_nonsmt_groups: never an SMT group with one task over a non-SMT one.
                        return !(g_smt && s.sum_h_nr_running <= 1);
                    }
                }
                if s.idle_cpus > busiest.idle_cpus {
                    return false;
                }
                if s.idle_cpus == busiest.idle_cpus && s.sum_nr_running <= busiest.sum_nr_running {
                    return false;
                }
            }
        }
        true
    }

    /// `update_idle_cpu_scan` (SIS_UTIL): from the LLC's summed utilisation, how many of its CPUs a
    /// wakeup may scan for an idle one: `llc_weight x (1 - min(1, (util/llc)^2 x pct^2 / 10^4 / 1024))`.
    pub(crate) fn update_idle_cpu_scan(&mut self, ctx: &Ctx, env: &LbEnv, sum_util: u64) {
        if env.idle == IdleType::NewlyIdle {
            return;
        }
        let llc = ctx.topo.span(Level::Llc, env.dst_cpu);
        let llc_weight = llc.count() as u64;
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        if d.span_weight() as u64 != llc_weight {
            return;
        }
        let x = sum_util / llc_weight;
        let pct = d.p.imbalance_pct;
        let tmp = (x * x * pct * pct / (10_000 * CPU_CAPACITY)).min(CPU_CAPACITY);
        let y = (CPU_CAPACITY - tmp) * llc_weight / CPU_CAPACITY;
        let first = llc.first().expect("a CPU's LLC holds it");
        self.v66.nr_idle_scan[first.idx()] = y;
    }

    /// `update_sd_lb_stats` for domain `env.level` of `env.dst_cpu`.
    fn update_sd_lb_stats_66(&mut self, ctx: &Ctx, env: &mut LbEnv) -> SdStats {
        let doms = &self.cpus[env.this_cpu.idx()].domains;
        let list = doms[env.level].groups.clone();
        let prefer_sibling = env.level > 0 && doms[env.level - 1].p.flags & SD_PREFER_SIBLING != 0;
        let top = env.level + 1 == doms.len();
        let groups: Vec<&Group> = list.iter().collect();
        let mut sds = SdStats { prefer_sibling, ..SdStats::default() };
        env.dst_core_idle = !self.v66.smt_active || Self::is_core_idle(ctx, env.dst_cpu);
        sds.busiest_stat.idle_cpus = u64::MAX;
        let mut sum_util = 0;
        let mut overload = false;
        for (gi, g) in groups.iter().enumerate() {
            let local = g.cpus.contains(env.dst_cpu);
            let (s, ov) = self.update_sg_lb_stats_66(ctx, env, g, local);
            overload |= ov;
            if local {
                sds.local = gi;
                sds.local_stat = s;
            } else if self.update_sd_pick_busiest_66(env, &sds, &groups, g, &s) {
                sds.busiest = Some(gi);
                sds.busiest_stat = s;
            }
            sds.total_load += s.group_load;
            sds.total_capacity += s.group_capacity;
            sum_util += s.group_util;
        }
        if top {
            self.v66.rd_overload = overload;
        }
        self.update_idle_cpu_scan(ctx, env, sum_util);
        sds
    }

    /// `calculate_imbalance`: the migration type and how much to move.
    pub(super) fn calculate_imbalance_66(
        &self,
        ctx: &Ctx,
        env: &mut LbEnv,
        sds: &mut SdStats,
        groups: &[&Group],
    ) {
        let (local, busiest) = (&mut sds.local_stat, &sds.busiest_stat);
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        if busiest.group_type == GroupType::Misfit {
            // Only asymmetric domains see misfit groups here (capacity lost to RT/IRQ time, the
            // other source, is not modelled).
            env.migration_type = MigrationType::Misfit;
            env.imbalance = 1;
            return;
        }
        if busiest.group_type == GroupType::SmtBalance || busiest.group_type == GroupType::Imbalanced {
            env.migration_type = MigrationType::Task;
            env.imbalance = 1;
            return;
        }
        if local.group_type == GroupType::HasSpare {
            if busiest.group_type > GroupType::FullyBusy && d.p.flags & SD_SHARE_PKG_RESOURCES == 0 {
                env.migration_type = MigrationType::Util;
                env.imbalance = (local.group_capacity.max(local.group_util) - local.group_util) as i64;
                if env.idle != IdleType::NotIdle && env.imbalance == 0 {
                    env.migration_type = MigrationType::Task;
                    env.imbalance = 1;
                }
                return;
            }
            env.migration_type = MigrationType::Task;
            if busiest.group_weight == 1 || sds.prefer_sibling {
                let busiest_g = groups[sds.busiest.expect("a busiest group")];
                env.imbalance = sibling_imbalance(
                    env.idle,
                    Self::group_cores(ctx, groups[sds.local]),
                    Self::group_cores(ctx, busiest_g),
                    local,
                    busiest,
                );
            } else {
                env.imbalance = local.idle_cpus.saturating_sub(busiest.idle_cpus) as i64;
            }
            if d.p.flags & SD_NUMA != 0 {
                env.imbalance = adjust_numa_imbalance(env.imbalance, local.sum_nr_running + 1, d.imb_numa_nr);
            }
            env.imbalance >>= 1;
            return;
        }
        if local.group_type < GroupType::Overloaded {
            local.avg_load = local.group_load * CPU_CAPACITY / local.group_capacity;
            if local.avg_load >= busiest.avg_load {
                env.imbalance = 0;
                return;
            }
            sds.avg_load = sds.total_load * CPU_CAPACITY / sds.total_capacity;
            if local.avg_load >= sds.avg_load {
                env.imbalance = 0;
                return;
            }
        }
        env.migration_type = MigrationType::Load;
        let a = busiest.avg_load.saturating_sub(sds.avg_load) * busiest.group_capacity;
        let b = sds.avg_load.saturating_sub(local.avg_load) * local.group_capacity;
        env.imbalance = (a.min(b) / CPU_CAPACITY) as i64;
    }

    /// `find_busiest_group`: the busiest group (walk index) when there is an imbalance to fix, with
    /// `env.imbalance` and `env.migration_type` set.
    fn find_busiest_group_66(&mut self, ctx: &Ctx, env: &mut LbEnv) -> Option<usize> {
        let mut sds = self.update_sd_lb_stats_66(ctx, env);
        let list = self.cpus[env.this_cpu.idx()].domains[env.level].groups.clone();
        let groups: Vec<&Group> = list.iter().collect();
        let pct = self.cpus[env.this_cpu.idx()].domains[env.level].p.imbalance_pct;
        let busiest_gi = sds.busiest?;
        let (local, busiest) = (sds.local_stat, sds.busiest_stat);
        let balanced = 'check: {
            // Misfit tasks are dealt with whatever the average loads (force_balance).
            if busiest.group_type == GroupType::Misfit {
                break 'check false;
            }
            if busiest.group_type == GroupType::Imbalanced {
                break 'check false;
            }
            if local.group_type > busiest.group_type {
                break 'check true;
            }
            if local.group_type == GroupType::Overloaded {
                if local.avg_load >= busiest.avg_load {
                    break 'check true;
                }
                sds.avg_load = sds.total_load * CPU_CAPACITY / sds.total_capacity;
                if local.avg_load >= sds.avg_load {
                    break 'check true;
                }
                if 100 * busiest.avg_load <= pct * local.avg_load {
                    break 'check true;
                }
            }
            if sds.prefer_sibling && local.group_type == GroupType::HasSpare {
                let (lc, bc) =
                    (Self::group_cores(ctx, groups[sds.local]), Self::group_cores(ctx, groups[busiest_gi]));
                if sibling_imbalance(env.idle, lc, bc, &local, &busiest) > 1 {
                    break 'check false;
                }
            }
            if busiest.group_type != GroupType::Overloaded {
                if env.idle == IdleType::NotIdle {
                    break 'check true;
                }
                if busiest.group_type == GroupType::SmtBalance {
                    let lf = self.group_flags(env.level, groups[sds.local]) & SD_SHARE_CPUPOWER;
                    let bf = self.group_flags(env.level, groups[busiest_gi]) & SD_SHARE_CPUPOWER;
                    if lf != bf {
                        break 'check false;
                    }
                }
                if busiest.group_weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1 {
                    break 'check true;
                }
                if busiest.sum_h_nr_running == 1 {
                    break 'check true;
                }
            }
            false
        };
        if balanced {
            env.imbalance = 0;
            return None;
        }
        self.calculate_imbalance_66(ctx, env, &mut sds, &groups);
        (env.imbalance != 0).then_some(busiest_gi)
    }

    /// `find_busiest_queue` in group `gi` (walk index) of domain `env.level`.
    fn find_busiest_queue_66(&self, ctx: &Ctx, env: &LbEnv, gi: usize) -> Option<CpuId> {
        let g = &self.cpus[env.this_cpu.idx()].domains[env.level].groups[gi];
        let mut busiest = None;
        let (mut busiest_util, mut busiest_load, mut busiest_capacity, mut busiest_nr) = (0, 0, 1, 0);
        let asym = self.cpus[env.this_cpu.idx()].domains[env.level].p.flags & SD_ASYM_CPUCAPACITY != 0;
        for &i in g.members.iter().filter(|&&i| env.cpus.contains(i)) {
            let nr_running = self.cpu_nr_tasks(i);
            if nr_running == 0 {
                continue;
            }
            let capacity = self.capacity(i);
            // Not a lone task on a CPU the destination is not bigger than (that would end in an
            // active balance from a big CPU to a small one).
            if asym && !capacity_greater(self.capacity(env.dst_cpu), capacity) && nr_running == 1 {
                continue;
            }
            match env.migration_type {
                MigrationType::Load => {
                    let load = self.pelt_cpu_load(i, ctx.now);
                    // check_cpu_capacity is false: no CPU loses capacity to RT or IRQ time here.
                    if nr_running == 1 && load as i64 > env.imbalance {
                        continue;
                    }
                    if load * busiest_capacity > busiest_load * capacity {
                        busiest_load = load;
                        busiest_capacity = capacity;
                        busiest = Some(i);
                    }
                }
                MigrationType::Util => {
                    let util = self.cpu_util_cfs_boost(i, ctx.now);
                    if nr_running <= 1 {
                        continue;
                    }
                    if busiest_util < util {
                        busiest_util = util;
                        busiest = Some(i);
                    }
                }
                MigrationType::Task => {
                    if busiest_nr < nr_running {
                        busiest_nr = nr_running;
                        busiest = Some(i);
                    }
                }
                MigrationType::Misfit => {
                    let misfit = self.cpus[i.idx()].misfit_task_load;
                    if misfit > busiest_load {
                        busiest_load = misfit;
                        busiest = Some(i);
                    }
                }
            }
        }
        busiest
    }

    /// `task_hot` (6.6): never across SMT siblings or for SCHED_IDLE; the `next` buddy is hot while
    /// the destination has tasks; otherwise hot if it ran within `sched_migration_cost`.
    fn task_hot_66(&self, ctx: &Ctx, t: TaskId, env: &LbEnv) -> bool {
        if ctx.task(t).class == SchedClass::Idle {
            return false;
        }
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        if d.p.flags & SD_SHARE_CPUPOWER != 0 {
            return false;
        }
        let se = self.task_se[t.idx()];
        let rq = &self.rqs[self.ses[se as usize].cfs_rq as usize];
        if self.p.cache_hot_buddy && ctx.cpu(env.dst_cpu).nr_running > 0 && rq.next == Some(se) {
            return true;
        }
        let cost = self.p.sched_migration_cost_ns;
        if cost == 0 {
            return false;
        }
        (ctx.now as i64 - self.ses[se as usize].exec_start as i64) < cost as i64
    }

    /// `can_migrate_task` (6.6): affinity (trying another CPU of the local group, except when newly
    /// idle), not running, and cache cold or past `cache_nice_tries` failures.
    pub(super) fn can_migrate_task_66(&self, ctx: &Ctx, t: TaskId, env: &mut LbEnv) -> bool {
        let allowed = ctx.task(t).allowed;
        if !allowed.contains(env.dst_cpu) {
            env.some_pinned = true;
            if env.idle == IdleType::NewlyIdle || env.new_dst.is_some() {
                return false;
            }
            env.new_dst = env.dst_grpmask.and(&env.cpus).iter().find(|&c| allowed.contains(c));
            return false;
        }
        env.all_pinned = false;
        if ctx.cpu(env.src_cpu).curr == Some(t) {
            return false;
        }
        if self.ses[self.task_se[t.idx()] as usize].sched_delayed {
            // Simplified: a 6.12 delayed task is blocked for the engine, which moves runnable tasks
            // only; the kernel may move it (it stays delayed on the new CPU).
            return false;
        }
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        !self.task_hot_66(ctx, t, env) || d.nr_balance_failed > d.p.cache_nice_tries
    }

    /// `task_h_load` (6.6): a root task's load average scaled by its runqueue's `h_load` over the
    /// runqueue's load average (for the root, `load x cpu_load / (cpu_load + 1)`); a grouped task's
    /// through its group runqueue's hierarchical load, computed from weights (see the essay of
    /// [`super::pelt`]).
    pub(crate) fn task_h_load_66(&mut self, ctx: &Ctx, t: TaskId, cpu: CpuId) -> u64 {
        let load = self.pelt_task_load(t, ctx.now);
        let se = self.task_se[t.idx()];
        let rq = self.ses[se as usize].cfs_rq;
        if rq == self.root(cpu) {
            let cpu_load = self.pelt_cpu_load(cpu, ctx.now);
            return load * cpu_load / (cpu_load + 1);
        }
        self.update_h_load(cpu, ctx.now);
        let r = &self.rqs[rq as usize];
        load * r.h_load / (r.load + 1)
    }

    /// The task entities on `cpu` in `cfs_tasks` order from the tail: least recently run or queued
    /// first.
    fn cfs_tasks_from_tail(&self, cpu: CpuId) -> Vec<SeId> {
        let mut v = Vec::new();
        for g in 0..self.ngroups as u32 {
            let r = &self.rqs[self.rq_id(g, cpu) as usize];
            v.extend(r.timeline.iter().copied().filter(|&s| self.ses[s as usize].task.is_some()));
            if let Some(c) = r.curr.filter(|&c| self.ses[c as usize].task.is_some()) {
                v.push(c);
            }
        }
        v.sort_unstable_by_key(|&s| self.ses[s as usize].list_seq);
        v
    }

    /// `detach_tasks` (with `attach_tasks`: the tasks move at once, see [`super::balance`]): from the
    /// tail of the source's `cfs_tasks`, at most `loop_max` examined, each skipped one moved to the
    /// head. Returns how many moved.
    fn detach_tasks(&mut self, ctx: &Ctx, env: &mut LbEnv, out: &mut Vec<Migration>) -> u32 {
        if self.cpu_nr_tasks(env.src_cpu) <= 1 {
            env.all_pinned = false;
            return 0;
        }
        if env.imbalance <= 0 {
            return 0;
        }
        let list = self.cfs_tasks_from_tail(env.src_cpu);
        let failed = self.cpus[env.this_cpu.idx()].domains[env.level].nr_balance_failed.min(63);
        let mut detached = 0;
        for se in list {
            if env.idle != IdleType::NotIdle && self.cpu_nr_tasks(env.src_cpu) <= 1 {
                break;
            }
            env.nr_loop += 1;
            if env.nr_loop > env.loop_max {
                break;
            }
            self.nr_examined += 1;
            let t = self.ses[se as usize].task.expect("task entity");
            let fits = self.can_migrate_task_66(ctx, t, env) && {
                match env.migration_type {
                    MigrationType::Load => {
                        let load = self.task_h_load_66(ctx, t, env.src_cpu).max(1);
                        // LB_MIN is off by default.
                        let fits = ((load >> failed) as i64) <= env.imbalance;
                        if fits {
                            env.imbalance -= load as i64;
                        }
                        fits
                    }
                    MigrationType::Util => {
                        let util = self.task_util_est(t, ctx.now);
                        let fits = ((util >> failed) as i64) <= env.imbalance;
                        if fits {
                            env.imbalance -= util as i64;
                        }
                        fits
                    }
                    MigrationType::Task => {
                        env.imbalance -= 1;
                        true
                    }
                    MigrationType::Misfit => {
                        // Only a task that does not fit its CPU.
                        let misfit = !self.task_fits_cpu(t, env.src_cpu, ctx.now);
                        if misfit {
                            env.imbalance = 0;
                        }
                        misfit
                    }
                }
            };
            if !fits {
                // list_move to the head.
                self.seq += 1;
                self.ses[se as usize].list_seq = self.seq;
                continue;
            }
            self.pull_task(ctx, t, env.src_cpu, env.dst_cpu, out);
            detached += 1;
            if env.idle == IdleType::NewlyIdle {
                break; // CONFIG_PREEMPTION
            }
            if env.imbalance <= 0 {
                break;
            }
        }
        detached
    }

    /// `need_active_balance` (6.6): a task-count imbalance that failed more than
    /// `cache_nice_tries + 2` times, or a misfit task (asymmetric capacities; no capacity is lost
    /// to RT or IRQ time here, so the reduced-capacity case never applies).
    fn need_active_balance_66(&self, env: &LbEnv) -> bool {
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        (env.migration_type == MigrationType::Task && d.nr_balance_failed > d.p.cache_nice_tries + 2)
            || env.migration_type == MigrationType::Misfit
    }

    /// `should_we_balance` (6.6.0; 6.12 where said): a newly idle CPU with nothing queued does;
    /// otherwise the first idle CPU of the local group on an idle core (any idle CPU within an SMT
    /// domain), else the first idle SMT sibling of a busy core if that is this CPU (6.12: only
    /// then), else the group's first CPU.
    pub(crate) fn should_we_balance(&self, ctx: &Ctx, env: &LbEnv) -> bool {
        if !env.cpus.contains(env.dst_cpu) {
            return false;
        }
        if env.idle == IdleType::NewlyIdle {
            return ctx.cpu(env.dst_cpu).nr_running == 0;
        }
        let d = &self.cpus[env.this_cpu.idx()].domains[env.level];
        let smt_domain = d.p.flags & SD_SHARE_CPUPOWER != 0;
        let mut idle_smt = None;
        for cpu in env.dst_grpmask.and(&env.cpus).iter() {
            if !Self::idle_cpu(ctx, cpu) {
                continue;
            }
            if !smt_domain && !Self::is_core_idle(ctx, cpu) {
                idle_smt.get_or_insert(cpu);
                continue;
            }
            return cpu == env.dst_cpu;
        }
        // 6.7 and later ("Are we the first idle CPU with busy siblings?"): the idle SMT sibling is
        // the only one to balance; 6.6.0 also let the group's first CPU balance.
        if let Some(smt) = idle_smt {
            if smt == env.dst_cpu || self.is_612() {
                return smt == env.dst_cpu;
            }
        }
        env.dst_grpmask.first() == Some(env.dst_cpu)
    }

    /// Sets `sd_parent->groups->sgc->imbalance` (the local group one level up) of `cpu`.
    fn set_parent_imbalance(&mut self, cpu: CpuId, level: usize, value: bool) {
        let doms = &self.cpus[cpu.idx()].domains;
        if level + 1 >= doms.len() {
            return;
        }
        let first = doms[level + 1].groups[0].first;
        let i = (level + 1) * self.ncpus + first.idx();
        if let Some(v) = self.v66.sgc_imbalance.get_mut(i) {
            *v = value;
        }
    }

    /// `load_balance` (6.6) at domain `level` of `this_cpu`. Returns whether tasks moved and
    /// `continue_balancing`.
    pub(crate) fn load_balance_66(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        idle: IdleType,
        out: &mut Vec<Migration>,
    ) -> (bool, bool) {
        self.nr_lb_calls += 1;
        let d = &self.cpus[this_cpu.idx()].domains[level];
        let mut env = LbEnv::new(level, this_cpu, d.groups[0].cpus, d.span, idle);
        let mut continue_balancing = true;
        // redo:
        let outcome = loop {
            if !self.should_we_balance(ctx, &env) {
                continue_balancing = false;
                break None;
            }
            let Some(gi) = self.find_busiest_group_66(ctx, &mut env) else { break None };
            let Some(busiest) = self.find_busiest_queue_66(ctx, &env, gi) else { break None };
            env.src_cpu = busiest;
            let mut ld_moved = 0;
            env.all_pinned = true;
            if ctx.cpu(busiest).nr_running.max(self.cpu_nr_tasks(busiest) as u32) > 1 {
                env.loop_max = self.p.sched_nr_migrate.min(self.cpu_nr_tasks(busiest) as u32);
                loop {
                    // more_balance:
                    ld_moved += self.detach_tasks(ctx, &mut env, out);
                    match env.new_dst.take() {
                        Some(new_dst) if env.imbalance > 0 => {
                            env.cpus.remove(env.dst_cpu);
                            env.dst_cpu = new_dst;
                            env.nr_loop = 0;
                        }
                        _ => break,
                    }
                }
                if env.some_pinned && env.imbalance > 0 {
                    self.set_parent_imbalance(this_cpu, level, true);
                }
                if env.all_pinned {
                    env.cpus.remove(busiest);
                    if !env.cpus.is_subset(&env.dst_grpmask) {
                        env.nr_loop = 0;
                        continue;
                    }
                    // out_all_pinned
                    self.cpus[this_cpu.idx()].domains[level].nr_balance_failed = 0;
                    return (false, continue_balancing && self.out_one_pinned_66(this_cpu, level, &env));
                }
            }
            break Some((busiest, ld_moved));
        };
        let Some((busiest, ld_moved)) = outcome else {
            // out_balanced
            if !env.all_pinned {
                self.set_parent_imbalance(this_cpu, level, false);
            }
            self.cpus[this_cpu.idx()].domains[level].nr_balance_failed = 0;
            self.out_one_pinned_66(this_cpu, level, &env);
            return (false, continue_balancing);
        };
        let mut active_balance = false;
        if ld_moved == 0 {
            // Neither newly idle balances nor misfit migrations count as failures.
            if idle != IdleType::NewlyIdle && env.migration_type != MigrationType::Misfit {
                self.cpus[this_cpu.idx()].domains[level].nr_balance_failed += 1;
            }
            if self.need_active_balance_66(&env) {
                let curr_allowed =
                    ctx.cpu(busiest).curr.is_some_and(|c| ctx.task(c).allowed.contains(this_cpu));
                if !curr_allowed {
                    self.out_one_pinned_66(this_cpu, level, &env);
                    return (false, continue_balancing);
                }
                env.all_pinned = false;
                if !self.pending_active.iter().any(|&(b, _, _)| b == busiest) {
                    self.pending_active.push((busiest, this_cpu, level));
                    active_balance = true;
                }
            }
        } else {
            self.cpus[this_cpu.idx()].domains[level].nr_balance_failed = 0;
        }
        if !active_balance || self.need_active_balance_66(&env) {
            let d = &mut self.cpus[this_cpu.idx()].domains[level];
            d.balance_interval_ms = d.p.min_interval_ms;
        }
        (ld_moved > 0, continue_balancing)
    }

    /// `load_balance`'s `out_one_pinned` tail (6.6): no back-off for a newly idle balance; else the
    /// interval doubles up to `max_interval` (`MAX_PINNED_INTERVAL` when affinity pinned everything).
    /// Returns true (for chaining).
    fn out_one_pinned_66(&mut self, this_cpu: CpuId, level: usize, env: &LbEnv) -> bool {
        if env.idle == IdleType::NewlyIdle || env.migration_type == MigrationType::Misfit {
            return true;
        }
        let d = &mut self.cpus[this_cpu.idx()].domains[level];
        if (env.all_pinned && d.balance_interval_ms < MAX_PINNED_INTERVAL_MS)
            || d.balance_interval_ms < d.p.max_interval_ms
        {
            d.balance_interval_ms *= 2;
        }
        true
    }

    /// `rebalance_domains` (6.6): bottom-up, each domain whose interval has passed is balanced; after
    /// a move the CPU's state is looked at again; a domain whose `should_we_balance` said no ends
    /// the walk.
    pub(crate) fn rebalance_domains_66(
        &mut self,
        ctx: &Ctx,
        cpu: CpuId,
        mut idle: IdleType,
        out: &mut Vec<Migration>,
    ) {
        let jiffies = ctx.jiffies();
        let hz = ctx.hz();
        self.update_shares(cpu, ctx.now);
        let mut continue_balancing = true;
        let (mut need_decay, mut max_cost) = (false, 0);
        for level in 0..self.cpus[cpu.idx()].domains.len() {
            // The newly idle costs decay here, "a regular visit to all the domains".
            let d = &mut self.cpus[cpu.idx()].domains[level];
            need_decay = update_newidle_cost(d, 0, 0, jiffies, hz);
            max_cost += d.max_newidle_lb_cost;
            if !continue_balancing {
                if need_decay {
                    continue;
                }
                break;
            }
            let d = &self.cpus[cpu.idx()].domains[level];
            let busy = idle != IdleType::Idle && !self.sched_idle_cpu(ctx, cpu);
            let interval_j = self.balance_interval_j(d, !busy, hz);
            if jiffies >= d.last_balance + interval_j {
                let (moved, cont) = self.load_balance_66(ctx, cpu, level, idle, out);
                continue_balancing = cont;
                if moved {
                    idle = if self.cpu_nr_tasks(cpu) == 0 && ctx.cpu(cpu).curr.is_none() {
                        IdleType::Idle
                    } else {
                        IdleType::NotIdle
                    };
                }
                self.cpus[cpu.idx()].domains[level].last_balance = jiffies;
            }
        }
        if need_decay {
            let st = &mut self.cpus[cpu.idx()];
            st.max_idle_balance_cost = self.p.sched_migration_cost_ns.max(max_cost);
        }
        self.run_active_balances(ctx, out);
        self.update_next_balance(cpu, hz);
    }

    /// The stopper's `detach_one_task` (6.6, `LBF_ACTIVE_LB`): from the tail of the busiest CPU's
    /// `cfs_tasks`, the first task allowed on the target (hotness is not asked; the task that ran
    /// there has been preempted by the stopper, so it may go).
    pub(crate) fn detach_one_task_66(&self, ctx: &Ctx, target: CpuId, busiest: CpuId) -> Option<TaskId> {
        self.cfs_tasks_from_tail(busiest)
            .into_iter()
            .filter(|&se| !self.ses[se as usize].sched_delayed)
            .filter_map(|se| self.ses[se as usize].task)
            .find(|&t| ctx.task(t).allowed.contains(target))
    }
}

//! `find_busiest_group` and its helpers, Linux 2.6.38 kernel/sched_fair.c, in the kernel's order:
//! `update_sg_lb_stats` (one group's loads, `group_imb`, capacity), `update_sd_pick_busiest`,
//! `update_sd_lb_stats` (the domain's walk, with SD_PREFER_SIBLING's capacity cap),
//! `fix_small_imbalance`, `calculate_imbalance` and `find_busiest_group` itself, all in the kernel's
//! unsigned arithmetic. Power-savings balancing and SD_ASYM_PACKING are off in the kernel by default
//! and left out.

use super::balance::IdleType;
use super::lb_host::LbHost;
use crate::domains::{DomainKind, Group, GroupList, SCHED_LOAD_SCALE, SD_PREFER_SIBLING};
use schedlab_core::{CpuId, CpuSet, Ctx};

/// Statistics of one group (`struct sg_lb_stats`).
#[derive(Default, Debug, PartialEq)]
pub(crate) struct SgStats {
    avg_load: u64,
    group_load: u64,
    sum_nr_running: u64,
    sum_weighted_load: u64,
    group_capacity: u64,
    idle_cpus: u64,
    group_weight: u64,
    group_imb: bool,
    group_has_capacity: bool,
}

/// Domain-wide statistics (`struct sd_lb_stats`).
#[derive(Default, Debug, PartialEq)]
pub(crate) struct SdStats {
    pub(crate) busiest: Option<usize>,
    pub(crate) this: usize,
    total_load: u64,
    total_pwr: u64,
    avg_load: u64,
    this_load: u64,
    this_load_per_task: u64,
    this_nr_running: u64,
    this_has_capacity: bool,
    this_idle_cpus: u64,
    busiest_idle_cpus: u64,
    max_load: u64,
    busiest_load_per_task: u64,
    busiest_nr_running: u64,
    busiest_group_capacity: u64,
    busiest_has_capacity: bool,
    busiest_group_weight: u64,
    group_imb: bool,
}

/// What `update_sd_lb_stats` hands back besides the statistics: `*balance` (this CPU is the one to
/// balance the domain) and `*sd_idle` (no CPU seen had a task).
#[derive(Debug, PartialEq)]
pub(crate) struct SdWalk {
    pub(crate) sds: SdStats,
    pub(crate) balance: bool,
    pub(crate) sd_idle: bool,
}

#[inline]
pub(crate) fn div_round_closest(x: u64, d: u64) -> u64 {
    (x + d / 2) / d
}

/// `fix_small_capacity`: only SMT siblings can have less power than a CPU; one that keeps ~90 % of
/// its original power (always, without RT time or frequency scaling to take it away) counts as one.
#[inline]
pub(crate) fn fix_small_capacity(kind: DomainKind) -> u64 {
    u64::from(kind == DomainKind::Sibling)
}

/// `x * SCHED_LOAD_SCALE / power`, skipping the division for a full-power group.
#[inline]
fn scale_by_power(x: u64, power: u64) -> u64 {
    if power == SCHED_LOAD_SCALE {
        x
    } else {
        x * SCHED_LOAD_SCALE / power
    }
}

/// `update_sd_pick_busiest`: a group busier than the busiest so far that is over capacity or
/// internally imbalanced.
#[inline]
fn update_sd_pick_busiest(sds: &SdStats, sgs: &SgStats) -> bool {
    if sgs.avg_load <= sds.max_load {
        return false;
    }
    sgs.sum_nr_running > sgs.group_capacity || sgs.group_imb
}

/// The local/busiest bookkeeping of `update_sd_lb_stats` for one group's statistics.
#[inline]
fn account_group(
    sds: &mut SdStats,
    gi: usize,
    local: bool,
    power: u64,
    prefer_sibling: bool,
    mut sgs: SgStats,
) {
    sds.total_load += sgs.group_load;
    sds.total_pwr += power;
    // SD_PREFER_SIBLING of the child: a remote group counts as able to take one task only, so its
    // excess moves here, if this group has room for it.
    if prefer_sibling && !local && sds.this_has_capacity {
        sgs.group_capacity = sgs.group_capacity.min(1);
    }
    if local {
        sds.this_load = sgs.avg_load;
        sds.this = gi;
        sds.this_nr_running = sgs.sum_nr_running;
        sds.this_load_per_task = sgs.sum_weighted_load;
        sds.this_has_capacity = sgs.group_has_capacity;
        sds.this_idle_cpus = sgs.idle_cpus;
    } else if update_sd_pick_busiest(sds, &sgs) {
        sds.max_load = sgs.avg_load;
        sds.busiest = Some(gi);
        sds.busiest_nr_running = sgs.sum_nr_running;
        sds.busiest_idle_cpus = sgs.idle_cpus;
        sds.busiest_group_capacity = sgs.group_capacity;
        sds.busiest_load_per_task = sgs.sum_weighted_load;
        sds.busiest_has_capacity = sgs.group_has_capacity;
        sds.busiest_group_weight = sgs.group_weight;
        sds.group_imb = sgs.group_imb;
    }
}

/// `find_busiest_group` and its walk, for any [`LbHost`] (every one gets them).
pub(crate) trait FindBusiest2638: LbHost {
    /// `update_sg_lb_stats` for group `g` of a `kind` domain, over its CPUs in `cpus`. Returns `None`
    /// when this is the local group and another CPU of it should balance (`*balance = 0`).
    #[allow(clippy::too_many_arguments)]
    fn update_sg_lb_stats(
        &mut self,
        ctx: &Ctx,
        kind: DomainKind,
        g: &Group,
        this_cpu: CpuId,
        idle: IdleType,
        load_idx: usize,
        sd_idle: &mut bool,
        local: bool,
        cpus: &CpuSet,
    ) -> Option<SgStats> {
        let now = ctx.now;
        let mut sgs = SgStats::default();
        let (mut max_cpu_load, mut min_cpu_load, mut max_nr_running) = (0u64, u64::MAX, 0u64);
        let mut balance_cpu = g.first;
        let mut first_idle = false;
        for &i in g.members.iter().filter(|&&i| cpus.contains(i)) {
            self.add_examined(1);
            let nr = self.nr_tasks(i);
            if *sd_idle && nr > 0 {
                *sd_idle = false;
            }
            let idle_i = ctx.is_idle(i);
            let load;
            if local {
                if idle_i && !first_idle {
                    first_idle = true;
                    balance_cpu = i;
                }
                load = self.target_load(i, load_idx, now);
            } else {
                load = self.source_load(i, load_idx, now);
                if load > max_cpu_load {
                    max_cpu_load = load;
                    max_nr_running = nr;
                }
                min_cpu_load = min_cpu_load.min(load);
            }
            sgs.group_load += load;
            sgs.sum_nr_running += nr;
            sgs.sum_weighted_load += self.weighted_cpuload(i, now);
            sgs.idle_cpus += u64::from(idle_i);
        }
        // The first idle CPU of the local group, or its first CPU, balances this and wider domains
        // (every CPU may in newly idle balancing).
        if idle != IdleType::NewlyIdle && local && balance_cpu != this_cpu {
            return None;
        }
        sgs.avg_load = scale_by_power(sgs.group_load, g.power);
        // "Consider the group unbalanced when the imbalance is larger than the average weight of two
        // tasks", when its busiest CPU has a task to spare.
        let avg_load_per_task = sgs.sum_weighted_load.checked_div(sgs.sum_nr_running).unwrap_or(0);
        if max_cpu_load.wrapping_sub(min_cpu_load) > 2 * avg_load_per_task && max_nr_running > 1 {
            sgs.group_imb = true;
        }
        sgs.group_capacity = div_round_closest(g.power, SCHED_LOAD_SCALE);
        if sgs.group_capacity == 0 {
            sgs.group_capacity = fix_small_capacity(kind);
        }
        sgs.group_weight = g.members.len() as u64;
        sgs.group_has_capacity = sgs.group_capacity > sgs.sum_nr_running;
        Some(sgs)
    }

    /// The start of `update_sd_lb_stats`: the domain's kind, whether its child prefers siblings
    /// (SD_PREFER_SIBLING), and the `cpu_load[]` index for this kind of balancing (`get_sd_load_idx`).
    fn walk_setup(&self, this_cpu: CpuId, level: usize, idle: IdleType) -> (DomainKind, bool, usize) {
        let doms = self.domains(this_cpu);
        let d = &doms[level];
        let prefer_sibling = level > 0 && doms[level - 1].p.flags & SD_PREFER_SIBLING != 0;
        let load_idx = match idle {
            IdleType::NotIdle => d.p.busy_idx,
            IdleType::NewlyIdle => d.p.newidle_idx,
            IdleType::Idle => d.p.idle_idx,
        };
        (d.kind, prefer_sibling, load_idx)
    }

    /// `update_sd_lb_stats` for domain `level` of `this_cpu` over the CPUs in `cpus`, group by group
    /// in the domain's walk order (the local group first).
    #[allow(clippy::too_many_arguments)]
    fn update_sd_lb_stats(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        groups: &GroupList,
        idle: IdleType,
        mut sd_idle: bool,
        cpus: &CpuSet,
    ) -> SdWalk {
        let (kind, prefer_sibling, load_idx) = self.walk_setup(this_cpu, level, idle);
        let mut sds = SdStats::default();
        for (gi, g) in groups.iter().enumerate() {
            let local = gi == 0;
            let Some(sgs) =
                self.update_sg_lb_stats(ctx, kind, g, this_cpu, idle, load_idx, &mut sd_idle, local, cpus)
            else {
                return SdWalk { sds, balance: false, sd_idle };
            };
            account_group(&mut sds, gi, local, g.power, prefer_sibling, sgs);
        }
        SdWalk { sds, balance: true, sd_idle }
    }

    /// [`Self::update_sd_lb_stats`] for a domain whose groups are all single CPUs, over all its CPUs:
    /// the same statistics, decisions and tie-breaks without the per-group member walk. (In a one-CPU
    /// group the busiest and least loaded CPU are one, so `group_imb` is never set; whether a CPU is
    /// idle is looked up only for the local group and a busiest candidate.)
    fn update_sd_lb_stats_single(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        groups: &GroupList,
        idle: IdleType,
        mut sd_idle: bool,
    ) -> SdWalk {
        let now = ctx.now;
        let (kind, prefer_sibling, load_idx) = self.walk_setup(this_cpu, level, idle);
        let capacity_of = |power: u64| match div_round_closest(power, SCHED_LOAD_SCALE) {
            0 => fix_small_capacity(kind),
            c => c,
        };
        let mut sds = SdStats::default();
        let [first, rest] = groups.halves();
        // The local group: this CPU's own.
        let g = &first[0];
        let i = g.first;
        let nr = self.nr_tasks(i);
        sd_idle &= nr == 0;
        let weighted = self.weighted_cpuload(i, now);
        let load = if load_idx == 0 { weighted } else { self.target_load(i, load_idx, now) };
        if idle != IdleType::NewlyIdle && i != this_cpu {
            self.add_examined(1);
            return SdWalk { sds, balance: false, sd_idle };
        }
        let capacity = capacity_of(g.power);
        let local = SgStats {
            avg_load: scale_by_power(load, g.power),
            group_load: load,
            sum_nr_running: nr,
            sum_weighted_load: weighted,
            group_capacity: capacity,
            idle_cpus: u64::from(ctx.is_idle(i)),
            group_weight: 1,
            group_imb: false,
            group_has_capacity: capacity > nr,
        };
        account_group(&mut sds, 0, true, g.power, prefer_sibling, local);
        // The others, in walk order.
        let cap_one = prefer_sibling && sds.this_has_capacity;
        let mut gi = 1;
        for half in [&first[1..], rest] {
            for g in half {
                let i = g.first;
                let nr = self.nr_tasks(i);
                sd_idle &= nr == 0;
                let (weighted, load) = if load_idx == 0 {
                    let w = self.weighted_cpuload(i, now);
                    (w, w)
                } else {
                    (self.weighted_cpuload(i, now), self.source_load(i, load_idx, now))
                };
                sds.total_load += load;
                sds.total_pwr += g.power;
                let avg_load = scale_by_power(load, g.power);
                if avg_load > sds.max_load {
                    let capacity = capacity_of(g.power);
                    let capped = if cap_one { capacity.min(1) } else { capacity };
                    if nr > capped {
                        sds.max_load = avg_load;
                        sds.busiest = Some(gi);
                        sds.busiest_nr_running = nr;
                        sds.busiest_idle_cpus = u64::from(ctx.is_idle(i));
                        sds.busiest_group_capacity = capped;
                        sds.busiest_load_per_task = weighted;
                        sds.busiest_has_capacity = capacity > nr;
                        sds.busiest_group_weight = 1;
                        sds.group_imb = false;
                    }
                }
                gi += 1;
            }
        }
        self.add_examined(gi as u64);
        SdWalk { sds, balance: true, sd_idle }
    }

    /// `find_busiest_group` (2.6.38) for domain `level` of `this_cpu` over the CPUs in `cpus` (all
    /// when `None`): the busiest group's index in the walk and the weighted load to move (which may
    /// be 0), or `None`; with `*balance` and `*sd_idle` from the walk.
    fn find_busiest_group(
        &mut self,
        ctx: &Ctx,
        this_cpu: CpuId,
        level: usize,
        idle: IdleType,
        sd_idle: bool,
        cpus: Option<&CpuSet>,
    ) -> (Option<(usize, u64)>, bool, bool) {
        let groups = self.domains(this_cpu)[level].groups.clone();
        let walk = match cpus {
            None if groups.all_single() => {
                self.update_sd_lb_stats_single(ctx, this_cpu, level, &groups, idle, sd_idle)
            }
            None => self.update_sd_lb_stats(ctx, this_cpu, level, &groups, idle, sd_idle, &ctx.topo.all()),
            Some(cpus) => self.update_sd_lb_stats(ctx, this_cpu, level, &groups, idle, sd_idle, cpus),
        };
        let SdWalk { mut sds, balance, sd_idle } = walk;
        if !balance {
            return (None, false, sd_idle);
        }
        let Some(busiest) = sds.busiest else { return (None, true, sd_idle) };
        if sds.busiest_nr_running == 0 {
            return (None, true, sd_idle);
        }
        // SD_BALANCE_NEWIDLE trumps SMP nice when underutilized: force the pull, skipping the
        // load comparisons below (and leaving avg_load at 0 for calculate_imbalance).
        let force = idle == IdleType::NewlyIdle && sds.this_has_capacity && !sds.busiest_has_capacity;
        if !force {
            if sds.this_load >= sds.max_load {
                return (None, true, sd_idle);
            }
            sds.avg_load = SCHED_LOAD_SCALE * sds.total_load / sds.total_pwr;
            if sds.this_load >= sds.avg_load {
                return (None, true, sd_idle);
            }
            if idle == IdleType::NewlyIdle || !ctx.is_idle(this_cpu) {
                let pct = self.domains(this_cpu)[level].p.imbalance_pct;
                if 100 * sds.max_load <= pct * sds.this_load {
                    return (None, true, sd_idle);
                }
            } else if sds.this_idle_cpus <= sds.busiest_idle_cpus + 1
                && sds.busiest_nr_running <= sds.busiest_group_weight
            {
                // This CPU is idle: balanced while the busiest group runs no more tasks than it has
                // CPUs and this group has at most one idle CPU more than it.
                return (None, true, sd_idle);
            }
        }
        let busiest_power = groups[busiest].power;
        let this_power = groups[sds.this].power;
        let this_avg = self.cpu_avg_load_per_task(this_cpu, ctx.now);
        let imbalance = calculate_imbalance(&mut sds, busiest_power, this_power, this_avg);
        (Some((busiest, imbalance)), true, sd_idle)
    }
}

impl<T: LbHost + ?Sized> FindBusiest2638 for T {}

/// `fix_small_imbalance`: when the computed imbalance is below one task's load, move one task if
/// that raises the CPU power used.
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

/// `calculate_imbalance`: the weighted load to move so neither group crosses the domain average,
/// nor the busiest group drops below its capacity (unless it is internally imbalanced).
pub(crate) fn calculate_imbalance(
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

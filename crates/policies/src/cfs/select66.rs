//! Where a new or waking task goes in Linux 6.6 (kernel/sched/fair.c), in the kernel's order:
//! `record_wakee` and `wake_wide`, `wake_affine_idle`, `wake_affine_weight`, `wake_affine`,
//! `find_idlest_group_cpu`, `find_idlest_cpu`, `__update_idle_core`, `select_idle_core`,
//! `select_idle_smt`, `select_idle_cpu` (SIS_UTIL), `select_idle_sibling`, `update_sg_wakeup_stats`,
//! `update_pick_idlest`, `find_idlest_group` and `select_task_rq_fair`.
//!
//! A wakeup takes the fast path: `wake_affine` chooses between the waker's CPU and the wakee's
//! previous one (an idle one first, then the lower effective load), unless the two tasks wake
//! many different partners (`wake_wide`); then `select_idle_sibling` looks for an idle CPU sharing
//! the target's last-level cache: the target, the previous CPU, the task's recently used CPU, an
//! idle SMT sibling, then a scan of the LLC bounded by `nr_idle_scan`, which the LLC's balancer sets
//! from its utilisation (SIS_UTIL: a busy LLC is not scanned). A new task takes the slow path,
//! `find_idlest_group` / `find_idlest_cpu` from the widest domain with SD_BALANCE_FORK down, by group
//! class and then idle CPUs or load.
//!
//! Not modelled: capacity asymmetry (`select_idle_capacity`, `asym_fits_cpu`), core scheduling
//! cookies, per-CPU kernel threads, cpuidle exit latencies (an idle CPU's depth is unknown, so the
//! most recently idled one wins, as without a cpuidle driver), clusters (no machine preset has
//! them), SIS_PROP (off in 6.6), NUMA preferred nodes (no NUMA balancing).

use super::lb66::{adjust_numa_imbalance, group_classify, GroupType, SgStats};
use super::load_avg::CPU_CAPACITY;
use super::Cfs;
use crate::domains::{
    Group, SD_ASYM_CPUCAPACITY, SD_BALANCE_FORK, SD_NUMA, SD_SHARE_PKG_RESOURCES, SD_WAKE_AFFINE,
};
use schedlab_core::{CpuId, CpuSet, Ctx, Level, TaskId};

/// Why a task is placed (`select_task_rq_fair`'s `sd_flag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// A new task (`WF_FORK`).
    Fork,
    /// A task calling `execve()` (`WF_EXEC`, from `sched_exec`).
    Exec,
    /// A woken task (`WF_TTWU`).
    Wake,
}

/// `wakee_flips`, `last_wakee` and `wakee_flip_decay_ts` of one task (or one CPU's idle task).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wakee {
    flips: u32,
    last_wakee: Option<TaskId>,
    decay_ts_j: u64,
}

/// The 6.6 state the 2.6.38 model has no use for.
#[derive(Clone, Debug, Default)]
pub(crate) struct State66 {
    /// `sg->sgc->imbalance`, by `level x ncpus + first CPU of the group`.
    pub sgc_imbalance: Vec<bool>,
    /// `sd_llc_shared->nr_idle_scan`, by the LLC's first CPU.
    pub nr_idle_scan: Vec<u64>,
    /// `sd_llc_shared->has_idle_cores`, by the LLC's first CPU.
    pub has_idle_cores: Vec<bool>,
    /// `rd->overload`: some CPU had more than one task at the last look.
    pub rd_overload: bool,
    /// `sched_smt_active()`.
    pub smt_active: bool,
    /// `p->recent_used_cpu`.
    pub recent_used_cpu: Vec<Option<CpuId>>,
    /// Each task's wakee record.
    pub wakee: Vec<Wakee>,
    /// Each CPU's idle task's wakee record (the `current` of a wakeup with no waking task).
    pub idle_wakee: Vec<Wakee>,
    /// Each CPU's `sched_rnd_state` (NI_RANDOM's die).
    pub rng: Vec<crate::prandom::RndState>,
}

impl State66 {
    /// Sized for `ncpus` CPUs and `ndomains` domain levels.
    pub(crate) fn new(ncpus: usize, ndomains: usize, smt_active: bool) -> State66 {
        State66 {
            sgc_imbalance: vec![false; ncpus * ndomains.max(1)],
            nr_idle_scan: vec![0; ncpus],
            has_idle_cores: vec![false; ncpus],
            rd_overload: false,
            smt_active,
            recent_used_cpu: Vec::new(),
            wakee: Vec::new(),
            idle_wakee: vec![Wakee::default(); ncpus],
            rng: Vec::new(),
        }
    }

    /// Grows the per-task tables to hold `t`.
    pub(super) fn reserve(&mut self, t: TaskId) {
        if self.wakee.len() <= t.idx() {
            self.wakee.resize(t.idx() + 1, Wakee::default());
            self.recent_used_cpu.resize(t.idx() + 1, None);
        }
    }
}

/// Who runs the wakeup (`current`).
#[derive(Clone, Copy)]
pub(crate) enum Current {
    Task(TaskId),
    Idle(CpuId),
}

impl Cfs {
    /// The wakee record of `c`.
    fn wakee_mut(&mut self, c: Current) -> &mut Wakee {
        match c {
            Current::Task(t) => {
                self.v66.reserve(t);
                &mut self.v66.wakee[t.idx()]
            }
            Current::Idle(cpu) => &mut self.v66.idle_wakee[cpu.idx()],
        }
    }

    /// `record_wakee`: the waker's flips halve once a second, and count a change of wakee.
    pub(crate) fn record_wakee(&mut self, current: Current, p: TaskId, jiffies: u64, hz: u64) {
        let w = self.wakee_mut(current);
        if jiffies > w.decay_ts_j + hz {
            w.flips >>= 1;
            w.decay_ts_j = jiffies;
        }
        if w.last_wakee != Some(p) {
            w.last_wakee = Some(p);
            w.flips += 1;
        }
    }

    /// `wake_wide`: both waker and wakee switch partners often (at least the LLC size, and one
    /// that many times more than the other): spread instead of pulling the wakee close.
    pub(crate) fn wake_wide(&mut self, current: Current, p: TaskId, llc_size: u32) -> bool {
        let mut master = self.wakee_mut(current).flips;
        let mut slave = self.wakee_mut(Current::Task(p)).flips;
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        !(slave < llc_size || master < slave * llc_size)
    }

    /// `sd_llc` of `cpu`: its widest domain sharing package resources (level index).
    pub(crate) fn sd_llc(&self, cpu: CpuId) -> Option<usize> {
        self.cpus[cpu.idx()].domains.iter().rposition(|d| d.p.flags & SD_SHARE_PKG_RESOURCES != 0)
    }

    /// `sd_llc_size` of `cpu`.
    pub(super) fn llc_size(&self, cpu: CpuId) -> u32 {
        self.sd_llc(cpu).map_or(1, |l| self.cpus[cpu.idx()].domains[l].span_weight() as u32)
    }

    /// The index of `cpu`'s `sd_llc_shared` (the first CPU of its LLC domain).
    pub(crate) fn llc_id(&self, cpu: CpuId) -> Option<usize> {
        self.sd_llc(cpu).and_then(|l| self.cpus[cpu.idx()].domains[l].span.first()).map(|c| c.idx())
    }

    /// `cpus_share_cache`.
    pub(super) fn cpus_share_cache(&self, a: CpuId, b: CpuId) -> bool {
        a == b || self.sd_llc(a).is_some_and(|l| self.cpus[a.idx()].domains[l].span.contains(b))
    }

    /// `wake_affine_idle`: an idle waker's CPU sharing the cache with the previous one (the
    /// previous one if that is idle too), a sync wakeup from a CPU running only the waker, or an idle
    /// previous CPU; `None` otherwise.
    pub(crate) fn wake_affine_idle(
        &self,
        ctx: &Ctx,
        this_cpu: CpuId,
        prev_cpu: CpuId,
        sync: bool,
    ) -> Option<CpuId> {
        if ctx.is_idle(this_cpu) && self.cpus_share_cache(this_cpu, prev_cpu) {
            return Some(if ctx.is_idle(prev_cpu) { prev_cpu } else { this_cpu });
        }
        if sync && ctx.cpu(this_cpu).nr_running == 1 {
            return Some(this_cpu);
        }
        ctx.is_idle(prev_cpu).then_some(prev_cpu)
    }

    /// `task_h_load(p)` as `wake_affine_weight` reads it for a waking task: the load average stored
    /// at its last update (not decayed over the sleep), through its previous CPU's load.
    fn wakee_h_load(&self, ctx: &Ctx, p: TaskId, prev_cpu: CpuId) -> u64 {
        let load = self.pelt_task.get(p.idx()).map_or(0, |a| a.load_avg);
        let cpu_load = self.pelt_cpu_load(prev_cpu, ctx.now);
        load * cpu_load / (cpu_load + 1)
    }

    /// `wake_affine_weight` (WA_WEIGHT, WA_BIAS): the waker's CPU if its load with the wakee (less
    /// the waker on a sync wakeup) is below the previous CPU's without it, the previous CPU's load
    /// weighted by half the domain's imbalance margin.
    #[allow(clippy::too_many_arguments)]
    fn wake_affine_weight(
        &mut self,
        ctx: &Ctx,
        level: usize,
        p: TaskId,
        this_cpu: CpuId,
        prev_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> Option<CpuId> {
        let mut this_eff_load = self.pelt_cpu_load(this_cpu, ctx.now) as i64;
        if sync {
            if let Some(w) = waker {
                let current_load = self.task_h_load_66(ctx, w, this_cpu) as i64;
                if current_load > this_eff_load {
                    return Some(this_cpu);
                }
                this_eff_load -= current_load;
            }
        }
        let task_load = self.wakee_h_load(ctx, p, prev_cpu) as i64;
        this_eff_load += task_load;
        this_eff_load *= 100;
        this_eff_load *= CPU_CAPACITY as i64;
        let pct = self.cpus[this_cpu.idx()].domains[level].p.imbalance_pct as i64;
        let mut prev_eff_load = self.pelt_cpu_load(prev_cpu, ctx.now) as i64;
        prev_eff_load -= task_load;
        prev_eff_load *= 100 + (pct - 100) / 2;
        prev_eff_load *= CPU_CAPACITY as i64;
        if sync {
            prev_eff_load += 1;
        }
        (this_eff_load < prev_eff_load).then_some(this_cpu)
    }

    /// `wake_affine` (6.6): the waker's CPU or the previous one.
    #[allow(clippy::too_many_arguments)]
    fn wake_affine_66(
        &mut self,
        ctx: &Ctx,
        level: usize,
        p: TaskId,
        this_cpu: CpuId,
        prev_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> CpuId {
        let mut target = self.wake_affine_idle(ctx, this_cpu, prev_cpu, sync);
        if target.is_none() {
            target = self.wake_affine_weight(ctx, level, p, this_cpu, prev_cpu, waker, sync);
        }
        if target != Some(this_cpu) {
            return prev_cpu;
        }
        self.nr_wake_affine += 1;
        this_cpu
    }

    /// `rq->idle_stamp` as `find_idlest_group_cpu` compares it: when the CPU last went idle
    /// through the scheduler (a CPU idle since the start of the run counts from then).
    fn idle_stamp(&self, ctx: &Ctx, cpu: CpuId) -> u64 {
        match self.cpus[cpu.idx()].idle_stamp {
            0 => ctx.cpu(cpu).idle_since_ns + 1,
            s => s,
        }
    }

    /// `find_idlest_group_cpu`: the allowed idle CPU of `group` that went idle last, else the least
    /// loaded allowed CPU (`this_cpu` when none is lighter than all).
    pub(super) fn find_idlest_group_cpu(
        &mut self,
        ctx: &Ctx,
        g: &Group,
        p: TaskId,
        this_cpu: CpuId,
    ) -> CpuId {
        if g.members.len() == 1 {
            return g.first;
        }
        let allowed = ctx.task(p).allowed;
        let (mut min_load, mut least_loaded, mut latest_idle, mut shallowest) = (u64::MAX, this_cpu, 0, None);
        for &i in g.members.iter().filter(|&&i| allowed.contains(i)) {
            self.nr_examined += 1;
            if self.sched_idle_cpu(ctx, i) {
                return i;
            }
            if ctx.is_idle(i) {
                let stamp = self.idle_stamp(ctx, i);
                if stamp > latest_idle {
                    latest_idle = stamp;
                    shallowest = Some(i);
                }
            } else if shallowest.is_none() {
                let load = self.pelt_cpu_load(i, ctx.now);
                if load < min_load {
                    min_load = load;
                    least_loaded = i;
                }
            }
        }
        shallowest.unwrap_or(least_loaded)
    }

    /// `find_idlest_cpu` from domain `level` of `cpu` down, through the domains with `sd_flag`
    /// (SD_BALANCE_FORK or SD_BALANCE_EXEC). Simplified: for an exec the kernel first brings the
    /// task's load average up to date (`sync_entity_load_avg`); the model's is as of its last update.
    fn find_idlest_cpu_66(
        &mut self,
        ctx: &Ctx,
        level: usize,
        p: TaskId,
        mut cpu: CpuId,
        prev_cpu: CpuId,
        sd_flag: u32,
    ) -> CpuId {
        let allowed = ctx.task(p).allowed;
        if !self.cpus[cpu.idx()].domains[level].span.intersects(&allowed) {
            return prev_cpu;
        }
        let mut new_cpu = cpu;
        let mut sd = Some(level);
        while let Some(l) = sd {
            if self.cpus[cpu.idx()].domains[l].p.flags & sd_flag == 0 {
                sd = l.checked_sub(1);
                continue;
            }
            let Some(gi) = self.find_idlest_group_66(ctx, l, p, cpu) else {
                sd = l.checked_sub(1);
                continue;
            };
            let g = self.cpus[cpu.idx()].domains[l].groups[gi].clone();
            new_cpu = self.find_idlest_group_cpu(ctx, &g, p, cpu);
            if new_cpu == cpu {
                sd = l.checked_sub(1);
                continue;
            }
            let weight = self.cpus[cpu.idx()].domains[l].span_weight();
            cpu = new_cpu;
            sd = None;
            for (i, tmp) in self.cpus[cpu.idx()].domains.iter().enumerate() {
                if weight <= tmp.span_weight() {
                    break;
                }
                if tmp.p.flags & sd_flag != 0 {
                    sd = Some(i);
                }
            }
        }
        new_cpu
    }

    /// `__update_idle_core`: when `cpu` goes idle and all its SMT siblings are idle, its LLC has an
    /// idle core.
    pub(crate) fn update_idle_core(&mut self, ctx: &Ctx, cpu: CpuId) {
        if !self.v66.smt_active {
            return;
        }
        let Some(id) = self.llc_id(cpu) else { return };
        if self.v66.has_idle_cores[id] {
            return;
        }
        if ctx.topo.span(Level::Smt, cpu).iter().filter(|&c| c != cpu).all(|c| ctx.is_idle(c)) {
            self.v66.has_idle_cores[id] = true;
        }
    }

    /// `select_idle_core`: `core` if all its threads are idle; otherwise notes its first idle allowed
    /// thread in `idle_cpu` and takes the core's threads out of `cpus`.
    fn select_idle_core(
        &self,
        ctx: &Ctx,
        core: CpuId,
        cpus: &mut CpuSet,
        idle_cpu: &mut Option<CpuId>,
    ) -> Option<CpuId> {
        let smt = ctx.topo.span(Level::Smt, core);
        let mut idle = true;
        for cpu in smt.iter() {
            if !ctx.is_idle(cpu) {
                idle = false;
                if idle_cpu.is_none() {
                    if self.sched_idle_cpu(ctx, cpu) && cpus.contains(cpu) {
                        *idle_cpu = Some(cpu);
                        break;
                    }
                    continue;
                }
                break;
            }
            if idle_cpu.is_none() && cpus.contains(cpu) {
                *idle_cpu = Some(cpu);
            }
        }
        if idle {
            return Some(core);
        }
        for c in smt.iter() {
            cpus.remove(c);
        }
        None
    }

    /// `select_idle_smt`: an idle allowed SMT sibling of `target` within domain `level`'s span.
    fn select_idle_smt(&self, ctx: &Ctx, p: TaskId, span: &CpuSet, target: CpuId) -> Option<CpuId> {
        let allowed = ctx.task(p).allowed;
        ctx.topo
            .span(Level::Smt, target)
            .iter()
            .filter(|&c| c != target && allowed.contains(c) && span.contains(c))
            .find(|&c| ctx.is_idle(c) || self.sched_idle_cpu(ctx, c))
    }

    /// `select_idle_cpu` (SIS_UTIL): scans the LLC from `target + 1`, wrapping, for an idle core
    /// (when the LLC has one) or for an idle CPU among at most `nr_idle_scan` CPUs.
    pub(super) fn select_idle_cpu(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        span: &CpuSet,
        has_idle_core: bool,
        target: CpuId,
    ) -> Option<CpuId> {
        let mut cpus = span.and(&ctx.task(p).allowed);
        let mut nr = u64::MAX;
        let llc = self.llc_id(target);
        if let Some(id) = llc {
            nr = self.v66.nr_idle_scan[id] + 1;
            if nr == 1 {
                return None;
            }
        }
        let n = self.ncpus as u32;
        let mut idle_cpu = None;
        for k in 1..=n {
            let cpu = CpuId((target.0 + k) % n);
            if !cpus.contains(cpu) {
                continue;
            }
            self.nr_examined += 1;
            if has_idle_core {
                if let Some(i) = self.select_idle_core(ctx, cpu, &mut cpus, &mut idle_cpu) {
                    return Some(i);
                }
            } else {
                nr -= 1;
                if nr == 0 {
                    return None;
                }
                if ctx.is_idle(cpu) || self.sched_idle_cpu(ctx, cpu) {
                    idle_cpu = Some(cpu);
                    break;
                }
            }
        }
        if has_idle_core {
            if let Some(id) = llc {
                self.v66.has_idle_cores[id] = false;
            }
        }
        idle_cpu
    }

    /// `select_idle_sibling` (6.6): an idle CPU near `target` sharing its cache, else `target`.
    pub(super) fn select_idle_sibling_66(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        prev: CpuId,
        target: CpuId,
    ) -> CpuId {
        // On an asymmetric machine the task must also fit the CPU (its estimated utilisation).
        let task_util = if self.asym { self.task_util_est(p, ctx.now) } else { 0 };
        // available_idle_cpu || sched_idle_cpu: a CPU running only SCHED_IDLE tasks counts as idle.
        let idle = |c: CpuId| ctx.is_idle(c) || self.sched_idle_cpu(ctx, c);
        if idle(target) && self.asym_fits_cpu(task_util, target) {
            return target;
        }
        if prev != target
            && self.cpus_share_cache(prev, target)
            && idle(prev)
            && self.asym_fits_cpu(task_util, prev)
        {
            return prev;
        }
        self.v66.reserve(p);
        let recent = self.v66.recent_used_cpu[p.idx()];
        self.v66.recent_used_cpu[p.idx()] = Some(prev);
        if let Some(r) = recent {
            if r != prev
                && r != target
                && self.cpus_share_cache(r, target)
                && (ctx.is_idle(r) || self.sched_idle_cpu(ctx, r))
                && ctx.task(p).allowed.contains(r)
                && self.asym_fits_cpu(task_util, r)
            {
                return r;
            }
        }
        // On an asymmetric machine the search spans sd_asym_cpucapacity, not the LLC.
        if self.asym {
            if let Some(level) = self.asym_full_level(target) {
                return self.select_idle_capacity(ctx, p, level, target).unwrap_or(target);
            }
        }
        let Some(llc) = self.sd_llc(target) else { return target };
        let span = self.cpus[target.idx()].domains[llc].span;
        let mut has_idle_core = false;
        if self.v66.smt_active {
            has_idle_core = self.llc_id(target).is_some_and(|id| self.v66.has_idle_cores[id]);
            if !has_idle_core && self.cpus_share_cache(prev, target) {
                if let Some(i) = self.select_idle_smt(ctx, p, &span, prev) {
                    return i;
                }
            }
        }
        self.select_idle_cpu(ctx, p, &span, has_idle_core, target).unwrap_or(target)
    }

    /// `update_sg_wakeup_stats`: group `g` as it would be without `p`.
    fn update_sg_wakeup_stats(
        &mut self,
        ctx: &Ctx,
        level: usize,
        this_cpu: CpuId,
        g: &Group,
        p: TaskId,
    ) -> SgStats {
        let mut s = SgStats::default();
        let allowed = ctx.task(p).allowed;
        // Assume the task fits no CPU of the group until one is found.
        let asym = self.cpus[this_cpu.idx()].domains[level].p.flags & SD_ASYM_CPUCAPACITY != 0;
        if asym {
            s.group_misfit_task_load = 1;
        }
        for &i in g.members.iter().filter(|&&i| allowed.contains(i)) {
            self.nr_examined += 1;
            if asym && s.group_misfit_task_load != 0 && self.task_fits_cpu(p, i, ctx.now) {
                s.group_misfit_task_load = 0;
            }
            let attached = self.pelt_attached_to(p, i);
            let mut load = self.pelt_cpu_load(i, ctx.now);
            let util = self.cpu_util_without(i, p, attached, ctx.now);
            let mut runnable = self.cpu_runnable(i, ctx.now);
            if attached {
                load = load.saturating_sub(self.task_h_load_66(ctx, p, i));
                runnable = runnable.saturating_sub(self.pelt_task_runnable(p, ctx.now));
            }
            s.group_load += load;
            s.group_util += util;
            s.group_runnable += runnable;
            let local = u64::from(attached && self.ses[self.task_se[p.idx()] as usize].on_rq);
            s.sum_h_nr_running += self.cpu_nr_tasks(i) - local;
            let nr_running =
                (u64::from(ctx.cpu(i).nr_running).max(self.cpu_nr_tasks(i))).saturating_sub(local);
            s.sum_nr_running += nr_running;
            let idle_without = ctx.cpu(i).curr.is_none_or(|c| c == p);
            if nr_running == 0 && idle_without {
                s.idle_cpus += 1;
            }
        }
        self.group_capacities(g, &mut s);
        s.group_weight = g.members.len() as u64;
        let pct = self.cpus[this_cpu.idx()].domains[level].p.imbalance_pct;
        let imbalanced =
            self.v66.sgc_imbalance.get(level * self.ncpus + g.first.idx()).copied().unwrap_or(false);
        s.group_type = group_classify(pct, imbalanced, &s);
        if s.group_type == GroupType::FullyBusy || s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * CPU_CAPACITY / s.group_capacity;
        }
        s
    }

    /// `find_idlest_group` (6.6) in domain `level` of `this_cpu`: the walk index of the group to
    /// place `p` in, or `None` to stay in the local group.
    fn find_idlest_group_66(&mut self, ctx: &Ctx, level: usize, p: TaskId, this_cpu: CpuId) -> Option<usize> {
        let d = &self.cpus[this_cpu.idx()].domains[level];
        let (pct, flags, imb_numa_nr) = (d.p.imbalance_pct, d.p.flags, d.imb_numa_nr);
        let list = d.groups.clone();
        let allowed = ctx.task(p).allowed;
        let mut idlest: Option<(usize, SgStats)> = None;
        let mut local: Option<(usize, SgStats)> = None;
        for (gi, g) in list.iter().enumerate() {
            if !g.allows_any(&allowed) {
                continue;
            }
            let s = self.update_sg_wakeup_stats(ctx, level, this_cpu, g, p);
            if g.cpus.contains(this_cpu) {
                local = Some((gi, s));
                continue;
            }
            let better = match &idlest {
                None => s.group_type < GroupType::Overloaded || s.avg_load < u32::MAX as u64,
                Some((_, best)) => update_pick_idlest(best, &s),
            };
            if better {
                idlest = Some((gi, s));
            }
        }
        let (idlest_gi, idlest_sgs) = idlest?;
        let Some((local_gi, local_sgs)) = local else { return Some(idlest_gi) };
        if local_sgs.group_type < idlest_sgs.group_type {
            return None;
        }
        if local_sgs.group_type > idlest_sgs.group_type {
            return Some(idlest_gi);
        }
        match local_sgs.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => {
                let imbalance = CPU_CAPACITY * (pct - 100) / 100;
                if flags & SD_NUMA != 0 && idlest_sgs.avg_load + imbalance >= local_sgs.avg_load {
                    return None;
                }
                if idlest_sgs.avg_load >= local_sgs.avg_load + imbalance {
                    return None;
                }
                if 100 * local_sgs.avg_load <= pct * idlest_sgs.avg_load {
                    return None;
                }
            }
            GroupType::Imbalanced | GroupType::SmtBalance => return None,
            GroupType::Misfit => {
                // The group with the biggest CPUs.
                if local_sgs.max_capacity >= idlest_sgs.max_capacity {
                    return None;
                }
            }
            GroupType::HasSpare => {
                if flags & SD_NUMA != 0 {
                    // p->nr_cpus_allowed != NR_CPUS holds on every real machine (NR_CPUS is the
                    // build limit), so the allowed CPUs of the local group bound imb_numa_nr.
                    let local_cpus = list[local_gi].cpus.and(&allowed).count() as u64;
                    let imb_numa_nr = local_cpus.min(imb_numa_nr);
                    let imbalance = local_sgs.idle_cpus.abs_diff(idlest_sgs.idle_cpus) as i64;
                    if adjust_numa_imbalance(imbalance, local_sgs.sum_nr_running + 1, imb_numa_nr) == 0 {
                        return None;
                    }
                }
                if local_sgs.idle_cpus >= idlest_sgs.idle_cpus {
                    return None;
                }
            }
        }
        Some(idlest_gi)
    }

    /// `select_task_rq_fair` (6.6) for a new task forked on `this_cpu` (SD_BALANCE_FORK, the slow
    /// path), a task exec'ing on `this_cpu` (SD_BALANCE_EXEC from `sched_exec`, the slow path) or a
    /// task woken from `this_cpu` (the fast path with `wake_affine`).
    pub(crate) fn select_task_rq_fair_66(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        this_cpu: CpuId,
        kind: Placement,
        waker: Option<TaskId>,
        sync: bool,
    ) -> CpuId {
        let task = ctx.task(p);
        let fork = kind == Placement::Fork;
        // A forked child is on its parent's CPU (sched_fork's __set_task_cpu), an exec'ing task on
        // its own.
        let prev_cpu = if kind == Placement::Wake { task.cpu } else { this_cpu };
        let allowed = task.allowed;
        self.v66.reserve(p);
        let mut want_affine = false;
        if fork {
            self.v66.recent_used_cpu[p.idx()] = Some(this_cpu);
        } else if kind == Placement::Wake {
            let current = match waker.or(ctx.cpu(this_cpu).curr) {
                Some(w) => Current::Task(w),
                None => Current::Idle(this_cpu),
            };
            self.record_wakee(current, p, ctx.jiffies(), ctx.hz());
            let llc_size = self.llc_size(this_cpu);
            want_affine =
                self.p.affine_wakeups && !self.wake_wide(current, p, llc_size) && allowed.contains(this_cpu);
        }
        let sd_flag = match kind {
            Placement::Fork => SD_BALANCE_FORK,
            Placement::Exec => crate::domains::SD_BALANCE_EXEC,
            Placement::Wake => crate::domains::SD_BALANCE_WAKE,
        };
        let mut new_cpu = prev_cpu;
        let mut sd = None;
        for level in 0..self.cpus[this_cpu.idx()].domains.len() {
            let tmp = &self.cpus[this_cpu.idx()].domains[level];
            if want_affine && tmp.p.flags & SD_WAKE_AFFINE != 0 && tmp.span.contains(prev_cpu) {
                if this_cpu != prev_cpu {
                    new_cpu = self.wake_affine_66(ctx, level, p, this_cpu, prev_cpu, waker, sync);
                }
                sd = None;
                break;
            }
            if tmp.p.flags & sd_flag != 0 {
                sd = Some(level);
            } else if !want_affine {
                break;
            }
        }
        if let Some(level) = sd {
            new_cpu = self.find_idlest_cpu_66(ctx, level, p, this_cpu, prev_cpu, sd_flag);
        } else if kind == Placement::Wake {
            new_cpu = self.select_idle_sibling_66(ctx, p, prev_cpu, new_cpu);
        }
        if allowed.contains(new_cpu) {
            new_cpu
        } else {
            allowed.first().expect("non-empty affinity")
        }
    }
}

/// `update_pick_idlest`: whether group stats `s` are idler than `idlest`'s.
fn update_pick_idlest(idlest: &SgStats, s: &SgStats) -> bool {
    if s.group_type < idlest.group_type {
        return true;
    }
    if s.group_type > idlest.group_type {
        return false;
    }
    match s.group_type {
        GroupType::Overloaded | GroupType::FullyBusy => idlest.avg_load > s.avg_load,
        GroupType::Imbalanced | GroupType::SmtBalance => false,
        GroupType::Misfit => idlest.max_capacity < s.max_capacity,
        GroupType::HasSpare => {
            if idlest.idle_cpus > s.idle_cpus {
                return false;
            }
            !(idlest.idle_cpus == s.idle_cpus && idlest.group_util <= s.group_util)
        }
    }
}

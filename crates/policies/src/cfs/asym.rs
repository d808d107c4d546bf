//! CPU capacity asymmetry in the EEVDF variant (big.LITTLE, hybrid cores): a machine whose CPUs run
//! at different speeds (`speed_permille`) gives them different capacities
//! ([`schedlab_core::Ctx::capacity_of`], the fastest 1024).
//!
//! Source: Debian's linux-source-6.12 (6.12.117): kernel/sched/topology.c
//! `asym_cpu_capacity_classify` (a domain spanning CPUs of two or more capacities is
//! SD_ASYM_CPUCAPACITY, and SD_ASYM_CPUCAPACITY_FULL when it spans every capacity of the machine;
//! its child loses SD_PREFER_SIBLING), `sd_asym_cpucapacity` (the lowest FULL domain);
//! kernel/sched/fair.c `fits_capacity`, `util_fits_cpu` (uclamp unused), `task_fits_cpu`,
//! `update_misfit_status` (at the tick, at a pick and, cleared, at a newly idle balance),
//! `set_task_max_allowed_capacity`, `asym_fits_cpu` and `select_idle_capacity`. The balancer's
//! side (a group holding a *misfit* task, one too big for its CPU, is `group_misfit_task` and is
//! pulled by a bigger idle CPU with `migrate_misfit`) is in lb66.rs; the wakeup's and fork's in
//! select66.rs. PELT's capacity invariance is in load_avg.rs (`pelt_clock_at`).
//!
//! Not modelled: energy-aware placement (`find_energy_efficient_cpu` needs an energy model and
//! schedutil's performance domains), frequency invariance (the engine's frequency levels are not
//! shown to the policy), uclamp, and capacity lost to RT or IRQ time (`capacity_of` is the
//! CPU's full capacity).

use super::Cfs;
use crate::domains::{SD_ASYM_CPUCAPACITY, SD_ASYM_CPUCAPACITY_FULL, SD_PREFER_SIBLING};
use schedlab_core::{CpuId, Ctx, TaskId};

/// `fits_capacity(cap, max)`: `cap` fits in `max` with a 20 % margin (`cap * 1280 < max * 1024`).
pub(crate) fn fits_capacity(util: u64, capacity: u64) -> bool {
    util * 1280 < capacity * 1024
}

/// `capacity_greater(cap1, cap2)`: `cap1` is more than about 5 % above `cap2`.
pub(crate) fn capacity_greater(cap1: u64, cap2: u64) -> bool {
    cap1 * 1024 > cap2 * 1078
}

impl Cfs {
    /// `asym_cpu_capacity_classify` for every domain of every CPU, then `sd_init`'s "don't
    /// attempt to spread across CPUs of different capacities" and `sched_asym_cpucap_active`.
    pub(crate) fn classify_asym_domains(&mut self) {
        let mut all: Vec<u64> = self.cap.clone();
        all.sort_unstable();
        all.dedup();
        self.asym = false;
        for c in 0..self.cpus.len() {
            for level in 0..self.cpus[c].domains.len() {
                let d = &self.cpus[c].domains[level];
                let mut seen: Vec<u64> = d.span.iter().map(|i| self.cap[i.idx()]).collect();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() < 2 {
                    continue;
                }
                let full = seen.len() == all.len();
                let d = &mut self.cpus[c].domains[level];
                d.p.flags |= SD_ASYM_CPUCAPACITY | if full { SD_ASYM_CPUCAPACITY_FULL } else { 0 };
                self.asym = true;
                if level > 0 {
                    self.cpus[c].domains[level - 1].p.flags &= !SD_PREFER_SIBLING;
                }
            }
        }
    }

    /// The level of `sd_asym_cpucapacity` of `cpu`: its lowest SD_ASYM_CPUCAPACITY_FULL domain.
    pub(crate) fn asym_full_level(&self, cpu: CpuId) -> Option<usize> {
        self.cpus[cpu.idx()].domains.iter().position(|d| d.p.flags & SD_ASYM_CPUCAPACITY_FULL != 0)
    }

    /// `task_fits_cpu(p, cpu)`: the task's estimated utilisation fits the CPU's capacity.
    pub(crate) fn task_fits_cpu(&self, t: TaskId, cpu: CpuId, now: schedlab_core::Ns) -> bool {
        fits_capacity(self.task_util_est(t, now), self.capacity(cpu))
    }

    /// `asym_fits_cpu`: on an asymmetric machine, whether a task of utilisation `util` fits `cpu`;
    /// always true otherwise.
    pub(crate) fn asym_fits_cpu(&self, util: u64, cpu: CpuId) -> bool {
        !self.asym || fits_capacity(util, self.capacity(cpu))
    }

    /// `p->max_allowed_capacity` (`set_task_max_allowed_capacity`): the largest capacity among the
    /// CPUs the task may use.
    fn max_allowed_capacity(&self, ctx: &Ctx, t: TaskId) -> u64 {
        ctx.task(t).allowed.iter().filter_map(|c| self.cap.get(c.idx()).copied()).max().unwrap_or(0)
    }

    /// `update_misfit_status(p, rq)`: `cpu` holds a misfit task when `p` (its running task; `None`
    /// at a newly idle balance) may go to a bigger CPU and does not fit this one; its misfit load
    /// is then the task's load, at least 1.
    pub(crate) fn update_misfit_status(&mut self, ctx: &Ctx, cpu: CpuId, p: Option<TaskId>) {
        if !self.asym {
            return;
        }
        let load = match p {
            Some(t)
                if ctx.task(t).allowed.count() > 1
                    && self.capacity(cpu) != self.max_allowed_capacity(ctx, t)
                    && !self.task_fits_cpu(t, cpu, ctx.now) =>
            {
                self.pelt_task_load(t, ctx.now).max(1)
            }
            _ => 0,
        };
        self.cpus[cpu.idx()].misfit_task_load = load;
    }

    /// `select_idle_capacity(p, sd, target)` over domain `level` of `target`: from `target` on
    /// (wrapping), the first idle allowed CPU the task fits, else the idle one of largest capacity.
    pub(crate) fn select_idle_capacity(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        level: usize,
        target: CpuId,
    ) -> Option<CpuId> {
        let span = self.cpus[target.idx()].domains[level].span;
        let allowed = ctx.task(p).allowed;
        let util = self.task_util_est(p, ctx.now);
        let n = ctx.nr_cpus();
        let (mut best_cap, mut best) = (0, None);
        for k in 0..n {
            let cpu = CpuId(((target.idx() + k) % n) as u32);
            if !span.contains(cpu) || !allowed.contains(cpu) {
                continue;
            }
            self.nr_examined += 1;
            if !(ctx.is_idle(cpu) || self.sched_idle_cpu(ctx, cpu)) {
                continue;
            }
            let cap = self.capacity(cpu);
            if fits_capacity(util, cap) {
                return Some(cpu);
            }
            if cap > best_cap {
                best_cap = cap;
                best = Some(cpu);
            }
        }
        best
    }
}

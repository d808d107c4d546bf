//! Where a new or waking task goes, Linux 2.6.38 kernel/sched_fair.c: `wake_affine` (with the
//! group-aware `effective_load`), `find_idlest_group`, `find_idlest_cpu`, `select_idle_sibling` and
//! `select_task_rq_fair` for SD_BALANCE_FORK, SD_BALANCE_EXEC (`sched_exec`) and wakeups, in the
//! kernel's order.

use super::lb_host::LbHost;
use super::Cfs;
use crate::domains::{
    Group, SCHED_LOAD_SCALE, SD_BALANCE_EXEC, SD_BALANCE_FORK, SD_LOAD_BALANCE, SD_SHARE_PKG_RESOURCES,
    SD_WAKE_AFFINE,
};
use schedlab_core::{CpuId, CpuSet, Ctx, Ns, TaskId};

/// 2.6.38's `find_idlest_cpu`: the least loaded allowed CPU of `group`, `this_cpu` winning ties.
fn least_loaded_cpu<H: LbHost + ?Sized>(
    host: &H,
    group: &Group,
    allowed: &CpuSet,
    this_cpu: CpuId,
    now: Ns,
) -> Option<CpuId> {
    let mut best = None;
    let mut min_load = u64::MAX;
    for &i in group.members.iter().filter(|&&i| allowed.contains(i)) {
        let load = host.weighted_cpuload(i, now);
        if load < min_load || (load == min_load && i == this_cpu) {
            min_load = load;
            best = Some(i);
        }
    }
    best
}

/// 2.6.38's placement over a class's loads; the class supplies task weights and `effective_load`.
pub(crate) trait Select2638: LbHost {
    /// The load `t` adds to a runqueue (its entity's weight, in the unit of the CPU loads).
    fn task_load_weight(&self, t: TaskId) -> i64;
    /// `effective_load(task_group(t), cpu, wl, wg)`: how the root-level load of `cpu` changes when
    /// `wl` is added to `t`'s group's runqueue there and `wg` to the group's weight.
    fn effective_load_of(&self, ctx: &Ctx, t: TaskId, cpu: CpuId, wl: i64, wg: i64) -> i64;
    /// Whether wakeups may be placed on the waker's CPU (`SD_WAKE_AFFINE` used at all).
    fn affine_wakeups(&self) -> bool;
    /// Counts a wakee moved to the waker's CPU's side by `wake_affine`.
    fn note_wake_affine(&mut self);

    /// `wake_affine(sd, p, sync)` (sched_fair.c): whether the wakee may run on the waker's CPU
    /// instead of `prev_cpu`. The loads are `source_load`/`target_load` at the domain's `wake_idx`;
    /// `effective_load` turns a weight added to (or, for a sync wakeup, the waker's weight taken from)
    /// a task group into the change of the CPU's root-level load.
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
            let d = &self.domains(this_cpu)[level];
            (d.p.wake_idx, d.p.imbalance_pct)
        };
        let mut load = self.source_load(prev_cpu, idx, ctx.now) as i64;
        let mut this_load = self.target_load(this_cpu, idx, ctx.now) as i64;
        if sync {
            if let Some(w) = waker {
                let weight = self.task_load_weight(w);
                this_load += self.effective_load_of(ctx, w, this_cpu, -weight, -weight);
                load += self.effective_load_of(ctx, w, prev_cpu, 0, -weight);
            }
        }
        let weight = self.task_load_weight(t);
        let balanced = if this_load > 0 {
            let this_eff_load = 100
                * self.cpu_power(prev_cpu) as i64
                * (this_load + self.effective_load_of(ctx, t, this_cpu, weight, weight));
            let prev_eff_load = (100 + (pct as i64 - 100) / 2)
                * self.cpu_power(this_cpu) as i64
                * (load + self.effective_load_of(ctx, t, prev_cpu, 0, weight));
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
        let d = &self.domains(this_cpu)[level];
        let imbalance = 100 + (d.p.imbalance_pct - 100) / 2;
        let groups = d.groups.clone();
        let (mut idlest, mut min_load, mut this_load) = (None, u64::MAX, 0);
        for (gi, g) in groups.iter().enumerate() {
            if !g.allows_any(&allowed) {
                continue;
            }
            let local = g.cpus.contains(this_cpu);
            let mut avg = 0;
            for &i in g.members.iter() {
                self.add_examined(1);
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
    fn find_idlest_cpu(
        &self,
        _ctx: &Ctx,
        group: &Group,
        allowed: &CpuSet,
        this_cpu: CpuId,
        now: Ns,
    ) -> Option<CpuId> {
        least_loaded_cpu(self, group, allowed, this_cpu, now)
    }

    /// `select_idle_sibling(p, target)` (2.6.38 sched_fair.c): `target` itself if it is the waker's or
    /// the previous CPU and idle; otherwise, in each domain of `target` sharing package resources
    /// (bottom-up), the first idle allowed CPU of its span becomes the target, until a domain spans
    /// both the waker's and the previous CPU. A wider domain may replace the CPU a narrower one found.
    fn select_idle_sibling(&mut self, ctx: &Ctx, t: TaskId, target: CpuId, this_cpu: CpuId) -> CpuId {
        let prev_cpu = ctx.task(t).cpu;
        if target == this_cpu && ctx.is_idle(this_cpu) {
            return this_cpu;
        }
        if target == prev_cpu && ctx.is_idle(prev_cpu) {
            return prev_cpu;
        }
        let allowed = ctx.task(t).allowed;
        let mut found = target;
        for d in self.domains(target) {
            if d.p.flags & SD_SHARE_PKG_RESOURCES == 0 {
                break;
            }
            if let Some(i) = d.span.and(&allowed).iter().find(|&i| ctx.is_idle(i)) {
                found = i;
            }
            if d.span.contains(this_cpu) && d.span.contains(prev_cpu) {
                break;
            }
        }
        found
    }

    /// `select_task_rq_fair` for a new task (`SD_BALANCE_FORK`) from `this_cpu`.
    fn select_fork_cpu(&mut self, ctx: &Ctx, t: TaskId, this_cpu: CpuId) -> CpuId {
        self.select_forkexec_cpu(ctx, t, this_cpu, SD_BALANCE_FORK)
    }

    /// `select_task_rq_fair` from `sched_exec` (`SD_BALANCE_EXEC`) for `t`, running on `this_cpu`
    /// (counted in that CPU's load, as the kernel's current task is).
    fn select_exec_cpu(&mut self, ctx: &Ctx, t: TaskId, this_cpu: CpuId) -> CpuId {
        self.select_forkexec_cpu(ctx, t, this_cpu, SD_BALANCE_EXEC)
    }

    /// `select_task_rq_fair` with `sd_flag` `SD_BALANCE_FORK` or `SD_BALANCE_EXEC`: from the widest
    /// domain with the flag down, the idlest group (at `forkexec_idx`) and its idlest CPU.
    fn select_forkexec_cpu(&mut self, ctx: &Ctx, t: TaskId, this_cpu: CpuId, sd_flag: u32) -> CpuId {
        let allowed = ctx.task(t).allowed;
        let mut cpu = this_cpu;
        let mut new_cpu = cpu;
        let doms = self.domains(cpu);
        let mut sd = doms.iter().rposition(|d| d.p.flags & SD_LOAD_BALANCE != 0 && d.p.flags & sd_flag != 0);
        while let Some(level) = sd {
            let d = &self.domains(cpu)[level];
            if d.p.flags & sd_flag == 0 {
                sd = level.checked_sub(1);
                continue;
            }
            let load_idx = d.p.forkexec_idx;
            let Some(gi) = self.find_idlest_group(ctx, t, cpu, level, load_idx) else {
                sd = level.checked_sub(1);
                continue;
            };
            let groups = self.domains(cpu)[level].groups.clone();
            let cand = self.find_idlest_cpu(ctx, &groups[gi], &allowed, cpu, ctx.now);
            match cand {
                None => sd = level.checked_sub(1),
                Some(c) if c == cpu => sd = level.checked_sub(1),
                Some(c) => {
                    new_cpu = c;
                    let weight = self.domains(cpu)[level].span_weight();
                    cpu = c;
                    sd = None;
                    for (i, tmp) in self.domains(cpu).iter().enumerate() {
                        if weight <= tmp.span_weight() {
                            break;
                        }
                        if tmp.p.flags & sd_flag != 0 {
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

    /// `select_task_rq_fair` for a wakeup (`SD_BALANCE_WAKE`, which no default domain sets: only the
    /// wake-affine path or the previous CPU).
    fn select_wake_cpu(
        &mut self,
        ctx: &Ctx,
        t: TaskId,
        this_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> CpuId {
        let task = ctx.task(t);
        let prev_cpu = task.cpu;
        let want_affine = self.affine_wakeups() && task.allowed.contains(this_cpu);
        let mut affine_sd = None;
        if want_affine {
            affine_sd = self.domains(this_cpu).iter().position(|d| {
                d.p.flags & SD_LOAD_BALANCE != 0
                    && d.p.flags & SD_WAKE_AFFINE != 0
                    && d.span.contains(prev_cpu)
            });
        }
        let target = match affine_sd {
            Some(level) => {
                if this_cpu == prev_cpu || self.wake_affine(ctx, level, t, this_cpu, waker, sync) {
                    if this_cpu != prev_cpu {
                        self.note_wake_affine();
                    }
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
}

impl Select2638 for Cfs {
    fn find_idlest_cpu(
        &self,
        ctx: &Ctx,
        group: &Group,
        allowed: &CpuSet,
        this_cpu: CpuId,
        now: Ns,
    ) -> Option<CpuId> {
        if self.placement49() {
            return Some(self.find_idlest_cpu_49(ctx, &group.members, allowed, this_cpu, now));
        }
        least_loaded_cpu(self, group, allowed, this_cpu, now)
    }

    fn task_load_weight(&self, t: TaskId) -> i64 {
        if self.load49() {
            // 4.9's wake_affine: `weight = p->se.avg.load_avg` (and the waker's).
            return self.l49_task_load(t) as i64;
        }
        self.ses[self.task_se[t.idx()] as usize].weight as i64
    }

    fn effective_load_of(&self, ctx: &Ctx, t: TaskId, cpu: CpuId, wl: i64, wg: i64) -> i64 {
        self.effective_load(Self::group_of(ctx, t), cpu, wl, wg)
    }

    fn affine_wakeups(&self) -> bool {
        self.p.affine_wakeups
    }

    fn note_wake_affine(&mut self) {
        self.nr_wake_affine += 1;
    }
}

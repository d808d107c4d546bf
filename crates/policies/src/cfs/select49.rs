//! Where a waking task goes in Linux 4.9 (kernel/sched/fair.c `select_task_rq_fair`), for CFS with
//! `placement=4.9`: the second stage of a CFS 4.9 port, after [`super::load49`]'s loads, which it
//! reads (so `placement=4.9` brings `load_tracking=4.9` with it).
//!
//! * `record_wakee` and `wake_wide`: a waker that switches wakees often (its `wakee_flips`, halved
//!   once a second) and a wakee that does too, one of them at least `sd_llc_size` times, and the
//!   other that many times more, are a one-to-many pattern: no affine wakeup, the wakee stays near
//!   its previous CPU (seed 002 sec. 2.1: CFS "spreads out the consumer threads");
//! * `wake_cap`: on a machine of CPUs of different capacities, a task too big for the smaller of
//!   the waker's and the previous CPU is not pulled (never on equal CPUs);
//! * `wake_affine` (4.9): the previous CPU's `source_load` against the waker's `target_load`, each
//!   with the wakee's `se.avg.load_avg` added through `effective_load` (and a sync waker's taken out),
//!   the previous side by half the domain's `imbalance_pct` more; 2.6.38's second chance (a waker's
//!   CPU lighter than its average task) is gone;
//! * `select_idle_sibling(p, prev, target)` (4.9): `target` if idle, else the previous CPU if idle
//!   and sharing the cache, else in the target's LLC an idle core (SMT machines with an idle core
//!   noted), an idle CPU (scanned from `target`, wrapping, unless the waker's CPU idles too briefly
//!   for the scan: `avg_idle / 512 < avg_scan_cost`), an idle SMT sibling, else `target`;
//! * `find_idlest_cpu` (fork and exec, 4.9): an idle CPU first, the one that went idle last
//!   (`idle_stamp`), else the least loaded. Every idle CPU is taken to be in the same idle state
//!   (the machine's halt), so the exit-latency comparison of the kernel's `cpuidle` states decides
//!   nothing.
//!
//! The scan's cost in `select_idle_cpu` is the model's cost per examined CPU
//! (`costs.sched_per_task_ns`) where the kernel measures it with `local_clock()`.

use super::select66::Current;
use super::Cfs;
use crate::domains::{SD_BALANCE_WAKE, SD_LOAD_BALANCE, SD_WAKE_AFFINE};
use schedlab_core::{CpuId, Ctx, Level, Ns, TaskId};

/// `capacity_margin` (4.9): 1280, about 20 %.
const CAPACITY_MARGIN: u64 = 1280;

impl Cfs {
    /// Whether wakeup and fork placement follow 4.9.
    #[inline]
    pub(crate) fn placement49(&self) -> bool {
        self.p.placement_49
    }

    /// `sched_smt_present`: some core has more than one thread.
    fn smt_present(ctx: &Ctx) -> bool {
        ctx.topo.cpus().any(|c| ctx.topo.smt_width(c) > 1)
    }

    /// `wake_cap(p, cpu, prev_cpu)`: on CPUs of different capacities (more than an eighth apart), a
    /// task whose utilisation does not fit the smaller of the two with 20 % to spare.
    fn wake_cap_49(&self, t: TaskId, cpu: CpuId, prev_cpu: CpuId) -> bool {
        let max_cap = self.cap.iter().copied().max().unwrap_or(1024);
        let min_cap = self.capacity(cpu).min(self.capacity(prev_cpu));
        if max_cap - min_cap < max_cap >> 3 {
            return false;
        }
        let util = self.l49_task.get(t.idx()).map_or(0, |a| a.util_avg);
        min_cap * 1024 < util * CAPACITY_MARGIN
    }

    /// `wake_affine` (4.9) in domain `level` of `this_cpu`: whether the wakee may run there instead
    /// of `prev_cpu`.
    #[allow(clippy::too_many_arguments)]
    fn wake_affine_49(
        &mut self,
        ctx: &Ctx,
        level: usize,
        p: TaskId,
        this_cpu: CpuId,
        prev_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> bool {
        use super::select::Select2638;
        let (idx, pct) = {
            let d = &self.cpus[this_cpu.idx()].domains[level];
            (d.p.wake_idx, d.p.imbalance_pct as i64)
        };
        let mut load = self.source_load(prev_cpu, idx, ctx.now) as i64;
        let mut this_load = self.target_load(this_cpu, idx, ctx.now) as i64;
        if sync {
            if let Some(w) = waker {
                let weight = self.l49_task_load(w) as i64;
                this_load += self.effective_load_of(ctx, w, this_cpu, -weight, -weight);
                load += self.effective_load_of(ctx, w, prev_cpu, 0, -weight);
            }
        }
        let weight = self.l49_task_load(p) as i64;
        let mut this_eff_load = 100 * self.capacity(prev_cpu) as i64;
        let mut prev_eff_load = (100 + (pct - 100) / 2) * self.capacity(this_cpu) as i64;
        if this_load > 0 {
            this_eff_load *= this_load + self.effective_load_of(ctx, p, this_cpu, weight, weight);
            prev_eff_load *= load + self.effective_load_of(ctx, p, prev_cpu, 0, weight);
        }
        this_eff_load <= prev_eff_load
    }

    /// The CPUs of `span` from `start` on, wrapping (`for_each_cpu_wrap`).
    fn wrap_from(&self, start: CpuId) -> impl Iterator<Item = CpuId> {
        let n = self.ncpus as u32;
        (0..n).map(move |k| CpuId((start.0 + k) % n))
    }

    /// `select_idle_core` (4.9): with an idle core noted in `target`'s LLC, the first core (from
    /// `target`, wrapping) whose threads are all idle; none clears the note.
    fn select_idle_core_49(&mut self, ctx: &Ctx, p: TaskId, level: usize, target: CpuId) -> Option<CpuId> {
        if !Self::smt_present(ctx) {
            return None;
        }
        let id = self.llc_id(target)?;
        if !self.v66.has_idle_cores[id] {
            return None;
        }
        let mut cpus = self.cpus[target.idx()].domains[level].span.and(&ctx.task(p).allowed);
        for core in self.wrap_from(target) {
            if !cpus.contains(core) {
                continue;
            }
            let mut idle = true;
            for c in ctx.topo.span(Level::Smt, core).iter() {
                cpus.remove(c);
                self.nr_examined += 1;
                if !ctx.is_idle(c) {
                    idle = false;
                }
            }
            if idle {
                return Some(core);
            }
        }
        self.v66.has_idle_cores[id] = false;
        None
    }

    /// `select_idle_cpu` (4.9): the first idle allowed CPU of the LLC from `target`, wrapping,
    /// unless the waker's CPU idles on average for less than 512 scans (`avg_idle / 512 <
    /// avg_scan_cost`); each scan's cost moves the LLC's average an eighth of the way.
    fn select_idle_cpu_49(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        level: usize,
        this_cpu: CpuId,
        target: CpuId,
    ) -> Option<CpuId> {
        let this_llc = self.llc_id(this_cpu)?;
        let avg_idle = self.cpus[this_cpu.idx()].avg_idle;
        let avg_cost = self.l49_scan_cost[this_llc];
        if avg_idle / 512 < avg_cost {
            return None;
        }
        let span = self.cpus[target.idx()].domains[level].span;
        let allowed = ctx.task(p).allowed;
        let mut scanned = 0u64;
        let mut found = None;
        for cpu in self.wrap_from(target) {
            if !span.contains(cpu) || !allowed.contains(cpu) {
                continue;
            }
            scanned += 1;
            if ctx.is_idle(cpu) {
                found = Some(cpu);
                break;
            }
        }
        self.nr_examined += scanned;
        let time = scanned * ctx.decision_cost.per_task_ns;
        let cost = &mut self.l49_scan_cost[this_llc];
        *cost = (*cost as i64 + (time as i64 - *cost as i64) / 8) as u64;
        found
    }

    /// `select_idle_sibling(p, prev, target)` (4.9).
    fn select_idle_sibling_49(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        prev: CpuId,
        target: CpuId,
        this_cpu: CpuId,
    ) -> CpuId {
        if ctx.is_idle(target) {
            return target;
        }
        if prev != target && self.cpus_share_cache(prev, target) && ctx.is_idle(prev) {
            return prev;
        }
        let Some(level) = self.sd_llc(target) else { return target };
        if let Some(c) = self.select_idle_core_49(ctx, p, level, target) {
            return c;
        }
        if let Some(c) = self.select_idle_cpu_49(ctx, p, level, this_cpu, target) {
            return c;
        }
        if Self::smt_present(ctx) {
            let allowed = ctx.task(p).allowed;
            if let Some(c) =
                ctx.topo.span(Level::Smt, target).iter().find(|&c| allowed.contains(c) && ctx.is_idle(c))
            {
                return c;
            }
        }
        target
    }

    /// `select_task_rq_fair(p, prev_cpu, SD_BALANCE_WAKE, wake_flags)` (4.9) for a wakeup from
    /// `this_cpu`.
    pub(crate) fn select_task_rq_fair_49(
        &mut self,
        ctx: &Ctx,
        p: TaskId,
        this_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
    ) -> CpuId {
        let task = ctx.task(p);
        let prev_cpu = task.cpu;
        let allowed = task.allowed;
        self.v66.reserve(p);
        let current = match waker.or(ctx.cpu(this_cpu).curr) {
            Some(w) => Current::Task(w),
            None => Current::Idle(this_cpu),
        };
        self.record_wakee(current, p, ctx.jiffies(), ctx.hz());
        let llc_size = self.llc_size(this_cpu);
        let want_affine = self.p.affine_wakeups
            && !self.wake_wide(current, p, llc_size)
            && !self.wake_cap_49(p, this_cpu, prev_cpu)
            && allowed.contains(this_cpu);
        let mut affine_sd = None;
        let mut sd = None;
        for (level, tmp) in self.cpus[this_cpu.idx()].domains.iter().enumerate() {
            if tmp.p.flags & SD_LOAD_BALANCE == 0 {
                break;
            }
            if want_affine && tmp.p.flags & SD_WAKE_AFFINE != 0 && tmp.span.contains(prev_cpu) {
                affine_sd = Some(level);
                break;
            }
            if tmp.p.flags & SD_BALANCE_WAKE != 0 {
                sd = Some(level);
            } else if !want_affine {
                break;
            }
        }
        let mut new_cpu = prev_cpu;
        if let Some(level) = affine_sd {
            sd = None;
            if this_cpu != prev_cpu && self.wake_affine_49(ctx, level, p, this_cpu, prev_cpu, waker, sync) {
                self.nr_wake_affine += 1;
                new_cpu = this_cpu;
            }
        }
        if sd.is_none() {
            new_cpu = self.select_idle_sibling_49(ctx, p, prev_cpu, new_cpu, this_cpu);
        } else {
            // A domain with SD_BALANCE_WAKE (4.9 sets it on none by default): the fork path's
            // search from this CPU.
            use super::select::Select2638;
            new_cpu = self.select_forkexec_cpu(ctx, p, this_cpu, SD_BALANCE_WAKE);
        }
        if allowed.contains(new_cpu) {
            new_cpu
        } else {
            allowed.first().expect("non-empty affinity")
        }
    }

    /// `find_idlest_cpu` (4.9) over `members` of a group: among the allowed ones, the idle CPU that
    /// went idle last (the first idle one on ties), else the least loaded, `this_cpu` winning ties
    /// and standing when no CPU is found.
    pub(crate) fn find_idlest_cpu_49(
        &self,
        ctx: &Ctx,
        members: &[CpuId],
        allowed: &schedlab_core::CpuSet,
        this_cpu: CpuId,
        now: Ns,
    ) -> CpuId {
        let mut shallowest: Option<(CpuId, Ns)> = None;
        let (mut least, mut min_load) = (this_cpu, u64::MAX);
        for &i in members.iter().filter(|&&i| allowed.contains(i)) {
            if ctx.is_idle(i) {
                let stamp = self.cpus[i.idx()].idle_stamp;
                match shallowest {
                    None => shallowest = Some((i, stamp)),
                    Some((_, latest)) if stamp > latest => shallowest = Some((i, stamp)),
                    _ => {}
                }
            } else if shallowest.is_none() {
                let load = self.weighted_cpuload(i, now);
                if load < min_load || (load == min_load && i == this_cpu) {
                    min_load = load;
                    least = i;
                }
            }
        }
        shallowest.map_or(least, |(c, _)| c)
    }
}

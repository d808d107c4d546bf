//! Where the EEVDF variant feeds its PELT signals ([`super::pelt`]): a CPU's signal is brought up to
//! date before its runqueue's weight, task count or running state changes (enqueue, dequeue, pick,
//! put, tick), a task's signal accumulates while it is queued (and its utilisation while it runs),
//! and a task's averages move with it when it is queued on another CPU or exits. The readers are
//! 6.6's `cpu_load`, `cpu_util_cfs`, `cpu_runnable`, `task_h_load` and `task_util`.

use super::pelt::Avg;
use super::Cfs;
use schedlab_core::{CpuId, Ns, TaskId};

/// No CPU: the task's signal is attached nowhere yet (new) or any more (exited).
const DETACHED: u32 = u32::MAX;
/// `SCHED_CAPACITY_SCALE`: the capacity of the fastest CPUs.
pub(crate) const CPU_CAPACITY: u64 = 1024;

impl Cfs {
    /// Grows the task tables to hold `t`.
    fn pelt_reserve(&mut self, t: TaskId) {
        if self.pelt_task.len() <= t.idx() {
            self.pelt_task.resize(t.idx() + 1, Avg::default());
            self.pelt_attached.resize(t.idx() + 1, DETACHED);
        }
    }

    /// `init_entity_runnable_average`: a new task starts with its full weight as load and no
    /// utilisation (`post_init_entity_util_avg` gives it some when it is first queued).
    pub(crate) fn pelt_task_new(&mut self, t: TaskId, now: Ns) {
        self.pelt_reserve(t);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_task[t.idx()] = Avg::starting(now, 0, w);
        self.pelt_attached[t.idx()] = DETACHED;
    }

    /// The inputs of `cpu`'s signal now: the root runqueue's weight, its task count, whether a task
    /// runs.
    fn pelt_cpu_inputs(&self, cpu: CpuId) -> (u64, u64, bool) {
        let root = &self.rqs[self.root(cpu) as usize];
        (root.load, self.cpu_tasks[cpu.idx()], root.curr.is_some())
    }

    /// Whether `t` is the running entity of its runqueue.
    fn pelt_task_running(&self, t: TaskId) -> bool {
        let se = self.task_se[t.idx()];
        self.rqs.get(self.ses[se as usize].cfs_rq as usize).is_some_and(|r| r.curr == Some(se))
    }

    /// `__update_load_avg_se` of task `t`: its signal brought to `now`; a period that ends
    /// recomputes its averages, which clears its estimate's `UTIL_AVG_UNCHANGED`.
    /// The time is the PELT clock of the CPU the task's signal is attached to.
    fn pelt_task_update(&mut self, t: TaskId, now: Ns, load: u64, runnable: u64, running: bool, w: u64) {
        let clock = self.task_pelt_clock(t, now);
        if self.pelt_task[t.idx()].update(clock, load, runnable, running, w) {
            self.util_est_pelt_changed(t);
        }
    }

    /// `rq_clock_pelt` of `cpu` at `now`, without moving it (`update_rq_clock_pelt`): while a task
    /// runs, PELT time passes at the CPU's capacity over 1024, so a task's utilisation on a
    /// half-capacity CPU grows half as fast (capacity invariance); an idle CPU's PELT clock is
    /// the real clock (`_update_idle_rq_clock_pelt`). On a machine of equal CPUs it is the real
    /// clock.
    pub(crate) fn pelt_clock_at(&self, cpu: CpuId, now: Ns) -> Ns {
        let (clock, last) = self.pelt_clock[cpu.idx()];
        if self.rqs[self.root(cpu) as usize].curr.is_none() {
            return now;
        }
        let cap = self.cap.get(cpu.idx()).copied().unwrap_or(CPU_CAPACITY);
        clock + now.saturating_sub(last) * cap / CPU_CAPACITY
    }

    /// The PELT clock that `t`'s signal follows: its CPU's, or the real one while it is attached
    /// nowhere.
    fn task_pelt_clock(&self, t: TaskId, now: Ns) -> Ns {
        match self.pelt_attached.get(t.idx()) {
            Some(&c) if c != DETACHED => self.pelt_clock_at(CpuId(c), now),
            _ => now,
        }
    }

    /// Brings `cpu`'s PELT clock and signal to `now` with the inputs that held since its last
    /// update.
    pub(crate) fn pelt_update_cpu(&mut self, cpu: CpuId, now: Ns) {
        let clock = self.pelt_clock_at(cpu, now);
        self.pelt_clock[cpu.idx()] = (clock, now);
        let (w, n, running) = self.pelt_cpu_inputs(cpu);
        self.pelt_cpu[cpu.idx()].update(clock, w, n, running, 1);
    }

    /// Before `t` starts or stops running on `cpu` (`set_next_entity` / `put_prev_entity` call
    /// `update_load_avg`): both signals accumulate the time up to now in the old state.
    pub(crate) fn pelt_before_switch(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_update_cpu(cpu, now);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        let running = self.pelt_task_running(t);
        self.pelt_task_update(t, now, 1, 1, running, w);
    }

    /// Before `t` is queued on `cpu`: the task's signal decays over its sleep and is attached to
    /// `cpu`, detached first from the CPU it last ran on if that differs (`migrate_task_rq_fair`). A
    /// new task gets its first utilisation from the CPU's (`post_init_entity_util_avg`).
    pub(crate) fn pelt_before_enqueue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_reserve(t);
        self.pelt_update_cpu(cpu, now);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        let old = self.pelt_attached[t.idx()];
        if old == cpu.0 {
            self.pelt_task_update(t, now, 0, 0, false, w);
            return;
        }
        if old != DETACHED {
            let old = CpuId(old);
            self.pelt_update_cpu(old, now);
            self.pelt_task_update(t, now, 0, 0, false, w);
            let task = self.pelt_task[t.idx()];
            self.pelt_cpu[old.idx()].detach(&task, w);
        } else if self.pelt_task[t.idx()].load_sum == 0 && self.pelt_task[t.idx()].util_avg == 0 {
            self.post_init_entity_util_avg(cpu, t, w);
        }
        let mut task = self.pelt_task[t.idx()];
        self.pelt_cpu[cpu.idx()].attach(&mut task, w);
        self.pelt_task[t.idx()] = task;
        self.pelt_attached[t.idx()] = cpu.0;
    }

    /// `post_init_entity_util_avg`: half the CPU's spare capacity, or less in proportion to the
    /// task's weight in the CPU's load; the runnable average starts equal.
    fn post_init_entity_util_avg(&mut self, cpu: CpuId, t: TaskId, weight: u64) {
        let rq = &self.pelt_cpu[cpu.idx()];
        let cpu_scale = self.cap.get(cpu.idx()).copied().unwrap_or(CPU_CAPACITY);
        let cap = (cpu_scale as i64 - rq.util_avg as i64) / 2;
        let task = &mut self.pelt_task[t.idx()];
        if cap > 0 {
            task.util_avg = if rq.util_avg != 0 {
                (rq.util_avg * weight / (rq.load_avg + 1)).min(cap as u64)
            } else {
                cap as u64
            };
        }
        task.runnable_avg = task.util_avg;
    }

    /// Before `t` leaves `cpu`'s runqueue: both signals accumulate the time it was queued.
    pub(crate) fn pelt_before_dequeue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_update_cpu(cpu, now);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        let running = self.pelt_task_running(t);
        self.pelt_task_update(t, now, 1, 1, running, w);
    }

    /// `reweight_entity`'s load averages: `t`'s signal, brought to now (queued or sleeping as
    /// `queued` says) at its old weight, is re-weighted on the CPU it is attached to (only its own
    /// average, when attached nowhere).
    pub(crate) fn pelt_reweight(&mut self, t: TaskId, queued: bool, old_weight: u64, weight: u64, now: Ns) {
        self.pelt_reserve(t);
        let attached = self.pelt_attached[t.idx()];
        let load = u64::from(queued);
        let running = queued && self.pelt_task_running(t);
        if attached != DETACHED {
            self.pelt_update_cpu(CpuId(attached), now);
        }
        self.pelt_task_update(t, now, load, load, running, old_weight);
        let mut task = self.pelt_task[t.idx()];
        if attached == DETACHED {
            task.load_avg = weight * task.load_sum / task.divider();
        } else {
            self.pelt_cpu[attached as usize].reweight(&mut task, old_weight, weight);
        }
        self.pelt_task[t.idx()] = task;
    }

    /// `task_dead_fair` -> `remove_entity_load_avg`: an exited task's load leaves its CPU.
    pub(crate) fn pelt_exit(&mut self, t: TaskId, now: Ns) {
        let Some(&old) = self.pelt_attached.get(t.idx()) else { return };
        if old == DETACHED {
            return;
        }
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_update_cpu(CpuId(old), now);
        self.pelt_task_update(t, now, 0, 0, false, w);
        let task = self.pelt_task[t.idx()];
        self.pelt_cpu[old as usize].detach(&task, w);
        self.pelt_attached[t.idx()] = DETACHED;
    }

    /// `cpu`'s signal brought to `now` (without changing it).
    fn pelt_cpu_now(&self, cpu: CpuId, now: Ns) -> Avg {
        let (w, n, running) = self.pelt_cpu_inputs(cpu);
        self.pelt_cpu[cpu.idx()].peek(self.pelt_clock_at(cpu, now), w, n, running, 1)
    }

    /// `cpu_load(rq)` of 6.6: the CPU's load average at `now`.
    pub(crate) fn pelt_cpu_load(&self, cpu: CpuId, now: Ns) -> u64 {
        self.pelt_cpu_now(cpu, now).load_avg
    }

    /// `cpu_util_cfs(cpu)`: the CPU's utilisation at `now` or, if larger, the estimate of its
    /// queued tasks (UTIL_EST), at most its capacity.
    pub(crate) fn cpu_util_cfs(&self, cpu: CpuId, now: Ns) -> u64 {
        self.pelt_cpu_now(cpu, now).util_avg.max(self.cpu_ue(cpu)).min(self.capacity(cpu))
    }

    /// `cpu_util_cfs_boost(cpu)` (6.5's runnable boosting): as [`Cfs::cpu_util_cfs`] with the
    /// runnable average counted as utilisation when larger.
    pub(crate) fn cpu_util_cfs_boost(&self, cpu: CpuId, now: Ns) -> u64 {
        let avg = self.pelt_cpu_now(cpu, now);
        avg.util_avg.max(avg.runnable_avg).max(self.cpu_ue(cpu)).min(self.capacity(cpu))
    }

    /// `cpu_util_without(cpu, p)`: `cpu`'s utilisation without `p`'s part. `attached`: `p` last
    /// ran there and has a signal (else `p` counts nowhere there); its estimate is taken out only
    /// while it is queued there.
    pub(crate) fn cpu_util_without(&self, cpu: CpuId, p: TaskId, attached: bool, now: Ns) -> u64 {
        let mut util = self.pelt_cpu_now(cpu, now).util_avg;
        let mut ue = self.cpu_ue(cpu);
        if attached {
            util = util.saturating_sub(self.pelt_task_util(p, now));
            if self.ue_counted_on(p, cpu) {
                ue = ue.saturating_sub(self.task_ue(p));
            }
        }
        util.max(ue).min(self.capacity(cpu))
    }

    /// `arch_scale_cpu_capacity(cpu)` (= `capacity_of`: no RT or IRQ pressure is modelled).
    pub(crate) fn capacity(&self, cpu: CpuId) -> u64 {
        self.cap.get(cpu.idx()).copied().unwrap_or(CPU_CAPACITY)
    }

    /// `cpu_runnable(rq)`: the CPU's runnable average at `now`.
    pub(crate) fn cpu_runnable(&self, cpu: CpuId, now: Ns) -> u64 {
        self.pelt_cpu_now(cpu, now).runnable_avg
    }

    /// `t`'s signal brought to `now` in its current state.
    fn pelt_task_now(&self, t: TaskId, now: Ns) -> Avg {
        let se = self.task_se[t.idx()];
        let s = &self.ses[se as usize];
        let on_rq = u64::from(s.on_rq);
        let clock = self.task_pelt_clock(t, now);
        self.pelt_task[t.idx()].peek(clock, on_rq, on_rq, s.on_rq && self.pelt_task_running(t), s.weight)
    }

    /// `task_h_load` for a task of the root group: its load average at `now`.
    pub(crate) fn pelt_task_load(&self, t: TaskId, now: Ns) -> u64 {
        self.pelt_task_now(t, now).load_avg
    }

    /// `task_util(p)` at `now`.
    pub(crate) fn pelt_task_util(&self, t: TaskId, now: Ns) -> u64 {
        self.pelt_task_now(t, now).util_avg
    }

    /// `task_util_est(p)` at `now`: its utilisation or, if larger, its estimate (UTIL_EST).
    pub(crate) fn task_util_est(&self, t: TaskId, now: Ns) -> u64 {
        self.pelt_task_util(t, now).max(self.task_ue(t))
    }

    /// `task_h_load`-style runnable average of `t` at `now` (`p->se.avg.runnable_avg`).
    pub(crate) fn pelt_task_runnable(&self, t: TaskId, now: Ns) -> u64 {
        self.pelt_task_now(t, now).runnable_avg
    }

    /// Whether `t`'s averages are attached to `cpu` (`cpu_of(rq) == task_cpu(p)` with a signal).
    pub(crate) fn pelt_attached_to(&self, t: TaskId, cpu: CpuId) -> bool {
        self.pelt_attached.get(t.idx()) == Some(&cpu.0)
    }
}

impl Cfs {
    /// After `pick_next_task_fair` chose `t`: its signal accumulates the wait up to now (queued, not
    /// running), and it moves to the front of the CPU's `cfs_tasks` list, which 6.6 keeps in
    /// most-recently-run order for the balancer.
    pub(crate) fn pelt_picked(&mut self, t: TaskId, now: Ns) {
        let se = self.task_se[t.idx()];
        let w = self.ses[se as usize].weight;
        self.pelt_task_update(t, now, 1, 1, false, w);
        self.seq += 1;
        self.ses[se as usize].list_seq = self.seq;
    }
}

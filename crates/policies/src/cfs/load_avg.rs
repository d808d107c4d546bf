//! Where the EEVDF variant feeds its PELT signals ([`super::pelt`]): a CPU's signal is brought up to
//! date before its runqueue's weight changes (enqueue, dequeue, tick), a task's signal accumulates
//! while it is queued, and a task's average moves with it when it is queued on another CPU or exits.

use super::pelt::Avg;
use super::Cfs;
use schedlab_core::{CpuId, Ns, TaskId};

/// No CPU: the task's signal is attached nowhere yet (new) or any more (exited).
const DETACHED: u32 = u32::MAX;

impl Cfs {
    /// Grows the task tables to hold `t`.
    fn pelt_reserve(&mut self, t: TaskId) {
        if self.pelt_task.len() <= t.idx() {
            self.pelt_task.resize(t.idx() + 1, Avg::default());
            self.pelt_attached.resize(t.idx() + 1, DETACHED);
        }
    }

    /// `init_entity_runnable_average`: a new task starts with its full weight as load.
    pub(crate) fn pelt_task_new(&mut self, t: TaskId, now: Ns) {
        self.pelt_reserve(t);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_task[t.idx()] = Avg::starting(now, 0, w);
        self.pelt_attached[t.idx()] = DETACHED;
    }

    /// Brings `cpu`'s signal to `now` with the root runqueue's current weight.
    pub(crate) fn pelt_update_cpu(&mut self, cpu: CpuId, now: Ns) {
        let w = self.rqs[self.root(cpu) as usize].load;
        self.pelt_cpu[cpu.idx()].update(now, w, 1);
    }

    /// Before `t` is queued on `cpu`: the task's signal decays over its sleep and is attached to
    /// `cpu`, detached first from the CPU it last ran on if that differs (`migrate_task_rq_fair`).
    pub(crate) fn pelt_before_enqueue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_reserve(t);
        self.pelt_update_cpu(cpu, now);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        let old = self.pelt_attached[t.idx()];
        if old == cpu.0 {
            self.pelt_task[t.idx()].update(now, 0, w);
            return;
        }
        if old != DETACHED {
            self.pelt_task[t.idx()].update(now, 0, w);
            let old = CpuId(old);
            self.pelt_update_cpu(old, now);
            let task = self.pelt_task[t.idx()];
            self.pelt_cpu[old.idx()].detach(&task, w);
        }
        let mut task = self.pelt_task[t.idx()];
        self.pelt_cpu[cpu.idx()].attach(&mut task, w);
        self.pelt_task[t.idx()] = task;
        self.pelt_attached[t.idx()] = cpu.0;
    }

    /// Before `t` leaves `cpu`'s runqueue: both signals accumulate the time it was queued.
    pub(crate) fn pelt_before_dequeue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_update_cpu(cpu, now);
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_task[t.idx()].update(now, 1, w);
    }

    /// `task_dead_fair` -> `remove_entity_load_avg`: an exited task's load leaves its CPU.
    pub(crate) fn pelt_exit(&mut self, t: TaskId, now: Ns) {
        let Some(&old) = self.pelt_attached.get(t.idx()) else { return };
        if old == DETACHED {
            return;
        }
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_task[t.idx()].update(now, 0, w);
        self.pelt_update_cpu(CpuId(old), now);
        let task = self.pelt_task[t.idx()];
        self.pelt_cpu[old as usize].detach(&task, w);
        self.pelt_attached[t.idx()] = DETACHED;
    }

    /// `cpu_load(rq)` of 6.6: the CPU's load average at `now`.
    pub(crate) fn pelt_cpu_load(&self, cpu: CpuId, now: Ns) -> u64 {
        let w = self.rqs[self.root(cpu) as usize].load;
        self.pelt_cpu[cpu.idx()].peek(now, w, 1)
    }

    /// `task_h_load` for a queued task of the root group: its load average at `now`.
    pub(crate) fn pelt_task_load(&self, t: TaskId, now: Ns) -> u64 {
        let w = self.ses[self.task_se[t.idx()] as usize].weight;
        self.pelt_task[t.idx()].peek(now, 1, w)
    }
}

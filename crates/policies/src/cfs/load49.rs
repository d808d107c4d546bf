//! Where CFS with `load_tracking=4.9` keeps Linux 4.9's per-entity load tracking ([`super::pelt49`])
//! and what reads it: the first stage of a CFS 4.9 port (seed 002 measured CFS in Linux 4.9, whose
//! balancer "evens out the average amount of pending work" by these loads where 2.6.38 evened out
//! runqueue weights).
//!
//! The signals move at the kernel's points (kernel/sched/fair.c of 4.9):
//!
//! * `enqueue_entity`: `update_load_avg` (the runqueue's signal up to now at its old weight; a
//!   task that was not migrated ages over its sleep at weight 0), then `enqueue_entity_load_avg`
//!   (the task's sums join the runqueue's runnable sums; a migrated or new task is attached first);
//! * `dequeue_entity`: `update_load_avg` (the task accrues its weight, and utilisation if it ran),
//!   then `dequeue_entity_load_avg` (its sums leave the runnable ones; its blocked load stays in the
//!   runqueue's whole signal and decays there);
//! * `put_prev_entity`, `set_next_entity` and `entity_tick` call `update_load_avg` on the entity;
//! * a new task starts fully loaded (`init_entity_runnable_average`) and is attached to the CPU it
//!   is first queued on, with a first utilisation from that CPU's (`post_init_entity_util_avg`);
//! * a task queued on another CPU than the one it last ran on (a wakeup placed elsewhere, a balancer
//!   move) is first synchronised to that CPU's last update and removed from it
//!   (`migrate_task_rq_fair` -> `remove_entity_load_avg`), then attached to the new one without
//!   ageing (its `last_update_time` was cleared); an exiting task is removed likewise
//!   (`task_dead_fair`).
//!
//! The readers: `weighted_cpuload` is the root runqueue's `runnable_load_avg`, which also feeds
//! `cpu_load[]` at each tick (after `task_tick`, 4.9's order in `scheduler_tick`); a task's load in
//! `wake_affine` is its `se.avg.load_avg`; a task the balancer moves weighs its `task_h_load`, its
//! load average times the root's `h_load` (the runqueue's whole `avg.load_avg`) over that plus one.
//!
//! Simplified, and said in docs/policies/cfs.md: the removed load of a migrated or exited task
//! leaves the old CPU's whole signal at once, where the kernel subtracts it at that runqueue's next
//! update (no reader of this stage looks at the old CPU's whole signal in between but
//! `task_h_load`'s ratio); a task in a task group attaches its own signal to its CPU's root signal,
//! where 4.9 propagates the group entity's (`update_tg_cfs_load`), and the group levels below the
//! root keep 2.6.38's weight ratios and shares; placement (`select_idle_sibling`, `wake_wide`,
//! `find_idlest_group`), group classification and `calculate_imbalance` stay 2.6.38's.

use super::pelt49::Avg49;
use super::Cfs;
use schedlab_core::{CpuId, Ns, TaskId};

/// No CPU: the task's signal is attached nowhere (migrated, or exited): the kernel's cleared
/// `last_update_time`.
const DETACHED: u32 = u32::MAX;
/// A new task's signal, attached nowhere yet (it gets `post_init_entity_util_avg` when queued).
const NEW: u32 = u32::MAX - 1;
/// `SCHED_CAPACITY_SCALE`.
const CAPACITY_SCALE: u64 = 1024;

impl Cfs {
    /// Whether the balancer and placement read 4.9's load tracking.
    #[inline]
    pub(crate) fn load49(&self) -> bool {
        self.p.load_tracking_49 || self.p.placement_49
    }

    fn l49_reserve(&mut self, t: TaskId) {
        if self.l49_task.len() <= t.idx() {
            self.l49_task.resize(t.idx() + 1, Avg49::default());
            self.l49_attached.resize(t.idx() + 1, NEW);
        }
    }

    fn l49_weight(&self, t: TaskId) -> u64 {
        self.ses[self.task_se[t.idx()] as usize].weight
    }

    /// Whether `t` is the running entity of its runqueue (`cfs_rq->curr == se`).
    fn l49_running(&self, t: TaskId) -> bool {
        let se = self.task_se[t.idx()];
        self.rqs.get(self.ses[se as usize].cfs_rq as usize).is_some_and(|r| r.curr == Some(se))
    }

    /// `init_entity_runnable_average` for a new task.
    pub(crate) fn l49_task_new(&mut self, t: TaskId) {
        self.l49_reserve(t);
        self.l49_task[t.idx()] = Avg49::new_task(self.l49_weight(t));
        self.l49_attached[t.idx()] = NEW;
    }

    /// `update_cfs_rq_load_avg` of `cpu`'s root runqueue: its weight and whether a task ran, since
    /// its last update, accrue to its whole and runnable signals.
    pub(crate) fn l49_update_cpu(&mut self, cpu: CpuId, now: Ns) {
        let root = &self.rqs[self.root(cpu) as usize];
        let (w, running) = (root.load, root.curr.is_some());
        self.l49_cpu[cpu.idx()].update(now, w, running, true);
    }

    /// `update_load_avg(se)`: the task's signal (if attached: a `last_update_time` that is not 0)
    /// and its CPU's, to now.
    fn l49_update_load_avg(&mut self, cpu: CpuId, t: TaskId, now: Ns, queued: bool) {
        if self.l49_attached[t.idx()] == cpu.0 {
            let w = if queued { self.l49_weight(t) } else { 0 };
            let running = queued && self.l49_running(t);
            self.l49_task[t.idx()].update(now, w, running, false);
        }
        self.l49_update_cpu(cpu, now);
    }

    /// `remove_entity_load_avg`: `t` is synchronised to its CPU's last update
    /// (`sync_entity_load_avg`, at weight 0) and its sums leave that CPU's whole signal; its
    /// `last_update_time` is cleared, as `migrate_task_rq_fair` does.
    fn l49_remove(&mut self, t: TaskId) {
        let old = self.l49_attached[t.idx()];
        if old == DETACHED || old == NEW {
            return;
        }
        let last = self.l49_cpu[old as usize].last_update_ns;
        let task = &mut self.l49_task[t.idx()];
        task.update(last, 0, false, false);
        let task = *task;
        self.l49_cpu[old as usize].detach(&task);
        self.l49_task[t.idx()].last_update_ns = 0;
        self.l49_attached[t.idx()] = DETACHED;
    }

    /// `post_init_entity_util_avg` (4.9): half the CPU's spare capacity as the new task's
    /// utilisation, or less in proportion to its weight in the CPU's load. (No reader of this
    /// stage looks at utilisation; the later stages' group classification will.)
    fn l49_post_init(&mut self, cpu: CpuId, t: TaskId) {
        let rq = self.l49_cpu[cpu.idx()];
        let weight = self.l49_weight(t);
        let cap = (CAPACITY_SCALE as i64 - rq.util_avg as i64) / 2;
        if cap > 0 {
            let util = if rq.util_avg != 0 {
                (rq.util_avg * weight / (rq.load_avg + 1)).min(cap as u64)
            } else {
                cap as u64
            };
            let task = &mut self.l49_task[t.idx()];
            task.util_avg = util;
            task.util_sum = util * super::pelt::LOAD_AVG_MAX;
        }
    }

    /// Before `t` is queued on `cpu` (`enqueue_entity`'s `update_load_avg` and
    /// `enqueue_entity_load_avg`).
    pub(crate) fn l49_before_enqueue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.l49_reserve(t);
        if self.l49_attached[t.idx()] != cpu.0 {
            self.l49_remove(t);
        }
        let state = self.l49_attached[t.idx()];
        self.l49_update_load_avg(cpu, t, now, false);
        if state == NEW || state == DETACHED {
            if state == NEW {
                // wake_up_new_task's post_init_entity_util_avg.
                self.l49_post_init(cpu, t);
            }
            let mut task = self.l49_task[t.idx()];
            self.l49_cpu[cpu.idx()].attach(&mut task);
            self.l49_task[t.idx()] = task;
            self.l49_attached[t.idx()] = cpu.0;
        }
        let task = self.l49_task[t.idx()];
        self.l49_cpu[cpu.idx()].enqueue(&task);
    }

    /// Before `t` leaves `cpu`'s runqueue (`dequeue_entity`'s `update_load_avg` and
    /// `dequeue_entity_load_avg`).
    pub(crate) fn l49_before_dequeue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.l49_reserve(t);
        self.l49_update_load_avg(cpu, t, now, true);
        let task = self.l49_task[t.idx()];
        self.l49_cpu[cpu.idx()].dequeue(&task);
    }

    /// `update_load_avg` of a queued task and its CPU: before it is put back, picked, or ticked.
    pub(crate) fn l49_touch(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.l49_reserve(t);
        self.l49_update_load_avg(cpu, t, now, true);
    }

    /// `task_dead_fair`: an exited task's load leaves its CPU.
    pub(crate) fn l49_exit(&mut self, t: TaskId) {
        if t.idx() < self.l49_attached.len() {
            self.l49_remove(t);
        }
    }

    /// 4.9's `weighted_cpuload(cpu)`: the root runqueue's `runnable_load_avg` as last updated.
    pub(crate) fn l49_cpu_load(&self, cpu: CpuId) -> u64 {
        self.l49_cpu[cpu.idx()].runnable_load_avg
    }

    /// The root runqueue's whole load average (`cfs_rq_load_avg`, blocked load included): the
    /// root's `h_load` in 4.9's `update_cfs_rq_h_load`.
    pub(crate) fn l49_cpu_whole_load(&self, cpu: CpuId) -> u64 {
        self.l49_cpu[cpu.idx()].load_avg
    }

    /// `p->se.avg.load_avg`.
    pub(crate) fn l49_task_load(&self, t: TaskId) -> u64 {
        self.l49_task.get(t.idx()).map_or(0, |a| a.load_avg)
    }

    /// 4.9's `task_h_load(p)` for a task queued on `cpu`: its load average times the root's
    /// `h_load` over the root's load average plus one.
    pub(crate) fn l49_task_h_load(&self, t: TaskId, cpu: CpuId) -> u64 {
        let whole = self.l49_cpu_whole_load(cpu);
        self.l49_task_load(t) * whole / (whole + 1)
    }
}
